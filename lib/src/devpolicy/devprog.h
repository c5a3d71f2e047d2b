/* jobcg internal: the device programs jobcg generates (node program + maps, linear program). */
#pragma once

#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/devrule.h"

/*
 * Node program ("jobcg_node"), one per jobcg root, pinned under
 * <BpfPinDir>/root-<root cgroup id>/ as "prog", "jobcg_managed" and "jobcg_policy"
 * (DEVPROG_PIN_*), attached at the root with BPF_F_ALLOW_MULTI.
 *
 * Device types in keys are the kernel's BPF_DEVCG_DEV_CHAR (2) / BPF_DEVCG_DEV_BLOCK (1);
 * DEVPROG_ANY (0xffffffff) in major or minor is the "*" wildcard. Only three key shapes exist:
 * (type, major, minor), (type, major, *), (type, *, *); a "c *:5" rule is refused, so that any
 * two rule regions are either nested or disjoint. Access bits are BPF_DEVCG_ACC_* (m=1 r=2 w=4).
 *
 * Both maps carry BTF (structs jobcg_managed_key/_value, jobcg_policy_key/_value with the
 * field names below) when the kernel accepts it, so `bpftool map dump` prints named fields.
 *
 * Map "jobcg_managed" (BPF_MAP_TYPE_HASH, key struct devprog_managed_key, value uint32_t
 * access bits the manager controls, normally 7). A device is managed when any of the three
 * shapes matching it is present. Unmanaged devices are always allowed by this program.
 *
 * Map "jobcg_policy" (BPF_MAP_TYPE_HASH, BPF_F_NO_PREALLOC, key struct devprog_policy_key,
 * value struct devprog_policy_value):
 *   - marker entry {cgroup_id, type 0, major 0, minor 0}: this cgroup is constrained; the value's
 *     access field holds the cgroup's level relative to the root (1 job, 2 step, 4 task);
 *   - grant entry {cgroup_id, type, major|*, minor|*}: access bits granted to that cgroup.
 *   - reservation entries (pad DEVPROG_PAD_RESERVED, exact devices only): {0, dev} says dev is
 *     reserved, {id of a reservation's cgroup (level 1), dev} to which reservation.
 * The program first finds the root's absolute level (see devprog_build_node()). A reserved
 * device is denied unless the ancestor at root+1 is the reservation holding it. Then, for each
 * of the levels root+1 .. root+DEVPROG_LEVELS (job at 1, step at 2, task at 4: job/step/
 * user/task_N; inside a reservation one deeper, the reservation itself at 1 with a bounding
 * marker), takes bpf_get_current_ancestor_cgroup_id(level); if that cgroup has a marker,
 * the union of its grant entries matching the device (three lookups) must contain every
 * requested access bit, else the access is denied. A level without a marker adds no
 * constraint of its own, but a cgroup below the root none of whose levels has a marker other
 * than a bounding one (the
 * root itself, system/, a job whose grant is missing or already revoked, a directory made by
 * hand) is denied every managed device: the program fails closed. Cgroups at other levels
 * (step/jobcg, step/user) are constrained through their job and step.
 *
 * Linear program ("jobcg_linear"), one per constrained cgroup, no maps: Slurm's
 * compare-and-exit shape (r2 = type, r3 = access, r4 = major, r5 = minor), one block per rule
 * region, most specific first, each ending in "r0 = (access & ~granted) == 0; exit"; the last
 * instruction pair allows (devices not managed are allowed).
 *
 * Guard program ("jobcg_guard"), linear mode only: the linear program with no grant (every
 * managed device denied), attached at the root with BPF_F_ALLOW_OVERRIDE. The kernel runs a
 * cgroup's own and its ancestors' BPF_F_ALLOW_MULTI programs, and an ancestor's
 * BPF_F_ALLOW_OVERRIDE program only while no cgroup between them has one: so a granted job
 * (its jobcg_linear program, attached with BPF_F_ALLOW_MULTI) is judged by its grants alone,
 * and every cgroup below the root that holds no grant (system/, a half-made job, a directory
 * made by hand) by the guard. Linear mode fails closed like the node program.
 */

#define DEVPROG_ANY	     0xffffffffu
#define DEVPROG_NODE_NAME    "jobcg_node"
#define DEVPROG_LINEAR_NAME  "jobcg_linear"
#define DEVPROG_GUARD_NAME   "jobcg_guard"
#define DEVPROG_MANAGED_NAME "jobcg_managed"
#define DEVPROG_POLICY_NAME  "jobcg_policy"
#define DEVPROG_PIN_PROG     "prog"
#define DEVPROG_PIN_MANAGED  DEVPROG_MANAGED_NAME
#define DEVPROG_PIN_POLICY   DEVPROG_POLICY_NAME
/* Bumped whenever the program or the map layout changes: pins of another version are not reused. */
#define DEVPROG_LAYOUT_VERSION 3
#define DEVPROG_PIN_VERSION    "layout-v3"

#define DEVPROG_MANAGED_MAX 65536u   /* max_entries of jobcg_managed */
#define DEVPROG_POLICY_MAX  1048576u /* max_entries of jobcg_policy (no prealloc) */
#define DEVPROG_RULES_MAX   4096u    /* rules per grant / managed list we accept */

/* Levels below the root at which jobcg grants: a job, its steps and tasks (job/step/user/task_N);
 * inside a reservation each one level deeper (resv_<name>/job/...). */
#define DEVPROG_LEVEL_JOB  1
#define DEVPROG_LEVEL_STEP 2
#define DEVPROG_LEVEL_TASK 4
#define DEVPROG_LEVEL_RESV 1 /* a reservation's directory */
/* The node program looks for a marker at every level root+1 .. root+DEVPROG_LEVELS. */
#define DEVPROG_LEVELS 5
/* In a marker's value: the level bounds what is below it (a reservation's device set) but does
 * not by itself count as a grant for the fail-closed rule. */
#define DEVPROG_MARKER_BOUND 0x100u
/* pad of reservation entries: {0, dev} "dev is reserved", {reservation cgroup id, dev} "to it". */
#define DEVPROG_PAD_RESERVED 1

struct devprog_managed_key {
	uint32_t type;
	uint32_t major;
	uint32_t minor;
};

struct devprog_policy_key {
	uint64_t cgroup_id;
	uint32_t type; /* 0 in the marker entry */
	uint32_t major;
	uint32_t minor;
	uint32_t pad; /* always 0 */
};

struct devprog_policy_value {
	uint32_t access; /* grant: BPF_DEVCG_ACC_* bits; marker: level below the root */
};

/* A growing instruction buffer. */
struct devprog_buf {
	struct bpf_insn *insns;
	size_t n, cap;
};

void devprog_buf_done(struct devprog_buf *b);

/*
 * Build the node program. @managed_ref and @policy_ref go into the ld_imm64 map loads
 * (BPF_PSEUDO_MAP_FD): map fds for the kernel, any distinct values for the userspace evaluator.
 * @root_level is the absolute cgroup level of the jobcg root (0 = the v2 mount root) as seen
 * from here and @root_id its cgroup id. The program checks that the ancestor at @root_level is
 * @root_id and otherwise finds the root's level by scanning levels 0..63 (inside a cgroup
 * namespace or under a subtree bind mount the level seen from userspace is not the kernel's).
 */
int devprog_build_node(int managed_ref, int policy_ref, unsigned root_level, uint64_t root_id,
		       struct devprog_buf *ret);

/* The node program builder devices.c loads; tests swap in one the kernel refuses, to exercise
 * the fallback to linear programs. */
extern int (*devprog_node_builder)(int managed_ref, int policy_ref, unsigned root_level,
				   uint64_t root_id, struct devprog_buf *ret);

/*
 * Build a linear program for one cgroup: devices matching @managed are denied unless @allowed
 * grants every requested access bit. Rules must be valid (devprog_rule_check()).
 */
int devprog_build_linear(const struct jobcg_devrule *managed, size_t n_managed,
			 const struct jobcg_devrule *allowed, size_t n_allowed,
			 struct devprog_buf *ret);

/* 0 if the rule has a shape the programs support (see above), else -EINVAL with a message. */
int devprog_rule_check(const struct jobcg_devrule *r);

/*
 * The reference decision both programs implement, for tests and for `jobcg policy`:
 * is (dev_type BPF_DEVCG_DEV_*, major, minor, access) allowed for a cgroup constrained by
 * @allowed, given @managed? Returns true when allowed.
 */
bool devprog_decide(const struct jobcg_devrule *managed, size_t n_managed,
		    const struct jobcg_devrule *allowed, size_t n_allowed, uint32_t dev_type,
		    uint32_t major, uint32_t minor, unsigned access);

/* Expand a rule into its map key shapes: 'a' gives a char and a block key. Returns count (1-2). */
size_t devprog_rule_keys(const struct jobcg_devrule *r, struct devprog_managed_key keys[2]);

/*
 * Read back a program made by devprog_build_linear() (as the kernel translates it): the granted
 * rules, one per region with some access. -EINVAL when the program does not have that shape.
 */
int devprog_parse_linear(const struct bpf_insn *insns, size_t n, struct jobcg_devrule **ret,
			 size_t *ret_n);

/*
 * The policy map entries (without the marker) that grant @rules to cgroup @id: one per key,
 * rules naming the same key merge their access bits. @keys and @acc need room for 2 * @n.
 * Returns the number of entries.
 */
size_t devprog_policy_entries(uint64_t id, const struct jobcg_devrule *rules, size_t n,
			      struct devprog_policy_key *keys, uint32_t *acc);
