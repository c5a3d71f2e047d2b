/*
 * jobcg example: a resident launcher, as a scheduler's node agent would be, that runs steps
 * through libjobcg instead of exec()ing `jobcg run` for each one. The configuration is loaded
 * and the host probed once; each step then does what `jobcg run --job JOB` does: the step
 * created, its share of the job's GPUs granted (and their CUDA/ROCm variables set for the
 * tasks), the tasks run and waited for, the accounting record written, the grant revoked and
 * the step removed. docs/library.md walks through it.
 *
 *   step-agent [-n COUNT] [-t NTASKS] JOB -- COMMAND [ARG...]
 *
 * Runs COMMAND as COUNT steps of the existing job JOB (made with `jobcg alloc JOB`), one after
 * the other, NTASKS tasks each, and prints "step JOB.STEP: exit code N" for each. Exits with
 * the last step's exit code (127 or 126 when COMMAND cannot be run, as a shell does), or 1
 * when the library reports an error, which also ends the loop.
 *
 * Built with the project (build/examples/step-agent); against an installed jobcg:
 *   cc step-agent.c $(pkg-config --cflags --libs libjobcg) -o step-agent
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* for the POSIX and Linux parts of the headers */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jobcg/acct.h>
#include <jobcg/config.h>
#include <jobcg/context.h>
#include <jobcg/error.h>
#include <jobcg/job.h>
#include <jobcg/jobgres.h>
#include <jobcg/oom.h>

static int fail(const char *what)
{
	char buf[512];

	fprintf(stderr, "step-agent: %s: %s\n", what, jobcg_error_format(buf, sizeof(buf)));
	return 1;
}

static uint64_t now_usec(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* One step of @job running @argv as @ntasks tasks. Returns the step's exit code, or -1 after
 * printing the library's error. Whatever was made is undone on every path. */
static int one_step(struct jobcg_ctx *ctx, uint32_t job, unsigned ntasks, char *const argv[])
{
	struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};
	struct jobcg_acct job_before = {}, job_after = {}, acct = {};
	struct jobcg_run_result res = {};
	struct jobcg_spawn_opts so = {};
	struct jobcg_step_gres *sg = NULL;
	char step[JOBCG_STEP_ID_MAX];
	uint64_t start;
	int r, exit_code = -1;

	/* NULL step id: the lowest free number, as `jobcg run` picks it. */
	if (jobcg_step_create(ctx, job, NULL, 0, step) < 0) {
		fail("creating the step");
		return -1;
	}
	/* NULL gres: the step gets all of its job's GPUs (as `jobcg run` without --gres); the
	 * per-task variables (CUDA_VISIBLE_DEVICES, ...) come back in sg->task_env. */
	if (jobcg_step_gres_setup(ctx, job, step, NULL, NULL, ntasks, &sg) < 0) {
		fail("the step's devices");
		goto remove;
	}
	/* The job's OOM counter before the step, to tell its limit from a node-wide OOM after. */
	(void)jobcg_acct_read_file(ctx, &t, "memory.events", &job_before);
	start = now_usec();
	so.task_env = (char *const *const *)sg->task_env;
	r = jobcg_step_run(ctx, job, step, ntasks, argv, &so, &res);
	if (r < 0) {
		fail("running the step");
		/* as a shell reports a command it could not run */
		exit_code = r == -ENOENT ? 127 : r == -EACCES || r == -ENOEXEC ? 126 : -1;
		goto release;
	}
	exit_code = res.exit_code;

	/* Every task has exited and jobcg_step_run() killed any straggler: read the step's
	 * accounting before it goes, and record it in the node's accounting log. */
	memcpy(t.step, step, sizeof(t.step));
	if (jobcg_acct_read(ctx, &t, &acct) == 0) {
		struct jobcg_target tj = {.job = job, .task = JOBCG_TASK_ALL};

		if (jobcg_acct_has(&acct, JOBCG_ACCT_OOM_KILL) &&
		    jobcg_acct_read(ctx, &tj, &job_after) == 0 &&
		    jobcg_acct_has(&job_after, JOBCG_ACCT_OOM)) {
			uint64_t before = jobcg_acct_has(&job_before, JOBCG_ACCT_OOM)
					      ? job_before.value[JOBCG_ACCT_OOM]
					      : 0;
			enum jobcg_oom_cause c =
			    jobcg_oom_classify(acct.value[JOBCG_ACCT_OOM_KILL],
					       job_after.value[JOBCG_ACCT_OOM] - before);

			if (c != JOBCG_OOM_NONE)
				fprintf(stderr, "step-agent: step %u.%s: out of memory (%s)\n", job,
					step, jobcg_oom_cause_name(c));
		}
		if (jobcg_acct_log_step(ctx, job, step, start, &res, &acct, res.lost_signal != 0) <
		    0)
			fail("the accounting record");
	} else
		fail("reading the step's accounting");
	free(res.task_status);

release:
	if (jobcg_step_gres_release(ctx, job, step) < 0)
		fail("revoking the step's devices");
remove:
	/* -ENOENT: the job was released meanwhile, which removed the step with it. */
	r = jobcg_step_remove(ctx, job, step, 0);
	if (r < 0 && r != -ENOENT) {
		fail("removing the step");
		exit_code = -1;
	}
	jobcg_step_gres_free(sg);
	if (exit_code >= 0)
		printf("step %u.%s: exit code %d\n", job, step, exit_code);
	return exit_code;
}

int main(int argc, char **argv)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	unsigned long count = 1, ntasks = 1;
	uint32_t job;
	int opt, r = 0;

	while ((opt = getopt(argc, argv, "+n:t:")) != -1) {
		char *end;

		switch (opt) {
		case 'n':
		case 't': {
			unsigned long *v = opt == 'n' ? &count : &ntasks;

			errno = 0;
			*v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || *v == 0 || *v > 1000000) {
				fprintf(stderr,
					"step-agent: -%c %s: not a count from 1 to 1000000\n", opt,
					optarg);
				return 2;
			}
			break;
		}
		default:
			return 2;
		}
	}
	if (argc - optind < 3 || strcmp(argv[optind + 1], "--") != 0) {
		fprintf(stderr,
			"usage: step-agent [-n COUNT] [-t NTASKS] JOB -- COMMAND [ARG...]\n");
		return 2;
	}
	if (jobcg_job_id_parse(argv[optind], &job) < 0) {
		fprintf(stderr, "step-agent: '%s' is not a job id\n", argv[optind]);
		return 2;
	}
	/* Once for the agent's life: cgroup.conf and gres.conf (from $JOBCG_CONF_DIR or
	 * /etc/jobcg), the cgroup v2 mount, the tree root. A real agent reloads them when told
	 * to (SIGHUP), not per step. */
	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0)
		return fail("configuration");
	if (jobcg_ctx_open(conf, JOBCG_CTX_NO_CREATE_ROOT, &ctx) < 0) {
		jobcg_config_free(conf);
		return fail("opening the context");
	}
	for (unsigned long i = 0; i < count; i++) {
		r = one_step(ctx, job, (unsigned)ntasks, argv + optind + 2);
		if (r < 0) {
			r = 1;
			break;
		}
	}
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return r;
}
