/* jobcg: processes of a job, step or task: list, signal, freeze/thaw (event driven), kill. */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/wait.h>

#include "cgroupfs.h"
#include "joblock.h"
#include "log.h"
#include "procs.h"
#include "tree.h"
#include "util.h"

static int target_dir(struct jobcg_ctx *ctx, const struct jobcg_target *t, char **ret)
{
	char buf[64];
	int r = jobcg_target_path(ctx, t, ret);

	if (r < 0)
		return r;
	if (access(*ret, F_OK) < 0) {
		free(*ret);
		*ret = NULL;
		return error_set(-ENOENT, "no %s %s",
				 !t->step[0]		     ? "job"
				 : t->task == JOBCG_TASK_ALL ? "step"
							     : "task",
				 jobcg_target_format(t, buf, sizeof(buf)));
	}
	return 0;
}

JOBCG_EXPORT int jobcg_pids(struct jobcg_ctx *ctx, const struct jobcg_target *t, pid_t **ret,
			    size_t *ret_n)
{
	_cleanup_free_ char *dir = NULL;
	int r = target_dir(ctx, t, &dir);

	if (r < 0)
		return r;
	return cgfs_pids(dir, true, ret, ret_n);
}

JOBCG_EXPORT int jobcg_signal(struct jobcg_ctx *ctx, const struct jobcg_target *t, int sig)
{
	_cleanup_free_ char *dir = NULL;
	int r;

	if (sig < 0 || sig >= NSIG)
		return error_set(-EINVAL, "invalid signal %d", sig);
	r = target_dir(ctx, t, &dir);
	if (r < 0)
		return r;
	return tree_signal(dir, sig);
}

JOBCG_EXPORT int jobcg_target_note_signal(struct jobcg_ctx *ctx, const struct jobcg_target *t,
					  int sig)
{
	_cleanup_free_ char *dir = NULL, *old = NULL, *v = NULL;
	uint64_t mask = 0;
	int r;

	if (sig < 1 || sig > 64)
		return error_set(-EINVAL, "invalid signal %d", sig);
	if (t->task != JOBCG_TASK_ALL || !ctx->info->xattr.supported)
		return 0;
	if ((r = target_dir(ctx, t, &dir)) < 0)
		return r;
	/* A mask, so that a SIGTERM noted before a SIGKILL still counts. Two notes racing may
	 * lose one signal: the outcome is then FAILED, as without a note. */
	if (cgfs_xattr_get(dir, SIGNALLED_XATTR, &old) == 0 &&
	    parse_u64(old, UINT64_MAX, &mask) < 0)
		mask = 0;
	jobcg_error_clear();
	mask |= UINT64_C(1) << (sig - 1);
	if (!(v = strdup_printf("%" PRIu64, mask)))
		return -ENOMEM;
	return cgfs_xattr_set(dir, SIGNALLED_XATTR, v);
}

bool target_died_of_noted(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_dir,
			  const int *status, unsigned n)
{
	_cleanup_free_ char *jdir = NULL;
	uint64_t died = 0, noted = 0;

	/* What the tasks died of first: a step that ended on its own reads no mark. */
	for (unsigned i = 0; status && i < n; i++)
		if (WIFSIGNALED(status[i]) && WTERMSIG(status[i]) >= 1 && WTERMSIG(status[i]) <= 64)
			died |= UINT64_C(1) << (WTERMSIG(status[i]) - 1);
	if (!died || !ctx->info->xattr.supported || !(jdir = tree_job_dir(ctx, job_id)))
		return false;
	for (int k = 0; k < 2; k++) {
		_cleanup_free_ char *v = NULL;
		uint64_t m;

		if (cgfs_xattr_get(k ? jdir : step_dir, SIGNALLED_XATTR, &v) == 0 &&
		    parse_u64(v, UINT64_MAX, &m) == 0)
			noted |= m;
	}
	jobcg_error_clear();
	return (died & noted) != 0;
}

/* Collect @dir and the cgroups below it whose own cgroup.freeze is 1. */
static int frozen_below(const char *dir, unsigned depth, char ***acc)
{
	_cleanup_strv_free_ char **kids = NULL;
	uint64_t v = 0;
	int r;

	if (depth > 8)
		return 0; /* our tree is at most 4 deep below a job */
	if (cgfs_read_u64(dir, "cgroup.freeze", &v) == 0 && v == 1 &&
	    (r = strv_push(acc, strdup(dir))) < 0)
		return r;
	r = cgfs_children(dir, &kids);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	for (char **k = kids; *k; k++) {
		_cleanup_free_ char *sub = cgfs_path(dir, *k);

		if (!sub)
			return -ENOMEM;
		r = frozen_below(sub, depth + 1, acc);
		if (r < 0)
			return r;
	}
	return 0;
}

/* How long a freeze asked not to wait (timeout 0) may wait for a launch under way. */
#define FREEZE_LOCK_TIMEOUT_MS 10000

static int set_frozen(struct jobcg_ctx *ctx, const struct jobcg_target *t, bool freeze,
		      unsigned timeout_ms)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_strv_free_ char **dirs = NULL;
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000u;
	int r = target_dir(ctx, t, &dir);

	if (r < 0)
		return r;
	if (freeze) {
		_cleanup_free_ char *who = NULL;
		_cleanup_close_ int lock = -1;
		char buf[64];
		uint64_t was = 0, now;
		unsigned left;

		/* Not between a spawner's frozen check and its task's exec (spawn.c, spawn_lock()):
		 * we wait for the exec, then freeze the task with the others. Held until the freeze
		 * is complete or undone. A thaw takes no lock: it is what ends a spawner's wait
		 * when a freeze from outside jobcg got in anyway. */
		r = job_lock(ctx, NULL, t->job, JOB_LOCK_FREEZE,
			     timeout_ms ? timeout_ms : FREEZE_LOCK_TIMEOUT_MS, &lock, &who);
		if (r == -ETIMEDOUT)
			return error_set(r,
					 "cannot freeze %s: tasks are being started in job %u "
					 "(by %s) for more than %u ms; nothing was frozen",
					 jobcg_target_format(t, buf, sizeof(buf)), t->job,
					 who ? who : "another process",
					 timeout_ms ? timeout_ms : FREEZE_LOCK_TIMEOUT_MS);
		if (r < 0)
			return r;
		(void)cgfs_read_u64(dir, "cgroup.freeze", &was);
		r = cgfs_freeze(dir, true);
		if (r < 0 || timeout_ms == 0)
			return r;
		/* What is left of the timeout after the wait for the lock. */
		now = now_usec();
		left = now < deadline ? (unsigned)((deadline - now) / 1000) : 0;
		r = cgfs_wait_events(dir, "frozen", 1, left ? left : 1);
		if (r != -ETIMEDOUT || was == 1)
			return r;
		/* A failed freeze must not leave the target half frozen, its processes stopped
		 * at random points while the caller believes nothing happened; a freeze someone
		 * else asked for earlier (was 1) is not ours to undo. */
		if ((r = cgfs_freeze(dir, false)) < 0)
			return error_set(r,
					 "target %s not frozen within %u ms, and thawing it "
					 "again failed: %s",
					 jobcg_target_format(t, buf, sizeof(buf)), timeout_ms,
					 strerror(-r));
		return error_set(-ETIMEDOUT, "target %s not frozen within %u ms: thawed again",
				 jobcg_target_format(t, buf, sizeof(buf)), timeout_ms);
	}
	/* Below a frozen step or job the target would never report frozen 0: say so at once,
	 * naming what to thaw, rather than time out (or, without a wait, succeed) having
	 * thawed nothing that runs. */
	{
		_cleanup_free_ char *above = NULL;
		char buf[64];

		if (cgfs_freeze_asked(dir, true, &above) > 0)
			return error_set(-EBUSY,
					 "cannot thaw %s: %s above it is frozen (thaw that: "
					 "thawing a target thaws what is below it)",
					 jobcg_target_format(t, buf, sizeof(buf)), above);
	}
	/* A step frozen on its own stays frozen when only its job is thawed: thawing a target
	 * thaws everything below it that was frozen explicitly. */
	r = frozen_below(dir, 0, &dirs);
	if (r < 0)
		return r;
	r = cgfs_freeze(dir, false);
	if (r < 0)
		return r;
	for (char **d = dirs; d && *d; d++)
		if ((r = cgfs_freeze(*d, false)) < 0 && r != -ENOENT)
			return r;
	if (timeout_ms == 0)
		return 0;
	for (char **d = dirs; d && *d; d++) {
		uint64_t now = now_usec();
		unsigned left = now < deadline ? (unsigned)((deadline - now) / 1000) : 0;

		r = cgfs_wait_events(*d, "frozen", 0, left);
		if (r < 0)
			return r;
	}
	return cgfs_wait_events(dir, "frozen", 0, timeout_ms);
}

JOBCG_EXPORT int jobcg_freeze(struct jobcg_ctx *ctx, const struct jobcg_target *t,
			      unsigned timeout_ms)
{
	return set_frozen(ctx, t, true, timeout_ms);
}

JOBCG_EXPORT int jobcg_thaw(struct jobcg_ctx *ctx, const struct jobcg_target *t,
			    unsigned timeout_ms)
{
	return set_frozen(ctx, t, false, timeout_ms);
}

/* How long a kill waits for a launch under way in its job (spawn.c, spawn_lock()). */
#define KILL_LOCK_TIMEOUT_MS 2000

JOBCG_EXPORT int jobcg_kill(struct jobcg_ctx *ctx, const struct jobcg_target *t,
			    unsigned timeout_ms)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int lock = -1;
	int r = target_dir(ctx, t, &dir);

	if (r < 0)
		return r;
	/* A kill that lands in the middle of a launch would kill the tasks started so far and
	 * miss those started after it, which then run on alone. So it waits, briefly, for the
	 * launch to end (the whole step dies then). A launch that takes longer (a spawner
	 * stopped, or caught by a freeze from outside jobcg) does not stop the kill: it goes on
	 * without the lock. */
	r = job_lock(ctx, NULL, t->job, JOB_LOCK_EXCLUSIVE,
		     timeout_ms && timeout_ms < KILL_LOCK_TIMEOUT_MS ? timeout_ms
								     : KILL_LOCK_TIMEOUT_MS,
		     &lock, NULL);
	if (r < 0)
		log_debug("killing %s without waiting for a launch in job %u: %s", dir, t->job,
			  r == -ETIMEDOUT ? "it takes too long" : jobcg_error_message(r));
	jobcg_error_clear();
	r = tree_kill(dir, timeout_ms);
	/* 0: the kill is sent, and not waited for */
	return r == -ETIMEDOUT && timeout_ms == 0 ? 0 : r;
}

int job_accepts_procs_locked(struct jobcg_ctx *ctx, uint32_t job_id)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job_id), *mark = NULL;
	int r;

	if (!jdir)
		return -ENOMEM;
	if (access(jdir, F_OK) < 0)
		return error_set(-ENOENT, "no job %u (%s)", job_id, jdir);
	/* Without xattrs there are no marks to tell a complete job from a half-made one. */
	if (!ctx->info->xattr.supported)
		return 0;
	/* A job without the mark has no device grant yet (or never will: its creation died),
	 * so a process put there would hold none of the job's limits for sure. */
	r = jobcg_job_xattr_get(ctx, job_id, "created", &mark);
	if (r == -ENODATA)
		return error_set(-EBUSY,
				 "job %u is not completely created (a creation still running, or "
				 "one that died half way: 'jobcg gc' removes it)",
				 job_id);
	if (r == -ENOENT)
		return error_set(-ENOENT, "no job %u (%s)", job_id, jdir);
	if (r < 0)
		return r;
	free(mark);
	mark = NULL;
	/* Its processes are being killed and its grants revoked: nothing may join it. */
	r = jobcg_job_xattr_get(ctx, job_id, "removing", &mark);
	if (r == 0)
		return error_set(-ESHUTDOWN, "job %u is being released: no process may join it",
				 job_id);
	if (r == -ENOENT)
		return error_set(-ENOENT, "no job %u (%s)", job_id, jdir);
	if (r != -ENODATA)
		return r;
	return 0;
}

/* PF_KTHREAD of include/linux/sched.h: a stable part of the /proc ABI (ps uses it too). */
#define PF_KTHREAD 0x00200000UL

int proc_stat_is_kthread(const char *stat)
{
	const char *p = stat ? strrchr(stat, ')') : NULL;
	unsigned long flags;
	char *end;

	/* "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold spaces and
	 * parentheses, so the fields are counted from its last ')'. */
	if (!p)
		return -EINVAL;
	p++;
	for (int field = 3; field <= 9; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -EINVAL;
		if (field == 9)
			break;
		p += strcspn(p, " ");
	}
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	flags = strtoul(p, &end, 10);
	if (errno || (*end != ' ' && *end != '\n' && *end))
		return -EINVAL;
	return !!(flags & PF_KTHREAD);
}

int pid_movable(pid_t pid)
{
	_cleanup_free_ char *stat = NULL;
	char path[64];
	int r;

	if (pid <= 0)
		return error_set(-EINVAL, "invalid pid %d", (int)pid);
	if (pid == 1)
		return error_set(-EPERM, "pid 1 is never put into a job");
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	r = read_full_file_at(AT_FDCWD, path, 4096, &stat, NULL);
	if (r == -ENOENT || r == -ESRCH)
		return error_set(-ESRCH, "no process %d", (int)pid);
	if (r < 0)
		return error_set(r, "cannot read %s: %s", path, strerror(-r));
	r = proc_stat_is_kthread(stat);
	if (r < 0)
		return error_set(-EINVAL, "cannot parse %s", path);
	if (r > 0)
		return error_set(-EPERM, "pid %d is a kernel thread, never put into a job",
				 (int)pid);
	return 0;
}

int task_add_pid_locked(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id, int task,
			pid_t pid)
{
	_cleanup_free_ char *dir = NULL, *sdir = NULL, *user = NULL;
	int r;

	r = tree_task_dir_checked(ctx, job_id, step_id, task, &dir);
	if (r < 0)
		return r;
	r = pid_movable(pid);
	if (r < 0)
		return r;
	/* Only the task directory is made here: a step is made (and checked) by step creation. */
	sdir = tree_step_dir(ctx, job_id, step_id);
	user = sdir ? cgfs_path(sdir, "user") : NULL;
	if (!user)
		return -ENOMEM;
	if (access(user, F_OK) < 0)
		return error_set(-ENOENT, "no step %u.%s", job_id, step_id);
	r = cgfs_mkdir(dir, true);
	if (r < 0)
		return r;
	r = cgfs_move_pid(dir, pid);
	if (r == -ESRCH)
		return error_set(-ESRCH, "no process %d", (int)pid);
	return r;
}

JOBCG_EXPORT int jobcg_task_add_pid(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				    int task, pid_t pid)
{
	int r = jobcg_ctx_lock(ctx);

	if (r < 0)
		return r;
	/* Checked and moved in one hold of the lock: a release marks the job under it, so the
	 * process either joins before the release starts (and is killed by it) or not at all. */
	r = job_accepts_procs_locked(ctx, job_id);
	if (r >= 0)
		r = task_add_pid_locked(ctx, job_id, step_id, task, pid);
	jobcg_ctx_unlock(ctx);
	return r;
}

JOBCG_EXPORT int jobcg_target_events(struct jobcg_ctx *ctx, const struct jobcg_target *t,
				     bool *ret_populated, bool *ret_frozen)
{
	_cleanup_free_ char *dir = NULL;
	int r = target_dir(ctx, t, &dir);

	if (r < 0)
		return r;
	return cgfs_events(dir, ret_populated, ret_frozen);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	/* task_special (negative) sorts last */
	if ((x < 0) != (y < 0))
		return x < 0 ? 1 : -1;
	return x < y ? -1 : x > y;
}

JOBCG_EXPORT int jobcg_task_list(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				 int **ret, size_t *ret_n)
{
	_cleanup_free_ char *sdir = NULL, *user = NULL;
	_cleanup_strv_free_ char **kids = NULL;
	_cleanup_free_ int *tasks = NULL;
	size_t n = 0;
	int r;

	if (!jobcg_step_id_valid(step_id))
		return error_set(-EINVAL, "invalid step id '%s'", step_id ? step_id : "");
	sdir = tree_step_dir(ctx, job_id, step_id);
	user = sdir ? cgfs_path(sdir, "user") : NULL;
	if (!user)
		return -ENOMEM;
	r = cgfs_children(user, &kids);
	if (r == -ENOENT)
		return error_set(r, "no step %u.%s", job_id, step_id);
	if (r < 0)
		return r;
	tasks = calloc(strv_length(kids) + 1, sizeof(int));
	if (!tasks)
		return -ENOMEM;
	for (char **k = kids; *k; k++) {
		uint64_t v;

		if (streq(*k, "task_special")) {
			tasks[n++] = JOBCG_TASK_SPECIAL;
			continue;
		}
		if (startswith(*k, "task_") && parse_u64(*k + 5, JOBCG_TASK_MAX, &v) == 0)
			tasks[n++] = (int)v;
	}
	qsort(tasks, n, sizeof(int), cmp_int);
	*ret = TAKE_PTR(tasks);
	*ret_n = n;
	return 0;
}
