/*
 * jobcg keeper: the process that keeps the systemd scope alive (started by the library into the
 * scope and parked in its system/ leaf; see scope_systemd.c). It only waits. SIGTERM and SIGKILL
 * end it as usual, so `systemctl stop jobcg.scope` still works.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int cmd_keeper(int argc, char **argv, const struct cli_global *g)
{
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf(
		    "Usage: jobcg keeper\n\n"
		    "Internal: wait forever. jobcg starts one keeper in its systemd scope so that\n"
		    "the scope outlives every job; you never need to run it yourself.\n");
		return 0;
	}
	if (argc > 1)
		return cli_usage_error("keeper", "takes no arguments");
	/* Whoever started us by hand from a terminal: no ^C or hangup may end the scope's anchor.
	 */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	for (;;)
		pause();
}
CLI_COMMAND(keeper, cmd_keeper, "internal: the process that keeps the systemd scope alive");
