/*
 * jobcg daemon: the reservation watcher. The kernel changes a partition behind jobcg's back (a
 * sibling's overlapping cpuset.cpus write invalidates it, an offlined CPU or an ancestor's cut
 * shrinks it), so the daemon keeps checking: at once when a reservation's
 * cpuset.cpus.partition or cgroup.events is modified (inotify), and every period for what is
 * never notified (hotplug, ancestors). It runs in a child of its own, so that a verify holding
 * the node lock never delays the daemon's clients' polling loop; the daemon reaps it and starts
 * it again when it dies, since a guard nobody checks is one a sibling's write can leave broken.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "jobcg/resv.h"
#include "resv_watch.h"
#include "run.h"

static void watch_files(int ifd, const struct jobcg_resv_info *i)
{
	static const char *const files[] = {"cpuset.cpus.partition", "cgroup.events"};

	for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", i->path, files[k]);
		/* The same file twice gives the same watch; a reservation deleted meanwhile none.
		 */
		(void)inotify_add_watch(ifd, path, IN_MODIFY);
	}
}

static void check_all(struct jobcg_ctx *ctx, int ifd, const char *why)
{
	char **names = NULL;

	if (jobcg_resv_list(ctx, &names) < 0) {
		fprintf(stderr, "jobcg: daemon: reservations: %s\n", jobcg_last_error()->message);
		return;
	}
	for (char **k = names; *k; k++) {
		struct jobcg_resv_info *i = NULL;
		struct jobcg_resv_status *st = NULL;

		int r = jobcg_resv_info_get(ctx, *k, &i);

		if (r == -ENOENT)
			continue; /* deleted meanwhile */
		if (r < 0) {
			fprintf(stderr, "jobcg: daemon: reservation %s: %s\n", *k,
				jobcg_last_error()->message);
			continue;
		}
		if (i->created_sec && !i->removing && ifd >= 0 && *i->cpus)
			watch_files(ifd, i);
		if (!i->created_sec || i->removing) {
			jobcg_resv_info_free(i);
			continue; /* gc's to finish, not ours to repair */
		}
		jobcg_resv_info_free(i);
		if (jobcg_resv_verify(ctx, *k, 0, &st) < 0) {
			fprintf(stderr, "jobcg: daemon: reservation %s: %s\n", *k,
				jobcg_last_error()->message);
			continue;
		}
		if (st->valid) {
			jobcg_resv_status_free(st);
			continue;
		}
		fprintf(stderr, "jobcg: daemon: reservation %s is DEGRADED (%s):\n", *k, why);
		for (char **p = st->problems; p && *p; p++)
			fprintf(stderr, "jobcg: daemon: reservation %s: %s\n", *k, *p);
		jobcg_resv_status_free(st);
		st = NULL;
		if (jobcg_resv_verify(ctx, *k, JOBCG_RESV_REPAIR, &st) < 0) {
			fprintf(stderr, "jobcg: daemon: reservation %s: repair: %s\n", *k,
				jobcg_last_error()->message);
			continue;
		}
		fprintf(stderr, "jobcg: daemon: reservation %s %s\n", *k,
			st->valid ? "repaired: VALID" : "repair failed: still DEGRADED");
		for (char **p = st->valid ? NULL : st->problems; p && *p; p++)
			fprintf(stderr, "jobcg: daemon: reservation %s: %s\n", *k, *p);
		jobcg_resv_status_free(st);
	}
	jobcg_strv_free(names);
}

static void watch_loop(const struct cli_global *g, unsigned period_s)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);

	if (ifd < 0)
		fprintf(stderr,
			"jobcg: daemon: inotify: %s; reservations are checked every %u s "
			"only\n",
			strerror(errno), period_s);
	if (cli_ctx_open(g, 0, &conf, &ctx)) {
		fprintf(stderr, "jobcg: daemon: reservation watcher: cannot open jobcg's context "
				"(above): exiting\n");
		_exit(1);
	}
	check_all(ctx, ifd, "found at start");
	for (;;) {
		struct pollfd p = {.fd = ifd, .events = POLLIN};
		int k = poll(&p, 1, (int)(period_s * 1000));
		char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

		if (k < 0 && errno != EINTR) {
			fprintf(stderr, "jobcg: daemon: reservation watcher: poll: %s: exiting\n",
				strerror(errno));
			break;
		}
		if (k > 0)
			while (read(ifd, buf, sizeof(buf)) > 0)
				; /* which file does not matter: every reservation is checked */
		check_all(ctx, ifd, k > 0 ? "the kernel notified a change" : "periodic check");
	}
	cli_ctx_close(conf, ctx);
	_exit(1);
}

static int watch_fork(const struct cli_global *g, unsigned period_s, pid_t *ret_pid)
{
	pid_t parent = getpid(), pid = fork();

	if (pid < 0)
		return cli_fail("reservation watcher: fork: %s", strerror(errno));
	if (pid == 0) {
		sigset_t none;

		/* It works for the daemon: it ends with it, whatever way the daemon ends. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
			_exit(1);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* Started again mid-service, it would keep the daemon's clients' sockets open, and
		 * a client would never see its connection end. It opens what it needs itself. */
		if (syscall(SYS_close_range, 3, ~0U, 0) < 0)
			for (long fd = 3, n = sysconf(_SC_OPEN_MAX); fd < n; fd++)
				close((int)fd);
		watch_loop(g, period_s);
	}
	fprintf(stderr,
		"jobcg: reservations verified every %u s and on partition changes (pid %d)\n",
		period_s, (int)pid);
	*ret_pid = pid;
	return 0;
}

int resv_watch_start(struct resv_watch *w, const struct cli_global *g, unsigned period_s)
{
	int r;

	*w = (struct resv_watch){.g = g, .period_s = period_s, .delay_s = 1};
	if ((r = watch_fork(g, period_s, &w->pid)) != 0)
		return r;
	w->started_ms = run_monotonic_ms();
	return 0;
}

/* The next start at the current delay from NOW, and the delay after it doubled. */
static void schedule(struct resv_watch *w, uint64_t now)
{
	w->restart_ms = now + (uint64_t)w->delay_s * 1000;
	w->delay_s =
	    w->delay_s * 2 > RESV_WATCH_DELAY_MAX_S ? RESV_WATCH_DELAY_MAX_S : w->delay_s * 2;
}

/* Reap the watcher if it ended and say how. true when it did. */
static bool reaped(struct resv_watch *w)
{
	char how[128];
	int st = 0;
	pid_t p;

	while ((p = waitpid(w->pid, &st, WNOHANG)) < 0 && errno == EINTR)
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
	fprintf(stderr, "jobcg: daemon: the reservation watcher (pid %d) %s\n", (int)w->pid, how);
	w->pid = 0;
	return true;
}

uint64_t resv_watch_tend(struct resv_watch *w, uint64_t now, bool restart)
{
	if (w->pid > 0) {
		if (!reaped(w))
			return 0;
		/* One that ran a while died of something new: soon again. One that dies at once
		 * (a configuration that no longer loads) is started ever less often. */
		if (now - w->started_ms >= RESV_WATCH_STEADY_MS)
			w->delay_s = 1;
		schedule(w, now);
		if (restart)
			fprintf(stderr,
				"jobcg: daemon: starting the reservation watcher again in %u s\n",
				(unsigned)((w->restart_ms - now) / 1000));
	}
	if (!restart || !w->restart_ms)
		return 0;
	if (now < w->restart_ms)
		return w->restart_ms;
	w->restart_ms = 0;
	if (watch_fork(w->g, w->period_s, &w->pid) != 0) {
		/* Out of processes or memory (said above): tried again later. */
		w->pid = 0;
		schedule(w, now);
		return w->restart_ms;
	}
	w->started_ms = now;
	return 0;
}

void resv_watch_stop(struct resv_watch *w)
{
	if (w->pid <= 0)
		return;
	(void)kill(w->pid, SIGTERM);
	while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
		;
	w->pid = 0;
}
