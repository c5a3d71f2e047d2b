/* jobcg internal: what job creation, gc and the device code need of reservations (resv.c). */
#pragma once

#include <stdbool.h>

#include "context_internal.h"
#include "jobcg/gres.h"
#include "jobcg/resv.h"

struct jobcg_devpolicy;

/*
 * Under the node lock, before job creation makes anything: reservation NAME exists, is complete
 * and not being deleted, the job's owner (LIMITS' uid, else the caller) is one of its users, and
 * it verifies VALID. *ret_dir: its directory.
 */
int resv_admit(struct jobcg_ctx *ctx, const char *name, const struct jobcg_limits *limits,
	       char **ret_dir);

/* Under the node lock (jobcg_gc()): finish half-made and half-deleted reservations, drop
 * reservation entries of the policy map that no reservation holds. Counts what it removed. */
int resv_gc(struct jobcg_ctx *ctx, unsigned *ret_removed);

/* jobcg_resv_verify() without the node lock and without repair (metrics read that way). */
int resv_verify_unlocked(struct jobcg_ctx *ctx, const char *name, struct jobcg_resv_status **ret);

/* Sum of the memory all reservations keep (what jobs outside must leave), 0 if none. */
uint64_t resv_mem_total(struct jobcg_ctx *ctx);

/* jobgres.c's device policy and gres.conf, for the reservation code. */
int gres_node_open(const struct jobcg_ctx *ctx, struct jobcg_gres_node **ret);
bool gres_constrained(const struct jobcg_ctx *ctx, const struct jobcg_gres_node *n);
int gres_ctx_policy(struct jobcg_ctx *ctx, const struct jobcg_gres_node *n, bool pinned_only,
		    struct jobcg_devpolicy **ret);
