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
#include <unistd.h>

#include <jobcg/config.h>
#include <jobcg/context.h>
#include <jobcg/error.h>
#include <jobcg/steplife.h>

/* @r: what the failing call returned; the library's error record explains it when it can. */
static int fail(int r, const char *what)
{
	char buf[512];

	fprintf(stderr, "step-agent: %s: %s\n", what, jobcg_error_format(r, buf, sizeof(buf)));
	return 1;
}

/* One step of @job running @argv as @ntasks tasks. Returns the step's exit code, or -1 after
 * printing the library's error. Whatever was made is undone on every path. */
static int one_step(struct jobcg_ctx *ctx, uint32_t job, unsigned ntasks, char *const argv[])
{
	/* No step id: the lowest free number, as `jobcg run` picks it. No gres: the step gets all
	 * of its job's GPUs, shared (as `jobcg run` without --gres). */
	struct jobcg_step_request req = {.ntasks = ntasks};
	struct jobcg_step_outcome end;
	struct jobcg_step_life life;
	struct jobcg_run_result res = {};
	struct jobcg_spawn_opts so = {};
	int r, e, exit_code;

	if ((e = jobcg_step_begin(ctx, job, &req, &life)) < 0) {
		fail(e, "beginning the step");
		return -1;
	}
	/* Each task's CUDA_VISIBLE_DEVICES and the like, computed by the begin. */
	so.task_env = jobcg_step_gres_task_env(life.gres);
	r = jobcg_step_run(ctx, job, life.step, ntasks, argv, &so, &res);
	if (r < 0) {
		fail(r, "running the step");
		/* as a shell reports a command it could not run */
		exit_code = r == -ENOENT ? 127 : r == -EACCES || r == -ENOEXEC ? 126 : -1;
	} else
		exit_code = res.exit_code;

	/* Accounting read and recorded in the node's log, devices revoked, the step removed; the
	 * library reports a failed reading or record through its log callback. */
	if ((e = jobcg_step_end(ctx, &life, r < 0 ? NULL : &res, 0, &end)) < 0) {
		fail(e, "ending the step");
		exit_code = -1;
	} else if (end.oom != JOBCG_OOM_NONE)
		fprintf(stderr, "step-agent: step %u.%s: out of memory (%s)\n", job, life.step,
			jobcg_oom_cause_name(end.oom));
	free(res.task_status);
	if (exit_code >= 0)
		printf("step %u.%s: exit code %d\n", job, life.step, exit_code);
	return exit_code;
}

static void log_to_stderr(enum jobcg_log_level level, const char *msg, void *userdata)
{
	(void)userdata;
	fprintf(stderr, "step-agent: %s%s\n", level <= JOBCG_LOG_ERR ? "error: " : "", msg);
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
	/* The library never prints: its warnings and the failures it carries on past come here. */
	jobcg_set_log(log_to_stderr, NULL, JOBCG_LOG_WARNING);
	/* Once for the agent's life: cgroup.conf and gres.conf (from $JOBCG_CONF_DIR or
	 * /etc/jobcg), the cgroup v2 mount, the tree root. A real agent reloads them when told
	 * to (SIGHUP), not per step. */
	if ((r = jobcg_config_load(NULL, NULL, 0, &conf)) < 0)
		return fail(r, "configuration");
	if ((r = jobcg_ctx_open(conf, JOBCG_CTX_NO_CREATE_ROOT, &ctx)) < 0) {
		jobcg_config_free(conf);
		return fail(r, "opening the context");
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
