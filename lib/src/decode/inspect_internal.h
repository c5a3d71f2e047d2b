/* jobcg internal: what tests and the library's readers may learn of a program cache. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/inspect.h"

/* Cgroups jobcg_cgroup_devices_access() decided with this cache: from the trusted node
 * program's maps directly, or by running the effective programs. */
struct progcache_counts {
	size_t fast, interpreted;
};
void progcache_counts(const struct jobcg_progcache *c, struct progcache_counts *ret);

/* Whether cgroup levels counted from a cgroup2 mount whose root has id @root_id are the
 * kernel's (the real root has id 1); otherwise ancestor-dependent answers are uncertain. */
bool inspect_levels_real(uint64_t root_id);
