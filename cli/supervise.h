/* jobcg daemon: its child processes (the reservation watcher, the metrics server) kept running:
 * reaped when they die, the death logged, started again after a delay (cli/supervise.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* A child that dies is started again after a delay, 1 s doubling up to this; the delay is back
 * to 1 s for one that had run this long. */
#define SUPERVISE_DELAY_MAX_S 60
#define SUPERVISE_STEADY_MS   (60 * 1000)

struct supervised {
	const char *name; /* for the log: "reservation watcher" */
	/* Start the child: 0 with *ret_pid, or a CLI exit code with the error printed. */
	int (*start)(void *arg, pid_t *ret_pid);
	void *arg;
	pid_t pid;	     /* running; 0: not */
	uint64_t started_ms; /* when it was (run_monotonic_ms) */
	uint64_t restart_ms; /* when to start it again; 0: not due */
	unsigned delay_s;    /* the delay before the next start after a death */
};

/* Start it the first time: a failure is the caller's to act on (the daemon does not start).
 * 0 or the exit code of @start. */
int supervise_start(struct supervised *s, const char *name, int (*start)(void *arg, pid_t *ret_pid),
		    void *arg);
/* Reap the child if it ended, logging how, and start it again when its delay is over (RESTART
 * false: the daemon is stopping, it stays dead). Never waits: only its pid is looked at, so no
 * helper the library waits for is taken. Returns when to call again at the latest
 * (run_monotonic_ms), 0 when only its death (SIGCHLD) needs a call. */
uint64_t supervise_tend(struct supervised *s, uint64_t now, bool restart);
/* Stop it (SIGTERM) and reap it; nothing when it is not running. */
void supervise_stop(struct supervised *s);

/*
 * In the child just forked from the daemon (PARENT): it dies with the daemon, its signals are
 * as at the daemon's start (default, none blocked), and it holds no descriptor above 2 but
 * KEEP (-1: none), or a child started again mid-service would keep the daemon's clients'
 * connections open. Exits (1) when the daemon is already gone.
 */
void supervise_child_setup(pid_t parent, int keep);
