/* Kernel test: a step that shares its job's devices (Slurm's extern step, where jobcg adopt puts
 * a job's ssh logins) follows the job's later claims (jobcg_job_gres_claim), in the node
 * program's mode and in linear mode (argv[1]); a step holding devices of its own does not, and
 * another job's shared step sees nothing of them. */
#include <fcntl.h>
#include <sys/stat.h>

#include "jobcg/config.h"
#include "jobcg/context.h"
#include "devices.h"
#include "jobcg/job.h"
#include "jobcg/jobgres.h"
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

int main(int argc, char **argv)
{
	const bool linear = argc > 1 && strcmp(argv[1], "linear") == 0;
	const char *root = kcli_setup(linear ? "gres-shared-linear" : "gres-shared", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_step_gres *sg = NULL;
	char pins[PATH_MAX], ext[PATH_MAX + 32], ext2[PATH_MAX + 32], own[PATH_MAX + 32],
	    path[PATH_MAX + 16], buf[1024];
	const char *confdir;
	FILE *f;

	snprintf(pins, sizeof(pins), "/sys/fs/bpf/jobcg-test-gres-shared-%d", (int)getpid());
	confdir = ktest_gpu_conf(3, NULL, pins, dev);
	snprintf(path, sizeof(path), "%s/cgroup.conf", confdir);
	if (linear && (f = fopen(path, "ae"))) {
		fputs("DeviceProgram=linear\n", f);
		fclose(f);
	}
	if (jobcg_config_load(confdir, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context: %s\n",
		       jobcg_error_format(jobcg_last_error()->code, buf, sizeof(buf)));
		return 1;
	}
	tap_diag("device programs: %s", linear ? "linear" : "node");
	snprintf(ext, sizeof(ext), "%s/job_1/step_extern", root);
	snprintf(own, sizeof(own), "%s/job_1/step_0", root);
	snprintf(ext2, sizeof(ext2), "%s/job_2/step_extern", root);

	is_int(jobcg_job_create(ctx, 1, NULL, 0, NULL), 0, "job 1 without GPUs");
	is_int(jobcg_step_create(ctx, 1, "extern", 0, NULL), 0, "step 1.extern");
	is_int(jobcg_step_gres_setup(ctx, 1, "extern", NULL, NULL, 1, &sg), 0,
	       "1.extern shares its job's devices (none yet)");
	jobcg_step_gres_free(sg);
	sg = NULL;
	is_int(ktest_open_in(ext, dev[0], O_RDWR), EPERM, "1.extern opens no GPU yet");

	is_int(jobcg_job_create(ctx, 2, NULL, 0, NULL), 0, "job 2 without GPUs");
	is_int(jobcg_step_create(ctx, 2, "extern", 0, NULL), 0, "step 2.extern");
	is_int(jobcg_step_gres_setup(ctx, 2, "extern", NULL, NULL, 1, &sg), 0,
	       "2.extern shares its job's devices");
	jobcg_step_gres_free(sg);
	sg = NULL;

	/* A step that arrives later claims GPU 1 for the job and holds it. */
	is_int(jobcg_job_gres_claim(ctx, 1, "gpu:1"), 0, "job 1 claims gpu:1 (its step 0's)");
	is_int(jobcg_step_create(ctx, 1, "0", 0, NULL), 0, "step 1.0");
	is_int(jobcg_step_gres_setup_exact(ctx, 1, "0", "gpu:1", NULL, 1, &sg), 0,
	       "step 1.0 holds exactly gpu:1");
	jobcg_step_gres_free(sg);
	sg = NULL;
	is_int(ktest_open_in(ext, dev[1], O_RDWR), 0, "1.extern now opens the job's GPU 1");
	is_int(ktest_open_in(ext, dev[0], O_RDWR), EPERM, "... but not GPU 0, not the job's");
	is_gres(ctx, 1, "extern", "gpu:1", "1.extern's record follows the job");
	is_int(ktest_open_in(ext2, dev[1], O_RDWR), EPERM, "2.extern cannot open job 1's GPU 1");

	/* Step 1.1 with no GPUs of its own stays without: only shared steps follow. */
	is_int(jobcg_step_create(ctx, 1, "1", 0, NULL), 0, "step 1.1");
	is_int(jobcg_step_gres_setup_exact(ctx, 1, "1", "", NULL, 1, &sg), 0,
	       "step 1.1 with exactly no GPU");
	jobcg_step_gres_free(sg);
	sg = NULL;
	is_int(jobcg_job_gres_claim(ctx, 1, "gpu:2"), 0, "job 1 claims gpu:2 as well");
	is_int(ktest_open_in(ext, dev[2], O_RDWR), 0, "1.extern opens GPU 2 too");
	is_int(ktest_open_in(ext, dev[1], O_RDWR), 0, "... and still GPU 1");
	is_gres(ctx, 1, "extern", "gpu:1,2", "1.extern's record: the job's two");
	snprintf(path, sizeof(path), "%s/job_1/step_1", root);
	is_int(ktest_open_in(path, dev[2], O_RDWR), EPERM, "step 1.1 still opens nothing");
	is_int(ktest_open_in(own, dev[2], O_RDWR), EPERM, "step 1.0 opens only its own GPU 1");
	is_int(ktest_open_in(ext2, dev[2], O_RDWR), EPERM, "2.extern still opens nothing");

	is_int(jobcg_job_remove(ctx, 1, 0), 0, "job 1 removed");
	is_int(jobcg_job_gres_claim(ctx, 2, "gpu:1"), 0, "job 2 claims gpu:1 once job 1 is gone");
	is_int(ktest_open_in(ext2, dev[1], O_RDWR), 0, "2.extern opens it");
	is_int(jobcg_job_remove(ctx, 2, 0), 0, "job 2 removed");

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
