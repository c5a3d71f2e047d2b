/*
 * jobcg daemon: the reservation watcher. The kernel changes a partition behind jobcg's back (a
 * sibling's overlapping cpuset.cpus write invalidates it, an offlined CPU or an ancestor's cut
 * shrinks it), so the daemon keeps checking: at once when a reservation's
 * cpuset.cpus.partition or cgroup.events is modified (inotify), and every period for what is
 * never notified (hotplug, ancestors); what cannot be repaired is reported once, not repaired
 * in a loop (struct failed). It runs in a child of its own, so that a verify holding
 * the node lock never delays the daemon's clients' polling loop; the daemon reaps it and starts
 * it again when it dies, since a guard nobody checks is one a sibling's write can leave broken.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common.h"
#include "jobcg/resv.h"
#include "resv_watch.h"
#include "supervise.h"
#include "util.h"

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

/*
 * A reservation whose repair left it DEGRADED. The cause is often one no repair heals (a
 * reserved CPU offlined, an ancestor's cut jobcg cannot put back), and each repair writes the
 * partition file the watcher itself watches: repairing it on every wake would wake the watcher
 * again at once, and it would verify, repair and log in a loop. So it is reported once and then
 * only verified, quietly, until what verify finds changes (the cause went, or another came):
 * then it is reported and repaired again.
 */
struct failed {
	char *name;
	char *problems; /* what verify found after the failed repair, one per line */
};

struct watch {
	struct jobcg_ctx *ctx;
	int ifd;
	struct failed *failed;
	size_t nfailed;
};

/* The kernel notifies a partition file at most every 20 ms, and later rather than never: a
 * repair's own notifications have all arrived after this. */
#define WATCH_SETTLE_MS 50
/* Checks the kernel's notifications start are this far apart at least: a cgroup whose state
 * keeps changing costs a verify pass five times a second, never a busy loop. */
#define WATCH_MIN_GAP_MS 200

/* util.c's monotonic clock, in the milliseconds the watcher counts in */
static uint64_t mono_ms(void)
{
	return now_usec() / 1000;
}

static void drain(int ifd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	if (ifd >= 0)
		while (read(ifd, buf, sizeof(buf)) > 0)
			; /* which file does not matter: every reservation is checked */
}

static struct failed *failed_find(struct watch *w, const char *name)
{
	for (size_t k = 0; k < w->nfailed; k++)
		if (strcmp(w->failed[k].name, name) == 0)
			return &w->failed[k];
	return NULL;
}

static void failed_drop(struct watch *w, struct failed *f)
{
	free(f->name);
	free(f->problems);
	*f = w->failed[--w->nfailed];
}

/* Remember NAME's repair failed leaving PROBLEMS (taken). Without memory for it, the next
 * wake repairs it again: what happened before, no worse. */
static void failed_set(struct watch *w, const char *name, char *problems)
{
	struct failed *f = failed_find(w, name), *n;

	if (!f && problems) {
		n = realloc(w->failed, (w->nfailed + 1) * sizeof(*n));
		if (n) {
			w->failed = n;
			f = &n[w->nfailed];
			*f = (struct failed){.name = strdup(name)};
			if (f->name)
				w->nfailed++;
			else
				f = NULL;
		}
	}
	if (!f) {
		free(problems);
		return;
	}
	free(f->problems);
	f->problems = problems;
	if (!problems)
		failed_drop(w, f);
}

/* The reservations deleted since: forgotten. */
static void failed_prune(struct watch *w, char **names)
{
	for (size_t k = 0; k < w->nfailed;) {
		bool listed = false;

		for (char **n = names; *n && !listed; n++)
			listed = strcmp(*n, w->failed[k].name) == 0;
		if (listed)
			k++;
		else
			failed_drop(w, &w->failed[k]);
	}
}

/* The problems of ST, one per line ("" for none); NULL on ENOMEM. */
static char *problems_text(const struct jobcg_resv_status *st)
{
	size_t n = 1;
	char *t;

	for (char **p = st->problems; p && *p; p++)
		n += strlen(*p) + 1;
	if (!(t = malloc(n)))
		return NULL;
	*t = 0;
	for (char **p = st->problems; p && *p; p++)
		strcat(strcat(t, *p), "\n");
	return t;
}

static void print_problems(const char *name, const struct jobcg_resv_status *st)
{
	for (char **p = st->problems; p && *p; p++)
		fprintf(stderr, "jobcg: daemon: reservation %s: %s\n", name, *p);
}

/* Verify NAME and repair it when DEGRADED, unless its last repair failed and nothing changed
 * since. Whether it wrote anything (a repair). */
static bool check_one(struct watch *w, const char *name, const char *why)
{
	struct jobcg_resv_status *st = NULL;
	struct failed *f = failed_find(w, name);
	char *now;

	if (jobcg_resv_verify(w->ctx, name, 0, &st) < 0) {
		fprintf(stderr, "jobcg: daemon: reservation %s: %s\n", name,
			jobcg_last_error()->message);
		return false;
	}
	if (st->valid) {
		if (f) {
			fprintf(stderr, "jobcg: daemon: reservation %s is VALID again (%s)\n", name,
				why);
			failed_drop(w, f);
		}
		jobcg_resv_status_free(st);
		return false;
	}
	now = problems_text(st);
	if (f && now && strcmp(now, f->problems) == 0) {
		/* As its failed repair left it: another repair would fail the same way. */
		free(now);
		jobcg_resv_status_free(st);
		return false;
	}
	free(now);
	fprintf(stderr, "jobcg: daemon: reservation %s is DEGRADED (%s):\n", name, why);
	print_problems(name, st);
	jobcg_resv_status_free(st);
	st = NULL;
	if (jobcg_resv_verify(w->ctx, name, JOBCG_RESV_REPAIR, &st) < 0) {
		fprintf(stderr, "jobcg: daemon: reservation %s: repair: %s\n", name,
			jobcg_last_error()->message);
		return true;
	}
	fprintf(stderr, "jobcg: daemon: reservation %s %s\n", name,
		st->valid ? "repaired: VALID"
			  : "repair failed: still DEGRADED; not repaired again until this changes "
			    "('jobcg resv verify --repair' tries at once)");
	if (!st->valid)
		print_problems(name, st);
	failed_set(w, name, st->valid ? NULL : problems_text(st));
	jobcg_resv_status_free(st);
	return true;
}

static void check_all(struct watch *w, const char *why)
{
	char **names = NULL;
	bool wrote = false;

	if (jobcg_resv_list(w->ctx, &names) < 0) {
		fprintf(stderr, "jobcg: daemon: reservations: %s\n", jobcg_last_error()->message);
		return;
	}
	failed_prune(w, names);
	for (char **k = names; *k; k++) {
		struct jobcg_resv_info *i = NULL;
		int r = jobcg_resv_info_get(w->ctx, *k, &i);
		bool ours;

		if (r == -ENOENT)
			continue; /* deleted meanwhile */
		if (r < 0) {
			fprintf(stderr, "jobcg: daemon: reservation %s: %s\n", *k,
				jobcg_last_error()->message);
			continue;
		}
		ours = i->created_sec && !i->removing; /* else gc's to finish, not ours to repair */
		if (ours && w->ifd >= 0 && *i->cpus)
			watch_files(w->ifd, i);
		jobcg_resv_info_free(i);
		if (ours && check_one(w, *k, why))
			wrote = true;
	}
	jobcg_strv_free(names);
	/* What a repair wrote to the partition files notifies them: those notifications are the
	 * watcher's own, not a change to look at. (One by someone else in the same instant is
	 * seen at the next period.) */
	if (wrote && w->ifd >= 0) {
		sleep_ms(WATCH_SETTLE_MS);
		drain(w->ifd);
	}
}

static void watch_loop(const struct cli_global *g, unsigned period_s)
{
	struct jobcg_config *conf = NULL;
	struct watch w = {.ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)};
	uint64_t next, last;

	if (w.ifd < 0)
		fprintf(stderr,
			"jobcg: daemon: inotify: %s; reservations are checked every %u s "
			"only\n",
			strerror(errno), period_s);
	if (cli_ctx_open(g, 0, &conf, &w.ctx)) {
		fprintf(stderr, "jobcg: daemon: reservation watcher: cannot open jobcg's context "
				"(above): exiting\n");
		_exit(1);
	}
	check_all(&w, "found at start");
	last = mono_ms();
	next = last + (uint64_t)period_s * 1000;
	for (;;) {
		struct pollfd p = {.fd = w.ifd, .events = POLLIN};
		uint64_t t = mono_ms();
		/* The period counts from the last periodic check: notifications do not put it
		 * off. */
		int k = poll(&p, 1, t >= next ? 0 : (int)(next - t));

		if (k < 0 && errno != EINTR) {
			fprintf(stderr, "jobcg: daemon: reservation watcher: poll: %s: exiting\n",
				strerror(errno));
			break;
		}
		t = mono_ms();
		if (k > 0 && t - last < WATCH_MIN_GAP_MS)
			sleep_ms((unsigned)(WATCH_MIN_GAP_MS - (t - last)));
		if (k > 0)
			drain(w.ifd);
		if (k <= 0 && mono_ms() < next)
			continue; /* EINTR */
		if (mono_ms() >= next)
			next = mono_ms() + (uint64_t)period_s * 1000;
		check_all(&w, k > 0 ? "the kernel notified a change" : "periodic check");
		last = mono_ms();
	}
	cli_ctx_close(conf, w.ctx);
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
