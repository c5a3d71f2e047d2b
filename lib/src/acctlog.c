/* jobcg: the JSON-lines accounting log: append (flock + O_APPEND, fsync when asked) and robust
 * reading.
 */
#include <fcntl.h>
#include <json-c/json.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "jobcg/acctlog.h"
#include "log.h"
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
	return -EINVAL;
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
	r->job_id = r->step_id = r->gres = NULL;
}

/*
 * The record is written straight into a buffer, byte for byte the line json-c's
 * json_object_to_json_string_ext(JSON_C_TO_STRING_PLAIN) made of it (tests/unit/test-acctlog.c
 * holds json-c to it), so old and new logs read alike. Every step writes one: json-c's object,
 * hash table and printbuf, and printf's engine, were code each fresh process ran for a flat
 * record with fixed keys, and under emulation distinct code is what a launch costs.
 */

/* Keys, punctuation and the longest state name take 206 bytes, the 12 numbers at most 192;
 * each string byte takes at most 6 ("\u001f"), plus its quotes. */
#define RECORD_FIXED_MAX 512
#define ESCAPED_MAX(s)	 (6 * strlen(s) + 2)

static char *put_raw(char *p, const char *s)
{
	size_t n = strlen(s);

	memcpy(p, s, n);
	return p + n;
}

/* Out of line: inlined at each of its dozen callers, its loop would be a dozen copies of code a
 * fresh process (and an emulator) has to take in, for no speed that matters here. */
__attribute__((noinline)) static char *put_u64(char *p, uint64_t v)
{
	char digits[20];
	size_t n = 0;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = digits[--n];
	return p;
}

static char *put_int(char *p, int v)
{
	if (v < 0) {
		*p++ = '-';
		return put_u64(p, -(uint64_t)(int64_t)v);
	}
	return put_u64(p, (uint64_t)v);
}

static char *put_u64_or_null(char *p, uint64_t v, bool unavailable)
{
	return unavailable ? put_raw(p, "null") : put_u64(p, v);
}

/* As json-c's json_escape_str() without JSON_C_TO_STRING_NOSLASHESCAPE: '/' is escaped too,
 * and bytes from 0x7f up (UTF-8 or not) pass through. */
static char *put_str(char *p, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	*p++ = '"';
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char e = 0;

		switch (c) {
		case '\b':
			e = 'b';
			break;
		case '\t':
			e = 't';
			break;
		case '\n':
			e = 'n';
			break;
		case '\f':
			e = 'f';
			break;
		case '\r':
			e = 'r';
			break;
		case '"':
		case '\\':
		case '/':
			e = (char)c;
			break;
		}
		if (e) {
			*p++ = '\\';
			*p++ = e;
		} else if (c < 0x20) {
			p = put_raw(p, "\\u00");
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		} else
			*p++ = (char)c;
	}
	*p++ = '"';
	return p;
}

/* The record's line, newline included, in *ret (length *ret_len). */
static int format_record(const struct jobcg_acct_record *r, const char *state, char **ret,
			 size_t *ret_len)
{
	unsigned na = r->unavailable;
	char *line, *p;

	line = malloc(RECORD_FIXED_MAX + ESCAPED_MAX(r->job_id) +
		      (r->step_id ? ESCAPED_MAX(r->step_id) : 0) +
		      (r->gres ? ESCAPED_MAX(r->gres) : 0));
	if (!line)
		return -ENOMEM;
	p = put_raw(line, r->kind == JOBCG_ACCT_JOB ? "{\"type\":\"job\",\"job\":"
						    : "{\"type\":\"step\",\"job\":");
	p = put_str(p, r->job_id);
	if (r->step_id) {
		p = put_raw(p, ",\"step\":");
		p = put_str(p, r->step_id);
	}
	p = put_u64(put_raw(p, ",\"uid\":"), r->uid);
	p = put_u64(put_raw(p, ",\"gid\":"), r->gid);
	p = put_u64(put_raw(p, ",\"start_usec\":"), r->start_usec);
	p = put_u64(put_raw(p, ",\"end_usec\":"), r->end_usec);
	p = put_int(put_raw(p, ",\"exit_code\":"), r->exit_code);
	p = put_int(put_raw(p, ",\"exit_signal\":"), r->exit_signal);
	p = put_str(put_raw(p, ",\"state\":"), state);
	p = put_u64_or_null(put_raw(p, ",\"cpu_usec\":"), r->cpu_usec, na & JOBCG_ACCTREC_NO_CPU);
	p = put_u64_or_null(put_raw(p, ",\"user_usec\":"), r->user_usec, na & JOBCG_ACCTREC_NO_CPU);
	p = put_u64_or_null(put_raw(p, ",\"system_usec\":"), r->system_usec,
			    na & JOBCG_ACCTREC_NO_CPU);
	p = put_u64_or_null(put_raw(p, ",\"mem_peak\":"), r->mem_peak,
			    na & JOBCG_ACCTREC_NO_MEM_PEAK);
	p = put_u64_or_null(put_raw(p, ",\"oom_kills\":"), r->oom_kills, na & JOBCG_ACCTREC_NO_OOM);
	p = put_u64(put_raw(p, ",\"ntasks\":"), r->ntasks);
	if (r->gres)
		p = put_str(put_raw(p, ",\"gres\":"), r->gres);
	p = put_raw(p, "}\n");
	*ret = line;
	*ret_len = (size_t)(p - line);
	return 0;
}

/* Write all of @buf (regular files normally take it in one go; loop for signals). */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

JOBCG_EXPORT int jobcg_acctlog_write(const char *path, const struct jobcg_acct_record *r,
				     unsigned flags)
{
	_cleanup_free_ char *line = NULL;
	_cleanup_close_ int fd = -1;
	const char *state = jobcg_acct_state_name(r->state);
	struct stat st;
	size_t len;
	int k;

	if (flags & ~JOBCG_ACCTLOG_SYNC)
		return error_set(-EINVAL, "unknown accounting log flags 0x%x", flags);
	if (!r->job_id || !state)
		return error_set(-EINVAL, "accounting record without job id or with a bad state");
	if ((k = format_record(r, state, &line, &len)) < 0)
		return k;

	if ((k = state_dir_prepare(path)) < 0)
		return k;
	fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0640);
	if (fd < 0)
		return error_set(negative_errno(), "cannot open %s: %s", path, strerror(errno));
	/* Serialise writers so the torn-line check below and our line cannot interleave. */
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return error_set(negative_errno(), "cannot lock %s: %s", path,
					 strerror(errno));
	if (fstat(fd, &st) < 0)
		return error_set(negative_errno(), "cannot stat %s: %s", path, strerror(errno));
	if (st.st_size > 0) {
		char last = '\n';

		if (pread(fd, &last, 1, st.st_size - 1) != 1)
			return error_set(-EIO, "cannot read the end of %s", path);
		/* A crash mid-write left a torn line: end it so it stays alone (and is skipped). */
		if (last != '\n' && (k = write_all(fd, "\n", 1)) < 0)
			return error_set(k, "cannot write %s: %s", path, strerror(-k));
	}
	k = write_all(fd, line, len);
	if (k < 0)
		return error_set(k, "cannot write %s: %s", path, strerror(-k));
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

/* Parse one line into @r; false when it is not a complete record. */
static bool parse_record(const char *line, struct jobcg_acct_record *r)
{
	struct json_object *o = json_tokener_parse(line);
	const char *type, *job, *step, *state, *gres;
	int64_t uid, gid, ec, sig, ntasks;
	int st;
	bool ok = false;

	if (!o)
		return false;
	if (!json_object_is_type(o, json_type_object))
		goto out;
	type = get_str(o, "type");
	job = get_str(o, "job");
	step = get_str(o, "step");
	state = get_str(o, "state");
	gres = get_str(o, "gres");
	if (!type || !job || !state || (!streq(type, "job") && !streq(type, "step")))
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
	ok = r->job_id && (!step || r->step_id) && (!gres || r->gres);
	if (!ok)
		jobcg_acct_record_done(r);
out:
	json_object_put(o);
	return ok;
}

/* Longest line we accept: records are a few hundred bytes. */
#define ACCT_LINE_MAX 65536

JOBCG_EXPORT int jobcg_acctlog_read(const char *path, const char *job_id, jobcg_acctlog_fn fn,
				    void *userdata)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	ssize_t len;

	if (!f) {
		if (errno == ENOENT)
			return 0;
		return error_set(negative_errno(), "cannot open %s: %s", path, strerror(errno));
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		struct jobcg_acct_record r;
		int k;

		lineno++;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = 0;
		else {
			log_warning("%s:%u: incomplete last line (torn write?), skipped", path,
				    lineno);
			continue;
		}
		if (len == 0)
			continue;
		if (len > ACCT_LINE_MAX || !parse_record(line, &r)) {
			log_warning("%s:%u: not an accounting record, skipped", path, lineno);
			continue;
		}
		if (job_id && !streq(job_id, r.job_id)) {
			jobcg_acct_record_done(&r);
			continue;
		}
		k = fn(&r, userdata);
		jobcg_acct_record_done(&r);
		if (k != 0)
			return k;
	}
	if (ferror(f))
		return error_set(-EIO, "cannot read %s", path);
	return 0;
}
