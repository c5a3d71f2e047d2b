/* jobcg freeze: freeze a job, step or task and wait until it is frozen. */
#include "common.h"

static int cmd_freeze(int argc, char **argv, const struct cli_global *g)
{
	struct cli_target_args a;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int r;

	r = cli_target_args(argc, argv, CLI_TARGET_TIMEOUT,
			    "Usage: jobcg freeze [--timeout MS] JOB[.STEP[.TASK]]\n\nFreeze the "
			    "target (cgroup.freeze) and wait until cgroup.events reports\n'frozen "
			    "1' (default timeout 10000 ms).\n",
			    &a);
	if (r >= 0)
		return r;
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if (jobcg_freeze(ctx, &a.t, a.timeout_ms) < 0) {
		cli_print_error(NULL);
		r = 1;
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(freeze, cmd_freeze, "freeze a job, step or task and wait until it is frozen");
