/* jobcg CLI: the phases of `jobcg run`, shared by the in-process path and `jobcg daemon`. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common.h"
#include "jobcg/steplife.h"

/* `jobcg run`'s arguments. */
struct run_args {
	struct cli_limits cl;
	uint32_t job;
	const char *step_arg, *gpu_bind;
	unsigned ntasks;
	bool want_acct, json, no_clone3, daemon, no_daemon;
	int cmd_index; /* argv[cmd_index] is the command */
};

/* A step between its creation and its end: the library's part (what the daemon tells a client
 * so that it can end the step itself should the daemon go away) and the CLI's. */
struct run_state {
	struct jobcg_step_life life;
	bool ephemeral, want_acct, json;
};

/* Parse `jobcg run`'s arguments (argv[0] is "run"). 0 to go on, else 1 with *ret_exit (--help
 * answered, or a usage error printed). */
int run_parse(int argc, char **argv, struct run_args *ret, int *ret_exit);
void run_usage(void);

/*
 * What the daemon and its client read from each other, as data only (cli/run_args.c: nothing
 * there touches the host, so a fuzz target links it).
 */
struct jobcg_msg;
/* op=run's fields: the client's umask and -v count and --config-dir (pointing into @req), and
 * its `run` arguments as an argv to free() (pointing into @req). argc (2 at least, argv[0] is
 * "run"), -EPROTO when it is not a request the daemon serves, or -ENOMEM. */
int run_request_parse(const struct jobcg_msg *req, mode_t *ret_umask, struct cli_global *ret_g,
		      char ***ret_argv);
/* op=spawn's fields into a run_state and per-task environments (*ret_env, set once allocated,
 * to run_task_env_free() with a->ntasks whatever the result). -EPROTO on nonsense or an answer
 * for another step than @a asked for, -EPERM (@why says what) for a variable jobcg never sets,
 * -ENOMEM. */
int run_spawn_parse(const struct jobcg_msg *m, const struct run_args *a, struct run_state *s,
		    char ****ret_env, char *why, size_t size);
void run_task_env_free(char ***env, unsigned n);
/* op=status of a step of @ntasks tasks: 0 with *ret_err 0 and @res (exit code, lost signal and
 * one wait status per task, res->task_status to free() whatever the result), or with *ret_err
 * the client's -errno and @err_text its message; -EPROTO when it does not add up, -ENOMEM. */
int run_status_parse(const struct jobcg_msg *m, unsigned ntasks, struct jobcg_run_result *res,
		     int *ret_err, char *err_text, size_t size);
/* Make the step (and its ephemeral job) and its devices. 0 when made, else 1 with *ret_exit
 * (the error is printed, nothing is left behind). */
int run_begin(struct jobcg_ctx *ctx, const struct run_args *a, struct run_state *s, int *ret_exit);
/*
 * End the step: accounting, devices, directories, the ephemeral job. @r and @res are what
 * running the tasks gave (@err_text: the error, when another process had it; NULL: the
 * library's last error); @runner_lost when nobody saw the tasks end (the client of the daemon
 * went away: the record says NODE_FAIL). Returns the exit code and frees s->life.gres.
 */
int run_finish(struct jobcg_ctx *ctx, struct run_state *s, int r, const char *err_text,
	       const struct jobcg_run_result *res, bool runner_lost);

/* `jobcg daemon`'s socket: $JOBCG_DAEMON_SOCKET, else the built-in path. NULL when the
 * variable is set empty (no daemon wanted). `jobcg run` uses it only when asked to (--daemon,
 * the variable set, or RunViaDaemon=yes): the daemon is opt-in. */
const char *run_daemon_socket(void);
#define RUN_DAEMON_SOCKET_DEFAULT "/run/jobcg/daemon.sock"
#define RUN_PROTOCOL_VERSION	  2
/* The largest request or report a client may send (arguments beyond it: the client runs the
 * step itself), and the most of a step's output the daemon carries back in one answer. */
#define RUN_REQUEST_MAX (1u << 20)
#define RUN_OUTPUT_MAX	(256u << 10)
/* How long a client has to send each of its messages (its request: from its connection; its
 * report: from its first byte) and to take each answer. */
#define RUN_IO_TIMEOUT_MS 5000

uint64_t run_monotonic_ms(void);
/*
 * The directory of the daemon's socket @path must be a directory, not a symbolic link, of root
 * or of this user, closed to group and others: 0, -EPERM with @why saying what is wrong, or
 * lstat()'s -errno (-ENOENT: no daemon here).
 */
int run_socket_dir_check(const char *path, char *why, size_t size);
/*
 * Connect to the daemon's socket: 0, -ENAMETOOLONG (not a socket path), -EPERM with @why (the
 * directory fails run_socket_dir_check(), or the listener is neither root nor this user: an
 * impostor, to be refused, not a daemon that is away), or lstat()'s or connect()'s -errno
 * (-ENOENT, -ECONNREFUSED: nobody listens; -EACCES: not for us; -EAGAIN: its queue of
 * connections stayed full for @timeout_ms, when not 0).
 */
int run_daemon_connect(const char *path, unsigned timeout_ms, int *ret, char *why, size_t size);
/* Run through the daemon at @path: 1 with *ret_exit when it was run (or refused, the error
 * printed), 0 when no daemon answers (the caller runs the step itself). */
int run_via_daemon(const char *path, int argc, char **argv, const struct run_args *a,
		   const struct cli_global *g, int *ret_exit);
/*
 * `jobcg daemon`'s side, all in its one process, never blocking on a client: its sockets are
 * non-blocking. run_daemon_save_self() first, once, with the daemon's own -v count. Then for each
 * connection (@client from SO_PEERCRED) run_conn_new(), and poll its descriptor for
 * run_conn_events() until run_conn_deadline() (0: none); run_conn_step() with what poll said
 * (0 at the deadline) does what can be done, and returns false once the connection is over (then
 * run_conn_free() it). run_conn_stopping() when the daemon stops: a connection whose step is not
 * made yet is told to run it itself (false: over).
 */
int run_daemon_save_self(int verbose);
unsigned long run_daemon_steps(void); /* how many steps were made */
struct run_conn;
struct run_conn *run_conn_new(int fd, pid_t client, uint64_t now_ms);
short run_conn_events(const struct run_conn *c);
uint64_t run_conn_deadline(const struct run_conn *c);
bool run_conn_step(struct run_conn *c, short revents, uint64_t now_ms);
bool run_conn_stopping(struct run_conn *c, uint64_t now_ms);
void run_conn_free(struct run_conn *c);
/* Tell a client we do not serve to run its step itself (@reason: why, for it to print; NULL:
 * silently), in one non-blocking try. */
void run_refuse(int conn, const char *reason);
