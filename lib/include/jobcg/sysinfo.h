/* jobcg: what this host's cgroup v2 can do (mount, controllers, kernel features), for `jobcg
 * check`. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "jobcg/config.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Controllers jobcg knows by name; a set of them is a bit mask of (1u << JOBCG_CTRL_*). */
enum jobcg_controller {
	JOBCG_CTRL_CPUSET,
	JOBCG_CTRL_CPU,
	JOBCG_CTRL_IO,
	JOBCG_CTRL_MEMORY,
	JOBCG_CTRL_HUGETLB,
	JOBCG_CTRL_PIDS,
	JOBCG_CTRL_RDMA,
	JOBCG_CTRL_MISC,
	_JOBCG_CTRL_MAX,
};

/** "cpuset", "cpu", ... for a JOBCG_CTRL_* value; NULL when out of range. */
JOBCG_EXPORT const char *jobcg_controller_name(enum jobcg_controller c);
/** JOBCG_CTRL_* for a name, or -EINVAL. */
JOBCG_EXPORT int jobcg_controller_from_name(const char *name);

enum jobcg_layout {
	JOBCG_LAYOUT_UNIFIED,	 /* pure cgroup v2 at /sys/fs/cgroup */
	JOBCG_LAYOUT_HYBRID,	 /* v1 controllers plus v2 at /sys/fs/cgroup/unified */
	JOBCG_LAYOUT_CONFIGURED, /* CgroupMountpoint= from cgroup.conf */
	JOBCG_LAYOUT_OTHER,	 /* a cgroup2 mount found elsewhere in /proc/self/mounts */
};

/* A kernel feature: supported or not, and why not. */
struct jobcg_feature {
	bool supported;
	char *detail; /* why not / how it was found; never NULL after a successful probe */
};

struct jobcg_sysinfo {
	char *mount; /* absolute path of the cgroup v2 mount */
	enum jobcg_layout layout;
	char *kernel;	/* uname -r */
	char *root_rel; /* jobcg's tree root relative to the mount */
	char *root;	/* absolute tree root */
	bool root_exists;
	unsigned available;   /* controllers in the v2 root's cgroup.controllers */
	unsigned enabled_top; /* in the v2 root's cgroup.subtree_control */
	unsigned usable;      /* reaching jobs: cgroup.controllers of the tree root if it
				 exists, else what would reach it (available & wanted) */
	unsigned v1_bound;    /* bound to a cgroup v1 hierarchy (so missing from v2); in a context's
				 sysinfo on a unified or hybrid host, looked up only when a
				 controller jobcg wants is missing (jobcg_sysinfo_probe() always
				 looks) */
	struct jobcg_feature bpf_device;  /* BPF_PROG_TYPE_CGROUP_DEVICE loads */
	struct jobcg_feature freeze;	  /* cgroup.freeze */
	struct jobcg_feature kill;	  /* cgroup.kill */
	struct jobcg_feature memory_peak; /* memory.peak */
	struct jobcg_feature xattr;	  /* trusted.* xattrs on cgroup directories */
	/* The mount's favordynmods option (Linux 6.0+): without it a process moved between
	 * cgroups (every task of a Slurm step, by jobcg_spank.so) first waits for an RCU grace
	 * period, milliseconds. Looked up with the mount table: by jobcg_sysinfo_probe(), not
	 * in a context's sysinfo on a host whose layout statfs() told (then not supported,
	 * the detail saying so). */
	struct jobcg_feature favordynmods;
	char **limitations;	 /* NULL-terminated sentences: what cannot be enforced and why */
	bool can_run;		 /* jobs can be created and run (maybe without some limits) */
	char *cannot_run_reason; /* when !can_run */
	bool systemd;		 /* systemd is the running init */
	const char *backend;	 /* scope backend that would be used: "systemd" or "mkdir" */
};

/**
 * Probe the host. Fails (-ENOENT/-EOPNOTSUPP with the error record set) only when no cgroup v2
 * mount can be found at all, for example on a v1-only system: the message says so. Reads only;
 * creates nothing. Free with jobcg_sysinfo_free().
 */
JOBCG_EXPORT int jobcg_sysinfo_probe(const struct jobcg_config *conf, struct jobcg_sysinfo **ret);
JOBCG_EXPORT void jobcg_sysinfo_free(struct jobcg_sysinfo *s);

#ifdef __cplusplus
}
#endif
