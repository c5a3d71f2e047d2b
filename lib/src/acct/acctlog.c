/* jobcg: the JSON-lines accounting log: append (O_APPEND under a flock of a root-only lock file
 * beside it, fsync when asked) and robust reading.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include "config_internal.h"
#include "jobcg/acctlog.h"
#include "jobcg/job.h"
#include "jobcg/resv.h"
#include "log.h"
#include "acctlog_internal.h"
#include "testhook.h"
#include "util.h"

static const char *const state_names[_JOBCG_ACCT_STATE_MAX] = {
    [JOBCG_ACCT_COMPLETED] = "COMPLETED",	  [JOBCG_ACCT_FAILED] = "FAILED",
    [JOBCG_ACCT_OUT_OF_MEMORY] = "OUT_OF_MEMORY", [JOBCG_ACCT_CANCELLED] = "CANCELLED",
    [JOBCG_ACCT_NODE_FAIL] = "NODE_FAIL",
};

JOBCG_EXPORT const char *jobcg_acct_state_name(enum jobcg_acct_state s)
{
	return (unsigned)s < _JOBCG_ACCT_STATE_MAX ? state_names[s] : NULL;
}

JOBCG_EXPORT int jobcg_acct_state_from_name(const char *name)
{
	for (int i = 0; i < _JOBCG_ACCT_STATE_MAX; i++)
		if (name && streq(state_names[i], name))
			return i;
	return error_set(-EINVAL, "unknown accounting state '%s'", name ? name : "(null)");
}

JOBCG_EXPORT enum jobcg_acct_state jobcg_acct_state_of(int exit_code, int exit_signal,
						       uint64_t oom_kills, bool cancelled)
{
	if (cancelled)
		return JOBCG_ACCT_CANCELLED;
	if (oom_kills > 0)
		return JOBCG_ACCT_OUT_OF_MEMORY;
	if (exit_signal > 0 || exit_code > 0)
		return JOBCG_ACCT_FAILED;
	if (exit_code < 0)
		return JOBCG_ACCT_NODE_FAIL;
	return JOBCG_ACCT_COMPLETED;
}

JOBCG_EXPORT int jobcg_acctlog_path(const struct jobcg_config *conf, char **ret)
{
	return_if_null(conf);
	return_if_null(ret);
	const char *dir = conf && conf->cgroup.state_dir  ? conf->cgroup.state_dir
			  : env_secure("JOBCG_STATE_DIR") ? env_secure("JOBCG_STATE_DIR")
							  : "/var/lib/jobcg";
	char *p = strdup_printf("%s/acct.jsonl", dir);

	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

JOBCG_EXPORT void jobcg_acct_record_done(struct jobcg_acct_record *r)
{
	if (!r)
		return;
	free(r->job_id);
	free(r->step_id);
	free(r->gres);
	free(r->reason);
	free(r->reservation);
	r->job_id = r->step_id = r->gres = r->reason = r->reservation = NULL;
}

/* Adds @v under @k; false on ENOMEM (@v NULL or the key not added), @v put either way. */
static bool add(struct json_object *o, const char *k, struct json_object *v)
{
	if (!v)
		return false;
	if (json_object_object_add(o, k, v) < 0) {
		json_object_put(v);
		return false;
	}
	return true;
}

/* A reading the kernel did not give is null, not 0. */
static bool add_u64_or_null(struct json_object *o, const char *k, uint64_t v, bool unavailable)
{
	if (unavailable)
		return json_object_object_add(o, k, NULL) == 0;
	return add(o, k, json_object_new_uint64(v));
}

/*
 * The record's line, newline included, in *ret (length *ret_len). json-c's plain form: no
 * spaces, keys in this order, '/' escaped, bytes from 0x7f up passed through. Logs written
 * before json-c wrote the line hold the same bytes (tests/unit/test-acctlog.c keeps such lines).
 */

/* Is @s a job id written as "%u" writes it (no sign, no leading zero)? Its value in *ret. */
static bool job_id_canonical(const char *s, uint64_t *ret)
{
	return s[0] != '0' && parse_u64(s, UINT32_MAX - 1, ret) == 0;
}

int acctlog_format(const struct jobcg_acct_record *r, char **ret, size_t *ret_len)
{
	const char *state = jobcg_acct_state_name(r->state);
	struct json_object *o;
	unsigned na = r->unavailable;
	const char *text;
	size_t len;
	uint64_t job;
	bool ok;
	char *line;

	if (!r->job_id || !state)
		return error_set(-EINVAL, "accounting record without job id or with a bad state");
	if (!(o = json_object_new_object()))
		return -ENOMEM;
	ok = add(o, "type", json_object_new_string(r->kind == JOBCG_ACCT_JOB ? "job" : "step")) &&
	     /* A number, as every other JSON jobcg prints has it; an id that is not one of
	      * jobcg's (a caller's own scheme) stays a string. */
	     add(o, "job",
		 job_id_canonical(r->job_id, &job) ? json_object_new_uint64(job)
						   : json_object_new_string(r->job_id)) &&
	     (!r->step_id || add(o, "step", json_object_new_string(r->step_id))) &&
	     add(o, "uid", json_object_new_uint64(r->uid)) &&
	     add(o, "gid", json_object_new_uint64(r->gid)) &&
	     add(o, "start_usec", json_object_new_uint64(r->start_usec)) &&
	     add(o, "end_usec", json_object_new_uint64(r->end_usec)) &&
	     add(o, "exit_code", json_object_new_int(r->exit_code)) &&
	     add(o, "exit_signal", json_object_new_int(r->exit_signal)) &&
	     add(o, "state", json_object_new_string(state)) &&
	     add_u64_or_null(o, "cpu_usec", r->cpu_usec, na & JOBCG_ACCTREC_NO_CPU) &&
	     add_u64_or_null(o, "user_usec", r->user_usec, na & JOBCG_ACCTREC_NO_CPU) &&
	     add_u64_or_null(o, "system_usec", r->system_usec, na & JOBCG_ACCTREC_NO_CPU) &&
	     add_u64_or_null(o, "mem_peak", r->mem_peak, na & JOBCG_ACCTREC_NO_MEM_PEAK) &&
	     add_u64_or_null(o, "oom_kills", r->oom_kills, na & JOBCG_ACCTREC_NO_OOM) &&
	     add(o, "ntasks", json_object_new_uint64(r->ntasks)) &&
	     (!r->gres || add(o, "gres", json_object_new_string(r->gres))) &&
	     (!r->reservation || add(o, "reservation", json_object_new_string(r->reservation))) &&
	     (!r->reason || add(o, "reason", json_object_new_string(r->reason)));
	text = ok ? json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len) : NULL;
	line = text ? malloc(len + 2) : NULL;
	if (line) {
		memcpy(line, text, len);
		line[len] = '\n';
		line[len + 1] = 0;
	}
	json_object_put(o);
	if (!line)
		return -ENOMEM;
	*ret = line;
	*ret_len = len + 1;
	return 0;
}

/*
 * A log jobcg appends to or reads (@regular: a regular file): root's or ours, and nobody else may
 * write it. Anyone who could would add records (charge a job, hide one) that look like jobcg's.
 */
static int log_file_safe(const char *path, const struct stat *st, bool regular)
{
	if (regular && !S_ISREG(st->st_mode))
		return error_set(-EINVAL, "%s is not a regular file", path);
	if (st->st_uid != 0 && st->st_uid != geteuid())
		return error_set(
		    -EPERM,
		    "%s is owned by uid %u, not by root or uid %u: its records could be "
		    "anyone's",
		    path, (unsigned)st->st_uid, (unsigned)geteuid());
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return error_set(
		    -EPERM,
		    "%s is writable by its group or by others (mode %04o): its records "
		    "could be anyone's",
		    path, (unsigned)(st->st_mode & 07777));
	return 0;
}

JOBCG_EXPORT int jobcg_acctlog_write(const char *path, const struct jobcg_acct_record *r,
				     unsigned flags)
{
	return_if_null(path);
	return_if_null(r);
	if (flags & ~JOBCG_ACCTLOG_SYNC)
		return error_set(-EINVAL, "unknown accounting log flags 0x%x", flags);
	return acctlog_write(path, r, flags, false);
}

int acctlog_write(const char *path, const struct jobcg_acct_record *r, unsigned flags,
		  bool dir_checked)
{
	_cleanup_free_ char *line = NULL;
	size_t len;
	int k = acctlog_format(r, &line, &len);

	if (k < 0)
		return k;
	return acctlog_write_line(path, line, len, flags, dir_checked);
}

/*
 * Writers are serialised on <log>.lock, not on the log: flock() asks for no access mode, so
 * anyone who may read the log (a 0644 log, a group of log readers) could hold a lock on it for
 * ever and stop every step end and release behind it. The lock file is made mode 0600 beside
 * the log, in a directory the caller checked (writable by root or us alone), and refused when
 * anyone else could open it; so only writers hold it, each for one append (and its fsync), and
 * it is waited for without a bound, as the log was. The lock is the name, not the inode: one
 * removed by hand while held is opened again (lock_file_take(), as for the node lock).
 */
static int writer_wait(int fd, void *path)
{
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return error_set(negative_errno(), "cannot lock %s: %s", (const char *)path,
					 strerror(errno));
	return 0;
}

static int writer_lock(const char *log, int *ret_fd)
{
	_cleanup_free_ char *path = strdup_printf("%s.lock", log);

	if (!path)
		return -ENOMEM;
	return lock_file_take(path, writer_wait, path, ret_fd);
}

int acctlog_write_line(const char *path, const char *line, size_t len, unsigned flags,
		       bool dir_checked)
{
	_cleanup_close_ int lock = -1, fd = -1;
	struct rlimit saved;
	struct stat st;
	int k, raised;

	if (!dir_checked && (k = state_dir_prepare(path)) < 0)
		return k;
	/* So that the torn-line check below and our line cannot interleave with another
	 * writer's. */
	if ((k = writer_lock(path, &lock)) < 0)
		return k;
	for (unsigned tries = 0;; tries++) {
		struct stat now;

		fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
			  0640);
		if (fd < 0)
			return error_set(negative_errno(), "cannot open %s: %s", path,
					 strerror(errno));
		if (fstat(fd, &st) < 0)
			return error_set(negative_errno(), "cannot stat %s: %s", path,
					 strerror(errno));
		/* (its type is the administrator's: a FIFO to a collector is written as a file) */
		if ((k = log_file_safe(path, &st, false)) < 0)
			return k;
		test_pause("acctlog-opened");
		/* Rotated (renamed, perhaps compressed and removed) since we opened it: the record
		 * belongs in the new log, not in the file that was moved. */
		if (lstat(path, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino &&
		    st.st_nlink > 0)
			break;
		if (tries >= 16)
			return error_set(-EAGAIN, "%s keeps being replaced while we write to it",
					 path);
		close(TAKE_FD(fd));
	}
	/* A file-size limit would kill us (SIGXFSZ) after the cgroup is gone, record lost. */
	if ((raised = fsize_allow((uint64_t)st.st_size + 1 + len, &saved)) < 0) {
		jobcg_error_prefix("cannot write %s", path);
		return raised;
	}
	k = 0;
	if (st.st_size > 0) {
		char last = '\n';

		if (pread(fd, &last, 1, st.st_size - 1) != 1)
			k = error_set(-EIO, "cannot read the end of %s", path);
		/* A crash mid-write left a torn line: end it so it stays alone (and is skipped). */
		else if (last != '\n' && (k = write_all(fd, "\n", 1)) < 0)
			error_set(k, "cannot write %s: %s", path, strerror(-k));
	}
	if (k >= 0 && (k = TEST_FAIL("append", path, write_all(fd, line, len))) < 0)
		error_set(k, "cannot write %s: %s", path, strerror(-k));
	if (raised)
		fsize_restore(&saved);
	if (k < 0)
		return k;
	if ((flags & JOBCG_ACCTLOG_SYNC) && fsync(fd) < 0)
		return error_set(negative_errno(), "cannot fsync %s: %s", path, strerror(errno));
	return 0;
}

JOBCG_EXPORT int jobcg_acctlog_append(const char *path, const struct jobcg_acct_record *r)
{
	return jobcg_acctlog_write(path, r, JOBCG_ACCTLOG_SYNC);
}

static bool get_u64(struct json_object *o, const char *k, uint64_t *ret)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int))
		return false;
	/* json_object_get_uint64() reads a negative number as 0 without a word */
	if (json_object_get_int64(v) < 0)
		return false;
	errno = 0;
	*ret = json_object_get_uint64(v);
	return errno == 0;
}

/* An unavailable reading is stored as null: set @bit in *unavailable and leave *ret 0. */
static bool get_u64_or_null(struct json_object *o, const char *k, uint64_t *ret, unsigned bit,
			    unsigned *unavailable)
{
	struct json_object *v;

	if (json_object_object_get_ex(o, k, &v) && !v) {
		*ret = 0;
		*unavailable |= bit;
		return true;
	}
	return get_u64(o, k, ret);
}

static bool get_i64(struct json_object *o, const char *k, int64_t min, int64_t max, int64_t *ret)
{
	struct json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int))
		return false;
	x = json_object_get_int64(v);
	if (x < min || x > max)
		return false;
	*ret = x;
	return true;
}

static const char *get_str(struct json_object *o, const char *k)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/*
 * Parse one line into @r; false when it is not a complete record. The step id and reservation
 * are checked as the numbers are: one jobcg makes (jobcg_step_id_valid, jobcg_resv_name_valid),
 * since one with a newline or an escape sequence would forge lines or drive the terminal of
 * whoever reads the log. A record without a reservation (all of those older jobcg wrote) has
 * none, and so has one whose reservation is null. (Job ids of old logs were written as
 * strings: those are read as they are, and `jobcg acct` masks what it prints of them.)
 */
/* The JSON object that is all of @line (whitespace around it aside), or NULL. */
static struct json_object *parse_line(const char *line)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;
	size_t len = strlen(line), end;

	if (!tok)
		return NULL;
	o = json_tokener_parse_ex(tok, line, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (o && json_tokener_get_error(tok) == json_tokener_success) {
		/* json-c stops after the first value: what follows it ("{...}{...}", "{...} x")
		 * is not jobcg's, and the line is not a record */
		end += strspn(line + end, " \t\r");
		if (end != len) {
			json_object_put(o);
			o = NULL;
		}
	} else if (o) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static bool parse_record(const char *line, struct jobcg_acct_record *r)
{
	struct json_object *o = parse_line(line);
	const char *type, *job, *step, *state, *gres, *reason, *resv;
	struct json_object *rv;
	int64_t uid, gid, ec, sig, ntasks, jid;
	char jbuf[24];
	int st;
	bool ok = false;

	if (!o)
		return false;
	if (!json_object_is_type(o, json_type_object))
		goto out;
	type = get_str(o, "type");
	job = get_str(o, "job");
	/* A number since jobcg wrote job ids as numbers; a string in older logs. */
	if (!job && get_i64(o, "job", 1, UINT32_MAX - 1, &jid)) {
		snprintf(jbuf, sizeof(jbuf), "%" PRId64, jid);
		job = jbuf;
	}
	step = get_str(o, "step");
	state = get_str(o, "state");
	gres = get_str(o, "gres");
	reason = get_str(o, "reason");
	resv = get_str(o, "reservation");
	if (json_object_object_get_ex(o, "reservation", &rv) && rv &&
	    (!resv || !jobcg_resv_name_valid(resv)))
		goto out;
	if (!type || !job || !state || (!streq(type, "job") && !streq(type, "step")))
		goto out;
	if (step && !jobcg_step_id_valid(step))
		goto out;
	st = jobcg_acct_state_from_name(state);
	if (st < 0)
		goto out;
	*r = (struct jobcg_acct_record){.kind =
					    streq(type, "job") ? JOBCG_ACCT_JOB : JOBCG_ACCT_STEP,
					.state = (enum jobcg_acct_state)st};
	if (!get_i64(o, "uid", 0, UINT32_MAX, &uid) || !get_i64(o, "gid", 0, UINT32_MAX, &gid) ||
	    !get_i64(o, "exit_code", -1, 255, &ec) || !get_i64(o, "exit_signal", 0, 128, &sig) ||
	    !get_i64(o, "ntasks", 0, UINT32_MAX, &ntasks) ||
	    !get_u64(o, "start_usec", &r->start_usec) || !get_u64(o, "end_usec", &r->end_usec) ||
	    !get_u64_or_null(o, "cpu_usec", &r->cpu_usec, JOBCG_ACCTREC_NO_CPU, &r->unavailable) ||
	    !get_u64_or_null(o, "user_usec", &r->user_usec, JOBCG_ACCTREC_NO_CPU,
			     &r->unavailable) ||
	    !get_u64_or_null(o, "system_usec", &r->system_usec, JOBCG_ACCTREC_NO_CPU,
			     &r->unavailable) ||
	    !get_u64_or_null(o, "mem_peak", &r->mem_peak, JOBCG_ACCTREC_NO_MEM_PEAK,
			     &r->unavailable) ||
	    !get_u64_or_null(o, "oom_kills", &r->oom_kills, JOBCG_ACCTREC_NO_OOM, &r->unavailable))
		goto out;
	r->uid = (uid_t)uid;
	r->gid = (gid_t)gid;
	r->exit_code = (int)ec;
	r->exit_signal = (int)sig;
	r->ntasks = (unsigned)ntasks;
	r->job_id = strdup(job);
	r->step_id = step ? strdup(step) : NULL;
	r->gres = gres ? strdup(gres) : NULL;
	r->reason = reason ? strdup(reason) : NULL;
	r->reservation = resv ? strdup(resv) : NULL;
	ok = r->job_id && (!step || r->step_id) && (!gres || r->gres) && (!reason || r->reason) &&
	     (!resv || r->reservation);
	if (!ok)
		jobcg_acct_record_done(r);
out:
	json_object_put(o);
	return ok;
}

/* Longest line we accept: records are a few hundred bytes. */
#define ACCT_LINE_MAX 65536

bool acctlog_line_is_record(const char *line, size_t len)
{
	_cleanup_free_ char *copy = NULL;
	struct jobcg_acct_record r;

	if (len < 2 || len - 1 > ACCT_LINE_MAX || line[len - 1] != '\n')
		return false;
	/* acctlog_format() escapes every byte below 0x20: a raw one (an ESC, a NUL) is no line
	 * of jobcg's, even where json-c would take it */
	for (size_t i = 0; i < len - 1; i++)
		if ((unsigned char)line[i] < 0x20)
			return false;
	if (!(copy = strndup(line, len - 1)) || !parse_record(copy, &r))
		return false;
	jobcg_acct_record_done(&r);
	return true;
}
/* Most rotated logs read (logrotate's "rotate N" keeps N). */
#define ACCT_MAX_ROTATED 4096

/* Lines of one log file, plain or gzip-compressed (zlib reads both). */
struct line_reader {
	gzFile gz;
	char *buf; /* the current line; *buf..len, NUL-terminated */
	size_t len, cap;
	char chunk[16384];
	size_t cpos, clen;
	bool eof, damaged;
};

/* The next line without its newline in r->buf; 1 found (*ret_complete false for a last line
 * without a newline), 0 at the end (r->damaged: a read error ended it early). */
static int next_line(struct line_reader *r, bool *ret_complete)
{
	r->len = 0;
	for (;;) {
		if (r->cpos == r->clen) {
			int n;

			if (r->eof)
				break;
			n = gzread(r->gz, r->chunk, sizeof(r->chunk));
			if (n <= 0) {
				int err = Z_OK;

				gzerror(r->gz, &err);
				r->eof = true;
				/* a truncated or corrupt .gz: what was read counts */
				r->damaged = n < 0 || err != Z_OK;
				break;
			}
			r->cpos = 0;
			r->clen = (size_t)n;
		}
		const char *nl = memchr(r->chunk + r->cpos, '\n', r->clen - r->cpos);
		size_t take = nl ? (size_t)(nl - (r->chunk + r->cpos)) : r->clen - r->cpos;

		/* Keep at most ACCT_LINE_MAX + 1 bytes of an overlong line: enough to refuse it. */
		size_t keep =
		    r->len > ACCT_LINE_MAX
			? 0
			: (take < ACCT_LINE_MAX + 1 - r->len ? take : ACCT_LINE_MAX + 1 - r->len);
		if (r->len + keep + 1 > r->cap) {
			size_t ncap = r->cap ? r->cap : 256;
			char *nb;

			while (ncap < r->len + keep + 1)
				ncap *= 2;
			nb = realloc(r->buf, ncap);
			if (!nb)
				return -ENOMEM;
			r->buf = nb;
			r->cap = ncap;
		}
		memcpy(r->buf + r->len, r->chunk + r->cpos, keep);
		r->len += keep;
		r->buf[r->len] = '\0';
		r->cpos += take;
		if (nl) {
			r->cpos++;
			*ret_complete = true;
			return 1;
		}
	}
	if (r->len == 0)
		return 0;
	*ret_complete = false;
	return 1;
}

/* Open @path for reading: a regular file (not through a symbolic link, and not one others could
 * have written: log_file_safe()), without waiting on a FIFO. -ENOENT is not an error record (a
 * missing log is an empty one). */
static int open_log(const char *path, int *ret_fd, struct stat *ret_st)
{
	_cleanup_close_ int fd =
	    open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	int r;

	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		if (errno == ELOOP)
			return error_set(-ELOOP, "%s is a symbolic link, not a log of jobcg's",
					 path);
		return error_set(negative_errno(), "cannot open %s: %s", path, strerror(errno));
	}
	if (fstat(fd, ret_st) < 0)
		return error_set(negative_errno(), "cannot stat %s: %s", path, strerror(errno));
	if ((r = log_file_safe(path, ret_st, true)) < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Read the records of the open log @fd (consumed), shown as @path. */
static int read_fd(int fd, const char *path, const char *job_id, jobcg_acctlog_fn fn,
		   void *userdata)
{
	struct line_reader lr = {.gz = gzdopen(fd, "rb")};
	unsigned lineno = 0;
	bool complete;
	int k, ret = 0;

	if (!lr.gz) {
		close(fd);
		return error_set(-ENOMEM, "cannot read %s: out of memory", path);
	}
	while ((k = next_line(&lr, &complete)) > 0) {
		struct jobcg_acct_record r;

		lineno++;
		if (!complete) {
			log_warning("%s:%u: incomplete last line (torn write?), skipped", path,
				    lineno);
			continue;
		}
		if (lr.len == 0)
			continue;
		if (lr.len > ACCT_LINE_MAX || !parse_record(lr.buf, &r)) {
			log_warning("%s:%u: not an accounting record, skipped", path, lineno);
			continue;
		}
		if (job_id && !streq(job_id, r.job_id)) {
			jobcg_acct_record_done(&r);
			continue;
		}
		ret = fn(&r, userdata);
		jobcg_acct_record_done(&r);
		if (ret != 0)
			break;
	}
	if (k < 0)
		ret = k;
	else if (lr.damaged)
		log_warning("%s: cannot read past line %u (a truncated or corrupt file?), the rest "
			    "skipped",
			    path, lineno);
	gzclose(lr.gz);
	free(lr.buf);
	return ret;
}

JOBCG_EXPORT int jobcg_acctlog_read(const char *path, const char *job_id, jobcg_acctlog_fn fn,
				    void *userdata)
{
	return_if_null(path);
	struct stat st;
	int fd = -1, r = open_log(path, &fd, &st);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	return read_fd(fd, path, job_id, fn, userdata);
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

/* One rotated log: its name, where it goes in time, and the file opened for the snapshot. */
struct rotated {
	char *name;
	bool dated; /* logrotate's dateext: NAME-SUFFIX, sorted by the suffix */
	bool gz;
	unsigned long num; /* NAME.N: the higher, the older */
	const char *key;   /* dateext suffix (within name), without .gz */
	size_t keylen;
	int fd;
	dev_t dev;
	ino_t ino;
};

/* Oldest first: dated ones by suffix, then numbered from the highest; the plain file wins a
 * tie with its .gz (a compression under way). */
static int rotated_cmp(const void *a, const void *b)
{
	const struct rotated *x = a, *y = b;

	if (x->dated != y->dated)
		return x->dated ? -1 : 1;
	if (x->dated) {
		size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
		int c = memcmp(x->key, y->key, n);

		if (c || x->keylen != y->keylen)
			return c ? c : (x->keylen < y->keylen ? -1 : 1);
	} else if (x->num != y->num)
		return x->num > y->num ? -1 : 1;
	return (int)x->gz - (int)y->gz;
}

static bool same_slot(const struct rotated *x, const struct rotated *y)
{
	return x->dated == y->dated &&
	       (x->dated ? x->keylen == y->keylen && memcmp(x->key, y->key, x->keylen) == 0
			 : x->num == y->num);
}

bool acctlog_parse_rotated(const char *base, const char *name, struct acctlog_rotated_name *ret)
{
	size_t bl = strlen(base), nl = strlen(name);
	const char *rest = name + bl;
	size_t rl;
	bool gz;

	if (nl <= bl + 1 || strncmp(name, base, bl) != 0 || (*rest != '.' && *rest != '-'))
		return false;
	gz = nl > bl + 4 && streq(name + nl - 3, ".gz");
	rl = nl - bl - 1 - (gz ? 3 : 0);
	if (rl == 0)
		return false;
	*ret = (struct acctlog_rotated_name){.gz = gz};
	if (*rest == '-') {
		ret->dated = true;
		ret->key = rest + 1;
		ret->keylen = rl;
		return true;
	}
	unsigned long v = 0;
	for (size_t i = 1; i <= rl; i++) {
		if (rest[i] < '0' || rest[i] > '9' || v > 100000000)
			return false;
		v = v * 10 + (unsigned long)(rest[i] - '0');
	}
	if (rest[1] == '0')
		return false;
	ret->num = v;
	return true;
}

/* Is @name (in the log's directory) a rotated copy of @base? Fills @ret. */
static bool parse_rotated(const char *base, const char *name, struct rotated *ret)
{
	struct acctlog_rotated_name n;

	if (!acctlog_parse_rotated(base, name, &n))
		return false;
	*ret = (struct rotated){
	    .dated = n.dated, .gz = n.gz, .num = n.num, .key = n.key, .keylen = n.keylen, .fd = -1};
	return true;
}

static void rotated_free(struct rotated *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		if (v[i].fd >= 0)
			close(v[i].fd);
	}
	free(v);
}

/*
 * The rotated logs beside @path, each opened, oldest first. 1 when the directory changed while
 * they were opened (a rotation under way: the caller tries again), 0 when the set is a
 * snapshot: every name still names the file that was opened.
 */
static int rotated_snapshot(const char *dir, const char *base, struct rotated **ret, size_t *ret_n,
			    size_t *ret_listed)
{
	_cleanup_(closedirp) DIR *d = opendir(dir);
	struct rotated *v = NULL;
	size_t n = 0, cap = 0, kept = 0;
	struct dirent *de;
	int r = 0;

	if (!d)
		return errno == ENOENT ? 0
				       : error_set(negative_errno(), "cannot read %s: %s", dir,
						   strerror(errno));
	while ((errno = 0, de = readdir(d))) {
		struct rotated x;

		if (!parse_rotated(base, de->d_name, &x))
			continue;
		if (n >= ACCT_MAX_ROTATED) {
			rotated_free(v, n);
			return error_set(-E2BIG, "more than %d rotated logs of %s/%s",
					 ACCT_MAX_ROTATED, dir, base);
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct rotated *nv = realloc(v, ncap * sizeof(*nv));

			if (!nv) {
				rotated_free(v, n);
				return -ENOMEM;
			}
			v = nv;
			cap = ncap;
		}
		x.name = strdup_printf("%s/%s", dir, de->d_name);
		if (!x.name) {
			rotated_free(v, n);
			return -ENOMEM;
		}
		/* key pointed into the dirent: point it into our copy */
		if (x.dated)
			x.key = x.name + strlen(dir) + 1 + strlen(base) + 1;
		v[n++] = x;
	}
	if (errno) {
		r = error_set(negative_errno(), "cannot read %s: %s", dir, strerror(errno));
		rotated_free(v, n);
		return r;
	}
	*ret_listed = n;
	if (n)
		qsort(v, n, sizeof(*v), rotated_cmp);
	/* A plain file and its .gz for the same slot: gzip is under way, read the plain one. */
	for (size_t i = 0; i < n; i++) {
		if (kept > 0 && same_slot(&v[kept - 1], &v[i]) && v[i].gz && !v[kept - 1].gz) {
			free(v[i].name);
			continue;
		}
		v[kept++] = v[i];
	}
	n = kept;
	kept = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		r = open_log(v[i].name, &v[i].fd, &st);
		if (r == -ENOENT) {
			r = 1; /* renamed away since the listing */
			for (size_t j = i; j < n; j++)
				v[kept++] = v[j];
			break;
		}
		/* Not a log (a directory, a FIFO, a link) or not one only root could have
		 * written: its name alone does not make its lines records, and it does not hide
		 * the others. */
		if (r == -EINVAL || r == -EPERM || r == -ELOOP || r == -EACCES) {
			log_warning("%s, skipped", jobcg_last_error()->message);
			jobcg_error_clear();
			free(v[i].name);
			r = 0;
			continue;
		}
		if (r < 0) {
			for (size_t j = i; j < n; j++)
				v[kept++] = v[j];
			break;
		}
		v[i].dev = st.st_dev;
		v[i].ino = st.st_ino;
		v[kept++] = v[i];
	}
	n = kept;
	if (r < 0) {
		rotated_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return r;
}

/* Still the same files under the same names, and no new rotated one? */
static bool rotated_unchanged(const char *dir, const char *base, const struct rotated *v, size_t n,
			      size_t listed)
{
	_cleanup_(closedirp) DIR *d = opendir(dir);
	struct dirent *de;
	size_t seen = 0;

	if (!d)
		return false;
	while ((de = readdir(d))) {
		struct rotated x;

		if (parse_rotated(base, de->d_name, &x))
			seen++;
	}
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (stat(v[i].name, &st) < 0 || st.st_dev != v[i].dev || st.st_ino != v[i].ino)
			return false;
	}
	return seen == listed;
}

JOBCG_EXPORT int jobcg_acctlog_read_all(const char *path, const char *job_id, jobcg_acctlog_fn fn,
					void *userdata)
{
	return_if_null(path);
	_cleanup_free_ char *dir = NULL;
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	struct rotated *v = NULL;
	size_t n = 0, listed = 0;
	struct stat st;
	int live = -1, r = 0;

	dir = slash ? strndup(path, (size_t)(slash == path ? 1 : slash - path)) : strdup(".");
	if (!dir)
		return -ENOMEM;
	/* What the writers ask of the directory (without making it): in one that others can
	 * write, anyone could have planted the logs read below. */
	if (path[0] == '/' && (r = state_dir_check(path)) < 0) {
		if (r != -ENOENT)
			return r;
		jobcg_error_clear();
		return 0; /* no directory, no log: no records */
	}
	/*
	 * Open everything first, the live log last, and check nothing moved meanwhile: reading
	 * one file after another while logrotate renames them would skip or repeat a file.
	 */
	for (unsigned tries = 0;; tries++) {
		r = rotated_snapshot(dir, base, &v, &n, &listed);
		if (r < 0)
			return r;
		if (r == 0) {
			r = open_log(path, &live, &st);
			if (r < 0 && r != -ENOENT) {
				rotated_free(v, n);
				return r;
			}
			if (rotated_unchanged(dir, base, v, n, listed)) {
				struct stat now;

				/* the live log renamed after we opened it would be read twice */
				if (live < 0 || (stat(path, &now) == 0 && now.st_ino == st.st_ino &&
						 now.st_dev == st.st_dev))
					break;
			}
			if (live >= 0)
				close(live);
			live = -1;
		}
		rotated_free(v, n);
		v = NULL;
		n = 0;
		if (tries >= 16)
			return error_set(-EAGAIN, "the logs in %s keep changing while read", dir);
		usleep(10000);
	}
	r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		r = read_fd(v[i].fd, v[i].name, job_id, fn, userdata);
		v[i].fd = -1;
	}
	if (r == 0 && live >= 0)
		r = read_fd(TAKE_FD(live), path, job_id, fn, userdata);
	if (live >= 0)
		close(live);
	rotated_free(v, n);
	return r;
}

/* Does the plain log @fd hold @line (without its newline: @len bytes) as a whole line from
 * offset @from on? */
static int fd_has_line(int fd, uint64_t from, const char *line, size_t len, bool *ret)
{
	struct line_reader lr = {};
	bool complete;
	int k;

	if (lseek(fd, (off_t)from, SEEK_SET) < 0)
		return negative_errno();
	/* gzdopen reads from where the descriptor stands; its close closes a dup of ours */
	if (!(lr.gz = gzdopen(fcntl(fd, F_DUPFD_CLOEXEC, 3), "rb")))
		return -ENOMEM;
	*ret = false;
	while ((k = next_line(&lr, &complete)) > 0)
		if (complete && lr.len == len && memcmp(lr.buf, line, len) == 0) {
			*ret = true;
			break;
		}
	gzclose(lr.gz);
	free(lr.buf);
	return k < 0 ? k : 0;
}

int acctlog_has_line(const char *path, uint64_t ino, uint64_t from, const char *line, size_t len,
		     bool *ret)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int fd = -1;
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	struct stat st;
	bool found = false;
	int r;

	if (len > 0 && line[len - 1] == '\n')
		len--;
	r = open_log(path, &fd, &st);
	if (r < 0 && r != -ENOENT)
		return r;
	/* The same log as when the record was set aside: only what was appended since counts. */
	if (fd >= 0 && ino && st.st_ino == ino) {
		r = fd_has_line(fd, from, line, len, &found);
		if (r == 0)
			*ret = found;
		return r;
	}
	/* Rotated since: the record went to the new log or to the old one, wherever that is now
	 * (a compressed copy is another file, not searched). */
	if (fd >= 0 && (r = fd_has_line(fd, 0, line, len, &found)) < 0)
		return r;
	dir = slash ? strndup(path, (size_t)(slash == path ? 1 : slash - path)) : strdup(".");
	if (!dir)
		return -ENOMEM;
	if (!found && ino) {
		_cleanup_(closedirp) DIR *d = opendir(dir);
		struct dirent *de;

		while (d && !found && (de = readdir(d))) {
			_cleanup_free_ char *p = NULL;
			_cleanup_close_ int rfd = -1;
			struct rotated x;
			struct stat rst;

			if (!parse_rotated(base, de->d_name, &x) || x.gz)
				continue;
			if (!(p = strdup_printf("%s/%s", dir, de->d_name)))
				return -ENOMEM;
			if (open_log(p, &rfd, &rst) < 0) {
				jobcg_error_clear();
				continue;
			}
			if (rst.st_ino == ino &&
			    (r = fd_has_line(rfd, from, line, len, &found)) < 0)
				return r;
		}
	}
	*ret = found;
	return 0;
}
