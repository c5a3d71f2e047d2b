/* jobcg: a step's life as `jobcg run` lives it, for every launcher that links the library: begun
 * (created, limited, given its GPUs), its tasks run by the caller, ended (accounted, recorded,
 * its devices revoked, removed). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "jobcg/acct.h"
#include "jobcg/job.h"
#include "jobcg/jobgres.h"
#include "jobcg/oom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a step asks of its job. Zero/NULL fields: the defaults named. */
struct jobcg_step_request {
	const char *step_id;			/* NULL: the lowest free number */
	const struct jobcg_step_limits *limits; /* NULL: the job's (jobcg_step_create_limited()) */
	const char *gres;     /* its devices, "gpu:1" (a subset of the job's, not shared with
				 steps that asked for theirs); NULL: all of the job's, shared */
	const char *gpu_bind; /* --gpu-bind syntax; NULL: tasks are not bound */
	unsigned ntasks;      /* 0: 1 */
};

/*
 * A begun step: everything jobcg_step_end() needs. It may be handed to another process (what
 * `jobcg daemon` tells its client): fill job, step, ntasks, start_usec and job_before there and
 * leave gres NULL.
 */
struct jobcg_step_life {
	uint32_t job;
	char step[JOBCG_STEP_ID_MAX];
	unsigned ntasks;
	uint64_t start_usec; /* CLOCK_REALTIME microseconds at the begin: the record's start */
	struct jobcg_acct job_before; /* the job's memory.events before the step (its oom count) */
	struct jobcg_step_gres *gres; /* jobcg_step_gres_task_env(): each task's CUDA/ROCm
					 variables; NULL when begun elsewhere */
};

/**
 * Begin a step of the existing job @job: create it (with @req's limits; @req NULL: every
 * default, one task), give it its devices and each task's environment, note the job's OOM
 * count and the start time. Nothing is left behind on failure. -EINVAL when the request
 * cannot fit the job at all (step limits beyond the job's, a malformed gres or gpu_bind: the
 * message names the `jobcg run` option); the errors of jobcg_step_create_limited() and
 * jobcg_step_gres_setup() otherwise (-ENOENT: no such job, -ESHUTDOWN: the job is being
 * released, -EPERM: another process's ephemeral job, -E2BIG/-EBUSY: not enough of the job's
 * devices free).
 */
JOBCG_EXPORT int jobcg_step_begin(struct jobcg_ctx *ctx, uint32_t job,
				  const struct jobcg_step_request *req,
				  struct jobcg_step_life *ret);

/* Flags of jobcg_step_end(). */
enum {
	/* Nobody saw the tasks end (their runner went away): kill what is left of the step and
	 * record it as NODE_FAIL, as `jobcg gc` would. */
	JOBCG_STEP_END_LOST = 1u << 0,
};

/* How a step ended, as far as its cgroups tell. */
struct jobcg_step_outcome {
	bool have_acct;		  /* acct was read */
	struct jobcg_acct acct;	  /* the step's readings at its end */
	bool recorded;		  /* its record is in the accounting log */
	enum jobcg_oom_cause oom; /* whether, and by whose limit, its processes were OOM-killed */
	bool job_oom;		  /* the job has OOM kills: its own state will be OUT_OF_MEMORY */
	bool job_gone;		  /* the job was released while the step ran and took the step */
	bool cancelled; /* its record says CANCELLED (a forwarded signal, jobcg signal/kill, a
			 * release): what a caller reporting its state must say too */
};

/**
 * End a step begun with jobcg_step_begin(), after its tasks have ended (jobcg_step_run()
 * returned): read its accounting, classify any OOM kill, append its record to the accounting
 * log (CANCELLED when the job is being released or jobcg_step_run() forwarded the signal that
 * ended it), revoke its devices, remove it. @res is what jobcg_step_run() gave; NULL when the
 * tasks never ran (nothing is recorded). Every part is tried even when one fails. The record is
 * written once the step's directory is gone, under the node lock: a release that took the step
 * with its job wrote the step's record itself (job_gone, nothing recorded here). A step found
 * gone in a job that is still there and that no live process is removing (an earlier ender of
 * this step, a `jobcg daemon`, died after its rmdir) is not job_gone: its record waits on the
 * job's directory, and the job's removal (or gc) writes it.
 * Returns 0 once the step is gone (removed, or taken with its released job), and fills @ret
 * (may be NULL); a reading, record or revocation that failed is sent to the log callback as an
 * error and shows in @ret. -errno when the step could not be removed. Frees life->gres.
 */
JOBCG_EXPORT int jobcg_step_end(struct jobcg_ctx *ctx, struct jobcg_step_life *life,
				const struct jobcg_run_result *res, unsigned flags,
				struct jobcg_step_outcome *ret);

#ifdef __cplusplus
}
#endif
