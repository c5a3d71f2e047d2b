/* libFuzzer target: the CPU topology cache (lib/src/core/cputopo.c), a file the Slurm plugin
 * reads at every step's start. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cputopo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cputopo t = {};

	if (cputopo_parse_cache((const char *)data, size, "b", "0-3", &t) == 0) {
		char *cpus = NULL;

		/* Whatever parsed must be usable: every core's CPUs can be named. */
		for (size_t i = 0; i < t.ncores; i++) {
			char core[24];

			snprintf(core, sizeof(core), "%zu", i);
			if (cputopo_cores_to_cpus(&t, core, &cpus) == 0)
				free(cpus);
			cpus = NULL;
		}
		cputopo_done(&t);
	}
	return 0;
}
