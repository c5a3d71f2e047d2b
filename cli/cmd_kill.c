/* jobcg kill: SIGKILL everything in a job, step or task (cgroup.kill). */
#include "common.h"

static int cmd_kill(int argc, char **argv, const struct cli_global *g)
{
	return cli_target_wait_cmd(
	    argc, argv, g,
	    "Usage: jobcg kill [--timeout MS] JOB[.STEP[.TASK]]\n\nKill every process of the "
	    "target with cgroup.kill (SIGKILL, cannot be trapped)\nand wait until the target is "
	    "empty (default timeout 10000 ms; 0: do not wait).\n",
	    jobcg_kill);
}
CLI_COMMAND(kill, cmd_kill, "SIGKILL everything in a job, step or task (cgroup.kill)");
