/* jobcg: release a job as a scheduler ends one: SIGTERM, a grace period, then removal. */
#include <signal.h>

#include "cgroupfs.h"
#include "jobcg/jobend.h"
#include "jobcg/job.h"
#include "job_internal.h"
#include "log.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

/* The steps of @i that have processes (NULL: out of memory). */
static char **running_steps(const struct jobcg_job_info *i)
{
	char **v = calloc(strv_length(i->steps) + 1, sizeof(char *));
	size_t n = 0;

	for (char **s = i->steps; v && *s; s++) {
		_cleanup_free_ char *sdir = NULL;
		bool populated = false;

		if (!(sdir = strdup_printf("%s/step_%s", i->path, *s))) {
			strv_free(v);
			return NULL;
		}
		if (cgfs_events(sdir, &populated, NULL) == 0 && populated &&
		    !(v[n++] = strdup(*s))) {
			strv_free(v);
			return NULL;
		}
	}
	jobcg_error_clear();
	return v;
}

JOBCG_EXPORT int jobcg_job_release(struct jobcg_ctx *ctx, uint32_t job, unsigned grace_ms)
{
	struct jobcg_job_info *info = NULL;
	struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};
	_cleanup_free_ char *dir = tree_job_dir(ctx, job);
	_cleanup_strv_free_ char **running = NULL;
	unsigned flags = 0;
	int r, sig = 0;

	if (!dir)
		return -ENOMEM;
	r = jobcg_job_info_get(ctx, job, &info);
	if (r < 0)
		return r;
	if (info->populated) {
		flags |= JOBCG_JOB_REMOVE_CANCELLED;
		/* Marked first, naming this process: steps ending now record CANCELLED, gc and a
		 * second release leave the job to this one, and a release killed during the grace
		 * period is finished by gc. No xattrs (unprivileged): only the record. */
		if (ctx->info->xattr.supported && (r = job_mark_releasing(ctx, job)) < 0) {
			jobcg_job_info_free(info);
			return r;
		}
		/* A frozen job cannot act on SIGTERM: removal kills it straight away. The steps
		 * SIGTERM reaches are noted: a step the removal records ended on it, unless the
		 * removal's SIGKILL finds it still running. */
		if (!info->frozen && grace_ms > 0)
			running = running_steps(info);
		if (!info->frozen && grace_ms > 0 && jobcg_signal(ctx, &t, SIGTERM) >= 0) {
			sig = SIGTERM;
			if (cgfs_wait_events(dir, "populated", 0, grace_ms) == 0)
				log_info("job %u: ended on SIGTERM", job);
		}
	}
	jobcg_job_info_free(info);
	test_pause("release-after-grace");
	return job_remove_after_grace(ctx, job, flags, sig, running);
}
