/* Unit test: jspank_spawn_detached() (spank/detach.c), how jobcg_spank.so starts a step's
 * watcher: a grandchild nobody but init waits for, in its own session, with nothing of its
 * starter's descriptors, signal mask or ignored signals, and execve()'s errors reported. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "detach.h"
#include "jobcg/error.h"
#include "tap.h"

/* The spawned side: what the watcher would find of its start, into @out. */
static int report(const char *out)
{
	char tmp[PATH_MAX], target[PATH_MAX];
	struct sigaction term;
	sigset_t mask;
	struct dirent *e;
	FILE *f;
	DIR *d;

	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	f = fopen(tmp, "we");
	if (!f)
		return 1;
	fprintf(f, "self %d ppid %d sid %d\n", (int)getpid(), (int)getppid(), (int)getsid(0));
	d = opendir("/proc/self/fd");
	fprintf(f, "fds");
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d) &&
		    atoi(e->d_name) != fileno(f))
			fprintf(f, " %s", e->d_name);
	if (d)
		closedir(d);
	fprintf(f, "\n");
	for (int fd = 0; fd < 3; fd++) {
		char link[64];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = 0;
		fprintf(f, "fd%d %s\n", fd, target);
	}
	sigprocmask(SIG_SETMASK, NULL, &mask);
	sigaction(SIGTERM, NULL, &term);
	fprintf(f, "usr1_blocked %d term_ignored %d env %s\n", sigismember(&mask, SIGUSR1),
		term.sa_handler == SIG_IGN, getenv("DETACH_TEST") ? getenv("DETACH_TEST") : "-");
	fclose(f);
	return rename(tmp, out) < 0;
}

static char *slurp_wait(const char *path, unsigned ms)
{
	for (unsigned i = 0; i < ms / 20; i++) {
		FILE *f = fopen(path, "re");

		if (f) {
			static char buf[4096];
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);

			fclose(f);
			buf[n] = 0;
			return buf;
		}
		nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000}, NULL);
	}
	return NULL;
}

/* One start through @how, checked from what the started program reports. */
static void check_start(const char *how, bool fork_only, const char *self, const char *out,
			int leak)
{
	char *envp[] = {(char *)"DETACH_TEST=clean", NULL};
	char *const args[] = {(char *)self, (char *)"report", (char *)out, NULL};
	char *const missing[] = {(char *)"/nonexistent/jobcg", NULL};
	int self_pid = 0, ppid = 0, sid = 0, blocked = -1, ignored = -1, r;
	char *text, env[64] = "";
	const char *s;

	unlink(out);
	r = jspank_spawn_detached_how(args, envp, fork_only);
	ok(r == 0, "%s: the program starts (%s)", how, r < 0 ? jobcg_error_message(r) : "ok");
	text = slurp_wait(out, 10000);
	ok(text != NULL, "%s: it runs and reports", how);
	if (!text)
		text = (char *)"";
	tap_diag("%s", text);
	sscanf(text, "self %d ppid %d sid %d", &self_pid, &ppid, &sid);
	/* The clone's parent is the starter's parent; the forks' grandchild is adopted. */
	ok(self_pid > 0 && ppid != getpid() && (fork_only || ppid == getppid()),
	   "%s: not a child of its starter (parent %d, starter %d, its parent %d)", how, ppid,
	   (int)getpid(), (int)getppid());
	ok(self_pid > 0 && sid == self_pid, "%s: a session of its own", how);
	ok(strstr(text, "\nfds 0 1 2\n") != NULL,
	   "%s: only stdin, stdout and stderr open (the starter's descriptor %d is not)", how,
	   leak);
	ok(strstr(text, "fd0 /dev/null\nfd1 /dev/null\nfd2 /dev/null\n") != NULL,
	   "%s: stdin, stdout and stderr are /dev/null", how);
	if ((s = strstr(text, "usr1_blocked")))
		sscanf(s, "usr1_blocked %d term_ignored %d env %63s", &blocked, &ignored, env);
	ok(blocked == 0 && ignored == 0,
	   "%s: no signal blocked or ignored (SIGUSR1 blocked %d, SIGTERM ignored %d)", how,
	   blocked, ignored);
	ok(strcmp(env, "clean") == 0, "%s: the environment given, not the starter's (%s)", how,
	   env);
	r = jspank_spawn_detached_how(missing, envp, fork_only);
	ok(r == -ENOENT && strstr(jobcg_last_error()->message, "/nonexistent/jobcg"),
	   "%s: a program that cannot be executed: -ENOENT naming it (%s)", how,
	   jobcg_error_message(r));
}

/*
 * jspank_spawn_ready(): the program's word on descriptor 3. The real `jobcg step-watch
 * --ready-fd 3` gives it once it watches its runner (here this test, so it waits until the
 * test ends and, its --step-dir never made, exits without loading anything).
 */
static void check_ready(const char *how, bool fork_only)
{
	char *envp[] = {(char *)"PATH=/usr/bin:/bin", NULL};
	char *const says[] = {(char *)"/bin/sh", (char *)"-c",
			      (char *)"printf x >&3; exec sleep 0.5", NULL};
	char *const quiet[] = {(char *)"/bin/false", (char *)"step-watch", NULL};
	char *const slow[] = {(char *)"/bin/sh", (char *)"-c", (char *)"exec sleep 2", NULL};
	char runner[64], *text, *tok;
	unsigned long long start = 0;
	FILE *f;
	int r;

	r = jspank_spawn_ready_how(says, envp, 5000, fork_only);
	ok(r == 0, "%s: a program that writes to descriptor 3 is ready (%s)", how,
	   r < 0 ? jobcg_error_message(r) : "ok");
	r = jspank_spawn_ready_how(quiet, envp, 5000, fork_only);
	ok(r == -EPROTO && strstr(jobcg_last_error()->message, "/bin/false"),
	   "%s: one that exits without a word (an old jobcg, jobcg=/bin/false): -EPROTO naming "
	   "it (%s)",
	   how, jobcg_error_message(r));
	r = jspank_spawn_ready_how(slow, envp, 200, fork_only);
	ok(r == -ETIMEDOUT, "%s: one silent past the timeout: -ETIMEDOUT (%d)", how, r);
	/* This process as a runner: PID:STARTTIME (field 22 of its stat). */
	f = fopen("/proc/self/stat", "re");
	text = f ? fgets((char[1024]){0}, 1024, f) : NULL;
	if (f)
		fclose(f);
	tok = text ? strrchr(text, ')') : NULL;
	for (int i = 2; tok && i < 22; i++)
		tok = strchr(tok + 1, ' ');
	if (tok)
		start = strtoull(tok + 1, NULL, 10);
	snprintf(runner, sizeof(runner), "%d:%llu", (int)getpid(), start);
	{
		char *const watch[] = {(char *)JOBCG_EXE,
				       (char *)"step-watch",
				       (char *)"--ready-fd",
				       (char *)"3",
				       (char *)"--step-dir",
				       (char *)"/nonexistent/jobcg-detach/step_0",
				       (char *)"9.0",
				       runner,
				       NULL};
		char *const bad[] = {(char *)JOBCG_EXE,
				     (char *)"step-watch",
				     (char *)"--ready-fd",
				     (char *)"3",
				     (char *)"9.0",
				     (char *)"12:x",
				     NULL};

		r = jspank_spawn_ready_how(watch, envp, 10000, fork_only);
		ok(r == 0, "%s: jobcg step-watch --ready-fd 3 says it watches (%s)", how,
		   r < 0 ? jobcg_error_message(r) : "ok");
		r = jspank_spawn_ready_how(bad, envp, 10000, fork_only);
		ok(r == -EPROTO, "%s: step-watch with a runner it cannot watch says nothing (%d)",
		   how, r);
	}
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/jobcg-detach-XXXXXX", out[PATH_MAX], self[PATH_MAX];
	char *envp[] = {(char *)"DETACH_TEST=clean", NULL};
	char *const relative[] = {(char *)"jobcg", NULL};
	sigset_t usr1;
	ssize_t n;
	int leak;

	if (argc == 3 && strcmp(argv[1], "report") == 0)
		return report(argv[2]);
	if (!mkdtemp(dir))
		return 1;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	snprintf(out, sizeof(out), "%s/report", dir);

	/* What slurmstepd may have that the watcher must not: an inheritable descriptor, a
	 * blocked signal, an ignored one, its environment. */
	leak = open("/dev/zero", O_RDONLY);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	signal(SIGTERM, SIG_IGN);
	setenv("DETACH_TEST", "leaked", 1);
	/* The clone3 CLONE_PARENT start where the kernel has it (x86-64, Linux 5.11), and the
	 * two forks it falls back to. */
	check_start("clone", false, self, out, leak);
	check_start("fork", true, self, out, leak);
	ok(jspank_spawn_detached(relative, envp) == -EINVAL, "a relative path is refused");
	check_ready("clone", false);
	check_ready("fork", true);

	close(leak);
	unlink(out);
	rmdir(dir);
	return tap_done();
}
