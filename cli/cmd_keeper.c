/*
 * jobcg keeper: the process that keeps the systemd scope alive (started by the library into the
 * scope and parked in its system/ leaf; see scope_systemd.c). It only waits, unless it finds
 * itself outside the scope when its grace ends. SIGTERM and SIGKILL end it as usual, so
 * `systemctl stop jobcg.scope` still works.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "scope_systemd.h"
#include "util.h"

/*
 * Started by jobcg for a scope (scope_keeper_spawn()): we begin in our starter's cgroup and are
 * moved into the scope afterwards. A starter killed before that would leave us pausing for ever
 * where it was (a login session, a service). Past the grace we were given (the starter's own
 * bound) we look once: not in the scope, we leave. Once there, only jobcg moves us (to system/).
 */
static void leave_unless_in_scope(void)
{
	const char *scope = getenv(SCOPE_KEEPER_ENV_SCOPE), *grace = getenv(SCOPE_KEEPER_ENV_GRACE);
	_cleanup_free_ char *text = NULL;
	unsigned long ms;
	char *end;

	if (!scope || !*scope || !grace)
		return; /* started by hand: wait forever, as asked */
	errno = 0;
	ms = strtoul(grace, &end, 10);
	if (errno || end == grace || *end || ms > 86400000ul)
		return;
	sleep_ms((unsigned)ms);
	/* unreadable: nothing to tell by, stay */
	if (read_full_file_at(AT_FDCWD, "/proc/self/cgroup", 1 << 16, &text, NULL) < 0)
		return;
	if (!scope_keeper_in_scope(text, scope))
		exit(0);
}

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
	/* Out of the OOM killer's reach: with only idle allocations in the tree (no process in
	 * any job), we are all that keeps systemd from stopping the scope and removing every
	 * job's cgroup, and with it their devices, limits and pending records. Root on a node has
	 * CAP_SYS_RESOURCE; without it the write fails and we are as killable as before. */
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, "-1000", 5) != 5)
		fprintf(stderr, "jobcg keeper: cannot leave the OOM killer's reach: %s\n",
			strerror(errno));
	if (fd >= 0)
		close(fd);
	leave_unless_in_scope();
	for (;;)
		pause();
}
CLI_COMMAND(keeper, cmd_keeper, "internal: the process that keeps the systemd scope alive");
