/* jobcg daemon: the reservation watcher, a child of the daemon (cli/resv_watch.c). */
#pragma once

#include "cli.h"
#include "supervise.h"

struct resv_watch {
	struct supervised sup; /* the daemon tends it and stops it through this */
	const struct cli_global *g;
	unsigned period_s;
};

/* Start the watcher: every reservation verified, and repaired when degraded, every PERIOD_S
 * seconds and whenever the kernel notifies a change of a partition file (one whose repair
 * failed: repaired again once what verify finds changes). Kept running by
 * supervise_tend(&w->sup) and stopped by supervise_stop(&w->sup). 0 or a CLI exit code (the
 * error printed). */
int resv_watch_start(struct resv_watch *w, const struct cli_global *g, unsigned period_s);
