/* jobcg: the job's freeze lock, on its cgroup.kill or, before Linux 5.14, on a file of the state
 * directory (joblock.h). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "cgroupfs.h"
#include "context_internal.h"
#include "joblock.h"
#include "log.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

#define LOCKS_DIR "locks"

/*
 * A freeze's turn. flock gives an exclusive waiter no priority over shared ones: launches that
 * overlap without a gap would keep a freeze out until its timeout. So a freeze that does not get
 * the lock at once marks its intent on the locked file itself, "PID:STARTTIME DEADLINE" (its
 * process, and the end of its wait in CLOCK_MONOTONIC microseconds) in a trusted.* xattr, which
 * only root (CAP_SYS_ADMIN) can set or even read, and a launch that finds a live mark waits for
 * it to go before it asks for its shared hold. The mark goes when its freeze has the lock, gave
 * up or failed; one whose process is gone (a freezer killed while waiting, its pid perhaps
 * reused: the start time differs) or whose deadline has passed counts as none, and a launch
 * that finds one removes it. Where the file takes no xattr, freezes wait as they did before.
 */
#define FREEZING_XATTR "trusted.jobcg.freezing"
/* The furthest ahead a freeze marks its turn: its wait may be longer, but launches are held
 * back for at most this. A mark further ahead is none of a freeze's (a corrupt or hand-made
 * one naming a live process would otherwise hold every launch of the job back for good). */
#define FREEZING_AHEAD_MAX_USEC (3600ull * 1000000ull)

int joblock_mark_parse(const char *mark, char **ret_who, int *ret_pid, uint64_t *ret_deadline)
{
	const char *sp = strchr(mark, ' ');
	_cleanup_free_ char *who = sp ? strndup(mark, (size_t)(sp - mark)) : NULL;
	uint64_t deadline, pid;

	if (sp && !who)
		return -ENOMEM;
	if (!who || parse_u64(sp + 1, UINT64_MAX, &deadline) < 0 ||
	    parse_u64_prefix(who, INT_MAX, &pid, NULL) < 0 || pid == 0)
		return -EINVAL;
	*ret_who = TAKE_PTR(who);
	*ret_pid = (int)pid;
	*ret_deadline = deadline;
	return 0;
}

/* The pid of a mark "PID:STARTTIME DEADLINE" that is in force (its process alive, its deadline
 * ahead), 0 for one that is not (stale), -EINVAL for one malformed. */
static int intent_live(const char *mark, uint64_t now)
{
	_cleanup_free_ char *who = NULL;
	uint64_t deadline;
	int pid;

	if (joblock_mark_parse(mark, &who, &pid, &deadline) < 0)
		return -EINVAL;
	if (now >= deadline || deadline - now > FREEZING_AHEAD_MAX_USEC || !tree_runner_alive(who))
		return 0;
	return pid;
}

/* The mark on @fd's file in @buf (NUL-terminated): 0, -ENODATA when there is none, another
 * -errno when it cannot be read (no xattrs here, one too long to be ours). */
static int intent_read(int fd, char *buf, size_t size)
{
	ssize_t n = fgetxattr(fd, FREEZING_XATTR, buf, size - 1);

	if (n < 0)
		return negative_errno();
	buf[n] = '\0';
	return 0;
}

/*
 * A launch, before its shared hold: no further than a mark in force on @fd's file, until
 * @deadline. One fgetxattr() when there is none, the common case. -ETIMEDOUT when the mark is
 * still there at @deadline, its freezer in *ret_holder when asked for.
 */
static int intent_wait(int fd, uint64_t deadline, char **ret_holder)
{
	unsigned pause_ms = 1;

	for (;;) {
		char mark[128];
		uint64_t now;
		int pid;

		if (intent_read(fd, mark, sizeof(mark)) < 0)
			return 0; /* none, or no xattrs: as before marks */
		now = now_usec();
		pid = intent_live(mark, now);
		if (pid < 0)
			return 0; /* not jobcg's: not waited for */
		if (pid == 0) {
			/* Its freezer is gone or gave up. Another that set its own meanwhile
			 * loses it here, and sets it again at its next try. */
			(void)fremovexattr(fd, FREEZING_XATTR);
			return 0;
		}
		if (now >= deadline) {
			if (ret_holder)
				*ret_holder = pid_describe(pid);
			return -ETIMEDOUT;
		}
		sleep_backoff(&pause_ms);
	}
}

/*
 * A waiting freeze: its mark @me on @fd's file unless one in force is there (another freeze's
 * holds the launches back for both). *marked says it set one at least once, for intent_clear().
 * Nothing more once the file took none (*unsupported).
 */
static void intent_mark(int fd, const char *me, bool *marked, bool *unsupported)
{
	char mark[128];
	int r = intent_read(fd, mark, sizeof(mark));

	if (r == 0 && streq(mark, me))
		return;
	if (r == 0 && intent_live(mark, now_usec()) != 0)
		return; /* another freeze's (or a mark not jobcg's: left alone) */
	if (r == 0)
		(void)fremovexattr(fd, FREEZING_XATTR); /* stale */
	else if (r != -ENODATA) {
		*unsupported = true;
		return;
	}
	/* Created, never replaced: of two freezes finding the same stale mark, the second
	 * does not take the first's place. */
	if (fsetxattr(fd, FREEZING_XATTR, me, strlen(me), XATTR_CREATE) == 0)
		*marked = true;
	else if (errno != EEXIST) {
		log_debug("cannot mark a freeze's turn on the job's lock: %s", strerror(errno));
		*unsupported = true;
	}
}

/* Our mark off @fd's file, if it is still there (not another's that took its place). */
static void intent_clear(int fd, const char *me)
{
	char mark[128];

	if (intent_read(fd, mark, sizeof(mark)) == 0 && streq(mark, me))
		(void)fremovexattr(fd, FREEZING_XATTR);
}

/* A freeze's exclusive hold, marking its turn while it waits (above). */
static int lock_wait_turn(int fd, unsigned timeout_ms)
{
	uint64_t start = now_usec(), wait = (uint64_t)timeout_ms * 1000u, deadline = start + wait;
	/* Launches are held back for an hour at most, however long the wait. */
	uint64_t mark_until =
	    start + (wait < FREEZING_AHEAD_MAX_USEC ? wait : FREEZING_AHEAD_MAX_USEC);
	_cleanup_free_ char *self = NULL, *me = NULL;
	bool marked = false, unsupported = false;
	unsigned pause_ms = 1;
	int r;

	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			r = 0;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			r = negative_errno();
			break;
		}
		if (now_usec() >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		/* Checked again at each try: a mark taken off by someone who found it stale a
		 * moment before we set it, or another freeze's that went, is set (again). */
		if (!me && !unsupported &&
		    (!(self = tree_process_self()) ||
		     !(me = strdup_printf("%s %llu", self, (unsigned long long)mark_until)))) {
			r = -ENOMEM;
			break;
		}
		if (!unsupported)
			intent_mark(fd, me, &marked, &unsupported);
		test_pause("job-lock-turn-marked");
		sleep_backoff(&pause_ms);
	}
	if (marked)
		intent_clear(fd, me);
	return r;
}

static int lock_wait(int fd, const char *what, enum job_lock_mode mode, uint64_t deadline,
		     char **ret_holder)
{
	uint64_t now = now_usec();
	unsigned left = now < deadline ? (unsigned)((deadline - now) / 1000u) : 0;
	int r;

	switch (mode) {
	case JOB_LOCK_SHARED:
		r = intent_wait(fd, deadline, ret_holder);
		if (r < 0)
			return r;
		now = now_usec();
		left = now < deadline ? (unsigned)((deadline - now) / 1000u) : 0;
		r = flock_wait(fd, LOCK_SH, left);
		break;
	case JOB_LOCK_EXCLUSIVE:
		r = flock_wait(fd, LOCK_EX, left);
		break;
	case JOB_LOCK_FREEZE:
	default:
		r = lock_wait_turn(fd, left);
		break;
	}
	if (r == -ETIMEDOUT) {
		if (ret_holder && !*ret_holder)
			*ret_holder = flock_holder(fd);
		return r;
	}
	if (r < 0)
		return error_set(r, "cannot lock %s: %s", what, strerror(-r));
	return 0;
}

static int owner_only(const struct stat *st)
{
	return (st->st_uid == 0 || st->st_uid == geteuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/*
 * <StateDir>/locks, made (mode 0700) where missing with @create, opened as a directory only
 * root (or our uid) can write: anyone who could make or swap a name in it could hand out a
 * job's lock. The state directory itself has passed ctx_state_dir_ready() (every directory up
 * to it root's and written by no one else), so its path holds. -ENOENT without an error record
 * when there is none and @create is false.
 */
static int locks_dir_open(struct jobcg_ctx *ctx, bool create, int *ret_fd)
{
	_cleanup_free_ char *path = ctx_state_file(ctx, LOCKS_DIR);
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (!path)
		return -ENOMEM;
	if ((r = ctx_state_dir_ready(ctx)) < 0)
		return r;
	if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
		return error_set(negative_errno(), "cannot create the job lock directory %s: %s",
				 path, strerror(errno));
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && !create)
		return -ENOENT;
	if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
		return error_set(
		    -ENOTDIR,
		    "%s is not a directory: no job's freeze lock can be taken until it "
		    "is moved away by hand",
		    path);
	if (fd < 0)
		return error_set(negative_errno(), "cannot open the job lock directory %s: %s",
				 path, strerror(errno));
	if (fstat(fd, &st) < 0)
		return error_set(negative_errno(), "cannot stat %s: %s", path, strerror(errno));
	if (!owner_only(&st))
		return error_set(-EPERM,
				 "the job lock directory %s is owned by uid %u, mode %04o: only "
				 "root may write it (no job's freeze lock is taken until it is "
				 "fixed)",
				 path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * The lock file of a kernel without cgroup.kill: locks/job_<id>, made mode 0600 where missing,
 * never followed through a link. The lock is the name, not the inode: a removal (job removal,
 * gc) unlinks the file holding its lock, so a waiter that opened it before may be granted a
 * lock on an inode nobody else will ever open while a newcomer makes and locks a new one. Once
 * locked, the name must still be the inode held, else the file is opened again (for a job that
 * still exists).
 */
static int file_lock(struct jobcg_ctx *ctx, const char *job_dir, uint32_t job_id,
		     enum job_lock_mode mode, uint64_t deadline, int *ret_fd, char **ret_holder)
{
	_cleanup_free_ char *dir = ctx_state_file(ctx, LOCKS_DIR), *path = NULL;
	char name[32];

	snprintf(name, sizeof(name), "job_%u", job_id);
	if (!dir || !(path = strdup_printf("%s/%s", dir, name)))
		return -ENOMEM;
	for (;;) {
		_cleanup_close_ int dfd = -1, fd = -1;
		int r;

		if ((r = locks_dir_open(ctx, true, &dfd)) < 0)
			return r;
		if ((r = lock_file_open_at(dfd, name, path, &fd)) < 0)
			return r;
		test_pause("job-lock-file-opened");
		r = lock_wait(fd, path, mode, deadline, ret_holder);
		if (r < 0)
			return r;
		r = fd_names_path_at(fd, dfd, name);
		if (r < 0)
			return error_set(r, "cannot stat the lock file %s: %s", path, strerror(-r));
		if (r > 0) {
			*ret_fd = TAKE_FD(fd);
			return 0;
		}
		/* Removed with its job meanwhile: not made again for a job that is gone. */
		if (access(job_dir, F_OK) < 0)
			return error_set(-ENOENT, "no job %u (%s)", job_id, job_dir);
		log_debug("lock file %s was removed while waiting; opening it again", path);
	}
}

int job_lock(struct jobcg_ctx *ctx, const char *job_dir, uint32_t job_id, enum job_lock_mode mode,
	     unsigned timeout_ms, int *ret_fd, char **ret_holder)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000u;
	_cleanup_free_ char *own = NULL, *kill = NULL;
	_cleanup_close_ int fd = -1;
	int r;

	if (!job_dir && !(job_dir = own = tree_job_dir(ctx, job_id)))
		return -ENOMEM;
	/* flock() asks for no access mode, so any file a user can open is one they can hold
	 * locked, and cgroup directories and most of their files are world-readable. cgroup.kill
	 * alone is write-only and root's (mode 0200, no read method), so only root opens it; it
	 * is never written through this descriptor. (A test build can act as if it were not
	 * there, to try the lock file on any kernel.) */
	if (!test_flag("job-lock-file")) {
		if (!(kill = cgfs_path(job_dir, "cgroup.kill")))
			return -ENOMEM;
		fd = open(kill, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
		if (fd >= 0) {
			if ((r = lock_wait(fd, job_dir, mode, deadline, ret_holder)) < 0)
				return r;
			*ret_fd = TAKE_FD(fd);
			return 0;
		}
		r = negative_errno();
		if (r != -ENOENT || access(job_dir, F_OK) < 0)
			return error_set(r, "cannot open %s: %s", kill, strerror(-r));
	} else if (access(job_dir, F_OK) < 0)
		return error_set(negative_errno(), "cannot open %s: %s", job_dir, strerror(errno));
	/* Before Linux 5.14: a file of the state directory, only root's. */
	if (!ctx) {
		*ret_fd = -1;
		return 0;
	}
	return file_lock(ctx, job_dir, job_id, mode, deadline, ret_fd, ret_holder);
}

/* Unlinks @name of @dfd when no one holds it or waits for it: whoever opened it before us and
 * is granted it afterwards finds its name gone (file_lock()). */
static void lock_file_unlink(int dfd, const char *name)
{
	_cleanup_close_ int fd =
	    openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return; /* held: gc removes it once it is free */
	if (fd_names_path_at(fd, dfd, name) > 0 && unlinkat(dfd, name, 0) < 0)
		log_warning("cannot remove the lock file %s: %s", name, strerror(errno));
}

void job_lock_remove(struct jobcg_ctx *ctx, uint32_t job_id)
{
	struct jobcg_error saved = *jobcg_last_error();
	_cleanup_close_ int dfd = -1;
	char name[32];

	if (locks_dir_open(ctx, false, &dfd) == 0) {
		snprintf(name, sizeof(name), "job_%u", job_id);
		lock_file_unlink(dfd, name);
	}
	/* A lock file left is gc's: the removal succeeded. */
	jobcg_error_restore(&saved);
}

/* The lock files of @dfd whose job does not exist (every one: @all). */
static int lock_files_sweep(struct jobcg_ctx *ctx, int dfd, bool all)
{
	DIR *d = fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 3));
	struct dirent *de;

	if (!d)
		return -ENOMEM;
	while ((de = readdir(d))) {
		uint32_t id;

		if (tree_parse_job_dirname(de->d_name, &id) < 0)
			continue; /* not one of ours: left alone */
		if (!all) {
			_cleanup_free_ char *jdir = tree_job_dir(ctx, id);

			if (!jdir || access(jdir, F_OK) == 0)
				continue;
		}
		lock_file_unlink(dfd, de->d_name);
	}
	closedir(d);
	return 0;
}

int job_locks_gc(struct jobcg_ctx *ctx)
{
	_cleanup_close_ int dfd = -1;
	int r = locks_dir_open(ctx, false, &dfd);

	if (r < 0)
		return r == -ENOENT ? 0 : r;
	return lock_files_sweep(ctx, dfd, false);
}

void job_locks_remove_all(struct jobcg_ctx *ctx)
{
	struct jobcg_error saved = *jobcg_last_error();
	_cleanup_free_ char *path = ctx_state_file(ctx, LOCKS_DIR);
	_cleanup_close_ int dfd = -1;

	if (path && locks_dir_open(ctx, false, &dfd) == 0 &&
	    lock_files_sweep(ctx, dfd, true) == 0 && rmdir(path) < 0 && errno != ENOENT)
		log_warning("cannot remove %s: %s", path, strerror(errno));
	jobcg_error_restore(&saved);
}
