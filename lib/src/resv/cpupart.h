/*
 * jobcg internal: the kernel side of a reservation's CPUs and memory (cpuset partitions and
 * memory.min), written and then read back, since the kernel accepts writes it cannot honour.
 * The reservation layer (resv.c) decides what to reserve; this file makes the kernel do it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "context_internal.h"

enum cpupart_kind {
	CPUPART_UNSUPPORTED, /* no partition possible here; the reason says why */
	CPUPART_LOCAL,	     /* every ancestor up to the root cgroup is (or is) a partition root */
	CPUPART_REMOTE,	     /* cpuset.cpus.exclusive exists (Linux >= 6.7): any depth */
	CPUPART_TREE,	     /* LOCAL once apply has made jobcg's tree root, a direct child of
			      * the root cgroup, a partition root of the CPUs jobs may use (Linux
			      * < 6.7, SpecCPUs or CoreSpecCount set); release undoes that when
			      * no reservation needs it any more */
};

/*
 * How a partition can be made for a cgroup at DIR (absolute path under the context's v2 mount):
 * REMOTE when the kernel has cpuset.cpus.exclusive, LOCAL when DIR's parent is the root cgroup
 * or a valid partition root, else UNSUPPORTED with *ret_reason (malloc'd) saying why in words
 * a user can act on (e.g. "Linux < 6.7 needs every ancestor up to the root cgroup to be a
 * partition root; jobcg's tree is in system.slice"). cpuset absent from the tree is
 * UNSUPPORTED too. Feature-detected, never by kernel version.
 */
int cpupart_probe(struct jobcg_ctx *ctx, const char *dir, enum cpupart_kind *ret_kind,
		  char **ret_reason);

/*
 * Make DIR (an existing cgroup of jobcg's tree without processes) a partition of exactly CPUS
 * (a list such as "2-3"), "root" or, with ISOLATED, "isolated". REMOTE: adds CPUS to
 * cpuset.cpus.exclusive on every ancestor below the root cgroup down to DIR, then cpuset.cpus,
 * then cpuset.cpus.partition. Reads back the partition state and cpuset.cpus.effective; when the
 * kernel did not make exactly that partition it undoes what it wrote and fails with the kernel's
 * own words in the error (-EBUSY, or the errno of the write).
 */
int cpupart_apply(struct jobcg_ctx *ctx, const char *dir, const char *cpus, bool isolated);

/* Undo cpupart_apply: DIR back to "member", CPUS taken out of cpuset.cpus.exclusive on DIR and
 * its ancestors. Idempotent, and safe on a half-applied partition (gc after a crash). */
int cpupart_release(struct jobcg_ctx *ctx, const char *dir, const char *cpus);

struct cpupart_state {
	bool valid;	 /* partition is root/isolated, effective == wanted, no leak */
	char *partition; /* cpuset.cpus.partition as read, e.g. "root invalid (Cpu list ...)" */
	char *effective; /* cpuset.cpus.effective of DIR */
	char *missing;	 /* wanted CPUs absent from effective ("" if none): a shrink */
	char *leaks;	 /* "<cgroup>: <cpus>; ..." cgroups outside DIR (the root cgroup, jobcg's
			  * other cgroups) whose effective set holds a reserved CPU; "" if none */
	char *problem;	 /* one line for a human, NULL when valid */
};
void cpupart_state_clear(struct cpupart_state *s);

/* Read the kernel's view of the partition at DIR against CPUS/ISOLATED. 0 with *ret filled
 * (valid or not); negative errno only when it could not be read at all. */
int cpupart_verify(struct jobcg_ctx *ctx, const char *dir, const char *cpus, bool isolated,
		   struct cpupart_state *ret);

/* Heal a degraded partition: "member" then "root"/"isolated" (the sequence that works on both
 * 6.1 and 6.12), then verify. 0 when valid afterwards, -EIO otherwise; *ret is the final state. */
int cpupart_repair(struct jobcg_ctx *ctx, const char *dir, const char *cpus, bool isolated,
		   struct cpupart_state *ret);

/*
 * memory.min = BYTES on DIR, and every ancestor up to and including the tree root raised so it
 * protects at least the sum its reserved children need (protection holds against global reclaim
 * only when every ancestor has it). Under the systemd backend the scope's and its slice's
 * MemoryMin are set through D-Bus, since systemd owns those files. release lowers them again,
 * each by no more than jobcg raised it (recorded on the level, trusted.jobcg.min_added).
 */
int memresv_apply(struct jobcg_ctx *ctx, const char *dir, uint64_t bytes);
int memresv_release(struct jobcg_ctx *ctx, const char *dir, uint64_t bytes);

/* memory.min of DIR and its ancestors against BYTES: 0 and *ret_problem NULL when every level
 * protects it, else *ret_problem (malloc'd) names the first level that does not. */
int memresv_verify(struct jobcg_ctx *ctx, const char *dir, uint64_t bytes, char **ret_problem);

/* Pure helpers of the above (unit tested). */

/*
 * One ancestor level's memory.min: CUR its value, NEED the sum of its children's, ADDED how much
 * of CUR jobcg added. RAISE: up to NEED when below, the difference added to jobcg's share.
 * Else down towards NEED by at most jobcg's share, so that what someone else set stays.
 * *ret_min: the new value (CUR: nothing to write); *ret_added: jobcg's share of it.
 */
void memresv_level_min(uint64_t cur, uint64_t need, uint64_t added, bool raise, uint64_t *ret_min,
		       uint64_t *ret_added);

enum cpulist_op { CPULIST_UNION, CPULIST_MINUS, CPULIST_INTERSECT };
/* A op B for CPU lists as cpuset files hold them ("" or "\n" is the empty set), formatted the
 * kernel's way ("0-2,5"; "" when empty). Parse errors name the list. */
int cpulist_combine(const char *a, enum cpulist_op op, const char *b, char **ret);
/* 1 when A and B name the same CPUs, 0 when not, negative errno when one does not parse. */
int cpulist_equal(const char *a, const char *b);

/* cpuset.cpus.partition as read: "member", "root", "isolated", "root invalid (why)", or a bare
 * "root invalid" (6.12). *ret_mode is the first word, *ret_invalid whether "invalid" follows,
 * *ret_reason the text in parentheses ("" when none). All malloc'd except the bool. */
int cpupart_parse_state(const char *text, char **ret_mode, bool *ret_invalid, char **ret_reason);

/* The cgroups from MOUNT's child down to DIR (DIR last), absolute: "/m/a", "/m/a/b" for DIR
 * "/m/a/b". -EINVAL when DIR is not strictly below MOUNT. NULL-terminated, strv_free(). */
int cpupart_levels(const char *mount, const char *dir, char ***ret);
