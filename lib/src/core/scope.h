/* jobcg internal: where the delegated cgroup tree lives (systemd scope or plain mkdir), one table.
 */
#pragma once

#include "jobcg/config.h"

struct scope_backend {
	const char *name; /* "systemd" or "mkdir" */
	/*
	 * Make sure the delegated root exists and is usable (controllers enabled down to it where
	 * the configuration asks for that), creating it if needed and reusing it if it exists.
	 * @mount is the cgroup v2 mount point, @root_rel the root relative to it (for example
	 * "system.slice/jobcg.scope"). Returns 0 and the absolute path in *ret_root, or -errno with
	 * the error record set. Must be restart-safe: calling it again on a live tree is a no-op.
	 */
	int (*ensure)(const struct jobcg_config *conf, const char *mount, const char *root_rel,
		      char **ret_root);
};

/* On a directory the mkdir backend made above the tree root (system.slice on a host without
 * systemd): a teardown removes such a directory once empty, never one jobcg found there. */
#define SCOPE_MADE_XATTR "trusted.jobcg.made"

extern const struct scope_backend scope_mkdir_backend;	 /* scope_mkdir.c */
extern const struct scope_backend scope_systemd_backend; /* scope_systemd.c (sd-bus) */

/* True when systemd is the running init (/run/systemd/system exists), as sd_booted() says.
 * scope.c; it does not load libsystemd. */
bool scope_systemd_running(void);
