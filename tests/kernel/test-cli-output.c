/* Kernel test: what list and acct print agrees with what was recorded, and the tables stay in
 * line whatever the width of their entries. */
#include "kcli.h"

/* The line of @text that starts with @first (after a newline, or at the very start). */
static const char *line_of(const char *text, const char *first)
{
	size_t n = strlen(first);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, first, n) == 0 && (p[n] == ' ' || p[n] == '\n'))
			return p;
	return NULL;
}

/* Column of @word in the line @line (-1 when it is not on that line). */
static int column_of(const char *line, const char *word)
{
	const char *end = line ? strchr(line, '\n') : NULL;
	const char *at = line ? strstr(line, word) : NULL;

	return at && (!end || at < end) ? (int)(at - line) : -1;
}

/* A job's --mem is shown as given (512K), not rounded to MiB (0M), with no stray blank; a
 * long owner keeps the columns after it in line. */
static void list_limits(void)
{
	char *out = NULL;
	const char *hdr, *l42, *l43;

	is_int(kcli(NULL, "alloc", "42", "--mem", "512K", "--best-effort", NULL), 0,
	       "alloc 42 --mem 512K");
	is_int(kcli(NULL, "alloc", "43", "--mem", "1500K", "--pids", "10", "--uid", "4000000000",
		    "--best-effort", NULL),
	       0, "alloc 43 --mem 1500K --pids 10 --uid 4000000000");
	is_int(kcli(&out, "list", NULL), 0, "list");
	hdr = out ? line_of(out, "JOB") : NULL;
	l42 = out ? line_of(out, "42") : NULL;
	l43 = out ? line_of(out, "43") : NULL;
	ok(l42 && column_of(l42, "mem=512K") > 0, "job 42's limit is mem=512K");
	ok(l43 && column_of(l43, "mem=1500K pids=10") > 0, "job 43's are mem=1500K pids=10");
	ok(out && !strstr(out, "mem=0M") && !strstr(out, "mem=1M"), "no rounded size");
	is_int(column_of(l42, "mem="), column_of(hdr, "LIMITS"),
	       "a limit list that starts with mem= starts at the LIMITS column");
	is_int(column_of(l43, "mem="), column_of(hdr, "LIMITS"),
	       "and a long owner (4000000000:...) does not push it out of line");
	is_int(column_of(l43, "4000000000:"), column_of(hdr, "OWNER"), "the owner under OWNER");
	if (out)
		ktest_diag_lines("", out);
	free(out);
	is_int(kcli(NULL, "release", "42", NULL), 0, "release 42");
	is_int(kcli(NULL, "release", "43", NULL), 0, "release 43");
}

/* A ten-digit job id with a named step is wider than the JOBID header: the columns widen. */
static void acct_columns(void)
{
	char *out = NULL;
	const char *hdr, *row;

	is_int(
	    kcli(NULL, "run", "--job", "4294967294", "--step", "interactive", "--", "true", NULL),
	    0, "run in job 4294967294, step interactive");
	is_int(kcli(&out, "acct", "--job", "4294967294", NULL), 0, "acct --job 4294967294");
	hdr = out ? line_of(out, "JOBID") : NULL;
	row = out ? line_of(out, "4294967294.interactive") : NULL;
	ok(row != NULL, "its step's row");
	is_int(column_of(row, "COMPLETED"), column_of(hdr, "STATE"), "its state under STATE");
	is_int(column_of(row, "0:0"), column_of(hdr, "EXIT"), "its exit code under EXIT");
	{
		const char *job = out ? line_of(out, "4294967294") : NULL;

		is_int(column_of(job, "COMPLETED"), column_of(hdr, "STATE"), "the job's row too");
	}
	if (out)
		ktest_diag_lines("", out);
	free(out);
}

int main(void)
{
	kcli_setup("cli-output", "jobcg");
	list_limits();
	acct_columns();
	is_int(kcli(NULL, "teardown", NULL), 0, "teardown: nothing left");
	return tap_done();
}
