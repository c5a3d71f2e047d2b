/* jobcg: the log callback and the per-thread error record. */
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

static jobcg_log_fn log_fn;
static void *log_userdata;
static enum jobcg_log_level log_max = JOBCG_LOG_INFO;
static __thread struct jobcg_error last_error;

JOBCG_EXPORT void jobcg_set_log(jobcg_log_fn fn, void *userdata, enum jobcg_log_level max_level)
{
	log_fn = fn;
	log_userdata = userdata;
	log_max = max_level;
}

void jobcg_log(enum jobcg_log_level level, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	if (!log_fn || level > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log_fn(level, buf, log_userdata);
}

/* The format attribute lets the compiler check the forwarded format at every caller. */
static int error_vset(int err, const char *file, unsigned line, unsigned column, const char *fmt,
		      va_list ap) __attribute__((format(printf, 5, 0)));

static int error_vset(int err, const char *file, unsigned line, unsigned column, const char *fmt,
		      va_list ap)
{
	char msg[sizeof(last_error.message)], where[sizeof(last_error.file)];

	err = err < 0 ? err : -err;
	if (err == 0)
		err = -EINVAL;
	/* Formatted apart first: an argument may be the record itself (its message or file, as
	 * in "--cpus %s: %s" with the parser's message), and vsnprintf() must not write into
	 * what it reads. */
	vsnprintf(msg, sizeof(msg), fmt, ap);
	snprintf(where, sizeof(where), "%s", file ? file : "");
	last_error.code = err;
	memcpy(last_error.file, where, sizeof(where));
	last_error.line = line;
	last_error.column = column;
	memcpy(last_error.message, msg, sizeof(msg));
	log_debug("error: %s", last_error.message);
	return err;
}

int jobcg_error_set(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err = error_vset(err, NULL, 0, 0, fmt, ap);
	va_end(ap);
	return err;
}

int jobcg_error_set_at(int err, const char *file, unsigned line, unsigned column, const char *fmt,
		       ...)
{
	va_list ap;
	va_start(ap, fmt);
	err = error_vset(err, file, line, column, fmt, ap);
	va_end(ap);
	return err;
}

void jobcg_error_prefix(const char *fmt, ...)
{
	char prefix[1024], old[sizeof(last_error.message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, last_error.message, sizeof(old));
	if (old[0])
		snprintf(last_error.message, sizeof(last_error.message), "%s: %s", prefix, old);
	else
		snprintf(last_error.message, sizeof(last_error.message), "%s", prefix);
}

void jobcg_error_restore(const struct jobcg_error *saved)
{
	if (saved != &last_error)
		last_error = *saved;
}

JOBCG_EXPORT const struct jobcg_error *jobcg_last_error(void)
{
	return &last_error;
}

JOBCG_EXPORT void jobcg_error_clear(void)
{
	memset(&last_error, 0, sizeof(last_error));
}

/* Whether the record explains the failure @code (normalised to a negative errno). */
static bool record_explains(int code)
{
	return last_error.code != 0 && last_error.code == code && last_error.message[0];
}

static int normalise(int code)
{
	/* INT_MIN has no positive counterpart, and is no errno either. */
	if (code == INT_MIN)
		return -EINVAL;
	code = code > 0 ? -code : code;
	return code ? code : -EINVAL;
}

JOBCG_EXPORT const char *jobcg_error_message(int code)
{
	code = normalise(code);
	return record_explains(code) ? last_error.message : strerror(-code);
}

JOBCG_EXPORT char *jobcg_error_format(int code, char *buf, unsigned long size)
{
	const struct jobcg_error *e = &last_error;

	code = normalise(code);
	if (!size)
		return buf;
	if (!record_explains(code))
		snprintf(buf, size, "%s", strerror(-code));
	else if (e->file[0] && e->line && e->column)
		snprintf(buf, size, "%s:%u:%u: %s", e->file, e->line, e->column, e->message);
	else if (e->file[0] && e->line)
		snprintf(buf, size, "%s:%u: %s", e->file, e->line, e->message);
	else if (e->file[0])
		snprintf(buf, size, "%s: %s", e->file, e->message);
	else
		snprintf(buf, size, "%s", e->message);
	return buf;
}
