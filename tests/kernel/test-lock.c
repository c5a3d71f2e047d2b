/* Kernel test: the node lock is taken around job/step creation and released on every error path;
 * failed creations leave nothing behind. */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

static bool lock_free(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	bool ok = false;

	if (fd < 0)
		return errno == ENOENT;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		ok = true;
		flock(fd, LOCK_UN);
	}
	close(fd);
	return ok;
}

int main(void)
{
	const char *root = kcli_setup("lock", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_limits mem = {.mem_bytes = 1 << 30};
	const char *lp;
	char sid[JOBCG_STEP_ID_MAX];
	int r, fd, st = 0;
	pid_t pid;

	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context\n");
		return 1;
	}
	lp = jobcg_ctx_lock_path(ctx);
	tap_diag("lock file %s", lp);

	is_int(jobcg_job_create(ctx, 11, NULL, 0, NULL), 0, "create job 11");
	ok(lock_free(lp), "lock free after a successful create");
	is_int(jobcg_job_create(ctx, 11, NULL, 0, NULL), -EEXIST, "creating job 11 again: -EEXIST");
	ok(lock_free(lp), "lock free after -EEXIST");
	ok(kcli_exists("%s/job_11", root), "the existing job 11 is untouched");

	/* A limit that fails inside the limits hook: unenforceable here, or a bad CPU list. */
	if (!(jobcg_ctx_sysinfo(ctx)->usable & (1u << JOBCG_CTRL_MEMORY))) {
		r = jobcg_job_create(ctx, 12, &mem, 0, NULL);
		is_int(r, -EOPNOTSUPP, "memory limit without a memory controller: -EOPNOTSUPP");
		ok(strstr(jobcg_last_error()->message, "memory") != NULL, "error names memory: %s",
		   jobcg_last_error()->message);
	} else {
		struct jobcg_limits bad = {.cpus = "100000-100001"};

		r = jobcg_job_create(ctx, 12, &bad, 0, NULL);
		ok(r < 0, "impossible cpuset.cpus fails: %d", r);
		ok(strstr(jobcg_last_error()->message, "cpuset.cpus") != NULL,
		   "error names the file: %s", jobcg_last_error()->message);
		mem.mem_bytes = 0;
	}
	ok(lock_free(lp), "lock free after a failed limit (hook) step");
	ok(!kcli_exists("%s/job_12", root), "job_12 rolled back");
	mem.best_effort = true;
	is_int(jobcg_job_create(ctx, 12, &mem, 0, NULL), 0, "with best_effort it is created");
	is_int(jobcg_job_remove(ctx, 12, 0), 0, "remove job 12");

	is_int(jobcg_step_create(ctx, 99, NULL, 0, sid), -ENOENT, "step in a missing job: -ENOENT");
	ok(lock_free(lp), "lock free after -ENOENT");
	is_int(jobcg_step_create(ctx, 11, "nope", 0, sid), -EINVAL, "invalid step id: -EINVAL");
	ok(lock_free(lp), "lock free after -EINVAL");
	is_int(jobcg_step_create(ctx, 11, NULL, 0, sid), 0, "step in job 11");
	is_str(sid, "0", "first step id is 0");
	is_int(jobcg_step_create(ctx, 11, "0", 0, NULL), -EEXIST, "step 0 again: -EEXIST");
	ok(lock_free(lp), "lock free after step -EEXIST");
	is_int(jobcg_step_create(ctx, 11, NULL, 0, sid), 0, "next step");
	is_str(sid, "1", "next step id is 1");

	/* A step id is never reused in a job, even once its step is gone: one job.step, one
	 * accounting record. Slurm's own ids (scheduled) may come in any order. */
	is_int(jobcg_step_remove(ctx, 11, "0", 0), 0, "step 11.0 ends");
	is_int(jobcg_step_create(ctx, 11, "0", 0, NULL), -EEXIST,
	       "step 0 again once gone: -EEXIST");
	ok(strstr(jobcg_last_error()->message, "the next free one is 2") != NULL,
	   "the error names the next free id: %s", jobcg_last_error()->message);
	ok(lock_free(lp), "lock free after a reused step id");
	ok(!kcli_exists("%s/job_11/step_0", root), "and step 0 was not made");
	is_int(jobcg_step_create(ctx, 11, "5", 0, NULL), 0, "an explicit id past the count");
	is_int(jobcg_step_create(ctx, 11, "3", 0, NULL), -EEXIST,
	       "below it (skipped) is refused too");
	is_int(jobcg_step_create(ctx, 11, "3", JOBCG_STEP_ID_SCHEDULED, NULL), 0,
	       "but taken when a scheduler assigned it (out of order)");
	is_int(jobcg_step_create(ctx, 11, "batch", 0, NULL), 0, "a named step is unaffected");
	is_int(jobcg_step_remove(ctx, 11, "batch", 0), 0, "step 11.batch ends");
	is_int(jobcg_step_create(ctx, 11, "batch", 0, NULL), -EEXIST,
	       "but a name is not made again once gone: -EEXIST");
	ok(strstr(jobcg_last_error()->message, "never reused") != NULL, "saying why: %s",
	   jobcg_last_error()->message);
	ok(lock_free(lp), "lock free after a reused step name");
	is_int(jobcg_step_create(ctx, 11, "batch", JOBCG_STEP_ID_SCHEDULED, NULL), 0,
	       "unless a scheduler (Slurm) assigned it");
	is_int(jobcg_step_create(ctx, 11, "batch", JOBCG_STEP_ID_SCHEDULED, NULL), -EEXIST,
	       "which is still refused while that step exists");
	is_int(jobcg_step_create(ctx, 11, NULL, 0, sid), 0, "a picked id");
	is_str(sid, "6", "follows the highest used");

	/* A task is not started into a frozen step (the job is not frozen): it would stop before
	 * its exec, and the vfork-style spawn wait for that exec uninterruptibly. The spawn runs
	 * in a child; if it hangs, the test thaws the step after 5 s to see it end. */
	{
		struct jobcg_target t6 = {.job = 11, .step = "6", .task = JOBCG_TASK_ALL};
		struct timespec ts = {0, 10 * 1000 * 1000};
		pid_t w = 0;

		if (jobcg_ctx_sysinfo(ctx)->freeze.supported) {
			is_int(jobcg_freeze(ctx, &t6, 5000), 0, "freeze step 11.6");
			pid = fork();
			if (pid == 0) {
				char *argv[] = {"true", NULL};
				pid_t tp = -1;
				int k = jobcg_task_spawn(ctx, 11, "6", 0, argv, NULL, &tp);

				if (k == -EBUSY && strstr(jobcg_last_error()->message, "frozen"))
					_exit(0);
				_exit(1);
			}
			for (int i = 0; i < 500 && (w = waitpid(pid, &st, WNOHANG)) == 0; i++)
				nanosleep(&ts, NULL);
			ok(w == pid, "a spawn into the frozen step returns without a thaw");
			if (w != pid) {
				(void)jobcg_thaw(ctx, &t6, 5000);
				while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
					;
			}
			ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			   "refused with -EBUSY, saying frozen");
			is_int(jobcg_thaw(ctx, &t6, 5000), 0, "thaw step 11.6");
		} else
			for (int i = 0; i < 4; i++)
				tap_skip("no cgroup.freeze");
	}
	/* Nor does a freeze land between a library spawn's frozen check and its task's exec:
	 * it waits for the exec, and fails, nothing frozen, when that takes past its timeout. */
	if (jobcg_ctx_sysinfo(ctx)->freeze.supported && tap_test_hooks()) {
		struct jobcg_target t6 = {.job = 11, .step = "6", .task = JOBCG_TASK_ALL};
		char pdir[PATH_MAX];

		snprintf(pdir, sizeof(pdir), "%s/pause-spawn", ktest_tmpdir());
		mkdir(pdir, 0700);
		pid = fork();
		if (pid == 0) {
			char *argv[] = {"true", NULL};
			pid_t tp = -1;

			setenv("JOBCG_TEST_PAUSE", "spawn-before-clone", 1);
			setenv("JOBCG_TEST_PAUSE_DIR", pdir, 1);
			if (jobcg_task_spawn(ctx, 11, "6", 0, argv, NULL, &tp) < 0)
				_exit(1);
			_exit(waitpid(tp, &st, 0) == tp && WIFEXITED(st) && WEXITSTATUS(st) == 0
				  ? 0
				  : 2);
		}
		ok(kcli_wait_file(pdir, "spawn-before-clone.reached", 20000),
		   "a spawn into step 11.6 stopped between its check and its clone");
		r = jobcg_freeze(ctx, &t6, 300);
		is_int(r, -ETIMEDOUT, "freeze of step 11.6 meanwhile: -ETIMEDOUT");
		ok(r == -ETIMEDOUT &&
		       strstr(jobcg_last_error()->message, "tasks are being started"),
		   "  waiting for the spawn: %s", jobcg_last_error()->message);
		if (r == 0)
			(void)jobcg_thaw(ctx, &t6, 5000);
		kcli_pause_go(pdir, "spawn-before-clone");
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "  the task started and ran");
	} else
		for (int i = 0; i < 3; i++)
			tap_skip("a spawn stopped before its clone: %s",
				 tap_test_hooks() ? "no cgroup.freeze"
						  : "a build without test hooks");
	is_int(jobcg_job_remove(ctx, 13, 0), -ENOENT, "remove of a missing job: -ENOENT");
	ok(lock_free(lp), "lock free after failed remove");

	/* The lock excludes: while we hold it, `jobcg alloc` waits. */
	fd = open(lp, O_RDWR | O_CLOEXEC);
	ok(fd >= 0 && flock(fd, LOCK_EX) == 0, "test holds the lock");
	{
		char *args[] = {"alloc", "14", NULL};
		struct timespec ts = {0, 300 * 1000 * 1000};

		pid = kcli_start(args, NULL, NULL);
		nanosleep(&ts, NULL);
		is_int(waitpid(pid, &st, WNOHANG), 0, "jobcg alloc blocks on the held lock");
		ok(!kcli_exists("%s/job_14", root), "and has created nothing yet");
		close(fd);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "it finishes once the lock is released");
		ok(kcli_exists("%s/job_14", root), "job 14 exists");
	}
	is_int(jobcg_job_remove(ctx, 14, 0), 0, "remove job 14");

	/*
	 * The lock file unlinked while held (what `jobcg teardown` does) and made again by a
	 * newcomer: a waiter granted the flock on the old inode must not count as holding the
	 * node lock while the newcomer holds the new file. It opens the path again and waits.
	 */
	{
		char *args[] = {"alloc", "15", NULL};
		struct timespec ts = {0, 300 * 1000 * 1000};
		int nfd;

		fd = open(lp, O_RDWR | O_CLOEXEC);
		ok(fd >= 0 && flock(fd, LOCK_EX) == 0, "test holds the lock (old file)");
		pid = kcli_start(args, NULL, NULL);
		nanosleep(&ts, NULL);
		is_int(waitpid(pid, &st, WNOHANG), 0, "jobcg alloc waits on the old file");
		ok(unlink(lp) == 0, "lock file unlinked while held");
		nfd = open(lp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		ok(nfd >= 0 && flock(nfd, LOCK_EX) == 0, "a newcomer creates and holds a new one");
		close(fd);
		nanosleep(&ts, NULL);
		is_int(waitpid(pid, &st, WNOHANG), 0,
		       "granted the old inode, jobcg alloc still waits (on the new file)");
		ok(!kcli_exists("%s/job_15", root), "and has created nothing");
		close(nfd);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "it finishes once the new file is free");
		ok(kcli_exists("%s/job_15", root), "job 15 exists");
		is_int(jobcg_job_remove(ctx, 15, 0), 0, "remove job 15");
	}
	/* A lock file others may open is one they may hold, stalling every command: refused,
	 * as the job locks and the accounting log's lock are. */
	{
		char *err = NULL;
		char *args[] = {"alloc", "16", NULL};

		ok(chmod(lp, 0644) == 0, "the node lock file made readable by all");
		is_int(kcli_run(args, NULL, &err), 1, "jobcg alloc refuses it");
		ok(err && strstr(err, lp) && strstr(err, "only root can open") &&
		       strstr(err, "remove it"),
		   "naming it: %s", err ? err : "");
		free(err);
		ok(!kcli_exists("%s/job_16", root), "and creates nothing");
		ok(unlink(lp) == 0, "removed");
		is_int(kcli(NULL, "alloc", "16", NULL), 0, "then jobcg alloc makes it again");
		is_int(jobcg_job_remove(ctx, 16, 0), 0, "remove job 16");
	}
	is_int(jobcg_job_remove(ctx, 11, 0), 0, "remove job 11 with its steps");
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
