/* jobcg kill: SIGKILL everything in a job, step or task (cgroup.kill). */
#include "common.h"

/* As Slurm's scancel: the steps it ends record CANCELLED, not FAILED 0:9. */
static int kill_noted(struct jobcg_ctx *ctx, const struct jobcg_target *t, unsigned timeout_ms)
{
	int r = jobcg_target_note_signal(ctx, t, SIGKILL);

	if (r < 0)
		return r;
	return jobcg_kill(ctx, t, timeout_ms);
}

static int cmd_kill(int argc, char **argv, const struct cli_global *g)
{
	return cli_target_wait_cmd(
	    argc, argv, g,
	    "Usage: jobcg kill [--timeout MS] JOB[.STEP[.TASK]]\n\nKill every process of the "
	    "target with cgroup.kill (SIGKILL, cannot be trapped)\nand wait until the target is "
	    "empty (default timeout 10000 ms; 0: do not wait).\n",
	    kill_noted);
}
CLI_COMMAND(kill, cmd_kill, "SIGKILL everything in a job, step or task (cgroup.kill)");
