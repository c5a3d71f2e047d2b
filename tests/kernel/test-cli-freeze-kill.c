/* Kernel test: freeze/thaw wait for cgroup.events and stop the processes; kill empties a step
 * whose processes trap SIGTERM; the runner and the job's directories behave afterwards.
 * With the argument "lock-file" (a -Dtest_hooks=true build), all of it again with the job's
 * freeze lock taken as on a kernel without cgroup.kill (before 5.14): on a file of the state
 * directory; kills by pid, and signals by kill() as without pidfds (before 5.3). */
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>

#include "kcli.h"

/* The job's freeze lock is <state dir>/locks/job_<id> (JOBCG_TEST_FLAGS=job-lock-file). */
static bool lock_file;

static void msleep(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The tasks append to a file: its size only grows while they run. */
static long read_long(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* @dir/@name's text (at most @size - 1 bytes; "" when it cannot be read). */
static void read_in(const char *dir, const char *name, char *buf, size_t size)
{
	char p[PATH_MAX + 64];
	FILE *f;

	buf[0] = '\0';
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "re");
	if (!f)
		return;
	buf[fread(buf, 1, size - 1, f)] = '\0';
	fclose(f);
}

static bool events_has(const char *dir, const char *line)
{
	char buf[512];

	read_in(dir, "cgroup.events", buf, sizeof(buf));
	return strstr(buf, line) != NULL;
}

static bool file_is(const char *dir, const char *name, const char *want)
{
	char buf[64];

	read_in(dir, name, buf, sizeof(buf));
	buf[strcspn(buf, "\n")] = '\0';
	return strcmp(buf, want) == 0;
}

/*
 * A freeze that does not complete within --timeout fails and is undone; --timeout 0 asks and
 * does not wait. A task stops for the freezer only when it next runs: the job's tasks are
 * SCHED_IDLE and a spinning process of ours at normal priority holds every CPU meanwhile, so
 * they wait far longer than 1 ms for their turn.
 */
static void freeze_timeout(const char *root)
{
	char job[PATH_MAX], last[PATH_MAX + 32], *err = NULL;
	char *busy[] = {"run",	"--job", "6", "--ntasks", "4",	"--",
			"chrt", "-i",	 "0", "sh",	  "-c", "while :; do :; done",
			NULL};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	pid_t hogs[64];
	int st = 0, i, rc = 0, tries, nhogs = 0;
	pid_t runner;

	snprintf(job, sizeof(job), "%s/job_6", root);
	is_int(kcli(NULL, "alloc", "6", NULL), 0, "alloc 6");
	runner = kcli_start(busy, NULL, NULL);
	/* Every task started: a freeze waits for a launch under way (and one of 1 ms fails on
	 * it), and a `kill --timeout 0` would miss a task started after it. */
	snprintf(last, sizeof(last), "%s/step_0/user/task_3", job);
	for (i = 0; i < 1000 && !events_has(last, "populated 1"); i++)
		msleep(10);
	msleep(200); /* and spinning */
	for (; nhogs < (ncpu > 0 && ncpu < 32 ? 2 * ncpu : 8); nhogs++) {
		if ((hogs[nhogs] = fork()) == 0)
			for (;;)
				;
		if (hogs[nhogs] < 0)
			break;
	}
	msleep(100);
	for (tries = 0; tries < 20; tries++) {
		char *args[] = {"freeze", "--timeout", "1", "6", NULL};

		free(err);
		rc = kcli_run(args, NULL, &err);
		if (rc != 0)
			break;
		kcli(NULL, "thaw", "6", NULL); /* in time: again */
	}
	tap_diag("freeze --timeout 1: %d in time before one missed it", tries);
	for (i = 0; i < nhogs; i++) {
		kill(hogs[i], SIGKILL);
		waitpid(hogs[i], NULL, 0);
	}
	if (rc == 0)
		tap_skip("every freeze completed within 1 ms here: none to undo");
	else {
		ok(rc == 1 && err && strstr(err, "not frozen within 1 ms: thawed again"),
		   "freeze --timeout 1 that did not complete fails and says it was undone");
		ok(file_is(job, "cgroup.freeze", "0"), "  the job's cgroup.freeze is 0 again");
		for (i = 0; i < 300 && !events_has(job, "frozen 0"); i++)
			msleep(10);
		ok(events_has(job, "frozen 0"), "  and the job is not frozen");
	}
	free(err);
	err = NULL;

	is_int(kcli(NULL, "freeze", "--timeout", "0", "6", NULL), 0,
	       "freeze --timeout 0 asks and succeeds without waiting");
	ok(file_is(job, "cgroup.freeze", "1"), "  cgroup.freeze is 1");
	for (i = 0; i < 500 && !events_has(job, "frozen 1"); i++)
		msleep(10);
	ok(events_has(job, "frozen 1"), "  and the job freezes");
	is_int(kcli(NULL, "thaw", "--timeout", "0", "6", NULL), 0, "thaw --timeout 0");
	for (i = 0; i < 500 && !events_has(job, "frozen 0"); i++)
		msleep(10);
	ok(events_has(job, "frozen 0"), "  the job thaws");
	is_int(kcli(NULL, "kill", "--timeout", "0", "6", NULL), 0,
	       "kill --timeout 0 sends the kill without waiting");
	while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
		;
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 128 + SIGKILL, "  its runner exits 137");
	is_int(kcli(NULL, "release", "6", NULL), 0, "release 6");
}

/* Step 1 of job 5 dies of a SIGTERM sent by someone else: FAILED; step 2 of one `jobcg signal`
 * sent: CANCELLED. */
static void signal_outcomes(const char *root)
{
	const char *who[] = {"someone else's kill", "jobcg signal -s TERM"};
	char *out = NULL, step[PATH_MAX], name[16];
	int st, i;
	pid_t runner;

	for (int k = 0; k < 2; k++) {
		char *args[] = {"run", "--job", "5", "--", "sleep", "1000", NULL};
		long pid = 0;

		runner = kcli_start(args, NULL, NULL);
		snprintf(name, sizeof(name), "5.%d", k + 1);
		snprintf(step, sizeof(step), "%s/job_5/step_%d", root, k + 1);
		for (i = 0; i < 500 && !events_has(step, "populated 1"); i++)
			msleep(10);
		if (k == 0) {
			if (kcli(&out, "pids", name, NULL) == 0 && out)
				pid = strtol(out, NULL, 10);
			ok(pid > 0 && kill((pid_t)pid, SIGTERM) == 0, "%s: SIGTERM to its task",
			   who[k]);
			free(out);
			out = NULL;
		} else {
			is_int(kcli(NULL, "signal", "-s", "TERM", name, NULL), 0,
			       "jobcg signal -s TERM");
		}
		while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
			;
		kcli(&out, "acct", "--job", "5", NULL);
		/* the step's line: "5.N" then its state (JOBID STATE EXIT ...) */
		{
			char want[64];
			const char *at;

			snprintf(want, sizeof(want), "\n%-16s %s ", name,
				 k ? "CANCELLED" : "FAILED");
			at = out ? strstr(out, want) : NULL;
			ok(at != NULL, "%s: step %s records %s", who[k], name,
			   k ? "CANCELLED" : "FAILED");
			if (!at)
				tap_diag("acct: %s", out ? out : "(none)");
		}
		free(out);
		out = NULL;
	}
}

/*
 * A step into a frozen job is refused at once. Were it made, its first task would freeze
 * before its exec and `jobcg run` wait for that exec uninterruptibly (vfork) until a thaw:
 * after 5 s the test thaws the job itself to see the run end.
 */
static void frozen_refused(const char *root)
{
	char *args[] = {"run", "--job", "8", "--step", "3", "--", "true", NULL};
	char *err = NULL;
	int efd = -1, st = 0, i;
	pid_t pid, w = 0;

	is_int(kcli(NULL, "alloc", "8", NULL), 0, "alloc 8");
	is_int(kcli(NULL, "freeze", "8", NULL), 0, "freeze the idle job 8");
	pid = kcli_start(args, NULL, &efd);
	for (i = 0; i < 500 && (w = waitpid(pid, &st, WNOHANG)) == 0; i++)
		msleep(10);
	ok(w == pid, "run --job 8 into the frozen job returns without a thaw");
	if (w != pid)
		(void)kcli(NULL, "thaw", "8", NULL);
	err = kcli_slurp(efd);
	close(efd);
	if (w != pid)
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 1, "it fails (exit 1)");
	ok(err && strstr(err, "job 8 is frozen: thaw it first"), "saying so: %s", err ? err : "");
	free(err);
	ok(!kcli_exists("%s/job_8/step_3", root), "no step was made");
	is_int(kcli(NULL, "thaw", "8", NULL), 0, "thaw 8");
	is_int(kcli(NULL, "run", "--job", "8", "--step", "3", "--", "true", NULL), 0,
	       "then the same step runs");
	is_int(kcli(NULL, "freeze", "8", NULL), 0, "freeze 8 again");
	is_int(kcli(NULL, "release", "8", NULL), 0, "a frozen job is still released");
	ok(!kcli_exists("%s/job_8", root), "job 8 is gone");
}

/* Wait at most @ms for @pid; past that, thaw job @job so that a run stuck in a clone into it
 * goes on, and wait again. True when @pid ended within @ms. */
static bool wait_or_thaw(pid_t pid, unsigned ms, const char *job, int *st)
{
	pid_t w = 0;

	for (unsigned i = 0; i < ms / 10 && (w = waitpid(pid, st, WNOHANG)) == 0; i++)
		msleep(10);
	if (w == pid)
		return true;
	(void)kcli(NULL, "thaw", job, NULL);
	while (waitpid(pid, st, 0) < 0 && errno == EINTR)
		;
	return false;
}

static int exit_code(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The command name of the one process of target @t ("" when none or several). */
static void target_comm(const char *t, char *buf, size_t len)
{
	char *out = NULL, p[64];
	FILE *f;

	buf[0] = '\0';
	if (kcli(&out, "pids", t, NULL) == 0 && out && *out &&
	    strchr(out, '\n') == strrchr(out, '\n')) {
		snprintf(p, sizeof(p), "/proc/%ld/comm", strtol(out, NULL, 10));
		if ((f = fopen(p, "re"))) {
			if (fgets(buf, (int)len, f))
				buf[strcspn(buf, "\n")] = '\0';
			fclose(f);
		}
	}
	free(out);
}

/*
 * A freeze racing a launch: `jobcg run` checks that the job is not frozen, then clones its
 * task into it. A freeze between the two would freeze the task before its exec and leave the
 * run waiting for that exec (vfork), deaf to the signals it forwards, until a thaw. The run's
 * pause points stop it there: the freeze waits for the exec and freezes the task with the
 * others, and the run stays interruptible; a freeze that cannot wait that long fails, nothing
 * frozen; a freeze before the run's check is refused by it.
 */
static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The freeze @fr, started while a run was stopped at spawn-before-clone in @pdir, still waits
 * 500 ms on; once the run goes on it freezes the run's step @step (target @t) with its task
 * past its exec. */
static void freeze_waits_for_launch(pid_t fr, const char *what, const char *pdir, const char *step,
				    const char *t)
{
	char comm[64];
	int st = 0;
	unsigned i;
	pid_t w;

	msleep(500);
	w = waitpid(fr, &st, WNOHANG);
	ok(w == 0, "%s waits for the launch under way", what);
	kcli_pause_go(pdir, "spawn-before-clone");
	if (w == 0)
		while (waitpid(fr, &st, 0) < 0 && errno == EINTR)
			;
	is_int(exit_code(st), 0, "  then freezes the job");
	for (i = 0; i < 500 && !events_has(step, "frozen 1"); i++)
		msleep(10);
	ok(events_has(step, "frozen 1"), "  step %s is frozen", t);
	target_comm(t, comm, sizeof(comm));
	ok(strcmp(comm, "sleep") == 0, "  its task froze after its exec: '%s'", comm);
}

/* Runs of job 9 (@job) stopped before their clone, and freezes of the job meanwhile. */
static void freeze_races(const char *job, const char *tmp)
{
	char pdir[PATH_MAX], step[PATH_MAX], *err = NULL;
	char *freeze9[] = {"freeze", "9", NULL};
	int st = 0, efd = -1;
	pid_t runner, fr, w = 0;
	unsigned i;

	/* The freeze lands between the run's check and its clone. */
	snprintf(pdir, sizeof(pdir), "%s/pause-clone", tmp);
	mkdir(pdir, 0700);
	{
		char *args[] = {"run", "--job", "9", "--step", "1", "--", "sleep", "1000", NULL};
		runner = kcli_start_paused(pdir, "spawn-before-clone", args, NULL);
	}
	ok(kcli_wait_file(pdir, "spawn-before-clone.reached", 20000),
	   "run 9.1 stopped between its frozen check and its clone");
	fr = kcli_start(freeze9, NULL, NULL);
	snprintf(step, sizeof(step), "%s/step_1", job);
	freeze_waits_for_launch(fr, "freeze 9", pdir, step, "9.1");
	/* Ctrl-C twice: forwarded (a fatal signal ends a frozen task of cgroup v2), then, if
	 * need be, the step killed. */
	kill(runner, SIGINT);
	msleep(200);
	kill(runner, SIGINT);
	ok(wait_or_thaw(runner, 5000, "9", &st),
	   "  the run still acts on signals: two interrupts end it without a thaw");
	ok(exit_code(st) == 128 + SIGINT || exit_code(st) == 128 + SIGKILL,
	   "  its task died of the interrupt or the kill (exit %d)", exit_code(st));
	is_int(kcli(NULL, "thaw", "9", NULL), 0, "thaw 9");

	/* A freeze that cannot wait for the launch fails and freezes nothing. */
	snprintf(pdir, sizeof(pdir), "%s/pause-clone2", tmp);
	mkdir(pdir, 0700);
	{
		char *args[] = {"run", "--job", "9", "--step", "2", "--", "true", NULL};
		runner = kcli_start_paused(pdir, "spawn-before-clone", args, NULL);
	}
	ok(kcli_wait_file(pdir, "spawn-before-clone.reached", 20000),
	   "run 9.2 stopped between its frozen check and its clone");
	{
		char *args[] = {"freeze", "--timeout", "300", "9", NULL};
		int rc = kcli_run(args, NULL, &err);

		is_int(rc, 1, "freeze --timeout 300 9 meanwhile fails");
		ok(err && strstr(err, "tasks are being started in job 9") &&
		       strstr(err, "nothing was frozen"),
		   "  saying why: %s", err ? err : "");
		free(err);
		err = NULL;
	}
	ok(file_is(job, "cgroup.freeze", "0"), "  job 9's cgroup.freeze is still 0");
	kcli_pause_go(pdir, "spawn-before-clone");
	ok(wait_or_thaw(runner, 10000, "9", &st), "  run 9.2 ends without a thaw");
	is_int(exit_code(st), 0, "  and succeeds");

	/* The freeze comes first (the step's, made before the run's check): refused. */
	snprintf(pdir, sizeof(pdir), "%s/pause-lock", tmp);
	mkdir(pdir, 0700);
	{
		char *args[] = {"run", "--job", "9", "--step", "3", "--", "true", NULL};
		runner = kcli_start_paused(pdir, "spawn-before-lock", args, &efd);
	}
	ok(kcli_wait_file(pdir, "spawn-before-lock.reached", 20000),
	   "run 9.3 stopped after making its step");
	is_int(kcli(NULL, "freeze", "9.3", NULL), 0, "freeze 9.3 meanwhile");
	kcli_pause_go(pdir, "spawn-before-lock");
	for (i = 0; i < 1000 && (w = waitpid(runner, &st, WNOHANG)) == 0; i++)
		msleep(10);
	ok(w == runner, "run 9.3 returns without a thaw");
	if (w != runner)
		(void)kcli(NULL, "thaw", "9", NULL);
	err = kcli_slurp(efd);
	close(efd);
	if (w != runner)
		while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
			;
	is_int(exit_code(st), 1, "  it fails (exit 1)");
	ok(err && strstr(err, "is frozen (thaw its job first)"), "  saying so: %s", err ? err : "");
	free(err);
	ok(!kcli_exists("%s/step_3", job), "  and removes its step");
}

/* A kill that comes while a step's tasks are being started waits for them all, and the whole
 * step dies: none started after the kill runs on alone. */
static void kill_during_launch(const char *tmp)
{
	char pdir[PATH_MAX];
	int st = 0;
	pid_t runner, w = 0;
	unsigned i;

	snprintf(pdir, sizeof(pdir), "%s/pause-kill", tmp);
	mkdir(pdir, 0700);
	{
		char *args[] = {"run", "--job", "9",	 "--step", "20", "--ntasks",
				"2",   "--",	"sleep", "1000",   NULL};
		runner = kcli_start_paused(pdir, "spawn-before-clone", args, NULL);
	}
	ok(kcli_wait_file(pdir, "spawn-before-clone.reached", 20000),
	   "run 9.20 (2 tasks) stopped before its first clone");
	{
		char *kill94[] = {"kill", "9.20", NULL};
		pid_t k = kcli_start(kill94, NULL, NULL);

		msleep(300);
		w = waitpid(k, &st, WNOHANG);
		ok(w == 0, "kill 9.20 waits for the launch under way");
		kcli_pause_go(pdir, "spawn-before-clone");
		if (w == 0)
			while (waitpid(k, &st, 0) < 0 && errno == EINTR)
				;
		is_int(exit_code(st), 0, "  then kills the step");
	}
	for (i = 0; i < 1000 && (w = waitpid(runner, &st, WNOHANG)) == 0; i++)
		msleep(10);
	ok(w == runner, "  run 9.20 ends: no task of it outlived the kill");
	if (w != runner) {
		(void)kcli(NULL, "kill", "9.20", NULL);
		while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
			;
	}
}

static void freeze_during_launch(const char *root, const char *tmp)
{
	char job[PATH_MAX];

	snprintf(job, sizeof(job), "%s/job_9", root);
	is_int(kcli(NULL, "alloc", "9", NULL), 0, "alloc 9");
	if (tap_test_hooks())
		freeze_races(job, tmp);
	else
		tap_skip("runs stopped before their clone, freezes meanwhile: a build without test "
			 "hooks");

	/* The lock is one only root can take: another user holding a lock on the job's
	 * directory (world-readable, as cgroup directories are) stalls no launch and no freeze. */
	{
		struct passwd *pw = getpwnam("nobody");
		int ready[2];
		char c = 0;
		pid_t holder;

		/* The state directory (the test's, mode 0700) open to others, as /var/lib/jobcg
		 * is: what keeps them from the lock file is its own mode and its directory's. */
		if (lock_file) {
			char p[PATH_MAX];
			struct stat d = {}, f = {};

			bool have;

			snprintf(p, sizeof(p), "%s/locks", tmp);
			have = stat(p, &d) == 0;
			ok(have && d.st_uid == 0 && (d.st_mode & 07777) == 0700,
			   "the job lock directory is root's, mode 0700 (%04o)",
			   (unsigned)(d.st_mode & 07777));
			snprintf(p, sizeof(p), "%s/locks/job_9", tmp);
			have = lstat(p, &f) == 0;
			ok(have && S_ISREG(f.st_mode) && f.st_uid == 0 &&
			       (f.st_mode & 07777) == 0600,
			   "job 9's lock file is root's, mode 0600 (%04o)",
			   (unsigned)(f.st_mode & 07777));
			chmod(tmp, 0755);
		}
		if (!pw || pipe2(ready, O_CLOEXEC) < 0) {
			tap_skip("no 'nobody' user");
		} else if ((holder = fork()) == 0) {
			int fd, kfd;

			if (setgroups(0, NULL) < 0 ||
			    setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
			    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0)
				_exit(3);
			kfd = open(job, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			fd = kfd >= 0 && flock(kfd, LOCK_EX | LOCK_NB) == 0 ? kfd : -1;
			c = fd < 0 ? 'n' : 'd';
			{
				char kill_file[PATH_MAX];

				snprintf(kill_file, sizeof(kill_file), "%s/cgroup.kill", job);
				if (open(kill_file, O_WRONLY | O_CLOEXEC) >= 0 ||
				    open(kill_file, O_RDONLY | O_CLOEXEC) >= 0)
					c = 'k'; /* cgroup.kill opened: the lock is anybody's */
				snprintf(kill_file, sizeof(kill_file), "%s/locks/job_9", tmp);
				if (lock_file && (open(kill_file, O_WRONLY | O_CLOEXEC) >= 0 ||
						  open(kill_file, O_RDONLY | O_CLOEXEC) >= 0))
					c = 'l'; /* the lock file opened: the same */
			}
			(void)!write(ready[1], &c, 1);
			pause();
			_exit(0);
		} else {
			close(ready[1]);
			if (holder < 0 || read(ready[0], &c, 1) != 1)
				c = 0;
			close(ready[0]);
			ok(c == 'd',
			   "user nobody can flock job 9's directory, but not open its "
			   "cgroup.kill%s ('%c')",
			   lock_file ? " or its lock file" : "", c ? c : '?');
			{
				char *args[] = {"run", "--job", "9", "--", "true", NULL};
				uint64_t t0 = now_ms();

				is_int(kcli_run(args, NULL, NULL), 0,
				       "  meanwhile run --job 9 succeeds");
				ok(now_ms() - t0 < 10000,
				   "  without waiting for nobody's lock (%llu ms)",
				   (unsigned long long)(now_ms() - t0));
			}
			is_int(kcli(NULL, "freeze", "--timeout", "3000", "9", NULL), 0,
			       "  and freeze 9 succeeds");
			is_int(kcli(NULL, "thaw", "9", NULL), 0, "  thaw 9");
			if (holder > 0) {
				kill(holder, SIGKILL);
				while (waitpid(holder, NULL, 0) < 0 && errno == EINTR)
					;
			}
		}
		chmod(tmp, 0700);
	}

	if (tap_test_hooks())
		kill_during_launch(tmp);
	else
		tap_skip("a kill while a run is stopped before its clone: a build without test "
			 "hooks");
	is_int(kcli(NULL, "release", "9", NULL), 0, "release 9");
	if (lock_file)
		ok(!kcli_exists("%s/locks/job_9", tmp), "  its lock file goes with it");
}

/*
 * The lock file of a kernel without cgroup.kill: gc removes those of jobs gone, unless someone
 * holds them (a waiter on a removed file would hold a lock nobody else can see); a link put in
 * its place is not followed; a freeze that opened the file of a job removed and made again
 * meanwhile locks the new job's file, not the old one.
 */
static void lock_files(const char *root, const char *tmp)
{
	char stale[PATH_MAX], held[PATH_MAX], link[PATH_MAX], target[PATH_MAX], *err = NULL;
	char pf[PATH_MAX], pr[PATH_MAX], step[PATH_MAX];
	int fd, hfd, st = 0;
	pid_t fr, runner;

	snprintf(stale, sizeof(stale), "%s/locks/job_71", tmp);
	snprintf(held, sizeof(held), "%s/locks/job_72", tmp);
	fd = open(stale, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	hfd = open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ok(fd >= 0 && hfd >= 0 && flock(hfd, LOCK_SH) == 0,
	   "lock files of jobs 71 and 72, which do not exist; 72's held");
	is_int(kcli(NULL, "gc", NULL), 0, "gc");
	ok(!kcli_exists("%s", stale), "  removes 71's");
	ok(kcli_exists("%s", held), "  leaves 72's, held");
	close(hfd);
	is_int(kcli(NULL, "gc", NULL), 0, "gc once it is free");
	ok(!kcli_exists("%s", held), "  removes it");

	snprintf(link, sizeof(link), "%s/locks/job_73", tmp);
	snprintf(target, sizeof(target), "%s/lock-target", tmp);
	is_int(kcli(NULL, "alloc", "73", NULL), 0, "alloc 73");
	ok(symlink(target, link) == 0, "its lock file a symbolic link to a missing file");
	{
		char *args[] = {"freeze", "73", NULL};

		is_int(kcli_run(args, NULL, &err), 1, "  freeze 73 fails");
		ok(err && strstr(err, "locks/job_73"), "  naming the lock file: %s",
		   err ? err : "");
		free(err);
	}
	ok(!kcli_exists("%s", target), "  and made nothing through the link");
	unlink(link);
	is_int(kcli(NULL, "freeze", "73", NULL), 0, "without the link, freeze 73 works");
	is_int(kcli(NULL, "release", "73", NULL), 0, "release 73");

	/* The classic race of a lock file that is removed: the freeze opened job 74's file, the
	 * job went (and its file with it), was made again, and a run of the new one holds the new
	 * file. Were the freeze to lock the old file, it would freeze the run's task before its
	 * exec. */
	snprintf(pf, sizeof(pf), "%s/pause-lockfile-freeze", tmp);
	snprintf(pr, sizeof(pr), "%s/pause-lockfile-run", tmp);
	mkdir(pf, 0700);
	mkdir(pr, 0700);
	is_int(kcli(NULL, "alloc", "74", NULL), 0, "alloc 74");
	{
		char *args[] = {"freeze", "74", NULL};

		fr = kcli_start_paused(pf, "job-lock-file-opened", args, NULL);
	}
	ok(kcli_wait_file(pf, "job-lock-file-opened.reached", 20000),
	   "freeze 74 stopped with its lock file open, not yet locked");
	is_int(kcli(NULL, "release", "74", NULL), 0, "release 74 meanwhile");
	is_int(kcli(NULL, "alloc", "74", NULL), 0, "alloc 74 again");
	{
		char *args[] = {"run", "--job", "74", "--step", "1", "--", "sleep", "1000", NULL};

		runner = kcli_start_paused(pr, "spawn-before-clone", args, NULL);
	}
	ok(kcli_wait_file(pr, "spawn-before-clone.reached", 20000),
	   "run 74.1 stopped between its frozen check and its clone");
	kcli_pause_go(pf, "job-lock-file-opened");
	snprintf(step, sizeof(step), "%s/job_74/step_1", root);
	freeze_waits_for_launch(fr, "  freeze 74, on the new job's lock file,", pr, step, "74.1");
	is_int(kcli(NULL, "release", "74", NULL), 0, "release 74");
	if (!wait_or_thaw(runner, 10000, "74", &st))
		tap_diag("run 74.1 needed a thaw");
}

/* A task below a frozen step cannot thaw, whatever its own cgroup.freeze says: refused at once,
 * naming the step, instead of waiting out --timeout (or, with --timeout 0, saying it thawed). */
static void thaw_below_frozen(const char *root)
{
	char *args[] = {"run", "--job", "9", "--step", "4", "--", "sleep", "1000", NULL};
	char *thaw[] = {"thaw", "9.4.0", NULL},
	     *thaw0[] = {"thaw", "--timeout", "0", "9.4.0", NULL};
	char step[PATH_MAX], *err = NULL;
	struct timespec t0, t1;
	int st = 0, i, rc;
	pid_t runner;

	is_int(kcli(NULL, "alloc", "9", NULL), 0, "alloc 9");
	snprintf(step, sizeof(step), "%s/job_9/step_4", root);
	runner = kcli_start(args, NULL, NULL);
	for (i = 0; i < 500 && !events_has(step, "populated 1"); i++)
		msleep(10);
	is_int(kcli(NULL, "freeze", "9.4", NULL), 0, "freeze step 9.4");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = kcli_run(thaw, NULL, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	is_int(rc, 1, "thaw of its task 9.4.0 fails");
	ok(t1.tv_sec - t0.tv_sec < 5, "at once, not after the 10 s timeout (%ld s)",
	   (long)(t1.tv_sec - t0.tv_sec));
	ok(err && strstr(err, "cannot thaw 9.4.0") &&
	       strstr(err, "job_9/step_4 above it is frozen"),
	   "naming the frozen step: %s", err ? err : "");
	free(err);
	err = NULL;
	is_int(kcli_run(thaw0, NULL, &err), 1, "thaw --timeout 0 9.4.0 fails too");
	free(err);
	ok(events_has(step, "frozen 1"), "the step is still frozen");
	is_int(kcli(NULL, "thaw", "9.4", NULL), 0, "thaw of the step works");
	is_int(kcli(NULL, "thaw", "9.4.0", NULL), 0, "and then of its task");
	is_int(kcli(NULL, "release", "9", NULL), 0, "release 9");
	while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
		;
}

/*
 * Processes that fork and exit at once (comets) stay ahead of a kill that lists pids and then
 * signals them: each pid listed has a child nobody listed by the time the signal lands. With
 * cgroup.kill the kernel ends them all; without it (lock-file mode, as before Linux 5.14) the
 * kill must freeze what it kills first. A kill that leaves them running fails here, and the
 * test ends them itself with cgroup.kill so that none outlives it. A job frozen before the kill
 * stays frozen after it; one that was not is not left frozen. The comets are this program
 * (argument "comets"); kill-slow makes the kill wait between listing and signalling, so
 * that a comet wins every round where nothing stops it from forking.
 */
static int comets(void)
{
	for (int i = 0; i < 4; i++)
		if (fork() == 0)
			for (;;)
				if (fork() > 0)
					_exit(0);
	for (;;)
		pause();
}

static void kill_comets(const char *root, const char *self)
{
	char step[PATH_MAX], kfile[PATH_MAX + 16], job[PATH_MAX];
	char *args[] = {"run", "--job", "12", "--step", "0", "--", (char *)self, "comets", NULL};
	int st = 0, i, rc;
	pid_t runner;

	snprintf(step, sizeof(step), "%s/job_12/step_0", root);
	snprintf(job, sizeof(job), "%s/job_12", root);
	snprintf(kfile, sizeof(kfile), "%s/cgroup.kill", job);
	is_int(kcli(NULL, "alloc", "12", NULL), 0, "alloc 12");
	for (int frozen = 0; frozen < 2; frozen++) {
		args[4] = frozen ? "1" : "0";
		step[strlen(step) - 1] = frozen ? '1' : '0';
		/* The runner kills what is left of its step when its task dies: slow too. The
		 * first kill signals through pidfds (Linux 5.3 to 5.13), the second by kill()
		 * (before 5.3). */
		if (lock_file)
			setenv("JOBCG_TEST_FLAGS",
			       frozen ? "job-lock-file,no-cgroup-kill,no-pidfd,kill-slow"
				      : "job-lock-file,no-cgroup-kill,kill-slow",
			       1);
		runner = kcli_start(args, NULL, NULL);
		for (i = 0; i < 500 && !events_has(step, "populated 1"); i++)
			msleep(10);
		msleep(300); /* the comets are under way */
		if (frozen)
			is_int(kcli(NULL, "freeze", "12", NULL), 0, "freeze job 12");
		rc = kcli(NULL, "kill", "--timeout", "3000", "12", NULL);
		if (lock_file)
			setenv("JOBCG_TEST_FLAGS", "job-lock-file,no-cgroup-kill,no-pidfd", 1);
		ok(rc == 0, "kill of a %sjob of comets, %s (exit %d)", frozen ? "frozen " : "",
		   lock_file ? "without cgroup.kill" : "with cgroup.kill", rc);
		if (rc != 0) {
			int fd = open(kfile, O_WRONLY | O_CLOEXEC);

			ok(fd >= 0 && write(fd, "1", 1) == 1,
			   "the test kills them with cgroup.kill");
			if (fd >= 0)
				close(fd);
		}
		while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
			;
		is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 128 + SIGKILL, "the runner exits 137");
		ok(!kcli_exists("%s", step), "the step is gone");
		ok(file_is(job, "cgroup.freeze", frozen ? "1" : "0"),
		   "job 12's cgroup.freeze is still %d", frozen);
	}
	is_int(kcli(NULL, "release", "12", NULL), 0, "release 12 (frozen)");
}

/* The pid of the one process in @dir's cgroup.procs, as this process's pid namespace sees it. */
static long only_pid(const char *dir)
{
	char buf[64], *nl;

	read_in(dir, "cgroup.procs", buf, sizeof(buf));
	nl = strchr(buf, '\n');
	return nl && !nl[1] ? strtol(buf, NULL, 10) : -1; /* one line: one process */
}

/*
 * Inside a pid namespace of its own (pid 1): job 40's step has two tasks; `jobcg signal`
 * lists them and stops; task 0 is killed and reaped and its pid given (ns_last_pid) to a
 * process outside the job; then the signal goes on. Exit 0 when only task 1 got SIGTERM, 1
 * when the outsider did, 2 when the scene could not be set.
 */
static int pid_reuse_scene(const char *root, const char *tmp)
{
	char *args[] = {"run", "--job", "40",	 "--step", "0", "--ntasks",
			"2",   "--",	"sleep", "1000",   NULL};
	char *sargs[] = {"signal", "-s", "TERM", "40.0", NULL};
	char t0[PATH_MAX], t1[PATH_MAX], *out = NULL;
	int st = 0, i, rc, ofd = -1, efd = -1, code = 2;
	pid_t runner, sig, outsider = -1;
	long v0 = 0, v1 = 0;
	FILE *f;

	snprintf(t0, sizeof(t0), "%s/job_40/step_0/user/task_0", root);
	snprintf(t1, sizeof(t1), "%s/job_40/step_0/user/task_1", root);
	runner = kcli_start(args, NULL, NULL);
	for (i = 0; i < 500 && ((v0 = only_pid(t0)) <= 0 || (v1 = only_pid(t1)) <= 0); i++)
		msleep(10);
	if (v0 <= 1 || v1 <= 1)
		goto out;
	setenv("JOBCG_TEST_PAUSE", "signal-listed", 1);
	setenv("JOBCG_TEST_PAUSE_DIR", tmp, 1);
	sig = kcli_start(sargs, &ofd, &efd);
	unsetenv("JOBCG_TEST_PAUSE");
	if (!kcli_wait_file(tmp, "signal-listed.reached", 10000))
		goto out;
	(void)kill((pid_t)v0, SIGKILL);
	for (i = 0; i < 500 && kill((pid_t)v0, 0) == 0; i++) /* until the runner reaps it */
		msleep(10);
	f = fopen("/proc/sys/kernel/ns_last_pid", "we");
	if (f) {
		fprintf(f, "%ld", v0 - 1);
		fclose(f);
	}
	outsider = fork();
	if (outsider == 0) {
		for (;;)
			pause(); /* SIGTERM ends it */
	}
	if (outsider != (pid_t)v0) {
		fprintf(stderr, "# the outsider got pid %d, not task 0's %ld\n", (int)outsider, v0);
		goto out;
	}
	kcli_pause_go(tmp, "signal-listed");
	out = kcli_slurp(ofd);
	rc = kcli_finish(sig, efd, NULL);
	if (rc != 0 || !out || strcmp(out, "1 process(es) signalled\n") != 0) {
		fprintf(stderr, "# jobcg signal: exit %d, %s\n", rc, out ? out : "");
		code = 1;
	}
	msleep(200);
	if (waitpid(outsider, &st, WNOHANG) == outsider) {
		fprintf(stderr, "# the outsider ended (status %#x)\n", st);
		code = 1;
		outsider = -1;
	} else if (code == 2)
		code = 0;
	/* task 1 got SIGTERM: the step, and the run, end */
	for (i = 0; i < 500 && waitpid(runner, &st, WNOHANG) == 0; i++)
		msleep(10);
	if (i == 500) {
		fprintf(stderr, "# the run did not end: task 1 was not signalled\n");
		code = 1;
	}
out:
	free(out);
	if (outsider > 0) {
		(void)kill(outsider, SIGKILL);
		(void)waitpid(outsider, NULL, 0);
	}
	return code; /* pid 1 exits: the kernel ends what is left in the namespace */
}

/* A pid that a process of the job had when `jobcg signal` listed it, and that a process outside
 * the job has when the signal is sent, is not signalled (a pidfd holds what was listed). */
static void signal_pid_reused(const char *root, const char *tmp)
{
	int st = 0;
	pid_t c;

	if (!tap_test_hooks()) {
		tap_skip("a reused pid: a build without test hooks");
		return;
	}
	is_int(kcli(NULL, "alloc", "40", NULL), 0, "alloc 40");
	fflush(stdout);
	c = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
	if (c == 0) {
		/* (the lock-file runs signal as before Linux 5.3 elsewhere: not here) */
		setenv("JOBCG_TEST_FLAGS", lock_file ? "job-lock-file,no-cgroup-kill" : "", 1);
		_exit(pid_reuse_scene(root, tmp));
	}
	while (c > 0 && waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	ok(c > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "a pid reused between the listing and the signal: the outsider is not signalled, the "
	   "job's other task is (%s %d)",
	   c > 0 && WIFEXITED(st) ? "exit" : "status",
	   c > 0 ? (WIFEXITED(st) ? WEXITSTATUS(st) : st) : -errno);
	is_int(kcli(NULL, "release", "40", NULL), 0, "release 40");
}

/*
 * 150 processes signalled by a jobcg with 48 descriptors: its pidfds run out, and the listing
 * after them must still open its files. Every process gets the signal (SIGCONT: harmless).
 */
static void signal_fd_limit(const char *root, const char *tmp)
{
	char *args[] = {"run",
			"--job",
			"41",
			"--",
			"sh",
			"-c",
			"for i in $(seq 149); do sleep 1000 & done; wait",
			NULL};
	char cmd[PATH_MAX * 2], outp[PATH_MAX], *out = NULL;
	int st = 0, i, rc, n = 0;
	pid_t runner;

	is_int(kcli(NULL, "alloc", "41", NULL), 0, "alloc 41");
	runner = kcli_start(args, NULL, NULL);
	for (i = 0; i < 1000 && n < 150; i++) {
		free(out);
		out = NULL;
		n = 0;
		if (kcli(&out, "pids", "41", NULL) == 0 && out)
			for (char *p = out; (p = strchr(p, '\n')); p++)
				n++;
		msleep(20);
	}
	free(out);
	out = NULL;
	snprintf(outp, sizeof(outp), "%s/signal-fd-limit.out", tmp);
	snprintf(cmd, sizeof(cmd), "ulimit -n 48 && exec '%s' signal -s CONT 41 > '%s'",
		 kcli_binary(), outp);
	rc = n == 150 ? system(cmd) : -1;
	{
		FILE *f = fopen(outp, "re");
		char line[128] = "";

		if (f) {
			if (!fgets(line, sizeof(line), f))
				line[0] = '\0';
			fclose(f);
		}
		ok(rc == 0 && strcmp(line, "150 process(es) signalled\n") == 0,
		   "signal with 48 descriptors reaches all of 150 processes (%d listed, exit %d: "
		   "%s)",
		   n, rc, line);
	}
	is_int(kcli(NULL, "release", "41", NULL), 0, "release 41");
	while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
		;
}

/* The file a job's freeze lock is taken on, where a waiting freeze marks its turn. */
static void lock_path(const char *root, const char *tmp, unsigned job, char *buf, size_t len)
{
	if (lock_file)
		snprintf(buf, len, "%s/locks/job_%u", tmp, job);
	else
		snprintf(buf, len, "%s/job_%u/cgroup.kill", root, job);
}

/* The freeze's mark on @path ("" when there is none). */
static void turn_mark(const char *path, char *buf, size_t len)
{
	ssize_t n = getxattr(path, "trusted.jobcg.freezing", buf, len - 1);

	buf[n > 0 ? n : 0] = '\0';
}

/* A freeze's mark "PID:START DEADLINE" set by hand on @lock, its deadline @ahead_ms away. */
static bool turn_mark_set(const char *lock, pid_t pid, unsigned long long start,
			  unsigned long long ahead_ms)
{
	char m[128];

	snprintf(m, sizeof(m), "%d:%llu %llu", (int)pid, start,
		 (unsigned long long)(now_ms() + ahead_ms) * 1000ull);
	return setxattr(lock, "trusted.jobcg.freezing", m, strlen(m), 0) == 0;
}

/* `run --job 11 -- true` is not held back by the mark on @lock, and takes it off. */
static void run_takes_mark_off(const char *lock, const char *what, const char *gone)
{
	uint64_t t0 = now_ms();
	char mark[128];

	is_int(kcli(NULL, "run", "--job", "11", "--", "true", NULL), 0, what);
	ok(now_ms() - t0 < 5000, "  without waiting for it (%llu ms)",
	   (unsigned long long)(now_ms() - t0));
	turn_mark(lock, mark, sizeof(mark));
	ok(!*mark, "%s ('%s')", gone, mark);
}

static bool turn_marked_within(const char *path, unsigned ms)
{
	char mark[128];

	for (unsigned i = 0; i <= ms / 10; i++) {
		turn_mark(path, mark, sizeof(mark));
		if (*mark)
			return true;
		msleep(10);
	}
	return false;
}

/* Field 22 of /proc/@pid/stat, as jobcg reads a process's start time. */
static unsigned long long start_time(pid_t pid)
{
	char p[64], buf[1024] = "", *s;
	unsigned long long v = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(p, "re")))
		return 0;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	if (!(s = strrchr(buf, ')')))
		return 0;
	s++;
	for (int field = 3; field < 22 && s; field++)
		s = strchr(s + 1, ' ');
	if (s)
		v = strtoull(s, NULL, 10);
	return v;
}

static bool exited_within(pid_t pid, unsigned ms, int *st)
{
	pid_t w = 0;

	for (unsigned i = 0; i <= ms / 10 && (w = waitpid(pid, st, WNOHANG)) == 0; i++)
		msleep(10);
	return w == pid;
}

/*
 * flock gives an exclusive waiter no priority: launches into a job that overlap without a gap
 * kept a freeze out until its timeout. Run A holds the job's lock (stopped before its clone),
 * two freezes wait for it, run B comes meanwhile: B must wait for the freezes' turn, not take
 * the lock beside A (stopped before its clone too, it would hold the lock past the freezes'
 * timeout). A freeze killed while it waits holds no launch back, nor does a mark whose pid is
 * another process now; a mark of a live freeze does, until it goes.
 */
static void freeze_turn(const char *root, const char *tmp)
{
	char pa[PATH_MAX], pb[PATH_MAX], lock[PATH_MAX], step[PATH_MAX], mark[128], *err = NULL;
	char *freeze11[] = {"freeze", "--timeout", "4000", "11", NULL};
	int st = 0, efd = -1;
	pid_t a, b, f1, f2;
	bool b_reached, done;

	is_int(kcli(NULL, "alloc", "11", NULL), 0, "alloc 11");
	lock_path(root, tmp, 11, lock, sizeof(lock));
	snprintf(pa, sizeof(pa), "%s/pause-turn-a", tmp);
	snprintf(pb, sizeof(pb), "%s/pause-turn-b", tmp);
	mkdir(pa, 0700);
	mkdir(pb, 0700);
	{
		char *args[] = {"run", "--job", "11", "--step", "1", "--", "sleep", "1000", NULL};

		a = kcli_start_paused(pa, "spawn-before-clone", args, NULL);
	}
	ok(kcli_wait_file(pa, "spawn-before-clone.reached", 20000),
	   "run 11.1 stopped between its frozen check and its clone, holding the job's lock");
	f1 = kcli_start(freeze11, NULL, NULL);
	ok(turn_marked_within(lock, 5000), "freeze 11 waits for it and marks its turn on %s", lock);
	f2 = kcli_start(freeze11, NULL, NULL);
	{
		char *args[] = {"run", "--job", "11", "--step", "2", "--", "sleep", "1000", NULL};

		b = kcli_start_paused(pb, "spawn-before-clone", args, &efd);
	}
	b_reached = kcli_wait_file(pb, "spawn-before-clone.reached", 1000);
	ok(!b_reached, "run 11.2, started meanwhile, does not take the lock before the freezes");
	kcli_pause_go(pa, "spawn-before-clone");
	/* Each ends by its 4 s timeout at the latest. */
	done = exited_within(f1, 8000, &st);
	ok(done && exit_code(st) == 0,
	   "  once run 11.1 has started its task, the first freeze succeeds (exit %d)",
	   exit_code(st));
	done = exited_within(f2, 8000, &st);
	ok(done && exit_code(st) == 0, "  and so does the second (exit %d)", exit_code(st));
	snprintf(step, sizeof(step), "%s/job_11/step_1", root);
	ok(events_has(step, "frozen 1"), "  step 11.1 is frozen");
	turn_mark(lock, mark, sizeof(mark));
	ok(!*mark, "  and the freezes' marks are gone ('%s')", mark);
	kcli_pause_go(pb, "spawn-before-clone");
	done = exited_within(b, 10000, &st);
	ok(done, "run 11.2 then ends without a thaw");
	if (!done) {
		/* It took the lock before the freezes and started its task: end it. */
		(void)kcli(NULL, "thaw", "11", NULL);
		(void)kcli(NULL, "kill", "11.2", NULL);
		waitpid(b, &st, 0);
	}
	err = kcli_slurp(efd);
	close(efd);
	ok(exit_code(st) == 1 && err && strstr(err, "is frozen (thaw its job first)"),
	   "  refused: the job is frozen (exit %d)", exit_code(st));
	free(err);
	err = NULL;
	is_int(kcli(NULL, "thaw", "11", NULL), 0, "thaw 11");
	is_int(kcli(NULL, "kill", "11.1", NULL), 0, "kill 11.1");
	if (!exited_within(a, 10000, &st))
		kill(a, SIGKILL), waitpid(a, &st, 0);

	/* A freeze killed while it waits for its turn leaves its mark: its process is gone. */
	snprintf(pa, sizeof(pa), "%s/pause-turn-c", tmp);
	mkdir(pa, 0700);
	{
		char *args[] = {"run", "--job", "11", "--step", "3", "--", "sleep", "1000", NULL};

		a = kcli_start_paused(pa, "spawn-before-clone", args, NULL);
	}
	ok(kcli_wait_file(pa, "spawn-before-clone.reached", 20000),
	   "run 11.3 stopped before its clone, holding the job's lock");
	is_int(kcli_crash_at("job-lock-turn-marked", freeze11), 128 + SIGKILL,
	       "freeze 11 killed while it waits for its turn");
	turn_mark(lock, mark, sizeof(mark));
	ok(*mark, "  its mark is left: '%s'", mark);
	run_takes_mark_off(lock, "run --job 11 meanwhile succeeds", "  and removes its mark");

	/* Marks set by hand: a live process's (ours) holds launches back until it goes; the
	 * same pid with another start time (a pid reused) does not. */
	{
		pid_t sl = fork();
		pid_t r;

		if (sl == 0) {
			execlp("sleep", "sleep", "1000", (char *)NULL);
			_exit(127);
		}
		msleep(50);
		ok(turn_mark_set(lock, sl, start_time(sl) + 1, 60000),
		   "a mark naming pid %d with another start time", (int)sl);
		is_int(kcli(NULL, "run", "--job", "11", "--", "true", NULL), 0,
		       "  holds no run back");
		ok(turn_mark_set(lock, sl, start_time(sl), 60000), "a mark naming the live pid %d",
		   (int)sl);
		{
			char *args[] = {"run", "--job", "11", "--", "true", NULL};

			r = kcli_start(args, NULL, NULL);
		}
		done = exited_within(r, 1000, &st);
		ok(!done, "  holds a run back");
		removexattr(lock, "trusted.jobcg.freezing");
		if (!done)
			done = exited_within(r, 10000, &st);
		ok(done && exit_code(st) == 0, "  until it goes (exit %d)", exit_code(st));
		if (!done)
			kill(r, SIGKILL), waitpid(r, &st, 0);
		/* No freeze marks its turn more than an hour ahead: such a mark (corrupt, or made
		 * by hand) would otherwise hold every launch back while its process lives. */
		ok(turn_mark_set(lock, sl, start_time(sl), 7200000),
		   "a mark naming the live pid %d two hours ahead", (int)sl);
		run_takes_mark_off(lock, "  holds no run back", "  and is removed by it");
		kill(sl, SIGKILL);
		waitpid(sl, NULL, 0);
	}
	kcli_pause_go(pa, "spawn-before-clone");
	is_int(kcli(NULL, "release", "11", NULL), 0, "release 11");
	if (!exited_within(a, 10000, &st))
		kill(a, SIGKILL), waitpid(a, &st, 0);
}

/* A release while a launch is on its way to its clone3 (past its checks, holding the job's lock)
 * waits for its task to be there, kills it and removes the job. Without the wait it removed
 * the job under the launch, or failed with the job busy when the clone3 came in between. */
static void release_during_launch(const char *root, const char *tmp)
{
	char pa[PATH_MAX];
	char *args[] = {"run", "--job", "13", "--", "sleep", "1000", NULL};
	char *rel[] = {"release", "13", NULL};
	pid_t a, r;
	int st = 0, st2 = 0;
	bool done;

	is_int(kcli(NULL, "alloc", "13", NULL), 0, "alloc 13");
	snprintf(pa, sizeof(pa), "%s/pause-release", tmp);
	mkdir(pa, 0700);
	a = kcli_start_paused(pa, "spawn-before-clone", args, NULL);
	ok(kcli_wait_file(pa, "spawn-before-clone.reached", 20000),
	   "run 13 stopped between its checks and its clone, holding the job's lock");
	r = kcli_start(rel, NULL, NULL);
	done = exited_within(r, 700, &st);
	ok(!done, "release 13 waits for the launch under way (exit %d)", done ? exit_code(st) : -1);
	kcli_pause_go(pa, "spawn-before-clone");
	if (!done)
		done = exited_within(r, 20000, &st);
	ok(done && exit_code(st) == 0, "  then releases the job (exit %d)", exit_code(st));
	if (!done)
		kill(r, SIGKILL), waitpid(r, &st, 0);
	done = exited_within(a, 10000, &st2);
	ok(done && exit_code(st2) == 128 + SIGKILL,
	   "  the launch's task was started and killed: its run exits 137 (exit %d)",
	   done ? exit_code(st2) : -1);
	if (!done)
		kill(a, SIGKILL), waitpid(a, &st2, 0);
	ok(!kcli_exists("%s/job_13", root), "  job 13 is gone");
	if (kcli_exists("%s/job_13", root))
		(void)kcli(NULL, "release", "13", NULL);
}

int main(int argc, char **argv)
{
	const char *root;
	const char *tmp;
	char script[PATH_MAX + 256], count0[PATH_MAX], step[PATH_MAX], *out = NULL;
	long a, b;
	int st = 0, i, rc;
	pid_t runner;
	char self[PATH_MAX];
	ssize_t len;

	if (argc > 1 && strcmp(argv[1], "comets") == 0)
		return comets();
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[len > 0 ? len : 0] = '\0';
	if (argc > 1 && strcmp(argv[1], "lock-file") == 0) {
		tap_require_hooks("the job's lock file stands in for cgroup.kill through a test "
				  "flag: a build without test hooks");
		lock_file = true;
		setenv("JOBCG_TEST_FLAGS", "job-lock-file,no-cgroup-kill,no-pidfd", 1);
	}
	root = kcli_setup(lock_file ? "cli-freeze-lf" : "cli-freeze", "jobcg");
	tmp = ktest_tmpdir();
	is_int(kcli(NULL, "alloc", "5", NULL), 0, "alloc 5");
	snprintf(script, sizeof(script),
		 "trap '' TERM; while :; do printf x >> %s/count.$JOBCG_TASK_ID; done", tmp);
	snprintf(count0, sizeof(count0), "%s/count.0", tmp);
	snprintf(step, sizeof(step), "%s/job_5/step_0", root);
	{
		char *args[] = {"run", "--job", "5",  "--step", "0",	"--ntasks",
				"2",   "--",	"sh", "-c",	script, NULL};
		runner = kcli_start(args, NULL, NULL);
	}
	ok(runner > 0, "started jobcg run in the background");
	for (i = 0; i < 500 && read_long(count0) < 10; i++)
		msleep(10);
	ok(read_long(count0) >= 10, "task 0 is counting");

	is_int(kcli(NULL, "freeze", "5.0", NULL), 0, "freeze 5.0");
	ok(events_has(step, "frozen 1"), "step cgroup.events says frozen 1");
	a = read_long(count0);
	msleep(300);
	b = read_long(count0);
	ok(a == b && a > 0, "frozen processes make no progress (%ld -> %ld)", a, b);

	is_int(kcli(NULL, "thaw", "5", NULL), 0, "thaw job 5");
	ok(events_has(step, "frozen 0"), "step cgroup.events says frozen 0 after thaw");
	for (i = 0; i < 300 && read_long(count0) == b; i++)
		msleep(10);
	ok(read_long(count0) > b, "thawed processes run again");

	is_int(kcli(&out, "signal", "-s", "TERM", "5.0", NULL), 0, "signal TERM 5.0");
	ok(out && strstr(out, "signalled"), "signal reports the count");
	free(out);
	msleep(200);
	ok(events_has(step, "populated 1"), "processes trapping SIGTERM survive it");

	is_int(kcli(NULL, "kill", "5.0", NULL), 0, "kill 5.0");
	ok(events_has(step, "populated 0") || !kcli_exists("%s", step), "step is empty after kill");
	/* The runner may already have removed the empty step: then "no step" is right too. */
	rc = kcli(&out, "pids", "5.0", NULL);
	ok((rc == 0 && out && !*out) || (rc == 1 && !kcli_exists("%s", step)),
	   "no pids left in the step");
	free(out);
	out = NULL;
	while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
		;
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 128 + SIGKILL, "runner exits 137");
	ok(!kcli_exists("%s", step), "runner removed the step");
	ok(kcli_exists("%s/job_5", root), "allocated job 5 stays");
	rc = kcli(&out, "acct", "--job", "5", "--json", NULL);
	ok(rc == 0 && out && strstr(out, "CANCELLED") && !strstr(out, "FAILED"),
	   "as after Slurm's scancel, the step jobcg kill ended is CANCELLED, not FAILED");
	free(out);
	out = NULL;
	signal_outcomes(root);
	signal_pid_reused(root, tmp);
	signal_fd_limit(root, tmp);

	/* A frozen job can be killed, and release removes it. */
	{
		char *args[] = {"run", "--job", "5", "--", "sleep", "1000", NULL};
		runner = kcli_start(args, NULL, NULL);
	}
	snprintf(step, sizeof(step), "%s/job_5", root); /* its step's number is the job's next */
	for (i = 0; i < 500 && !events_has(step, "populated 1"); i++)
		msleep(10);
	is_int(kcli(NULL, "freeze", "5", NULL), 0, "freeze job 5 with a sleeping step");
	is_int(kcli(NULL, "release", "5", NULL), 0, "release a frozen job");
	ok(!kcli_exists("%s/job_5", root), "job 5 is gone");
	while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
		;
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 128 + SIGKILL, "its runner exits 137");
	is_int(kcli(NULL, "freeze", "5", NULL), 1, "freeze of a missing job fails");
	is_int(kcli(NULL, "freeze", "x5", NULL), 2,
	       "freeze of a malformed target is a usage error");
	freeze_timeout(root);
	frozen_refused(root);
	freeze_during_launch(root, tmp);
	thaw_below_frozen(root);
	kill_comets(root, self);
	if (tap_test_hooks()) {
		freeze_turn(root, tmp);
		release_during_launch(root, tmp);
	} else {
		tap_skip("freezes and a release while runs are stopped before their clone: a build "
			 "without test hooks");
	}
	if (lock_file)
		lock_files(root, tmp);
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	return tap_done();
}
