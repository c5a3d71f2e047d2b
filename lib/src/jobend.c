/* jobcg: release a job (TERM, grace, KILL, accounting, removal) and record ended steps. */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "cgroupfs.h"
#include "ctx.h"
#include "jobcg/acct.h"
#include "jobcg/jobend.h"
#include "jobcg/jobgres.h"
#include "log.h"
#include "tree.h"
#include "util.h"

JOBCG_EXPORT uint64_t jobcg_realtime_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void append_logged(struct jobcg_ctx *ctx, const struct jobcg_acct_record *r)
{
	_cleanup_free_ char *path = NULL;

	if (jobcg_acctlog_path(ctx->conf, &path) < 0 || jobcg_acctlog_append(path, r) < 0)
		log_warning("accounting record of job %s not written: %s", r->job_id,
			    jobcg_last_error()->message);
}

JOBCG_EXPORT int jobcg_job_release(struct jobcg_ctx *ctx, uint32_t job, unsigned grace_ms,
				   struct jobcg_acct_record *ret)
{
	struct jobcg_job_info *info = NULL;
	struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};
	struct jobcg_acct a = {};
	struct jobcg_acct_record rec = {.kind = JOBCG_ACCT_JOB, .exit_code = 0};
	_cleanup_free_ char *dir = tree_job_dir(ctx, job);
	bool cancelled = false;
	char id[16];
	int r;

	if (!dir)
		return -ENOMEM;
	r = jobcg_job_info_get(ctx, job, &info);
	if (r < 0)
		return r;
	if (info->populated) {
		cancelled = true;
		/* A frozen job cannot act on SIGTERM: it goes straight to SIGKILL. */
		if (!info->frozen && jobcg_signal(ctx, &t, SIGTERM) >= 0 && grace_ms > 0 &&
		    cgfs_wait_events(dir, "populated", 0, grace_ms) == 0)
			log_info("job %u: ended on SIGTERM", job);
		r = jobcg_kill(ctx, &t, TREE_KILL_TIMEOUT_MS);
		if (r < 0) {
			jobcg_job_info_free(info);
			return r;
		}
	}
	snprintf(id, sizeof(id), "%u", job);
	rec.job_id = strdup(id);
	if (!rec.job_id) {
		jobcg_job_info_free(info);
		return -ENOMEM;
	}
	rec.uid = info->have_owner ? info->uid : 0;
	rec.gid = info->have_owner ? info->gid : 0;
	rec.start_usec = info->created_sec * 1000000;
	jobcg_job_info_free(info);
	/* Read before removal: the counters go with the cgroup. */
	if (jobcg_acct_read(ctx, &t, &a) == 0)
		jobcg_acct_record_fill(&rec, &a);
	(void)jobcg_gres_get(ctx, job, NULL, &rec.gres);
	if (rec.gres && !*rec.gres) {
		free(rec.gres);
		rec.gres = NULL;
	}
	r = jobcg_job_remove(ctx, job, 0);
	if (r < 0) {
		jobcg_acct_record_done(&rec);
		return r;
	}
	rec.end_usec = jobcg_realtime_usec();
	rec.state = jobcg_acct_state_of(0, 0, rec.oom_kills, cancelled);
	append_logged(ctx, &rec);
	if (ret)
		*ret = rec;
	else
		jobcg_acct_record_done(&rec);
	return 0;
}

JOBCG_EXPORT int jobcg_step_record(struct jobcg_ctx *ctx, uint32_t job, const char *step,
				   uint64_t start_usec, unsigned ntasks,
				   const struct jobcg_run_result *res, int start_error,
				   struct jobcg_acct_record *ret)
{
	struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};
	struct jobcg_acct a = {};
	struct jobcg_acct_record rec = {
	    .kind = JOBCG_ACCT_STEP,
	    .uid = getuid(),
	    .gid = getgid(),
	    .start_usec = start_usec,
	    .ntasks = ntasks,
	    .exit_code = -1,
	};
	char id[16];

	snprintf(t.step, sizeof(t.step), "%s", step);
	snprintf(id, sizeof(id), "%u", job);
	rec.job_id = strdup(id);
	rec.step_id = strdup(step);
	if (!rec.job_id || !rec.step_id) {
		jobcg_acct_record_done(&rec);
		return -ENOMEM;
	}
	if (jobcg_acct_read(ctx, &t, &a) == 0)
		jobcg_acct_record_fill(&rec, &a);
	{
		struct jobcg_job_info *info = NULL;

		/* The step runs for the job's owner. */
		if (jobcg_job_info_get(ctx, job, &info) == 0 && info->have_owner) {
			rec.uid = info->uid;
			rec.gid = info->gid;
		}
		jobcg_job_info_free(info);
	}
	(void)jobcg_gres_get(ctx, job, step, &rec.gres);
	if (rec.gres && !*rec.gres) {
		free(rec.gres);
		rec.gres = NULL;
	}
	if (res) {
		rec.exit_code = 0;
		for (unsigned i = 0; i < res->ntasks && res->task_status; i++) {
			int st = res->task_status[i];

			if (WIFSIGNALED(st) && !rec.exit_signal)
				rec.exit_signal = WTERMSIG(st);
			else if (WIFEXITED(st) && WEXITSTATUS(st) > rec.exit_code)
				rec.exit_code = WEXITSTATUS(st);
		}
	} else if (start_error) {
		/* As a shell says it: 127 not found, 126 not executable. */
		rec.exit_code = start_error == -ENOENT ? 127 : 126;
	}
	rec.end_usec = jobcg_realtime_usec();
	rec.state = jobcg_acct_state_of(rec.exit_code, rec.exit_signal, rec.oom_kills,
					res && res->lost_signal);
	append_logged(ctx, &rec);
	if (ret)
		*ret = rec;
	else
		jobcg_acct_record_done(&rec);
	return 0;
}
