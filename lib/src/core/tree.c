/* jobcg: the tree's names (job_<id>/step_<sid>/user/task_<n>), targets, and making/removing dirs.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "cgroupfs.h"
#include "log.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

static const char *const named_steps[] = {"batch", "extern", "interactive"};

/* A number as jobcg writes it: parse_u64() without leading zeros, so one id has one name. */
static int parse_u64_strict(const char *s, unsigned long long max, unsigned long long *ret)
{
	uint64_t v;
	int r;

	if (!s || (s[0] == '0' && s[1]))
		return -EINVAL;
	r = parse_u64(s, max, &v);
	if (r < 0)
		return r;
	*ret = v;
	return 0;
}

JOBCG_EXPORT bool jobcg_step_id_valid(const char *s)
{
	unsigned long long v;

	if (!s)
		return false;
	for (size_t i = 0; i < ELEMENTSOF(named_steps); i++)
		if (streq(s, named_steps[i]))
			return true;
	return parse_u64_strict(s, TREE_STEP_NUM_MAX, &v) == 0;
}

JOBCG_EXPORT int jobcg_job_id_parse(const char *s, uint32_t *ret)
{
	return_if_null(ret);
	unsigned long long v;

	if (parse_u64_strict(s, 4294967294ULL, &v) < 0 || v == 0)
		return error_set(-EINVAL, "invalid job id '%s': need a number 1..4294967294",
				 s ? s : "");
	*ret = (uint32_t)v;
	return 0;
}

JOBCG_EXPORT int jobcg_target_parse(const char *s, struct jobcg_target *ret)
{
	return_if_null(ret);
	struct jobcg_target t = {.task = JOBCG_TASK_ALL};
	_cleanup_free_ char *copy = strdup(s ? s : "");
	char *step, *task;
	int r;

	if (!copy)
		return -ENOMEM;
	step = strchr(copy, '.');
	if (step)
		*step++ = '\0';
	task = step ? strchr(step, '.') : NULL;
	if (task)
		*task++ = '\0';
	r = jobcg_job_id_parse(copy, &t.job);
	if (r < 0)
		return error_set(r, "invalid target '%s': job id must be a number 1..4294967294",
				 s);
	if (step) {
		if (!jobcg_step_id_valid(step))
			return error_set(
			    -EINVAL,
			    "invalid target '%s': step must be a number, batch, extern or "
			    "interactive",
			    s);
		snprintf(t.step, sizeof(t.step), "%s", step);
	}
	if (task) {
		unsigned long long v;

		if (streq(task, "special"))
			t.task = JOBCG_TASK_SPECIAL;
		else if (parse_u64_strict(task, JOBCG_TASK_MAX, &v) == 0)
			t.task = (int)v;
		else
			return error_set(-EINVAL,
					 "invalid target '%s': task must be 0..%d or 'special'", s,
					 JOBCG_TASK_MAX);
	}
	*ret = t;
	return 0;
}

int tree_target_valid(const struct jobcg_target *t)
{
	char buf[96];

	if (!t)
		return error_set(-EINVAL, "no target");
	if (t->job == 0 || t->job == UINT32_MAX)
		return error_set(-EINVAL, "invalid target: job id %" PRIu32 " is not 1..4294967294",
				 t->job);
	/* The struct may be filled by hand: a step without its NUL would be read past. */
	if (!memchr(t->step, '\0', sizeof(t->step)))
		return error_set(-EINVAL,
				 "invalid target: step id of job %" PRIu32
				 " not terminated within %d bytes",
				 t->job, JOBCG_STEP_ID_MAX);
	if (!t->step[0] ? t->task != JOBCG_TASK_ALL
			: !jobcg_step_id_valid(t->step) ||
			      (t->task != JOBCG_TASK_ALL && t->task != JOBCG_TASK_SPECIAL &&
			       (t->task < 0 || t->task > JOBCG_TASK_MAX)))
		return error_set(-EINVAL, "invalid target %s",
				 jobcg_target_format(t, buf, sizeof(buf)));
	return 0;
}

int tree_ids_valid(uint32_t job, const char *step)
{
	if (job == 0 || job == UINT32_MAX)
		return error_set(-EINVAL, "invalid job id %" PRIu32 ": need 1..4294967294", job);
	if (step && !jobcg_step_id_valid(step))
		return error_set(-EINVAL, "invalid step id '%s'", step);
	return 0;
}

JOBCG_EXPORT char *jobcg_target_format(const struct jobcg_target *t, char *buf, unsigned long size)
{
	/* Bounded: a hand-filled step may lack its NUL. */
	int n = (int)strnlen(t->step, sizeof(t->step));

	if (!n)
		snprintf(buf, size, "%u", t->job);
	else if (t->task == JOBCG_TASK_ALL)
		snprintf(buf, size, "%u.%.*s", t->job, n, t->step);
	else if (t->task == JOBCG_TASK_SPECIAL)
		snprintf(buf, size, "%u.%.*s.special", t->job, n, t->step);
	else
		snprintf(buf, size, "%u.%.*s.%d", t->job, n, t->step, t->task);
	return buf;
}

static char *task_name(int task)
{
	if (task == JOBCG_TASK_SPECIAL)
		return strdup("task_special");
	return strdup_printf("task_%d", task);
}

JOBCG_EXPORT char *jobcg_target_relpath(const struct jobcg_target *t)
{
	_cleanup_free_ char *tn = NULL;

	if (tree_target_valid(t) < 0) {
		errno = EINVAL;
		return NULL;
	}
	if (!t->step[0])
		return strdup_printf("job_%u", t->job);
	if (t->task == JOBCG_TASK_ALL)
		return strdup_printf("job_%u/step_%s", t->job, t->step);
	tn = task_name(t->task);
	if (!tn)
		return NULL;
	return strdup_printf("job_%u/step_%s/user/%s", t->job, t->step, tn);
}

JOBCG_EXPORT int jobcg_target_path(const struct jobcg_ctx *ctx, const struct jobcg_target *t,
				   char **ret)
{
	_cleanup_free_ char *rel = NULL, *jdir = NULL;
	const char *below;
	char *p;
	int r = tree_target_valid(t);

	if (r < 0)
		return r;
	rel = jobcg_target_relpath(t);
	jdir = tree_job_dir(ctx, t->job);
	if (!rel || !jdir)
		return -ENOMEM;
	/* The job's directory may be inside a reservation: what follows "job_<id>" is kept. */
	below = strchr(rel, '/');
	p = below ? strdup_printf("%s%s", jdir, below) : TAKE_PTR(jdir);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

int tree_parse_job_dirname(const char *name, uint32_t *ret)
{
	unsigned long long v;

	if (!startswith(name, "job_") || parse_u64_strict(name + 4, 4294967294ULL, &v) < 0 || !v)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

int tree_parse_step_dirname(const char *name, char *ret)
{
	if (!startswith(name, "step_") || !jobcg_step_id_valid(name + 5))
		return -EINVAL;
	snprintf(ret, JOBCG_STEP_ID_MAX, "%s", name + 5);
	return 0;
}

bool tree_resv_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n < 1 || n > TREE_RESV_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      (i > 0 && (c == '_' || c == '-'))))
			return false;
	}
	return true;
}

int tree_parse_resv_dirname(const char *name, const char **ret)
{
	if (!startswith(name, TREE_RESV_PREFIX) ||
	    !tree_resv_name_valid(name + strlen(TREE_RESV_PREFIX)))
		return -EINVAL;
	*ret = name + strlen(TREE_RESV_PREFIX);
	return 0;
}

char *tree_resv_dir(const struct jobcg_ctx *ctx, const char *name)
{
	return strdup_printf("%s/" TREE_RESV_PREFIX "%s", jobcg_ctx_root(ctx), name);
}

int tree_resv_names(const struct jobcg_ctx *ctx, char ***ret)
{
	_cleanup_strv_free_ char **kids = NULL, **names = calloc(1, sizeof(char *));
	int r;

	if (!names)
		return -ENOMEM;
	r = cgfs_children(jobcg_ctx_root(ctx), &kids);
	if (r < 0 && r != -ENOENT)
		return r;
	for (char **k = kids; k && *k; k++) {
		const char *name;

		if (tree_parse_resv_dirname(*k, &name) == 0 &&
		    (r = strv_push(&names, strdup(name))) < 0)
			return r;
	}
	*ret = TAKE_PTR(names);
	return 0;
}

/*
 * A job lives at <root>/job_<id> or, inside a reservation, at <root>/resv_<name>/job_<id>; an id
 * is in one place only (creation checks under the node lock). The usual case costs one access();
 * a job that is not at the top costs one read of the root's entries. What was found is
 * remembered for a moment (struct ctx_jobdir).
 */
static char *job_dir_find(const struct jobcg_ctx *ctx, uint32_t job, bool *ret_exists)
{
	char *top = strdup_printf("%s/job_%u", jobcg_ctx_root(ctx), job);
	_cleanup_close_ int rootfd = -1;
	DIR *d;
	struct dirent *de;
	char *found = NULL;

	*ret_exists = false;
	if (!top)
		return NULL;
	if (access(top, F_OK) == 0) {
		*ret_exists = true;
		return top;
	}
	rootfd = open(jobcg_ctx_root(ctx), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0 || !(d = fdopendir(rootfd)))
		return top;
	rootfd = -1; /* owned by d now */
	while (!found && (de = readdir(d))) {
		char rel[TREE_RESV_NAME_MAX + 32];
		const char *name;

		if (de->d_type != DT_DIR || tree_parse_resv_dirname(de->d_name, &name) < 0)
			continue;
		snprintf(rel, sizeof(rel), "%s/job_%u", de->d_name, job);
		if (faccessat(dirfd(d), rel, F_OK, 0) == 0)
			found = strdup_printf("%s/%s", jobcg_ctx_root(ctx), rel);
	}
	closedir(d);
	if (!found)
		return top;
	*ret_exists = true;
	free(top);
	return found;
}

#define JOBDIR_KEEP_USEC 1000000

char *tree_job_dir(const struct jobcg_ctx *ctx, uint32_t job)
{
	struct ctx_jobdir *m = &ctx->memo->jobdir;
	uint64_t now = now_usec();
	char *dir, *keep;
	bool exists;

	if (m->dir && m->job == job && now - m->at_usec < JOBDIR_KEEP_USEC)
		return strdup(m->dir);
	dir = job_dir_find(ctx, job, &exists);
	if (!dir || !exists) {
		ctx_jobdir_forget(ctx, job);
		return dir;
	}
	keep = strdup(dir);
	if (keep) {
		free(m->dir);
		*m = (struct ctx_jobdir){.job = job, .dir = keep, .at_usec = now};
	}
	return dir;
}

char *tree_job_resv(const struct jobcg_ctx *ctx, const char *job_dir)
{
	const char *root = jobcg_ctx_root(ctx), *name;
	size_t rl = strlen(root);
	_cleanup_free_ char *first = NULL;

	if (strncmp(job_dir, root, rl) != 0 || job_dir[rl] != '/')
		return NULL;
	first = strndup(job_dir + rl + 1, strcspn(job_dir + rl + 1, "/"));
	if (!first || tree_parse_resv_dirname(first, &name) < 0)
		return NULL;
	return strdup(name);
}

char *tree_step_dir(const struct jobcg_ctx *ctx, uint32_t job, const char *step)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job);

	return jdir ? strdup_printf("%s/step_%s", jdir, step) : NULL;
}

char *tree_task_subdir(const char *sdir, int task)
{
	_cleanup_free_ char *tn = task_name(task);

	if (!tn)
		return NULL;
	return strdup_printf("%s/user/%s", sdir, tn);
}

char *tree_task_dir(const struct jobcg_ctx *ctx, uint32_t job, const char *step, int task)
{
	_cleanup_free_ char *sdir = tree_step_dir(ctx, job, step);

	return sdir ? tree_task_subdir(sdir, task) : NULL;
}

int tree_task_dir_checked(const struct jobcg_ctx *ctx, uint32_t job, const char *step, int task,
			  char **ret)
{
	char *dir;

	if (!jobcg_step_id_valid(step) || (task < 0 && task != JOBCG_TASK_SPECIAL) ||
	    task > JOBCG_TASK_MAX)
		return error_set(-EINVAL, "invalid step '%s' or task %d", step ? step : "", task);
	dir = tree_task_dir(ctx, job, step, task);
	if (!dir)
		return -ENOMEM;
	*ret = dir;
	return 0;
}

int tree_make_step(const struct jobcg_ctx *ctx, const char *job_dir, const char *step)
{
	_cleanup_free_ char *sdir = NULL, *helper = NULL, *user = NULL;
	int r;

	sdir = strdup_printf("%s/step_%s", job_dir, step);
	helper = sdir ? cgfs_path(sdir, "jobcg") : NULL;
	user = sdir ? cgfs_path(sdir, "user") : NULL;
	if (!helper || !user)
		return -ENOMEM;
	/* Top-down: a directory gets its controllers from its parent's subtree_control, and none
	 * of these directories ever holds a process itself, so enabling cannot hit EBUSY. */
	r = cgfs_enable(job_dir, ctx->want, NULL);
	if (r < 0)
		return r;
	r = cgfs_mkdir(sdir, false);
	if (r == -EEXIST)
		return error_set(-EEXIST, "step %s already exists in %s", step, job_dir);
	if (r < 0)
		return r;
	if ((r = cgfs_mkdir(helper, false)) < 0 || (r = cgfs_mkdir(user, false)) < 0 ||
	    (r = cgfs_enable(sdir, ctx->want, NULL)) < 0 ||
	    (r = cgfs_enable(user, ctx->want, NULL)) < 0) {
		(void)cgfs_remove_tree(sdir);
		return r;
	}
	return 0;
}

/* A pidfd for @pid, -1 when the process is gone; -ENOSYS before Linux 5.3 (or where a seccomp
 * filter refuses the call), another negative errno when none can be opened now. */
static int pidfd_of(pid_t pid)
{
	int fd;

	fd = -1;
	errno = ENOSYS;
#ifdef SYS_pidfd_open
	if (!test_flag("no-pidfd"))
		fd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
	if (fd >= 0)
		return fd;
	/* ESRCH: exited; EINVAL: the pid is a thread's now, so not the process listed */
	if (errno == ESRCH || errno == EINVAL)
		return -1;
	return errno == EPERM ? -ENOSYS : negative_errno();
}

static int pidfd_signal(int fd, int sig)
{
#ifdef SYS_pidfd_send_signal
	return syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) == 0 ? 0 : negative_errno();
#else
	(void)fd;
	(void)sig;
	return -ENOSYS;
#endif
}

/* kill() of each of @pids: the way without pidfds. */
static int kill_each(const pid_t *pids, size_t n, int sig, int *count)
{
	for (size_t i = 0; i < n; i++) {
		if (kill(pids[i], sig) == 0)
			(*count)++;
		else if (errno != ESRCH) /* exited meanwhile: fine */
			return error_set(negative_errno(), "cannot signal pid %d: %s", (int)pids[i],
					 strerror(errno));
	}
	return 0;
}

/* pidfds held at once: each batch lists the subtree again, so few batches for a large job;
 * within the usual limit of 1024 descriptors (past it, what is open goes first). */
#define SIGNAL_BATCH 512

/*
 * Send @sig to each of @pids (listed from @dir's subtree, sorted) that is still a process of
 * it; returns how many got it. Between a listing and a kill() a process can exit, be reaped
 * and its pid go to a process outside the job (anyone's, root's included), which the kill()
 * would hit. A pidfd opened first holds whatever process has the pid then; a second listing
 * made after the pidfds are open says which of them are the job's (while a pidfd's process
 * lives, its pid names it and nothing else), and the signal goes through the pidfd, so to that
 * process or, if it has gone since, to nothing. Before Linux 5.3 there is no pidfd: kill().
 */
static int signal_listed(const char *dir, const pid_t *pids, size_t n, int sig)
{
	int count = 0, r;

	test_pause("signal-listed"); /* a test gives a listed pid to another process here */
	for (size_t at = 0; at < n;) {
		_cleanup_free_ pid_t *now = NULL;
		int fds[SIGNAL_BATCH];
		size_t k = 0, m = 0;

		for (r = 0; k < SIGNAL_BATCH && at + k < n; k++) {
			fds[k] = pidfd_of(pids[at + k]);
			if (fds[k] >= -1)
				continue;
			r = fds[k];
			if ((r == -EMFILE || r == -ENFILE) && k > 0) {
				/* Out of descriptors: what is open goes first, the rest in the next
				 * batch, less a few given back for the listing to open its files.
				 */
				size_t spare = k > 16 ? 16 : k - 1;

				for (; spare; spare--)
					if (fds[--k] >= 0)
						close(fds[k]);
				r = 0;
			}
			break;
		}
		if (r < 0) {
			for (size_t i = 0; i < k; i++)
				if (fds[i] >= 0)
					close(fds[i]);
			if (r == -ENOSYS) {
				r = kill_each(pids + at, n - at, sig, &count);
				return r < 0 ? r : count;
			}
			return error_set(r, "cannot open a pidfd for pid %d: %s", (int)pids[at + k],
					 strerror(-r));
		}
		r = cgfs_pids(dir, true, &now, &m);
		for (size_t i = 0; i < k; i++) {
			if (fds[i] < 0)
				continue;
			if (r >= 0 && cgfs_pids_have(now, m, pids[at + i])) {
				int s = pidfd_signal(fds[i], sig);

				if (s == 0)
					count++;
				else if (s != -ESRCH)
					r = error_set(s, "cannot signal pid %d: %s",
						      (int)pids[at + i], strerror(-s));
			}
			close(fds[i]);
		}
		if (r == -ENOENT || r == -ENODEV)
			return count; /* the cgroup went meanwhile: nothing of it is left */
		if (r < 0)
			return r;
		at += k;
	}
	return count;
}

int tree_signal(const char *dir, int sig)
{
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	int r;

	r = cgfs_pids(dir, true, &pids, &n);
	if (r < 0)
		return r;
	return signal_listed(dir, pids, n, sig);
}

/*
 * tree_kill() before Linux 5.14, which has no cgroup.kill: SIGKILL to each pid listed. A
 * process that forks between the listing and its kill leaves a child no round has seen, and
 * a chain of processes that fork and exit can stay ahead of any number of rounds. So the
 * cgroup is frozen first (Linux 5.2): from then on a fork's child freezes too, no process
 * gets further than the fork it is in, and a frozen process still dies of SIGKILL. A few
 * rounds then catch the children of the forks under way. The freeze is undone only where
 * this set it, so a job frozen by its owner stays frozen (its processes die all the same).
 * A process killed in one round can be reaped and its pid reused before the next lists it
 * again: signal_listed() hits only what is still the job's.
 */
static void kill_listed(const char *dir)
{
	uint64_t was = 1;
	/* (no cgroup.freeze either, before 5.2: the rounds alone) */
	bool froze = cgfs_read_u64(dir, "cgroup.freeze", &was) == 0 && was == 0 &&
		     cgfs_freeze(dir, true) == 0;

	for (int round = 0; round < 8; round++) {
		_cleanup_free_ pid_t *pids = NULL;
		size_t n = 0;

		if (cgfs_pids(dir, true, &pids, &n) < 0 || n == 0)
			break;
		if (test_flag("kill-slow")) {
			/* A test widens the race a fork wins without the freeze. */
			struct timespec ts = {0, 100 * 1000 * 1000};

			(void)nanosleep(&ts, NULL);
		}
		(void)signal_listed(dir, pids, n, SIGKILL);
	}
	if (froze)
		(void)cgfs_freeze(dir, false);
	jobcg_error_clear(); /* what failed here is seen in the wait for "populated 0" */
}

int tree_kill(const char *dir, unsigned timeout_ms)
{
	bool populated = false;
	int r;

	/* A cgroup removed meanwhile (ENOENT, or ENODEV from kernfs between open and use) has
	 * nothing left to kill: its runner ended it first. */
	r = cgfs_events(dir, &populated, NULL);
	if (r == -ENOENT || r == -ENODEV)
		return 0;
	if (r < 0)
		return r;
	if (!populated)
		return 0;
	r = cgfs_kill(dir);
	if (r == -ENOENT || r == -ENODEV)
		return 0;
	if (r == -EOPNOTSUPP)
		kill_listed(dir);
	else if (r < 0)
		return r;
	return cgfs_wait_events(dir, "populated", 0, timeout_ms);
}

int tree_kill_and_remove(const char *dir)
{
	int r = tree_kill(dir, TREE_KILL_TIMEOUT_MS);

	if (r < 0)
		return r;
	return cgfs_remove_tree(dir);
}

int tree_kill_and_remove_step(const char *sdir)
{
	static const char *const leaves[] = {"user/task_0", "user", "jobcg"};
	int r = tree_kill(sdir, TREE_KILL_TIMEOUT_MS);

	if (r < 0)
		return r;
	/*
	 * The layout tree_make_step() made goes leaf first with one rmdir each, without listing
	 * a directory: the generic walk's first rmdir of the step fails (EBUSY) and it lists the
	 * step and user/ (an opendir, its 32 KiB buffer and getdents each). A failure here only
	 * means more is left (task_1.., cgroups a task made): the walk below finds it.
	 */
	for (size_t i = 0; i < ELEMENTSOF(leaves); i++) {
		_cleanup_free_ char *p = cgfs_path(sdir, leaves[i]);

		if (!p)
			return -ENOMEM;
		if (rmdir(p) < 0 && errno != ENOENT)
			break;
	}
	return cgfs_remove_tree(sdir);
}

int tree_parse_starttime(const char *stat, unsigned long long *ret)
{
	const char *p = strrchr(stat, ')');
	unsigned long long v;
	char *end;

	/* Fields after "(comm)": state is field 3, starttime field 22. */
	if (!p)
		return -EINVAL;
	p++;
	for (int field = 3; field <= 22; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -EINVAL;
		if (field == 22)
			break;
		p += strcspn(p, " ");
	}
	errno = 0;
	v = strtoull(p, &end, 10);
	if (errno || end == p || !isdigit((unsigned char)*p) ||
	    (*end && *end != ' ' && *end != '\n'))
		return -EINVAL;
	*ret = v;
	return 0;
}

/* @pid's start time, and whether it is a zombie (state Z or X) when @ret_zombie is given. */
static int starttime_of_z(pid_t pid, unsigned long long *ret, bool *ret_zombie)
{
	_cleanup_free_ char *s = NULL;
	const char *p;
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	r = read_full_file_at(AT_FDCWD, path, 4096, &s, NULL);
	if (r < 0)
		return r;
	r = tree_parse_starttime(s, ret);
	if (r >= 0 && ret_zombie) {
		p = strrchr(s, ')');
		*ret_zombie = p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
	}
	return r;
}

static int starttime_of(pid_t pid, unsigned long long *ret)
{
	return starttime_of_z(pid, ret, NULL);
}

unsigned tree_parse_threads(const char *status)
{
	const char *t = strstr(status, "\nThreads:");
	uint64_t v;

	if (!t)
		return 0;
	t += strlen("\nThreads:");
	t += strspn(t, " \t");
	/* Not strtoul: it would take "-1" as a huge count. */
	return parse_u64_prefix(t, UINT_MAX, &v, NULL) < 0 ? 0 : (unsigned)v;
}

/* How many threads @pid has (/proc/PID/status), 0 when that cannot be read. */
static unsigned threads_of(pid_t pid)
{
	_cleanup_free_ char *s = NULL;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_full_file_at(AT_FDCWD, path, 65536, &s, NULL) < 0)
		return 0;
	return tree_parse_threads(s);
}

/* Set by a daemon acting for a client: the client is what gc must watch, not the daemon. */
static pid_t runner_override;

JOBCG_EXPORT void jobcg_set_runner(pid_t pid)
{
	runner_override = pid > 0 ? pid : 0;
}

char *tree_process_self(void)
{
	/* A process's start time never changes: read /proc once per process (the pid check
	 * makes a forked child read its own), not on every step it creates. Per thread: no lock. */
	static __thread pid_t cached_pid;
	static __thread unsigned long long cached_st;
	pid_t me = getpid();
	unsigned long long st = 0;

	if (cached_pid == me)
		return strdup_printf("%d:%llu", (int)me, cached_st);
	if (starttime_of(me, &st) == 0) {
		cached_st = st;
		cached_pid = me;
	}
	return strdup_printf("%d:%llu", (int)me, st);
}

char *tree_runner_self(void)
{
	if (runner_override) {
		unsigned long long st = 0;

		(void)starttime_of(runner_override, &st); /* gone already: 0, never alive */
		return strdup_printf("%d:%llu", (int)runner_override, st);
	}
	return tree_process_self();
}

/* "PID:STARTTIME" exactly as tree_runner_self() writes it: decimal digits only (sscanf's %llu
 * would take a sign or spaces). */
int tree_runner_parse(const char *runner, int *ret_pid, unsigned long long *ret_start)
{
	unsigned long long pid, st;
	const char *colon = runner ? strchr(runner, ':') : NULL;
	_cleanup_free_ char *p = colon ? strndup(runner, (size_t)(colon - runner)) : NULL;

	if (!p || parse_u64_strict(p, INT_MAX, &pid) < 0 || pid == 0 ||
	    !isdigit((unsigned char)colon[1]) || parse_u64_strict(colon + 1, ULLONG_MAX, &st) < 0)
		return -EINVAL;
	*ret_pid = (int)pid;
	*ret_start = st;
	return 0;
}

bool tree_runner_alive(const char *runner)
{
	unsigned long long want, have;
	bool zombie = false;
	int pid;

	if (tree_runner_parse(runner, &pid, &want) < 0)
		return false;
	if (starttime_of_z(pid, &have, &zombie) < 0 || have != want)
		return false;
	/* Exited, only not reaped yet by its parent: it ends no step any more. A zombie leader
	 * whose other threads still run (it called pthread_exit()) shows more than one. */
	return !zombie || threads_of(pid) > 1;
}

JOBCG_EXPORT int jobcg_runner_wait(const char *runner, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_usec() + (uint64_t)timeout_ms * 1000;
	_cleanup_close_ int fd = -EBADF;
	unsigned long long st;
	int pid, r;

	if (tree_runner_parse(runner, &pid, &st) < 0)
		return error_set(-EINVAL, "'%s': not a runner (PID:STARTTIME)",
				 runner ? runner : "");
#ifdef SYS_pidfd_open
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
	/* Checked once the pidfd is open: it then refers to that process, not a later one with
	 * its pid, and tells its exit however soon that comes. */
	for (;;) {
		uint64_t now = now_usec();
		int wait_ms;

		if (!tree_runner_alive(runner))
			return 0;
		if (now >= deadline)
			return -ETIMEDOUT;
		wait_ms = deadline == UINT64_MAX ? -1 : (int)((deadline - now + 999) / 1000);
		if (fd < 0) {
			/* No pidfd (before Linux 5.3): look again in a second. */
			struct timespec ts = {.tv_sec = 1};

			if (wait_ms >= 0 && wait_ms < 1000)
				ts = (struct timespec){.tv_nsec = (long)wait_ms * 1000000};
			(void)nanosleep(&ts, NULL);
			continue;
		}
		r = poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, wait_ms);
		if (r > 0)
			return 0; /* it exited (a zombie until reaped, which is gone enough) */
		if (r < 0 && errno != EINTR)
			return error_set(negative_errno(), "waiting for %s: %s", runner,
					 strerror(errno));
	}
}

uint64_t tree_dir_made_usec(const char *dir)
{
	struct stat st;

	/* cgroupfs has no birth time; a directory's mtime moves only when an entry is added to
	 * it, which for a job or step left half made is at its creation or just after. */
	if (stat(dir, &st) < 0 || st.st_mtim.tv_sec <= 0)
		return 0;
	return (uint64_t)st.st_mtim.tv_sec * 1000000u + (uint64_t)st.st_mtim.tv_nsec / 1000u;
}

bool tree_half_made_old(const char *dir)
{
	uint64_t made = tree_dir_made_usec(dir), now = realtime_usec();

	return made && now > made && now - made >= TREE_CREATE_WINDOW_SEC * 1000000ull;
}
