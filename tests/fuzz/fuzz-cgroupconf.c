/* libFuzzer target: cgroup.conf text through the whole loader (grammar, key table, values),
 * strict and tolerant. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "confload.h"
#include "jobcg/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcg_config *c = NULL, *t = NULL;
	int strict, tolerant;

	if (size > 1 << 20)
		return 0;
	strict = config_load_buffers((const char *)data, size, NULL, 0, "node1", 0, &c);
	/* Past errors of keys that locate nothing (JOBCG_CONFIG_TOLERATE_CGROUP): whatever loads
	 * strictly loads so too, with no error kept. */
	tolerant = config_load_buffers((const char *)data, size, NULL, 0, "node1",
				       JOBCG_CONFIG_TOLERATE_CGROUP, &t);
	if (strict == 0 && (tolerant != 0 || jobcg_config_cgroup_error(t)))
		abort();
	if (strict == 0)
		jobcg_config_free(c);
	if (tolerant == 0)
		jobcg_config_free(t);
	return 0;
}
