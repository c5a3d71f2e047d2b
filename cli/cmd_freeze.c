/* jobcg freeze: freeze a job, step or task and wait until it is frozen. */
#include "common.h"

static int cmd_freeze(int argc, char **argv, const struct cli_global *g)
{
	return cli_target_wait_cmd(
	    argc, argv, g,
	    "Usage: jobcg freeze [--timeout MS] JOB[.STEP[.TASK]]\n\nFreeze the "
	    "target (cgroup.freeze) and wait until cgroup.events reports\n'frozen "
	    "1' (default timeout 10000 ms; 0: do not wait). A freeze not complete\n"
	    "in time fails and is undone: the target is thawed again.\n",
	    jobcg_freeze);
}
CLI_COMMAND(freeze, cmd_freeze, "freeze a job, step or task and wait until it is frozen");
