/* libFuzzer target: the size parser (--mem, gres.conf Count=). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "fuzz-input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstring(data, size, 0);
	uint64_t v;

	if (!s)
		return 0;
	(void)jobcg_parse_size(s, 1, 0, &v);
	(void)jobcg_parse_size(s, 1, JOBCG_SIZE_DECIMAL, &v);
	(void)jobcg_parse_size(s, UINT64_C(1) << 20, 0, &v);
	free(s);
	return 0;
}
