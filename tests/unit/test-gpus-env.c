/* Unit test: a MIG instance's UUID (for CUDA_VISIBLE_DEVICES) from the driver's proc files, and
 * the environment of a task holding one: the instance's UUID, never its parent GPU's. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpudetect_internal.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "tap.h"
#include "util.h"

#define UUID1 "GPU-0b6e3a1c-1f6d-4e61-8d3c-6e9c1a0f0002"

static char dir[] = "/tmp/jobcg-test-gpus-env-XXXXXX";

static void put(const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	*strrchr(p, '/') = '\0';
	if (mkdir_p_safe(p, 0755, "test directory") < 0)
		abort();
	p[strlen(p)] = '/';
	f = fopen(p, "we");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

static struct jobcg_gres_file whole[] = {{(char *)"/dev/nvidia0", 'c', 195, 0}};
static struct jobcg_gres_file mig[] = {{(char *)"/dev/nvidia1", 'c', 195, 1},
				       {(char *)"/dev/nvidia-caps/nvidia-cap12", 'c', 235, 12},
				       {(char *)"/dev/nvidia-caps/nvidia-cap13", 'c', 235, 13}};
static struct jobcg_gres_record recs[2] = {
    {.name = (char *)"gpu", .files = whole, .nfiles = 1, .count = 1, .index = 0},
    {.name = (char *)"gpu", .files = mig, .nfiles = 3, .count = 1, .index = 1},
};
static struct jobcg_gres_conf conf = {.records = recs, .nrecords = 2};

static const char *env_get(char **env, const char *name)
{
	size_t l = strlen(name);

	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], name, l) == 0 && env[i][l] == '=')
			return env[i] + l + 1;
	return "(unset)";
}

static void check_env(struct jobcg_gres_node *n, const char *want, const char *what)
{
	struct jobcg_gres_set s = {};
	struct jobcg_gres_env_in in = {.job = &s, .step = &s, .constrained = true};
	char **env = NULL;

	jobcg_gres_set_add(&s, 1);
	is_int(jobcg_gres_env(n, &in, &env), 0, "environment of a task holding the MIG instance");
	is_str(env_get(env, "CUDA_VISIBLE_DEVICES"), want, what);
	is_str(env_get(env, "JOBCG_STEP_GPUS"), "1", "JOBCG_STEP_GPUS keeps the node-wide index");
	strv_free(env);
}

int main(void)
{
	struct jobcg_gres_node *n = NULL;
	char gpus[512];

	if (!mkdtemp(dir))
		return 1;
	put("driver/nvidia/gpus/0000:3b:00.0/information",
	    "Model: \t\t NVIDIA A100\nGPU UUID: \t GPU-0000\nBus Location: \t 0000:3b:00.0\n"
	    "Device Minor: \t 0\n");
	put("driver/nvidia/gpus/0000:5e:00.0/information",
	    "Model: \t\t NVIDIA A100\nGPU UUID: \t " UUID1 "\nBus Location: \t 0000:5e:00.0\n"
	    "Device Minor: \t 1\n");
	put("driver/nvidia-caps/mig-minors", "config 1\nmonitor 2\ngpu1/gi1/access 12\n"
					     "gpu1/gi1/ci0/access 13\ngpu1/gi1/ci1/access 14\n");
	snprintf(gpus, sizeof(gpus), "%s/driver/nvidia/gpus", dir);

	ok(gres_record_is_mig(&recs[1]) && !gres_record_is_mig(&recs[0]),
	   "a record naming an nvidia-cap file is a MIG instance");
	if (gres_node_new(&conf, &n) < 0)
		return 1;
	ok(jobcg_gres_node_load_uuids(n, gpus) >= 1, "UUIDs learnt");
	is_str(jobcg_gres_node_device(n, 0)->uuid, "GPU-0000", "the whole GPU: its UUID");
	is_str(jobcg_gres_node_device(n, 1)->uuid, "MIG-" UUID1 "/1/0",
	       "the MIG instance: MIG-<parent UUID>/<GI>/<CI>, not the parent's UUID");
	check_env(n, "MIG-" UUID1 "/1/0", "CUDA_VISIBLE_DEVICES names the instance by UUID");
	jobcg_gres_node_free(n);

	/* mig-minors does not know the cap: no UUID rather than the parent GPU's. */
	put("driver/nvidia-caps/mig-minors", "config 1\nmonitor 2\n");
	if (gres_node_new(&conf, &n) < 0)
		return 1;
	jobcg_gres_node_load_uuids(n, gpus);
	ok(jobcg_gres_node_device(n, 1)->uuid == NULL,
	   "unknown instance: no UUID, never its parent GPU's");
	check_env(n, "0", "... and CUDA_VISIBLE_DEVICES falls back to the index (with a warning)");
	jobcg_gres_node_free(n);

	/* A proc dir under another name (JOBCG_NVIDIA_PROC_DIR): mig-minors cannot be found
	 * beside it, and the instance is not named by its parent GPU's UUID either. */
	put("driver/nvidia-caps/mig-minors", "config 1\nmonitor 2\ngpu1/gi1/access 12\n"
					     "gpu1/gi1/ci0/access 13\ngpu1/gi1/ci1/access 14\n");
	char other[600];
	snprintf(other, sizeof(other), "%s/gpus-elsewhere", dir);
	if (symlink(gpus, other) < 0 || gres_node_new(&conf, &n) < 0)
		return 1;
	ok(jobcg_gres_node_load_uuids(n, other) >= 1, "UUIDs learnt from another directory");
	is_str(jobcg_gres_node_device(n, 0)->uuid, "GPU-0000", "the whole GPU: its UUID");
	ok(jobcg_gres_node_device(n, 1)->uuid == NULL,
	   "the MIG instance: no UUID, never its parent GPU's");
	jobcg_gres_node_free(n);

	/* Minor 255 is nvidiactl's, and a UUID with a blank cannot go into CUDA_VISIBLE_DEVICES:
	 * the same test as detection's. */
	put("driver/nvidia/gpus/0000:3b:00.0/information",
	    "Model: \t\t NVIDIA A100\nGPU UUID: \t GPU-0000\nDevice Minor: \t 255\n");
	put("driver/nvidia/gpus/0000:5e:00.0/information",
	    "Model: \t\t NVIDIA A100\nGPU UUID: \t GPU-aa bb\nDevice Minor: \t 1\n");
	whole[0].minor = 255;
	if (gres_node_new(&conf, &n) < 0)
		return 1;
	is_int(jobcg_gres_node_load_uuids(n, gpus), 0,
	       "Device Minor: 255 and 'GPU-aa bb' not read");
	ok(jobcg_gres_node_device(n, 0)->uuid == NULL && jobcg_gres_node_device(n, 1)->uuid == NULL,
	   "... no UUID for either record");
	jobcg_gres_node_free(n);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", dir);
	return tap_done();
}
