/* Kernel test: a login is adopted into a job jobcg_spank.so made (JOBCG_JOB_SLURM) only through the
 * extern step Slurm's slurmstepd made there (PrologFlags=Contain). adopt making an extern step of
 * its own in such a job would keep the job on the node after its last Slurm step, the login and
 * the job's GPUs with it. Jobs that are not Slurm's still get one. */
#include <signal.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "jobcg/adopt.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

static pid_t start_sleep(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		execlp("sleep", "sleep", "1000", (char *)NULL);
		_exit(127);
	}
	return pid;
}

int main(void)
{
	const char *root = kcli_setup("adopt-slurm", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	char p[PATH_MAX], *cg = NULL;
	pid_t sleeper;
	int r, s = 0;

	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context\n");
		return 1;
	}
	/* Slurm's job 41 with one srun step (this test is its slurmstepd), no extern step */
	is_int(jobcg_job_create(ctx, 41, NULL, JOBCG_JOB_SLURM, NULL), 0, "Slurm's job 41");
	snprintf(p, sizeof(p), "%s/job_41", root);
	if (getxattr(p, "trusted.jobcg.slurm", NULL, 0) < 0 && errno == EOPNOTSUPP) {
		ok(1, "# SKIP cgroupfs has no trusted xattrs here: no job is known as Slurm's");
		(void)jobcg_job_remove(ctx, 41, 0);
		return tap_done();
	}
	is_int(jobcg_step_create(ctx, 41, "0", JOBCG_STEP_ID_SCHEDULED, NULL), 0, "step 41.0");
	sleeper = start_sleep();
	ok(sleeper > 0, "a login's stand-in (sleep %d)", (int)sleeper);

	r = jobcg_adopt(ctx, sleeper, 41);
	is_int(r, -ENOENT, "adopt into Slurm's job 41 without an extern step: refused");
	ok(strstr(jobcg_last_error()->message, "PrologFlags=Contain") != NULL, "naming why: %s",
	   jobcg_last_error()->message);
	ok(!kcli_exists("%s/job_41/step_extern", root), "no extern step made in job 41");
	is_int(jobcg_step_remove(ctx, 41, "0", 0), 0, "41.0 ends");
	is_int(jobcg_job_remove(ctx, 41,
				JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD |
				    JOBCG_JOB_REMOVE_IF_SLURM),
	       0, "job 41 leaves the node with its last step, as the plugin removes it");
	ok(kill(sleeper, 0) == 0, "the refused process was left alone");

	/* Slurm's job 42 with the extern step slurmstepd made (PrologFlags=Contain) */
	is_int(jobcg_job_create(ctx, 42, NULL, JOBCG_JOB_SLURM, NULL), 0, "Slurm's job 42");
	is_int(jobcg_step_create(ctx, 42, "extern", JOBCG_STEP_ID_SCHEDULED, NULL), 0,
	       "step 42.extern");
	is_int(jobcg_adopt(ctx, sleeper, 42), 0, "adopt into 42's extern step");
	snprintf(p, sizeof(p), "%s/job_42/step_extern/user/task_special", root);
	ok(jobcg_pid_job(ctx, sleeper, NULL, &cg) >= 0 && cg && !strcmp(cg, p), "in %s",
	   cg ? cg : "?");
	free(cg);
	cg = NULL;

	/* Slurm's job 44, newer than 42, its extern step not made yet: a login of the user goes
	 * to 42, which can take it, not refused for 44 */
	is_int(jobcg_job_create(ctx, 44, NULL, JOBCG_JOB_SLURM, NULL), 0, "Slurm's job 44");
	snprintf(p, sizeof(p), "%s/job_44", root);
	ok(setxattr(p, "trusted.jobcg.created", "4000000000", 10, 0) == 0, "44 is the newest");
	{
		uint32_t got = 0;

		is_int(jobcg_adopt_user(ctx, sleeper, getuid(), &got), 0,
		       "adopt the user's login: a job is chosen");
		is_int((int)got, 42, "job 42, with an extern step, not the newer 44");
	}
	ok(!kcli_exists("%s/job_44/step_extern", root), "no extern step made in 44");
	is_int(jobcg_job_remove(ctx, 44, 0), 0, "remove 44");

	/* jobcg's own allocation 43: adopt makes its extern step, as before */
	is_int(jobcg_job_create(ctx, 43, NULL, 0, NULL), 0, "allocated job 43");
	is_int(jobcg_adopt(ctx, sleeper, 43), 0, "adopt into 43 makes its extern step");
	ok(kcli_exists("%s/job_43/step_extern", root), "43.extern made");

	(void)kill(sleeper, SIGKILL);
	ok(waitpid(sleeper, &s, 0) == sleeper, "the sleep reaped");
	is_int(jobcg_job_remove(ctx, 42, 0), 0, "remove 42");
	is_int(jobcg_job_remove(ctx, 43, 0), 0, "remove 43");
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
