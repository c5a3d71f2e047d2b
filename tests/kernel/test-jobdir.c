/* Kernel test: a context remembers where a job's directory is (top level or inside a
 * reservation) only while that holds: its own removal forgets it at once, a job another
 * process removed and made again elsewhere is found there within the memory's second, and a
 * job made again is made where it asked to be, whatever was remembered. */
#include <time.h>

#include "jobcg/context.h"
#include "jobcg/job.h"
#include "jobcg/resv.h"
#include "kcli.h"

static char *where(struct jobcg_ctx *ctx, uint32_t job)
{
	struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};
	char *p = NULL;

	return jobcg_target_path(ctx, &t, &p) == 0 ? p : NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);

	return s && a >= b && strcmp(s + a - b, suffix) == 0;
}

int main(void)
{
	kcli_setup("jobdir", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *a = NULL, *b = NULL;
	struct jobcg_resv_spec spec = {.name = "r1", .devices = "gpu:0"};
	struct jobcg_limits in_resv = {.reservation = "r1"};
	struct timespec pause = {.tv_sec = 1, .tv_nsec = 200 * 1000 * 1000};
	char pins[PATH_MAX], *p;
	const char *confdir;

	/* A reservation holds something: one stand-in GPU. */
	snprintf(pins, sizeof(pins), "%s", ktest_pin_dir("jobdir"));
	confdir = ktest_gpu_conf(1, NULL, pins, NULL);
	if (jobcg_config_load(confdir, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &a) < 0 ||
	    jobcg_ctx_open(conf, 0, &b) < 0) {
		printf("Bail out! cannot open two contexts: %s\n", jobcg_last_error()->message);
		return 1;
	}
	is_int(jobcg_resv_create(a, &spec), 0, "reservation r1 (GPU 0)");
	is_int(jobcg_job_create(a, 21, NULL, 0, NULL), 0, "job 21 at the top");
	p = where(a, 21);
	ok(ends_with(p, "/jobcg/job_21"), "context A finds job 21 at the top: %s", p);
	free(p);

	/* Another process (context B) removes it and makes it again inside r1. */
	is_int(jobcg_job_remove(b, 21, JOBCG_JOB_REMOVE_NO_RECORD), 0, "B removes job 21");
	is_int(jobcg_job_create(b, 21, &in_resv, 0, NULL), 0, "B makes job 21 again inside r1");
	p = where(b, 21);
	ok(ends_with(p, "/jobcg/resv_r1/job_21"), "B finds it inside r1: %s", p);
	free(p);
	nanosleep(&pause, NULL);
	p = where(a, 21);
	ok(ends_with(p, "/jobcg/resv_r1/job_21"), "a second later A finds it inside r1 too: %s", p);
	free(p);

	/* Defect: A, remembering job 21 inside r1, made job 21 again there after B had removed
	 * it, though A's job asked for no reservation: it entered r1 past admission. */
	is_int(jobcg_job_remove(b, 21, JOBCG_JOB_REMOVE_NO_RECORD), 0, "B removes job 21 again");
	is_int(jobcg_job_create(a, 21, NULL, 0, NULL), 0, "A at once makes job 21, no reservation");
	ok(kcli_exists("%s/job_21", jobcg_ctx_root(a)) &&
	       !kcli_exists("%s/resv_r1/job_21", jobcg_ctx_root(a)),
	   "it is at the top, not inside r1");
	is_int(jobcg_job_remove(b, 21, JOBCG_JOB_REMOVE_NO_RECORD), 0, "B removes it");
	is_int(jobcg_job_create(b, 21, &in_resv, 0, NULL), 0, "B makes job 21 inside r1 again");
	nanosleep(&pause, NULL);
	p = where(a, 21);
	ok(ends_with(p, "/jobcg/resv_r1/job_21"), "A finds it inside r1: %s", p);
	free(p);

	/* A's own removal forgets at once: the job made again at the top is found there. */
	is_int(jobcg_job_remove(a, 21, JOBCG_JOB_REMOVE_NO_RECORD), 0, "A removes job 21");
	is_int(jobcg_job_create(a, 21, NULL, 0, NULL), 0, "A makes job 21 at the top");
	p = where(a, 21);
	ok(ends_with(p, "/jobcg/job_21"), "A finds it at the top at once: %s", p);
	free(p);
	is_int(jobcg_job_remove(a, 21, JOBCG_JOB_REMOVE_NO_RECORD), 0, "A removes job 21 again");
	p = where(a, 21);
	ok(ends_with(p, "/jobcg/job_21") && !kcli_exists("%s", p),
	   "a job that is gone is not remembered (the top-level path, which does not exist)");
	free(p);

	is_int(jobcg_resv_delete(a, "r1"), 0, "reservation r1 deleted");
	jobcg_ctx_free(b);
	jobcg_ctx_free(a);
	jobcg_config_free(conf);
	return tap_done();
}
