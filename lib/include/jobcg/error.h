/* jobcg: logging callback and error details, shared by every part of the library. */
#pragma once

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JOBCG_EXPORT __attribute__((visibility("default")))

enum jobcg_log_level {
	JOBCG_LOG_ERR = 3,
	JOBCG_LOG_WARNING = 4,
	JOBCG_LOG_NOTICE = 5,
	JOBCG_LOG_INFO = 6,
	JOBCG_LOG_DEBUG = 7,
};

/**
 * Log callback. @msg has no trailing newline and is only valid during the call.
 */
typedef void (*jobcg_log_fn)(enum jobcg_log_level level, const char *msg, void *userdata);

/**
 * Install the process-wide log callback (NULL: the library stays silent, its default).
 * Messages above @max_level are not formatted at all.
 */
JOBCG_EXPORT void jobcg_set_log(jobcg_log_fn fn, void *userdata, enum jobcg_log_level max_level);

/*
 * Arguments. A pointer argument that a function's comment does not allow to be NULL must not
 * be NULL. The functions that parse a string, read a file or return a result through a ret
 * pointer refuse NULL there with -EINVAL; accessors and formatters do not check. A flags
 * argument with a bit the function does not define is refused with -EINVAL before anything is
 * done.
 *
 * Error details. Every library function that fails returns a negative errno; the ones that
 * can say more also fill the calling thread's error record with their own failure before
 * returning (a lookup by name or key names what it did not find). Parsers set file, line and
 * column (1-based; 0 means unknown).
 *
 * The record is only the last one filled: a function that fails without saying more (out of
 * memory) leaves an earlier failure's record in place (one the library handled itself, or one
 * of an earlier call). So the record is read together with the code the call returned, and it
 * explains that code only when its own code is the same: jobcg_error_message() and
 * jobcg_error_format() take the returned code and fall back to strerror() when the record
 * belongs to another failure.
 */
struct jobcg_error {
	int code;	    /* the negative errno that was returned */
	char file[4096];    /* file the error is about, or "" */
	unsigned line;	    /* 1-based, 0 = not about a line */
	unsigned column;    /* 1-based, 0 = unknown */
	char message[2048]; /* human readable, no trailing newline */
};

/**
 * The calling thread's last error record. Never NULL; code is 0 after jobcg_error_clear().
 * It may belong to an earlier failure than the one at hand: use it only when its code is the
 * one the failing call returned (jobcg_error_message() and jobcg_error_format() check).
 */
JOBCG_EXPORT const struct jobcg_error *jobcg_last_error(void);

/** Reset the calling thread's error record. */
JOBCG_EXPORT void jobcg_error_clear(void);

/**
 * The message for @code, the negative errno a library call returned (a positive one is taken
 * as its negative): the error record's when the record explains @code (same code, a message
 * set), else strerror(). Valid until the calling thread's next library call.
 */
JOBCG_EXPORT const char *jobcg_error_message(int code);

/**
 * Format the error @code (as for jobcg_error_message()) into @buf: "file:line:col: message"
 * from the record when it explains @code (parts that are unset are left out), else
 * strerror() alone. Returns @buf.
 */
JOBCG_EXPORT char *jobcg_error_format(int code, char *buf, unsigned long size);

#ifdef __cplusplus
}
#endif
