/* Kernel test: jobcg teardown removes a whole tree, its pins and lock file, refusing while jobs
 * or reservations live unless forced (then every job and stray step gets its record). */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "jobcg/acctlog.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

struct want {
	int mask;
};

static int seen(const struct jobcg_acct_record *r, void *u)
{
	struct want *w = u;

	if (r->kind == JOBCG_ACCT_JOB && strcmp(r->job_id, "1") == 0 &&
	    r->state == JOBCG_ACCT_CANCELLED)
		w->mask |= 1;
	if (r->kind == JOBCG_ACCT_STEP && strcmp(r->job_id, "2") == 0 && r->step_id &&
	    strcmp(r->step_id, "0") == 0 && r->state == JOBCG_ACCT_NODE_FAIL && r->start_usec)
		w->mask |= 2;
	if (r->kind == JOBCG_ACCT_JOB && strcmp(r->job_id, "2") == 0 &&
	    r->state == JOBCG_ACCT_CANCELLED)
		w->mask |= 4;
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Entries of @dir other than . and .. (-1: cannot be read). */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* JOBCG_ROOT set to the test's own directory (the parent of @root) + @rel; one job made there
 * and released, then the tree torn down. */
static void tree_at(const char *top_rel, const char *rel, const char *what)
{
	char r[PATH_MAX];

	snprintf(r, sizeof(r), "%s/%s", top_rel, rel);
	setenv("JOBCG_ROOT", r, 1);
	is_int(kcli(NULL, "alloc", "60", NULL), 0, what);
	is_int(kcli(NULL, "release", "60", NULL), 0, "  release 60");
}

/* A directory jobcg made above a root, removed (by the teardown of the last tree below it) just
 * after a new tree's alloc made it and before it made the rest: the alloc walks again. */
static void made_vanishes(const char *top, const char *top_rel)
{
	char pdir[PATH_MAX], r[PATH_MAX], made[PATH_MAX];
	char *args[] = {"alloc", "61", NULL};
	int efd = -1;
	pid_t pid;

	if (!tap_test_hooks()) {
		tap_skip("a parent removed while the root is made: needs -Dtest_hooks=true");
		return;
	}
	snprintf(pdir, sizeof(pdir), "%s/pause-mkdir", getenv("JOBCG_STATE_DIR"));
	mkdir(pdir, 0700);
	snprintf(r, sizeof(r), "%s/made/z/jobcg", top_rel);
	setenv("JOBCG_ROOT", r, 1);
	snprintf(made, sizeof(made), "%s/made", top);
	pid = kcli_start_paused(pdir, "root-mkdir-made", args, &efd);
	ok(kcli_wait_file(pdir, "root-mkdir-made.reached", 30000),
	   "an alloc below made/z/ stops once it has made made/");
	ok(rmdir(made) == 0, "  made/ removed under it, as another tree's teardown would");
	kcli_pause_go(pdir, "root-mkdir-made");
	is_int(kcli_finish(pid, efd, NULL), 0, "  the alloc makes its tree all the same");
	ok(kcli_exists("%s/made/z/jobcg/job_61", top), "  job 61 is in made/z/jobcg/");
	is_int(kcli(NULL, "release", "61", NULL), 0, "  release 61");
	is_int(kcli(NULL, "teardown", NULL), 0, "  teardown of that tree");
	ok(!kcli_exists("%s/made", top), "  made/ went with it (made again, and marked)");
}

/* The directories the mkdir backend made above a tree root go with the tree once empty; one it
 * found there stays, and so does one that still holds another tree. */
static void made_ancestors(const char *root)
{
	char top[PATH_MAX], top_rel[PATH_MAX], p[PATH_MAX];
	const char *env = getenv("JOBCG_ROOT");
	char *saved = strdup(env);

	snprintf(top, sizeof(top), "%s", root);
	*strrchr(top, '/') = '\0';
	snprintf(top_rel, sizeof(top_rel), "%.*s", (int)(strrchr(env, '/') - env), env);
	tree_at(top_rel, "made/x/jobcg", "a tree below made/x/, which did not exist");
	snprintf(p, sizeof(p), "%s/made/x", top);
	ok(getxattr(p, "trusted.jobcg.made", NULL, 0) > 0, "made/x/ is marked as jobcg's");
	tree_at(top_rel, "made/y/jobcg", "another below made/y/");
	snprintf(p, sizeof(p), "%s/made/x/jobcg", top_rel);
	setenv("JOBCG_ROOT", p, 1);
	is_int(kcli(NULL, "teardown", NULL), 0, "teardown of the tree in made/x/");
	ok(!kcli_exists("%s/made/x", top) && kcli_exists("%s/made/y/jobcg", top),
	   "  made/x/ went with it, made/ holds the other tree and stays");
	snprintf(p, sizeof(p), "%s/made/y/jobcg", top_rel);
	setenv("JOBCG_ROOT", p, 1);
	is_int(kcli(NULL, "teardown", NULL), 0, "teardown of the tree in made/y/");
	ok(!kcli_exists("%s/made", top), "  made/y/ and made/ went with it");
	ok(kcli_exists("%s", top), "  the test's own directory above them stays");
	snprintf(p, sizeof(p), "%s/found", top);
	mkdir(p, 0755);
	tree_at(top_rel, "found/jobcg", "a tree below found/, made beforehand");
	snprintf(p, sizeof(p), "%s/found/jobcg", top_rel);
	setenv("JOBCG_ROOT", p, 1);
	is_int(kcli(NULL, "teardown", NULL), 0, "teardown of that tree");
	ok(kcli_exists("%s/found", top) && !kcli_exists("%s/found/jobcg", top),
	   "  found/ stays: jobcg did not make it");
	snprintf(p, sizeof(p), "%s/found", top);
	rmdir(p);
	made_vanishes(top, top_rel);
	setenv("JOBCG_ROOT", saved, 1);
	free(saved);
}

int main(void)
{
	const char *root = kcli_setup("teardown", "jobcg");
	const char *state = getenv("JOBCG_STATE_DIR");
	char pins[PATH_MAX], p[PATH_MAX], dev[1][PATH_MAX], acct[PATH_MAX];
	char *out = NULL, *err = NULL;
	const char *confdir;
	bool have_pins;
	pid_t runner;
	int r, st;

	snprintf(pins, sizeof(pins), "/sys/fs/bpf/jobcg-test-teardown-%d", (int)getpid());
	confdir = ktest_gpu_conf(1, NULL, pins, dev);
	setenv("JOBCG_CONF_DIR", confdir, 1);
	snprintf(acct, sizeof(acct), "%s/acct.jsonl", state);

	is_int(kcli(NULL, "teardown", NULL), 0, "no tree yet: nothing to do");
	r = kcli(&out, "alloc", "1", "--gres", "gpu:1", NULL);
	is_int(r, 0, "job 1 with the GPU");
	free(out);
	/* Without device programs (no BPF here) the GPU job may fail: the rest still holds. */
	have_pins = entries(pins) > 0;
	if (!have_pins) {
		tap_diag("no pins under %s: the device program part is not checked", pins);
		is_int(kcli(NULL, "alloc", "1", NULL), 0, "job 1 without the GPU");
	}
	{
		char *args[] = {"run", "--job", "1", "--", "sleep", "1000", NULL};

		runner = kcli_start(args, NULL, NULL);
	}
	for (int i = 0; i < 500 && !kcli_exists("%s/job_1/step_0/user/task_0", root); i++)
		usleep(10000);
	ok(kcli_exists("%s/job_1/step_0/user/task_0", root), "a step runs in job 1");
	/* job 2 with a step whose jobcg run died */
	is_int(kcli(NULL, "alloc", "2", NULL), 0, "job 2");
	{
		struct jobcg_config *conf = NULL;
		struct jobcg_ctx *ctx = NULL;

		if (jobcg_config_load(confdir, NULL, 0, &conf) < 0 ||
		    jobcg_ctx_open(conf, 0, &ctx) < 0) {
			printf("Bail out! cannot open a context\n");
			return 1;
		}
		is_int(jobcg_step_create(ctx, 2, "0", 0, NULL), 0, "step 2.0");
		jobcg_ctx_free(ctx);
		jobcg_config_free(conf);
	}
	snprintf(p, sizeof(p), "%s/job_2/step_0", root);
	ok(setxattr(p, "trusted.jobcg.runner", "1:1", 3, 0) == 0, "2.0's runner made stale");

	{
		char *args[] = {"teardown", NULL};

		r = kcli_run(args, &out, &err);
	}
	ok(r == 1 && err && strstr(err, "2 jobs in the tree (1, 2)"),
	   "teardown refused while jobs live, naming them");
	ok(kcli_exists("%s/job_1/step_0", root) && kcli_exists("%s/job_2", root),
	   "  and nothing was removed");
	free(out);
	free(err);

	/* What the Slurm plugin keeps beside the lock goes with it. */
	snprintf(p, sizeof(p), "%s/cpu-topology", state);
	{
		FILE *f = fopen(p, "we");

		ok(f && fputs("jobcg-cpu-topology 1\n", f) >= 0 && fclose(f) == 0,
		   "a CPU topology cache beside the lock");
	}
	/* jobcg never writes into its lock file: a mark tells the old file from a new one. */
	snprintf(p, sizeof(p), "%s/jobcg.lock", state);
	{
		int fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);

		ok(fd >= 0 && write(fd, "old", 3) == 3 && close(fd) == 0,
		   "the lock file before the teardown, marked");
	}
	is_int(kcli(&out, "teardown", "--force", "--json", NULL), 0, "teardown --force");
	if (out)
		ktest_diag_lines("", out);
	ok(out && strstr(out, "\"jobs_removed\":2") && strstr(out, "\"steps_removed\":1") &&
	       strstr(out, "\"root_removed\":true"),
	   "two jobs and the stray step removed");
	if (have_pins)
		ok(out && strstr(out, "\"pins_removed\":true"),
		   "the device program's pins removed");
	free(out);
	ok(waitpid(runner, &st, 0) == runner, "the step's jobcg run ended");
	ok(!kcli_exists("%s", root), "the tree root is gone");
	if (have_pins)
		is_int(entries(pins), -1, "no pins left, nor their directory (BpfPinDir)");
	/* The step's run, ending after the teardown, takes the node lock once more: finding the
	 * file it waited on unlinked, it makes a new one (jobcg_ctx_lock()). */
	snprintf(p, sizeof(p), "%s/jobcg.lock", state);
	{
		struct stat sb;

		ok((stat(p, &sb) < 0 && errno == ENOENT) || (sb.st_size == 0),
		   "the lock file is gone (or made anew, empty, by a later command)");
	}
	snprintf(p, sizeof(p), "%s/cpu-topology", state);
	ok(access(p, F_OK) < 0 && errno == ENOENT, "and the CPU topology cache");
	{
		struct want w = {};

		is_int(jobcg_acctlog_read(acct, NULL, seen, &w), 0, "read the accounting log");
		is_int(
		    w.mask, 7,
		    "records: job 1 and job 2 cancelled, stray step 2.0 NODE_FAIL with its start");
	}
	is_int(kcli(&out, "teardown", NULL), 0, "teardown again: nothing to do");
	ok(out && strstr(out, "no tree at"), "  and says so");
	free(out);

	/* A directory that is not jobcg's makes a root suspect: refused unless forced. */
	is_int(kcli(NULL, "init", NULL), 0, "jobcg init makes the tree again");

	/* Never a tree the caller runs in: this test, then its jobcg, moved into the tree's
	 * system/ leaf, and back to where it was. */
	{
		char here[PATH_MAX] = "", procs[PATH_MAX * 2], line[PATH_MAX];
		char *args[] = {"teardown", "--force", NULL};
		FILE *f = fopen("/proc/self/cgroup", "re");

		while (f && fgets(line, sizeof(line), f))
			if (strncmp(line, "0::", 3) == 0)
				snprintf(here, sizeof(here), "%s%s", ktest_cgroup_mount(),
					 strcmp(line + 3, "/\n") == 0 ? "" : line + 3);
		if (f)
			fclose(f);
		here[strcspn(here, "\n")] = 0;
		snprintf(procs, sizeof(procs), "%s/system/cgroup.procs", root);
		f = fopen(procs, "we");
		ok(*here && f && fprintf(f, "%d\n", (int)getpid()) > 0 && fclose(f) == 0,
		   "this test moved into the tree's system/ leaf");
		r = kcli_run(args, NULL, &err);
		ok(r == 1 && err && strstr(err, "runs inside") && kcli_exists("%s", root),
		   "teardown --force refuses the tree its caller runs in, and removes nothing");
		free(err);
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", here);
		f = fopen(procs, "we");
		ok(f && fprintf(f, "%d\n", (int)getpid()) > 0 && fclose(f) == 0,
		   "and back where it was (%s)", here);
	}
	snprintf(p, sizeof(p), "%s/other", root);
	ok(mkdir(p, 0755) == 0, "a foreign directory in the root");
	{
		char *args[] = {"teardown", NULL};

		r = kcli_run(args, NULL, &err);
	}
	ok(r == 1 && err && strstr(err, "'other'"), "teardown refuses a root holding it");
	free(err);
	ok(kcli_exists("%s/other", root), "  and leaves it");
	is_int(kcli(NULL, "teardown", "--force", NULL), 0, "teardown --force removes it");
	ok(!kcli_exists("%s", root), "the tree root is gone");

	/* Reservations are jobcg's: named in the refusal with the jobs inside them, and a forced
	 * teardown removes them, a damaged one too. */
	if (have_pins) {
		char *args[] = {"teardown", NULL};

		is_int(kcli(NULL, "resv", "create", "r5", "--gres", "gpu:1", NULL), 0,
		       "reservation r5");
		r = kcli_run(args, NULL, &err);
		ok(r == 1 && err && strstr(err, "1 reservation in the tree (r5)") &&
		       !strstr(err, "not jobcg's"),
		   "teardown refused, naming reservation r5");
		free(err);
		is_int(kcli(NULL, "alloc", "30", "--reservation", "r5", NULL), 0, "job 30 in r5");
		snprintf(p, sizeof(p), "%s/resv_r5", root);
		ok(setxattr(p, "trusted.jobcg.mem", "12x", 3, 0) == 0, "r5's memory value damaged");
		r = kcli_run(args, NULL, &err);
		ok(r == 1 && err && strstr(err, "1 job (30) and 1 reservation (r5)"),
		   "teardown refused, naming job 30 and reservation r5");
		free(err);
		ok(kcli_exists("%s/resv_r5/job_30", root), "  and nothing was removed");
		is_int(kcli(&out, "teardown", "--force", "--json", NULL), 0, "teardown --force");
		if (!ok(out && strstr(out, "\"resv_removed\":1") &&
			    strstr(out, "\"jobs_removed\":1"),
			"its summary counts reservation r5 and job 30"))
			tap_diag("summary: %s", out ? out : "(none)");
		free(out);
		ok(!kcli_exists("%s", root), "the tree root is gone");
		is_int(kcli(NULL, "resv", "create", "r6", "--gres", "gpu:1", NULL), 0,
		       "reservation r6");
		is_int(kcli(&out, "teardown", "--force", NULL), 0, "teardown --force (text)");
		if (!ok(out && strstr(out, "0 job(s), 1 reservation(s) and 0 step(s)"),
			"the text summary counts reservation r6"))
			tap_diag("summary: %s", out ? out : "(none)");
		free(out);
		ok(!kcli_exists("%s", root), "the tree root is gone");
	}
	/* Forced, it ends the tree's processes as Slurm ends a job (KillWait): SIGTERM to all,
	 * a grace period, then SIGKILL. One that traps SIGTERM gets the time to finish; one that
	 * ignores it is killed when the grace is over. */
	{
		char termed[PATH_MAX], ready[2][PATH_MAX], script[2][PATH_MAX * 2];
		char *trapper[] = {"run", "--job", "50", "--", "sh", "-c", script[0], NULL};
		char *ignorer[] = {"run", "--job", "51", "--", "sh", "-c", script[1], NULL};
		pid_t runners[2];
		uint64_t t0, ms;

		snprintf(termed, sizeof(termed), "%s/termed", ktest_tmpdir());
		for (int i = 0; i < 2; i++)
			snprintf(ready[i], sizeof(ready[i]), "%s/ready%d", ktest_tmpdir(), i);
		snprintf(script[0], sizeof(script[0]),
			 "trap 'sleep 0.3; echo done > %s; exit 0' TERM; touch %s; "
			 "while :; do sleep 0.05; done",
			 termed, ready[0]);
		snprintf(script[1], sizeof(script[1]),
			 "trap '' TERM; touch %s; while :; do sleep 0.05; done", ready[1]);
		is_int(kcli(NULL, "teardown", "--grace", "100", NULL), 2,
		       "--grace without --force: usage error");
		is_int(kcli(NULL, "alloc", "50", NULL), 0, "job 50");
		is_int(kcli(NULL, "alloc", "51", NULL), 0, "job 51");
		runners[0] = kcli_start(trapper, NULL, NULL);
		runners[1] = kcli_start(ignorer, NULL, NULL);
		for (int i = 0;
		     i < 500 && (access(ready[0], F_OK) < 0 || access(ready[1], F_OK) < 0); i++)
			usleep(10000);
		ok(access(ready[0], F_OK) == 0 && access(ready[1], F_OK) == 0,
		   "a task trapping SIGTERM (job 50) and one ignoring it (job 51) run");
		t0 = now_ms();
		is_int(kcli(NULL, "teardown", "--force", "--grace", "1500", NULL), 0,
		       "teardown --force --grace 1500");
		ms = now_ms() - t0;
		ok(access(termed, F_OK) == 0,
		   "the trapping task got SIGTERM and the time to finish its trap");
		ok(ms >= 1400 && ms < 10000,
		   "the one ignoring it kept the teardown for the grace period, then was killed "
		   "(%llu ms)",
		   (unsigned long long)ms);
		ok(!kcli_exists("%s", root), "the tree root is gone");
		for (int i = 0; i < 2; i++)
			ok(waitpid(runners[i], &st, 0) == runners[i], "run %d ended", i);
	}
	made_ancestors(root);
	rmdir(pins);
	return tap_done();
}
