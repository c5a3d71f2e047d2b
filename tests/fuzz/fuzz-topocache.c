/* libFuzzer target: the Slurm plugin's CPU topology cache (spank/slurm_map.c), a file any step
 * reads at its start. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "slurm_map.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jspank_topology t = {};

	if (jspank_topology_parse_cache((const char *)data, size, "b", "0-3", &t) == 0) {
		char *cpus = NULL;

		/* Whatever parsed must be usable: every core's CPUs can be named. */
		for (size_t i = 0; i < t.ncores; i++) {
			char core[24];

			snprintf(core, sizeof(core), "%zu", i);
			if (jspank_cores_to_cpus(&t, core, &cpus) == 0)
				free(cpus);
			cpus = NULL;
		}
		jspank_topology_done(&t);
	}
	return 0;
}
