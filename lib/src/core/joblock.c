/* jobcg: the job's freeze lock, on its cgroup.kill or, before Linux 5.14, on a file of the state
 * directory (joblock.h). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "cgroupfs.h"
#include "context_internal.h"
#include "joblock.h"
#include "log.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

#define LOCKS_DIR "locks"

static int lock_wait(int fd, const char *what, bool exclusive, unsigned timeout_ms,
		     char **ret_holder)
{
	int r = flock_wait(fd, exclusive ? LOCK_EX : LOCK_SH, timeout_ms);

	if (r == -ETIMEDOUT) {
		if (ret_holder)
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
static int file_lock(struct jobcg_ctx *ctx, const char *job_dir, uint32_t job_id, bool exclusive,
		     unsigned timeout_ms, int *ret_fd, char **ret_holder)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000u;
	_cleanup_free_ char *dir = ctx_state_file(ctx, LOCKS_DIR), *path = NULL;
	char name[32];

	snprintf(name, sizeof(name), "job_%u", job_id);
	if (!dir || !(path = strdup_printf("%s/%s", dir, name)))
		return -ENOMEM;
	for (;;) {
		_cleanup_close_ int dfd = -1, fd = -1;
		struct stat st;
		uint64_t now;
		int r;

		if ((r = locks_dir_open(ctx, true, &dfd)) < 0)
			return r;
		fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
		if (fd < 0)
			return error_set(negative_errno(), "cannot open the lock file %s: %s", path,
					 strerror(errno));
		if (fstat(fd, &st) < 0)
			return error_set(negative_errno(), "cannot stat %s: %s", path,
					 strerror(errno));
		/* Made by root otherwise than here: who else can open it is not known. */
		if (!S_ISREG(st.st_mode) || !owner_only(&st) || (st.st_mode & 077))
			return error_set(-EPERM,
					 "the lock file %s is not a file only root can open (owner "
					 "uid %u, mode %04o): remove it",
					 path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		test_pause("job-lock-file-opened");
		now = now_usec();
		r = lock_wait(fd, path, exclusive,
			      now < deadline ? (unsigned)((deadline - now) / 1000u) : 0,
			      ret_holder);
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

int job_lock(struct jobcg_ctx *ctx, const char *job_dir, uint32_t job_id, bool exclusive,
	     unsigned timeout_ms, int *ret_fd, char **ret_holder)
{
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
			if ((r = lock_wait(fd, job_dir, exclusive, timeout_ms, ret_holder)) < 0)
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
	return file_lock(ctx, job_dir, job_id, exclusive, timeout_ms, ret_fd, ret_holder);
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
