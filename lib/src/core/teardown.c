/* jobcg: removing a whole tree (a test root, a side-by-side install): its jobs, each with its
 * record, the device policy pinned for it, its directories, its node lock file and the Slurm
 * plugin's CPU topology cache. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroupfs.h"
#include "job_internal.h"
#include "joblock.h"
#include "log.h"
#include "scope.h"
#include "tree.h"
#include "util.h"
#include "devices.h"
#include "jobcg/adopt.h"
#include "jobcg/job.h"
#include "jobcg/resv.h"

/* Is the calling process in @ctx's tree root or below? Killing the tree would kill it. */
static bool self_inside(struct jobcg_ctx *ctx)
{
	_cleanup_free_ char *mine = NULL;
	const char *root = jobcg_ctx_root(ctx);
	size_t n = strlen(root);

	if (jobcg_pid_job(ctx, getpid(), NULL, &mine) < 0)
		return false;
	return strncmp(mine, root, n) == 0 && (mine[n] == 0 || mine[n] == '/');
}

/* Refuse a root that is not a jobcg tree: only system/, job_<id> and resv_<name> directories
 * may be in it (unless forced), and never the mount itself or a cgroup holding the caller. */
static int check_root(struct jobcg_ctx *ctx, bool force)
{
	const char *root = jobcg_ctx_root(ctx), *mount = jobcg_ctx_mount(ctx);
	_cleanup_strv_free_ char **kids = NULL;
	int r;

	if (streq(root, mount))
		return error_set(-EPERM, "the tree root is the cgroup mount %s itself: not removed",
				 mount);
	if (self_inside(ctx))
		return error_set(
		    -EPERM, "this process runs inside %s: not removing the tree it is in", root);
	if (force)
		return 0;
	r = cgfs_children(root, &kids);
	if (r < 0)
		return r;
	for (char **k = kids; *k; k++) {
		const char *name;
		uint32_t id;

		if (!streq(*k, "system") && tree_parse_job_dirname(*k, &id) < 0 &&
		    tree_parse_resv_dirname(*k, &name) < 0)
			return error_set(-ENOTEMPTY,
					 "%s holds '%s', which is not jobcg's: not a jobcg tree? "
					 "(a forced teardown removes it too)",
					 root, *k);
	}
	return 0;
}

/* "a, b, c, ..." of the first few of N job ids (IDS) or names (NAMES) into LIST. */
static void few(char *list, size_t size, size_t n, const uint32_t *ids, char **names)
{
	size_t used = 0;

	for (size_t i = 0; i < n && i < 8; i++) {
		int w = ids ? snprintf(list + used, size - used, "%s%u", i ? ", " : "", ids[i])
			    : snprintf(list + used, size - used, "%s%s", i ? ", " : "", names[i]);

		if (w < 0 || (size_t)w >= size - used)
			break;
		used += (size_t)w;
	}
	if (n > 8 && used + 5 < size)
		strcat(list, ", ...");
}

/* Refuse while jobs or reservations live, naming a few of each. */
static int refuse_live(const uint32_t *ids, size_t n, char **resv)
{
	size_t nr = strv_length(resv);
	char jobs[160] = "", resvs[320] = "";

	few(jobs, sizeof(jobs), n, ids, NULL);
	few(resvs, sizeof(resvs), nr, NULL, resv);
	if (nr == 0)
		return error_set(-EBUSY,
				 "%zu job%s in the tree (%s): release %s first, or force the "
				 "teardown (the jobs are then released as cancelled)",
				 n, n == 1 ? "" : "s", jobs, n == 1 ? "it" : "them");
	if (n == 0)
		return error_set(-EBUSY,
				 "%zu reservation%s in the tree (%s): delete %s first ('jobcg resv "
				 "delete'), or force the teardown",
				 nr, nr == 1 ? "" : "s", resvs, nr == 1 ? "it" : "them");
	return error_set(-EBUSY,
			 "%zu job%s (%s) and %zu reservation%s (%s) in the tree: release the "
			 "jobs and delete the reservations first, or force the teardown (the jobs "
			 "are then released as cancelled)",
			 n, n == 1 ? "" : "s", jobs, nr, nr == 1 ? "" : "s", resvs);
}

/* Detach and unpin the node-mode device policy pinned for this root, if any. */
static int remove_pins(struct jobcg_ctx *ctx, bool *ret_removed)
{
	struct jobcg_devpolicy *p = NULL;
	int r = jobcg_devpolicy_open_pinned(jobcg_ctx_config(ctx), jobcg_ctx_root(ctx), &p);

	if (r == -ENOENT)
		return 0; /* nothing pinned (linear programs go with their cgroups) */
	if (r < 0)
		return r;
	r = jobcg_devpolicy_destroy(p);
	if (r < 0)
		return r;
	*ret_removed = true;
	return 0;
}

/*
 * SIGTERM, under the node lock, to every process of the tree that is in no job: system/ (a
 * scope's keeper, what was parked there) and, forced, directories that are not jobcg's. Those
 * not frozen are added to @wait (their "populated" is waited on with the jobs').
 */
static int term_outside_jobs(struct jobcg_ctx *ctx, char ***wait)
{
	const char *root = jobcg_ctx_root(ctx);
	_cleanup_strv_free_ char **kids = NULL;
	int r = cgfs_children(root, &kids);

	if (r < 0)
		return r;
	for (char **k = kids; *k; k++) {
		_cleanup_free_ char *dir = NULL;
		const char *name;
		bool populated = false, frozen = false;
		uint32_t id;

		/* Jobs (in a reservation too) had theirs from their release. */
		if (tree_parse_job_dirname(*k, &id) >= 0 || tree_parse_resv_dirname(*k, &name) >= 0)
			continue;
		if (!(dir = cgfs_path(root, *k)))
			return -ENOMEM;
		if (cgfs_events(dir, &populated, &frozen) < 0 || !populated || frozen ||
		    tree_signal(dir, SIGTERM) <= 0)
			continue;
		if ((r = strv_push(wait, TAKE_PTR(dir))) < 0)
			return r;
	}
	jobcg_error_clear();
	return 0;
}

/* Wait until @dir has no process left, or @deadline (now_usec()) has passed. */
static void wait_empty(const char *dir, uint64_t deadline)
{
	uint64_t now = now_usec();

	if (now < deadline)
		(void)cgfs_wait_events(dir, "populated", 0,
				       (unsigned)((deadline - now + 999) / 1000));
}

/*
 * Release every job of @ids as a scheduler ends them at once (Slurm's KillWait): SIGTERM to
 * every process of the tree, one grace period of @grace_ms for all of them, then each job
 * removed (what is left killed) with its record, CANCELLED. Returns how many were removed.
 */
static unsigned release_all(struct jobcg_ctx *ctx, const uint32_t *ids, size_t n, unsigned grace_ms)
{
	_cleanup_free_ struct job_grace *g = calloc(n + 1, sizeof(*g));
	_cleanup_strv_free_ char **wait = calloc(1, sizeof(char *));
	uint64_t deadline = now_usec() + (uint64_t)grace_ms * 1000;
	unsigned removed = 0;

	/* Without memory for the grace, the jobs are killed at once, as with --grace 0. */
	if (!g || !wait)
		grace_ms = 0;
	/* A job that another remover has, or that fails here, is left to the removal below,
	 * which says why. */
	for (size_t i = 0; g && i < n; i++)
		if (job_grace_begin(ctx, ids[i], JOBCG_JOB_REMOVE_CANCELLED, grace_ms > 0, &g[i]) <
		    0)
			jobcg_error_clear();
	if (grace_ms > 0 && term_outside_jobs(ctx, &wait) < 0)
		jobcg_error_clear();
	/* One grace period for all, the node lock held throughout: nothing begins meanwhile. */
	for (size_t i = 0; grace_ms > 0 && i < n; i++)
		if (g[i].sig)
			wait_empty(g[i].dir, deadline);
	for (char **w = wait; grace_ms > 0 && *w; w++)
		wait_empty(*w, deadline);
	jobcg_error_clear();
	for (size_t i = 0; i < n; i++) {
		int r = g && g[i].dir ? job_grace_end(ctx, &g[i])
				      : jobcg_job_remove(ctx, ids[i], JOBCG_JOB_REMOVE_CANCELLED);

		if (g)
			job_grace_done(&g[i]);
		if (r == -ENOENT)
			continue;
		/* Once more, as the gc that the tree's removal forestalls would: a failure that
		 * passed (an rmdir the kernel refused once) must not cost the job its record. */
		if (r < 0) {
			struct jobcg_error first = *jobcg_last_error();

			jobcg_error_clear();
			r = jobcg_job_remove(ctx, ids[i], JOBCG_JOB_REMOVE_CANCELLED);
			if (r == -ENOENT)
				continue;
			if (r < 0)
				jobcg_error_restore(&first);
		}
		if (r < 0) {
			/* Killed and removed with the tree below, without its record. */
			log_warning("job %u: %s (removed with the tree, without its record)",
				    ids[i], jobcg_last_error()->message);
			jobcg_error_clear();
			continue;
		}
		removed++;
	}
	return removed;
}

/*
 * The directories above the root that the mkdir backend made for it (SCOPE_MADE_XATTR), each once
 * empty, from the root's parent up: the hierarchy is left as jobcg found it. The first one it
 * did not make, or cannot remove (another tree below it), ends the walk.
 */
static void remove_made_ancestors(struct jobcg_ctx *ctx)
{
	size_t mount_len = strlen(jobcg_ctx_mount(ctx));
	_cleanup_free_ char *p = strdup(jobcg_ctx_root(ctx));

	if (!p)
		return;
	for (;;) {
		_cleanup_free_ char *mark = NULL;
		char *slash = strrchr(p, '/');

		if (!slash || (size_t)(slash - p) <= mount_len)
			return;
		*slash = '\0';
		if (cgfs_xattr_get(p, SCOPE_MADE_XATTR, &mark) < 0) {
			jobcg_error_clear();
			return;
		}
		if (rmdir(p) < 0) {
			log_debug("%s, which jobcg made for the tree, stays: %s", p,
				  strerror(errno));
			return;
		}
		log_info("removed %s, which jobcg made for the tree", p);
	}
}

JOBCG_EXPORT int jobcg_tree_teardown(struct jobcg_ctx *ctx, unsigned flags, unsigned grace_ms,
				     struct jobcg_teardown_stats *ret)
{
	struct jobcg_teardown_stats st = {};
	bool force = flags & JOBCG_TEARDOWN_FORCE;
	const char *root = jobcg_ctx_root(ctx);
	_cleanup_free_ uint32_t *ids = NULL;
	_cleanup_free_ char *lock = NULL;
	_cleanup_strv_free_ char **resv = NULL;
	size_t n = 0;
	int r;

	if (flags & ~JOBCG_TEARDOWN_FORCE)
		return error_set(-EINVAL, "unknown teardown flags 0x%x", flags);
	if (access(root, F_OK) < 0 && errno == ENOENT) {
		log_info("no tree at %s: nothing to remove", root);
		if (ret)
			*ret = st;
		return 0;
	}
	r = check_root(ctx, force);
	if (r < 0)
		return r;
	lock = strdup(jobcg_ctx_lock_path(ctx));
	if (!lock)
		return -ENOMEM;
	/* Held throughout (the calls below take it again, nested): no job or step can be
	 * made meanwhile. */
	r = jobcg_ctx_lock(ctx);
	if (r < 0)
		return r;
	r = jobcg_job_list(ctx, &ids, &n);
	if (r < 0)
		goto out;
	r = jobcg_resv_list(ctx, &resv);
	if (r < 0)
		goto out;
	if ((n > 0 || resv[0]) && !force) {
		r = refuse_live(ids, n, resv);
		goto out;
	}
	if (n > 0) {
		struct jobcg_gc_stats gs = {};

		/* First what gc would sweep, so that dead runners' steps get their NODE_FAIL
		 * records, then every job left, released as cancelled. */
		/* What gc could not sweep (a damaged job or reservation) goes with the tree
		 * below all the same. */
		r = jobcg_gc(ctx, 0, &gs);
		if (r < 0) {
			log_warning("gc before the teardown: %s", jobcg_last_error()->message);
			jobcg_error_clear();
		}
		st.jobs_removed += gs.jobs_removed;
		st.steps_removed += gs.steps_removed;
		free(ids);
		ids = NULL;
		r = jobcg_job_list(ctx, &ids, &n);
		if (r < 0)
			goto out;
	}
	/* Forced: the jobs left, and what else runs in the tree, end as Slurm ends a job. */
	if (force)
		st.jobs_removed += release_all(ctx, ids, n, grace_ms);
	/* Deleted as 'jobcg resv delete' does: what they hold outside the tree (memory.min and
	 * exclusive CPUs of the ancestors) is given back too. */
	for (char **k = resv; *k; k++) {
		r = jobcg_resv_delete(ctx, *k);
		if (r < 0 && r != -ENOENT) /* ENOENT: gc above finished a half-made one */
			log_warning("reservation %s: %s (removed with the tree)", *k,
				    jobcg_last_error()->message);
		jobcg_error_clear();
	}
	r = remove_pins(ctx, &st.pins_removed);
	if (r < 0) {
		jobcg_error_prefix("device policy of %s", root);
		goto out;
	}
	/* The pin directory too, once nothing of another tree (BpfPinDir may be shared) is in it:
	 * a side-by-side install or a test root leaves nothing behind in the bpf filesystem. */
	{
		const char *pins = jobcg_ctx_config(ctx)->cgroup.bpf_pin_dir;

		if (pins && rmdir(pins) < 0 && errno != ENOENT && errno != ENOTEMPTY &&
		    errno != EEXIST)
			log_warning("cannot remove %s: %s", pins, strerror(errno));
	}
	/* system/ (a scope's keeper) and whatever a forced teardown found there. */
	r = tree_kill_and_remove(root);
	if (r < 0 && access(root, F_OK) == 0) {
		jobcg_error_prefix("removing %s", root);
		goto out;
	}
	st.root_removed = true;
	st.resv_removed = (unsigned)strv_length(resv);
	remove_made_ancestors(ctx);
	/* The lock file goes while held, and so does the Slurm plugin's CPU topology cache
	 * beside it. Whoever waits on the old file finds, once granted, that its name is gone
	 * and opens the path again (jobcg_ctx_lock), so it queues behind any newcomer rather
	 * than holding a second lock. The accounting log stays: it is the node's history, not
	 * the tree's state. */
	job_locks_remove_all(ctx); /* the jobs' freeze locks of a kernel without cgroup.kill */
	{
		_cleanup_free_ char *topo = ctx_state_file(ctx, CTX_CPU_TOPOLOGY_FILE);

		if (topo && unlink(topo) < 0 && errno != ENOENT)
			log_warning("cannot remove %s: %s", topo, strerror(errno));
	}
	if (unlink(lock) < 0 && errno != ENOENT)
		log_warning("cannot remove %s: %s", lock, strerror(errno));
	r = 0;
out:
	jobcg_ctx_unlock(ctx);
	if (r >= 0) {
		log_info("removed the tree %s", root);
		if (ret)
			*ret = st;
	}
	return r;
}
