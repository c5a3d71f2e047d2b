/* jobcg: pending accounting records, set aside before a removal's rmdir and written after it, so
 * that a process killed in between loses none (acctlog_internal.h). */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "acctlog_internal.h"
#include "cgroupfs.h"
#include "context_internal.h"
#include "log.h"
#include "tree.h"
#include "util.h"

#define PENDING_XATTR "trusted.jobcg.pending."
#define PENDING_DIR   "pending"

/*
 * An entry: "<dir inode> <log inode> <log size> <dir>\n<line>". The directory it waits for,
 * by inode too (an id made again is another directory); where the log ended when it was set
 * aside (the search for a line already written starts there).
 */
static char *entry_format(const char *dir, const struct acct_pending *p, const char *log)
{
	struct stat d, l = {};

	if (lstat(dir, &d) < 0)
		return NULL;
	if (stat(log, &l) < 0)
		l = (struct stat){};
	return strdup_printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n%s", (uint64_t)d.st_ino,
			     (uint64_t)l.st_ino, (uint64_t)l.st_size, dir, p->line);
}

static char *log_path(struct jobcg_ctx *ctx)
{
	char *path = NULL;

	return jobcg_acctlog_path(jobcg_ctx_config(ctx), &path) < 0 ? NULL : path;
}

static int store_xattr(const char *jdir, const char *name, const char *value)
{
	return setxattr(jdir, name, value, strlen(value), XATTR_CREATE) < 0 ? negative_errno() : 0;
}

/* A job's record (fsynced in the log) must survive what its log append would have: the entry
 * is durable, and whole, before the rmdir it stands in for. -EEXIST when one is there. */
static int store_file(const char *path, const char *value)
{
	return write_file_atomic(path, value, 0600, WRITE_ATOMIC_SYNC | WRITE_ATOMIC_NOREPLACE);
}

int acct_pending_parse(const char *value, struct acct_pending_entry *ret)
{
	const char *p = value, *nl = strchr(value, '\n');
	uint64_t dino, lino, lsize;
	char *dir;

	if (!nl || parse_u64_prefix(p, UINT64_MAX, &dino, &p) < 0 || *p++ != ' ' ||
	    parse_u64_prefix(p, UINT64_MAX, &lino, &p) < 0 || *p++ != ' ' ||
	    parse_u64_prefix(p, UINT64_MAX, &lsize, &p) < 0 || *p++ != ' ' || p >= nl || !nl[1] ||
	    strchr(nl + 1, '\n') != nl + strlen(nl) - 1)
		/* (the line, newline included, is all the rest: a cut one would tear the log) */
		return -EINVAL;
	if (!(dir = strndup(p, (size_t)(nl - p))))
		return -ENOMEM;
	*ret = (struct acct_pending_entry){
	    .dir_ino = dino, .log_ino = lino, .log_size = lsize, .dir = dir, .line = nl + 1};
	return 0;
}

/* Write the record of one entry (@value) if it is owed; 0 when the entry can go. */
static int entry_flush(struct jobcg_ctx *ctx, const char *what, const char *value)
{
	_cleanup_free_ char *log = log_path(ctx);
	struct acct_pending_entry e;
	_cleanup_free_ char *dir = NULL;
	struct stat st;
	bool have = false;
	int r;

	if (!log)
		return -ENOMEM;
	r = acct_pending_parse(value, &e);
	if (r == -EINVAL) {
		log_warning("%s: not a pending accounting record, dropped", what);
		return 0;
	}
	if (r < 0)
		return r;
	dir = e.dir;
	/* Killed before its rmdir: the directory's next remover records it. */
	if (lstat(dir, &st) == 0 && st.st_ino == e.dir_ino)
		return 0;
	r = acctlog_has_line(log, e.log_ino, e.log_size, e.line, strlen(e.line), &have);
	if (r < 0)
		return r;
	if (have)
		return 0; /* killed between its append and the entry's removal */
	r = acctlog_write_line(log, e.line, strlen(e.line), JOBCG_ACCTLOG_SYNC, false);
	if (r < 0)
		return r;
	log_info("%s: accounting record written (its writer died after removing %s)", what, dir);
	return 1;
}

static int pending_dir_open(struct jobcg_ctx *ctx, int *ret_fd);
static int file_flush(struct jobcg_ctx *ctx, int dfd, const char *name);

/* Entry @value as the file <StateDir>/pending/@name, in *ret_path (the caller frees it). */
static int store_in_state_dir(struct jobcg_ctx *ctx, const char *name, const char *value,
			      char **ret_path)
{
	_cleanup_free_ char *pdir = ctx_state_file(ctx, PENDING_DIR), *path = NULL;
	int r;

	if (!pdir || !(path = strdup_printf("%s/%s", pdir, name)))
		return -ENOMEM;
	if ((r = ctx_state_dir_ready(ctx)) < 0)
		return r;
	r = store_file(path, value);
	if (r == -ENOENT && mkdir(pdir, 0700) == 0)
		r = store_file(path, value);
	/* one a killed remover of an earlier job of that id left: that one first */
	if (r == -EEXIST) {
		_cleanup_close_ int dfd = -1;

		if (pending_dir_open(ctx, &dfd) == 0 && file_flush(ctx, dfd, name) >= 0)
			r = store_file(path, value);
	}
	if (r < 0)
		return r;
	*ret_path = TAKE_PTR(path);
	return 0;
}

void acct_pending_store(struct jobcg_ctx *ctx, struct acct_pending *p, const char *dir,
			enum acct_pending_at at)
{
	_cleanup_free_ char *log = log_path(ctx), *value = NULL, *holder = NULL, *xattr = NULL;
	struct jobcg_error saved = *jobcg_last_error();
	int r = -ENOMEM;

	if (!log || (!p->line && acctlog_format(&p->rec, &p->line, &p->len) < 0))
		goto fail;
	if (!(value = entry_format(dir, p, log))) {
		r = errno ? negative_errno() : -ENOMEM;
		goto fail;
	}
	if (at == ACCT_PENDING_ON_JOB) {
		uint32_t job;
		uint64_t v;

		if (!p->rec.step_id || parse_u64(p->rec.job_id, UINT32_MAX, &v) < 0)
			goto fail;
		job = (uint32_t)v;
		holder = tree_job_dir(ctx, job);
		xattr = strdup_printf(PENDING_XATTR "%s", p->rec.step_id);
		if (!holder || !xattr)
			goto fail;
		r = store_xattr(holder, xattr, value);
		/* one left by a killed writer of an earlier step of that id: written (or
		 * dropped) first */
		if (r == -EEXIST && acct_pending_flush_job(ctx, job, false, NULL) >= 0)
			r = store_xattr(holder, xattr, value);
	} else {
		_cleanup_free_ char *name =
		    p->rec.step_id ? strdup_printf("%s.%s", p->rec.job_id, p->rec.step_id)
				   : strdup(p->rec.job_id);

		if (!name)
			goto fail;
		r = store_in_state_dir(ctx, name, value, &holder);
	}
	if (r < 0)
		goto fail;
	p->holder = TAKE_PTR(holder);
	p->xattr = TAKE_PTR(xattr);
	return;
fail:
	log_warning("job %s%s%s: the accounting record could not be set aside before the removal "
		    "(%s): a crash now would lose it",
		    p->rec.job_id, p->rec.step_id ? " step " : "",
		    p->rec.step_id ? p->rec.step_id : "", strerror(r < 0 ? -r : ENOMEM));
	/* the removal goes on: what its caller reports is not this */
	jobcg_error_restore(&saved);
}

void acct_pending_discard(struct acct_pending *p)
{
	if (!p->holder)
		return;
	if (p->xattr)
		(void)removexattr(p->holder, p->xattr);
	else
		(void)unlink(p->holder);
	free(p->holder);
	free(p->xattr);
	p->holder = p->xattr = NULL;
}

int acct_pending_flush_job(struct jobcg_ctx *ctx, uint32_t job_id, bool keep_in_state_dir,
			   unsigned *ret_written)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job_id), *names = NULL;
	struct jobcg_error saved = *jobcg_last_error(), first_rec;
	ssize_t n;
	int first = 0;

	if (!jdir)
		return -ENOMEM;
	n = listxattr(jdir, NULL, 0);
	if (n <= 0)
		return n < 0 && errno != ENOENT && errno != ENOTSUP ? negative_errno() : 0;
	if (!(names = malloc((size_t)n + 1)))
		return -ENOMEM;
	n = listxattr(jdir, names, (size_t)n);
	if (n < 0)
		return negative_errno();
	for (const char *name = names; name < names + n; name += strlen(name) + 1) {
		_cleanup_free_ char *value = NULL, *what = NULL;
		int r;

		if (strncmp(name, PENDING_XATTR, strlen(PENDING_XATTR)) != 0)
			continue;
		if (!(what = strdup_printf("step %u.%s", job_id, name + strlen(PENDING_XATTR))))
			return -ENOMEM;
		r = cgfs_xattr_get(jdir, name, &value);
		if (r == 0)
			r = entry_flush(ctx, what, value);
		if (r > 0 && ret_written)
			(*ret_written)++;
		if (r < 0 && value && keep_in_state_dir &&
		    !strchr(name + strlen(PENDING_XATTR), '/')) {
			/* The directory goes with the entry on it: the entry moves to the state
			 * directory, where gc writes it once the log takes it. */
			_cleanup_free_ char *file = NULL,
					    *fname = strdup_printf("%u.%s", job_id,
								   name + strlen(PENDING_XATTR));
			struct jobcg_error why = *jobcg_last_error();

			if (fname && store_in_state_dir(ctx, fname, value, &file) == 0) {
				log_warning(
				    "%s: pending accounting record not written (%s), kept in "
				    "%s for jobcg gc",
				    what, why.message, file);
				r = 0;
			} else
				jobcg_error_restore(&why);
		}
		if (r >= 0)
			(void)removexattr(jdir, name);
		else {
			log_warning("%s: pending accounting record not written: %s", what,
				    jobcg_last_error()->message);
			if (!first) {
				first = r;
				first_rec = *jobcg_last_error();
			}
		}
	}
	/* the caller hears of the first failure, else nothing changed */
	jobcg_error_restore(first ? &first_rec : &saved);
	return first;
}

/* <StateDir>/pending, opened if it is only root's (what passes for a record there is written to
 * the log as it is); -ENOENT without an error record when there is none. */
static int pending_dir_open(struct jobcg_ctx *ctx, int *ret_fd)
{
	_cleanup_free_ char *pdir = ctx_state_file(ctx, PENDING_DIR);
	_cleanup_close_ int dfd = -1;
	struct stat st;

	if (!pdir)
		return -ENOMEM;
	dfd = open(pdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 && (errno == ENOTDIR || errno == ELOOP))
		/* a crash of an older layout, or a hand's mistake: never jobcg's to remove */
		return error_set(-ENOTDIR,
				 "%s is not a directory: pending accounting records can neither be "
				 "written nor set aside until it is moved away by hand",
				 pdir);
	if (dfd < 0)
		return errno == ENOENT ? -ENOENT
				       : error_set(negative_errno(), "cannot open %s: %s", pdir,
						   strerror(errno));
	if (fstat(dfd, &st) < 0 || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return error_set(-EPERM, "%s is not a directory only root can write: left alone",
				 pdir);
	*ret_fd = TAKE_FD(dfd);
	return 0;
}

/* Write the entry @name of the pending directory @dfd if it is owed, then remove it. 1 written,
 * 0 not owed, -errno (kept, with a warning): -EUCLEAN for an entry that is no record of
 * jobcg's (a directory, a link, another user's file), which is left alone. */
static int file_flush(struct jobcg_ctx *ctx, int dfd, const char *name)
{
	_cleanup_free_ char *value = NULL, *what = NULL, *pdir = ctx_state_file(ctx, PENDING_DIR);
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (!pdir || !(what = strdup_printf("pending accounting record %s", name)))
		return -ENOMEM;
	/* O_PATH first: a FIFO or a device is looked at, never opened */
	fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0; /* written and removed meanwhile */
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (st.st_uid != 0 && st.st_uid != geteuid()) || st.st_size > 1 << 20) {
		r = fd < 0
			? error_set(negative_errno(), "%s/%s: %s", pdir, name, strerror(errno))
			: error_set(-EUCLEAN,
				    "%s/%s: not a pending accounting record of jobcg's (%s), left "
				    "alone: remove it by hand",
				    pdir, name,
				    S_ISDIR(st.st_mode)	   ? "a directory"
				    : S_ISLNK(st.st_mode)  ? "a symbolic link"
				    : !S_ISREG(st.st_mode) ? "not a regular file"
				    : st.st_size > 1 << 20 ? "over 1 MiB"
							   : "another user's file");
		log_warning("%s", jobcg_last_error()->message);
		return r;
	}
	close(fd);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		r = error_set(negative_errno(), "%s/%s: %s", pdir, name, strerror(errno));
		log_warning("%s", jobcg_last_error()->message);
		return r;
	}
	if (!(value = calloc(1, (size_t)st.st_size + 1)))
		return -ENOMEM;
	if (pread(fd, value, (size_t)st.st_size, 0) != st.st_size)
		r = error_set(-EIO, "cannot read it");
	else
		r = entry_flush(ctx, what, value);
	if (r >= 0)
		(void)unlinkat(dfd, name, 0);
	else
		log_warning("%s: not written: %s", what, jobcg_last_error()->message);
	return r;
}

static int entry_visible(const struct dirent *de)
{
	return de->d_name[0] != '.'; /* write_file_atomic()'s temporary files too */
}

/* Entries "JOB" and "JOB.STEP" in the order a removal appends their records: by job, a job's
 * steps (in version order: 2 before 10) before the job itself. */
static int entry_order(const struct dirent **a, const struct dirent **b)
{
	const char *x = (*a)->d_name, *y = (*b)->d_name, *dx = strchr(x, '.'), *dy = strchr(y, '.');
	size_t lx = dx ? (size_t)(dx - x) : strlen(x), ly = dy ? (size_t)(dy - y) : strlen(y);
	int c = lx != ly ? (lx < ly ? -1 : 1) : strncmp(x, y, lx);

	if (c)
		return c;
	if (!dx || !dy)
		return !dx - !dy;
	return strverscmp(dx, dy);
}

int acct_pending_flush_state_dir(struct jobcg_ctx *ctx, unsigned *ret_written)
{
	_cleanup_close_ int dfd = -1;
	struct jobcg_error saved = {};
	unsigned written = 0;
	struct dirent **list = NULL;
	int first = 0, n, r = pending_dir_open(ctx, &dfd);

	if (r < 0)
		return r == -ENOENT ? 0 : r;
	n = scandirat(dfd, ".", &list, entry_visible, entry_order);
	if (n < 0)
		return error_set(negative_errno(), "cannot list the pending accounting records: %s",
				 strerror(errno));
	for (int i = 0; i < n; i++) {
		r = file_flush(ctx, dfd, list[i]->d_name);
		if (r > 0)
			written++;
		else if (r < 0 && !first) {
			/* the first one is what the caller hears; the others were warned */
			first = r;
			saved = *jobcg_last_error();
		}
		free(list[i]);
	}
	free(list);
	if (first)
		jobcg_error_restore(&saved);
	if (ret_written)
		*ret_written = written;
	return first;
}
