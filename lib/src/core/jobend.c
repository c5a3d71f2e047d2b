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

int job_grace_begin(struct jobcg_ctx *ctx, uint32_t job, unsigned flags, bool term,
		    struct job_grace *ret)
{
	struct jobcg_job_info *info = NULL;
	struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};
	struct job_grace g = {.job = job, .flags = flags};
	int r;

	if (!(g.dir = tree_job_dir(ctx, job)))
		return -ENOMEM;
	r = jobcg_job_info_get(ctx, job, &info);
	if (r < 0)
		goto fail;
	if (info->populated) {
		g.flags |= JOBCG_JOB_REMOVE_CANCELLED;
		/* Marked first, naming this process: steps ending now record CANCELLED, gc and a
		 * second release leave the job to this one, and a release killed during the grace
		 * period is finished by gc. No xattrs (unprivileged): only the record. */
		if (ctx->info->xattr.supported && (r = job_mark_releasing(ctx, job)) < 0)
			goto fail;
		/* A frozen job cannot act on SIGTERM: removal kills it straight away. The steps
		 * SIGTERM reaches are noted: a step the removal records ended on it, unless the
		 * removal's SIGKILL finds it still running. */
		if (!info->frozen && term)
			g.running = running_steps(info);
		if (!info->frozen && term && jobcg_signal(ctx, &t, SIGTERM) >= 0)
			g.sig = SIGTERM;
	}
	jobcg_job_info_free(info);
	*ret = g;
	return 0;
fail:
	jobcg_job_info_free(info);
	job_grace_done(&g);
	return r;
}

int job_grace_end(struct jobcg_ctx *ctx, struct job_grace *g)
{
	return job_remove_after_grace(ctx, g->job, g->flags, g->sig, g->running);
}

void job_grace_done(struct job_grace *g)
{
	free(g->dir);
	strv_free(g->running);
	g->dir = NULL;
	g->running = NULL;
}

JOBCG_EXPORT int jobcg_job_release(struct jobcg_ctx *ctx, uint32_t job, unsigned grace_ms)
{
	struct job_grace g;
	int r = job_grace_begin(ctx, job, 0, grace_ms > 0, &g);

	if (r < 0)
		return r;
	if (g.sig && cgfs_wait_events(g.dir, "populated", 0, grace_ms) == 0)
		log_info("job %u: ended on SIGTERM", job);
	test_pause("release-after-grace");
	r = job_grace_end(ctx, &g);
	job_grace_done(&g);
	return r;
}
