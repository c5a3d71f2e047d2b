/* jobcg daemon: the reservation watcher, a child of the daemon (cli/resv_watch.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli.h"

/* A watcher that dies is started again after a delay, 1 s doubling up to this; the delay is
 * back to 1 s for one that had run this long. */
#define RESV_WATCH_DELAY_MAX_S 60
#define RESV_WATCH_STEADY_MS   (60 * 1000)

struct resv_watch {
	const struct cli_global *g;
	unsigned period_s;
	pid_t pid;	     /* running; 0: not */
	uint64_t started_ms; /* when it was (run_monotonic_ms) */
	uint64_t restart_ms; /* when to start it again; 0: not due */
	unsigned delay_s;    /* the delay before the next start after a death */
};

/* Start the watcher: every reservation verified, and repaired when degraded, every PERIOD_S
 * seconds and whenever the kernel notifies a change of a partition file. 0 or a CLI exit code
 * (the error printed). */
int resv_watch_start(struct resv_watch *w, const struct cli_global *g, unsigned period_s);
/* Reap the watcher if it ended, logging how, and start it again when its delay is over
 * (RESTART false: the daemon is stopping, it stays dead). Returns when to call again at the
 * latest (run_monotonic_ms), 0 when only its death (SIGCHLD) needs a call. */
uint64_t resv_watch_tend(struct resv_watch *w, uint64_t now, bool restart);
/* Stop it (SIGTERM) and reap it; nothing when it is not running. */
void resv_watch_stop(struct resv_watch *w);
