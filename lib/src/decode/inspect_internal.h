/* jobcg internal: what tests and the library's readers may learn of a program cache. */
#pragma once

#include <stddef.h>

#include "jobcg/inspect.h"

/* Cgroups jobcg_cgroup_devices_access() decided with this cache: from the trusted node
 * program's maps directly, or by running the effective programs. */
struct progcache_counts {
	size_t fast, interpreted;
};
void progcache_counts(const struct jobcg_progcache *c, struct progcache_counts *ret);
