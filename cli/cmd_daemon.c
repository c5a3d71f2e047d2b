/* jobcg daemon: listen on a unix socket and do the cgroup work of `jobcg run` for its clients,
 * in this one process, one message at a time (cli/run_remote.c has the exchange). */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "run.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static void usage(void)
{
	printf("Usage: jobcg daemon [--socket PATH]\n\n"
	       "Do the cgroup work of 'jobcg run' for the clients that connect to PATH\n"
	       "($JOBCG_DAEMON_SOCKET, default " RUN_DAEMON_SOCKET_DEFAULT "), so that 'jobcg\n"
	       "run' itself neither loads the configuration nor runs the code that makes a step.\n"
	       "The daemon reads the configuration afresh for every step, as 'jobcg run' does.\n"
	       "The tasks are still started by 'jobcg run' (its children, with its cwd, limits\n"
	       "and namespaces).\n"
	       "Serves root and its own user; others, and clients of another protocol, run\n"
	       "their steps themselves. Runs in the foreground until SIGTERM or SIGINT; steps\n"
	       "under way finish on their own.\n\n"
	       "  --socket PATH   where to listen\n");
}

/* Bind @path, replacing a socket nobody listens on any more. */
static int listen_on(const char *path, int *ret)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, probe, r;
	mode_t old;

	r = run_daemon_connect(path, &probe);
	if (r == -ENAMETOOLONG)
		return cli_usage_error("daemon", "--socket '%s': longer than a socket path", path);
	if (r == 0) {
		close(probe);
		return cli_fail("%s: another jobcg daemon listens there", path);
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (r == -ECONNREFUSED) {
		struct stat st;

		/* Only a socket is ours to replace: never remove a file someone mistyped. */
		if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
			return cli_fail("%s: exists and is not a socket", path);
		if (unlink(path) < 0 && errno != ENOENT)
			return cli_fail("%s: cannot remove the stale socket: %s", path,
					strerror(errno));
	}
	if (strcmp(path, RUN_DAEMON_SOCKET_DEFAULT) == 0 && mkdir("/run/jobcg", 0755) < 0 &&
	    errno != EEXIST)
		return cli_fail("/run/jobcg: %s", strerror(errno));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cli_fail("socket: %s", strerror(errno));
	/* Only root and our own user may connect: no window where others could. */
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		umask(old);
		close(fd);
		return cli_fail("%s: %s", path, strerror(e));
	}
	umask(old);
	if (listen(fd, SOMAXCONN) < 0) {
		int e = errno;

		close(fd);
		unlink(path);
		return cli_fail("listen on %s: %s", path, strerror(e));
	}
	*ret = fd;
	return 0;
}

/* Whom we act for: root and our own user. Others run their steps with their own rights. */
static bool peer_ok(int conn, pid_t *ret_pid)
{
	struct ucred cred = {};
	socklen_t len = sizeof(cred);

	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    (cred.uid != 0 && cred.uid != geteuid()))
		return false;
	*ret_pid = cred.pid;
	return true;
}

/* The connections whose steps run, polled with the listening socket at [0]. */
struct conns {
	struct run_conn **c;
	struct pollfd *p;
	size_t n, cap;
};

/* Room for one more beyond the n in use and the listener. */
static int conns_grow(struct conns *cs)
{
	size_t cap;
	struct run_conn **nc;
	struct pollfd *np;

	if (cs->n + 1 < cs->cap)
		return 0;
	cap = cs->cap ? cs->cap * 2 : 64;
	nc = realloc(cs->c, cap * sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	cs->c = nc;
	np = realloc(cs->p, cap * sizeof(*np));
	if (!np)
		return -ENOMEM;
	cs->p = np;
	cs->cap = cap;
	return 0;
}

static int conns_add(struct conns *cs, struct run_conn *c)
{
	if (conns_grow(cs) < 0)
		return -ENOMEM;
	cs->n++;
	cs->c[cs->n] = c;
	cs->p[cs->n] = (struct pollfd){.fd = run_conn_fd(c), .events = POLLIN};
	return 0;
}

/* Remove the socket only if it is still the one we made. */
static void remove_socket(const char *path, const struct stat *made)
{
	struct stat now;

	if (stat(path, &now) == 0 && now.st_ino == made->st_ino && now.st_dev == made->st_dev)
		unlink(path);
}

static int cmd_daemon(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *path = run_daemon_socket();
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct sigaction sa = {.sa_handler = on_stop};
	struct conns cs = {};
	sigset_t stopset, waitmask;
	unsigned long served = 0, steps = 0;
	struct stat st;
	int c, lfd = -1, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			path = optarg;
			break;
		case 'h':
			usage();
			return 0;
		default:
			return cli_unknown_option("daemon");
		}
	}
	if (optind < argc)
		return cli_usage_error("daemon", "unexpected argument '%s'", argv[optind]);
	if (!path || !*path)
		return cli_usage_error("daemon", "no socket: JOBCG_DAEMON_SOCKET is empty and "
						 "no --socket was given");
	/* A configuration that does not load is an administrator's mistake to hear about now,
	 * not from every step. */
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	cli_ctx_close(conf, ctx);
	r = listen_on(path, &lfd);
	if (r)
		return r;
	if (stat(path, &st) < 0 || run_daemon_save_self(g->verbose) < 0 || conns_grow(&cs) < 0) {
		close(lfd);
		return cli_fail("%s: %s", path, strerror(errno));
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error, not a death */
	signal(SIGHUP, SIG_IGN);  /* nothing to reload: each step reads the configuration */
	fprintf(stderr, "jobcg: daemon listening on %s (pid %d)\n", path, (int)getpid());

	cs.p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
	/* SIGTERM and SIGINT are blocked from the check of stop_signal to the wait, which
	 * unblocks them: none arriving in between is missed. */
	sigemptyset(&stopset);
	sigaddset(&stopset, SIGTERM);
	sigaddset(&stopset, SIGINT);
	sigprocmask(SIG_BLOCK, &stopset, &waitmask);
	while (sigprocmask(SIG_BLOCK, &stopset, NULL), !stop_signal || cs.n > 0) {
		int k = ppoll(cs.p, cs.n + 1, NULL, &waitmask), e = errno;

		/* Unblocked while we work: helpers the library starts must not inherit the mask. */
		sigprocmask(SIG_SETMASK, &waitmask, NULL);
		errno = e;

		if (stop_signal && lfd >= 0) {
			/* Stop taking steps at once; the ones under way end with their clients. */
			close(lfd);
			lfd = -1;
			cs.p[0].fd = -1;
			remove_socket(path, &st);
		}
		if (k < 0) {
			if (errno != EINTR) {
				fprintf(stderr, "jobcg: daemon: poll: %s\n", strerror(errno));
				break;
			}
			continue;
		}
		/* Steps ending first: they free what new ones may want. */
		for (size_t i = 1; i <= cs.n; i++) {
			if (!cs.p[i].revents)
				continue;
			run_conn_end(cs.c[i]);
			cs.c[i] = cs.c[cs.n];
			cs.p[i] = cs.p[cs.n];
			cs.n--;
			i--;
		}
		if (!stop_signal && cs.p[0].revents & POLLIN) {
			int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			struct timeval tv = {.tv_sec = 5};
			struct run_conn *rc = NULL;
			pid_t client = 0;

			if (conn < 0)
				continue;
			if (!peer_ok(conn, &client)) {
				(void)run_send_exit(conn, 1, true);
				close(conn);
				continue;
			}
			/* A client stuck mid-message must not hold up everyone else. */
			(void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			(void)setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			served++;
			if (run_conn_start(conn, client, &rc) == 1) {
				steps++;
				if (conns_add(&cs, rc) < 0)
					/* cannot watch it: end it now, as for a client gone */
					run_conn_end(rc);
			}
		}
	}
	sigprocmask(SIG_SETMASK, &waitmask, NULL);
	if (lfd >= 0) {
		close(lfd);
		remove_socket(path, &st);
	}
	free(cs.c);
	free(cs.p);
	fprintf(stderr, "jobcg: daemon stopped by signal %d: %lu connection(s), %lu step(s)\n",
		(int)stop_signal, served, steps);
	return 0;
}
CLI_COMMAND(daemon, cmd_daemon, "do the cgroup work of 'jobcg run' for its clients");
