/*
 * jobcg CLI: `jobcg run` through `jobcg daemon`, both ends. The daemon does the cgroup work in
 * a process whose code is already loaded (and, under emulation, translated); the client still
 * starts the tasks itself, so they stay its children with its cwd, limits and namespaces.
 *
 * The exchange, one connection per step (jobcg/msg.h frames):
 *   client: op=run v=1 arg=... (its `run` arguments) env=JOBCG_*=... config_dir= verbose=
 *           umask=, with its stdout, stderr and cwd as descriptors
 *   daemon: op=exit code=N (the step never started: errors went to the client's stderr;
 *           fallback=1: not served, run it yourself), or op=spawn job= step= ntasks=
 *           ephemeral= start_usec= [oom_before=] env=TASK:NAME=VALUE..., with the step's
 *           directory as a descriptor
 *   client: op=status exit_code= lost_signal= status=RAW... (one per task), or error=ERRNO
 *           message= when the tasks could not be started
 *   daemon: op=exit code=N, after the accounting record, the devices and the directories
 * A client that goes away mid-step has its step killed and recorded as NODE_FAIL; a daemon
 * that goes away leaves the client to end the step itself, from what op=spawn said.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "jobcg/msg.h"
#include "run.h"

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

int run_daemon_connect(const char *path, int *ret)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return -e;
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

/* op=spawn's fields into a run_state and per-task environments. -EPROTO on nonsense. */
static int spawn_parse(const struct jobcg_msg *m, const struct run_args *a, struct run_state *s,
		       char ****ret_env)
{
	uint64_t job, ntasks, eph, start, oom;
	const char *step = jobcg_msg_get(m, "step"), *v;
	char ***env;
	size_t pos = 0;

	if (jobcg_msg_get_u64(m, "job", UINT32_MAX - 1, &job) < 0 || job == 0 || !step ||
	    !jobcg_step_id_valid(step) || strlen(step) >= sizeof(s->life.step) ||
	    jobcg_msg_get_u64(m, "ntasks", UINT32_MAX, &ntasks) < 0 || ntasks != a->ntasks ||
	    jobcg_msg_get_u64(m, "ephemeral", 1, &eph) < 0 ||
	    jobcg_msg_get_u64(m, "start_usec", UINT64_MAX, &start) < 0)
		return -EPROTO;
	*s = (struct run_state){
	    .life = {.job = (uint32_t)job, .ntasks = a->ntasks, .start_usec = start},
	    .ephemeral = eph,
	    .want_acct = a->want_acct,
	    .json = a->json};
	memcpy(s->life.step, step, strlen(step) + 1); /* its length is checked above */
	if (jobcg_msg_get_u64(m, "oom_before", UINT64_MAX, &oom) == 0) {
		s->life.job_before.value[JOBCG_ACCT_OOM] = oom;
		s->life.job_before.have |= 1u << JOBCG_ACCT_OOM;
	}
	env = calloc(a->ntasks, sizeof(char **));
	if (!env)
		return -ENOMEM;
	*ret_env = env;
	while ((v = jobcg_msg_next(m, "env", &pos))) {
		char *end, **l;
		unsigned long t = strtoul(v, &end, 10);
		size_t n = 0;

		if (end == v || *end != ':' || t >= a->ntasks || !strchr(end + 1, '='))
			return -EPROTO;
		for (l = env[t]; l && l[n]; n++)
			;
		l = realloc(env[t], (n + 2) * sizeof(char *));
		if (!l)
			return -ENOMEM;
		env[t] = l;
		if (!(l[n] = strdup(end + 1)))
			return -ENOMEM;
		l[n + 1] = NULL;
	}
	return 0;
}

static void task_env_free(char ***env, unsigned n)
{
	for (unsigned t = 0; env && t < n; t++) {
		for (char **e = env[t]; e && *e; e++)
			free(*e);
		free(env[t]);
	}
	free(env);
}

/* The daemon went away after making the step: end it here, as it would have. */
static int finish_here(const struct cli_global *g, struct run_state *s, int r, const char *err_text,
		       const struct jobcg_run_result *res)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int code;

	fprintf(stderr, "jobcg: warning: lost the daemon (%s); ending step %u.%s here\n",
		jobcg_last_error()->message, s->life.job, s->life.step);
	if (cli_ctx_open(g, 0, &conf, &ctx))
		return 1;
	code = run_finish(ctx, s, r, err_text, res, false);
	cli_ctx_close(conf, ctx);
	return code;
}

int run_via_daemon(const char *path, int argc, char **argv, const struct run_args *a,
		   const struct cli_global *g)
{
	struct jobcg_msg m = {}, reply = {};
	struct jobcg_spawn_opts so = {.no_clone3 = a->no_clone3};
	struct jobcg_run_result res = {};
	struct run_state s = {};
	char ***env = NULL, sdir[64], err_text[2048] = "";
	int fd = -1, cwd = -1, stepfd = -1, fds[3], r, code = 1;
	unsigned nfds = 0;
	mode_t mask;

	/* Without stdout and stderr to lend, or a cwd to name, this process does it itself. */
	if (!fd_open(1) || !fd_open(2))
		return -1;
	r = run_daemon_connect(path, &fd);
	if (r == -ENAMETOOLONG)
		return cli_usage_error("run", "JOBCG_DAEMON_SOCKET '%s': longer than a socket path",
				       path);
	if (r < 0)
		return -1; /* no daemon (or not one for us): nothing was asked */
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
	fds[0] = 1;
	fds[1] = 2;
	fds[2] = cwd;
	/* Arguments too big for a message: not the daemon's job. */
	if (r < 0 || jobcg_msg_send(fd, &m, fds, 3) < 0)
		goto fallback;
	close(cwd);
	cwd = -1;

	r = jobcg_msg_recv(fd, &reply, &stepfd, 1, &nfds);
	if (r < 0) {
		fprintf(stderr, "jobcg: the daemon at %s gave no answer: %s\n", path,
			jobcg_last_error()->message);
		goto out;
	}
	if (field_is(&reply, "op", "exit")) {
		uint64_t c;

		if (jobcg_msg_get(&reply, "fallback"))
			goto fallback;
		if (jobcg_msg_get_u64(&reply, "code", 255, &c) < 0)
			goto bad_reply;
		code = (int)c;
		goto out;
	}
	if (!field_is(&reply, "op", "spawn") || nfds != 1)
		goto bad_reply;
	r = spawn_parse(&reply, a, &s, &env);
	if (r == -ENOMEM)
		goto out;
	jobcg_msg_free(&m);
	if (r < 0) {
		/* Tell the daemon, which ends the step it made. */
		(void)jobcg_msg_add(&m, "op", "status");
		(void)jobcg_msg_add(&m, "error", "%d", EPROTO);
		(void)jobcg_msg_add(&m, "message", "malformed answer from the daemon");
		(void)jobcg_msg_send(fd, &m, NULL, 0);
		goto bad_reply;
	}

	fd_path(sdir, stepfd);
	so.task_env = (char *const *const *)env;
	r = jobcg_step_run_dir(sdir, s.life.job, s.life.step, a->ntasks, argv + a->cmd_index, &so,
			       &res);
	close(stepfd);
	stepfd = -1;
	{
		int mr = jobcg_msg_add(&m, "op", "status");

		if (r < 0) {
			jobcg_error_format(err_text, sizeof(err_text));
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
	if (!m.len || jobcg_msg_send(fd, &m, NULL, 0) < 0 ||
	    jobcg_msg_recv(fd, &reply, NULL, 0, NULL) < 0) {
		code = finish_here(g, &s, r, *err_text ? err_text : NULL, &res);
		goto out;
	}
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
	code = -1;
out:
	if (stepfd >= 0)
		close(stepfd);
	if (cwd >= 0)
		close(cwd);
	close(fd);
	free(res.task_status);
	task_env_free(env, a->ntasks);
	jobcg_msg_free(&m);
	jobcg_msg_free(&reply);
	return code;
}

/* ---- the daemon's side ---- */

/*
 * The daemon serves every connection in its one process, one message at a time: while it
 * does a client's work it wears that client's stdout, stderr, cwd, umask, JOBCG_* environment
 * and verbosity (client_enter), and takes them off again (client_leave).
 */
struct run_conn {
	int fd;
	pid_t client;
	int out, err, cwd;
	mode_t umask;
	struct jobcg_msg req; /* the arguments (and so run_args) point into it */
	char **argv;
	struct run_args a;
	struct cli_global g;
	struct jobcg_config *conf;
	struct jobcg_ctx *ctx;
	struct run_state s;
};

/* The daemon's own: saved once, put back after each client. */
static struct {
	int out, err, cwd;
	mode_t umask;
	int verbose;
	char **env; /* its JOBCG_* variables */
} self = {.out = -1, .err = -1, .cwd = -1};

static void unset_jobcg_env(void)
{
	for (;;) {
		char **e = environ, *name;
		int r;

		while (e && *e && strncmp(*e, "JOBCG_", 6) != 0)
			e++;
		if (!e || !*e || !(name = strndup(*e, strcspn(*e, "="))))
			return;
		r = unsetenv(name);
		free(name);
		if (r < 0)
			return;
	}
}

/* NAME=VALUE strings into the environment; -EPROTO for anything not JOBCG_*. */
static int put_env(const char *v)
{
	const char *eq = strchr(v, '=');
	char *name;
	int r;

	if (!eq || strncmp(v, "JOBCG_", 6) != 0 || eq == v + 6)
		return -EPROTO;
	name = strndup(v, (size_t)(eq - v));
	if (!name)
		return -ENOMEM;
	r = setenv(name, eq + 1, 1) < 0 ? -errno : 0;
	free(name);
	return r;
}

int run_daemon_save_self(int verbose)
{
	size_t n = 0;

	self.out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	self.err = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	self.cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	self.umask = umask(0);
	umask(self.umask);
	self.verbose = verbose;
	if (self.out < 0 || self.err < 0 || self.cwd < 0)
		return -errno;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "JOBCG_", 6) == 0) {
			char **l = realloc(self.env, (n + 2) * sizeof(char *));

			if (!l)
				return -ENOMEM;
			self.env = l;
			if (!(l[n++] = strdup(*e)))
				return -ENOMEM;
			l[n] = NULL;
		}
	return 0;
}

static void client_enter(struct run_conn *c)
{
	size_t pos = 0;
	const char *v;

	fflush(NULL);
	(void)dup2(c->out, STDOUT_FILENO);
	(void)dup2(c->err, STDERR_FILENO);
	(void)!fchdir(c->cwd);
	umask(c->umask);
	unset_jobcg_env();
	while ((v = jobcg_msg_next(&c->req, "env", &pos)))
		(void)put_env(v);
	cli_set_verbosity(c->g.verbose);
	jobcg_set_runner(c->client);
}

static void client_leave(void)
{
	/* What the step printed is out before the client can read our answer and exit. */
	fflush(NULL);
	(void)dup2(self.out, STDOUT_FILENO);
	(void)dup2(self.err, STDERR_FILENO);
	(void)!fchdir(self.cwd);
	umask(self.umask);
	unset_jobcg_env();
	for (char **e = self.env; e && *e; e++)
		(void)put_env(*e);
	cli_set_verbosity(self.verbose);
	jobcg_set_runner(0);
}

void run_conn_free(struct run_conn *c)
{
	if (!c)
		return;
	if (c->ctx)
		cli_ctx_close(c->conf, c->ctx);
	jobcg_step_gres_free(c->s.life.gres);
	for (int *fd = &c->out; fd <= &c->cwd; fd++)
		if (*fd >= 0)
			close(*fd);
	close(c->fd);
	free(c->argv);
	jobcg_msg_free(&c->req);
	free(c);
}

int run_send_exit(int conn, int code, bool fallback)
{
	struct jobcg_msg m = {};
	int r;

	r = jobcg_msg_add(&m, "op", "exit");
	r = r ?: jobcg_msg_add(&m, "code", "%d", code);
	if (!r && fallback)
		r = jobcg_msg_add(&m, "fallback", "1");
	r = r ?: jobcg_msg_send(conn, &m, NULL, 0);
	jobcg_msg_free(&m);
	return r;
}

static int send_spawn(int conn, struct jobcg_ctx *ctx, const struct run_state *rs)
{
	const struct jobcg_step_life *s = &rs->life;
	struct jobcg_target t = {.job = s->job, .task = JOBCG_TASK_ALL};
	struct jobcg_msg m = {};
	char *path = NULL;
	int r, dfd;

	memcpy(t.step, s->step, sizeof(t.step));
	r = jobcg_target_path(ctx, &t, &path);
	if (r < 0)
		return r;
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(path);
	if (dfd < 0)
		return -errno;
	r = jobcg_msg_add(&m, "op", "spawn");
	r = r ?: jobcg_msg_add(&m, "job", "%u", s->job);
	r = r ?: jobcg_msg_add(&m, "step", "%s", s->step);
	r = r ?: jobcg_msg_add(&m, "ntasks", "%u", s->ntasks);
	r = r ?: jobcg_msg_add(&m, "ephemeral", "%d", rs->ephemeral);
	r = r ?: jobcg_msg_add(&m, "start_usec", "%llu", (unsigned long long)s->start_usec);
	if (!r && jobcg_acct_has(&s->job_before, JOBCG_ACCT_OOM))
		r = jobcg_msg_add(&m, "oom_before", "%llu",
				  (unsigned long long)s->job_before.value[JOBCG_ACCT_OOM]);
	for (unsigned i = 0; !r && s->gres && i < s->ntasks && s->gres->task_env; i++)
		for (char **e = s->gres->task_env[i]; !r && e && *e; e++)
			r = jobcg_msg_add(&m, "env", "%u:%s", i, *e);
	r = r ?: jobcg_msg_send(conn, &m, &dfd, 1);
	close(dfd);
	jobcg_msg_free(&m);
	return r;
}

/* op=status into a result. -EPROTO when it does not add up. */
static int status_parse(const struct jobcg_msg *m, unsigned ntasks, struct jobcg_run_result *res,
			int *ret_err, char *err_text, size_t size)
{
	uint64_t v;
	const char *st;
	size_t pos = 0;
	unsigned n = 0;

	if (!field_is(m, "op", "status"))
		return -EPROTO;
	if (jobcg_msg_get_u64(m, "error", 4095, &v) == 0) {
		const char *msg = jobcg_msg_get(m, "message");

		if (v == 0)
			return -EPROTO;
		*ret_err = -(int)v;
		snprintf(err_text, size, "%s", msg ? msg : strerror((int)v));
		return 0;
	}
	if (jobcg_msg_get_u64(m, "exit_code", 255, &v) < 0)
		return -EPROTO;
	res->exit_code = (int)v;
	if (jobcg_msg_get_u64(m, "lost_signal", 64, &v) < 0)
		return -EPROTO;
	res->lost_signal = (int)v;
	res->task_status = calloc(ntasks, sizeof(int));
	if (!res->task_status)
		return -ENOMEM;
	while ((st = jobcg_msg_next(m, "status", &pos))) {
		unsigned w;

		/* a wait status: exit code << 8, or the signal number */
		if (n >= ntasks || cli_parse_uint("status", st, 0xffff, &w) < 0)
			return -EPROTO;
		res->task_status[n++] = (int)w;
	}
	if (n != ntasks)
		return -EPROTO;
	res->ntasks = ntasks;
	*ret_err = 0;
	return 0;
}

/* Check op=run and take what it lends. -EPROTO: not ours to serve (the client runs it). */
static int request_parse(struct run_conn *c)
{
	int fds[3];
	unsigned nfds = 0;
	uint64_t u;
	size_t pos = 0;
	int argc = 0, r;
	const char *v;

	r = jobcg_msg_recv(c->fd, &c->req, fds, 3, &nfds);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < nfds; i++)
		(&c->out)[i] = fds[i];
	if (nfds != 3 || !field_is(&c->req, "op", "run") ||
	    jobcg_msg_get_u64(&c->req, "v", 1000, &u) < 0 || u != RUN_PROTOCOL_VERSION)
		return -EPROTO;
	if (jobcg_msg_get_u64(&c->req, "umask", 0777, &u) < 0)
		return -EPROTO;
	c->umask = (mode_t)u;
	if (jobcg_msg_get_u64(&c->req, "verbose", 16, &u) < 0)
		return -EPROTO;
	c->g = (struct cli_global){
	    .prog = "jobcg", .verbose = (int)u, .config_dir = jobcg_msg_get(&c->req, "config_dir")};
	while ((v = jobcg_msg_next(&c->req, "env", &pos)))
		if (strncmp(v, "JOBCG_", 6) != 0 || !strchr(v, '='))
			return -EPROTO;
	pos = 0;
	while (jobcg_msg_next(&c->req, "arg", &pos))
		argc++;
	if (argc < 2 || !field_is(&c->req, "arg", "run"))
		return -EPROTO;
	c->argv = calloc((size_t)argc + 1, sizeof(char *));
	if (!c->argv)
		return -ENOMEM;
	pos = 0;
	for (int i = 0; (v = jobcg_msg_next(&c->req, "arg", &pos)); i++)
		c->argv[i] = (char *)v;
	return argc;
}

int run_conn_start(int fd, pid_t client, struct run_conn **ret)
{
	struct run_conn *c = calloc(1, sizeof(*c));
	int argc, code;

	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	*c = (struct run_conn){.fd = fd, .client = client, .out = -1, .err = -1, .cwd = -1};
	argc = request_parse(c);
	if (argc < 0) {
		if (argc != -ECONNRESET)
			run_send_exit(c->fd, 1, true);
		run_conn_free(c);
		return 0;
	}
	client_enter(c);
	code = run_parse(argc, c->argv, &c->a);
	/* Past the arguments (-1: go on; 0 is --help, answered) and with a context (0). */
	if (code < 0 && (code = cli_ctx_open(&c->g, 0, &c->conf, &c->ctx)) == 0) {
		code = run_begin(c->ctx, &c->a, &c->s);
		if (code < 0 && send_spawn(c->fd, c->ctx, &c->s) < 0)
			/* The client is gone or the directory cannot be lent: nobody runs it. */
			code = run_finish(c->ctx, &c->s, 0, NULL, NULL, true);
	}
	client_leave();
	if (code < 0) {
		*ret = c; /* until its op=status */
		return 1;
	}
	run_send_exit(c->fd, code, false);
	run_conn_free(c);
	return 0;
}

void run_conn_end(struct run_conn *c)
{
	struct jobcg_msg st = {};
	struct jobcg_run_result res = {};
	char err_text[2048] = "";
	int r, err = 0, code;

	r = jobcg_msg_recv(c->fd, &st, NULL, 0, NULL);
	if (r == 0)
		r = status_parse(&st, c->s.life.ntasks, &res, &err, err_text, sizeof(err_text));
	client_enter(c);
	if (r < 0)
		code = run_finish(c->ctx, &c->s, 0, NULL, NULL, true);
	else
		code = run_finish(c->ctx, &c->s, err, err ? err_text : NULL, &res, false);
	client_leave();
	run_send_exit(c->fd, code, false);
	free(res.task_status);
	jobcg_msg_free(&st);
	run_conn_free(c);
}
