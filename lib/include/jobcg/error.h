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
 * Error details. Every library function that fails returns a negative errno; the ones that
 * can say more also fill the calling thread's error record before returning. Parsers set file,
 * line and column (1-based; 0 means unknown).
 */
struct jobcg_error {
	int code;	    /* the negative errno that was returned */
	char file[4096];    /* file the error is about, or "" */
	unsigned line;	    /* 1-based, 0 = not about a line */
	unsigned column;    /* 1-based, 0 = unknown */
	char message[2048]; /* human readable, no trailing newline */
};

/** The calling thread's last error record. Never NULL; code is 0 after jobcg_error_clear(). */
JOBCG_EXPORT const struct jobcg_error *jobcg_last_error(void);

/** Reset the calling thread's error record. */
JOBCG_EXPORT void jobcg_error_clear(void);

/**
 * Format the last error as "file:line:col: message" (parts that are unset are left out) into
 * @buf. Returns @buf.
 */
JOBCG_EXPORT char *jobcg_error_format(char *buf, unsigned long size);

#ifdef __cplusplus
}
#endif
