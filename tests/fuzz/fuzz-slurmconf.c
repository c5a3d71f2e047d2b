/* libFuzzer target: what jobcg reads of Slurm's slurm.conf (lib/src/gres/slurmgres.c): the facts
 * `jobcg check` and the plugin look at (GresTypes=, PlugStackConfig=, ProctrackType=,
 * TaskPlugin=), node node1's Gres= through NodeName= lines (hostlists, DEFAULT), and that Gres=
 * as slurmd counts its GPU types. Input: the file; its first line is also taken as a Gres= value
 * on its own. No Include is followed (no file is opened). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gres_internal.h"
#include "fuzz-input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void gpu_types(const char *gres)
{
	struct gpu_type *t = NULL;
	uint64_t untyped = 0;
	size_t n = 0;

	if (slurm_gres_gpu_types(gres, &t, &n, &untyped) < 0)
		return;
	/* Types as slurmd tells them apart: distinct spellings, none empty or holding a
	 * separator; a count of untyped GPUs only without types. */
	if (n && untyped)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (!*t[i].name || strpbrk(t[i].name, ":,"))
			abort();
		for (size_t j = 0; j < i; j++)
			if (strcmp(t[i].name, t[j].name) == 0)
				abort();
	}
	slurm_gpu_types_free(t, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct slurm_conf_facts f;
	char *text, *gres = NULL, *nl;

	text = fuzz_cstring(data, size, 65536);
	if (!text)
		return 0;
	if (slurm_conf_read_buffer("slurm.conf", text, strlen(text), &f) == 0) {
		/* A key set to nothing is not set. */
		if ((f.plugstack && !*f.plugstack) || (f.proctrack && !*f.proctrack) ||
		    (f.task_plugin && !*f.task_plugin))
			abort();
		slurm_conf_facts_done(&f);
	}
	if (slurm_conf_node_gres_buffer("slurm.conf", text, strlen(text), "node1", &gres) == 0) {
		gpu_types(gres);
		free(gres);
	}
	nl = strchr(text, '\n');
	if (nl)
		*nl = '\0';
	gpu_types(text);
	free(text);
	return 0;
}
