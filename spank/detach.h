/* jobcg_spank.so: start a program detached from slurmstepd (its step watcher). No spank.h:
 * unit-tested. */
#pragma once

/**
 * Start @argv[0] (an absolute path) with @argv and @envp as a grandchild of the caller, which
 * init (or the nearest subreaper) adopts at once: no descendant of the caller, so a
 * proctrack that follows the caller's process tree neither waits for it nor kills it. It runs
 * in a session of its own, stdin, stdout and stderr on /dev/null, every other descriptor
 * closed, signals unblocked and at their defaults. Made for a multi-threaded caller: between
 * fork() and execve() only async-signal-safe calls. Returns once the program is executing
 * (its intermediate parent reaped): 0, or -errno naming the program when it could not be
 * started (execve()'s error included).
 */
int jspank_spawn_detached(char *const argv[], char *const envp[]);
