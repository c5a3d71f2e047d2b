/* Unit tests for the systemd scope backend's pure parts (slice paths and unit names) and for
 * the run-time loading of libsystemd it depends on. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config_internal.h"
#include "scope.h"
#include "scope_systemd.h"
#include "sdbus_dl.h"
#include "tap.h"
#include "util.h"

static void slice_is(const char *slice, const char *want)
{
	char *p = NULL;
	int r = scope_slice_path(slice, &p);

	if (want)
		ok(r == 0 && p && streq(p, want), "slice %s lives at '%s' (got r=%d '%s')", slice,
		   want, r, p ? p : "(null)");
	else
		ok(r == -EINVAL && !p, "slice '%s' is refused (r=%d)", slice, r);
	free(p);
}

static void test_load(void)
{
	struct sdbus_api api = {0}, zero = {0};
	struct jobcg_config conf = {0};
	char *root = NULL;
	int r;

	r = sdbus_load_from("libjobcg-no-such-library.so.0", &api);
	is_int(r, -ELIBACC, "a missing library is -ELIBACC");
	ok(strstr(jobcg_last_error()->message, "libjobcg-no-such-library.so.0") &&
	       strstr(jobcg_last_error()->message, "systemd scope backend"),
	   "the error names the library and what needs it: %s", jobcg_last_error()->message);
	ok(!memcmp(&api, &zero, sizeof(api)), "nothing filled in when the library is missing");

	/* libc loads fine but has none of the functions. */
	r = sdbus_load_from("libc.so.6", &api);
	is_int(r, -ELIBBAD, "a library without sd_bus_open_system is -ELIBBAD");
	ok(strstr(jobcg_last_error()->message, "libc.so.6 has no sd_bus_open_system") != NULL,
	   "the error names the library and the missing function: %s", jobcg_last_error()->message);
	ok(!memcmp(&api, &zero, sizeof(api)), "nothing filled in when a function is missing");

	/* libsystemd-dev (a build dependency) installs libsystemd.so.0: it must load here. */
	ok(sdbus.bus_open_system == NULL, "nothing loaded before first use");
	is_int(sdbus_load(), 0, SDBUS_SONAME " loads");
	ok(sdbus.bus_open_system && sdbus.bus_call_method && sdbus.bus_error_free,
	   "its functions are resolved");
	is_int(sdbus_load(), 0, "loading again is a no-op");

	/*
	 * The backend through the loaded library: with a system bus that does not exist it fails
	 * at the connection, cleanly (nothing was started before it), and says so.
	 */
	setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/jobcg-test/bus", 1);
	r = scope_systemd_backend.ensure(&conf, "/nonexistent/cgroup", "system.slice/jobcg.scope",
					 &root);
	ok(r < 0 && root == NULL, "no bus: the systemd backend fails (r=%d)", r);
	ok(strstr(jobcg_last_error()->message, "D-Bus system bus") != NULL,
	   "and names the D-Bus system bus: %s", jobcg_last_error()->message);
	unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
}

/*
 * The D-Bus calls the backend makes holding the node lock are bounded by what is left of
 * SystemdTimeout, not sd-bus's 25 s default: through the loaded table, with a fake bus whose
 * first call (GetUnit) fails.
 */
static int fake_bus;
static unsigned timeouts_set, calls, calls_unbounded;
static uint64_t last_timeout;

static int fake_open(sd_bus **ret)
{
	*ret = (sd_bus *)&fake_bus;
	return 0;
}

static sd_bus *fake_close(sd_bus *bus)
{
	(void)bus;
	return NULL;
}

static int fake_set_timeout(sd_bus *bus, uint64_t usec)
{
	if (bus == (sd_bus *)&fake_bus) {
		timeouts_set++;
		last_timeout = usec;
	}
	return 0;
}

static int fake_call_method(sd_bus *bus, const char *dest, const char *path, const char *iface,
			    const char *member, sd_bus_error *err, sd_bus_message **reply,
			    const char *types, ...)
{
	(void)bus, (void)dest, (void)path, (void)iface, (void)member, (void)err, (void)reply;
	(void)types;
	calls++;
	if (!timeouts_set)
		calls_unbounded++;
	return -EIO;
}

static void test_call_timeout(void)
{
	struct sdbus_api saved = sdbus;
	struct jobcg_config conf = {0};
	char *root = NULL;
	int r;

	ok(sdbus.bus_set_method_call_timeout != NULL,
	   "sd_bus_set_method_call_timeout is resolved (libsystemd 240 and later)");
	sdbus.bus_open_system = fake_open;
	sdbus.bus_flush_close_unref = fake_close;
	sdbus.bus_set_method_call_timeout = fake_set_timeout;
	sdbus.bus_call_method = fake_call_method;
	conf.cgroup.systemd_timeout_ms = 3000;
	r = scope_systemd_backend.ensure(&conf, "/nonexistent/cgroup", "system.slice/jobcg.scope",
					 &root);
	ok(r == -EIO && root == NULL && strstr(jobcg_last_error()->message, "GetUnit"),
	   "the fake GetUnit fails the backend (r=%d: %s)", r, jobcg_last_error()->message);
	ok(calls == 1 && calls_unbounded == 0 && timeouts_set >= 1,
	   "the call is bounded before it is made (%u call(s), %u unbounded, %u bound(s) set)",
	   calls, calls_unbounded, timeouts_set);
	ok(last_timeout > 2000000 && last_timeout <= 3000000,
	   "by what is left of SystemdTimeout=3000 (%llu us)", (unsigned long long)last_timeout);
	sdbus = saved;
}

/*
 * The keeper's exec failing is reported with exec's errno, whichever of the two reports (the
 * middle process's pid, the keeper's errno) reaches the pipe first. In test builds the middle
 * process waits at "keeper-before-pid" until the keeper's exec has failed: the keeper's report
 * comes first, which an earlier reader took for the pid (and the pid for the errno).
 */
static void test_keeper_exec_error(void)
{
	char dir[] = "/tmp/jobcg-test-keeper-XXXXXX", exe[64], go[96], reached[96];
	bool hooks = tap_test_hooks();
	pid_t pid = 0, helper = -1;
	int fd, r;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(exe, sizeof(exe), "%s/not-a-program", dir);
	snprintf(go, sizeof(go), "%s/keeper-before-pid.go", dir);
	snprintf(reached, sizeof(reached), "%s/keeper-before-pid.reached", dir);
	fd = open(exe, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
	ok(fd >= 0 && write(fd, "garbage\n", 8) == 8, "an executable file no kernel can run");
	if (fd >= 0)
		close(fd);
	if (hooks) {
		setenv("JOBCG_TEST_PAUSE", "keeper-before-pid", 1);
		setenv("JOBCG_TEST_PAUSE_DIR", dir, 1);
		helper = fork();
		if (helper == 0) {
			/* let the middle process on once the keeper has surely failed */
			struct timespec ts = {0, 10 * 1000 * 1000};

			for (int i = 0; i < 3000 && access(reached, F_OK) != 0; i++)
				nanosleep(&ts, NULL);
			ts = (struct timespec){0, 300 * 1000 * 1000};
			nanosleep(&ts, NULL);
			close(open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
			_exit(0);
		}
	}
	r = scope_keeper_spawn(exe, "system.slice/jobcg.scope", 1000, &pid);
	ok(r == -ENOEXEC && pid == 0,
	   "a keeper that cannot be exec'ed: exec's errno, ENOEXEC (r=%d, pid %d)%s", r, (int)pid,
	   hooks ? ", its report reaching the pipe before the pid" : "");
	ok(strstr(jobcg_last_error()->message, "exec ") &&
	       strstr(jobcg_last_error()->message, strerror(ENOEXEC)),
	   "and says so: %s", jobcg_last_error()->message);
	if (helper > 0)
		while (waitpid(helper, NULL, 0) < 0 && errno == EINTR)
			;
	unsetenv("JOBCG_TEST_PAUSE");
	unsetenv("JOBCG_TEST_PAUSE_DIR");
	r = scope_keeper_spawn("/nonexistent/jobcg", "system.slice/jobcg.scope", 1000, &pid);
	ok(r == -ENOENT && pid == 0, "a keeper that does not exist: ENOENT (r=%d)", r);
	r = scope_keeper_spawn("/bin/true", "system.slice/jobcg.scope", 1000, &pid);
	ok(r == 0 && pid > 0, "one that runs: its pid (r=%d, pid %d)", r, (int)pid);
	unlink(exe);
	unlink(go);
	unlink(reached);
	rmdir(dir);
}

/* Where a keeper finds itself once its grace is over: in its scope (or system/ below it), or
 * still where its starter was. */
static void test_keeper_in_scope(void)
{
	const char *scope = "system.slice/jobcg.scope";

	ok(scope_keeper_in_scope("0::/system.slice/jobcg.scope/system\n", scope),
	   "a keeper in the scope's system/ is in the scope");
	ok(scope_keeper_in_scope("0::/system.slice/jobcg.scope\n", scope),
	   "one in the scope itself (not parked yet) too");
	ok(!scope_keeper_in_scope("0::/user.slice/user-0.slice/session-3.scope\n", scope),
	   "one left in a login session is not");
	ok(!scope_keeper_in_scope("0::/system.slice/jobcg.scope2/system\n", scope),
	   "nor one in a scope whose name only begins like it");
	ok(scope_keeper_in_scope("12:memory:/elsewhere\n1:name=systemd:/x\n"
				 "0::/system.slice/jobcg.scope/system\n",
				 scope),
	   "on a hybrid layout the v2 line is the one read");
	ok(!scope_keeper_in_scope("12:memory:/system.slice/jobcg.scope\n0::/\n", scope),
	   "and a v1 hierarchy's path does not count");
	ok(scope_keeper_in_scope("12:memory:/x\n", scope),
	   "with no v2 line, nothing to tell by: stay");
}

int main(void)
{
	char *p = NULL;

	slice_is("system.slice", "system.slice");
	slice_is("-.slice", "");
	slice_is("a-b.slice", "a.slice/a-b.slice");
	slice_is("a-b-c.slice", "a.slice/a-b.slice/a-b-c.slice");
	slice_is("machine.slice", "machine.slice");
	slice_is(".slice", NULL);
	slice_is("system", NULL);
	slice_is("-a.slice", NULL);
	slice_is("a-.slice", NULL);
	slice_is("a--b.slice", NULL);
	slice_is("a/b.slice", NULL);
	slice_is("sys tem.slice", NULL);

	ok(scope_unit_name_valid("jobcg.scope"), "jobcg.scope is a scope name");
	ok(scope_unit_name_valid("node1_jobcg.scope"), "node1_jobcg.scope is a scope name");
	ok(!scope_unit_name_valid(".scope"), ".scope is not");
	ok(!scope_unit_name_valid("jobcg.service"), "a service is not");
	ok(!scope_unit_name_valid("job cg.scope"), "a space is not allowed");
	ok(!scope_unit_name_valid("a/b.scope"), "a slash is not allowed");

	is_int(scope_expected_root("system.slice", "jobcg.scope", &p), 0, "expected root");
	is_str(p, "system.slice/jobcg.scope", "jobcg.scope goes to system.slice/jobcg.scope");
	free(p);
	p = NULL;
	is_int(scope_expected_root("hpc-jobs.slice", "n1_jobcg.scope", &p), 0, "nested slice");
	is_str(p, "hpc.slice/hpc-jobs.slice/n1_jobcg.scope", "nested slice path");
	free(p);
	p = NULL;
	is_int(scope_expected_root("-.slice", "jobcg.scope", &p), 0, "root slice");
	is_str(p, "jobcg.scope", "a scope in the root slice sits at the top");
	free(p);
	p = NULL;
	is_int(scope_expected_root("system.slice", "jobcg", &p), -EINVAL, "bad scope name refused");
	ok(p == NULL, "nothing returned on error");
	ok(strstr(jobcg_last_error()->message, "JobcgScope") != NULL, "error names JobcgScope");

	ok(!scope_systemd_running() || access("/run/systemd/system", F_OK) == 0,
	   "scope_systemd_running agrees with /run/systemd/system");

	test_load();
	test_call_timeout();
	test_keeper_exec_error();
	test_keeper_in_scope();
	return tap_done();
}
