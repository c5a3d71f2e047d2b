/* jobcg internal: the job's freeze lock, which serialises freezes and kills with launches. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct jobcg_ctx;

/* How job_lock() holds the job's lock. */
enum job_lock_mode {
	/* A launch, from its frozen check until its tasks have exec'ed: it first waits while a
	 * freeze waiting for its turn says so on the locked file (joblock.c). */
	JOB_LOCK_SHARED,
	/* A kill while it kills. */
	JOB_LOCK_EXCLUSIVE,
	/* A freeze while it freezes: exclusive, and while it waits no new launch begins. */
	JOB_LOCK_FREEZE,
};

/*
 * The job's freeze lock: shared for a spawner, from its frozen check until its tasks have
 * exec'ed; exclusive for a freeze while it freezes, and for a kill while it kills. A flock on a
 * file only root (jobcg's user) can open: any file a user can open is one they can hold locked,
 * stalling every launch and freeze of the job. That file is the job's cgroup.kill (write-only,
 * root's), and on a kernel without it (before 5.14) <StateDir>/locks/job_<id> (mode 0600 in a
 * directory of mode 0700). flock gives an exclusive waiter no priority, so a freeze that must
 * wait marks its turn in a trusted.* xattr of that file, and spawners wait for a mark in force
 * (its freezer alive and within its timeout) to go before they lock; without xattrs they never
 * wait so.
 *
 * @job_dir: the job's directory; NULL: tree_job_dir() of @ctx. @ctx may be NULL only with
 * @job_dir (jobcg_step_run_dir() given none): then a kernel without cgroup.kill takes no lock.
 * Tried without blocking, 1 ms doubling to 50 ms apart, for at most @timeout_ms (a launch's
 * wait for a freeze's turn included). The descriptor holding it in *ret_fd (closing it drops
 * the lock), -1 there when no lock is taken. -ETIMEDOUT without an error record, the holder
 * (for a launch, the freeze whose turn it waited for, if any) in *ret_holder when @ret_holder is
 * given (may be NULL: none found), for the caller's message; any other failure -errno with one.
 */
int job_lock(struct jobcg_ctx *ctx, const char *job_dir, uint32_t job_id, enum job_lock_mode mode,
	     unsigned timeout_ms, int *ret_fd, char **ret_holder);

/* Once job @job_id's directory is gone, under the node lock: its lock file, unless someone
 * holds it or waits for it (then gc removes it later). Nothing when there is none. */
void job_lock_remove(struct jobcg_ctx *ctx, uint32_t job_id);

/* gc, under the node lock: the lock files of jobs that no longer exist. 0 or -errno with the
 * error record (a locks directory that is not root's). */
int job_locks_gc(struct jobcg_ctx *ctx);

/* teardown, under the node lock, once every job is gone: the lock files and their directory. */
void job_locks_remove_all(struct jobcg_ctx *ctx);

/* A freeze's turn mark on a job's lock file, "PID:STARTTIME DEADLINE" (trusted.jobcg.freezing):
 * its freezer (PID:STARTTIME, to free(), to check with tree_runner_alive()), that freezer's pid
 * and the end of its wait (CLOCK_MONOTONIC microseconds). -EINVAL for a mark not so. */
int joblock_mark_parse(const char *mark, char **ret_who, int *ret_pid, uint64_t *ret_deadline);
