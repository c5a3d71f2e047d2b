/* Kernel test: what list, acct and run --acct --json print agrees with what was recorded, show
 * --json of a job is its list --json entry, and the tables stay in line whatever the width of
 * their entries. */
#include <json-c/json.h>
#include <sys/stat.h>

#include "kcli.h"

static void msleep(unsigned ms)
{
	usleep(ms * 1000);
}

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
	/* A CPU the node does not have is refused, --best-effort or not: it would be recorded
	 * as the job's CPUs with nothing enforcing or refusing it. */
	{
		char *err = NULL,
		     *args[] = {"alloc", "47", "--cpus", "0-4095", "--best-effort", NULL};

		is_int(kcli_run(args, NULL, &err), 1, "alloc --cpus 0-4095 --best-effort fails");
		ok(err && strstr(err, "--cpus 0-4095: CPUs") && strstr(err, "not online"),
		   "naming --cpus and the CPUs not online: %s", err ? err : "");
		free(err);
		ok(!kcli_exists("%s/job_47", kcli_root_abs), "and makes no job");
		is_int(kcli(NULL, "run", "--job", "42", "--cpus", "4095", "--best-effort", "--",
			    "true", NULL),
		       2, "nor does a step take one (not of its job's CPUs: a usage error)");
	}
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

/* policy: a task's path (here an ephemeral job's, 33 characters) is wider than the CGROUP header
 * and must not push its row's LEVEL, DEVICE and ACCESS out of line. */
static void policy_columns(void)
{
	char *args[] = {"run",	      "--job",	  "4294967290", "--gres", "gpu:2", "-n", "2",
			"--gpu-bind", "single:1", "--",		"sh",	  "-c",	   NULL, NULL};
	char cmd[PATH_MAX + 64], flag[PATH_MAX + 16], *out = NULL;
	const char *hdr, *row;
	pid_t runner;
	int i;

	snprintf(flag, sizeof(flag), "%s/task1", ktest_tmpdir());
	snprintf(cmd, sizeof(cmd), "touch %s/task$JOBCG_TASK_ID; exec sleep 1000", ktest_tmpdir());
	args[12] = cmd;
	runner = kcli_start(args, NULL, NULL);
	for (i = 0; i < 1000 && access(flag, F_OK) < 0; i++)
		msleep(10);
	ok(access(flag, F_OK) == 0, "the tasks of job 4294967290 started");
	is_int(kcli(&out, "policy", NULL), 0, "policy");
	hdr = out ? strstr(out, "CGROUP ") : NULL;
	row = out ? strstr(out, "job_4294967290/step_0/user/task_1 ") : NULL;
	ok(row != NULL, "task 1's grant");
	is_int(column_of(row, "task "), column_of(hdr, "LEVEL"), "its level under LEVEL");
	is_int(column_of(row, "c 195:1"), column_of(hdr, "DEVICE"), "its device under DEVICE");
	if (out)
		ktest_diag_lines("", out);
	free(out);
	is_int(kcli(NULL, "kill", "4294967290", NULL), 0, "kill job 4294967290");
	is_int(kcli_finish(runner, -1, NULL), 128 + SIGKILL, "its run ends");
}

/* `show TARGET` says "state: @want". */
static bool state_is(const char *target, const char *want)
{
	char *out = NULL, line[64];
	bool r;

	snprintf(line, sizeof(line), "\n  state: %s\n", want);
	r = kcli(&out, "show", target, NULL) == 0 && out && strstr(out, line);
	if (!r && out)
		ktest_diag_lines("", out);
	free(out);
	return r;
}

/* `show --json TARGET` says "state": @want. */
static bool json_state_is(const char *target, const char *want)
{
	char *out = NULL;
	struct json_object *o = NULL, *v;
	bool r = kcli(&out, "show", target, "--json", NULL) == 0 && out &&
		 (o = json_tokener_parse(out)) && json_object_object_get_ex(o, "state", &v) &&
		 strcmp(json_object_get_string(v), want) == 0;

	if (!r)
		tap_diag("show %s --json: %s", target, out ? out : "(nothing)");
	json_object_put(o);
	free(out);
	return r;
}

/* The entry of job @id in `list --json`, or NULL (a reference of its own). */
static struct json_object *list_entry(uint32_t id)
{
	char *out = NULL;
	struct json_object *a = NULL, *r = NULL;

	if (kcli(&out, "list", "--json", NULL) == 0 && out)
		a = json_tokener_parse(out);
	free(out);
	for (size_t i = 0; a && i < json_object_array_length(a) && !r; i++) {
		struct json_object *j = json_object_array_get_idx(a, i), *v;

		if (json_object_object_get_ex(j, "job", &v) && json_object_get_uint64(v) == id)
			r = json_object_get(j);
	}
	json_object_put(a);
	return r;
}

/* The entries of list and show in jobcg(1): from ".B list " to ".B pids ", or NULL. */
static char *man_list_show(void)
{
	const char *root = getenv("JOBCG_SOURCE_ROOT");
	char path[PATH_MAX], *text = NULL, *from, *to;
	size_t len = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/man/jobcg.1", root ? root : "..");
	f = fopen(path, "re");
	if (!f)
		return NULL;
	text = calloc(1, 1 << 20);
	if (text)
		len = fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	from = text && len ? strstr(text, "\n.B list \\fR") : NULL;
	to = from ? strstr(from, "\n.B pids \\fR") : NULL;
	if (!to) {
		free(text);
		return NULL;
	}
	*to = 0;
	memmove(text, from, strlen(from) + 1);
	return text;
}

/* Every key of @o is named in @man, quoted ("state"); those of its object "acct" as words. */
static void keys_documented(const char *man, struct json_object *o, const char *what)
{
	json_object_object_foreach(o, key, v)
	{
		char quoted[128];

		snprintf(quoted, sizeof(quoted), "\"%s\"", key);
		ok(man && strstr(man, quoted), "jobcg(1) names the key %s of %s", quoted, what);
		if (strcmp(key, "acct") == 0 && json_object_is_type(v, json_type_object)) {
			json_object_object_foreach(v, item, iv)
			{
				(void)iv;
				ok(man && strstr(man, item), "jobcg(1) names %s of %s's \"acct\"",
				   item, what);
			}
		}
	}
}

/* `show --json JOB` is the job's entry in `list --json`, step_gres included; `show --json
 * JOB.STEP` has the job's "releasing", which its "state" may say, as a job's JSON has. jobcg(1)
 * names every key of both. */
static void show_json_as_list(const char *job, const char *target)
{
	char *man = man_list_show();

	char *out = NULL;
	struct json_object *shown = NULL, *listed = list_entry((uint32_t)atoi(job)), *v;

	if (kcli(&out, "show", job, "--json", NULL) == 0 && out)
		shown = json_tokener_parse(out);
	free(out);
	ok(shown && listed && json_object_object_get_ex(shown, "step_gres", &v) &&
	       json_object_equal(shown, listed),
	   "show %s --json is its entry in list --json, step_gres included", job);
	if (shown && listed && !json_object_equal(shown, listed)) {
		tap_diag("show: %s", json_object_to_json_string(shown));
		tap_diag("list: %s", json_object_to_json_string(listed));
	}
	if (listed)
		keys_documented(man, listed, "list --json");
	json_object_put(shown);
	json_object_put(listed);
	shown = NULL;
	if (kcli(&out, "show", target, "--json", NULL) == 0 && out)
		shown = json_tokener_parse(out);
	free(out);
	ok(shown && json_object_object_get_ex(shown, "releasing", &v) &&
	       json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v),
	   "show %s --json: \"releasing\" false", target);
	if (shown)
		keys_documented(man, shown, "show --json JOB.STEP");
	json_object_put(shown);
	free(man);
}

/* show of a step without GPUs of its own (the extern step adopt makes): it shares its job's,
 * which its processes can open, so not "none". */
static void show_step_gres(void)
{
	char *out = NULL, pid_s[16];
	struct json_object *o, *v;
	pid_t child;
	int st;

	is_int(kcli(NULL, "alloc", "48", "--gres", "gpu:1", NULL), 0, "alloc 48 --gres gpu:1");
	child = fork();
	if (child == 0) {
		execlp("sleep", "sleep", "1000", (char *)NULL);
		_exit(127);
	}
	snprintf(pid_s, sizeof(pid_s), "%d", (int)child);
	is_int(kcli(NULL, "adopt", pid_s, "--job", "48", NULL), 0,
	       "adopt our own sleep into job 48 (its extern step)");
	/* one word for one state, in list as in show */
	is_int(kcli(&out, "list", NULL), 0, "list");
	ok(out && strstr(out, "\n48         running "), "job 48 listed running");
	if (out)
		ktest_diag_lines("", out);
	free(out);
	ok(state_is("48", "running"), "and shown running");
	is_int(kcli(&out, "show", "48.extern", NULL), 0, "show 48.extern");
	ok(out && strstr(out, "gres: the job's (gpu:"), "its GPUs are the job's, not none");
	if (out)
		ktest_diag_lines("", out);
	free(out);
	is_int(kcli(&out, "show", "48.extern", "--json", NULL), 0, "show 48.extern --json");
	o = out ? json_tokener_parse(out) : NULL;
	ok(o && json_object_object_get_ex(o, "gres", &v) && v == NULL,
	   "JSON: gres null (the job's), as cpus and mem");
	json_object_put(o);
	free(out);
	ok(json_state_is("48.extern", "running"), "JSON: state running, the word show prints");
	/* Without a process, the step and its job are in one state: one word for both (a step
	 * was once "empty" where its job was "idle"), in text and JSON. */
	kill(child, SIGKILL);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	ok(state_is("48.extern", "idle"), "its sleep killed, the step shown idle");
	ok(state_is("48", "idle"), "as its job is");
	ok(json_state_is("48.extern", "idle"), "JSON: the step's state idle");
	ok(json_state_is("48", "idle"), "JSON: the job's state idle");
	show_json_as_list("48", "48.extern");
	is_int(kcli(NULL, "release", "48", NULL), 0, "release 48");
}

/* `jobcg release` of a running ephemeral job: its run ends quietly with its task's status (the
 * release removes the job and writes its record), not with "cannot remove the job". The
 * release is held after its grace period, so the run always ends first. */
static void release_ephemeral(void)
{
	char cmd[PATH_MAX + 96], flag[PATH_MAX + 16], *err = NULL;
	char *args[] = {"run", "--job", "49", "--", "sh", "-c", cmd, NULL};
	char *rel[] = {"release", "49", "--grace", "200", NULL};
	const char *dir = ktest_tmpdir();
	int efd = -1, i;
	pid_t runner, releaser;

	if (!tap_test_hooks()) {
		tap_skip("a release held after its grace: a build without test hooks");
		return;
	}
	snprintf(flag, sizeof(flag), "%s/eph49", dir);
	/* exits 0 on the release's SIGTERM; its sleep is killed when the task has ended */
	snprintf(cmd, sizeof(cmd), "trap 'exit 0' TERM; touch %s; sleep 1000 & wait", flag);
	runner = kcli_start(args, NULL, &efd);
	for (i = 0; i < 1000 && access(flag, F_OK) < 0; i++)
		msleep(10);
	ok(access(flag, F_OK) == 0, "the task of ephemeral job 49 started");
	releaser = kcli_start_paused(dir, "release-after-grace", rel, NULL);
	ok(kcli_wait_file(dir, "release-after-grace.reached", 20000),
	   "release 49 stops after its grace");
	is_int(kcli_finish(runner, efd, &err), 0, "its run exits 0, as its task did");
	ok(!err || !strstr(err, "cannot remove the job"), "and says nothing of the job: %s",
	   err ? err : "");
	free(err);
	kcli_pause_go(dir, "release-after-grace");
	is_int(kcli_finish(releaser, -1, NULL), 0, "release 49");
	ok(!kcli_exists("%s/job_49", kcli_root_abs), "job 49 is gone");
}

/* The JSON of a job without GPUs says so as acct's does and as for its other limits: null. */
static bool gres_null(char *const args[], bool array)
{
	char *out = NULL;
	struct json_object *o = NULL, *j, *v;
	bool is_null;

	if (kcli_run(args, &out, NULL) == 0 && out)
		o = json_tokener_parse(out);
	free(out);
	j = o && array ? json_object_array_get_idx(o, 0) : o;
	is_null = j && json_object_object_get_ex(j, "gres", &v) && v == NULL;
	json_object_put(o);
	return is_null;
}

static void json_no_gres(void)
{
	char *alloc[] = {"alloc", "50", "--json", NULL}, *show[] = {"show", "50", "--json", NULL},
	     *list[] = {"list", "--json", NULL};

	ok(gres_null(alloc, false), "alloc 50 --json (no --gres): gres null");
	ok(gres_null(show, false), "show 50 --json: gres null");
	ok(gres_null(list, true), "list --json: gres null");
	is_int(kcli(NULL, "release", "50", NULL), 0, "release 50");
}

/* Whether the records of job @id in the log (acct --json) give its step @step and the job
 * state @state. */
static bool acct_states(const char *id, const char *step, const char *state)
{
	char *out = NULL;
	struct json_object *a, *v;
	bool step_ok = false, job_ok = false;

	if (kcli(&out, "acct", "--json", "--job", id, NULL) != 0 || !out)
		return false;
	a = json_tokener_parse(out);
	free(out);
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		struct json_object *r = json_object_array_get_idx(a, i);
		const char *st =
		    json_object_object_get_ex(r, "state", &v) ? json_object_get_string(v) : "";

		if (json_object_object_get_ex(r, "step", &v)) {
			if (strcmp(json_object_get_string(v), step) == 0 && strcmp(st, state) == 0)
				step_ok = true;
		} else if (strcmp(st, state) == 0)
			job_ok = true;
	}
	json_object_put(a);
	return step_ok && job_ok;
}

/*
 * A step ended by `jobcg signal` records CANCELLED (as after Slurm's scancel): run --acct --json
 * says the same as the log, and the ephemeral job, whose outcome is its one step's, is CANCELLED
 * too (not FAILED with an exit code the step never had).
 */
static void run_cancelled(void)
{
	char *args[] = {"run", "--acct", "--json", "--job", "44", "--", "sh", "-c", NULL, NULL};
	char cmd[PATH_MAX + 64], flag[PATH_MAX], *err = NULL;
	struct json_object *o, *v;
	int efd = -1, rc, i;
	pid_t runner;

	snprintf(flag, sizeof(flag), "%s/started44", ktest_tmpdir());
	snprintf(cmd, sizeof(cmd), "touch %s; exec sleep 1000", flag);
	args[8] = cmd;
	runner = kcli_start(args, NULL, &efd);
	for (i = 0; i < 1000 && access(flag, F_OK) < 0; i++)
		msleep(10);
	ok(access(flag, F_OK) == 0, "the task of ephemeral job 44 started");
	is_int(kcli(NULL, "signal", "-s", "TERM", "44.0", NULL), 0, "jobcg signal -s TERM 44.0");
	rc = kcli_finish(runner, efd, &err);
	is_int(rc, 128 + SIGTERM, "run exits 143");
	o = err ? json_tokener_parse(err) : NULL;
	ok(o && json_object_object_get_ex(o, "state", &v) &&
	       strcmp(json_object_get_string(v), "CANCELLED") == 0,
	   "run --acct --json: state CANCELLED, as the step's record");
	ok(o && json_object_object_get_ex(o, "job_state", &v) &&
	       strcmp(json_object_get_string(v), "CANCELLED") == 0,
	   "and job_state CANCELLED, as the ephemeral job's record");
	json_object_put(o);
	free(err);
	ok(acct_states("44", "0", "CANCELLED"), "the log: step 44.0 and job 44 both CANCELLED");

	/* An exit of 3 stays FAILED, in both. */
	is_int(kcli(NULL, "run", "--job", "45", "--", "sh", "-c", "exit 3", NULL), 3,
	       "run --job 45 exit 3");
	ok(acct_states("45", "0", "FAILED"), "the log: step 45.0 and job 45 FAILED");
}

/* gpus on a node without a GPU (an empty JOBCG_SYSROOT): one line saying so, no header over
 * no row; JSON an empty array. */
static void gpus_none(void)
{
	char sysroot[PATH_MAX], *out = NULL;
	struct json_object *o, *v;

	snprintf(sysroot, sizeof(sysroot), "%s/no-gpu-root", ktest_tmpdir());
	mkdir(sysroot, 0755);
	setenv("JOBCG_SYSROOT", sysroot, 1);
	is_int(kcli(&out, "gpus", NULL), 0, "gpus without a GPU");
	ok(out && strncmp(out, "no GPU found", 12) == 0 && !strchr(out, '\n')[1],
	   "one line: no GPU found");
	if (out)
		ktest_diag_lines("", out);
	free(out);
	is_int(kcli(&out, "gpus", "--json", NULL), 0, "gpus --json without a GPU");
	o = out ? json_tokener_parse(out) : NULL;
	ok(o && json_object_object_get_ex(o, "gpus", &v) &&
	       json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0,
	   "JSON: gpus an empty array");
	json_object_put(o);
	free(out);
	unsetenv("JOBCG_SYSROOT");
}

/* A stand-in getent (test builds run it instead of NSS's): @script written to @path. */
static bool stand_in_getent(char *path, size_t size, const char *name, const char *script,
			    const char *what)
{
	FILE *f;

	snprintf(path, size, "%s/%s", ktest_tmpdir(), name);
	f = fopen(path, "w");
	if (!ok(f != NULL, "%s", what))
		return false;
	fputs(script, f);
	fclose(f);
	return chmod(path, 0755) == 0;
}

/* top with an owner whose name is longer than ten characters: the name whole, under USER,
 * and the next column still under its header (a test build's getent stands in for NSS). */
static void top_user_width(void)
{
	char getent[PATH_MAX], *out = NULL;
	const char *hdr, *row;

	if (!stand_in_getent(getent, sizeof(getent), "getent-long",
			     "#!/bin/sh\n[ \"$1\" = passwd ] && [ \"$2\" = 4242 ] || exit 2\n"
			     "echo 'a-very-long-user-name:x:4242:4242::/:/bin/sh'\n",
			     "a stand-in getent"))
		return;
	is_int(kcli(NULL, "alloc", "52", "--uid", "4242", NULL), 0, "alloc 52 --uid 4242");
	setenv("JOBCG_TEST_GETENT", getent, 1);
	is_int(kcli(&out, "top", "-b", "-n", "1", NULL), 0, "top -b -n 1");
	unsetenv("JOBCG_TEST_GETENT");
	hdr = out ? strstr(out, "JOB ") : NULL;
	row = out ? strstr(out, "\n52 ") : NULL;
	row = row ? row + 1 : NULL;
	ok(row && strstr(row, " a-very-long-user-name "), "the owner's name whole");
	is_int(column_of(row, "a-very-long"), column_of(hdr, "USER"), "under USER");
	{
		/* CPU% is right-aligned: its cell ends where its header does */
		int end = column_of(hdr, "CPU%") + 4;

		ok(row && end > 4 && (int)strcspn(row, "\n") > end && row[end - 1] != ' ' &&
		       row[end] == ' ',
		   "the CPU%% cell still under CPU%%");
	}
	if (out)
		ktest_diag_lines("", out);
	free(out);
	is_int(kcli(NULL, "release", "52", NULL), 0, "release 52");
}

/* What getent answers is input too: an entry longer than the reader takes, one that is not an
 * entry, a getent killed by a signal: each refused, saying which, with nothing made; a group
 * whose member list is longer than a pipe holds is read to its end and taken. */
static void getent_answers(void)
{
	char getent[PATH_MAX], *err = NULL, *out = NULL;

	if (!stand_in_getent(
		getent, sizeof(getent), "getent-odd",
		"#!/bin/sh\n"
		"case \"$1 $2\" in\n"
		"'passwd huge') head -c 5000 /dev/zero | tr '\\0' u; echo ':x:1:1::/:/bin/sh' ;;\n"
		"'passwd junk') echo 'junk' ;;\n"
		"'passwd crash') kill -SEGV $$ ;;\n"
		"'group crowd') printf 'crowd:x:4343:'; head -c 100000 /dev/zero | tr '\\0' m;"
		" echo ;;\n"
		"*) exit 2 ;;\n"
		"esac\n",
		"a stand-in getent with odd answers"))
		return;
	setenv("JOBCG_TEST_GETENT", getent, 1);
	is_int(kcli_run((char *[]){"alloc", "53", "--uid", "huge", NULL}, NULL, &err), 1,
	       "alloc --uid with a passwd entry longer than the reader takes");
	ok(err && strstr(err, "getent passwd huge: entry longer than 4095 bytes"), "  refused: %s",
	   err ? err : "");
	free(err);
	is_int(kcli_run((char *[]){"alloc", "53", "--uid", "junk", NULL}, NULL, &err), 1,
	       "alloc --uid with an answer that is no passwd entry");
	ok(err && strstr(err, "getent passwd junk: not an entry of 7 ':'-separated fields"),
	   "  refused: %s", err ? err : "");
	free(err);
	is_int(kcli_run((char *[]){"alloc", "53", "--uid", "crash", NULL}, NULL, &err), 1,
	       "alloc --uid with a getent killed by a signal");
	ok(err && strstr(err, "getent passwd crash failed (signal 11)"), "  refused: %s",
	   err ? err : "");
	free(err);
	ok(!kcli_exists("%s/job_53", kcli_root_abs), "  no job 53 made by any of them");
	is_int(kcli(NULL, "alloc", "53", "--uid", "0", "--gid", "crowd", NULL), 0,
	       "alloc --gid of a group with a 100 kB member list");
	is_int(kcli(&out, "show", "53", NULL), 0, "show 53");
	ok(out && strstr(out, "owner: 0:4343"), "  its group is the entry's gid, 4343");
	free(out);
	unsetenv("JOBCG_TEST_GETENT");
	is_int(kcli(NULL, "release", "53", NULL), 0, "release 53");
}

int main(void)
{
	kcli_setup("cli-output", "jobcg");
	/* Two stand-in GPUs, constrained: policy lists the grants. */
	setenv("JOBCG_CONF_DIR", ktest_gpu_conf(2, NULL, ktest_pin_dir("cli-output"), NULL), 1);
	list_limits();
	acct_columns();
	run_cancelled();
	policy_columns();
	show_step_gres();
	release_ephemeral();
	json_no_gres();
	gpus_none();
	if (tap_test_hooks()) {
		top_user_width();
		getent_answers();
	} else
		tap_skip("top with a long user name, odd getent answers: a build without test "
			 "hooks has no stand-in getent");
	is_int(kcli(NULL, "teardown", NULL), 0, "teardown: nothing left");
	return tap_done();
}
