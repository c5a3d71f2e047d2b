/* jobcg: an interpreter for cgroup device programs, so decoding runs the program instead of
 * guessing its meaning from instruction patterns. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpfvm.h"
#include "log.h"

/* Newer opcodes that older uapi headers lack. */
#ifndef BPF_MEMSX
#define BPF_MEMSX 0x80
#endif
#ifndef BPF_NOSPEC
#define BPF_NOSPEC 0xc0
#endif

#define NREGS	     12 /* r0..r10 plus r11, the scratch register of constant blinding */
#define REG_AX	     11
#define STACK_FRAME  512
#define MAX_FRAMES   8
#define VALUE_BIAS   256 /* room before a map value for the kernel's htab element header */
#define VALUE_REGION (VALUE_BIAS + BPFVM_MAP_VALUE_MAX)
#define MAX_VALUES   16

enum kind {
	K_SCALAR,
	K_CTX,	 /* off = byte offset into struct bpf_cgroup_dev_ctx */
	K_STACK, /* off = absolute offset into the stack array */
	K_MAP,	 /* v = map reference, off = pointer arithmetic done on it */
	K_VALUE, /* region = copied map value, off relative to the value start */
};

struct reg {
	uint64_t v;
	int64_t off;
	uint8_t kind;
	uint8_t region;
	uint8_t taint; /* BPFVM_T_* bits: which context fields this value (for a pointer: its
			* offset) was computed from */
	uint8_t exact; /* BPFVM_T_MAJOR or _MINOR: the value is that field, unchanged */
};

struct frame {
	size_t ret_pc;
	struct reg saved[4]; /* r6..r9 */
};

struct vm {
	struct reg r[NREGS];
	uint8_t stack[STACK_FRAME * MAX_FRAMES];
	uint8_t stack_taint[STACK_FRAME * MAX_FRAMES];
	uint8_t stack_tag[STACK_FRAME * MAX_FRAMES]; /* BPFVM_TAG() of an unchanged field byte */
	bool strict; /* decoding: refuse device-dependent flows the decoder cannot follow */
	/* Stack bytes touched by the previous run: only those need zeroing for the next one. */
	size_t dirty_lo, dirty_hi;
	/* A register spilled to an 8-byte stack slot keeps its kind, so it can be reloaded. */
	struct reg spill[STACK_FRAME * MAX_FRAMES / 8];
	bool spilled[STACK_FRAME * MAX_FRAMES / 8];
	uint8_t values[MAX_VALUES][VALUE_REGION];
	unsigned nvalues;
	struct frame frames[MAX_FRAMES];
	unsigned depth;
	uint8_t ctx[sizeof(struct bpfvm_devctx)];
};

static bool insn_is_ldimm64(const struct bpf_insn *i)
{
	return i->code == (BPF_LD | BPF_IMM | BPF_DW);
}

static bool alu_op_known(uint8_t op, bool is64, uint8_t src, int16_t off, int32_t imm)
{
	switch (op) {
	case BPF_ADD:
	case BPF_SUB:
	case BPF_MUL:
	case BPF_OR:
	case BPF_AND:
	case BPF_LSH:
	case BPF_RSH:
	case BPF_XOR:
	case BPF_ARSH:
		return off == 0;
	case BPF_DIV:
	case BPF_MOD:
		return off == 0 || off == 1; /* off 1: signed */
	case BPF_NEG:
		return src == BPF_K && off == 0;
	case BPF_MOV:
		/* off 8/16/32: sign-extending move (movsx); 32 only in 64-bit form */
		return off == 0 || off == 8 || off == 16 || (off == 32 && is64);
	case BPF_END:
		if (is64 && src != BPF_K)
			return false;
		return imm == 16 || imm == 32 || imm == 64;
	default:
		return false;
	}
}

static bool jmp_op_known(uint8_t op)
{
	switch (op) {
	case BPF_JEQ:
	case BPF_JGT:
	case BPF_JGE:
	case BPF_JSET:
	case BPF_JNE:
	case BPF_JSGT:
	case BPF_JSGE:
	case BPF_JLT:
	case BPF_JLE:
	case BPF_JSLT:
	case BPF_JSLE:
		return true;
	default:
		return false;
	}
}

/* Returns the jump offset an instruction adds to pc+1, and whether it jumps at all. */
static bool insn_jump(const struct bpf_insn *i, int64_t *ret_off)
{
	uint8_t cls = BPF_CLASS(i->code), op = BPF_OP(i->code);

	if (cls != BPF_JMP && cls != BPF_JMP32)
		return false;
	if (op == BPF_JA) {
		*ret_off = cls == BPF_JMP32 ? i->imm : i->off;
		return true;
	}
	if (op == BPF_CALL || op == BPF_EXIT)
		return false;
	*ret_off = i->off;
	return true;
}

/*
 * Target of a bpf-to-bpf call. In programs as loaded the offset is in imm (off must be 0); in
 * the kernel's translated form of a JIT-compiled program imm holds the subprogram index and
 * off the offset, so a non-zero off is the offset.
 */
static int32_t call_offset(const struct bpf_insn *i)
{
	return i->off ? i->off : i->imm;
}

static int check_one(const struct bpf_insn *insns, size_t n, size_t pc)
{
	const struct bpf_insn *i = &insns[pc];
	uint8_t cls = BPF_CLASS(i->code), size = BPF_SIZE(i->code), mode = BPF_MODE(i->code);
	bool regs_ok = i->dst_reg < NREGS && i->src_reg < NREGS;

	switch (cls) {
	case BPF_LD:
		if (!insn_is_ldimm64(i))
			break;
		if (pc + 1 >= n)
			return error_set(
			    -EINVAL, "instruction %zu: ld_imm64 is truncated (no second half)", pc);
		if (insns[pc + 1].code != 0 || insns[pc + 1].dst_reg || insns[pc + 1].src_reg ||
		    insns[pc + 1].off)
			return error_set(
			    -EINVAL, "instruction %zu: ld_imm64 second half is malformed", pc + 1);
		if (i->dst_reg >= NREGS || i->src_reg > BPF_PSEUDO_MAP_IDX_VALUE)
			return error_set(-EINVAL, "instruction %zu: bad register in ld_imm64", pc);
		return 1; /* consumes two slots */
	case BPF_LDX:
		if ((mode == BPF_MEM || mode == BPF_MEMSX) && regs_ok &&
		    !(mode == BPF_MEMSX && size == BPF_DW))
			return 0;
		break;
	case BPF_ST:
		if (mode == BPF_MEM && regs_ok)
			return 0;
		if (i->code == (BPF_ST | BPF_NOSPEC))
			return 0;
		break;
	case BPF_STX:
		if (mode == BPF_MEM && regs_ok)
			return 0;
		if (mode == BPF_ATOMIC && (size == BPF_W || size == BPF_DW) && regs_ok)
			return 0;
		break;
	case BPF_ALU:
	case BPF_ALU64:
		if (regs_ok && alu_op_known(BPF_OP(i->code), cls == BPF_ALU64, BPF_SRC(i->code),
					    i->off, i->imm))
			return 0;
		break;
	case BPF_JMP:
	case BPF_JMP32: {
		uint8_t op = BPF_OP(i->code);
		int64_t off = 0;

		if (op == BPF_EXIT && cls == BPF_JMP)
			return 0;
		if (op == BPF_CALL && cls == BPF_JMP) {
			if (i->src_reg == BPF_PSEUDO_CALL) {
				int64_t t = (int64_t)pc + 1 + call_offset(i);
				if (t < 0 || (size_t)t >= n)
					return error_set(
					    -EINVAL,
					    "instruction %zu: call to pc%+d is out of range", pc,
					    call_offset(i));
			}
			return 0;
		}
		if (!regs_ok || (op != BPF_JA && !jmp_op_known(op)))
			break;
		insn_jump(i, &off);
		int64_t t = (int64_t)pc + 1 + off;
		if (t < 0 || (size_t)t >= n)
			return error_set(-EINVAL,
					 "instruction %zu: jump to pc%+lld lands outside the "
					 "program (%zu instructions)",
					 pc, (long long)off, n);
		if (t > 0 && insn_is_ldimm64(&insns[t - 1]))
			return error_set(-EINVAL,
					 "instruction %zu: jump lands inside the ld_imm64 at %lld",
					 pc, (long long)t - 1);
		return 0;
	}
	}
	if (!regs_ok)
		return error_set(-EINVAL,
				 "instruction %zu: register number out of range (r%u, r%u)", pc,
				 i->dst_reg, i->src_reg);
	return error_set(-EINVAL, "instruction %zu: unknown opcode 0x%02x", pc, i->code);
}

int bpfvm_check(const struct bpf_insn *insns, size_t n)
{
	if (n == 0)
		return error_set(-EINVAL, "empty program");
	for (size_t pc = 0; pc < n; pc++) {
		int r = check_one(insns, n, pc);
		if (r < 0)
			return r;
		pc += (size_t)r;
	}
	/* The last instruction must end the flow; an ld_imm64 tail was caught above. */
	const struct bpf_insn *last = &insns[n - 1];
	uint8_t cls = BPF_CLASS(last->code), op = BPF_OP(last->code);
	if (!((cls == BPF_JMP && (op == BPF_EXIT || op == BPF_JA)) ||
	      (cls == BPF_JMP32 && op == BPF_JA)))
		return error_set(
		    -EINVAL,
		    "instruction %zu: program does not end with exit or an unconditional jump",
		    n - 1);
	return 0;
}

static uint64_t sext(uint64_t v, unsigned bits)
{
	if (bits >= 64)
		return v;
	uint64_t m = 1ull << (bits - 1);
	v &= (1ull << bits) - 1;
	return (v ^ m) - m;
}

static uint64_t bswap(uint64_t v, unsigned bits)
{
	switch (bits) {
	case 16:
		return __builtin_bswap16((uint16_t)v);
	case 32:
		return __builtin_bswap32((uint32_t)v);
	default:
		return __builtin_bswap64(v);
	}
}

static unsigned size_bytes(uint8_t size)
{
	switch (size) {
	case BPF_B:
		return 1;
	case BPF_H:
		return 2;
	case BPF_W:
		return 4;
	default:
		return 8;
	}
}

/* A stand-in address for a pointer in comparisons (non-null; differences keep their sign). */
static uint64_t ptr_value(const struct reg *r)
{
	return (uint64_t)((int64_t)0x100000000ll * (r->kind + 1) + (int64_t)r->region * 0x10000 +
			  r->off);
}

static uint64_t reg_value(const struct reg *r)
{
	return r->kind == K_SCALAR ? r->v : ptr_value(r);
}

static const char *kind_name(uint8_t k)
{
	static const char *const names[] = {"scalar", "context", "stack", "map", "map value"};
	return k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

/*
 * Resolve a memory access of @len bytes at @base+@off to host memory inside the VM.
 * Returns NULL (with the error set) for anything the kernel's verifier would have refused.
 */
static uint8_t *resolve(struct vm *vm, size_t pc, const struct reg *base, int64_t off, unsigned len,
			bool write, int *ret_err)
{
	int64_t a;

	if (vm->strict && (base->taint & BPFVM_T_DEVICE)) {
		*ret_err = error_set(-EOPNOTSUPP,
				     "instruction %zu: the %s address depends on the device's "
				     "major/minor (a table lookup decoding cannot partition)",
				     pc, kind_name(base->kind));
		return NULL;
	}
	switch (base->kind) {
	case K_CTX:
		a = base->off + off;
		if (write) {
			*ret_err = error_set(-EINVAL,
					     "instruction %zu: store into the device context", pc);
			return NULL;
		}
		if (a < 0 || a + len > (int64_t)sizeof(vm->ctx))
			break;
		return vm->ctx + a;
	case K_STACK:
		a = base->off + off;
		if (a < 0 || a + len > (int64_t)sizeof(vm->stack))
			break;
		return vm->stack + a;
	case K_VALUE:
		a = base->off + off + VALUE_BIAS;
		if (a < 0 || a + len > VALUE_REGION)
			break;
		return vm->values[base->region] + a;
	case K_MAP:
		*ret_err = error_set(-EOPNOTSUPP,
				     "instruction %zu: reads a map's kernel structure directly (an "
				     "inlined array map lookup); not decodable",
				     pc);
		return NULL;
	default:
		*ret_err = error_set(-EINVAL,
				     "instruction %zu: memory access through a scalar (r = 0x%llx)",
				     pc, (unsigned long long)base->v);
		return NULL;
	}
	*ret_err = error_set(
	    -EINVAL, "instruction %zu: %s access of %u bytes at offset %lld is out of bounds", pc,
	    kind_name(base->kind), len, (long long)(base->off + off));
	return NULL;
}

static void spill_clear(struct vm *vm, const struct reg *base, int64_t off, unsigned len)
{
	if (base->kind != K_STACK)
		return;
	int64_t a = base->off + off;
	for (int64_t s = a / 8; s <= (a + len - 1) / 8; s++)
		vm->spilled[s] = false;
}

static int do_load(struct vm *vm, size_t pc, const struct bpf_insn *i)
{
	unsigned len = size_bytes(BPF_SIZE(i->code));
	const struct reg *base = &vm->r[i->src_reg];
	int err = 0;
	uint8_t *p = resolve(vm, pc, base, i->off, len, false, &err);
	uint64_t v = 0;

	if (!p)
		return err;
	if (base->kind == K_STACK && len == 8 && (base->off + i->off) % 8 == 0 &&
	    vm->spilled[(base->off + i->off) / 8]) {
		vm->r[i->dst_reg] = vm->spill[(base->off + i->off) / 8];
		return 0;
	}
	memcpy(&v, p, len); /* little-endian host assumed, as the kernel's context layout is */
	if (BPF_MODE(i->code) == BPF_MEMSX)
		v = sext(v, len * 8);
	uint8_t t = base->taint, exact = 0;
	if (base->kind == K_CTX) {
		int64_t a = base->off + i->off;
		for (int64_t b = a; b < a + len; b++)
			t |= b < 2   ? BPFVM_T_TYPE
			     : b < 4 ? BPFVM_T_ACCESS
			     : b < 8 ? BPFVM_T_MAJOR
				     : BPFVM_T_MINOR;
		if (BPF_MODE(i->code) == BPF_MEM && len == 4 && (a == 4 || a == 8))
			exact = a == 4 ? BPFVM_T_MAJOR : BPFVM_T_MINOR;
	} else if (base->kind == K_STACK) {
		size_t a = (size_t)(base->off + i->off);
		for (unsigned b = 0; b < len; b++)
			t |= vm->stack_taint[a + b];
		/* A field stored whole and read back whole (upper half zero for 8 bytes). */
		if (BPF_MODE(i->code) == BPF_MEM && (len == 4 || (len == 8 && !(v >> 32)))) {
			uint8_t f = vm->stack_tag[a] == BPFVM_TAG(BPFVM_T_MAJOR, 0) ? BPFVM_T_MAJOR
				    : vm->stack_tag[a] == BPFVM_TAG(BPFVM_T_MINOR, 0)
					? BPFVM_T_MINOR
					: 0;
			for (unsigned b = 1; b < 4 && f; b++)
				if (vm->stack_tag[a + b] != BPFVM_TAG(f, b))
					f = 0;
			for (unsigned b = 4; b < len && f; b++)
				if (vm->stack_taint[a + b] & BPFVM_T_DEVICE)
					f = 0;
			exact = f;
		}
	}
	vm->r[i->dst_reg] = (struct reg){.v = v, .taint = t, .exact = exact};
	return 0;
}

static int do_store(struct vm *vm, size_t pc, const struct bpf_insn *i, const struct reg *src,
		    uint64_t v)
{
	unsigned len = size_bytes(BPF_SIZE(i->code));
	const struct reg *base = &vm->r[i->dst_reg];
	int err = 0;
	uint8_t *p = resolve(vm, pc, base, i->off, len, true, &err);

	if (!p)
		return err;
	spill_clear(vm, base, i->off, len);
	if (vm->strict && base->kind != K_STACK && src && (src->taint & BPFVM_T_DEVICE))
		return error_set(-EOPNOTSUPP,
				 "instruction %zu: stores a value computed from the device's "
				 "major/minor into a map",
				 pc);
	if (base->kind == K_STACK) {
		size_t a = (size_t)(base->off + i->off);
		bool ex = src && src->kind == K_SCALAR && src->exact;
		for (unsigned b = 0; b < len; b++) {
			/* The upper half of an unchanged 32-bit field is zero, not the field. */
			vm->stack_taint[a + b] = ex && b >= 4 ? 0 : src ? src->taint : 0;
			vm->stack_tag[a + b] = ex && b < 4 ? BPFVM_TAG(src->exact, b) : 0;
		}
		if (a < vm->dirty_lo)
			vm->dirty_lo = a;
		if (a + len > vm->dirty_hi)
			vm->dirty_hi = a + len;
	}
	if (src && src->kind != K_SCALAR) {
		int64_t a = base->off + i->off;
		if (base->kind != K_STACK || len != 8 || a % 8 != 0)
			return error_set(
			    -EINVAL,
			    "instruction %zu: pointer stored outside an aligned stack slot", pc);
		vm->spill[a / 8] = *src;
		vm->spilled[a / 8] = true;
		v = ptr_value(src);
	}
	memcpy(p, &v, len);
	return 0;
}

static int do_atomic(struct vm *vm, size_t pc, const struct bpf_insn *i)
{
	unsigned len = size_bytes(BPF_SIZE(i->code));
	const struct reg *base = &vm->r[i->dst_reg];
	struct reg *src = &vm->r[i->src_reg];
	int err = 0;
	uint8_t *p = resolve(vm, pc, base, i->off, len, true, &err);
	uint64_t old = 0, nv, s = src->v;

	if (!p)
		return err;
	if (src->kind != K_SCALAR)
		return error_set(-EINVAL, "instruction %zu: atomic operation on a pointer", pc);
	if (vm->strict && base->kind != K_STACK && ((src->taint | vm->r[0].taint) & BPFVM_T_DEVICE))
		return error_set(-EOPNOTSUPP,
				 "instruction %zu: an atomic operation on a map with a value "
				 "computed from the device's major/minor",
				 pc);
	spill_clear(vm, base, i->off, len);
	uint8_t mt = 0; /* what the memory held was computed from */
	if (base->kind == K_STACK) {
		size_t a = (size_t)(base->off + i->off);
		for (unsigned b = 0; b < len; b++) {
			mt |= vm->stack_taint[a + b];
			vm->stack_taint[a + b] |= src->taint | vm->r[0].taint;
			vm->stack_tag[a + b] = 0;
		}
		if (a < vm->dirty_lo)
			vm->dirty_lo = a;
		if (a + len > vm->dirty_hi)
			vm->dirty_hi = a + len;
	}
	memcpy(&old, p, len);
	switch (i->imm & ~BPF_FETCH) {
	case BPF_ADD:
		nv = old + s;
		break;
	case BPF_OR:
		nv = old | s;
		break;
	case BPF_AND:
		nv = old & s;
		break;
	case BPF_XOR:
		nv = old ^ s;
		break;
	case BPF_XCHG & ~BPF_FETCH:
		nv = s;
		break;
	case BPF_CMPXCHG & ~BPF_FETCH: {
		uint64_t cmp = vm->r[0].v, o = len == 4 ? (uint32_t)old : old;
		nv = (len == 4 ? (uint32_t)cmp : cmp) == o ? s : old;
		memcpy(p, &nv, len);
		vm->r[0] = (struct reg){.v = o, .taint = (uint8_t)(mt | vm->r[0].taint)};
		return 0;
	}
	default:
		return error_set(-EINVAL, "instruction %zu: unknown atomic operation 0x%x", pc,
				 (unsigned)i->imm);
	}
	memcpy(p, &nv, len);
	if (i->imm & BPF_FETCH)
		*src = (struct reg){.v = len == 4 ? (uint32_t)old : old, .taint = mt};
	return 0;
}

static int do_alu(struct vm *vm, size_t pc, const struct bpf_insn *i)
{
	bool is64 = BPF_CLASS(i->code) == BPF_ALU64;
	uint8_t op = BPF_OP(i->code);
	struct reg *dst = &vm->r[i->dst_reg];
	struct reg srcr = BPF_SRC(i->code) == BPF_X ? vm->r[i->src_reg]
						    : (struct reg){.v = (uint64_t)(int64_t)i->imm};
	uint64_t a = dst->v, b = srcr.v, res;
	uint8_t taint = op == BPF_MOV ? srcr.taint : (uint8_t)(dst->taint | srcr.taint);

	if (i->dst_reg == BPF_REG_10)
		return error_set(-EINVAL, "instruction %zu: writes the frame pointer r10", pc);

	/* Pointer arithmetic: only what the verifier allows, ptr +- scalar and ptr = ptr. */
	/* A move from a scalar overwrites whatever dst held, pointer or not. */
	if ((dst->kind != K_SCALAR && !(op == BPF_MOV && srcr.kind == K_SCALAR)) ||
	    srcr.kind != K_SCALAR) {
		/* The offset keeps what it was computed from: a load through it depends on it. */
		if (op == BPF_MOV && is64 && i->off == 0) {
			*dst = srcr;
			return 0;
		}
		if (is64 && (op == BPF_ADD || op == BPF_SUB) && srcr.kind == K_SCALAR) {
			dst->off += op == BPF_ADD ? (int64_t)b : -(int64_t)b;
			dst->taint |= srcr.taint;
			return 0;
		}
		if (is64 && op == BPF_ADD && dst->kind == K_SCALAR) {
			int64_t add = (int64_t)a;
			uint8_t t = dst->taint;
			*dst = srcr;
			dst->off += add;
			dst->taint |= t;
			return 0;
		}
		if (is64 && op == BPF_SUB && dst->kind == srcr.kind && dst->kind != K_SCALAR &&
		    dst->region == srcr.region) {
			*dst = (struct reg){.v = (uint64_t)(dst->off - srcr.off),
					    .taint = (uint8_t)(dst->taint | srcr.taint)};
			return 0;
		}
		return error_set(-EINVAL, "instruction %zu: unsupported arithmetic on a %s pointer",
				 pc, kind_name(dst->kind != K_SCALAR ? dst->kind : srcr.kind));
	}

	if (!is64) {
		a = (uint32_t)a;
		b = (uint32_t)b;
	}
	switch (op) {
	case BPF_ADD:
		res = a + b;
		break;
	case BPF_SUB:
		res = a - b;
		break;
	case BPF_MUL:
		res = a * b;
		break;
	case BPF_DIV:
		if (i->off == 1) { /* sdiv */
			int64_t sa = is64 ? (int64_t)a : (int32_t)a,
				sb = is64 ? (int64_t)b : (int32_t)b;
			if (sb == 0)
				res = 0;
			else if (sb == -1)
				res = (uint64_t)0 -
				      (uint64_t)sa; /* INT_MIN / -1 wraps, as the kernel does */
			else
				res = (uint64_t)(sa / sb);
		} else
			res = b ? a / b : 0;
		break;
	case BPF_MOD:
		if (i->off == 1) { /* smod */
			int64_t sa = is64 ? (int64_t)a : (int32_t)a,
				sb = is64 ? (int64_t)b : (int32_t)b;
			if (sb == 0)
				res = a;
			else if (sb == -1)
				res = 0;
			else
				res = (uint64_t)(sa % sb);
		} else
			res = b ? a % b : a;
		break;
	case BPF_OR:
		res = a | b;
		break;
	case BPF_AND:
		res = a & b;
		break;
	case BPF_XOR:
		res = a ^ b;
		break;
	case BPF_LSH:
		res = is64 ? a << (b & 63) : a << (b & 31);
		break;
	case BPF_RSH:
		res = is64 ? a >> (b & 63) : a >> (b & 31);
		break;
	case BPF_ARSH:
		res = is64 ? (uint64_t)((int64_t)a >> (b & 63))
			   : (uint64_t)(uint32_t)((int32_t)a >> (b & 31));
		break;
	case BPF_NEG:
		res = (uint64_t)0 - a;
		break;
	case BPF_MOV:
		res = i->off ? sext(b, (unsigned)i->off) : b;
		break;
	case BPF_END:
		/* to_le is a truncation on a little-endian host; to_be and bswap swap. */
		if (is64 || BPF_SRC(i->code) == BPF_TO_BE)
			res = bswap(dst->v, (unsigned)i->imm);
		else
			res = i->imm == 64 ? dst->v : dst->v & ((1ull << i->imm) - 1);
		/* to_le of 32 or 64 bits leaves a 32-bit field as it is */
		*dst = (struct reg){.v = res,
				    .taint = dst->taint,
				    .exact = !is64 && BPF_SRC(i->code) == BPF_TO_LE && i->imm >= 32
						 ? dst->exact
						 : 0};
		return 0;
	default:
		return error_set(-EINVAL, "instruction %zu: unknown ALU operation 0x%02x", pc,
				 i->code);
	}
	if (!is64)
		res = (uint32_t)res;
	/* Only a plain move keeps a field unchanged (fields are 32 bits: w = w too). */
	*dst = (struct reg){
	    .v = res,
	    .taint = taint,
	    .exact = op == BPF_MOV && i->off == 0 && BPF_SRC(i->code) == BPF_X ? srcr.exact : 0};
	return 0;
}

static bool jmp_taken(uint8_t op, uint64_t a, uint64_t b, bool is32)
{
	int64_t sa, sb;

	if (is32) {
		a = (uint32_t)a;
		b = (uint32_t)b;
		sa = (int32_t)a;
		sb = (int32_t)b;
	} else {
		sa = (int64_t)a;
		sb = (int64_t)b;
	}
	switch (op) {
	case BPF_JEQ:
		return a == b;
	case BPF_JNE:
		return a != b;
	case BPF_JGT:
		return a > b;
	case BPF_JGE:
		return a >= b;
	case BPF_JLT:
		return a < b;
	case BPF_JLE:
		return a <= b;
	case BPF_JSET:
		return (a & b) != 0;
	case BPF_JSGT:
		return sa > sb;
	case BPF_JSGE:
		return sa >= sb;
	case BPF_JSLT:
		return sa < sb;
	case BPF_JSLE:
		return sa <= sb;
	default:
		return false;
	}
}

static int value_slot(struct vm *vm, size_t pc, const void *p, struct reg *ret)
{
	if (vm->nvalues >= MAX_VALUES)
		return error_set(-EOPNOTSUPP,
				 "instruction %zu: more than %d map lookups in one run", pc,
				 MAX_VALUES);
	memset(vm->values[vm->nvalues], 0, VALUE_BIAS);
	memcpy(vm->values[vm->nvalues] + VALUE_BIAS, p, BPFVM_MAP_VALUE_MAX);
	*ret = (struct reg){.kind = K_VALUE, .region = (uint8_t)vm->nvalues};
	vm->nvalues++;
	return 0;
}

/* The kernel's inlined hash lookup adds the element-to-value offset a few instructions later. */
static int64_t htab_value_offset(const struct bpf_insn *insns, size_t n, size_t pc)
{
	for (size_t k = pc + 1; k < n && k <= pc + 6; k++)
		if (insns[k].code == (BPF_ALU64 | BPF_ADD | BPF_K) && insns[k].dst_reg == BPF_REG_0)
			return insns[k].imm;
	return 0;
}

static int do_call(struct vm *vm, const struct bpf_insn *insns, size_t n, size_t pc,
		   const struct bpfvm_env *env, const struct bpfvm_trace *trace)
{
	const struct bpf_insn *i = &insns[pc];
	struct reg r0 = {0};
	int r;

	switch (i->imm) {
	case BPF_FUNC_get_current_cgroup_id:
		if (!env || !env->cgroup_id)
			return error_set(-EOPNOTSUPP,
					 "instruction %zu: calls bpf_get_current_cgroup_id "
					 "(depends on the calling cgroup)",
					 pc);
		r0.v = env->cgroup_id(env->userdata);
		break;
	case BPF_FUNC_get_current_ancestor_cgroup_id:
		if (!env || !env->ancestor_cgroup_id)
			return error_set(
			    -EOPNOTSUPP,
			    "instruction %zu: calls bpf_get_current_ancestor_cgroup_id (depends on "
			    "the calling cgroup)",
			    pc);
		if (vm->strict && (vm->r[1].taint & BPFVM_T_DEVICE))
			return error_set(
			    -EOPNOTSUPP,
			    "instruction %zu: passes a value computed from the device's "
			    "major/minor to bpf_get_current_ancestor_cgroup_id",
			    pc);
		r0.v = env->ancestor_cgroup_id(env->userdata, (int)vm->r[1].v);
		break;
	case BPF_FUNC_trace_printk:
		break; /* debugging output only; returns a length nobody checks */
	case BPF_FUNC_map_lookup_elem:
	case BPFVM_CALL_HTAB_ELEM: {
		const struct reg *map = &vm->r[1], *key = &vm->r[2];
		uint8_t kbuf[BPFVM_MAP_KEY_MAX] = {0};
		const void *val;

		if (!env || !env->map_lookup)
			return error_set(
			    -EOPNOTSUPP,
			    "instruction %zu: looks up a map whose contents are not available", pc);
		if (map->kind != K_MAP || map->off != 0)
			return error_set(-EINVAL, "instruction %zu: map lookup without a map in r1",
					 pc);
		if (vm->strict && ((map->taint | key->taint) & BPFVM_T_DEVICE))
			return error_set(-EOPNOTSUPP,
					 "instruction %zu: the map or key address depends on the "
					 "device's major/minor",
					 pc);
		if (vm->strict && key->kind == K_STACK && key->off >= 0 &&
		    key->off < (int64_t)sizeof(vm->stack)) {
			size_t avail = sizeof(vm->stack) - (size_t)key->off;
			bool tainted = false;
			for (size_t b = 0; b < avail && b < BPFVM_MAP_KEY_MAX; b++)
				tainted |= vm->stack_taint[key->off + (int64_t)b] & BPFVM_T_DEVICE;
			/* Without a layout check the lookup may split the devices anywhere. */
			if (tainted && !trace->key)
				return error_set(-EOPNOTSUPP,
						 "instruction %zu: looks up a map with a key built "
						 "from the device's major/minor",
						 pc);
			if (tainted) {
				r = trace->key(trace->userdata, map->v, vm->stack_taint + key->off,
					       vm->stack_tag + key->off,
					       avail < BPFVM_MAP_KEY_MAX ? avail
									 : BPFVM_MAP_KEY_MAX);
				if (r < 0) {
					jobcg_error_prefix("instruction %zu", pc);
					return r;
				}
			}
		}
		if (key->kind == K_STACK) {
			if (key->off < 0 || key->off >= (int64_t)sizeof(vm->stack))
				return error_set(-EINVAL,
						 "instruction %zu: map key outside the stack", pc);
			size_t avail = sizeof(vm->stack) - (size_t)key->off;
			memcpy(kbuf, vm->stack + key->off,
			       avail < sizeof(kbuf) ? avail : sizeof(kbuf));
		} else if (key->kind == K_VALUE) {
			int64_t a = key->off + VALUE_BIAS;
			if (a < 0 || a >= VALUE_REGION)
				return error_set(-EINVAL, "instruction %zu: map key out of bounds",
						 pc);
			memcpy(kbuf, vm->values[key->region] + a, (size_t)(VALUE_REGION - a));
		} else
			return error_set(-EINVAL,
					 "instruction %zu: map key is not a pointer to memory", pc);
		val = env->map_lookup(env->userdata, map->v, kbuf);
		if (val) {
			r = value_slot(vm, pc, val, &r0);
			if (r < 0)
				return r;
			if (i->imm == BPFVM_CALL_HTAB_ELEM)
				r0.off = -htab_value_offset(insns, n, pc);
		}
		break;
	}
	default:
		if (i->imm >= 0x7fff0000)
			return error_set(
			    -EOPNOTSUPP,
			    "instruction %zu: calls a kernel function that could not be identified",
			    pc);
		return error_set(-EOPNOTSUPP,
				 "instruction %zu: calls helper %d, which decoding does not model",
				 pc, i->imm);
	}
	vm->r[0] = r0;
	for (int k = 1; k <= 5; k++)
		vm->r[k] = (struct reg){0};
	return 0;
}

/* One machine per thread, reused: a decode runs a program hundreds of thousands of times. */
static __thread struct vm *thread_vm;
/* Frees a thread's machine when the thread ends (the metrics server's threads come and go). */
static pthread_key_t vm_key;
static pthread_once_t vm_key_once = PTHREAD_ONCE_INIT;

static void vm_key_make(void)
{
	(void)pthread_key_create(&vm_key, free);
}

static struct vm *vm_get(void)
{
	struct vm *vm = thread_vm;

	if (!vm) {
		vm = calloc(1, sizeof(*vm));
		if (!vm)
			return NULL;
		vm->dirty_lo = sizeof(vm->stack);
		thread_vm = vm;
		pthread_once(&vm_key_once, vm_key_make);
		(void)pthread_setspecific(vm_key, vm);
		return vm;
	}
	if (vm->dirty_hi > vm->dirty_lo) {
		memset(vm->stack + vm->dirty_lo, 0, vm->dirty_hi - vm->dirty_lo);
		memset(vm->stack_taint + vm->dirty_lo, 0, vm->dirty_hi - vm->dirty_lo);
		memset(vm->stack_tag + vm->dirty_lo, 0, vm->dirty_hi - vm->dirty_lo);
		for (size_t s = vm->dirty_lo / 8; s <= (vm->dirty_hi - 1) / 8; s++)
			vm->spilled[s] = false;
	}
	vm->dirty_lo = sizeof(vm->stack);
	vm->dirty_hi = 0;
	memset(vm->r, 0, sizeof(vm->r));
	vm->nvalues = 0;
	vm->depth = 0;
	return vm;
}

int bpfvm_run(const struct bpf_insn *insns, size_t n, const struct bpfvm_devctx *ctx,
	      const struct bpfvm_env *env, uint64_t max_steps, uint64_t *ret_r0)
{
	int r = bpfvm_check(insns, n);

	if (r < 0)
		return r;
	return bpfvm_run_checked(insns, n, ctx, env, NULL, max_steps, ret_r0);
}

int bpfvm_run_checked(const struct bpf_insn *insns, size_t n, const struct bpfvm_devctx *ctx,
		      const struct bpfvm_env *env, struct bpfvm_trace *trace, uint64_t max_steps,
		      uint64_t *ret_r0)
{
	struct vm *vm;
	uint64_t steps = 0;
	size_t pc = 0;
	int r;

	vm = vm_get();
	if (!vm)
		return -ENOMEM;
	memcpy(vm->ctx, ctx, sizeof(vm->ctx));
	vm->strict = trace && trace->strict;
	vm->r[1] = (struct reg){.kind = K_CTX};
	vm->r[10] = (struct reg){.kind = K_STACK, .off = STACK_FRAME};

	for (;;) {
		const struct bpf_insn *i;
		uint8_t cls, op;

		if (pc >= n) {
			r = error_set(-EINVAL, "execution ran past the last instruction");
			goto out;
		}
		if (++steps > max_steps) {
			r = error_set(-ELOOP, "instruction %zu: step limit of %llu reached", pc,
				      (unsigned long long)max_steps);
			goto out;
		}
		i = &insns[pc];
		cls = BPF_CLASS(i->code);
		op = BPF_OP(i->code);
		switch (cls) {
		case BPF_LD: {
			uint64_t v =
			    (uint32_t)i->imm | ((uint64_t)(uint32_t)insns[pc + 1].imm << 32);
			struct reg *d = &vm->r[i->dst_reg];

			if (i->dst_reg == BPF_REG_10) {
				r = error_set(-EINVAL,
					      "instruction %zu: writes the frame pointer r10", pc);
				goto out;
			}
			switch (i->src_reg) {
			case 0:
				*d = (struct reg){.v = v};
				break;
			case BPF_PSEUDO_MAP_FD:
			case BPF_PSEUDO_MAP_IDX:
				*d = (struct reg){.kind = K_MAP, .v = (uint32_t)i->imm};
				break;
			case BPF_PSEUDO_MAP_VALUE:
			case BPF_PSEUDO_MAP_IDX_VALUE: {
				/* Direct value access: element 0 of an array map (global data). */
				uint32_t zero = 0;
				uint8_t kbuf[BPFVM_MAP_KEY_MAX] = {0};
				const void *val = NULL;

				memcpy(kbuf, &zero, sizeof(zero));
				if (env && env->map_lookup)
					val =
					    env->map_lookup(env->userdata, (uint32_t)i->imm, kbuf);
				if (!val) {
					r = error_set(-EOPNOTSUPP,
						      "instruction %zu: reads global data of map "
						      "%u, which is not available",
						      pc, (unsigned)i->imm);
					goto out;
				}
				r = value_slot(vm, pc, val, d);
				if (r < 0)
					goto out;
				d->off = (uint32_t)insns[pc + 1].imm;
				break;
			}
			default:
				r = error_set(
				    -EOPNOTSUPP,
				    "instruction %zu: ld_imm64 of a kernel object (pseudo %u)", pc,
				    i->src_reg);
				goto out;
			}
			pc += 2;
			continue;
		}
		case BPF_LDX:
			r = do_load(vm, pc, i);
			break;
		case BPF_ST:
			if (i->code == (BPF_ST | BPF_NOSPEC)) {
				r = 0;
				break;
			}
			r = do_store(vm, pc, i, NULL, (uint64_t)(int64_t)i->imm);
			break;
		case BPF_STX:
			if (BPF_MODE(i->code) == BPF_ATOMIC)
				r = do_atomic(vm, pc, i);
			else
				r = do_store(vm, pc, i, &vm->r[i->src_reg], vm->r[i->src_reg].v);
			break;
		case BPF_ALU:
		case BPF_ALU64:
			r = do_alu(vm, pc, i);
			break;
		case BPF_JMP:
		case BPF_JMP32:
			if (op == BPF_EXIT) {
				if (vm->depth == 0) {
					if (vm->r[0].kind != K_SCALAR) {
						r = error_set(-EINVAL,
							      "instruction %zu: returns a pointer",
							      pc);
						goto out;
					}
					if (vm->strict && (vm->r[0].taint & BPFVM_T_DEVICE)) {
						r = error_set(
						    -EOPNOTSUPP,
						    "instruction %zu: returns a value computed "
						    "from "
						    "the device's major/minor (not through a "
						    "comparison decoding can follow)",
						    pc);
						goto out;
					}
					*ret_r0 = vm->r[0].v;
					r = 0;
					goto out;
				}
				vm->depth--;
				for (int k = 0; k < 4; k++)
					vm->r[6 + k] = vm->frames[vm->depth].saved[k];
				vm->r[10].off -= STACK_FRAME;
				pc = vm->frames[vm->depth].ret_pc;
				continue;
			}
			if (op == BPF_CALL) {
				if (i->src_reg == BPF_PSEUDO_CALL) {
					if (vm->depth + 1 >= MAX_FRAMES) {
						r = error_set(
						    -EINVAL,
						    "instruction %zu: calls nested too deep", pc);
						goto out;
					}
					vm->frames[vm->depth].ret_pc = pc + 1;
					for (int k = 0; k < 4; k++)
						vm->frames[vm->depth].saved[k] = vm->r[6 + k];
					vm->depth++;
					vm->r[10].off += STACK_FRAME;
					pc = (size_t)((int64_t)pc + 1 + call_offset(i));
					continue;
				}
				if (i->src_reg != 0) {
					r = error_set(
					    -EOPNOTSUPP,
					    "instruction %zu: calls a kernel function (kfunc)", pc);
					goto out;
				}
				r = do_call(vm, insns, n, pc, env, trace);
				break;
			}
			if (op == BPF_JA) {
				pc = (size_t)((int64_t)pc + 1 +
					      (cls == BPF_JMP32 ? i->imm : i->off));
				continue;
			}
			{
				const struct reg *d = &vm->r[i->dst_reg];
				uint64_t a = reg_value(d);
				uint64_t b = BPF_SRC(i->code) == BPF_X
						 ? reg_value(&vm->r[i->src_reg])
						 : (uint64_t)(int64_t)i->imm;
				const struct reg *sr = &vm->r[i->src_reg];
				bool x = BPF_SRC(i->code) == BPF_X;
				uint8_t ta = (uint8_t)(d->taint | (d->kind == K_SCALAR && d->exact
								       ? BPFVM_T_EXACT
								       : 0));
				uint8_t tb =
				    !x ? 0
				       : (uint8_t)(sr->taint | (sr->kind == K_SCALAR && sr->exact
								    ? BPFVM_T_EXACT
								    : 0));
				if (trace && trace->compare && (d->taint | (x ? sr->taint : 0)))
					trace->compare(trace->userdata, op, cls == BPF_JMP32, a, ta,
						       b, tb);
				if (jmp_taken(op, a, b, cls == BPF_JMP32)) {
					pc = (size_t)((int64_t)pc + 1 + i->off);
					continue;
				}
			}
			r = 0;
			break;
		default:
			r = error_set(-EINVAL, "instruction %zu: unknown opcode 0x%02x", pc,
				      i->code);
		}
		if (r < 0)
			goto out;
		pc++;
	}
out:
	if (trace)
		trace->steps += steps;
	return r;
}
