/* jobcg tests: a tiny TAP producer. A whole program skipped prints "1..0 # SKIP why" and exits 0
 * (Meson's TAP protocol counts exit 77 as an error). */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

static inline void tap_plan_skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	fflush(stdout);
	exit(0);
}

/* A skip is a skip unless JOBCG_MUST_WORK=1 (set in CI where the feature is expected). */
static inline bool tap_must_work(void)
{
	const char *e = getenv("JOBCG_MUST_WORK");
	return e && *e == '1';
}

/* Whether the jobcg under test has pause and crash points and test flags (-Dtest_hooks=true:
 * tests/meson.build says so in JOBCG_TEST_HOOKS). Without them a test that needs one skips. */
static inline bool tap_test_hooks(void)
{
	const char *e = getenv("JOBCG_TEST_HOOKS");
	return e && strcmp(e, "1") == 0;
}

/* Whether the build counts coverage (-Db_coverage=true: JOBCG_COVERAGE), whose counters every
 * exit writes: a row that caps a process's file size or reads its every line skips there. */
static inline bool tap_coverage(void)
{
	const char *e = getenv("JOBCG_COVERAGE");
	return e && strcmp(e, "1") == 0;
}

/* A program that is all pause and crash points: without them it skips as a whole (a failure
 * where JOBCG_MUST_WORK=1), before it makes anything. */
static inline void tap_require_hooks(const char *why)
{
	if (tap_test_hooks())
		return;
	if (tap_must_work()) {
		printf("not ok 1 - (JOBCG_MUST_WORK) skipped: %s\n1..1\n", why);
		fflush(stdout);
		exit(1);
	}
	tap_plan_skip_all(why);
}

/* A test's description is one TAP line: a line break in it (a message or a command's output
 * quoted there) is written as \n, else the harness reads the rest as unknown output. */
static inline void tap_vprint_line(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
static inline void tap_vprint_line(const char *fmt, va_list ap)
{
	char *text = NULL;

	if (vasprintf(&text, fmt, ap) < 0) {
		printf("(description lost: out of memory)\n");
		return;
	}
	for (const char *c = text; *c; c++) {
		if (*c == '\n')
			fputs("\\n", stdout);
		else if (*c == '\r')
			fputs("\\r", stdout);
		else
			putchar(*c);
	}
	putchar('\n');
	free(text);
}

static inline bool tap_ok(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline bool tap_ok(bool cond, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	tap_vprint_line(fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

static inline void tap_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_skip(const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	if (tap_must_work()) {
		printf("not ok %d - (JOBCG_MUST_WORK) skipped: ", tap_n);
		tap_failed++;
	} else {
		printf("ok %d # SKIP ", tap_n);
	}
	va_start(ap, fmt);
	tap_vprint_line(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static inline void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	/* Every line of a diagnostic is a TAP comment, whatever the text holds. */
	for (char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		nl = strchr(l, '\n');
		printf("# %.*s\n", nl ? (int)(nl - l) : (int)strlen(l), l);
	}
	if (!text || !*text)
		printf("#\n");
	free(text);
	fflush(stdout);
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	fflush(stdout);
	return tap_failed ? 1 : 0;
}

#define ok(cond, ...) tap_ok(!!(cond), __VA_ARGS__)
#define is_int(got, want, name)                                                                    \
	({                                                                                         \
		long long _g = (long long)(got), _w = (long long)(want);                           \
		bool _r = tap_ok(_g == _w, "%s", name);                                            \
		if (!_r)                                                                           \
			tap_diag("  got %lld, want %lld", _g, _w);                                 \
		_r;                                                                                \
	})
#define is_str(got, want, name)                                                                    \
	({                                                                                         \
		const char *_g = (got), *_w = (want);                                              \
		bool _r = tap_ok(_g && _w && strcmp(_g, _w) == 0, "%s", name);                     \
		if (!_r)                                                                           \
			tap_diag("  got '%s', want '%s'", _g ? _g : "(null)", _w ? _w : "(null)"); \
		_r;                                                                                \
	})
