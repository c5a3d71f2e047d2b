/* Unit tests for the size, CPU list and hostlist parsers (parse.h). */
#include <time.h>

#include "parse.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static void size_ok(const char *s, uint64_t unit, unsigned flags, uint64_t want)
{
	uint64_t v = 12345;
	int r = jobcg_parse_size(s, unit, flags, &v);

	ok(r == 0 && v == want, "size '%s' = %llu (got r=%d v=%llu)", s, (unsigned long long)want,
	   r, (unsigned long long)v);
}

static void size_bad(const char *s, unsigned flags, int want_r, unsigned want_col)
{
	uint64_t v = 777;
	int r = jobcg_parse_size(s, 1, flags, &v);

	ok(r == want_r && v == 777 && jobcg_last_error()->column == want_col,
	   "size '%s' refused with %d at column %u (got %d col %u: %s)", s, want_r, want_col, r,
	   jobcg_last_error()->column, jobcg_last_error()->message);
}

static void test_size(void)
{
	size_ok("0", 1, 0, 0);
	size_ok("4096", 1, 0, 4096);
	size_ok("4G", 1, 0, UINT64_C(4) << 30);
	size_ok("4g", 1, 0, UINT64_C(4) << 30);
	size_ok("10g", 1, JOBCG_SIZE_DECIMAL, UINT64_C(10) << 30);
	size_ok("1k", 1, 0, 1024);
	size_ok("2KiB", 1, 0, 2048);
	size_ok("2kb", 1, JOBCG_SIZE_DECIMAL, 2000);
	size_ok("3MB", 1, JOBCG_SIZE_DECIMAL, 3000000);
	size_ok("1T", 1, 0, UINT64_C(1) << 40);
	size_ok("2P", 1, 0, UINT64_C(2) << 50);
	size_ok("50G", 1, 0, UINT64_C(53687091200));
	size_ok("4000", UINT64_C(1) << 20, 0, UINT64_C(4000) << 20);
	size_ok("4G", UINT64_C(1) << 20, 0, UINT64_C(4) << 30);
	size_ok("18446744073709551615", 1, 0, UINT64_MAX);
	size_bad("", 0, -EINVAL, 1);
	size_bad("-1", 0, -EINVAL, 1);
	size_bad("+1", 0, -EINVAL, 1);
	size_bad(" 1", 0, -EINVAL, 1);
	size_bad("4X", 0, -EINVAL, 2);
	size_bad("4GB", 0, -EINVAL, 2);
	size_bad("4.0", 0, -EINVAL, 2);
	size_bad("abc", 0, -EINVAL, 1);
	size_bad("4G ", 0, -EINVAL, 2);
	size_bad("4Gx", 0, -EINVAL, 2);
	size_bad("18446744073709551616", 0, -ERANGE, 1);
	size_bad("16777216T", 0, -ERANGE, 1);
	size_bad("99999999999999999999999", 0, -ERANGE, 1);
}

static void cpus_ok(const char *s, const char *want, size_t want_words)
{
	_cleanup_free_ uint64_t *bits = NULL;
	_cleanup_free_ char *back = NULL;
	size_t words = 0;
	int r = jobcg_parse_cpulist(s, &bits, &words);

	if (!ok(r == 0, "CPU list '%s' parses (r=%d %s)", s, r,
		r ? jobcg_last_error()->message : ""))
		return;
	is_int(words, want_words, "  word count");
	ok(jobcg_format_cpulist(bits, words, &back) == 0, "  formats back");
	is_str(back, want, "  canonical form");
}

static void cpus_bad(const char *s, int want_r, unsigned col, const char *needle)
{
	uint64_t *bits = (uint64_t *)0x1;
	size_t words = 99;
	int r = jobcg_parse_cpulist(s, &bits, &words);

	ok(r == want_r && bits == (uint64_t *)0x1 && words == 99 &&
	       jobcg_last_error()->column == col && strstr(jobcg_last_error()->message, needle),
	   "CPU list '%s' refused (%d, column %u, '%s'): got %d column %u '%s'", s, want_r, col,
	   needle, r, jobcg_last_error()->column, jobcg_last_error()->message);
}

static void test_cpulist(void)
{
	cpus_ok("0", "0", 1);
	cpus_ok("0-3,8", "0-3,8", 1);
	cpus_ok("8,0-3", "0-3,8", 1);
	cpus_ok("0-15,32-47", "0-15,32-47", 1);
	cpus_ok("63", "63", 1);
	cpus_ok("64", "64", 2);
	cpus_ok("1,2,3,5", "1-3,5", 1);
	cpus_ok("4095", "4095", 64);
	cpus_ok("3-3", "3", 1);
	cpus_bad("3-1", -EINVAL, 1, "reversed range");
	cpus_bad("0,3-1", -EINVAL, 3, "reversed range");
	cpus_bad("4096", -ERANGE, 1, "beyond the limit");
	cpus_bad("0-5000", -ERANGE, 3, "beyond the limit");
	cpus_bad("99999999999999999999999", -ERANGE, 1, "beyond the limit");
	cpus_bad("", -EINVAL, 1, "empty");
	cpus_bad("0,,1", -EINVAL, 3, "empty element");
	cpus_bad("0,", -EINVAL, 3, "empty element");
	cpus_bad("-1", -EINVAL, 1, "expected a CPU number");
	cpus_bad("0-", -EINVAL, 3, "end of the range");
	cpus_bad("1x", -EINVAL, 2, "unexpected 'x'");
	cpus_bad("0-3 ", -EINVAL, 4, "unexpected ' '");
	cpus_bad("[0-3]", -EINVAL, 1, "expected a CPU number");

	uint64_t empty[2] = {0, 0};
	_cleanup_free_ char *s = NULL;
	ok(jobcg_format_cpulist(empty, 2, &s) == 0 && s && streq(s, ""), "empty set formats as ''");
}

static void hl_ok(const char *s, const char *want_joined, size_t want_n)
{
	_cleanup_strv_free_ char **v = NULL;
	char joined[4096] = "";
	int r = jobcg_hostlist_expand(s, 0, &v);

	if (!ok(r == 0, "hostlist '%s' expands (r=%d %s)", s, r,
		r ? jobcg_last_error()->message : ""))
		return;
	for (size_t i = 0; v[i]; i++) {
		if (i)
			strncat(joined, " ", sizeof(joined) - strlen(joined) - 1);
		strncat(joined, v[i], sizeof(joined) - strlen(joined) - 1);
	}
	is_int(strv_length(v), want_n, "  name count");
	if (want_joined)
		is_str(joined, want_joined, "  names");
}

static void hl_bad(const char *s, size_t max, int want_r, unsigned col, const char *needle)
{
	char **v = (char **)0x1;
	int r = jobcg_hostlist_expand(s, max, &v);

	ok(r == want_r && v == (char **)0x1 && jobcg_last_error()->column == col &&
	       strstr(jobcg_last_error()->message, needle),
	   "hostlist '%s' refused (%d col %u '%s'): got %d col %u '%s'", s, want_r, col, needle, r,
	   jobcg_last_error()->column, jobcg_last_error()->message);
}

static void test_hostlist(void)
{
	hl_ok("tux3", "tux3", 1);
	hl_ok("node[01-03]", "node01 node02 node03", 3);
	hl_ok("node[1,3-5]", "node1 node3 node4 node5", 4);
	hl_ok("node[8-11]", "node8 node9 node10 node11", 4);
	hl_ok("node[008-010]", "node008 node009 node010", 3);
	hl_ok("/dev/nvidia[0,2-3]", "/dev/nvidia0 /dev/nvidia2 /dev/nvidia3", 3);
	hl_ok("a[1-2]b[0-1]", "a1b0 a1b1 a2b0 a2b1", 4);
	hl_ok("n[1-2]-ib", "n1-ib n2-ib", 2);
	hl_ok("/dev/null,/dev/zero", "/dev/null /dev/zero", 2);
	hl_ok("/dev/nvidia[0]", "/dev/nvidia0", 1);
	hl_ok("compute-r3i[4-7]n[0-8],compute-r[6-10]i[0-7]n[0-8]", NULL, 4 * 9 + 5 * 8 * 9);
	hl_ok("nvl721001-T[01-18]", NULL, 18);
	hl_bad("node[1-3", 0, -EINVAL, 5, "without ']'");
	hl_bad("node1-3]", 0, -EINVAL, 8, "']' without '['");
	hl_bad("node[3-0]", 0, -EINVAL, 6, "reversed range");
	hl_bad("node[]", 0, -EINVAL, 6, "empty brackets");
	hl_bad("node[a-b]", 0, -EINVAL, 6, "expected a number");
	hl_bad("node[1-]", 0, -EINVAL, 8, "end of the range");
	hl_bad("node[[1]]", 0, -EINVAL, 6, "expected a number");
	/* As Slurm's hostlist_create(): blanks separate too, empty names are skipped. */
	hl_ok("a,,b", "a b", 2);
	hl_ok("a,", "a", 1);
	hl_ok("tux1, tux2", "tux1 tux2", 2);
	hl_ok(" n1\tn[2-3] ", "n1 n2 n3", 3);
	is_int(jobcg_hostlist_contains("tux1, tux2", "tux2"), 1, "tux2 in 'tux1, tux2'");
	hl_bad("", 0, -EINVAL, 1, "empty list");
	hl_bad(" , ", 0, -EINVAL, 1, "empty list");
	hl_bad("n[0-99]", 10, -E2BIG, 1, "more than 10");
	hl_bad("n[0-9999999999]", 0, -E2BIG, 1, "more than");

	is_int(jobcg_hostlist_contains("tux[0-15]", "tux3"), 1, "tux3 in tux[0-15]");
	is_int(jobcg_hostlist_contains("tux[0-15]", "tux16"), 0, "tux16 not in tux[0-15]");
	is_int(jobcg_hostlist_contains("node[01-16]", "node1"), 0,
	       "padding matters: node1 not in node[01-16]");
	is_int(jobcg_hostlist_contains("node[01-16]", "node01"), 1, "node01 in node[01-16]");
	is_int(jobcg_hostlist_contains("a,b[1-2]", "b2"), 1, "second item matches");
	is_int(jobcg_hostlist_contains("n[1-3", "n1"), -EINVAL, "a malformed list is an error");
}

/* xorshift: the same sequence on every run, so a failure is reproducible. */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (unsigned)(rnd_state % n);
}

/* A small well-formed hostlist: items of literals and bracket groups with padded bounds. */
static void random_list(char *buf, size_t size)
{
	static const char *const lits[] = {"n", "a1", "0", "x-", "b", "", "10", "-ib"};
	size_t len = 0;
	unsigned items = 1 + rnd(3);

	buf[0] = '\0';
	for (unsigned i = 0; i < items; i++) {
		unsigned segs = 1 + rnd(4);

		if (i)
			len += (size_t)snprintf(buf + len, size - len, ",");
		for (unsigned k = 0; k < segs; k++) {
			if (rnd(2)) {
				len += (size_t)snprintf(buf + len, size - len, "%s", lits[rnd(8)]);
				continue;
			}
			unsigned nr = 1 + rnd(3);

			len += (size_t)snprintf(buf + len, size - len, "[");
			for (unsigned j = 0; j < nr; j++) {
				unsigned lo = rnd(3) ? rnd(15) : rnd(120), w = rnd(4);

				len += (size_t)snprintf(buf + len, size - len, "%s%0*u",
							j ? "," : "", (int)w, lo);
				if (rnd(2))
					len += (size_t)snprintf(buf + len, size - len, "-%0*u",
								(int)rnd(4), lo + rnd(30));
			}
			len += (size_t)snprintf(buf + len, size - len, "]");
		}
	}
	if (!buf[0] || buf[len - 1] == ',')
		snprintf(buf + len, size - len, "z");
}

/* Random bytes from the grammar's alphabet: mostly malformed lists. */
static void random_text(char *buf, size_t size)
{
	static const char alphabet[] = "n0123[]-,,[]09";
	size_t n = 1 + rnd((unsigned)(size < 12 ? size - 1 : 11));

	for (size_t i = 0; i < n; i++)
		buf[i] = alphabet[rnd(sizeof(alphabet) - 1)];
	buf[n] = '\0';
}

/* A name near the list's names: one of them changed by a digit, padding or a character. */
static void near_name(char **v, size_t n, char *buf, size_t size)
{
	const char *base = n ? v[rnd((unsigned)n)] : "n1";
	size_t len;

	snprintf(buf, size, "%s", base);
	len = strlen(buf);
	switch (rnd(5)) {
	case 0: /* a '0' somewhere: padding that the list may or may not have */
		if (len + 2 < size) {
			size_t k = rnd((unsigned)len + 1);

			memmove(buf + k + 1, buf + k, len - k + 1);
			buf[k] = '0';
		}
		break;
	case 1: /* drop a character */
		if (len) {
			size_t k = rnd((unsigned)len);
			memmove(buf + k, buf + k + 1, len - k);
		}
		break;
	case 2: /* change a digit */
		for (size_t k = 0; k < len; k++)
			if (buf[k] >= '0' && buf[k] <= '9' && rnd(2)) {
				buf[k] = (char)('0' + rnd(10));
				break;
			}
		break;
	case 3: /* append */
		if (len + 2 < size) {
			buf[len] = (char)('0' + rnd(10));
			buf[len + 1] = '\0';
		}
		break;
	default:
		break;
	}
}

/*
 * jobcg_hostlist_contains() matches without expanding: it must answer exactly as membership in
 * jobcg_hostlist_expand()'s list, and refuse exactly what the expander refuses, with the same
 * error (for a list that does not parse, whatever the name).
 */
static void test_hostlist_match_vs_expand(void)
{
	unsigned checked = 0, lists = 0, refused = 0, bad = 0;
	char s[256], name[128], want_msg[1024];

	for (unsigned iter = 0; iter < 6000 && bad < 5; iter++) {
		_cleanup_strv_free_ char **v = NULL;
		size_t n;
		int r, m;

		if (iter % 3 == 2)
			random_text(s, sizeof(s));
		else
			random_list(s, sizeof(s));
		r = jobcg_hostlist_expand(s, 2000, &v);
		if (r < 0) {
			unsigned col = jobcg_last_error()->column;

			snprintf(want_msg, sizeof(want_msg), "%s", jobcg_last_error()->message);
			if (r == -E2BIG)
				continue;
			refused++;
			jobcg_error_clear();
			m = jobcg_hostlist_contains(s, "n1");
			if (m != r || jobcg_last_error()->column != col ||
			    strcmp(jobcg_last_error()->message, want_msg) != 0) {
				bad++;
				tap_diag("'%s': expand refused (%d col %u '%s'), contains said %d "
					 "col %u '%s'",
					 s, r, col, want_msg, m, jobcg_last_error()->column,
					 jobcg_last_error()->message);
			}
			continue;
		}
		lists++;
		n = strv_length(v);
		for (size_t k = 0; k < n && k < 30; k++) {
			size_t i = n <= 30 ? k : rnd((unsigned)n);

			checked++;
			if (jobcg_hostlist_contains(s, v[i]) != 1) {
				bad++;
				tap_diag("'%s' expands to '%s' but does not contain it", s, v[i]);
			}
		}
		for (unsigned k = 0; k < 20; k++) {
			near_name(v, n, name, sizeof(name));
			m = jobcg_hostlist_contains(s, name);
			checked++;
			if (m != (int)strv_contains(v, name)) {
				bad++;
				tap_diag("'%s' contains '%s': matcher %d, expansion %d", s, name, m,
					 (int)strv_contains(v, name));
			}
		}
	}
	ok(bad == 0 && lists > 1000 && refused > 500,
	   "matching agrees with expansion (%u lists, %u refused, %u names)", lists, refused,
	   checked);
}

/* A list of a million names per item is matched without walking through them. */
static void test_hostlist_match_large(void)
{
	struct timespec t0, t1;
	int a, b, c, d;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	for (int i = 0; i < 20; i++)
		(void)jobcg_hostlist_contains("xN[0-999][0-999]", "node1");
	a = jobcg_hostlist_contains("xN[0-999][0-999]", "xN999999");
	b = jobcg_hostlist_contains("xN[0-999][0-999]", "xN0999");
	c = jobcg_hostlist_contains("n[0-9999999999]", "n9999999999");
	d = jobcg_hostlist_contains("xN[0-999][0-999],y", "y");
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	double cpu = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ok(a == 1 && b == 1 && c == 1 && d == 1, "names deep in huge lists match (%d %d %d %d)", a,
	   b, c, d);
	ok(cpu < 0.05, "24 matches against a million names each took %.3f s of CPU (< 0.05)", cpu);
	is_int(jobcg_hostlist_contains("a,b[", "a"), -EINVAL,
	       "a malformed list is an error even when an earlier item matches");
	is_int(jobcg_hostlist_contains("n[01-16]", "n001"), 0, "n001 not in n[01-16]");
	is_int(jobcg_hostlist_contains("n[01-100]", "n100"), 1, "n100 in n[01-100] (wider)");
	is_int(jobcg_hostlist_contains("n[01-100]", "n099"), 0, "n099 not in n[01-100]");
	is_int(jobcg_hostlist_contains("n[1-3]1", "n11"), 1, "digits after a group");
	is_int(jobcg_hostlist_contains("n[1-12][1-3]", "n121"), 1, "split 12|1");
	is_int(jobcg_hostlist_contains("n[1-12][1-3]", "n113"), 1, "split 11|3 or 1|13");
}

int main(void)
{
	test_size();
	test_cpulist();
	test_hostlist();
	test_hostlist_match_vs_expand();
	test_hostlist_match_large();
	return tap_done();
}
