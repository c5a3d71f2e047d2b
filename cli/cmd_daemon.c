/* jobcg daemon: listen on a unix socket and do the cgroup work of `jobcg run` for its clients,
 * in this one process, one message at a time (cli/run_remote.c has the exchange). */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "metrics_http.h"
#include "run.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static void usage(void)
{
	printf("Usage: jobcg daemon [--socket PATH] [--metrics-listen ADDRESS:PORT]\n\n"
	       "Do the cgroup work of 'jobcg run' for the clients that connect to PATH\n"
	       "($JOBCG_DAEMON_SOCKET, default " RUN_DAEMON_SOCKET_DEFAULT "), so that 'jobcg\n"
	       "run' itself neither loads the configuration nor runs the code that makes a step.\n"
	       "The daemon reads the configuration afresh for every step, as 'jobcg run' does.\n"
	       "The tasks are still started by 'jobcg run' (its children, with its cwd, limits\n"
	       "and namespaces).\n"
	       "Serves root and its own user; others, and clients of another protocol, run\n"
	       "their steps themselves. Runs in the foreground until SIGTERM or SIGINT; steps\n"
	       "under way finish on their own.\n\n"
	       "  --socket PATH   where to listen\n"
	       "  --metrics-listen ADDRESS:PORT\n"
	       "                  also serve GET /metrics over HTTP there (a numeric address:\n"
	       "                  127.0.0.1:9810), from a child process (see jobcg metrics)\n");
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
	/* Non-blocking: accept() after poll must not hang when the client already left. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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

/* How long a client may stay connected without sending its request. */
#define REQUEST_TIMEOUT_SEC 5

/* A connection: waiting for its request (c NULL, until deadline_ms), or its step running.
 * Its descriptor is the pollfd's beside it. */
struct slot {
	struct run_conn *c;
	pid_t client;
	uint64_t deadline_ms; /* CLOCK_MONOTONIC */
};

/* The connections, polled with the listening socket at [0] (s[0] unused). */
struct conns {
	struct slot *s;
	struct pollfd *p;
	size_t n, cap;
};

/* Room for one more beyond the n in use and the listener. */
static int conns_grow(struct conns *cs)
{
	size_t cap;
	struct slot *ns;
	struct pollfd *np;

	if (cs->n + 1 < cs->cap)
		return 0;
	cap = cs->cap ? cs->cap * 2 : 64;
	ns = realloc(cs->s, cap * sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	cs->s = ns;
	np = realloc(cs->p, cap * sizeof(*np));
	if (!np)
		return -ENOMEM;
	cs->p = np;
	cs->cap = cap;
	return 0;
}

static int conns_add(struct conns *cs, int fd, const struct slot *s)
{
	if (conns_grow(cs) < 0)
		return -ENOMEM;
	cs->n++;
	cs->s[cs->n] = *s;
	cs->p[cs->n] = (struct pollfd){.fd = fd, .events = POLLIN};
	return 0;
}

/* Forget slot @i (its descriptor is closed or owned elsewhere); the last one takes its place. */
static void conns_remove(struct conns *cs, size_t i)
{
	cs->s[i] = cs->s[cs->n];
	cs->p[i] = cs->p[cs->n];
	cs->n--;
}

static uint64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ppoll's timeout: until the first request deadline, or NULL (none waits for one). */
static const struct timespec *conns_timeout(const struct conns *cs, struct timespec *left)
{
	uint64_t first = UINT64_MAX, now;

	for (size_t i = 1; i <= cs->n; i++)
		if (!cs->s[i].c && cs->s[i].deadline_ms < first)
			first = cs->s[i].deadline_ms;
	if (first == UINT64_MAX)
		return NULL;
	now = monotonic_ms();
	first = first > now ? first - now : 0;
	*left = (struct timespec){.tv_sec = (time_t)(first / 1000),
				  .tv_nsec = (long)(first % 1000) * 1000000L};
	return left;
}

/* Answer every connection waiting in @lfd's backlog "run it yourself". */
static void refuse_backlog(int lfd)
{
	int conn;

	while ((conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0 ||
	       errno == EINTR || errno == ECONNABORTED) {
		if (conn < 0)
			continue;
		(void)run_send_exit(conn, 1, true);
		close(conn);
	}
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
	    {"metrics-listen", required_argument, NULL, 'm'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *path = run_daemon_socket(), *metrics_addr = NULL;
	pid_t metrics_pid = 0;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	/* SA_RESTART: a stop mid-step must not fail the calls under way; ppoll() still wakes. */
	struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
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
		case 'm':
			metrics_addr = optarg;
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
	/* Bound before the step socket, so that a mistake in the address stops the daemon before
	 * clients can find it. */
	if (metrics_addr && (r = metrics_server_start(g, metrics_addr, &metrics_pid)) != 0)
		return r;
	r = listen_on(path, &lfd);
	if (r) {
		metrics_server_stop(metrics_pid);
		return r;
	}
	if (stat(path, &st) < 0 || run_daemon_save_self(g->verbose) < 0 || conns_grow(&cs) < 0) {
		close(lfd);
		metrics_server_stop(metrics_pid);
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
		/* A stop that came while we worked is acted on now, not at the next event. */
		static const struct timespec at_once = {0, 0};
		struct timespec left;
		uint64_t now;
		int k = ppoll(cs.p, cs.n + 1,
			      stop_signal && lfd >= 0 ? &at_once : conns_timeout(&cs, &left),
			      &waitmask),
		    e = errno;

		/* Unblocked while we work: helpers the library starts must not inherit the mask. */
		sigprocmask(SIG_SETMASK, &waitmask, NULL);

		if (stop_signal && lfd >= 0) {
			/* Stop taking steps at once; the ones under way end with their clients.
			 * Those that connected but were not accepted yet run theirs themselves:
			 * closing the listener would otherwise reset them mid-request. */
			refuse_backlog(lfd);
			close(lfd);
			lfd = -1;
			cs.p[0].fd = -1;
			remove_socket(path, &st);
		}
		if (k < 0) {
			if (e != EINTR) {
				fprintf(stderr, "jobcg: daemon: poll: %s\n", strerror(e));
				break;
			}
			/* Nothing is ready; what follows still answers the waiting clients of a
			 * stopping daemon. */
			for (size_t i = 0; i <= cs.n; i++)
				cs.p[i].revents = 0;
		}
		/* Steps ending first: they free what new ones may want. */
		for (size_t i = 1; i <= cs.n; i++) {
			if (!cs.s[i].c || !cs.p[i].revents)
				continue;
			run_conn_end(cs.s[i].c);
			conns_remove(&cs, i--);
		}
		/* Then requests, each read only once it has arrived: a client that connects
		 * and says nothing (stopped, or not jobcg) holds up nobody, and is dropped at
		 * its deadline. */
		now = monotonic_ms();
		for (size_t i = 1; i <= cs.n; i++) {
			struct slot *sl = &cs.s[i];
			struct run_conn *rc = NULL;

			if (sl->c)
				continue;
			if (stop_signal) {
				(void)run_send_exit(cs.p[i].fd, 1, true); /* run it yourself */
				close(cs.p[i].fd);
			} else if (cs.p[i].revents) {
				if (run_conn_start(cs.p[i].fd, sl->client, &rc) == 1) {
					steps++;
					sl->c = rc;
					continue;
				}
			} else if (now >= sl->deadline_ms) {
				fprintf(stderr,
					"jobcg: daemon: pid %d connected but sent no request "
					"within %d s; dropped\n",
					(int)sl->client, REQUEST_TIMEOUT_SEC);
				close(cs.p[i].fd);
			} else
				continue;
			conns_remove(&cs, i--);
		}
		if (!stop_signal && cs.p[0].revents & POLLIN) {
			struct timeval tv = {.tv_sec = REQUEST_TIMEOUT_SEC};
			struct slot sl = {.deadline_ms = now + REQUEST_TIMEOUT_SEC * 1000u};
			int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (conn < 0)
				continue;
			if (!peer_ok(conn, &sl.client)) {
				(void)run_send_exit(conn, 1, true);
				close(conn);
				continue;
			}
			/* A client stuck mid-message must not hold up everyone else for long. */
			(void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			(void)setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			served++;
			if (conns_add(&cs, conn, &sl) < 0) {
				(void)run_send_exit(conn, 1, true); /* cannot watch it */
				close(conn);
			}
		}
	}
	sigprocmask(SIG_SETMASK, &waitmask, NULL);
	if (lfd >= 0) {
		close(lfd);
		remove_socket(path, &st);
	}
	free(cs.s);
	free(cs.p);
	metrics_server_stop(metrics_pid);
	fprintf(stderr, "jobcg: daemon stopped by signal %d: %lu connection(s), %lu step(s)\n",
		(int)stop_signal, served, steps);
	return 0;
}
CLI_COMMAND(daemon, cmd_daemon, "do the cgroup work of 'jobcg run' for its clients");
