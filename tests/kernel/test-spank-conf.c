/*
 * Kernel test: jobcg_spank.so, loaded with dlopen() against stand-ins for slurmstepd's spank_*
 * and slurm_* calls, ends a step and its job whose cgroup.conf and gres.conf broke while it
 * ran (it keeps the configuration of the step's start), and fails closed a step that starts
 * with them broken: its task exits 1 before its exec and nothing is made. Such a step is
 * recorded FAILED with its reason in the log the broken files' StateDir still names; where
 * even that cannot be read (StateDir broken, a bad plugstack.conf argument) it has no record
 * and slurmd's log says so. A step refused with a sound configuration is recorded too. Then
 * (test builds) every change the plugin makes for a step fails in turn: its task never runs
 * outside its task cgroup, and nothing of the job is left once its watcher and gc are done.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <slurm/spank.h>

#include "jobcg/acctlog.h"
#include "jobcg/config.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

/* What this "slurmstepd" tells the plugin. */
static uint32_t job_id, step_id, ntasks = 1;
static int task_id, task_status;
static pid_t task_pid;
static char logged[16384];
static char *task_log; /* shared with the task's process */
#define TASK_LOG_SIZE 4096

#pragma GCC visibility push(default)
int spank_remote(spank_t sp)
{
	(void)sp;
	return 1;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	spank_err_t r = ESPANK_SUCCESS;
	va_list ap;

	(void)sp;
	va_start(ap, item);
	switch (item) {
	case S_JOB_ID:
		*va_arg(ap, uint32_t *) = job_id;
		break;
	case S_JOB_STEPID:
		*va_arg(ap, uint32_t *) = step_id;
		break;
	case S_JOB_LOCAL_TASK_COUNT:
		*va_arg(ap, uint32_t *) = ntasks;
		break;
	case S_JOB_UID:
		*va_arg(ap, uid_t *) = 0;
		break;
	case S_JOB_GID:
		*va_arg(ap, gid_t *) = 0;
		break;
	case S_TASK_ID:
		*va_arg(ap, int *) = task_id;
		break;
	case S_TASK_EXIT_STATUS:
		*va_arg(ap, int *) = task_status;
		break;
	case S_TASK_PID:
		*va_arg(ap, pid_t *) = task_pid;
		break;
	default:
		r = ESPANK_ERROR;
	}
	va_end(ap);
	return r;
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	(void)sp, (void)var, (void)buf, (void)len;
	return ESPANK_ENV_NOEXIST;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
	(void)sp, (void)var, (void)val, (void)overwrite;
	return ESPANK_ERROR;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
	(void)sp, (void)var;
	return ESPANK_SUCCESS;
}

static void vlog(char *buf, size_t size, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void vlog(char *buf, size_t size, const char *fmt, va_list ap)
{
	size_t n = strlen(buf);

	if (n + 2 < size) {
		vsnprintf(buf + n, size - n - 1, fmt, ap);
		strcat(buf, "\n");
	}
}

#define LOGGER(name, buf)                                                                          \
	void name(const char *fmt, ...)                                                            \
	{                                                                                          \
		va_list ap;                                                                        \
		va_start(ap, fmt);                                                                 \
		vlog(buf, sizeof(buf), fmt, ap);                                                   \
		va_end(ap);                                                                        \
	}
LOGGER(slurm_error, logged)
LOGGER(slurm_info, logged)
LOGGER(slurm_verbose, logged)
LOGGER(slurm_debug, logged)
LOGGER(slurm_debug2, logged)
LOGGER(slurm_debug3, logged)
void slurm_spank_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(task_log, TASK_LOG_SIZE, fmt, ap);
	va_end(ap);
}
#pragma GCC visibility pop

typedef int hook_f(spank_t, int, char **);
static hook_f *h_init, *h_post_fork, *h_task_init, *h_task_exit, *h_exit;
static char confdir[PATH_MAX];

static void write_file(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX + 64];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "we");
	if (!f) {
		printf("Bail out! %s: %s\n", p, strerror(errno));
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

/* Step records of job @job in the accounting log. */
struct recs {
	const char *job;
	unsigned steps, failed;
	char reason[1024]; /* the last one's */
	int exit_code;
};

static int rec_fn(const struct jobcg_acct_record *r, void *u)
{
	struct recs *c = u;

	if (r->kind == JOBCG_ACCT_STEP && r->job_id && !strcmp(r->job_id, c->job)) {
		c->steps++;
		c->failed += r->state == JOBCG_ACCT_FAILED;
		c->exit_code = r->exit_code;
		snprintf(c->reason, sizeof(c->reason), "%s", r->reason ? r->reason : "");
	}
	return 0;
}

static struct recs records(const struct jobcg_config *conf, const char *job)
{
	struct recs c = {.job = job};
	char *path = NULL;

	if (jobcg_acctlog_path(conf, &path) == 0)
		(void)jobcg_acctlog_read(path, NULL, rec_fn, &c);
	free(path);
	return c;
}

/*
 * The walk's one step (--walk-step CONF_ARG JOBCG_ARG RESULT_FILE N LOG): step 60.0 as slurmstepd
 * runs it, the plugin loaded in this fresh process with JOBCG_TEST_FAIL_AT=N (and the log), which
 * it reads as it loads, so that its changes count from the start. slurmstepd forks the task, which
 * waits until every task_post_fork is done; a post_fork that fails kills the step before the task
 * runs anything. The task runs task_init, then "execs" (exits 0) reporting its cgroup, or exits 1
 * when task_init refuses. RESULT_FILE gets "init R post_fork R task S CGROUP".
 */
static int walk_step(char *conf, char *jobcg, const char *result, const char *n, const char *log)
{
	char *av[] = {conf, jobcg, (char *)"slurm_gres=none"};
	const int ac = 3;
	char *where =
	    mmap(NULL, PATH_MAX, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int go[2], ri, rp = -1, st = 0;
	void *so;
	FILE *f;

	/* Set only now: this program's own copy of the library read its environment as it
	 * started, and must not take what is meant for the plugin's. */
	setenv("JOBCG_TEST_FAIL_AT", n, 1);
	setenv("JOBCG_TEST_FAIL_LOG", log, 1);
	so = dlopen(JOBCG_SPANK_SO, RTLD_NOW | RTLD_LOCAL);

	task_log =
	    mmap(NULL, TASK_LOG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!so || where == MAP_FAILED || task_log == MAP_FAILED || pipe(go) < 0)
		return 2;
	where[0] = 0;
	h_init = (hook_f *)dlsym(so, "slurm_spank_init");
	h_post_fork = (hook_f *)dlsym(so, "slurm_spank_task_post_fork");
	h_task_init = (hook_f *)dlsym(so, "slurm_spank_task_init");
	h_task_exit = (hook_f *)dlsym(so, "slurm_spank_task_exit");
	h_exit = (hook_f *)dlsym(so, "slurm_spank_exit");
	job_id = 60;
	step_id = 0;
	ri = h_init(NULL, ac, av);
	if (ri == 0) {
		pid_t child = fork();

		if (child == 0) {
			char b;
			FILE *cg;

			close(go[1]);
			if (read(go[0], &b, 1) != 1)
				_exit(3); /* killed, or slurmstepd gone: never ran */
			if (h_task_init(NULL, ac, av) != 0)
				_exit(1);
			if ((cg = fopen("/proc/self/cgroup", "re"))) {
				char line[PATH_MAX];

				while (fgets(line, sizeof(line), cg))
					if (!strncmp(line, "0::", 3))
						snprintf(where, PATH_MAX, "%s", line + 3);
				fclose(cg);
			}
			_exit(0);
		}
		close(go[0]);
		task_pid = child;
		task_id = 0;
		rp = h_post_fork(NULL, ac, av);
		if (rp != 0)
			kill(child, SIGKILL);
		else if (write(go[1], "g", 1) != 1)
			kill(child, SIGKILL);
		close(go[1]);
		waitpid(child, &st, 0);
		task_status = st;
		(void)h_task_exit(NULL, ac, av);
	}
	(void)h_exit(NULL, ac, av);
	if (!(f = fopen(result, "we")))
		return 2;
	/* (task 99: never forked, its step's init having failed) */
	fprintf(f, "init %d post_fork %d task %d %s", ri, rp,
		ri != 0		? 99
		: WIFEXITED(st) ? WEXITSTATUS(st)
				: -WTERMSIG(st),
		where[0] ? where : "-\n");
	fclose(f);
	return 0;
}

/* Whether some process's command line has @needle (a step's watcher still running). */
static bool process_with(const char *needle)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	bool found = false;

	while (d && !found && (de = readdir(d))) {
		char p[300], buf[8192];
		ssize_t n;
		int fd;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[n > 0 ? n : 0] = 0;
		found = strstr(buf, needle) != NULL;
	}
	if (d)
		closedir(d);
	return found;
}

/*
 * Every change the plugin makes for a step failing in turn (JOBCG_TEST_FAIL_AT, test builds):
 * the task never runs outside its task cgroup (it runs there, or is killed, or refused before
 * its exec), and once the step's watcher and a gc are done nothing of job 60 is left and its
 * step has at most one record, one when its task ran.
 */
static void walk(struct jobcg_ctx *ctx, const struct jobcg_config *conf, const char *root,
		 char *conf_arg, char *jobcg_arg)
{
	char result[PATH_MAX], log[PATH_MAX], want[PATH_MAX + 64], watcher[PATH_MAX + 64];
	unsigned seen = records(conf, "60").steps;

	snprintf(result, sizeof(result), "%s/walk-result", ktest_tmpdir());
	snprintf(log, sizeof(log), "%s/walk-fail.log", ktest_tmpdir());
	snprintf(want, sizeof(want), "%s/job_60/step_0/user/task_0",
		 root + strlen(ktest_cgroup_mount()));
	snprintf(watcher, sizeof(watcher), "--step-dir %s/job_60/step_0 ", root);
	for (unsigned n = 1; n <= 100; n++) {
		char nbuf[16], text[PATH_MAX + 128] = "", what[PATH_MAX + 64] = "", cg[PATH_MAX];
		int ri = 0, rp = 0, task = 0, st = 0;
		struct jobcg_gc_stats gs = {};
		struct recs c;
		bool ran, contained, left;
		pid_t pid;
		FILE *f;

		unlink(result);
		unlink(log);
		snprintf(nbuf, sizeof(nbuf), "%u", n);
		pid = fork();
		if (pid == 0) {
			execl("/proc/self/exe", "test-spank-conf", "--walk-step", conf_arg,
			      jobcg_arg, result, nbuf, log, (char *)NULL);
			_exit(127);
		}
		waitpid(pid, &st, 0);
		/* The watcher ends what the step's own end could not; let it finish first. */
		for (int i = 0; i < 1000 && process_with(watcher); i++)
			usleep(10000);
		if ((f = fopen(result, "re"))) {
			if (!fgets(text, sizeof(text), f))
				text[0] = 0;
			fclose(f);
		}
		if ((f = fopen(log, "re"))) {
			if (!fgets(what, sizeof(what), f))
				what[0] = 0;
			what[strcspn(what, "\n")] = 0;
			fclose(f);
		}
		cg[0] = 0;
		if (sscanf(text, "init %d post_fork %d task %d %4095s", &ri, &rp, &task, cg) < 3) {
			ok(false, "walk: the step with change %u failing ran to its end (%s)", n,
			   text);
			break;
		}
		ran = task == 0;
		contained = !ran || !strcmp(cg, want);
		(void)jobcg_gc(ctx, 0, &gs);
		jobcg_error_clear();
		left = kcli_exists("%s/job_60", root);
		c = records(conf, "60");
		ok(contained && !left && c.steps - seen <= 1 && (!ran || c.steps - seen == 1),
		   "walk: change %u failing (%s): init %d, post_fork %d, the task %s; then nothing "
		   "of "
		   "job 60 is left (%s), %u record(s) of its step",
		   n, what[0] ? what + strspn(what, "0123456789 ") : "none", ri, rp,
		   ran ? (contained ? "ran in its task cgroup" : "ran OUTSIDE its task cgroup")
		   : task == 1	? "was refused before its exec"
		   : task == 99 ? "was never started (init failed)"
				: "was killed before it ran",
		   left ? "it is" : "gone", c.steps - seen);
		if (!contained)
			tap_diag("it ran in %s, not %s", cg, want);
		seen = c.steps;
		if (!what[0]) {
			ok(ran && n > 1, "walk: with no change failing the step runs (%u changes)",
			   n - 1);
			return;
		}
	}
	ok(false, "walk: the step made more than 100 changes");
}

int main(int argc, char **argv)
{
	if (argc == 7 && !strcmp(argv[1], "--walk-step"))
		return walk_step(argv[2], argv[3], argv[4], argv[5], argv[6]);

	const char *root = kcli_setup("spank-conf", "jobcg");
	char *rel = getenv("JOBCG_ROOT"), jobcg_arg[PATH_MAX + 8], conf_arg[PATH_MAX + 8];
	char text[3 * PATH_MAX], p[PATH_MAX + 64];
	char *av[] = {conf_arg, jobcg_arg, (char *)"slurm_gres=none"};
	const int ac = 3;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct recs c;
	pid_t child;
	int st = 0, r;
	void *so;

	task_log =
	    mmap(NULL, TASK_LOG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (task_log == MAP_FAILED) {
		printf("Bail out! mmap\n");
		return 1;
	}
	/* The plugin reads no JOBCG_* variable: the tree, the state and the pins are the file's. */
	snprintf(confdir, sizeof(confdir), "%s/conf", ktest_tmpdir());
	if (mkdir(confdir, 0755) < 0) {
		printf("Bail out! mkdir %s\n", confdir);
		return 1;
	}
	snprintf(text, sizeof(text), "JobcgRoot=%s\nStateDir=%s/state\nBpfPinDir=%s/pins\n", rel,
		 ktest_tmpdir(), ktest_tmpdir());
	write_file(confdir, "cgroup.conf", text);
	write_file(confdir, "gres.conf", "Name=tmpdisk Count=10\n");
	snprintf(conf_arg, sizeof(conf_arg), "conf=%s", confdir);
	snprintf(jobcg_arg, sizeof(jobcg_arg), "jobcg=%s", kcli_binary());
	if (jobcg_config_load(confdir, NULL, JOBCG_CONFIG_NO_ENV, &conf) < 0 ||
	    jobcg_ctx_open(conf, 0, &ctx) < 0 || jobcg_ctx_lock(ctx) < 0 ||
	    jobcg_ctx_ensure_tree(ctx) < 0) {
		printf("Bail out! cannot make the tree: %s\n", jobcg_last_error()->message);
		return 1;
	}
	jobcg_ctx_unlock(ctx);

	so = dlopen(JOBCG_SPANK_SO, RTLD_NOW | RTLD_LOCAL);
	if (!so) {
		printf("Bail out! dlopen %s: %s\n", JOBCG_SPANK_SO, dlerror());
		return 1;
	}
	h_init = (hook_f *)dlsym(so, "slurm_spank_init");
	h_post_fork = (hook_f *)dlsym(so, "slurm_spank_task_post_fork");
	h_task_init = (hook_f *)dlsym(so, "slurm_spank_task_init");
	h_task_exit = (hook_f *)dlsym(so, "slurm_spank_task_exit");
	h_exit = (hook_f *)dlsym(so, "slurm_spank_exit");
	if (!h_init || !h_post_fork || !h_task_init || !h_task_exit || !h_exit) {
		printf("Bail out! the plugin's hooks\n");
		return 1;
	}

	/* Step 50.0 starts with a valid configuration. */
	job_id = 50;
	step_id = 0;
	r = h_init(NULL, ac, av);
	snprintf(p, sizeof(p), "%s/job_50/step_0", root);
	if (!ok(r == 0 && kcli_exists("%s", p), "step 50.0 begins (%s)", logged))
		return tap_done();
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	task_pid = child;
	task_id = 0;
	is_int(h_post_fork(NULL, ac, av), 0, "its task is placed");
	ok(kcli_exists("%s/user/task_0", p), "in task_0");

	/* Both files break while it runs. */
	snprintf(text, sizeof(text),
		 "JobcgRoot=%s\nStateDir=%s/state\nBpfPinDir=%s/pins\nAllowedRAMSpace=abc\n", rel,
		 ktest_tmpdir(), ktest_tmpdir());
	write_file(confdir, "cgroup.conf", text);
	write_file(confdir, "gres.conf", "Name=tmpdisk Count=many\n");
	{
		struct jobcg_config *b = NULL;

		ok(jobcg_config_load(confdir, NULL, JOBCG_CONFIG_NO_ENV, &b) < 0,
		   "cgroup.conf and gres.conf now have errors");
		jobcg_config_free(b);
	}
	kill(child, SIGTERM);
	waitpid(child, &task_status, 0);
	logged[0] = 0;
	is_int(h_task_exit(NULL, ac, av), 0, "task_exit: what is left of the step is killed");
	r = h_exit(NULL, ac, av);
	ok(r == 0, "exit: the step ends (%d, %s)", r, logged);
	ok(!kcli_exists("%s", p), "step 50.0's cgroup is gone");
	snprintf(p, sizeof(p), "%s/job_50", root);
	ok(!kcli_exists("%s", p), "and job 50, its last step gone");
	c = records(conf, "50");
	is_int((int)c.steps, 1, "one record of step 50.0");

	/* Step 51.0 starts with them broken: it fails closed, nothing is made. */
	job_id = 51;
	logged[0] = task_log[0] = 0;
	r = h_init(NULL, ac, av);
	is_int(r, 0, "step 51.0 with the broken files: init lets slurmstepd go on");
	child = fork();
	if (child == 0)
		_exit(h_task_init(NULL, ac, av) == 0 ? 10 : 11);
	waitpid(child, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 1, "its task exits 1 before its exec (%d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	ok(strstr(task_log, "cgroup.conf:4") != NULL, "naming cgroup.conf's error: %s", task_log);
	(void)h_exit(NULL, ac, av);
	snprintf(p, sizeof(p), "%s/job_51", root);
	ok(!kcli_exists("%s", p), "no job 51 was made");
	/* Its StateDir is still readable: the log the site reads has it. */
	c = records(conf, "51");
	ok(c.steps == 1 && c.failed == 1 && c.exit_code == 1, "step 51.0 is recorded FAILED 1:0");
	ok(strstr(c.reason, "loading jobcg's configuration") && strstr(c.reason, "cgroup.conf:4"),
	   "with why: %s", c.reason);

	/* Broken where the log is (StateDir): no record anywhere, and slurmd's log says so. */
	snprintf(text, sizeof(text), "JobcgRoot=%s\nStateDir=state\nBpfPinDir=%s/pins\n", rel,
		 ktest_tmpdir());
	write_file(confdir, "cgroup.conf", text);
	job_id = 52;
	logged[0] = task_log[0] = 0;
	is_int(h_init(NULL, ac, av), 0, "step 52.0 with StateDir broken: init");
	(void)h_exit(NULL, ac, av);
	c = records(conf, "52");
	is_int((int)c.steps, 0, "step 52.0 has no record");
	ok(strstr(logged, "job 52 step 0: no FAILED record of it: jobcg's accounting log cannot "
			  "be located") &&
	       strstr(logged, "StateDir"),
	   "slurmd's log says why: %s", logged);
	snprintf(p, sizeof(p), "%s/job_52", root);
	ok(!kcli_exists("%s", p), "no job 52 was made");

	/* A bad plugstack.conf argument: which configuration was meant is not known. */
	snprintf(text, sizeof(text), "JobcgRoot=%s\nStateDir=%s/state\nBpfPinDir=%s/pins\n", rel,
		 ktest_tmpdir(), ktest_tmpdir());
	write_file(confdir, "cgroup.conf", text);
	write_file(confdir, "gres.conf", "Name=tmpdisk Count=10\n");
	job_id = 54;
	logged[0] = task_log[0] = 0;
	{
		char *bad[] = {conf_arg, jobcg_arg, (char *)"slurm_gres=none", (char *)"bogus"};

		is_int(h_init(NULL, 4, bad), 0, "step 54.0 with a bad argument: init");
		(void)h_exit(NULL, 4, bad);
	}
	c = records(conf, "54");
	is_int((int)c.steps, 0, "step 54.0 has no record");
	ok(strstr(logged, "job 54 step 0: no FAILED record of it") &&
	       strstr(logged, "plugstack.conf's arguments"),
	   "slurmd's log says why: %s", logged);

	/* Refused with a sound configuration (job 53 is an allocation of jobcg's own): FAILED
	 * with why, and the allocation is left as it was. */
	is_int(jobcg_job_create(ctx, 53, NULL, 0, NULL), 0, "jobcg's own job 53");
	job_id = 53;
	logged[0] = task_log[0] = 0;
	is_int(h_init(NULL, ac, av), 0, "step 53.0: init");
	child = fork();
	if (child == 0)
		_exit(h_task_init(NULL, ac, av) == 0 ? 10 : 11);
	waitpid(child, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 1, "its task exits 1 before its exec");
	(void)h_exit(NULL, ac, av);
	c = records(conf, "53");
	ok(c.steps == 1 && c.failed == 1 && c.exit_code == 1 &&
	       strstr(c.reason, "not made by jobcg_spank.so"),
	   "step 53.0 is recorded FAILED 1:0 with why: %s", c.reason);
	snprintf(p, sizeof(p), "%s/job_53", root);
	ok(kcli_exists("%s", p) && !kcli_exists("%s/step_0", p), "job 53 is left as it was");
	is_int(jobcg_job_remove(ctx, 53, 0), 0, "job 53 released");

	write_file(confdir, "gres.conf", "Name=tmpdisk Count=10\n");
	snprintf(text, sizeof(text), "JobcgRoot=%s\nStateDir=%s/state\nBpfPinDir=%s/pins\n", rel,
		 ktest_tmpdir(), ktest_tmpdir());
	write_file(confdir, "cgroup.conf", text);
	if (tap_test_hooks())
		walk(ctx, conf, root, conf_arg, jobcg_arg);
	else
		tap_skip("the failure walk: a build without test hooks");
	(void)jobcg_tree_teardown(ctx, JOBCG_TEARDOWN_FORCE, 0, NULL);
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
