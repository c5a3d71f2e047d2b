/* jobcg internal: appending job and step records to the accounting log (acct.c). */
#pragma once

#include "jobcg/acct.h"
#include "jobcg/acctlog.h"

/*
 * jobcg_acctlog_write() for the library: @dir_checked when the log's directory already passed
 * state_dir_prepare() (ctx_state_dir_ready() of a context whose lock lives beside it).
 */
int acctlog_write(const char *path, const struct jobcg_acct_record *r, unsigned flags,
		  bool dir_checked);
/* The record's line as the log holds it, newline included (*ret_len bytes). */
int acctlog_format(const struct jobcg_acct_record *r, char **ret, size_t *ret_len);
/* acctlog_write() of a line acctlog_format() made. */
int acctlog_write_line(const char *path, const char *line, size_t len, unsigned flags,
		       bool dir_checked);
/*
 * Is @line (acctlog_format()'s) in the log @path already, appended after the log was inode @ino
 * of size @from (0 0: there was none)? Searched there, or where a rotation since moved that
 * file (not compressed yet) and in the new log. For pending records (pending.c): a writer
 * killed between its append and the removal of its pending entry wrote it already.
 */
int acctlog_has_line(const char *path, uint64_t ino, uint64_t from, const char *line, size_t len,
		     bool *ret);
/* Is @line (@len bytes, its newline included) one complete record as the log's reader takes it,
 * with no raw control byte? What a pending entry holds is appended only then. */
bool acctlog_line_is_record(const char *line, size_t len);

/* A rotated copy of the log, by its name: NAME.N (N from 1, no leading zero; the higher, the
 * older) or logrotate's dateext NAME-SUFFIX, either with .gz after it. */
struct acctlog_rotated_name {
	bool dated, gz;
	unsigned long num; /* NAME.N */
	const char *key;   /* NAME-SUFFIX: the suffix (within the name), without .gz */
	size_t keylen;
};
/* Is @name (a file in the log's directory) a rotated copy of the log named @base? */
bool acctlog_parse_rotated(const char *base, const char *name, struct acctlog_rotated_name *ret);

/*
 * A record (@step_id NULL for the job's; @exit_code -1 and no signal: end not seen) in two
 * halves, for removals: prepare reads what the record takes from the job's and
 * step's directories (owner, start, devices) while they exist; commit writes it once they are
 * gone, so that a removal that fails writes nothing and the one that finishes it writes the
 * only record.
 */
struct acct_pending {
	struct jobcg_acct_record rec;
	char *jid, *sid, *gres, *resv, *reason; /* owned by the record */
	/* Set by acct_pending_store(): the record's line, and where it waits (an xattr of
	 * @holder, a job directory, or the file @holder) until acct_log_commit() wrote it. */
	char *line;
	size_t len;
	char *holder, *xattr;
};
int acct_log_prepare(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
		     uint64_t start_usec, int exit_code, int exit_signal, unsigned ntasks,
		     bool cancelled, const struct jobcg_acct *a, struct acct_pending *ret);
int acct_log_commit(struct jobcg_ctx *ctx, struct acct_pending *p);
void acct_pending_done(struct acct_pending *p);
/* acct_log_prepare() of a step from what jobcg_step_run() gave (@res NULL: end not seen). */
int acct_step_prepare(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
		      uint64_t start_usec, const struct jobcg_run_result *res,
		      const struct jobcg_acct *a, bool cancelled, struct acct_pending *ret);

/*
 * Pending records (pending.c). A removal's record is written once the directory is gone, and a
 * process killed between the two would lose it: before the rmdir the record is set aside where
 * the next gc finds it, the commit removes it once written. A step's own removal keeps it on its
 * job's directory (trusted.jobcg.pending.<step>: one setxattr and one removexattr a launch); a
 * job's removal, which takes that directory too, keeps its own record and its steps' in files of
 * <StateDir>/pending/. An entry names the directory it waits for (path and inode): one whose
 * directory is gone is written, unless the log has its line already (the writer was killed after
 * its append); one whose directory still exists waits: a step's (on its job) is the record
 * whoever removes that directory writes (acct_pending_step_take()), a file of a job's removal
 * is stale (the next removal records the job itself). All of it under the node lock.
 */
enum acct_pending_at {
	ACCT_PENDING_ON_JOB,	  /* a step's record, on its job's directory */
	ACCT_PENDING_IN_STATE_DIR /* a file in <StateDir>/pending/ */
};
/*
 * A job's removal sets its records aside (in <StateDir>/pending/) as incarnation
 * *ret_incarnation of its id: first the entries of that id already there are written if owed
 * (stale ones, of this very job, dropped); those that stay are of earlier jobs of that id, whose
 * log was failing too, and this one's names sort after them ("JOB~N", "JOB~N.STEP"; 0: "JOB",
 * "JOB.STEP"), so that no name clash loses a record and gc appends them in the order the jobs
 * ended. Failures are warned, and only leave a higher incarnation.
 */
int acct_pending_job_begin(struct jobcg_ctx *ctx, uint32_t job_id, unsigned *ret_incarnation);
/* Set @p aside, waiting for the removal of @dir (@incarnation: acct_pending_job_begin()'s, for
 * ACCT_PENDING_IN_STATE_DIR). Failure only warns (the record is written as before, without the
 * net): it returns nothing. */
void acct_pending_store(struct jobcg_ctx *ctx, struct acct_pending *p, const char *dir,
			enum acct_pending_at at, unsigned incarnation);
/*
 * The record step @sid's ender set aside on job @job_id's directory for @sdir, a directory
 * still there (its removal failed, or its ender was killed before it): the step's real end,
 * which whoever removes @sdir writes instead of a record of its own. 1 with it in *ret (its
 * line; to acct_pending_store() and acct_log_commit() as a prepared one); 0 when none waits;
 * -ENOMEM. The entry itself stays on the job's directory (acct_pending_flush_job() keeps it
 * while @sdir is there, writes it once @sdir is gone).
 */
int acct_pending_step_take(struct jobcg_ctx *ctx, uint32_t job_id, const char *sid,
			   const char *sdir, struct acct_pending *ret);
/* Its record written, the entry acct_pending_step_take() read goes. */
void acct_pending_step_drop(struct jobcg_ctx *ctx, uint32_t job_id, const char *sid);
/* @p's directory was not removed: whoever removes it records it; drop the entry. */
void acct_pending_discard(struct acct_pending *p);
/* An entry as it waits (xattr value or file), "<dir inode> <log inode> <log size> <dir>\n<line>"
 * with <line> one newline-ended line: its fields, dir to free(), line pointing into @value.
 * -EINVAL for anything else. */
struct acct_pending_entry {
	uint64_t dir_ino, log_ino, log_size;
	char *dir;
	const char *line;
};
int acct_pending_parse(const char *value, struct acct_pending_entry *ret);
/* Write what killed writers left: the entries on job @job_id's directory (one whose step
 * directory is still there stays, for that directory's remover; before it goes; with
 * @keep_in_state_dir, one that cannot be written moves to a file of <StateDir>/pending/, named
 * for @incarnation, rather than go with the directory; one that can be neither stays, and is the
 * error returned: the directory must not go; one that is no record goes to
 * <StateDir>/pending/.bad-JOB.STEP at once, warned. Without it, the job living on, one that is no
 * record moves to <StateDir>/pending/.bad-JOB.STEP, -EBADMSG, and stays if it cannot)... */
int acct_pending_flush_job(struct jobcg_ctx *ctx, uint32_t job_id, bool keep_in_state_dir,
			   unsigned incarnation, unsigned *ret_written);
/* ... and the files of <StateDir>/pending/ (gc). *ret_written (may be NULL) counts the records
 * written (added to, for the job's). What is no record of jobcg's (a directory, a link, a file
 * with another name too, another user's file; pending/ itself not a directory: -ENOTDIR) is left
 * alone and warned about by its path; a file whose content is no entry, or whose line the log's
 * reader would not take as a record, is renamed .bad-NAME (-EBADMSG), never appended; the rest
 * is still written, and the first failure returned, its error record set. */
int acct_pending_flush_state_dir(struct jobcg_ctx *ctx, unsigned *ret_written);
