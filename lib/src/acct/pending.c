/* jobcg: pending accounting records, set aside before a removal's rmdir and written after it, so
 * that a process killed in between loses none (acctlog_internal.h). */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "acctlog_internal.h"
#include "cgroupfs.h"
#include "context_internal.h"
#include "log.h"
#include "testhook.h"
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
	return TEST_FAIL("setxattr", jdir,
			 setxattr(jdir, name, value, strlen(value), XATTR_CREATE)) < 0
		   ? negative_errno()
		   : 0;
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

/* Whether the entry @value (@len bytes) is a record waiting for a directory that is still there
 * (the same one: its inode): its step's record, which whoever removes that directory writes. */
static bool entry_waits(const char *value, size_t len)
{
	struct acct_pending_entry e;
	struct stat st;
	bool waits;

	if (strlen(value) != len || acct_pending_parse(value, &e) < 0)
		return false;
	waits = lstat(e.dir, &st) == 0 && st.st_ino == e.dir_ino;
	free(e.dir);
	return waits;
}

/* Write the record of one entry (@value, @len bytes) if it is owed; 0 when the entry can go,
 * -EBADMSG (error record set, not warned) when it is no pending record: kept for a human, never
 * appended. */
static int entry_flush(struct jobcg_ctx *ctx, const char *what, const char *value, size_t len)
{
	_cleanup_free_ char *log = log_path(ctx);
	struct acct_pending_entry e;
	_cleanup_free_ char *dir = NULL;
	struct stat st;
	bool have = false;
	int r;

	if (!log)
		return -ENOMEM;
	/* (what follows a NUL byte would go unseen, never written nor kept) */
	if (strlen(value) != len)
		return error_set(-EBADMSG, "%s: not a pending accounting record (a NUL byte in it)",
				 what);
	r = acct_pending_parse(value, &e);
	if (r == -EINVAL)
		return error_set(-EBADMSG,
				 "%s: not a pending accounting record (no header, or a "
				 "line cut short)",
				 what);
	if (r < 0)
		return r;
	dir = e.dir;
	/* Only what the log's reader takes as a record goes in: anything else would be skipped
	 * there at best, and raw control bytes would reach the terminal of whoever reads it. */
	if (!acctlog_line_is_record(e.line, strlen(e.line)))
		return error_set(-EBADMSG, "%s: its line is not an accounting record", what);
	/* A file of a removal killed before its rmdir: the directory's next remover records it.
	 * (An entry on a job whose step directory is there is kept before this is reached.) */
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
static int entry_visible(const struct dirent *de);

/* The @k-th name (from 1) under which an entry @name that is no pending record is kept for a
 * human: ".bad-@name", then ".bad-@name~K". */
static char *bad_name(const char *name, unsigned k)
{
	return k == 1 ? strdup_printf(".bad-%s", name) : strdup_printf(".bad-%s~%u", name, k);
}

/* Rename @name, no pending record, to ".bad-@name" (".bad-@name~K" when that is taken): kept,
 * never appended, and out of every later listing. Warns with the error record's reason. */
static void bad_aside(int dfd, const char *pdir, const char *name)
{
	_cleanup_free_ char *why = strdup(jobcg_last_error()->message);

	for (unsigned k = 1; k < 1000; k++) {
		_cleanup_free_ char *to = bad_name(name, k);

		if (!to)
			break;
		/* link + unlink: never over an earlier one of that name */
		if (linkat(dfd, name, dfd, to, 0) == 0) {
			(void)unlinkat(dfd, name, 0);
			error_set(
			    -EBADMSG,
			    "%s: moved aside as %s/%s, not written to the log: look at it and "
			    "remove it by hand",
			    why ? why : name, pdir, to);
			log_warning("%s", jobcg_last_error()->message);
			return;
		}
		if (errno != EEXIST)
			break;
	}
	log_warning("%s: left in %s (cannot move it aside: %s)", why ? why : name, pdir,
		    strerror(errno));
}

static int entry_order(const struct dirent **a, const struct dirent **b);

/* The name in pending/ of job @job's record (@step NULL) or of its step's: "JOB" and "JOB.STEP"
 * for incarnation 0, "JOB~N" and "JOB~N.STEP" for a later one (entry_order()). */
static char *entry_name(const char *job, unsigned incarnation, const char *step)
{
	if (incarnation)
		return step ? strdup_printf("%s~%u.%s", job, incarnation, step)
			    : strdup_printf("%s~%u", job, incarnation);
	return step ? strdup_printf("%s.%s", job, step) : strdup(job);
}

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
	if (r == -ENOENT && TEST_FAIL("mkdir", pdir, mkdir(pdir, 0700)) == 0)
		r = store_file(path, value);
	/* The name is taken (a step whose earlier record of that id waited on the job too; a job's
	 * own name is always free after acct_pending_job_begin()): a clash never costs a record.
	 * "JOB.STEP~K" sorts right after JOB.STEP. */
	for (unsigned k = 2; r == -EEXIST && k < 1000; k++) {
		free(path);
		if (!(path = strdup_printf("%s/%s~%u", pdir, name, k)))
			return -ENOMEM;
		r = store_file(path, value);
	}
	if (r < 0)
		return r;
	*ret_path = TAKE_PTR(path);
	return 0;
}

/* Does @name in @dfd hold exactly the @len bytes of @value (a regular file, not followed)? */
static bool same_content_at(int dfd, const char *name, const char *value, size_t len)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *have = NULL;
	size_t n = 0;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != len)
		return false;
	return read_full_fd(fd, len, &have, &n) == 0 && n == len && memcmp(have, value, len) == 0;
}

/*
 * The entry @value (@len bytes) of job @job_id's step @step, on the job's directory and no pending
 * record (the error record says why): written as <StateDir>/pending/.bad-JOB.STEP
 * (".bad-JOB.STEP~K" when that is taken by something else), as bad_aside() keeps one of
 * pending/'s, durable before its caller removes it from the job; a copy with the same bytes
 * already there is taken for it. 0, warned, the error record (-EBADMSG) saying where it went;
 * -errno, nothing kept and the error record saying why.
 */
static int bad_store(struct jobcg_ctx *ctx, uint32_t job_id, const char *step, const char *value,
		     size_t len)
{
	_cleanup_free_ char *pdir = ctx_state_file(ctx, PENDING_DIR), *job = NULL, *name = NULL,
			    *why = strdup(jobcg_last_error()->message);
	_cleanup_close_ int dfd = -1;
	int r;

	if (!pdir || !why || !(job = strdup_printf("%u", job_id)) ||
	    !(name = entry_name(job, 0, step)))
		return error_set(-ENOMEM, "out of memory");
	if (strchr(step, '/'))
		return error_set(-EINVAL, "a '/' in its step name");
	if ((r = ctx_state_dir_ready(ctx)) < 0)
		return r;
	r = pending_dir_open(ctx, &dfd);
	if (r == -ENOENT) {
		if (TEST_FAIL("mkdir", pdir, mkdir(pdir, 0700)) < 0 && errno != EEXIST)
			return error_set(negative_errno(), "cannot make %s: %s", pdir,
					 strerror(errno));
		r = pending_dir_open(ctx, &dfd);
	}
	if (r == -ENOENT)
		return error_set(r, "%s: gone as it was made", pdir);
	if (r < 0)
		return r;
	for (unsigned k = 1; k < 1000; k++) {
		_cleanup_free_ char *to = bad_name(name, k);

		if (!to)
			return error_set(-ENOMEM, "out of memory");
		r = write_file_atomic_at(dfd, to, value, len, 0600,
					 WRITE_ATOMIC_SYNC | WRITE_ATOMIC_NOREPLACE);
		if (r == 0) {
			error_set(
			    -EBADMSG,
			    "%s: moved aside from job %s's directory as %s/%s, not written to "
			    "the log: look at it and remove it by hand",
			    why, job, pdir, to);
			log_warning("%s", jobcg_last_error()->message);
			return 0;
		}
		if (r != -EEXIST)
			return error_set(r, "cannot write %s/%s: %s", pdir, to, strerror(-r));
		/* An earlier gc that copied it but could not take it off the job: one copy is
		 * enough. */
		if (same_content_at(dfd, to, value, len)) {
			error_set(-EBADMSG,
				  "%s: kept already as %s/%s, now off job %s's directory, not "
				  "written to the log: look at it and remove it by hand",
				  why, pdir, to, job);
			log_warning("%s", jobcg_last_error()->message);
			return 0;
		}
	}
	return error_set(-EEXIST, "%s/.bad-%s~1 to ~999 all taken", pdir, name);
}

/* The incarnation of a name in pending/ ("JOB~N..."), 0 for "JOB" and "JOB.STEP"; its job part's
 * length in *ret_jlen and where what follows the job (".STEP", or nothing) starts in
 * *ret_rest. */
static unsigned entry_incarnation(const char *name, size_t *ret_jlen, const char **ret_rest)
{
	size_t jlen = strcspn(name, "~.");
	const char *p = name + jlen;
	uint64_t n = 0;

	if (*p == '~' && parse_u64_prefix(p + 1, UINT_MAX, &n, &p) < 0)
		p = name + jlen; /* no number: compared as a step part */
	*ret_jlen = jlen;
	*ret_rest = p;
	return (unsigned)n;
}

int acct_pending_job_begin(struct jobcg_ctx *ctx, uint32_t job_id, unsigned *ret_incarnation)
{
	_cleanup_close_ int dfd = -1;
	_cleanup_free_ char *job = strdup_printf("%u", job_id);
	struct dirent **list = NULL;
	unsigned next = 0;
	int n, r;

	if (!job)
		return -ENOMEM;
	/* Nothing there can clash: this job's records are set aside (or fail to be) as ever. */
	*ret_incarnation = 0;
	r = pending_dir_open(ctx, &dfd);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (r != -ENOENT)
			log_warning("%s", jobcg_last_error()->message);
		jobcg_error_clear();
		return 0;
	}
	n = scandirat(dfd, ".", &list, entry_visible, entry_order);
	if (n < 0) {
		log_warning("cannot list the pending accounting records: %s", strerror(errno));
		return 0;
	}
	for (int i = 0; i < n; i++) {
		const char *name = list[i]->d_name, *rest;
		size_t jlen;
		unsigned inc = entry_incarnation(name, &jlen, &rest);

		/* A stale one of this very job (its remover killed before the rmdir) goes; an
		 * earlier job's is written if the log takes it. What stays is an earlier job's:
		 * this one's sort after it. */
		if (jlen == strlen(job) && strncmp(name, job, jlen) == 0) {
			(void)file_flush(ctx, dfd, name);
			if (faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 && inc + 1 > next)
				next = inc + 1;
		}
		free(list[i]);
	}
	free(list);
	jobcg_error_clear(); /* what could not be written was warned, and stays for gc */
	*ret_incarnation = next;
	return 0;
}

void acct_pending_store(struct jobcg_ctx *ctx, struct acct_pending *p, const char *dir,
			enum acct_pending_at at, unsigned incarnation)
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
		 * dropped, or, no record, moved aside) first; one the log refuses now stays, and
		 * the new one is not set aside (what failed was warned) */
		if (r == -EEXIST) {
			(void)acct_pending_flush_job(ctx, job, false, 0, NULL);
			jobcg_error_restore(&saved);
			r = store_xattr(holder, xattr, value);
		}
	} else {
		_cleanup_free_ char *name = entry_name(p->rec.job_id, incarnation, p->rec.step_id);

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

static int xattr_read_quiet(const char *dir, const char *name, char **ret, size_t *ret_len)
{
	struct jobcg_error saved = *jobcg_last_error();
	int r = cgfs_xattr_get_len(dir, name, ret, ret_len);

	jobcg_error_restore(&saved);
	return r;
}

int acct_pending_step_take(struct jobcg_ctx *ctx, uint32_t job_id, const char *sid,
			   const char *sdir, struct acct_pending *ret)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job_id), *xattr = NULL, *value = NULL;
	struct acct_pending_entry e;
	struct acct_pending p = {};
	size_t len = 0;
	int r;

	if (!jdir || !(xattr = strdup_printf(PENDING_XATTR "%s", sid)))
		return -ENOMEM;
	/* (one that cannot be read is none: the remover records the step itself) */
	r = xattr_read_quiet(jdir, xattr, &value, &len);
	if (r < 0)
		return r == -ENOMEM ? r : 0;
	if (!entry_waits(value, len) || acct_pending_parse(value, &e) < 0)
		return 0;
	r = streq(e.dir, sdir);
	free(e.dir);
	if (!r)
		return 0;
	p.rec.kind = JOBCG_ACCT_STEP;
	p.jid = strdup_printf("%u", job_id);
	p.sid = strdup(sid);
	p.line = strdup(e.line);
	if (!p.jid || !p.sid || !p.line) {
		acct_pending_done(&p);
		return -ENOMEM;
	}
	p.rec.job_id = p.jid;
	p.rec.step_id = p.sid;
	p.len = strlen(p.line);
	*ret = p;
	return 1;
}

void acct_pending_step_drop(struct jobcg_ctx *ctx, uint32_t job_id, const char *sid)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job_id),
			    *xattr = strdup_printf(PENDING_XATTR "%s", sid);

	/* (one left is written by nobody twice: the log has its line) */
	if (jdir && xattr)
		(void)removexattr(jdir, xattr);
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
			   unsigned incarnation, unsigned *ret_written)
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
		size_t len = 0;
		bool unkept = false;
		int r;

		if (strncmp(name, PENDING_XATTR, strlen(PENDING_XATTR)) != 0)
			continue;
		if (!(what = strdup_printf("step %u.%s", job_id, name + strlen(PENDING_XATTR))))
			return -ENOMEM;
		r = cgfs_xattr_get_len(jdir, name, &value, &len);
		/* Its step's directory is still there (its removal failed, or its runner was
		 * killed before it): the step's remover writes it, so the record says how the
		 * step really ended. */
		if (r == 0 && entry_waits(value, len))
			continue;
		if (r == 0)
			r = entry_flush(ctx, what, value, len);
		if (r > 0 && ret_written)
			(*ret_written)++;
		if (r == -EBADMSG && !keep_in_state_dir) {
			/* No record, on a job that lives on: kept for a human where the state
			 * directory's are (failing this gc), rather than fail every gc until the
			 * job goes. Where it cannot be, it stays (and fails the next gc too). */
			struct jobcg_error why = *jobcg_last_error();
			int k = bad_store(ctx, job_id, name + strlen(PENDING_XATTR), value, len);

			if (k == 0) {
				(void)removexattr(jdir, name);
				if (!first) {
					first = r;
					first_rec = *jobcg_last_error();
				}
				continue;
			}
			log_warning(
			    "%s: pending accounting record not written: %s; not moved aside "
			    "either: %s",
			    what, why.message, jobcg_last_error()->message);
			jobcg_error_restore(&why);
			unkept = true; /* (warned) */
		}
		if (r == -EBADMSG && keep_in_state_dir) {
			/* No record, and the directory goes: set aside for a human at once, every
			 * byte of it (a NUL included), rather than parked for gc to find bad. */
			struct jobcg_error why = *jobcg_last_error();

			if (bad_store(ctx, job_id, name + strlen(PENDING_XATTR), value, len) == 0)
				r = 0;
			else
				jobcg_error_restore(&why);
		}
		if (r < 0 && value && keep_in_state_dir &&
		    !strchr(name + strlen(PENDING_XATTR), '/')) {
			/* The directory goes with the entry on it: the entry moves to the state
			 * directory, where gc writes it once the log takes it (or, no record, sets
			 * it aside for a human). */
			_cleanup_free_ char *file = NULL, *job = strdup_printf("%u", job_id),
					    *fname = job ? entry_name(job, incarnation,
								      name + strlen(PENDING_XATTR))
							 : NULL;
			struct jobcg_error why = *jobcg_last_error();
			int k = fname ? store_in_state_dir(ctx, fname, value, &file) : -ENOMEM;

			if (k == 0) {
				log_warning(
				    "%s: pending accounting record not written (%s), kept in "
				    "%s for jobcg gc",
				    what, why.message, file);
				r = 0;
			} else {
				unkept = true;
				r = error_set(r,
					      "%s: pending accounting record neither written (%s) "
					      "nor kept in %s/ for jobcg gc (%s)",
					      what, why.message, PENDING_DIR, strerror(-k));
			}
		}
		if (r >= 0)
			(void)removexattr(jdir, name);
		else {
			/* (one not kept is the removal's error, which its caller reports) */
			if (!unkept)
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
 * jobcg's (a directory, a link, another user's file, a file with more than one name), which is
 * left alone; -EBADMSG for a file whose content is no pending record, renamed .bad-@name (which
 * no listing takes again) for a human to look at. */
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
	/* a hard link: the same file under another name, which may be anyone's to change */
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (st.st_uid != 0 && st.st_uid != geteuid()) || st.st_size > 1 << 20 ||
	    st.st_nlink != 1) {
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
				    : st.st_nlink != 1	   ? "a file with more than one name"
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
		r = entry_flush(ctx, what, value, (size_t)st.st_size);
	if (r >= 0)
		(void)unlinkat(dfd, name, 0);
	else if (r == -EBADMSG)
		bad_aside(dfd, pdir, name);
	else
		log_warning("%s: not written: %s", what, jobcg_last_error()->message);
	return r;
}

static int entry_visible(const struct dirent *de)
{
	return de->d_name[0] != '.'; /* write_file_atomic()'s temporary files too */
}

/* Entries in the order removals appended their records: by job, a job's incarnations in the order
 * they were removed ("JOB", then "JOB~1", "JOB~2"...: entry_name()), and an incarnation's steps
 * (in version order: 2 before 10) before the job itself. */
static int entry_order(const struct dirent **a, const struct dirent **b)
{
	const char *x = (*a)->d_name, *y = (*b)->d_name, *rx, *ry;
	size_t lx, ly;
	unsigned ix = entry_incarnation(x, &lx, &rx), iy = entry_incarnation(y, &ly, &ry);
	int c = lx != ly ? (lx < ly ? -1 : 1) : strncmp(x, y, lx);

	if (c)
		return c;
	if (ix != iy)
		return ix < iy ? -1 : 1;
	if (!*rx || !*ry)
		return !*rx - !*ry;
	return strverscmp(rx, ry);
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
