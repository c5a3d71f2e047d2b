/* jobcg: adopt a process from outside (a login session) into a job, like pam_slurm_adopt. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "jobcg/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The job a login of @uid belongs to: the newest job (highest recorded creation time, then
 * highest id) whose recorded owner is @uid. -ENOENT with the error record saying so when
 * @uid owns no job on this node.
 */
JOBCG_EXPORT int jobcg_adopt_pick_job(struct jobcg_ctx *ctx, uid_t uid, uint32_t *ret_job);

/**
 * Move @pid (and, as the kernel does, not its existing children) into job @job_id's extern
 * step, in its user/task_special leaf. The extern step is made when missing; it then belongs
 * to the job (no runner: gc leaves it, `jobcg release` removes it). -ENOENT if there is no
 * such job, -ESRCH if there is no such process.
 */
JOBCG_EXPORT int jobcg_adopt(struct jobcg_ctx *ctx, pid_t pid, uint32_t job_id);

/** The real uid of process @pid (from /proc/<pid>/status). -ESRCH if there is no such process. */
JOBCG_EXPORT int jobcg_pid_uid(pid_t pid, uid_t *ret);

#ifdef __cplusplus
}
#endif
