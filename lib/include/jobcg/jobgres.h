/* jobcg: GPUs (GRES) of jobs, steps and tasks in the cgroup tree: selection under the node lock,
 * state in xattrs, device grants, the tasks' environment, and cleaning stale policy entries. */
#pragma once

#include <stdint.h>

#include "jobcg/context.h"
#include "jobcg/gres.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A job's devices are chosen inside jobcg_job_create() (the "gres" hook, under the node lock)
 * from jobcg_limits.gres, and stored as trusted.jobcg.gres on job_<id>/; the free devices are
 * those no job directory of the tree names. With ConstrainDevices=yes every job, step and bound
 * task cgroup is granted exactly the files of its devices; a job without GPUs gets none.
 */

/** The devices recorded on job @job (@step NULL) or one of its steps: "gpu:0,2", "" for none. */
JOBCG_EXPORT int jobcg_gres_get(struct jobcg_ctx *ctx, uint32_t job, const char *step, char **ret);

/* What jobcg_step_gres_setup() prepared for the tasks of a step (opaque). */
struct jobcg_step_gres;

/**
 * Give step @step of job @job its devices (under the node lock): with @gres (e.g. "gpu:1") a
 * subset of the job's devices not held by other steps that asked for theirs (-E2BIG when the
 * job has fewer than asked, -EBUSY when other steps hold them); without, all of the job's
 * devices, shared. Stores them on step_<id>/, grants the step cgroup and, when @gpu_bind binds
 * tasks to GPUs, each task cgroup (created here), and computes every task's environment.
 * On failure nothing is granted or stored.
 */
JOBCG_EXPORT int jobcg_step_gres_setup(struct jobcg_ctx *ctx, uint32_t job, const char *step,
				       const char *gres, const char *gpu_bind, unsigned ntasks,
				       struct jobcg_step_gres **ret);
JOBCG_EXPORT void jobcg_step_gres_free(struct jobcg_step_gres *g);
/**
 * Per task (at least as many as the step's tasks): the NULL-terminated "NAME=VALUE" strings to
 * add to its environment (CUDA_VISIBLE_DEVICES, ...), for jobcg_spawn_opts.task_env. Owned by
 * @g; NULL when @g is NULL.
 */
JOBCG_EXPORT char **const *jobcg_step_gres_task_env(const struct jobcg_step_gres *g);

/** Revoke the device grants of a step's cgroups (call before removing the step). */
JOBCG_EXPORT int jobcg_step_gres_release(struct jobcg_ctx *ctx, uint32_t job, const char *step);

/**
 * Under the node lock: remove policy map entries whose cgroup no longer exists (left by a killed
 * jobcg). Nothing to do in linear mode (programs go with their cgroups) or when nothing is
 * pinned. *ret_removed (may be NULL) gets the number of cgroups whose entries were removed.
 */
JOBCG_EXPORT int jobcg_devices_gc(struct jobcg_ctx *ctx, unsigned *ret_removed);

/*
 * Devices chosen by a scheduler above jobcg (Slurm: SLURM_STEP_GPUS), not by jobcg: named
 * exactly, in the jobcg_gres_set_format() form ("gpu:0,2", "" for none).
 */

/**
 * Add @devices to job @job's devices (under the node lock): stored as trusted.jobcg.gres with
 * those it had, and, with ConstrainDevices=yes, the job cgroup granted the union. Devices the
 * job has already are fine. -EBUSY (the message names the holder, "job_7") when another job
 * holds one of them; -ENOENT/-EINVAL when this node's gres.conf has no such device; -EPERM
 * (naming both) when the job is inside a reservation and one of them is not the
 * reservation's (the job could never open it). On -EBUSY, -EPERM and parse errors nothing
 * changed; a failed grant after the store leaves the devices claimed
 * by the job (never shared), the caller fails its launch.
 */
JOBCG_EXPORT int jobcg_job_gres_claim(struct jobcg_ctx *ctx, uint32_t job, const char *devices);

/**
 * jobcg_step_gres_setup() with the step's devices named: exactly @devices, which must all be
 * the job's (-EINVAL naming both otherwise). Unlike a step given all of its job's devices, the
 * step holds them: a later step asking for a count does not get them.
 */
JOBCG_EXPORT int jobcg_step_gres_setup_exact(struct jobcg_ctx *ctx, uint32_t job, const char *step,
					     const char *devices, const char *gpu_bind,
					     unsigned ntasks, struct jobcg_step_gres **ret);

#ifdef __cplusplus
}
#endif
