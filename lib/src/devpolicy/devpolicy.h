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
