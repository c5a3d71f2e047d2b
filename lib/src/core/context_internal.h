/* jobcg internal: the context object shared by tree, job, procs, spawn and acct. */
#pragma once

#include "config_internal.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "scope.h"

/*
 * Where the last job looked up lives (tree_job_dir()): a step's start and end ask for their
 * job's directory a dozen times, each an access() of the whole cgroup path. A job never moves
 * (cgroupfs renames nothing across parents) and an id is in one place only, so the answer holds
 * until the job is removed; it is kept for a second at most, so that a job removed and made
 * again elsewhere by another process meanwhile is found again soon.
 */
struct ctx_jobdir {
	uint32_t job;
	char *dir;
	uint64_t at_usec; /* CLOCK_MONOTONIC */
};

/*
 * The driver's GPU UUIDs (/proc/driver/nvidia/gpus/<bus>/information: a directory read and one
 * file per GPU), read once per context: a step's start and end build the node's device table
 * four times, and a GPU's UUID does not change while a process runs.
 */
struct ctx_gpu_uuids {
	bool loaded;
	struct jobcg_gres_node *node; /* with the UUIDs found, or NULL */
};

struct jobcg_ctx {
	const struct jobcg_config *conf; /* borrowed */
	unsigned flags;
	struct jobcg_sysinfo *info; /* mount, root, controllers */
	char *lock_path;
	int lock_fd;
	unsigned lock_depth;
	/* The process holding the lock: a fork()ed child does not. */
	pid_t lock_pid;
	bool state_dir_ok;		     /* the lock's directory passed state_dir_prepare() */
	const struct scope_backend *backend; /* set once the tree was ensured */
	bool tree_ready;
	unsigned want; /* controllers jobcg enables for jobs */
	/* The device policy, opened at most once (jobgres.c): full = attached and synced with
	 * the managed set, else only its pins, which is all a revoke needs. */
	struct jobcg_devpolicy *devpolicy;
	bool devpolicy_full;
	/* What lookups remember: allocated with the context, since they take a const one. */
	struct ctx_memo {
		struct ctx_jobdir jobdir;
		struct ctx_gpu_uuids uuids;
	} * memo;
};

/* Controllers jobcg wants in its tree: cpuset cpu memory pids + EnableExtraControllers. */
unsigned ctx_wanted_controllers(const struct jobcg_config *conf);

/*
 * The state directory (the lock's, and the accounting log's beside it) made where missing and
 * refused when someone else could swap or hold its files; checked once per context (a step
 * takes the lock several times and writes a record).
 */
int ctx_state_dir_ready(struct jobcg_ctx *ctx);

/* The Slurm plugin's CPU topology cache, kept in the state directory (jobcg teardown removes
 * it with the lock). */
#define CTX_CPU_TOPOLOGY_FILE "cpu-topology"

/* @name in the state directory, beside the node lock (NULL: out of memory). */
char *ctx_state_file(const struct jobcg_ctx *ctx, const char *name);

/* The job's directory is no longer where tree_job_dir() last found it (it was removed). */
void ctx_jobdir_forget(const struct jobcg_ctx *ctx, uint32_t job);

/*
 * -EINVAL naming cgroup.conf's error when the configuration was loaded past one
 * (JOBCG_CONFIG_TOLERATE_CGROUP): the administrator's limits are unknown, so nothing may make
 * the tree, a job, a step or a reservation from it (their limits would be defaults).
 */
int ctx_refuse_cgroup_broken(const struct jobcg_ctx *ctx);

/* Why controller @ctrl does not reach jobs, for @what ("memory limits (memory.max)"). */
char *ctx_limitation(const struct jobcg_ctx *ctx, unsigned ctrl, const char *what);

/*
 * Waiting for processes to die must not hold the node lock. When CTX holds it once (depth 1),
 * suspend drops it and returns true; resume(ctx, true) takes it again (it can fail: timeout).
 * A nested holder (depth > 1) keeps it: suspend returns false and resume does nothing.
 */
bool ctx_lock_suspend(struct jobcg_ctx *ctx);
int ctx_lock_resume(struct jobcg_ctx *ctx, bool suspended);
