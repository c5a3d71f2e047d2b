/*
 * jobcg: adopting a login session into a job (pam_slurm_adopt's job): pick the user's newest
 * job and put the process into the job's extern step, so that whatever the user starts over ssh
 * is limited and accounted with the job and killed with it.
 */
#include <fcntl.h>
#include <stdio.h>

#include "adopt.h"
#include "jobcg/adopt.h"
#include "jobcg/job.h"
#include "log.h"
#include "util.h"

long adopt_choose(const struct adopt_candidate *c, size_t n, uid_t uid)
{
	long best = -1;

	for (size_t i = 0; i < n; i++) {
		if (!c[i].have_owner || c[i].uid != uid)
			continue;
		if (best < 0 || c[i].created_sec > c[best].created_sec ||
		    (c[i].created_sec == c[best].created_sec && c[i].id > c[best].id))
			best = (long)i;
	}
	return best;
}

int adopt_parse_status_uid(const char *status, uid_t *ret)
{
	for (const char *p = status; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned long v;
		char *end;

		if (!startswith(p, "Uid:"))
			continue;
		p += 4;
		v = strtoul(p, &end, 10);
		if (end == p || v > (uid_t)-2)
			return -EINVAL;
		*ret = (uid_t)v;
		return 0;
	}
	return -EINVAL;
}

JOBCG_EXPORT int jobcg_pid_uid(pid_t pid, uid_t *ret)
{
	char path[64];
	_cleanup_free_ char *text = NULL;
	int r;

	if (pid <= 0)
		return error_set(-EINVAL, "invalid pid %d", (int)pid);
	format_buf(path, sizeof(path), "/proc/%d/status", (int)pid);
	r = read_full_file_at(AT_FDCWD, path, 1 << 16, &text, NULL);
	if (r == -ENOENT)
		return error_set(-ESRCH, "no process %d", (int)pid);
	if (r < 0)
		return error_set(r, "cannot read %s: %s", path, strerror(-r));
	r = adopt_parse_status_uid(text, ret);
	if (r < 0)
		return error_set(r, "%s has no Uid line", path);
	return 0;
}

JOBCG_EXPORT int jobcg_adopt_pick_job(struct jobcg_ctx *ctx, uid_t uid, uint32_t *ret_job)
{
	_cleanup_free_ uint32_t *ids = NULL;
	_cleanup_free_ struct adopt_candidate *c = NULL;
	size_t n = 0, m = 0;
	long best;
	int r;

	r = jobcg_job_list(ctx, &ids, &n);
	if (r < 0)
		return r;
	c = calloc(n ? n : 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct jobcg_job_info *info = NULL;

		/* A job released meanwhile is simply not a candidate. */
		if (jobcg_job_info_get(ctx, ids[i], &info) < 0)
			continue;
		c[m++] = (struct adopt_candidate){.id = info->id,
						  .have_owner = info->have_owner,
						  .uid = info->uid,
						  .created_sec = info->created_sec};
		jobcg_job_info_free(info);
	}
	best = adopt_choose(c, m, uid);
	if (best < 0)
		return error_set(-ENOENT, "user %u has no job on this node: access refused",
				 (unsigned)uid);
	*ret_job = c[best].id;
	return 0;
}

JOBCG_EXPORT int jobcg_adopt(struct jobcg_ctx *ctx, pid_t pid, uint32_t job_id)
{
	uid_t uid;
	int r;

	r = jobcg_pid_uid(pid, &uid);
	if (r < 0)
		return r;
	r = jobcg_step_create(ctx, job_id, "extern", JOBCG_STEP_NO_RUNNER, NULL);
	if (r < 0 && r != -EEXIST)
		return r;
	r = jobcg_task_add_pid(ctx, job_id, "extern", JOBCG_TASK_SPECIAL, pid);
	if (r < 0)
		return r;
	log_info("adopted pid %d (uid %u) into job %u, step extern", (int)pid, (unsigned)uid,
		 job_id);
	return 0;
}
