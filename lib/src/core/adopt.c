/*
 * jobcg: adopting a login session into a job (pam_slurm_adopt's job): pick the user's newest
 * job and put the process into the job's extern step, so that whatever the user starts over ssh
 * is limited and accounted with the job and killed with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "adopt_internal.h"
#include "cgroupfs.h"
#include "jobcg/adopt.h"
#include "jobcg/job.h"
#include "job_internal.h"
#include "log.h"
#include "resv_internal.h"
#include "procs.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

long adopt_choose(const struct adopt_candidate *c, size_t n, uid_t uid)
{
	long best = -1;

	for (size_t i = 0; i < n; i++) {
		if (!c[i].have_owner || c[i].uid != uid || !c[i].joinable)
			continue;
		if (best < 0 || c[i].created_sec > c[best].created_sec ||
		    (c[i].created_sec == c[best].created_sec && c[i].id > c[best].id))
			best = (long)i;
	}
	return best;
}

int adopt_parse_status_uid(const char *status, uid_t *ret)
{
	for (const char *p = status; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		const char *end;
		uint64_t v;

		if (!startswith(p, "Uid:"))
			continue;
		p += 4;
		p += strspn(p, " \t");
		/* "Uid:\tREAL\tEFFECTIVE\t...": the real uid, followed by a blank or the end. */
		if (parse_u64_prefix(p, (uid_t)-2, &v, &end) < 0 ||
		    (*end && *end != '\t' && *end != ' ' && *end != '\n'))
			return -EINVAL;
		*ret = (uid_t)v;
		return 0;
	}
	return -EINVAL;
}

int adopt_parse_proc_cgroup(const char *text, char **ret)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		size_t len = strcspn(p, "\n");
		char *path;

		if (!startswith(p, "0::/"))
			continue;
		path = strndup(p + 3, len - 3);
		if (!path)
			return -ENOMEM;
		*ret = path;
		return 0;
	}
	return -EINVAL;
}

int adopt_job_of_path(const char *root, const char *path, uint32_t *ret)
{
	size_t n = strlen(root);
	char name[48];
	const char *rest, *resv;
	size_t len;
	uint32_t id;

	if (strncmp(path, root, n) != 0 || path[n] != '/')
		return 0;
	rest = path + n + 1;
	len = strcspn(rest, "/");
	if (len >= sizeof(name))
		return 0;
	memcpy(name, rest, len);
	name[len] = '\0';
	if (tree_parse_resv_dirname(name, &resv) == 0 && rest[len] == '/') {
		/* A job inside a reservation: resv_<name>/job_<id>. */
		rest += len + 1;
		len = strcspn(rest, "/");
		if (len >= sizeof(name))
			return 0;
		memcpy(name, rest, len);
		name[len] = '\0';
	}
	if (tree_parse_job_dirname(name, &id) < 0)
		return 0;
	*ret = id;
	return 1;
}

JOBCG_EXPORT int jobcg_pid_uid(pid_t pid, uid_t *ret)
{
	return_if_null(ret);
	char path[64];
	_cleanup_free_ char *text = NULL;
	int r;

	if (pid <= 0)
		return error_set(-EINVAL, "invalid pid %d", (int)pid);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	r = read_full_file_at(AT_FDCWD, path, 1 << 16, &text, NULL);
	if (r == -ENOENT)
		return error_set(-ESRCH, "no process %d", (int)pid);
	if (r < 0)
		return error_set(r, "cannot read %s: %s", path, strerror(-r));
	r = adopt_parse_status_uid(text, ret);
	if (r < 0)
		return error_set(r, "%s has no Uid line", path);
	return 0;
}

/* The absolute cgroup v2 directory of @pid. */
static int pid_cgroup(struct jobcg_ctx *ctx, pid_t pid, char **ret)
{
	_cleanup_free_ char *text = NULL, *rel = NULL;
	char path[64];
	int r;

	if (pid <= 0)
		return error_set(-EINVAL, "invalid pid %d", (int)pid);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	r = read_full_file_at(AT_FDCWD, path, 1 << 16, &text, NULL);
	if (r == -ENOENT || r == -ESRCH)
		return error_set(-ESRCH, "no process %d", (int)pid);
	if (r < 0)
		return error_set(r, "cannot read %s: %s", path, strerror(-r));
	r = adopt_parse_proc_cgroup(text, &rel);
	if (r == -EINVAL)
		return error_set(-EINVAL, "%s has no cgroup v2 line", path);
	if (r < 0)
		return r;
	*ret = streq(rel, "/") ? strdup(jobcg_ctx_mount(ctx))
			       : cgfs_path(jobcg_ctx_mount(ctx), rel + 1);
	return *ret ? 0 : -ENOMEM;
}

JOBCG_EXPORT int jobcg_pid_job(struct jobcg_ctx *ctx, pid_t pid, uint32_t *ret_job,
			       char **ret_cgroup)
{
	_cleanup_free_ char *cg = NULL;
	uint32_t id = 0;
	int r, in;

	r = pid_cgroup(ctx, pid, &cg);
	if (r < 0)
		return r;
	in = adopt_job_of_path(jobcg_ctx_root(ctx), cg, &id);
	if (in && ret_job)
		*ret_job = id;
	if (ret_cgroup)
		*ret_cgroup = TAKE_PTR(cg);
	return in;
}

static int job_joinable(struct jobcg_ctx *ctx, const struct jobcg_job_info *info)
{
	_cleanup_free_ char *v = NULL;
	int r;

	if (info->ephemeral)
		return 0;
	if (!ctx->info->xattr.supported)
		return 1;
	/* A Slurm job takes logins only into slurmstepd's extern step (adopt_locked()): one
	 * without it yet (its first moments) is no candidate, another job of the user may be. */
	if (info->slurm) {
		_cleanup_free_ char *sdir = tree_step_dir(ctx, info->id, "extern");

		if (!sdir)
			return -ENOMEM;
		if (access(sdir, F_OK) < 0)
			return 0;
	}
	r = jobcg_job_xattr_get(ctx, info->id, "created", &v);
	if (r == -ENODATA || r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	free(v);
	v = NULL;
	r = jobcg_job_xattr_get(ctx, info->id, "removing", &v);
	if (r == 0 || r == -ENOENT)
		return 0;
	return r == -ENODATA ? 1 : r;
}

/* Under the node lock. */
static int pick_locked(struct jobcg_ctx *ctx, uid_t uid, uint32_t *ret_job)
{
	_cleanup_free_ uint32_t *ids = NULL;
	_cleanup_free_ struct adopt_candidate *c = NULL;
	size_t n = 0, m = 0;
	long best;
	int r;

	r = jobcg_job_list(ctx, &ids, &n);
	if (r < 0)
		return r;
	c = calloc(n ? n : 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct jobcg_job_info *info = NULL;
		int j;

		/* A job released meanwhile is simply not a candidate. */
		if (jobcg_job_info_get(ctx, ids[i], &info) < 0)
			continue;
		j = job_joinable(ctx, info);
		c[m++] = (struct adopt_candidate){.id = info->id,
						  .have_owner = info->have_owner,
						  .uid = info->uid,
						  .created_sec = info->created_sec,
						  .joinable = j > 0};
		jobcg_job_info_free(info);
		if (j < 0)
			return j;
	}
	best = adopt_choose(c, m, uid);
	if (best < 0)
		return error_set(-ENOENT, "user %u has no job on this node: access refused",
				 (unsigned)uid);
	*ret_job = c[best].id;
	return 0;
}

JOBCG_EXPORT int jobcg_adopt_pick_job(struct jobcg_ctx *ctx, uid_t uid, uint32_t *ret_job)
{
	int r = jobcg_ctx_lock(ctx);

	if (r < 0)
		return r;
	r = pick_locked(ctx, uid, ret_job);
	jobcg_ctx_unlock(ctx);
	return r;
}

int adopt_parse_fdinfo_pid(const char *text, pid_t *ret)
{
	const char *p = strstr(text, "\nPid:"), *end;
	bool ended;
	uint64_t v;

	/* The kernel's "Pid:\t%d" line: blanks, then a number on the line itself (sscanf would
	 * also skip a line break and take a sign or trailing text). */
	if (!p)
		return -EBADF;
	p += strlen("\nPid:");
	p += strspn(p, " \t");
	ended = *p == '-';
	if (parse_u64_prefix(p + ended, INT32_MAX, &v, &end) < 0 || (*end && *end != '\n') ||
	    v == 0)
		return -EBADF;
	if (ended)
		return -ESRCH;
	*ret = (pid_t)v;
	return 0;
}

/* The pid @pidfd refers to, from its fdinfo. */
static int pidfd_pid(int pidfd, pid_t *ret)
{
	_cleanup_free_ char *text = NULL;
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	r = read_full_file_at(AT_FDCWD, path, 1 << 16, &text, NULL);
	if (r < 0)
		return error_set(r, "cannot read %s: %s", path, strerror(-r));
	r = adopt_parse_fdinfo_pid(text, ret);
	if (r == -ESRCH)
		return error_set(r, "the process of pidfd %d has ended", pidfd);
	if (r < 0)
		return error_set(r, "fd %d is not a pidfd", pidfd);
	return 0;
}

/*
 * Does the process @pidfd refers to still hold its pid? A zombie does: its pid is freed only
 * when it is reaped, so nothing else can have it yet.
 */
static bool pidfd_alive(int pidfd)
{
#ifdef SYS_pidfd_send_signal
	return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno != ESRCH;
#else
	(void)pidfd;
	return true;
#endif
}

/* A pidfd for @pid; -ENOSYS where the kernel has none (before Linux 5.3). */
static int pid_open(pid_t pid, int *ret)
{
	int fd = -1;

#ifdef SYS_pidfd_open
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
#endif
	if (fd >= 0) {
		*ret = fd;
		return 0;
	}
	if (errno == ENOSYS)
		return -ENOSYS;
	if (errno == ESRCH)
		return error_set(-ESRCH, "no process %d", (int)pid);
	if (errno == EINVAL)
		return error_set(-EINVAL, "%d is not a process id (a thread's?)", (int)pid);
	return error_set(negative_errno(), "pidfd_open(%d): %s", (int)pid, strerror(errno));
}

/*
 * The process moved was not @pidfd's (it ended and its pid was taken by another, which a
 * write to cgroup.procs cannot tell): put the pid back where it was read to be, if it is in
 * the job's task directory @tdir, where we put it.
 */
static void adopt_undo(struct jobcg_ctx *ctx, pid_t pid, const char *from, const char *tdir)
{
	_cleanup_free_ char *now = NULL;
	int r;

	if (pid_cgroup(ctx, pid, &now) < 0 || !streq(now, tdir))
		return;
	r = cgfs_move_pid(from, pid);
	if (r < 0)
		log_error("pid %d, not the process adopted, is left in %s: cannot move it back to "
			  "%s: %s",
			  (int)pid, tdir, from, strerror(-r));
	else
		log_warning("pid %d, not the process adopted, moved back to %s", (int)pid, from);
}

/*
 * Under the node lock: check the job, make its extern step, move the process, read it back.
 * @pidfd (-1: none) is the process meant: the pid written could be another's once it ended.
 * @check_uid is the user whom a reservation's user list must name ((uid_t)-1: the process's).
 */
static int adopt_locked(struct jobcg_ctx *ctx, pid_t pid, int pidfd, uint32_t job_id,
			uid_t check_uid)
{
	_cleanup_free_ char *sdir = NULL, *tdir = NULL, *now = NULL, *from = NULL;
	bool made = false;
	uid_t uid;
	int r;

	/* The kernel would move init; a login is never pid 1, and a wrong pid must not be. */
	r = pid_movable(pid);
	if (r < 0)
		return r;
	r = jobcg_pid_uid(pid, &uid);
	if (r < 0)
		return r;
	/* Alive after its uid was read: that uid is the process's. */
	if (pidfd >= 0 && !pidfd_alive(pidfd))
		return error_set(-ESRCH, "process %d has ended", (int)pid);
	r = job_accepts_procs_locked(ctx, job_id);
	if (r < 0)
		return r;
	r = resv_user_check(ctx, job_id, check_uid == (uid_t)-1 ? uid : check_uid);
	if (r < 0)
		return r;
	sdir = tree_step_dir(ctx, job_id, "extern");
	tdir = tree_task_dir(ctx, job_id, "extern", JOBCG_TASK_SPECIAL);
	if (!sdir || !tdir)
		return -ENOMEM;
	if (access(sdir, F_OK) < 0) {
		_cleanup_free_ char *mark = NULL;

		/* A Slurm job's steps are its slurmstepds': it leaves the node with the last of
		 * them, which a step of ours would keep from happening. The login would outlive
		 * the Slurm job, holding the job's GPUs against the next job given them. Its
		 * logins go into the extern step slurmstepd makes (PrologFlags=Contain), as
		 * pam_slurm_adopt's do. */
		r = jobcg_job_xattr_get(ctx, job_id, "slurm", &mark);
		if (r == 0)
			return error_set(-ENOENT,
					 "Slurm's job %u has no extern step on this node to adopt "
					 "a login into: slurm.conf needs PrologFlags=Contain",
					 job_id);
		jobcg_error_clear();
		r = jobcg_step_create(ctx, job_id, "extern", JOBCG_STEP_NO_RUNNER, NULL);
		if (r < 0)
			return r;
		made = true;
	}
	test_pause("adopt-before-move");
	/* Still the same hold of the lock: no release can have marked the job meanwhile, but
	 * the process is checked where it is moved, whoever changes the code around this. */
	r = job_accepts_procs_locked(ctx, job_id);
	if (r >= 0)
		r = pid_cgroup(ctx, pid, &from);
	if (r >= 0)
		r = task_add_pid_locked(ctx, job_id, "extern", JOBCG_TASK_SPECIAL, pid);
	if (r < 0) {
		/* Nothing was moved (the process ended meanwhile): the extern step made for it
		 * goes again, unrecorded, as though this adopt had not run. */
		if (made) {
			struct jobcg_error saved = *jobcg_last_error();
			int k = step_remove_unborn(ctx, job_id, "extern");

			if (k < 0)
				log_warning("job %u: the extern step made for pid %d is left: %s",
					    job_id, (int)pid, jobcg_last_error()->message);
			jobcg_error_restore(&saved);
		}
		return r;
	}
	/* The process still holds its pid after the move: the pid moved was its own. Else the
	 * one moved (if any) is another that took the pid, and goes back. */
	if (pidfd >= 0 && !pidfd_alive(pidfd)) {
		adopt_undo(ctx, pid, from, tdir);
		return error_set(-ESRCH, "process %d ended while being adopted into job %u",
				 (int)pid, job_id);
	}
	/* Read back: the process is where it was put (not one moved away again at once; where
	 * there is no pidfd, not a pid that ended and was reused by a process elsewhere). */
	r = pid_cgroup(ctx, pid, &now);
	if (r < 0)
		return r;
	if (!streq(now, tdir))
		return error_set(-EXDEV, "pid %d is in %s right after being moved into %s",
				 (int)pid, now, tdir);
	log_info("adopted pid %d (uid %u) into job %u, step extern", (int)pid, (unsigned)uid,
		 job_id);
	return 0;
}

JOBCG_EXPORT int jobcg_adopt_pidfd(struct jobcg_ctx *ctx, int pidfd, uint32_t job_id)
{
	pid_t pid = 0;
	int r = pidfd_pid(pidfd, &pid);

	if (r < 0)
		return r;
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	r = adopt_locked(ctx, pid, pidfd, job_id, (uid_t)-1);
	jobcg_ctx_unlock(ctx);
	return r;
}

JOBCG_EXPORT int jobcg_adopt_user_pidfd(struct jobcg_ctx *ctx, int pidfd, uid_t uid,
					uint32_t *ret_job)
{
	uint32_t job = 0;
	pid_t pid = 0;
	int r = pidfd_pid(pidfd, &pid);

	if (r < 0)
		return r;
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	/* Chosen and joined in one hold: a job picked here cannot start its release before the
	 * process is in it. The job is @uid's own, and @uid (a login's user, not the sshd
	 * process moved) is whom a reservation's user list must name. */
	r = pick_locked(ctx, uid, &job);
	if (r >= 0)
		r = adopt_locked(ctx, pid, pidfd, job, uid);
	jobcg_ctx_unlock(ctx);
	if (r >= 0 && ret_job)
		*ret_job = job;
	return r;
}

/* jobcg_adopt() and jobcg_adopt_user(): @pid checked, and a pidfd for it (-ENOSYS: none). */
static int adopt_pid_open(pid_t pid, int *ret)
{
	if (pid == 1)
		return error_set(-EPERM, "pid 1 is never adopted into a job");
	if (pid <= 0)
		return error_set(-EINVAL, "invalid pid %d", (int)pid);
	return pid_open(pid, ret);
}

JOBCG_EXPORT int jobcg_adopt(struct jobcg_ctx *ctx, pid_t pid, uint32_t job_id)
{
	_cleanup_close_ int fd = -EBADF;
	int r;

	r = adopt_pid_open(pid, &fd);
	if (r >= 0)
		return jobcg_adopt_pidfd(ctx, fd, job_id);
	if (r != -ENOSYS)
		return r;
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	r = adopt_locked(ctx, pid, -1, job_id, (uid_t)-1);
	jobcg_ctx_unlock(ctx);
	return r;
}

JOBCG_EXPORT int jobcg_adopt_user(struct jobcg_ctx *ctx, pid_t pid, uid_t uid, uint32_t *ret_job)
{
	_cleanup_close_ int fd = -EBADF;
	uint32_t job = 0;
	int r;

	r = adopt_pid_open(pid, &fd);
	if (r >= 0)
		return jobcg_adopt_user_pidfd(ctx, fd, uid, ret_job);
	if (r != -ENOSYS)
		return r;
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	r = pick_locked(ctx, uid, &job);
	if (r >= 0)
		r = adopt_locked(ctx, pid, -1, job, uid);
	jobcg_ctx_unlock(ctx);
	if (r >= 0 && ret_job)
		*ret_job = job;
	return r;
}
