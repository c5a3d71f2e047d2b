/* Unit tests for the accounting log: states, append/read round trip, torn lines, filters. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "jobcg/acctlog.h"
#include "log.h"
#include "tap.h"
#include "util.h"

struct seen {
	unsigned n;
	struct jobcg_acct_record last;
	char steps[256];
};

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

static void test_log(void)
{
	char dir[] = "/tmp/jobcg-test-acct-XXXXXX";
	char path[256], sub[256];
	struct jobcg_acct_record r = {
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
		free(text);
	}

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
	is_int(s.n, 5, "still the five good records");
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

	unlink(path);
	snprintf(path, sizeof(path), "%s/state/sub/acct.jsonl", dir);
	unlink(path);
	snprintf(sub, sizeof(sub), "%s/state/sub", dir);
	rmdir(sub);
	snprintf(sub, sizeof(sub), "%s/state", dir);
	rmdir(sub);
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
	ok(n > 0 && strstr(buf, "\"job\":\"5\"") && buf[n - 1] == '\n',
	   "the record was written: %s", buf);
	is_int(jobcg_acctlog_write(path, &r, JOBCG_ACCTLOG_SYNC), -EINVAL,
	       "JOBCG_ACCTLOG_SYNC fsyncs (EINVAL on a FIFO)");
	ok(strstr(jobcg_last_error()->message, "cannot fsync"), "the error says fsync: %s",
	   jobcg_last_error()->message);
	is_int(jobcg_acctlog_append(path, &r), -EINVAL, "jobcg_acctlog_append always fsyncs");
	is_int(jobcg_acctlog_write(path, &r, 0x80), -EINVAL, "unknown flags are refused");
	if (rd >= 0)
		close(rd);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	test_state();
	test_log();
	test_sync_flag();
	return tap_done();
}
