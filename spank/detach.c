/* jobcg_spank.so: start a program detached from slurmstepd, a multi-threaded process (see
 * detach.h). */
#include <fcntl.h>
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
				 int max_fd)
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
	/* slurmstepd's ignored signals and blocked mask would survive execve(). */
	for (int s = 1; s < NSIG; s++)
		(void)sigaction(s, &dfl, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	execve(argv[0], argv, envp);
	report(errfd, errno);
	_exit(127);
}

static int spawn_forked(char *const argv[], char *const envp[], int devnull)
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
			grandchild(argv, envp, devnull, wr, (int)max_fd);
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

int jspank_spawn_detached_how(char *const argv[], char *const envp[], bool fork_only)
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
	if (!fork_only && (r = spawn_detached(argv[0], argv, envp, devnull)) != -ENOSYS)
		return r;
	return spawn_forked(argv, envp, devnull);
}

int jspank_spawn_detached(char *const argv[], char *const envp[])
{
	return jspank_spawn_detached_how(argv, envp, false);
}
