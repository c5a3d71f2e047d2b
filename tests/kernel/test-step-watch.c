/*
 * Kernel test: what replaces jobcg_spank.so's epilog. A job removed only while nothing uses it
 * (JOBCG_JOB_REMOVE_IF_UNUSED) and without a job record (NO_RECORD); a step whose runner died
 * ended as lost (jobcg_step_reap()); and `jobcg step-watch`, which waits for a runner and does
 * that when it dies with its step still there, and nothing when it ended its step.
 */
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "jobcg/acctlog.h"
#include "jobcg/config.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct count {
	const char *job;
	unsigned job_records, step_records, node_fail;
};

static int count_records(const struct jobcg_acct_record *r, void *u)
{
	struct count *c = u;

	if (strcmp(r->job_id, c->job) != 0)
		return 0;
	if (r->kind == JOBCG_ACCT_JOB)
		c->job_records++;
	else {
		c->step_records++;
		c->node_fail += r->state == JOBCG_ACCT_NODE_FAIL;
	}
	return 0;
}

static struct count records(const struct jobcg_config *conf, const char *job)
{
	struct count c = {.job = job};
	char *path = NULL;

	if (jobcg_acctlog_path(conf, &path) == 0)
		(void)jobcg_acctlog_read(path, NULL, count_records, &c);
	free(path);
	return c;
}

/* Is @pid gone (or a zombie nobody reaped yet)? Waits up to @ms for init to reap it. */
static bool gone(pid_t pid, unsigned ms)
{
	for (unsigned i = 0; i <= ms / 50; i++) {
		char p[64], *s = NULL;
		FILE *f;

		if (kill(pid, 0) < 0 && errno == ESRCH)
			return true;
		snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
		f = fopen(p, "re");
		if (f) {
			char buf[512] = "";

			(void)!fgets(buf, sizeof(buf), f);
			fclose(f);
			s = strrchr(buf, ')');
			if (s && s[1] == ' ' && s[2] == 'Z')
				return true;
		}
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000}, NULL);
	}
	return false;
}

/*
 * A runner in a child: it makes step @job.0 (creating the job first when @make_job), so the
 * step records the child as its runner, and starts `sleep` in task 0 and, in task 1, a shell
 * that leaves a setsid escapee beside itself. With @end_it it ends its step itself once told
 * (ret->go closed) and exits; otherwise it waits to be killed. The parent gets the step's
 * processes (ret->procs), read from its cgroups.
 */
struct runner {
	pid_t pid;
	pid_t procs[8];
	size_t nprocs;
	int go;
};

/* The pids in @dir's cgroup.procs, appended to @r. */
static void add_procs(struct runner *r, const char *dir)
{
	char p[PATH_MAX];
	int pid;
	FILE *f;

	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	f = fopen(p, "re");
	while (f && r->nprocs < 8 && fscanf(f, "%d", &pid) == 1)
		r->procs[r->nprocs++] = pid;
	if (f)
		fclose(f);
}

static int runner_start(const char *root, uint32_t job, bool make_job, bool end_it,
			struct runner *ret)
{
	int ready[2], go[2];
	char t0[PATH_MAX], t1[PATH_MAX], c;
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct jobcg_config *conf = NULL;
		struct jobcg_ctx *ctx = NULL;
		char *sleep_argv[] = {"sleep", "1000", NULL};
		char *esc_argv[] = {
		    "sh", "-c", "setsid sleep 1001 < /dev/null > /dev/null 2>&1 & exec sleep 1002",
		    NULL};
		pid_t task, sh;

		close(ready[0]);
		close(go[1]);
		/* A context of its own: the parent's lock descriptor is not to be shared. */
		if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 ||
		    jobcg_ctx_open(conf, 0, &ctx) < 0 ||
		    (make_job && jobcg_job_create(ctx, job, NULL, JOBCG_JOB_SLURM, NULL) < 0) ||
		    /* as the Slurm plugin does: Slurm's step ids, in any order */
		    jobcg_step_create(ctx, job, "0", JOBCG_STEP_ID_SCHEDULED, NULL) < 0 ||
		    jobcg_task_spawn(ctx, job, "0", 0, sleep_argv, NULL, &task) < 0 ||
		    jobcg_task_spawn(ctx, job, "0", 1, esc_argv, NULL, &sh) < 0)
			_exit(1);
		(void)!write(ready[1], "x", 1);
		if (end_it) {
			(void)!read(go[0], &c, 1);
			_exit(jobcg_step_remove(ctx, job, "0", 0) < 0 ? 2 : 0);
		}
		for (;;)
			pause();
	}
	close(ready[1]);
	close(go[0]);
	*ret = (struct runner){.pid = pid, .go = go[1]};
	if (read(ready[0], &c, 1) != 1) {
		close(ready[0]);
		return -EIO;
	}
	close(ready[0]);
	/* The shell's escapee: there once task 1 holds two processes. */
	snprintf(t0, sizeof(t0), "%s/job_%u/step_0/user/task_0", root, job);
	snprintf(t1, sizeof(t1), "%s/job_%u/step_0/user/task_1", root, job);
	for (int i = 0; i < 200; i++) {
		ret->nprocs = 0;
		add_procs(ret, t1);
		if (ret->nprocs >= 2)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000}, NULL);
	}
	add_procs(ret, t0);
	return ret->nprocs == 3 ? 0 : -ESRCH;
}

/* Are all of @r's processes gone within @ms? */
static bool all_gone(const struct runner *r, unsigned ms)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (!gone(r->procs[i], ms))
			return false;
	return true;
}

static void kill_left(const struct runner *r)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (!gone(r->procs[i], 0))
			kill(r->procs[i], SIGKILL);
}

static pid_t watch_start(const char *sdir, const char *target, const char *runner)
{
	char *args[] = {"step-watch",	"--step-dir",	(char *)sdir, "--remove-idle-job",
			(char *)target, (char *)runner, NULL};

	return kcli_start(args, NULL, NULL);
}

/* The exit status of @pid within @ms, or -1 when it is still running then. */
static int exit_within(pid_t pid, unsigned ms)
{
	int st = 0;

	for (unsigned i = 0; i <= ms / 20; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000}, NULL);
	}
	return -1;
}

static char *runner_of(const char *root, uint32_t job)
{
	static char v[64];
	char p[PATH_MAX];
	ssize_t n;

	snprintf(p, sizeof(p), "%s/job_%u/step_0", root, job);
	n = getxattr(p, "trusted.jobcg.runner", v, sizeof(v) - 1);
	v[n > 0 ? n : 0] = 0;
	return v;
}

static void test_remove_if_unused(struct jobcg_ctx *ctx, const struct jobcg_config *conf,
				  const char *root)
{
	struct count c;

	is_int(jobcg_job_create(ctx, 31, NULL, 0, NULL), 0, "job 31");
	is_int(jobcg_step_create(ctx, 31, "0", 0, NULL), 0, "step 31.0");
	is_int(jobcg_job_remove(ctx, 31, JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD),
	       -EBUSY, "IF_UNUSED: a job with a step is not removed (-EBUSY)");
	ok(kcli_exists("%s/job_31/step_0", root), "job 31 and its step are untouched");
	is_int(jobcg_step_remove(ctx, 31, "0", 0), 0, "its last step removed");
	is_int(jobcg_job_remove(ctx, 31, JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD),
	       0, "IF_UNUSED: the job without steps is removed");
	ok(!kcli_exists("%s/job_31", root), "job_31 is gone");
	is_int(jobcg_step_create(ctx, 31, "1", 0, NULL), -ENOENT,
	       "a step begun after the removal finds no job (the plugin then makes it again)");
	is_int(jobcg_job_remove(ctx, 31, JOBCG_JOB_REMOVE_IF_UNUSED), -ENOENT,
	       "IF_UNUSED on a job that is gone: -ENOENT");
	c = records(conf, "31");
	is_int(c.job_records, 0, "NO_RECORD: no job record of job 31");
	/* The same removal with a record, so that the count above can tell. */
	is_int(jobcg_job_create(ctx, 32, NULL, 0, NULL), 0, "job 32");
	is_int(jobcg_job_remove(ctx, 32, JOBCG_JOB_REMOVE_IF_UNUSED), 0,
	       "job 32 removed IF_UNUSED, with its record");
	c = records(conf, "32");
	is_int(c.job_records, 1, "without NO_RECORD the job has its record");
}

static void test_reap_and_watch(struct jobcg_ctx *ctx, const struct jobcg_config *conf,
				const char *root)
{
	struct runner rn = {};
	char sdir[PATH_MAX], runner[64];
	bool reaped = true;
	struct count c;
	pid_t w;
	uint64_t t0;
	int st;

	is_int(runner_start(root, 33, true, false, &rn), 0,
	       "a runner makes job 33 and step 33.0: a task, a shell and its setsid escapee");
	snprintf(runner, sizeof(runner), "%s", runner_of(root, 33));
	snprintf(sdir, sizeof(sdir), "%s/job_33/step_0", root);
	ok(strtol(runner, NULL, 10) == rn.pid, "the step records the runner (%s)", runner);
	is_int(jobcg_runner_wait(runner, 200), -ETIMEDOUT, "runner_wait: a live runner times out");
	is_int(jobcg_runner_wait("12:x", 0), -EINVAL, "runner_wait: a malformed runner is refused");
	is_int(jobcg_runner_wait("1:1", 0), 0,
	       "runner_wait: a pid whose start time differs is gone already");
	is_int(jobcg_step_reap(ctx, 33, "0", runner, &reaped), 0, "reap with the runner alive");
	ok(!reaped && kcli_exists("%s", sdir) && !gone(rn.procs[0], 0),
	   "a step whose runner lives is left alone");
	is_int(jobcg_step_reap(ctx, 33, "0", "1:1", &reaped), 0, "reap naming another runner");
	ok(!reaped && kcli_exists("%s", sdir), "a step of another runner is left alone");

	w = watch_start(sdir, "33.0", runner);
	ok(w > 0 && exit_within(w, 300) == -1, "jobcg step-watch waits while the runner lives");
	t0 = mono_ms();
	/* Reaped only once the watcher is done: a runner whose parent has not reaped it yet (a
	 * zombie) is dead all the same (slurmstepd's parent, init, may be slower than the
	 * watcher). */
	kill(rn.pid, SIGKILL);
	st = exit_within(w, 10000);
	is_int(st, 0, "with the runner killed, step-watch ends the step and exits 0");
	waitpid(rn.pid, NULL, 0);
	tap_diag("step-watch exited %llu ms after the runner's kill",
		 (unsigned long long)(mono_ms() - t0));
	ok(all_gone(&rn, 5000), "the step's processes are killed, its setsid escapee too");
	ok(!kcli_exists("%s", sdir), "the step is removed");
	ok(!kcli_exists("%s/job_33", root), "--remove-idle-job: the job, left without steps, too");
	c = records(conf, "33");
	ok(c.step_records == 1 && c.node_fail == 1 && c.job_records == 0,
	   "one record of 33.0, NODE_FAIL, and no job record (%u steps, %u NODE_FAIL, %u jobs)",
	   c.step_records, c.node_fail, c.job_records);
	if (w > 0 && st == -1) {
		kill(w, SIGKILL);
		waitpid(w, NULL, 0);
	}
	kill_left(&rn);
	close(rn.go);

	/* Another step keeps the job. */
	is_int(jobcg_job_create(ctx, 35, NULL, 0, NULL), 0, "job 35");
	is_int(jobcg_step_create(ctx, 35, "1", 0, NULL), 0, "step 35.1 (runner: this test)");
	is_int(runner_start(root, 35, false, false, &rn), 0, "another runner makes step 35.0");
	snprintf(runner, sizeof(runner), "%s", runner_of(root, 35));
	kill(rn.pid, SIGKILL);
	ok(gone(rn.pid, 5000), "the runner of 35.0 is a zombie, not reaped");
	is_int(jobcg_step_reap(ctx, 35, "0", runner, &reaped), 0, "reap 35.0, its runner dead");
	waitpid(rn.pid, &st, 0);
	ok(reaped && !kcli_exists("%s/job_35/step_0", root) && all_gone(&rn, 5000),
	   "35.0 is ended: its task killed, its directory removed");
	is_int(jobcg_job_remove(ctx, 35, JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD),
	       -EBUSY, "job 35 stays: step 35.1 is in it");
	is_int(jobcg_step_reap(ctx, 35, "0", runner, &reaped), 0, "reaping again");
	ok(!reaped, "finds nothing to do");
	kill_left(&rn);
	close(rn.go);
	is_int(jobcg_job_remove(ctx, 35, 0), 0, "remove job 35");
}

static void test_watch_normal_end(struct jobcg_ctx *ctx, const struct jobcg_config *conf,
				  const char *root)
{
	struct runner rn = {};
	char sdir[PATH_MAX], runner[64];
	uint64_t t0;
	struct count c;
	pid_t w;
	int st;

	is_int(runner_start(root, 34, true, true, &rn), 0, "a runner that ends its own step 34.0");
	/* Another step keeps the job: the watcher removes a job left with no step. */
	is_int(jobcg_step_create(ctx, 34, "1", 0, NULL), 0, "step 34.1 beside it");
	snprintf(runner, sizeof(runner), "%s", runner_of(root, 34));
	snprintf(sdir, sizeof(sdir), "%s/job_34/step_0", root);
	w = watch_start(sdir, "34.0", runner);
	ok(w > 0 && exit_within(w, 300) == -1, "step-watch waits");
	t0 = mono_ms();
	close(rn.go); /* go: the runner removes its step and exits */
	is_int(exit_within(rn.pid, 10000), 0, "the runner ended its step and exited");
	st = exit_within(w, 5000);
	is_int(st, 0, "step-watch exits 0 once the runner is gone");
	ok(mono_ms() - t0 < 3000, "promptly (%llu ms after the runner was told to end)",
	   (unsigned long long)(mono_ms() - t0));
	ok(kcli_exists("%s/job_34", root), "and does nothing: the job stays (step 34.1 is in it)");
	c = records(conf, "34");
	is_int(c.node_fail, 0, "no NODE_FAIL record");
	if (w > 0 && st == -1) {
		kill(w, SIGKILL);
		waitpid(w, NULL, 0);
	}
	(void)all_gone(&rn, 2000);
	kill_left(&rn);
	is_int(jobcg_job_remove(ctx, 34, 0), 0, "remove job 34");
}

static bool job_has_slurm_mark(const char *root, uint32_t job)
{
	char p[PATH_MAX], v[8];

	snprintf(p, sizeof(p), "%s/job_%u", root, job);
	return getxattr(p, "trusted.jobcg.slurm", v, sizeof(v)) == 1 && v[0] == '1';
}

/* @pid as a runner: "PID:STARTTIME" (field 22 of its stat), as a step records it. */
static char *runner_id(pid_t pid)
{
	static char v[64];
	char p[64], buf[1024] = "", *s;
	unsigned long long start = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	if ((f = fopen(p, "re"))) {
		(void)!fgets(buf, sizeof(buf), f);
		fclose(f);
	}
	s = strrchr(buf, ')');
	for (int i = 2; s && i < 22; i++)
		s = strchr(s + 1, ' ');
	if (s)
		start = strtoull(s + 1, NULL, 10);
	snprintf(v, sizeof(v), "%d:%llu", (int)pid, start);
	return v;
}

/*
 * A slurmstepd killed at the wrong moment, its watcher started first as the plugin does: a
 * child that makes job @job as the plugin does (JOBCG_JOB_SLURM) and then, with @step_too,
 * step 0 and removes it again (the last step's end, the job's removal to come), and is killed
 * there; with @half_made it is killed in the middle of making step 0. Returns whether the watcher
 * exited 0 within 10 s of the kill.
 */
static bool killed_between(const char *root, uint32_t job, bool step_too, bool half_made)
{
	char sdir[PATH_MAX], target[32], runner[64], c;
	int ready[2], st = -1;
	pid_t pid, w;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return false;
	pid = fork();
	if (pid == 0) {
		struct jobcg_config *conf = NULL;
		struct jobcg_ctx *ctx = NULL;

		if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 ||
		    jobcg_ctx_open(conf, 0, &ctx) < 0 ||
		    jobcg_job_create(ctx, job, NULL, JOBCG_JOB_SLURM, NULL) < 0)
			_exit(1);
		/* Killed half way through the step's creation (a build with test hooks). */
		if (half_made)
			setenv("JOBCG_TEST_CRASH", "step-create-after-mkdir", 1);
		if ((step_too || half_made) && jobcg_step_create(ctx, job, "0", 0, NULL) < 0)
			_exit(1);
		if (step_too && jobcg_step_remove(ctx, job, "0", 0) < 0)
			_exit(1);
		(void)!write(ready[1], "x", 1);
		for (;;)
			pause();
	}
	close(ready[1]);
	snprintf(runner, sizeof(runner), "%s", runner_id(pid));
	snprintf(sdir, sizeof(sdir), "%s/job_%u/step_0", root, job);
	snprintf(target, sizeof(target), "%u.0", job);
	w = watch_start(sdir, target, runner);
	if (read(ready[0], &c, 1) != 1 && !half_made)
		tap_diag("the child making job %u failed", job);
	close(ready[0]);
	ok(kcli_exists("%s/job_%u", root, job), "job %u made, %s", job,
	   half_made  ? "its step half made"
	   : step_too ? "its step made and removed"
		      : "no step yet");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	st = exit_within(w, 10000);
	if (st == -1) {
		kill(w, SIGKILL);
		waitpid(w, NULL, 0);
	}
	return st == 0;
}

static void test_watch_windows(struct jobcg_ctx *ctx, const struct jobcg_config *conf,
			       const char *root)
{
	struct count c;

	/* The runner's last step removed, it killed before the job's removal. */
	ok(killed_between(root, 37, true, false), "step-watch exits 0 after the kill");
	ok(!kcli_exists("%s/job_37", root),
	   "a runner killed between its last step's removal and the job's: the watcher removes "
	   "the job");
	c = records(conf, "37");
	is_int(c.job_records, 0, "and writes no job record of it (the plugin's steps have theirs)");
	/* The job made, the runner killed before its step (the watcher starts before both). */
	ok(killed_between(root, 38, false, false), "step-watch exits 0 after the kill");
	ok(!kcli_exists("%s/job_38", root),
	   "a runner killed after making the job, before its step: the watcher removes the job");
	/* A build with test hooks: killed in the middle of the step's creation. */
	if (tap_test_hooks()) {
		ok(killed_between(root, 41, false, true), "step-watch exits 0 after the kill");
		ok(!kcli_exists("%s/job_41", root),
		   "a runner killed while making its step: the watcher removes the half-made "
		   "step and the job");
	} else {
		tap_skip("a runner killed while making its step: a build without test hooks");
	}
}

/* The plugin's jobs are marked (JOBCG_JOB_SLURM); it and its watcher remove only those. */
static void test_slurm_mark(struct jobcg_ctx *ctx, const char *root)
{
	struct runner rn = {};
	char sdir[PATH_MAX], runner[64];
	pid_t w;

	/* An admin's allocation (`jobcg alloc`) a Slurm step's runner died in. */
	is_int(jobcg_job_create(ctx, 39, NULL, 0, NULL), 0, "job 39, made as 'jobcg alloc' does");
	ok(!job_has_slurm_mark(root, 39), "it has no trusted.jobcg.slurm");
	is_int(runner_start(root, 39, false, false, &rn), 0, "a runner makes step 39.0 in it");
	snprintf(runner, sizeof(runner), "%s", runner_of(root, 39));
	snprintf(sdir, sizeof(sdir), "%s/job_39/step_0", root);
	w = watch_start(sdir, "39.0", runner);
	kill(rn.pid, SIGKILL);
	is_int(exit_within(w, 10000), 0, "its runner killed, step-watch --remove-idle-job exits 0");
	waitpid(rn.pid, NULL, 0);
	ok(!kcli_exists("%s", sdir) && all_gone(&rn, 5000), "the step is ended");
	ok(kcli_exists("%s/job_39", root), "but the job, not the plugin's, is left alone");
	is_int(jobcg_job_remove(ctx, 39,
				JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD |
				    JOBCG_JOB_REMOVE_IF_SLURM),
	       -EPERM, "IF_SLURM: such a job is refused (-EPERM)");
	ok(strstr(jobcg_last_error()->message, "jobcg release 39") != NULL,
	   "naming 'jobcg release 39' (%s)", jobcg_last_error()->message);
	ok(kcli_exists("%s/job_39", root), "and untouched");
	kill_left(&rn);
	close(rn.go);
	is_int(jobcg_job_remove(ctx, 39, 0), 0, "remove job 39");
	is_int(jobcg_job_create(ctx, 40, NULL, JOBCG_JOB_SLURM, NULL), 0,
	       "job 40, made as the plugin makes its jobs");
	ok(job_has_slurm_mark(root, 40), "it has trusted.jobcg.slurm");
	is_int(jobcg_job_remove(ctx, 40, JOBCG_JOB_REMOVE_IF_SLURM | JOBCG_JOB_REMOVE_NO_RECORD), 0,
	       "IF_SLURM removes it");
}

/*
 * What jobcg_spank.so does per step, in two processes at once on one job: make the job if it is
 * not there, create a step (again when the job was removed meanwhile), end the step and remove
 * the job if nothing uses it. The other's removal must never take a step of this one's: each
 * finds its step in place until it ends it itself. Returns the rounds that went wrong.
 */
static int step_rounds(const char *root, const char *sid, unsigned rounds)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	char sdir[PATH_MAX];
	int bad = 0;

	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0)
		return (int)rounds;
	snprintf(sdir, sizeof(sdir), "%s/job_36/step_%s", root, sid);
	for (unsigned i = 0; i < rounds; i++) {
		int r, tries = 0;

		do {
			r = jobcg_job_create(ctx, 36, NULL, 0, NULL);
			if (r == 0 || r == -EEXIST)
				/* the plugin's flag: Slurm's step ids, reused here round after
				 * round while the other process keeps the job */
				r = jobcg_step_create(ctx, 36, sid, JOBCG_STEP_ID_SCHEDULED, NULL);
		} while ((r == -ENOENT || r == -ESHUTDOWN) && ++tries < 100);
		if (r < 0) {
			tap_diag("%s: round %u: creating the step: %s", sid, i,
				 jobcg_error_message(r));
			bad++;
			continue;
		}
		if (access(sdir, F_OK) < 0 || jobcg_step_remove(ctx, 36, sid, 0) < 0) {
			tap_diag("%s: round %u: the step was gone before its end", sid, i);
			bad++;
		}
		r = jobcg_job_remove(ctx, 36,
				     JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD);
		if (r < 0 && r != -EBUSY && r != -ENOENT) {
			tap_diag("%s: round %u: removing the job: %s", sid, i,
				 jobcg_error_message(r));
			bad++;
		}
	}
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return bad;
}

static void test_concurrent(const char *root)
{
	pid_t pid = fork();
	int st = 0, bad;

	if (pid == 0)
		_exit(step_rounds(root, "1", 150) > 0);
	bad = step_rounds(root, "0", 150);
	waitpid(pid, &st, 0);
	is_int(bad, 0, "150 rounds of step, end, job removal: no step of one lost to the other's");
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nor the other's (150 rounds beside it)");
	ok(!kcli_exists("%s/job_36", root), "the last to end removed the job");
}

/* An error in gres.conf, made after the step began: the watcher, which only ends steps and
 * jobs, still ends the step of a dead runner and removes its job. */
static void test_watch_broken_gres(const char *root)
{
	struct runner rn = {};
	char sdir[PATH_MAX], runner[64], dir[PATH_MAX], path[PATH_MAX + 16];
	FILE *f;
	pid_t w;

	is_int(runner_start(root, 44, true, false, &rn), 0, "a runner makes job 44 and step 44.0");
	snprintf(runner, sizeof(runner), "%s", runner_of(root, 44));
	snprintf(sdir, sizeof(sdir), "%s/job_44/step_0", root);
	snprintf(dir, sizeof(dir), "%s/broken-conf", ktest_tmpdir());
	snprintf(path, sizeof(path), "%s/gres.conf", dir);
	if (mkdir(dir, 0755) == 0 && (f = fopen(path, "we"))) {
		fputs("Name=gpu Count=many\n", f);
		fclose(f);
	}
	setenv("JOBCG_CONF_DIR", dir, 1);
	w = watch_start(sdir, "44.0", runner);
	unsetenv("JOBCG_CONF_DIR");
	ok(w > 0 && exit_within(w, 300) == -1, "with an error in gres.conf, step-watch waits");
	kill(rn.pid, SIGKILL);
	is_int(exit_within(w, 10000), 0, "its runner killed, step-watch exits 0");
	waitpid(rn.pid, NULL, 0);
	ok(all_gone(&rn, 5000), "the step's processes are killed");
	ok(!kcli_exists("%s", sdir), "the step is removed");
	ok(!kcli_exists("%s/job_44", root), "and its job");
	kill_left(&rn);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const char *root = kcli_setup("step-watch", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;

	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0 ||
	    jobcg_ctx_ensure_tree(ctx) < 0) {
		printf("Bail out! cannot open a context\n");
		return 1;
	}
	if (!jobcg_ctx_sysinfo(ctx)->xattr.supported) {
		tap_plan_skip_all("no trusted.* xattrs on cgroupfs: steps record no runner");
		return 77;
	}
	test_remove_if_unused(ctx, conf, root);
	test_reap_and_watch(ctx, conf, root);
	test_watch_normal_end(ctx, conf, root);
	test_slurm_mark(ctx, root);
	test_watch_windows(ctx, conf, root);
	test_concurrent(root);
	test_watch_broken_gres(root);
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
