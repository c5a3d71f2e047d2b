/* jobcg CLI: the node's metrics served over HTTP (libmicrohttpd, loaded at run time) and their
 * collection and formatting for `jobcg metrics`, `jobcg daemon --metrics-listen`, `jobcg top`. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli.h"
#include "netlist.h"
#include "supervise.h"

/*
 * One reading of the node as Prometheus text: configuration and context opened for it (afresh
 * each time, as the daemon reads the configuration for every step), user names resolved with
 * getent (cached in this process). @errors_before: collection errors of earlier readings in
 * this process (the counter's past); *ret_errors gets this reading's. 0, or an exit code with
 * the error printed.
 */
int metrics_text(const struct cli_global *g, uint64_t errors_before, char **ret, size_t *ret_len,
		 unsigned *ret_errors);

/* A user name for @uid from the passwd database (getent), cached for a minute, found or not;
 * NULL when it has none. Points to this thread's buffer, valid until its next call. */
const char *metrics_user_name(uid_t uid, void *userdata);

/*
 * Bind and listen on "ADDR:PORT" (a numeric IPv4 address, or an IPv6 one in brackets: nothing
 * else, so that it binds exactly where told). The socket is close-on-exec. 0, or an exit code
 * with the error printed, naming the option @opt of command @cmd that gave @addr.
 */
int metrics_listen(const char *cmd, const char *opt, const char *addr, int *ret_fd);

/* Where the listening socket @fd is bound, as ADDRESS:PORT (IPv6 in brackets) in @buf: the
 * port the kernel chose for port 0 included. @addr (what was asked for) when it cannot say. */
void metrics_where(int fd, const char *addr, char *buf, size_t size);

/*
 * The allowlist @list given with option @opt of command @cmd (both named in the errors), parsed
 * into *ret (free with jobcg_netlist_free()), or only checked when @ret is NULL. 0, or the exit
 * code of a usage error, printed, naming the option and the item that is wrong.
 */
int metrics_allow(const char *cmd, const char *opt, const char *list, struct jobcg_netlist **ret);

/* The user the HTTP side runs as unless told (--user). */
#define METRICS_USER_DEFAULT "nobody"

/*
 * The uid and gid of @user (a name or a number with a passwd entry; NULL: METRICS_USER_DEFAULT)
 * for the HTTP side, given with option @opt (named in the errors). Root only when @user names
 * it; never another user whose primary group is root's. 0, or an exit code with the error
 * printed.
 */
int metrics_user(const char *opt, const char *user, uid_t *ret_uid, gid_t *ret_gid);

/*
 * Serve GET /metrics on the listening socket @fd until SIGTERM or SIGINT, privileges separated:
 * this process gives up its controlling terminal, drops to @user (as metrics_user() says) and
 * talks HTTP, holding no descriptor but @fd, its channels to its child the collector, which
 * stays root, makes each reading and takes nothing from it but a fixed one-byte request, and
 * /dev/null and a pipe to its child the relay as standard input, output and error (the relay,
 * root, copies what comes through it to the log, sanitised, cut and rate-limited); it ends
 * when the collector or the relay does.
 * HTTP is served by libmicrohttpd's own threads, with bounds on connections (in all and from
 * one address), on the time a connection may take to send a whole request or take a whole
 * answer, on its idle time, on a request's size and on how often clients can make it log. With
 * @allow (an address list, as metrics_allow() takes it; NULL: everyone), a connection from an
 * address not on it is closed as it is accepted, before it takes a slot or is read from. In a
 * statically linked jobcg, which must not load libraries, execs the dynamic twin
 * (`jobcg-dynamic metrics --listen-fd FD [--user USER] [--allow LIST]`) first.
 * Returns the exit code.
 */
int metrics_serve(const struct cli_global *g, int fd, const char *user, const char *allow);

struct metrics_server {
	struct supervised sup; /* the daemon tends it and stops it through this */
	const struct cli_global *g;
	const char *addr;
	const char *user;  /* --metrics-user, or NULL */
	const char *allow; /* --metrics-allow, or NULL */
};

/*
 * For `jobcg daemon --metrics-listen ADDR:PORT`: bind @addr here (so a mistake stops the daemon
 * at start), then serve it in a child process (`jobcg metrics --listen-fd`), so that no scrape,
 * slow client or crash of the HTTP side can hold up a launch. The child dies with its parent.
 * Kept running by supervise_tend(&m->sup), which binds @addr again for each new child (a
 * failure there is logged and tried again later), and stopped by supervise_stop(&m->sup).
 * @user and @allow as for metrics_serve(), checked here. 0, or an exit code with the error
 * printed.
 */
int metrics_server_start(struct metrics_server *m, const struct cli_global *g, const char *addr,
			 const char *user, const char *allow);
