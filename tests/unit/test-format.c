/* Unit tests for format.c: strdup_printf() and format_buf() must give exactly what glibc's
 * printf gives, for the conversions format.c does itself and for those it hands on. */
#include <limits.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdint.h>

#include "tap.h"
#include "util.h"

static unsigned mismatches;

/* glibc's answer, for comparison. */
static char *ref(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *ref(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* One format and its arguments through strdup_printf, format_buf at every buffer size up to
 * the result's and glibc, all compared. */
#define SAME(...)                                                                                  \
	do {                                                                                       \
		char *want_ = ref(__VA_ARGS__), *got_ = strdup_printf(__VA_ARGS__);                \
		size_t n_ = want_ ? strlen(want_) : 0;                                             \
		bool same_ = want_ && got_ && strcmp(want_, got_) == 0;                            \
		for (size_t sz_ = 0; same_ && sz_ <= n_ + 1; sz_++) {                              \
			char b_[256], r_[256];                                                     \
			memset(b_, 'X', sizeof(b_));                                               \
			memset(r_, 'X', sizeof(r_));                                               \
			int rb_ = format_buf(b_, sz_, __VA_ARGS__);                                \
			int rr_ = snprintf(r_, sz_, __VA_ARGS__);                                  \
			same_ = rb_ == rr_ && memcmp(b_, r_, sizeof(b_)) == 0;                     \
		}                                                                                  \
		if (!same_) {                                                                      \
			mismatches++;                                                              \
			tap_diag("%s:%d: glibc '%s', ours '%s'", __FILE__, __LINE__,               \
				 want_ ? want_ : "(fail)", got_ ? got_ : "(fail)");                \
		}                                                                                  \
		free(want_);                                                                       \
		free(got_);                                                                        \
	} while (0)

static void test_fixed(void)
{
	/* volatile: gcc must not see the NULL and refuse to compile the calls */
	const char *volatile nothing = NULL;
	const char *null = nothing;

	mismatches = 0;
	SAME("plain text, no conversion");
	SAME("%s", "");
	SAME("%%");
	SAME("100%% of %s", "it");
	SAME("%s/job_%u/step_%s", "/sys/fs/cgroup/jobcg", 4000000000u, "batch");
	SAME("%.*s/%s", 5, "abcdefgh", "x");
	SAME("%.*s", 0, "abc");
	SAME("%.*s", -1, "abc"); /* a negative precision is none */
	SAME("%.2s|%.10s|%.s", "abc", "abc", "abc");
	SAME("%c%c%c", 'a', '\0' + 1, 'z');
	SAME("%d %d %d %d", 0, -1, INT_MAX, INT_MIN);
	SAME("%i %u %u", -42, 0u, UINT_MAX);
	SAME("%ld %ld %lu", LONG_MAX, LONG_MIN, ULONG_MAX);
	SAME("%lld %lld %llu", LLONG_MAX, LLONG_MIN, ULLONG_MAX);
	SAME("%zu %zd %zd", SIZE_MAX, (ssize_t)-5, (ssize_t)SSIZE_MAX);
	SAME("%x %lx %llx %x", 0u, 0xdeadbeeful, 0xffffffffffffffffull, 255u);
	SAME("%d:%llu", 12345, 98765432109876ull);
	SAME("JOBCG_TASK_ID=%d", 7);
	/* zero-padded to a width, as the hostlist expander's nvidia[00-15] needs */
	SAME("%05d|%05d|%05u|%03x|%0d|%02u", 42, -42, 7u, 255u, 9, 12345u);
	SAME("%010lld|%025llu|%0*zu", LLONG_MIN, ULLONG_MAX, 3, (size_t)4);
	SAME("[%0*d][%0*lu][%0*d]", -6, 42, 0, 5ul, -2, -123); /* a negative '*': left, spaces */
	SAME("gpu%0*" PRIu64 "x", 2, (uint64_t)3);
	/* NULL strings: "(null)", unless a precision under 6 cuts it to nothing */
	SAME("%s", null);
	SAME("[%.3s][%.6s][%.*s]", null, null, 2, null);
	/* handed to glibc: flags, widths, other conversions */
	SAME("%5d|%-5d|%05u", 42, 42, 42u);
	SAME("%08.3f %g %e", 3.14159, 1e-5, 2.5);
	SAME("%p", (void *)0x1234);
	SAME("%X %o %#x", 255u, 8u, 255u);
	SAME("%10s|%-4s|", "ab", "cd");
	SAME("%hhu %hd", (unsigned char)250, (short)-3);
	SAME("%s and then %5.2s", "simple", "mixed");
	ok(mismatches == 0, "fixed cases: the same as glibc at every buffer size (%u differ)",
	   mismatches);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	/* xorshift64*: deterministic, so a failure repeats */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 2685821657736338717ull;
}

static void test_random(void)
{
	char str[40];

	mismatches = 0;
	for (int i = 0; i < 3000; i++) {
		uint64_t v = rnd() >> (rnd() % 64);
		size_t n = rnd() % (sizeof(str) - 1);

		for (size_t k = 0; k < n; k++)
			str[k] = (char)(' ' + rnd() % 95);
		str[n] = '\0';
		SAME("%d", (int)v);
		SAME("%u|%x", (unsigned)v, (unsigned)v);
		SAME("%ld|%lu|%lx", (long)v, (unsigned long)v, (unsigned long)v);
		SAME("%lld|%llu|%llx", (long long)v, (unsigned long long)v, (unsigned long long)v);
		SAME("%zu|%zd", (size_t)v, (ssize_t)v);
		int prec = (int)(rnd() % 50) - 5; /* SAME evaluates its arguments many times */

		SAME("<%s>%.*s", str, prec, str);
		SAME("%0*llu|%0*d", prec, (unsigned long long)v, prec / 2, (int)v);
	}
	ok(mismatches == 0, "3000 random values and strings: the same as glibc (%u differ)",
	   mismatches);
}

int main(void)
{
	test_fixed();
	test_random();
	return tap_done();
}
