/*
 * jobcg: the systemd scope backend. The tree root is a transient scope unit (jobcg.scope in
 * system.slice by default) that systemd creates with Delegate=yes, so systemd leaves everything
 * below it to jobcg and keeps its hands off our controllers on daemon-reload (seed 001). A scope
 * lives only while it holds a process, so a tiny "jobcg keeper" process is started into it and
 * parked in the scope's system/ leaf; the scope is then abandoned, which keeps it alive for as
 * long as anything runs anywhere below it.
 *
 *   /sys/fs/cgroup/system.slice/jobcg.scope   Delegate=yes, TasksMax=infinity, abandoned
 *   |-- system/                               the keeper
 *   `-- job_<id>/step_<sid>/...               the jobs (tree.c)
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "config_internal.h"
#include "jobcg-build.h"
#include "log.h"
#include "scope.h"
#include "scope_systemd.h"
#include "sdbus_dl.h"
#include "testhook.h"
#include "util.h"

#define SD_DEST	   "org.freedesktop.systemd1"
#define SD_PATH	   "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && streq(s + n - m, suffix);
}

static bool unit_chars_valid(const char *s)
{
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr(":_.-\\", *p)))
			return false;
	return true;
}

bool scope_unit_name_valid(const char *name)
{
	size_t n = strlen(name);

	return n > strlen(".scope") && n <= 255 && has_suffix(name, ".scope") &&
	       unit_chars_valid(name);
}

int scope_slice_path(const char *slice, char **ret)
{
	_cleanup_free_ char *prefix = NULL, *path = NULL;
	size_t n = strlen(slice), len = 0, cap;

	if (n <= strlen(".slice") || n > 255 || !has_suffix(slice, ".slice") ||
	    !unit_chars_valid(slice))
		return error_set(-EINVAL, "CgroupSlice '%s' is not a systemd slice unit name",
				 slice);
	if (streq(slice, "-.slice")) {
		path = strdup("");
		if (!path)
			return -ENOMEM;
		*ret = TAKE_PTR(path);
		return 0;
	}
	prefix = strndup(slice, n - strlen(".slice"));
	if (!prefix)
		return -ENOMEM;
	if (prefix[0] == '-' || has_suffix(prefix, "-") || strstr(prefix, "--"))
		return error_set(-EINVAL,
				 "CgroupSlice '%s': '-' separates parent slices and may not "
				 "start, end or repeat",
				 slice);
	/* Each '-' names a parent slice: a-b-c.slice lives in a.slice/a-b.slice/a-b-c.slice. */
	cap = (strlen(prefix) + strlen(".slice/")) * (strlen(prefix) + 1) + 1;
	path = malloc(cap);
	if (!path)
		return -ENOMEM;
	for (const char *p = prefix; *p; p++) {
		if (*p != '-')
			continue;
		len += (size_t)snprintf(path + len, cap - len, "%.*s.slice/", (int)(p - prefix),
					prefix);
	}
	snprintf(path + len, cap - len, "%s", slice);
	*ret = TAKE_PTR(path);
	return 0;
}

int scope_expected_root(const char *slice, const char *scope, char **ret)
{
	_cleanup_free_ char *sp = NULL;
	char *s;
	int r;

	if (!scope_unit_name_valid(scope))
		return error_set(-EINVAL,
				 "JobcgScope '%s' is not a systemd scope unit name "
				 "(letters, digits, ':_.-\\', ending in .scope)",
				 scope);
	r = scope_slice_path(slice, &sp);
	if (r < 0)
		return r;
	s = *sp ? strdup_printf("%s/%s", sp, scope) : strdup(scope);
	if (!s)
		return -ENOMEM;
	*ret = s;
	return 0;
}

/*
 * The keeper is the jobcg binary itself (`jobcg keeper` only pauses), so that it shows as
 * "jobcg keeper" in ps and systemctl status. JOBCG_KEEPER_EXE lets a program that links the
 * library but is not jobcg (tests) name it.
 */
/* The running executable's path into @buf (PATH_MAX bytes); false when /proc cannot say. */
static bool self_exe(char *buf)
{
	ssize_t n = readlink("/proc/self/exe", buf, PATH_MAX - 1);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

static int keeper_exe(char **ret)
{
	char self[PATH_MAX];
	bool known = self_exe(self);
	const char *base;
	char *s = NULL;
	int r;

	/* systemd runs it as root: only a trusted file (util.h) */
	r = env_program("JOBCG_KEEPER_EXE", &s);
	if (r < 0)
		return r;
	base = known && strrchr(self, '/') ? strrchr(self, '/') + 1 : "";
	if (!s)
		s = streq(base, "jobcg") ? strdup(self) : strdup(JOBCG_BINDIR "/jobcg");
	if (!s)
		return -ENOMEM;
	if (access(s, X_OK) < 0) {
		r = negative_errno();
		error_set(r, "cannot run the scope keeper %s: %s (set JOBCG_KEEPER_EXE)", s,
			  strerror(-r));
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

/*
 * The dynamically linked jobcg that asks systemd for a statically linked one (meson option
 * static_exe): JOBCG_DYNAMIC_EXE, else jobcg-dynamic beside this executable (a build directory,
 * the VM tier's share), else the installed one.
 */
static int twin_exe(char **ret)
{
	char self[PATH_MAX];
	char *s = NULL;
	int r;

	/* run as root, by us: only a trusted file (util.h) */
	r = env_program("JOBCG_DYNAMIC_EXE", &s);
	if (r < 0)
		return r;
	if (!s) {
		if (self_exe(self) && strrchr(self, '/')) {
			*strrchr(self, '/') = '\0';
			s = strdup_printf("%s/jobcg-dynamic", self);
			if (s && access(s, X_OK) < 0) {
				free(s);
				s = NULL;
			}
		}
		if (!s)
			s = strdup(JOBCG_LIBEXECDIR "/jobcg-dynamic");
	}
	if (!s)
		return -ENOMEM;
	if (access(s, X_OK) < 0) {
		r = negative_errno();
		error_set(
		    r,
		    "this jobcg is linked statically and asks systemd for its scope through "
		    "%s, which cannot run: %s (install it with jobcg, or set JOBCG_DYNAMIC_EXE)",
		    s, strerror(-r));
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

/*
 * Create or revive the scope through the twin: `EXE [--config-dir DIR] scope-helper` reads the
 * same configuration and environment and does the D-Bus half (jobcg_ctx_systemd_scope()). Our
 * caller holds the node lock and waits, so the twin takes none. The keeper it starts is this
 * (static) jobcg, unless JOBCG_KEEPER_EXE says otherwise. Its messages go to our stderr.
 */
static int ensure_via_twin(const struct jobcg_config *conf)
{
	_cleanup_free_ char *exe = NULL, *keeper = NULL;
	_cleanup_free_ char **envp = NULL;
	char self[PATH_MAX], *argv[5];
	size_t k = 0, n = 0;
	pid_t pid;
	int st, r;

	r = twin_exe(&exe);
	if (r < 0)
		return r;
	argv[k++] = exe;
	if (conf->config_dir) {
		argv[k++] = (char *)"--config-dir";
		argv[k++] = conf->config_dir;
	}
	argv[k++] = (char *)"scope-helper";
	argv[k] = NULL;
	/* Built before fork(): between fork and exec only async-signal-safe calls (no setenv). */
	while (environ[n])
		n++;
	envp = calloc(n + 2, sizeof(*envp));
	if (!envp)
		return -ENOMEM;
	memcpy(envp, environ, n * sizeof(*envp));
	if (!env_secure("JOBCG_KEEPER_EXE") && self_exe(self)) {
		keeper = strdup_printf("JOBCG_KEEPER_EXE=%s", self);
		if (!keeper)
			return -ENOMEM;
		envp[n] = keeper;
	}
	pid = fork();
	if (pid < 0)
		return error_set(negative_errno(), "fork: %s", strerror(errno));
	if (pid == 0) {
		execve(exe, argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return error_set(negative_errno(), "waiting for %s: %s", exe,
					 strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return error_set(-EIO,
			 "%s scope-helper (the dynamically linked jobcg that asks systemd for the "
			 "scope) %s %d",
			 exe, WIFEXITED(st) ? "exited with status" : "was killed by signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/*
 * Start the keeper, detached: a double fork so that it is never our child (no zombie in a
 * long-running caller) and belongs to init once we exit; a new session so no terminal signal
 * reaches it; no file descriptor open, so it pins nothing. An O_CLOEXEC pipe reports its pid and
 * whether exec() worked: the middle process and the keeper both write to it, in no set order
 * (the keeper's exec can fail before the middle process has said the pid), so each report is a
 * tagged pair, written whole (a pipe write of 8 bytes is atomic), and read by its tag.
 */
enum keeper_report {
	KEEPER_PID = 1,	       /* from the middle process: the keeper's pid */
	KEEPER_FORK_ERROR = 2, /* from the middle process: fork's errno */
	KEEPER_EXEC_ERROR = 3, /* from the keeper: execve's errno */
};

int scope_keeper_spawn(const char *exe, const char *scope_rel, unsigned grace_ms, pid_t *ret_pid)
{
	int p[2], st, fork_err = 0, exec_err = 0;
	int32_t msg[4];
	ssize_t n, got = 0;
	pid_t mid, pid = 0;
	/* made before the fork: the child only execs */
	_cleanup_free_ char *scope_env = strdup_printf(SCOPE_KEEPER_ENV_SCOPE "=%s", scope_rel);
	_cleanup_free_ char *grace_env = strdup_printf(SCOPE_KEEPER_ENV_GRACE "=%u", grace_ms);

	if (!scope_env || !grace_env)
		return -ENOMEM;
	if (pipe2(p, O_CLOEXEC) < 0)
		return error_set(negative_errno(), "pipe: %s", strerror(errno));
	mid = fork();
	if (mid < 0) {
		int r = negative_errno();

		close(p[0]);
		close(p[1]);
		return error_set(r, "fork: %s", strerror(-r));
	}
	if (mid == 0) {
		int32_t m[2];
		pid_t k;

		close(p[0]);
		setsid();
		k = fork();
		if (k == 0) {
			char *argv[] = {SCOPE_KEEPER_ARGV0, SCOPE_KEEPER_ARGV1, NULL};
			char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", scope_env, grace_env,
					NULL};
			sigset_t none;

			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			for (int s = 1; s < NSIG; s++)
				signal(s, SIG_DFL);
			m[0] = KEEPER_EXEC_ERROR;
			if (chdir("/") < 0) {
				m[1] = errno;
				(void)!write(p[1], m, sizeof(m));
				_exit(127);
			}
			close_fds_but(0, &p[1], 1);
			execve(exe, argv, envp);
			m[1] = errno;
			(void)!write(p[1], m, sizeof(m));
			_exit(127);
		}
		/* (tests make the keeper's report come first here) */
		test_pause("keeper-before-pid");
		m[0] = k > 0 ? KEEPER_PID : KEEPER_FORK_ERROR;
		m[1] = k > 0 ? (int32_t)k : (int32_t)errno;
		(void)!write(p[1], m, sizeof(m));
		_exit(0);
	}
	close(p[1]);
	/* The pipe reaches EOF when the middle process has exited and the keeper has exec'ed
	 * (or failed to). */
	while ((size_t)got < sizeof(msg)) {
		n = read(p[0], (char *)msg + got, sizeof(msg) - (size_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(p[0]);
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	for (ssize_t i = 0; i + 1 < got / (ssize_t)sizeof(int32_t); i += 2) {
		int32_t v = msg[i + 1];

		if (msg[i] == KEEPER_PID && v > 0)
			pid = (pid_t)v;
		else if (msg[i] == KEEPER_FORK_ERROR)
			fork_err = v > 0 ? v : EIO;
		else if (msg[i] == KEEPER_EXEC_ERROR)
			exec_err = v > 0 ? v : EIO;
	}
	if (exec_err)
		return error_set(-exec_err, "cannot start the scope keeper: exec %s: %s", exe,
				 strerror(exec_err));
	if (!pid) {
		/* no report at all: the middle process died before it could say */
		int e = fork_err ? fork_err : EIO;

		return error_set(-e, "cannot start the scope keeper: fork: %s", strerror(e));
	}
	*ret_pid = pid;
	return 0;
}

bool scope_keeper_in_scope(const char *text, const char *scope_rel)
{
	size_t n = strlen(scope_rel);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *path = l + 3;

		if (strncmp(l, "0::", 3) != 0)
			continue;
		if (*path == '/')
			path++;
		return strncmp(path, scope_rel, n) == 0 &&
		       (path[n] == '\n' || path[n] == '\0' || path[n] == '/');
	}
	return true;
}

static int write_pid(const char *dir, pid_t pid)
{
	char buf[32];
	_cleanup_free_ char *procs = strdup_printf("%s/cgroup.procs", dir);
	int r;

	if (!procs)
		return -ENOMEM;
	snprintf(buf, sizeof(buf), "%d", (int)pid);
	r = write_string_at(AT_FDCWD, procs, buf);
	if (r < 0)
		return error_set(r, "cannot move pid %d into %s: %s", (int)pid, dir, strerror(-r));
	return 0;
}

/* True when @dir/cgroup.procs lists at least one process. */
static int has_procs(const char *dir)
{
	_cleanup_free_ char *procs = strdup_printf("%s/cgroup.procs", dir), *text = NULL;
	int r;

	if (!procs)
		return -ENOMEM;
	r = read_full_file_at(AT_FDCWD, procs, 1 << 20, &text, NULL);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return error_set(r, "cannot read %s: %s", procs, strerror(-r));
	return strspn(text, " \n") != strlen(text);
}

/* Park the keeper (and anything else sitting in the scope's own cgroup) in system/: with
 * processes in the root, no controller could be enabled for the jobs (no internal processes). */
static int park_in_system(const char *root, pid_t keeper)
{
	_cleanup_free_ char *sys = strdup_printf("%s/system", root);
	_cleanup_free_ char *procs = strdup_printf("%s/cgroup.procs", root), *text = NULL;
	int r;

	if (!sys || !procs)
		return -ENOMEM;
	if (TEST_FAIL("mkdir", sys, mkdir(sys, 0755)) < 0 && errno != EEXIST)
		return error_set(negative_errno(), "cannot create %s: %s", sys, strerror(errno));
	if (keeper > 0)
		return write_pid(sys, keeper);
	r = read_full_file_at(AT_FDCWD, procs, 1 << 20, &text, NULL);
	if (r < 0)
		return error_set(r, "cannot read %s: %s", procs, strerror(-r));
	for (char *s = text, *e; *s; s = e) {
		uint64_t pid;

		e = s + strcspn(s, "\n");
		if (*e)
			*e++ = 0;
		if (parse_u64(s, INT32_MAX, &pid) < 0 || pid == 0)
			return error_set(-EBADMSG, "%s: '%s' is not a pid", procs, s);
		r = write_pid(sys, (pid_t)pid);
		if (r < 0 && r != -ESRCH)
			return r;
	}
	return 0;
}

/* Controllers jobcg may want below its root; EnableControllers= turns them on above it. */
static const char *const wanted_controllers[] = {"cpuset", "cpu", "io", "memory", "pids", NULL};

static bool word_in(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = text; (p = strstr(p, word)); p += n)
		if ((p == text || p[-1] == ' ' || p[-1] == '\n') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

/*
 * EnableControllers=yes: write +ctrl into the cgroup.subtree_control of every ancestor of the
 * root, from the mount down, for the controllers jobcg uses and the parent offers. systemd
 * normally does this itself for a Delegate=yes unit; the option covers hosts where it does not.
 */
static int enable_ancestors(const struct jobcg_config *conf, const char *mount,
			    const char *root_rel)
{
	_cleanup_free_ char *dir = strdup(mount), *rel = strdup(root_rel);
	char *slash;

	if (!dir || !rel)
		return -ENOMEM;
	slash = strrchr(rel, '/');
	if (slash)
		*slash = '\0';
	for (char *comp = rel, *next;; comp = next) {
		_cleanup_free_ char *avail = NULL, *f = strdup_printf("%s/cgroup.controllers", dir);
		_cleanup_free_ char *sub = strdup_printf("%s/cgroup.subtree_control", dir);
		char *nd;
		int r;

		if (!f || !sub)
			return -ENOMEM;
		r = read_full_file_at(AT_FDCWD, f, 4096, &avail, NULL);
		if (r < 0)
			return error_set(r, "EnableControllers: cannot read %s: %s", f,
					 strerror(-r));
		for (size_t i = 0; wanted_controllers[i]; i++) {
			_cleanup_free_ char *w = strdup_printf("+%s", wanted_controllers[i]);

			if (!w)
				return -ENOMEM;
			if (!word_in(avail, wanted_controllers[i]))
				continue;
			r = write_string_at(AT_FDCWD, sub, w);
			if (r < 0)
				return error_set(r, "EnableControllers: cannot write %s to %s: %s",
						 w, sub, strerror(-r));
		}
		for (char **x = conf->cgroup.enable_extra_controllers; x && *x; x++) {
			_cleanup_free_ char *w = strdup_printf("+%s", *x);

			if (!w)
				return -ENOMEM;
			if (word_in(avail, *x) && (r = write_string_at(AT_FDCWD, sub, w)) < 0)
				return error_set(r, "EnableControllers: cannot write %s to %s: %s",
						 w, sub, strerror(-r));
		}
		if (!slash || !*comp)
			break;
		next = strchr(comp, '/');
		if (next)
			*next++ = '\0';
		nd = strdup_printf("%s/%s", dir, comp);
		if (!nd)
			return -ENOMEM;
		free(dir);
		dir = nd;
		if (!next)
			break;
	}
	return 0;
}

static const char *bus_msg(const sd_bus_error *e, int r)
{
	return e && e->message ? e->message : strerror(-r);
}

/*
 * Bound the next D-Bus call by what is left of SystemdTimeout: sd-bus's default is 25 s a call,
 * and every call here is made holding the node lock. A libsystemd older than 240 lacks the
 * setting; its calls keep the default.
 */
static void bus_bound(sd_bus *bus, uint64_t deadline)
{
	uint64_t now = now_usec();

	/* 0 would mean sd-bus's default: past the deadline the call gets a microsecond. */
	if (sdbus.bus_set_method_call_timeout)
		(void)sdbus.bus_set_method_call_timeout(bus, deadline > now ? deadline - now : 1);
}

/* The unit's object path, or NULL (returns 0) when systemd has no such unit loaded. */
static int unit_lookup(sd_bus *bus, uint64_t deadline, const char *name, char **ret_path)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	const char *path;
	int r;

	bus_bound(bus, deadline);
	r = sdbus.bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, "GetUnit", &err, &reply, "s",
				  name);
	if (r < 0) {
		bool missing =
		    sdbus.bus_error_has_name(&err, "org.freedesktop.systemd1.NoSuchUnit");

		if (!missing)
			error_set(r, "systemd GetUnit(%s): %s", name, bus_msg(&err, r));
		sdbus.bus_error_free(&err);
		if (missing) {
			*ret_path = NULL;
			return 0;
		}
		return r;
	}
	r = sdbus.bus_message_read(reply, "o", &path);
	if (r >= 0)
		*ret_path = strdup(path);
	sdbus.bus_message_unref(reply);
	if (r < 0)
		return error_set(r, "systemd GetUnit(%s): bad reply", name);
	return *ret_path ? 0 : -ENOMEM;
}

static int unit_property(sd_bus *bus, uint64_t deadline, const char *path, const char *iface,
			 const char *prop, char **ret)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	int r;

	bus_bound(bus, deadline);
	r = sdbus.bus_get_property_string(bus, SD_DEST, path, iface, prop, &err, ret);

	if (r < 0)
		error_set(r, "systemd: cannot read %s of %s: %s", prop, path, bus_msg(&err, r));
	sdbus.bus_error_free(&err);
	return r;
}

/* StopUnit(name, "replace"), also cancelling a start job still queued; errors are ignored. */
static void stop_unit(sd_bus *bus, const char *name)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL, *reply = NULL;

	if (sdbus.bus_message_new_method_call(bus, &m, SD_DEST, SD_PATH, SD_MANAGER, "StopUnit") >=
		0 &&
	    sdbus.bus_message_append(m, "ss", name, "replace") >= 0 &&
	    sdbus.bus_call(bus, m, 5 * 1000000ULL, &err, &reply) < 0)
		log_debug("systemd StopUnit(%s) after a failed start: %s", name,
			  bus_msg(&err, -EIO));
	sdbus.bus_error_free(&err);
	sdbus.bus_message_unref(reply);
	sdbus.bus_message_unref(m);
}

static int manager_call(sd_bus *bus, uint64_t deadline, const char *method, const char *name)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	int r;

	bus_bound(bus, deadline);
	r = sdbus.bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, method, &err, NULL, "s", name);

	if (r < 0)
		error_set(r, "systemd %s(%s): %s", method, name, bus_msg(&err, r));
	sdbus.bus_error_free(&err);
	return r;
}

struct job_wait {
	const char *job; /* object path of the job we wait for */
	char result[64]; /* its JobRemoved result, "" until it arrives */
};

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	struct job_wait *w = userdata;
	const char *path, *unit, *result;
	uint32_t id;

	if (sdbus.bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
		return 0;
	if (w->job && streq(path, w->job) && !w->result[0])
		snprintf(w->result, sizeof(w->result), "%s", *result ? result : "?");
	return 0;
}

/*
 * Ask systemd for the scope holding @keeper and wait for its start job to finish. The
 * JobRemoved match is in place before the call, and sdbus.bus_call() queues what arrives meanwhile,
 * so the signal cannot be missed; the wait is sdbus.bus_wait() on the bus socket, bounded by the
 * deadline (SystemdTimeout), not a polling loop.
 */
static int start_scope(sd_bus *bus, const char *name, const char *slice, pid_t keeper,
		       uint64_t deadline, unsigned timeout_ms)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL, *reply = NULL;
	sd_bus_slot *slot = NULL;
	struct job_wait w = {0};
	const char *job;
	uint64_t now;
	int r;

	bus_bound(bus, deadline); /* AddMatch is a call of its own */
	r = sdbus.bus_match_signal(bus, &slot, SD_DEST, SD_PATH, SD_MANAGER, "JobRemoved",
				   on_job_removed, &w);
	if (r < 0) {
		error_set(r, "systemd: cannot subscribe to JobRemoved: %s", strerror(-r));
		goto out;
	}
	r = sdbus.bus_message_new_method_call(bus, &m, SD_DEST, SD_PATH, SD_MANAGER,
					      "StartTransientUnit");
	if (r >= 0)
		r = sdbus.bus_message_append(m, "ss", name, "fail");
	if (r >= 0)
		r = sdbus.bus_message_open_container(m, 'a', "(sv)");
	if (r >= 0)
		r = sdbus.bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)", "Description", "s",
					     "jobcg job containment tree", "Slice", "s", slice,
					     "Delegate", "b", 1, "TasksMax", "t", UINT64_MAX,
					     "PIDs", "au", 1, (uint32_t)keeper);
	if (r >= 0)
		r = sdbus.bus_message_close_container(m);
	if (r >= 0)
		r = sdbus.bus_message_append(m, "a(sa(sv))", 0);
	if (r < 0) {
		error_set(r, "systemd: cannot build StartTransientUnit: %s", strerror(-r));
		goto out;
	}
	now = now_usec();
	r = sdbus.bus_call(bus, m, deadline > now ? deadline - now : 1, &err, &reply);
	if (r < 0) {
		error_set(r, "systemd StartTransientUnit(%s): %s", name, bus_msg(&err, r));
		goto out;
	}
	r = sdbus.bus_message_read(reply, "o", &job);
	if (r < 0) {
		error_set(r, "systemd StartTransientUnit(%s): bad reply", name);
		goto out;
	}
	w.job = job;
	log_debug("systemd: starting %s in %s, job %s", name, slice, job);
	while (!w.result[0]) {
		r = sdbus.bus_process(bus, NULL);
		if (r < 0) {
			error_set(r, "systemd: D-Bus connection failed while starting %s: %s", name,
				  strerror(-r));
			goto out;
		}
		if (r > 0)
			continue;
		now = now_usec();
		if (now >= deadline) {
			r = error_set(-ETIMEDOUT,
				      "systemd did not finish starting %s within %u ms "
				      "(SystemdTimeout)",
				      name, timeout_ms);
			goto out;
		}
		r = sdbus.bus_wait(bus, deadline - now);
		if (r < 0) {
			error_set(r, "systemd: waiting on D-Bus: %s", strerror(-r));
			goto out;
		}
	}
	if (!streq(w.result, "done")) {
		r = error_set(-EIO,
			      "systemd could not start %s: job result '%s' (see journalctl -u %s)",
			      name, w.result, name);
		goto out;
	}
	r = 0;
out:
	sdbus.bus_error_free(&err);
	sdbus.bus_message_unref(reply);
	sdbus.bus_message_unref(m);
	sdbus.bus_slot_unref(slot);
	return r;
}

/* How long a keeper waits to be in the scope (past SystemdTimeout) before it leaves. */
#define KEEPER_GRACE_MARGIN_MS 10000u

/* A reused scope keeps exactly one keeper: start one only when system/ holds no process. */
static int ensure_keeper(const char *root, const char *root_rel, unsigned grace_ms)
{
	_cleanup_free_ char *sys = strdup_printf("%s/system", root), *exe = NULL;
	pid_t keeper = 0;
	int r;

	if (!sys)
		return -ENOMEM;
	r = park_in_system(root, 0);
	if (r < 0)
		return r;
	r = has_procs(sys);
	if (r != 0)
		return r < 0 ? r : 0;
	r = keeper_exe(&exe);
	if (r < 0)
		return r;
	r = scope_keeper_spawn(exe, root_rel, grace_ms, &keeper);
	if (r < 0)
		return r;
	r = write_pid(sys, keeper);
	if (r < 0) {
		kill(keeper, SIGKILL);
		return r;
	}
	log_info("systemd scope %s had no keeper: started one (pid %d)", root, (int)keeper);
	return 0;
}

static int systemd_ensure(const struct jobcg_config *conf, const char *mount, const char *root_rel,
			  char **ret_root)
{
	const char *slice =
	    conf->cgroup.slice && *conf->cgroup.slice ? conf->cgroup.slice : "system.slice";
	const char *name = conf->cgroup.scope_name && *conf->cgroup.scope_name
			       ? conf->cgroup.scope_name
			       : "jobcg.scope";
	unsigned timeout_ms =
	    conf->cgroup.systemd_timeout_ms ? conf->cgroup.systemd_timeout_ms : 1000;
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000;
	_cleanup_free_ char *expected = NULL, *root = NULL, *unit = NULL, *state = NULL;
	_cleanup_free_ char *cgroup = NULL, *exe = NULL, *sys = NULL;
	sd_bus *bus = NULL;
	pid_t keeper = 0;
	bool asked = false;
	struct stat st;
	int r;

	r = scope_expected_root(slice, name, &expected);
	if (r < 0)
		return r;
	if (!streq(expected, root_rel))
		return error_set(-EINVAL,
				 "with systemd the tree root is where systemd puts %s in %s: "
				 "%s, but JobcgRoot is %s (drop JobcgRoot, or set "
				 "IgnoreSystemd=yes)",
				 name, slice, expected, root_rel);
	root = strdup_printf("%s/%s", mount, root_rel);
	if (!root)
		return -ENOMEM;
	/*
	 * The common case, every new job: the scope's tree is there and a keeper lives in its
	 * system/ leaf, which systemd would have emptied had it stopped the scope. Then no D-Bus
	 * (loading libsystemd and four round trips to systemd, the most of a job's creation in
	 * the VM); anything else asks systemd as below.
	 */
	sys = strdup_printf("%s/system", root);
	if (!sys)
		return -ENOMEM;
	if (stat(root, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (has_procs(sys) > 0) {
			log_debug("systemd scope %s: %s has its keeper, reused without asking",
				  name, root);
			goto done;
		}
		jobcg_error_clear();
	}
	if (process_is_static()) {
		r = ensure_via_twin(conf);
		if (r < 0)
			return r;
		if (stat(root, &st) < 0 || has_procs(sys) <= 0)
			return error_set(-ENOENT,
					 "asked systemd for %s, but %s has no keeper in system/",
					 name, root);
		goto done;
	}

	r = sdbus_load();
	if (r < 0)
		return r;
	r = sdbus.bus_open_system(&bus);
	if (r < 0)
		return error_set(r,
				 "cannot connect to the D-Bus system bus to ask systemd for %s: %s",
				 name, strerror(-r));
	r = unit_lookup(bus, deadline, name, &unit);
	if (r < 0)
		goto out;
	if (unit) {
		r = unit_property(bus, deadline, unit, "org.freedesktop.systemd1.Unit",
				  "ActiveState", &state);
		if (r < 0)
			goto out;
		if ((streq(state, "active") || streq(state, "reloading")) && stat(root, &st) == 0) {
			/* Restart-safe: the scope and its tree stay, only the keeper is checked. */
			log_debug("systemd scope %s is %s: reusing %s", name, state, root);
			r = manager_call(bus, deadline, "AbandonScope", name);
			if (r < 0)
				log_debug("%s", jobcg_last_error()->message);
			r = ensure_keeper(root, root_rel, timeout_ms + KEEPER_GRACE_MARGIN_MS);
			if (r < 0)
				goto out;
			goto done;
		}
		if (streq(state, "activating") || streq(state, "deactivating")) {
			r = error_set(-EBUSY, "systemd scope %s is %s; try again", name, state);
			goto out;
		}
		/* A failed (or stopped but still loaded) transient unit blocks a new one. */
		r = manager_call(bus, deadline, "ResetFailedUnit", name);
		if (r < 0)
			log_debug("%s", jobcg_last_error()->message);
	}

	r = keeper_exe(&exe);
	if (r < 0)
		goto out;
	/* Until systemd has taken it into the scope it lives in our cgroup: if we are killed
	 * before, it leaves by itself (jobcg keeper) rather than pause there for ever. */
	r = scope_keeper_spawn(exe, root_rel, timeout_ms + KEEPER_GRACE_MARGIN_MS, &keeper);
	if (r < 0)
		goto out;
	asked = true;
	r = start_scope(bus, name, slice, keeper, deadline, timeout_ms);
	if (r < 0)
		goto out;
	/* Abandoned, the scope lives while anything runs in it, not only the keeper. */
	r = manager_call(bus, deadline, "AbandonScope", name);
	if (r < 0)
		goto out;
	free(unit);
	unit = NULL;
	r = unit_lookup(bus, deadline, name, &unit);
	if (r >= 0 && !unit)
		r = error_set(-ENOENT, "systemd started %s but does not know it any more", name);
	if (r >= 0)
		r = unit_property(bus, deadline, unit, "org.freedesktop.systemd1.Scope",
				  "ControlGroup", &cgroup);
	if (r < 0)
		goto out;
	if (!streq(cgroup + (cgroup[0] == '/'), root_rel)) {
		r = error_set(-EINVAL, "systemd put %s at %s, not at %s", name, cgroup, root_rel);
		goto out;
	}
	r = park_in_system(root, keeper);
	if (r < 0)
		goto out;
	log_info("created systemd scope %s (%s), keeper pid %d", name, root, (int)keeper);
done:
	if (conf->cgroup.enable_controllers) {
		r = enable_ancestors(conf, mount, root_rel);
		if (r < 0)
			goto out;
	}
	*ret_root = TAKE_PTR(root);
	r = 0;
out:
	/*
	 * Nothing half-made: kill the keeper, and if the start was asked for, stop the unit too:
	 * systemd may still run the start job after our timeout, and an emptied scope is not
	 * always noticed (seen in the VM: an active scope with no task). Best effort, bounded.
	 */
	if (r < 0 && keeper > 0) {
		struct jobcg_error saved = *jobcg_last_error();

		kill(keeper, SIGKILL);
		if (asked)
			stop_unit(bus, name);
		jobcg_error_restore(&saved);
	}
	if (bus)
		sdbus.bus_flush_close_unref(bus);
	return r;
}

const struct scope_backend scope_systemd_backend = {
    .name = "systemd",
    .ensure = systemd_ensure,
};
