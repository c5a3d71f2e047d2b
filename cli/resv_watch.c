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
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common.h"
#include "jobcg/resv.h"
#include "resv_watch.h"
#include "supervise.h"

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

/* The supervisor's start: fork the watcher. */
static int watch_fork(void *arg, pid_t *ret_pid)
{
	struct resv_watch *w = arg;
	pid_t parent = getpid(), pid = fork();

	if (pid < 0)
		return cli_fail("reservation watcher: fork: %s", strerror(errno));
	if (pid == 0) {
		/* It opens what it needs itself. */
		supervise_child_setup(parent, -1);
		watch_loop(w->g, w->period_s);
	}
	fprintf(stderr,
		"jobcg: reservations verified every %u s and on partition changes (pid %d)\n",
		w->period_s, (int)pid);
	*ret_pid = pid;
	return 0;
}

int resv_watch_start(struct resv_watch *w, const struct cli_global *g, unsigned period_s)
{
	w->g = g;
	w->period_s = period_s;
	return supervise_start(&w->sup, "reservation watcher", watch_fork, w);
}
