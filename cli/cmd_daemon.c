/* jobcg daemon: listen on a unix socket and do the cgroup work of `jobcg run` for its clients,
 * in this one process, waiting on none of them (cli/run_remote.c has the exchange). */
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "metrics_http.h"
#include "resv_watch.h"
#include "run.h"
#include "testhook.h"
#include "util.h"

/* Descriptors kept for the work of a step (configuration, cgroups, BPF objects, helpers), and
 * what each client holds at most (its socket, its cwd, the step directory being lent): the
 * clients served at once are capped so that a step never runs out of descriptors midway. */
#define FDS_FOR_WORK	64
#define FDS_PER_CLIENT	3
#define CLIENTS_DEFAULT 128
#define CLIENTS_MAX	65536
/* How long the listener rests when not even a refusal can be accepted (out of descriptors). */
#define LISTEN_PAUSE_MS 200
/* How long the check for a daemon already listening waits to connect: one that takes no
 * connection for that long is alive (it holds the socket) but not serving. */
#define PROBE_TIMEOUT_MS 2000
/* Connections taken from the backlog at one wake-up: the ones already served go first. */
#define ACCEPTS_PER_WAKE 16

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

/* Only to wake the wait: the loop reaps its own children itself (waitpid of their pids, so that
 * no helper the library waits for is taken from it). */
static void on_child(int sig)
{
	(void)sig;
}

/* The earlier of two times, 0 being none. */
static uint64_t sooner(uint64_t a, uint64_t b)
{
	return a && (!b || a < b) ? a : b;
}

static void usage(void)
{
	printf("Usage: jobcg daemon [--socket PATH] [--max-clients N]\n"
	       "                    [--metrics-listen ADDRESS:PORT [--metrics-user USER]\n"
	       "                     [--metrics-allow LIST]]\n"
	       "                    [--resv-period S]\n\n"
	       "Do the cgroup work of 'jobcg run' for the clients that connect to PATH\n"
	       "($JOBCG_DAEMON_SOCKET, default " RUN_DAEMON_SOCKET_DEFAULT "), so that 'jobcg\n"
	       "run' itself neither loads the configuration nor runs the code that makes a step.\n"
	       "The daemon reads the configuration afresh for every step, as 'jobcg run' does.\n"
	       "The tasks are still started by 'jobcg run' (its children, with its cwd, limits\n"
	       "and namespaces).\n"
	       "Serves root and its own user; others, and clients of another protocol, run\n"
	       "their steps themselves. The socket's directory must be root's or the daemon's\n"
	       "user's with mode 0700 (/run/jobcg is made so). Runs in the foreground until\n"
	       "SIGTERM or SIGINT; steps under way finish on their own.\n\n"
	       "  --socket PATH      where to listen\n"
	       "  --max-clients N    serve at most N clients at once (default %d, fewer when\n"
	       "                     the open-file limit is low); more are told to run their\n"
	       "                     steps themselves\n"
	       "  --metrics-listen ADDRESS:PORT\n"
	       "                     also serve GET /metrics over HTTP there (a numeric\n"
	       "                     address: 127.0.0.1:9810), from a child process (see\n"
	       "                     jobcg metrics); one that dies is logged and started\n"
	       "                     again on the same address\n"
	       "  --metrics-user USER  its HTTP side runs as USER (default nobody; root only\n"
	       "                     if named); a child of it stays root to collect\n"
	       "  --metrics-allow LIST  serve only clients from these addresses or prefixes\n"
	       "                     (10.1.0.0/16,::1); others are closed as they connect\n"
	       "  --resv-period S    verify every reservation every S seconds (default 10,\n"
	       "                     0: never), and at once when the kernel notifies a change\n"
	       "                     of a partition; repair what is degraded and log it\n"
	       "                     (jobcg-resv(1)); a watcher that dies is logged and\n"
	       "                     started again\n",
	       CLIENTS_DEFAULT);
}

/*
 * Hold <path>.lock for as long as we listen: two daemons started at once on a stale socket
 * would both find nobody listening, both remove it and both bind, the second one's unlink
 * taking the first one's socket away, which then listened, unreachable, for ever. The file is
 * removed when we stop listening (unlock_socket()), so the lock is the name, not the inode: once
 * granted, the path must still name the file we locked, else it was removed meanwhile and is
 * opened again (as the node lock does).
 */
static int lock_socket(const char *path, int *ret)
{
	_cleanup_free_ char *lock = NULL;

	if (asprintf(&lock, "%s.lock", path) < 0)
		return cli_fail("%s: %s", path, strerror(ENOMEM));
	for (int tries = 0; tries < 100; tries++) {
		int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);

		if (fd < 0)
			return cli_fail("%s: %s", lock, strerror(errno));
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;

			close(fd);
			if (e == EWOULDBLOCK)
				return cli_fail("%s: another jobcg daemon listens there, or is "
						"starting (it holds %s)",
						path, lock);
			return cli_fail("%s: %s", lock, strerror(e));
		}
		if (fd_names_path(fd, lock) > 0) {
			*ret = fd;
			return 0;
		}
		close(fd);
	}
	return cli_fail("%s: removed or replaced each time it was locked", lock);
}

/* Remove the lock file while we still hold it (if it is still ours), then let go of it. */
static void unlock_socket(const char *path, int *lock)
{
	_cleanup_free_ char *name = NULL;

	if (*lock < 0)
		return;
	if (asprintf(&name, "%s.lock", path) >= 0 && fd_names_path(*lock, name) > 0)
		unlink(name);
	close(*lock);
	*lock = -1;
}

/* Bind @path, replacing a socket nobody listens on any more. @ret_lock: the lock held on it
 * (lock_socket()). */
static int listen_on(const char *path, int *ret, int *ret_lock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char why[512] = "";
	int fd, probe, r, lock = -1;
	struct stat st;
	mode_t old;

	/*
	 * /run/jobcg is ours alone: an older daemon made it 0755, which lets nobody else in but
	 * which clients now refuse. Only root's own directory (not a link) is tightened; any
	 * other state is refused below, as clients refuse it.
	 */
	if (strcmp(path, RUN_DAEMON_SOCKET_DEFAULT) == 0 && geteuid() == 0) {
		if (lstat("/run/jobcg", &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
		    (st.st_mode & 077) && !(st.st_mode & 022) && chmod("/run/jobcg", 0700) == 0)
			fprintf(stderr, "jobcg daemon: /run/jobcg was mode %04o, made 0700\n",
				(unsigned)(st.st_mode & 07777));
	}
	if (strlen(path) >= sizeof(sa.sun_path))
		return cli_usage_error("daemon", "--socket '%s': longer than a socket path", path);
	/* Ours alone: nobody else may put a socket where clients look for us. */
	if (strcmp(path, RUN_DAEMON_SOCKET_DEFAULT) == 0 && mkdir("/run/jobcg", 0700) < 0 &&
	    errno != EEXIST)
		return cli_fail("/run/jobcg: %s", strerror(errno));
	/* The directory first: the lock file is made in it. */
	r = run_socket_dir_check(path, why, sizeof(why));
	if (r == -EPERM)
		return cli_fail("%s: not listening there", why);
	if (r < 0)
		return cli_fail("%s: its directory: %s", path, strerror(-r));
	r = lock_socket(path, &lock);
	if (r)
		return r;
	/* Only a socket is ours to replace, and a link is none: connecting through it would
	 * probe (and a stale one replace) whatever it points to. */
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		unlock_socket(path, &lock);
		return cli_fail("%s: exists and is not a socket (%s): not replacing it", path,
				S_ISLNK(st.st_mode)   ? "a symbolic link"
				: S_ISREG(st.st_mode) ? "a regular file"
				: S_ISDIR(st.st_mode) ? "a directory"
						      : "a device, fifo or the like");
	}
	/* A daemon of an older jobcg, or another program, may listen without the lock. One that
	 * is stopped or hung with its queue full makes connect() wait: bounded, and refused. */
	r = run_daemon_connect(path, PROBE_TIMEOUT_MS, &probe, why, sizeof(why));
	if (r == -EAGAIN) {
		unlock_socket(path, &lock);
		return cli_fail("%s: a process listens there but took no connection within %d ms "
				"(a daemon stopped or hung?): not replacing it",
				path, PROBE_TIMEOUT_MS);
	}
	if (r == -EPERM) {
		unlock_socket(path, &lock);
		return cli_fail("%s: not listening there", why);
	}
	if (r == 0) {
		close(probe);
		unlock_socket(path, &lock);
		return cli_fail("%s: another jobcg daemon listens there", path);
	}
	test_pause("daemon-before-unlink");
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (r == -ECONNREFUSED) {
		/* Checked above to be a socket, under the lock. */
		if (unlink(path) < 0 && errno != ENOENT) {
			unlock_socket(path, &lock);
			return cli_fail("%s: cannot remove the stale socket: %s", path,
					strerror(errno));
		}
	}
	/* Non-blocking: accept() after poll must not hang when the client already left. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		unlock_socket(path, &lock);
		return cli_fail("socket: %s", strerror(errno));
	}
	/* Only root and our own user may connect: no window where others could. */
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		umask(old);
		close(fd);
		unlock_socket(path, &lock);
		return cli_fail("%s: %s", path, strerror(e));
	}
	umask(old);
	if (listen(fd, SOMAXCONN) < 0) {
		int e = errno;

		close(fd);
		unlink(path);
		unlock_socket(path, &lock);
		return cli_fail("listen on %s: %s", path, strerror(e));
	}
	*ret = fd;
	*ret_lock = lock;
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

/* As many clients as the descriptors allow, the soft limit first raised to the hard one. */
static unsigned clients_cap(unsigned wanted)
{
	struct rlimit rl;
	unsigned long long n;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return wanted;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};

		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	n = rl.rlim_cur == RLIM_INFINITY ? CLIENTS_MAX : (unsigned long long)rl.rlim_cur;
	n = n > FDS_FOR_WORK ? (n - FDS_FOR_WORK) / FDS_PER_CLIENT : 0;
	if (n < 1)
		n = 1;
	if (n < wanted) {
		fprintf(
		    stderr,
		    "jobcg: daemon: serving at most %llu client(s) at once: the open-file limit "
		    "is %llu\n",
		    n, (unsigned long long)rl.rlim_cur);
		return (unsigned)n;
	}
	return wanted;
}

/* The connections, polled with the listening socket at [0] (c[0] unused). */
struct conns {
	struct run_conn **c;
	struct pollfd *p;
	size_t n, cap;
};

/* Room for one more beyond the n in use and the listener. */
static int conns_grow(struct conns *cs)
{
	size_t cap = cs->cap ? cs->cap * 2 : 64;
	struct run_conn **nc;
	struct pollfd *np;

	if (cs->n + 1 < cs->cap)
		return 0;
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

static int conns_add(struct conns *cs, int fd, struct run_conn *c)
{
	if (conns_grow(cs) < 0)
		return -ENOMEM;
	cs->n++;
	cs->c[cs->n] = c;
	cs->p[cs->n] = (struct pollfd){.fd = fd};
	return 0;
}

/* Forget slot @i, freeing its connection; the last one takes its place. */
static void conns_remove(struct conns *cs, size_t i)
{
	run_conn_free(cs->c[i]);
	cs->c[i] = cs->c[cs->n];
	cs->p[i] = cs->p[cs->n];
	cs->n--;
}

/* ppoll's timeout: until the first deadline, or NULL (none). */
static const struct timespec *wait_time(const struct conns *cs, uint64_t also, uint64_t now,
					struct timespec *left)
{
	uint64_t first = also ? also : UINT64_MAX;

	for (size_t i = 1; i <= cs->n; i++) {
		uint64_t d = run_conn_deadline(cs->c[i]);

		if (d && d < first)
			first = d;
	}
	if (first == UINT64_MAX)
		return NULL;
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
		run_refuse(conn, NULL);
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

struct listener {
	int fd;
	int lock;	     /* held on <socket>.lock while we listen (lock_socket()) */
	int spare;	     /* a descriptor given up to accept a refusal when none is left */
	uint64_t paused_til; /* listening rests until then (out of descriptors) */
	unsigned max_clients;
	bool at_cap, out_of_fds; /* said in the log, until it passes */
	unsigned long served, refused;
};

/*
 * Out of descriptors: the connection stays in the backlog and poll would report it again at
 * once, for ever. Take it with the spare descriptor and tell it to run its step itself; when
 * even that fails (the whole system is out), rest the listener for a moment.
 */
static void out_of_fds(struct listener *l, int err, uint64_t now)
{
	int conn = -1;

	if (!l->out_of_fds)
		fprintf(stderr,
			"jobcg: daemon: out of file descriptors (%s): clients run their steps "
			"themselves until some are free\n",
			strerror(err));
	l->out_of_fds = true;
	if (l->spare >= 0) {
		close(l->spare);
		conn = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (conn >= 0) {
			run_refuse(conn, "it is out of file descriptors");
			close(conn);
			l->refused++;
		}
		l->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (conn < 0 || l->spare < 0)
		l->paused_til = now + LISTEN_PAUSE_MS;
}

static void accept_some(struct listener *l, struct conns *cs, uint64_t now)
{
	if (l->spare < 0)
		l->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < ACCEPTS_PER_WAKE; i++) {
		int conn = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct run_conn *c;
		pid_t pid = 0;

		if (conn < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE)
				out_of_fds(l, errno, now);
			return;
		}
		l->out_of_fds = false;
		if (!peer_ok(conn, &pid)) {
			run_refuse(conn, NULL);
			close(conn);
			continue;
		}
		l->served++;
		if (cs->n >= l->max_clients) {
			char reason[128];

			snprintf(reason, sizeof(reason),
				 "it serves at most %u clients at once, and has that many",
				 l->max_clients);
			if (!l->at_cap)
				fprintf(stderr,
					"jobcg: daemon: %u clients at once, the most it serves "
					"(--max-clients): refusing more until one leaves\n",
					l->max_clients);
			l->at_cap = true;
			run_refuse(conn, reason);
			close(conn);
			l->refused++;
			continue;
		}
		c = run_conn_new(conn, pid, now);
		if (!c || conns_add(cs, conn, c) < 0) {
			run_refuse(conn, NULL); /* cannot watch it */
			if (c)
				run_conn_free(c);
			else
				close(conn);
		}
	}
}

static int cmd_daemon(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"max-clients", required_argument, NULL, 'm'},
	    {"metrics-listen", required_argument, NULL, 'M'},
	    {"metrics-user", required_argument, NULL, 'U'},
	    {"metrics-allow", required_argument, NULL, 'A'},
	    {"resv-period", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *path = run_daemon_socket(), *metrics_addr = NULL, *metrics_user = NULL;
	const char *socket_arg = NULL, *max_arg = NULL, *period_arg = NULL,
		   *metrics_allow_arg = NULL;
	struct metrics_server metrics = {};
	struct resv_watch watch = {};
	unsigned resv_period = 10;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	/* SA_RESTART: a stop mid-step must not fail the calls under way; ppoll() still wakes. */
	struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
	struct sigaction sa_child = {.sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	struct conns cs = {};
	struct listener l = {.fd = -1, .lock = -1, .spare = -1, .max_clients = CLIENTS_DEFAULT};
	sigset_t stopset, waitmask;
	struct stat st;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if ((r = cli_once("daemon", "--socket", socket_arg, optarg)))
				return r;
			socket_arg = optarg;
			if (!*optarg)
				return cli_usage_error("daemon", "--socket: empty path");
			path = optarg;
			break;
		case 'm':
			if ((r = cli_once("daemon", "--max-clients", max_arg, optarg)))
				return r;
			max_arg = optarg;
			if (cli_parse_uint("--max-clients", optarg, CLIENTS_MAX, &l.max_clients) <
				0 ||
			    l.max_clients == 0)
				return cli_usage_error("daemon", "--max-clients '%s': need 1..%d",
						       optarg, CLIENTS_MAX);
			break;
		case 'M':
			if ((r = cli_once("daemon", "--metrics-listen", metrics_addr, optarg)))
				return r;
			if (!*optarg)
				return cli_usage_error("daemon", "--metrics-listen: empty address");
			metrics_addr = optarg;
			break;
		case 'U':
			if (!*optarg)
				return cli_usage_error("daemon", "--metrics-user: empty");
			if ((r = cli_once("daemon", "--metrics-user", metrics_user, optarg)))
				return r;
			metrics_user = optarg;
			break;
		case 'A':
			if ((r = cli_once("daemon", "--metrics-allow", metrics_allow_arg, optarg)))
				return r;
			if ((r = metrics_allow("daemon", "--metrics-allow", optarg, NULL)))
				return r;
			metrics_allow_arg = optarg;
			break;
		case 'P':
			if ((r = cli_once("daemon", "--resv-period", period_arg, optarg)))
				return r;
			period_arg = optarg;
			if (cli_parse_uint("--resv-period", optarg, 86400, &resv_period) < 0)
				return cli_usage_error("daemon",
						       "--resv-period '%s': need 0..86400", optarg);
			break;
		case 'h':
			usage();
			return 0;
		default:
			return cli_option_error("daemon", argc, argv, "+h");
		}
	}
	if (optind < argc)
		return cli_usage_error("daemon", "unexpected argument '%s'", argv[optind]);
	if (metrics_user && !metrics_addr)
		return cli_usage_error("daemon", "--metrics-user goes with --metrics-listen");
	if (metrics_allow_arg && !metrics_addr)
		return cli_usage_error("daemon", "--metrics-allow goes with --metrics-listen");
	if (!path || !*path)
		return cli_usage_error("daemon", "no socket: JOBCG_DAEMON_SOCKET is empty and "
						 "no --socket was given");
	/* A stop from here on is taken in the loop, which removes the socket and stops the
	 * children: one that came while the daemon starts (its metrics server may already answer)
	 * killed it before, leaving its socket behind. Blocked until the loop waits, so that the
	 * children forked meanwhile start with it pending and blocked, not handled by our
	 * handler before they reset theirs (supervise_child_setup()). A start that fails returns
	 * with them still blocked: the process exits with its error, not killed by a stop. */
	sigemptyset(&stopset);
	sigaddset(&stopset, SIGTERM);
	sigaddset(&stopset, SIGINT);
	sigprocmask(SIG_BLOCK, &stopset, &waitmask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* A configuration that does not load is an administrator's mistake to hear about now,
	 * not from every step. */
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	cli_ctx_close(conf, ctx);
	l.max_clients = clients_cap(l.max_clients);
	/* Bound before the step socket, so that a mistake in the address stops the daemon before
	 * clients can find it. */
	if (metrics_addr && (r = metrics_server_start(&metrics, g, metrics_addr, metrics_user,
						      metrics_allow_arg)) != 0)
		return r;
	r = listen_on(path, &l.fd, &l.lock);
	if (r) {
		supervise_stop(&metrics.sup);
		return r;
	}
	/* The socket made: every way out from here removes it (if it is still this one), so
	 * that a daemon that failed to start leaves no socket behind. */
	if (stat(path, &st) < 0) {
		r = cli_fail("%s: %s", path, strerror(errno));
		memset(&st, 0, sizeof(st));
	} else if (resv_period)
		r = resv_watch_start(&watch, g, resv_period);
	if (r == 0) {
		l.spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (run_daemon_save_self(g->verbose) < 0 || l.spare < 0 || conns_grow(&cs) < 0)
			r = cli_fail("%s: %s", path, strerror(errno));
	}
	if (r) {
		close(l.fd);
		if (l.spare >= 0)
			close(l.spare);
		remove_socket(path, &st);
		unlock_socket(path, &l.lock);
		supervise_stop(&metrics.sup);
		supervise_stop(&watch.sup);
		free(cs.c);
		free(cs.p);
		return r;
	}
	sigaction(SIGCHLD, &sa_child, NULL);
	signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error, not a death */
	signal(SIGHUP, SIG_IGN);  /* nothing to reload: each step reads the configuration */
	fprintf(stderr, "jobcg: daemon listening on %s (pid %d)\n", path, (int)getpid());

	/* SIGTERM and SIGINT are blocked from the check of stop_signal to the wait, which
	 * unblocks them: none arriving in between is missed. SIGCHLD likewise from the check
	 * of the children (the reservation watcher, the metrics server). */
	sigaddset(&stopset, SIGCHLD);
	while (sigprocmask(SIG_BLOCK, &stopset, NULL), !stop_signal || cs.n > 0) {
		/* A stop that came while we worked is acted on now, not at the next event. */
		static const struct timespec at_once = {0, 0};
		struct timespec left;
		uint64_t now = run_monotonic_ms();
		bool resting = l.paused_til > now;
		/* A dead child is reaped, said and started again (not once stopping). */
		uint64_t due = sooner(supervise_tend(&watch.sup, now, !stop_signal),
				      supervise_tend(&metrics.sup, now, !stop_signal));
		int k, e;

		if (resting)
			due = sooner(due, l.paused_til);
		cs.p[0] =
		    (struct pollfd){.fd = l.fd >= 0 && !resting ? l.fd : -1, .events = POLLIN};
		for (size_t i = 1; i <= cs.n; i++)
			cs.p[i].events = run_conn_events(cs.c[i]);
		k = ppoll(cs.p, cs.n + 1,
			  stop_signal && l.fd >= 0 ? &at_once : wait_time(&cs, due, now, &left),
			  &waitmask);
		e = errno;
		/* Unblocked while we work: helpers the library starts must not inherit the mask. */
		sigprocmask(SIG_SETMASK, &waitmask, NULL);
		now = run_monotonic_ms();

		if (k < 0) {
			if (e != EINTR) {
				fprintf(stderr, "jobcg: daemon: poll: %s\n", strerror(e));
				break;
			}
			for (size_t i = 0; i <= cs.n; i++)
				cs.p[i].revents = 0;
		}
		if (stop_signal && l.fd >= 0) {
			/* Stop taking steps at once; the ones under way end with their clients.
			 * Those that connected but were not accepted yet run theirs themselves:
			 * closing the listener would otherwise reset them mid-request. */
			refuse_backlog(l.fd);
			close(l.fd);
			l.fd = -1;
			cs.p[0].revents = 0;
			remove_socket(path, &st);
			/* A new daemon may listen while our steps under way end. */
			unlock_socket(path, &l.lock);
			for (size_t i = 1; i <= cs.n; i++)
				if (!run_conn_stopping(cs.c[i], now))
					conns_remove(&cs, i--);
		}
		/* Every connection that has something to do, or whose time ran out. */
		for (size_t i = 1; i <= cs.n; i++) {
			uint64_t d = run_conn_deadline(cs.c[i]);

			if (!cs.p[i].revents && (!d || now < d))
				continue;
			if (!run_conn_step(cs.c[i], cs.p[i].revents, now))
				conns_remove(&cs, i--);
		}
		if (l.at_cap && cs.n < l.max_clients)
			l.at_cap = false;
		if (l.fd >= 0 && cs.p[0].revents & POLLIN)
			accept_some(&l, &cs, now);
	}
	sigprocmask(SIG_SETMASK, &waitmask, NULL);
	if (l.fd >= 0) {
		close(l.fd);
		remove_socket(path, &st);
	}
	unlock_socket(path, &l.lock);
	if (l.spare >= 0)
		close(l.spare);
	free(cs.c);
	free(cs.p);
	supervise_stop(&metrics.sup);
	supervise_stop(&watch.sup);
	fprintf(stderr,
		"jobcg: daemon stopped by signal %d: %lu connection(s), %lu step(s), %lu refused "
		"(busy)\n",
		(int)stop_signal, l.served, run_daemon_steps(), l.refused);
	return 0;
}
CLI_COMMAND(daemon, cmd_daemon, "do the cgroup work of 'jobcg run' for its clients");
