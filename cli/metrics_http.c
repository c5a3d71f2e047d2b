/* jobcg CLI: the node's metrics as Prometheus text, and served over HTTP by libmicrohttpd, which
 * is dlopen()ed so that neither jobcg nor its dynamic twin needs it to start. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "jobcg-build.h"
#include "jobcg/inspect.h"
#include "jobcg/metrics.h"
#include "metrics_http.h"
#include "supervise.h"
#include "util.h"

#define MHD_SONAME "libmicrohttpd.so.12"
/*
 * Bounds that keep a slow, idle or hostile client from holding a connection for long, so that
 * a scrape gets one within about HTTP_DEADLINE_SEC: an idle timeout alone does not, since a
 * client that drips a header line every few seconds is never idle. Clients that keep opening
 * new connections still compete with a scraper for the slots; HTTP_PER_IP_MAX keeps one address
 * from taking all of them, not two (any local user has all of 127.0.0.0/8, a remote host may have
 * a /64): only binding and firewalling keep such clients off the port (docs/metrics.md).
 */
#define HTTP_CONNECTIONS_MAX  128   /* open connections at once; more are refused */
#define HTTP_PER_IP_MAX	      64    /* open connections from one address */
#define HTTP_IDLE_TIMEOUT_SEC 5	    /* a connection that sends nothing for this long is closed */
#define HTTP_DEADLINE_SEC     5	    /* to send a whole request, or to take a whole answer */
#define HTTP_REQUEST_MAX      16384 /* memory for one request's line and headers */
#define HTTP_THREADS	      4	    /* scrapes collected at the same time */
#define HTTP_LOG_EVERY_SEC    60    /* libmicrohttpd's messages: at most one a minute */
#define USER_CACHE_MAX	      4096
#define USER_CACHE_SEC	      60 /* how long a user name (or its absence) is believed */

static uint64_t mono_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

/* ---- user names ---- */

/*
 * uid -> name, found and not found alike, each for USER_CACHE_SEC: a user added, renamed or
 * removed later (an LDAP account that appears after its first job) is seen within that, while
 * a server scraped every second does not run getent for every job each time.
 */
struct user_entry {
	uid_t uid;
	char *name;  /* NULL: the passwd database had none */
	uint64_t at; /* CLOCK_MONOTONIC seconds of the lookup */
};
static struct user_entry *users;
static size_t n_users;
static pthread_mutex_t users_lock = PTHREAD_MUTEX_INITIALIZER;

/* A copy in this thread's buffer: cache entries are replaced while other threads format. */
static const char *user_copy(const char *name)
{
	static __thread char buf[LOGIN_NAME_MAX + 1];

	if (!name || strlen(name) >= sizeof(buf))
		return NULL;
	return strcpy(buf, name);
}

const char *metrics_user_name(uid_t uid, void *userdata)
{
	char key[16], **f = NULL, *name = NULL;
	const char *found = NULL;
	uint64_t now = mono_sec();
	struct user_entry *e = NULL;

	(void)userdata;
	pthread_mutex_lock(&users_lock);
	for (size_t i = 0; i < n_users && !e; i++)
		if (users[i].uid == uid)
			e = &users[i];
	if (e && now - e->at < USER_CACHE_SEC) {
		found = user_copy(e->name);
		pthread_mutex_unlock(&users_lock);
		return found;
	}
	pthread_mutex_unlock(&users_lock);
	snprintf(key, sizeof(key), "%u", (unsigned)uid);
	/* A name from NSS (LDAP) is nobody's choice here: a control character in it is shown
	 * escaped, and never reaches the terminal of an administrator running top. */
	if (cli_getent("passwd", key, &f) == 0) {
		name = str_escape_controls(f[0]);
		jobcg_strv_free(f);
	}
	pthread_mutex_lock(&users_lock);
	e = NULL;
	for (size_t i = 0; i < n_users && !e; i++)
		if (users[i].uid == uid)
			e = &users[i];
	if (!e && n_users < USER_CACHE_MAX) {
		struct user_entry *t = realloc(users, (n_users + 1) * sizeof(*t));

		if (t) {
			users = t;
			e = &users[n_users++];
			*e = (struct user_entry){.uid = uid};
		}
	}
	found = user_copy(name);
	if (e) {
		free(e->name);
		e->name = name;
		e->at = now;
		name = NULL;
	}
	pthread_mutex_unlock(&users_lock);
	/* Not cached (cache full or no memory): this one reading uses the lookup. */
	free(name);
	return found;
}

int metrics_text(const struct cli_global *g, uint64_t errors_before, char **ret, size_t *ret_len,
		 unsigned *ret_errors)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_metrics *m = NULL;
	struct jobcg_metrics_format_opts o = {
	    .size = sizeof(o),
	    .user_name = metrics_user_name,
	    .errors_before = errors_before,
	};
	int r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);

	if (r)
		return r;
	if ((r = jobcg_metrics_collect(ctx, &m)) < 0 ||
	    (r = jobcg_metrics_format(m, &o, ret, ret_len)) < 0) {
		cli_print_error(r, "metrics");
		r = 1;
	} else if (ret_errors)
		*ret_errors = m->errors;
	jobcg_metrics_free(m);
	cli_ctx_close(conf, ctx);
	return r;
}

/* ---- listening ---- */

int metrics_listen(const char *addr, int *ret_fd)
{
	union {
		struct sockaddr sa;
		struct sockaddr_in in4;
		struct sockaddr_in6 in6;
	} sa = {};
	socklen_t salen;
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(addr, ':');
	unsigned port;
	int fd, one = 1;

	if (!colon || colon == addr)
		return cli_usage_error("metrics",
				       "'%s': expected ADDRESS:PORT (127.0.0.1:9810, "
				       "[::1]:9810)",
				       addr);
	if (cli_parse_uint(NULL, colon + 1, 65535, &port) < 0)
		return cli_usage_error("metrics", "'%s': the port must be a number 0-65535", addr);
	if ((size_t)(colon - addr) >= sizeof(host))
		return cli_usage_error("metrics", "'%s': not a numeric address", addr);
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		host[strlen(host) - 1] = 0;
		if (inet_pton(AF_INET6, host + 1, &sa.in6.sin6_addr) != 1)
			return cli_usage_error("metrics", "'%s': not a numeric IPv6 address", addr);
		sa.in6.sin6_family = AF_INET6;
		sa.in6.sin6_port = htons((uint16_t)port);
		salen = sizeof(sa.in6);
	} else if (inet_pton(AF_INET, host, &sa.in4.sin_addr) == 1) {
		sa.in4.sin_family = AF_INET;
		sa.in4.sin_port = htons((uint16_t)port);
		salen = sizeof(sa.in4);
	} else
		return cli_usage_error("metrics",
				       "'%s': not a numeric address (IPv4, or IPv6 in brackets): "
				       "names are not resolved, so the bind is exactly where told",
				       addr);
	fd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cli_fail("metrics: socket: %s", strerror(errno));
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa.sa.sa_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, &sa.sa, salen) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;

		close(fd);
		return cli_fail("metrics: cannot listen on %s: %s", addr, strerror(e));
	}
	*ret_fd = fd;
	return 0;
}

/* ---- serving ---- */

/* The libmicrohttpd functions used, loaded at run time. */
static struct {
	struct MHD_Daemon *(*start)(unsigned flags, uint16_t port, MHD_AcceptPolicyCallback apc,
				    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...);
	void (*stop)(struct MHD_Daemon *d);
	struct MHD_Response *(*from_buffer)(size_t size, void *buffer,
					    enum MHD_ResponseMemoryMode mode);
	enum MHD_Result (*add_header)(struct MHD_Response *r, const char *header,
				      const char *content);
	enum MHD_Result (*queue)(struct MHD_Connection *c, unsigned int status,
				 struct MHD_Response *r);
	void (*destroy)(struct MHD_Response *r);
	const union MHD_ConnectionInfo *(*conn_info)(struct MHD_Connection *c,
						     enum MHD_ConnectionInfoType type, ...);
} mhd;

static int mhd_load(void)
{
	static const struct {
		const char *name;
		size_t offset;
	} syms[] = {
	    {"MHD_start_daemon", offsetof(__typeof__(mhd), start)},
	    {"MHD_stop_daemon", offsetof(__typeof__(mhd), stop)},
	    {"MHD_create_response_from_buffer", offsetof(__typeof__(mhd), from_buffer)},
	    {"MHD_add_response_header", offsetof(__typeof__(mhd), add_header)},
	    {"MHD_queue_response", offsetof(__typeof__(mhd), queue)},
	    {"MHD_destroy_response", offsetof(__typeof__(mhd), destroy)},
	    {"MHD_get_connection_info", offsetof(__typeof__(mhd), conn_info)},
	};
	void *h = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return cli_fail("metrics: serving HTTP needs %s (Debian: libmicrohttpd12): %s",
				MHD_SONAME, dlerror());
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].name);

		if (!f)
			return cli_fail("metrics: %s has no %s", MHD_SONAME, syms[i].name);
		/* POSIX guarantees a function pointer survives the round trip through void *. */
		memcpy((char *)&mhd + syms[i].offset, &f, sizeof(f));
	}
	return 0;
}

struct server {
	const struct cli_global *g;
	atomic_uint_fast64_t errors; /* collection errors so far: the counter's value */
};

/* ---- deadlines ---- */

/*
 * Every open connection with the time its current phase began: waiting for a whole request,
 * or sending an answer. The main thread shuts down the socket of one whose phase is older than
 * HTTP_DEADLINE_SEC, and libmicrohttpd then closes it as a client that hung up. A connection
 * whose request is being collected is exempt: that is this server's time, not the client's.
 * libmicrohttpd reports a connection closed before it closes its socket, and both go under
 * watch_lock, so a shutdown never reaches a descriptor already reused.
 */
struct watched {
	struct MHD_Connection *conn; /* NULL: a free slot */
	int fd;
	bool busy;
	uint64_t since; /* CLOCK_MONOTONIC, seconds */
};
static struct watched watch[HTTP_CONNECTIONS_MAX + HTTP_THREADS];
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;

static struct watched *watch_find(struct MHD_Connection *conn)
{
	for (size_t i = 0; i < sizeof(watch) / sizeof(watch[0]); i++)
		if (watch[i].conn == conn)
			return &watch[i];
	return NULL;
}

static void watch_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
			 enum MHD_ConnectionNotificationCode code)
{
	const union MHD_ConnectionInfo *info;
	struct watched *w;

	(void)cls;
	(void)socket_context;
	pthread_mutex_lock(&watch_lock);
	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if ((w = watch_find(conn)))
			*w = (struct watched){.fd = -1};
	} else if ((info = mhd.conn_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD))) {
		if ((w = watch_find(NULL)))
			*w = (struct watched){
			    .conn = conn, .fd = info->connect_fd, .since = mono_sec()};
		else
			/* Not watched, not served: a deadline nobody enforces is none. */
			(void)shutdown(info->connect_fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&watch_lock);
}

/* A phase of @conn begins now; @busy: the server's own (a request being collected). */
static void watch_phase(struct MHD_Connection *conn, bool busy)
{
	struct watched *w;

	pthread_mutex_lock(&watch_lock);
	if ((w = watch_find(conn))) {
		w->busy = busy;
		w->since = mono_sec();
	}
	pthread_mutex_unlock(&watch_lock);
}

static void watch_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)con_cls;
	(void)toe;
	watch_phase(conn, false);
}

static void watch_expire(void)
{
	uint64_t now = mono_sec();

	pthread_mutex_lock(&watch_lock);
	for (size_t i = 0; i < sizeof(watch) / sizeof(watch[0]); i++)
		if (watch[i].conn && !watch[i].busy && now - watch[i].since >= HTTP_DEADLINE_SEC) {
			(void)shutdown(watch[i].fd, SHUT_RDWR);
			/* Once: libmicrohttpd closes it at its next look. */
			watch[i].busy = true;
		}
	pthread_mutex_unlock(&watch_lock);
}

/*
 * libmicrohttpd's messages, most of which any client can cause (a malformed request, a refused
 * connection): at most one every HTTP_LOG_EVERY_SEC, with a count of those left out, so a
 * client cannot fill the daemon's log.
 */
static void log_limited(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void log_limited(void *cls, const char *fmt, va_list ap)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t next;
	static unsigned long dropped;
	uint64_t now = mono_sec();
	char msg[256];

	(void)cls;
	pthread_mutex_lock(&lock);
	if (next && now < next) {
		dropped++;
		pthread_mutex_unlock(&lock);
		return;
	}
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* Some carry what the client sent: no control characters onto the log. */
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = *p == '\n' && !p[1] ? 0 : '?';
	if (dropped)
		fprintf(stderr, "jobcg: metrics: libmicrohttpd: %s (%lu more left out)\n", msg,
			dropped);
	else
		fprintf(stderr, "jobcg: metrics: libmicrohttpd: %s\n", msg);
	dropped = 0;
	next = now + HTTP_LOG_EVERY_SEC;
	pthread_mutex_unlock(&lock);
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
			     char *body, size_t len)
{
	struct MHD_Response *resp = mhd.from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result r;

	if (!resp) {
		free(body);
		return MHD_NO;
	}
	(void)mhd.add_header(resp, "Content-Type", type);
	r = mhd.queue(conn, status, resp);
	mhd.destroy(resp);
	return r;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	char *body = strdup(msg);

	if (!body)
		return MHD_NO;
	return reply(conn, status, "text/plain; charset=utf-8", body, strlen(body));
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct server *s = cls;
	char *body = NULL;
	size_t len = 0;
	unsigned errors = 0;

	enum MHD_Result r;

	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics\n");
	if (strcmp(url, "/metrics") != 0)
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "jobcg serves /metrics\n");
	watch_phase(conn, true);
	if (metrics_text(s->g, atomic_load(&s->errors), &body, &len, &errors) != 0)
		r = reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
			       "collecting failed: see the server's log\n");
	else {
		atomic_fetch_add(&s->errors, errors);
		r = reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len);
	}
	/* Then the client has HTTP_DEADLINE_SEC to take the answer. */
	watch_phase(conn, false);
	return r;
}

/*
 * The dynamically linked jobcg beside this one, else the installed one. JOBCG_DYNAMIC_EXE is
 * not honoured here: it names a program run as root, which only the library's trusted-file
 * check (for the scope helper) may accept.
 */
static int twin_exe(char *buf, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = 0;
		if (strrchr(self, '/'))
			*strrchr(self, '/') = 0;
		snprintf(buf, size, "%s/jobcg-dynamic", self);
		if (access(buf, X_OK) == 0)
			return 0;
	}
	snprintf(buf, size, "%s/jobcg-dynamic", JOBCG_LIBEXECDIR);
	return access(buf, X_OK) == 0 ? 0 : -errno;
}

/* A static process has no dynamic loader (AT_BASE 0) and must not dlopen(). */
static bool linked_statically(void)
{
	return getauxval(AT_BASE) == 0;
}

/* Exec @exe as `metrics --listen-fd FD` with the global options; returns only on failure. */
static int exec_server(const char *exe, const struct cli_global *g, int fd)
{
	char fdarg[16], *argv[16];
	int n = 0;

	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	argv[n++] = (char *)"jobcg";
	if (g->config_dir) {
		argv[n++] = (char *)"--config-dir";
		argv[n++] = (char *)g->config_dir;
	}
	for (int v = 0; v < g->verbose && v < 3; v++)
		argv[n++] = (char *)"-v";
	argv[n++] = (char *)"metrics";
	argv[n++] = (char *)"--listen-fd";
	argv[n++] = fdarg;
	argv[n] = NULL;
	/* The socket crosses the exec: the one descriptor that must. */
	if (fcntl(fd, F_SETFD, 0) < 0)
		return -errno;
	execv(exe, argv);
	return -errno;
}

int metrics_serve(const struct cli_global *g, int fd)
{
	struct server s = {.g = g};
	struct MHD_Daemon *d;
	const char *mount;
	sigset_t stop, old;
	int sig = 0, r;

	if (linked_statically()) {
		char exe[PATH_MAX];

		r = twin_exe(exe, sizeof(exe));
		if (r == 0)
			r = exec_server(exe, g, fd);
		return cli_fail("metrics: this jobcg is linked statically and serves HTTP through "
				"%s, which cannot run: %s (install it with jobcg)",
				exe, strerror(-r));
	}
	r = mhd_load();
	if (r)
		return r;
	/* Computed once here: its static buffer is not filled concurrently by the threads. */
	(void)jobcg_cgroup2_mount(&mount);
	/* Stop signals go to this thread's sigwait(), never to the server's threads, which
	 * inherit the mask. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	signal(SIGPIPE, SIG_IGN);
	/* The logger first: libmicrohttpd otherwise says so through it, a line at every start
	 * that would also use up the minute's one message a client can cause. */
	d = mhd.start(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL,
		      NULL, handle, &s, MHD_OPTION_EXTERNAL_LOGGER, log_limited, NULL,
		      MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_THREAD_POOL_SIZE,
		      (unsigned)HTTP_THREADS, MHD_OPTION_CONNECTION_LIMIT,
		      (unsigned)HTTP_CONNECTIONS_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		      (unsigned)HTTP_PER_IP_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
		      (unsigned)HTTP_IDLE_TIMEOUT_SEC, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		      (size_t)HTTP_REQUEST_MAX, MHD_OPTION_NOTIFY_CONNECTION, watch_notify, NULL,
		      MHD_OPTION_NOTIFY_COMPLETED, watch_completed, NULL, MHD_OPTION_END);
	if (!d) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return cli_fail("metrics: libmicrohttpd could not start on the socket");
	}
	if (g->verbose)
		fprintf(stderr, "jobcg: metrics: serving /metrics (pid %d)\n", (int)getpid());
	/* This thread also enforces the deadlines, looking once a second. */
	for (;;) {
		const struct timespec tick = {.tv_sec = 1};

		sig = sigtimedwait(&stop, NULL, &tick);
		if (sig > 0)
			break;
		watch_expire();
	}
	mhd.stop(d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

/* The supervisor's start: bind the address (again, for a server started anew) and fork the
 * server onto it. */
static int server_fork(void *arg, pid_t *ret_pid)
{
	struct metrics_server *m = arg;
	pid_t parent = getpid(), pid;
	int fd, r = metrics_listen(m->addr, &fd);

	if (r)
		return r;
	pid = fork();
	if (pid < 0) {
		r = errno;
		close(fd);
		return cli_fail("metrics: fork: %s", strerror(r));
	}
	if (pid == 0) {
		supervise_child_setup(parent, fd);
		/* A static jobcg goes on to its dynamic twin from there (metrics_serve). */
		r = exec_server("/proc/self/exe", m->g, fd);
		fprintf(stderr, "jobcg: metrics: cannot run /proc/self/exe: %s\n", strerror(-r));
		_exit(127);
	}
	close(fd);
	fprintf(stderr, "jobcg: metrics on http://%s/metrics (pid %d)\n", m->addr, (int)pid);
	*ret_pid = pid;
	return 0;
}

int metrics_server_start(struct metrics_server *m, const struct cli_global *g, const char *addr)
{
	m->g = g;
	m->addr = addr;
	return supervise_start(&m->sup, "metrics server", server_fork, m);
}
