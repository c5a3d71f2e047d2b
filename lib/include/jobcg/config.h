/* jobcg: configuration read from Slurm-compatible cgroup.conf and gres.conf (immutable once
 * loaded). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a configuration value came from, for `jobcg config`. */
struct jobcg_origin {
	const char *file; /* NULL: built-in default; "env:NAME" for the environment; else a path
			     owned by the jobcg_config */
	unsigned line;
};

/* How an effective cgroup.conf value is typed, for `jobcg config --json`. */
enum jobcg_config_kind {
	JOBCG_CONFIG_STRING = 0,
	JOBCG_CONFIG_BOOL,
	JOBCG_CONFIG_NUMBER,
	JOBCG_CONFIG_LIST,
};

/* One effective cgroup.conf setting, Slurm's keys then jobcg's, for display. */
struct jobcg_config_entry {
	const char *key; /* canonical spelling ("ConstrainCores") */
	enum jobcg_config_kind kind;
	char *value; /* as text: "yes"/"no", "100", "a,b"; NULL when unset */
	struct jobcg_origin origin;
};

/*
 * A loaded configuration: opaque, immutable, shared by everything opened from it (a context, a
 * system probe). Its values are read through jobcg_config_entry(); the library, the jobcg
 * command, its daemon and the spank plugin see its layout (lib/src/conf/config_internal.h).
 */
struct jobcg_config;

enum {
	JOBCG_CONFIG_NO_STAT = 1u << 0, /* do not stat() gres device files */
	JOBCG_CONFIG_NO_ENV = 1u << 1,	/* ignore JOBCG_* environment overrides */
	/* keep no entries (jobcg_config_entry() finds none): their display text formats every
	 * key (doubles included), a cost every launch paid for what only `jobcg config` shows */
	JOBCG_CONFIG_NO_ENTRIES = 1u << 2,
	/* for commands that only end, inspect or clean up jobs: an error in gres.conf does not
	 * fail the load (see jobcg_config_gres_error()) */
	JOBCG_CONFIG_TOLERATE_GRES = 1u << 3,
	/* the same for cgroup.conf: a bad value of a key that does not say where jobcg's cgroups,
	 * pins and state are does not fail the load (see jobcg_config_cgroup_error()) */
	JOBCG_CONFIG_TOLERATE_CGROUP = 1u << 4,
};

/**
 * The value of one of jobcg's own environment variables (JOBCG_*) as the library reads them:
 * as secure_getenv(3), so NULL in a setuid, setgid or capability-raised process, and NULL too
 * where the real and effective user or group ids differ. Programs that link the library read
 * JOBCG_* through this so that they follow the same rules.
 */
JOBCG_EXPORT const char *jobcg_getenv(const char *name);

/**
 * Load cgroup.conf and gres.conf from @config_dir (NULL: $JOBCG_CONF_DIR, else /etc/jobcg).
 * Missing files give the defaults (an empty gres.conf). @hostname NULL: $JOBCG_NODENAME (unless
 * JOBCG_CONFIG_NO_ENV), else gethostname(); NodeName= lines also match the name up to its first
 * dot. On error returns -errno with the thread's error record naming file, line and column; nothing
 * is returned (no partial configuration). Free with jobcg_config_free(). With effective uid 0 the
 * directory, every directory above it and those of included files and of gres.conf's device
 * files must be root's and writable by no one else, and links are followed only when root owns
 * them (-EPERM naming the directory or link otherwise, even when a file is missing).
 */
JOBCG_EXPORT int jobcg_config_load(const char *config_dir, const char *hostname, unsigned flags,
				   struct jobcg_config **ret);
/**
 * Same, from explicit paths (either may be NULL: defaults / no gres). Errors name the paths as
 * given. With effective uid 0 the files (not their directories) must be root's and writable by
 * no one else, and the device files are checked as above.
 */
JOBCG_EXPORT int jobcg_config_load_files(const char *cgroup_conf, const char *gres_conf,
					 const char *hostname, unsigned flags,
					 struct jobcg_config **ret);
JOBCG_EXPORT void jobcg_config_free(struct jobcg_config *c);

/**
 * Loaded with JOBCG_CONFIG_TOLERATE_GRES from a gres.conf that has an error: that error as
 * "file:line:col: message" (it was logged once as a warning), else NULL. Such a configuration
 * has no GRES record, and a context opened from it never changes the node's device policy
 * from it: it refuses to create jobs, steps and reservations and to grant devices, and never
 * rewrites the node program's managed set (the devices denied to every cgroup without a
 * grant); what a job's removal revokes is read from the kernel and the job's cgroups, so
 * release, kill, signal, freeze, list, gc and teardown work as usual.
 */
JOBCG_EXPORT const char *jobcg_config_gres_error(const struct jobcg_config *c);

/**
 * Loaded with JOBCG_CONFIG_TOLERATE_CGROUP from a cgroup.conf with errors in keys that do not
 * locate anything: the first as "file:line:col: message" (logged once as a warning, with how
 * many more there were), else NULL. Such a key keeps its default (or an earlier line's value);
 * so does each key of a line holding several, and SpecCPUs and CoreSpecCount when both are
 * set. An unknown key is one of those errors unless its name is close to a locating key's.
 * The keys that locate what a command acts on (CgroupMountpoint, CgroupSlice, JobcgScope,
 * JobcgRoot, StateDir, BpfPinDir, DeviceProgram and their environment overrides), a line
 * that cannot be read as Key=Value, an Include that fails and a file that cannot be read
 * still fail the load: guessing those could make a cleanup act on another tree. A context
 * opened from such a configuration refuses to make the tree, jobs, steps and reservations,
 * to set limits and to grant devices or change the device policy, since the administrator's
 * limits are unknown; release, kill, signal, freeze, list, gc and teardown work as usual.
 */
JOBCG_EXPORT const char *jobcg_config_cgroup_error(const struct jobcg_config *c);

/**
 * The effective value of cgroup.conf key @key (case-insensitive), with where it came from; owned
 * by @c. NULL for an unknown key, and for every key when @c was loaded with
 * JOBCG_CONFIG_NO_ENTRIES.
 */
JOBCG_EXPORT const struct jobcg_config_entry *jobcg_config_entry(const struct jobcg_config *c,
								 const char *key);

#ifdef __cplusplus
}
#endif
