/* Kernel test: devices named exactly by a scheduler above jobcg (jobcg_job_gres_claim,
 * jobcg_step_gres_setup_exact, what jobcg_spank.so does with Slurm's GPUs): granted as named,
 * the union kept, other jobs' devices refused naming the holder, a step's outside its job's
 * refused. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "jobcg/config.h"
#include "jobcg/context.h"
#include "devices.h"
#include "jobcg/job.h"
#include "jobcg/jobgres.h"
#include "jobcg/resv.h"
#include "jobgres_internal.h"
#include "kcli.h"

static char dev[3][PATH_MAX];

static void is_gres(struct jobcg_ctx *ctx, uint32_t job, const char *step, const char *want,
		    const char *what)
{
	char *got = NULL;

	ok(jobcg_gres_get(ctx, job, step, &got) == 0 && got && strcmp(got, want) == 0,
	   "%s: %s (got %s)", what, want, got ? got : "-");
	free(got);
}

int main(void)
{
	const char *root = kcli_setup("gres-exact", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_step_gres *sg = NULL;
	char pins[PATH_MAX], jdir[PATH_MAX + 16], sdir[PATH_MAX + 32], buf[1024];
	const char *confdir;

	snprintf(pins, sizeof(pins), "/sys/fs/bpf/jobcg-test-gres-exact-%d", (int)getpid());
	confdir = ktest_gpu_conf(3, NULL, pins, dev);
	if (jobcg_config_load(confdir, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context: %s\n",
		       jobcg_error_format(jobcg_last_error()->code, buf, sizeof(buf)));
		return 1;
	}
	snprintf(jdir, sizeof(jdir), "%s/job_1", root);

	is_int(jobcg_job_create(ctx, 1, NULL, 0, NULL), 0, "job 1 without GPUs");
	is_int(jobcg_job_gres_claim(ctx, 1, "gpu:2"), 0, "job 1 claims gpu:2 by index");
	is_gres(ctx, 1, NULL, "gpu:2", "job 1 holds exactly the named GPU, not the lowest free");
	is_int(ktest_open_in(jdir, dev[2], O_RDWR), 0, "job 1 opens GPU 2");
	is_int(ktest_open_in(jdir, dev[0], O_RDWR), EPERM, "job 1 is denied GPU 0");
	is_int(jobcg_job_gres_claim(ctx, 1, "gpu:0"), 0, "job 1 claims gpu:0 as well");
	is_gres(ctx, 1, NULL, "gpu:0,2", "the job keeps the union");
	is_int(ktest_open_in(jdir, dev[0], O_RDWR), 0, "job 1 now opens GPU 0");
	is_int(jobcg_job_gres_claim(ctx, 1, "gpu:2"), 0, "claiming what it has changes nothing");

	is_int(jobcg_job_create(ctx, 2, NULL, 0, NULL), 0, "job 2 without GPUs");
	ok(jobcg_job_gres_claim(ctx, 2, "gpu:1,2") == -EBUSY &&
	       strstr(jobcg_last_error()->message, "job_1"),
	   "job 2 cannot claim job 1's GPU 2; the error names job_1 (%s)",
	   jobcg_last_error()->message);
	is_gres(ctx, 2, NULL, "", "and holds nothing after the refusal");
	is_int(jobcg_job_gres_claim(ctx, 2, "gpu:7"), -ENOENT, "a GPU the node lacks is refused");

	is_int(jobcg_step_create(ctx, 1, "0", 0, NULL), 0, "step 1.0");
	is_int(jobcg_step_gres_setup_exact(ctx, 1, "0", "gpu:2", NULL, 1, &sg), 0,
	       "step 1.0 gets exactly gpu:2 of its job's two");
	ok(sg && sg->devices && strcmp(sg->devices, "gpu:2") == 0, "its devices say gpu:2");
	snprintf(sdir, sizeof(sdir), "%s/step_0", jdir);
	is_int(ktest_open_in(sdir, dev[2], O_RDWR), 0, "step 1.0 opens GPU 2");
	is_int(ktest_open_in(sdir, dev[0], O_RDWR), EPERM, "step 1.0 is denied its job's GPU 0");
	jobcg_step_gres_free(sg);
	sg = NULL;
	is_int(jobcg_step_create(ctx, 1, "1", 0, NULL), 0, "step 1.1");
	ok(jobcg_step_gres_setup_exact(ctx, 1, "1", "gpu:1", NULL, 1, &sg) == -EINVAL && !sg &&
	       strstr(jobcg_last_error()->message, "gpu:0,2"),
	   "a step asking for a GPU its job lacks is refused naming the job's (%s)",
	   jobcg_last_error()->message);
	is_int(jobcg_step_gres_setup_exact(ctx, 1, "1", "", NULL, 1, &sg), 0,
	       "step 1.1 with no GPUs");
	snprintf(sdir, sizeof(sdir), "%s/step_1", jdir);
	is_int(ktest_open_in(sdir, dev[2], O_RDWR), EPERM, "step 1.1 is denied every GPU");
	jobcg_step_gres_free(sg);

	is_int(jobcg_step_gres_release(ctx, 1, "0"), 0, "step 1.0 released");
	is_int(jobcg_step_gres_release(ctx, 1, "1"), 0, "step 1.1 released");
	is_int(jobcg_job_remove(ctx, 1, 0), 0, "job 1 removed");
	is_int(jobcg_job_gres_claim(ctx, 2, "gpu:1,2"), 0,
	       "job 2 claims gpu:1,2 once job 1 is gone");
	is_int(jobcg_job_remove(ctx, 2, 0), 0, "job 2 removed");

	/* Inside a reservation a job opens only its reservation's devices: a claim of a pool
	 * device would take it from the pool for a job that can never open it. */
	{
		struct jobcg_resv_spec rs = {.name = "rx", .devices = "gpu:0"};
		struct jobcg_limits in_rx = {.reservation = "rx"};
		const char *msg;
		int r;

		is_int(jobcg_resv_create(ctx, &rs), 0, "reservation rx of gpu:0");
		is_int(jobcg_job_create(ctx, 3, &in_rx, 0, NULL), 0, "job 3 inside rx");
		r = jobcg_job_gres_claim(ctx, 3, "gpu:0,1");
		msg = jobcg_last_error()->message;
		ok(r == -EPERM && strstr(msg, "gpu:0,1") && strstr(msg, "reservation rx (gpu:0)"),
		   "job 3 claiming gpu:0,1: refused naming both sets (%d %s)", r, msg);
		is_int(jobcg_job_create(ctx, 4, NULL, 0, NULL), 0, "job 4 outside");
		is_int(jobcg_job_gres_claim(ctx, 4, "gpu:1"), 0,
		       "... and gpu:1 stayed in the pool: job 4 outside claims it");
		r = jobcg_job_gres_claim(ctx, 4, "gpu:0");
		msg = jobcg_last_error()->message;
		ok(r == -EBUSY && strstr(msg, "held by resv_rx"),
		   "job 4 outside claiming rx's gpu:0: refused naming the reservation (%d %s)", r,
		   msg);
		is_int(jobcg_job_gres_claim(ctx, 3, "gpu:0"), 0, "job 3 claims rx's gpu:0");
		is_gres(ctx, 3, NULL, "gpu:0", "job 3 holds gpu:0");
		/* Defect: the holder was named by its first component only ("resv_rx"), with no
		 * word of the job inside to release. */
		is_int(jobcg_job_create(ctx, 5, &in_rx, 0, NULL), 0, "job 5 inside rx");
		r = jobcg_job_gres_claim(ctx, 5, "gpu:0");
		msg = jobcg_last_error()->message;
		ok(r == -EBUSY && strstr(msg, "held by resv_rx/job_3") &&
		       strstr(msg, "'jobcg release 3'"),
		   "job 5 claiming gpu:0, job 3's: refused naming job 3 (%d %s)", r, msg);
		is_int(jobcg_job_remove(ctx, 5, 0), 0, "job 5 removed");
		is_int(jobcg_job_remove(ctx, 3, 0), 0, "job 3 removed");
		is_int(jobcg_job_remove(ctx, 4, 0), 0, "job 4 removed");
		is_int(jobcg_resv_delete(ctx, "rx"), 0, "reservation rx deleted");
	}

	{
		struct jobcg_devpolicy *p = NULL;

		if (jobcg_devpolicy_open_pinned(conf, root, &p) == 0)
			jobcg_devpolicy_destroy(p);
	}
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	rmdir(pins);
	return tap_done();
}
