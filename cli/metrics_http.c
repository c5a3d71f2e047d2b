/* jobcg CLI: the node's metrics as Prometheus text, and served over HTTP by libmicrohttpd, which
 * is dlopen()ed so that neither jobcg nor its dynamic twin needs it to start. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "jobcg-build.h"
#include "jobcg/inspect.h"
#include "jobcg/metrics.h"
#include "metrics_http.h"
#include "supervise.h"
#include "testhook.h"
#include "util.h"

static void netlist_freep(struct jobcg_netlist **l)
{
	jobcg_netlist_free(*l);
}

#define MHD_SONAME "libmicrohttpd.so.12"
/*
 * Bounds that keep a slow, idle or hostile client from holding a connection for long, so that
 * a scrape gets one within about HTTP_DEADLINE_SEC: an idle timeout alone does not, since a
 * client that drips a header line every few seconds is never idle. Clients that keep opening
 * new connections still compete with a scraper for the slots; HTTP_PER_IP_MAX keeps one address
 * from taking all of them, not two (any local user has all of 127.0.0.0/8, a remote host may have
 * a /64): only an allowlist (--allow, refused as accepted, before a slot is taken), binding and
 * firewalling keep such clients off the port (docs/metrics.md).
 */
#define HTTP_CONNECTIONS_MAX  128   /* open connections at once; more are refused */
#define HTTP_PER_IP_MAX	      64    /* open connections from one address */
#define HTTP_IDLE_TIMEOUT_SEC 5	    /* a connection that sends nothing for this long is closed */
#define HTTP_DEADLINE_SEC     5	    /* to send a whole request, or to take a whole answer */
#define HTTP_REQUEST_MAX      16384 /* memory for one request's line and headers */
#define HTTP_THREADS	      4	    /* scrapes collected at the same time */
#define HTTP_LOG_EVERY_SEC    60    /* messages clients cause: one of each kind a minute */
#define USER_CACHE_MAX	      4096
/*
 * The HTTP side asks the collector (cli: privilege separation below) for a reading with this
 * one byte and nothing else; the answer is a struct collect_answer and the text. The collector
 * gives up a channel whose reader has not taken a whole answer this long after it was ready.
 */
#define COLLECT_REQUEST		  'S'
#define COLLECT_SEND_TIMEOUT_SEC  10
#define COLLECT_TEXT_MAX	  ((uint64_t)1 << 30) /* an answer longer is no answer */
#define COLLECT_GARBAGE_EVERY_SEC 60		      /* its complaint: at most once a minute */
#define USER_CACHE_SEC		  60   /* how long a user name (or its absence) is believed */
#define COLLECTOR_STOP_MS	  2000 /* the HTTP process's wait for the collector at its end */
/*
 * What the HTTP process writes (its stdout and stderr: a pipe) reaches the log through the relay
 * (below), a line at a time, each cut at RELAY_LINE_MAX bytes, at most RELAY_LINES_PER_MIN a
 * minute, with a count of those left out.
 */
#define RELAY_LINE_MAX	    512
#define RELAY_LINES_PER_MIN 60
#define RELAY_PREFIX	    "jobcg: metrics: http[%d]: "

static uint64_t mono_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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

int metrics_listen(const char *cmd, const char *opt, const char *addr, int *ret_fd)
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
		return cli_usage_error(cmd,
				       "%s '%s': expected ADDRESS:PORT (127.0.0.1:9810, "
				       "[::1]:9810)",
				       opt, addr);
	if (cli_parse_uint(NULL, colon + 1, 65535, &port) < 0)
		return cli_usage_error(cmd, "%s '%s': the port must be a number 0-65535", opt,
				       addr);
	if ((size_t)(colon - addr) >= sizeof(host))
		return cli_usage_error(cmd, "%s '%s': not a numeric address", opt, addr);
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		host[strlen(host) - 1] = 0;
		if (inet_pton(AF_INET6, host + 1, &sa.in6.sin6_addr) != 1)
			return cli_usage_error(cmd, "%s '%s': not a numeric IPv6 address", opt,
					       addr);
		sa.in6.sin6_family = AF_INET6;
		sa.in6.sin6_port = htons((uint16_t)port);
		salen = sizeof(sa.in6);
	} else if (inet_pton(AF_INET, host, &sa.in4.sin_addr) == 1) {
		sa.in4.sin_family = AF_INET;
		sa.in4.sin_port = htons((uint16_t)port);
		salen = sizeof(sa.in4);
	} else
		return cli_usage_error(
		    cmd,
		    "%s '%s': not a numeric address (IPv4, or IPv6 in brackets): "
		    "names are not resolved, so the bind is exactly where told",
		    opt, addr);
	fd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cli_fail("metrics: socket: %s", strerror(errno));
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa.sa.sa_family == AF_INET6) {
		/* [::] is every address, IPv4 ones included (as Go's exporters take it), whatever
		 * net.ipv6.bindv6only says; --allow matches their mapped form. Any other IPv6
		 * address is that address alone. */
		int v6only = !IN6_IS_ADDR_UNSPECIFIED(&sa.in6.sin6_addr);

		if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)) < 0) {
			int e = errno;

			close(fd);
			return cli_fail("metrics: cannot listen on %s: IPV6_V6ONLY: %s", addr,
					strerror(e));
		}
	}
	if (bind(fd, &sa.sa, salen) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;

		close(fd);
		return cli_fail("metrics: cannot listen on %s: %s", addr, strerror(e));
	}
	*ret_fd = fd;
	return 0;
}

void metrics_where(int fd, const char *addr, char *buf, size_t size)
{
	union {
		struct sockaddr sa;
		struct sockaddr_in in4;
		struct sockaddr_in6 in6;
	} sa = {};
	socklen_t len = sizeof(sa);
	char host[INET6_ADDRSTRLEN];

	/* Port 0 has the kernel pick one: the address to scrape is the one bound, not the one
	 * asked for. */
	if (getsockname(fd, &sa.sa, &len) < 0)
		snprintf(buf, size, "%s", addr);
	else if (sa.sa.sa_family == AF_INET6 &&
		 inet_ntop(AF_INET6, &sa.in6.sin6_addr, host, sizeof(host)))
		snprintf(buf, size, "[%s]:%u", host, (unsigned)ntohs(sa.in6.sin6_port));
	else if (sa.sa.sa_family == AF_INET &&
		 inet_ntop(AF_INET, &sa.in4.sin_addr, host, sizeof(host)))
		snprintf(buf, size, "%s:%u", host, (unsigned)ntohs(sa.in4.sin_port));
	else
		snprintf(buf, size, "%s", addr);
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

/*
 * The HTTP process's channels to the collector, one for each of libmicrohttpd's threads so that
 * as many scrapes are collected at once as before; a request takes a free one for its reading.
 */
struct server {
	pid_t collector;
	pid_t relay; /* copies what this process writes to the log */
	int chan[HTTP_THREADS];
	bool chan_busy[HTTP_THREADS];
	pthread_mutex_t lock;
	pthread_cond_t chan_free;
	atomic_bool broken; /* a channel failed: the collector is gone, or not right */
};

/* The collector's answer to COLLECT_REQUEST, followed by @len bytes of text. */
struct collect_answer {
	uint32_t ok; /* 1: the text follows; 0 (and len 0): collecting failed, said in the log */
	uint32_t zero;
	uint64_t len;
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
 * A kind of message any client can cause: at most one every HTTP_LOG_EVERY_SEC, with a count of
 * those left out, so a client cannot fill the daemon's log. Each kind has its own, so that a
 * flood of one does not hide the other.
 */
struct log_limit {
	pthread_mutex_t lock;
	uint64_t next; /* CLOCK_MONOTONIC seconds: when the next may be said */
	unsigned long dropped;
};

/* Say @msg (with @prefix) if its kind may speak now, else count it left out. */
static void log_limit_say(struct log_limit *l, const char *prefix, const char *msg)
{
	uint64_t now = mono_sec();

	pthread_mutex_lock(&l->lock);
	if (l->next && now < l->next)
		l->dropped++;
	else {
		if (l->dropped)
			fprintf(stderr, "jobcg: metrics: %s%s (%lu more left out)\n", prefix, msg,
				l->dropped);
		else
			fprintf(stderr, "jobcg: metrics: %s%s\n", prefix, msg);
		l->dropped = 0;
		l->next = now + HTTP_LOG_EVERY_SEC;
	}
	pthread_mutex_unlock(&l->lock);
}

/* libmicrohttpd's messages, most of which any client can cause (a malformed request, a
 * connection over the limits). */
static void log_limited(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void log_limited(void *cls, const char *fmt, va_list ap)
{
	static struct log_limit limit = {.lock = PTHREAD_MUTEX_INITIALIZER};
	char msg[256];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* Some carry what the client sent: no control characters onto the log. */
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = *p == '\n' && !p[1] ? 0 : '?';
	log_limit_say(&limit, "libmicrohttpd: ", msg);
}

/*
 * libmicrohttpd's accept policy: called for each connection as it is accepted, before it is
 * counted against HTTP_CONNECTIONS_MAX (libmicrohttpd takes one of HTTP_PER_IP_MAX and gives it
 * back at once when this refuses) and before anything is read from it. A connection from an
 * address not on the allowlist @cls is closed there, unanswered, and said as often as
 * libmicrohttpd's own messages.
 */
static enum MHD_Result accept_allowed(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	static struct log_limit limit = {.lock = PTHREAD_MUTEX_INITIALIZER};
	const struct jobcg_netlist *allow = cls;
	char host[INET6_ADDRSTRLEN] = "?", msg[INET6_ADDRSTRLEN + 64];

	if (jobcg_netlist_contains(allow, addr, addrlen))
		return MHD_YES;
	if (addr && addr->sa_family == AF_INET && addrlen >= sizeof(struct sockaddr_in))
		inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, host,
			  sizeof(host));
	else if (addr && addr->sa_family == AF_INET6 && addrlen >= sizeof(struct sockaddr_in6))
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)addr)->sin6_addr, host,
			  sizeof(host));
	snprintf(msg, sizeof(msg), "refused a connection from %s: not on the allowlist", host);
	log_limit_say(&limit, "", msg);
	return MHD_NO;
}

/* @allow: the methods a 405 answer must name (RFC 9110), NULL for other answers. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
			     char *body, size_t len, const char *allow)
{
	struct MHD_Response *resp = mhd.from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result r;

	if (!resp) {
		free(body);
		return MHD_NO;
	}
	(void)mhd.add_header(resp, "Content-Type", type);
	if (allow && mhd.add_header(resp, "Allow", allow) != MHD_YES) {
		mhd.destroy(resp);
		return MHD_NO;
	}
	r = mhd.queue(conn, status, resp);
	mhd.destroy(resp);
	return r;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *msg,
				  const char *allow)
{
	char *body = strdup(msg);

	if (!body)
		return MHD_NO;
	return reply(conn, status, "text/plain; charset=utf-8", body, strlen(body), allow);
}

/*
 * One reading, asked of the collector on a free channel: 0 with the text, 1 when collecting
 * failed there, -EPROTO when the channel did not work (the server then stops: a channel left
 * mid-answer cannot be used again).
 */
static int collect(struct server *s, char **ret, size_t *ret_len)
{
	const char req = COLLECT_REQUEST;
	struct collect_answer a;
	char *text = NULL;
	size_t i;
	int r = -EPROTO;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		for (i = 0; i < HTTP_THREADS && s->chan_busy[i]; i++)
			;
		if (i < HTTP_THREADS)
			break;
		pthread_cond_wait(&s->chan_free, &s->lock);
	}
	s->chan_busy[i] = true;
	pthread_mutex_unlock(&s->lock);
	/* send_all(): MSG_NOSIGNAL, a collector gone is an error here, not a SIGPIPE. */
	if (!atomic_load(&s->broken) && send_all(s->chan[i], &req, 1) == 0 &&
	    read_all(s->chan[i], &a, sizeof(a)) == 0) {
		if (a.ok == 0 && a.zero == 0 && a.len == 0)
			r = 1;
		else if (a.ok == 1 && a.zero == 0 && a.len <= COLLECT_TEXT_MAX &&
			 (text = malloc(a.len ? (size_t)a.len : 1)) &&
			 read_all(s->chan[i], text, (size_t)a.len) == 0) {
			*ret = text;
			*ret_len = (size_t)a.len;
			text = NULL;
			r = 0;
		}
	}
	free(text);
	if (r < 0)
		atomic_store(&s->broken, true);
	pthread_mutex_lock(&s->lock);
	s->chan_busy[i] = false;
	pthread_cond_signal(&s->chan_free);
	pthread_mutex_unlock(&s->lock);
	return r;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	static char headers_seen;
	struct server *s = cls;
	char *body = NULL;
	size_t len = 0;
	enum MHD_Result r;

	/* Another method is refused at once: its body is not read, and the connection closes. */
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET or HEAD /metrics\n",
				  "GET, HEAD");
	/* An answer queued at the first call, which comes with the headers, makes libmicrohttpd
	 * close the connection after it: a scraper could never reuse one. So the first call only
	 * says go on, and a body (none is expected) is read and dropped. */
	if (!*con_cls) {
		*con_cls = &headers_seen;
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (strcmp(url, "/metrics") != 0)
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "jobcg serves /metrics\n", NULL);
	watch_phase(conn, true);
	if (collect(s, &body, &len) != 0)
		r = reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
			       "collecting failed: see the server's log\n", NULL);
	else
		r = reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
			  NULL);
	/* Then the client has HTTP_DEADLINE_SEC to take the answer. */
	watch_phase(conn, false);
	return r;
}

/* ---- the collector ---- */

/*
 * Privilege separation. Reading the node needs root (the owners' trusted.* attributes, the
 * BPF programs, the state directory); talking HTTP to whoever connects does not, and a flaw in
 * libmicrohttpd or in the handler must not be a root compromise. So the server is the HTTP
 * process, which gives up the terminal and drops to an ordinary user before it loads
 * libmicrohttpd, its child the relay (below), which copies its messages to the log, and its
 * child the collector, which stays root and does nothing but answer COLLECT_REQUEST
 * on its channels with a reading. It reads nothing else from the HTTP side: a byte that is
 * not a request is ignored, an answer the HTTP side has not taken whole within
 * COLLECT_SEND_TIMEOUT_SEC is given up with its channel, and nothing it allocates depends on
 * what it is sent.
 */
struct collector {
	const struct cli_global *g;
	atomic_uint_fast64_t errors; /* collection errors so far: the counter's value */
	pid_t http;
};

struct collector_chan {
	struct collector *c;
	int fd;
};

/* Bytes that are no request: said at most once a minute, with those not said. */
static void collector_garbage(const struct collector *c, size_t n)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t next;
	static unsigned long long count;
	uint64_t now = mono_sec();

	pthread_mutex_lock(&lock);
	count += n;
	if (!next || now >= next) {
		fprintf(stderr,
			"jobcg: metrics: collector: ignored %llu bytes from the HTTP process "
			"(pid %d) that are not a request\n",
			count, (int)c->http);
		count = 0;
		next = now + COLLECT_GARBAGE_EVERY_SEC;
	}
	pthread_mutex_unlock(&lock);
}

/*
 * Send all of @buf by @deadline (CLOCK_MONOTONIC ms): a reader that takes it a byte at a time
 * keeps the collector's thread no longer than one that takes none. -ETIMEDOUT past it.
 */
static int send_by(int fd, const void *buf, size_t len, uint64_t deadline)
{
	for (size_t off = 0; off < len;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		uint64_t now = mono_ms();
		ssize_t k;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			return -errno;
		k = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (k > 0)
			off += (size_t)k;
	}
	return 0;
}

/* Answer one request: false when the channel is given up. */
static bool collector_answer(struct collector_chan *ch)
{
	struct collect_answer a = {};
	char *text = NULL;
	size_t len = 0;
	unsigned errors = 0;
	uint64_t deadline;
	int r;

	if (metrics_text(ch->c->g, atomic_load(&ch->c->errors), &text, &len, &errors) == 0) {
		atomic_fetch_add(&ch->c->errors, errors);
		a.ok = 1;
		a.len = len;
	}
	deadline = mono_ms() + COLLECT_SEND_TIMEOUT_SEC * 1000;
	if ((r = send_by(ch->fd, &a, sizeof(a), deadline)) == 0)
		r = send_by(ch->fd, text, len, deadline);
	if (r == -ETIMEDOUT)
		fprintf(stderr,
			"jobcg: metrics: collector: the HTTP process (pid %d) did not take an "
			"answer within %d s: no more answers on that channel\n",
			(int)ch->c->http, COLLECT_SEND_TIMEOUT_SEC);
	free(text);
	return r == 0;
}

/* One channel's requests, until the HTTP side closes it or fails to take an answer. */
static void *collector_thread(void *arg)
{
	struct collector_chan *ch = arg;
	unsigned char req[64];
	bool go = true;

	while (go) {
		ssize_t n = read(ch->fd, req, sizeof(req));
		size_t bad = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && go; i++) {
			if (req[i] == COLLECT_REQUEST)
				go = collector_answer(ch);
			else
				bad++;
		}
		if (bad)
			collector_garbage(ch->c, bad);
	}
	/* Shut down, not closed: the HTTP side sees the channel end all the same, and
	 * collector_run(), which watches the descriptor, never sees its number reused. */
	(void)shutdown(ch->fd, SHUT_RDWR);
	return NULL;
}

/*
 * The collector's life: a thread for each channel; returns once every channel is hung up, by
 * the HTTP side (its stop, or its end, killed or not) or given up here. Not once the threads
 * end: a reading under way may never end (NSS not answering a user lookup), and the HTTP side,
 * unprivileged, cannot end this root process; what such a reading would answer has no reader.
 */
static int collector_run(const struct cli_global *g, const int *fds, pid_t http)
{
	/* Static, not on this stack: a thread still in a reading when this returns reads them
	 * until the process exits (ASan saw the stack read after its scope, under load). */
	static struct collector c;
	static struct collector_chan ch[HTTP_THREADS];
	struct pollfd p[HTTP_THREADS];
	size_t left = HTTP_THREADS;
	pthread_t t;
	const char *mount;

	c = (struct collector){.g = g, .http = http};
	/* Computed once here: its static buffer is not filled concurrently by the threads. */
	(void)jobcg_cgroup2_mount(&mount);
	for (size_t i = 0; i < HTTP_THREADS; i++) {
		ch[i] = (struct collector_chan){.c = &c, .fd = fds[i]};
		p[i] = (struct pollfd){.fd = fds[i], .events = POLLRDHUP};
		if (pthread_create(&t, NULL, collector_thread, &ch[i]) != 0)
			(void)shutdown(fds[i], SHUT_RDWR);
	}
	while (left > 0) {
		if (poll(p, HTTP_THREADS, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (size_t i = 0; i < HTTP_THREADS; i++)
			if (p[i].fd >= 0 && p[i].revents) {
				p[i].fd = -1;
				left--;
			}
	}
	return 0;
}

/* ---- the HTTP process's messages ---- */

/*
 * The HTTP process holds no descriptor of the log (a holder of root's log descriptor can
 * ftruncate() it and write lines as root's): its stdout and stderr are a pipe, and this root
 * process copies what comes through it to its own stderr, the log. Each line is prefixed with
 * RELAY_PREFIX, so that a reader can tell it from root's own, has every byte that is not
 * printable ASCII replaced with '?' (no escape sequence reaches a terminal showing the log), is
 * cut at RELAY_LINE_MAX bytes, and at most RELAY_LINES_PER_MIN lines are copied a minute. The
 * buffer is one line: a writer that never ends its line or floods the pipe costs a bounded
 * amount of memory, and the HTTP side writes without blocking (O_NONBLOCK), so a relay held up
 * by its own log loses that side's lines rather than holding up the server.
 */
struct relay {
	pid_t http;
	char line[RELAY_LINE_MAX + 1];
	size_t len;
	bool cut;		/* the line went on past RELAY_LINE_MAX: the rest is dropped */
	uint64_t window;	/* CLOCK_MONOTONIC seconds: the current minute's end */
	unsigned lines;		/* copied in the current minute */
	unsigned long left_out; /* lines not copied since the last one that was */
};

static void relay_left_out(struct relay *rl)
{
	if (rl->left_out)
		fprintf(stderr, RELAY_PREFIX "(%lu more lines left out)\n", (int)rl->http,
			rl->left_out);
	rl->left_out = 0;
}

static void relay_line(struct relay *rl)
{
	uint64_t now = mono_sec();

	if (now >= rl->window) {
		relay_left_out(rl);
		rl->window = now + 60;
		rl->lines = 0;
	}
	if (rl->lines >= RELAY_LINES_PER_MIN)
		rl->left_out++;
	else {
		rl->line[rl->len] = 0;
		fprintf(stderr, RELAY_PREFIX "%s%s\n", (int)rl->http, rl->line,
			rl->cut ? " [cut]" : "");
		rl->lines++;
	}
	rl->len = 0;
	rl->cut = false;
}

/* Copy @n bytes of @buf: whole lines, cleaned and cut, and the start of the next. */
static void relay_bytes(struct relay *rl, const unsigned char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = buf[i];

		if (c == '\n')
			relay_line(rl);
		else if (rl->len < RELAY_LINE_MAX)
			rl->line[rl->len++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
		else
			rl->cut = true;
	}
}

/*
 * The relay's life: until the HTTP process @http, its parent, ends. Not the end of the pipe
 * @fd: a process that the HTTP side forked (of its user, should a client take it over) may hold
 * a copy of it, and would keep this root process copying its lines under @http's name long
 * after @http is gone, one more at every restart. So @http itself is watched: through a pidfd,
 * or where the kernel has none (before Linux 5.3) by this process's parent once a second,
 * which is @http until it ends (then another: no pid reuse can fool that). A process's
 * descriptors are closed before its end is told, so what @http wrote is in the pipe by then;
 * that is copied without waiting, at most a pipe's worth, so that a holder that goes on
 * writing does not keep the relay going.
 */
static int relay_run(int fd, pid_t http)
{
	static struct relay rl;
	unsigned char buf[4096];
	int pidfd = -1, size;
	bool eof = false;

	rl.http = http;
#ifdef SYS_pidfd_open
	if (!test_flag("no-pidfd"))
		pidfd = (int)syscall(SYS_pidfd_open, http, 0);
#endif
	/* Checked after the pidfd is open: it is then @http's, not a later holder of its pid. */
	while (getppid() == http) {
		struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
					{.fd = pidfd, .events = POLLIN}};
		ssize_t n;
		int r = poll(pfd, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 1000);

		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		if (pidfd >= 0 && pfd[1].revents)
			break;
		if (!pfd[0].revents)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			eof = true;
			break;
		}
		relay_bytes(&rl, buf, (size_t)n);
	}
	if (!eof && fcntl(fd, F_SETFL, O_NONBLOCK) == 0) {
		size = fcntl(fd, F_GETPIPE_SZ);
		for (size_t left = size > 0 ? (size_t)size : 65536; left > 0;) {
			ssize_t n = read(fd, buf, left < sizeof(buf) ? left : sizeof(buf));

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			relay_bytes(&rl, buf, (size_t)n);
			left -= (size_t)n;
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	if (rl.len || rl.cut)
		relay_line(&rl);
	relay_left_out(&rl);
	return 0;
}

/*
 * Start the relay for the HTTP process @http (this one): the pipe's writing end in @ret_fd
 * (close-on-exec), the relay's pid in @ret_pid. 0, or 1 with the error printed.
 */
static int relay_start(pid_t http, int *ret_fd, pid_t *ret_pid)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return cli_fail("metrics: pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		return cli_fail("metrics: fork: %s", strerror(e));
	}
	if (pid == 0) {
		/* It ends when the HTTP process does (relay_run()), after its last lines: not at
		 * a Ctrl-C, which reaches its process group too, nor at a hangup. */
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		(void)prctl(PR_SET_NAME, "jobcg-http-log");
		close_fds_but(3, &p[0], 1);
		_exit(relay_run(p[0], http));
	}
	close(p[0]);
	*ret_fd = p[1];
	*ret_pid = pid;
	return 0;
}

/* ---- the terminal ---- */

/* This process's controlling terminal (its device number; 0: none), or -errno. */
static int ctty(void)
{
	char buf[1024];
	const char *p;
	int tty, fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	/* After the command name, which may hold anything but ends at the last ')'. */
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %*c %*d %*d %*d %d", &tty) != 1)
		return -EIO;
	return tty;
}

/*
 * Give up the controlling terminal of whoever started this (a root shell): on it, a process of
 * the HTTP side's user could push input into that shell (TIOCSTI, where the kernel still allows
 * it), read what is typed there and write to it. setsid() would do it, but this process is often
 * its process group's leader (a command started from a shell), for which setsid() fails; and
 * staying in that group keeps Ctrl-C working. A session leader that gives up its terminal sends
 * the terminal's foreground group SIGHUP (this process's too, when it is in the foreground),
 * ignored meanwhile. Checked afterwards. 0, or 1 with the error printed.
 */
static int detach_terminal(void)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	int tty = ctty(), e = 0, fd;

	if (tty == 0)
		return 0;
	fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		e = errno;
	else {
		sigaction(SIGHUP, &ign, &old);
		if (ioctl(fd, TIOCNOTTY) < 0)
			e = errno;
		sigaction(SIGHUP, &old, NULL);
		close(fd);
	}
	if ((tty = ctty()) != 0)
		return cli_fail("metrics: cannot give up the controlling terminal before serving "
				"HTTP: %s",
				tty < 0 ? strerror(-tty) : strerror(e ? e : EBUSY));
	return 0;
}

/*
 * Descriptors 0, 1 and 2 of the HTTP process: standard input from /dev/null, output and error
 * the relay's pipe @logw (not blocking, as the relay says), which is closed (metrics_serve()
 * made sure it is not one of 0-2). 0, or 1 with the error printed.
 */
static int http_std_fds(int logw)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC), fl;

	if (null < 0)
		return cli_fail("metrics: /dev/null: %s", strerror(errno));
	if ((fl = fcntl(logw, F_GETFL)) < 0 || fcntl(logw, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    dup2(null, 0) < 0 || dup2(logw, 1) < 0 || dup2(logw, 2) < 0)
		return cli_fail("metrics: standard descriptors: %s", strerror(errno));
	close(null);
	close(logw);
	return 0;
}

/* ---- dropping privileges ---- */

/*
 * Become @uid:@gid for good, without supplementary groups, with no way back or up (no new
 * privileges through an exec), and not open to ptrace by other processes of that user. The
 * parent-death signal, which the kernel clears on a change of credentials, is set again.
 * 0, or 1 with the error printed.
 */
static int drop_privileges(uid_t uid, gid_t gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	pid_t parent = getppid();
	int pdeath = 0;

	(void)prctl(PR_GET_PDEATHSIG, &pdeath);
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return cli_fail("metrics: cannot become uid %u gid %u: %s", (unsigned)uid,
				(unsigned)gid, strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
	    (pdeath && prctl(PR_SET_PDEATHSIG, pdeath) < 0))
		return cli_fail("metrics: prctl: %s", strerror(errno));
	if (pdeath && getppid() != parent)
		return cli_fail("metrics: the parent ended");
	if (chdir("/") < 0)
		return cli_fail("metrics: chdir /: %s", strerror(errno));
	/* Checked, not believed: a drop that did not happen must not serve. */
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != uid ||
	    eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
	    getgroups(0, NULL) != 0 || (uid != 0 && (gid == 0 || setuid(0) == 0 || setgid(0) == 0)))
		return cli_fail("metrics: the privileges were not dropped to uid %u gid %u",
				(unsigned)uid, (unsigned)gid);
	return 0;
}

int metrics_user(const char *opt, const char *user, uid_t *ret_uid, gid_t *ret_gid)
{
	const char *name = user ? user : METRICS_USER_DEFAULT;
	unsigned number;
	uid_t uid;
	gid_t gid;
	int r = cli_getent_user(name, &uid, &gid);

	/* A number without a passwd entry has no group of its own: taking the group of the same
	 * number (as files of a vanished user are shown) could be kmem, sudo, systemd-journal. */
	if (r == -ENOENT && user && cli_parse_uint(NULL, user, UINT32_MAX - 1, &number) == 0)
		return cli_fail("metrics: %s %s: no passwd entry has uid %u, so it has no group to "
				"serve HTTP with: name a user that exists (useradd --system "
				"--no-create-home jobcg-metrics)",
				opt, user, number);
	if (r == -ENOENT)
		return cli_fail("metrics: no user '%s' to serve HTTP as%s", name,
				user ? "" : " (name one with --user)");
	if (r < 0)
		return 1;
	if (uid == 0 && !user)
		return cli_fail("metrics: the user '%s' is root: HTTP is served as root only when "
				"%s names it",
				name, opt);
	/* Root's group is root's in all but name (files of group root that it may write, and
	 * read): only root itself gets it, when named. */
	if (uid != 0 && gid == 0)
		return cli_fail("metrics: the user '%s' (uid %u) has root's group (gid 0) as its "
				"primary group: HTTP is not served with it; give that user a group "
				"of its own, or name another with %s",
				name, (unsigned)uid, opt);
	*ret_uid = uid;
	*ret_gid = gid;
	return 0;
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

/* Exec @exe as `metrics --listen-fd FD [--user USER] [--allow LIST]` with the global options;
 * returns only on failure. */
static int exec_server(const char *exe, const struct cli_global *g, int fd, const char *user,
		       const char *allow)
{
	char fdarg[16], *argv[20];
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
	if (user) {
		argv[n++] = (char *)"--user";
		argv[n++] = (char *)user;
	}
	if (allow) {
		argv[n++] = (char *)"--allow";
		argv[n++] = (char *)allow;
	}
	argv[n] = NULL;
	/* The socket crosses the exec: the one descriptor that must. */
	if (fcntl(fd, F_SETFD, 0) < 0)
		return -errno;
	execv(exe, argv);
	return -errno;
}

/* Say how the collector ended (reaped already: @st), or that it did. */
static void collector_ended(pid_t pid, int st)
{
	if (WIFSIGNALED(st))
		fprintf(stderr,
			"jobcg: metrics: the collector (pid %d) was killed by signal %d (%s)\n",
			(int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		fprintf(stderr, "jobcg: metrics: the collector (pid %d) exited with status %d\n",
			(int)pid, WEXITSTATUS(st));
}

/* The HTTP process, unprivileged, until a stop signal or the collector's end. */
static int serve_http(const struct cli_global *g, int fd, struct server *s, int logw, uid_t uid,
		      gid_t gid, const struct jobcg_netlist *allow)
{
	struct MHD_Daemon *d;
	sigset_t stop, old;
	int keep[HTTP_THREADS + 1], sig = 0, st, r;

	/* A relay gone is an error on a write, not a SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	memcpy(keep, s->chan, sizeof(s->chan));
	keep[HTTP_THREADS] = fd;
	if ((r = http_std_fds(logw)) != 0)
		return r;
	close_fds_but(3, keep, HTTP_THREADS + 1);
	if ((r = drop_privileges(uid, gid)) != 0 || (r = mhd_load()) != 0)
		return r;
	/* Stop signals go to this thread's sigwait(), never to the server's threads, which
	 * inherit the mask. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	/* The logger first: libmicrohttpd otherwise says so through it, a line at every start
	 * that would also use up the minute's one message a client can cause. */
	d = mhd.start(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0,
		      allow ? accept_allowed : NULL, (void *)allow, handle, s,
		      MHD_OPTION_EXTERNAL_LOGGER, log_limited, NULL, MHD_OPTION_LISTEN_SOCKET,
		      (MHD_socket)fd, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
		      MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS_MAX,
		      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_PER_IP_MAX,
		      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_SEC,
		      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_REQUEST_MAX,
		      MHD_OPTION_NOTIFY_CONNECTION, watch_notify, NULL, MHD_OPTION_NOTIFY_COMPLETED,
		      watch_completed, NULL, MHD_OPTION_END);
	if (!d) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return cli_fail("metrics: libmicrohttpd could not start on the socket");
	}
	if (g->verbose)
		fprintf(stderr,
			"jobcg: metrics: serving /metrics as uid %u (pid %d), collecting as root "
			"(pid %d), logging through pid %d\n",
			(unsigned)uid, (int)getpid(), (int)s->collector, (int)s->relay);
	/* This thread also enforces the deadlines, looking once a second, and stops when the
	 * collector is gone: this process cannot start another, the supervisor can. */
	for (;;) {
		const struct timespec tick = {.tv_sec = 1};
		pid_t p;

		sig = sigtimedwait(&stop, NULL, &tick);
		if (sig > 0)
			break;
		watch_expire();
		if ((p = waitpid(s->collector, &st, WNOHANG)) == s->collector) {
			collector_ended(s->collector, st);
			s->collector = 0;
			r = 1;
			break;
		}
		if (atomic_load(&s->broken)) {
			fprintf(stderr,
				"jobcg: metrics: the channel to the collector (pid %d) "
				"failed: stopping\n",
				(int)s->collector);
			r = 1;
			break;
		}
		/* Without it nothing this process says is heard: the daemon, seeing the server
		 * end, says so and starts all three again. */
		if (waitpid(s->relay, &st, WNOHANG) == s->relay) {
			s->relay = 0;
			r = 1;
			break;
		}
	}
	/* No reading under way is waited for: a thread of libmicrohttpd's waiting for one (held up
	 * by NSS, say) would hold MHD_stop_daemon() as long, and the collector, root, cannot be
	 * signalled from here. Shut down, its channels end that wait at once. */
	atomic_store(&s->broken, true);
	for (size_t i = 0; i < HTTP_THREADS; i++)
		(void)shutdown(s->chan[i], SHUT_RDWR);
	mhd.stop(d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

int metrics_allow(const char *cmd, const char *opt, const char *list, struct jobcg_netlist **ret)
{
	struct jobcg_netlist *l = NULL;
	int r = jobcg_netlist_parse(list, &l);

	if (r < 0)
		return cli_usage_error(cmd, "%s: %s", opt, jobcg_error_message(r));
	if (ret)
		*ret = l;
	else
		jobcg_netlist_free(l);
	return 0;
}

int metrics_serve(const struct cli_global *g, int fd, const char *user, const char *allow)
{
	struct server s = {
	    .lock = PTHREAD_MUTEX_INITIALIZER,
	    .chan_free = PTHREAD_COND_INITIALIZER,
	};
	int coll[HTTP_THREADS], logw = -1, r, st;
	pid_t http = getpid();
	uid_t uid;
	gid_t gid;
	_cleanup_(netlist_freep) struct jobcg_netlist *allowed = NULL;

	/* Said here, before the exec below: the twin would say it too, but later. */
	if (allow && (r = metrics_allow("metrics", "--allow", allow, &allowed)) != 0)
		return r;
	if (linked_statically()) {
		char exe[PATH_MAX];

		r = twin_exe(exe, sizeof(exe));
		if (r == 0)
			r = exec_server(exe, g, fd, user, allow);
		return cli_fail("metrics: this jobcg is linked statically and serves HTTP through "
				"%s, which cannot run: %s (install it with jobcg)",
				exe, strerror(-r));
	}
	/* The collector's end is seen with waitpid(), as getent's is, which a SIGCHLD ignored by
	 * whoever started this (inherited across the exec) would defeat. */
	signal(SIGCHLD, SIG_DFL);
	if ((r = metrics_user("--user", user, &uid, &gid)) != 0)
		return r;
	if (uid == 0)
		fprintf(stderr,
			"jobcg: metrics: serving HTTP as root (--user %s): a flaw in the "
			"HTTP side is a flaw of root\n",
			user);
	/* Descriptors 0-2 open (one may have been closed by whoever started this), so that none
	 * made below is one of them: they are replaced in the HTTP process. */
	for (int n; (n = open("/dev/null", O_RDWR)) >= 0;)
		if (n > 2) {
			close(n);
			break;
		}
	/* Before the forks: none of the three processes keeps the terminal. */
	if ((r = detach_terminal()) != 0 || (r = relay_start(http, &logw, &s.relay)) != 0)
		return r;
	for (size_t i = 0; i < HTTP_THREADS; i++) {
		int p[2];

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0) {
			r = cli_fail("metrics: socketpair: %s", strerror(errno));
			for (size_t j = 0; j < i; j++) {
				close(s.chan[j]);
				close(coll[j]);
			}
			close(logw);
			return r;
		}
		s.chan[i] = p[0];
		coll[i] = p[1];
	}
	/* Forked before any thread: the collector is this process as it was, single-threaded. */
	s.collector = fork();
	if (s.collector < 0) {
		r = cli_fail("metrics: fork: %s", strerror(errno));
		for (size_t i = 0; i < HTTP_THREADS; i++) {
			close(s.chan[i]);
			close(coll[i]);
		}
		close(logw);
		return r;
	}
	if (s.collector == 0) {
		/* The parent-death signal reaches it from an HTTP process that stayed root (--user
		 * root) only: the kernel checks it as a kill(). Otherwise it ends when the HTTP
		 * process's ends of its channels close, killed or not (collector_run()). */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != http)
			_exit(1);
		(void)prctl(PR_SET_NAME, "jobcg-collector");
		/* Its channels only: not the listening socket, the HTTP side's ends or the relay's
		 * pipe, nor what whoever started the server left open (a pipe kept open by a
		 * process that outlives it would hold a reader of that pipe). */
		close_fds_but(3, coll, HTTP_THREADS);
		_exit(collector_run(g, coll, http));
	}
	for (size_t i = 0; i < HTTP_THREADS; i++)
		close(coll[i]);
	/* Not `exe` (the daemon's child runs /proc/self/exe) nor plain `jobcg` in ps and top. */
	(void)prctl(PR_SET_NAME, "jobcg-metrics");
	r = serve_http(g, fd, &s, logw, uid, gid, allowed);
	/* Its channels closed, the collector ends without waiting for readings under way. One that
	 * has not within COLLECTOR_STOP_MS is not waited for longer: a stop is not held up. */
	for (size_t i = 0; i < HTTP_THREADS; i++)
		close(s.chan[i]);
	if (s.collector > 0) {
		uint64_t until = mono_ms() + COLLECTOR_STOP_MS;
		unsigned pause_ms = 1;

		while (waitpid(s.collector, &st, WNOHANG) == 0 && mono_ms() < until)
			sleep_backoff(&pause_ms);
	}
	/* The relay ends with this process, after copying what is left in its pipe: descriptors 1
	 * and 2 stay the pipe to the end (a sanitizer's report at exit is heard too). */
	return r;
}

/* The supervisor's start: bind the address (again, for a server started anew) and fork the
 * server onto it. */
static int server_fork(void *arg, pid_t *ret_pid)
{
	struct metrics_server *m = arg;
	pid_t parent = getpid(), pid;
	char where[INET6_ADDRSTRLEN + 16];
	int fd, r = metrics_listen("daemon", "--metrics-listen", m->addr, &fd);

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
		r = exec_server("/proc/self/exe", m->g, fd, m->user, m->allow);
		fprintf(stderr, "jobcg: metrics: cannot run /proc/self/exe: %s\n", strerror(-r));
		_exit(127);
	}
	metrics_where(fd, m->addr, where, sizeof(where));
	close(fd);
	fprintf(stderr, "jobcg: metrics on http://%s/metrics (pid %d)\n", where, (int)pid);
	*ret_pid = pid;
	return 0;
}

int metrics_server_start(struct metrics_server *m, const struct cli_global *g, const char *addr,
			 const char *user, const char *allow)
{
	uid_t uid;
	gid_t gid;
	/* A user that is not there, or a list that does not parse, is a mistake to hear about at
	 * start, not at every restart. */
	int r = metrics_user("--metrics-user", user, &uid, &gid);

	if (r || (allow && (r = metrics_allow("daemon", "--metrics-allow", allow, NULL)) != 0))
		return r;
	m->g = g;
	m->addr = addr;
	m->user = user;
	m->allow = allow;
	return supervise_start(&m->sup, "metrics server", server_fork, m);
}
