/* jobcg internal: what the library's other modules need of an open device policy. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices.h"

/*
 * Whether a policy opened earlier still holds the maps pinned now (always true in linear mode):
 * a policy kept open across calls must not write into maps that were unpinned and replaced.
 */
bool devpolicy_current(const struct jobcg_devpolicy *p);

/*
 * What identifies a node-mode policy's program in the kernel: its id, its maps' ids and the
 * root it was built for. -ENOENT in linear mode (or when nothing is pinned).
 */
struct devpolicy_node_ident {
	uint32_t prog_id, managed_id, policy_id;
	uint64_t root_id;
};
int devpolicy_node_ident(const struct jobcg_devpolicy *p, struct devpolicy_node_ident *ret);

/* Whether the policy manages any device (node mode: its managed map holds one). */
bool devpolicy_manages_any(const struct jobcg_devpolicy *p);

/*
 * Whether the cgroup at PATH lists its node-mode grant in a key index (so the grant is in
 * place); false when unknown: no grant, linear mode, or xattrs refused.
 */
bool devpolicy_indexed(const char *path);

/*
 * Revoking a grant after its cgroup is gone. A job's grants are revoked only once its
 * directories are removed, so that a process still inside (an adopt racing the release, one
 * in D state) never finds its cgroup without a grant; the cgroup's id, and its key index, are
 * read before. Kernel cgroup ids are never reused, so entries of a removed cgroup constrain
 * nothing until they are deleted.
 * take: the ticket of CGROUP_PATH (id 0: nothing to revoke: no grant, or linear mode, whose
 * programs go with their cgroups). redeem: delete its entries, marker last; frees the ticket.
 * done: free a ticket that is not redeemed (the removal failed: the grant stays).
 */
struct devprog_policy_key;
struct devpolicy_ticket {
	uint64_t id;
	struct devprog_policy_key *keys;
	size_t n;
	bool indexed; /* keys came from the cgroup's key index */
};
int devpolicy_ticket_take(struct jobcg_devpolicy *p, const char *cgroup_path,
			  struct devpolicy_ticket *ret);
int devpolicy_ticket_redeem(struct jobcg_devpolicy *p, struct devpolicy_ticket *t);
void devpolicy_ticket_done(struct devpolicy_ticket *t);

/*
 * Reservations (node mode; in linear mode these do nothing and the list is empty).
 * grant_bound: a grant at a reservation's level (1) that bounds every cgroup below it without
 * counting as a grant of its own (devprog.h, DEVPROG_MARKER_BOUND), so that a half-made job
 * inside a reservation still opens nothing.
 * reserve: RULES (exact devices) usable only below RESV_PATH, whatever grants say elsewhere.
 * unreserve_owner: delete only the {RESV_ID, dev} entries of RULES, never the "reserved" flags,
 * which another reservation (a live one, or the stale entry of one removed by hand) may share;
 * a flag left without any owner denies the device everywhere (fails closed).
 * unreserve_flag: delete only the {0, dev} flags of RULES: call it only for devices that no live
 * reservation owns any more. Missing entries are fine for both.
 * reserved_list: every reservation entry of the map (owner 0: the "reserved" flag).
 */
int devpolicy_grant_bound(struct jobcg_devpolicy *p, const char *cgroup_path,
			  const struct jobcg_devrule *allowed, size_t n);
int devpolicy_reserve(struct jobcg_devpolicy *p, const char *resv_path,
		      const struct jobcg_devrule *rules, size_t n);
int devpolicy_unreserve_owner(struct jobcg_devpolicy *p, uint64_t resv_id,
			      const struct jobcg_devrule *rules, size_t n);
int devpolicy_unreserve_flag(struct jobcg_devpolicy *p, const struct jobcg_devrule *rules,
			     size_t n);
struct devpolicy_reserved {
	uint64_t owner;
	char type;
	uint32_t major, minor;
};
int devpolicy_reserved_list(struct jobcg_devpolicy *p, struct devpolicy_reserved **ret,
			    size_t *ret_n);
bool devpolicy_node_mode(const struct jobcg_devpolicy *p);
