/* jobcg_spank.so: start a program detached from slurmstepd (its step watcher). No spank.h:
 * unit-tested. */
#pragma once

#include <stdbool.h>

/**
 * Start @argv[0] (an absolute path) with @argv and @envp as a child of the caller's parent
 * (slurmstepd's is init: slurmd forks it twice), or, where the kernel cannot do that (before
 * Linux 5.11, not x86-64), as a grandchild that init (or the nearest subreaper) adopts at
 * once: no descendant of the caller either way, so a proctrack that follows the caller's
 * process tree neither waits for it nor kills it. It runs in a session of its own, stdin,
 * stdout and stderr on /dev/null, every other descriptor closed, signals unblocked and at
 * their defaults. Made for a multi-threaded caller: between the clone or fork and execve()
 * only async-signal-safe calls. Returns once the program is executing: 0, or -errno naming
 * the program when it could not be started (execve()'s error included).
 */
int jspank_spawn_detached(char *const argv[], char *const envp[]);
/* The same, forking twice when @fork_only even where the cheap way works: for its test. */
int jspank_spawn_detached_how(char *const argv[], char *const envp[], bool fork_only);

/**
 * jspank_spawn_detached(), and then wait up to @timeout_ms for the program to say it is ready:
 * it gets the write end of a pipe as descriptor 3 (the one descriptor it keeps beside 0-2) and
 * writes one byte to it. Returns 0 once that byte came; -ETIMEDOUT; -EPROTO when the program
 * exited or closed it without writing (another program than expected, one too old to know
 * the option that names descriptor 3); -errno when it could not be started.
 */
int jspank_spawn_ready(char *const argv[], char *const envp[], int timeout_ms);
/* The same, forking twice when @fork_only: for its test. */
int jspank_spawn_ready_how(char *const argv[], char *const envp[], int timeout_ms, bool fork_only);
/* jspank_spawn_ready() in two halves, so that the caller works while the program starts: the
 * start gives the pipe's read end (*@ret_fd, close it after), the wait reads the byte from it
 * (@name for the messages). */
int jspank_spawn_start(char *const argv[], char *const envp[], bool fork_only, int *ret_fd);
int jspank_spawn_wait(int fd, const char *name, int timeout_ms);
