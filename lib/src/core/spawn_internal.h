/* jobcg internal: starting a program that is no descendant of its starter (spawn.c). Not
 * spawn.h: this folder is on the include path, where it would hide <spawn.h>. */
#pragma once

/*
 * Start @path (absolute) with @argv and @envp as a child of the caller's parent (clone3
 * CLONE_PARENT), in a session of its own, stdin, stdout and stderr on @devnull, every other
 * descriptor closed, no signal blocked or handled; the caller shares its memory until the
 * execve (CLONE_VM | CLONE_VFORK), so nothing is copied and no atfork handler runs, which
 * suits a multi-threaded caller. Returns once the program executes: 0; -errno naming @path
 * when the start failed (execve()'s error included); -ENOSYS where this kernel, its seccomp
 * filter or the architecture cannot (clone3 with CLONE_CLEAR_SIGHAND is Linux 5.5,
 * close_range's CLOEXEC 5.11), with nothing started, and so for PID 1 of a namespace, which
 * CLONE_PARENT is refused to. @keep_fd (>= 3), when not -1, is the one descriptor kept: the
 * program has it as descriptor 3.
 */
int spawn_detached(const char *path, char *const argv[], char *const envp[], int devnull,
		   int keep_fd);
