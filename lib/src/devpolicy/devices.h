/* jobcg internal: device access control for job, step and task cgroups through eBPF device
 * programs. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "config_internal.h"
#include "jobcg/devrule.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Semantics: a device not matched by the managed rules (the gres.conf files) is always allowed.
 * A managed device is allowed to a process below the root iff at least one of its job, step
 * and task cgroups holds a grant and every one that does grants all requested access bits
 * (r, w, m). A process whose job, step and task hold no grant at all (system/, a job being
 * created or whose grant was revoked, a directory made by hand) is denied every managed
 * device: the policy fails closed. Outside the root nothing is decided.
 *
 * Node mode (DeviceProgram=node, default): one program "jobcg_node" per jobcg root with maps
 * "jobcg_managed" and "jobcg_policy", pinned under <BpfPinDir>/root-<root cgroup id>-v<layout>/
 * and attached at the root with BPF_F_ALLOW_MULTI. They survive the process; open() reuses them.
 * A grant is a map update. Only cgroups 1 (job), 2 (step) and 4 (task: job/step/user/task_N)
 * levels below the root can be granted.
 * Linear mode (DeviceProgram=linear, or when the node program does not load on this kernel):
 * one "jobcg_linear" program per constrained cgroup, attached with BPF_F_ALLOW_MULTI and
 * replaced with BPF_F_REPLACE; it goes away with the cgroup. A "jobcg_guard" program denying
 * every managed device is attached at the root with BPF_F_ALLOW_OVERRIDE, which the kernel
 * runs only for cgroups with no jobcg_linear program on their path: that is how linear mode
 * fails closed. Open refuses (-EBUSY) when another program is attached at the root.
 */
struct jobcg_devpolicy;

/** One constrained cgroup as listed by jobcg_devpolicy_list(). */
struct jobcg_devgrant {
	uint64_t cgroup_id;
	char *path;		     /* relative to the root ("job_1/step_0"); NULL if not found */
	int level;		     /* levels below the root (1 job, 2 step, 4 task); -1 unknown */
	bool in_reservation;	     /* path is resv_<name> (level 1) or below it, where every
				      * level is one deeper: job 2, step 3, task 5 */
	uint32_t prog_id;	     /* linear mode: the program's id; 0 in node mode */
	struct jobcg_devrule *rules; /* allow rules; none = every managed device denied */
	size_t n_rules;
};

/**
 * Set up device control below @root_cgroup_path (an absolute path of a cgroup v2 directory).
 * @managed are the devices jobcg controls (at most 4096 rules; "c *:5" shapes are refused).
 * Node mode loads or reuses the pinned program and maps, makes the managed map equal to
 * @managed and attaches the program at the root if it is not attached. When the node program
 * cannot be loaded (helpers missing on this kernel) it falls back to linear mode, logging the
 * reason with log_warning (see jobcg_devpolicy_fallback_reason()). Linear mode touches nothing
 * at the root. Returns 0, or -errno with the error record set; nothing is left half-created.
 * Free with jobcg_devpolicy_free() (which leaves kernel state in place).
 */
int jobcg_devpolicy_open(const struct jobcg_config *conf, const char *root_cgroup_path,
			 const struct jobcg_devrule *managed, size_t n_managed,
			 struct jobcg_devpolicy **ret);

/**
 * Open the node-mode state pinned for that root as it is: never creates, loads or attaches a
 * program and leaves the managed map alone (for listing, revoking and gc whatever the
 * configuration says now). Grants, revokes, gc, list and destroy all work on the result.
 * -ENOENT when nothing is pinned for that root (then only linear programs can be in use: open
 * with jobcg_devpolicy_open() in linear mode to list or revoke those).
 */
int jobcg_devpolicy_open_pinned(const struct jobcg_config *conf, const char *root_cgroup_path,
				struct jobcg_devpolicy **ret);

/**
 * Whether node mode's program is attached at the root (*ret). An open with
 * jobcg_devpolicy_open() attaches it; one with jobcg_devpolicy_open_pinned() leaves it as it
 * is, so that `jobcg policy` can say when it is not, which leaves every device open. Linear mode:
 * always true (its programs are per cgroup). 0 or -errno.
 */
int jobcg_devpolicy_attached(const struct jobcg_devpolicy *p, bool *ret);

/** The mode in effect (JOBCG_DEVPROG_NODE or JOBCG_DEVPROG_LINEAR). */
enum jobcg_device_program jobcg_devpolicy_mode(const struct jobcg_devpolicy *p);

/** Why node mode fell back to linear mode, or NULL. Valid while @p lives. */
const char *jobcg_devpolicy_fallback_reason(const struct jobcg_devpolicy *p);

/** The canonical absolute path of the root. */
const char *jobcg_devpolicy_root(const struct jobcg_devpolicy *p);

/** Node mode: the bpffs directory holding the pins ("prog", "jobcg_managed", "jobcg_policy"). */
const char *jobcg_devpolicy_pin_dir(const struct jobcg_devpolicy *p);

/**
 * Constrain the cgroup at @cgroup_path (absolute, below the root): managed devices not granted
 * by @allowed (allow rules, at most 4096) are denied to its processes, and so are access bits
 * not granted. Replaces an earlier grant of that cgroup. In node mode a fresh grant writes the
 * entries before the marker, so the cgroup never sees a denial of what it is granted; a
 * re-grant removes what is no longer granted before adding, so it is never more permissive
 * than either grant. On error the cgroup may be left constrained with part of the new grant:
 * callers revoke and fail the launch.
 */
int jobcg_devpolicy_grant(struct jobcg_devpolicy *p, const char *cgroup_path,
			  const struct jobcg_devrule *allowed, size_t n);

/**
 * Remove every entry for that cgroup (node mode) and detach and release its jobcg_linear
 * programs (linear mode, or left from it). Call before rmdir. Not an error when there is
 * nothing to remove.
 */
int jobcg_devpolicy_revoke(struct jobcg_devpolicy *p, const char *cgroup_path);

/** Node mode: remove the entries of a cgroup id (for cgroups already removed). */
int jobcg_devpolicy_revoke_id(struct jobcg_devpolicy *p, uint64_t cgroup_id);

/**
 * Node mode: remove the entries of cgroups that no longer exist (asked of the kernel by id, so
 * cgroups created meanwhile are safe). *ret_removed (may be NULL) gets how many were removed.
 */
int jobcg_devpolicy_gc(struct jobcg_devpolicy *p, size_t *ret_removed);

/**
 * List constrained cgroups with their grants, sorted by path (unresolved ids last). Node mode
 * reads the policy map; linear mode walks the tree below the root and reads back jobcg_linear
 * programs. Free with jobcg_devgrants_free().
 */
int jobcg_devpolicy_list(struct jobcg_devpolicy *p, struct jobcg_devgrant **ret, size_t *ret_n);
void jobcg_devgrants_free(struct jobcg_devgrant *g, size_t n);

/** The managed rules in effect (node mode: read from the managed map). Caller frees *ret. */
int jobcg_devpolicy_managed(struct jobcg_devpolicy *p, struct jobcg_devrule **ret, size_t *ret_n);

/**
 * Node mode: detach the node program from the root, remove the pins and the pin directory, then
 * free @p. Existing grants stop being enforced. Linear mode: only frees @p.
 */
int jobcg_devpolicy_destroy(struct jobcg_devpolicy *p);

/** Release @p (NULL ok); kernel state stays as it is. */
void jobcg_devpolicy_free(struct jobcg_devpolicy *p);

/** The managed rules of a configuration: every stat()ed gres.conf file, "c M:m rwm". */
int jobcg_devpolicy_managed_from_config(const struct jobcg_config *conf, struct jobcg_devrule **ret,
					size_t *ret_n);

/** The id of a cgroup v2 directory (the kernel's cgroup id, i.e. its inode number). */
int jobcg_cgroup_id(const char *path, uint64_t *ret);

#ifdef __cplusplus
}
#endif
