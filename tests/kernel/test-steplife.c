/* Kernel test: jobcg_step_begin() and jobcg_step_end(), the step sequence every launcher shares:
 * what each leaves behind, what the record says, and how failures are rolled back. */
#include <dirent.h>
#include <sys/xattr.h>
#include <time.h>

#include "jobcg/acctlog.h"
#include "jobcg/config.h"
#include "jobcg/context.h"
#include "devices.h"
#include "jobcg/steplife.h"
#include "jobgres_internal.h"
#include "kcli.h"

static unsigned log_errors;
static char last_log[1024];

static void count_errors(enum jobcg_log_level level, const char *msg, void *userdata)
{
	(void)userdata;
	if (level <= JOBCG_LOG_ERR) {
		log_errors++;
		snprintf(last_log, sizeof(last_log), "%s", msg);
		tap_diag("library error: %s", msg);
	}
}

/* Number of step_* directories of job_@job. */
static int steps_of(const char *root, unsigned job)
{
	char p[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(p, sizeof(p), "%s/job_%u", root, job);
	d = opendir(p);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strncmp(e->d_name, "step_", 5) == 0;
	closedir(d);
	return n;
}

struct find {
	const char *step;
	int state; /* -1: no record */
	uint64_t start_usec;
};

static int find_record(const struct jobcg_acct_record *r, void *userdata)
{
	struct find *f = userdata;

	if (r->kind == JOBCG_ACCT_STEP && r->step_id && strcmp(r->step_id, f->step) == 0) {
		f->state = (int)r->state;
		f->start_usec = r->start_usec;
	}
	return 0;
}

/* The state of the last record of step 1.@step in the log, -1 when there is none. */
static int record_state(const struct jobcg_config *conf, const char *step, uint64_t *ret_start)
{
	struct find f = {.step = step, .state = -1};
	char *path = NULL;

	if (jobcg_acctlog_path(conf, &path) < 0 ||
	    jobcg_acctlog_read(path, "1", find_record, &f) < 0)
		f.state = -2;
	free(path);
	if (ret_start)
		*ret_start = f.start_usec;
	return f.state;
}

static bool env_has(char **env, const char *prefix)
{
	for (; env && *env; env++)
		if (strncmp(*env, prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

int main(void)
{
	const char *root = kcli_setup("steplife", "jobcg");
	static char *true_argv[] = {"true", NULL}, *sleep_argv[] = {"sleep", "60", NULL};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_limits jl = {.gres = "gpu:1"};
	struct jobcg_step_life life;
	struct jobcg_step_outcome end;
	struct jobcg_run_result res = {};
	char pins[PATH_MAX], dir[PATH_MAX + 32];
	const char *confdir;
	uint64_t before, start;
	struct timespec now;
	int r;

	jobcg_set_log(count_errors, NULL, JOBCG_LOG_WARNING);
	snprintf(pins, sizeof(pins), "/sys/fs/bpf/jobcg-test-steplife-%d", (int)getpid());
	confdir = ktest_gpu_conf(2, "a100", pins, NULL);
	if (jobcg_config_load(confdir, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		char buf[1024];

		printf("Bail out! cannot open a context: %s\n",
		       jobcg_error_format(jobcg_last_error()->code, buf, sizeof(buf)));
		return 1;
	}
	is_int(jobcg_job_create(ctx, 1, &jl, 0, NULL), 0, "job 1 with gpu:1 of the node's two");

	/* Requests the job cannot meet: refused, and no step is left behind. */
	{
		/* best_effort: checked against the job on a host without cpuset too */
		struct jobcg_step_limits too_many = {.cpus = "0-4095", .best_effort = true};
		const struct {
			struct jobcg_step_request req;
			int err;
			const char *what, *says;
		} bad[] = {
		    {{.gres = "gpu:2"}, -E2BIG, "two GPUs of a one-GPU job", "job has 1"},
		    {{.gres = "gpu:a:x"}, -EINVAL, "a malformed --gres", "--gres"},
		    {{.gpu_bind = "bogus"}, -EINVAL, "a malformed --gpu-bind", "gpu-bind"},
		    {{.limits = &too_many}, -EINVAL, "CPUs beyond the job's", "--cpus"},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char name[128];

			log_errors = 0;
			memset(&life, 0xa5, sizeof(life));
			r = jobcg_step_begin(ctx, 1, &bad[i].req, &life);
			snprintf(name, sizeof(name), "begin with %s is refused", bad[i].what);
			is_int(r, bad[i].err, name);
			ok(strstr(jobcg_last_error()->message, bad[i].says) != NULL,
			   "  the error says '%s': %s", bad[i].says, jobcg_last_error()->message);
			is_int(steps_of(root, 1), 0, "  no step is left");
			ok(life.job == 0xa5a5a5a5u, "  the output is untouched");
			is_int(log_errors, 0, "  nothing else went wrong");
		}
	}

	/* A step run to its end: record COMPLETED with its start, devices and step gone. */
	clock_gettime(CLOCK_REALTIME, &now);
	before = (uint64_t)now.tv_sec * 1000000u;
	is_int(jobcg_step_begin(ctx, 1, &(struct jobcg_step_request){.ntasks = 2}, &life), 0,
	       "begin a step of two tasks");
	/* The refused begins above used step numbers too: numbers count up, never reused. */
	ok(life.step[0] >= '1' && life.step[0] <= '9' &&
	       life.step[strspn(life.step, "0123456789")] == 0,
	   "  the next step number (%s), past those of the refused begins", life.step);
	char first_step[JOBCG_STEP_ID_MAX];
	snprintf(first_step, sizeof(first_step), "%s", life.step);
	ok(life.gres && life.gres->ntasks == 2 &&
	       env_has(life.gres->task_env[0], "CUDA_VISIBLE_DEVICES=") &&
	       env_has(life.gres->task_env[1], "CUDA_VISIBLE_DEVICES="),
	   "  each task's environment names its GPU");
	ok(life.start_usec >= before, "  the start time is taken at the begin");
	snprintf(dir, sizeof(dir), "%s/job_1/step_%s", root, life.step);
	ok(access(dir, F_OK) == 0, "  the step's cgroup exists");
	r = jobcg_step_run(
	    ctx, 1, life.step, 2, true_argv,
	    &(struct jobcg_spawn_opts){.task_env = jobcg_step_gres_task_env(life.gres)}, &res);
	ok(r == 0 && res.exit_code == 0, "its tasks run");
	log_errors = 0;
	memset(&end, 0xa5, sizeof(end));
	is_int(jobcg_step_end(ctx, &life, &res, 0, &end), 0, "end it");
	free(res.task_status);
	ok(end.have_acct && end.recorded && !end.job_gone && end.oom == JOBCG_OOM_NONE,
	   "  read, recorded, no OOM, job still there");
	ok(life.gres == NULL, "  the devices' state is freed");
	ok(access(dir, F_OK) < 0, "  the step's cgroup is gone");
	is_int(record_state(conf, first_step, &start), JOBCG_ACCT_COMPLETED,
	       "  the record: COMPLETED");
	ok(start >= before && start <= before + 60000000u, "  with the start time of the begin");
	is_int(log_errors, 0, "  and no failure on the way");

	/* The tasks never ran (the command could not be started): no record. */
	is_int(jobcg_step_begin(ctx, 1, &(struct jobcg_step_request){.step_id = "batch"}, &life), 0,
	       "begin step batch");
	ok(jobcg_step_end(ctx, &life, NULL, 0, &end) == 0 && !end.recorded && !end.have_acct,
	   "ending it without a result records nothing");
	is_int(record_state(conf, "batch", NULL), -1, "  no record of it in the log");
	is_int(steps_of(root, 1), 0, "  and the step is removed");

	/* Its runner went away with the tasks running: they are killed, NODE_FAIL. */
	{
		pid_t pid = -1;
		int st = 0;

		is_int(
		    jobcg_step_begin(ctx, 1, &(struct jobcg_step_request){.step_id = "7"}, &life),
		    0, "begin step 7");
		is_int(jobcg_task_spawn(ctx, 1, "7", 0, sleep_argv, NULL, &pid), 0,
		       "  a task sleeps in it");
		ok(jobcg_step_end(ctx, &life, NULL, JOBCG_STEP_END_LOST, &end) == 0 && end.recorded,
		   "ended as lost: recorded");
		ok(pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) &&
		       WTERMSIG(st) == SIGKILL,
		   "  its task was killed");
		is_int(record_state(conf, "7", NULL), JOBCG_ACCT_NODE_FAIL,
		       "  the record: NODE_FAIL");
		is_int(steps_of(root, 1), 0, "  the step is removed");
	}

	/* A job being released takes no new step: refused under the node lock, by the library
	 * and so by jobcg run. */
	{
		char *args[] = {"run", "--job", "1", "--", "true", NULL}, *err = NULL;

		snprintf(dir, sizeof(dir), "%s/job_1", root);
		is_int(jobcg_job_xattr_set(ctx, 1, "removing", "1"), 0,
		       "job 1 marked as being released");
		is_int(jobcg_step_begin(ctx, 1, &(struct jobcg_step_request){0}, &life), -ESHUTDOWN,
		       "begin refuses a step in it");
		is_int(steps_of(root, 1), 0, "  and makes none");
		setenv("JOBCG_CONF_DIR", confdir, 1);
		setenv("JOBCG_DAEMON_SOCKET", "", 1); /* this process's work, not a daemon's */
		r = kcli_run(args, NULL, &err);
		ok(r == 1 && err && strstr(err, "job 1 is being released: no new steps"),
		   "jobcg run --job 1 is refused, saying why");
		free(err);
		is_int(steps_of(root, 1), 0, "  and makes no step");
		ok(removexattr(dir, "trusted.jobcg.removing") == 0, "job 1 unmarked");
	}

	/* Another process's ephemeral job takes no step of ours, since it is removed with every
	 * step in it when that process's own step ends; the process that made it may. */
	{
		pid_t other = getppid(); /* alive as long as this test, and not this process */
		uint32_t eph = 0;

		jobcg_set_runner(other);
		r = jobcg_job_create(ctx, JOBCG_JOB_ID_AUTO, NULL, JOBCG_JOB_EPHEMERAL, &eph);
		jobcg_set_runner(0);
		is_int(r, 0, "an ephemeral job made by another process");
		is_int(jobcg_step_begin(ctx, eph, NULL, &life), -EPERM,
		       "begin refuses a step in it");
		ok(strstr(jobcg_last_error()->message, "ephemeral job of another 'jobcg run'") !=
		       NULL,
		   "  saying why: %s", jobcg_last_error()->message);
		is_int(steps_of(root, eph), 0, "  and makes none");
		jobcg_set_runner(other);
		r = jobcg_step_begin(ctx, eph, NULL, &life);
		is_int(r, 0, "its maker begins a step in it");
		if (r == 0)
			is_int(jobcg_step_end(ctx, &life, NULL, 0, &end), 0, "  and ends it");
		jobcg_set_runner(0);
		is_int(jobcg_job_remove(ctx, eph, 0), 0, "the ephemeral job removed");
	}

	/* The job is released while the step runs: the step went with it, no failure. */
	is_int(jobcg_step_begin(ctx, 1, NULL, &life), 0,
	       "begin a step (no request: the defaults), then release its job");
	is_int(jobcg_job_remove(ctx, 1, 0), 0, "  job 1 released");
	log_errors = 0;
	res = (struct jobcg_run_result){.exit_code = 0};
	ok(jobcg_step_end(ctx, &life, &res, 0, &end) == 0 && end.job_gone && !end.have_acct,
	   "ending it says the job took the step");
	ok(log_errors == 0, "  and reports no failure%s%s", log_errors ? ": " : "", last_log);

	jobcg_ctx_free(ctx);
	{
		struct jobcg_devpolicy *p = NULL;

		if (jobcg_devpolicy_open_pinned(conf, root, &p) == 0)
			jobcg_devpolicy_destroy(p);
	}
	jobcg_config_free(conf);
	rmdir(pins);
	return tap_done();
}
