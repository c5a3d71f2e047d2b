/* Runs `jobcg config` from the build tree on small configuration directories: text, JSON, errors.
 */
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "jobcg/acctlog.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static char tmp[] = "/tmp/jobcg-test-cmd-config-XXXXXX";
static char jobcg[PATH_MAX];

static void put(const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	f = fopen(path, "we");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

static char *slurp(int fd)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);
	ssize_t n;

	while (buf && (n = read(fd, buf + len, cap - len)) > 0) {
		len += (size_t)n;
		if (len == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	if (buf)
		buf[len] = '\0';
	return buf;
}

/*
 * Run jobcg with @args (NULL-terminated); returns the exit code, stdout and stderr, and the CPU
 * seconds it used (user + system) in *cpu when set. A run longer than @timeout_s seconds is
 * killed and returns 124, so a test of something that used to hang fails instead of hanging.
 */
static int run_bounded(const char *const *args, unsigned timeout_s, char **out, char **err,
		       double *cpu)
{
	char outp[PATH_MAX], errp[PATH_MAX];
	struct rusage ru = {};
	uint64_t deadline;
	bool killed = false;
	int st = 0;
	pid_t pid;

	snprintf(outp, sizeof(outp), "%s/out", tmp);
	snprintf(errp, sizeof(errp), "%s/err", tmp);
	pid = fork();
	if (pid == 0) {
		const char *argv[32] = {jobcg};
		size_t n = 1;
		int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		for (; args[n - 1] && n < 31; n++)
			argv[n] = args[n - 1];
		argv[n] = NULL;
		dup2(fo, 1);
		dup2(fe, 2);
		unsetenv("JOBCG_CONF_DIR");
		unsetenv("JOBCG_ROOT");
		unsetenv("JOBCG_NODENAME");
		execv(jobcg, (char *const *)argv);
		_exit(127);
	}
	deadline = now_usec() + (uint64_t)timeout_s * 1000000;
	while (wait4(pid, &st, WNOHANG, &ru) == 0) {
		if (now_usec() > deadline) {
			kill(pid, SIGKILL);
			killed = true;
			wait4(pid, &st, 0, &ru);
			break;
		}
		usleep(10000);
	}
	if (cpu)
		*cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	int fo = open(outp, O_RDONLY | O_CLOEXEC), fe = open(errp, O_RDONLY | O_CLOEXEC);
	*out = slurp(fo);
	*err = slurp(fe);
	close(fo);
	close(fe);
	if (killed)
		return 124;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int run(const char *const *args, char **out, char **err)
{
	return run_bounded(args, 60, out, err, NULL);
}

/* gres.conf lines for other nodes cost nothing: NodeName= is matched, not expanded (a million
 * names each here, which took a second of CPU on every command when it was expanded). */
static void test_large_hostlists(void)
{
	char *out, *err;
	double cpu = -1;
	FILE *f;
	char path[PATH_MAX + 16];
	int rc;

	snprintf(path, sizeof(path), "%s/gres.conf", tmp);
	f = fopen(path, "we");
	if (!f)
		abort();
	for (int i = 0; i < 20; i++)
		fprintf(f, "NodeName=x%d[0-999][0-999] Name=gpu File=/dev/null\n", i);
	fprintf(f, "NodeName=tux[0-999][0-999] Name=gpu File=/dev/zero\n");
	fclose(f);
	put("cgroup.conf", "");
	rc = run_bounded(
	    (const char *[]){"--config-dir", tmp, "config", "--host", "tux999999", NULL}, 20, &out,
	    &err, &cpu);
	ok(rc == 0 && strstr(out, "file=/dev/zero(c 1:5)") && !strstr(out, "/dev/null"),
	   "the host's own line in a list of a million names is found (rc %d) %s", rc, err);
	ok(cpu >= 0 && cpu < 0.2,
	   "jobcg config with 21 lines of a million names: %.3f s CPU (< 0.2)", cpu);
	free(out);
	free(err);
}

/* jobcg acct reads the rotated logs too: records written, the log renamed, more written. */
static void test_acct_rotated(void)
{
	char state[PATH_MAX], log[PATH_MAX + 16], old[PATH_MAX + 32], *out, *err;
	struct jobcg_acct_record r = {.kind = JOBCG_ACCT_JOB, .state = JOBCG_ACCT_COMPLETED};
	char id[16], ids[128] = "";
	struct json_object *j;
	int rc;

	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(log, sizeof(log), "%s/acct.jsonl", state);
	snprintf(old, sizeof(old), "%s.1", log);
	for (int i = 1; i <= 5; i++) {
		if (i == 4)
			rename(log, old);
		snprintf(id, sizeof(id), "%d", i);
		r.job_id = id;
		if (jobcg_acctlog_write(log, &r, 0) < 0)
			tap_diag("write %d: %s", i, jobcg_last_error()->message);
	}
	setenv("JOBCG_STATE_DIR", state, 1);
	put("cgroup.conf", "");
	put("gres.conf", "");
	rc = run((const char *[]){"--config-dir", tmp, "acct", "--json", NULL}, &out, &err);
	unsetenv("JOBCG_STATE_DIR");
	j = json_tokener_parse(out);
	for (size_t i = 0; j && i < json_object_array_length(j); i++) {
		size_t l = strlen(ids);

		snprintf(ids + l, sizeof(ids) - l, "%s%s", l ? " " : "",
			 json_object_get_string(
			     json_object_object_get(json_object_array_get_idx(j, i), "job")));
	}
	ok(rc == 0 && streq(ids, "1 2 3 4 5"),
	   "jobcg acct after a rotation shows every record once, in order: '%s' %s", ids, err);
	json_object_put(j);
	free(out);
	free(err);
	unlink(old);
	unlink(log);
	strcat(log, ".lock"); /* the writers' lock */
	unlink(log);
	rmdir(state);
}

/*
 * jobcg acct --since/--until: what ran at any time in the window. Records (job: start-end, in
 * seconds): 1: 100-200, 2: 300-400, 3: unknown start-500, 4: 600-700.
 */
static void test_acct_window(void)
{
	static const struct {
		const char *since, *until, *want;
	} cases[] = {
	    {"@250", "@450", "2"},	     /* only 2 overlaps */
	    {"@200", NULL, "1 2 3 4"},	     /* 1 ended at 200: still in */
	    {"@201", "@600", "2 3 4"},	     /* 3 counts from its end; 4 started at 600 */
	    {NULL, "@299", "1"},	     /* 2 starts at 300 */
	    {"@450", "@550", "3"},	     /* an unknown start counts as the end */
	    {"@800", NULL, ""},		     /* nothing after 700 */
	    {"@0", "2000-01-01", "1 2 3 4"}, /* a local date, after all of it */
	    {"now-1d", NULL, ""},	     /* all of it long ago */
	};
	char state[PATH_MAX], log[PATH_MAX + 16], *out, *err;
	struct jobcg_acct_record r = {.kind = JOBCG_ACCT_JOB, .state = JOBCG_ACCT_COMPLETED};
	static const unsigned long long times[][2] = {{100, 200}, {300, 400}, {0, 500}, {600, 700}};
	char id[16];
	int rc;

	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(log, sizeof(log), "%s/acct.jsonl", state);
	for (int i = 0; i < 4; i++) {
		snprintf(id, sizeof(id), "%d", i + 1);
		r.job_id = id;
		r.start_usec = times[i][0] * 1000000;
		r.end_usec = times[i][1] * 1000000;
		if (jobcg_acctlog_write(log, &r, 0) < 0)
			tap_diag("write %d: %s", i, jobcg_last_error()->message);
	}
	setenv("JOBCG_STATE_DIR", state, 1);
	put("cgroup.conf", "");
	put("gres.conf", "");
	for (size_t c = 0; c < ELEMENTSOF(cases); c++) {
		const char *args[10] = {"--config-dir", tmp, "acct", "--json"};
		size_t n = 4;
		char ids[128] = "";
		struct json_object *j;

		if (cases[c].since) {
			args[n++] = "--since";
			args[n++] = cases[c].since;
		}
		if (cases[c].until) {
			args[n++] = "--until";
			args[n++] = cases[c].until;
		}
		rc = run(args, &out, &err);
		j = json_tokener_parse(out);
		for (size_t i = 0; j && i < json_object_array_length(j); i++) {
			size_t l = strlen(ids);

			snprintf(ids + l, sizeof(ids) - l, "%s%s", l ? " " : "",
				 json_object_get_string(json_object_object_get(
				     json_object_array_get_idx(j, i), "job")));
		}
		ok(rc == 0 && streq(ids, cases[c].want),
		   "acct --since %s --until %s: '%s' (got '%s') %s",
		   cases[c].since ? cases[c].since : "-", cases[c].until ? cases[c].until : "-",
		   cases[c].want, ids, err);
		json_object_put(j);
		free(out);
		free(err);
	}
	/* a window that ends before it starts would silently match nothing */
	rc = run((const char *[]){"--config-dir", tmp, "acct", "--since", "now", "--until",
				  "now-1h", NULL},
		 &out, &err);
	ok(rc == 2 && strstr(err, "--since 'now' is after --until 'now-1h'"),
	   "acct --since after --until: usage error (%s)", err);
	free(out);
	free(err);
	unsetenv("JOBCG_STATE_DIR");
	unlink(log);
	strcat(log, ".lock");
	unlink(log);
	rmdir(state);
}

/*
 * A log with a step id holding a quote, a newline and an escape sequence, and an old-style job
 * id and gres with control characters: jobcg acct's table puts no control character on the
 * terminal and no line that is not a record's; the bad step record is skipped with a warning.
 */
static void test_acct_hostile(void)
{
	static const char tail[] =
	    "\"uid\":0,\"gid\":0,\"exit_code\":0,\"exit_signal\":0,\"ntasks\":1,"
	    "\"start_usec\":1,\"end_usec\":2,\"cpu_usec\":0,\"user_usec\":0,\"system_usec\":0,"
	    "\"mem_peak\":0,\"oom_kills\":0}\n";
	char state[PATH_MAX], log[PATH_MAX + 16], *out = NULL, *err = NULL;
	size_t lines = 0;
	FILE *f;
	int rc;

	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(log, sizeof(log), "%s/acct.jsonl", state);
	mkdir(state, 0700);
	f = fopen(log, "we");
	if (!f) {
		ok(false, "write %s", log);
		return;
	}
	fprintf(f, "{\"type\":\"step\",\"job\":7,\"step\":\"0\",\"state\":\"COMPLETED\",%s", tail);
	fprintf(f,
		"{\"type\":\"step\",\"job\":7,\"step\":\"a\\\"b\\nc\\u001b[31mRED\","
		"\"state\":\"COMPLETED\",%s",
		tail);
	fprintf(
	    f,
	    "{\"type\":\"job\",\"job\":\"8\\u001b[2J\\n9\",\"gres\":\"gpu\\r\\u001b]0;x\\u0007\","
	    "\"state\":\"COMPLETED\",%s",
	    tail);
	fclose(f);
	setenv("JOBCG_STATE_DIR", state, 1);
	put("cgroup.conf", "");
	put("gres.conf", "");
	rc = run((const char *[]){"--config-dir", tmp, "acct", NULL}, &out, &err);
	unsetenv("JOBCG_STATE_DIR");
	for (const char *p = out; p && *p; p++)
		lines += *p == '\n';
	ok(rc == 0 && out && !strpbrk(out, "\x1b\r\x07") && lines == 3 && strstr(out, "7.0 ") &&
	       strstr(out, "8?[2J?9"),
	   "jobcg acct prints a header and two records, no control character: '%s'",
	   out ? out : "");
	ok(err && strstr(err, "not an accounting record"),
	   "and warns of the record with the bad step id: '%s'", err ? err : "");
	free(out);
	free(err);
	unlink(log);
	rmdir(state);
}

/* Include of a FIFO fails within 2 s, naming the Include line (it used to wait for a writer). */
static void test_include_fifo(void)
{
	char fifo[PATH_MAX + 16], *out, *err;
	uint64_t t0;
	int rc;

	snprintf(fifo, sizeof(fifo), "%s/fifo.conf", tmp);
	if (mkfifo(fifo, 0600) < 0)
		abort();
	put("cgroup.conf", "ConstrainCores=yes\nInclude fifo.conf\n");
	put("gres.conf", "");
	t0 = now_usec();
	rc =
	    run_bounded((const char *[]){"--config-dir", tmp, "config", NULL}, 5, &out, &err, NULL);
	double secs = (double)(now_usec() - t0) / 1e6;
	ok(rc == 1 && secs < 2 && strstr(err, "cgroup.conf:2:9:") &&
	       strstr(err, "is a FIFO, not a regular file"),
	   "Include of a FIFO fails in %.2f s (< 2) naming cgroup.conf:2:9 (rc %d): %s", secs, rc,
	   err);
	free(out);
	free(err);
	unlink(fifo);
}

/* A reservation this node cannot honour is an error of `jobcg config` naming the key's line,
 * as a missing device file is; --no-stat (files written for another node) does not look. */
static void test_spec_host(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
	    {"ConstrainCores=yes\nCoreSpecCount=4096\n",
	     "cgroup.conf:2: CoreSpecCount=4096 reserves every online CPU"},
	    {"ConstrainCores=yes\nMemSpecLimit=999999999\n",
	     "cgroup.conf:2: MemSpecLimit=999999999M is not below the node's RAM"},
	};
	char *out, *err;
	int rc;

	put("gres.conf", "");
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const char *key = strchr(cases[i].text, '\n') + 1;

		put("cgroup.conf", cases[i].text);
		rc = run((const char *[]){"--config-dir", tmp, "config", NULL}, &out, &err);
		ok(rc == 1 && strstr(err, cases[i].needle), "%.*s: jobcg config fails (rc %d): %s",
		   (int)strcspn(key, "\n"), key, rc, err);
		free(out);
		free(err);
		rc = run((const char *[]){"--config-dir", tmp, "config", "--no-stat", NULL}, &out,
			 &err);
		ok(rc == 0, "...not with --no-stat (rc %d) %s", rc, err);
		free(out);
		free(err);
	}
	put("cgroup.conf", "CoreSpecCount=0\nMemSpecLimit=1\n");
	rc = run((const char *[]){"--config-dir", tmp, "config", NULL}, &out, &err);
	ok(rc == 0, "a reservation the node can honour passes (rc %d) %s", rc, err);
	free(out);
	free(err);
}

int main(void)
{
	const char *build = getenv("JOBCG_BUILD_ROOT");
	char *out, *err;
	int rc;

	if (!build)
		tap_plan_skip_all("JOBCG_BUILD_ROOT not set (run through meson test)");
	snprintf(jobcg, sizeof(jobcg), "%s/cli/jobcg", build);
	if (!mkdtemp(tmp))
		tap_plan_skip_all("mkdtemp failed");

	put("cgroup.conf", "CgroupAutomount=yes\nConstrainCores=yes\nConstrainCores=no\n");
	put("gres.conf", "NodeName=tux[1-2] Name=gpu Type=a100 File=/dev/null,/dev/zero Cores=0-3\n"
			 "NodeName=tux9 Name=gpu File=/dev/jobcg-nonexistent0\n");

	rc = run((const char *[]){"--config-dir", tmp, "config", "--host", "tux1", NULL}, &out,
		 &err);
	is_int(rc, 0, "jobcg config succeeds");
	ok(strstr(out, "ConstrainCores           no") && strstr(out, "cgroup.conf:3"),
	   "text output shows the value and its file:line");
	ok(strstr(out, "CgroupSlice              system.slice                 # default"),
	   "defaults are marked");
	ok(strstr(out, "gpu 0 type=a100 count=1 file=/dev/null(c 1:3) cores=0-3"),
	   "gres record with the stat()ed device");
	ok(strstr(out, "gpu 1 type=a100 count=1 file=/dev/zero(c 1:5)"), "second record, index 1");
	ok(strstr(out, "cgroup.conf:1: CgroupAutomount is ignored") &&
	       strstr(out, "cgroup.conf:3: ConstrainCores specified more than once"),
	   "warnings are listed");
	ok(!strstr(err, "CgroupAutomount"), "warnings are not repeated on stderr");
	free(out);
	free(err);

	rc = run((const char *[]){"config", "--json", "--host", "tux2", "--config-dir", tmp, NULL},
		 &out, &err);
	is_int(rc, 0, "jobcg config --json succeeds (--config-dir after the subcommand)");
	struct json_object *j = json_tokener_parse(out), *v;
	ok(j != NULL, "valid JSON");
	if (j) {
		ok(json_object_object_get_ex(j, "cgroup", &v) &&
		       json_object_object_get_ex(v, "ConstrainCores", &v) &&
		       json_object_object_get_ex(v, "value", &v) &&
		       json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v),
		   "cgroup.ConstrainCores.value is false (a boolean)");
		ok(json_object_object_get_ex(j, "gres", &v) &&
		       json_object_object_get_ex(v, "records", &v) &&
		       json_object_array_length(v) == 2,
		   "two gres records for tux2");
		struct json_object *rec = v ? json_object_array_get_idx(v, 1) : NULL, *f;
		ok(rec && json_object_object_get_ex(rec, "files", &f) &&
		       json_object_get_int(
			   json_object_object_get(json_object_array_get_idx(f, 0), "minor")) == 5,
		   "record 1 is /dev/zero, minor 5");
		ok(json_object_object_get_ex(j, "warnings", &v) && json_object_array_length(v) == 2,
		   "two warnings in JSON");
		json_object_put(j);
	}
	free(out);
	free(err);

	rc = run((const char *[]){"--config-dir", tmp, "config", "--host", "tux9", NULL}, &out,
		 &err);
	is_int(rc, 1, "a missing device file fails");
	ok(strstr(err, "gres.conf:2:29: device file /dev/jobcg-nonexistent0"),
	   "error names file:line:column: %s", err);
	free(out);
	free(err);

	rc = run(
	    (const char *[]){"--config-dir", tmp, "config", "--no-stat", "--host", "tux9", NULL},
	    &out, &err);
	is_int(rc, 0, "--no-stat checks a file written for another node");
	ok(strstr(out, "file=/dev/jobcg-nonexistent0 flags="),
	   "the record is shown without device numbers");
	free(out);
	free(err);

	put("gres.conf", "Name=gpu File=/dev/null Flags=no_companions,nvidia_gpu_env\n");
	rc = run((const char *[]){"--config-dir", tmp, "config", NULL}, &out, &err);
	ok(rc == 0 && strstr(out, "flags=nvidia_gpu_env,no_companions"),
	   "text output shows Flags=no_companions");
	free(out);
	free(err);
	rc = run((const char *[]){"--config-dir", tmp, "config", "--json", NULL}, &out, &err);
	ok(rc == 0 && strstr(out, "\"no_companions\""), "JSON output shows no_companions");
	free(out);
	free(err);

	put("gres.conf", "Name=gpu File=/dev/null Cores=3-1\n");
	rc = run((const char *[]){"--config-dir", tmp, "config", "--json", NULL}, &out, &err);
	is_int(rc, 1, "a malformed gres.conf fails");
	ok(strstr(err, "gres.conf:1:31:") && strstr(err, "reversed range"), "stderr names 1:31");
	j = json_tokener_parse(out);
	ok(j && json_object_object_get_ex(j, "error", &v) &&
	       json_object_get_int(json_object_object_get(v, "line")) == 1 &&
	       json_object_get_int(json_object_object_get(v, "column")) == 31,
	   "--json prints the error object");
	json_object_put(j);
	free(out);
	free(err);

	rc = run((const char *[]){"config", "--bogus", NULL}, &out, &err);
	is_int(rc, 2, "unknown option is a usage error");
	free(out);
	free(err);
	rc = run((const char *[]){"config", "--help", NULL}, &out, &err);
	ok(rc == 0 && strstr(out, "--no-stat") && strstr(out, "--host NAME"),
	   "--help lists the options");
	free(out);
	free(err);

	/* Every command listed by `jobcg --help` has a --help of its own (man jobcg(1) says so). */
	rc = run((const char *[]){"--help", NULL}, &out, &err);
	is_int(rc, 0, "jobcg --help succeeds");
	size_t ncmds = 0, nhelp = 0;
	for (char *l = out, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		char name[32], *o, *e, want[64];

		nl = strchr(l, '\n');
		if (sscanf(l, "  %31[a-z-] ", name) != 1)
			continue;
		ncmds++;
		snprintf(want, sizeof(want), "Usage: jobcg %s", name);
		rc = run((const char *[]){name, "--help", NULL}, &o, &e);
		if (rc == 0 && startswith(o, want))
			nhelp++;
		else
			tap_diag("  'jobcg %s --help': exit %d, output '%.40s'", name, rc, o);
		free(o);
		free(e);
	}
	ok(ncmds >= 20 && nhelp == ncmds, "each of the %zu commands answers --help with its usage",
	   ncmds);
	free(out);
	free(err);
	rc = run((const char *[]){"run", "--help", NULL}, &out, &err);
	ok(rc == 0 && strstr(out, "-n, --ntasks N"), "run --help names -n as man jobcg(1) does");
	free(out);
	free(err);

	/* A time that is none, or a date that does not exist, is refused naming it. */
	const char *const bad_times[][2] = {{"2026-02-30", "no such date or time"},
					    {"2026-11-29T03:00:60", "no such date"},
					    {"yesterday", "need YYYY-MM-DD"},
					    {" 2026-11-29", "need YYYY-MM-DD"},
					    {"2026-1-29", "need YYYY-MM-DD"},
					    {"@-1", "need"},
					    {"@1.5", "need"},
					    {"now+1h", "need"},
					    {"now-h", "need"},
					    {"now-3x", "need"},
					    {"now-99999999999w", "need"},
					    {"", "need"}};
	for (size_t i = 0; i < ELEMENTSOF(bad_times); i++) {
		rc = run((const char *[]){"acct", "--since", bad_times[i][0], NULL}, &out, &err);
		ok(rc == 2 && strstr(err, "--since") && strstr(err, bad_times[i][0]) &&
		       strstr(err, bad_times[i][1]),
		   "acct --since '%s': usage error saying '%s'", bad_times[i][0], bad_times[i][1]);
		free(out);
		free(err);
	}

	/* A job id no job can have is refused, not answered with an empty table. */
	const char *bad_ids[] = {"abc", "0", "-1", "4294967295", "12x"};
	for (size_t i = 0; i < ELEMENTSOF(bad_ids); i++) {
		rc = run((const char *[]){"acct", "--job", bad_ids[i], NULL}, &out, &err);
		ok(rc == 2 && strstr(err, "--job") && strstr(err, bad_ids[i]),
		   "acct --job '%s' is a usage error naming it", bad_ids[i]);
		free(out);
		free(err);
	}

	/* "-1" as a job id is no option: the error must say what is wrong with it. */
	const char *const neg[][4] = {{"alloc", "-1"},
				      {"release", "-5"},
				      {"show", "-1"},
				      {"freeze", "-2"},
				      {"run", "--job", "-1", "true"}};
	for (size_t i = 0; i < ELEMENTSOF(neg); i++) {
		const char *args[6] = {neg[i][0], neg[i][1], neg[i][2], neg[i][3], NULL};

		rc = run(args, &out, &err);
		ok(rc == 2 && strstr(err, "1..4294967294"),
		   "jobcg %s %s %s: a negative id is refused "
		   "saying ids are 1..4294967294",
		   neg[i][0], neg[i][1], neg[i][2] ? neg[i][2] : "");
		free(out);
		free(err);
	}
	rc = run((const char *[]){"signal", "-9", "1", NULL}, &out, &err);
	ok(rc == 2 && strstr(err, "with -s"), "signal -9 points at -s");
	ok(err && !strstr(err, "invalid option"), "  and getopt says nothing before it");
	free(out);
	free(err);
	rc = run((const char *[]){"alloc", "-5", NULL}, &out, &err);
	ok(rc == 2 && strstr(err, "jobcg alloc: a negative number is not an id") &&
	       !strstr(err, "invalid option"),
	   "alloc -5: jobcg's message alone");
	free(out);
	free(err);

	/* --cpus is parsed before anything is made: a bad list never reaches a job's record. */
	const char *const bad_cpus[][2] = {{"3-1", "reversed"}, {"0-3,x", "x"}, {"", "empty"}};
	for (size_t i = 0; i < ELEMENTSOF(bad_cpus); i++) {
		const char *const *argvs[] = {
		    (const char *[]){"alloc", "1", "--cpus", bad_cpus[i][0], "--best-effort", NULL},
		    (const char *[]){"run", "--cpus", bad_cpus[i][0], "--best-effort", "--", "true",
				     NULL},
		};
		for (size_t k = 0; k < ELEMENTSOF(argvs); k++) {
			rc = run(argvs[k], &out, &err);
			ok(rc == 2 && strstr(err, "--cpus") && strstr(err, bad_cpus[i][1]),
			   "%s --cpus '%s' is a usage error (%s)", argvs[k][0], bad_cpus[i][0],
			   bad_cpus[i][1]);
			free(out);
			free(err);
		}
	}

	test_large_hostlists();
	test_include_fifo();
	test_spec_host();
	test_acct_rotated();
	test_acct_window();
	test_acct_hostile();

	char p[PATH_MAX + 16];
	const char *names[] = {"cgroup.conf", "gres.conf", "out", "err"};
	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		snprintf(p, sizeof(p), "%s/%s", tmp, names[i]);
		unlink(p);
	}
	rmdir(tmp);
	return tap_done();
}
