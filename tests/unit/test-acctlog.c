/* Unit tests for the accounting log: states, append/read round trip, torn lines, filters. */
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <zlib.h>

#include "jobcg/acctlog.h"
#include "jobcg/job.h"
#include "jobcg/resv.h"
#include "log.h"
#include "tap.h"
#include "util.h"

struct seen {
	unsigned n;
	struct jobcg_acct_record last;
	char steps[256];
};

/* A log and the lock file its writers made beside it. */
static void remove_log(const char *path)
{
	char lock[PATH_MAX];

	unlink(path);
	snprintf(lock, sizeof(lock), "%s.lock", path);
	unlink(lock);
}

static int collect(const struct jobcg_acct_record *r, void *u)
{
	struct seen *s = u;
	size_t l = strlen(s->steps);

	s->n++;
	jobcg_acct_record_done(&s->last);
	s->last = *r;
	s->last.job_id = strdup(r->job_id);
	s->last.step_id = r->step_id ? strdup(r->step_id) : NULL;
	s->last.gres = r->gres ? strdup(r->gres) : NULL;
	s->last.reason = r->reason ? strdup(r->reason) : NULL;
	s->last.reservation = r->reservation ? strdup(r->reservation) : NULL;
	snprintf(s->steps + l, sizeof(s->steps) - l, "%s%s.%s", l ? " " : "", r->job_id,
		 r->step_id ? r->step_id : "job");
	return 0;
}

static int warnings;
static void count_warnings(enum jobcg_log_level level, const char *msg, void *u)
{
	if (level == JOBCG_LOG_WARNING) {
		warnings++;
		tap_diag("  warning: %s", msg);
	}
}

static void test_state(void)
{
	is_str(jobcg_acct_state_name(jobcg_acct_state_of(0, 0, 0, false)), "COMPLETED", "exit 0");
	is_str(jobcg_acct_state_name(jobcg_acct_state_of(3, 0, 0, false)), "FAILED", "exit 3");
	is_str(jobcg_acct_state_name(jobcg_acct_state_of(-1, 9, 0, false)), "FAILED", "killed");
	is_str(jobcg_acct_state_name(jobcg_acct_state_of(-1, 9, 1, false)), "OUT_OF_MEMORY",
	       "OOM killed");
	is_str(jobcg_acct_state_name(jobcg_acct_state_of(-1, 15, 1, true)), "CANCELLED",
	       "cancelled wins");
	is_str(jobcg_acct_state_name(jobcg_acct_state_of(-1, 0, 0, false)), "NODE_FAIL",
	       "nothing seen");
	ok(jobcg_acct_state_name((enum jobcg_acct_state)99) == NULL, "bad state has no name");
	is_int(jobcg_acct_state_from_name("OUT_OF_MEMORY"), JOBCG_ACCT_OUT_OF_MEMORY, "from name");
	is_int(jobcg_acct_state_from_name("RUNNING"), -EINVAL, "unknown name");
}

/* A completed step of job 42 with every field set. */
static struct jobcg_acct_record sample_step(void)
{
	return (struct jobcg_acct_record){
	    .kind = JOBCG_ACCT_STEP,
	    .job_id = (char *)"42",
	    .step_id = (char *)"0",
	    .uid = 1000,
	    .gid = 100,
	    .start_usec = 1700000000000000ULL,
	    .end_usec = 1700000005000000ULL,
	    .exit_code = 0,
	    .cpu_usec = 12345,
	    .user_usec = 10000,
	    .system_usec = 2345,
	    .mem_peak = 1ULL << 40,
	    .oom_kills = 0,
	    .state = JOBCG_ACCT_COMPLETED,
	    .gres = (char *)"gpu:0,2",
	    .ntasks = 2,
	};
}

static void test_log(void)
{
	char dir[] = "/tmp/jobcg-test-acct-XXXXXX";
	char path[256], sub[256];
	struct jobcg_acct_record r = sample_step();
	struct seen s = {};
	int fd;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/state/sub/acct.jsonl", dir);
	is_int(jobcg_acctlog_read(path, NULL, collect, &s), 0, "missing log reads as empty");
	is_int(s.n, 0, "no records");
	is_int(jobcg_acctlog_append(path, &r), 0, "append a step record (creates the directories)");
	r.step_id = (char *)"1";
	r.exit_code = -1;
	r.exit_signal = 9;
	r.oom_kills = 2;
	r.state = JOBCG_ACCT_OUT_OF_MEMORY;
	r.gres = NULL;
	is_int(jobcg_acctlog_append(path, &r), 0, "append an OOM step");
	r = (struct jobcg_acct_record){.kind = JOBCG_ACCT_JOB,
				       .job_id = (char *)"7",
				       .state = JOBCG_ACCT_CANCELLED,
				       .exit_code = -1};
	is_int(jobcg_acctlog_append(path, &r), 0, "append another job");
	r.job_id = NULL;
	is_int(jobcg_acctlog_append(path, &r), -EINVAL, "a record without job id is refused");

	is_int(jobcg_acctlog_read(path, NULL, collect, &s), 0, "read back");
	is_int(s.n, 3, "three records");
	is_str(s.steps, "42.0 42.1 7.job", "in order");
	is_str(s.last.job_id, "7", "job record id");
	ok(s.last.kind == JOBCG_ACCT_JOB && s.last.step_id == NULL, "job record has no step");
	is_int(s.last.state, JOBCG_ACCT_CANCELLED, "state");

	s.n = 0;
	s.steps[0] = 0;
	is_int(jobcg_acctlog_read(path, "42", collect, &s), 0, "filter by job");
	is_str(s.steps, "42.0 42.1", "only job 42");
	is_int(s.last.oom_kills, 2, "oom kills kept");
	is_int(s.last.exit_signal, 9, "signal kept");
	is_int(s.last.state, JOBCG_ACCT_OUT_OF_MEMORY, "OUT_OF_MEMORY kept");
	ok(s.last.gres == NULL, "no gres");
	ok(s.last.reason == NULL, "no reason");

	/* A step jobcg_spank.so refused: FAILED with why. */
	r = (struct jobcg_acct_record){.kind = JOBCG_ACCT_STEP,
				       .job_id = (char *)"43",
				       .step_id = (char *)"extern",
				       .state = JOBCG_ACCT_FAILED,
				       .exit_code = 1,
				       .reason = (char *)"jobcg: job 43 step extern: \"held\"\n"};
	{
		char rpath[PATH_MAX];

		snprintf(rpath, sizeof(rpath), "%s/state/sub/refused.jsonl", dir);
		is_int(jobcg_acctlog_append(rpath, &r), 0, "append a refused step with its reason");
		s.n = 0;
		s.steps[0] = 0;
		is_int(jobcg_acctlog_read(rpath, "43", collect, &s), 0, "read it back");
	}
	ok(s.n == 1 && s.last.reason &&
	       streq(s.last.reason, "jobcg: job 43 step extern: \"held\"\n"),
	   "its reason kept, quotes and newline too");
	is_int(s.last.state, JOBCG_ACCT_FAILED, "FAILED");

	/* A crash mid-write: a torn line at the end, then garbage in the middle. */
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	ok(write(fd, "{\"type\":\"step\",\"job\":\"9", 23) == 23, "simulate a torn write");
	close(fd);
	jobcg_set_log(count_warnings, NULL, JOBCG_LOG_DEBUG);
	warnings = 0;
	s.n = 0;
	s.steps[0] = 0;
	is_int(jobcg_acctlog_read(path, NULL, collect, &s), 0, "torn log still reads");
	is_int(s.n, 3, "complete records all there");
	is_int(warnings, 1, "one warning for the torn line");

	r = (struct jobcg_acct_record){.kind = JOBCG_ACCT_STEP,
				       .job_id = (char *)"8",
				       .step_id = (char *)"0",
				       .state = JOBCG_ACCT_FAILED,
				       .exit_code = 1,
				       .mem_peak = UINT64_MAX};
	is_int(jobcg_acctlog_append(path, &r), 0, "append after the torn line");
	warnings = 0;
	s.n = 0;
	s.steps[0] = 0;
	is_int(jobcg_acctlog_read(path, NULL, collect, &s), 0, "read again");
	is_str(s.steps, "42.0 42.1 7.job 8.0", "the new record survived, torn one skipped");
	is_int(warnings, 1, "the torn line is now a bad line");
	ok(s.last.mem_peak == UINT64_MAX, "full 64-bit values round trip");
	ok(s.last.unavailable == 0, "readings present: none marked unavailable");

	/* Readings whose cgroup file is missing are null in the log, never 0. */
	r.job_id = (char *)"9";
	r.unavailable = JOBCG_ACCTREC_NO_MEM_PEAK | JOBCG_ACCTREC_NO_OOM;
	r.mem_peak = 0;
	r.cpu_usec = 1234;
	is_int(jobcg_acctlog_append(path, &r), 0, "append a record with unavailable readings");
	s.n = 0;
	s.steps[0] = 0;
	is_int(jobcg_acctlog_read(path, "9", collect, &s), 0, "read it back");
	is_int(s.last.unavailable, JOBCG_ACCTREC_NO_MEM_PEAK | JOBCG_ACCTREC_NO_OOM,
	       "unavailable memory peak and OOM count survive the round trip");
	is_int(s.last.cpu_usec, 1234, "the available CPU time is kept");
	{
		char *text = NULL;
		size_t len;

		ok(read_full_file_at(AT_FDCWD, path, 1 << 20, &text, &len) == 0 &&
		       strstr(text, "\"mem_peak\":null") && strstr(text, "\"oom_kills\":null"),
		   "the log line says null, not 0");
		ok(text && strstr(text, "\"job\":9,"), "the job id is a number in the log");
		free(text);
	}
	/* Lines of an older jobcg have the job id as a string: still read, and filtered. */
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	{
		static const char old_line[] =
		    "{\"type\":\"step\",\"job\":\"11\",\"step\":\"0\",\"uid\":0,\"gid\":0,"
		    "\"start_usec\":1,\"end_usec\":2,\"exit_code\":0,\"exit_signal\":0,"
		    "\"state\":\"COMPLETED\",\"cpu_usec\":1,\"user_usec\":1,\"system_usec\":0,"
		    "\"mem_peak\":1,\"oom_kills\":0,\"ntasks\":1}\n";
		ok(write(fd, old_line, sizeof(old_line) - 1) == (ssize_t)sizeof(old_line) - 1,
		   "append an old-format line");
	}
	close(fd);
	s.n = 0;
	s.steps[0] = 0;
	is_int(jobcg_acctlog_read(path, "11", collect, &s), 0, "read the old line");
	is_str(s.steps, "11.0", "a string job id of an older log still reads");

	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	{
		static const char garbage[] =
		    "[1,2]\n\n{\"type\":\"job\",\"job\":\"1\",\"state\":\"BOGUS\"}\n";
		ok(write(fd, garbage, sizeof(garbage) - 1) == (ssize_t)sizeof(garbage) - 1,
		   "append garbage");
	}
	close(fd);
	warnings = 0;
	s.n = 0;
	is_int(jobcg_acctlog_read(path, NULL, collect, &s), 0, "garbage never fails the read");
	is_int(s.n, 6, "still the six good records");
	is_int(warnings, 3, "warned about torn line, array, bad state (blank line ignored)");
	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
	jobcg_acct_record_done(&s.last);

	/* Concurrent appenders never interleave. */
	snprintf(path, sizeof(path), "%s/par.jsonl", dir);
	for (int p = 0; p < 4; p++)
		if (fork() == 0) {
			char id[16];
			struct jobcg_acct_record c = {
			    .kind = JOBCG_ACCT_JOB, .job_id = id, .state = JOBCG_ACCT_COMPLETED};
			for (int i = 0; i < 25; i++) {
				snprintf(id, sizeof(id), "%d-%d", p, i);
				if (jobcg_acctlog_append(path, &c) < 0)
					_exit(1);
			}
			_exit(0);
		}
	int bad = 0, st;
	while (wait(&st) > 0)
		bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	is_int(bad, 0, "4 writers x 25 appends succeed");
	s = (struct seen){};
	jobcg_set_log(count_warnings, NULL, JOBCG_LOG_DEBUG);
	warnings = 0;
	jobcg_acctlog_read(path, NULL, collect, &s);
	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
	is_int(s.n, 100, "100 records read back");
	is_int(warnings, 0, "no torn or mixed lines");
	jobcg_acct_record_done(&s.last);

	remove_log(path);
	snprintf(path, sizeof(path), "%s/state/sub/acct.jsonl", dir);
	remove_log(path);
	snprintf(path, sizeof(path), "%s/state/sub/refused.jsonl", dir);
	remove_log(path);
	snprintf(sub, sizeof(sub), "%s/state/sub", dir);
	rmdir(sub);
	snprintf(sub, sizeof(sub), "%s/state", dir);
	rmdir(sub);
	rmdir(dir);
}

/* Lines as an earlier, hand-written writer left them in logs, and the records they hold: such
 * logs must still read, and a record written now must be the same bytes. The second line holds
 * each kind of escape, bytes passed through as they are and nulls. */
static const char old_line_step[] =
    "{\"type\":\"step\",\"job\":\"42\",\"step\":\"0\",\"uid\":1000,\"gid\":100,"
    "\"start_usec\":1700000000000000,\"end_usec\":1700000005000000,\"exit_code\":0,"
    "\"exit_signal\":0,\"state\":\"COMPLETED\",\"cpu_usec\":12345,\"user_usec\":10000,"
    "\"system_usec\":2345,\"mem_peak\":1099511627776,\"oom_kills\":0,\"ntasks\":2,"
    "\"gres\":\"gpu:0,2\"}\n";
static const char old_line_job[] =
    "{\"type\":\"job\",\"job\":\"a\\/b\\\\c\\\"d\\u0001\\t\xc3\xa9\x7f\",\"uid\":4294967295,"
    "\"gid\":0,\"start_usec\":18446744073709551615,\"end_usec\":0,\"exit_code\":-1,"
    "\"exit_signal\":9,\"state\":\"OUT_OF_MEMORY\",\"cpu_usec\":null,\"user_usec\":null,"
    "\"system_usec\":null,\"mem_peak\":7,\"oom_kills\":null,\"ntasks\":0}\n";

/* What the writer makes of the first record now: jobcg's own job ids are numbers. */
static const char new_line_step[] =
    "{\"type\":\"step\",\"job\":42,\"step\":\"0\",\"uid\":1000,\"gid\":100,"
    "\"start_usec\":1700000000000000,\"end_usec\":1700000005000000,\"exit_code\":0,"
    "\"exit_signal\":0,\"state\":\"COMPLETED\",\"cpu_usec\":12345,\"user_usec\":10000,"
    "\"system_usec\":2345,\"mem_peak\":1099511627776,\"oom_kills\":0,\"ntasks\":2,"
    "\"gres\":\"gpu:0,2\"}\n";

static struct jobcg_acct_record old_job(void)
{
	return (struct jobcg_acct_record){
	    .kind = JOBCG_ACCT_JOB,
	    .job_id = (char *)"a/b\\c\"d\x01\t\xc3\xa9\x7f",
	    .uid = 4294967295u,
	    .start_usec = UINT64_MAX,
	    .exit_code = -1,
	    .exit_signal = 9,
	    .state = JOBCG_ACCT_OUT_OF_MEMORY,
	    .mem_peak = 7,
	    .unavailable = JOBCG_ACCTREC_NO_CPU | JOBCG_ACCTREC_NO_OOM,
	};
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && streq(a, b));
}

static bool same_record(const struct jobcg_acct_record *a, const struct jobcg_acct_record *b)
{
	/* An unavailable reading reads back as 0. */
	bool cpu = !(a->unavailable & JOBCG_ACCTREC_NO_CPU);

	return a->kind == b->kind && same_str(a->job_id, b->job_id) &&
	       same_str(a->step_id, b->step_id) && same_str(a->gres, b->gres) &&
	       same_str(a->reservation, b->reservation) && a->uid == b->uid && a->gid == b->gid &&
	       a->start_usec == b->start_usec && a->end_usec == b->end_usec &&
	       a->exit_code == b->exit_code && a->exit_signal == b->exit_signal &&
	       a->state == b->state && a->ntasks == b->ntasks && a->unavailable == b->unavailable &&
	       b->cpu_usec == (cpu ? a->cpu_usec : 0) && b->user_usec == (cpu ? a->user_usec : 0) &&
	       b->system_usec == (cpu ? a->system_usec : 0) &&
	       b->mem_peak == (a->unavailable & JOBCG_ACCTREC_NO_MEM_PEAK ? 0 : a->mem_peak) &&
	       b->oom_kills == (a->unavailable & JOBCG_ACCTREC_NO_OOM ? 0 : a->oom_kills);
}

/* Print a line with its control and non-ASCII bytes visible, for a failure's diagnostics. */
static void diag_line(const char *what, const char *s)
{
	char buf[4096];
	size_t n = 0;

	for (; *s && n + 5 < sizeof(buf); s++) {
		unsigned char c = (unsigned char)*s;

		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				      c >= 0x20 && c < 0x7f ? "%c" : "<%02x>", c);
	}
	buf[n] = 0;
	tap_diag("  %s: %s", what, buf);
}

static void test_old_lines(void)
{
	char dir[] = "/tmp/jobcg-test-acctold-XXXXXX";
	const struct jobcg_acct_record want[] = {sample_step(), old_job()};
	const char *lines[] = {old_line_step, old_line_job};
	const char *today[] = {new_line_step, old_line_job};
	char path[256];

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
		_cleanup_free_ char *got = NULL;
		struct seen s = {};
		size_t len = 0;
		int fd;

		unlink(path);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
		ok(fd >= 0 && write(fd, lines[i], strlen(lines[i])) == (ssize_t)strlen(lines[i]),
		   "old line %zu: written as the old writer left it", i);
		if (fd >= 0)
			close(fd);
		ok(jobcg_acctlog_read(path, NULL, collect, &s) == 0 && s.n == 1 &&
		       same_record(&want[i], &s.last),
		   "old line %zu: reads back as the record it was written from", i);
		jobcg_acct_record_done(&s.last);

		unlink(path);
		ok(jobcg_acctlog_write(path, &want[i], 0) == 0 &&
		       read_full_file_at(AT_FDCWD, path, 1 << 20, &got, &len) == 0 &&
		       len == strlen(today[i]) && memcmp(got, today[i], len) == 0,
		   "old line %zu: the writer makes the same bytes today (the job id a number)", i);
		if (got && (len != strlen(today[i]) || memcmp(got, today[i], len) != 0)) {
			diag_line("want", today[i]);
			diag_line("got", got);
		}
	}
	remove_log(path);
	rmdir(dir);
}

/* A step id and a reservation jobcg makes, or none: what the reader returns. */
static bool strings_ok(const struct jobcg_acct_record *r)
{
	return (!r->step_id || jobcg_step_id_valid(r->step_id)) &&
	       (!r->reservation || jobcg_resv_name_valid(r->reservation));
}

/* Every field, each null on and off, the integer extremes and every byte a string can hold
 * (0x01..0xff: controls, '"', '\\', '/', DEL, UTF-8 and bytes that are not UTF-8): written and
 * read back, a record in the reader's range is the same record. */
static void test_line_format(void)
{
	char dir[] = "/tmp/jobcg-test-acctfmt-XXXXXX";
	char path[256], all[256], ascii[128];
	const char *utf8 = "job-\xc3\xa9\xe2\x82\xac\xf0\x9f\x9a\x80/\xff\xfe\x80-end";
	const char *strs[] = {"0",  "",		  all,		ascii, utf8, "a/b\\c\"d", "gpu:0,2",
			      "42", "4294967294", "4294967295", "007", "+1", "r1",	  "R1"};
	struct jobcg_acct_record base = sample_step();
	unsigned n = 0, lines = 0, readable = 0, back = 0, refused = 0, skipped = 0, in_resv = 0;

	base.oom_kills = 1;
	base.gres = NULL;
	for (int c = 1; c < 256; c++)
		all[c - 1] = (char)c;
	all[255] = 0;
	for (int c = 1; c < 128; c++)
		ascii[c - 1] = (char)c;
	ascii[127] = 0;
	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	for (unsigned i = 0; i < 64; i++) {
		struct jobcg_acct_record r = base;
		_cleanup_free_ char *got = NULL;
		struct seen s = {};
		size_t len;

		/* Walk each dimension at its own pace so every value meets every other often. */
		r.kind = i & 1 ? JOBCG_ACCT_JOB : JOBCG_ACCT_STEP;
		r.unavailable = (i >> 1) & 7;
		r.job_id = (char *)strs[i % ELEMENTSOF(strs)];
		r.step_id = i % 3 == 0 ? NULL : (char *)strs[(i + 2) % ELEMENTSOF(strs)];
		r.gres = i % 4 == 1 ? NULL : (char *)strs[(i + 4) % ELEMENTSOF(strs)];
		r.reservation = i % 7 < 2 ? NULL : (char *)strs[(i + 5) % ELEMENTSOF(strs)];
		r.state = (enum jobcg_acct_state)(i % _JOBCG_ACCT_STATE_MAX);
		switch (i % 5) {
		case 0:
			break;
		case 1: /* the reader's limits: exit_code -1..255, signal 0..128 */
			r.uid = r.gid = UINT32_MAX;
			r.ntasks = UINT32_MAX;
			r.start_usec = r.end_usec = UINT64_MAX;
			r.cpu_usec = r.user_usec = r.system_usec = UINT64_MAX;
			r.mem_peak = r.oom_kills = UINT64_MAX;
			r.exit_code = 255;
			r.exit_signal = 128;
			break;
		case 2:
			r.uid = r.gid = r.ntasks = 0;
			r.start_usec = r.end_usec = r.cpu_usec = r.user_usec = r.system_usec = 0;
			r.mem_peak = r.oom_kills = 0;
			r.exit_code = -1;
			r.exit_signal = 9;
			break;
		case 3: /* beyond what the reader takes back, still written */
			r.exit_code = INT32_MIN;
			r.exit_signal = INT32_MAX;
			r.start_usec = (uint64_t)INT64_MAX;
			r.end_usec = (uint64_t)INT64_MAX + 1;
			r.mem_peak = 10000000000000000000ULL;
			r.cpu_usec = 9;
			r.user_usec = 10;
			r.system_usec = 99;
			break;
		case 4: /* likewise */
			r.exit_code = -2147483647;
			r.exit_signal = -1;
			r.uid = 4294967294u;
			r.start_usec = 1;
			r.oom_kills = 100;
			break;
		}
		n++;
		unlink(path);
		if (jobcg_acctlog_write(path, &r, 0) < 0 ||
		    read_full_file_at(AT_FDCWD, path, 1 << 20, &got, &len) < 0) {
			ok(false, "record %u: write and read the file", i);
			continue;
		}
		/* One line, whatever bytes the strings hold. */
		if (len > 0 && memchr(got, '\n', len) == got + len - 1)
			lines++;
		else
			diag_line("not one line", got);
		if (i % 5 >= 3)
			continue;
		jobcg_set_log(count_warnings, NULL, JOBCG_LOG_DEBUG);
		warnings = 0;
		if (!strings_ok(&r)) {
			/* Not a step id jobcg makes: skipped, with a warning. */
			refused++;
			if (jobcg_acctlog_read(path, NULL, collect, &s) == 0 && s.n == 0 &&
			    warnings == 1)
				skipped++;
			else
				tap_diag("record %u is not skipped (%u records, %d warnings)", i,
					 s.n, warnings);
			jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
			jobcg_acct_record_done(&s.last);
			continue;
		}
		readable++;
		if (jobcg_acctlog_read(path, NULL, collect, &s) == 0 && s.n == 1 && warnings == 0 &&
		    same_record(&r, &s.last)) {
			back++;
			in_resv += r.reservation != NULL;
		} else
			tap_diag("record %u does not read back (%u records, %d warnings)", i, s.n,
				 warnings);
		jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
		jobcg_acct_record_done(&s.last);
	}
	is_int(lines, n, "every record is written as one line");
	ok(readable > 0, "some records are in the reader's range");
	is_int(back, readable, "every record in the reader's range reads back the same");
	ok(in_resv > 0, "some of them name a reservation");
	ok(refused > 0, "some records have a step id or reservation jobcg does not make");
	is_int(skipped, refused, "each of those is skipped with a warning, never returned");
	remove_log(path);
	rmdir(dir);
}

/* The line of the report: a step id with a quote, a newline and an escape sequence. Skipped
 * with a warning naming the line, and the records around it still read. */
static void test_hostile_strings(void)
{
	char dir[] = "/tmp/jobcg-test-accthostile-XXXXXX";
	char path[256];
	const char *text =
	    "{\"type\":\"step\",\"job\":7,\"step\":\"a\\\"b\\nc\\u001b[31mRED\","
	    "\"state\":\"COMPLETED\",\"uid\":0,\"gid\":0,\"exit_code\":0,\"exit_signal\":0,"
	    "\"ntasks\":1,\"start_usec\":1,\"end_usec\":2,\"cpu_usec\":0,\"user_usec\":0,"
	    "\"system_usec\":0,\"mem_peak\":0,\"oom_kills\":0}\n";
	struct jobcg_acct_record r = sample_step();
	struct seen s = {};
	int fd, r_read;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	ok(jobcg_acctlog_write(path, &r, 0) == 0, "a good record");
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	ok(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text),
	   "then a step id with a quote, a newline and an escape sequence");
	if (fd >= 0)
		close(fd);
	ok(jobcg_acctlog_write(path, &r, 0) == 0, "then a good record");
	jobcg_set_log(count_warnings, NULL, JOBCG_LOG_DEBUG);
	warnings = 0;
	r_read = jobcg_acctlog_read(path, NULL, collect, &s);
	ok(r_read == 0 && s.n == 2 && warnings == 1,
	   "the bad one is skipped with a warning, the good ones read (%u records, %d warnings)",
	   s.n, warnings);
	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
	ok(s.n == 2 && streq(s.last.step_id, r.step_id), "the last one read is the good one");
	jobcg_acct_record_done(&s.last);
	remove_log(path);
	rmdir(dir);
}

/* fsync() of a FIFO fails with EINVAL where a write succeeds: whether a record was fsynced is
 * observable without tracing. */
static void test_sync_flag(void)
{
	char dir[] = "/tmp/jobcg-test-acctsync-XXXXXX";
	char path[256], buf[512] = "";
	struct jobcg_acct_record r = {.kind = JOBCG_ACCT_STEP,
				      .job_id = (char *)"5",
				      .step_id = (char *)"0",
				      .state = JOBCG_ACCT_COMPLETED};
	int rd;
	ssize_t n;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	if (mkfifo(path, 0600) < 0) {
		ok(false, "mkfifo %s: %m", path);
		rmdir(dir);
		return;
	}
	/* O_RDWR: neither end waits for the other. */
	rd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	ok(rd >= 0, "open the FIFO");
	is_int(jobcg_acctlog_write(path, &r, 0), 0,
	       "a record without JOBCG_ACCTLOG_SYNC: no fsync");
	n = read(rd, buf, sizeof(buf) - 1);
	ok(n > 0 && strstr(buf, "\"job\":5,") && buf[n - 1] == '\n', "the record was written: %s",
	   buf);
	is_int(jobcg_acctlog_write(path, &r, JOBCG_ACCTLOG_SYNC), -EINVAL,
	       "JOBCG_ACCTLOG_SYNC fsyncs (EINVAL on a FIFO)");
	ok(strstr(jobcg_last_error()->message, "cannot fsync"), "the error says fsync: %s",
	   jobcg_last_error()->message);
	is_int(jobcg_acctlog_append(path, &r), -EINVAL, "jobcg_acctlog_append always fsyncs");
	is_int(jobcg_acctlog_write(path, &r, 0x80), -EINVAL, "unknown flags are refused");
	if (rd >= 0)
		close(rd);
	remove_log(path);
	rmdir(dir);
}

/* Without CAP_SYS_RESOURCE (root's) a hard limit cannot be raised. */
static void drop_sys_resource(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {};

	if (syscall(SYS_capget, &h, d) == 0) {
		d[CAP_SYS_RESOURCE / 32].effective &= ~(1u << (CAP_SYS_RESOURCE % 32));
		(void)syscall(SYS_capset, &h, d);
	}
}

/*
 * In a child, under RLIMIT_FSIZE = the log's size (soft only: @hard false; hard too, without
 * the capability to raise it: @hard true), write one record. Its exit status: 0 written and
 * the limit as it was, 1 -EFBIG, 2 other error, 3 limit not restored; a signal is SIGXFSZ.
 */
static int write_under_fsize(const char *path, bool hard)
{
	struct stat sb;
	pid_t pid;
	int st = 0;

	if (stat(path, &sb) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		struct jobcg_acct_record r = sample_step();
		struct rlimit lim = {.rlim_cur = (rlim_t)sb.st_size,
				     .rlim_max = hard ? (rlim_t)sb.st_size : RLIM_INFINITY};
		struct rlimit after;
		int k;

		if (hard)
			drop_sys_resource();
		if (setrlimit(RLIMIT_FSIZE, &lim) < 0)
			_exit(4);
		k = jobcg_acctlog_write(path, &r, 0);
		if (k == -EFBIG)
			_exit(strstr(jobcg_last_error()->message, "RLIMIT_FSIZE") ? 1 : 2);
		if (k < 0)
			_exit(2);
		if (getrlimit(RLIMIT_FSIZE, &after) < 0 || after.rlim_cur != lim.rlim_cur ||
		    after.rlim_max != lim.rlim_max)
			_exit(3);
		_exit(0);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * A file-size limit inherited from a batch environment must not kill a writer with SIGXFSZ
 * (for `jobcg run`: after its step's cgroup is gone, the record lost): the limit is lifted
 * for the write where it may be, else the write fails with -EFBIG, an ordinary error.
 */
static void test_fsize_limit(void)
{
	char dir[] = "/tmp/jobcg-test-acctfsize-XXXXXX";
	char path[256];
	struct jobcg_acct_record r = sample_step();
	struct stat before, after;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	ok(jobcg_acctlog_write(path, &r, 0) == 0, "a first record");
	is_int(write_under_fsize(path, false), 0,
	       "under a soft RLIMIT_FSIZE at the log's size a record is written, no SIGXFSZ, "
	       "and the limit is restored");
	ok(stat(path, &before) == 0, "stat the log");
	is_int(write_under_fsize(path, true), 1,
	       "under a hard one that cannot be raised: -EFBIG naming RLIMIT_FSIZE, no SIGXFSZ");
	ok(stat(path, &after) == 0 && after.st_size == before.st_size,
	   "and nothing was written (%lld -> %lld bytes)", (long long)before.st_size,
	   (long long)after.st_size);
	remove_log(path);
	rmdir(dir);
}

static void write_job(const char *path, const char *id)
{
	struct jobcg_acct_record r = sample_step();

	r.kind = JOBCG_ACCT_JOB;
	r.job_id = (char *)id;
	r.step_id = NULL;
	if (jobcg_acctlog_write(path, &r, 0) < 0)
		tap_diag("cannot write record %s: %s", id, jobcg_last_error()->message);
}

/* The job ids read from the log and its rotated copies, in order ("1 2 3"). */
static const char *read_all_ids(const char *path, const char *job)
{
	static char ids[512];
	struct seen s = {};
	int r;

	r = jobcg_acctlog_read_all(path, job, collect, &s);
	jobcg_acct_record_done(&s.last);
	if (r < 0)
		snprintf(ids, sizeof(ids), "error %d: %s", r, jobcg_last_error()->message);
	else {
		/* "1.job 2.job" -> "1 2" */
		size_t k = 0;

		for (const char *p = s.steps; *p; p++) {
			if (startswith(p, ".job")) {
				p += 3;
				continue;
			}
			ids[k++] = *p;
		}
		ids[k] = '\0';
	}
	return ids;
}

/* logrotate's compress: @from gzipped into @to, then removed. */
static void gzip_file(const char *from, const char *to)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	gzFile gz;

	if (read_full_file_at(AT_FDCWD, from, 1 << 20, &text, &len) < 0 ||
	    !(gz = gzopen(to, "wb")) || gzwrite(gz, text, (unsigned)len) != (int)len ||
	    gzclose(gz) != Z_OK || unlink(from) < 0)
		tap_diag("cannot gzip %s", from);
}

/* Is @pid waiting for a flock (a "->" line of /proc/locks)? */
static bool blocked_on_flock(pid_t pid)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
	char line[256], want[32];

	snprintf(want, sizeof(want), " %d ", (int)pid);
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "->") && strstr(line, want))
			return true;
	return false;
}

/*
 * Rotation: renamed (and compressed) logs are read before the live one, oldest first, and a
 * writer that waited for the lock while the log was rotated writes to the new log, not to the
 * moved (or, compressed, already removed) one: no record lost, none read twice.
 */
static void test_rotation(void)
{
	char dir[] = "/tmp/jobcg-test-acct-rot-XXXXXX";
	char path[256], p1[300], p1gz[300], p2gz[300], twin[300];
	pid_t pid;
	int fd, st = 0;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	snprintf(p1, sizeof(p1), "%s.1", path);
	snprintf(p1gz, sizeof(p1gz), "%s.1.gz", path);
	snprintf(p2gz, sizeof(p2gz), "%s.2.gz", path);
	write_job(path, "1");
	write_job(path, "2");
	write_job(path, "3");
	rename(path, p1);
	write_job(path, "4");
	write_job(path, "5");
	is_str(read_all_ids(path, NULL), "1 2 3 4 5", "renamed log read first, then the new one");

	/* the next rotation with compress: .1 -> .2.gz, live -> .1 */
	gzip_file(p1, p2gz);
	rename(path, p1);
	write_job(path, "6");
	is_str(read_all_ids(path, NULL), "1 2 3 4 5 6", ".2.gz, .1, live: oldest first");
	is_str(read_all_ids(path, "5"), "5", "--job filter over rotated logs");

	/* gzip at work: .1 and .1.gz both there, the plain one is read once */
	gzip_file(p1, p1gz);
	snprintf(twin, sizeof(twin), "cp %s.1.gz /dev/null && zcat %s.1.gz > %s.1 2>/dev/null",
		 path, path, path);
	if (system(twin) == 0)
		is_str(read_all_ids(path, NULL), "1 2 3 4 5 6",
		       "a .1 beside its .1.gz (gzip under way) is read once");
	else
		tap_skip("no zcat");
	unlink(p1);

	/*
	 * A writer waits for the writers' lock while logrotate renames the log to .1 and
	 * compresses it (compress without delaycompress): its record must go to the new log.
	 */
	snprintf(twin, sizeof(twin), "%s.lock", path);
	fd = open(twin, O_RDWR | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		ok(false, "cannot take the writers' lock");
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct jobcg_acct_record r = sample_step();

		close(fd); /* the parent's lock is shared through it */
		r.kind = JOBCG_ACCT_JOB;
		r.job_id = (char *)"7";
		r.step_id = NULL;
		_exit(jobcg_acctlog_write(path, &r, 0) == 0 ? 0 : 1);
	}
	uint64_t deadline = now_usec() + 5000000;
	while (!blocked_on_flock(pid) && now_usec() < deadline)
		usleep(1000);
	ok(blocked_on_flock(pid), "the writer waits for the writers' lock");
	/* .2.gz -> .3.gz, .1.gz -> .2.gz, live -> .1 -> .1.gz (.1 removed) */
	snprintf(twin, sizeof(twin), "%s.3.gz", path);
	rename(p2gz, twin);
	rename(p1gz, p2gz);
	rename(path, p1);
	gzip_file(p1, p1gz);
	close(fd);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the writer succeeded");
	is_str(read_all_ids(path, NULL), "1 2 3 4 5 6 7",
	       "the record written across the rotation is in the new log, once");
	{
		struct seen s = {};

		jobcg_acctlog_read(path, NULL, collect, &s);
		jobcg_acct_record_done(&s.last);
		is_str(s.steps, "7.job", "...the live log holds just it");
	}

	/* dateext names, sorted by their suffix, before the live log */
	char dpath[300], d1[320], d2[320];
	snprintf(dpath, sizeof(dpath), "%s/date/acct.jsonl", dir);
	snprintf(d1, sizeof(d1), "%s-20250101", dpath);
	snprintf(d2, sizeof(d2), "%s-20250102", dpath);
	write_job(dpath, "a");
	rename(dpath, d1);
	gzip_file(d1, strcat(strcpy(twin, d1), ".gz"));
	write_job(dpath, "b");
	rename(dpath, d2);
	write_job(dpath, "c");
	is_str(read_all_ids(dpath, NULL), "a b c", "dateext copies read in date order, then live");

	snprintf(twin, sizeof(twin), "rm -rf '%s'", dir);
	if (system(twin) != 0)
		tap_diag("cannot remove %s", dir);
}

/* Run jobcg_acctlog_write() of job @id in a child: its exit (0 written, 1 failed), or -1 when it
 * had not returned within 5 s (killed then). */
static int write_job_bounded(const char *path, const char *id)
{
	uint64_t deadline = now_usec() + 5000000;
	pid_t pid = fork();
	int st = 0;

	if (pid == 0) {
		struct jobcg_acct_record r = sample_step();

		r.kind = JOBCG_ACCT_JOB;
		r.job_id = (char *)id;
		r.step_id = NULL;
		_exit(jobcg_acctlog_write(path, &r, 0) == 0 ? 0 : 1);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_usec() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(2000);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * Writers lock <log>.lock, a file only root can open, and not the log: flock() asks for no
 * access mode, so anyone who may read the log (0644, or a group of log readers) could hold a
 * lock on it and stop every step end and release for as long as they like.
 */
static void test_writer_lock(void)
{
	char dir[] = "/tmp/jobcg-test-acct-lock-XXXXXX";
	char path[256], lock[300], cmd[300], pause[300], p1[300];
	struct stat st;
	mode_t old_umask;
	int fd;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	snprintf(lock, sizeof(lock), "%s.lock", path);
	old_umask = umask(0);
	write_job(path, "1");
	umask(old_umask);
	if (lstat(lock, &st) < 0)
		st = (struct stat){};
	ok(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600,
	   "the first writer made %s, mode 0600 whatever the umask (%04o)", lock,
	   (unsigned)(st.st_mode & 07777));

	/* A reader's lock on the log, as anyone who can open it may take. */
	ok(chmod(path, 0644) == 0, "the log readable by all");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ok(fd >= 0 && flock(fd, LOCK_SH) == 0, "a reader holds LOCK_SH on the log");
	is_int(write_job_bounded(path, "2"), 0, "a writer is not held back by it");
	if (fd >= 0)
		close(fd);
	is_str(read_all_ids(path, NULL), "1 2", "its record is in the log");

	/* The writers' lock is theirs alone: one anyone else could open is refused. */
	ok(chmod(lock, 0644) == 0, "the lock file made readable by all");
	jobcg_error_clear();
	is_int(write_job_bounded(path, "3"), 1, "a writer refuses it");
	{
		struct jobcg_acct_record r = sample_step();

		r.kind = JOBCG_ACCT_JOB;
		r.job_id = (char *)"3";
		r.step_id = NULL;
		is_int(jobcg_acctlog_write(path, &r, 0), -EPERM, "-EPERM");
		ok(strstr(jobcg_last_error()->message, "not a file only root can open") &&
		       strstr(jobcg_last_error()->message, "remove it"),
		   "saying so: %s", jobcg_last_error()->message);
	}
	ok(unlink(lock) == 0 && symlink("/nonexistent", lock) == 0, "the lock file a link");
	is_int(write_job_bounded(path, "3"), 1, "a writer does not follow it");
	ok(access("/nonexistent", F_OK) < 0, "nothing made at its target");
	ok(unlink(lock) == 0, "the link removed");
	is_str(read_all_ids(path, NULL), "1 2", "nothing written meanwhile");
	is_int(write_job_bounded(path, "3"), 0, "then the lock file is made again and used");

	/*
	 * Renamed between the writer's open and its check (a test build stops it there): the
	 * record goes to the new log. The lock no longer spans a wait with the log open, but the
	 * window between open and write remains.
	 */
	if (!tap_test_hooks()) {
		for (int i = 0; i < 5; i++)
			tap_skip("no test hooks in this build");
		goto out;
	}
	snprintf(pause, sizeof(pause), "%s/pause", dir);
	snprintf(p1, sizeof(p1), "%s.1", path);
	mkdir(pause, 0700);
	setenv("JOBCG_TEST_PAUSE", "acctlog-opened", 1);
	setenv("JOBCG_TEST_PAUSE_DIR", pause, 1);
	{
		pid_t pid = fork();
		int w = 0;

		if (pid == 0) {
			struct jobcg_acct_record r = sample_step();

			r.kind = JOBCG_ACCT_JOB;
			r.job_id = (char *)"4";
			r.step_id = NULL;
			_exit(jobcg_acctlog_write(path, &r, 0) == 0 ? 0 : 1);
		}
		unsetenv("JOBCG_TEST_PAUSE");
		unsetenv("JOBCG_TEST_PAUSE_DIR");
		snprintf(cmd, sizeof(cmd), "%s/acctlog-opened.reached", pause);
		for (int i = 0; i < 500 && access(cmd, F_OK) < 0; i++)
			usleep(10000);
		ok(access(cmd, F_OK) == 0, "the writer stopped with the log open");
		ok(rename(path, p1) == 0, "the log rotated then");
		snprintf(cmd, sizeof(cmd), "%s/acctlog-opened.go", pause);
		fd = open(cmd, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
		waitpid(pid, &w, 0);
		ok(WIFEXITED(w) && WEXITSTATUS(w) == 0, "the writer succeeded");
	}
	{
		struct seen live = {}, moved = {};

		jobcg_acctlog_read(path, NULL, collect, &live);
		jobcg_acctlog_read(p1, NULL, collect, &moved);
		jobcg_acct_record_done(&live.last);
		jobcg_acct_record_done(&moved.last);
		is_str(live.steps, "4.job", "its record is in the new log");
		is_str(moved.steps, "1.job 2.job 3.job", "and not in the one moved away");
	}
out:
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		tap_diag("cannot remove %s", dir);
}

/* Append @text to @path as it is. */
static void append_raw(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		tap_diag("cannot append to %s", path);
	if (fd >= 0)
		close(fd);
}

/* Lines that hold a record and more, or a negative count, are not records (skipped, warned). */
static void test_junk_lines(void)
{
	char dir[] = "/tmp/jobcg-test-acct-junk-XXXXXX";
	char path[256], cmd[300], *nl, *p;
	_cleanup_free_ char *line = NULL;
	size_t len = 0;
	int w;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	write_job(path, "1");
	if (read_full_file_at(AT_FDCWD, path, 1 << 16, &line, &len) < 0 ||
	    !(nl = strchr(line, '\n'))) {
		ok(false, "read the record back");
		return;
	}
	*nl = '\0';
	{
		_cleanup_free_ char *a = strdup_printf("%s{\"x\":1}\n", line),
				    *b = strdup_printf("%s trailing\n", line),
				    *c = strdup_printf("%s  \n", line), *d = strdup(line);

		append_raw(path, a);
		append_raw(path, b);
		append_raw(path, c); /* blanks after it are not junk */
		/* "cpu_usec":12345 -> "cpu_usec":-5 */
		if (d && (p = strstr(d, "\"cpu_usec\":12345"))) {
			_cleanup_free_ char *neg =
			    strdup_printf("%.*s\"cpu_usec\":-5%s\n", (int)(p - d), d,
					  p + strlen("\"cpu_usec\":12345"));

			append_raw(path, neg);
			tap_diag("negative: %s", neg);
		} else
			ok(false, "the sample has cpu_usec 12345");
	}
	warnings = 0;
	jobcg_set_log(count_warnings, NULL, JOBCG_LOG_DEBUG);
	is_str(read_all_ids(path, NULL), "1 1", "the record, and the one with blanks after it");
	w = warnings;
	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
	is_int(w, 3, "junk after a record, or a negative number: a warning each, skipped");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		tap_diag("cannot remove %s", dir);
}

/*
 * Files that are not logs jobcg wrote: an entry named like a rotated log that is a directory,
 * a FIFO, a link or a file others could write is skipped with a warning (the others are read);
 * a live log like that, or a state directory others can write, is refused, by readers and by
 * writers.
 */
static void test_unsafe_files(void)
{
	char dir[] = "/tmp/jobcg-test-acct-unsafe-XXXXXX";
	char path[256], other[300], p[320], cmd[400];
	struct jobcg_acct_record r = sample_step();
	int w;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	snprintf(other, sizeof(other), "%s-elsewhere", dir);
	write_job(path, "1");
	write_job(other, "9"); /* outside the state directory */

	snprintf(p, sizeof(p), "%s-archive", path);
	ok(mkdir(p, 0700) == 0, "a directory named like a rotated log");
	snprintf(p, sizeof(p), "%s.3", path);
	ok(mkfifo(p, 0600) == 0, "a FIFO named like one");
	snprintf(p, sizeof(p), "%s-2020", path);
	ok(symlink(other, p) == 0, "a link named like one, to a log elsewhere");
	snprintf(p, sizeof(p), "%s.1", path);
	write_job(p, "8");
	ok(chmod(p, 0666) == 0, "a rotated log anyone may write");
	snprintf(p, sizeof(p), "%s.2", path);
	write_job(p, "7");
	warnings = 0;
	jobcg_set_log(count_warnings, NULL, JOBCG_LOG_DEBUG);
	is_str(read_all_ids(path, NULL), "7 1", "the others are read, oldest first");
	w = warnings;
	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
	is_int(w, 4, "with a warning for each entry skipped");

	if (geteuid() == 0) {
		snprintf(p, sizeof(p), "%s.2", path);
		ok(chown(p, 65534, 65534) == 0, "a rotated log owned by nobody");
		warnings = 0;
		jobcg_set_log(count_warnings, NULL, JOBCG_LOG_DEBUG);
		is_str(read_all_ids(path, NULL), "1", "is skipped too");
		jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
		is_int(warnings, 5, "with a warning");
		ok(chown(path, 65534, 65534) == 0, "the live log owned by nobody");
		ok(strstr(read_all_ids(path, NULL), "owned by uid 65534"),
		   "the reader refuses it: %s", read_all_ids(path, NULL));
		is_int(jobcg_acctlog_write(path, &r, 0), -EPERM, "the writer too");
		ok(chown(path, 0, 0) == 0, "root's again");
	} else
		tap_skip("not root: no file of another user's to make");

	ok(chmod(path, 0666) == 0, "the live log writable by anyone");
	ok(strstr(read_all_ids(path, NULL), "writable by its group or by others"),
	   "the reader refuses it: %s", read_all_ids(path, NULL));
	is_int(jobcg_acctlog_write(path, &r, 0), -EPERM, "the writer too");
	ok(strstr(jobcg_last_error()->message, "writable by its group or by others"),
	   "saying so: %s", jobcg_last_error()->message);
	ok(chmod(path, 0640) == 0, "0640 again");
	is_int(jobcg_acctlog_write(path, &r, 0), 0, "then it is written");

	ok(rename(path, other) == 0 && symlink(other, path) == 0, "the live log a link");
	ok(strstr(read_all_ids(path, NULL), "symbolic link"), "the reader refuses it: %s",
	   read_all_ids(path, NULL));

	ok(chmod(dir, 0777) == 0, "a state directory anyone may write");
	ok(strstr(read_all_ids(path, NULL), "writable by its group or by others"),
	   "the reader refuses it, as the writers do: %s", read_all_ids(path, NULL));
	ok(chmod(dir, 0700) == 0, "0700 again");

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, other);
	if (system(cmd) != 0)
		tap_diag("cannot remove %s", dir);
}

/*
 * The reservation a job ran in: written after the devices when there is one, absent when not,
 * so the lines of jobs outside reservations are the bytes they always were. Logs written
 * before the field existed, and a null one, read as no reservation; a name no reservation can
 * have (it would reach the terminal of whoever reads the table) makes the line no record.
 */
static void test_reservation(void)
{
	char dir[] = "/tmp/jobcg-test-acctresv-XXXXXX";
	struct jobcg_acct_record r = sample_step();
	_cleanup_free_ char *got = NULL, *line = NULL;
	char path[256], cmd[300], *p;
	struct seen s = {};
	size_t len = 0;
	int rr;
	static const char *const bad[] = {
	    "\"R1\"",  "\"a\\u001b[2Jb\"", "\"\"", "5", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
	    "[\"r1\"]"};

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	r.reservation = (char *)"r1";
	ok(jobcg_acctlog_write(path, &r, 0) == 0 &&
	       read_full_file_at(AT_FDCWD, path, 1 << 20, &got, &len) == 0 && len > 0 &&
	       strstr(got, "\"gres\":\"gpu:0,2\",\"reservation\":\"r1\"}\n"),
	   "a record in a reservation: \"reservation\":\"r1\" after the devices");
	ok(jobcg_acctlog_read(path, NULL, collect, &s) == 0 && s.n == 1 && s.last.reservation &&
	       streq(s.last.reservation, "r1") && same_record(&r, &s.last),
	   "... and it reads back");
	jobcg_acct_record_done(&s.last);

	/* The same record as an older jobcg wrote it, and with a null reservation. */
	line = got ? strdup(got) : NULL;
	p = line ? strstr(line, ",\"reservation\":\"r1\"") : NULL;
	if (!p) {
		ok(false, "the line holds the reservation");
		goto out;
	}
	strcpy(p, "}\n");
	unlink(path);
	{
		int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);

		if (fd >= 0)
			close(fd);
	}
	append_raw(path, line);
	*strrchr(line, '}') = 0;
	{
		_cleanup_free_ char *null_line = strdup_printf("%s,\"reservation\":null}\n", line);

		append_raw(path, null_line);
	}
	s = (struct seen){};
	warnings = 0;
	jobcg_set_log(count_warnings, NULL, JOBCG_LOG_DEBUG);
	ok(jobcg_acctlog_read(path, NULL, collect, &s) == 0 && s.n == 2 && !s.last.reservation &&
	       warnings == 0,
	   "records without the field (older logs) or with null: read, no reservation");
	jobcg_acct_record_done(&s.last);

	/* Names jobcg does not make: not records, each skipped with a warning. */
	for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
		_cleanup_free_ char *b = strdup_printf("%s,\"reservation\":%s}\n", line, bad[k]);

		append_raw(path, b);
	}
	s = (struct seen){};
	warnings = 0;
	rr = jobcg_acctlog_read(path, NULL, collect, &s);
	ok(rr == 0 && s.n == 2 && warnings == (int)ELEMENTSOF(bad),
	   "a reservation no reservation can have (upper case, an escape, empty, a number, 33 "
	   "characters, a list): the line is skipped with a warning (%u records, %d warnings)",
	   s.n, warnings);
	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
	jobcg_acct_record_done(&s.last);
out:
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		tap_diag("cannot remove %s", dir);
}

int main(void)
{
	test_state();
	test_log();
	test_old_lines();
	test_line_format();
	test_reservation();
	test_hostile_strings();
	test_sync_flag();
	test_fsize_limit();
	test_rotation();
	test_writer_lock();
	test_junk_lines();
	test_unsafe_files();
	return tap_done();
}
