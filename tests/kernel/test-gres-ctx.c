/* Kernel test: one library context keeps the device policy open across jobs and steps, and
 * notices when the pinned node program it holds was replaced behind its back; a context loaded
 * past an error in cgroup.conf or gres.conf ends jobs but makes nothing and syncs no policy. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "jobcg/config.h"
#include "jobcg/context.h"
#include "devices.h"
#include "jobcg/job.h"
#include "jobcg/jobgres.h"
#include "jobcg/resv.h"
#include "jobgres_internal.h"
#include "kcli.h"

static char dev[3][PATH_MAX];

/* Grants of the pinned policy at path REL below the tree (through a fresh handle). */
static int grants_at(const struct jobcg_config *conf, const char *root, const char *rel)
{
	struct jobcg_devpolicy *p = NULL;
	struct jobcg_devgrant *g = NULL;
	size_t n = 0;
	int found = 0;

	if (jobcg_devpolicy_open_pinned(conf, root, &p) < 0)
		return -1;
	if (jobcg_devpolicy_list(p, &g, &n) == 0)
		for (size_t i = 0; i < n; i++)
			found += g[i].path && strcmp(g[i].path, rel) == 0;
	jobcg_devgrants_free(g, n);
	jobcg_devpolicy_free(p);
	return found;
}

/* The GPU index a job got ("gpu:1" -> 1), -1 if none. */
static int job_gpu(const char *root, unsigned job)
{
	char p[PATH_MAX], v[64];
	ssize_t n;

	snprintf(p, sizeof(p), "%s/job_%u", root, job);
	n = getxattr(p, "trusted.jobcg.gres", v, sizeof(v) - 1);
	if (n < 5)
		return -1;
	v[n] = 0;
	return strncmp(v, "gpu:", 4) == 0 ? atoi(v + 4) : -1;
}

int main(void)
{
	const char *root = kcli_setup("gres-ctx", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_devpolicy *other = NULL;
	struct jobcg_step_gres *sg = NULL;
	struct jobcg_limits l = {.gres = "gpu:1"};
	char pins[PATH_MAX], jdir[PATH_MAX];
	const char *confdir;
	int g;

	snprintf(pins, sizeof(pins), "/sys/fs/bpf/jobcg-test-gres-ctx-%d", (int)getpid());
	confdir = ktest_gpu_conf(3, NULL, pins, dev);
	if (jobcg_config_load(confdir, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		char buf[1024];

		printf("Bail out! cannot open a context: %s\n",
		       jobcg_error_format(jobcg_last_error()->code, buf, sizeof(buf)));
		return 1;
	}

	{
		struct jobcg_limits l2 = {.gres = "gpu:2"};
		char sdir[PATH_MAX + 16];
		int mine_other = -1;

		is_int(jobcg_job_create(ctx, 1, &l2, 0, NULL), 0, "job 1 with gpu:2");
		/* gpu:0,1 (the lowest free): the third GPU is not the job's */
		snprintf(jdir, sizeof(jdir), "%s/job_1", root);
		is_int(ktest_open_in(jdir, dev[2], O_RDWR), EPERM,
		       "job 1 is denied the GPU it does not hold");

		/* A step with its own subset: granted, and its release revokes it. */
		is_int(jobcg_step_create(ctx, 1, "0", 0, NULL), 0, "step 1.0");
		is_int(jobcg_step_gres_setup(ctx, 1, "0", "gpu:1", NULL, 1, &sg), 0,
		       "step 1.0 takes gpu:1 of its job's two");
		is_int(grants_at(conf, root, "job_1/step_0"), 1,
		       "the step's own grant is in the map");
		if (sg && sg->devices && strncmp(sg->devices, "gpu:", 4) == 0)
			mine_other = 1 - atoi(sg->devices + 4);
		snprintf(sdir, sizeof(sdir), "%s/step_0", jdir);
		if (mine_other >= 0)
			is_int(ktest_open_in(sdir, dev[mine_other], O_RDWR), EPERM,
			       "step 1.0 is denied its job's other GPU");
		else
			ok(false, "step 1.0's device is known (%s)", sg ? sg->devices : "none");
		is_int(jobcg_step_gres_release(ctx, 1, "0"), 0, "step 1.0 devices released");
		is_int(grants_at(conf, root, "job_1/step_0"), 0, "the step's grant is gone");
		jobcg_step_gres_free(sg);
		sg = NULL;

		/* A step sharing all of its job's devices needs no grant of its own: the job's
		 * bounds it. */
		is_int(jobcg_step_create(ctx, 1, "1", 0, NULL), 0, "step 1.1");
		is_int(jobcg_step_gres_setup(ctx, 1, "1", NULL, NULL, 1, &sg), 0,
		       "step 1.1 shares the job's GPUs");
		is_int(grants_at(conf, root, "job_1/step_1"), 0, "no grant of its own in the map");
		snprintf(sdir, sizeof(sdir), "%s/step_1", jdir);
		is_int(ktest_open_in(sdir, dev[0], O_RDWR), 0,
		       "step 1.1 opens the job's first GPU");
		is_int(ktest_open_in(sdir, dev[1], O_RDWR), 0, "and its second");
		is_int(ktest_open_in(sdir, dev[2], O_RDWR), EPERM,
		       "and is denied the third: the job's grant");
		is_int(jobcg_step_gres_release(ctx, 1, "1"), 0,
		       "step 1.1 released (nothing to do)");
		jobcg_step_gres_free(sg);
		sg = NULL;
		is_int(jobcg_step_remove(ctx, 1, "0", 0), 0, "step 1.0 removed");
		is_int(jobcg_step_remove(ctx, 1, "1", 0), 0, "step 1.1 removed");
		is_int(jobcg_job_remove(ctx, 1, 0), 0, "job 1 released");
	}

	/* Someone tears the node program down (and the next user sets it up anew) while this
	 * context still holds the old one: its next grant must go to what is pinned now. */
	ok(jobcg_devpolicy_open_pinned(conf, root, &other) == 0 &&
	       jobcg_devpolicy_destroy(other) == 0,
	   "the pinned node program is destroyed behind the context's back");
	is_int(jobcg_job_create(ctx, 2, &l, 0, NULL), 0, "job 2 with gpu:1, same context");
	g = job_gpu(root, 2);
	snprintf(jdir, sizeof(jdir), "%s/job_2", root);
	is_int(grants_at(conf, root, "job_2"), 1, "job 2's grant is in the map pinned now");
	if (g >= 0) {
		is_int(ktest_open_in(jdir, dev[g], O_RDWR), 0, "job 2 opens its GPU");
		is_int(ktest_open_in(jdir, dev[1 - g], O_RDWR), EPERM,
		       "job 2 is denied the other one: enforced by the new program");
	} else
		ok(false, "job 2 got a GPU");
	/* cgroup.conf gets an error in ConstrainDevices= (read past it, it would be "no"): a
	 * context loaded past it (JOBCG_CONFIG_TOLERATE_CGROUP) ends job 2 and removes its grant,
	 * but makes nothing and never changes the device policy. */
	{
		struct jobcg_config *bconf = NULL;
		struct jobcg_ctx *bctx = NULL;
		struct jobcg_devpolicy *bp = NULL;
		struct jobcg_devrule *m = NULL;
		struct jobcg_resv_spec rs = {.name = "r1"};
		char path[PATH_MAX + 16];
		size_t nm = 0;
		FILE *f;

		snprintf(path, sizeof(path), "%s/cgroup.conf", confdir);
		if ((f = fopen(path, "we"))) {
			fprintf(f, "ConstrainDevices=maybe\nBpfPinDir=%s\n", pins);
			fclose(f);
		}
		ok(jobcg_config_load(confdir, NULL, JOBCG_CONFIG_TOLERATE_GRES, &bconf) < 0,
		   "cgroup.conf has an error");
		ok(jobcg_config_load(confdir, NULL, JOBCG_CONFIG_TOLERATE_CGROUP, &bconf) == 0 &&
		       jobcg_config_cgroup_error(bconf) && jobcg_ctx_open(bconf, 0, &bctx) == 0,
		   "a context loaded past it");
		if (bctx) {
			char jd[PATH_MAX + 16];

			is_int(jobcg_job_create(bctx, 4, NULL, 0, NULL), -EINVAL,
			       "it creates no job");
			ok(strstr(jobcg_last_error()->message, "cgroup.conf:1:"),
			   "naming the error (%s)", jobcg_last_error()->message);
			snprintf(jd, sizeof(jd), "%s/job_4", root);
			ok(access(jd, F_OK) < 0, "no job_4 was made");
			is_int(jobcg_step_create(bctx, 2, "5", 0, NULL), -EINVAL,
			       "nor a step in job 2");
			snprintf(jd, sizeof(jd), "%s/job_2/step_5", root);
			ok(access(jd, F_OK) < 0, "no step_5 was made");
			is_int(jobcg_resv_create(bctx, &rs), -EINVAL, "nor a reservation");
			is_int(jobcg_ctx_ensure_tree(bctx), -EINVAL, "nor the tree's set-up");
			is_int(jobcg_devpolicy_open(bconf, root, NULL, 0, &bp), -EINVAL,
			       "the node program is not synced from it");
			jobcg_devpolicy_free(bp);
			is_int(jobcg_job_remove(bctx, 2, 0), 0, "job 2 released from it");
			is_int(grants_at(conf, root, "job_2"), 0, "its grant is gone");
			is_int(jobcg_gc(bctx, 0, NULL), 0, "gc from it");
			bp = NULL;
			if (jobcg_devpolicy_open_pinned(conf, root, &bp) < 0 ||
			    jobcg_devpolicy_managed(bp, &m, &nm) < 0)
				nm = 0;
			is_int((int)nm, 3, "every GPU is still managed");
			free(m);
			jobcg_devpolicy_free(bp);
			snprintf(path, sizeof(path), "%s/handmade", root);
			if (g >= 0 && mkdir(path, 0755) == 0) {
				is_int(ktest_open_in(path, dev[g], O_RDWR), EPERM,
				       "a cgroup without a grant opens not even job 2's freed GPU");
				rmdir(path);
			} else
				ok(false, "job 2 got a GPU, a cgroup made by hand");
		} else
			(void)jobcg_job_remove(ctx, 2, 0);
		jobcg_ctx_free(bctx);
		jobcg_config_free(bconf);
		snprintf(path, sizeof(path), "%s/cgroup.conf", confdir);
		if ((f = fopen(path, "we"))) {
			fprintf(f, "ConstrainDevices=yes\nBpfPinDir=%s\n", pins);
			fclose(f);
		}
	}

	/* gres.conf gets an error: a context loaded past it (JOBCG_CONFIG_TOLERATE_GRES) ends a
	 * job and removes its grant, but creates no job and never syncs the managed set. */
	{
		struct jobcg_config *bconf = NULL;
		struct jobcg_ctx *bctx = NULL;
		struct jobcg_devpolicy *bp = NULL;
		struct jobcg_devrule *m = NULL;
		char path[PATH_MAX + 16];
		size_t nm = 0;
		FILE *f;

		is_int(jobcg_job_create(ctx, 3, &l, 0, NULL), 0, "job 3 with gpu:1");
		g = job_gpu(root, 3);
		snprintf(path, sizeof(path), "%s/gres.conf", confdir);
		if ((f = fopen(path, "ae"))) {
			fputs("Name=gpu Count=many\n", f);
			fclose(f);
		}
		ok(jobcg_config_load(confdir, NULL, 0, &bconf) < 0, "gres.conf has an error");
		ok(jobcg_config_load(confdir, NULL, JOBCG_CONFIG_TOLERATE_GRES, &bconf) == 0 &&
		       jobcg_config_gres_error(bconf) && jobcg_ctx_open(bconf, 0, &bctx) == 0,
		   "a context loaded past it");
		if (bctx) {
			is_int(jobcg_job_create(bctx, 4, &l, 0, NULL), -EINVAL,
			       "it creates no job with GPUs");
			ok(strstr(jobcg_last_error()->message, "gres.conf:"),
			   "naming the error (%s)", jobcg_last_error()->message);
			is_int(jobcg_job_create(bctx, 4, NULL, 0, NULL), -EINVAL,
			       "nor one without");
			is_int(jobcg_devpolicy_open(bconf, root, NULL, 0, &bp), -EINVAL,
			       "the node program is not synced to its (empty) managed set");
			jobcg_devpolicy_free(bp);
			is_int(jobcg_job_remove(bctx, 3, 0), 0, "job 3 released from it");
			is_int(grants_at(conf, root, "job_3"), 0, "job 3's grant is gone");
			is_int(jobcg_gc(bctx, 0, NULL), 0, "gc from it");
			bp = NULL;
			if (jobcg_devpolicy_open_pinned(conf, root, &bp) < 0 ||
			    jobcg_devpolicy_managed(bp, &m, &nm) < 0)
				nm = 0;
			is_int((int)nm, 3, "every GPU is still managed");
			free(m);
			jobcg_devpolicy_free(bp);
			snprintf(path, sizeof(path), "%s/handmade", root);
			if (g >= 0 && mkdir(path, 0755) == 0) {
				is_int(ktest_open_in(path, dev[g], O_RDWR), EPERM,
				       "a cgroup without a grant opens not even job 3's freed GPU");
				rmdir(path);
			} else
				ok(false, "job 3 got a GPU, a cgroup made by hand");
		}
		jobcg_ctx_free(bctx);
		jobcg_config_free(bconf);
	}

	if (jobcg_devpolicy_open_pinned(conf, root, &other) == 0)
		jobcg_devpolicy_destroy(other);
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	rmdir(pins);
	ok(access(pins, F_OK) < 0, "pins removed");
	return tap_done();
}
