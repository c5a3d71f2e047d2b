/* jobcg_spank.so: start a program detached from slurmstepd, a multi-threaded process (see
 * detach.h). */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "detach.h"
#include "spawn_internal.h"
#include "log.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Mark every descriptor from 3 up close-on-exec: execve() closes them, and a failed execve()
 * can still report through its pipe. */
static void cloexec_from_3(int max_fd)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
#endif
	/* Before Linux 5.11. */
	for (int fd = 3; fd < max_fd; fd++)
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static void report(int fd, int err)
{
	(void)!write(fd, &err, sizeof(err));
}

/* After fork() in a multi-threaded process: async-signal-safe calls only, until execve(). */
static _Noreturn void grandchild(char *const argv[], char *const envp[], int devnull, int errfd,
				 int keep_fd, int max_fd)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;

	/* Its own session: a signal to slurmstepd's process group or terminal misses it. */
	if (setsid() < 0) {
		report(errfd, errno);
		_exit(127);
	}
	for (int fd = 0; fd < 3; fd++)
		if (dup2(devnull, fd) < 0 || fcntl(fd, F_SETFD, 0) < 0) {
			report(errfd, errno);
			_exit(127);
		}
	/* Nothing of slurmstepd's: not the step's output (srun would wait for it), no socket. */
	cloexec_from_3(max_fd);
	/* But the one it is to keep, as descriptor 3 (over errfd's number, if that is 3: the
	 * pipe's end is still open under its own, close-on-exec, until the exec). */
	if (keep_fd >= 0 && (keep_fd == 3 ? fcntl(3, F_SETFD, 0) : dup2(keep_fd, 3)) < 0) {
		report(errfd, errno);
		_exit(127);
	}
	/* slurmstepd's ignored signals and blocked mask would survive execve(). */
	for (int s = 1; s < NSIG; s++)
		(void)sigaction(s, &dfl, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	execve(argv[0], argv, envp);
	report(errfd, errno);
	_exit(127);
}

static int spawn_forked(char *const argv[], char *const envp[], int devnull, int keep_fd)
{
	_cleanup_close_ int rd = -EBADF, wr = -EBADF;
	long max_fd = sysconf(_SC_OPEN_MAX);
	int p[2], status, err = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return error_set(negative_errno(), "pipe: %s", strerror(errno));
	rd = p[0];
	wr = p[1];
	if (max_fd < 0 || max_fd > 1 << 20)
		max_fd = 1 << 20;
	pid = fork();
	if (pid < 0)
		return error_set(negative_errno(), "fork: %s", strerror(errno));
	if (pid == 0) {
		/* The intermediate: gone at once, so init adopts the grandchild. */
		pid_t g = fork();

		if (g == 0)
			grandchild(argv, envp, devnull, wr, keep_fd, (int)max_fd);
		if (g < 0)
			report(wr, errno);
		_exit(g < 0);
	}
	close(wr);
	wr = -EBADF;
	/* ECHILD: another thread of the caller reaped it; the pipe still tells the outcome. */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	/* End of file once execve() succeeded and closed the grandchild's end. */
	do
		n = read(rd, &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return error_set(negative_errno(), "starting %s: %s", argv[0], strerror(errno));
	if (n == (ssize_t)sizeof(err))
		return error_set(-err, "%s: %s", argv[0], strerror(err));
	return 0;
}

static int spawn_how(char *const argv[], char *const envp[], int keep_fd, bool fork_only)
{
	_cleanup_close_ int devnull = -EBADF;
	int r;

	if (!argv[0] || argv[0][0] != '/')
		return error_set(-EINVAL, "'%s': not an absolute path", argv[0] ? argv[0] : "");
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		return error_set(negative_errno(), "/dev/null: %s", strerror(errno));
	/* The cheap way: no copy of slurmstepd's page tables, and a sibling of it from the start
	 * (under TCG the two forks were most of the watcher's start). Forking twice where this
	 * kernel or architecture cannot. */
	if (!fork_only && (r = spawn_detached(argv[0], argv, envp, devnull, keep_fd)) != -ENOSYS)
		return r;
	return spawn_forked(argv, envp, devnull, keep_fd);
}

int jspank_spawn_detached_how(char *const argv[], char *const envp[], bool fork_only)
{
	return spawn_how(argv, envp, -1, fork_only);
}

int jspank_spawn_detached(char *const argv[], char *const envp[])
{
	return spawn_how(argv, envp, -1, false);
}

int jspank_spawn_start(char *const argv[], char *const envp[], bool fork_only, int *ret_fd)
{
	_cleanup_close_ int rd = -EBADF, wr = -EBADF;
	int p[2], r;

	if (pipe2(p, O_CLOEXEC) < 0)
		return error_set(negative_errno(), "pipe: %s", strerror(errno));
	rd = p[0];
	wr = p[1];
	r = spawn_how(argv, envp, wr, fork_only);
	if (r < 0)
		return r;
	/* Ours closed on return: end of file once the program exits or closes its end without a
	 * word. */
	*ret_fd = TAKE_FD(rd);
	return 0;
}

int jspank_spawn_wait(int fd, const char *name, int timeout_ms)
{
	char byte;
	ssize_t n;
	int r;

	for (;;) {
		r = poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, timeout_ms);
		if (r > 0 || (r < 0 && errno != EINTR))
			break;
		if (r == 0)
			return error_set(-ETIMEDOUT, "%s: not ready within %d ms", name,
					 timeout_ms);
	}
	do
		n = read(fd, &byte, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		return 0;
	if (n < 0)
		return error_set(negative_errno(), "%s: %s", name, strerror(errno));
	return error_set(-EPROTO,
			 "%s started but exited without saying it was ready (not the program "
			 "meant, or one too old to know its readiness option)",
			 name);
}

int jspank_spawn_ready_how(char *const argv[], char *const envp[], int timeout_ms, bool fork_only)
{
	_cleanup_close_ int fd = -EBADF;
	int r = jspank_spawn_start(argv, envp, fork_only, &fd);

	return r < 0 ? r : jspank_spawn_wait(fd, argv[0], timeout_ms);
}

int jspank_spawn_ready(char *const argv[], char *const envp[], int timeout_ms)
{
	return jspank_spawn_ready_how(argv, envp, timeout_ms, false);
}
