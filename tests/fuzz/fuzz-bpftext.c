/* jobcg fuzz target: bpftool xlated text parsing (and its JSON form, bpftool -j), then decoding
 * what parsed (bounded). */
#include <stdint.h>

#include "fuzz-decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpf_insn *insns = NULL;
	size_t n = 0;

	if (size > 65536)
		return 0;
	/* JSON through the public entry (raw input would read /proc/kallsyms there). */
	if (size > 0 && data[0] == '[') {
		if (jobcg_decode_parse(data, size, "fuzz", &insns, &n) < 0)
			return 0;
	} else if (bpftext_parse((const char *)data, size, "fuzz", &insns, &n) < 0)
		return 0;
	fuzz_decode(insns, n);
	return 0;
}
