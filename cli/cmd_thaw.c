/* jobcg thaw: thaw a frozen job, step or task. */
#include "common.h"

static int cmd_thaw(int argc, char **argv, const struct cli_global *g)
{
	return cli_target_wait_cmd(
	    argc, argv, g,
	    "Usage: jobcg thaw [--timeout MS] JOB[.STEP[.TASK]]\n\nThaw the target "
	    "and wait until cgroup.events reports 'frozen 0'\n(default timeout 10000 ms; 0: do not "
	    "wait).\n",
	    jobcg_thaw);
}
CLI_COMMAND(thaw, cmd_thaw, "thaw a frozen job, step or task");
