/* jobcg fuzz target: bpftool xlated text parsing, then decoding what parsed (bounded). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpftext.h"
#include "jobcg/decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpf_insn *insns = NULL;
	struct jobcg_decoded *d = NULL;
	size_t n = 0;

	if (size > 65536)
		return 0;
	if (bpftext_parse((const char *)data, size, "fuzz", &insns, &n) < 0)
		return 0;
	/* Small programs only, with a small step limit, so one input stays fast. */
	struct jobcg_decode_env env = {.size = sizeof(env), .max_steps = 2000};
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
	return 0;
}
