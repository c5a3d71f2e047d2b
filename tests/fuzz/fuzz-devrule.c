/* Fuzz target: device rules. Each input line is parsed; parsed rules must print and parse back
 * to the same rule, and the linear program built from them must agree with the reference. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpfvm.h"
#include "devprog.h"
#include "jobcg/devrule.h"
#include "fuzz-input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcg_devrule rules[16];
	size_t n = 0;
	char *s, *save = NULL;

	s = fuzz_cstring(data, size, 4096);
	if (!s)
		return 0;
	for (char *line = strtok_r(s, "\n", &save); line && n < 16;
	     line = strtok_r(NULL, "\n", &save)) {
		struct jobcg_devrule r, back;
		char buf[64];

		if (jobcg_devrule_parse(line, &r) < 0)
			continue;
		jobcg_devrule_format(&r, buf, sizeof(buf));
		if (jobcg_devrule_parse(buf, &back) < 0 || memcmp(&r, &back, sizeof(r)) != 0)
			abort();
		if (devprog_rule_check(&r) == 0 && r.allow)
			rules[n++] = r;
	}
	free(s);
	if (n == 0)
		return 0;

	/* First half managed, second half granted. */
	size_t nm = (n + 1) / 2;
	struct devprog_buf b = {0};
	if (devprog_build_linear(rules, nm, rules + nm, n - nm, &b) < 0)
		abort();
	if (bpfvm_check(b.insns, b.n) < 0)
		abort();
	for (size_t i = 0; i < n; i++)
		for (unsigned acc = 1; acc <= 7; acc++)
			for (int t = 1; t <= 2; t++) {
				uint32_t maj = rules[i].major == JOBCG_DEV_ANY ? 7 : rules[i].major;
				uint32_t min = rules[i].minor == JOBCG_DEV_ANY ? 9 : rules[i].minor;
				struct bpfvm_devctx ctx = {(acc << 16) | (uint32_t)t, maj, min};
				uint64_t r0 = 0;
				if (bpfvm_run(b.insns, b.n, &ctx, NULL, 1000000, &r0) < 0)
					abort();
				if ((r0 != 0) != devprog_decide(rules, nm, rules + nm, n - nm,
								(uint32_t)t, maj, min, acc))
					abort();
			}
	devprog_buf_done(&b);
	return 0;
}
