/* jobcg: instruction builders for the device programs (node program with maps, linear program). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "devprog.h"
#include "log.h"
#include "util.h"

/* The kernel refuses programs above 1M instructions; stay far below that. */
#define DEVPROG_INSNS_MAX 262144u

void devprog_buf_done(struct devprog_buf *b)
{
	if (!b)
		return;
	free(b->insns);
	*b = (struct devprog_buf){0};
}

static int emit(struct devprog_buf *b, struct bpf_insn insn)
{
	if (b->n >= b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		struct bpf_insn *n;

		if (cap > DEVPROG_INSNS_MAX)
			return error_set(-E2BIG, "device program would exceed %u instructions",
					 DEVPROG_INSNS_MAX);
		n = realloc(b->insns, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		b->insns = n;
		b->cap = cap;
	}
	b->insns[b->n++] = insn;
	return 0;
}

#define INSN(c, d, s, o, i)                                                                        \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

/* Instruction shorthands (the kernel's filter.h macros are not in the uapi headers). */
#define MOV64_REG(d, s)	     INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV64_IMM(d, i)	     INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define MOV32_REG(d, s)	     INSN(BPF_ALU | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV32_IMM(d, i)	     INSN(BPF_ALU | BPF_MOV | BPF_K, d, 0, 0, i)
#define ALU32_IMM(op, d, i)  INSN(BPF_ALU | (op) | BPF_K, d, 0, 0, i)
#define ALU32_REG(op, d, s)  INSN(BPF_ALU | (op) | BPF_X, d, s, 0, 0)
#define ALU64_IMM(op, d, i)  INSN(BPF_ALU64 | (op) | BPF_K, d, 0, 0, i)
#define LDX_W(d, s, o)	     INSN(BPF_LDX | BPF_MEM | BPF_W, d, s, o, 0)
#define STX_W(d, s, o)	     INSN(BPF_STX | BPF_MEM | BPF_W, d, s, o, 0)
#define STX_DW(d, s, o)	     INSN(BPF_STX | BPF_MEM | BPF_DW, d, s, o, 0)
#define ST_W(d, o, i)	     INSN(BPF_ST | BPF_MEM | BPF_W, d, 0, o, i)
#define JMP_IMM(op, d, i, o) INSN(BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define JMP_REG(op, d, s, o) INSN(BPF_JMP | (op) | BPF_X, d, s, o, 0)
#define ST_DW(d, o, i)	     INSN(BPF_ST | BPF_MEM | BPF_DW, d, 0, o, i)
#define LDX_DW(d, s, o)	     INSN(BPF_LDX | BPF_MEM | BPF_DW, d, s, o, 0)
#define CALL(f)		     INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT()		     INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

static int emit_ld_map(struct devprog_buf *b, int reg, int ref)
{
	int e = emit(b, INSN(BPF_LD | BPF_DW | BPF_IMM, reg, BPF_PSEUDO_MAP_FD, 0, ref));
	return e < 0 ? e : emit(b, INSN(0, 0, 0, 0, 0));
}

/* Forward jumps to labels, patched once the label's position is known. */
#define MAX_FIXUPS 128
struct fixups {
	size_t at[MAX_FIXUPS];
	size_t n;
};

static int emit_jump(struct devprog_buf *b, struct fixups *f, struct bpf_insn insn)
{
	if (f->n >= MAX_FIXUPS)
		return -E2BIG;
	f->at[f->n++] = b->n;
	return emit(b, insn);
}

static void resolve(struct devprog_buf *b, struct fixups *f)
{
	for (size_t i = 0; i < f->n; i++)
		b->insns[f->at[i]].off = (int16_t)(b->n - f->at[i] - 1);
	f->n = 0;
}

static uint32_t rule_dev_type(char t)
{
	return t == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
}

int devprog_rule_check(const struct jobcg_devrule *r)
{
	char buf[64];

	if (r->type != 'a' && r->type != 'b' && r->type != 'c')
		return error_set(-EINVAL, "device rule: bad type '%c'", r->type);
	if (r->major == JOBCG_DEV_ANY && r->minor != JOBCG_DEV_ANY)
		return error_set(-EINVAL,
				 "device rule '%s': a wildcard major needs a wildcard minor",
				 jobcg_devrule_format(r, buf, sizeof(buf)));
	/* The kernel's dev_t has a 12-bit major and a 20-bit minor; larger ones name no device and
	 * would not compare right against the programs' sign-extended immediates. */
	if ((r->major != JOBCG_DEV_ANY && r->major > 0xfff) ||
	    (r->minor != JOBCG_DEV_ANY && r->minor > 0xfffff))
		return error_set(-EINVAL, "device rule '%s': major or minor out of range",
				 jobcg_devrule_format(r, buf, sizeof(buf)));
	if (r->access & ~JOBCG_DEV_ACC_ALL)
		return error_set(-EINVAL, "device rule: bad access bits 0x%x", r->access);
	return 0;
}

size_t devprog_rule_keys(const struct jobcg_devrule *r, struct devprog_managed_key keys[2])
{
	size_t n = 0;

	if (r->type == 'a' || r->type == 'c')
		keys[n++] = (struct devprog_managed_key){BPF_DEVCG_DEV_CHAR, r->major, r->minor};
	if (r->type == 'a' || r->type == 'b')
		keys[n++] = (struct devprog_managed_key){BPF_DEVCG_DEV_BLOCK, r->major, r->minor};
	return n;
}

size_t devprog_policy_entries(uint64_t id, const struct jobcg_devrule *rules, size_t n,
			      struct devprog_policy_key *keys, uint32_t *acc)
{
	size_t nk = 0;

	for (size_t i = 0; i < n; i++) {
		struct devprog_managed_key k[2];
		size_t c = devprog_rule_keys(&rules[i], k);
		for (size_t j = 0; j < c; j++) {
			struct devprog_policy_key pk = {id, k[j].type, k[j].major, k[j].minor, 0};
			size_t at = 0;
			while (at < nk && memcmp(&keys[at], &pk, sizeof(pk)) != 0)
				at++;
			if (at == nk) {
				keys[nk++] = pk;
				acc[at] = 0;
			}
			acc[at] |= rules[i].access & JOBCG_DEV_ACC_ALL;
		}
	}
	return nk;
}

static bool rule_matches(const struct jobcg_devrule *r, uint32_t dev_type, uint32_t major,
			 uint32_t minor)
{
	if (r->type != 'a' && rule_dev_type(r->type) != dev_type)
		return false;
	if (r->major != JOBCG_DEV_ANY && r->major != major)
		return false;
	if (r->minor != JOBCG_DEV_ANY && r->minor != minor)
		return false;
	return true;
}

bool devprog_decide(const struct jobcg_devrule *managed, size_t n_managed,
		    const struct jobcg_devrule *allowed, size_t n_allowed, uint32_t dev_type,
		    uint32_t major, uint32_t minor, unsigned access)
{
	bool is_managed = false;
	unsigned granted = 0;

	for (size_t i = 0; i < n_managed; i++)
		if (rule_matches(&managed[i], dev_type, major, minor))
			is_managed = true;
	if (!is_managed)
		return true;
	for (size_t i = 0; i < n_allowed; i++)
		if (allowed[i].allow && rule_matches(&allowed[i], dev_type, major, minor))
			granted |= allowed[i].access;
	return (access & ~granted) == 0;
}

/*
 * Node program. Registers: r6 ctx, r7 device type, r8 requested access, r9 granted access of
 * the level being checked. Stack: managed key at fp-16 (12 bytes), policy key at fp-40 (24).
 */
#define MKEY	    (-16)
#define PKEY	    (-40)
#define ROOTLVL	    (-48) /* u64: the root's absolute level */
#define MARKED	    (-56) /* u64: 1 once a level with a marker was found */
#define SCAN_LEVELS 64

static int emit_ld_imm64(struct devprog_buf *b, int reg, uint64_t v)
{
	int e = emit(b, INSN(BPF_LD | BPF_DW | BPF_IMM, reg, 0, 0, (int32_t)(uint32_t)v));
	return e < 0 ? e : emit(b, INSN(0, 0, 0, 0, (int32_t)(uint32_t)(v >> 32)));
}

static int emit_lookup(struct devprog_buf *b, int map_ref, int key_off)
{
	int e;

	if ((e = emit_ld_map(b, BPF_REG_1, map_ref)) < 0 ||
	    (e = emit(b, MOV64_REG(BPF_REG_2, BPF_REG_10))) < 0 ||
	    (e = emit(b, ALU64_IMM(BPF_ADD, BPF_REG_2, key_off))) < 0)
		return e;
	return emit(b, CALL(BPF_FUNC_map_lookup_elem));
}

int devprog_build_node(int managed_ref, int policy_ref, unsigned root_level, uint64_t root_id,
		       struct devprog_buf *ret)
{
	struct devprog_buf b = {0};
	struct fixups to_managed = {0}, to_deny = {0}, to_next = {0}, to_free = {0};
	int e = 0;

	if (root_level > 1000)
		return error_set(-EINVAL, "cgroup level %u is not plausible", root_level);
#define E(x)                                                                                       \
	do {                                                                                       \
		if ((e = (x)) < 0)                                                                 \
			goto fail;                                                                 \
	} while (0)
	E(emit(&b, MOV64_REG(BPF_REG_6, BPF_REG_1)));
	E(emit(&b, LDX_W(BPF_REG_7, BPF_REG_6, 0)));
	E(emit(&b, ALU32_IMM(BPF_AND, BPF_REG_7, 0xffff)));
	E(emit(&b, LDX_W(BPF_REG_8, BPF_REG_6, 0)));
	E(emit(&b, ALU32_IMM(BPF_RSH, BPF_REG_8, 16)));

	/* Managed? Exact key, then (type, major, *), then (type, *, *). */
	E(emit(&b, STX_W(BPF_REG_10, BPF_REG_7, MKEY)));
	E(emit(&b, LDX_W(BPF_REG_1, BPF_REG_6, 4)));
	E(emit(&b, STX_W(BPF_REG_10, BPF_REG_1, MKEY + 4)));
	E(emit(&b, LDX_W(BPF_REG_1, BPF_REG_6, 8)));
	E(emit(&b, STX_W(BPF_REG_10, BPF_REG_1, MKEY + 8)));
	E(emit_lookup(&b, managed_ref, MKEY));
	E(emit_jump(&b, &to_managed, JMP_IMM(BPF_JNE, BPF_REG_0, 0, 0)));
	E(emit(&b, ST_W(BPF_REG_10, MKEY + 8, (int32_t)DEVPROG_ANY)));
	E(emit_lookup(&b, managed_ref, MKEY));
	E(emit_jump(&b, &to_managed, JMP_IMM(BPF_JNE, BPF_REG_0, 0, 0)));
	E(emit(&b, ST_W(BPF_REG_10, MKEY + 4, (int32_t)DEVPROG_ANY)));
	E(emit_lookup(&b, managed_ref, MKEY));
	E(emit_jump(&b, &to_managed, JMP_IMM(BPF_JNE, BPF_REG_0, 0, 0)));
	E(emit(&b, MOV64_IMM(BPF_REG_0, 1)));
	E(emit(&b, EXIT()));
	resolve(&b, &to_managed);

	/*
	 * The root's absolute level: normally root_level, checked against the root's id; else
	 * found by scanning (cgroup namespaces and subtree mounts shift what userspace sees).
	 */
	{
		struct fixups have = {0};
		E(emit(&b, ST_DW(BPF_REG_10, ROOTLVL, (int32_t)root_level)));
		E(emit(&b, MOV64_IMM(BPF_REG_1, (int32_t)root_level)));
		E(emit(&b, CALL(BPF_FUNC_get_current_ancestor_cgroup_id)));
		E(emit_ld_imm64(&b, BPF_REG_1, root_id));
		E(emit_jump(&b, &have, JMP_REG(BPF_JEQ, BPF_REG_0, BPF_REG_1, 0)));
		for (int k = 0; k < SCAN_LEVELS; k++) {
			E(emit(&b, ST_DW(BPF_REG_10, ROOTLVL, k)));
			E(emit(&b, MOV64_IMM(BPF_REG_1, k)));
			E(emit(&b, CALL(BPF_FUNC_get_current_ancestor_cgroup_id)));
			E(emit_ld_imm64(&b, BPF_REG_1, root_id));
			E(emit_jump(&b, &have, JMP_REG(BPF_JEQ, BPF_REG_0, BPF_REG_1, 0)));
		}
		/* Not below the root at all: not ours to decide. */
		E(emit(&b, MOV64_IMM(BPF_REG_0, 1)));
		E(emit(&b, EXIT()));
		resolve(&b, &have);
	}
	E(emit(&b, ST_DW(BPF_REG_10, MARKED, 0)));

	/*
	 * A reserved device ({0, dev, pad 1} present) is only for cgroups below the reservation
	 * that holds it: {ancestor at root+1, dev, pad 1}. Whatever grants say: a stale or forged
	 * grant outside the reservation does not open it.
	 */
	E(emit(&b, ST_DW(BPF_REG_10, PKEY, 0)));
	E(emit(&b, STX_W(BPF_REG_10, BPF_REG_7, PKEY + 8)));
	E(emit(&b, LDX_W(BPF_REG_1, BPF_REG_6, 4)));
	E(emit(&b, STX_W(BPF_REG_10, BPF_REG_1, PKEY + 12)));
	E(emit(&b, LDX_W(BPF_REG_1, BPF_REG_6, 8)));
	E(emit(&b, STX_W(BPF_REG_10, BPF_REG_1, PKEY + 16)));
	E(emit(&b, ST_W(BPF_REG_10, PKEY + 20, DEVPROG_PAD_RESERVED)));
	E(emit_lookup(&b, policy_ref, PKEY));
	E(emit_jump(&b, &to_free, JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 0)));
	E(emit(&b, LDX_DW(BPF_REG_1, BPF_REG_10, ROOTLVL)));
	E(emit(&b, ALU64_IMM(BPF_ADD, BPF_REG_1, DEVPROG_LEVEL_RESV)));
	E(emit(&b, CALL(BPF_FUNC_get_current_ancestor_cgroup_id)));
	E(emit_jump(&b, &to_deny, JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 0)));
	E(emit(&b, STX_DW(BPF_REG_10, BPF_REG_0, PKEY)));
	E(emit_lookup(&b, policy_ref, PKEY));
	E(emit_jump(&b, &to_deny, JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 0)));
	resolve(&b, &to_free);

	for (int level = 1; level <= DEVPROG_LEVELS; level++) {
		E(emit(&b, LDX_DW(BPF_REG_1, BPF_REG_10, ROOTLVL)));
		E(emit(&b, ALU64_IMM(BPF_ADD, BPF_REG_1, level)));
		E(emit(&b, CALL(BPF_FUNC_get_current_ancestor_cgroup_id)));
		/* 0: the process's cgroup is not that deep, so this level does not apply. */
		E(emit_jump(&b, &to_next, JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 0)));
		E(emit(&b, STX_DW(BPF_REG_10, BPF_REG_0, PKEY)));
		E(emit(&b, ST_W(BPF_REG_10, PKEY + 8, 0)));
		E(emit(&b, ST_W(BPF_REG_10, PKEY + 12, 0)));
		E(emit(&b, ST_W(BPF_REG_10, PKEY + 16, 0)));
		E(emit(&b, ST_W(BPF_REG_10, PKEY + 20, 0)));
		E(emit_lookup(&b, policy_ref, PKEY));
		E(emit_jump(&b, &to_next, JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 0)));
		/* A bounding marker (a reservation's) narrows but grants nothing by itself. */
		E(emit(&b, LDX_W(BPF_REG_1, BPF_REG_0, 0)));
		E(emit(&b, ALU32_IMM(BPF_AND, BPF_REG_1, (int32_t)DEVPROG_MARKER_BOUND)));
		E(emit(&b, JMP_IMM(BPF_JNE, BPF_REG_1, 0, 1)));
		E(emit(&b, ST_DW(BPF_REG_10, MARKED, 1)));
		E(emit(&b, MOV64_IMM(BPF_REG_9, 0)));
		E(emit(&b, STX_W(BPF_REG_10, BPF_REG_7, PKEY + 8)));
		E(emit(&b, LDX_W(BPF_REG_1, BPF_REG_6, 4)));
		E(emit(&b, STX_W(BPF_REG_10, BPF_REG_1, PKEY + 12)));
		E(emit(&b, LDX_W(BPF_REG_1, BPF_REG_6, 8)));
		E(emit(&b, STX_W(BPF_REG_10, BPF_REG_1, PKEY + 16)));
		for (int k = 0; k < 3; k++) {
			if (k == 1)
				E(emit(&b, ST_W(BPF_REG_10, PKEY + 16, (int32_t)DEVPROG_ANY)));
			if (k == 2)
				E(emit(&b, ST_W(BPF_REG_10, PKEY + 12, (int32_t)DEVPROG_ANY)));
			E(emit_lookup(&b, policy_ref, PKEY));
			E(emit(&b, JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 2)));
			E(emit(&b, LDX_W(BPF_REG_1, BPF_REG_0, 0)));
			E(emit(&b, ALU32_REG(BPF_OR, BPF_REG_9, BPF_REG_1)));
		}
		/* Deny when a requested bit is missing: (access & ~granted) != 0. */
		E(emit(&b, ALU32_IMM(BPF_XOR, BPF_REG_9, -1)));
		E(emit(&b, ALU32_REG(BPF_AND, BPF_REG_9, BPF_REG_8)));
		E(emit_jump(&b, &to_deny, JMP_IMM(BPF_JNE, BPF_REG_9, 0, 0)));
		resolve(&b, &to_next);
	}
	/*
	 * Fail closed: below the root, a managed device is only for a cgroup that some level
	 * grants it to. A job whose grant is not (or no longer) in the map, system/, a directory
	 * made by hand: none of them may open what jobcg hands out.
	 */
	E(emit(&b, LDX_DW(BPF_REG_1, BPF_REG_10, MARKED)));
	E(emit_jump(&b, &to_deny, JMP_IMM(BPF_JEQ, BPF_REG_1, 0, 0)));
	E(emit(&b, MOV64_IMM(BPF_REG_0, 1)));
	E(emit(&b, EXIT()));
	resolve(&b, &to_deny);
	E(emit(&b, MOV64_IMM(BPF_REG_0, 0)));
	E(emit(&b, EXIT()));
#undef E
	*ret = b;
	return 0;
fail:
	devprog_buf_done(&b);
	return e;
}

int (*devprog_node_builder)(int, int, unsigned, uint64_t,
			    struct devprog_buf *) = devprog_build_node;

/* A rule region for the linear program: one key shape of one type. */
struct region {
	uint32_t type, major, minor;
	unsigned specificity; /* 0 exact, 1 (major, *), 2 (*, *) */
};

static unsigned key_specificity(const struct devprog_managed_key *k)
{
	return k->major == DEVPROG_ANY ? 2 : k->minor == DEVPROG_ANY ? 1 : 0;
}

static bool region_contains(const struct region *outer, const struct devprog_managed_key *inner)
{
	if (outer->type != inner->type)
		return false;
	if (outer->major != DEVPROG_ANY && outer->major != inner->major)
		return false;
	if (outer->minor != DEVPROG_ANY && outer->minor != inner->minor)
		return false;
	return true;
}

static bool key_contains(const struct devprog_managed_key *outer, const struct region *inner)
{
	struct region o = {outer->type, outer->major, outer->minor, 0};
	struct devprog_managed_key i = {inner->type, inner->major, inner->minor};
	return region_contains(&o, &i);
}

static int cmp_region(const void *a, const void *b)
{
	const struct region *x = a, *y = b;

	if (x->specificity != y->specificity)
		return x->specificity < y->specificity ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->major != y->major)
		return x->major < y->major ? -1 : 1;
	if (x->minor != y->minor)
		return x->minor < y->minor ? -1 : 1;
	return 0;
}

int devprog_build_linear(const struct jobcg_devrule *managed, size_t n_managed,
			 const struct jobcg_devrule *allowed, size_t n_allowed,
			 struct devprog_buf *ret)
{
	_cleanup_free_ struct region *regions = NULL;
	_cleanup_free_ struct devprog_managed_key *mkeys = NULL, *akeys = NULL;
	_cleanup_free_ unsigned *aacc = NULL;
	size_t nr = 0, nm = 0, na = 0;
	struct devprog_buf b = {0};
	int e = 0;

	if (n_managed > DEVPROG_RULES_MAX || n_allowed > DEVPROG_RULES_MAX)
		return error_set(-E2BIG, "more than %u device rules", DEVPROG_RULES_MAX);
	mkeys = calloc(2 * n_managed + 1, sizeof(*mkeys));
	akeys = calloc(2 * n_allowed + 1, sizeof(*akeys));
	aacc = calloc(2 * n_allowed + 1, sizeof(*aacc));
	regions = calloc(2 * (n_managed + n_allowed) + 1, sizeof(*regions));
	if (!mkeys || !akeys || !aacc || !regions)
		return -ENOMEM;
	for (size_t i = 0; i < n_managed; i++) {
		if ((e = devprog_rule_check(&managed[i])) < 0)
			return e;
		nm += devprog_rule_keys(&managed[i], mkeys + nm);
	}
	for (size_t i = 0; i < n_allowed; i++) {
		size_t k;

		if ((e = devprog_rule_check(&allowed[i])) < 0)
			return e;
		if (!allowed[i].allow)
			return error_set(-EINVAL, "device grants must be allow rules");
		k = devprog_rule_keys(&allowed[i], akeys + na);
		for (size_t j = 0; j < k; j++)
			aacc[na + j] = allowed[i].access;
		na += k;
	}

	/*
	 * Regions: every managed key, and every granted key inside a managed one (a device there
	 * must see that grant even when a wider managed region comes later). Regions are nested or
	 * disjoint, so visiting them most specific first gives each device its smallest region.
	 */
	for (size_t i = 0; i < nm; i++)
		regions[nr++] = (struct region){mkeys[i].type, mkeys[i].major, mkeys[i].minor,
						key_specificity(&mkeys[i])};
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nm; j++) {
			struct region m = {mkeys[j].type, mkeys[j].major, mkeys[j].minor, 0};
			if (region_contains(&m, &akeys[i])) {
				regions[nr++] =
				    (struct region){akeys[i].type, akeys[i].major, akeys[i].minor,
						    key_specificity(&akeys[i])};
				break;
			}
		}
	qsort(regions, nr, sizeof(*regions), cmp_region);

#define E(x)                                                                                       \
	do {                                                                                       \
		if ((e = (x)) < 0)                                                                 \
			goto fail;                                                                 \
	} while (0)
	/* Same prologue as Slurm's: r2 type, r3 access, r4 major, r5 minor. */
	E(emit(&b, LDX_W(BPF_REG_2, BPF_REG_1, 0)));
	E(emit(&b, ALU32_IMM(BPF_AND, BPF_REG_2, 0xffff)));
	E(emit(&b, LDX_W(BPF_REG_3, BPF_REG_1, 0)));
	E(emit(&b, ALU32_IMM(BPF_RSH, BPF_REG_3, 16)));
	E(emit(&b, LDX_W(BPF_REG_4, BPF_REG_1, 4)));
	E(emit(&b, LDX_W(BPF_REG_5, BPF_REG_1, 8)));
	for (size_t i = 0; i < nr; i++) {
		struct fixups next = {0};
		unsigned granted = 0;

		if (i > 0 && cmp_region(&regions[i - 1], &regions[i]) == 0)
			continue;
		for (size_t j = 0; j < na; j++)
			if (key_contains(&akeys[j], &regions[i]))
				granted |= aacc[j];
		granted &= JOBCG_DEV_ACC_ALL;
		E(emit_jump(&b, &next, JMP_IMM(BPF_JNE, BPF_REG_2, (int32_t)regions[i].type, 0)));
		if (regions[i].major != DEVPROG_ANY)
			E(emit_jump(&b, &next,
				    JMP_IMM(BPF_JNE, BPF_REG_4, (int32_t)regions[i].major, 0)));
		if (regions[i].minor != DEVPROG_ANY)
			E(emit_jump(&b, &next,
				    JMP_IMM(BPF_JNE, BPF_REG_5, (int32_t)regions[i].minor, 0)));
		if (granted == 0 || granted == JOBCG_DEV_ACC_ALL) {
			E(emit(&b, MOV64_IMM(BPF_REG_0, granted ? 1 : 0)));
		} else {
			/* r0 = (access & ~granted) == 0 */
			E(emit(&b, MOV32_REG(BPF_REG_0, BPF_REG_3)));
			E(emit(&b, ALU32_IMM(BPF_AND, BPF_REG_0, (int32_t)(~granted & 0xffff))));
			E(emit(&b, JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 2)));
			E(emit(&b, MOV64_IMM(BPF_REG_0, 0)));
			E(emit(&b, EXIT()));
			E(emit(&b, MOV64_IMM(BPF_REG_0, 1)));
		}
		E(emit(&b, EXIT()));
		resolve(&b, &next);
	}
	E(emit(&b, MOV64_IMM(BPF_REG_0, 1)));
	E(emit(&b, EXIT()));
#undef E
	*ret = b;
	return 0;
fail:
	devprog_buf_done(&b);
	return e;
}

static bool is_insn(const struct bpf_insn *i, uint8_t code, uint8_t dst, uint8_t src)
{
	return i->code == code && i->dst_reg == dst && i->src_reg == src;
}

int devprog_parse_linear(const struct bpf_insn *insns, size_t n, struct jobcg_devrule **ret,
			 size_t *ret_n)
{
	_cleanup_free_ struct jobcg_devrule *rules = NULL;
	size_t nr = 0, i = 6;

	if (n < 8 || n > DEVPROG_INSNS_MAX)
		return -EINVAL;
	rules = calloc(n / 3 + 1, sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	while (i + 2 <= n) {
		struct jobcg_devrule r = {
		    .major = JOBCG_DEV_ANY, .minor = JOBCG_DEV_ANY, .allow = true};
		const struct bpf_insn *x = &insns[i];

		if (i + 2 == n) {
			if (!is_insn(x, BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0) || x->imm != 1 ||
			    x[1].code != (BPF_JMP | BPF_EXIT))
				return -EINVAL;
			*ret = TAKE_PTR(rules);
			*ret_n = nr;
			return 0;
		}
		if (!is_insn(x, BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0))
			return -EINVAL;
		r.type = x->imm == BPF_DEVCG_DEV_BLOCK	? 'b'
			 : x->imm == BPF_DEVCG_DEV_CHAR ? 'c'
							: 0;
		if (!r.type)
			return -EINVAL;
		i++;
		if (i < n && is_insn(&insns[i], BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0))
			r.major = (uint32_t)insns[i++].imm;
		if (i < n && is_insn(&insns[i], BPF_JMP | BPF_JNE | BPF_K, BPF_REG_5, 0))
			r.minor = (uint32_t)insns[i++].imm;
		if (i + 2 > n)
			return -EINVAL;
		x = &insns[i];
		if (is_insn(x, BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0) &&
		    x[1].code == (BPF_JMP | BPF_EXIT)) {
			r.access = x->imm ? JOBCG_DEV_ACC_ALL : 0;
			i += 2;
		} else if (i + 7 <= n &&
			   is_insn(x, BPF_ALU | BPF_MOV | BPF_X, BPF_REG_0, BPF_REG_3) &&
			   is_insn(&x[1], BPF_ALU | BPF_AND | BPF_K, BPF_REG_0, 0)) {
			r.access = ~(unsigned)x[1].imm & JOBCG_DEV_ACC_ALL;
			i += 7;
		} else {
			return -EINVAL;
		}
		if (r.access)
			rules[nr++] = r;
	}
	return -EINVAL;
}
