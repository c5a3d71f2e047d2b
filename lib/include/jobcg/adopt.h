/* jobcg: adopt a process from outside (a login session) into a job, like pam_slurm_adopt. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobcg/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The job a login of @uid would go to: the newest job (highest recorded creation time, then
 * highest id) whose recorded owner is @uid, leaving out jobs that are not completely created,
 * jobs being released and ephemeral jobs (`jobcg run`'s own, which end with it). -ENOENT with
 * the error record saying so when @uid has no such job on this node. The answer may be stale
 * once the node lock is dropped: to adopt, use jobcg_adopt_user(), which chooses and moves in
 * one hold of the lock.
 */
JOBCG_EXPORT int jobcg_adopt_pick_job(struct jobcg_ctx *ctx, uid_t uid, uint32_t *ret_job);

/**
 * Move @pid (and, as the kernel does, not its existing children) into job @job_id's extern
 * step, in its user/task_special leaf. The extern step is made when missing; it then belongs
 * to the job (no runner: gc leaves it, `jobcg release` removes it). Not in a job jobcg_spank.so
 * made (JOBCG_JOB_SLURM), which ends with its last Slurm step: there only the extern step
 * Slurm's slurmstepd made (PrologFlags=Contain) takes logins, -ENOENT without it. The job is
 * checked and the process moved in one hold of the node lock, so a concurrent release either finds
 * the process in the job (and kills it) or the adoption is refused; afterwards the process's cgroup
 * is read back. The process is the one that has @pid when this is called (a pidfd is taken): when
 * it ends before the move is confirmed, and the pid moved may have been another process's, that pid
 * is put back in the cgroup it was in and -ESRCH returned. A job in a reservation with a user list
 * must name the process's (real) user. -ENOENT if there is no such job, -EBUSY if it is not
 * completely created, -ESHUTDOWN if it is being released, -ESRCH if there is no such process,
 * -EPERM for pid 1, a kernel thread or a user the job's reservation does not list.
 */
JOBCG_EXPORT int jobcg_adopt(struct jobcg_ctx *ctx, pid_t pid, uint32_t job_id);

/**
 * jobcg_adopt() of the process @pidfd refers to (pidfd_open(2)): a caller that learnt the pid
 * earlier (a parent's, by getppid()) opens the pidfd and checks the pid is still the one it
 * meant, so that the process moved is that one and not a later holder of its pid.
 */
JOBCG_EXPORT int jobcg_adopt_pidfd(struct jobcg_ctx *ctx, int pidfd, uint32_t job_id);

/**
 * jobcg_adopt() into the job jobcg_adopt_pick_job() chooses for @uid, chosen and adopted in one
 * hold of the node lock. The job goes to @ret_job (may be NULL). A reservation's user list must
 * name @uid, the user the login is for, whoever runs the process moved (sshd runs as root).
 */
JOBCG_EXPORT int jobcg_adopt_user(struct jobcg_ctx *ctx, pid_t pid, uid_t uid, uint32_t *ret_job);

/** jobcg_adopt_user() of the process @pidfd refers to, as jobcg_adopt_pidfd(). */
JOBCG_EXPORT int jobcg_adopt_user_pidfd(struct jobcg_ctx *ctx, int pidfd, uid_t uid,
					uint32_t *ret_job);

/**
 * Which job process @pid is in, from /proc/<pid>/cgroup: 1 with the job to @ret_job when its
 * cgroup is a job's or below one under this context's tree root, 0 when it is elsewhere. The
 * process's cgroup (absolute path) goes to @ret_cgroup either way when not NULL (free() it).
 * -ESRCH if there is no such process.
 */
JOBCG_EXPORT int jobcg_pid_job(struct jobcg_ctx *ctx, pid_t pid, uint32_t *ret_job,
			       char **ret_cgroup);

/** The real uid of process @pid (from /proc/<pid>/status). -ESRCH if there is no such process. */
JOBCG_EXPORT int jobcg_pid_uid(pid_t pid, uid_t *ret);

/** What a PAM service's stack does that matters to `jobcg adopt --pam`. */
struct jobcg_pam_scan {
	char *file;	     /* the service's own file, as read */
	char *adopt_account; /* "FILE:LINE" of the first account line running `jobcg adopt --pam` */
	char *adopt_session; /* the same for a session line (the check after the session modules) */
	char *pam_systemd;   /* "FILE:LINE (included from ...)" of the first session line that
			      * loads pam_systemd.so: logind would move the login out of its job */
	char *user_env;	     /* the same for the first auth line, or session line before
			      * adopt_session, running pam_env.so with user_readenv=1: a user's
			      * ~/.pam_environment reaches the session line, LD_PRELOAD included */
	char *adopt_exe;     /* the program the first `jobcg adopt --pam` line runs */
	char **notes;	     /* included files that could not be read (NULL when none) */
};

/**
 * Read PAM service @service's stack from @pam_dir (NULL: /etc/pam.d), following @include,
 * include and substack lines, and say where jobcg adopt and pam_systemd run in it (NULL where
 * they do not). Jumps ([success=N]) are not followed: a line is counted when it is in the
 * stack. -ENOENT (error record set) when the service has no file. Free with
 * jobcg_pam_scan_free().
 */
JOBCG_EXPORT int jobcg_pam_scan(const char *pam_dir, const char *service,
				struct jobcg_pam_scan **ret);
JOBCG_EXPORT void jobcg_pam_scan_free(struct jobcg_pam_scan *s);

#ifdef __cplusplus
}
#endif
