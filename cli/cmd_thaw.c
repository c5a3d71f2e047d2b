/* jobcg thaw: thaw a frozen job, step or task. */
#include "common.h"

static int cmd_thaw(int argc, char **argv, const struct cli_global *g)
{
	struct cli_target_args a;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int r;

	r = cli_target_args(argc, argv, CLI_TARGET_TIMEOUT,
			    "Usage: jobcg thaw [--timeout MS] JOB[.STEP[.TASK]]\n\nThaw the target "
			    "and wait until cgroup.events reports 'frozen 0'.\n",
			    &a);
	if (r >= 0)
		return r;
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if (jobcg_thaw(ctx, &a.t, a.timeout_ms) < 0) {
		cli_print_error(NULL);
		r = 1;
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(thaw, cmd_thaw, "thaw a frozen job, step or task");
