/* Kernel test: gc removes a job jobcg_spank.so made (JOBCG_JOB_SLURM) once no step and no process
 * is left in it, as its last step or watcher would have, and `jobcg check` names such jobs;
 * jobs still in use, fresh ones and jobs that are not Slurm's stay. */
#include <sys/stat.h>
#include <sys/xattr.h>

#include "jobcg/acctlog.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

/* Bits of the records of jobs 31 and 34. */
static int records(const struct jobcg_acct_record *r, void *u)
{
	int *mask = u;

	if (r->kind == JOBCG_ACCT_JOB && (!strcmp(r->job_id, "31") || !strcmp(r->job_id, "34")))
		*mask |= 1;
	if (r->kind == JOBCG_ACCT_STEP && !strcmp(r->job_id, "34") && r->step_id &&
	    !strcmp(r->step_id, "extern") && r->state == JOBCG_ACCT_NODE_FAIL)
		*mask |= 2;
	return 0;
}

/* Made long ago: past the minute gc leaves a job of Slurm's for its first step. */
static bool backdate(const char *root, uint32_t job)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/job_%u", root, job);
	return setxattr(p, "trusted.jobcg.created", "1000000000", 10, 0) == 0;
}

int main(void)
{
	const char *root = kcli_setup("gc-slurm", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_gc_stats st = {};
	char p[PATH_MAX], *out = NULL, *err = NULL;
	char *check_args[] = {"check", NULL};
	pid_t sleeper;

	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context\n");
		return 1;
	}
	/* Slurm's job 31, left with no step (its slurmstepds and watchers killed) */
	is_int(jobcg_job_create(ctx, 31, NULL, JOBCG_JOB_SLURM, NULL), 0, "Slurm's job 31");
	snprintf(p, sizeof(p), "%s/job_31", root);
	if (getxattr(p, "trusted.jobcg.slurm", NULL, 0) < 0 && errno == EOPNOTSUPP) {
		ok(1, "# SKIP cgroupfs has no trusted xattrs here: gc judges nothing stray");
		(void)jobcg_job_remove(ctx, 31, 0);
		return tap_done();
	}
	ok(backdate(root, 31), "31 made long ago");
	/* Slurm's job 32, just made: its first step is still to come */
	is_int(jobcg_job_create(ctx, 32, NULL, JOBCG_JOB_SLURM, NULL), 0, "Slurm's job 32");
	/* Slurm's job 33 with a live step (this test is its runner) */
	is_int(jobcg_job_create(ctx, 33, NULL, JOBCG_JOB_SLURM, NULL), 0, "Slurm's job 33");
	is_int(jobcg_step_create(ctx, 33, "0", 0, NULL), 0, "step 33.0");
	ok(backdate(root, 33), "33 made long ago");
	/* Slurm's job 34 whose only step lost its slurmstepd, a process still in it */
	is_int(jobcg_job_create(ctx, 34, NULL, JOBCG_JOB_SLURM, NULL), 0, "Slurm's job 34");
	is_int(jobcg_step_create(ctx, 34, "extern", 0, NULL), 0, "step 34.extern");
	{
		char *argv[] = {"sleep", "1000", NULL};

		is_int(jobcg_task_spawn(ctx, 34, "extern", 0, argv, NULL, &sleeper), 0,
		       "a process in 34.extern");
	}
	snprintf(p, sizeof(p), "%s/job_34/step_extern", root);
	ok(setxattr(p, "trusted.jobcg.runner", "1:1", 3, 0) == 0, "34.extern's runner made stale");
	ok(backdate(root, 34), "34 made long ago");
	/* job 35, an allocation of jobcg's own with no step: it lives until released */
	is_int(jobcg_job_create(ctx, 35, NULL, 0, NULL), 0, "allocated job 35");
	ok(backdate(root, 35), "35 made long ago");

	is_int(kcli_run(check_args, &out, &err), 1, "jobcg check fails");
	ok(out && strstr(out, "WARNING: stale Slurm job(s) 31, 34:") && strstr(out, "'jobcg gc'"),
	   "its WARNING names jobs 31 and 34, and jobcg gc");
	if (out && !strstr(out, "stale Slurm"))
		ktest_diag_lines("", out);
	free(out);
	free(err);
	is_int(kcli(&out, "check", "--json", NULL), 1, "jobcg check --json fails");
	ok(out && strstr(out, "\"stale_slurm_jobs\":[\n    31,\n    34\n  ]"),
	   "JSON: stale_slurm_jobs [31, 34]");
	if (out && !strstr(out, "\"stale_slurm_jobs\":[\n    31"))
		ktest_diag_lines("", out);
	free(out);

	is_int(jobcg_gc(ctx, 0, &st), 0, "gc");
	is_int(st.jobs_removed, 2, "two jobs removed (31, 34)");
	is_int(st.steps_removed, 1, "one step removed (34.extern)");
	is_int(st.kept, 3, "three jobs kept (32, 33, 35)");
	{
		int s = 0;

		ok(waitpid(sleeper, &s, 0) == sleeper && WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL,
		   "34.extern's process was killed");
	}
	ok(!kcli_exists("%s/job_31", root), "stale job 31 removed");
	ok(kcli_exists("%s/job_32", root), "fresh job 32 kept");
	ok(kcli_exists("%s/job_33/step_0", root), "job 33 with its live step kept");
	ok(!kcli_exists("%s/job_34", root), "job 34 removed after its lost step");
	ok(kcli_exists("%s/job_35", root), "allocated job 35 kept");
	{
		char *path = NULL;
		int mask = 0;

		jobcg_acctlog_path(conf, &path);
		is_int(jobcg_acctlog_read(path, NULL, records, &mask), 0, "read the log");
		is_int(mask, 2, "34.extern recorded NODE_FAIL; no job record for 31 or 34");
		free(path);
	}
	out = err = NULL;
	(void)kcli_run(check_args, &out, &err);
	ok(out && !strstr(out, "stale Slurm"), "jobcg check: no stale Slurm job left");
	free(out);
	free(err);

	is_int(jobcg_step_remove(ctx, 33, "0", 0), 0, "end 33.0");
	is_int(jobcg_job_remove(ctx, 32, 0), 0, "remove 32");
	is_int(jobcg_job_remove(ctx, 33, 0), 0, "remove 33");
	is_int(jobcg_job_remove(ctx, 35, 0), 0, "remove 35");
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
