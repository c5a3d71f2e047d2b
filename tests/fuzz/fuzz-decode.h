/* The tail both instruction-parsing fuzz targets share: decode what parsed and format every
 * rule, bounded so that one input stays fast. */
#pragma once

#include <stdlib.h>

#include "bpftext.h"
#include "jobcg/decode.h"

/* Decode @insns (@n of them; small programs only, with a small step limit), format each rule,
 * and free @insns. */
static inline void fuzz_decode(struct bpf_insn *insns, size_t n)
{
	struct jobcg_decode_env env = {
	    .size = sizeof(env), .max_steps = 2000, .max_total_steps = 2000000};
	struct jobcg_decoded *d = NULL;

	if (n <= 64 && jobcg_decode_program(insns, n, &env, &d) == 0) {
		const struct jobcg_decoded_line *lines;
		size_t nl = jobcg_decoded_lines(d, &lines);

		for (size_t i = 0; i < nl; i++)
			if (!lines[i].note) {
				char buf[64];
				jobcg_decoded_rule_format(&lines[i].rule, buf, sizeof(buf));
			}
		jobcg_decoded_free(d);
	}
	free(insns);
}
