/* Unit tests for GRES state built from real gres.conf files (parsed by the config loader). */
#include <sys/stat.h>

#include "config_internal.h"
#include "jobcg/gres.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static char dir[] = "/tmp/jobcg-test-gresconf-XXXXXX";

static struct jobcg_config *load(const char *text)
{
	char path[256];
	struct jobcg_config *c = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/gres.conf", dir);
	f = fopen(path, "we");
	fputs(text, f);
	fclose(f);
	if (jobcg_config_load_files(NULL, path, "node1", JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV,
				    &c) < 0) {
		tap_diag("config: %s", jobcg_last_error()->message);
		return NULL;
	}
	unlink(path);
	return c;
}

static char *fmt(const struct jobcg_gres_node *n, const struct jobcg_gres_set *s)
{
	static char buf[256];
	char *v = NULL;

	jobcg_gres_set_format(n, s, &v);
	snprintf(buf, sizeof(buf), "%s", v ? v : "(error)");
	free(v);
	return buf;
}

static int pick(const struct jobcg_gres_node *n, const char *req, uint64_t cpus,
		struct jobcg_gres_set *ret)
{
	struct jobcg_gres_request *r = NULL;
	struct jobcg_gres_set all;
	int k = jobcg_gres_request_parse(req, &r);

	if (k < 0)
		return k;
	jobcg_gres_node_all(n, NULL, &all);
	k = jobcg_gres_select(n, r, &all, cpus ? &cpus : NULL, 1, ret);
	jobcg_gres_request_free(r);
	return k;
}

static const char *env_get(char **env, const char *name)
{
	size_t l = strlen(name);

	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], name, l) == 0 && env[i][l] == '=')
			return env[i] + l + 1;
	return NULL;
}

int main(void)
{
	struct jobcg_config *c;
	struct jobcg_gres_node *n = NULL;
	struct jobcg_gres_set s = {};

	/* No CPU topology to read: Cores= indices are taken as CPU ids, the same on every host
	 * (the SMT conversion is test-cputopo's). */
	setenv("JOBCG_SYSROOT", "/nonexistent/jobcg-test-no-sysfs", 1);

	if (!mkdtemp(dir))
		return 1;

	c = load("# two sockets\n"
		 "NodeName=node[1-4] Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-7\n"
		 "NodeName=node[1-4] Name=gpu Type=a100 File=/dev/nvidia[2-3] Cores=8-15\n"
		 "NodeName=node9 Name=gpu File=/dev/nvidia[4-7]\n"
		 "Name=bandwidth Count=20G\n"
		 "Name=nic File=/dev/infiniband/uverbs0\n");
	ok(c != NULL, "gres.conf with ranges, NodeName and Count-only loads");
	if (!c)
		return tap_done();
	is_int(jobcg_gres_node_new(c, &n), 0, "node state from the records");
	is_int(jobcg_gres_node_count(n), 5,
	       "4 GPUs of this host + 1 nic (node9 and Count-only out)");
	is_int(pick(n, "gpu:2", 1ULL << 9, &s), 0, "two GPUs for CPU 9");
	is_str(fmt(n, &s), "gpu:2,3", "the ones whose Cores hold CPU 9");
	is_int(pick(n, "gpu:a100:1,nic:1", 0, &s), 0, "typed GPU and a nic");
	is_str(fmt(n, &s), "gpu:0;nic:0", "lowest index of each");
	is_int(pick(n, "gpu:5", 0, &s), -ENOSPC, "only 4 GPUs on this host");
	is_int(pick(n, "bandwidth:1", 0, &s), -ENOENT, "Count-only gres is not given by device");
	jobcg_gres_node_free(n);
	jobcg_config_free(c);

	/* Flags: env_nvidia only, and Links preference. */
	c = load("Name=gpu File=/dev/nvidia[0-2] Flags=env_nvidia\n");
	ok(c != NULL, "Flags=env_nvidia loads");
	if (c && jobcg_gres_node_new(c, &n) == 0) {
		struct jobcg_gres_set job = {};
		struct jobcg_gres_env_in in = {.job = &job, .step = &job, .constrained = true};
		char **env = NULL;

		jobcg_gres_set_add(&job, 2);
		is_int(jobcg_gres_env(n, &in, &env), 0, "environment");
		is_str(env_get(env, "CUDA_VISIBLE_DEVICES"), "0", "CUDA renumbered from 0");
		ok(!env_get(env, "ROCR_VISIBLE_DEVICES"), "env_nvidia: no ROCR_VISIBLE_DEVICES");
		is_str(env_get(env, "JOBCG_JOB_GPUS"), "2", "node-wide index in JOBCG_JOB_GPUS");
		strv_free(env);
		jobcg_gres_node_free(n);
	}
	jobcg_config_free(c);

	c = load("Name=gpu File=/dev/nvidia0 Links=-1,0,2\n"
		 "Name=gpu File=/dev/nvidia1 Links=0,-1,0\n"
		 "Name=gpu File=/dev/nvidia2 Links=2,0,-1\n");
	ok(c != NULL, "Links load");
	if (c && jobcg_gres_node_new(c, &n) == 0) {
		is_int(pick(n, "gpu:2", 0, &s), 0, "two linked GPUs");
		is_str(fmt(n, &s), "gpu:0,2", "prefers the pair joined by Links");
		jobcg_gres_node_free(n);
	}
	jobcg_config_free(c);

	c = load(
	    "Name=gpu Type=a100_1g.5gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n"
	    "Name=gpu Type=a100_1g.5gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap22\n");
	ok(c != NULL, "MultipleFiles (MIG) loads");
	if (c && jobcg_gres_node_new(c, &n) == 0) {
		struct jobcg_devrule *rules = NULL;
		size_t nr = 0;

		is_int(jobcg_gres_node_count(n), 2, "two MIG devices");
		is_int(jobcg_gres_node_device(n, 1)->rec->nfiles, 2, "each with two files");
		is_int(jobcg_gres_devrules(n, NULL, &rules, &nr), -ENODEV,
		       "files not stat()ed: no device rules, a clear error");
		tap_diag("  %s", jobcg_last_error()->message);
		free(rules);
		jobcg_gres_node_free(n);
	}
	jobcg_config_free(c);

	/* An error in gres.conf: refused, unless the caller only cleans up (then no record and
	 * the error kept, naming the line). */
	{
		char path[256];
		FILE *f;

		snprintf(path, sizeof(path), "%s/gres.conf", dir);
		f = fopen(path, "we");
		fputs("Name=gpu File=/dev/nvidia0\nName=gpu Count=many\n", f);
		fclose(f);
		c = NULL;
		ok(jobcg_config_load_files(NULL, path, "node1",
					   JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV, &c) < 0 &&
		       !c,
		   "a gres.conf error fails the load");
		ok(jobcg_config_load_files(NULL, path, "node1",
					   JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV |
					       JOBCG_CONFIG_TOLERATE_GRES,
					   &c) == 0 &&
		       c,
		   "JOBCG_CONFIG_TOLERATE_GRES: it loads");
		ok(c && jobcg_config_gres_error(c) && strstr(jobcg_config_gres_error(c), ":2:"),
		   "the error is kept, naming line 2 (%s)",
		   c && jobcg_config_gres_error(c) ? jobcg_config_gres_error(c) : "none");
		ok(c && c->gres.nrecords == 0, "and no record of the file is used");
		jobcg_config_free(c);
		c = NULL;
		unlink(path);
	}
	rmdir(dir);
	return tap_done();
}
