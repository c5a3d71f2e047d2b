/* jobcg: jobs and steps: create with limits and hooks (rolled back on error), remove, list, gc. */
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/xattr.h>
#include <time.h>

#include "acctlog_internal.h"
#include "cgroupfs.h"
#include "sysinfo_internal.h"
#include "job_hooks.h"
#include "job_internal.h"
#include "joblock.h"
#include "log.h"
#include "testhook.h"
#include "jobcg/jobgres.h"
#include "memlimit.h"
#include "parse.h"
#include "resv_internal.h"
#include "spec.h"
#include "tree.h"
#include "util.h"

#define XATTR_PREFIX "trusted.jobcg."

JOBCG_EXPORT void jobcg_strv_free(char **v)
{
	strv_free(v);
}

struct limit_desc {
	unsigned bit;
	unsigned ctrl;
	const char *key;  /* xattr key and skipped-list name */
	const char *what; /* for ctx_limitation() */
};

static const struct limit_desc limit_descs[] = {
    {JOBCG_LIMIT_CPUS, JOBCG_CTRL_CPUSET, "cpus", "CPU binding (cpuset.cpus)"},
    {JOBCG_LIMIT_MEM, JOBCG_CTRL_MEMORY, "mem", "memory limits (memory.max)"},
    {JOBCG_LIMIT_PIDS, JOBCG_CTRL_PIDS, "pids", "process count limits (pids.max)"},
    {JOBCG_LIMIT_CPU_WEIGHT, JOBCG_CTRL_CPU, "cpu_weight", "CPU weights (cpu.weight)"},
};

static unsigned limits_requested(const struct jobcg_limits *l)
{
	unsigned m = 0;

	if (!l)
		return 0;
	if (l->cpus && *l->cpus)
		m |= JOBCG_LIMIT_CPUS;
	if (l->mem_bytes)
		m |= JOBCG_LIMIT_MEM;
	if (l->pids_max)
		m |= JOBCG_LIMIT_PIDS;
	if (l->cpu_weight)
		m |= JOBCG_LIMIT_CPU_WEIGHT;
	return m;
}

JOBCG_EXPORT unsigned jobcg_limits_check(const struct jobcg_ctx *ctx,
					 const struct jobcg_limits *limits, char ***ret_reasons)
{
	unsigned req = limits_requested(limits), bad = 0;
	char **reasons = NULL;

	for (size_t i = 0; i < ELEMENTSOF(limit_descs); i++) {
		const struct limit_desc *d = &limit_descs[i];

		if (!(req & d->bit) || (ctx->info->usable & (1u << d->ctrl)))
			continue;
		bad |= d->bit;
		if (ret_reasons)
			(void)strv_push(&reasons, ctx_limitation(ctx, d->ctrl, d->what));
	}
	if (ret_reasons)
		*ret_reasons = reasons;
	return bad;
}

static int xattr_key_ok(const char *key)
{
	if (!key || !*key || strlen(key) > 64)
		return -EINVAL;
	for (const char *p = key; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) ||
		      strchr("_.-", *p)))
			return -EINVAL;
	return 0;
}

static int set_meta(const char *dir, const char *key, const char *value)
{
	_cleanup_free_ char *name = strdup_printf(XATTR_PREFIX "%s", key);

	if (!name)
		return -ENOMEM;
	return cgfs_xattr_set(dir, name, value);
}

static int get_meta(const char *dir, const char *key, char **ret)
{
	_cleanup_free_ char *name = strdup_printf(XATTR_PREFIX "%s", key);

	if (!name)
		return -ENOMEM;
	return cgfs_xattr_get(dir, name, ret);
}

/* Whether @dir is known to lack the mark @key (-ENODATA); a mark that cannot be read counts as
 * there. Leaves the error record as it was. */
static bool meta_absent(const char *dir, const char *key)
{
	struct jobcg_error saved = *jobcg_last_error();
	_cleanup_free_ char *v = NULL;
	bool absent = get_meta(dir, key, &v) == -ENODATA;

	jobcg_error_restore(&saved);
	return absent;
}

/* get_meta() for the public getters, which set the record on every failure: without it, a
 * caller's message would be an earlier failure's with the same code. @what names the job or
 * step ("job 4", "step 4.0"). */
static int get_meta_told(const char *dir, const char *what, const char *key, char **ret)
{
	int r = get_meta(dir, key, ret);

	if (r == -ENOENT)
		return error_set(r, "no %s", what);
	if (r == -ENODATA)
		return error_set(r, "%s has no attribute " XATTR_PREFIX "%s", what, key);
	if (r == -ENOMEM)
		return error_set(r, "out of memory");
	return r;
}

JOBCG_EXPORT int jobcg_job_xattr_set(struct jobcg_ctx *ctx, uint32_t job_id, const char *key,
				     const char *value)
{
	_cleanup_free_ char *dir = tree_job_dir(ctx, job_id);

	if (xattr_key_ok(key) < 0)
		return error_set(-EINVAL, "invalid job xattr key '%s'", key ? key : "");
	if (!dir)
		return -ENOMEM;
	return set_meta(dir, key, value);
}

JOBCG_EXPORT int jobcg_job_xattr_get(struct jobcg_ctx *ctx, uint32_t job_id, const char *key,
				     char **ret)
{
	_cleanup_free_ char *dir = tree_job_dir(ctx, job_id), *what = NULL;

	if (xattr_key_ok(key) < 0)
		return error_set(-EINVAL, "invalid job xattr key '%s'", key ? key : "");
	if (!dir || !(what = strdup_printf("job %" PRIu32, job_id)))
		return -ENOMEM;
	return get_meta_told(dir, what, key, ret);
}

/*
 * Is @dir an ephemeral job (`jobcg run`'s own)? jobcg writes the mark as "1"; any value counts,
 * so that `list`, `adopt`, step creation and gc, which removes such a job once its runner is
 * gone, agree about a hand-edited one.
 */
static bool job_ephemeral(const char *dir)
{
	_cleanup_free_ char *v = NULL;

	return get_meta(dir, "ephemeral", &v) == 0;
}

/* A number jobcg wrote into trusted.jobcg.KEY of DIR, 0 when absent. One that does not parse
 * (corrupted, or written by hand) is logged, naming the cgroup and attribute, and read as
 * absent: callers fall back on what the kernel says (memory.max) or show nothing. */
static uint64_t meta_u64(const char *dir, const char *key)
{
	_cleanup_free_ char *s = NULL;
	uint64_t v = 0;

	if (get_meta(dir, key, &s) < 0) {
		jobcg_error_clear();
		return 0;
	}
	if (parse_u64(s, UINT64_MAX, &v) < 0) {
		log_warning("%s: " XATTR_PREFIX "%s '%s' is not a number: ignored", dir, key, s);
		jobcg_error_clear();
		return 0;
	}
	return v;
}

static int write_mem_value(const char *dir, const char *file, uint64_t v)
{
	char buf[32];

	if (v == JOBCG_MEM_UNLIMITED)
		snprintf(buf, sizeof(buf), "max");
	else
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return cgfs_write(dir, file, buf);
}

/*
 * Admission for reservations' memory: memory.min protects, it does not set aside. A job outside
 * every reservation is capped as if the node's RAM were smaller by what they keep, so that the
 * jobs outside can never take it.
 */
static int outside_resv_ram(struct jobcg_ctx *ctx, const char *dir, uint64_t *ram)
{
	_cleanup_free_ char *resv = tree_job_resv(ctx, dir);
	uint64_t held = 0;
	int r;

	if (resv)
		return 0;
	if ((r = resv_mem_held(ctx, &held)) < 0)
		return r;
	if (!held)
		return 0;
	if (held >= *ram)
		return error_set(-EINVAL, "reservations keep %llu MiB of the node's %llu MiB",
				 (unsigned long long)(held >> 20),
				 (unsigned long long)(*ram >> 20));
	*ram -= held;
	return 0;
}

/*
 * memory.max / memory.high / memory.swap.max by Slurm's formulas (memlimit.h). An explicit
 * memory request is a limit even with ConstrainRAMSpace=no; swap only with ConstrainSwapSpace.
 */
static int mem_limits_write(struct jobcg_ctx *ctx, const char *dir, uint64_t mem)
{
	struct jobcg_mem_limits m;
	uint64_t ram;
	int r;

	r = jobcg_node_ram(&ram);
	if (r < 0)
		return r;
	r = outside_resv_ram(ctx, dir, &ram);
	if (r < 0)
		return r;
	r = jobcg_mem_limits_compute(&ctx->conf->cgroup, mem, ram, &m);
	if (r < 0)
		return r;
	if ((r = write_mem_value(dir, "memory.max", m.max)) < 0 ||
	    (r = write_mem_value(dir, "memory.high", m.high)) < 0)
		return r;
	if (m.set_swap && (r = write_mem_value(dir, "memory.swap.max", m.swap_max)) < 0)
		return r;
	return 0;
}

/*
 * Resource specialisation: a job that names no CPUs gets every CPU but the reserved ones, one
 * that names no memory is still capped at the node's RAM minus MemSpecLimit. Not enforceable
 * here => refused unless best effort, as any limit.
 */
static int spec_attach(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir,
		       const struct jobcg_limits *l, unsigned req, char **skipped)
{
	const struct jobcg_cgroup_conf *c = &ctx->conf->cgroup;
	static const struct {
		unsigned bit, ctrl;
		const char *key, *what;
	} parts[] = {
	    {JOBCG_LIMIT_CPUS, JOBCG_CTRL_CPUSET, "spec_cpus",
	     "the CPUs reserved for the system (SpecCPUs/CoreSpecCount)"},
	    {JOBCG_LIMIT_MEM, JOBCG_CTRL_MEMORY, "spec_mem",
	     "the memory reserved for the system (MemSpecLimit)"},
	};
	_cleanup_free_ char *resv_cpus = NULL;
	uint64_t resv_mem = 0;
	int r;

	/* Reservations' CPUs: a job outside never has one in its cpuset.cpus (a sibling's
	 * overlapping cpuset.cpus invalidates a partition), one inside gets its reservation's. */
	if (!(req & JOBCG_LIMIT_CPUS) && (ctx->info->usable & (1u << JOBCG_CTRL_CPUSET)) &&
	    (r = resv_job_cpus(ctx, l ? l->reservation : NULL, NULL, &resv_cpus)) < 0)
		return r;
	/* What reservations keep caps a job outside them (a reservation of unknown size fails). */
	if (!(l && l->reservation) && (r = resv_mem_held(ctx, &resv_mem)) < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
		bool on = parts[i].bit == JOBCG_LIMIT_CPUS
			      ? jobcg_spec_cpus_configured(c) || resv_cpus
			      : c->mem_spec_limit > 0 || resv_mem;

		/* A job's own --cpus/--mem was checked or capped already. */
		if (!on || (req & parts[i].bit))
			continue;
		if (!(ctx->info->usable & (1u << parts[i].ctrl))) {
			_cleanup_free_ char *why =
			    ctx_limitation(ctx, parts[i].ctrl, parts[i].what);
			char *ns;

			if (!l || !l->best_effort)
				return error_set(-EOPNOTSUPP,
						 "%s (use --best-effort to run anyway)",
						 why ? why : parts[i].what);
			log_warning("job %u: %s (best effort: not applied)", job_id,
				    why ? why : parts[i].key);
			ns = strdup_printf("%s%s%s", *skipped, **skipped ? "," : "", parts[i].key);
			if (!ns)
				return -ENOMEM;
			free(*skipped);
			*skipped = ns;
			continue;
		}
		if (parts[i].bit == JOBCG_LIMIT_MEM) {
			r = mem_limits_write(ctx, job_dir, 0);
		} else {
			_cleanup_free_ char *online = NULL, *cpus = NULL;

			if (resv_cpus)
				r = cgfs_write(job_dir, "cpuset.cpus", resv_cpus);
			else if ((r = jobcg_online_cpus(&online)) < 0 ||
				 (r = jobcg_spec_job_cpus(c, online, &cpus)) < 0)
				return r;
			else
				r = cgfs_write(job_dir, "cpuset.cpus", cpus);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* The built-in hook: cpuset.cpus, memory.max and pids.max on job_<id>/. */
static int limits_attach(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir,
			 const struct jobcg_limits *l)
{
	unsigned req = limits_requested(l);
	char buf[32];
	_cleanup_free_ char *skipped = strdup("");
	int r;

	if (!skipped)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(limit_descs); i++) {
		const struct limit_desc *d = &limit_descs[i];
		const char *file, *value;

		if (!(req & d->bit))
			continue;
		if (!(ctx->info->usable & (1u << d->ctrl))) {
			_cleanup_free_ char *why = ctx_limitation(ctx, d->ctrl, d->what);
			char *ns;

			if (!l->best_effort)
				return error_set(-EOPNOTSUPP, "%s",
						 why ? why : "limit cannot be enforced");
			log_warning("job %u: %s (best effort: not applied)", job_id,
				    why ? why : d->key);
			ns = strdup_printf("%s%s%s", skipped, *skipped ? "," : "", d->key);
			if (!ns)
				return -ENOMEM;
			free(skipped);
			skipped = ns;
			continue;
		}
		if (d->bit == JOBCG_LIMIT_CPUS) {
			file = "cpuset.cpus";
			value = l->cpus;
		} else if (d->bit == JOBCG_LIMIT_MEM) {
			r = mem_limits_write(ctx, job_dir, l->mem_bytes);
			if (r < 0)
				return r;
			continue;
		} else if (d->bit == JOBCG_LIMIT_CPU_WEIGHT) {
			file = "cpu.weight";
			snprintf(buf, sizeof(buf), "%llu", (unsigned long long)l->cpu_weight);
			value = buf;
		} else {
			file = "pids.max";
			snprintf(buf, sizeof(buf), "%llu", (unsigned long long)l->pids_max);
			value = buf;
		}
		r = cgfs_write(job_dir, file, value);
		if (r < 0)
			return r;
	}
	r = spec_attach(ctx, job_id, job_dir, l, req, &skipped);
	if (r < 0)
		return r;
	if (*skipped && ctx->info->xattr.supported)
		return set_meta(job_dir, "skipped", skipped);
	return 0;
}

static const struct job_hook limits_hook = {
    .name = "limits",
    .attach = limits_attach,
};

/*
 * Extension hooks in the order they attach. Device access (eBPF) and GPU selection go here,
 * after the limits.
 */
static const struct job_hook *const job_hooks[] = {
    &limits_hook,
    &gres_job_hook,
};

static void hooks_detach(struct jobcg_ctx *ctx, uint32_t job_id, const char *dir, size_t upto)
{
	while (upto-- > 0)
		if (job_hooks[upto]->detach)
			job_hooks[upto]->detach(ctx, job_id, dir);
}

static int job_ids(struct jobcg_ctx *ctx, uint32_t **ret, size_t *ret_n)
{
	_cleanup_strv_free_ char **kids = NULL;
	_cleanup_free_ uint32_t *ids = NULL;
	size_t n = 0;
	int r;

	r = cgfs_children(jobcg_ctx_root(ctx), &kids);
	if (r == -ENOENT) {
		*ret = NULL;
		*ret_n = 0;
		return 0;
	}
	if (r < 0)
		return r;
	ids = calloc(strv_length(kids) + 1, sizeof(uint32_t));
	if (!ids)
		return -ENOMEM;
	for (char **k = kids; *k; k++) {
		_cleanup_strv_free_ char **inner = NULL;
		_cleanup_free_ char *rdir = NULL;
		const char *rname;
		uint32_t id, *more;

		if (tree_parse_job_dirname(*k, &id) == 0) {
			ids[n++] = id;
			continue;
		}
		/* The jobs inside a reservation are the node's jobs too. */
		if (tree_parse_resv_dirname(*k, &rname) < 0)
			continue;
		if (!(rdir = cgfs_path(jobcg_ctx_root(ctx), *k)))
			return -ENOMEM;
		r = cgfs_children(rdir, &inner);
		if (r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		more =
		    realloc(ids, (strv_length(kids) + n + strv_length(inner) + 1) * sizeof(*ids));
		if (!more)
			return -ENOMEM;
		ids = more;
		for (char **j = inner; *j; j++)
			if (tree_parse_job_dirname(*j, &id) == 0)
				ids[n++] = id;
	}
	for (size_t i = 1; i < n; i++) /* insertion sort: names sort as strings, ids as numbers */
		for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			uint32_t t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	*ret = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}

JOBCG_EXPORT int jobcg_job_list(struct jobcg_ctx *ctx, uint32_t **ret_ids, size_t *ret_n)
{
	return job_ids(ctx, ret_ids, ret_n);
}

#define EPHEMERAL_ID_MAX       4294967294u /* UINT32_MAX is no job id */
#define EPHEMERAL_COUNTER_FILE "ephemeral-next"

static bool id_taken(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/*
 * The id of a new ephemeral job, under the node lock. A counter beside the lock counts up over
 * time, wrapping within the ephemeral range and skipping ids in use, so that an id in the
 * accounting log names one job rather than whichever ran when the tree was idle. Where the
 * counter cannot be kept (no state directory), one past the highest id in use.
 */
static int pick_ephemeral_id(struct jobcg_ctx *ctx, uint32_t *ret)
{
	_cleanup_free_ uint32_t *ids = NULL;
	_cleanup_free_ char *path = NULL, *text = NULL;
	size_t n = 0;
	uint32_t next = JOBCG_JOB_ID_EPHEMERAL_BASE;
	int r;

	r = job_ids(ctx, &ids, &n);
	if (r < 0)
		return r;
	if (ctx_state_dir_ready(ctx) >= 0 && (path = ctx_state_file(ctx, EPHEMERAL_COUNTER_FILE)))
		(void)read_full_file_at(AT_FDCWD, path, 64, &text, NULL); /* missing: the base */
	jobcg_error_clear();
	if (path) {
		char buf[32];
		uint64_t v;

		if (text && parse_u64(strstrip(text), UINT32_MAX, &v) == 0)
			next = (uint32_t)v;
		for (size_t i = 0; i <= n; i++) {
			if (next < JOBCG_JOB_ID_EPHEMERAL_BASE || next > EPHEMERAL_ID_MAX)
				next = JOBCG_JOB_ID_EPHEMERAL_BASE;
			if (!id_taken(ids, n, next))
				break;
			next++;
		}
		snprintf(buf, sizeof(buf), "%u\n",
			 next >= EPHEMERAL_ID_MAX ? JOBCG_JOB_ID_EPHEMERAL_BASE : next + 1);
		/* Replaced whole and durable before the id is used: after a crash the counter
		 * is never behind an id a (fsynced) job record names. Best effort: a counter
		 * lost counts from the base again, skipping ids in use. */
		if ((r = write_file_atomic(path, buf, 0600, WRITE_ATOMIC_SYNC)) < 0)
			log_debug("cannot write %s: %s", path, strerror(-r));
		*ret = next;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (ids[i] >= next)
			next = ids[i] + 1;
	if (next > EPHEMERAL_ID_MAX || next < JOBCG_JOB_ID_EPHEMERAL_BASE) {
		/* the top is taken: the lowest free id above the base */
		next = JOBCG_JOB_ID_EPHEMERAL_BASE;
		while (id_taken(ids, n, next))
			next++;
	}
	*ret = next;
	return 0;
}

static int write_job_meta(struct jobcg_ctx *ctx, const char *dir, const struct jobcg_limits *l,
			  unsigned flags)
{
	char buf[64];
	int r;

	/* The owner a scheduler names (--uid/--gid), else whoever created the job. */
	snprintf(buf, sizeof(buf), "%u:%u",
		 l && l->have_owner ? (unsigned)l->uid : (unsigned)getuid(),
		 l && l->have_owner ? (unsigned)l->gid : (unsigned)getgid());
	if ((r = set_meta(dir, "owner", buf)) < 0)
		return r;
	if (l && l->cpus && *l->cpus && (r = set_meta(dir, "cpus", l->cpus)) < 0)
		return r;
	if (l && l->mem_bytes) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)l->mem_bytes);
		if ((r = set_meta(dir, "mem", buf)) < 0)
			return r;
	}
	if (l && l->pids_max) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)l->pids_max);
		if ((r = set_meta(dir, "pids", buf)) < 0)
			return r;
	}
	if (l && l->best_effort && (r = set_meta(dir, "best_effort", "1")) < 0)
		return r;
	if ((flags & JOBCG_JOB_SLURM) && (r = set_meta(dir, "slurm", "1")) < 0)
		return r;
	if (flags & JOBCG_JOB_EPHEMERAL) {
		_cleanup_free_ char *me = tree_runner_self();

		if (!me)
			return -ENOMEM;
		if ((r = set_meta(dir, "ephemeral", "1")) < 0 ||
		    (r = set_meta(dir, "runner", me)) < 0)
			return r;
	}
	return 0;
}

static int job_create_locked(struct jobcg_ctx *ctx, uint32_t job_id,
			     const struct jobcg_limits *limits, unsigned flags, uint32_t *ret)
{
	_cleanup_free_ char *dir = NULL, *resv_cpus = NULL;
	size_t attached = 0;
	bool meta = ctx->info->xattr.supported;
	char buf[32];
	int r;

	r = jobcg_ctx_ensure_tree(ctx);
	if (r < 0)
		return r;
	if (job_id == JOBCG_JOB_ID_AUTO) {
		r = pick_ephemeral_id(ctx, &job_id);
		if (r < 0)
			return r;
	}
	/* Looked up afresh under the lock: a remembered place (inside a reservation) may be that
	 * of a job another process has removed since, and a new job made there would enter the
	 * reservation without being admitted. */
	ctx_jobdir_forget(ctx, job_id);
	dir = tree_job_dir(ctx, job_id);
	if (!dir)
		return -ENOMEM;
	/* An id names one job on the node, wherever it lives. */
	if (access(dir, F_OK) == 0)
		return error_set(-EEXIST, "job %u already exists (%s)", job_id, dir);
	if (limits && limits->cpus && *limits->cpus &&
	    (r = resv_job_cpus(ctx, limits->reservation, limits->cpus, &resv_cpus)) < 0)
		return r;
	if (limits && limits->reservation) {
		_cleanup_free_ char *rdir = NULL;

		if ((r = resv_admit(ctx, limits->reservation, limits, &rdir)) < 0)
			return r;
		free(dir);
		if (!(dir = strdup_printf("%s/job_%u", rdir, job_id)))
			return -ENOMEM;
	}
	r = cgfs_mkdir(dir, false);
	if (r == -EEXIST)
		return error_set(-EEXIST, "job %u already exists (%s)", job_id, dir);
	if (r < 0)
		return r;
	if (meta && (r = write_job_meta(ctx, dir, limits, flags)) < 0)
		goto undo;
	/* The job directory holds no process, so its children can get controllers now. */
	r = cgfs_enable(dir, ctx->want, NULL);
	if (r < 0)
		goto undo;
	for (; attached < ELEMENTSOF(job_hooks); attached++) {
		const struct job_hook *h = job_hooks[attached];

		if (!h->attach)
			continue;
		r = h->attach(ctx, job_id, dir, limits);
		if (r < 0) {
			jobcg_error_prefix("job %u: %s", job_id, h->name);
			goto undo;
		}
	}
	/* Last: the mark that the job is complete (gc sweeps job dirs without it). */
	test_pause("job-create-before-mark");
	snprintf(buf, sizeof(buf), "%lld", (long long)time(NULL));
	if (meta && test_flag("job-mark-fails")) {
		r = error_set(-EIO, "job %u: cannot mark it complete (test flag job-mark-fails)",
			      job_id);
		goto undo;
	}
	if (meta && (r = set_meta(dir, "created", buf)) < 0)
		goto undo;
	log_info("created job %u at %s", job_id, dir);
	if (ret)
		*ret = job_id;
	return 0;
undo : {
	struct jobcg_error saved = *jobcg_last_error();

	hooks_detach(ctx, job_id, dir, attached);
	if (tree_kill_and_remove(dir) < 0)
		log_warning("rollback: %s", jobcg_last_error()->message);
	jobcg_error_restore(&saved);
}
	return r;
}

/* A --cpus list as the kernel would print it ("0,0,0" is "0"): what is written, recorded and
 * shown is the set asked for, in the fewest bytes. */
static int cpus_canonical(const char *in, char **ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	size_t words = 0;
	int r = jobcg_parse_cpulist(in, &bits, &words);

	if (r < 0)
		return error_set(r, "--cpus %s: %s", in, jobcg_last_error()->message);
	return jobcg_format_cpulist(bits, words, ret);
}

/*
 * What the configuration alone refuses, checked before the tree is made for it: more devices
 * than gres.conf has at all, a reservation in a tree that does not exist. The full checks
 * (devices free now, the reservation's rules) follow under the lock.
 */
static int create_precheck(struct jobcg_ctx *ctx, uint32_t job_id, const struct jobcg_limits *l)
{
	struct jobcg_gres_node *n = NULL;
	struct jobcg_gres_request *req = NULL;
	struct jobcg_gres_set all, got;
	int r;

	if (!l)
		return 0;
	if (l->reservation && access(jobcg_ctx_root(ctx), F_OK) < 0 && errno == ENOENT)
		return error_set(-ENOENT, "no reservation %s", l->reservation);
	if (!l->gres || !*l->gres)
		return 0;
	/* A bad request or configuration is left to the hook, which words it in full. */
	if (jobcg_gres_request_parse(l->gres, &req) < 0 || gres_node_open(ctx, &n) < 0 ||
	    jobcg_gres_node_count(n) == 0) {
		jobcg_error_clear();
		r = 0;
		goto out;
	}
	jobcg_gres_node_all(n, NULL, &all);
	r = jobcg_gres_select(n, req, &all, NULL, 0, &got);
	if ((r == -ENOSPC || r == -ENOENT) && job_id == JOBCG_JOB_ID_AUTO)
		jobcg_error_prefix("gres");
	else if (r == -ENOSPC || r == -ENOENT)
		jobcg_error_prefix("job %u: gres", job_id);
	else {
		jobcg_error_clear();
		r = 0;
	}
out:
	jobcg_gres_request_free(req);
	jobcg_gres_node_free(n);
	return r;
}

JOBCG_EXPORT int jobcg_job_create(struct jobcg_ctx *ctx, uint32_t job_id,
				  const struct jobcg_limits *limits, unsigned flags,
				  uint32_t *ret_job_id)
{
	_cleanup_free_ char *cpus = NULL;
	struct jobcg_limits canon;
	int r;

	if (job_id == UINT32_MAX)
		return error_set(-EINVAL, "invalid job id %u", job_id);
	/* Refused rather than ignored: a bit this version does not know may be a request that
	 * it would silently not honour. */
	if (flags & ~(unsigned)(JOBCG_JOB_EPHEMERAL | JOBCG_JOB_SLURM))
		return error_set(-EINVAL, "unknown job flags 0x%x", flags);
	if ((r = ctx_refuse_cgroup_broken(ctx)) < 0 || (r = gres_refuse_broken(ctx)) < 0)
		return r;
	if (limits && limits->cpus && *limits->cpus) {
		if ((r = cpus_canonical(limits->cpus, &cpus)) < 0)
			return r;
		canon = *limits;
		canon.cpus = cpus;
		limits = &canon;
	}
	if ((r = create_precheck(ctx, job_id, limits)) < 0)
		return r;
	/* Before anything is made: a reserved CPU is never a job's, enforceable here or not. */
	if (limits && limits->cpus && *limits->cpus &&
	    jobcg_spec_cpus_configured(&ctx->conf->cgroup)) {
		_cleanup_free_ char *online = NULL;

		if ((r = jobcg_online_cpus(&online)) < 0 ||
		    (r = jobcg_spec_check_cpus(&ctx->conf->cgroup, online, limits->cpus)) < 0)
			return r;
	}
	r = jobcg_ctx_lock(ctx);
	if (r < 0)
		return r;
	r = job_create_locked(ctx, job_id, limits, flags, ret_job_id);
	jobcg_ctx_unlock(ctx);
	return r;
}

/*
 * Kill every process in DIR and wait until it is empty. The wait (up to TREE_KILL_TIMEOUT_MS
 * per round, for processes in D state) runs without the node lock when this is its only hold,
 * so that launches and logins do not queue behind it; nothing new can enter meanwhile, since
 * step creation, adoption and pid moves refuse a job marked "removing" under the lock, and a
 * runner's own late clone3 is caught by the next round. Returns with the lock held again.
 */
static int kill_outside_lock(struct jobcg_ctx *ctx, const char *dir)
{
	for (int round = 0; round < 3; round++) {
		bool suspended;
		int r = tree_kill(dir, 0), w;

		if (r != -ETIMEDOUT)
			return r; /* empty (or gone), or an error */
		suspended = ctx_lock_suspend(ctx);
		test_pause("kill-unlocked");
		w = cgfs_wait_events(dir, "populated", 0, TREE_KILL_TIMEOUT_MS);
		if ((r = ctx_lock_resume(ctx, suspended)) < 0)
			return r;
		if (w < 0 && w != -ETIMEDOUT)
			return w;
	}
	return tree_kill(dir, 0);
}

/* How long a removal waits for a launch under way in its job to have started its tasks. */
#define JOB_REMOVE_LOCK_TIMEOUT_MS 10000

/* How a removal ends, stored in the "removing" mark with the remover (pid:starttime), so that
 * gc, finishing a removal whose remover died, records what the remover meant to. OUT_UNMADE: a
 * job whose creation never finished (no "created" mark), which nothing ever ran in. */
static const char *const outcome_names[] = {"completed", "cancelled", "lost", "failed", "unmade"};

/* The record of an OUT_UNMADE job: FAILED, not NODE_FAIL (the node did not fail: a creation
 * did), no exit code (no process of it ever exited), and why. */
#define UNMADE_REASON                                                                              \
	"its creation never finished (the command making it died, or could not undo it): nothing " \
	"ran in it"

static int removing_mark(enum outcome o, char **ret)
{
	_cleanup_free_ char *me = tree_runner_self();

	if (!me)
		return -ENOMEM;
	*ret = strdup_printf("%s %s", outcome_names[o], me);
	return *ret ? 0 : -ENOMEM;
}

void job_removing_parse(const char *mark, enum outcome *ret_outcome, const char **ret_remover)
{
	*ret_outcome = OUT_LOST;
	*ret_remover = NULL;
	for (size_t i = 0; i < ELEMENTSOF(outcome_names); i++) {
		size_t n = strlen(outcome_names[i]);

		if (strncmp(mark, outcome_names[i], n) == 0 && mark[n] == ' ') {
			*ret_outcome = (enum outcome)i;
			*ret_remover = mark + n + 1;
		}
	}
}

/* Is the removal marked by MARK under way in a live process other than this one? */
static bool removal_in_progress(const char *mark)
{
	_cleanup_free_ char *me = tree_runner_self();
	const char *remover;
	enum outcome o;

	job_removing_parse(mark, &o, &remover);
	return remover && me && !streq(remover, me) && tree_runner_alive(remover);
}

bool job_removal_by_another(struct jobcg_ctx *ctx, uint32_t job_id)
{
	_cleanup_free_ char *dir = tree_job_dir(ctx, job_id), *mark = NULL;

	return dir && get_meta(dir, "removing", &mark) == 0 && removal_in_progress(mark);
}

/* The refusal of a second remover while MARK's (removal_in_progress()) lives. */
static int removal_refused(uint32_t job_id, const char *mark)
{
	const char *remover;
	enum outcome o;

	job_removing_parse(mark, &o, &remover);
	return error_set(-EINPROGRESS, "job %u is being released by another jobcg (process %.*s)",
			 job_id, remover ? (int)strcspn(remover, ":") : 1, remover ? remover : "?");
}

int job_mark_releasing(struct jobcg_ctx *ctx, uint32_t job_id)
{
	_cleanup_free_ char *dir = NULL, *prev = NULL, *mark = NULL;
	int r = jobcg_ctx_lock(ctx);

	if (r < 0)
		return r;
	if (!(dir = tree_job_dir(ctx, job_id)))
		r = -ENOMEM;
	else if (access(dir, F_OK) < 0)
		r = error_set(-ENOENT, "no job %u (%s)", job_id, dir);
	else if (get_meta(dir, "removing", &prev) == 0 && removal_in_progress(prev))
		r = removal_refused(job_id, prev);
	else if ((r = removing_mark(OUT_CANCELLED, &mark)) >= 0)
		r = set_meta(dir, "removing", mark);
	jobcg_ctx_unlock(ctx);
	return r;
}

/* A step's record that a job removal writes once the step's directory is gone. */
struct step_pending {
	char *sdir;
	struct acct_pending rec;
};

static void steps_pending_free(struct step_pending *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].sdir);
		acct_pending_done(&v[i].rec);
	}
	free(v);
}

/* What ended the steps of a job removal: the signals their records say. */
struct removal_signals {
	char **steps;		  /* the job's steps, listed (under its mark) before the kill */
	bool *killed;		  /* steps[i] had processes when the removal killed them */
	int grace_sig;		  /* sent before, during a grace period (0: none) */
	char *const *grace_steps; /* the steps that had processes then */
};

static void removal_signals_done(struct removal_signals *s)
{
	strv_free(s->steps);
	free(s->killed);
}

/* The job's steps and which of them the kill about to come ends. */
static int steps_running(struct jobcg_ctx *ctx, uint32_t job_id, bool job_populated,
			 struct removal_signals *s)
{
	size_t n;
	int r = jobcg_step_list(ctx, job_id, &s->steps);

	if (r < 0)
		return r;
	n = strv_length(s->steps);
	if (!(s->killed = calloc(n + 1, sizeof(bool))))
		return -ENOMEM;
	for (size_t i = 0; job_populated && i < n; i++) {
		_cleanup_free_ char *sdir = tree_step_dir(ctx, job_id, s->steps[i]);
		bool populated = false;

		if (!sdir)
			return -ENOMEM;
		s->killed[i] = cgfs_events(sdir, &populated, NULL) == 0 && populated;
	}
	jobcg_error_clear();
	return 0;
}

/*
 * The records of the steps a job's removal takes with it, read after its processes are gone
 * and while the lock is held until the directories go: each step a runner began (a runner
 * finding its step gone writes nothing, so this is its only record): CANCELLED when its
 * runner lives (the job was ended under it), NODE_FAIL when it died. Steps of no runner (the
 * extern step of logins) and half-made ones have none. A live runner's step says the signal
 * that ended it (@sig), as that runner would have.
 */
static int steps_prepare(struct jobcg_ctx *ctx, uint32_t job_id, const struct removal_signals *sig,
			 unsigned incarnation, struct step_pending **ret, size_t *ret_n)
{
	struct step_pending *v;
	size_t n = 0;

	if (!(v = calloc(strv_length(sig->steps) + 1, sizeof(*v))))
		return -ENOMEM;
	for (size_t i = 0; sig->steps[i]; i++) {
		char *const *s = &sig->steps[i];
		_cleanup_free_ char *sdir = tree_step_dir(ctx, job_id, *s), *runner = NULL;
		struct jobcg_acct a = {};
		int signo = 0;
		bool alive;

		if (!sdir) {
			steps_pending_free(v, n);
			return -ENOMEM;
		}
		/* Its ender saw it end and set its record aside, but could not remove it. */
		int k = acct_pending_step_take(ctx, job_id, *s, sdir, &v[n].rec);

		if (k < 0) {
			steps_pending_free(v, n);
			return k;
		}
		if (k == 1) {
			v[n++].sdir = TAKE_PTR(sdir);
			continue;
		}
		/* (one never completely made ran no task: no record) */
		if (get_meta(sdir, "runner", &runner) < 0 || meta_absent(sdir, "created") ||
		    jobcg_acct_read_dir(sdir, &a) < 0) {
			jobcg_error_clear();
			continue;
		}
		alive = tree_runner_alive(runner);
		/* The signal its runner would have seen its tasks die of. (A step that ran
		 * nothing any more had ended before the release: how, only its runner knew.) */
		if (alive)
			signo = sig->killed[i] ? SIGKILL
				: sig->grace_sig && strv_contains(sig->grace_steps, *s)
				    ? sig->grace_sig
				    : 0;
		if (acct_log_prepare(ctx, job_id, *s, 0, alive ? 0 : -1, signo, 0, alive, &a,
				     &v[n].rec) < 0) {
			log_warning("step %u.%s: accounting record not written: %s", job_id, *s,
				    jobcg_last_error()->message);
			continue;
		}
		v[n++].sdir = TAKE_PTR(sdir);
	}
	/* The job's directory goes with theirs: each waits in a file of the state directory. */
	for (size_t i = 0; i < n; i++)
		acct_pending_store(ctx, &v[i].rec, v[i].sdir, ACCT_PENDING_IN_STATE_DIR,
				   incarnation);
	*ret = v;
	*ret_n = n;
	return 0;
}

/* Write the records of the steps whose directories are gone. */
static void steps_commit(struct jobcg_ctx *ctx, uint32_t job_id, struct step_pending *v, size_t n)
{
	struct jobcg_error saved = *jobcg_last_error();

	for (size_t i = 0; i < n; i++)
		if (access(v[i].sdir, F_OK) == 0)
			acct_pending_discard(&v[i].rec); /* recorded when it goes */
		else if (acct_log_commit(ctx, &v[i].rec) < 0)
			log_warning("step %u.%s: accounting record not written: %s%s%s%s", job_id,
				    v[i].rec.sid, jobcg_last_error()->message,
				    v[i].rec.holder ? " (kept in " : "",
				    v[i].rec.holder ? v[i].rec.holder : "",
				    v[i].rec.holder ? " for jobcg gc)" : "");
	jobcg_error_restore(&saved);
}

/*
 * Remove a job: mark it "removing" (no new step or process may enter from then on), kill its
 * processes (waiting without the lock), read its accounting, remove its directories, and only
 * then write its record and revoke its device grants. A failure anywhere leaves the job marked
 * with everything it held (its grants included: a process still inside never runs without
 * them) and without a record; gc finishes it later, once, with the outcome the mark names.
 * The records are set aside before the rmdir (acct_pending_store()): a remover killed after it
 * leaves them to gc. OUTCOME: what to record; from gc, taken from the mark when a dead remover
 * left one. SIG: the grace period's signal, if any (its steps are filled in here).
 */
static int job_remove_dir_signals(struct jobcg_ctx *ctx, uint32_t job_id, enum outcome outcome,
				  bool from_gc, bool record, struct removal_signals *sig)
{
	_cleanup_free_ char *dir = tree_job_dir(ctx, job_id), *prev = NULL, *mark = NULL,
			    *created = NULL;
	void *states[ELEMENTSOF(job_hooks)] = {NULL};
	struct acct_pending rec = {};
	struct jobcg_acct a = {};
	struct step_pending *steps = NULL;
	size_t nsteps = 0;
	bool populated = false, have_rec = false, meta = ctx->info->xattr.supported;
	_cleanup_close_ int jlock = -1;
	unsigned incarnation = 0;
	int r;

	if (!dir)
		return -ENOMEM;
	if (access(dir, F_OK) < 0)
		return error_set(-ENOENT, "no job %u (%s)", job_id, dir);
	if (meta && get_meta(dir, "removing", &prev) == 0) {
		const char *remover;
		enum outcome o;

		if (removal_in_progress(prev))
			return removal_refused(job_id, prev);
		job_removing_parse(prev, &o, &remover);
		if (from_gc && remover)
			outcome = o; /* what the dead remover was recording */
	}
	if (meta &&
	    ((r = removing_mark(outcome, &mark)) < 0 || (r = set_meta(dir, "removing", mark)) < 0))
		return r;
	/* A launch past its checks before the mark may still be on its way to clone3 into the
	 * job (spawn.c, spawn_lock()): the job's lock, held as a kill holds it, waits for its tasks
	 * to be there to be killed, and a launch after that gets it only once the directories
	 * are gone, and fails. A spawner holding it longer (stopped) does not hold the removal
	 * up: a task it starts late makes the removal fail, and gc finishes it. */
	if ((r = job_lock(ctx, dir, job_id, JOB_LOCK_EXCLUSIVE, JOB_REMOVE_LOCK_TIMEOUT_MS, &jlock,
			  NULL)) < 0) {
		log_debug("removing job %u without waiting for a launch in it: %s", job_id,
			  r == -ETIMEDOUT ? "it takes too long" : jobcg_error_message(r));
		jobcg_error_clear();
	}
	(void)cgfs_events(dir, &populated, NULL);
	/* Under the mark no step begins: the list holds every step the removal takes. */
	if (meta && (r = steps_running(ctx, job_id, populated, sig)) < 0)
		return r;
	r = kill_outside_lock(ctx, dir);
	if (r < 0)
		return r;
	if (access(dir, F_OK) < 0)
		return error_set(-ENOENT, "job %u was removed meanwhile (%s)", job_id, dir);
	if (outcome == OUT_COMPLETED && populated)
		outcome = OUT_CANCELLED; /* processes were still running */
	/* Under the lock no creation is under way: one without its mark died half way, and no
	 * step or process can have entered it (both need the mark), whoever removes it now. */
	if (meta && get_meta(dir, "created", &created) == -ENODATA && !populated)
		outcome = OUT_UNMADE;
	/* Set aside after what earlier jobs of this id left there. */
	if (meta && (r = acct_pending_job_begin(ctx, job_id, &incarnation)) < 0)
		return r;
	/* What killed step writers left on the directory, before it goes with it. One neither
	 * written nor kept would go with the directory: the job stays (marked) for gc instead. */
	if (meta && (r = acct_pending_flush_job(ctx, job_id, true, incarnation, NULL)) < 0) {
		jobcg_error_prefix("job %u: not removed, left for jobcg gc", job_id);
		return r;
	}
	/* Read while the directories exist; written only once they are gone, so never twice. The
	 * steps first: the job's record ends no earlier than theirs. */
	if (meta && (r = steps_prepare(ctx, job_id, sig, incarnation, &steps, &nsteps)) < 0)
		return r;
	have_rec = meta && record && jobcg_acct_read_dir(dir, &a) == 0 &&
		   acct_log_prepare(ctx, job_id, NULL, 0,
				    outcome == OUT_LOST || outcome == OUT_UNMADE ? -1
				    : outcome == OUT_FAILED			 ? 1
										 : 0,
				    0, 0, outcome == OUT_CANCELLED, &a, &rec) == 0;
	if (have_rec && outcome == OUT_UNMADE) {
		rec.rec.state = JOBCG_ACCT_FAILED;
		have_rec = (rec.reason = strdup(UNMADE_REASON)) != NULL;
		rec.rec.reason = rec.reason;
	}
	if (have_rec)
		acct_pending_store(ctx, &rec, dir, ACCT_PENDING_IN_STATE_DIR, incarnation);
	for (size_t i = 0; i < ELEMENTSOF(job_hooks); i++)
		if (job_hooks[i]->prepare_release &&
		    (r = job_hooks[i]->prepare_release(ctx, job_id, dir, &states[i])) < 0) {
			jobcg_error_prefix("job %u: %s", job_id, job_hooks[i]->name);
			goto keep;
		}
	test_pause("remove-before-rmdir");
	r = cgfs_remove_tree(dir);
	if (jlock >= 0) { /* before its lock file goes, which one held is not */
		close(jlock);
		jlock = -1;
	}
	if (r >= 0) {
		job_lock_remove(ctx, job_id);
		test_pause("remove-before-record");
	}
	/* The steps that went, even when the job could not: nobody else records them. */
	steps_commit(ctx, job_id, steps, nsteps);
	if (r < 0)
		goto keep;
	if (meta && record) {
		struct jobcg_error saved = *jobcg_last_error();

		if (!have_rec || acct_log_commit(ctx, &rec) < 0)
			log_warning("job %u: accounting record not written: %s%s%s%s", job_id,
				    jobcg_last_error()->message, rec.holder ? " (kept in " : "",
				    rec.holder ? rec.holder : "",
				    rec.holder ? " for jobcg gc)" : "");
		jobcg_error_restore(&saved);
	}
	acct_pending_done(&rec);
	steps_pending_free(steps, nsteps);
	for (size_t i = ELEMENTSOF(job_hooks); i-- > 0;)
		if (job_hooks[i]->release)
			job_hooks[i]->release(ctx, job_id, states[i]);
	log_info("removed job %u", job_id);
	return 0;
keep:
	/* What is still there is recorded by whoever removes it next. */
	acct_pending_discard(&rec);
	for (size_t i = 0; i < nsteps; i++)
		if (access(steps[i].sdir, F_OK) == 0)
			acct_pending_discard(&steps[i].rec);
	acct_pending_done(&rec);
	steps_pending_free(steps, nsteps);
	for (size_t i = 0; i < ELEMENTSOF(job_hooks); i++)
		if (job_hooks[i]->discard)
			job_hooks[i]->discard(states[i]);
	return r;
}

/* job_remove_dir_signals() after @grace_sig reached @grace_steps (0, NULL: no grace period). */
static int job_remove_dir_locked(struct jobcg_ctx *ctx, uint32_t job_id, enum outcome outcome,
				 bool from_gc, bool record, int grace_sig, char *const *grace_steps)
{
	struct removal_signals sig = {.grace_sig = grace_sig, .grace_steps = grace_steps};
	int r = job_remove_dir_signals(ctx, job_id, outcome, from_gc, record, &sig);

	removal_signals_done(&sig);
	return r;
}

/* Does job ID have a step, or a process of its own? Under the node lock. -EBUSY if so. */
static int job_unused_locked(struct jobcg_ctx *ctx, uint32_t job_id)
{
	_cleanup_free_ char *dir = tree_job_dir(ctx, job_id);
	_cleanup_strv_free_ char **steps = NULL;
	bool populated = false;
	int r;

	if (!dir)
		return -ENOMEM;
	r = jobcg_step_list(ctx, job_id, &steps);
	if (r < 0)
		return r;
	if (steps[0])
		return error_set(-EBUSY, "job %u has step %s", job_id, steps[0]);
	r = cgfs_events(dir, &populated, NULL);
	if (r == -ENOENT)
		return error_set(-ENOENT, "no job %u (%s)", job_id, dir);
	if (r < 0)
		return r;
	return populated ? error_set(-EBUSY, "job %u has processes outside its steps", job_id) : 0;
}

/* Was the job made for a Slurm job (JOBCG_JOB_SLURM)? -EPERM naming it otherwise. */
static int job_slurms_locked(struct jobcg_ctx *ctx, uint32_t job_id)
{
	_cleanup_free_ char *dir = tree_job_dir(ctx, job_id), *mark = NULL;
	int r;

	if (!dir)
		return -ENOMEM;
	if (access(dir, F_OK) < 0)
		return error_set(-ENOENT, "no job %u (%s)", job_id, dir);
	if (!ctx->info->xattr.supported)
		return 0;
	r = get_meta(dir, "slurm", &mark);
	if (r == -ENODATA)
		return error_set(
		    -EPERM,
		    "job %u was not made by jobcg_spank.so for a Slurm job: left as it "
		    "is ('jobcg release %u' removes it)",
		    job_id, job_id);
	return r < 0 ? r : 0;
}

/* Whatever the outcome, the job's directory may be gone: it is looked up again next time. */
static int job_remove_grace_locked(struct jobcg_ctx *ctx, uint32_t job_id, enum outcome outcome,
				   bool from_gc, bool record, int grace_sig,
				   char *const *grace_steps)
{
	int r =
	    job_remove_dir_locked(ctx, job_id, outcome, from_gc, record, grace_sig, grace_steps);

	ctx_jobdir_forget(ctx, job_id);
	return r;
}

static int job_remove_locked(struct jobcg_ctx *ctx, uint32_t job_id, enum outcome outcome,
			     bool from_gc, bool record)
{
	return job_remove_grace_locked(ctx, job_id, outcome, from_gc, record, 0, NULL);
}

JOBCG_EXPORT int jobcg_job_remove(struct jobcg_ctx *ctx, uint32_t job_id, unsigned flags)
{
	return job_remove_after_grace(ctx, job_id, flags, 0, NULL);
}

int job_remove_after_grace(struct jobcg_ctx *ctx, uint32_t job_id, unsigned flags, int grace_sig,
			   char *const *grace_steps)
{
	int r;

	if (flags & ~(unsigned)(JOBCG_JOB_REMOVE_CANCELLED | JOBCG_JOB_REMOVE_FAILED |
				JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD |
				JOBCG_JOB_REMOVE_IF_SLURM))
		return error_set(-EINVAL, "unknown job removal flags 0x%x", flags);
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	if (flags & JOBCG_JOB_REMOVE_IF_SLURM)
		r = job_slurms_locked(ctx, job_id);
	if (r >= 0 && (flags & JOBCG_JOB_REMOVE_IF_UNUSED))
		r = job_unused_locked(ctx, job_id);
	if (r >= 0)
		r = job_remove_grace_locked(ctx, job_id,
					    flags & JOBCG_JOB_REMOVE_CANCELLED ? OUT_CANCELLED
					    : flags & JOBCG_JOB_REMOVE_FAILED  ? OUT_FAILED
									       : OUT_COMPLETED,
					    false, !(flags & JOBCG_JOB_REMOVE_NO_RECORD), grace_sig,
					    grace_steps);
	jobcg_ctx_unlock(ctx);
	return r;
}

static int cmp_step(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	bool nx = isdigit((unsigned char)*x), ny = isdigit((unsigned char)*y);

	if (nx && ny) {
		/* Numbers jobcg_step_id_valid() let through (at most STEP_NUM_MAX). */
		uint64_t u = 0, v = 0;

		(void)parse_u64(x, UINT64_MAX, &u);
		(void)parse_u64(y, UINT64_MAX, &v);
		return u < v ? -1 : u > v;
	}
	if (nx != ny)
		return nx ? -1 : 1;
	return strcmp(x, y);
}

JOBCG_EXPORT int jobcg_step_list(struct jobcg_ctx *ctx, uint32_t job_id, char ***ret)
{
	_cleanup_free_ char *dir = tree_job_dir(ctx, job_id);
	_cleanup_strv_free_ char **kids = NULL, **steps = calloc(1, sizeof(char *));
	int r;

	if (!dir || !steps)
		return -ENOMEM;
	r = cgfs_children(dir, &kids);
	if (r == -ENOENT)
		return error_set(r, "no job %u", job_id);
	if (r < 0)
		return r;
	for (char **k = kids; *k; k++) {
		char sid[JOBCG_STEP_ID_MAX];

		if (tree_parse_step_dirname(*k, sid) == 0 &&
		    (r = strv_push(&steps, strdup(sid))) < 0)
			return r;
	}
	qsort(steps, strv_length(steps), sizeof(char *), cmp_step);
	*ret = TAKE_PTR(steps);
	return 0;
}

/*
 * The next step number, as Slurm counts them: up over the job's life (0, 1, 2...), never
 * reused, so that an accounting record's job.step names one step. The job's
 * trusted.jobcg.next_step counts; without it (no xattrs, or a job of an older jobcg) one past
 * the highest number present. Called under the node lock; the counter is written by the caller
 * before the step is made (note_step_id()).
 */
static int pick_step_id(struct jobcg_ctx *ctx, uint32_t job_id, const char *jdir, char *ret)
{
	_cleanup_strv_free_ char **steps = NULL;
	_cleanup_free_ char *counter = NULL;
	unsigned long long next = 0;
	int r;

	r = jobcg_step_list(ctx, job_id, &steps);
	if (r < 0)
		return r;
	for (char **s = steps; *s; s++) {
		uint64_t v;

		/* The listed names passed jobcg_step_id_valid(): numbers or batch/extern/... */
		if (parse_u64(*s, UINT32_MAX, &v) == 0 && v + 1 > next)
			next = v + 1;
	}
	if (ctx->info->xattr.supported && get_meta(jdir, "next_step", &counter) == 0) {
		uint64_t c;

		if (parse_u64(counter, UINT32_MAX, &c) < 0)
			log_warning("%s: " XATTR_PREFIX "next_step '%s' is not a step number: "
				    "counting from the steps present",
				    jdir, counter);
		else if (c > next)
			next = c;
	}
	jobcg_error_clear();
	/* Slurm's step ids are 32-bit and the top ones special: a number above the last valid
	 * one would name a step directory that no listing, gc or removal check counts. */
	if (next > TREE_STEP_NUM_MAX)
		return error_set(-ERANGE, "job %u has used up its step numbers", job_id);
	snprintf(ret, JOBCG_STEP_ID_MAX, "%llu", next);
	return 0;
}

/* The job's mark that named step @sid (batch, extern, interactive) was made in it: never made
 * again, as a number below the count is not. */
static char *used_key(const char *sid)
{
	return strdup_printf("used.%s", sid);
}

/* Whether step @sid is a name rather than a number. */
static bool step_named(const char *sid)
{
	return !isdigit((unsigned char)*sid);
}

/*
 * Under the node lock, before the step is made: a number moves the job's count, a name is
 * marked used. Either is done before the mkdir, so that a creation killed half way (whose step
 * gc removes) has used its id. 1 if a name was marked (the caller's rollback takes the mark off
 * again), else 0.
 */
static int note_step_id(struct jobcg_ctx *ctx, const char *jdir, const char *sid, bool explicit_id)
{
	char buf[32];

	uint64_t v;

	if (!ctx->info->xattr.supported)
		return 0;
	if (step_named(sid)) {
		_cleanup_free_ char *key = used_key(sid);
		int r;

		if (!key)
			return -ENOMEM;
		/* Not best effort: without the mark the name could be made again once this step
		 * ends, two records of one JOB.STEP. */
		r = set_meta(jdir, key, "1");
		return r < 0 ? r : 1;
	}
	if (parse_u64(sid, UINT32_MAX, &v) < 0) {
		jobcg_error_clear();
		return 0;
	}
	/* An explicit number below the count (--step) never lowers it; a picked one is at or
	 * past the count already (pick_step_id()). */
	if (explicit_id && meta_u64(jdir, "next_step") > v)
		return 0;
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v + 1);
	/* Best effort: without it the next pick still starts past the highest step present. */
	if (set_meta(jdir, "next_step", buf) < 0)
		log_debug("cannot record the next step number of %s", jdir);
	jobcg_error_clear();
	return 0;
}

/* Take the mark of named step @sid off job directory @jdir: no step of that name ran. */
static void forget_step_name(const char *jdir, const char *sid)
{
	_cleanup_free_ char *key = used_key(sid), *name = NULL;

	if (key && (name = strdup_printf(XATTR_PREFIX "%s", key)) && removexattr(jdir, name) < 0 &&
	    errno != ENODATA && errno != ENOTSUP)
		log_warning("%s: cannot remove " XATTR_PREFIX "%s: %s (step %s stays used)", jdir,
			    key, strerror(errno), sid);
}

/* The CPUs a job may use: its recorded --cpus, else what its cgroup gets, else every online CPU
 * but those reserved for the system (a job without --cpus has the rest of the node's).
 * Trimmed, malloc()ed. */
static int job_cpus(struct jobcg_ctx *ctx, const char *jdir, char **ret)
{
	_cleanup_free_ char *s = NULL;
	struct jobcg_error saved = *jobcg_last_error();
	int r;

	if (get_meta(jdir, "cpus", &s) == 0 && *strstrip(s))
		goto done;
	free(s);
	s = NULL;
	if (cgfs_read(jdir, "cpuset.cpus.effective", &s) == 0 && *strstrip(s))
		goto done;
	jobcg_error_restore(&saved);
	free(s);
	s = NULL;
	{
		_cleanup_free_ char *online = NULL;

		if ((r = jobcg_online_cpus(&online)) < 0 ||
		    (r = jobcg_spec_job_cpus(&ctx->conf->cgroup, strstrip(online), &s)) < 0)
			return r;
	}
done:
	*ret = strdup(strstrip(s));
	return *ret ? 0 : -ENOMEM;
}

/* The most memory a step of the job may ask: the job's request, else its memory.max, else the
 * node's RAM jobs may have (UINT64_MAX when unknown). */
static uint64_t job_mem(struct jobcg_ctx *ctx, const char *jdir)
{
	uint64_t v = meta_u64(jdir, "mem"), ram;
	struct jobcg_error saved = *jobcg_last_error();

	if (v == 0 && cgfs_read_u64(jdir, "memory.max", &v) < 0) {
		v = UINT64_MAX;
		if (ctx->conf->cgroup.mem_spec_limit > 0 && jobcg_node_ram(&ram) == 0 &&
		    jobcg_spec_job_ram(&ctx->conf->cgroup, ram, &ram) == 0)
			v = ram;
	}
	jobcg_error_restore(&saved);
	return v ? v : UINT64_MAX;
}

/* Everything that can refuse a step's limits, before the step exists. */
static int step_limits_check(struct jobcg_ctx *ctx, uint32_t job_id, const char *jdir,
			     const struct jobcg_step_limits *l)
{
	struct jobcg_limits jl = {.cpus = l->cpus, .mem_bytes = l->mem_bytes};
	unsigned bad = jobcg_limits_check(ctx, &jl, NULL);
	int r;

	if (bad && !l->best_effort) {
		unsigned ctrl = (bad & JOBCG_LIMIT_CPUS) ? JOBCG_CTRL_CPUSET : JOBCG_CTRL_MEMORY;
		_cleanup_free_ char *why =
		    ctx_limitation(ctx, ctrl,
				   ctrl == JOBCG_CTRL_CPUSET ? "CPU binding (cpuset.cpus)"
							     : "memory limits (memory.max)");

		return error_set(-EOPNOTSUPP, "%s: %s",
				 ctrl == JOBCG_CTRL_CPUSET ? "--cpus" : "--mem",
				 why ? why : "limit cannot be enforced");
	}
	if (l->cpus && *l->cpus) {
		_cleanup_free_ char *have = NULL;
		_cleanup_free_ uint64_t *want = NULL, *jobs = NULL;
		size_t nw = 0, nj = 0;

		r = jobcg_parse_cpulist(l->cpus, &want, &nw);
		if (r < 0)
			return error_set(-EINVAL, "--cpus %s: %s", l->cpus,
					 jobcg_last_error()->message);
		if ((r = job_cpus(ctx, jdir, &have)) < 0)
			return r;
		r = jobcg_parse_cpulist(have, &jobs, &nj);
		if (r < 0)
			return error_set(-EIO, "job %u: unreadable CPU list '%s'", job_id, have);
		for (size_t i = 0; i < nw; i++)
			if (want[i] & ~(i < nj ? jobs[i] : 0))
				return error_set(-EINVAL,
						 "--cpus %s: not a subset of job %u's CPUs (%s)",
						 l->cpus, job_id, have);
	}
	if (l->mem_bytes) {
		uint64_t have = job_mem(ctx, jdir);

		if (l->mem_bytes > have)
			return error_set(
			    -EINVAL, "--mem %llu bytes: more than job %u has (%llu bytes)",
			    (unsigned long long)l->mem_bytes, job_id, (unsigned long long)have);
	}
	return 0;
}

/* Write a step's limits (checked before) and record them on its directory. */
static int step_limits_apply(struct jobcg_ctx *ctx, uint32_t job_id, const char *sid,
			     const char *jdir, const char *sdir, const struct jobcg_step_limits *l)
{
	bool meta = ctx->info->xattr.supported;
	char skipped[16] = "", buf[32];
	int r;

	if (l->cpus && *l->cpus) {
		if (ctx->info->usable & (1u << JOBCG_CTRL_CPUSET)) {
			_cleanup_free_ char *mems = NULL;

			/* Memory nodes as the job's, so the step's cpuset is complete. */
			if (cgfs_read(jdir, "cpuset.mems", &mems) == 0 && *strstrip(mems) &&
			    (r = cgfs_write(sdir, "cpuset.mems", strstrip(mems))) < 0)
				return r;
			if ((r = cgfs_write(sdir, "cpuset.cpus", l->cpus)) < 0)
				return r;
		} else
			strcat(skipped, "cpus");
		if (meta && (r = set_meta(sdir, "cpus", l->cpus)) < 0)
			return r;
	}
	if (l->mem_bytes) {
		if (ctx->info->usable & (1u << JOBCG_CTRL_MEMORY)) {
			if ((r = mem_limits_write(ctx, sdir, l->mem_bytes)) < 0)
				return r;
		} else
			strcat(skipped, *skipped ? ",mem" : "mem");
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)l->mem_bytes);
		if (meta && (r = set_meta(sdir, "mem", buf)) < 0)
			return r;
	}
	if (*skipped) {
		log_warning("step %u.%s: limits not enforceable on this host (best effort: %s not "
			    "applied)",
			    job_id, sid, skipped);
		if (meta && (r = set_meta(sdir, "skipped", skipped)) < 0)
			return r;
	}
	return 0;
}

JOBCG_EXPORT int jobcg_step_xattr_get(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				      const char *key, char **ret)
{
	_cleanup_free_ char *dir = NULL, *what = NULL;

	if (xattr_key_ok(key) < 0)
		return error_set(-EINVAL, "invalid step xattr key '%s'", key ? key : "");
	if (!jobcg_step_id_valid(step_id))
		return error_set(-EINVAL, "invalid step id '%s'", step_id ? step_id : "");
	dir = tree_step_dir(ctx, job_id, step_id);
	if (!dir || !(what = strdup_printf("step %" PRIu32 ".%s", job_id, step_id)))
		return -ENOMEM;
	return get_meta_told(dir, what, key, ret);
}

/*
 * Under the node lock: may step @sid (the caller's explicit id) be made in job @job_id? Not
 * while a step of that id exists, and not a name the job has had already (its "used" mark):
 * one JOB.STEP names one step and one accounting record, as in Slurm, where batch and extern
 * come once per job. A scheduler's own ids (JOBCG_STEP_ID_SCHEDULED) are its to keep.
 */
static int step_id_free(struct jobcg_ctx *ctx, uint32_t job_id, const char *jdir, const char *sid,
			unsigned flags)
{
	_cleanup_free_ char *sdir = tree_step_dir(ctx, job_id, sid), *key = NULL, *used = NULL;

	if (!sdir)
		return -ENOMEM;
	if (access(sdir, F_OK) == 0)
		return error_set(-EEXIST,
				 "step %u.%s exists already (still running?): a step id names "
				 "one step of its job",
				 job_id, sid);
	if ((flags & JOBCG_STEP_ID_SCHEDULED) || !step_named(sid) || !ctx->info->xattr.supported)
		return 0;
	if (!(key = used_key(sid)))
		return -ENOMEM;
	if (get_meta(jdir, key, &used) == 0)
		return error_set(-EEXIST,
				 "step %u.%s has run in job %u already: a step id is never "
				 "reused in a job (%u.%s names one accounting record); give "
				 "another id",
				 job_id, sid, job_id, job_id, sid);
	jobcg_error_clear();
	return 0;
}

JOBCG_EXPORT int jobcg_step_create(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				   unsigned flags, char *ret_step_id)
{
	return jobcg_step_create_limited(ctx, job_id, step_id, flags, NULL, ret_step_id);
}

JOBCG_EXPORT int jobcg_step_create_limited(struct jobcg_ctx *ctx, uint32_t job_id,
					   const char *step_id, unsigned flags,
					   const struct jobcg_step_limits *limits,
					   char *ret_step_id)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job_id), *sdir = NULL, *me = NULL,
			    *cpus = NULL;
	struct jobcg_step_limits canon;
	bool runner = ctx->info->xattr.supported && !(flags & JOBCG_STEP_NO_RUNNER);
	bool name_marked = false;
	char sid[JOBCG_STEP_ID_MAX];
	int r;

	if (flags & ~(unsigned)(JOBCG_STEP_NO_RUNNER | JOBCG_STEP_ID_SCHEDULED))
		return error_set(-EINVAL, "unknown step flags 0x%x", flags);
	if (!jdir)
		return -ENOMEM;
	if ((r = ctx_refuse_cgroup_broken(ctx)) < 0)
		return r;
	if (limits && limits->cpus && *limits->cpus) {
		if ((r = cpus_canonical(limits->cpus, &cpus)) < 0)
			return r;
		canon = *limits;
		canon.cpus = cpus;
		limits = &canon;
	}
	if (step_id && !jobcg_step_id_valid(step_id))
		return error_set(-EINVAL,
				 "invalid step id '%s': need a number, batch, extern or "
				 "interactive",
				 step_id);
	r = jobcg_ctx_lock(ctx);
	if (r < 0)
		return r;
	if (access(jdir, F_OK) < 0) {
		r = error_set(-ENOENT, "no job %u (%s)", job_id, jdir);
		goto out;
	}
	/* A task started into a frozen job freezes before its exec, and its starter (a vfork)
	 * waits for that exec uninterruptibly, deaf to ^C, until someone thaws the job. Asked
	 * (cgroup.freeze, what `jobcg freeze` writes) or done (cgroup.events: an ancestor's too).
	 */
	{
		uint64_t want = 0;
		bool frozen = false;

		if ((cgfs_read_u64(jdir, "cgroup.freeze", &want) == 0 && want == 1) ||
		    (cgfs_events(jdir, NULL, &frozen) == 0 && frozen)) {
			r = error_set(-EBUSY,
				      "job %u is frozen: thaw it first ('jobcg thaw %u'); no new "
				      "steps",
				      job_id, job_id);
			goto out;
		}
		jobcg_error_clear();
	}
	if (ctx->info->xattr.supported) {
		_cleanup_free_ char *removing = NULL, *owner = NULL, *created = NULL;

		/* 'jobcg release' marks the job before it signals its processes: a step made
		 * during the grace period would only be killed with them. */
		if (get_meta(jdir, "removing", &removing) == 0) {
			r = error_set(-ESHUTDOWN, "job %u is being released: no new steps", job_id);
			goto out;
		}
		/* A job without the mark is a creation still under way or one that died half
		 * way: its limits and device grant may be missing. */
		if (get_meta(jdir, "created", &created) < 0) {
			r = error_set(-ESHUTDOWN,
				      "job %u is not completely created (a creation was "
				      "interrupted?): no new steps; 'jobcg gc' removes it",
				      job_id);
			goto out;
		}
		/* An ephemeral job is removed, with every step in it, when its run's own step
		 * ends: only that run (the job's runner, pid:starttime) may begin a step there. */
		if (job_ephemeral(jdir)) {
			me = tree_runner_self();
			if (!me) {
				r = -ENOMEM;
				goto out;
			}
			if (get_meta(jdir, "runner", &owner) < 0 || !streq(owner, me)) {
				r = error_set(
				    -EPERM,
				    "job %u is the ephemeral job of another 'jobcg run' "
				    "and ends with it; for a job several steps share, use "
				    "'jobcg alloc %u'",
				    job_id, job_id);
				goto out;
			}
		}
	}
	if (step_id) {
		uint64_t v;

		/* Slurm never reuses a step id within a job, and one job.step names one record:
		 * a number below the count was used already (or skipped), even if that step is
		 * gone. Ids a scheduler assigned may arrive out of order: its own to keep. */
		if (!(flags & JOBCG_STEP_ID_SCHEDULED) && ctx->info->xattr.supported &&
		    parse_u64(step_id, UINT32_MAX, &v) == 0 && meta_u64(jdir, "next_step") > v) {
			char next[JOBCG_STEP_ID_MAX];

			if ((r = pick_step_id(ctx, job_id, jdir, next)) < 0)
				goto out;
			r = error_set(
			    -EEXIST,
			    "step %u.%s: job %u has numbered its steps past %s already "
			    "(a step id is never reused in a job): the next free one is %s",
			    job_id, step_id, job_id, step_id, next);
			goto out;
		}
		jobcg_error_clear();
		if ((r = step_id_free(ctx, job_id, jdir, step_id, flags)) < 0)
			goto out;
		snprintf(sid, sizeof(sid), "%s", step_id);
	} else if ((r = pick_step_id(ctx, job_id, jdir, sid)) < 0)
		goto out;
	if (limits && (r = step_limits_check(ctx, job_id, jdir, limits)) < 0)
		goto out;
	/* Counted before the step exists: a creation killed half way, whose step gc removes,
	 * has used its id, which is never handed out again. */
	if ((r = note_step_id(ctx, jdir, sid, step_id != NULL)) < 0)
		goto out;
	name_marked = r > 0;
	r = tree_make_step(ctx, jdir, sid);
	if (r < 0) {
		if (name_marked)
			forget_step_name(jdir, sid);
		goto out;
	}
	test_pause("step-create-after-mkdir");
	sdir = tree_step_dir(ctx, job_id, sid);
	if (!sdir || (runner && !me && !(me = tree_runner_self())))
		r = -ENOMEM;
	else if (runner) {
		char started[24];

		/* When it began, for the record gc writes if its runner dies. */
		snprintf(started, sizeof(started), "%llu", (unsigned long long)realtime_usec());
		r = set_meta(sdir, "runner", me);
		if (r >= 0)
			r = set_meta(sdir, "started", started);
	}
	if (r >= 0 && limits)
		r = step_limits_apply(ctx, job_id, sid, jdir, sdir, limits);
	/* Last: the mark that the step is complete. Under the lock a step with neither it nor a
	 * runner is a creation that died half way, which gc removes. */
	if (r >= 0 && ctx->info->xattr.supported)
		r = test_flag("step-mark-fails")
			? error_set(-EIO,
				    "step %u.%s: cannot mark it complete (test flag "
				    "step-mark-fails)",
				    job_id, sid)
			: set_meta(sdir, "created", "1");
	if (r < 0) {
		struct jobcg_error saved = *jobcg_last_error();

		if (sdir && cgfs_remove_tree(sdir) >= 0 && name_marked)
			forget_step_name(jdir, sid); /* gone before it ran anything */
		jobcg_error_restore(&saved);
		goto out;
	}
	log_info("created step %u.%s", job_id, sid);
	if (ret_step_id)
		memcpy(ret_step_id, sid, sizeof(sid));
out:
	jobcg_ctx_unlock(ctx);
	return r;
}

/* The directory of step JOB_ID.STEP_ID in *RET_SDIR, with the node lock taken. */
static int step_dir_locked(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
			   char **ret_sdir)
{
	_cleanup_free_ char *sdir = NULL;
	int r;

	if (!jobcg_step_id_valid(step_id))
		return error_set(-EINVAL, "invalid step id '%s'", step_id ? step_id : "");
	sdir = tree_step_dir(ctx, job_id, step_id);
	if (!sdir)
		return -ENOMEM;
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	*ret_sdir = TAKE_PTR(sdir);
	return 0;
}

JOBCG_EXPORT int jobcg_step_remove(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				   unsigned flags)
{
	_cleanup_free_ char *sdir = NULL;
	int r;

	if (flags)
		return error_set(-EINVAL, "unknown step removal flags 0x%x", flags);
	r = step_dir_locked(ctx, job_id, step_id, &sdir);
	if (r < 0)
		return r;
	r = step_remove_locked(ctx, job_id, step_id);
	jobcg_ctx_unlock(ctx);
	return r;
}

int step_remove_unborn(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id)
{
	_cleanup_free_ char *sdir = NULL, *jdir = tree_job_dir(ctx, job_id);
	int r;

	if (!jdir)
		return -ENOMEM;
	r = step_dir_locked(ctx, job_id, step_id, &sdir);
	if (r < 0)
		return r;
	/* Unmade first: one whose removal fails is left to gc as a step that never ran a task,
	 * which gets no record. */
	if (ctx->info->xattr.supported)
		(void)removexattr(sdir, XATTR_PREFIX "created");
	r = step_remove_locked(ctx, job_id, step_id);
	if (r >= 0 && step_named(step_id) && ctx->info->xattr.supported)
		forget_step_name(jdir, step_id);
	jobcg_ctx_unlock(ctx);
	return r;
}

int step_remove_locked(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id)
{
	_cleanup_free_ char *sdir = tree_step_dir(ctx, job_id, step_id);
	int r;

	if (!sdir)
		return -ENOMEM;
	if (access(sdir, F_OK) < 0)
		return error_set(-ENOENT, "no step %u.%s (%s)", job_id, step_id, sdir);
	if ((r = kill_outside_lock(ctx, sdir)) < 0)
		return r;
	/* The lock was let go while its processes died: a release may have taken it. */
	if (access(sdir, F_OK) < 0)
		return error_set(-ENOENT, "step %u.%s went with its job (%s)", job_id, step_id,
				 sdir);
	return tree_kill_and_remove_step(sdir);
}

/*
 * A step gc removes: one whose runner died, or one left half made (neither a runner nor the
 * "created" mark) that holds no process. Under the node lock (@locked) no creation is under
 * way; without it (list) a step being made right now looks half made for a moment, so only
 * one older than the creation window is. A step of the job's own (the extern step of logins)
 * has no runner and stays.
 */
static bool step_is_stray(struct jobcg_ctx *ctx, const char *sdir, bool locked)
{
	_cleanup_free_ char *runner = NULL, *created = NULL;
	struct jobcg_error saved = *jobcg_last_error();
	bool populated = true, stray;

	if (!ctx->info->xattr.supported)
		return false; /* no marks to tell by: leave it */
	if (get_meta(sdir, "runner", &runner) == 0)
		stray = !tree_runner_alive(runner);
	else
		stray = get_meta(sdir, "created", &created) < 0 &&
			cgfs_events(sdir, &populated, NULL) == 0 && !populated &&
			(locked || tree_half_made_old(sdir));
	jobcg_error_restore(&saved);
	return stray;
}

/* How long after its creation a job of jobcg_spank.so's may hold no step: the plugin makes the
 * job and its step in one hold of the node lock, an older one in two, a few milliseconds apart. */
#define SLURM_JOB_IDLE_GRACE_SEC 60

/*
 * Is DIR a job jobcg_spank.so made (the slurm mark), complete, not being removed and older than
 * SLURM_JOB_IDLE_GRACE_SEC? Its steps and processes are the caller's to look at: without any,
 * such a job is one whose slurmstepds (and watchers) died without removing it, and nothing of
 * Slurm's ever will. The error record is left as it was.
 */
static bool slurm_job_old(struct jobcg_ctx *ctx, const char *dir)
{
	_cleanup_free_ char *mark = NULL, *removing = NULL;
	struct jobcg_error saved = *jobcg_last_error();
	uint64_t created, now = (uint64_t)time(NULL);
	bool old;

	if (!ctx->info->xattr.supported)
		return false;
	created = meta_u64(dir, "created");
	old = get_meta(dir, "slurm", &mark) == 0 && get_meta(dir, "removing", &removing) < 0 &&
	      created && now >= created + SLURM_JOB_IDLE_GRACE_SEC;
	jobcg_error_restore(&saved);
	return old;
}

JOBCG_EXPORT void jobcg_job_info_free(struct jobcg_job_info *i)
{
	if (!i)
		return;
	free(i->path);
	free(i->cpus);
	free(i->reservation);
	strv_free(i->skipped);
	strv_free(i->steps);
	strv_free(i->orphaned_steps);
	free(i);
}

JOBCG_EXPORT int jobcg_job_info_get(struct jobcg_ctx *ctx, uint32_t job_id,
				    struct jobcg_job_info **ret)
{
	struct jobcg_job_info *i = NULL;
	_cleanup_free_ char *owner = NULL, *runner = NULL, *be = NULL, *sk = NULL, *removing = NULL,
			    *created = NULL;
	size_t norph = 0;
	int r;

	if (!ret)
		return error_set(-EINVAL, "no place for the job's information");
	if ((r = tree_ids_valid(job_id, NULL)) < 0)
		return r;
	if (!(i = calloc(1, sizeof(*i))))
		return -ENOMEM;
	i->id = job_id;
	i->path = tree_job_dir(ctx, job_id);
	if (!i->path) {
		r = -ENOMEM;
		goto fail;
	}
	r = cgfs_events(i->path, &i->populated, &i->frozen);
	if (r == -ENOENT) {
		r = error_set(-ENOENT, "no job %u (%s)", job_id, i->path);
		goto fail;
	}
	if (r < 0)
		goto fail;
	r = jobcg_step_list(ctx, job_id, &i->steps);
	if (r < 0)
		goto fail;
	if (get_meta(i->path, "owner", &owner) == 0) {
		unsigned u, g;

		/* Not sscanf: its %u takes "-1" as 4294967295, and blanks. */
		if (parse_owner(owner, &u, &g) == 0) {
			i->have_owner = true;
			i->uid = (uid_t)u;
			i->gid = (gid_t)g;
		}
	}
	i->created_sec = meta_u64(i->path, "created");
	i->ephemeral = job_ephemeral(i->path);
	if (get_meta(i->path, "runner", &runner) == 0) {
		/* "PID:STARTTIME", as tree_runner_self() writes it. */
		uint64_t pid = 0;
		const char *end = runner;

		if (parse_u64_prefix(runner, INT32_MAX, &pid, &end) < 0 || (*end && *end != ':'))
			log_warning("%s: " XATTR_PREFIX "runner '%s' is not PID:STARTTIME", i->path,
				    runner);
		else
			i->runner = (pid_t)pid;
		jobcg_error_clear();
	}
	(void)get_meta(i->path, "cpus", &i->cpus);
	errno = 0;
	i->reservation = tree_job_resv(ctx, i->path);
	if (!i->reservation && errno == ENOMEM) {
		r = -ENOMEM;
		goto fail;
	}
	i->mem_bytes = meta_u64(i->path, "mem");
	i->pids_max = meta_u64(i->path, "pids");
	i->best_effort = get_meta(i->path, "best_effort", &be) == 0 && streq(be, "1");
	if (get_meta(i->path, "skipped", &sk) == 0 && !(i->skipped = strv_split(sk, ","))) {
		r = -ENOMEM;
		goto fail;
	}
	/* What gc would sweep (gc_job()), told apart from what merely runs. */
	if (get_meta(i->path, "removing", &removing) == 0)
		i->releasing = removal_in_progress(removing);
	/* A job without the "created" mark is one whose creation died (gc_job()), once no
	 * creation can be under way any more. */
	i->orphaned =
	    (i->ephemeral && runner && !tree_runner_alive(runner)) || (removing && !i->releasing) ||
	    (ctx->info->xattr.supported && get_meta(i->path, "created", &created) == -ENODATA &&
	     tree_half_made_old(i->path));
	jobcg_error_clear();
	i->orphaned_steps = calloc(strv_length(i->steps) + 1, sizeof(char *));
	if (!i->orphaned_steps) {
		r = -ENOMEM;
		goto fail;
	}
	for (char **s = i->steps; *s; s++) {
		_cleanup_free_ char *sdir = tree_step_dir(ctx, job_id, *s);

		if (!sdir) {
			r = -ENOMEM;
			goto fail;
		}
		if (!step_is_stray(ctx, sdir, false))
			continue;
		if (!(i->orphaned_steps[norph++] = strdup(*s))) {
			r = -ENOMEM;
			goto fail;
		}
	}
	{
		_cleanup_free_ char *mark = NULL;

		i->slurm = ctx->info->xattr.supported && get_meta(i->path, "slurm", &mark) == 0;
		jobcg_error_clear();
	}
	/* What gc removes after the stray steps (gc_job()): every step stray, and no process
	 * outside them (not told apart from theirs while they are there). */
	i->slurm_stale = i->slurm && !i->orphaned && norph == strv_length(i->steps) &&
			 (norph > 0 || !i->populated) && slurm_job_old(ctx, i->path);
	*ret = i;
	return 0;
fail:
	jobcg_job_info_free(i);
	return r;
}

/*
 * Remove step SID (directory SDIR) of job ID, whose runner died: kill what is left, read its
 * accounting, with @revoke revoke its device grants, remove it, then with @record record it
 * (NODE_FAIL), once it is gone so never twice. Under the node lock. 1 when removed, 0 when
 * someone else removed it meanwhile.
 */
static int lost_step_remove_locked(struct jobcg_ctx *ctx, uint32_t id, const char *sid,
				   const char *sdir, bool revoke, bool record)
{
	struct jobcg_acct a = {};
	struct acct_pending rec = {};
	bool have_rec, taken;
	int r, k;

	r = kill_outside_lock(ctx, sdir);
	if (r < 0)
		return r;
	if (access(sdir, F_OK) < 0)
		return 0;
	/* Never completely made (its creation failed, and so did the undo): no task ran in it,
	 * nothing to record. */
	if (record && ctx->info->xattr.supported && meta_absent(sdir, "created"))
		record = false;
	/* Its ender saw it end and set its record aside, but could not remove it: that record. */
	if ((k = record ? acct_pending_step_take(ctx, id, sid, sdir, &rec) : 0) < 0)
		return k;
	taken = k == 1;
	/* Else its runner died: how the step ended was not seen (NODE_FAIL). */
	have_rec = taken || (record && jobcg_acct_read_dir(sdir, &a) == 0 &&
			     acct_log_prepare(ctx, id, sid, 0, -1, 0, 0, false, &a, &rec) == 0);
	/* Before the directories go: the grants are found through them. A step's own GPUs
	 * return to its job with its directory, whose xattrs held them. */
	if (revoke && (r = jobcg_step_gres_release(ctx, id, sid)) < 0)
		log_warning("step %u.%s: devices not revoked (jobcg gc revokes them): %s", id, sid,
			    jobcg_last_error()->message);
	/* (one taken waits on the job's directory already) */
	if (have_rec && !taken)
		acct_pending_store(ctx, &rec, sdir, ACCT_PENDING_ON_JOB, 0);
	r = cgfs_remove_tree(sdir);
	if (r < 0) {
		acct_pending_discard(&rec);
		acct_pending_done(&rec);
		return r;
	}
	if (record && (!have_rec || acct_log_commit(ctx, &rec) < 0))
		log_warning("step %u.%s: accounting record not written: %s", id, sid,
			    jobcg_last_error()->message);
	else if (taken)
		acct_pending_step_drop(ctx, id, sid);
	acct_pending_done(&rec);
	return 1;
}

/* Remove the steps of job ID whose runner died, each recorded (NODE_FAIL) once it is gone. Their
 * grants go with jobcg_devices_gc() at the end of gc. */
static int gc_steps(struct jobcg_ctx *ctx, uint32_t id, struct jobcg_gc_stats *st)
{
	_cleanup_strv_free_ char **steps = NULL;
	int r = jobcg_step_list(ctx, id, &steps);

	if (r < 0)
		return r == -ENOENT ? 0 : r;
	for (char **s = steps; *s; s++) {
		_cleanup_free_ char *sdir = tree_step_dir(ctx, id, *s), *runner = NULL;
		bool ran;

		if (!sdir)
			return -ENOMEM;
		if (!step_is_stray(ctx, sdir, true))
			continue;
		log_info("gc: removing stray step %u.%s", id, *s);
		/* One left half made, without a runner, never ran a task: nothing to record. */
		ran = get_meta(sdir, "runner", &runner) == 0;
		jobcg_error_clear();
		r = lost_step_remove_locked(ctx, id, *s, sdir, false, ran);
		if (r < 0)
			return r;
		st->steps_removed += (unsigned)r;
	}
	return 0;
}

JOBCG_EXPORT int jobcg_step_reap(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				 const char *runner, bool *ret_reaped)
{
	_cleanup_free_ char *sdir = NULL, *have = NULL;
	int r = step_dir_locked(ctx, job_id, step_id, &sdir);

	if (r < 0)
		return r;
	/* Under the lock: a runner that ends its step normally has removed it before it exits,
	 * and nobody else removes a step whose runner lives. */
	if (access(sdir, F_OK) < 0 || get_meta(sdir, "runner", &have) < 0 ||
	    (runner && !streq(have, runner)) || tree_runner_alive(have)) {
		r = 0;
		goto out;
	}
	log_info("step %u.%s: its runner %s died without ending it", job_id, step_id, have);
	r = lost_step_remove_locked(ctx, job_id, step_id, sdir, true, true);
out:
	jobcg_ctx_unlock(ctx);
	if (r >= 0 && ret_reaped)
		*ret_reaped = r > 0;
	return r < 0 ? r : 0;
}

static int gc_job(struct jobcg_ctx *ctx, uint32_t id, struct jobcg_gc_stats *st)
{
	_cleanup_free_ char *dir = tree_job_dir(ctx, id), *created = NULL, *runner = NULL,
			    *removing = NULL;
	int r;

	if (!dir)
		return -ENOMEM;
	if (!ctx->info->xattr.supported) {
		st->kept++;
		return 0;
	}
	r = get_meta(dir, "created", &created);
	if (get_meta(dir, "removing", &removing) == 0 && removal_in_progress(removing)) {
		st->kept++; /* its remover is alive and finishes it */
		return 0;
	}
	if (r == -ENODATA || removing ||
	    (job_ephemeral(dir) && get_meta(dir, "runner", &runner) == 0 &&
	     !tree_runner_alive(runner))) {
		/* Under the lock a job without the "created" mark is a creation that died half
		 * way, one marked "removing" a removal that did; an ephemeral job without its
		 * runner will never be removed by it. Its dead runners' steps first, so that
		 * each gets its record (the job's removal records only the job). */
		_cleanup_free_ char *slurm = NULL;
		/* A job of jobcg_spank.so's has no job record (docs/slurm.md): one left half
		 * made, which its step's watcher removes without, gets none from gc either. */
		bool record = r != -ENODATA || get_meta(dir, "slurm", &slurm) < 0;

		log_info("gc: removing stray job %u", id);
		r = gc_steps(ctx, id, st);
		if (r >= 0)
			r = job_remove_locked(ctx, id, OUT_LOST, true, record);
		if (r < 0)
			return r;
		st->jobs_removed++;
		return 0;
	}
	if (r < 0 && r != -ENOENT)
		return r;
	r = gc_steps(ctx, id, st);
	if (r < 0)
		return r;
	if (slurm_job_old(ctx, dir)) {
		if (job_unused_locked(ctx, id) == 0) {
			/* What the step's watcher would have done: no job record, the steps
			 * have theirs. */
			log_info("gc: removing job %u of jobcg_spank.so's: no step and no process "
				 "left in it",
				 id);
			r = job_remove_locked(ctx, id, OUT_COMPLETED, true, false);
			if (r < 0)
				return r;
			st->jobs_removed++;
			return 0;
		}
		jobcg_error_clear();
	}
	st->kept++;
	return 0;
}

JOBCG_EXPORT int jobcg_gc(struct jobcg_ctx *ctx, unsigned flags, struct jobcg_gc_stats *ret)
{
	struct jobcg_gc_stats st = {};
	_cleanup_free_ uint32_t *ids = NULL;
	struct jobcg_error first_rec = {};
	size_t n = 0;
	int r, first_err = 0;

/* Keep sweeping past a failure; the first one (and its message: the sweep goes on setting and
 * clearing the record) is what the caller hears. */
#define GC_FAILED(x)                                                                               \
	do {                                                                                       \
		if ((x) < 0 && !first_err) {                                                       \
			first_err = (x);                                                           \
			first_rec = *jobcg_last_error();                                           \
		}                                                                                  \
	} while (0)

	r = jobcg_ctx_lock(ctx);
	if (r < 0)
		return r;
	/* First: a tree whose device program lost its attachment (a jobcg killed while setting
	 * it up) lets every cgroup in it open every device until it is attached again. */
	if (cgfs_is_cgroup2(jobcg_ctx_root(ctx)) && (r = gres_tree_policy(ctx)) < 0)
		goto out;
	/* Records that removers killed after their rmdir still owed, before anything else is
	 * removed (an entry whose directory is gone is written; gc's own removals below would
	 * make the stale ones look owed). */
	r = acct_pending_flush_state_dir(ctx, &st.records_written);
	GC_FAILED(r);
	r = job_ids(ctx, &ids, &n);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (ctx->info->xattr.supported) {
			r = acct_pending_flush_job(ctx, ids[i], false, 0, &st.records_written);
			GC_FAILED(r);
		}
		r = gc_job(ctx, ids[i], &st);
		GC_FAILED(r);
	}
	/* The freeze locks of jobs gone (a kernel without cgroup.kill), which their removers
	 * found held. */
	r = job_locks_gc(ctx);
	GC_FAILED(r);
	/* Reservations half made or half deleted, and reservation entries nothing holds. */
	r = resv_gc(ctx, &st.resv_removed);
	GC_FAILED(r);
	/* Last: device policy entries of cgroups removed above or by a killed jobcg. */
	r = jobcg_devices_gc(ctx, NULL);
	GC_FAILED(r);
#undef GC_FAILED
	r = first_err;
	if (r < 0)
		jobcg_error_restore(&first_rec);
out:
	jobcg_ctx_unlock(ctx);
	if (r >= 0 && ret)
		*ret = st;
	return r;
}
