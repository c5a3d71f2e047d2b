/* libFuzzer target: the CPU list parser; a parsed list must format and parse back to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "fuzz-input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstring(data, size, 0), *text = NULL;
	uint64_t *bits = NULL, *again = NULL;
	size_t words = 0, words2 = 0;

	if (!s)
		return 0;
	if (jobcg_parse_cpulist(s, &bits, &words) == 0) {
		if (words == 0 || words > JOBCG_CPU_MAX / 64)
			abort();
		if (jobcg_format_cpulist(bits, words, &text) == 0) {
			if (jobcg_parse_cpulist(text, &again, &words2) != 0 || words2 != words ||
			    memcmp(bits, again, words * sizeof(uint64_t)) != 0)
				abort();
		}
	}
	free(again);
	free(text);
	free(bits);
	free(s);
	return 0;
}
