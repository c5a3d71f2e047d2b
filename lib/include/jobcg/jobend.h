/* jobcg: ending steps and jobs with their accounting records (the release facade). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "jobcg/acctlog.h"
#include "jobcg/context.h"
#include "jobcg/job.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Release job @job: if processes remain, SIGTERM them and wait up to @grace_ms for them to go
 * (woken by cgroup.events; a frozen job gets no SIGTERM), then SIGKILL what remains; read the job's
 * final accounting; remove the job (device grants revoked, GPUs freed with the directories, cgroups
 * removed); append the job's record to the accounting log. State: CANCELLED when processes had to
 * be ended, OUT_OF_MEMORY when the job saw an OOM kill, else COMPLETED. *ret (may be NULL) gets the
 * record (free its strings with jobcg_acct_record_done()). -ENOENT when there is no such job.
 * A failure to write the log is logged, not returned: the job is gone either way.
 */
JOBCG_EXPORT int jobcg_job_release(struct jobcg_ctx *ctx, uint32_t job, unsigned grace_ms,
				   struct jobcg_acct_record *ret);

/**
 * Append the record of step @step of @job that has just ended (its tasks are gone, its
 * cgroup still exists): readings from the step's cgroup, exit status from @res (NULL: nothing
 * was run, failed to start), GPUs from its xattr. @start_usec is CLOCK_REALTIME.
 */
JOBCG_EXPORT int jobcg_step_record(struct jobcg_ctx *ctx, uint32_t job, const char *step,
				   uint64_t start_usec, unsigned ntasks,
				   const struct jobcg_run_result *res, int start_error,
				   struct jobcg_acct_record *ret);

/** CLOCK_REALTIME in microseconds. */
JOBCG_EXPORT uint64_t jobcg_realtime_usec(void);

#ifdef __cplusplus
}
#endif
