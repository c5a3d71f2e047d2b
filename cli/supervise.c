/*
 * jobcg daemon: the children that do part of its service (the reservation watcher, the metrics
 * server) die like any process, killed, crashed or out of memory. A dead one left alone is a
 * zombie and a service gone silently while the daemon still answers its socket, so the daemon
 * reaps it, says how it died and starts another, ever less often while they keep dying at once.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"
#include "supervise.h"
#include "util.h"

int supervise_start(struct supervised *s, const char *name, int (*start)(void *arg, pid_t *ret_pid),
		    void *arg)
{
	int r;

	*s = (struct supervised){.name = name, .start = start, .arg = arg, .delay_s = 1};
	if ((r = start(arg, &s->pid)) != 0)
		return r;
	s->started_ms = run_monotonic_ms();
	return 0;
}

/* The next start at the current delay from NOW, and the delay after it doubled. */
static void schedule(struct supervised *s, uint64_t now)
{
	s->restart_ms = now + (uint64_t)s->delay_s * 1000;
	s->delay_s =
	    s->delay_s * 2 > SUPERVISE_DELAY_MAX_S ? SUPERVISE_DELAY_MAX_S : s->delay_s * 2;
}

/* Reap the child if it ended and say how. true when it did. */
static bool reaped(struct supervised *s)
{
	char how[128];
	int st = 0;
	pid_t p;

	while ((p = waitpid(s->pid, &st, WNOHANG)) < 0 && errno == EINTR)
		;
	if (p == 0)
		return false;
	if (p < 0)
		snprintf(how, sizeof(how), "is gone (%s)", strerror(errno));
	else if (WIFSIGNALED(st))
		snprintf(how, sizeof(how), "was killed by signal %d (%s)", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else
		snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(st));
	fprintf(stderr, "jobcg: daemon: the %s (pid %d) %s\n", s->name, (int)s->pid, how);
	s->pid = 0;
	return true;
}

uint64_t supervise_tend(struct supervised *s, uint64_t now, bool restart)
{
	if (s->pid > 0) {
		if (!reaped(s))
			return 0;
		/* One that ran a while died of something new: soon again. One that dies at once
		 * (a configuration that no longer loads) is started ever less often. */
		if (now - s->started_ms >= SUPERVISE_STEADY_MS)
			s->delay_s = 1;
		schedule(s, now);
		if (restart)
			fprintf(stderr, "jobcg: daemon: starting the %s again in %u s\n", s->name,
				(unsigned)((s->restart_ms - now) / 1000));
	}
	if (!restart || !s->restart_ms)
		return 0;
	if (now < s->restart_ms)
		return s->restart_ms;
	s->restart_ms = 0;
	if (s->start(s->arg, &s->pid) != 0) {
		/* Out of processes or memory, or its address taken meanwhile (said above). */
		s->pid = 0;
		schedule(s, now);
		fprintf(stderr, "jobcg: daemon: the %s did not start: trying again in %u s\n",
			s->name, (unsigned)((s->restart_ms - now) / 1000));
		return s->restart_ms;
	}
	s->started_ms = now;
	return 0;
}

void supervise_stop(struct supervised *s)
{
	if (s->pid <= 0)
		return;
	(void)kill(s->pid, SIGTERM);
	while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
		;
	s->pid = 0;
}

void supervise_child_setup(pid_t parent, int keep)
{
	/* The daemon's own handlers and ignored signals: SIGPIPE and SIGHUP would stay ignored
	 * across an exec, unlike in a child started before the daemon set them. */
	static const int sigs[] = {SIGTERM, SIGINT, SIGCHLD, SIGPIPE, SIGHUP};
	sigset_t none;

	/* It works for the daemon: it ends with it, whatever way the daemon ends. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
		_exit(1);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	close_fds_but(3, &keep, 1);
}
