/*
 * Kernel test: `jobcg adopt` never puts a process into a job that holds no grant. Made
 * deterministic with the pause points of a -Dtest_hooks=true build: an adopt stopped between
 * making step_extern and moving the pid while a release runs, a release killed before its rmdir
 * (job marked "removing", grants revoked), an alloc killed before its "created" mark. With
 * stand-in GPUs (c 195:N) in both device program modes.
 */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>

#include "devices.h"
#include "kcli.h"

static char tmp[PATH_MAX], conf_dir[PATH_MAX], tree[PATH_MAX], pin_dir[PATH_MAX],
    pause_dir[PATH_MAX], dev[2][PATH_MAX];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
}

/* A process that opens the stand-in GPU it is told (one byte: its index) and answers with
 * the errno (0: the open got past the device check, ENXIO there), so that it can be asked
 * after it was moved. Dead: its answer pipe reaches EOF. */
struct probe {
	pid_t pid;
	int ask, answer;
};

static struct probe probe_start(void)
{
	int a[2], b[2];
	struct probe p = {-1, -1, -1};

	if (pipe2(a, O_CLOEXEC) < 0 || pipe2(b, O_CLOEXEC) < 0)
		return p;
	p.pid = fork();
	if (p.pid == 0) {
		unsigned char i;

		close(a[1]);
		close(b[0]);
		while (read(a[0], &i, 1) == 1) {
			int fd = open(dev[i & 1], O_RDONLY | O_CLOEXEC), e = fd >= 0 ? 0 : errno;

			if (fd >= 0)
				close(fd);
			if (e == ENXIO)
				e = 0; /* no driver behind a stand-in: past the device check */
			if (write(b[1], &e, sizeof(e)) != sizeof(e))
				_exit(1);
		}
		_exit(0);
	}
	close(a[0]);
	close(b[1]);
	p.ask = a[1];
	p.answer = b[0];
	return p;
}

/* errno of its open of GPU @i, or -1 when it is dead (or did not answer in 5 s). */
static int probe_open(struct probe *p, unsigned char i)
{
	struct pollfd pfd = {.fd = p->answer, .events = POLLIN};
	int e;

	if (write(p->ask, &i, 1) != 1)
		return -1;
	if (poll(&pfd, 1, 5000) != 1 || read(p->answer, &e, sizeof(e)) != sizeof(e))
		return -1;
	return e;
}

/* Ended, and how: 1 killed by a signal, 0 still alive (after @ms), -1 other. */
static int probe_dead(struct probe *p, unsigned ms)
{
	int st;

	for (unsigned i = 0; i <= ms / 10; i++) {
		pid_t w = waitpid(p->pid, &st, WNOHANG);

		if (w == p->pid) {
			p->pid = -1;
			return WIFSIGNALED(st) ? 1 : -1;
		}
		usleep(10000);
	}
	return 0;
}

static void probe_end(struct probe *p)
{
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
	close(p->ask);
	close(p->answer);
	p->pid = -1;
}

/* The cgroup (relative to the mount) a process is in. */
static void cgroup_of(pid_t pid, char *buf, size_t size)
{
	char p[64], line[PATH_MAX + 8];
	FILE *f;

	snprintf(buf, size, "?");
	snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
	f = fopen(p, "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(buf, size, "%s", line + 3);
		}
	if (f)
		fclose(f);
}

/* Is @pid anywhere below job @job's directory? */
static bool in_job(pid_t pid, unsigned job)
{
	char cg[PATH_MAX], want[PATH_MAX + 32];

	cgroup_of(pid, cg, sizeof(cg));
	snprintf(want, sizeof(want), "%s/job_%u", tree + strlen(ktest_cgroup_mount()), job);
	return strncmp(cg, want, strlen(want)) == 0 &&
	       (cg[strlen(want)] == '/' || cg[strlen(want)] == '\0');
}

static void clear_pause_dir(void)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -f '%s'/*", pause_dir);
	if (system(cmd) != 0)
		tap_diag("could not empty %s", pause_dir);
}

/* adopt stopped after making step_extern; a release starts; adopt goes on. */
static void test_adopt_vs_release(void)
{
	struct probe p = probe_start();
	char pid[16], *err = NULL;
	int afd = -1, rfd = -1, e, dead;
	bool release_ran;
	pid_t adopt, release;

	tap_diag("adopt racing release");
	is_int(kcli(NULL, "alloc", "5", "--user", "root", "--gres", "gpu:1", NULL), 0,
	       "job 5 with gpu:1");
	is_int(probe_open(&p, 1), 0,
	       "the probe answers (outside jobcg's tree no device program applies)");
	snprintf(pid, sizeof(pid), "%d", (int)p.pid);
	adopt = kcli_start_paused(pause_dir, "adopt-before-move",
				  (char *[]){"adopt", pid, "--job", "5", NULL}, &afd);
	ok(kcli_wait_file(pause_dir, "adopt-before-move.reached", 30000),
	   "adopt stops after making step_extern, before moving the pid");
	ok(kcli_exists("%s/job_5/step_extern", tree), "...step_extern is there");
	release = kcli_start_paused(pause_dir, "remove-before-rmdir",
				    (char *[]){"release", "5", NULL}, &rfd);
	/* Without one lock over adopt's check and move, the release runs now: it kills the
	 * job's processes and revokes its grants while the adopt is stopped. */
	release_ran = kcli_wait_file(pause_dir, "remove-before-rmdir.reached", 2000);
	ok(!release_ran, "the release waits for the adopt (one hold of the node lock)");
	kcli_pause_go(pause_dir, "adopt-before-move");
	e = kcli_finish(adopt, afd, &err);
	tap_diag("adopt exit %d", e);
	e = probe_open(&p, 1);
	ok(e == EPERM || e == -1,
	   "the adopted process cannot open the GPU the job was not granted (errno %d; -1: "
	   "dead)",
	   e);
	if (!release_ran)
		ok(kcli_wait_file(pause_dir, "remove-before-rmdir.reached", 30000),
		   "the release runs once the adopt is done");
	else
		ok(true, "(the release already ran)");
	e = probe_open(&p, 1);
	ok(e == EPERM || e == -1,
	   "with its grants revoked, the job's process still cannot open it (errno %d)", e);
	kcli_pause_go(pause_dir, "remove-before-rmdir");
	is_int(kcli_finish(release, rfd, NULL), 0, "the release succeeds");
	ok(!kcli_exists("%s/job_5", tree), "job 5 is gone");
	dead = probe_dead(&p, 3000);
	ok(dead == 1 || (dead == 0 && !in_job(p.pid, 5)),
	   "the adopted process was killed with the job, or never joined it");
	free(err);
	probe_end(&p);
	clear_pause_dir();
}

/* The process ends while adopt, having made the job's extern step for it, is about to move it:
 * the adopt fails and the step it made goes again, to be made for the next login. */
static void test_adopt_process_ends(void)
{
	struct probe p = probe_start(), next;
	char pid[16], *err = NULL;
	int afd = -1, e;
	pid_t adopt;

	tap_diag("the process ends before it is moved");
	is_int(kcli(NULL, "alloc", "12", "--user", "root", NULL), 0, "job 12");
	snprintf(pid, sizeof(pid), "%d", (int)p.pid);
	adopt = kcli_start_paused(pause_dir, "adopt-before-move",
				  (char *[]){"adopt", pid, "--job", "12", NULL}, &afd);
	ok(kcli_wait_file(pause_dir, "adopt-before-move.reached", 30000) &&
	       kcli_exists("%s/job_12/step_extern", tree),
	   "adopt stops after making step_extern, before moving the pid");
	probe_end(&p);
	kcli_pause_go(pause_dir, "adopt-before-move");
	e = kcli_finish(adopt, afd, &err);
	ok(e == 1 && err && strstr(err, pid), "the adopt fails (%d), naming the process: %s", e,
	   err ? err : "");
	ok(!kcli_exists("%s/job_12/step_extern", tree),
	   "the extern step it made for it is gone again");
	free(err);
	clear_pause_dir();
	next = probe_start();
	snprintf(pid, sizeof(pid), "%d", (int)next.pid);
	is_int(kcli(NULL, "adopt", pid, "--job", "12", NULL), 0,
	       "the next login makes the extern step anew");
	ok(in_job(next.pid, 12), "...and is in job 12");
	is_int(kcli(NULL, "release", "12", NULL), 0, "release job 12");
	probe_end(&next);
}

/* A release killed after it revoked the grants and before its rmdir. */
static void test_removing_job(void)
{
	struct probe p = probe_start();
	char pid[16], *err = NULL;

	tap_diag("a job half removed");
	is_int(kcli(NULL, "alloc", "6", "--user", "root", "--gres", "gpu:1", NULL), 0,
	       "job 6 with gpu:1");
	{
		struct probe first = probe_start();

		/* step_extern exists from an earlier login: nothing to make, only a pid to move */
		snprintf(pid, sizeof(pid), "%d", (int)first.pid);
		is_int(kcli(NULL, "adopt", pid, "--job", "6", NULL), 0,
		       "an earlier login adopted into job 6");
		probe_end(&first);
	}
	is_int(kcli_crash_at("remove-before-rmdir", (char *[]){"release", "6", NULL}),
	       128 + SIGKILL, "release 6 killed before its rmdir");
	ok(kcli_exists("%s/job_6", tree), "job 6's directory is left, marked removing");
	snprintf(pid, sizeof(pid), "%d", (int)p.pid);
	ok(kcli_run((char *[]){"adopt", pid, NULL}, NULL, &err) != 0,
	   "adopt does not choose a job being released");
	ok(err && strstr(err, "no job on this node"), "...the user has no job, it says");
	free(err);
	err = NULL;
	ok(kcli_run((char *[]){"adopt", pid, "--job", "6", NULL}, NULL, &err) != 0,
	   "adopt --job 6 is refused");
	ok(err && strstr(err, "being released"), "...saying the job is being released");
	free(err);
	ok(!in_job(p.pid, 6), "the process is not in job 6");
	is_int(kcli(NULL, "gc", NULL), 0, "gc");
	ok(!kcli_exists("%s/job_6", tree), "gc finished the removal");
	probe_end(&p);
}

/* An alloc killed before its "created" mark: owner and gres recorded, the job incomplete. */
static void test_half_created(void)
{
	struct probe p = probe_start();
	char pid[16], *err = NULL;

	tap_diag("a job half created");
	is_int(kcli_crash_at("job-create-before-mark",
			     (char *[]){"alloc", "7", "--user", "root", "--gres", "gpu:1", NULL}),
	       128 + SIGKILL, "alloc 7 killed before its created mark");
	ok(kcli_exists("%s/job_7", tree), "job 7's directory is left");
	snprintf(pid, sizeof(pid), "%d", (int)p.pid);
	ok(kcli_run((char *[]){"adopt", pid, NULL}, NULL, &err) != 0,
	   "adopt does not choose a job not completely created");
	ok(err && strstr(err, "no job on this node"), "...the user has no job, it says");
	free(err);
	err = NULL;
	ok(kcli_run((char *[]){"adopt", pid, "--job", "7", NULL}, NULL, &err) != 0,
	   "adopt --job 7 is refused");
	ok(err && strstr(err, "not completely created"), "...saying why");
	free(err);
	ok(!in_job(p.pid, 7), "the process is not in job 7");
	ok(!kcli_exists("%s/job_7/step_extern", tree), "and no step_extern was made there");
	is_int(kcli(NULL, "gc", NULL), 0, "gc");
	ok(!kcli_exists("%s/job_7", tree), "gc removed the half-created job");
	probe_end(&p);
}

/* `jobcg adopt --pam` from a shell standing in for sshd (pam_exec's caller, our parent there):
 * the shell prints its cgroup afterwards. Exit status of adopt; output to @out. */
static int pam_run(const char *service, const char *type, const char *user, const char *args,
		   char *out, size_t size)
{
	char script[2 * PATH_MAX];
	int fd[2], st;
	size_t len = 0;
	ssize_t k;
	pid_t pid;

	if (type && strcmp(type, "account,open_session") == 0) {
		/* both phases of one login, from the same process */
		snprintf(script, sizeof(script),
			 "PAM_TYPE=account '%s' adopt --pam %s 2>&1 && PAM_TYPE=open_session '%s' "
			 "adopt --pam %s 2>&1; rc=$?; grep '^0::' /proc/$$/cgroup; exit $rc",
			 kcli_binary(), args, kcli_binary(), args);
		type = NULL;
	} else
		snprintf(script, sizeof(script),
			 "'%s' adopt --pam %s 2>&1; rc=$?; grep '^0::' /proc/$$/cgroup; exit $rc",
			 kcli_binary(), args);
	if (pipe2(fd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		if (service)
			setenv("PAM_SERVICE", service, 1);
		if (type)
			setenv("PAM_TYPE", type, 1);
		if (user)
			setenv("PAM_USER", user, 1);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	while (len + 1 < size && (k = read(fd[0], out + len, size - len - 1)) > 0)
		len += (size_t)k;
	out[len] = '\0';
	close(fd[0]);
	waitpid(pid, &st, 0);
	if (*out)
		ktest_diag_lines("  ", out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * `jobcg adopt --pam` as pam_exec runs it after pam_env read a user's ~/.pam_environment: the
 * user's variables (@user_env, "NAME=VALUE" each) first, then ours without PAM_*, then PAM's
 * own items last, as pam_exec appends them. A forked copy of this test stands in for sshd (the
 * process adopted) and prints its cgroup after. Exit status of adopt; output to @out.
 */
static int pam_run_env(const char *const *user_env, const char *service, const char *type,
		       const char *user, const char *pam_dir, char *out, size_t size)
{
	int fd[2], st;
	size_t len = 0;
	ssize_t k;
	pid_t pid;

	if (pipe2(fd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		char *envp[256], items[3][256], line[PATH_MAX + 8];
		char *argv[] = {(char *)kcli_binary(), "adopt",		"--pam",
				"--pam-dir",	       (char *)pam_dir, NULL};
		size_t n = 0;
		pid_t login;
		FILE *f;

		dup2(fd[1], 1);
		dup2(fd[1], 2);
		for (size_t i = 0; user_env[i] && n < 64; i++)
			envp[n++] = (char *)user_env[i];
		for (char **e = environ; *e && n < 240; e++)
			if (strncmp(*e, "PAM_", 4) != 0)
				envp[n++] = *e;
		snprintf(items[0], sizeof(items[0]), "PAM_SERVICE=%s", service);
		snprintf(items[1], sizeof(items[1]), "PAM_USER=%s", user);
		snprintf(items[2], sizeof(items[2]), "PAM_TYPE=%s", type);
		for (int i = 0; i < 3; i++)
			envp[n++] = items[i];
		envp[n] = NULL;
		login = fork();
		if (login == 0) {
			execve(argv[0], argv, envp);
			_exit(127);
		}
		if (login < 0 || waitpid(login, &st, 0) < 0)
			_exit(126);
		f = fopen("/proc/self/cgroup", "re");
		while (f && fgets(line, sizeof(line), f))
			if (strncmp(line, "0::", 3) == 0)
				fputs(line, stdout);
		fflush(stdout);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 125);
	}
	close(fd[1]);
	while (len + 1 < size && (k = read(fd[0], out + len, size - len - 1)) > 0)
		len += (size_t)k;
	out[len] = '\0';
	close(fd[0]);
	waitpid(pid, &st, 0);
	if (*out)
		ktest_diag_lines("  ", out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * pam_run_env()'s account phase for nobody, stopped where adopt moves the login: *@env gets
 * the environment the adopting jobcg then runs with (/proc/PID/environ, a line a variable).
 * Exit status of adopt.
 */
static int pam_environ_at_move(const char *const *user_env, const char *pam_dir, char *env,
			       size_t size)
{
	int fd[2], st = 0;
	pid_t login, adopt = -1;
	size_t len = 0;
	ssize_t k;

	env[0] = '\0';
	clear_pause_dir();
	if (pipe2(fd, O_CLOEXEC) < 0)
		return -1;
	login = fork();
	if (login == 0) {
		char *envp[256], pause_env[PATH_MAX + 32];
		char *argv[] = {(char *)kcli_binary(), "adopt",		"--pam",
				"--pam-dir",	       (char *)pam_dir, NULL};
		size_t n = 0;
		pid_t pid;
		int dn = open("/dev/null", O_WRONLY | O_CLOEXEC);

		for (size_t i = 0; user_env[i] && n < 64; i++)
			envp[n++] = (char *)user_env[i];
		for (char **e = environ; *e && n < 240; e++)
			if (strncmp(*e, "PAM_", 4) != 0)
				envp[n++] = *e;
		snprintf(pause_env, sizeof(pause_env), "JOBCG_TEST_PAUSE_DIR=%s", pause_dir);
		envp[n++] = pause_env;
		envp[n++] = (char *)"JOBCG_TEST_PAUSE=adopt-before-move";
		envp[n++] = (char *)"PAM_SERVICE=sshd";
		envp[n++] = (char *)"PAM_USER=nobody";
		envp[n++] = (char *)"PAM_TYPE=account";
		envp[n] = NULL;
		pid = fork();
		if (pid == 0) {
			dup2(dn, 1);
			dup2(dn, 2);
			execve(argv[0], argv, envp);
			_exit(127);
		}
		if (pid < 0 || write(fd[1], &pid, sizeof(pid)) != sizeof(pid) ||
		    waitpid(pid, &st, 0) < 0)
			_exit(126);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 125);
	}
	close(fd[1]);
	if (login < 0 || read(fd[0], &adopt, sizeof(adopt)) != sizeof(adopt))
		adopt = -1;
	close(fd[0]);
	if (adopt > 0 && kcli_wait_file(pause_dir, "adopt-before-move.reached", 30000)) {
		char path[64];
		int efd;

		snprintf(path, sizeof(path), "/proc/%d/environ", (int)adopt);
		efd = open(path, O_RDONLY | O_CLOEXEC);
		while (efd >= 0 && len + 1 < size && (k = read(efd, env + len, size - len - 1)) > 0)
			len += (size_t)k;
		if (efd >= 0)
			close(efd);
		for (size_t i = 0; i < len; i++)
			if (env[i] == '\0')
				env[i] = '\n';
		env[len] = '\0';
	}
	kcli_pause_go(pause_dir, "adopt-before-move");
	if (login < 0 || waitpid(login, &st, 0) < 0)
		st = -1;
	/* The next test's pause must not find our go. */
	clear_pause_dir();
	if (st < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Does @path ask for a dynamic loader? (An ELF program header PT_INTERP.) */
static bool linked_dynamically(const char *path)
{
	char out[256] = "";
	char cmd[PATH_MAX + 64];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s' 2>/dev/null | grep -c INTERP", path);
	p = popen(cmd, "re");
	if (p) {
		if (!fgets(out, sizeof(out), p))
			out[0] = '\0';
		pclose(p);
	}
	return atoi(out) > 0;
}

/* A user's own PAM environment: PAM_* names of the user's choosing, the loader's variables. */
static void test_pam_user_env(const char *pamd)
{
	static const char *const none[] = {NULL};
	static const char *const close_first[] = {"PAM_TYPE=close_session", NULL};
	static const char *const root_first[] = {"PAM_USER=root", "PAM_SERVICE=su", NULL};
	static const char *const loader[] = {"LD_LIBRARY_PATH=/nonexistent-jobcg-test", NULL};
	static const char *const tuned[] = {"GLIBC_TUNABLES=glibc.malloc.perturb=165",
					    "MALLOC_ARENA_MAX=2", "NOT_JOBCGS=1", NULL};
	char out[8192], path[PATH_MAX + 32], env[16384];
	bool dynamic = linked_dynamically(kcli_binary());

	tap_diag("adopt --pam with a user's ~/.pam_environment");
	is_int(pam_run_env(none, "sshd", "open_session", "nobody", pamd, out, sizeof(out)), 1,
	       "open_session outside every job is refused");
	is_int(pam_run_env(close_first, "sshd", "open_session", "nobody", pamd, out, sizeof(out)),
	       1, "...and still refused when the user's environment says PAM_TYPE=close_session");
	ok(strstr(out, "outside every job") != NULL, "...for the same reason");
	ok(strstr(out, "sets PAM_SERVICE, PAM_TYPE or PAM_USER itself") != NULL,
	   "...warning that the PAM environment set a PAM item");
	is_int(pam_run_env(root_first, "sshd", "account", "nobody", pamd, out, sizeof(out)), 1,
	       "account phase, nobody without a job, the user's env saying PAM_USER=root "
	       "PAM_SERVICE=su: refused");
	ok(strstr(out, "no job on this node") != NULL, "...as nobody, who has no job");

	is_int(kcli(NULL, "alloc", "9", "--user", "nobody", NULL), 0, "job 9 of nobody");
	/* glibc reads its tunables at the start of any program, static or not, and keeps them. */
	is_int(pam_environ_at_move(tuned, pamd, env, sizeof(env)), 0,
	       "a user's GLIBC_TUNABLES and MALLOC_ARENA_MAX in the PAM environment: nobody is "
	       "let into job 9");
	ok(*env && !strstr(env, "GLIBC_TUNABLES") && !strstr(env, "MALLOC_ARENA_MAX") &&
	       !strstr(env, "NOT_JOBCGS") && strstr(env, "PAM_USER=nobody"),
	   "...by a jobcg that runs without them (none of the user's variables in its "
	   "environment), PAM's items kept");
	if (!dynamic) {
		for (int i = 0; i < 5; i++)
			tap_skip("this jobcg is linked statically: the loader's variables reach "
				 "nothing");
		is_int(kcli(NULL, "release", "9", NULL), 0, "release job 9");
		return;
	}
	is_int(pam_run_env(loader, "sshd", "account", "nobody", pamd, out, sizeof(out)), 1,
	       "a dynamically linked jobcg refuses a login whose PAM environment sets "
	       "LD_LIBRARY_PATH");
	ok(strstr(out, "LD_LIBRARY_PATH") && strstr(out, "statically linked"),
	   "...naming it and the fix");
	ok(strstr(out, "job_9") == NULL, "...and adopts nothing");
	snprintf(path, sizeof(path), "%s/sshd", pamd);
	write_file(path, "account required pam_exec.so quiet /usr/sbin/jobcg adopt --pam\n"
			 "session required pam_env.so user_readenv=1\n"
			 "session required pam_exec.so quiet /usr/sbin/jobcg adopt --pam\n");
	is_int(pam_run_env(none, "sshd", "account", "nobody", pamd, out, sizeof(out)), 1,
	       "with pam_env user_readenv=1 in the stack a dynamically linked jobcg refuses "
	       "every login");
	ok(strstr(out, "user_readenv=1") && strstr(out, "sshd:2"), "...naming the line");
	is_int(kcli(NULL, "release", "9", NULL), 0, "release job 9");
}

/*
 * A job in a reservation with a user list: a login is checked as its user, not as sshd (root),
 * which is the process moved; `jobcg adopt PID --job` checks the process's own user.
 */
static void test_pam_resv(const char *pamd)
{
	char out[8192], args[PATH_MAX + 64], job[PATH_MAX], pid[16], *err = NULL;
	struct probe p;

	tap_diag("adopt --pam into a job of a reservation with --users");
	snprintf(args, sizeof(args), "--pam-dir %s", pamd);
	snprintf(job, sizeof(job), "0::%s/resv_r1/job_10/step_extern/user/task_special",
		 tree + strlen(ktest_cgroup_mount()));
	is_int(kcli(NULL, "resv", "create", "r1", "--devices", "gpu:1", "--users", "nobody", NULL),
	       0, "reservation r1 for nobody");
	is_int(kcli(NULL, "alloc", "10", "--reservation", "r1", "--user", "nobody", NULL), 0,
	       "job 10 of nobody in r1");
	is_int(pam_run("sshd", "account", "nobody", args, out, sizeof(out)), 0,
	       "nobody's login (from sshd, a root process) is adopted into job 10");
	ok(strstr(out, job) != NULL, "...its sshd is in job 10");
	p = probe_start();
	snprintf(pid, sizeof(pid), "%d", (int)p.pid);
	ok(kcli_run((char *[]){"adopt", pid, "--job", "10", NULL}, NULL, &err) == 1,
	   "adopt PID --job 10 of a root process is refused");
	ok(err && strstr(err, "user 0 may not place jobs in reservation r1"),
	   "...checking the process's user");
	ok(!in_job(p.pid, 10), "...and the process is not in job 10");
	free(err);
	probe_end(&p);
	is_int(kcli(NULL, "release", "10", NULL), 0, "release job 10");
	is_int(kcli(NULL, "resv", "delete", "r1", NULL), 0, "delete r1");
}

/* What a race in a private pid namespace gave (pidns_race()). */
struct reuse {
	bool skipped, reused;
	int rc;
	char victim_cg[PATH_MAX], own_cg[PATH_MAX], err[4096];
};

/*
 * In a private pid namespace, where this is pid 1 and pids are few: the process to adopt (a
 * stand-in for sshd, which with @pam runs `jobcg adopt --pam` itself) dies while the adopt is
 * stopped before its move, and a root process (the victim) is made to take its pid
 * (ns_last_pid). Then the adopt goes on. Reports on @fd.
 */
static void pidns_race(bool pam, const char *pamd, int fd)
{
	char errfile[PATH_MAX + 16], pidtext[16];
	struct reuse r = {.rc = -1};
	pid_t standin, victim, adopt = -1, w;
	int st, e, lp;

	snprintf(errfile, sizeof(errfile), "%s/race.err", tmp);
	/* Our own /proc, of this namespace, not seen outside it: as unshare --mount-proc. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		r.skipped = true;
		goto out;
	}
	setenv("JOBCG_TEST_PAUSE", "adopt-before-move", 1);
	setenv("JOBCG_TEST_PAUSE_DIR", pause_dir, 1);
	standin = fork();
	if (standin == 0) {
		if (pam) {
			e = open(errfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
			setenv("PAM_SERVICE", "sshd", 1);
			setenv("PAM_TYPE", "account", 1);
			setenv("PAM_USER", "nobody", 1);
			if (fork() == 0) {
				dup2(e, 1);
				dup2(e, 2);
				execl(kcli_binary(), kcli_binary(), "adopt", "--pam", "--pam-dir",
				      pamd, (char *)NULL);
				_exit(127);
			}
		}
		for (;;)
			pause();
	}
	if (!pam) {
		snprintf(pidtext, sizeof(pidtext), "%d", (int)standin);
		adopt = fork();
		if (adopt == 0) {
			e = open(errfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
			dup2(e, 1);
			dup2(e, 2);
			execl(kcli_binary(), kcli_binary(), "adopt", pidtext, "--job", "11",
			      (char *)NULL);
			_exit(127);
		}
	}
	if (!kcli_wait_file(pause_dir, "adopt-before-move.reached", 30000)) {
		kill(standin, SIGKILL);
		goto out;
	}
	/* The stand-in ends and is reaped: its pid is free; the adopt is now our child. */
	kill(standin, SIGKILL);
	waitpid(standin, NULL, 0);
	lp = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	snprintf(pidtext, sizeof(pidtext), "%d", (int)standin - 1);
	if (lp < 0 || write(lp, pidtext, strlen(pidtext)) < 0) {
		r.skipped = true;
		kcli_pause_go(pause_dir, "adopt-before-move");
		goto out;
	}
	close(lp);
	victim = fork();
	if (victim == 0) {
		for (;;)
			pause();
	}
	r.reused = victim == standin;
	kcli_pause_go(pause_dir, "adopt-before-move");
	/* The adopt, whichever it is: the victim does not end. */
	while ((w = waitpid(adopt, &st, 0)) < 0 && errno == EINTR)
		;
	if (w > 0)
		r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	cgroup_of(victim, r.victim_cg, sizeof(r.victim_cg));
	cgroup_of(getpid(), r.own_cg, sizeof(r.own_cg));
	kill(victim, SIGKILL);
	waitpid(victim, NULL, 0);
out : {
	FILE *f = fopen(errfile, "re");
	size_t n = f ? fread(r.err, 1, sizeof(r.err) - 1, f) : 0;

	r.err[n] = '\0';
	if (f)
		fclose(f);
}
	if (write(fd, &r, sizeof(r)) != sizeof(r))
		_exit(1);
}

/* `jobcg adopt` when the process to adopt ends and its pid is reused before the move: the
 * process that took the pid is not left in the job. */
static void test_pid_reuse(bool pam, const char *pamd)
{
	struct reuse r = {};
	int fd[2];
	pid_t child;
	ssize_t n;
	char want[PATH_MAX + 32];

	tap_diag("adopt%s: the login process ends and its pid is reused before the move",
		 pam ? " --pam" : " PID");
	clear_pause_dir();
	is_int(kcli(NULL, "alloc", "11", "--user", "nobody", NULL), 0, "job 11 of nobody");
	if (pipe2(fd, O_CLOEXEC) < 0) {
		printf("Bail out! pipe: %s\n", strerror(errno));
		exit(1);
	}
	child = fork();
	if (child == 0) {
		pid_t init;
		int st;

		close(fd[0]);
		if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0) {
			struct reuse s = {.skipped = true};

			_exit(write(fd[1], &s, sizeof(s)) == sizeof(s) ? 0 : 1);
		}
		init = fork();
		if (init == 0) {
			pidns_race(pam, pamd, fd[1]);
			_exit(0);
		}
		waitpid(init, &st, 0);
		_exit(0);
	}
	close(fd[1]);
	n = read(fd[0], &r, sizeof(r));
	close(fd[0]);
	waitpid(child, NULL, 0);
	clear_pause_dir();
	if (n != sizeof(r) || r.skipped || !r.reused) {
		for (int i = 0; i < 4; i++)
			tap_skip("%s", n != sizeof(r) ? "no answer from the pid namespace"
				       : r.skipped ? "no private pid namespace or ns_last_pid here"
						   : "the victim did not get the stand-in's pid");
	} else {
		if (*r.err)
			ktest_diag_lines("  jobcg: ", r.err);
		tap_diag("victim in %s, its parent in %s", r.victim_cg, r.own_cg);
		ok(r.rc != 0, "the adopt fails (exit %d)", r.rc);
		ok(strstr(r.err, "ended while being adopted") != NULL,
		   "...saying the process ended");
		snprintf(want, sizeof(want), "/job_11/");
		ok(strstr(r.victim_cg, want) == NULL,
		   "the process that took the pid (root's) is not left in job 11");
		is_str(r.victim_cg, r.own_cg, "...it is back where it was");
	}
	is_int(kcli(NULL, "release", "11", NULL), 0, "release job 11");
}

/* --pam: which services, which phase, which stack. */
static void test_pam(void)
{
	char out[8192], pamd[PATH_MAX], path[PATH_MAX + 32], args[PATH_MAX + 64], job[PATH_MAX];

	tap_diag("adopt --pam");
	snprintf(pamd, sizeof(pamd), "%s/pam.d", tmp);
	mkdir(pamd, 0755);
	snprintf(path, sizeof(path), "%s/sshd", pamd);
	write_file(path, "account required pam_exec.so quiet /usr/sbin/jobcg adopt --pam\n"
			 "@include common-session\n"
			 "session required pam_exec.so quiet /usr/sbin/jobcg adopt --pam\n");
	snprintf(path, sizeof(path), "%s/common-session", pamd);
	write_file(path, "session required pam_unix.so\n");
	snprintf(args, sizeof(args), "--pam-dir %s", pamd);
	snprintf(job, sizeof(job), "0::%s/job_8/step_extern/user/task_special",
		 tree + strlen(ktest_cgroup_mount()));
	is_int(kcli(NULL, "alloc", "8", "--user", "nobody", NULL), 0, "job 8 of nobody");

	is_int(pam_run("sshd", "account", "nobody", args, out, sizeof(out)), 0,
	       "sshd, account phase: nobody has a job, let in");
	ok(strstr(out, job) != NULL, "...and its caller (the login's sshd) is in job 8");
	is_int(pam_run("sshd", "account,open_session", "nobody", args, out, sizeof(out)), 0,
	       "account then open_session: the login is still in its job, the session opens");
	ok(strstr(out, job) != NULL, "...in job 8");
	is_int(pam_run("su", "account", "nobody", args, out, sizeof(out)), 0,
	       "su: not a service named (default: sshd only), let through");
	ok(strstr(out, "job_8") == NULL, "...and not adopted");
	is_int(pam_run("sudo", "account", "nobody", "--service sshd,login", out, sizeof(out)), 0,
	       "sudo with --service sshd,login: let through");
	ok(strstr(out, "job_8") == NULL, "...not adopted");
	is_int(pam_run(NULL, "account", "nobody", args, out, sizeof(out)), 1,
	       "no PAM_SERVICE: not from pam_exec, refused");
	is_int(pam_run("sshd", "auth", "nobody", args, out, sizeof(out)), 1,
	       "an auth line is refused");
	ok(strstr(out, "PAM_TYPE 'auth'") != NULL, "...naming PAM_TYPE");
	is_int(pam_run("sshd", "close_session", "nobody", args, out, sizeof(out)), 0,
	       "close_session: nothing to do");
	is_int(pam_run("sshd", "account", NULL, args, out, sizeof(out)), 1, "no PAM_USER: refused");
	ok(strstr(out, "PAM_USER is not set") != NULL, "...saying so");
	is_int(pam_run("sshd", "account", "jobcg-no-such-user", args, out, sizeof(out)), 1,
	       "a PAM_USER without a passwd entry: refused");
	ok(strstr(out, "unknown user 'jobcg-no-such-user'") != NULL, "...naming it");
	is_int(pam_run("sshd", "account", "root", args, out, sizeof(out)), 0,
	       "root is let through without a job");
	ok(strstr(out, "job_") == NULL, "...without adoption");

	/* The session phase: the login must still be in a job after the session modules. */
	is_int(pam_run("sshd", "open_session", "nobody", args, out, sizeof(out)), 1,
	       "open_session from outside every job: the session is refused");
	ok(strstr(out, "outside every job") && strstr(out, "pam_systemd"),
	   "...saying where it is and what moves logins");

	/* pam_systemd in sshd's session stack (Debian's common-session with libpam-systemd). */
	snprintf(path, sizeof(path), "%s/common-session", pamd);
	write_file(path, "session required pam_unix.so\nsession optional pam_systemd.so\n");
	is_int(pam_run("sshd", "account", "nobody", args, out, sizeof(out)), 1,
	       "with pam_systemd in sshd's session stack the login is refused");
	ok(strstr(out, "pam_systemd") && strstr(out, "common-session:2") &&
	       strstr(out, "common-session-noninteractive"),
	   "...naming the line and the fix");
	ok(strstr(out, "job_8") == NULL, "...and not adopted");
	is_int(kcli(NULL, "release", "8", NULL), 0, "release job 8");
	write_file(path, "session required pam_unix.so\n");
	is_int(pam_run("sshd", "account", "nobody", args, out, sizeof(out)), 1,
	       "without a job nobody is refused");
	ok(strstr(out, "no job on this node") != NULL, "...saying so");

	is_int(kcli(NULL, "adopt", "1", NULL), 2, "pid 1 is never adopted");
	test_pam_resv(pamd);
	test_pid_reuse(true, pamd);
	test_pid_reuse(false, pamd);
	test_pam_user_env(pamd);
}

static void run_all(void)
{
	test_adopt_vs_release();
	test_adopt_process_ends();
	test_removing_job();
	test_half_created();
}

int main(void)
{
	const char *root = ktest_setup("adopt-race");
	const char *mount = ktest_cgroup_mount();
	char path[PATH_MAX + 64], text[2 * PATH_MAX + 64];

	/* A probe killed with its job: writing to it is an answer, not the test's end. */
	signal(SIGPIPE, SIG_IGN);
	if (!getenv("JOBCG_BUILD_ROOT"))
		tap_plan_skip_all("JOBCG_BUILD_ROOT not set");
	/* Pause points exist only in a -Dtest_hooks=true build (scripts/test makes one): skip
	 * before anything is made, pins included. */
	tap_require_hooks("adopts and releases stopped at their pause points: a build without "
			  "test hooks");
	snprintf(tmp, sizeof(tmp), "%s", ktest_tmpdir());
	snprintf(tree, sizeof(tree), "%s/jobcg", root);
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/jobcg-test-adopt-%d", (int)getpid());
	snprintf(conf_dir, sizeof(conf_dir), "%s/conf", tmp);
	snprintf(pause_dir, sizeof(pause_dir), "%s/pause", tmp);
	mkdir(conf_dir, 0755);
	mkdir(pause_dir, 0755);
	text[0] = '\0';
	for (int i = 0; i < 2; i++) {
		snprintf(dev[i], sizeof(dev[i]), "%s/nvidia%d", tmp, i);
		if (mknod(dev[i], S_IFCHR | 0666, makedev(195, i)) < 0)
			tap_plan_skip_all("cannot mknod stand-in GPUs");
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "Name=gpu File=%s\n",
			 dev[i]);
	}
	snprintf(path, sizeof(path), "%s/gres.conf", conf_dir);
	write_file(path, text);
	snprintf(path, sizeof(path), "%s/cgroup.conf", conf_dir);
	write_file(path, "ConstrainDevices=yes\nIgnoreSystemd=yes\n");
	setenv("JOBCG_CONF_DIR", conf_dir, 1);
	setenv("JOBCG_ROOT", tree + strlen(mount) + 1, 1);
	snprintf(path, sizeof(path), "%s/state", tmp);
	setenv("JOBCG_STATE_DIR", path, 1);
	setenv("JOBCG_BPF_PIN_DIR", pin_dir, 1);
	setenv("ASAN_OPTIONS", "detect_leaks=0", 0);

	ok(kcli_crash_at("job-create-before-mark", (char *[]){"alloc", "1", NULL}) == 128 + SIGKILL,
	   "the pause points are there (JOBCG_TEST_HOOKS=1)");
	kcli(NULL, "gc", NULL);

	run_all();

	test_pam();

	/* The same with one compare-and-exit program per cgroup. */
	snprintf(path, sizeof(path), "%s/cgroup.conf", conf_dir);
	write_file(path, "ConstrainDevices=yes\nIgnoreSystemd=yes\nDeviceProgram=linear\n");
	snprintf(tree, sizeof(tree), "%s/jobcg-linear", root);
	setenv("JOBCG_ROOT", tree + strlen(mount) + 1, 1);
	snprintf(path, sizeof(path), "%s/state-linear", tmp);
	setenv("JOBCG_STATE_DIR", path, 1);
	tap_diag("DeviceProgram=linear");
	run_all();

	{
		struct jobcg_config *conf = NULL;
		struct jobcg_devpolicy *p = NULL;

		snprintf(tree, sizeof(tree), "%s/jobcg", root);
		if (jobcg_config_load(conf_dir, NULL, 0, &conf) == 0 &&
		    jobcg_devpolicy_open_pinned(conf, tree, &p) == 0)
			jobcg_devpolicy_destroy(p);
		jobcg_config_free(conf);
		rmdir(pin_dir);
	}
	return tap_done();
}
