/* Kernel test: the public API's contracts with a context: pid 1 is never put into a job (in a
 * private pid namespace, where this test's child is pid 1), messages name their own failure,
 * hand-filled targets and step ids are refused, unknown flags are refused, a step that cannot
 * run is not begun, a child forked under the node lock does not hold it, a caller's own step
 * record says what its result says, and the job a login would go to is the user's newest. */
#include <sched.h>
#include <sys/file.h>

#include "jobcg/acct.h"
#include "jobcg/acctlog.h"
#include "jobcg/adopt.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "jobcg/jobgres.h"
#include "jobcg/steplife.h"
#include "kcli.h"

static struct jobcg_ctx *ctx;

static bool msg_has(int r, const char *what)
{
	return strstr(jobcg_error_message(r), what) != NULL;
}

static bool self_in(const char *suffix)
{
	char line[PATH_MAX];
	FILE *f = fopen("/proc/self/cgroup", "re");
	bool found = false;

	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "0::", 3) == 0 && strlen(line) >= strlen(suffix) &&
		    strcmp(line + strlen(line) - strlen(suffix), suffix) == 0)
			found = true;
	}
	if (f)
		fclose(f);
	return found;
}

/* In a new pid namespace the child is its pid 1: the calls must refuse it, and it stays out.
 * The namespace is made by a helper child, so that this process can still fork (LSan does at
 * exit) once the namespace's pid 1 has ended. */
static void pid1(void)
{
	char step[JOBCG_STEP_ID_MAX];
	pid_t helper;
	int st = 0;

	is_int(jobcg_step_create(ctx, 41, NULL, 0, step), 0, "a step for pid 1");
	helper = fork();
	if (helper == 0) {
		pid_t c;

		if (unshare(CLONE_NEWPID) < 0)
			_exit(77);
		c = fork();
		if (c == 0) {
			int code = 0;

			if (getpid() != 1)
				_exit(64);
			if (jobcg_task_add_pid(ctx, 41, step, 0, 1) != -EPERM)
				code |= 1;
			if (jobcg_adopt(ctx, 1, 41) != -EPERM)
				code |= 2;
			if (self_in("/user/task_0") || self_in("/user/task_special"))
				code |= 4;
			_exit(code);
		}
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st))
			_exit(65);
		_exit(WEXITSTATUS(st));
	}
	if (!ok(helper > 0 && waitpid(helper, &st, 0) == helper && WIFEXITED(st) &&
		    WEXITSTATUS(st) != 77 && WEXITSTATUS(st) < 64,
		"the namespace's pid 1 ran (status %d)", WEXITSTATUS(st)))
		return;
	is_int(WEXITSTATUS(st) & 1, 0, "jobcg_task_add_pid(pid 1) = -EPERM");
	is_int(WEXITSTATUS(st) & 2, 0, "jobcg_adopt(pid 1) = -EPERM");
	is_int(WEXITSTATUS(st) & 4, 0, "pid 1 was not moved");
	is_int(jobcg_step_remove(ctx, 41, step, 0), 0, "(step removed)");
}

static void messages(void)
{
	struct jobcg_limits l = {.cpus = "abc"};
	struct jobcg_step_limits sl = {.cpus = "abc"};
	struct jobcg_job_info *info = NULL;
	char *v = NULL;
	int r;

	r = jobcg_job_create(ctx, 44, &l, 0, NULL);
	ok(r == -EINVAL && strncmp(jobcg_error_message(r), "--cpus abc: ", 12) == 0 &&
	       !msg_has(r, "--cpus abc: --cpus") && msg_has(r, "'abc'"),
	   "job --cpus abc: one clear message (%s)", jobcg_error_message(r));
	r = jobcg_step_create_limited(ctx, 41, NULL, 0, &sl, NULL);
	ok(r == -EINVAL && !msg_has(r, "--cpus abc: --cpus") && msg_has(r, "'abc'"),
	   "step --cpus abc: one clear message (%s)", jobcg_error_message(r));

	is_int(jobcg_job_info_get(ctx, 98, &info), -ENOENT, "no job 98");
	r = jobcg_job_xattr_get(ctx, 99, "mykey", &v);
	ok(r == -ENOENT && msg_has(r, "job 99"), "xattr of job 99: its own message (%s)",
	   jobcg_error_message(r));
	r = jobcg_step_xattr_get(ctx, 41, "7", "mykey", &v);
	ok(r == -ENOENT && msg_has(r, "step 41.7"), "xattr of step 41.7: its own message (%s)",
	   jobcg_error_message(r));
	jobcg_error_clear();
	r = jobcg_job_xattr_get(ctx, 41, "mykey", &v);
	ok(r == -ENODATA && msg_has(r, "mykey"), "a missing key is said (%s)",
	   jobcg_error_message(r));
	is_int(jobcg_job_info_get(ctx, 0, &info), -EINVAL, "job 0 is no job id");
	is_int(jobcg_job_info_get(ctx, 41, NULL), -EINVAL, "no place for the information");
}

static void targets(void)
{
	struct jobcg_target t = {.job = 41, .step = "../../..", .task = JOBCG_TASK_ALL};
	struct jobcg_step_life life = {.job = 41, .step = "../job_2"};
	struct jobcg_step_outcome o;
	struct jobcg_step_gres *g = NULL;
	pid_t *pids = NULL;
	char *p = NULL;
	size_t n;

	is_int(jobcg_target_path(ctx, &t, &p), -EINVAL, "target 41.../../.. has no path");
	t = (struct jobcg_target){.job = 41, .step = "extern", .task = -7};
	is_int(jobcg_pids(ctx, &t, &pids, &n), -EINVAL, "task -7: -EINVAL, not -ENOENT");
	memset(t.step, 'x', sizeof(t.step));
	is_int(jobcg_signal(ctx, &t, 0), -EINVAL, "a step without its NUL is refused");
	is_int(jobcg_step_gres_release(ctx, 41, "../../x"), -EINVAL, "gres release ../../x");
	is_int(jobcg_step_gres_release(ctx, 0, "3"), -EINVAL, "gres release of job 0");
	is_int(jobcg_step_gres_setup(ctx, 41, "../../x", NULL, NULL, 1, &g), -EINVAL,
	       "gres setup ../../x");
	is_int(jobcg_step_gres_setup(ctx, 41, NULL, NULL, NULL, 1, &g), -EINVAL,
	       "gres setup without a step");
	is_int(jobcg_gres_get(ctx, 41, "../job_2", &p), -EINVAL, "gres of ../job_2");
	is_int(jobcg_step_end(ctx, &life, NULL, 0, &o), -EINVAL, "step end of ../job_2");
	memset(life.step, '1', sizeof(life.step));
	is_int(jobcg_step_end(ctx, &life, NULL, 0, &o), -EINVAL, "step end: step without NUL");
}

static void flags_and_counts(void)
{
	struct jobcg_step_request req = {.ntasks = 100000};
	struct jobcg_step_life life;
	char **steps = NULL;

	is_int(jobcg_job_create(ctx, 45, NULL, 0x80, NULL), -EINVAL, "job flag 0x80 refused");
	is_int(jobcg_job_info_get(ctx, 45, &(struct jobcg_job_info *){NULL}), -ENOENT,
	       "...and no job made");
	is_int(jobcg_step_create(ctx, 41, NULL, 0x80, NULL), -EINVAL, "step flag 0x80 refused");
	is_int(jobcg_job_remove(ctx, 41, 0x8000), -EINVAL, "removal flag 0x8000 refused");
	is_int(jobcg_step_remove(ctx, 41, "extern", 4), -EINVAL, "step removal flag refused");
	is_int(jobcg_step_begin(ctx, 41, &req, &life), -EINVAL, "100000 tasks cannot run");
	is_int(jobcg_step_list(ctx, 41, &steps), 0, "(steps listed)");
	ok(steps && steps[0] && strcmp(steps[0], "extern") == 0 && !steps[1],
	   "no step begun for it, job 41 still there");
	jobcg_strv_free(steps);
}

/* After the last valid step number no number is picked: one past it is no step id. */
static void last_step_number(void)
{
	char sid[JOBCG_STEP_ID_MAX] = "";

	is_int(jobcg_job_create(ctx, 46, NULL, 0, NULL), 0, "job 46");
	is_int(jobcg_step_create(ctx, 46, "4294967279", JOBCG_STEP_ID_SCHEDULED, NULL), 0,
	       "step 46.4294967279, the last number");
	is_int(jobcg_step_create(ctx, 46, NULL, 0, sid), -ERANGE, "no step number left to pick");
	if (sid[0])
		tap_diag("picked step %s", sid);
	ok(!kcli_exists("%s/job_46/step_4294967280", kcli_root_abs), "no step_4294967280 made");
	is_int(jobcg_job_remove(ctx, 46, 0), 0, "remove job 46");
}

/* Forked while the parent holds the lock: the child must wait for it. */
static void fork_locked(void)
{
	int pipefd[2], st;
	char c = 0;
	pid_t kid;

	is_int(jobcg_ctx_lock(ctx), 0, "parent takes the node lock");
	ok(pipe(pipefd) == 0, "(pipe)");
	kid = fork();
	if (kid == 0) {
		close(pipefd[0]);
		/* Done under "the lock": only possible once the parent let it go. */
		if (jobcg_ctx_lock(ctx) == 0) {
			(void)!write(pipefd[1], "L", 1);
			jobcg_ctx_unlock(ctx);
		}
		_exit(0);
	}
	close(pipefd[1]);
	struct pollfd pf = {.fd = pipefd[0], .events = POLLIN};
	is_int(poll(&pf, 1, 1000), 0, "the child does not get the lock the parent holds");
	jobcg_ctx_unlock(ctx);
	ok(poll(&pf, 1, 10000) == 1 && read(pipefd[0], &c, 1) == 1 && c == 'L',
	   "it gets it once the parent releases it");
	ok(waitpid(kid, &st, 0) == kid && WIFEXITED(st), "(child done)");
	close(pipefd[0]);
}

/* A step whose creation fails at its last write is rolled back: no directory left, and its
 * name free again. */
static void step_rollback(void)
{
	int r;

	if (!tap_test_hooks()) {
		tap_skip("a step's creation failing at its end: needs -Dtest_hooks=true");
		return;
	}
	setenv("JOBCG_TEST_FLAGS", "step-mark-fails", 1);
	r = jobcg_step_create(ctx, 41, "interactive", 0, NULL);
	unsetenv("JOBCG_TEST_FLAGS");
	ok(r == -EIO && msg_has(r, "cannot mark it complete"),
	   "step 41.interactive failing at its complete mark: -EIO, saying so");
	ok(!kcli_exists("%s/job_41/step_interactive", kcli_root_abs), "...its directory removed");
	is_int(jobcg_step_create(ctx, 41, "interactive", 0, NULL), 0,
	       "...and the name free: 41.interactive made again");
	is_int(jobcg_step_remove(ctx, 41, "interactive", 0), 0, "remove it");
}

/* The records of job 47 in the log, by step id: the step's state, exit code and signal. */
struct seen47 {
	char what[8][64];
	int n;
};

static int note47(const struct jobcg_acct_record *r, void *u)
{
	struct seen47 *s = u;

	if (r->kind == JOBCG_ACCT_STEP && s->n < 8)
		snprintf(s->what[s->n++], sizeof(s->what[0]), "%s %s %d %d %u",
			 r->step_id ? r->step_id : "-", jobcg_acct_state_name(r->state),
			 r->exit_code, r->exit_signal, r->ntasks);
	return 0;
}

/* A caller that runs its own steps (a scheduler's agent) writes their records with
 * jobcg_acct_log_step(): the state follows the result it passes, none is NODE_FAIL, a
 * cancelled step CANCELLED; a step id no step could have writes nothing. */
static void acct_log_step(const struct jobcg_config *conf)
{
	int statuses[2] = {3 << 8, SIGKILL};
	struct jobcg_run_result failed = {.exit_code = 3, .task_status = statuses, .ntasks = 1},
				killed = {.exit_code = 137, .task_status = statuses, .ntasks = 2},
				fine = {.exit_code = 0, .task_status = (int[]){0}, .ntasks = 1};
	struct jobcg_acct a = {};
	struct seen47 s = {};
	char *path = NULL;
	int r;

	is_int(jobcg_job_create(ctx, 47, NULL, 0, NULL), 0, "job 47");
	is_int(jobcg_acctlog_path(conf, &path), 0, "the log's path");
	is_int(jobcg_acct_log_step(ctx, 47, "0", 1700000000000000ULL, &fine, &a, false), 0,
	       "step 47.0's record: it exited 0");
	is_int(jobcg_acct_log_step(ctx, 47, "1", 0, &failed, &a, false), 0,
	       "step 47.1's: its task exited 3");
	is_int(jobcg_acct_log_step(ctx, 47, "2", 0, &killed, &a, false), 0,
	       "step 47.2's: its second task was killed");
	is_int(jobcg_acct_log_step(ctx, 47, "batch", 0, NULL, &a, false), 0,
	       "step 47.batch's: no result was seen");
	is_int(jobcg_acct_log_step(ctx, 47, "3", 0, &fine, &a, true), 0,
	       "step 47.3's: ended on request");
	r = jobcg_acct_log_step(ctx, 47, "../x", 0, &fine, &a, false);
	ok(r == -EINVAL && msg_has(r, "invalid step id"), "a step id no step can have is refused");
	is_int(jobcg_acctlog_read(path, "47", note47, &s), 0, "the log reads back");
	is_int(s.n, 5, "five records of job 47, none for the refused one");
	is_str(s.what[0], "0 COMPLETED 0 0 1", "47.0: COMPLETED, exit 0, one task");
	is_str(s.what[1], "1 FAILED 3 0 1", "47.1: FAILED, exit 3");
	is_str(s.what[2], "2 FAILED 0 9 2", "47.2: FAILED by signal 9 (the first task killed)");
	is_str(s.what[3], "batch NODE_FAIL -1 0 0", "47.batch: NODE_FAIL, nothing known");
	is_str(s.what[4], "3 CANCELLED 0 0 1", "47.3: CANCELLED");
	is_int(jobcg_job_remove(ctx, 47, 0), 0, "remove job 47");
	free(path);
}

/* The job a login of a user would go to: the newest complete one the user owns, not another
 * user's, and none (-ENOENT, saying so) for a user without one. */
static void pick_job(void)
{
	struct jobcg_limits mine = {.uid = 4242, .gid = 4242, .have_owner = true};
	struct jobcg_limits theirs = {.uid = 4343, .gid = 4343, .have_owner = true};
	uint32_t job = 0;
	int r;

	is_int(jobcg_job_create(ctx, 48, &mine, 0, NULL), 0, "job 48 of uid 4242");
	is_int(jobcg_job_create(ctx, 49, &theirs, 0, NULL), 0, "job 49 of uid 4343");
	is_int(jobcg_job_create(ctx, 50, &mine, 0, NULL), 0, "job 50 of uid 4242");
	r = jobcg_adopt_pick_job(ctx, 4242, &job);
	ok(r == 0 && job == 50, "a login of uid 4242 would go to job 50, its newest (%u)", job);
	r = jobcg_adopt_pick_job(ctx, 4343, &job);
	ok(r == 0 && job == 49, "one of uid 4343 to job 49 (%u)", job);
	job = 7;
	r = jobcg_adopt_pick_job(ctx, 4444, &job);
	ok(r == -ENOENT && msg_has(r, "user 4444 has no job") && job == 7,
	   "uid 4444 has none: refused, saying so, the answer untouched");
	is_int(jobcg_job_remove(ctx, 48, 0) | jobcg_job_remove(ctx, 49, 0) |
		   jobcg_job_remove(ctx, 50, 0),
	       0, "remove jobs 48, 49 and 50");
}

int main(void)
{
	struct jobcg_config *conf = NULL;

	kcli_setup("api", "jobcg");
	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context\n");
		return 1;
	}
	is_int(jobcg_job_create(ctx, 41, NULL, 0, NULL), 0, "job 41");
	is_int(jobcg_step_create(ctx, 41, "extern", 0, NULL), 0, "step 41.extern");
	messages();
	targets();
	flags_and_counts();
	last_step_number();
	fork_locked();
	acct_log_step(conf);
	pick_job();
	step_rollback();
	pid1();
	is_int(jobcg_job_remove(ctx, 41, 0), 0, "remove job 41");
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
