/* Kernel test: gc removes job and step directories whose owner is gone, keeps live ones. */
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "jobcg/acctlog.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

static uint64_t t0_usec; /* before any step of this test began */

/* Bits of the NODE_FAIL records found; a step's counts only with the start it really had. */
static int count_node_fail(const struct jobcg_acct_record *r, void *u)
{
	int *mask = u;
	bool started_ok = r->start_usec >= t0_usec && r->start_usec <= r->end_usec;

	if (r->state != JOBCG_ACCT_NODE_FAIL)
		return 0;
	if (r->kind == JOBCG_ACCT_STEP && strcmp(r->job_id, "21") == 0 && r->step_id &&
	    strcmp(r->step_id, "1") == 0 && started_ok)
		*mask |= 1;
	if (r->kind == JOBCG_ACCT_JOB && strcmp(r->job_id, "22") == 0)
		*mask |= 2;
	if (r->kind == JOBCG_ACCT_JOB && strcmp(r->job_id, "23") == 0)
		*mask |= 4;
	/* the step of an ephemeral job whose runner died: recorded too */
	if (r->kind == JOBCG_ACCT_STEP && strcmp(r->job_id, "22") == 0 && r->step_id &&
	    strcmp(r->step_id, "0") == 0 && started_ok)
		*mask |= 8;
	if (r->kind == JOBCG_ACCT_STEP && r->start_usec == 0)
		*mask |= 16;
	return 0;
}

/* The records of the half-made jobs: 24's FAILED with its reason (1), any of Slurm's 26 (2),
 * any other of 24 (4). */
static int count_half_made(const struct jobcg_acct_record *r, void *u)
{
	int *mask = u;

	if (r->kind != JOBCG_ACCT_JOB)
		return 0;
	if (strcmp(r->job_id, "24") == 0)
		*mask |= r->state == JOBCG_ACCT_FAILED && r->exit_code == -1 && r->reason &&
				 strstr(r->reason, "creation never finished")
			     ? 1
			     : 4;
	if (strcmp(r->job_id, "26") == 0)
		*mask |= 2;
	return 0;
}

int main(void)
{
	const char *root = kcli_setup("gc", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_gc_stats st = {};
	char p[PATH_MAX], *out = NULL;
	pid_t sleeper;
	int r;

	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context\n");
		return 1;
	}
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		/* the job's created mark has whole seconds: a step must do better than that */
		t0_usec = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	}
	/* live, allocated job with a live step (our own process is its runner) */
	is_int(jobcg_job_create(ctx, 21, NULL, 0, NULL), 0, "alloc job 21");
	is_int(jobcg_step_create(ctx, 21, "0", 0, NULL), 0, "step 21.0 (runner: this test)");
	/* a step whose runner is gone, holding a process */
	is_int(jobcg_step_create(ctx, 21, "1", 0, NULL), 0, "step 21.1");
	snprintf(p, sizeof(p), "%s/job_21/step_1", root);
	ok(setxattr(p, "trusted.jobcg.runner", "1:1", 3, 0) == 0, "21.1's runner made stale");
	{
		char *argv[] = {"sleep", "1000", NULL};
		is_int(jobcg_task_spawn(ctx, 21, "1", 0, argv, NULL, &sleeper), 0,
		       "process in stray step 21.1");
	}
	/* an ephemeral job whose runner is gone */
	is_int(jobcg_job_create(ctx, 22, NULL, JOBCG_JOB_EPHEMERAL, NULL), 0, "ephemeral job 22");
	snprintf(p, sizeof(p), "%s/job_22", root);
	is_int(jobcg_step_create(ctx, 22, "0", 0, NULL), 0, "step 22.0 (runner: this test)");
	ok(setxattr(p, "trusted.jobcg.runner", "1:1", 3, 0) == 0, "22's runner made stale");
	snprintf(p, sizeof(p), "%s/job_22/step_0", root);
	ok(setxattr(p, "trusted.jobcg.runner", "1:1", 3, 0) == 0, "22.0's runner made stale");
	/* an ephemeral job whose runner (we) is alive */
	is_int(jobcg_job_create(ctx, 23, NULL, JOBCG_JOB_EPHEMERAL, NULL), 0, "ephemeral job 23");
	/* a half-made job directory (no created mark) with a nested step */
	snprintf(p, sizeof(p), "%s/job_24", root);
	ok(mkdir(p, 0755) == 0, "half-made job_24");
	snprintf(p, sizeof(p), "%s/job_24/step_0", root);
	ok(mkdir(p, 0755) == 0, "with a step dir");
	/* a half-made job of jobcg_spank.so's (its slurm mark comes before the created one) */
	snprintf(p, sizeof(p), "%s/job_26", root);
	ok(mkdir(p, 0755) == 0 && setxattr(p, "trusted.jobcg.slurm", "1", 1, 0) == 0,
	   "half-made Slurm job_26");
	/* something that is not ours */
	snprintf(p, sizeof(p), "%s/other", root);
	ok(mkdir(p, 0755) == 0, "a foreign directory 'other'");

	/* What gc will sweep is shown as such, not as busy. */
	{
		char *err = NULL;
		char *args[] = {"list", NULL};

		is_int(kcli_run(args, &out, &err), 0, "jobcg list");
		ok(out && strstr(out, "\n22         orphaned "),
		   "ephemeral job 22 listed orphaned");
		ok(out && strstr(out, "\n23         idle "), "live ephemeral job 23 listed idle");
		ok(out && strstr(out, " 0,1(orphaned) "), "job 21: step 1 orphaned, step 0 not");
		ok(err && strstr(err, "'jobcg gc'"), "the note names jobcg gc");
		free(out);
		free(err);
		is_int(kcli(&out, "list", "--json", NULL), 0, "jobcg list --json");
		ok(out && strstr(out, "\"orphaned\":true") &&
		       strstr(out, "\"orphaned_steps\":[\n      \"1\"\n    ]"),
		   "JSON: orphaned job and step");
		if (out)
			ktest_diag_lines("", out);
		free(out);
		is_int(kcli(&out, "show", "21", NULL), 0, "jobcg show 21");
		ok(out && strstr(out, "  created: 20") && !strstr(out, "unix time"),
		   "show prints the creation time as an ISO date, as list does");
		free(out);
		is_int(kcli(&out, "show", "21.1", NULL), 0, "jobcg show 21.1");
		ok(out && strstr(out, "state: orphaned"), "step 21.1 shown orphaned");
		free(out);
	}
	is_int(kcli(&out, "gc", "--json", NULL), 0, "jobcg gc --json");
	ok(out && strstr(out, "\"jobs_removed\":3"), "three jobs removed");
	ok(out && strstr(out, "\"steps_removed\":3"),
	   "three steps removed (21.1, 22.0, and 24.0 left half made)");
	ok(out && strstr(out, "\"kept\":2"), "two jobs kept");
	if (out)
		ktest_diag_lines("", out);
	free(out);
	{
		int s = 0;
		ok(waitpid(sleeper, &s, 0) == sleeper && WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL,
		   "the stray step's process was killed");
	}
	ok(kcli_exists("%s/job_21/step_0", root), "live step 21.0 kept");
	ok(!kcli_exists("%s/job_21/step_1", root), "stray step 21.1 removed");
	ok(!kcli_exists("%s/job_22", root), "stray ephemeral job 22 removed");
	ok(kcli_exists("%s/job_23", root), "live ephemeral job 23 kept");
	ok(!kcli_exists("%s/job_24", root), "half-made job 24 removed");
	ok(!kcli_exists("%s/job_26", root), "half-made Slurm job 26 removed");
	ok(kcli_exists("%s/other", root), "foreign directory kept");

	{
		char *path = NULL;
		int mask = 0;

		jobcg_acctlog_path(conf, &path);
		is_int(jobcg_acctlog_read(path, NULL, count_node_fail, &mask), 0, "read the log");
		is_int(mask, 1 | 2 | 8,
		       "NODE_FAIL records for stray steps 21.1 and 22.0 (with their start times) "
		       "and job 22 only");
		mask = 0;
		is_int(jobcg_acctlog_read(path, NULL, count_half_made, &mask), 0, "read the log");
		is_int(
		    mask, 1,
		    "half-made job 24: FAILED, no exit code, why; Slurm's job 26: no job record");
		free(path);
	}

	is_int(kcli(&out, "acct", "--json", NULL), 0, "jobcg acct --json");
	ok(out && strstr(out, "\"job\":21,") && !strstr(out, "\"job\":\""),
	   "acct --json: the job is a number, as in list/show/alloc/run");
	free(out);

	r = jobcg_gc(ctx, 0, &st);
	is_int(r, 0, "second gc");
	is_int(st.jobs_removed + st.steps_removed, 0, "second gc removes nothing");
	is_int(jobcg_job_remove(ctx, 21, 0), 0, "remove 21");
	is_int(jobcg_job_remove(ctx, 23, 0), 0, "remove 23");

	/* A hand-edited ephemeral mark ("0") with a dead runner: what list calls it is what gc
	 * does with it. */
	{
		struct jobcg_job_info *info = NULL;

		is_int(jobcg_job_create(ctx, 25, NULL, 0, NULL), 0, "job 25");
		snprintf(p, sizeof(p), "%s/job_25", root);
		ok(setxattr(p, "trusted.jobcg.ephemeral", "0", 1, 0) == 0 &&
		       setxattr(p, "trusted.jobcg.runner", "1:1", 3, 0) == 0,
		   "25 marked ephemeral \"0\" with a stale runner");
		is_int(jobcg_job_info_get(ctx, 25, &info), 0, "info of 25");
		ok(info && info->ephemeral && info->orphaned,
		   "listed as an orphaned ephemeral job (ephemeral %d orphaned %d)",
		   info ? info->ephemeral : -1, info ? info->orphaned : -1);
		jobcg_job_info_free(info);
		is_int(jobcg_gc(ctx, 0, &st), 0, "gc");
		is_int(st.jobs_removed, 1, "and gc removes it, as list said");
		ok(!kcli_exists("%s/job_25", root), "job 25 gone");
	}
	snprintf(p, sizeof(p), "%s/other", root);
	rmdir(p);
	is_int(kcli_count_dirs(root), 1, "only system/ left");

	/* With a device managed, gc sets up the node program: a BpfPinDir where no pin can live,
	 * or a root that is no cgroup directory, is refused before anything is made. */
	{
		char notbpf[PATH_MAX], pins[PATH_MAX + 8], notcg[PATH_MAX + 16], rel[PATH_MAX],
		    *err = NULL;

		snprintf(rel, sizeof(rel), "%s", getenv("JOBCG_ROOT") ? getenv("JOBCG_ROOT") : "");
		snprintf(notbpf, sizeof(notbpf), "%s/notbpf", ktest_tmpdir());
		snprintf(pins, sizeof(pins), "%s/pins", notbpf);
		snprintf(notcg, sizeof(notcg), "%s/cgroup.procs", rel);
		setenv("JOBCG_CONF_DIR", ktest_gpu_conf(1, NULL, ktest_pin_dir("gc"), NULL), 1);
		setenv("JOBCG_BPF_PIN_DIR", pins, 1);
		ok(kcli_run((char *[]){"gc", NULL}, NULL, &err) == 1 && err && strstr(err, pins) &&
		       strstr(err, "not on a bpf filesystem"),
		   "gc with a BpfPinDir outside bpffs fails naming it");
		ok(!kcli_exists("%s", notbpf), "...and makes nothing there");
		unsetenv("JOBCG_BPF_PIN_DIR");
		free(err);
		err = NULL;
		setenv("JOBCG_ROOT", notcg, 1);
		ok(kcli_run((char *[]){"gc", NULL}, NULL, &err) == 1 && err &&
		       strstr(err, "cgroup.procs"),
		   "gc with a root that is a cgroup's file fails naming it");
		ok(!kcli_exists("%s", ktest_pin_dir("gc")), "...and makes no pin directory for it");
		setenv("JOBCG_ROOT", rel, 1);
		unsetenv("JOBCG_CONF_DIR");
		free(err);
	}
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
