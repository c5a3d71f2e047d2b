/* jobcg tests: generators of device programs shaped like those of real runtimes (Slurm,
 * systemd, runc, crun, LXC, HTCondor, snapd), written from their documented behaviour. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpfvm.h"
#include "unit/insn.h"

#define ANY	    (-1)
#define ACC_M	    1
#define ACC_R	    2
#define ACC_W	    4
#define ACC_ALL	    7
#define ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

struct rule {
	char type; /* 'c', 'b', 'a' */
	int64_t major, minor;
	unsigned access;
	bool allow;
};

struct prog {
	struct bpf_insn v[32768];
	size_t n;
};

static inline void emit(struct prog *p, struct bpf_insn i)
{
	if (p->n >= ELEMENTS(p->v))
		abort();
	p->v[p->n++] = i;
}

/* Jumps to the end of the current rule block, patched once its length is known. */
struct patches {
	size_t at[16];
	int n;
};

static inline void jump_next(struct prog *p, struct patches *ps, struct bpf_insn i)
{
	ps->at[ps->n++] = p->n;
	emit(p, i);
}

static inline void patch(struct prog *p, struct patches *ps)
{
	for (int k = 0; k < ps->n; k++) {
		struct bpf_insn *i = &p->v[ps->at[k]];
		i->off = (int16_t)(p->n - ps->at[k] - 1);
	}
	ps->n = 0;
}

static inline uint32_t bpf_type(char t)
{
	return t == 'c' ? 2 : 1;
}

/* Reference decisions, from each generator's documented behaviour. */
static inline bool rule_matches_dev(const struct rule *r, char type, uint32_t major, uint32_t minor)
{
	return (r->type == 'a' || r->type == type) && (r->major == ANY || r->major == major) &&
	       (r->minor == ANY || r->minor == minor);
}

/* systemd: allowed when some DeviceAllow entry matches and grants every requested bit. */
static inline bool ref_allow_list(const struct rule *rules, size_t n, bool dflt, char type,
				  uint32_t major, uint32_t minor, unsigned acc)
{
	for (size_t k = 0; k < n; k++)
		if (rule_matches_dev(&rules[k], type, major, minor) &&
		    (acc & rules[k].access) == acc)
			return true;
	return dflt;
}

/* runc, crun, LXC: the first rule that matches the device and covers the access decides. */
static inline bool ref_first_match(const struct rule *rules, size_t n, bool dflt, char type,
				   uint32_t major, uint32_t minor, unsigned acc)
{
	for (size_t k = 0; k < n; k++)
		if (rule_matches_dev(&rules[k], type, major, minor) &&
		    (acc & rules[k].access) == acc)
			return rules[k].allow;
	return dflt;
}

/* Slurm: managed devices are denied unless allowed; access bits are ignored; others allowed. */
static inline bool ref_slurm(const struct rule *rules, size_t n, bool dflt, char type,
			     uint32_t major, uint32_t minor, unsigned acc)
{
	for (size_t k = 0; k < n; k++)
		if (rule_matches_dev(&rules[k], type, major, minor))
			return rules[k].allow;
	return dflt;
}

/* The common prologue: r2 = type, r3 = access, r4 = major, r5 = minor. */
static inline void prologue(struct prog *p, bool narrow)
{
	if (narrow) { /* LXC-style 16-bit context loads */
		emit(p, LDX(BPF_H, 2, 1, 0));
		emit(p, LDX(BPF_H, 3, 1, 2));
	} else {
		emit(p, LDX(BPF_W, 2, 1, 0));
		emit(p, ALU32_IMM(BPF_AND, 2, 0xffff));
		emit(p, LDX(BPF_W, 3, 1, 0));
		emit(p, ALU32_IMM(BPF_RSH, 3, 16));
	}
	emit(p, LDX(BPF_W, 4, 1, 4));
	emit(p, LDX(BPF_W, 5, 1, 8));
}

/*
 * systemd (bpf-devices.c): DevicePolicy=closed and a DeviceAllow list. Per entry: access check
 * "(r3 & acc) == r3" (skipped for rwm), then type, major, minor; a match jumps to the final
 * "allow" exit. @jset uses the other common access test, "if r3 & ~acc goto next".
 */
static inline void gen_systemd(struct prog *p, const struct rule *rules, size_t n, bool jset)
{
	struct patches ps = {0};
	size_t pass_jumps[64];
	int npass = 0;

	prologue(p, false);
	for (size_t k = 0; k < n; k++) {
		const struct rule *r = &rules[k];
		if (r->access != ACC_ALL) {
			if (jset)
				jump_next(p, &ps,
					  JMP_IMM(BPF_JSET, 3, (int32_t)(~r->access & 7), 0));
			else {
				emit(p, INSN(BPF_ALU | BPF_MOV | BPF_X, 1, 3, 0, 0));
				emit(p, ALU32_IMM(BPF_AND, 1, (int32_t)r->access));
				jump_next(p, &ps, JMP_REG(BPF_JNE, 1, 3, 0));
			}
		}
		jump_next(p, &ps, JMP_IMM(BPF_JNE, 2, (int32_t)bpf_type(r->type), 0));
		if (r->major != ANY)
			jump_next(p, &ps, JMP_IMM(BPF_JNE, 4, (int32_t)r->major, 0));
		if (r->minor != ANY)
			jump_next(p, &ps, JMP_IMM(BPF_JNE, 5, (int32_t)r->minor, 0));
		pass_jumps[npass++] = p->n;
		emit(p, JA(0));
		patch(p, &ps);
	}
	emit(p, MOV64_IMM(0, 0)); /* deny */
	emit(p, JA(1));
	size_t pass = p->n;
	emit(p, MOV64_IMM(0, 1));
	emit(p, EXIT());
	for (int k = 0; k < npass; k++)
		p->v[pass_jumps[k]].off = (int16_t)(pass - pass_jumps[k] - 1);
}

/*
 * runc (libcontainer devicefilter), crun (ebpf.c), LXC (cgroup2_devices.c): one block per rule,
 * type / access / major / minor checks jumping to the next block, then "r0 = allow; exit";
 * the default at the end. crun's variant uses 32-bit compares, LXC's narrow loads.
 */
enum flavour { RUNC, CRUN, LXC };

static inline void gen_first_match(struct prog *p, const struct rule *rules, size_t n, bool dflt,
				   enum flavour fl)
{
	struct patches ps = {0};
	uint8_t jc = fl == CRUN ? BPF_JMP32 : BPF_JMP;

	prologue(p, fl == LXC);
	for (size_t k = 0; k < n; k++) {
		const struct rule *r = &rules[k];
		if (r->type != 'a')
			jump_next(p, &ps,
				  INSN(jc | BPF_JNE | BPF_K, 2, 0, 0, (int32_t)bpf_type(r->type)));
		if (r->access != ACC_ALL) {
			emit(p, INSN(BPF_ALU | BPF_MOV | BPF_X, 1, 3, 0, 0));
			emit(p, ALU32_IMM(BPF_AND, 1, (int32_t)r->access));
			jump_next(p, &ps, INSN(jc | BPF_JNE | BPF_X, 1, 3, 0, 0));
		}
		if (r->major != ANY)
			jump_next(p, &ps, INSN(jc | BPF_JNE | BPF_K, 4, 0, 0, (int32_t)r->major));
		if (r->minor != ANY)
			jump_next(p, &ps, INSN(jc | BPF_JNE | BPF_K, 5, 0, 0, (int32_t)r->minor));
		emit(p, fl == CRUN ? MOV32_IMM(0, r->allow) : MOV64_IMM(0, r->allow));
		emit(p, EXIT());
		patch(p, &ps);
	}
	emit(p, MOV64_IMM(0, dflt));
	emit(p, EXIT());
}

/* Slurm (seed 000): each managed device "if type/major/minor match: r0 = allowed; exit". */
static inline void gen_slurm(struct prog *p, const struct rule *rules, size_t n)
{
	struct patches ps = {0};

	prologue(p, false);
	for (size_t k = 0; k < n; k++) {
		jump_next(p, &ps, JMP_IMM(BPF_JNE, 2, (int32_t)bpf_type(rules[k].type), 0));
		jump_next(p, &ps, JMP_IMM(BPF_JNE, 4, (int32_t)rules[k].major, 0));
		jump_next(p, &ps, JMP_IMM(BPF_JNE, 5, (int32_t)rules[k].minor, 0));
		emit(p, MOV64_IMM(0, rules[k].allow));
		emit(p, EXIT());
		patch(p, &ps);
	}
	emit(p, MOV64_IMM(0, 1));
	emit(p, EXIT());
}

/*
 * HTCondor-like, shaped like compiled C: fields spilled to the stack and reloaded, range checks
 * on the minor (GPUs lo..hi get rw, no mknod: a JSET test on access), the control device
 * allowed fully, other minors of the GPU major denied; a constant-blinded compare for the major.
 */
static inline void gen_htcondor(struct prog *p, uint32_t major, uint32_t lo, uint32_t hi,
				uint32_t ctl)
{
	const int32_t rnd = 0x3c3c5a5a;
	emit(p, LDX(BPF_W, 6, 1, 0));
	emit(p, STX(BPF_W, 10, 6, -4));
	emit(p, LDX(BPF_W, 6, 1, 4));
	emit(p, STX(BPF_W, 10, 6, -8));
	emit(p, LDX(BPF_W, 6, 1, 8));
	emit(p, STX(BPF_W, 10, 6, -12));
	emit(p, LDX(BPF_W, 7, 10, -4));
	emit(p, MOV64_REG(8, 7));
	emit(p, ALU64_IMM(BPF_AND, 8, 0xffff));
	emit(p, JMP_IMM(BPF_JNE, 8, 2, 14)); /* not char: allow */
	emit(p, LDX(BPF_W, 8, 10, -8));
	emit(p, MOV32_IMM(11, rnd ^ (int32_t)major));
	emit(p, ALU32_IMM(BPF_XOR, 11, rnd));
	emit(p, JMP_REG(BPF_JNE, 8, 11, 10)); /* other majors: allow */
	emit(p, LDX(BPF_W, 9, 10, -12));
	emit(p, JMP_IMM(BPF_JEQ, 9, (int32_t)ctl, 8));
	emit(p, JMP_IMM(BPF_JGT, 9, (int32_t)hi, 5));
	emit(p, JMP_IMM(BPF_JLT, 9, (int32_t)lo, 4));
	emit(p, ALU64_IMM(BPF_RSH, 7, 16));
	emit(p, JMP_IMM(BPF_JSET, 7, ACC_M, 2));
	emit(p, MOV64_IMM(0, 1));
	emit(p, EXIT());
	emit(p, MOV64_IMM(0, 0));
	emit(p, EXIT());
	emit(p, MOV64_IMM(0, 1));
	emit(p, EXIT());
}

static inline bool ref_htcondor(char type, uint32_t major, uint32_t minor, unsigned acc,
				uint32_t gmaj, uint32_t lo, uint32_t hi, uint32_t ctl)
{
	if (type != 'c' || major != gmaj || minor == ctl)
		return true;
	if (minor < lo || minor > hi)
		return false;
	return !(acc & ACC_M);
}

/* snapd: hash map keyed by packed {u8 type; u32 major; u32 minor}, value u8; exact key first,
 * then the same with minor = UINT32_MAX (any); allowed when found. @for_kernel: loadable. */
static inline void gen_snapd(struct prog *p, int map_ref, bool for_kernel)
{
	emit(p, LDX(BPF_W, 2, 1, 0));
	emit(p, ALU32_IMM(BPF_AND, 2, 0xffff));
	emit(p, STX(BPF_B, 10, 2, -9));
	emit(p, LDX(BPF_W, 2, 1, 4));
	emit(p, STX(BPF_W, 10, 2, -8));
	emit(p, LDX(BPF_W, 2, 1, 8));
	emit(p, STX(BPF_W, 10, 2, -4));
	emit(p, MOV64_REG(2, 10));
	emit(p, ALU64_IMM(BPF_ADD, 2, -9));
	struct bpf_insn ld[] = {LD_MAP(1, map_ref)};
	emit(p, ld[0]);
	emit(p, ld[1]);
	emit(p, CALL(BPF_FUNC_map_lookup_elem));
	emit(p, JMP_IMM(BPF_JNE, 0, 0, 8));
	emit(p, ST(BPF_W, 10, -4, -1));
	emit(p, MOV64_REG(2, 10));
	emit(p, ALU64_IMM(BPF_ADD, 2, -9));
	emit(p, ld[0]);
	emit(p, ld[1]);
	/* In userspace, as the kernel inlines a hash lookup; loaded, the real helper. */
	emit(p, CALL(for_kernel ? BPF_FUNC_map_lookup_elem : BPFVM_CALL_HTAB_ELEM));
	emit(p, JMP_IMM(BPF_JEQ, 0, 0, 1));
	emit(p, ALU64_IMM(BPF_ADD, 0, for_kernel ? 0 : 48));
	emit(p, JMP_IMM(BPF_JEQ, 0, 0, 2));
	emit(p, MOV64_IMM(0, 1));
	emit(p, EXIT());
	emit(p, MOV64_IMM(0, 0));
	emit(p, EXIT());
}

struct snapd_map {
	struct {
		uint8_t key[9];
	} keys[16];
	int n;
	uint8_t one[BPFVM_MAP_VALUE_MAX];
};

static inline const void *snapd_lookup(void *u, uint64_t ref, const void *key)
{
	struct snapd_map *m = u;
	if (ref != 12)
		return NULL;
	for (int k = 0; k < m->n; k++)
		if (memcmp(m->keys[k].key, key, 9) == 0)
			return m->one;
	return NULL;
}

static inline void snapd_add(struct snapd_map *m, uint8_t type, uint32_t major, uint32_t minor)
{
	uint8_t *k = m->keys[m->n++].key;
	k[0] = type;
	memcpy(k + 1, &major, 4);
	memcpy(k + 5, &minor, 4);
}
