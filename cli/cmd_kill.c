/* jobcg kill: SIGKILL everything in a job, step or task (cgroup.kill). */
#include "common.h"

static int cmd_kill(int argc, char **argv, const struct cli_global *g)
{
	struct cli_target_args a;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int r;

	r = cli_target_args(
	    argc, argv, CLI_TARGET_TIMEOUT,
	    "Usage: jobcg kill [--timeout MS] JOB[.STEP[.TASK]]\n\nKill every process of the "
	    "target with cgroup.kill (SIGKILL, cannot be trapped)\nand wait until the target is "
	    "empty (default timeout 10000 ms).\n",
	    &a);
	if (r >= 0)
		return r;
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if (jobcg_kill(ctx, &a.t, a.timeout_ms) < 0) {
		cli_print_error(NULL);
		r = 1;
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(kill, cmd_kill, "SIGKILL everything in a job, step or task (cgroup.kill)");
