/* libFuzzer target: what the Slurm plugin parses from a step's environment and plugstack.conf
 * (spank/slurm_map.c). SLURM_GPU_BIND and the GPU lists reach a root slurmstepd from the user's
 * srun or sbatch; the arguments come from plugstack.conf.
 * Input: line 1 the binding (as SLURM_GPU_BIND and as SLURM_TRES_BIND), line 2 the step's GPU list
 * (SLURM_STEP_GPUS), line 3 plugin arguments separated by spaces, line 4 a line of Slurm's
 * plugstack.conf (jobcg check reads them); the whole input is also the task's /proc/self/cgroup,
 * which the plugin reads before the task's exec. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adopt_internal.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "slurm_map.h"
#include "fuzz-input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next line of *p (cut at '\n'), "" past the end. */
static char *next_line(char **p)
{
	char *s = *p, *nl;

	if (!s)
		return (char *)"";
	nl = strchr(s, '\n');
	if (nl) {
		*nl = 0;
		*p = nl + 1;
	} else {
		*p = NULL;
	}
	return s;
}

/* The plugin hands SLURM_STEP_GPUS over as the step's GPUs: whatever maps must name node GPUs
 * only, and read back the same. *ret (the step's set) and true when it mapped. */
static bool check_map(const struct jobcg_gres_node *n, const char *gpus, struct jobcg_gres_set *ret)
{
	struct jobcg_gres_set all;
	char *mapped = NULL;

	if (jspank_gpus_map(n, "jobcg-gres.conf", NULL, NULL, "SLURM_STEP_GPUS", gpus, &mapped) < 0)
		return false;
	jobcg_gres_node_all(n, NULL, &all);
	if (jobcg_gres_set_parse(n, mapped, ret) < 0 || !jobcg_gres_set_subset(ret, &all))
		abort();
	free(mapped);
	return true;
}

/* A binding the plugin accepts is handed to the library's parser: it must take it, and give
 * each task only GPUs of the step (@step, NULL when the step's GPUs did not map). */
static void check_bind(const struct jobcg_gres_node *n, const char *bind, const char *gpus,
		       const struct jobcg_gres_set *step)
{
	struct jobcg_gres_set t;
	struct jobcg_gpu_bind b = {};
	char *out = NULL;

	if (jspank_gpu_bind(bind, gpus, &out) < 0 || !out)
		return;
	if (jobcg_gpu_bind_parse(out, &b) < 0)
		abort();
	for (unsigned i = 0; step && i < 4; i++)
		if (jobcg_gpu_bind_task(n, &b, step, i, 4, &t) == 0 &&
		    !jobcg_gres_set_subset(&t, step))
			abort();
	jobcg_gpu_bind_done(&b);
	free(out);
}

/* Line 1 as SLURM_TRES_BIND: the gpu part cut out is what follows its first "gpu:", up to a ';'
 * (none in it), and goes on to the binding's checks. */
static void check_tres_bind(const struct jobcg_gres_node *n, const char *line, const char *gpus,
			    const struct jobcg_gres_set *step)
{
	char *copy = strdup(line), *g;
	const char *at = strstr(line, "gpu:");

	if (!copy)
		return;
	g = jspank_tres_gpu_bind(copy);
	if (!at != !g)
		abort();
	if (g) {
		size_t len = strlen(g);

		if (g != copy + (at - line) + 4 || strchr(g, ';') || strncmp(g, at + 4, len) != 0 ||
		    (at[4 + len] && at[4 + len] != ';'))
			abort();
		check_bind(n, g, gpus, step);
	}
	free(copy);
}

static void check_args(char *line)
{
	char *argv[16], *save = NULL;
	struct jspank_args a = {};
	int argc = 0;

	for (char *tok = strtok_r(line, " ", &save); tok && argc < 16;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	if (jspank_args_parse(argc, argv, &a) == 0) {
		char *c = a.conf ? jspank_expand(a.conf, "n1") : NULL;

		free(c);
		/* only absolute paths: slurmstepd's PATH and directory are no guide */
		if ((a.jobcg && a.jobcg[0] != '/') || (a.conf && a.conf[0] != '/') ||
		    (a.slurm_gres && a.slurm_gres[0] != '/' && strcmp(a.slurm_gres, "none") != 0))
			abort();
		jspank_args_done(&a);
	}
}

/* What a plugstack.conf line gives points into the line, and an include names a glob. */
static void check_plugstack(char *line)
{
	size_t len = strlen(line);
	const char *a = NULL;
	enum slurm_plugstack_line k = slurm_plugstack_line(line, &a);

	if (!a || (*a && (a < line || a >= line + len)) || (k == SLURM_PLUGSTACK_INCLUDE && !*a) ||
	    (k != SLURM_PLUGSTACK_OTHER && k != SLURM_PLUGSTACK_INCLUDE &&
	     k != SLURM_PLUGSTACK_JOBCG && k != SLURM_PLUGSTACK_JOBCG_OPTIONAL))
		abort();
}

/* The plugin finds a task's cgroup from its /proc/self/cgroup (jobcg_pid_job()): a path it
 * gives is one absolute cgroup path, a single line. */
static void check_proc_cgroup(const char *text)
{
	char *path = NULL;
	int r = adopt_parse_proc_cgroup(text, &path);

	if ((r != 0 && r != -EINVAL && r != -ENOMEM) ||
	    (r == 0 && (path[0] != '/' || strchr(path, '\n'))))
		abort();
	free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct jobcg_gres_file f[4] = {{(char *)"/dev/nvidia0", 'c', 195, 0},
					      {(char *)"/dev/nvidia1", 'c', 195, 1},
					      {(char *)"/dev/nvidia2", 'c', 195, 2},
					      {(char *)"/dev/nvidia3", 'c', 195, 3}};
	static struct jobcg_gres_record r[4] = {
	    {.name = (char *)"gpu", .files = &f[0], .nfiles = 1, .index = 0},
	    {.name = (char *)"gpu", .files = &f[1], .nfiles = 1, .index = 1},
	    {.name = (char *)"gpu", .files = &f[2], .nfiles = 1, .index = 2},
	    {.name = (char *)"gpu", .files = &f[3], .nfiles = 1, .index = 3},
	};
	static const struct jobcg_gres_conf conf = {.records = r, .nrecords = 4};
	struct jobcg_gres_node *n = NULL;
	struct jobcg_gres_set step = {};
	char *buf, *p, *bind, *gpus, *args, *plugstack;
	bool mapped;

	buf = fuzz_cstring(data, size, 4096);
	if (!buf)
		return 0;
	check_proc_cgroup(buf);
	p = buf;
	bind = next_line(&p);
	gpus = next_line(&p);
	args = next_line(&p);
	plugstack = next_line(&p);
	if (gres_node_new(&conf, &n) < 0)
		abort();
	mapped = check_map(n, gpus, &step);
	check_bind(n, bind, gpus, mapped ? &step : NULL);
	check_tres_bind(n, bind, gpus, mapped ? &step : NULL);
	check_args(args);
	check_plugstack(plugstack);
	jobcg_gres_node_free(n);
	free(buf);
	return 0;
}
