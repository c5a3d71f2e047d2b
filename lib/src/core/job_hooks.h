/* jobcg internal: extension points of job creation and removal (limits, GPUs and their devices).
 */
#pragma once

#include "context_internal.h"

/*
 * A hook runs inside jobcg_job_create() under the node lock, after job_<id>/ exists with its
 * controllers enabled and before it is marked complete (trusted.jobcg.created). If attach of
 * hook i fails, detach of hooks i-1..0 runs (reverse order) and the directory is removed.
 *
 * jobcg_job_remove() and gc release what a hook holds in two halves around the removal of the
 * job's directories, so that nothing is taken from a cgroup that can still hold a process:
 * prepare_release, after the job's processes are gone and while the directories exist, reads
 * what the release will need into *ret_state; release runs once the directories are gone
 * (and frees the state); discard frees it instead when they could not be removed (the job is
 * left, still holding everything, for gc). Both must accept a job whose attach never ran or
 * ran only partly (restarts, crashes), using the state it stored in xattrs
 * (jobcg_job_xattr_set()).
 */
struct job_hook {
	const char *name;
	int (*attach)(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir,
		      const struct jobcg_limits *limits);
	void (*detach)(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir);
	int (*prepare_release)(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir,
			       void **ret_state);
	void (*release)(struct jobcg_ctx *ctx, uint32_t job_id, void *state);
	void (*discard)(void *state);
};

/* GPUs: select under the node lock, store trusted.jobcg.gres, grant the device policy (jobgres.c).
 */
extern const struct job_hook gres_job_hook;

/*
 * The device policy in force at the tree's root before any job can exist below it (jobgres.c):
 * with ConstrainDevices=yes and devices in gres.conf, the node program (or linear mode's guard)
 * is set up and attached, so that a cgroup with no grant (system/, a job interrupted before its
 * grant, a directory made by hand) never gets a managed device, and an attachment lost to a
 * crash is made again. Nothing to do otherwise. Called under the node lock.
 */
int gres_tree_policy(struct jobcg_ctx *ctx);
