/*
 * Kernel test: jobcg_spank.so, loaded with dlopen() against stand-ins for slurmstepd's spank_*
 * and slurm_* calls, ends a step and its job whose cgroup.conf and gres.conf broke while it
 * ran (it keeps the configuration of the step's start), and fails closed a step that starts
 * with them broken: its task exits 1 before its exec and nothing is made. Such a step is
 * recorded FAILED with its reason in the log the broken files' StateDir still names; where
 * even that cannot be read (StateDir broken, a bad plugstack.conf argument) it has no record
 * and slurmd's log says so. A step refused with a sound configuration is recorded too.
 */
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

int main(void)
{
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
	(void)jobcg_tree_teardown(ctx, JOBCG_TEARDOWN_FORCE, 0, NULL);
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
