/* jobcg: ending a job the way a scheduler does (SIGTERM, grace period, SIGKILL, removal). */
#pragma once

#include <stdint.h>

#include "jobcg/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Release job @job: if processes remain and the job is not frozen, SIGTERM them and wait up to
 * @grace_ms for them to go (woken by cgroup.events, no polling); then remove the job with
 * jobcg_job_remove(), which kills what remains, appends the job's accounting record (CANCELLED
 * when processes had to be ended), revokes the device grants (freeing the GPUs, whose state is
 * the job directory's xattr) and removes the cgroups. The job is marked first, under the node
 * lock, as this process's release: gc leaves it alone during the grace period (and finishes it,
 * CANCELLED, if this process dies). -ENOENT when there is no such job; -EINPROGRESS when
 * another live process is releasing it.
 */
JOBCG_EXPORT int jobcg_job_release(struct jobcg_ctx *ctx, uint32_t job, unsigned grace_ms);

#ifdef __cplusplus
}
#endif
