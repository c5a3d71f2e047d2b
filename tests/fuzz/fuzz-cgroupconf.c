/* libFuzzer target: cgroup.conf text through the whole loader (grammar, key table, values). */
#include <stddef.h>
#include <stdint.h>

#include "confload.h"
#include "jobcg/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcg_config *c = NULL;

	if (size > 1 << 20)
		return 0;
	if (config_load_buffers((const char *)data, size, NULL, 0, "node1", 0, &c) == 0)
		jobcg_config_free(c);
	return 0;
}
