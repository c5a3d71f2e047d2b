/* jobcg fuzz target: raw instruction files, then decoding what parsed (bounded). */
#include <stdint.h>

#include "fuzz-decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpf_insn *insns = NULL;
	size_t n = 0;

	if (size > 65536)
		return 0;
	if (bpftext_parse_raw(data, size, "fuzz", &insns, &n) < 0)
		return 0;
	fuzz_decode(insns, n);
	return 0;
}
