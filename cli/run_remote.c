/*
 * jobcg CLI: `jobcg run` through `jobcg daemon`, both ends. The daemon does the cgroup work in
 * a process whose code is already loaded; the client still starts the tasks itself, so they stay
 * its children with its cwd, limits and namespaces.
 *
 * The exchange, one connection per step (msg.h frames):
 *   client: op=run v=2 arg=... (its `run` arguments) env=JOBCG_*=... config_dir= verbose=
 *           umask=, with its cwd as a descriptor
 *   daemon: op=exit code=N (the step never started; fallback=1: not served, run it yourself,
 *           reason= saying why when the client should hear it), or op=spawn job= step= ntasks=
 *           ephemeral= start_usec= [oom_before=] env=TASK:NAME=VALUE..., with the step's
 *           directory as a descriptor
 *   client: op=status exit_code= lost_signal= status=RAW... (one per task), or error=ERRNO
 *           message= when the tasks could not be started
 *   daemon: op=exit code=N, after the accounting record, the devices and the directories
 * Each answer of the daemon may carry out= and err=: what the work printed, for the client to
 * print; the daemon never writes to a client's descriptors.
 * A client that goes away mid-step has its step killed and recorded as NODE_FAIL; a daemon
 * that goes away leaves the client to end the step itself, from what op=spawn said. No wait of
 * the client on the daemon is longer than NodeLockTimeout + SystemdTimeout + 10 s (connecting,
 * sending, each answer): a daemon stopped or hung before op=spawn fails the step (nothing ran),
 * after it the client ends the step itself.
 *
 * The client trusts only a daemon of root or its own user (SO_PEERCRED, checked before it
 * lends anything), in a directory of root or its own user that nobody else may enter; it
 * takes from op=spawn only the variables jobcg sets and only the step's own directory.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config_internal.h"
#include "jobcg/gres.h"
#include "msg.h"
#include "run.h"
#include "testhook.h"
#include "util.h"

extern char **environ;

/* The JOBCG_* variables that shape the configuration and the context: the daemon takes the
 * client's, so that a step made for it is the one `jobcg run` would have made itself. */
static bool env_forwarded(const char *e)
{
	return strncmp(e, "JOBCG_", 6) == 0 && strncmp(e, "JOBCG_DAEMON_SOCKET=", 20) != 0;
}

static bool field_is(const struct jobcg_msg *m, const char *key, const char *value)
{
	const char *v = jobcg_msg_get(m, key);

	return v && strcmp(v, value) == 0;
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

uint64_t run_monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int run_socket_dir_check(const char *path, char *why, size_t size)
{
	const char *slash = strrchr(path, '/');
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct stat st;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (lstat(dir, &st) < 0)
		return -errno;
	/* A link could be pointed elsewhere by whoever owns it; a directory others may enter or
	 * write lets them replace the socket or listen there first. */
	if (S_ISLNK(st.st_mode)) {
		snprintf(why, size, "%s: the directory of the daemon's socket is a symbolic link",
			 dir);
		return -EPERM;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, size, "%s: the daemon's socket lies in something not a directory",
			 dir);
		return -EPERM;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(why, size,
			 "%s: the directory of the daemon's socket belongs to uid %u, neither "
			 "root nor you",
			 dir, (unsigned)st.st_uid);
		return -EPERM;
	}
	if (st.st_mode & 077) {
		snprintf(why, size,
			 "%s: the directory of the daemon's socket is open to group or others "
			 "(mode %04o; it must be 0700: 'chmod 0700' it, or start 'jobcg daemon', "
			 "which does so for /run/jobcg)",
			 dir, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* SO_RCVTIMEO or SO_SNDTIMEO of @fd: @ms, 0 for none. */
static int set_timeo(int fd, int opt, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000u, .tv_usec = (ms % 1000u) * 1000};

	return setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)) < 0 ? -errno : 0;
}

int run_daemon_connect(const char *path, unsigned timeout_ms, int *ret, char *why, size_t size)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ucred cred = {};
	socklen_t len = sizeof(cred);
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	r = run_socket_dir_check(path, why, size);
	if (r < 0)
		return r;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A unix socket's connect() waits while the listener's queue is full (a daemon that
	 * is stopped accepts nothing), for SO_SNDTIMEO at most. */
	r = timeout_ms ? set_timeo(fd, SO_SNDTIMEO, timeout_ms) : 0;
	if (r == 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		r = -errno;
	/* Sending stays as it was. */
	if (r == 0 && timeout_ms)
		r = set_timeo(fd, SO_SNDTIMEO, 0);
	if (r < 0) {
		close(fd);
		return r;
	}
	/* Who listens, before anything is lent: root, or we ourselves. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		int e = errno;

		close(fd);
		snprintf(why, size, "%s: cannot tell who listens: %s", path, strerror(e));
		return -EPERM;
	}
	if (cred.uid != 0 && cred.uid != geteuid()) {
		close(fd);
		snprintf(why, size, "%s is served by pid %d of uid %u, neither root nor you", path,
			 (int)cred.pid, (unsigned)cred.uid);
		return -EPERM;
	}
	*ret = fd;
	return 0;
}

/* "/proc/self/fd/FD" without printf: on the client's success path nothing else would reach
 * glibc's printf engine, a thousand instructions each fresh process faults in. */
static void fd_path(char buf[static 32], int fd)
{
	static const char pre[] = "/proc/self/fd/";
	char d[12];
	size_t n = 0;

	do {
		d[n++] = (char)('0' + fd % 10);
		fd /= 10;
	} while (fd > 0 && n < sizeof(d));
	memcpy(buf, pre, sizeof(pre) - 1);
	for (size_t i = 0; i < n; i++)
		buf[sizeof(pre) - 1 + i] = d[n - 1 - i];
	buf[sizeof(pre) - 1 + n] = '\0';
}

/* The directory the daemon lent must be the step's own, <root>/job_J/step_S of our context:
 * the tasks are placed below it. -EPERM with @why, else 0. */
static int stepdir_check(struct jobcg_ctx *ctx, int dfd, const struct run_state *s, char *why,
			 size_t size)
{
	struct jobcg_target t = {.job = s->life.job, .task = JOBCG_TASK_ALL};
	struct statfs sf;
	struct stat got, want;
	char *path = NULL;
	int r;

	if (fstatfs(dfd, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC || fstat(dfd, &got) < 0 ||
	    !S_ISDIR(got.st_mode)) {
		snprintf(why, size, "the step directory it lent is not a cgroup v2 directory");
		return -EPERM;
	}
	memcpy(t.step, s->life.step, sizeof(t.step));
	r = jobcg_target_path(ctx, &t, &path);
	if (r < 0) {
		snprintf(why, size, "step %u.%s: %s", s->life.job, s->life.step,
			 jobcg_error_message(r));
		return -EPERM;
	}
	if (stat(path, &want) < 0 || want.st_dev != got.st_dev || want.st_ino != got.st_ino) {
		snprintf(why, size, "the step directory it lent is not %s", path);
		free(path);
		return -EPERM;
	}
	free(path);
	return 0;
}

/* An error about the lent directory names it as /proc/self/fd/N (@sdir): say which step
 * directory that is, as the same error in-process would. */
static void name_step_dir(struct jobcg_ctx *ctx, const struct run_state *s, const char *sdir,
			  char *text, size_t size)
{
	struct jobcg_target t = {.job = s->life.job, .task = JOBCG_TASK_ALL};
	_cleanup_free_ char *path = NULL, *out = NULL;
	size_t n = strlen(sdir);
	char *at = strstr(text, sdir);

	/* (a longer fd number that merely starts with ours is another directory) */
	if (!at || (at[n] >= '0' && at[n] <= '9'))
		return;
	memcpy(t.step, s->life.step, sizeof(t.step));
	if (jobcg_target_path(ctx, &t, &path) < 0) {
		jobcg_error_clear();
		return;
	}
	out = strdup_printf("%.*s%s%s", (int)(at - text), text, path, at + n);
	if (out)
		snprintf(text, size, "%s", out);
}

/* What the daemon's work printed, in the order it came, where it would have gone. */
static void print_output(const struct jobcg_msg *m)
{
	size_t pos = 0;
	const char *v;

	while ((v = jobcg_msg_next(m, "out", &pos)))
		fputs(v, stdout);
	fflush(stdout);
	pos = 0;
	while ((v = jobcg_msg_next(m, "err", &pos)))
		fputs(v, stderr);
}

/* The daemon went away after making the step: end it here, as it would have. */
static int finish_here(struct jobcg_ctx *ctx, struct run_state *s, int r, const char *err_text,
		       const struct jobcg_run_result *res)
{
	fprintf(stderr, "jobcg: warning: lost the daemon (%s); ending step %u.%s here\n",
		jobcg_last_error()->message, s->life.job, s->life.step);
	return run_finish(ctx, s, r, err_text, res, false);
}

/* op=exit fallback=1: the daemon will not serve us; its reason, when it gives one. */
static void say_refused(const struct jobcg_msg *reply, const char *path)
{
	const char *reason = jobcg_msg_get(reply, "reason");

	if (reason)
		fprintf(stderr,
			"jobcg: the daemon at %s did not take the step (%.200s); running it in "
			"this process\n",
			path, reason);
}

/* Tell the daemon that the tasks will not run, so that it ends the step it made. */
static void send_refusal(int fd, int err, const char *message)
{
	struct jobcg_msg m = {};

	(void)jobcg_msg_add(&m, "op", "status");
	(void)jobcg_msg_add(&m, "error", "%d", err);
	(void)jobcg_msg_add(&m, "message", "%s", message);
	(void)jobcg_msg_send(fd, &m, NULL, 0);
	jobcg_msg_free(&m);
}

/* How long the daemon may take to answer op=run before the client first asks what the
 * configuration allows: a healthy daemon answers within milliseconds, and the client does not
 * pay for reading the configuration on that path. */
#define ANSWER_QUICK_MS 1000u
/* Past the node lock's and systemd's own bounds, for the daemon's cgroup work and its other
 * clients' requests ahead of ours. */
#define ANSWER_MARGIN_MS 10000u

/* The longest a working daemon takes to make a step: it waits for the node lock
 * (NodeLockTimeout) and for systemd (SystemdTimeout) at most, as this process would. */
static unsigned conf_bound_ms(const struct jobcg_config *conf)
{
	uint64_t lock = 30000, systemd = 1000, bound;

	if (conf) {
		lock = conf->cgroup.node_lock_timeout_ms;
		/* 0 is the scope backend's default too */
		if (conf->cgroup.systemd_timeout_ms)
			systemd = conf->cgroup.systemd_timeout_ms;
	}
	/* Each may be up to UINT32_MAX ms. */
	bound = lock + systemd + ANSWER_MARGIN_MS;
	return bound > UINT_MAX ? UINT_MAX : (unsigned)bound;
}

static unsigned answer_bound_ms(const struct cli_global *g)
{
	struct jobcg_config *conf = NULL;
	unsigned bound;

	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
	if (jobcg_config_load(g->config_dir, NULL, JOBCG_CONFIG_NO_ENTRIES, &conf) < 0)
		conf = NULL;
	bound = conf_bound_ms(conf);
	jobcg_config_free(conf);
	cli_set_verbosity(g->verbose);
	return bound;
}

/* Send the request, bounded as the answer is: a daemon that is stopped or hung reads nothing,
 * and a request bigger than the socket takes would wait in send for ever. -ETIMEDOUT with
 * *ret_bound_ms when it was not taken in time. */
static int send_request(int fd, const struct cli_global *g, const struct jobcg_msg *m, int cwd,
			unsigned *ret_bound_ms)
{
	uint64_t start = run_monotonic_ms();
	unsigned bound = ANSWER_QUICK_MS;
	size_t off = 0;
	int r = jobcg_msg_send_until(fd, m, &cwd, 1, start + ANSWER_QUICK_MS, &off);

	if (r == -ETIMEDOUT) {
		bound = answer_bound_ms(g);
		r = jobcg_msg_send_until(fd, m, &cwd, 1, start + bound, &off);
	}
	if (r == -ETIMEDOUT)
		*ret_bound_ms = bound;
	return r;
}

/* The daemon's answer to op=run, bounded: a daemon that is stopped or hung must not hold
 * every client for ever (the tasks have not started; once they have, nothing waits on the
 * daemon). -ETIMEDOUT with *ret_bound_ms when none came in time. */
static int recv_answer(int fd, const struct cli_global *g, struct jobcg_msg *reply, int *stepfd,
		       unsigned *nfds, unsigned *ret_bound_ms)
{
	struct jobcg_msg_rx rx = {};
	unsigned bound = ANSWER_QUICK_MS;
	int r;

	r = set_timeo(fd, SO_RCVTIMEO, ANSWER_QUICK_MS);
	if (r < 0)
		return r;
	r = jobcg_msg_recv_some(fd, &rx, JOBCG_MSG_MAX, reply, stepfd, 1, nfds);
	if (r == -EAGAIN) {
		bound = answer_bound_ms(g);
		/* What came so far stays in rx: the rest follows it. */
		r = set_timeo(fd, SO_RCVTIMEO,
			      bound > ANSWER_QUICK_MS ? bound - ANSWER_QUICK_MS : 1);
		if (r == 0)
			r = jobcg_msg_recv_some(fd, &rx, JOBCG_MSG_MAX, reply, stepfd, 1, nfds);
	}
	if (r == -EAGAIN) {
		jobcg_msg_rx_free(&rx);
		*ret_bound_ms = bound;
		return -ETIMEDOUT;
	}
	/* The step's end is the daemon's too, but the client then ends it itself if the
	 * daemon goes away: its wait stays as it was. */
	return r ?: set_timeo(fd, SO_RCVTIMEO, 0);
}

int run_via_daemon(const char *path, int argc, char **argv, const struct run_args *a,
		   const struct cli_global *g, int *ret_exit)
{
	struct jobcg_msg m = {}, reply = {};
	struct jobcg_spawn_opts so = {.no_clone3 = a->no_clone3};
	struct jobcg_run_result res = {};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct run_state s = {};
	char ***env = NULL, sdir[64], err_text[2048] = "", why[512] = "";
	int fd = -1, cwd = -1, stepfd = -1, r, code = 1;
	unsigned nfds = 0, bound = 0;
	mode_t mask;

	/* With stdout or stderr closed the socket could become one of them and receive what we
	 * print: this process does it itself. */
	if (!fd_open(1) || !fd_open(2))
		return 0;
	r = run_daemon_connect(path, ANSWER_QUICK_MS, &fd, why, sizeof(why));
	if (r == -EAGAIN) {
		bound = answer_bound_ms(g);
		r = run_daemon_connect(path, bound > ANSWER_QUICK_MS ? bound - ANSWER_QUICK_MS : 1,
				       &fd, why, sizeof(why));
	}
	if (r == -EAGAIN) {
		/* Alive (it holds the socket) but taking no one: clients that gave up on its
		 * answer fill its queue. */
		fprintf(stderr,
			"jobcg: the daemon at %s accepted no connection within %u ms (stopped or "
			"hung?); nothing was run (--no-daemon runs the step in this process)\n",
			path, bound);
		return cli_answered(ret_exit, 1);
	}
	if (r == -ENAMETOOLONG)
		return cli_answered(
		    ret_exit,
		    cli_usage_error("run", "JOBCG_DAEMON_SOCKET '%s': longer than a socket path",
				    path));
	if (r == -EPERM) {
		/* Someone else's socket is not a daemon that is away: say so, run nothing. */
		fprintf(stderr,
			"jobcg: %s: not using it (--no-daemon, or JOBCG_DAEMON_SOCKET set empty, "
			"runs the step in this process)\n",
			why);
		return cli_answered(ret_exit, 1);
	}
	if (r < 0)
		return 0; /* no daemon (or not one for us): nothing was asked */
	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0)
		goto fallback;
	mask = umask(0);
	umask(mask);
	r = jobcg_msg_add(&m, "op", "run");
	r = r ?: jobcg_msg_add(&m, "v", "%d", RUN_PROTOCOL_VERSION);
	for (int i = 0; !r && i < argc; i++)
		r = jobcg_msg_add(&m, "arg", "%s", argv[i]);
	for (char **e = environ; !r && e && *e; e++)
		if (env_forwarded(*e))
			r = jobcg_msg_add(&m, "env", "%s", *e);
	if (!r && g->config_dir)
		r = jobcg_msg_add(&m, "config_dir", "%s", g->config_dir);
	r = r ?: jobcg_msg_add(&m, "verbose", "%d", g->verbose);
	r = r ?: jobcg_msg_add(&m, "umask", "%u", (unsigned)mask);
	/* Arguments too big for a request: not the daemon's job. */
	if (r < 0 || m.len > RUN_REQUEST_MAX)
		goto fallback;
	r = send_request(fd, g, &m, cwd, &bound);
	close(cwd);
	cwd = -1;
	if (r == -ETIMEDOUT) {
		/* Never sent whole, so never served: but the daemon is there, and holds who
		 * knows what (the node lock?). */
		fprintf(stderr,
			"jobcg: the daemon at %s took no request within %u ms (stopped or hung?); "
			"nothing was run (--no-daemon runs the step in this process)\n",
			path, bound);
		goto out;
	}
	if (r < 0) {
		/* A daemon that refuses us at once may have answered, and closed, before we
		 * asked: its reason is still to be read (there already, if it is). */
		if (set_timeo(fd, SO_RCVTIMEO, ANSWER_QUICK_MS) == 0 &&
		    jobcg_msg_recv(fd, &reply, NULL, 0, NULL) == 0 &&
		    field_is(&reply, "op", "exit"))
			say_refused(&reply, path);
		goto fallback;
	}

	r = recv_answer(fd, g, &reply, &stepfd, &nfds, &bound);
	if (r == -ETIMEDOUT) {
		/* Not run here: the daemon may have made the step, and ends it when it finds us
		 * gone. */
		fprintf(stderr,
			"jobcg: the daemon at %s did not answer within %u ms (stopped or hung?); "
			"nothing was run\n",
			path, bound);
		goto out;
	}
	if (r < 0) {
		fprintf(stderr, "jobcg: the daemon at %s gave no answer: %s\n", path,
			jobcg_error_message(r));
		goto out;
	}
	print_output(&reply);
	if (field_is(&reply, "op", "exit")) {
		uint64_t c;

		if (jobcg_msg_get(&reply, "fallback")) {
			say_refused(&reply, path);
			goto fallback;
		}
		if (jobcg_msg_get_u64(&reply, "code", 255, &c) < 0)
			goto bad_reply;
		code = (int)c;
		goto out;
	}
	if (!field_is(&reply, "op", "spawn") || nfds != 1)
		goto bad_reply;
	r = run_spawn_parse(&reply, a, &s, &env, why, sizeof(why));
	if (r == -ENOMEM)
		goto out;
	jobcg_msg_free(&m);
	if (r == -EPROTO) {
		send_refusal(fd, EPROTO, "malformed answer from the daemon");
		goto bad_reply;
	}
	/* The root to check the lent directory against, as this process would have made it;
	 * quietly, as the daemon's answer already said what loading the configuration logs. */
	if (r == 0) {
		int cr;

		jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
		cr = cli_ctx_open(g, 0, &conf, &ctx);
		cli_set_verbosity(g->verbose);
		if (cr != 0) {
			send_refusal(fd, EINVAL, "the client cannot open its configuration");
			goto out;
		}
	}
	if (r == 0)
		r = stepdir_check(ctx, stepfd, &s, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr,
			"jobcg: refusing the answer of the daemon at %s: %s; nothing was run\n",
			path, why);
		send_refusal(fd, EPERM, why);
		goto out;
	}

	fd_path(sdir, stepfd);
	so.task_env = env;
	r = jobcg_step_run_dir(ctx, sdir, s.life.job, s.life.step, a->ntasks, argv + a->cmd_index,
			       &so, &res);
	close(stepfd);
	stepfd = -1;
	{
		int mr = jobcg_msg_add(&m, "op", "status");

		if (r < 0) {
			jobcg_error_format(r, err_text, sizeof(err_text));
			name_step_dir(ctx, &s, sdir, err_text, sizeof(err_text));
			mr = mr ?: jobcg_msg_add(&m, "error", "%d", -r);
			mr = mr ?: jobcg_msg_add(&m, "message", "%s", err_text);
		} else {
			mr = mr ?: jobcg_msg_add(&m, "exit_code", "%d", res.exit_code);
			mr = mr ?: jobcg_msg_add(&m, "lost_signal", "%d", res.lost_signal);
			for (unsigned i = 0; !mr && i < res.ntasks; i++)
				mr =
				    jobcg_msg_add(&m, "status", "%u", (unsigned)res.task_status[i]);
		}
		if (mr < 0) /* too big to say: the daemon hears nothing, and we end it here */
			jobcg_msg_free(&m);
	}
	jobcg_msg_free(&reply);
	/* The daemon ends the step under the node lock, as this process would: a daemon that
	 * has not done so within the bound is stopped or hung, and the step is ended here (its
	 * end is the remover's, once: the daemon, resumed, finds it gone). */
	bound = conf_bound_ms(conf);
	{
		size_t off = 0;

		if (!m.len ||
		    jobcg_msg_send_until(fd, &m, NULL, 0, run_monotonic_ms() + bound, &off) < 0 ||
		    set_timeo(fd, SO_RCVTIMEO, bound) < 0 ||
		    jobcg_msg_recv(fd, &reply, NULL, 0, NULL) < 0) {
			code = finish_here(ctx, &s, r, *err_text ? err_text : NULL, &res);
			goto out;
		}
	}
	print_output(&reply);
	{
		uint64_t c;

		if (!field_is(&reply, "op", "exit") ||
		    jobcg_msg_get_u64(&reply, "code", 255, &c) < 0)
			goto bad_reply;
		code = (int)c;
	}
	goto out;

bad_reply:
	fprintf(stderr, "jobcg: the daemon at %s answered what this jobcg does not understand\n",
		path);
	code = 1;
	goto out;
fallback:
	code = -1; /* not run: the caller runs the step */
out:
	if (stepfd >= 0)
		close(stepfd);
	if (cwd >= 0)
		close(cwd);
	close(fd);
	if (ctx)
		cli_ctx_close(conf, ctx);
	free(res.task_status);
	run_task_env_free(env, a->ntasks);
	jobcg_msg_free(&m);
	jobcg_msg_free(&reply);
	return code < 0 ? 0 : cli_answered(ret_exit, code);
}

/* ---- the daemon's side ---- */

/*
 * The daemon serves every connection in its one process and waits on none of them: each is a
 * struct run_conn that moves through the phases below as its socket becomes readable or
 * writable (non-blocking), and is dropped when a phase outlasts its deadline. Only the cgroup
 * work itself (run_begin, run_finish) runs to its end at once. For it the daemon wears the
 * client's cwd, umask, JOBCG_* environment and verbosity (client_enter), with its stdout and
 * stderr on memory files whose text the answer carries back (client_leave).
 */
enum phase {
	PH_REQUEST, /* reading op=run, until the deadline set at the connection */
	PH_SPAWN,   /* sending op=spawn */
	PH_RUNNING, /* the client runs the tasks: reading op=status (a deadline from its first
		       byte on) */
	PH_EXIT,    /* sending op=exit, then closing */
};

struct run_conn {
	int fd;
	pid_t client;
	enum phase phase;
	uint64_t deadline_ms; /* CLOCK_MONOTONIC; 0: none */
	struct jobcg_msg_rx rx;
	struct jobcg_msg tx;
	size_t tx_off;
	int tx_fd; /* lent with tx (the step's directory), or -1 */
	int cwd;
	mode_t umask;
	int capture[2];	      /* while serving: the memory files on our stdout and stderr */
	struct jobcg_msg req; /* the arguments (and so run_args) and env point into it */
	char **argv;
	char **env; /* environ while serving it: ours without JOBCG_*, then its JOBCG_* */
	struct run_args a;
	struct cli_global g;
	struct jobcg_config *conf;
	struct jobcg_ctx *ctx;
	struct run_state s;
	bool step; /* s holds a step that this connection must end */
};

/* The daemon's own: saved once, put back after each client. */
static struct {
	int out, err, cwd;
	mode_t umask;
	int verbose;
	char *
	    *env; /* environ as it started: never changed by setenv, which leaks what it replaces */
	unsigned long steps;
} self = {.out = -1, .err = -1, .cwd = -1};

int run_daemon_save_self(int verbose)
{
	self.out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	self.err = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	self.cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	self.umask = umask(0);
	umask(self.umask);
	self.verbose = verbose;
	self.env = environ;
	if (self.out < 0 || self.err < 0 || self.cwd < 0)
		return -errno;
	return 0;
}

unsigned long run_daemon_steps(void)
{
	return self.steps;
}

/*
 * Wear the client's state. Its working directory first: a step made from the daemon's own would
 * resolve the client's relative paths against it, so when it cannot be entered nothing changes
 * and the error is returned (@need_cwd), or, to end a step already made, the daemon's own stays
 * and its log says so.
 */
static int client_enter(struct run_conn *c, bool need_cwd)
{
	if (fchdir(c->cwd) < 0) {
		int e = errno;

		if (need_cwd)
			return -e;
		fprintf(stderr,
			"jobcg: daemon: pid %d's working directory: %s: ending its step from "
			"the daemon's own\n",
			(int)c->client, strerror(e));
	}
	fflush(NULL);
	for (int i = 0; i < 2; i++) {
		c->capture[i] = memfd_create(i ? "jobcg-stderr" : "jobcg-stdout", MFD_CLOEXEC);
		/* Without one, what the work says goes to our own log, never to the client. */
		(void)dup2(c->capture[i] >= 0 ? c->capture[i]
			   : i		      ? self.err
					      : self.out,
			   STDOUT_FILENO + i);
	}
	umask(c->umask);
	environ = c->env;
	cli_set_verbosity(c->g.verbose);
	jobcg_set_runner(c->client);
	return 0;
}

/* What a memory file holds, up to RUN_OUTPUT_MAX bytes, as a string (NUL bytes made '?'), or
 * NULL when it holds nothing. */
static char *capture_read(int fd)
{
	static const char cut[] = "\njobcg: (the daemon cut the rest of this output)\n";
	struct stat st;
	size_t len, got = 0;
	char *buf;

	if (fstat(fd, &st) < 0 || st.st_size <= 0)
		return NULL;
	len = (size_t)st.st_size > RUN_OUTPUT_MAX ? RUN_OUTPUT_MAX : (size_t)st.st_size;
	buf = malloc(len + sizeof(cut));
	if (!buf)
		return NULL;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	for (size_t i = 0; i < got; i++)
		if (!buf[i])
			buf[i] = '?';
	buf[got] = '\0';
	if ((size_t)st.st_size > len)
		memcpy(buf + got, cut, sizeof(cut));
	return buf;
}

/* Back to our own; what the work printed goes into @m as out= and err= (NULL @m: the client is
 * gone, into our log). */
static void client_leave(struct run_conn *c, struct jobcg_msg *m)
{
	fflush(NULL);
	(void)dup2(self.out, STDOUT_FILENO);
	(void)dup2(self.err, STDERR_FILENO);
	if (fchdir(self.cwd) < 0)
		fprintf(stderr, "jobcg: daemon: cannot go back to its working directory: %s\n",
			strerror(errno));
	umask(self.umask);
	environ = self.env;
	cli_set_verbosity(self.verbose);
	jobcg_set_runner(0);
	for (int i = 0; i < 2; i++) {
		char *text;
		int r;

		if (c->capture[i] < 0)
			continue;
		text = capture_read(c->capture[i]);
		close(c->capture[i]);
		c->capture[i] = -1;
		if (!text)
			continue;
		if (!m)
			fprintf(stderr, "jobcg: daemon: for pid %d, which is gone:\n%s",
				(int)c->client, text);
		else if ((r = jobcg_msg_add(m, i ? "err" : "out", "%s", text)) < 0)
			fprintf(stderr, "jobcg: daemon: output for pid %d lost: %s\n",
				(int)c->client, jobcg_error_message(r));
		free(text);
	}
}

void run_conn_free(struct run_conn *c)
{
	if (!c)
		return;
	if (c->ctx)
		cli_ctx_close(c->conf, c->ctx);
	jobcg_step_gres_free(c->s.life.gres);
	if (c->cwd >= 0)
		close(c->cwd);
	if (c->tx_fd >= 0)
		close(c->tx_fd);
	close(c->fd);
	jobcg_msg_rx_free(&c->rx);
	jobcg_msg_free(&c->tx);
	free(c->argv);
	free(c->env);
	jobcg_msg_free(&c->req);
	free(c);
}

struct run_conn *run_conn_new(int fd, pid_t client, uint64_t now_ms)
{
	struct run_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	*c = (struct run_conn){.fd = fd,
			       .client = client,
			       .phase = PH_REQUEST,
			       .deadline_ms = now_ms + RUN_IO_TIMEOUT_MS,
			       .tx_fd = -1,
			       .cwd = -1,
			       .capture = {-1, -1}};
	return c;
}

static int exit_msg(struct jobcg_msg *m, int code, bool fallback, const char *reason)
{
	int r;

	jobcg_msg_free(m);
	r = jobcg_msg_add(m, "op", "exit");
	r = r ?: jobcg_msg_add(m, "code", "%d", code);
	if (!r && fallback)
		r = jobcg_msg_add(m, "fallback", "1");
	if (!r && reason)
		r = jobcg_msg_add(m, "reason", "%s", reason);
	return r;
}

void run_refuse(int conn, const char *reason)
{
	struct jobcg_msg m = {};
	size_t off = 0;

	/* One try: a fresh connection's buffer takes it, and a refused client is not waited on. */
	if (exit_msg(&m, 1, true, reason) == 0)
		(void)jobcg_msg_send_some(conn, &m, NULL, 0, &off);
	jobcg_msg_free(&m);
}

static int spawn_msg(struct run_conn *c)
{
	const struct jobcg_step_life *s = &c->s.life;
	struct jobcg_target t = {.job = s->job, .task = JOBCG_TASK_ALL};
	struct jobcg_msg *m = &c->tx;
	char *path = NULL;
	int r;

	memcpy(t.step, s->step, sizeof(t.step));
	r = jobcg_target_path(c->ctx, &t, &path);
	if (r < 0)
		return r;
	c->tx_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(path);
	if (c->tx_fd < 0)
		return -errno;
	jobcg_msg_free(m);
	r = jobcg_msg_add(m, "op", "spawn");
	r = r ?: jobcg_msg_add(m, "job", "%u", s->job);
	r = r ?: jobcg_msg_add(m, "step", "%s", s->step);
	r = r ?: jobcg_msg_add(m, "ntasks", "%u", s->ntasks);
	r = r ?: jobcg_msg_add(m, "ephemeral", "%d", c->s.ephemeral);
	r = r ?: jobcg_msg_add(m, "start_usec", "%llu", (unsigned long long)s->start_usec);
	if (!r && jobcg_acct_has(&s->job_before, JOBCG_ACCT_OOM))
		r = jobcg_msg_add(m, "oom_before", "%llu",
				  (unsigned long long)s->job_before.value[JOBCG_ACCT_OOM]);
	for (unsigned i = 0; !r && jobcg_step_gres_task_env(s->gres) && i < s->ntasks; i++)
		for (char **e = jobcg_step_gres_task_env(s->gres)[i]; !r && e && *e; e++)
			r = jobcg_msg_add(m, "env", "%u:%s", i, *e);
	if (r < 0) {
		close(c->tx_fd);
		c->tx_fd = -1;
	}
	return r;
}

/* The environment to serve it in: ours without JOBCG_*, then its JOBCG_* (pointing into its
 * request). -ENOMEM. */
static int env_build(struct run_conn *c)
{
	size_t n = 0, pos = 0;
	const char *v;

	for (char **e = self.env; e && *e; e++)
		n++;
	while (jobcg_msg_next(&c->req, "env", &pos))
		n++;
	c->env = calloc(n + 1, sizeof(char *));
	if (!c->env)
		return -ENOMEM;
	n = 0;
	for (char **e = self.env; e && *e; e++)
		if (strncmp(*e, "JOBCG_", 6) != 0)
			c->env[n++] = *e;
	pos = 0;
	while ((v = jobcg_msg_next(&c->req, "env", &pos)))
		c->env[n++] = (char *)v;
	return 0;
}

/* Check op=run in c->req and take what it lends. -EPROTO: not ours to serve, -ENOTDIR: its
 * working directory is not a directory (the client runs it either way). */
static int request_parse(struct run_conn *c, const int *fds, unsigned nfds)
{
	struct stat st;
	int argc;

	if (nfds == 1)
		c->cwd = fds[0];
	/* What it lends as its working directory must be one: any other descriptor would leave
	 * the step in the daemon's. */
	if (nfds == 1 && (fstat(c->cwd, &st) < 0 || !S_ISDIR(st.st_mode)))
		return -ENOTDIR;
	if (nfds != 1)
		return -EPROTO;
	argc = run_request_parse(&c->req, &c->umask, &c->g, &c->argv);
	if (argc < 0)
		return argc;
	if (env_build(c) < 0)
		return -ENOMEM;
	return argc;
}

static void phase_to(struct run_conn *c, enum phase p, uint64_t now_ms)
{
	c->phase = p;
	c->tx_off = 0;
	c->deadline_ms = p == PH_RUNNING ? 0 : now_ms + RUN_IO_TIMEOUT_MS;
}

/* Nobody will run or report the step's tasks: end it, NODE_FAIL. */
static void end_lost(struct run_conn *c, struct jobcg_msg *answer)
{
	int code;

	if (!c->step)
		return;
	(void)client_enter(c, false);
	code = run_finish(c->ctx, &c->s, 0, NULL, NULL, true);
	c->step = false;
	if (answer)
		(void)exit_msg(answer, code, false, NULL);
	client_leave(c, answer);
}

/* A whole request: make the step, and answer op=spawn or op=exit. */
static void on_request(struct run_conn *c, const int *fds, unsigned nfds, uint64_t now_ms)
{
	int argc = request_parse(c, fds, nfds), code, r;
	char why[128];

	if (argc < 0) {
		/* run it yourself */
		(void)exit_msg(&c->tx, 1, true,
			       argc == -ENOTDIR ? "the working directory it lent is not a directory"
						: NULL);
		phase_to(c, PH_EXIT, now_ms);
		return;
	}
	if ((r = client_enter(c, true)) < 0) {
		snprintf(why, sizeof(why), "the daemon cannot enter its working directory: %s",
			 strerror(-r));
		(void)exit_msg(&c->tx, 1, true, why);
		phase_to(c, PH_EXIT, now_ms);
		return;
	}
	/* Past the arguments (--help is answered) and with a context (0), the step made. */
	if (!run_parse(argc, c->argv, &c->a, &code) &&
	    (code = cli_ctx_open(&c->g, 0, &c->conf, &c->ctx)) == 0 &&
	    !run_begin(c->ctx, &c->a, &c->s, &code)) {
		test_pause("daemon-before-spawn");
		if (spawn_msg(c) < 0)
			/* The directory cannot be lent: nobody runs it. */
			code = run_finish(c->ctx, &c->s, 0, NULL, NULL, true);
		else
			c->step = true;
	}
	if (c->step)
		self.steps++;
	else
		(void)exit_msg(&c->tx, code, false, NULL);
	client_leave(c, &c->tx);
	phase_to(c, c->step ? PH_SPAWN : PH_EXIT, now_ms);
}

/* The client's report: end the step, answer op=exit. */
static void on_status(struct run_conn *c, const struct jobcg_msg *st, uint64_t now_ms)
{
	struct jobcg_run_result res = {};
	char err_text[2048] = "";
	int r, err = 0, code;

	r = run_status_parse(st, c->s.life.ntasks, &res, &err, err_text, sizeof(err_text));
	(void)client_enter(c, false);
	if (r < 0)
		code = run_finish(c->ctx, &c->s, 0, NULL, NULL, true);
	else
		code = run_finish(c->ctx, &c->s, err, err ? err_text : NULL, &res, false);
	c->step = false;
	(void)exit_msg(&c->tx, code, false, NULL);
	client_leave(c, &c->tx);
	free(res.task_status);
	phase_to(c, PH_EXIT, now_ms);
}

short run_conn_events(const struct run_conn *c)
{
	return c->phase == PH_SPAWN || c->phase == PH_EXIT ? POLLOUT : POLLIN;
}

uint64_t run_conn_deadline(const struct run_conn *c)
{
	return c->deadline_ms;
}

/* Send what the socket takes of the answer. false: the connection is over. */
static bool flush(struct run_conn *c, uint64_t now_ms)
{
	int r = jobcg_msg_send_some(c->fd, &c->tx, &c->tx_fd, c->tx_fd >= 0 ? 1 : 0, &c->tx_off);

	if (r == -EAGAIN)
		return true;
	if (r < 0 || c->phase == PH_EXIT) {
		end_lost(c, NULL); /* op=spawn that did not get through */
		return false;
	}
	close(c->tx_fd);
	c->tx_fd = -1;
	jobcg_msg_free(&c->tx);
	phase_to(c, PH_RUNNING, now_ms);
	return true;
}

bool run_conn_step(struct run_conn *c, short revents, uint64_t now_ms)
{
	if (c->phase == PH_SPAWN || c->phase == PH_EXIT) {
		if (revents && !flush(c, now_ms))
			return false;
	} else if (revents) {
		struct jobcg_msg m = {};
		int fds[1];
		unsigned nfds = 0;
		bool request = c->phase == PH_REQUEST;
		int r = jobcg_msg_recv_some(c->fd, &c->rx, RUN_REQUEST_MAX, request ? &c->req : &m,
					    fds, request ? 1 : 0, &nfds);

		if (r == -EAGAIN) {
			/* A report has its deadline from its first byte: the tasks take their time.
			 */
			if (!request && c->rx.got && !c->deadline_ms)
				c->deadline_ms = now_ms + RUN_IO_TIMEOUT_MS;
		} else if (r < 0 && request) {
			if (r == -ECONNRESET)
				return false;
			(void)exit_msg(&c->tx, 1, true, NULL); /* run it yourself */
			phase_to(c, PH_EXIT, now_ms);
		} else if (r == -ECONNRESET) {
			end_lost(c, NULL);
			return false;
		} else if (r < 0) {
			end_lost(c, &c->tx);
			phase_to(c, PH_EXIT, now_ms);
		} else if (request)
			on_request(c, fds, nfds, now_ms);
		else
			on_status(c, &m, now_ms);
		jobcg_msg_free(&m);
		/* An answer goes out at once where the socket takes it, as it nearly always does.
		 */
		if (c->phase == PH_SPAWN || c->phase == PH_EXIT)
			return flush(c, now_ms);
	}
	if (!c->deadline_ms || now_ms < c->deadline_ms)
		return true;
	switch (c->phase) {
	case PH_REQUEST:
		if (c->rx.got)
			fprintf(stderr,
				"jobcg: daemon: pid %d sent %zu byte(s) of its request, not all of "
				"it, within %d s; dropped\n",
				(int)c->client, c->rx.got, RUN_IO_TIMEOUT_MS / 1000);
		else
			fprintf(stderr,
				"jobcg: daemon: pid %d connected but sent no request within %d s; "
				"dropped\n",
				(int)c->client, RUN_IO_TIMEOUT_MS / 1000);
		break;
	case PH_RUNNING:
		fprintf(stderr,
			"jobcg: daemon: pid %d began its report on step %u.%s but did not finish "
			"it within %d s; ending the step\n",
			(int)c->client, c->s.life.job, c->s.life.step, RUN_IO_TIMEOUT_MS / 1000);
		end_lost(c, NULL);
		break;
	case PH_SPAWN:
		fprintf(stderr,
			"jobcg: daemon: pid %d did not take the answer on step %u.%s within %d s; "
			"ending the step\n",
			(int)c->client, c->s.life.job, c->s.life.step, RUN_IO_TIMEOUT_MS / 1000);
		end_lost(c, NULL);
		break;
	case PH_EXIT:
		break;
	}
	return false;
}

bool run_conn_stopping(struct run_conn *c, uint64_t now_ms)
{
	if (c->phase != PH_REQUEST)
		return true;
	/* Not begun: the client runs its step itself. */
	jobcg_msg_rx_free(&c->rx);
	(void)exit_msg(&c->tx, 1, true, NULL);
	phase_to(c, PH_EXIT, now_ms);
	return flush(c, now_ms);
}
