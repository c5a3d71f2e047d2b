/* jobcg: the library context: host probe, tree root, the tree's creation and the node lock. */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <time.h>

#include "cgroupfs.h"
#include "context_internal.h"
#include "devices.h"
#include "job_hooks.h"
#include "jobcg/jobgres.h"
#include "sysinfo_internal.h"
#include "spec.h"
#include "log.h"
#include "scope_choose.h"
#include "util.h"

unsigned ctx_wanted_controllers(const struct jobcg_config *conf)
{
	unsigned m = (1u << JOBCG_CTRL_CPUSET) | (1u << JOBCG_CTRL_CPU) |
		     (1u << JOBCG_CTRL_MEMORY) | (1u << JOBCG_CTRL_PIDS);

	for (char **p = conf->cgroup.enable_extra_controllers; p && *p; p++) {
		int c = jobcg_controller_from_name(*p);

		if (c >= 0)
			m |= 1u << c;
		else
			log_warning("EnableExtraControllers: unknown controller '%s' ignored", *p);
	}
	return m;
}

JOBCG_EXPORT int jobcg_ctx_open(const struct jobcg_config *conf, unsigned flags,
				struct jobcg_ctx **ret)
{
	struct jobcg_ctx *c;
	const char *sd;
	int r;

	if (!conf || !ret)
		return error_set(-EINVAL, "jobcg_ctx_open: missing argument");
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->conf = conf;
	c->flags = flags;
	c->lock_fd = -1;
	c->want = ctx_wanted_controllers(conf);
	c->memo = calloc(1, sizeof(*c->memo));
	if (!c->memo) {
		free(c);
		return -ENOMEM;
	}
	r = discover_probe_for_ctx(conf, &c->info);
	if (r < 0) {
		free(c->memo);
		free(c);
		return r;
	}
	sd = conf->cgroup.state_dir && *conf->cgroup.state_dir ? conf->cgroup.state_dir
							       : "/var/lib/jobcg";
	c->lock_path = cgfs_path(sd, "jobcg.lock");
	if (!c->lock_path) {
		jobcg_ctx_free(c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

JOBCG_EXPORT void jobcg_ctx_free(struct jobcg_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->lock_fd >= 0)
		close(ctx->lock_fd);
	jobcg_sysinfo_free(ctx->info);
	jobcg_devpolicy_free(ctx->devpolicy);
	free(ctx->lock_path);
	if (ctx->memo) {
		free(ctx->memo->jobdir.dir);
		jobcg_gres_node_free(ctx->memo->uuids.node);
	}
	free(ctx->memo);
	free(ctx);
}

void ctx_jobdir_forget(const struct jobcg_ctx *ctx, uint32_t job)
{
	struct ctx_jobdir *m = &ctx->memo->jobdir;

	if (m->dir && m->job == job) {
		free(m->dir);
		m->dir = NULL;
	}
}

char *ctx_state_file(const struct jobcg_ctx *ctx, const char *name)
{
	const char *slash = strrchr(ctx->lock_path, '/');

	return strdup_printf("%.*s/%s", (int)(slash - ctx->lock_path), ctx->lock_path, name);
}

JOBCG_EXPORT const struct jobcg_config *jobcg_ctx_config(const struct jobcg_ctx *ctx)
{
	return ctx->conf;
}

JOBCG_EXPORT const struct jobcg_sysinfo *jobcg_ctx_sysinfo(const struct jobcg_ctx *ctx)
{
	return discover_complete(ctx->conf, ctx->info);
}

char *ctx_limitation(const struct jobcg_ctx *ctx, unsigned ctrl, const char *what)
{
	return discover_limitation(discover_complete(ctx->conf, ctx->info), ctrl, what);
}

JOBCG_EXPORT const char *jobcg_ctx_mount(const struct jobcg_ctx *ctx)
{
	return ctx->info->mount;
}

JOBCG_EXPORT const char *jobcg_ctx_root(const struct jobcg_ctx *ctx)
{
	return ctx->info->root;
}

JOBCG_EXPORT const char *jobcg_ctx_lock_path(const struct jobcg_ctx *ctx)
{
	return ctx->lock_path;
}

JOBCG_EXPORT const char *jobcg_ctx_backend(const struct jobcg_ctx *ctx)
{
	return ctx->backend ? ctx->backend->name : scope_backend_name(ctx->conf);
}

/*
 * The lock is held for a few mkdir/write/bpf calls at a time and not across a wait for
 * processes (job removal drops it while its processes die; only `teardown --force` keeps it
 * through its grace, to let nothing begin in a tree it removes), so a wait longer than
 * NodeLockTimeout means a stuck holder or a long teardown: fail, naming it, rather than queue
 * every launch and login behind it (flock_wait()).
 */
static int lock_wait(int fd, void *userdata)
{
	struct jobcg_ctx *ctx = userdata;
	unsigned timeout_ms = ctx->conf->cgroup.node_lock_timeout_ms;
	int r = flock_wait(fd, LOCK_EX, timeout_ms);

	if (r == -ETIMEDOUT) {
		_cleanup_free_ char *who = flock_holder(fd);

		return error_set(-ETIMEDOUT,
				 "the node lock %s is held by %s for more than %u ms "
				 "(NodeLockTimeout)",
				 ctx->lock_path, who ? who : "another process", timeout_ms);
	}
	if (r < 0)
		return error_set(r, "cannot lock %s: %s", ctx->lock_path, strerror(-r));
	return 0;
}

int ctx_state_dir_ready(struct jobcg_ctx *ctx)
{
	int r;

	if (ctx->state_dir_ok)
		return 0;
	r = state_dir_prepare(ctx->lock_path);
	if (r < 0)
		return r;
	ctx->state_dir_ok = true;
	return 0;
}

/* A child fork()ed while its parent held the lock has the parent's descriptor and depth, but
 * not the lock: the parent may go on changing the tree. The copy is dropped (closing it leaves
 * the parent's flock alone), so the child takes the lock for itself and waits for it. */
static void lock_forget_inherited(struct jobcg_ctx *ctx)
{
	if (ctx->lock_depth == 0 || ctx->lock_pid == getpid())
		return;
	close(ctx->lock_fd);
	ctx->lock_fd = -1;
	ctx->lock_depth = 0;
}

JOBCG_EXPORT int jobcg_ctx_lock(struct jobcg_ctx *ctx)
{
	int fd, r;

	lock_forget_inherited(ctx);
	if (ctx->lock_depth > 0) {
		ctx->lock_depth++;
		return 0;
	}
	r = ctx_state_dir_ready(ctx);
	if (r < 0)
		return r;
	/* Taken again where `jobcg teardown` unlinked the file meanwhile (lock_file_take()). */
	r = lock_file_take(ctx->lock_path, lock_wait, ctx, &fd);
	if (r < 0)
		return r;
	ctx->lock_fd = fd;
	ctx->lock_depth = 1;
	ctx->lock_pid = getpid();
	return 0;
}

JOBCG_EXPORT void jobcg_ctx_unlock(struct jobcg_ctx *ctx)
{
	lock_forget_inherited(ctx);
	if (ctx->lock_depth == 0)
		return;
	if (--ctx->lock_depth > 0)
		return;
	/* Closing the only descriptor drops the flock. */
	close(ctx->lock_fd);
	ctx->lock_fd = -1;
}

bool ctx_lock_suspend(struct jobcg_ctx *ctx)
{
	if (ctx->lock_depth != 1)
		return false;
	jobcg_ctx_unlock(ctx);
	return true;
}

int ctx_lock_resume(struct jobcg_ctx *ctx, bool suspended)
{
	return suspended ? jobcg_ctx_lock(ctx) : 0;
}

/*
 * Resource specialisation: system/ (the keeper and jobcg's helpers) is confined to the reserved
 * CPUs and MemSpecLimit. Without the keys its limits are reset, so removing them from
 * cgroup.conf takes effect on the next command. Where the controller does not reach the tree
 * this is only a warning here; jobs are refused (unless best effort) and `jobcg check` says so.
 */
static int spec_system_apply(struct jobcg_ctx *ctx, const char *sys)
{
	const struct jobcg_cgroup_conf *c = &ctx->conf->cgroup;
	bool cpus_on = jobcg_spec_cpus_configured(c);
	unsigned usable = ctx->info->usable;
	char buf[32];
	int r;

	if (usable & (1u << JOBCG_CTRL_CPUSET)) {
		_cleanup_free_ char *online = NULL, *cpus = NULL;

		if (cpus_on) {
			if ((r = jobcg_online_cpus(&online)) < 0 ||
			    (r = jobcg_spec_cpus(c, online, &cpus)) < 0 ||
			    (r = cgfs_write(sys, "cpuset.cpus", cpus)) < 0)
				return r;
		} else if (cgfs_read(sys, "cpuset.cpus", &cpus) == 0 && cpus[strspn(cpus, " \n")]) {
			_cleanup_free_ char *all = NULL;

			/* A reservation was lifted. The kernel refuses to empty the cpuset.cpus of
			 * a populated cgroup (ENOSPC), so system/ gets every CPU of the root
			 * instead. */
			if (cgfs_read(ctx->info->root, "cpuset.cpus.effective", &all) < 0 ||
			    cgfs_write(sys, "cpuset.cpus", all) < 0)
				/* Not fatal: only the keeper's CPUs are at stake, never a job's. */
				log_warning("lifting the CPU reservation of %s: %s", sys,
					    jobcg_last_error()->message);
		}
	} else if (cpus_on) {
		_cleanup_free_ char *why =
		    ctx_limitation(ctx, JOBCG_CTRL_CPUSET,
				   "the CPUs reserved for the system (SpecCPUs/CoreSpecCount)");

		log_warning("%s", why ? why : "the CPU reservation cannot be enforced");
	}
	if (usable & (1u << JOBCG_CTRL_MEMORY)) {
		uint64_t cur = 0;

		if (c->mem_spec_limit) {
			snprintf(buf, sizeof(buf), "%llu", (unsigned long long)c->mem_spec_limit);
			r = cgfs_write(sys, "memory.max", buf);
			if (r < 0)
				return r;
		} else if (cgfs_read_u64(sys, "memory.max", &cur) == 0 && cur != UINT64_MAX &&
			   cgfs_write(sys, "memory.max", "max") < 0)
			log_warning("lifting the memory reservation of %s: %s", sys,
				    jobcg_last_error()->message);
	} else if (c->mem_spec_limit) {
		_cleanup_free_ char *why = ctx_limitation(
		    ctx, JOBCG_CTRL_MEMORY, "the memory reserved for the system (MemSpecLimit)");

		log_warning("%s", why ? why : "the memory reservation cannot be enforced");
	}
	return 0;
}

JOBCG_EXPORT int jobcg_ctx_systemd_scope(struct jobcg_ctx *ctx)
{
	_cleanup_free_ char *root = NULL;

	if (process_is_static())
		return error_set(-ELIBEXEC, "this jobcg is linked statically and cannot load "
					    "libsystemd: run the scope helper as jobcg-dynamic");
	return scope_systemd_backend.ensure(ctx->conf, ctx->info->mount, ctx->info->root_rel,
					    &root);
}

int ctx_refuse_cgroup_broken(const struct jobcg_ctx *ctx)
{
	const char *e = jobcg_config_cgroup_error(ctx->conf);

	if (!e)
		return 0;
	return error_set(-EINVAL,
			 "%s (nothing is made or constrained while cgroup.conf has an error: "
			 "only ending, inspecting and cleaning up jobs is possible)",
			 e);
}

JOBCG_EXPORT int jobcg_ctx_ensure_tree(struct jobcg_ctx *ctx)
{
	struct jobcg_sysinfo *s = ctx->info;
	_cleanup_free_ char *root = NULL, *sys = NULL;
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	unsigned usable;
	int r;

	if (ctx->tree_ready)
		return 0;
	/* Controllers, the system/ leaf's reservation and the device policy all come from it. */
	if ((r = ctx_refuse_cgroup_broken(ctx)) < 0)
		return r;
	if ((ctx->flags & JOBCG_CTX_NO_CREATE_ROOT) && !cgfs_is_cgroup2(s->root))
		return error_set(-ENOENT, "the jobcg tree %s does not exist (run 'jobcg init')",
				 s->root);
	r = scope_ensure(ctx->conf, s->mount, s->root_rel, &ctx->backend, &root);
	if (r < 0)
		return r;
	sys = cgfs_path(s->root, "system");
	if (!sys)
		return -ENOMEM;
	r = cgfs_mkdir(sys, true);
	if (r < 0)
		return r;
	/* No internal processes: whatever sits in the root (a scope's keeper process) is parked in
	 * system/ before controllers are enabled for the children. */
	r = cgfs_pids(s->root, false, &pids, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		r = cgfs_move_pid(sys, pids[i]);
		if (r < 0 && r != -ESRCH)
			return r;
	}
	r = cgfs_enable(s->root, ctx->want, NULL);
	if (r < 0)
		return r;
	if (cgfs_controllers(s->root, "cgroup.controllers", &usable) == 0)
		s->usable = usable;
	r = spec_system_apply(ctx, sys);
	if (r < 0)
		return r;
	s->root_exists = true;
	r = gres_tree_policy(ctx);
	if (r < 0)
		return r;
	ctx->tree_ready = true;
	return 0;
}
