/* jobcg internal: extension points of job creation and removal (limits today; devices, GPUs next).
 */
#pragma once

#include "ctx.h"

/*
 * A hook runs inside jobcg_job_create() under the node lock, after job_<id>/ exists with its
 * controllers enabled and before it is marked complete (trusted.jobcg.created). If attach of
 * hook i fails, detach of hooks i-1..0 runs (reverse order) and the directory is removed.
 * jobcg_job_remove() and gc call detach of every hook, reverse order, after the job's processes
 * are gone and before its directories are removed; detach must accept a job whose attach never
 * ran or ran only partly (restarts, crashes), using the state it stored in xattrs
 * (jobcg_job_xattr_set()).
 */
struct job_hook {
	const char *name;
	int (*attach)(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir,
		      const struct jobcg_limits *limits);
	void (*detach)(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir);
};

/* GPUs: select under the node lock, store trusted.jobcg.gres, grant the device policy (jobgres.c).
 */
extern const struct job_hook gres_job_hook;
