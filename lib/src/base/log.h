/* jobcg internal: logging through the caller's callback, and setting the error record. */
#pragma once

#include <errno.h>
#include "jobcg/error.h"

void jobcg_log(enum jobcg_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...)	 jobcg_log(JOBCG_LOG_ERR, __VA_ARGS__)
#define log_warning(...) jobcg_log(JOBCG_LOG_WARNING, __VA_ARGS__)
#define log_notice(...)	 jobcg_log(JOBCG_LOG_NOTICE, __VA_ARGS__)
#define log_info(...)	 jobcg_log(JOBCG_LOG_INFO, __VA_ARGS__)
#define log_debug(...)	 jobcg_log(JOBCG_LOG_DEBUG, __VA_ARGS__)

/*
 * Record an error for the calling thread and return -abs(err), so that a failing path reads
 * `return error_set(-ENOENT, "no cgroup v2 mount found");`. %m is not supported: use
 * strerror(-err) explicitly.
 */
int jobcg_error_set(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, naming a file position (line/column 0 = unknown). */
int jobcg_error_set_at(int err, const char *file, unsigned line, unsigned column, const char *fmt,
		       ...) __attribute__((format(printf, 5, 6)));
/* Put back a record saved with `struct jobcg_error saved = *jobcg_last_error();`, after a
 * cleanup whose own failures must not replace the error the caller is told about. */
void jobcg_error_restore(const struct jobcg_error *saved);
/* Prefix the current error message with "prefix: " (for context added by callers). */
void jobcg_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* At the top of an exported function, for each pointer argument its header does not allow to be
 * NULL: -EINVAL with the record naming the function and argument (error.h's rule). */
#define return_if_null(arg)                                                                        \
	do {                                                                                       \
		if (!(arg))                                                                        \
			return jobcg_error_set(-EINVAL, "%s: no %s given", __func__, #arg);        \
	} while (0)

#define error_set    jobcg_error_set
#define error_set_at jobcg_error_set_at
