/* jobcg daemon: the reservation watcher, a child of the daemon (cli/resv_watch.c). */
#pragma once

#include <sys/types.h>

#include "cli.h"

/* Start the watcher: every reservation verified, and repaired when degraded, every PERIOD_S
 * seconds and whenever the kernel notifies a change of a partition file. 0 or a CLI exit code
 * (the error printed). */
int resv_watch_start(const struct cli_global *g, unsigned period_s, pid_t *ret_pid);
/* Stop it (SIGTERM) and reap it. @pid <= 0: nothing. */
void resv_watch_stop(pid_t pid);
