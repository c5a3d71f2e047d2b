/* jobcg: a step's begin and end around its tasks (see jobcg/steplife.h), one sequence for
 * `jobcg run`, `jobcg daemon` and any resident launcher. */
#include <stdlib.h>
#include <string.h>

#include "acctlog_internal.h"
#include "job_internal.h"
#include "procs.h"
#include "jobcg/steplife.h"
#include "testhook.h"
#include "tree.h"
#include "log.h"
#include "util.h"

static void log_failure(const struct jobcg_step_life *l, int r, const char *what)
{
	char buf[1024];

	log_error("step %u.%s: %s: %s", l->job, l->step, what,
		  jobcg_error_format(r, buf, sizeof(buf)));
}

JOBCG_EXPORT int jobcg_step_begin(struct jobcg_ctx *ctx, uint32_t job,
				  const struct jobcg_step_request *req, struct jobcg_step_life *ret)
{
	static const struct jobcg_step_request defaults = {0};
	struct jobcg_step_life l = {.job = job};
	struct jobcg_target tj = {.job = job, .task = JOBCG_TASK_ALL};
	int r;

	if (!req)
		req = &defaults;
	if (!ret)
		return error_set(-EINVAL, "no step life to fill");
	l.ntasks = req->ntasks ? req->ntasks : 1;
	/* What jobcg_step_run() would refuse: nothing is made for a step that cannot run. */
	if (l.ntasks > JOBCG_TASK_MAX + 1)
		return error_set(-EINVAL, "number of tasks must be 1..%d", JOBCG_TASK_MAX + 1);

	r = jobcg_step_create_limited(ctx, job, req->step_id, 0, req->limits, l.step);
	if (r < 0)
		return r;
	/* Granted before any task exists: no task ever runs with more than its share. */
	r = jobcg_step_gres_setup(ctx, job, l.step, req->gres, req->gpu_bind, l.ntasks, &l.gres);
	if (r < 0) {
		struct jobcg_error saved = *jobcg_last_error();

		int k = step_remove_unborn(ctx, job, l.step);

		if (k < 0)
			log_failure(&l, k, "removing it again after its devices failed");
		/* The devices' failure is the one the caller asked about. */
		jobcg_error_restore(&saved);
		return r;
	}
	l.start_usec = realtime_usec();
	/* Only the oom counter, to tell the job's own limit from a node-wide OOM at the end; an
	 * absent memory controller leaves it unset, which the end reads as "no OOM seen". */
	(void)jobcg_acct_read_file(ctx, &tj, "memory.events", &l.job_before);
	*ret = l;
	return 0;
}

/* The job is being released ('jobcg release' marks it before it ends its processes). */
static bool job_released(struct jobcg_ctx *ctx, uint32_t job)
{
	char *v = NULL;
	bool r = jobcg_job_xattr_get(ctx, job, "removing", &v) == 0;

	free(v);
	return r;
}

/* The job's directory is gone, or another live process is removing it. */
static bool job_gone_or_released(struct jobcg_ctx *ctx, uint32_t job)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job);

	return !jdir || access(jdir, F_OK) < 0 || job_removal_by_another(ctx, job);
}

/* The step's OOM kills against the growth of the job's oom counter while it ran. */
static void classify_oom(struct jobcg_ctx *ctx, const struct jobcg_step_life *l,
			 struct jobcg_step_outcome *o)
{
	struct jobcg_target tj = {.job = l->job, .task = JOBCG_TASK_ALL};
	struct jobcg_acct job_after = {};
	uint64_t before;

	if (!jobcg_acct_has(&o->acct, JOBCG_ACCT_OOM_KILL) ||
	    jobcg_acct_read(ctx, &tj, &job_after) < 0 ||
	    !jobcg_acct_has(&job_after, JOBCG_ACCT_OOM))
		return;
	before = jobcg_acct_has(&l->job_before, JOBCG_ACCT_OOM)
		     ? l->job_before.value[JOBCG_ACCT_OOM]
		     : 0;
	o->oom = jobcg_oom_classify(o->acct.value[JOBCG_ACCT_OOM_KILL],
				    job_after.value[JOBCG_ACCT_OOM] - before);
	o->job_oom = jobcg_acct_has(&job_after, JOBCG_ACCT_OOM_KILL) &&
		     job_after.value[JOBCG_ACCT_OOM_KILL] > 0;
}

/*
 * The step is read, recorded and removed in one hold of the node lock, and its record written
 * only once its directory is gone: a release that takes the step with its job meanwhile
 * (job_remove) writes the step's record itself, a gc finishing a killed runner's step writes
 * one only if the directory is still there, so every step gets one record, never two.
 */
JOBCG_EXPORT int jobcg_step_end(struct jobcg_ctx *ctx, struct jobcg_step_life *life,
				const struct jobcg_run_result *res, unsigned flags,
				struct jobcg_step_outcome *ret)
{
	struct jobcg_target t = {.task = JOBCG_TASK_ALL};
	struct jobcg_step_outcome o = {};
	struct acct_pending rec = {};
	_cleanup_free_ char *sdir = NULL;
	bool lost = flags & JOBCG_STEP_END_LOST, cancelled = false, have_rec = false;
	int r;

	if (!life)
		return error_set(-EINVAL, "no step life");
	/* The life may be filled by the caller (a daemon's client): its step is a name in the
	 * tree, checked before it is made a path, within its array. */
	if (!memchr(life->step, '\0', sizeof(life->step)))
		return error_set(-EINVAL, "invalid step in the step life: no NUL");
	if ((r = tree_ids_valid(life->job, life->step)) < 0)
		return r;
	sdir = tree_step_dir(ctx, life->job, life->step);
	if (!sdir)
		return -ENOMEM;
	t.job = life->job;
	memcpy(t.step, life->step, sizeof(t.step));
	if (lost)
		/* Its tasks may still run: the step ends now, as gc would have swept it. */
		(void)jobcg_kill(ctx, &t, 10000);
	test_pause("step-end-before-lock");
	r = jobcg_ctx_lock(ctx);
	if (r < 0)
		return r;
	if (access(sdir, F_OK) < 0) {
		/*
		 * Released while it ran: the release recorded it and revoked its job's grants. Or
		 * another ender of this very step (a daemon that died after the rmdir, or in the
		 * removal of the step's ephemeral job) left its record on the job's directory: the
		 * job is still there and nobody alive removes it, so the caller must still end it
		 * (an ephemeral job, whose removal writes that record).
		 */
		o.job_gone = job_gone_or_released(ctx, life->job);
		goto done;
	}
	if (res || lost) {
		/* Every task has exited and jobcg_step_run() killed stragglers: final readings. */
		r = jobcg_acct_read_dir(sdir, &o.acct);
		if (r == 0)
			o.have_acct = true;
		else
			log_failure(life, r, "reading its accounting");
	}
	if (o.have_acct) {
		if (!lost) {
			classify_oom(ctx, life, &o);
			cancelled = res->lost_signal != 0 || job_released(ctx, life->job) ||
				    target_died_of_noted(ctx, life->job, sdir, res->task_status,
							 res->ntasks);
		}
		/* res NULL (lost): nobody saw an exit status, the record says NODE_FAIL. */
		r = acct_step_prepare(ctx, life->job, life->step, life->start_usec,
				      lost ? NULL : res, &o.acct, cancelled, &rec);
		if (r < 0)
			log_failure(life, r, "writing its accounting record");
		else
			have_rec = true;
	}
	if ((r = jobcg_step_gres_release(ctx, life->job, life->step)) < 0)
		log_failure(life, r, "revoking its devices");
	test_pause("step-end-before-rmdir");
	/* Set aside on the job's directory until written: a kill after the rmdir loses nothing
	 * (gc writes it). */
	if (have_rec) {
		o.cancelled = cancelled;
		acct_pending_store(ctx, &rec, sdir, ACCT_PENDING_ON_JOB, 0);
	}
	test_pause("step-end-set-aside");
	r = step_remove_locked(ctx, life->job, life->step);
	/* Taken with its job by a release, which recorded it. Still there otherwise (a task
	 * stuck in the kernel, an rmdir refused): the entry set aside stays on the job, and
	 * whoever removes the directory writes it, how the step really ended. */
	if (r == -ENOENT) {
		acct_pending_discard(&rec);
		o.job_gone = job_gone_or_released(ctx, life->job);
		r = 0;
	} else if (r == 0 && have_rec) {
		test_pause("step-end-before-record");
		if ((r = acct_log_commit(ctx, &rec)) < 0)
			log_failure(life, r, "writing its accounting record");
		else
			o.recorded = true;
		r = 0;
	}
done:
	jobcg_ctx_unlock(ctx);
	acct_pending_done(&rec);
	jobcg_step_gres_free(life->gres);
	life->gres = NULL;
	if (r < 0)
		return r;
	if (ret)
		*ret = o;
	return 0;
}
