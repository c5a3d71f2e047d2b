/* Kernel test: `jobcg run` puts the command in job_<id>/step_<n>/user/task_<i>, passes its exit
 * status through (128+N for signal N) and leaves nothing behind. */
#include <sys/stat.h>
#include <regex.h>

#include "kcli.h"

static bool ends_with_task_path(const char *out, const char *root_rel, const char *suffix_re)
{
	char re_s[1024];
	regex_t re;
	bool m;

	/* the v2 line of /proc/self/cgroup */
	snprintf(re_s, sizeof(re_s), "^0::/%s/%s$", root_rel, suffix_re);
	if (regcomp(&re, re_s, REG_EXTENDED | REG_NEWLINE | REG_NOSUB) != 0)
		return false;
	m = regexec(&re, out, 0, NULL, 0) == 0;
	regfree(&re);
	return m;
}

int main(void)
{
	const char *root = kcli_setup("cli-run", "jobcg");
	const char *rel = getenv("JOBCG_ROOT");
	char *out = NULL;
	int rc;

	rc = kcli(&out, "run", "--", "cat", "/proc/self/cgroup", NULL);
	is_int(rc, 0, "run cat /proc/self/cgroup exits 0");
	ok(out && ends_with_task_path(out, rel, "job_[0-9]+/step_0/user/task_0"),
	   "task runs in <root>/job_<id>/step_0/user/task_0 (clone3)");
	if (out)
		ktest_diag_lines("", out);
	free(out);

	rc = kcli(&out, "run", "--no-clone3", "--", "cat", "/proc/self/cgroup", NULL);
	is_int(rc, 0, "run --no-clone3 exits 0");
	ok(out && ends_with_task_path(out, rel, "job_[0-9]+/step_0/user/task_0"),
	   "fork + migrate-before-exec also lands in task_0");
	free(out);

	rc = kcli(&out, "run", "--job", "7", "--step", "batch", "--ntasks", "3", "--", "sh", "-c",
		  "echo $JOBCG_JOB_ID.$JOBCG_STEP_ID.$JOBCG_TASK_ID; grep ^0:: /proc/self/cgroup",
		  NULL);
	is_int(rc, 0, "three tasks exit 0");
	ok(out && strstr(out, "7.batch.0") && strstr(out, "7.batch.1") && strstr(out, "7.batch.2"),
	   "each task gets JOBCG_JOB_ID/STEP_ID/TASK_ID");
	ok(out && ends_with_task_path(out, rel, "job_7/step_batch/user/task_2"),
	   "task 2 of step batch in job_7/step_batch/user/task_2");
	free(out);

	is_int(kcli(NULL, "run", "--", "sh", "-c", "exit 3", NULL), 3, "exit 3 is passed through");
	is_int(kcli(NULL, "run", "--", "sh", "-c", "kill -TERM $$", NULL), 128 + SIGTERM,
	       "SIGTERM death gives 128+15");
	is_int(kcli(NULL, "run", "--", "sh", "-c", "kill -KILL $$", NULL), 128 + SIGKILL,
	       "SIGKILL death gives 128+9");
	is_int(kcli(NULL, "run", "--ntasks", "2", "--", "sh", "-c", "exit $((JOBCG_TASK_ID + 4))",
		    NULL),
	       5, "several tasks: the highest exit code");
	is_int(kcli(NULL, "run", "--", "/nonexistent/command", NULL), 127,
	       "a command that does not exist gives 127");
	/* The command is found as execvp() finds it (the fast spawn looks it up itself). */
	{
		char dir[PATH_MAX], script[PATH_MAX + 32], plain[PATH_MAX + 32], path[2 * PATH_MAX];
		const char *old = getenv("PATH");
		FILE *f;

		snprintf(dir, sizeof(dir), "%s/bin", ktest_tmpdir());
		mkdir(dir, 0755);
		snprintf(script, sizeof(script), "%s/noshebang", dir);
		snprintf(plain, sizeof(plain), "%s/notexec", dir);
		f = fopen(script, "w");
		if (f) {
			fputs("echo ran as a script \"$1\"; grep ^0:: /proc/self/cgroup\n", f);
			fclose(f);
		}
		chmod(script, 0755);
		f = fopen(plain, "w");
		if (f)
			fclose(f);
		chmod(plain, 0644);
		rc = kcli(&out, "run", "--", script, "arg1", NULL);
		is_int(rc, 0, "a script without #! runs (through /bin/sh)");
		ok(out && strstr(out, "ran as a script arg1") &&
		       ends_with_task_path(out, rel, "job_[0-9]+/step_0/user/task_0"),
		   "with its argument, in its task cgroup");
		free(out);
		snprintf(path, sizeof(path), "/nonexistent-dir:%s:%s", dir, old ? old : "/bin");
		setenv("PATH", path, 1);
		rc = kcli(&out, "run", "--", "noshebang", "found", NULL);
		is_int(rc, 0, "a bare name is searched in PATH (skipping a missing directory)");
		ok(out && strstr(out, "ran as a script found"), "and runs the right file");
		free(out);
		is_int(kcli(NULL, "run", "--", "notexec", NULL), 126,
		       "a file in PATH without x permission gives 126");
		is_int(kcli(NULL, "run", "--", "no-such-command-anywhere", NULL), 127,
		       "a name found nowhere in PATH gives 127");
		if (old)
			setenv("PATH", old, 1);
	}
	/* A daemon left behind by the task is part of the step and ends with it. */
	is_int(kcli(NULL, "run", "--", "sh", "-c", "sleep 1000 & exit 0", NULL), 0,
	       "task leaving a background process exits 0");

	/* Signals sent to the runner reach the tasks; a second one kills the step. */
	{
		char script[PATH_MAX + 256], ready[PATH_MAX];
		char *args[] = {"run", "--", "sh", "-c", script, NULL};
		int st = 0, i;
		pid_t runner;

		snprintf(ready, sizeof(ready), "%s/ready", ktest_tmpdir());
		snprintf(script, sizeof(script), "trap 'exit 7' TERM; sleep 1000 & touch %s; wait",
			 ready);
		runner = kcli_start(args, NULL, NULL);
		for (i = 0; i < 500 && access(ready, F_OK) < 0; i++)
			usleep(10000);
		ok(access(ready, F_OK) == 0, "task is up");
		kill(runner, SIGTERM);
		while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
			;
		is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 7,
		       "SIGTERM to the runner is forwarded: the task's trap exits 7");

		unlink(ready);
		snprintf(script, sizeof(script),
			 "trap '' TERM; touch %s; while :; do sleep 1; done", ready);
		runner = kcli_start(args, NULL, NULL);
		for (i = 0; i < 500 && access(ready, F_OK) < 0; i++)
			usleep(10000);
		kill(runner, SIGTERM);
		usleep(200000);
		is_int(waitpid(runner, &st, WNOHANG), 0, "a task ignoring SIGTERM keeps the step");
		kill(runner, SIGTERM);
		while (waitpid(runner, &st, 0) < 0 && errno == EINTR)
			;
		is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 128 + SIGKILL,
		       "a second SIGTERM kills the step (137)");
	}

	/* A second run naming a job that is another run's ephemeral job must not join it: the
	 * first run removes its job when its step ends, which killed the joined step. */
	{
		char *args[] = {"run", "--job", "31", "--", "sleep", "1", NULL};
		char *e = NULL;
		int st = 0, i;
		pid_t first = kcli_start(args, NULL, NULL);

		for (i = 0; i < 500 && !kcli_exists("%s/job_31/step_0/user/task_0", root); i++)
			usleep(10000);
		char *second[] = {"run", "--job", "31", "--", "true", NULL};
		rc = kcli_run(second, NULL, &e);
		ok(rc == 1 && e && strstr(e, "ephemeral job of another 'jobcg run'"),
		   "a run into another run's ephemeral job is refused, saying why");
		free(e);
		while (waitpid(first, &st, 0) < 0 && errno == EINTR)
			;
		is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "the first run is unharmed");
	}

	/* The ephemeral id counter is replaced whole, never rewritten in place: no reader (nor a
	 * crash) sees part of it. The file an earlier run left is still whole after the next. */
	{
		char path[PATH_MAX], old[32] = "", *now = NULL;
		struct stat a = {}, b = {};
		int fd;

		snprintf(path, sizeof(path), "%s/ephemeral-next", getenv("JOBCG_STATE_DIR"));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		ok(fd >= 0 && pread(fd, old, sizeof(old) - 1, 0) > 0 && fstat(fd, &a) == 0,
		   "the ephemeral id counter after the runs above: %s", old);
		is_int(kcli(NULL, "run", "--", "true", NULL), 0, "one more ephemeral run");
		{
			char again[32] = "";

			ok(fd >= 0 && pread(fd, again, sizeof(again) - 1, 0) > 0 &&
			       strcmp(again, old) == 0,
			   "the counter file read before holds its old value whole (%s)", again);
		}
		ok(stat(path, &b) == 0 && b.st_ino != a.st_ino,
		   "the counter was replaced by a new file (rename)");
		if (fd >= 0)
			close(fd);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		now = fd >= 0 ? kcli_slurp(fd) : NULL;
		ok(now && strtoul(now, NULL, 10) == strtoul(old, NULL, 10) + 1,
		   "which counts one further: %s", now ? now : "");
		free(now);
		if (fd >= 0)
			close(fd);
	}

	/* A named step is one step of its job, and one record: refused while it runs and once it
	 * has ended (jobcg acct would show two records of one JOB.STEP), and never made by two
	 * runs at once. */
	{
		char ready[PATH_MAX], script[PATH_MAX + 64], user[PATH_MAX], *e = NULL;
		char *args[] = {"run", "--job", "40", "--step", "extern",
				"--",  "sh",	"-c", script,	NULL};
		char *again[] = {"run", "--job", "40", "--step", "extern", "--", "true", NULL};
		int st = 0, i, won = 0, refused = 0;
		pid_t first, racer[2];

		is_int(kcli(NULL, "alloc", "40", NULL), 0, "job 40 for named steps");
		snprintf(ready, sizeof(ready), "%s/extern-ready", ktest_tmpdir());
		snprintf(script, sizeof(script), "touch %s; exec sleep 1000", ready);
		first = kcli_start(args, NULL, NULL);
		for (i = 0; i < 500 && access(ready, F_OK) < 0; i++)
			usleep(10000);
		ok(access(ready, F_OK) == 0, "step 40.extern runs");
		rc = kcli_run(again, NULL, &e);
		ok(rc == 1 && e && strstr(e, "40.extern exists already"),
		   "a second run --step extern while it runs is refused (exit 1), saying why: %s",
		   e ? e : "");
		free(e);
		is_int(waitpid(first, &st, WNOHANG), 0, "the first run goes on");
		snprintf(user, sizeof(user), "%s/job_40/step_extern/user", root);
		is_int(kcli_count_dirs(user), 1, "and its step got no second task");
		kill(first, SIGTERM);
		while (waitpid(first, &st, 0) < 0 && errno == EINTR)
			;
		ok(!kcli_exists("%s/job_40/step_extern", root), "step 40.extern has ended");
		rc = kcli_run(again, NULL, &e);
		ok(rc == 1 && e && strstr(e, "never reused"),
		   "run --step extern once it has ended is refused too (exit 1): %s", e ? e : "");
		free(e);
		ok(!kcli_exists("%s/job_40/step_extern", root), "and nothing was made");
		rc = kcli(&out, "acct", "--job", "40", "--json", NULL);
		{
			int n = 0;

			for (const char *p = out; p && (p = strstr(p, "\"step\":\"extern\"")); p++)
				n++;
			is_int(n, 1, "one record of 40.extern");
		}
		free(out);
		/* Refused before its first task (the job has no GPU): the name is still free. */
		is_int(kcli(NULL, "run", "--job", "40", "--step", "batch", "--gres", "gpu:1", "--",
			    "true", NULL),
		       1, "run --step batch asking for a GPU the job lacks is refused");
		is_int(kcli(NULL, "run", "--job", "40", "--step", "batch", "--", "true", NULL), 0,
		       "step batch can then be made: the refused one never ran");
		/* Two runs racing for one name: one step, one refusal. */
		{
			char *race[] = {"run", "--job", "40",  "--step", "interactive",
					"--",  "sleep", "0.3", NULL};

			racer[0] = kcli_start(race, NULL, NULL);
			racer[1] = kcli_start(race, NULL, NULL);
			for (i = 0; i < 2; i++) {
				while (waitpid(racer[i], &st, 0) < 0 && errno == EINTR)
					;
				if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
					won++;
				else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
					refused++;
			}
			ok(won == 1 && refused == 1,
			   "two runs racing for step interactive: one runs, one is refused (%d, "
			   "%d)",
			   won, refused);
		}
		is_int(kcli(NULL, "release", "40", NULL), 0, "release job 40");
	}

	is_int(kcli_count_dirs(root), 1, "only system/ is left under the root");
	ok(kcli_exists("%s/system", root), "the system/ parking leaf exists");

	/* Bad input: clear errors, nothing created. */
	is_int(kcli(NULL, "run", "--step", "bogus", "--", "true", NULL), 2,
	       "invalid step id: usage error");
	is_int(kcli(NULL, "run", "--ntasks", "0", "--", "true", NULL), 2,
	       "--ntasks 0: usage error");
	is_int(kcli(NULL, "run", NULL), 2, "no command: usage error");
	return tap_done();
}
