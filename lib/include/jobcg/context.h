/* jobcg: the library context: configuration, the cgroup v2 mount, the tree root and the node lock.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "jobcg/config.h"
#include "jobcg/error.h"
#include "jobcg/sysinfo.h"

#ifdef __cplusplus
extern "C" {
#endif

struct jobcg_ctx;

enum {
	/* Do not create the tree root when a job is created (it must exist: `jobcg init`). */
	JOBCG_CTX_NO_CREATE_ROOT = 1u << 0,
};

/**
 * Open a context: probe the host (jobcg_sysinfo_probe) and compute the tree root
 * (<mount>/<root>, root from JobcgRoot=/$JOBCG_ROOT or <CgroupSlice>/<JobcgScope>).
 * @conf is borrowed and must outlive the context. Creates nothing on disk. Fails when no
 * cgroup v2 mount exists. The context's sysinfo does not load a test BPF program (bpf_device
 * reads "not probed"; jobcg_sysinfo_probe() does). Free with jobcg_ctx_free().
 */
JOBCG_EXPORT int jobcg_ctx_open(const struct jobcg_config *conf, unsigned flags,
				struct jobcg_ctx **ret);
JOBCG_EXPORT void jobcg_ctx_free(struct jobcg_ctx *ctx);

JOBCG_EXPORT const struct jobcg_config *jobcg_ctx_config(const struct jobcg_ctx *ctx);
JOBCG_EXPORT const struct jobcg_sysinfo *jobcg_ctx_sysinfo(const struct jobcg_ctx *ctx);
/** Absolute path of the cgroup v2 mount. */
JOBCG_EXPORT const char *jobcg_ctx_mount(const struct jobcg_ctx *ctx);
/** Absolute path of the tree root (<mount>/system.slice/jobcg.scope by default). */
JOBCG_EXPORT const char *jobcg_ctx_root(const struct jobcg_ctx *ctx);
/** Path of the node lock file (<StateDir>/jobcg.lock). */
JOBCG_EXPORT const char *jobcg_ctx_lock_path(const struct jobcg_ctx *ctx);

/**
 * Make sure the tree exists: the root through the scope backend (systemd or mkdir), its
 * `system/` parking leaf, any process found in the root moved there, then the controllers
 * enabled in the root's cgroup.subtree_control. Idempotent. `jobcg init`.
 */
JOBCG_EXPORT int jobcg_ctx_ensure_tree(struct jobcg_ctx *ctx);
/**
 * For jobcg's own programs: create or revive the tree's systemd scope (D-Bus, keeper, controllers
 * of the ancestors) and nothing else, without the node lock: a statically linked jobcg, which must
 * not load libsystemd, holds that lock while it runs this in its dynamically linked twin
 * (`jobcg-dynamic scope-helper`). -ELIBEXEC in a statically linked process.
 */
JOBCG_EXPORT int jobcg_ctx_systemd_scope(struct jobcg_ctx *ctx);
/** "systemd" or "mkdir" once the tree was ensured, else the backend that would be chosen. */
JOBCG_EXPORT const char *jobcg_ctx_backend(const struct jobcg_ctx *ctx);

/**
 * Take / release the exclusive node-wide lock (flock on jobcg_ctx_lock_path()). Nestable within
 * one context. Job/step creation and removal and gc take it themselves; extensions (GRES
 * selection) run inside those calls and need not take it again. The lock is held by the process
 * that took it: a child fork()ed meanwhile does not hold it through its copy of the context, and
 * the first call of the child's that takes the lock waits for the parent's release.
 */
JOBCG_EXPORT int jobcg_ctx_lock(struct jobcg_ctx *ctx);
JOBCG_EXPORT void jobcg_ctx_unlock(struct jobcg_ctx *ctx);

#ifdef __cplusplus
}
#endif
