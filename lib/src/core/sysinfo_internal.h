/* jobcg internal: pure helpers of host discovery in sysinfo.c (unit tested from strings). */
#pragma once

#include "jobcg/sysinfo.h"

/*
 * Pick the cgroup v2 mount from /proc/self/mounts text. @configured (CgroupMountpoint=, may be
 * NULL) wins: it or its "unified" subdirectory must be a cgroup2 mount. Otherwise
 * /sys/fs/cgroup (unified), /sys/fs/cgroup/unified (hybrid), then any cgroup2 mount.
 * -EOPNOTSUPP with a clear message when only cgroup v1 is mounted, -ENOENT when nothing is.
 */
int discover_mount(const char *mounts, const char *configured, char **ret_mount,
		   enum jobcg_layout *ret_layout);
/* Controllers bound to cgroup v1 hierarchies according to /proc/self/mounts text. */
unsigned discover_v1_controllers(const char *mounts);
/* Controllers bound to a cgroup v1 hierarchy according to /proc/cgroups text (hierarchy id not
 * 0). */
unsigned discover_v1_from_proc_cgroups(const char *text);
/*
 * A JobcgRoot/JOBCG_ROOT as a path relative to the cgroup v2 @mount: a file name below the mount
 * ("/sys/fs/cgroup/unified/x") loses the mount, leading '/'s go ("/x", cgroup notation). A file
 * name that starts as the mount does but is outside it is refused (-EINVAL). @ret points
 * into @root.
 */
int discover_root_strip(const char *mount, const char *root, const char **ret);
/* Tree root relative to @mount: JobcgRoot (see discover_root_strip()) or <slice>/<scope>. */
int discover_root_rel(const struct jobcg_config *conf, const char *mount, char **ret);
/* "major.minor" of a kernel release at least @maj.@min. */
bool discover_kernel_at_least(const char *release, unsigned maj, unsigned min);
/* "memory controller is bound to cgroup v1: memory limits (memory.max) cannot be enforced". */
char *discover_limitation(const struct jobcg_sysinfo *s, unsigned ctrl, const char *what);
/*
 * jobcg_sysinfo_probe() for jobcg_ctx_open(): the same, except that no test BPF program is
 * ever loaded (about 140 us, a seventh of a whole fork+exec+wait, on every jobcg command). The
 * device code learns the same when it loads its own program; bpf_device says "not probed"
 * and is not listed among the limitations. `jobcg check` uses the full probe.
 */
int discover_probe_for_ctx(const struct jobcg_config *conf, struct jobcg_sysinfo **ret);
/*
 * A context's probe finds only what job operations need (mount, root, usable controllers,
 * xattrs). The rest of @s (kernel, the mount root's controllers, what v1 holds, features,
 * limitations, write access, systemd) is probed the first time this is called, best effort:
 * what cannot be read stays unknown, with a warning logged. Returns @s.
 */
const struct jobcg_sysinfo *discover_complete(const struct jobcg_config *conf,
					      struct jobcg_sysinfo *s);
