/* jobcg internal: what tests and the library's readers may learn of a program cache. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/inspect.h"

/*
 * Let walks with @c decide cgroups whose only effective device program is @p's node program
 * (node mode, as pinned) from its policy map, the way the program decides, instead of running
 * the program once per cgroup and device. The program is still read from the kernel and must
 * match what @p's pins name (its id, its two maps, the root it was built for); a cgroup with
 * any other program on its path, or a program that does not match, is interpreted as before.
 * -ENOENT when @p is not in node mode. @p may be freed afterwards. Internal: a policy comes
 * only from the library's own device code (devices.h).
 */
struct jobcg_devpolicy;
int jobcg_progcache_trust_policy(struct jobcg_progcache *c, const struct jobcg_devpolicy *p);

/* Cgroups jobcg_cgroup_devices_access() decided with this cache: from the trusted node
 * program's maps directly, or by running the effective programs. */
struct progcache_counts {
	size_t fast, interpreted;
};
void progcache_counts(const struct jobcg_progcache *c, struct progcache_counts *ret);

/* Whether cgroup levels counted from a cgroup2 mount whose root has id @root_id are the
 * kernel's (the real root has id 1); otherwise ancestor-dependent answers are uncertain. */
bool inspect_levels_real(uint64_t root_id);

/* A /proc/self/mounts line of a cgroup2 mount: its mount point in @dir. */
bool inspect_mounts_cgroup2(const char *line, char dir[PATH_MAX]);
/* A /proc/self/mountinfo line ("ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - cgroup SOURCE OPTS") of
 * a cgroup v1 hierarchy holding the devices controller: its mount point in @mp. */
bool inspect_mountinfo_v1_devices(const char *line, char mp[PATH_MAX]);
/* A process's /proc/PID/cgroup @text: its cgroup in the v1 hierarchy holding the devices
 * controller, in @path ("" for the hierarchy's root); false when it has none, or one that is
 * not an absolute path below that root (a ".." of another cgroup namespace). */
bool inspect_proc_cgroup_v1_devices(const char *text, char path[PATH_MAX]);
