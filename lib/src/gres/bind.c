/* jobcg: binding tasks to their GPUs (--gpu-bind) and the environment CUDA, ROCm and oneAPI
 * read to find them. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "gpudetect_internal.h"
#include "gresxattr.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "log.h"
#include "util.h"

JOBCG_EXPORT void jobcg_gpu_bind_done(struct jobcg_gpu_bind *b)
{
	if (!b)
		return;
	free(b->map);
	*b = (struct jobcg_gpu_bind){};
}

static int parse_bind_number(const char *s, const char *what, unsigned max, unsigned *ret)
{
	if (*s < '0' || *s > '9')
		return error_set(-EINVAL, "--gpu-bind: %s '%s' is not a number", what, s);
	if (parse_uint(s, max, ret) < 0)
		return error_set(-EINVAL, "--gpu-bind: %s '%s' is not a number up to %u", what, s,
				 max);
	return 0;
}

JOBCG_EXPORT int jobcg_gpu_bind_parse(const char *s, struct jobcg_gpu_bind *ret)
{
	return_if_null(ret);
	struct jobcg_gpu_bind b = {};
	int r;

	if (!s || streq(s, "none")) {
		*ret = b;
		return 0;
	}
	if (startswith(s, "single:") || startswith(s, "per_task:")) {
		bool single = startswith(s, "single:");

		b.mode = single ? JOBCG_GPU_BIND_SINGLE : JOBCG_GPU_BIND_PER_TASK;
		r = parse_bind_number(strchr(s, ':') + 1,
				      single ? "tasks per GPU" : "GPUs per task", JOBCG_GRES_MAX,
				      &b.n);
		if (r < 0)
			return r;
		if (b.n == 0)
			return error_set(-EINVAL, "--gpu-bind %s: N must be at least 1", s);
		*ret = b;
		return 0;
	}
	if (startswith(s, "map_gpu:")) {
		_cleanup_strv_free_ char **v = strv_split(s + 8, ",");
		_cleanup_free_ unsigned *map = NULL;
		size_t nmap = 0;

		if (!v)
			return -ENOMEM;
		if (!v[0] || strstr(s, ",,") || s[8] == ',' || s[strlen(s) - 1] == ',')
			return error_set(-EINVAL, "--gpu-bind %s: empty list entry", s);
		for (size_t i = 0; v[i]; i++) {
			char *star = strchr(v[i], '*');
			unsigned id = 0, rep = 1;
			unsigned *m;

			if (star) {
				*star = 0;
				r = parse_bind_number(star + 1, "repeat count", 1024, &rep);
				if (r < 0)
					return r;
				if (rep == 0)
					return error_set(-EINVAL, "--gpu-bind %s: repeat count 0",
							 s);
			}
			r = parse_bind_number(v[i], "GPU id", JOBCG_GRES_MAX - 1, &id);
			if (r < 0)
				return r;
			if (nmap + rep > 4096)
				return error_set(-E2BIG, "--gpu-bind: map_gpu list too long");
			m = realloc(map, (nmap + rep) * sizeof(*m));
			if (!m)
				return -ENOMEM;
			map = m;
			for (unsigned k = 0; k < rep; k++)
				map[nmap++] = id;
		}
		if (nmap == 0)
			return error_set(-EINVAL, "--gpu-bind %s: empty list", s);
		b.mode = JOBCG_GPU_BIND_MAP;
		b.map = TAKE_PTR(map);
		b.nmap = nmap;
		*ret = b;
		return 0;
	}
	return error_set(-EINVAL,
			 "--gpu-bind '%s': want none, single:N, per_task:N or map_gpu:LIST", s);
}

JOBCG_EXPORT int jobcg_gpu_bind_task(const struct jobcg_gres_node *n,
				     const struct jobcg_gpu_bind *b,
				     const struct jobcg_gres_set *step, unsigned task,
				     unsigned ntasks, struct jobcg_gres_set *ret)
{
	unsigned gpus[JOBCG_GRES_MAX], ngpu = 0;
	struct jobcg_gres_set s = *step;

	if (task >= ntasks)
		return error_set(-EINVAL, "task %u out of %u tasks", task, ntasks);
	for (size_t i = 0; i < n->ndev; i++)
		if (jobcg_gres_set_has(step, (unsigned)i) && streq(n->dev[i].rec->name, "gpu")) {
			gpus[ngpu++] = (unsigned)i;
			jobcg_gres_set_del(&s, (unsigned)i);
		}
	if (b->mode == JOBCG_GPU_BIND_NONE || ngpu == 0) {
		*ret = *step;
		return 0;
	}
	switch (b->mode) {
	case JOBCG_GPU_BIND_SINGLE:
		jobcg_gres_set_add(&s, gpus[(task / b->n) % ngpu]);
		break;
	case JOBCG_GPU_BIND_PER_TASK:
		if (b->n > ngpu)
			return error_set(-EINVAL, "--gpu-bind per_task:%u but the step has %u GPUs",
					 b->n, ngpu);
		for (unsigned k = 0; k < b->n; k++)
			jobcg_gres_set_add(&s, gpus[((size_t)task * b->n + k) % ngpu]);
		break;
	case JOBCG_GPU_BIND_MAP: {
		unsigned id = b->map[task % b->nmap];

		if (id >= ngpu)
			return error_set(-EINVAL,
					 "--gpu-bind map_gpu: GPU %u for task %u, but the "
					 "step has %u GPU%s (ids count from 0 within the step)",
					 id, task, ngpu, ngpu == 1 ? "" : "s");
		jobcg_gres_set_add(&s, gpus[id]);
		break;
	}
	case JOBCG_GPU_BIND_NONE:
		break;
	}
	*ret = s;
	return 0;
}

/* ---- environment ---- */

JOBCG_EXPORT const char *const jobcg_gres_env_names[] = {
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "GPU_DEVICE_ORDINAL",
    "JOBCG_JOB_GPUS",
    "JOBCG_STEP_GPUS",
    NULL,
};

enum { ENV_CUDA, ENV_ROCR, ENV_ZE, ENV_OPENCL, ENV_MAX };

static int push_env(char ***env, const char *name, const char *value)
{
	char *e = strdup_printf("%s=%s", name, value ? value : "");

	if (!e)
		return -ENOMEM;
	return strv_push(env, e);
}

JOBCG_EXPORT int jobcg_gres_env(const struct jobcg_gres_node *n, const struct jobcg_gres_env_in *in,
				char ***ret)
{
	static const unsigned env_flag[ENV_MAX] = {
	    JOBCG_GRES_FLAG_ENV_NVIDIA,
	    JOBCG_GRES_FLAG_ENV_AMD,
	    JOBCG_GRES_FLAG_ENV_INTEL,
	    JOBCG_GRES_FLAG_ENV_OPENCL,
	};
	const unsigned env_all = JOBCG_GRES_FLAG_ENV_NVIDIA | JOBCG_GRES_FLAG_ENV_AMD |
				 JOBCG_GRES_FLAG_ENV_INTEL | JOBCG_GRES_FLAG_ENV_OPENCL;
	const struct jobcg_gres_set *task = in->task ? in->task : in->step;
	const struct jobcg_gres_set *visible = in->visible ? in->visible : in->step;
	_cleanup_strv_free_ char **env = NULL;
	_cleanup_free_ char *job_s = NULL, *step_s = NULL;
	char *val[ENV_MAX] = {};
	unsigned flags = 0;
	bool any_gpu = false;
	int r = 0;

	if (!in->step || !in->job)
		return error_set(-EINVAL,
				 "a task's environment needs its job's and step's devices");
	if (jobcg_gres_set_format_name(n, in->job, "gpu", &job_s) < 0 ||
	    jobcg_gres_set_format_name(n, in->step, "gpu", &step_s) < 0)
		return -ENOMEM;

	for (size_t i = 0; i < n->ndev && r >= 0; i++) {
		const struct jobcg_gres_device *d = &n->dev[i];
		unsigned f = d->rec->flags, rank = 0;
		char num[32];

		if (!streq(d->rec->name, "gpu") || !jobcg_gres_set_has(task, d->pos))
			continue;
		any_gpu = true;
		/* Slurm: a record with no env_* flag sets every variable; no_gpu_env sets none. */
		if (f & JOBCG_GRES_FLAG_NO_GPU_ENV)
			f = 0;
		else if (!(f & env_all))
			f |= env_all;
		flags |= f;
		if (in->constrained) {
			for (size_t j = 0; j < i; j++)
				if (streq(n->dev[j].rec->name, "gpu") &&
				    jobcg_gres_set_has(visible, (unsigned)j))
					rank++;
		} else {
			rank = d->index;
		}
		snprintf(num, sizeof(num), "%u", rank);
		for (int e = 0; e < ENV_MAX && r >= 0; e++) {
			const char *item = num;

			if (!(f & env_flag[e]))
				continue;
			if (e == ENV_CUDA && gres_record_is_mig(d->rec)) {
				/* CUDA finds a MIG instance by its UUID only: an index would
				 * name whichever instance it enumerates first. */
				if (d->uuid && startswith(d->uuid, "MIG-"))
					item = d->uuid;
				else
					log_warning("the MIG UUID of gpu %u is unknown (no "
						    "mig-minors line for its caps?): "
						    "CUDA_VISIBLE_DEVICES gets its index",
						    d->index);
			} else if ((e == ENV_CUDA || e == ENV_ROCR) &&
				   (f & JOBCG_GRES_FLAG_ENV_UUID)) {
				if (d->uuid)
					item = d->uuid;
				else
					log_warning(
					    "gres.conf asks env_uuid but the UUID of gpu %u is "
					    "unknown (only NVIDIA's /proc/driver/nvidia is read); "
					    "using its index",
					    d->index);
			}
			r = gres_append(&val[e], item);
		}
	}
	for (int e = 0; e < ENV_MAX && r >= 0; e++)
		if (any_gpu && (flags & env_flag[e]))
			r = push_env(&env, jobcg_gres_env_names[e], val[e] ? val[e] : "");
	for (int e = 0; e < ENV_MAX; e++)
		free(val[e]);
	if (r < 0)
		return r;
	if (*job_s && (r = push_env(&env, "JOBCG_JOB_GPUS", job_s)) < 0)
		return r;
	if (*step_s && (r = push_env(&env, "JOBCG_STEP_GPUS", step_s)) < 0)
		return r;
	if (!env) {
		env = calloc(1, sizeof(char *));
		if (!env)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(env);
	return 0;
}
