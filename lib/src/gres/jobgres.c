/* jobcg: GRES of jobs, steps and tasks: the job hook (select, store, grant), step setup, gc. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "cgroupfs.h"
#include "context_internal.h"
#include "devpolicy.h"
#include "gresxattr.h"
#include "job_hooks.h"
#include "devices.h"
#include "jobcg/jobgres.h"
#include "jobgres_internal.h"
#include "parse.h"
#include "log.h"
#include "resv_internal.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

/* Steps that took all of their job's devices without asking share them with other steps. */
#define GRES_SHARED_XATTR "trusted.jobcg.gres_shared"
/* Set on a step before any grant below it: without it, its release has nothing to revoke. */
#define GRES_GRANTED_XATTR "trusted.jobcg.gres_granted"

static void node_freep(struct jobcg_gres_node **n)
{
	jobcg_gres_node_free(*n);
}
static void request_freep(struct jobcg_gres_request **r)
{
	jobcg_gres_request_free(*r);
}

static int node_open(const struct jobcg_ctx *ctx, struct jobcg_gres_node **ret)
{
	struct ctx_gpu_uuids *u = &ctx->memo->uuids;
	struct jobcg_gres_node *n = NULL;
	int r = jobcg_gres_node_new(ctx->conf, &n);

	if (r < 0)
		return r;
	/* The UUIDs as the driver gave them the first time; best effort, as ever. */
	if (!u->loaded) {
		if (jobcg_gres_node_new(ctx->conf, &u->node) >= 0 &&
		    jobcg_gres_node_load_uuids(u->node, NULL) < 0) {
			jobcg_gres_node_free(u->node);
			u->node = NULL;
		}
		u->loaded = true;
	}
	for (size_t i = 0; u->node && i < jobcg_gres_node_count(n); i++) {
		const char *uuid = jobcg_gres_node_device(u->node, (unsigned)i)->uuid;

		if (uuid && (r = jobcg_gres_node_set_uuid(n, (unsigned)i, uuid)) < 0) {
			jobcg_gres_node_free(n);
			return r;
		}
	}
	*ret = n;
	return 0;
}

/*
 * Loaded past an error in gres.conf (JOBCG_CONFIG_TOLERATE_GRES), the node's devices are
 * unknown: the configuration names none. Deriving anything from that view would widen access
 * (an empty managed set lets every cgroup open every device) or store wrong device sets, so
 * whatever selects, stores or grants devices, or sets up the managed set, refuses; revokes,
 * which read the kernel and the job's cgroups, go on.
 */
int gres_refuse_broken(const struct jobcg_ctx *ctx)
{
	const char *e = jobcg_config_gres_error(ctx->conf);

	/* Past an error in cgroup.conf, ConstrainDevices= may be a default the administrator did
	 * not choose: the same goes. */
	if (!e && (e = jobcg_config_cgroup_error(ctx->conf)))
		return error_set(-EINVAL,
				 "%s (devices are neither granted nor managed while cgroup.conf "
				 "has an error)",
				 e);
	if (!e)
		return 0;
	return error_set(-EINVAL,
			 "%s (devices are neither granted nor managed while gres.conf has "
			 "an error)",
			 e);
}

static bool constrained(const struct jobcg_ctx *ctx, const struct jobcg_gres_node *n)
{
	return ctx->conf->cgroup.constrain_devices && jobcg_gres_node_count(n) > 0;
}

/*
 * The node's device policy, kept open in the context: a step's setup and release (a job's
 * attach and detach) open it once instead of once each, on every step's path. PINNED_ONLY:
 * what a revoke needs, the pinned node program as it is, -ENOENT when none; else the policy a
 * grant needs, set up for this configuration's managed devices (N). Borrowed: the context
 * owns it.
 */
static int ctx_policy(struct jobcg_ctx *ctx, const struct jobcg_gres_node *n, bool pinned_only,
		      struct jobcg_devpolicy **ret)
{
	_cleanup_free_ struct jobcg_devrule *managed = NULL;
	struct jobcg_devpolicy *p = ctx->devpolicy;
	size_t nm = 0;
	int r;

	if (!pinned_only && (r = gres_refuse_broken(ctx)) < 0)
		return r;
	if (p && !devpolicy_current(p)) {
		jobcg_devpolicy_free(p);
		ctx->devpolicy = p = NULL;
	}
	if (p &&
	    (pinned_only ? jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE : ctx->devpolicy_full)) {
		*ret = p;
		return 0;
	}
	if (pinned_only)
		r = jobcg_devpolicy_open_pinned(ctx->conf, jobcg_ctx_root(ctx), &p);
	else if ((r = jobcg_gres_devrules(n, NULL, &managed, &nm)) >= 0)
		r = jobcg_devpolicy_open(ctx->conf, jobcg_ctx_root(ctx), managed, nm, &p);
	if (r < 0)
		return r;
	jobcg_devpolicy_free(ctx->devpolicy);
	ctx->devpolicy = p;
	ctx->devpolicy_full = !pinned_only;
	*ret = p;
	return 0;
}

/*
 * Devices not constrained (ConstrainDevices=no, or no device in gres.conf) while a node program
 * of an earlier configuration is still attached: it fails closed, so it would deny this job
 * every device it still manages. Emptying its managed set makes it allow every device, as the
 * configuration now says. Nothing pinned (the usual case) costs one failed open.
 */
static int unconstrain(struct jobcg_ctx *ctx)
{
	struct jobcg_devpolicy *p = NULL;
	int r = gres_refuse_broken(ctx);

	if (r < 0)
		return r;
	r = ctx_policy(ctx, NULL, true, &p);
	if (r == -ENOENT) {
		jobcg_error_clear();
		return 0;
	}
	if (r < 0)
		return r;
	if (!devpolicy_manages_any(p))
		return 0;
	log_info("devices are not constrained: clearing the managed set of %s",
		 jobcg_devpolicy_pin_dir(p));
	r = jobcg_devpolicy_open(ctx->conf, jobcg_ctx_root(ctx), NULL, 0, &p);
	if (r < 0)
		return r;
	jobcg_devpolicy_free(ctx->devpolicy);
	ctx->devpolicy = p;
	ctx->devpolicy_full = false;
	return 0;
}

int gres_tree_policy(struct jobcg_ctx *ctx)
{
	_cleanup_(node_freep) struct jobcg_gres_node *n = NULL;
	struct jobcg_devpolicy *p = NULL;
	int r;

	/* The managed set is never rewritten from a configuration that lost gres.conf: what
	 * is pinned and attached stays as it is. */
	if (!ctx->conf->cgroup.constrain_devices || jobcg_config_gres_error(ctx->conf) ||
	    jobcg_config_cgroup_error(ctx->conf))
		return 0;
	if ((r = node_open(ctx, &n)) < 0)
		return r;
	if (!constrained(ctx, n))
		return 0;
	return ctx_policy(ctx, n, false, &p);
}

int gres_node_open(const struct jobcg_ctx *ctx, struct jobcg_gres_node **ret)
{
	return node_open(ctx, ret);
}

bool gres_constrained(const struct jobcg_ctx *ctx, const struct jobcg_gres_node *n)
{
	return constrained(ctx, n);
}

int gres_ctx_policy(struct jobcg_ctx *ctx, const struct jobcg_gres_node *n, bool pinned_only,
		    struct jobcg_devpolicy **ret)
{
	return ctx_policy(ctx, n, pinned_only, ret);
}

static int grant(struct jobcg_devpolicy *p, const struct jobcg_gres_node *n, const char *dir,
		 const struct jobcg_gres_set *s)
{
	_cleanup_free_ struct jobcg_devrule *rules = NULL;
	size_t nr = 0;
	int r = jobcg_gres_devrules(n, s, &rules, &nr);

	if (r < 0)
		return r;
	return jobcg_devpolicy_grant(p, dir, rules, nr);
}

static int open_dir(const char *path, int *ret)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return error_set(negative_errno(), "cannot open %s: %s", path, strerror(errno));
	*ret = fd;
	return 0;
}

/* Devices held below a reservation's directory (its own attribute is what it reserves). */
static int below_fn(const char *relpath, unsigned depth, const struct jobcg_gres_set *s,
		    void *userdata)
{
	struct jobcg_gres_set *used = userdata;

	(void)relpath;
	for (size_t i = 0; depth > 0 && i < ELEMENTSOF(used->w); i++)
		used->w[i] |= s->w[i];
	return 0;
}

static int gres_attach(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir,
		       const struct jobcg_limits *l)
{
	_cleanup_(node_freep) struct jobcg_gres_node *n = NULL;
	struct jobcg_devpolicy *p = NULL;
	_cleanup_(request_freep) struct jobcg_gres_request *req = NULL;
	_cleanup_free_ uint64_t *cpus = NULL;
	_cleanup_close_ int rootfd = -1, jfd = -1;
	struct jobcg_gres_set set = {}, used, avail;
	size_t cpu_words = 0;
	int r;

	if (!(l && l->gres && *l->gres) && !ctx->conf->cgroup.constrain_devices)
		return 0;
	if ((r = gres_refuse_broken(ctx)) < 0)
		return r;
	r = node_open(ctx, &n);
	if (r < 0)
		return r;
	if (l && l->gres && *l->gres) {
		r = jobcg_gres_request_parse(l->gres, &req);
		if (r < 0) {
			jobcg_error_prefix("--gres '%s'", l->gres);
			return r;
		}
		if (l->cpus && *l->cpus && jobcg_parse_cpulist(l->cpus, &cpus, &cpu_words) < 0)
			cpus = NULL; /* the limits hook already refused a bad list; no preference */
		_cleanup_free_ char *resv = tree_job_resv(ctx, job_dir);

		/* The free devices are derived from the tree itself, under the node lock. A
		 * reservation's directory holds its devices like a job: outside it they are taken;
		 * inside, they are all there is, less what its other jobs hold. */
		if (resv) {
			_cleanup_free_ char *rdir = tree_resv_dir(ctx, resv);

			if (!rdir)
				return -ENOMEM;
			if ((r = open_dir(rdir, &rootfd)) < 0)
				return r;
			r = jobcg_gres_xattr_read(n, rootfd, NULL, &avail);
			if (r == -ENODATA)
				avail = (struct jobcg_gres_set){};
			else if (r < 0)
				return r;
			used = (struct jobcg_gres_set){};
			r = jobcg_gres_scan(n, rootfd, NULL, below_fn, &used, NULL);
		} else {
			if ((r = open_dir(jobcg_ctx_root(ctx), &rootfd)) < 0)
				return r;
			r = jobcg_gres_scan(n, rootfd, NULL, NULL, NULL, &used);
			jobcg_gres_node_all(n, NULL, &avail);
		}
		if (r < 0)
			return r;
		for (size_t i = 0; i < ELEMENTSOF(avail.w); i++)
			avail.w[i] &= ~used.w[i];
		r = jobcg_gres_select(n, req, &avail, cpus, cpu_words, &set);
		if (r < 0) {
			if (resv)
				jobcg_error_prefix("reservation %s", resv);
			return r;
		}
		if ((r = open_dir(job_dir, &jfd)) < 0)
			return r;
		/* Stored before the grant: a crash in between leaves devices claimed, never shared.
		 */
		r = jobcg_gres_xattr_write(n, jfd, NULL, &set);
		if (r < 0)
			return r;
	}
	if (!constrained(ctx, n))
		return unconstrain(ctx);
	test_pause("gres-before-grant");
	r = ctx_policy(ctx, n, false, &p);
	if (r < 0)
		return r;
	r = grant(p, n, job_dir, &set);
	/* Our detach does not run when our own attach fails: undo a partial grant here. */
	if (r < 0 && jobcg_devpolicy_revoke(p, job_dir) < 0)
		log_warning("rollback: cannot revoke the grant of %s", job_dir);
	return r;
}

/* Revoke every grant at or below @dir (job, steps, tasks), deepest first. */
static void revoke_tree(struct jobcg_devpolicy *p, const char *dir, unsigned depth)
{
	DIR *d;
	struct dirent *de;

	if (depth < 4 && (d = opendir(dir))) {
		while ((de = readdir(d))) {
			_cleanup_free_ char *sub = NULL;

			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			sub = strdup_printf("%s/%s", dir, de->d_name);
			if (sub)
				revoke_tree(p, sub, depth + 1);
		}
		closedir(d);
	}
	if (jobcg_devpolicy_revoke(p, dir) < 0)
		log_warning("cannot revoke the device grant of %s: %s", dir,
			    jobcg_last_error()->message);
}

static void gres_detach(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir)
{
	struct jobcg_devpolicy *p = NULL;
	int r;

	/* Open what is there, whatever the configuration says now: grants made under an older
	 * configuration must go too. Nothing pinned: node mode never ran here. */
	r = ctx_policy(ctx, NULL, true, &p);
	if (r == -ENOENT) {
		_cleanup_(node_freep) struct jobcg_gres_node *n = NULL;

		/* Linear mode: programs go with their cgroups, but detach them cleanly if we can.
		 */
		if (ctx->conf->cgroup.device_program != JOBCG_DEVPROG_LINEAR ||
		    node_open(ctx, &n) < 0 || !constrained(ctx, n) ||
		    ctx_policy(ctx, n, false, &p) < 0)
			return;
	} else if (r < 0) {
		log_warning("job %u: cannot open the device policy: %s", job_id,
			    jobcg_last_error()->message);
		return;
	}
	revoke_tree(p, job_dir, 0);
}

/* The grants of a job's cgroups, read while they exist, revoked once they are gone. */
struct gres_release {
	struct devpolicy_ticket *t;
	size_t n, cap;
};

static void release_free(void *state)
{
	struct gres_release *g = state;

	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++)
		devpolicy_ticket_done(&g->t[i]);
	free(g->t);
	free(g);
}

static int tickets_take(struct jobcg_devpolicy *p, const char *dir, unsigned depth,
			struct gres_release *g)
{
	struct devpolicy_ticket t;
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (depth < 4 && (d = opendir(dir))) {
		while (r >= 0 && (de = readdir(d))) {
			_cleanup_free_ char *sub = NULL;

			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			sub = strdup_printf("%s/%s", dir, de->d_name);
			r = sub ? tickets_take(p, sub, depth + 1, g) : -ENOMEM;
		}
		closedir(d);
		if (r < 0)
			return r;
	}
	if ((r = devpolicy_ticket_take(p, dir, &t)) < 0)
		return r;
	if (t.id == 0)
		return 0;
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 8;
		struct devpolicy_ticket *v = realloc(g->t, cap * sizeof(*v));

		if (!v) {
			devpolicy_ticket_done(&t);
			return -ENOMEM;
		}
		g->t = v;
		g->cap = cap;
	}
	g->t[g->n++] = t;
	return 0;
}

static int gres_prepare_release(struct jobcg_ctx *ctx, uint32_t job_id, const char *job_dir,
				void **ret_state)
{
	struct jobcg_devpolicy *p = NULL;
	struct gres_release *g;
	int r;

	*ret_state = NULL;
	/* Whatever the configuration says now: grants made under an older one must go too.
	 * Nothing pinned: node mode never ran here, and linear programs go with their cgroups. */
	r = ctx_policy(ctx, NULL, true, &p);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	r = tickets_take(p, job_dir, 0, g);
	if (r < 0) {
		release_free(g);
		return r;
	}
	*ret_state = g;
	return 0;
}

static void gres_release(struct jobcg_ctx *ctx, uint32_t job_id, void *state)
{
	struct gres_release *g = state;
	struct jobcg_devpolicy *p = NULL;

	if (!g)
		return;
	if (ctx_policy(ctx, NULL, true, &p) < 0) {
		log_warning("job %u: cannot open the device policy: %s; jobcg gc removes its "
			    "entries",
			    job_id, jobcg_last_error()->message);
	} else {
		for (size_t i = 0; i < g->n; i++)
			if (devpolicy_ticket_redeem(p, &g->t[i]) < 0)
				log_warning("job %u: cannot revoke a device grant: %s", job_id,
					    jobcg_last_error()->message);
	}
	release_free(g);
}

const struct job_hook gres_job_hook = {
    .name = "gres",
    .attach = gres_attach,
    .detach = gres_detach,
    .prepare_release = gres_prepare_release,
    .release = gres_release,
    .discard = release_free,
};

static int read_set(const struct jobcg_gres_node *n, const char *dir, struct jobcg_gres_set *ret)
{
	_cleanup_close_ int fd = -1;
	int r = open_dir(dir, &fd);

	if (r < 0)
		return r;
	r = jobcg_gres_xattr_read(n, fd, NULL, ret);
	if (r == -ENODATA) {
		*ret = (struct jobcg_gres_set){};
		return 0;
	}
	return r;
}

JOBCG_EXPORT int jobcg_gres_get(struct jobcg_ctx *ctx, uint32_t job, const char *step, char **ret)
{
	_cleanup_(node_freep) struct jobcg_gres_node *n = NULL;
	_cleanup_free_ char *dir = step ? tree_step_dir(ctx, job, step) : tree_job_dir(ctx, job);
	struct jobcg_gres_set s;
	int r = tree_ids_valid(job, step);

	if (r < 0)
		return r;
	if (!dir)
		return -ENOMEM;
	if (jobcg_config_gres_error(ctx->conf)) {
		/* No table to check it against: the set as the job recorded it. */
		r = cgfs_xattr_get(dir, JOBCG_GRES_XATTR, ret);
		if (r == -ENODATA) {
			jobcg_error_clear();
			*ret = strdup("");
			return *ret ? 0 : -ENOMEM;
		}
		return r;
	}
	r = node_open(ctx, &n);
	if (r < 0)
		return r;
	r = read_set(n, dir, &s);
	if (r < 0)
		return r;
	return jobcg_gres_set_format(n, &s, ret);
}

JOBCG_EXPORT void jobcg_step_gres_free(struct jobcg_step_gres *g)
{
	if (!g)
		return;
	for (unsigned i = 0; g->task_env && i < g->ntasks; i++)
		strv_free(g->task_env[i]);
	free(g->task_env);
	free(g->devices);
	free(g);
}

JOBCG_EXPORT char **const *jobcg_step_gres_task_env(const struct jobcg_step_gres *g)
{
	return g ? g->task_env : NULL;
}

/* Devices held by the other steps of a job that asked for theirs. */
static int other_steps_used(const struct jobcg_gres_node *n, const char *job_dir, const char *step,
			    struct jobcg_gres_set *ret)
{
	_cleanup_free_ char *own = strdup_printf("step_%s", step);
	struct jobcg_gres_set used = {};
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (!own)
		return -ENOMEM;
	d = opendir(job_dir);
	if (!d)
		return error_set(negative_errno(), "cannot open %s: %s", job_dir, strerror(errno));
	while ((de = readdir(d))) {
		_cleanup_close_ int fd = -1;
		struct jobcg_gres_set s;
		char flag;

		if (de->d_type != DT_DIR || !startswith(de->d_name, "step_") ||
		    streq(de->d_name, own))
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue; /* removed meanwhile */
		if (fgetxattr(fd, GRES_SHARED_XATTR, &flag, 1) == 1)
			continue;
		r = jobcg_gres_xattr_read(n, fd, NULL, &s);
		if (r == -ENODATA) {
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		for (size_t i = 0; i < ELEMENTSOF(s.w); i++)
			used.w[i] |= s.w[i];
	}
	closedir(d);
	if (r < 0)
		return r;
	*ret = used;
	return 0;
}

/* A step's devices named exactly by its launcher: all of them must be its job's. */
static int exact_step_set(const struct jobcg_gres_node *n, const char *devices,
			  const struct jobcg_gres_set *job, struct jobcg_gres_set *ret)
{
	struct jobcg_gres_set s;
	int r = gres_set_parse_as(n, devices, "step devices", &s);

	if (r < 0)
		return r;
	if (!jobcg_gres_set_subset(&s, job)) {
		_cleanup_free_ char *have = NULL;

		(void)jobcg_gres_set_format(n, job, &have);
		return error_set(-EINVAL, "step devices '%s' are not all its job's (%s)", devices,
				 have && *have ? have : "none");
	}
	*ret = s;
	return 0;
}

static int step_setup_locked(struct jobcg_ctx *ctx, uint32_t job, const char *step,
			     const char *gres, const char *exact, const char *gpu_bind,
			     unsigned ntasks, struct jobcg_step_gres **ret)
{
	_cleanup_(node_freep) struct jobcg_gres_node *n = NULL;
	struct jobcg_devpolicy *p = NULL;
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job), *sdir = tree_step_dir(ctx, job, step);
	_cleanup_free_ struct jobcg_gres_set *tasks = NULL;
	_cleanup_close_ int sfd = -1;
	struct jobcg_gpu_bind bind = {};
	struct jobcg_gres_set jset, sset, others, avail;
	struct jobcg_step_gres *g = NULL;
	bool constrain, bound;
	int r;

	if (!jdir || !sdir)
		return -ENOMEM;
	if (ntasks == 0)
		return error_set(-EINVAL, "a step needs at least one task");
	if ((r = gres_refuse_broken(ctx)) < 0)
		return r;
	r = node_open(ctx, &n);
	if (r < 0)
		return r;
	if (jobcg_gres_node_count(n) == 0 && !(gres && *gres) && !(exact && *exact)) {
		/* No devices on this node: nothing to store, grant or set (xattrs not needed). */
		r = jobcg_gpu_bind_parse(gpu_bind, &bind);
		jobcg_gpu_bind_done(&bind);
		if (r < 0)
			return r;
		g = calloc(1, sizeof(*g));
		if (!g || !(g->task_env = calloc(ntasks, sizeof(char **))) ||
		    !(g->devices = strdup(""))) {
			jobcg_step_gres_free(g);
			return -ENOMEM;
		}
		g->ntasks = ntasks;
		for (unsigned t = 0; t < ntasks; t++)
			if (!(g->task_env[t] = calloc(1, sizeof(char *)))) {
				jobcg_step_gres_free(g);
				return -ENOMEM;
			}
		*ret = g;
		return 0;
	}
	r = read_set(n, jdir, &jset);
	if (r < 0)
		return r;
	if (gres && *gres) {
		_cleanup_(request_freep) struct jobcg_gres_request *req = NULL;

		r = jobcg_gres_request_parse(gres, &req);
		if (r < 0) {
			jobcg_error_prefix("--gres '%s'", gres);
			return r;
		}
		r = other_steps_used(n, jdir, step, &others);
		if (r < 0)
			return r;
		avail = jset;
		for (size_t i = 0; i < ELEMENTSOF(avail.w); i++)
			avail.w[i] &= ~others.w[i];
		r = jobcg_gres_select_step(n, req, &jset, &avail, NULL, 0, &sset);
		if (r < 0)
			return r;
	} else if (exact) {
		r = exact_step_set(n, exact, &jset, &sset);
		if (r < 0)
			return r;
	} else {
		sset = jset;
	}
	r = jobcg_gpu_bind_parse(gpu_bind, &bind);
	if (r < 0)
		return r;
	bound = bind.mode != JOBCG_GPU_BIND_NONE;
	tasks = calloc(ntasks, sizeof(*tasks));
	if (!tasks) {
		jobcg_gpu_bind_done(&bind);
		return -ENOMEM;
	}
	for (unsigned t = 0; t < ntasks && r >= 0; t++)
		r = jobcg_gpu_bind_task(n, &bind, &sset, t, ntasks, &tasks[t]);
	jobcg_gpu_bind_done(&bind);
	if (r < 0)
		return r;

	if ((r = open_dir(sdir, &sfd)) < 0)
		return r;
	r = jobcg_gres_xattr_write(n, sfd, NULL, &sset);
	if (r < 0)
		return r;
	if (!(gres && *gres) && !exact &&
	    TEST_FAIL("setxattr", sdir, fsetxattr(sfd, GRES_SHARED_XATTR, "1", 1, 0)) < 0)
		return error_set(negative_errno(), "cannot set %s on %s: %s", GRES_SHARED_XATTR,
				 sdir, strerror(errno));

	constrain = constrained(ctx, n);
	/* A step sharing all of its job's devices is bounded by the job's grant already (the node
	 * program checks every level): no grant of its own, nothing to open or revoke, about a
	 * third of a `jobcg run`'s own work. Only where the job's grant is known to be in place
	 * (its key index), not in linear mode nor for a job allocated unconstrained. A step that
	 * holds its devices (asked for or named) is granted them even when they are all of the
	 * job's now: a claim can widen the job later (Slurm's next step), and the step must not
	 * widen with it. */
	if (constrain && (bound || (gres && *gres) || exact ||
			  memcmp(&sset, &jset, sizeof(sset)) != 0 || !devpolicy_indexed(jdir))) {
		/* Marked first: its release revokes exactly when something may have been granted.
		 */
		if (TEST_FAIL("setxattr", sdir, fsetxattr(sfd, GRES_GRANTED_XATTR, "1", 1, 0)) < 0)
			return error_set(negative_errno(), "cannot set %s on %s: %s",
					 GRES_GRANTED_XATTR, sdir, strerror(errno));
		r = ctx_policy(ctx, n, false, &p);
		if (r >= 0)
			r = grant(p, n, sdir, &sset);
		for (unsigned t = 0; t < ntasks && r >= 0 && bound; t++) {
			_cleanup_free_ char *tdir = tree_task_dir(ctx, job, step, (int)t);

			if (!tdir) {
				r = -ENOMEM;
				break;
			}
			/* Made here so that it is constrained before its task is born in it. */
			if (TEST_FAIL("mkdir", tdir, mkdir(tdir, 0755)) < 0 && errno != EEXIST) {
				r = error_set(negative_errno(), "cannot create %s: %s", tdir,
					      strerror(errno));
				break;
			}
			r = grant(p, n, tdir, &tasks[t]);
		}
		if (r < 0) {
			if (p)
				revoke_tree(p, sdir, 1);
			return r;
		}
	}

	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->ntasks = ntasks;
	g->task_env = calloc(ntasks, sizeof(char **));
	r = g->task_env ? jobcg_gres_set_format(n, &sset, &g->devices) : -ENOMEM;
	for (unsigned t = 0; t < ntasks && r >= 0; t++) {
		struct jobcg_gres_env_in in = {
		    .job = &jset,
		    .step = &sset,
		    .task = &tasks[t],
		    .constrained = constrain,
		    .visible = constrain && bound ? &tasks[t] : &sset,
		};

		r = jobcg_gres_env(n, &in, &g->task_env[t]);
	}
	if (r < 0) {
		jobcg_step_gres_free(g);
		if (p)
			revoke_tree(p, sdir, 1);
		return r;
	}
	*ret = g;
	return 0;
}

JOBCG_EXPORT int jobcg_step_gres_setup(struct jobcg_ctx *ctx, uint32_t job, const char *step,
				       const char *gres, const char *gpu_bind, unsigned ntasks,
				       struct jobcg_step_gres **ret)
{
	int r = tree_ids_valid(job, step ? step : "");

	if (r < 0)
		return r;
	r = jobcg_ctx_lock(ctx);
	if (r < 0)
		return r;
	r = step_setup_locked(ctx, job, step, gres, NULL, gpu_bind, ntasks, ret);
	jobcg_ctx_unlock(ctx);
	return r;
}

JOBCG_EXPORT int jobcg_step_gres_release(struct jobcg_ctx *ctx, uint32_t job, const char *step)
{
	struct jobcg_devpolicy *p = NULL;
	_cleanup_free_ char *sdir = tree_step_dir(ctx, job, step);
	char flag;
	int r = tree_ids_valid(job, step ? step : "");

	if (r < 0)
		return r;
	if (!sdir)
		return -ENOMEM;
	if (getxattr(sdir, GRES_GRANTED_XATTR, &flag, 1) < 0 && errno == ENODATA)
		return 0;
	r = ctx_policy(ctx, NULL, true, &p);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	revoke_tree(p, sdir, 1);
	return 0;
}

JOBCG_EXPORT int jobcg_devices_gc(struct jobcg_ctx *ctx, unsigned *ret_removed)
{
	struct jobcg_devpolicy *p = NULL;
	struct jobcg_devgrant *grants = NULL;
	size_t ng = 0;
	unsigned removed = 0;
	int r;

	r = jobcg_ctx_lock(ctx);
	if (r < 0)
		return r;
	r = ctx_policy(ctx, NULL, true, &p);
	if (r == -ENOENT) {
		r = 0;
		goto out;
	}
	if (r < 0)
		goto out;
	r = jobcg_devpolicy_list(p, &grants, &ng);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < ng; i++) {
		/* The path is resolved from the cgroup id: none means the cgroup is gone. */
		if (grants[i].path)
			continue;
		r = jobcg_devpolicy_revoke_id(p, grants[i].cgroup_id);
		if (r < 0)
			break;
		removed++;
	}
	jobcg_devgrants_free(grants, ng);
out:
	jobcg_ctx_unlock(ctx);
	if (r >= 0 && ret_removed)
		*ret_removed = removed;
	return r < 0 ? r : 0;
}

JOBCG_EXPORT int jobcg_step_gres_setup_exact(struct jobcg_ctx *ctx, uint32_t job, const char *step,
					     const char *devices, const char *gpu_bind,
					     unsigned ntasks, struct jobcg_step_gres **ret)
{
	int r;

	if (!devices)
		return error_set(-EINVAL, "no step devices given");
	if ((r = tree_ids_valid(job, step ? step : "")) < 0)
		return r;
	r = jobcg_ctx_lock(ctx);
	if (r < 0)
		return r;
	r = step_setup_locked(ctx, job, step, NULL, devices, gpu_bind, ntasks, ret);
	jobcg_ctx_unlock(ctx);
	return r;
}

/* What jobcg_gres_scan() looks for on behalf of a claim: a directory of another job holding
 * one of the claimed devices. */
struct claim_scan {
	const char *own; /* "job_<id>" */
	const struct jobcg_gres_set *want;
	char holder[64];
};

static int claim_scan_fn(const char *relpath, unsigned depth, const struct jobcg_gres_set *s,
			 void *userdata)
{
	struct claim_scan *c = userdata;
	size_t n = strlen(c->own);

	size_t l = strlen(relpath);

	if (strncmp(relpath, c->own, n) == 0 && (relpath[n] == '\0' || relpath[n] == '/'))
		return 0;
	/* The reservation the job is in holds its devices for its jobs. */
	if (depth > 0 && strncmp(c->own, relpath, l) == 0 && c->own[l] == '/')
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(s->w); i++)
		if (s->w[i] & c->want->w[i]) {
			/* The whole path: a job inside a reservation is "resv_<name>/job_<id>",
			 * and the job, not its reservation, is what to release. */
			snprintf(c->holder, sizeof(c->holder), "%s", relpath);
			return 1;
		}
	return 0;
}

/* Inside a reservation a job can open only its reservation's devices (the bounding marker):
 * a claim of any other would take it out of the pool for a job that can never use it. */
static int claim_in_resv(struct jobcg_ctx *ctx, const struct jobcg_gres_node *n, const char *jdir,
			 const char *devices, const struct jobcg_gres_set *want)
{
	_cleanup_free_ char *resv = tree_job_resv(ctx, jdir), *rdir = NULL, *held = NULL,
			    *names = NULL;
	struct jobcg_gres_set mine = {};
	bool dropped = false;
	int r;

	if (!resv)
		return 0;
	if (!(rdir = tree_resv_dir(ctx, resv)))
		return -ENOMEM;
	r = cgfs_xattr_get(rdir, JOBCG_GRES_XATTR, &held);
	if (r == -ENOENT)
		return error_set(r, "reservation %s is gone (%s)", resv, rdir);
	if (r < 0 && r != -ENODATA)
		return r;
	if (r == 0 && *held && (r = gres_set_parse_known(n, held, &mine, &dropped)) < 0) {
		jobcg_error_prefix("reservation %s: " JOBCG_GRES_XATTR, resv);
		return r;
	}
	if (jobcg_gres_set_subset(want, &mine))
		return 0;
	if (held && jobcg_gres_set_format(n, &mine, &names) < 0)
		names = NULL;
	return error_set(-EPERM,
			 "devices %s: not devices of reservation %s (%s), which %s is in: a job "
			 "inside a reservation can claim only its reservation's devices",
			 devices, resv, names && *names ? names : "none", strrchr(jdir, '/') + 1);
}

/*
 * A step that shares its job's devices (set up without a request: Slurm's extern step, where
 * jobcg adopt puts a job's ssh logins) follows the job's claims, as in Slurm, where the extern
 * step is bounded by the job's devices only: its recorded set becomes the job's @both, and a
 * step granted on its own (linear mode, or a job whose grant was not indexed) is granted
 * @both. Where the node program bounds it by the job's grant alone, nothing more is needed.
 * @p: the open policy (NULL when devices are not constrained: only the record changes).
 */
static int shared_steps_follow(const struct jobcg_gres_node *n, struct jobcg_devpolicy *p,
			       const char *jdir, const struct jobcg_gres_set *both)
{
	struct dirent *de;
	DIR *d = opendir(jdir);
	int r = 0;

	if (!d)
		return error_set(negative_errno(), "cannot open %s: %s", jdir, strerror(errno));
	while (r >= 0 && (de = readdir(d))) {
		_cleanup_close_ int fd = -1;
		_cleanup_free_ char *sdir = NULL;
		char flag;

		if (de->d_type != DT_DIR || !startswith(de->d_name, "step_"))
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || fgetxattr(fd, GRES_SHARED_XATTR, &flag, 1) != 1)
			continue; /* removed meanwhile, or a step holding devices of its own */
		r = jobcg_gres_xattr_write(n, fd, NULL, both);
		if (r < 0 || !p || fgetxattr(fd, GRES_GRANTED_XATTR, &flag, 1) != 1)
			continue;
		sdir = cgfs_path(jdir, de->d_name);
		r = sdir ? grant(p, n, sdir, both) : -ENOMEM;
	}
	closedir(d);
	return r;
}

static int job_claim_locked(struct jobcg_ctx *ctx, uint32_t job, const char *devices)
{
	_cleanup_(node_freep) struct jobcg_gres_node *n = NULL;
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job), *own = NULL;
	_cleanup_close_ int rootfd = -1, jfd = -1;
	struct jobcg_devpolicy *p = NULL;
	struct jobcg_gres_set want, have, used, both;
	struct claim_scan c = {.want = &want};
	int r;

	if (!jdir)
		return -ENOMEM;
	if ((r = gres_refuse_broken(ctx)) < 0)
		return r;
	/* Relative to the root: "job_<id>", or "resv_<name>/job_<id>" inside a reservation. */
	own = strdup(jdir + strlen(jobcg_ctx_root(ctx)) + 1);
	c.own = own;
	if (!own)
		return -ENOMEM;
	r = node_open(ctx, &n);
	if (r < 0)
		return r;
	r = gres_set_parse_as(n, devices, "devices", &want);
	if (r < 0)
		return r;
	if ((r = open_dir(jdir, &jfd)) < 0)
		return r;
	r = jobcg_gres_xattr_read(n, jfd, NULL, &have);
	if (r == -ENODATA)
		have = (struct jobcg_gres_set){};
	else if (r < 0)
		return r;
	if (jobcg_gres_set_subset(&want, &have))
		return 0;
	if ((r = claim_in_resv(ctx, n, jdir, devices, &want)) < 0)
		return r;
	if ((r = open_dir(jobcg_ctx_root(ctx), &rootfd)) < 0)
		return r;
	/* Under the node lock: nothing else can take a device between this scan and the store. */
	r = jobcg_gres_scan(n, rootfd, NULL, claim_scan_fn, &c, &used);
	if (r < 0)
		return r;
	if (r > 0) {
		unsigned long holder = 0;

		/* A job left behind (its launcher killed before removing it) holds them until
		 * someone releases it: say how. */
		const char *base = strrchr(c.holder, '/') ? strrchr(c.holder, '/') + 1 : c.holder;

		if (sscanf(base, "job_%lu", &holder) == 1)
			return error_set(
			    -EBUSY,
			    "devices %s: held by %s (if that job is over: 'jobcg release "
			    "%lu')",
			    devices, c.holder, holder);
		return error_set(-EBUSY, "devices %s: held by %s", devices, c.holder);
	}
	for (size_t i = 0; i < ELEMENTSOF(both.w); i++)
		both.w[i] = have.w[i] | want.w[i];
	/* Stored before the grant, as in gres_attach(): claimed, never shared. */
	r = jobcg_gres_xattr_write(n, jfd, NULL, &both);
	if (r < 0)
		return r;
	if (constrained(ctx, n)) {
		r = ctx_policy(ctx, n, false, &p);
		if (r >= 0)
			r = grant(p, n, jdir, &both);
		if (r < 0)
			return r;
	}
	return shared_steps_follow(n, p, jdir, &both);
}

JOBCG_EXPORT int jobcg_job_gres_claim(struct jobcg_ctx *ctx, uint32_t job, const char *devices)
{
	int r = jobcg_ctx_lock(ctx);

	if (r < 0)
		return r;
	r = job_claim_locked(ctx, job, devices);
	jobcg_ctx_unlock(ctx);
	return r;
}
