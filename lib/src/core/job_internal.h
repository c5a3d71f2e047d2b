/* jobcg internal: what job.c offers jobend.c and steplife.c (a release's mark, a step's removal),
 * and jobend.c teardown.c (a release in phases). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "context_internal.h"

/* How a job's removal ended it, the first word of its "removing" mark. */
enum outcome { OUT_COMPLETED, OUT_CANCELLED, OUT_LOST, OUT_FAILED, OUT_UNMADE };

/* Parse a job's "removing" mark, "OUTCOME PID:STARTTIME" (a trusted.jobcg.* xattr): its remover
 * (a suffix of @mark, NULL for a mark of an older jobcg ("1") or one not ours) and how it ends
 * the job (OUT_LOST when unsaid). */
void job_removing_parse(const char *mark, enum outcome *ret_outcome, const char **ret_remover);

/*
 * Mark job @job_id "removing" as cancelled by the calling process, under the node lock: from
 * then on no step or process may enter it, list shows it releasing, gc leaves it to this
 * process (and finishes it, CANCELLED, if this process dies), and another remover is refused.
 * -ENOENT: no such job; -EINPROGRESS: another live process is removing it (error set).
 */
int job_mark_releasing(struct jobcg_ctx *ctx, uint32_t job_id);

/*
 * Whether a live process other than this one (or the runner it acts for, jobcg_set_runner())
 * is removing job @job_id: its "removing" mark names that remover. A mark left by a remover
 * that died is not: the job's next remover takes it over.
 */
bool job_removal_by_another(struct jobcg_ctx *ctx, uint32_t job_id);

/*
 * Under the node lock: kill what is left in step @step_id of job @job_id and remove it. The
 * lock may be let go while processes die: -ENOENT (error set) when the step was gone, or went
 * meanwhile (with its job, whose removal wrote its record).
 */
int step_remove_locked(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id);

/*
 * jobcg_step_remove() of a step whose creator failed before its first task (no record names
 * it): a name (batch, extern...) may then be made again in the job. A number stays counted.
 */
int step_remove_unborn(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id);

/*
 * jobcg_job_remove() after a grace period: @grace_sig was sent to the job and @grace_steps
 * (NULL-terminated, may be NULL) were the steps that had processes then. A step recorded by
 * the removal (its runner lost the race to its end) gets the signal that ended it: SIGKILL if
 * it still had processes when the removal killed them, else @grace_sig if it had them then,
 * as its runner would have recorded.
 */
int job_remove_after_grace(struct jobcg_ctx *ctx, uint32_t job_id, unsigned flags, int grace_sig,
			   char *const *grace_steps);

/* A release under way: the job marked, its processes sent SIGTERM, its grace period running. */
struct job_grace {
	uint32_t job;
	char *dir;	/* the job's directory, whose "populated" the grace waits on */
	unsigned flags; /* for jobcg_job_remove(): CANCELLED once processes had to be ended */
	int sig;	/* SIGTERM when it was sent (not to a frozen job, nor without @term) */
	char **running; /* the steps that had processes then */
};

/*
 * The first half of jobcg_job_release(): mark job @job as this process's release (when it has
 * processes) and, with @term and unless it is frozen, send them SIGTERM. @flags are the
 * removal's own (JOBCG_JOB_REMOVE_*). The caller waits, then calls job_grace_end() and
 * job_grace_done(). Errors as jobcg_job_release()'s (-ENOENT, -EINPROGRESS).
 */
int job_grace_begin(struct jobcg_ctx *ctx, uint32_t job, unsigned flags, bool term,
		    struct job_grace *ret);
/* The second half: remove the job (killing what is left) with the records its grace implies. */
int job_grace_end(struct jobcg_ctx *ctx, struct job_grace *g);
void job_grace_done(struct job_grace *g);
