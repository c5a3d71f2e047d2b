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

/* A process of UID may enter job JOB_ID (adopt): the job is in no reservation, or UID is one of
 * its reservation's users. -EPERM naming them otherwise. */
int resv_user_check(struct jobcg_ctx *ctx, uint32_t job_id, uid_t uid);

/* Under the node lock (jobcg_gc()): finish half-made and half-deleted reservations, drop
 * reservation entries of the policy map that no reservation holds. Counts what it removed. */
int resv_gc(struct jobcg_ctx *ctx, unsigned *ret_removed);

/* jobcg_resv_verify() without the node lock and without repair (metrics read that way). */
int resv_verify_unlocked(struct jobcg_ctx *ctx, const char *name, struct jobcg_resv_status **ret);

/*
 * CPUs of a job in reservation RESV (NULL: outside every reservation). With WANT (its --cpus):
 * 0 when allowed (no CPU of another reservation; inside one with CPUs, only its CPUs), else the
 * error. Without: *ret_default is the cpuset.cpus to write (the reservation's CPUs inside one;
 * outside, the job CPUs less every reserved CPU), NULL when nothing changes.
 */
int resv_job_cpus(struct jobcg_ctx *ctx, const char *resv, const char *want, char **ret_default);

/* Sum of the memory all reservations keep (what jobs outside must leave), 0 if none;
 * -EBADMSG naming the cgroup when a reservation's trusted.jobcg.mem is not a number. */
int resv_mem_held(struct jobcg_ctx *ctx, uint64_t *ret);

/* jobgres.c's device policy and gres.conf, for the reservation code. */
/* -EINVAL naming gres.conf's error when the configuration was loaded past one
 * (JOBCG_CONFIG_TOLERATE_GRES): nothing may then create, select, store or grant devices. */
int gres_refuse_broken(const struct jobcg_ctx *ctx);
int gres_node_open(const struct jobcg_ctx *ctx, struct jobcg_gres_node **ret);
bool gres_constrained(const struct jobcg_ctx *ctx, const struct jobcg_gres_node *n);
int gres_ctx_policy(struct jobcg_ctx *ctx, const struct jobcg_gres_node *n, bool pinned_only,
		    struct jobcg_devpolicy **ret);

/* A reservation's trusted.jobcg.users, uids (decimal digits, none -1) separated by commas (empty
 * items skipped): the list to free(), NULL and 0 for an empty or NULL @s; -EBADMSG otherwise. */
int resv_users_parse(const char *s, uid_t **ret, size_t *ret_n);
/* ... and as resv_users_parse() reads it back. */
int resv_users_text(const uid_t *u, size_t n, char **ret);
