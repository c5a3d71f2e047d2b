/* jobcg: starting tasks straight into their cgroup (clone3 CLONE_INTO_CGROUP), running a step, and
 * starting a detached program (spawn_internal.h).
 */
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroupfs.h"
#include "joblock.h"
#include "spawn_internal.h"
#include "log.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

extern char **environ;

#define STEP_END_KILL_TIMEOUT_MS 10000

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* environ (or @base) with JOBCG_JOB_ID, JOBCG_STEP_ID, JOBCG_TASK_ID replaced. */
/* Is variable NAME=... of @e set by one of @extra? */
static bool env_overridden(const char *e, char *const *extra)
{
	size_t l = strcspn(e, "=");

	for (; extra && *extra; extra++)
		if (strncmp(*extra, e, l) == 0 && (*extra)[l] == '=')
			return true;
	return false;
}

static char **task_env(char *const *base, char *const *extra, uint32_t job, const char *step,
		       int task)
{
	_cleanup_strv_free_ char **env = calloc(1, sizeof(char *));

	if (!env)
		return NULL;
	for (char *const *e = base ? base : environ; e && *e; e++)
		if (!startswith(*e, "JOBCG_JOB_ID=") && !startswith(*e, "JOBCG_STEP_ID=") &&
		    !startswith(*e, "JOBCG_TASK_ID=") && !env_overridden(*e, extra) &&
		    strv_push(&env, strdup(*e)) < 0)
			return NULL;
	for (char *const *e = extra; e && *e; e++)
		if (strv_push(&env, strdup(*e)) < 0)
			return NULL;
	if (strv_push(&env, strdup_printf("JOBCG_JOB_ID=%u", job)) < 0 ||
	    strv_push(&env, strdup_printf("JOBCG_STEP_ID=%s", step)) < 0 ||
	    strv_push(&env, task == JOBCG_TASK_SPECIAL
				? strdup("JOBCG_TASK_ID=special")
				: strdup_printf("JOBCG_TASK_ID=%d", task)) < 0)
		return NULL;
	return TAKE_PTR(env);
}

/*
 * In the child: only async-signal-safe calls (we may be a raw clone3 child of a threaded
 * parent). On failure the errno goes to the parent through the close-on-exec pipe.
 */
static _Noreturn void child_exec(int errfd, const char *procs_path, const sigset_t *mask,
				 char *const argv[], char *const envp[])
{
	int e;

	if (procs_path) {
		/* Fallback path: join the task cgroup before exec, so that nothing the command
		 * does runs outside it. */
		int fd = open(procs_path, O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, "0", 1) != 1) {
			e = errno;
			goto fail;
		}
		close(fd);
	}
	sigprocmask(SIG_SETMASK, mask, NULL);
	execvpe(argv[0], argv, envp);
	e = errno;
fail:
	if (write(errfd, &e, sizeof(e)) < 0) {
		/* nothing more to say */
	}
	_exit(e == ENOENT ? 127 : 126);
}

/*
 * The fast spawn: the child shares our memory and we sleep until it has exec'ed (CLONE_VM |
 * CLONE_VFORK, as posix_spawn does), so no page table is copied and torn down again: about a
 * quarter of a fork+exec+wait measured with jobcg's footprint. It runs on a stack of its own
 * with every handled signal reset (CLONE_CLEAR_SIGHAND), and must touch nothing but that stack
 * and struct vchild: only raw system calls, no instrumentation.
 */
struct vchild {
	const sigset_t *mask;
	const char *path;
	char *const *argv, *const *envp, *const *sh_argv;
	int err; /* written by the child when its exec failed */
};

#define VCHILD_STACK 16384

__attribute__((no_sanitize("address", "undefined"))) static int vchild_main(void *p)
{
	struct vchild *c = p;
	long e;

	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, c->mask, NULL, (size_t)(_NSIG / 8));
	(void)syscall(SYS_execve, c->path, c->argv, c->envp);
	e = errno;
	if (e == ENOEXEC) { /* no #! line: a shell script, as execvp() does */
		(void)syscall(SYS_execve, "/bin/sh", c->sh_argv, c->envp);
		e = errno;
	}
	c->err = (int)e;
	return e == ENOENT ? 127 : 126;
}

#if defined(__x86_64__)
/* clone3() whose child calls FN(ARG) on the stack given in A and exits with its value. */
__attribute__((noinline)) static long clone3_call(struct clone_args *a, int (*fn)(void *),
						  void *arg)
{
	register void *r12 __asm__("r12") = (void *)fn;
	register void *r13 __asm__("r13") = arg;
	long ret;

	/* rcx and r11 are clobbered by syscall; r12, r13 survive it in both processes. */
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov $60, %%eax\n\t" /* SYS_exit */
			 "syscall\n\t"
			 "hlt\n\t"
			 "1:\n\t"
			 : "=a"(ret)
			 : "0"((long)SYS_clone3), "D"(a), "S"(sizeof(*a)), "r"(r12), "r"(r13)
			 : "rcx", "r11", "memory");
	return ret;
}
#endif

/* -ENOSYS: not on this architecture or kernel; the caller forks instead. */
static pid_t vfork_into(int cgroup_fd, struct vchild *c, int *ret_err)
{
#if defined(__x86_64__)
	_Alignas(16) char stack[VCHILD_STACK];
	struct clone_args a = {
	    .flags = CLONE_INTO_CGROUP | CLONE_VM | CLONE_VFORK | CLONE_CLEAR_SIGHAND,
	    .exit_signal = SIGCHLD,
	    .stack = (uint64_t)(uintptr_t)stack,
	    .stack_size = sizeof(stack),
	    .cgroup = (uint64_t)cgroup_fd,
	};
	sigset_t all, old;
	long pid;

	/* Nothing may run a handler in the child before its exec: all blocked until it has set
	 * the task's own mask, and handlers reset in it by CLONE_CLEAR_SIGHAND. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	c->err = 0;
	pid = clone3_call(&a, vchild_main, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		*ret_err = (int)-pid;
		return -1;
	}
	*ret_err = 0;
	return (pid_t)pid;
#else
	*ret_err = ENOSYS;
	return -1;
#endif
}

/*
 * spawn_detached() (spawn_internal.h): the same vfork-style clone3, with CLONE_PARENT, so that the
 * program is its starter's sibling from the first instruction on, never its descendant.
 */
struct dchild {
	const char *path;
	char *const *argv, *const *envp;
	const sigset_t *none;
	int devnull;
	int keep_fd;	     /* -1, or the descriptor the program gets as 3 */
	int err;	     /* written by the child when it failed */
	bool no_close_range; /* and when that was close_range's CLOSE_RANGE_CLOEXEC (5.11) */
};

__attribute__((no_sanitize("address", "undefined"))) static int dchild_main(void *p)
{
	struct dchild *c = p;

	/* The kernel's struct sigaction: SIG_DFL, no flags, nothing masked. */
	const struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} dfl = {};

	/* CLONE_CLEAR_SIGHAND resets handlers, but ignored signals stay ignored across execve(). */
	for (int s = 1; s < _NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			(void)syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof(dfl.mask));
	/* Its own session: a signal to the starter's process group or terminal misses it. */
	if (syscall(SYS_setsid) < 0)
		goto fail;
	for (int fd = 0; fd < 3; fd++) {
		long r = fd == c->devnull ? syscall(SYS_fcntl, fd, F_SETFD, 0)
					  : syscall(SYS_dup3, c->devnull, fd, 0);
		if (r < 0)
			goto fail;
	}
	/* Nothing of the starter's (for slurmstepd: the step's output, which srun waits on). */
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		c->no_close_range = true;
		goto fail;
	}
	if (c->keep_fd >= 0 && (c->keep_fd == 3 ? syscall(SYS_fcntl, 3, F_SETFD, 0)
						: syscall(SYS_dup3, c->keep_fd, 3, 0)) < 0)
		goto fail;
	(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, c->none, NULL, (size_t)(_NSIG / 8));
	(void)syscall(SYS_execve, c->path, c->argv, c->envp);
fail:
	c->err = errno;
	return 127;
}

int spawn_detached(const char *path, char *const argv[], char *const envp[], int devnull,
		   int keep_fd)
{
#if defined(__x86_64__) && defined(SYS_close_range)
	_Alignas(16) char stack[VCHILD_STACK];
	/* CLONE_PARENT takes the starter's exit signal: clone3 wants 0 here. */
	struct clone_args a = {
	    .flags = CLONE_PARENT | CLONE_VM | CLONE_VFORK | CLONE_CLEAR_SIGHAND,
	    .stack = (uint64_t)(uintptr_t)stack,
	    .stack_size = sizeof(stack),
	};
	struct dchild c = {
	    .path = path, .argv = argv, .envp = envp, .devnull = devnull, .keep_fd = keep_fd};
	sigset_t all, old, none;
	long pid;

	sigemptyset(&none);
	c.none = &none;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone3_call(&a, dchild_main, &c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* EINVAL: no CLONE_CLEAR_SIGHAND (before 5.5); EPERM: a seccomp filter refusing clone3
	 * (some container profiles do, expecting the fallback to fork). */
	if (pid == -EINVAL || pid == -EPERM || pid == -ENOSYS)
		return -ENOSYS;
	if (pid < 0)
		return (int)pid;
	if (c.err && c.no_close_range)
		return -ENOSYS;
	if (c.err)
		return error_set(-c.err, "%s: %s", path, strerror(c.err));
	return 0;
#else
	return -ENOSYS;
#endif
}

/* What execvp() would run for FILE: searched in PATH when it has no slash. */
static int resolve_command(const char *file, char **ret)
{
	_cleanup_free_ char *path = NULL;
	const char *dirs = getenv("PATH");
	bool denied = false;

	if (strchr(file, '/'))
		return (*ret = strdup(file)) ? 0 : -ENOMEM;
	if (!*file)
		return -ENOENT;
	if (!dirs)
		dirs = "/bin:/usr/bin";
	for (const char *d = dirs;; d++) {
		const char *end = strchrnul(d, ':');
		struct stat st;

		free(path);
		path = end == d ? strdup_printf("%s", file)
				: strdup_printf("%.*s/%s", (int)(end - d), d, file);
		if (!path)
			return -ENOMEM;
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0) {
				*ret = TAKE_PTR(path);
				return 0;
			}
			denied = true;
		}
		if (!*end)
			break;
		d = end;
	}
	return denied ? -EACCES : -ENOENT;
}

static pid_t clone_into(int cgroup_fd)
{
	struct clone_args a = {
	    .flags = CLONE_INTO_CGROUP,
	    .exit_signal = SIGCHLD,
	    .cgroup = (uint64_t)cgroup_fd,
	};

	return (pid_t)syscall(SYS_clone3, &a, sizeof(a));
}

/*
 * A freeze must not land between a spawner's frozen check and its task's exec: the task would
 * freeze before the exec, and its starter wait for that exec (vfork, or the exec pipe) until
 * someone thaws, deaf to the signals `jobcg run` forwards. So the spawner holds the job's
 * freeze lock (job_lock(): of @job_dir, NULL: @ctx's job) shared from the check until its
 * tasks have exec'ed, and jobcg_freeze() holds it exclusive while it freezes: a freeze comes
 * before the check (the run is refused) or after the exec (the task is frozen with the others
 * and the run still forwards signals; a thaw lets it go on). A freeze holds it for at most its
 * own timeout, and while one waits for it no new spawner takes it (job_lock()), so that
 * launches following each other without a gap do not keep it out.
 */
#define SPAWN_LOCK_TIMEOUT_MS 30000

static int spawn_lock(struct jobcg_ctx *ctx, const char *job_dir, uint32_t job_id, int *ret_fd)
{
	_cleanup_free_ char *who = NULL;
	int r =
	    job_lock(ctx, job_dir, job_id, JOB_LOCK_SHARED, SPAWN_LOCK_TIMEOUT_MS, ret_fd, &who);

	if (r == -ETIMEDOUT)
		return error_set(r,
				 "cannot start tasks in job %u: a freeze of it (%s) has been "
				 "under way for more than %u ms",
				 job_id, who ? who : "another process", SPAWN_LOCK_TIMEOUT_MS);
	return r;
}

/* jobcg_task_spawn() into task directory @dir (made if missing), the job's freeze lock held. */
static int task_spawn_in(const char *dir, uint32_t job_id, const char *step_id, int task,
			 char *const argv[], const struct jobcg_spawn_opts *opts, pid_t *ret_pid)
{
	_cleanup_free_ char *procs = NULL;
	_cleanup_strv_free_ char **env = NULL;
	_cleanup_close_ int cgfd = -1, rd = -1, wr = -1;
	const struct jobcg_spawn_opts defaults = {};
	sigset_t empty;
	const sigset_t *mask;
	int pipefd[2], e = 0, r;
	ssize_t n;
	pid_t pid = -1;
	bool used_clone3 = false;

	if (!opts)
		opts = &defaults;
	procs = cgfs_path(dir, "cgroup.procs");
	env = task_env(opts->envp, opts->task_env && task >= 0 ? opts->task_env[task] : NULL,
		       job_id, step_id, task);
	if (!procs || !env)
		return -ENOMEM;
	r = cgfs_mkdir(dir, true);
	if (r < 0)
		return r;
	/* Into a frozen cgroup the child freezes before its exec, and we would wait for that
	 * exec (vfork) uninterruptibly until someone thaws it. The caller holds the job's freeze
	 * lock (spawn_lock()), so no `jobcg freeze` lands between this check and the exec. An
	 * empty cgroup's "frozen" follows a freeze asked of it or above it at once (the kernel
	 * updates it in the write), but a populated one says "frozen 0" until each of its
	 * processes has stopped: a `jobcg freeze --timeout 0` may have asked and left. */
	{
		bool populated = false, frozen = false;

		if ((cgfs_events(dir, &populated, &frozen) == 0 && frozen) ||
		    (populated && cgfs_freeze_asked(dir, false, NULL) > 0))
			return error_set(-EBUSY,
					 "cannot start task %u.%s.%d: %s is frozen (thaw its job "
					 "first)",
					 job_id, step_id, task, dir);
		jobcg_error_clear();
	}
	test_pause("spawn-before-clone");
	r = cgfs_open_dir(dir, &cgfd);
	if (r < 0)
		return r;
	sigemptyset(&empty);
	mask = opts->sigmask ? opts->sigmask : &empty;
	if (!opts->no_clone3) {
		_cleanup_free_ char *path = NULL;
		_cleanup_free_ char **sh_argv = NULL;
		struct vchild c = {.mask = mask, .argv = argv, .envp = env};
		size_t argc = 0;

		if ((r = resolve_command(argv[0], &path)) < 0)
			return error_set(r, "cannot execute '%s' as task %u.%s.%d: %s", argv[0],
					 job_id, step_id, task, strerror(-r));
		while (argv[argc])
			argc++;
		if (!(sh_argv = calloc(argc + 2, sizeof(char *))))
			return -ENOMEM;
		sh_argv[0] = (char *)"/bin/sh";
		sh_argv[1] = path;
		for (size_t i = 1; i < argc; i++)
			sh_argv[i + 1] = argv[i];
		c.path = path;
		c.sh_argv = sh_argv;
		if (test_fail("clone3", dir))
			pid = -1, e = EIO;
		else
			pid = vfork_into(cgfd, &c, &e);
		if (pid > 0 && c.err) {
			int st;

			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return error_set(-c.err, "cannot execute '%s' as task %u.%s.%d: %s",
					 argv[0], job_id, step_id, task, strerror(c.err));
		}
		if (pid > 0) {
			log_debug("task %u.%s.%d: pid %d in %s (clone3, vfork)", job_id, step_id,
				  task, (int)pid, dir);
			*ret_pid = pid;
			return 0;
		}
		if (e != ENOSYS && e != E2BIG && e != EINVAL)
			return error_set(-e, "clone3 into %s: %s", dir, strerror(e));
		e = 0;
	}
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return error_set(negative_errno(), "pipe2: %s", strerror(errno));
	rd = pipefd[0];
	wr = pipefd[1];

	if (!opts->no_clone3) {
		pid = clone_into(cgfd);
		if (pid == 0)
			child_exec(wr, NULL, mask, argv, env);
		if (pid > 0)
			used_clone3 = true;
		else if (errno != ENOSYS && errno != E2BIG && errno != EINVAL)
			return error_set(negative_errno(), "clone3 into %s: %s", dir,
					 strerror(errno));
	}
	if (pid < 0) {
		/* Kernels before 5.7 (or seccomp filters) have no clone3/CLONE_INTO_CGROUP. */
		pid = fork();
		if (pid < 0)
			return error_set(negative_errno(), "fork: %s", strerror(errno));
		if (pid == 0)
			child_exec(wr, procs, mask, argv, env);
	}
	close(TAKE_FD(wr));
	do
		n = read(rd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	if (n == sizeof(e)) {
		int st;

		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		return error_set(-e, "cannot execute '%s' as task %u.%s.%d: %s", argv[0], job_id,
				 step_id, task, strerror(e));
	}
	log_debug("task %u.%s.%d: pid %d in %s (%s)", job_id, step_id, task, (int)pid, dir,
		  used_clone3 ? "clone3" : "fork+migrate");
	*ret_pid = pid;
	return 0;
}

JOBCG_EXPORT int jobcg_task_spawn(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				  int task, char *const argv[], const struct jobcg_spawn_opts *opts,
				  pid_t *ret_pid)
{
	return_if_null(ret_pid);
	_cleanup_free_ char *dir = NULL;
	int r;

	if (!argv || !argv[0])
		return error_set(-EINVAL, "no command to run");
	_cleanup_close_ int lock = -1;

	r = tree_task_dir_checked(ctx, job_id, step_id, task, &dir);
	if (r < 0)
		return r;
	if ((r = spawn_lock(ctx, NULL, job_id, &lock)) < 0)
		return r;
	return task_spawn_in(dir, job_id, step_id, task, argv, opts, ret_pid);
}

static int status_to_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

JOBCG_EXPORT int jobcg_step_run(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				unsigned ntasks, char *const argv[],
				const struct jobcg_spawn_opts *opts, struct jobcg_run_result *ret)
{
	_cleanup_free_ char *sdir = NULL;

	if (!jobcg_step_id_valid(step_id))
		return error_set(-EINVAL, "invalid step id '%s'", step_id ? step_id : "");
	sdir = tree_step_dir(ctx, job_id, step_id);
	if (!sdir)
		return -ENOMEM;
	return jobcg_step_run_dir(ctx, sdir, job_id, step_id, ntasks, argv, opts, ret);
}

JOBCG_EXPORT int jobcg_step_run_dir(struct jobcg_ctx *ctx, const char *sdir, uint32_t job_id,
				    const char *step_id, unsigned ntasks, char *const argv[],
				    const struct jobcg_spawn_opts *opts,
				    struct jobcg_run_result *ret)
{
	return_if_null(sdir);
	struct jobcg_spawn_opts o = opts ? *opts : (struct jobcg_spawn_opts){};
	_cleanup_free_ pid_t *pids = NULL;
	_cleanup_free_ int *status = NULL;
	_cleanup_free_ bool *done = NULL;
	_cleanup_free_ char *job_dir = NULL;
	_cleanup_close_ int lock = -1;
	sigset_t set, old;
	unsigned left = 0, term_signals = 0;
	int r = 0, lost = 0, exit_code = 0, first_sig = 0;
	const struct timespec zero = {0, 0};

	if (ntasks == 0 || ntasks > JOBCG_TASK_MAX + 1)
		return error_set(-EINVAL, "number of tasks must be 1..%d", JOBCG_TASK_MAX + 1);
	if (!jobcg_step_id_valid(step_id))
		return error_set(-EINVAL, "invalid step id '%s'", step_id ? step_id : "");
	if (!argv || !argv[0])
		return error_set(-EINVAL, "no command to run");
	pids = calloc(ntasks, sizeof(pid_t));
	status = calloc(ntasks, sizeof(int));
	done = calloc(ntasks, sizeof(bool));
	if (!pids || !status || !done)
		return -ENOMEM;
	/* Every task of the step under one hold: a freeze waits for the whole launch rather than
	 * refusing its last tasks after the first have started. Taken before the signals are
	 * blocked, so that a ^C still ends a wait for it. */
	if (!(job_dir = strdup_printf("%s/..", sdir)))
		return -ENOMEM;
	test_pause("spawn-before-lock");
	if ((r = spawn_lock(ctx, job_dir, job_id, &lock)) < 0)
		return r;

	/* Block before the first spawn so that no SIGCHLD or forwarded signal is missed; the
	 * tasks get the caller's original mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < ELEMENTSOF(forwarded); i++)
		sigaddset(&set, forwarded[i]);
	if (sigprocmask(SIG_BLOCK, &set, &old) < 0)
		return error_set(negative_errno(), "sigprocmask: %s", strerror(errno));
	if (!o.sigmask)
		o.sigmask = &old;

	for (unsigned i = 0; i < ntasks; i++) {
		_cleanup_free_ char *tdir = tree_task_subdir(sdir, (int)i);

		r = tdir ? task_spawn_in(tdir, job_id, step_id, (int)i, argv, &o, &pids[i])
			 : -ENOMEM;
		if (r < 0) {
			struct jobcg_error saved = *jobcg_last_error();

			/* Do not leave the tasks already started running without their siblings. */
			(void)tree_kill(sdir, STEP_END_KILL_TIMEOUT_MS);
			for (unsigned j = 0; j < i; j++)
				while (waitpid(pids[j], &status[j], 0) < 0 && errno == EINTR)
					;
			jobcg_error_restore(&saved);
			goto out;
		}
		left++;
	}
	/* Every task has exec'ed: a freeze now stops them where they run. */
	closep(&lock);
	lock = -1;

	while (left > 0) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);

		if (sig < 0) {
			if (errno == EINTR)
				continue;
			r = error_set(negative_errno(), "sigwaitinfo: %s", strerror(errno));
			(void)tree_kill(sdir, STEP_END_KILL_TIMEOUT_MS);
			sig = SIGCHLD; /* reap what the kill ended */
		}
		if (sig == SIGCHLD) {
			for (unsigned i = 0; i < ntasks; i++) {
				pid_t p;

				if (done[i])
					continue;
				p = waitpid(pids[i], &status[i], r < 0 ? 0 : WNOHANG);
				if (p == pids[i] || (p < 0 && errno == ECHILD)) {
					done[i] = true;
					left--;
				}
			}
			continue;
		}
		lost = sig;
		log_info("forwarding signal %d to step %u.%s", sig, job_id, step_id);
		if (sig != SIGUSR1 && sig != SIGUSR2 && ++term_signals >= 2) {
			/* A second interrupt means "now": what a user expects from Ctrl-C twice. */
			(void)tree_kill(sdir, STEP_END_KILL_TIMEOUT_MS);
		} else if ((sig == SIGINT || sig == SIGQUIT) && si.si_code == SI_KERNEL) {
			/* Typed at the terminal: the tasks share our foreground process group and
			 * got it from the kernel already; forwarding would deliver it twice. */
		} else
			(void)tree_signal(sdir, sig);
	}

	/* The step ends when its tasks have: anything they left behind goes too. */
	if (r >= 0)
		r = tree_kill(sdir, STEP_END_KILL_TIMEOUT_MS);
	for (unsigned i = 0; i < ntasks; i++) {
		int c = status_to_code(status[i]);

		if (WIFSIGNALED(status[i]) && !first_sig)
			first_sig = c;
		if (c > exit_code)
			exit_code = c;
	}
	if (first_sig)
		exit_code = first_sig;
out:
	/* Consume forwarded signals still pending so that unblocking does not kill the caller. */
	for (int guard = 0; guard < 64 && sigtimedwait(&set, NULL, &zero) > 0; guard++)
		;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return r;
	ret->exit_code = exit_code;
	ret->task_status = TAKE_PTR(status);
	ret->ntasks = ntasks;
	ret->lost_signal = lost;
	return 0;
}
