/* jobcg internal: an interpreter for the eBPF instructions that cgroup device programs use. */
#pragma once

#include <linux/bpf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The context a BPF_PROG_TYPE_CGROUP_DEVICE program sees (struct bpf_cgroup_dev_ctx):
 * access_type = (access << 16) | dev_type (BPF_DEVCG_DEV_CHAR = 2, BPF_DEVCG_DEV_BLOCK = 1).
 */
struct bpfvm_devctx {
	uint32_t access_type;
	uint32_t major;
	uint32_t minor;
};

/*
 * Hooks for programs that call helpers (bpf_get_current_cgroup_id,
 * bpf_get_current_ancestor_cgroup_id, bpf_map_lookup_elem). A NULL hook makes such a call fail
 * the run with -EOPNOTSUPP ("opaque"). Map references are the ld_imm64 pseudo map fd/idx
 * values from the program; lookup returns a pointer to the value or NULL.
 */
struct bpfvm_env {
	uint64_t (*cgroup_id)(void *userdata);
	uint64_t (*ancestor_cgroup_id)(void *userdata, int level);
	const void *(*map_lookup)(void *userdata, uint64_t map_ref, const void *key);
	void *userdata;
};

/* Validate a program: known opcodes, jumps in range, ld_imm64 complete, ends in exit/ja.
 * Returns 0 or -EINVAL with the error record naming the instruction index. */
int bpfvm_check(const struct bpf_insn *insns, size_t n);

/*
 * Run the program on @ctx. *ret_r0 gets the value of r0 at exit (non-zero = allow).
 * @max_steps bounds execution (-ELOOP when exceeded). @env may be NULL.
 * Returns 0, -EINVAL (bad program), -EOPNOTSUPP (helper/map without a hook), -ELOOP.
 */
int bpfvm_run(const struct bpf_insn *insns, size_t n, const struct bpfvm_devctx *ctx,
	      const struct bpfvm_env *env, uint64_t max_steps, uint64_t *ret_r0);

/*
 * Additions beyond the base API.
 *
 * A map lookup hook must return a pointer readable for at least BPFVM_MAP_VALUE_MAX bytes
 * (pad short values with zeroes); the interpreter copies that much, so a program reading past
 * the real value reads zeroes instead of host memory.
 */
#define BPFVM_MAP_VALUE_MAX 256

/*
 * Helper numbers used in BPF_CALL imm. Plain helper ids are the kernel's (BPF_FUNC_*). In
 * translated programs the kernel inlines hash map lookups as a call to its internal
 * __htab_map_lookup_elem, which returns the map element; the value follows at the offset the
 * next "r0 += K" adds. Front ends (bpftool text, kallsyms for raw dumps) translate that call
 * to BPFVM_CALL_HTAB_ELEM so the interpreter knows to expect the element offset.
 */
#define BPFVM_CALL_HTAB_ELEM 0x7fff0001

/* Largest key a map lookup can pass (bytes copied from the program's stack for the hook). */
#define BPFVM_MAP_KEY_MAX 512

/* Context fields a value was computed from (taint bits reported to a trace hook). */
enum {
	BPFVM_T_TYPE = 1,
	BPFVM_T_ACCESS = 2,
	BPFVM_T_MAJOR = 4,
	BPFVM_T_MINOR = 8,
	/* Passed to the compare hook with MAJOR or MINOR: the value is that field unchanged (loaded
	 * whole and only moved, spilled or filled since), so a constant compared against it splits
	 * the field's range exactly. Without it the value was computed from the field. */
	BPFVM_T_EXACT = 0x10,
};

#define BPFVM_T_DEVICE (BPFVM_T_MAJOR | BPFVM_T_MINOR)

/*
 * Called at every conditional jump where at least one side depends on the context: the jump
 * operation (BPF_JEQ, ...), whether it compares 32 bits, and both sides with their taint bits.
 * The decoder uses it to learn the constants that partition the input space.
 */
struct bpfvm_trace {
	void (*compare)(void *userdata, uint8_t op, bool is32, uint64_t a, uint8_t taint_a,
			uint64_t b, uint8_t taint_b);
	void *userdata;
	/*
	 * Strict (decoding) mode: a run samples one request for a whole cell of requests, so any
	 * way the major or minor reaches the verdict other than through a compare hook call is
	 * refused with -EOPNOTSUPP and a message: returned in r0, used in a memory address,
	 * passed to a helper, stored outside the stack, or in a map key that @key does not
	 * accept. @key gets the key bytes' taint and tags (0, or BPFVM_TAG(field, byte): byte
	 * @byte of the unchanged field) and returns 0 when the map's layout is known to put
	 * exactly those fields where the decoder's hints come from, or -errno with the error set.
	 */
	bool strict;
	int (*key)(void *userdata, uint64_t map_ref, const uint8_t *taint, const uint8_t *tag,
		   size_t len);
	/* Instructions executed, added to by every run. */
	uint64_t steps;
};

/* Tag of a stack byte holding byte @b (0..3, little-endian) of the unchanged field @f
 * (BPFVM_T_MAJOR or BPFVM_T_MINOR). */
#define BPFVM_TAG(f, b) ((uint8_t)(((f) == BPFVM_T_MAJOR ? 1 : 5) + (b)))

/* bpfvm_run() for a program that already passed bpfvm_check(), with an optional trace. */
int bpfvm_run_checked(const struct bpf_insn *insns, size_t n, const struct bpfvm_devctx *ctx,
		      const struct bpfvm_env *env, struct bpfvm_trace *trace, uint64_t max_steps,
		      uint64_t *ret_r0);
