/* Kernel test: ends that race or crash (a release and gc, a release and a step's end, jobcg
 * killed at named points) leave each job and step one accounting record, never reuse a step
 * number, and leave nothing gc does not find. Needs a build with -Dtest_hooks=true. */
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "jobcg/acctlog.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

static const char *root;
static char pause_dir[PATH_MAX];
static char *log_path;

struct count {
	const char *job, *step; /* step NULL: the job's own record */
	unsigned n;
	enum jobcg_acct_state state; /* of the last one */
	uint64_t start_usec, end_usec;
	int exit_code;
	char reason[512];
};

static int count_fn(const struct jobcg_acct_record *r, void *u)
{
	struct count *c = u;

	if (strcmp(r->job_id, c->job) != 0 || (c->step == NULL) != (r->step_id == NULL) ||
	    (c->step && strcmp(c->step, r->step_id) != 0))
		return 0;
	c->n++;
	c->state = r->state;
	c->start_usec = r->start_usec;
	c->end_usec = r->end_usec;
	c->exit_code = r->exit_code;
	snprintf(c->reason, sizeof(c->reason), "%s", r->reason ? r->reason : "");
	return 0;
}

static struct count records(const char *job, const char *step)
{
	struct count c = {.job = job, .step = step};

	if (jobcg_acctlog_read(log_path, job, count_fn, &c) < 0)
		tap_diag("cannot read %s", log_path);
	return c;
}

/* How many orphaned steps `list --json` (@out) gives job @job; -1 when it lists no such job. */
static int orphaned_steps(const char *out, int job)
{
	struct json_object *a = out ? json_tokener_parse(out) : NULL, *id, *steps;
	int n = -1;

	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		struct json_object *o = json_object_array_get_idx(a, i);

		if (json_object_object_get_ex(o, "job", &id) && json_object_get_int(id) == job &&
		    json_object_object_get_ex(o, "orphaned_steps", &steps))
			n = (int)json_object_array_length(steps);
	}
	json_object_put(a);
	return n;
}

/* Make ROOT/SUB look made a minute ago: past the window list gives a creation. */
static bool age(const char *sub)
{
	char p[PATH_MAX];
	struct timespec t[2];

	snprintf(p, sizeof(p), "%s/%s", root, sub);
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= 60;
	t[1] = t[0];
	return utimensat(AT_FDCWD, p, t, 0) == 0;
}

/* A release in its grace period is its remover's: list, gc and a second release leave it. */
static void test_release_vs_gc(void)
{
	char trapped[PATH_MAX + 64], script[PATH_MAX + 128];
	char *run_args[] = {"run", "--job", "43", "--", "sh", "-c", script, NULL};
	char *rel_args[] = {"release", "43", "--grace", "4000", NULL};
	char p[PATH_MAX], mark[128];
	char *out = NULL, *err = NULL;
	pid_t runner, releaser;
	int efd = -1, rc;
	bool marked = false;
	struct count c;

	/* The release's SIGTERM must find the trap set: the task says when it is. */
	snprintf(trapped, sizeof(trapped), "%s/trapped", pause_dir);
	snprintf(script, sizeof(script), "trap '' TERM; : > %s; sleep 60", trapped);
	is_int(kcli(NULL, "alloc", "43", NULL), 0, "alloc 43");
	runner = kcli_start(run_args, NULL, NULL);
	ok(kcli_wait_file(pause_dir, "trapped", 5000), "the step's task ignores SIGTERM");
	releaser = kcli_start(rel_args, NULL, &efd);
	snprintf(p, sizeof(p), "%s/job_43", root);
	for (int i = 0; i < 500 && !marked; i++) {
		ssize_t n = getxattr(p, "trusted.jobcg.removing", mark, sizeof(mark) - 1);

		marked = n > 0;
		if (marked)
			mark[n] = '\0';
		else
			usleep(10000);
	}
	ok(marked && strncmp(mark, "cancelled ", 10) == 0,
	   "the release marks the job naming itself and its outcome");
	is_int(kcli(&out, "list", "--json", NULL), 0, "list while it releases");
	ok(out && strstr(out, "\"releasing\":true") && !strstr(out, "\"orphaned\":true"),
	   "list shows the job releasing, not orphaned");
	free(out);
	is_int(kcli(&out, "gc", "--json", NULL), 0, "gc while it releases");
	ok(out && strstr(out, "\"jobs_removed\":0"), "gc leaves the job to its releaser");
	free(out);
	ok(kcli_exists("%s/job_43/step_0", root), "the job and its step are still there");
	{
		char *args[] = {"release", "43", NULL};

		rc = kcli_run(args, NULL, &err);
	}
	is_int(rc, 1, "a second release fails...");
	ok(err && strstr(err, "job 43 is being released by another jobcg"), "...saying why");
	free(err);
	err = NULL;
	is_int(kcli_finish(releaser, efd, &err), 0, "the first release finishes");
	free(err);
	kcli_finish(runner, -1, NULL);
	ok(!kcli_exists("%s/job_43", root), "job 43 is gone");
	c = records("43", NULL);
	ok(c.n == 1 && c.state == JOBCG_ACCT_CANCELLED, "one job record, CANCELLED (%u)", c.n);
	c = records("43", "0");
	ok(c.n == 1 && c.state == JOBCG_ACCT_CANCELLED, "one record of 43.0, CANCELLED (%u)", c.n);
}

/* The release takes the step with its job before the runner ends it: one record, its
 * releaser's. */
static void test_release_vs_step_end(void)
{
	char *run_args[] = {"run", "--job", "44", "--", "true", NULL};
	char *err = NULL;
	int efd = -1;
	pid_t runner;
	struct count c;

	is_int(kcli(NULL, "alloc", "44", NULL), 0, "alloc 44");
	runner = kcli_start_paused(pause_dir, "step-end-before-lock", run_args, &efd);
	ok(kcli_wait_file(pause_dir, "step-end-before-lock.reached", 20000),
	   "the runner stops before it ends its step");
	is_int(kcli(NULL, "release", "44", NULL), 0, "release 44 meanwhile");
	kcli_pause_go(pause_dir, "step-end-before-lock");
	is_int(kcli_finish(runner, efd, &err), 0, "the runner finishes");
	ok(err && !strstr(err, "cannot revoke"), "without a warning about the grant");
	free(err);
	c = records("44", "0");
	ok(c.n == 1 && c.state == JOBCG_ACCT_CANCELLED,
	   "44.0 has one record, CANCELLED: its job was released under it (%u)", c.n);
}

/* run --job 45 (@args) and a throwaway run (@eph) each killed at @point, then a gc. */
static void crash_both_then_gc(const char *point, char **args, char **eph, const char *when)
{
	char *out = NULL, what[128];

	snprintf(what, sizeof(what), "run --job 45 killed %s", when);
	is_int(kcli_crash_at(point, args), 128 + SIGKILL, what);
	is_int(kcli_crash_at(point, eph), 128 + SIGKILL, "an ephemeral run killed there too");
	is_int(kcli(&out, "gc", NULL), 0, "gc");
	free(out);
}

/* Killed at its step's end, after the readings: gc records the step, once: NODE_FAIL when killed
 * before its record was set aside, else as its runner saw it end. */
static void test_crash_at_step_end(void)
{
	char *args[] = {"run", "--job", "45", "--", "sh", "-c", "exit 3", NULL};
	char *eph[] = {"run", "--", "true", NULL};
	uint32_t *ids = NULL;
	struct count c;

	is_int(kcli(NULL, "alloc", "45", NULL), 0, "alloc 45");
	crash_both_then_gc("step-end-before-rmdir", args, eph, "as it removes its step");
	c = records("45", "0");
	is_int(c.n, 1, "45.0 has one record");
	is_int((int)c.state, JOBCG_ACCT_NODE_FAIL, "... NODE_FAIL: nothing had kept how it ended");
	{
		struct jobcg_config *conf = NULL;
		struct jobcg_ctx *ctx = NULL;
		size_t n = 0;

		if (jobcg_config_load(NULL, NULL, 0, &conf) == 0 &&
		    jobcg_ctx_open(conf, 0, &ctx) == 0 && jobcg_job_list(ctx, &ids, &n) == 0)
			is_int((int)n, 1, "gc removed the ephemeral job");
		jobcg_ctx_free(ctx);
		jobcg_config_free(conf);
	}
	c = records("4000000000", "0");
	is_int(c.n, 1, "the ephemeral job's step has one record");
	free(ids);
	/* Killed once its record was set aside, before the rmdir: that record is the step's. */
	crash_both_then_gc("step-end-set-aside", args, eph,
			   "with its record set aside, before the rmdir");
	c = records("45", "1");
	ok(c.n == 1 && c.state == JOBCG_ACCT_FAILED && c.exit_code == 3,
	   "45.1 has one record, FAILED with exit code 3, as its runner saw it end (%u, state %d, "
	   "exit %d)",
	   c.n, (int)c.state, c.exit_code);
	c = records("4000000001", "0");
	ok(c.n == 1 && c.state == JOBCG_ACCT_COMPLETED,
	   "the ephemeral job's step has one record, COMPLETED (%u, state %d)", c.n, (int)c.state);
	c = records("4000000001", NULL);
	is_int(c.n, 1, "... and its job one");
	is_int(kcli(NULL, "release", "45", NULL), 0, "release 45");
}

/* A step creation killed right after its mkdir: list calls it orphaned, gc removes it (no
 * record: it never ran), and its number is not handed out again. */
static void test_half_made_step(void)
{
	char *args[] = {"run", "--job", "46", "--", "true", NULL};
	char *out = NULL;
	struct count c;

	is_int(kcli(NULL, "alloc", "46", NULL), 0, "alloc 46");
	is_int(kcli_crash_at("step-create-after-mkdir", args), 128 + SIGKILL,
	       "run --job 46 killed as it makes its step");
	ok(kcli_exists("%s/job_46/step_0", root), "a half-made step 46.0 is left");
	is_int(kcli(NULL, "alloc", "47", NULL), 0, "alloc 47");
	{
		struct jobcg_config *conf = NULL;
		struct jobcg_ctx *ctx = NULL;

		if (jobcg_config_load(NULL, NULL, 0, &conf) == 0 &&
		    jobcg_ctx_open(conf, 0, &ctx) == 0)
			is_int(jobcg_step_create(ctx, 47, "extern", JOBCG_STEP_NO_RUNNER, NULL), 0,
			       "47.extern: a step of the job's own (no runner)");
		jobcg_ctx_free(ctx);
		jobcg_config_free(conf);
	}
	ok(age("job_46/step_0") && age("job_47/step_extern"), "both made a minute ago");
	is_int(kcli(&out, "list", "--json", NULL), 0, "list");
	is_int(orphaned_steps(out, 46), 1, "46.0 is orphaned");
	is_int(orphaned_steps(out, 47), 0, "47.extern is not");
	free(out);
	is_int(kcli(&out, "gc", "--json", NULL), 0, "gc");
	ok(out && strstr(out, "\"steps_removed\":1"), "gc removes one step");
	free(out);
	ok(!kcli_exists("%s/job_46/step_0", root), "46.0 is gone");
	ok(kcli_exists("%s/job_47/step_extern", root), "47.extern stays");
	is_int(kcli(NULL, "run", "--job", "46", "--", "true", NULL), 0, "run --job 46");
	c = records("46", "0");
	is_int(c.n, 0, "46.0, which never ran, has no record");
	c = records("46", "1");
	ok(c.n == 1 && c.state == JOBCG_ACCT_COMPLETED, "the next step is 46.1");
	is_int(kcli(NULL, "release", "46", NULL), 0, "release 46");
	is_int(kcli(NULL, "release", "47", NULL), 0, "release 47");
}

/* A job creation killed before its mark: list calls it orphaned, as gc treats it, and its
 * record starts when its directory was made, not in 1970. It says FAILED with why, never
 * NODE_FAIL (the node did not fail) nor COMPLETED (nothing ran), whoever removes it. */
static void test_half_made_job(void)
{
	char *args[] = {"alloc", "48", NULL}, *args49[] = {"alloc", "49", NULL};
	char *out = NULL;
	struct count c;
	uint64_t now;
	struct timespec ts;

	is_int(kcli_crash_at("job-create-before-mark", args), 128 + SIGKILL,
	       "alloc 48 killed before its mark");
	is_int(kcli(&out, "list", NULL), 0, "list");
	ok(out && strstr(out, "\n48         idle"), "a creation maybe under way is not orphaned");
	free(out);
	ok(age("job_48"), "made a minute ago");
	is_int(kcli(&out, "list", "--json", NULL), 0, "list --json");
	ok(out && strstr(out, "\"orphaned\":true"), "now it is orphaned");
	free(out);
	is_int(kcli(&out, "gc", "--json", NULL), 0, "gc");
	ok(out && strstr(out, "\"jobs_removed\":1"), "gc removes it");
	free(out);
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000u;
	c = records("48", NULL);
	ok(c.n == 1 && c.state == JOBCG_ACCT_FAILED && c.exit_code == -1,
	   "one record, FAILED, no exit code (%u, %s, %d)", c.n,
	   jobcg_acct_state_name(c.state) ? jobcg_acct_state_name(c.state) : "?", c.exit_code);
	ok(strstr(c.reason, "creation never finished") && strstr(c.reason, "nothing ran in it"),
	   "saying why: %s", c.reason);
	ok(c.start_usec + 120000000u > now && c.start_usec + 30000000u < now &&
	       c.start_usec <= c.end_usec,
	   "its start is when its directory was made");
	is_int(kcli(&out, "acct", "--job", "48", "--json", NULL), 0, "acct --job 48 --json");
	ok(out && strstr(out, "\"state\":\"FAILED\"") && strstr(out, "creation never finished"),
	   "acct shows it FAILED with its reason");
	free(out);

	/* Released by hand instead: the same record, not COMPLETED. */
	is_int(kcli_crash_at("job-create-before-mark", args49), 128 + SIGKILL,
	       "alloc 49 killed before its mark");
	is_int(kcli(NULL, "release", "49", NULL), 0, "release 49");
	c = records("49", NULL);
	ok(c.n == 1 && c.state == JOBCG_ACCT_FAILED && c.exit_code == -1 &&
	       strstr(c.reason, "creation never finished"),
	   "one record, FAILED with why (%s)", c.reason);
}

/* gc's summary counts the reservations it removes. */
static void test_gc_counts_resv(void)
{
	char p[PATH_MAX], *out = NULL;

	snprintf(p, sizeof(p), "%s/resv_rq", root);
	ok(mkdir(p, 0755) == 0, "a half-made reservation rq");
	is_int(kcli(&out, "gc", "--json", NULL), 0, "gc --json");
	ok(out && strstr(out, "\"resv_removed\":1"), "counts the reservation it removed");
	free(out);
	ok(!kcli_exists("%s", p), "rq is gone");
	ok(mkdir(p, 0755) == 0, "again");
	is_int(kcli(&out, "gc", NULL), 0, "gc");
	ok(out && strstr(out, "and 1 reservation(s);"), "the summary says so");
	free(out);
}

static int most_fn(const struct jobcg_acct_record *r, void *u)
{
	unsigned *most = u; /* [0]: the most step-0 records of one ephemeral job, [1..]: counts */
	uint64_t id;

	if (r->kind != JOBCG_ACCT_STEP || strcmp(r->step_id, "0") != 0 ||
	    sscanf(r->job_id, "%" SCNu64, &id) != 1 || id < JOBCG_JOB_ID_EPHEMERAL_BASE ||
	    id - JOBCG_JOB_ID_EPHEMERAL_BASE >= 16)
		return 0;
	if (++most[1 + id - JOBCG_JOB_ID_EPHEMERAL_BASE] > most[0])
		most[0] = most[1 + id - JOBCG_JOB_ID_EPHEMERAL_BASE];
	return 0;
}

/* Ephemeral ids count up: one in the log names one job, even with the tree idle between. */
static void test_ephemeral_ids(void)
{
	unsigned most[17] = {0};

	is_int(kcli(NULL, "run", "--", "true", NULL), 0, "an ephemeral run");
	is_int(kcli(NULL, "run", "--", "true", NULL), 0, "another, the tree idle between");
	is_int(jobcg_acctlog_read(log_path, NULL, most_fn, most), 0, "read the log");
	is_int((int)most[0], 1, "no ephemeral job id has two records of its step 0");
}

int main(void)
{
	struct jobcg_config *conf = NULL;

	root = kcli_setup("endrace", "jobcg");
	snprintf(pause_dir, sizeof(pause_dir), "%s/pause", ktest_tmpdir());
	if (mkdir(pause_dir, 0700) < 0 && errno != EEXIST) {
		printf("Bail out! cannot make %s\n", pause_dir);
		return 1;
	}
	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 ||
	    jobcg_acctlog_path(conf, &log_path) < 0) {
		printf("Bail out! no accounting log path\n");
		return 1;
	}
	jobcg_config_free(conf);
	test_release_vs_gc();
	if (tap_test_hooks()) {
		test_release_vs_step_end();
		test_crash_at_step_end();
		test_half_made_step();
		test_half_made_job();
	} else {
		tap_skip("a release racing a step's end, runs and allocs killed half way: a build "
			 "without test hooks");
	}
	test_gc_counts_resv();
	test_ephemeral_ids();
	(void)kcli(NULL, "gc", NULL);
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	free(log_path);
	return tap_done();
}
