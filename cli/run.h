/* jobcg CLI: the phases of `jobcg run`, shared by the in-process path and `jobcg daemon`. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "jobcg/steplife.h"

/* `jobcg run`'s arguments. */
struct run_args {
	struct cli_limits cl;
	uint32_t job;
	const char *step_arg, *gpu_bind;
	unsigned ntasks;
	bool want_acct, json, no_clone3, no_daemon;
	int cmd_index; /* argv[cmd_index] is the command */
};

/* A step between its creation and its end: the library's part (what the daemon tells a client
 * so that it can end the step itself should the daemon go away) and the CLI's. */
struct run_state {
	struct jobcg_step_life life;
	bool ephemeral, want_acct, json;
};

/* Parse `jobcg run`'s arguments (argv[0] is "run"). -1 to go on, else the exit code. */
int run_parse(int argc, char **argv, struct run_args *ret);
void run_usage(void);
/* Make the step (and its ephemeral job) and its devices. -1 when made, else the exit code
 * (the error is printed, nothing is left behind). */
int run_begin(struct jobcg_ctx *ctx, const struct run_args *a, struct run_state *s);
/*
 * End the step: accounting, devices, directories, the ephemeral job. @r and @res are what
 * running the tasks gave (@err_text: the error, when another process had it; NULL: the
 * library's last error); @runner_lost when nobody saw the tasks end (the client of the daemon
 * went away: the record says NODE_FAIL). Returns the exit code and frees s->life.gres.
 */
int run_finish(struct jobcg_ctx *ctx, struct run_state *s, int r, const char *err_text,
	       const struct jobcg_run_result *res, bool runner_lost);

/* `jobcg daemon`'s socket: $JOBCG_DAEMON_SOCKET, else the built-in path. NULL when the
 * variable is set empty (no daemon wanted). */
const char *run_daemon_socket(void);
#define RUN_DAEMON_SOCKET_DEFAULT "/run/jobcg/daemon.sock"
#define RUN_PROTOCOL_VERSION	  1
/* Connect to the daemon's socket: 0, -ENAMETOOLONG (not a socket path), or connect()'s
 * -errno (-ENOENT, -ECONNREFUSED: nobody listens). */
int run_daemon_connect(const char *path, int *ret);
/* Answer op=exit (@fallback: not served, the client runs its step itself). */
int run_send_exit(int conn, int code, bool fallback);
/* Run through the daemon at @path: returns the exit code, or -1 when no daemon answers (the
 * caller runs the step itself). */
int run_via_daemon(const char *path, int argc, char **argv, const struct run_args *a,
		   const struct cli_global *g);
/*
 * `jobcg daemon`'s side, all in its one process. run_daemon_save_self() first, once, with the
 * daemon's own -v count. Then for
 * each connection (@client from SO_PEERCRED), once it is readable, run_conn_start(): it reads
 * the request and makes the step; returns 1 with *ret when the step runs (call run_conn_end()
 * when the descriptor is readable again: the client's report, or its going away), 0 when the
 * exchange is over (the connection is closed).
 */
int run_daemon_save_self(int verbose);
struct run_conn;
int run_conn_start(int fd, pid_t client, struct run_conn **ret);
void run_conn_end(struct run_conn *c);
void run_conn_free(struct run_conn *c);
