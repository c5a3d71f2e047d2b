/* libFuzzer target: the command-line values the CLI reads with parsers of cli/common.c. Input:
 * a selector byte (its value modulo 4 picks the parser), then the text:
 * 0: a signal (`jobcg signal`, `--signal`): a name gives the number whose name it is;
 * 1: a uid or gid (numeric users and groups, getent's fields), and the same text as a time of
 *    `jobcg acct --since/--until`: what parsed is what was written;
 * 2: a `jobcg who-has` device ("c MAJOR:MINOR", "b MAJOR:MINOR"): the numbers written;
 * 3: the names of `jobcg resv --users` (split before each is looked up), and the same text as
 *    a `jobcg resv --devices` list as written: an accepted list names no index twice. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common.h"
#include "jobcg/gres.h"
#include "jobcg/resv.h"
#include "util.h"
#include "fuzz-input.h"

/* Are @s's bytes up to the first of @ends (or its end) decimal digits that spell @v, leading
 * zeros allowed? */
static bool digits_are(const char *s, uint64_t v, const char *ends, const char **ret_end)
{
	size_t n = strspn(s, "0123456789");
	char buf[32];
	int k;

	if (n == 0 || (s[n] && !strchr(ends, s[n])))
		return false;
	while (n > 1 && *s == '0')
		s++, n--;
	k = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	if ((size_t)k != n || strncmp(s, buf, n) != 0)
		return false;
	if (ret_end)
		*ret_end = s + n;
	return true;
}

static void check_signal(const char *s)
{
	int sig = cli_parse_signal(s);

	if (sig == -EINVAL)
		return;
	if (sig <= 0 || sig >= NSIG)
		abort();
	if (s[0] >= '0' && s[0] <= '9') {
		if (!digits_are(s, (uint64_t)sig, "", NULL))
			abort();
	} else {
		/* A name, "SIG" before it or not, in any case: the name of the number, or a
		 * real-time one counted from RTMIN up or RTMAX down. */
		const char *name = sigabbrev_np(sig);
		const char *n = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
		bool min = strncasecmp(n, "RTMIN", 5) == 0, max = strncasecmp(n, "RTMAX", 5) == 0;

		if (min || max) {
			int k = min ? sig - SIGRTMIN : SIGRTMAX - sig;

			if (sig < SIGRTMIN || sig > SIGRTMAX ||
			    (n[5] ? n[5] != (min ? '+' : '-') ||
					!digits_are(n + 6, (uint64_t)k, "", NULL)
				  : k != 0))
				abort();
		} else if (!name || strcasecmp(n, name) != 0)
			abort();
	}
}

/* Every signal's name, with "SIG" and without, in either case, and its number, parse back to
 * it: which signal is asked about follows from the input. */
static void signal_round_trip(unsigned sig)
{
	const char *name = sigabbrev_np((int)sig);
	char buf[64];

	snprintf(buf, sizeof(buf), "%u", sig);
	if (cli_parse_signal(buf) != (int)sig)
		abort();
	if (sig >= (unsigned)SIGRTMIN && sig <= (unsigned)SIGRTMAX) {
		snprintf(buf, sizeof(buf), "SIGRTMIN+%u", sig - (unsigned)SIGRTMIN);
		if (cli_parse_signal(buf) != (int)sig || cli_parse_signal(buf + 3) != (int)sig)
			abort();
		snprintf(buf, sizeof(buf), "rtmax-%u", (unsigned)SIGRTMAX - sig);
		if (cli_parse_signal(buf) != (int)sig)
			abort();
	}
	if (!name || sig >= 32)
		return;
	snprintf(buf, sizeof(buf), "SIG%s", name);
	if (cli_parse_signal(buf) != (int)sig || cli_parse_signal(buf + 3) != (int)sig)
		abort();
	for (char *p = buf; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	if (cli_parse_signal(buf) != (int)sig || cli_parse_signal(buf + 3) != (int)sig)
		abort();
}

static void check_id(const char *s)
{
	unsigned id;

	if (cli_parse_id(s, &id) < 0)
		return;
	/* Digits only, the value written, never (uid_t)-1. */
	if (!digits_are(s, id, "", NULL) || id == (unsigned)-1)
		abort();
}

/* Only "c ..." and "b ...": anything else is a path, which who-has stat()s. */
static void check_device(const char *s)
{
	uint32_t major, minor;
	const char *end;
	char type;

	if (!((s[0] == 'c' || s[0] == 'b') && s[1] == ' '))
		return;
	if (cli_parse_device(s, &type, &major, &minor) < 0)
		return;
	if (type != s[0] || major > CLI_DEV_MAJOR_MAX || minor > CLI_DEV_MINOR_MAX ||
	    !digits_are(s + 2, major, ":", &end) || *end != ':' ||
	    !digits_are(end + 1, minor, "", NULL))
		abort();
}

/* The names of a list: each a field between commas, none twice, every non-empty field one. */
static void check_users(const char *s)
{
	char **names = NULL, **fields;
	size_t n;

	if (cli_split_names(s, &names) < 0)
		return;
	fields = strv_split(s, ",");
	if (!fields)
		abort();
	n = strv_length(names);
	for (size_t i = 0; i < n; i++) {
		if (!*names[i] || strchr(names[i], ',') || !strv_contains(fields, names[i]))
			abort();
		for (size_t j = 0; j < i; j++)
			if (strcmp(names[i], names[j]) == 0)
				abort();
	}
	for (char **f = fields; *f; f++)
		if (**f && !strv_contains(names, *f))
			abort();
	strv_free(fields);
	strv_free(names);
}

/* `jobcg acct --since/--until`: a time taken is the one written. "@N" is N seconds; "now" and
 * "now-N<unit>" are no later than now; a date, formatted back in local time in the shape it
 * was written, is the text itself (so 02-30 or 24:00 never pass as another day). */
static void check_time(const char *s)
{
	const uint64_t now = 1764385200ull * 1000000;
	uint64_t t;
	char buf[64];

	if (cli_parse_time(s, now, &t) < 0)
		return;
	if (s[0] == '@') {
		if (t % 1000000 || !digits_are(s + 1, t / 1000000, "", NULL))
			abort();
		return;
	}
	if (strncmp(s, "now", 3) == 0) {
		if (t > now)
			abort();
		return;
	}
	time_t sec = (time_t)(t / 1000000);
	struct tm tm;
	size_t len = strlen(s), n = 0;

	if (t % 1000000 || !localtime_r(&sec, &tm))
		abort();
	if (len == 10)
		n = strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
	else if (len == 16)
		n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M", &tm);
	else if (len == 19)
		n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	if (!n || strcmp(buf, s) != 0)
		abort();
}

/* `jobcg resv create --devices`, as written: accepted only when every group is NAME:ITEMS,
 * every item an index or a range N-M (digits, N <= M < JOBCG_GRES_MAX), and no name gets one
 * index twice, however the ranges and groups spell it. */
static void check_resv_devices(const char *s)
{
	static uint8_t seen[64][JOBCG_GRES_MAX];
	char names[64][64];
	size_t nnames = 0;
	const char *g = s;

	if (jobcg_resv_devices_syntax(s) < 0 || !*s)
		return;
	memset(seen, 0, sizeof(seen));
	for (;;) {
		size_t glen = strcspn(g, ";"), nlen, k;
		const char *colon = memchr(g, ':', glen), *p;

		if (!colon || colon == g)
			abort();
		if ((nlen = (size_t)(colon - g)) >= sizeof(names[0]))
			return; /* a name longer than this check keeps */
		for (k = 0; k < nnames && (strlen(names[k]) != nlen || memcmp(names[k], g, nlen));
		     k++)
			;
		if (k == nnames) {
			if (nnames == 64)
				return; /* more names than this check keeps: nothing to say */
			memcpy(names[nnames], g, nlen);
			names[nnames++][nlen] = 0;
		}
		for (p = colon + 1; p < g + glen; p += strcspn(p, ",;") + 1) {
			size_t len = strcspn(p, ",;");
			const char *dash = memchr(p, '-', len);
			size_t llen = dash ? (size_t)(dash - p) : len;
			unsigned long lo = 0, hi;

			if (llen == 0 || strspn(p, "0123456789") < llen)
				abort();
			for (size_t i = 0; i < llen; i++)
				if ((lo = lo * 10 + (unsigned long)(p[i] - '0')) >= JOBCG_GRES_MAX)
					abort();
			hi = lo;
			if (dash) {
				size_t hlen = len - llen - 1;

				if (hlen == 0 || strspn(dash + 1, "0123456789") < hlen)
					abort();
				hi = 0;
				for (size_t i = 0; i < hlen; i++)
					if ((hi = hi * 10 + (unsigned long)(dash[1 + i] - '0')) >=
					    JOBCG_GRES_MAX)
						abort();
			}
			if (hi < lo)
				abort();
			for (unsigned long v = lo; v <= hi; v++)
				if (seen[k][v]++)
					abort();
		}
		if (!g[glen])
			break;
		g += glen + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size < 1)
		return 0;
	s = fuzz_cstring(data + 1, size - 1, 4096);
	if (!s)
		return 0;
	switch (data[0] % 4) {
	case 0:
		check_signal(s);
		signal_round_trip(1 + data[0] / 4 % (NSIG - 1));
		break;
	case 1:
		check_id(s);
		check_time(s);
		break;
	case 2:
		check_device(s);
		break;
	default:
		check_users(s);
		check_resv_devices(s);
		break;
	}
	free(s);
	return 0;
}
