/* jobcg internal: putting a process into a job, shared by procs.c and adopt.c. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "context_internal.h"

/*
 * Under the node lock: job @job_id exists, was created completely (its "created" mark) and is
 * not being removed (no "removing" mark). -ENOENT, -EBUSY (half created) or -ESHUTDOWN (being
 * released), with the error record saying which.
 */
int job_accepts_procs_locked(struct jobcg_ctx *ctx, uint32_t job_id);
/*
 * Under the node lock and after job_accepts_procs_locked() in the same hold: move @pid into a
 * task of an existing step, making the task directory when missing.
 */
int task_add_pid_locked(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id, int task,
			pid_t pid);

/*
 * Whether /proc/<pid>/stat text @stat is a kernel thread's: 1 (PF_KTHREAD in its flags), 0 (a
 * user process), -EINVAL when the text does not parse.
 */
int proc_stat_is_kthread(const char *stat);
/*
 * Whether @pid may be moved into a job at all: -EPERM for pid 1 and kernel threads (never a
 * client's process; moving them would put the node's own machinery under a job's limits and
 * its cgroup.kill), -ESRCH when there is no such process, -EINVAL for pid <= 0.
 */
int pid_movable(pid_t pid);

/* Signals jobcg_target_note_signal() noted on a job or step, a mask (bit N-1: signal N). */
#define SIGNALLED_XATTR "trusted.jobcg.signalled"
/*
 * Whether a task whose wait status is among @status[0..n) died of a signal noted on its step
 * (@step_dir) or job: its step is then CANCELLED, as Slurm's scancel makes it. The marks are
 * read only when a task died of a signal.
 */
bool target_died_of_noted(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_dir,
			  const int *status, unsigned n);
