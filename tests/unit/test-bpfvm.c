/* jobcg tests: the eBPF interpreter against hand-computed results for every instruction kind. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "bpfvm.h"
#include "insn.h"
#include "jobcg/error.h"
#include "tap.h"

#define STEPS 100000

static int run(const struct bpf_insn *p, size_t n, uint64_t *r0)
{
	struct bpfvm_devctx ctx = {.access_type = (6u << 16) | 2, .major = 195, .minor = 3};
	return bpfvm_run(p, n, &ctx, NULL, STEPS, r0);
}

/* r0 = a; r1 = b (64-bit constants); r0 op= r1 (or imm); exit */
static uint64_t alu(uint8_t cls, uint8_t op, uint64_t a, uint64_t b, bool imm, int16_t off,
		    int32_t immv)
{
	struct bpf_insn p[] = {
	    LD_IMM64(0, a),
	    LD_IMM64(1, b),
	    imm ? INSN(cls | op | BPF_K, 0, 0, off, immv) : INSN(cls | op | BPF_X, 0, 1, off, 0),
	    EXIT(),
	};
	uint64_t r0 = 0xdeadbeef;
	int r = run(p, NINSNS(p), &r0);
	if (r < 0)
		tap_diag("run failed: %s", jobcg_last_error()->message);
	return r0;
}

#define A 0xfffffffe80000005ull
#define B 0x0000000100000003ull
#define V 0x1122334455667788ull /* for the byte swaps */

static void test_alu(void)
{
	static const struct {
		const char *name;
		uint8_t op;
		uint64_t want64, want32;
	} t[] = {
	    {"add", BPF_ADD, 0xffffffff80000008ull, 0x80000008},
	    {"sub", BPF_SUB, 0xfffffffd80000002ull, 0x80000002},
	    {"mul", BPF_MUL, 0x800000008000000full, 0x8000000f},
	    {"div", BPF_DIV, 0xfffffffb, 0x2aaaaaac},
	    {"or", BPF_OR, 0xffffffff80000007ull, 0x80000007},
	    {"and", BPF_AND, 0x1, 0x1},
	    {"lsh", BPF_LSH, 0xfffffff400000028ull, 0x28},
	    {"rsh", BPF_RSH, 0x1fffffffd0000000ull, 0x10000000},
	    {"mod", BPF_MOD, 0x80000014, 0x1},
	    {"xor", BPF_XOR, 0xffffffff80000006ull, 0x80000006},
	    {"arsh", BPF_ARSH, 0xffffffffd0000000ull, 0xf0000000},
	    {"mov", BPF_MOV, 0x100000003ull, 0x3},
	};
	char name[128];

	for (size_t k = 0; k < NINSNS(t); k++) {
		snprintf(name, sizeof(name), "alu64 %s reg", t[k].name);
		is_int(alu(BPF_ALU64, t[k].op, A, B, false, 0, 0), t[k].want64, name);
		snprintf(name, sizeof(name), "alu32 %s reg (upper half zeroed)", t[k].name);
		is_int(alu(BPF_ALU, t[k].op, A, B, false, 0, 0), t[k].want32, name);
	}

	/* Immediates, division by zero, shift masks, signed division, sign extension, swaps. */
	static const struct {
		const char *name;
		uint8_t cls, op;
		uint64_t a, b;
		bool imm;
		int16_t off;
		int32_t k;
		uint64_t want;
	} u[] = {
	    /* Immediates are sign-extended to 64 bits. */
	    {"alu64 add imm -2", BPF_ALU64, BPF_ADD, A, 0, true, 0, -2, 0xfffffffe80000003ull},
	    {"alu64 and imm -2", BPF_ALU64, BPF_AND, A, 0, true, 0, -2, 0xfffffffe80000004ull},
	    {"alu32 and imm -2", BPF_ALU, BPF_AND, A, 0, true, 0, -2, 0x80000004},
	    {"mov64 imm -1", BPF_ALU64, BPF_MOV, A, 0, true, 0, -1, 0xffffffffffffffffull},
	    {"mov32 imm -1", BPF_ALU, BPF_MOV, A, 0, true, 0, -1, 0xffffffff},
	    {"alu32 and 65535 (type mask)", BPF_ALU, BPF_AND, A, 0, true, 0, 65535, 0x5},
	    {"alu32 rsh 16 (access bits)", BPF_ALU, BPF_RSH, 0x00060002, 0, true, 0, 16, 6},
	    /* Division and modulo by zero: 0 and the dividend. */
	    {"div64 by zero is 0", BPF_ALU64, BPF_DIV, A, 0, false, 0, 0, 0},
	    {"div32 by zero is 0", BPF_ALU, BPF_DIV, A, 0, false, 0, 0, 0},
	    {"mod64 by zero keeps dst", BPF_ALU64, BPF_MOD, A, 0, false, 0, 0, A},
	    {"mod32 by zero keeps low half", BPF_ALU, BPF_MOD, A, 0, false, 0, 0, 0x80000005},
	    /* Shift counts are masked. */
	    {"lsh64 by 65 = by 1", BPF_ALU64, BPF_LSH, A, 65, false, 0, 0, 0xfffffffd0000000aull},
	    {"lsh32 by 33 = by 1", BPF_ALU, BPF_LSH, A, 33, false, 0, 0, 0xa},
	    {"neg64", BPF_ALU64, BPF_NEG, A, 0, true, 0, 0, 0x17ffffffbull},
	    {"neg32", BPF_ALU, BPF_NEG, A, 0, true, 0, 0, 0x7ffffffb},
	    /* Signed division (off = 1). */
	    {"sdiv64 imm -3", BPF_ALU64, BPF_DIV, A, 0, true, 1, -3, 0x7ffffffe},
	    {"smod64 imm -3", BPF_ALU64, BPF_MOD, A, 0, true, 1, -3, 0xffffffffffffffffull},
	    {"sdiv32 imm -3", BPF_ALU, BPF_DIV, A, 0, true, 1, -3, 0x2aaaaaa9},
	    {"smod32 imm -3", BPF_ALU, BPF_MOD, A, 0, true, 1, -3, 0},
	    {"sdiv32 INT_MIN / -1", BPF_ALU, BPF_DIV, 0x80000000, 0, true, 1, -1, 0x80000000},
	    {"smod64 by -1 is 0", BPF_ALU64, BPF_MOD, A, 0, true, 1, -1, 0},
	    /* Sign-extending moves. */
	    {"movsx64 s8", BPF_ALU64, BPF_MOV, 0, 0x80, false, 8, 0, 0xffffffffffffff80ull},
	    {"movsx64 s16", BPF_ALU64, BPF_MOV, 0, 0x8000, false, 16, 0, 0xffffffffffff8000ull},
	    {"movsx64 s32", BPF_ALU64, BPF_MOV, 0, 0x80000000, false, 32, 0, 0xffffffff80000000ull},
	    {"movsx32 s8", BPF_ALU, BPF_MOV, 0, 0x80, false, 8, 0, 0xffffff80},
	    /* Byte swaps. */
	    {"to_le 16", BPF_ALU, BPF_END, V, 0, true, 0, 16, 0x7788},
	    {"to_le 32", BPF_ALU, BPF_END, V, 0, true, 0, 32, 0x55667788},
	    {"to_le 64", BPF_ALU, BPF_END, V, 0, true, 0, 64, V},
	    {"to_be 16", BPF_ALU, BPF_END | BPF_X, V, 0, true, 0, 16, 0x8877},
	    {"to_be 32", BPF_ALU, BPF_END | BPF_X, V, 0, true, 0, 32, 0x88776655},
	    {"to_be 64", BPF_ALU, BPF_END | BPF_X, V, 0, true, 0, 64, 0x8877665544332211ull},
	    {"bswap16", BPF_ALU64, BPF_END, V, 0, true, 0, 16, 0x8877},
	    {"bswap64", BPF_ALU64, BPF_END, V, 0, true, 0, 64, 0x8877665544332211ull},
	};

	for (size_t k = 0; k < NINSNS(u); k++)
		is_int(alu(u[k].cls, u[k].op, u[k].a, u[k].b, u[k].imm, u[k].off, u[k].k),
		       u[k].want, u[k].name);
}

/* r1 = a; r2 = b; if r1 op r2 goto +2 ; r0 = 0; exit; r0 = 1; exit */
static int jmp(uint8_t cls, uint8_t op, uint64_t a, uint64_t b, bool imm)
{
	struct bpf_insn p[] = {
	    LD_IMM64(1, a),
	    LD_IMM64(2, b),
	    imm ? INSN(cls | op | BPF_K, 1, 0, 2, (int32_t)b) : INSN(cls | op | BPF_X, 1, 2, 2, 0),
	    MOV64_IMM(0, 0),
	    EXIT(),
	    MOV64_IMM(0, 1),
	    EXIT(),
	};
	uint64_t r0 = 99;
	if (run(p, NINSNS(p), &r0) < 0)
		return -1;
	return (int)r0;
}

static void test_jumps(void)
{
	static const struct {
		const char *name;
		uint8_t op;
		uint64_t a, b;
		int taken64, taken32;
	} t[] = {
	    {"jeq", BPF_JEQ, 5, 5, 1, 1},
	    {"jeq upper half differs", BPF_JEQ, 0x100000005ull, 5, 0, 1},
	    {"jne", BPF_JNE, 5, 6, 1, 1},
	    {"jne equal", BPF_JNE, 7, 7, 0, 0},
	    {"jgt unsigned", BPF_JGT, (uint64_t)-1, 1, 1, 1},
	    {"jgt equal", BPF_JGT, 3, 3, 0, 0},
	    {"jge equal", BPF_JGE, 3, 3, 1, 1},
	    {"jge less", BPF_JGE, 2, 3, 0, 0},
	    {"jlt", BPF_JLT, 1, (uint64_t)-1, 1, 1},
	    {"jlt equal", BPF_JLT, 4, 4, 0, 0},
	    {"jle equal", BPF_JLE, 4, 4, 1, 1},
	    {"jle greater", BPF_JLE, 5, 4, 0, 0},
	    {"jset common bit", BPF_JSET, 6, 2, 1, 1},
	    {"jset no common bit", BPF_JSET, 6, 1, 0, 0},
	    {"jset only upper bits", BPF_JSET, 0x100000000ull, 0x100000000ull, 1, 0},
	    {"jsgt negative", BPF_JSGT, (uint64_t)-1, 1, 0, 0},
	    {"jsgt", BPF_JSGT, 2, (uint64_t)-5, 1, 1},
	    {"jsge equal", BPF_JSGE, (uint64_t)-3, (uint64_t)-3, 1, 1},
	    {"jslt negative", BPF_JSLT, (uint64_t)-1, 1, 1, 1},
	    {"jslt 32-bit sign differs", BPF_JSLT, 0x80000000ull, 1, 0, 1},
	    {"jsle", BPF_JSLE, (uint64_t)-2, (uint64_t)-2, 1, 1},
	    {"jsle greater", BPF_JSLE, 1, (uint64_t)-2, 0, 0},
	};
	char name[128];

	for (size_t k = 0; k < NINSNS(t); k++) {
		snprintf(name, sizeof(name), "jmp %s reg", t[k].name);
		is_int(jmp(BPF_JMP, t[k].op, t[k].a, t[k].b, false), t[k].taken64, name);
		snprintf(name, sizeof(name), "jmp32 %s reg", t[k].name);
		is_int(jmp(BPF_JMP32, t[k].op, t[k].a, t[k].b, false), t[k].taken32, name);
	}
	/* Immediate comparisons sign-extend the immediate. */
	is_int(jmp(BPF_JMP, BPF_JEQ, (uint64_t)-1, (uint64_t)-1, true), 1,
	       "jeq imm -1 matches 64-bit -1");
	is_int(jmp(BPF_JMP, BPF_JEQ, 0xffffffff, (uint64_t)-1, true), 0,
	       "jeq imm -1 is not 0xffffffff");
	is_int(jmp(BPF_JMP32, BPF_JEQ, 0xffffffff, (uint64_t)-1, true), 1,
	       "jmp32 jeq imm -1 matches w=0xffffffff");
	is_int(jmp(BPF_JMP, BPF_JSET, 0x00040002, 0x4 << 16, true), 1, "jset imm on access bits");

	/* JA forward and backward, and the 32-bit gotol form. */
	struct bpf_insn ja[] = {
	    MOV64_IMM(0, 1), JA(2),
	    MOV64_IMM(0, 7), /* skipped, then reached by the backward jump */
	    EXIT(),	     ALU64_IMM(BPF_ADD, 0, 10),
	    JA(-4),
	};
	uint64_t r0 = 0;
	is_int(run(ja, NINSNS(ja), &r0), 0, "ja program runs");
	is_int(r0, 7, "ja forward skips, backward returns to the skipped instruction");
	struct bpf_insn gotol[] = {
	    MOV64_IMM(0, 1),
	    INSN(BPF_JMP32 | BPF_JA, 0, 0, 0, 1),
	    MOV64_IMM(0, 2),
	    EXIT(),
	};
	is_int(run(gotol, NINSNS(gotol), &r0), 0, "gotol runs");
	is_int(r0, 1, "gotol jumps by imm");
}

static void test_context_and_seed_shape(void)
{
	/* The shape of seed 000: deny 195:0-2 (char), allow the rest. */
	struct bpf_insn p[] = {
	    LDX(BPF_W, 2, 1, 0),
	    ALU32_IMM(BPF_AND, 2, 65535),
	    LDX(BPF_W, 3, 1, 0),
	    ALU32_IMM(BPF_RSH, 3, 16),
	    LDX(BPF_W, 4, 1, 4),
	    LDX(BPF_W, 5, 1, 8),
	    JMP_IMM(BPF_JNE, 2, 2, 4),
	    JMP_IMM(BPF_JNE, 4, 195, 3),
	    JMP_IMM(BPF_JNE, 5, 0, 2),
	    MOV64_IMM(0, 0),
	    EXIT(),
	    MOV64_IMM(0, 1),
	    EXIT(),
	};
	struct bpfvm_devctx c = {.access_type = (2u << 16) | 2, .major = 195, .minor = 0};
	uint64_t r0 = 5;

	is_int(bpfvm_run(p, NINSNS(p), &c, NULL, STEPS, &r0), 0, "ctx program runs");
	is_int(r0, 0, "c 195:0 denied");
	c.minor = 1;
	bpfvm_run(p, NINSNS(p), &c, NULL, STEPS, &r0);
	is_int(r0, 1, "c 195:1 allowed");
	c.minor = 0;
	c.access_type = (2u << 16) | 1;
	bpfvm_run(p, NINSNS(p), &c, NULL, STEPS, &r0);
	is_int(r0, 1, "b 195:0 allowed");

	/* Narrow context loads read the host-order bytes. */
	struct bpf_insn narrow[] = {
	    LDX(BPF_H, 0, 1, 2), /* access half of access_type */
	    LDX(BPF_B, 2, 1, 4), /* low byte of major */
	    ALU64_IMM(BPF_LSH, 0, 8), ALU64_REG(BPF_OR, 0, 2), EXIT(),
	};
	c = (struct bpfvm_devctx){.access_type = (4u << 16) | 2, .major = 0x1c3};
	is_int(bpfvm_run(narrow, NINSNS(narrow), &c, NULL, STEPS, &r0), 0, "narrow loads run");
	is_int(r0, 0x4c3, "u16 at +2 is the access, u8 at +4 the low major byte");

	struct bpf_insn oob[] = {LDX(BPF_W, 0, 1, 12), EXIT()};
	is_int(bpfvm_run(oob, NINSNS(oob), &c, NULL, STEPS, &r0), -EINVAL,
	       "context read past the end refused");
	struct bpf_insn wr[] = {ST(BPF_W, 1, 0, 0), MOV64_IMM(0, 0), EXIT()};
	is_int(bpfvm_run(wr, NINSNS(wr), &c, NULL, STEPS, &r0), -EINVAL, "context store refused");
}

static void test_ldimm64_and_blinding(void)
{
	uint64_t r0 = 0;
	struct bpf_insn p[] = {LD_IMM64(0, 0x123456789abcdef0ull), EXIT()};
	is_int(run(p, NINSNS(p), &r0), 0, "ld_imm64 runs");
	is_int(r0, 0x123456789abcdef0ull, "ld_imm64 loads 64 bits");

	/*
	 * What the kernel's constant blinding turns "if r4 != 0xc3 goto +2" into, and a blinded
	 * ld_imm64: the constant is hidden as rnd ^ imm in r11 and recovered by xor.
	 */
	const int32_t rnd = 0x5a5a1234;
	struct bpf_insn b[] = {
	    LDX(BPF_W, 4, 1, 4),
	    ALU32_IMM(BPF_MOV, 11, rnd ^ 0xc3),
	    ALU32_IMM(BPF_XOR, 11, rnd),
	    JMP_REG(BPF_JNE, 4, 11, 8),
	    /* blinded ld_imm64 r0 = 0x0000000700000001 */
	    ALU64_IMM(BPF_MOV, 11, rnd ^ 7),
	    ALU64_IMM(BPF_XOR, 11, rnd),
	    ALU64_IMM(BPF_LSH, 11, 32),
	    ALU64_REG(BPF_MOV, 0, 11),
	    ALU32_IMM(BPF_MOV, 11, rnd ^ 1),
	    ALU32_IMM(BPF_XOR, 11, rnd),
	    ALU64_REG(BPF_OR, 0, 11),
	    EXIT(),
	    MOV64_IMM(0, 0),
	    EXIT(),
	};
	struct bpfvm_devctx c = {.access_type = (2u << 16) | 2, .major = 195, .minor = 3};
	is_int(bpfvm_run(b, NINSNS(b), &c, NULL, STEPS, &r0), 0, "blinded program runs");
	is_int(r0, 0x700000001ull,
	       "r11 blinding recovers the compare constant and the 64-bit load");
	c.major = 196;
	bpfvm_run(b, NINSNS(b), &c, NULL, STEPS, &r0);
	is_int(r0, 0, "blinded compare sends other majors to the deny exit");
}

static void test_limits_and_malformed(void)
{
	uint64_t r0 = 42;
	struct bpf_insn loop[] = {MOV64_IMM(0, 0), JA(-1), EXIT()};
	is_int(run(loop, NINSNS(loop), &r0), -ELOOP, "endless loop hits the step limit");
	ok(strstr(jobcg_last_error()->message, "step limit") != NULL, "error says step limit: %s",
	   jobcg_last_error()->message);
	is_int(r0, 42, "r0 untouched on failure");

	struct bpf_insn counted[] = {
	    MOV64_IMM(0, 0),
	    ALU64_IMM(BPF_ADD, 0, 1),
	    JMP_IMM(BPF_JLT, 0, 100, -2),
	    EXIT(),
	};
	is_int(run(counted, NINSNS(counted), &r0), 0, "bounded loop finishes");
	is_int(r0, 100, "bounded loop result");
	struct bpfvm_devctx c = {0};
	is_int(bpfvm_run(counted, NINSNS(counted), &c, NULL, 50, &r0), -ELOOP,
	       "bounded loop over a small limit");

	struct bpf_insn trunc[] = {MOV64_IMM(0, 0), EXIT(),
				   INSN(BPF_LD | BPF_DW | BPF_IMM, 0, 0, 0, 1)};
	is_int(bpfvm_check(trunc, NINSNS(trunc)), -EINVAL, "truncated ld_imm64");
	ok(strstr(jobcg_last_error()->message, "instruction 2") != NULL, "names instruction: %s",
	   jobcg_last_error()->message);
	struct bpf_insn out[] = {JMP_IMM(BPF_JEQ, 1, 0, 5), MOV64_IMM(0, 0), EXIT()};
	is_int(bpfvm_check(out, NINSNS(out)), -EINVAL, "jump out of range");
	ok(strstr(jobcg_last_error()->message, "instruction 0") != NULL, "names instruction: %s",
	   jobcg_last_error()->message);
	struct bpf_insn back[] = {JA(-2), EXIT()};
	is_int(bpfvm_check(back, NINSNS(back)), -EINVAL, "jump before the start");
	struct bpf_insn unk[] = {MOV64_IMM(0, 0), INSN(0xff, 0, 0, 0, 0), EXIT()};
	is_int(bpfvm_check(unk, NINSNS(unk)), -EINVAL, "unknown opcode");
	ok(strstr(jobcg_last_error()->message, "0xff") &&
	       strstr(jobcg_last_error()->message, "instruction 1"),
	   "names opcode and instruction: %s", jobcg_last_error()->message);
	struct bpf_insn ldabs[] = {INSN(BPF_LD | BPF_ABS | BPF_W, 0, 0, 0, 0), EXIT()};
	is_int(bpfvm_check(ldabs, NINSNS(ldabs)), -EINVAL,
	       "packet loads are not device program opcodes");
	struct bpf_insn mid[] = {JA(1), LD_IMM64(0, 1), EXIT()};
	is_int(bpfvm_check(mid, NINSNS(mid)), -EINVAL, "jump into the middle of ld_imm64");
	struct bpf_insn noexit[] = {MOV64_IMM(0, 0)};
	is_int(bpfvm_check(noexit, NINSNS(noexit)), -EINVAL, "program must end with exit");
	is_int(bpfvm_check(noexit, 0), -EINVAL, "empty program");
	struct bpf_insn badreg[] = {INSN(BPF_ALU64 | BPF_MOV | BPF_K, 12, 0, 0, 0), EXIT()};
	is_int(bpfvm_check(badreg, NINSNS(badreg)), -EINVAL, "register 12 refused");
	struct bpf_insn badend[] = {ALU32_IMM(BPF_END, 0, 24), EXIT()};
	is_int(bpfvm_check(badend, NINSNS(badend)), -EINVAL, "byte swap of 24 bits refused");
	struct bpf_insn r10[] = {MOV64_IMM(10, 0), EXIT()};
	is_int(run(r10, NINSNS(r10), &r0), -EINVAL, "writing r10 refused at run time");
	struct bpf_insn scal[] = {MOV64_IMM(2, 64), LDX(BPF_W, 0, 2, 0), EXIT()};
	is_int(run(scal, NINSNS(scal), &r0), -EINVAL, "load through a scalar refused");
	struct bpf_insn retptr[] = {MOV64_REG(0, 10), EXIT()};
	is_int(run(retptr, NINSNS(retptr), &r0), -EINVAL, "returning a pointer refused");
}

struct env_data {
	uint8_t value[BPFVM_MAP_VALUE_MAX];
	uint8_t key[16];
	uint64_t map_ref;
	int lookups;
	bool found;
};

static uint64_t cg_id(void *u)
{
	return 0x1234;
}
static uint64_t anc_id(void *u, int level)
{
	return 0x1000 + (uint64_t)level;
}
static const void *lookup(void *u, uint64_t ref, const void *key)
{
	struct env_data *d = u;
	d->lookups++;
	d->map_ref = ref;
	memcpy(d->key, key, sizeof(d->key));
	return d->found ? d->value : NULL;
}

static void test_stack_calls_maps(void)
{
	uint64_t r0 = 0;
	/* Stack store/load, a spilled context pointer reloaded and used. */
	struct bpf_insn st[] = {
	    STX(BPF_DW, 10, 1, -8),
	    MOV64_IMM(1, 0),
	    ST(BPF_W, 10, -16, 0x11223344),
	    LDX(BPF_DW, 6, 10, -8),
	    LDX(BPF_W, 0, 6, 4),
	    LDX(BPF_H, 2, 10, -16),
	    ALU64_REG(BPF_ADD, 0, 2),
	    EXIT(),
	};
	is_int(run(st, NINSNS(st), &r0), 0, "stack program runs");
	is_int(r0, 195 + 0x3344, "spilled ctx pointer reloads; stack holds stored bytes");
	struct bpf_insn deep[] = {LDX(BPF_W, 0, 10, -516), EXIT()};
	is_int(run(deep, NINSNS(deep), &r0), -EINVAL,
	       "stack read below the frame bound (no frames) refused");

	/* Helpers without hooks are opaque. */
	struct bpf_insn cg[] = {CALL(BPF_FUNC_get_current_cgroup_id), EXIT()};
	is_int(run(cg, NINSNS(cg), &r0), -EOPNOTSUPP, "cgroup id helper without a hook is opaque");
	struct bpf_insn other[] = {CALL(BPF_FUNC_ktime_get_ns), EXIT()};
	is_int(run(other, NINSNS(other), &r0), -EOPNOTSUPP, "unmodelled helper is opaque");

	struct env_data d = {.found = true};
	struct bpfvm_env env = {cg_id, anc_id, lookup, &d};
	struct bpfvm_devctx c = {.access_type = (2u << 16) | 2, .major = 195, .minor = 3};
	is_int(bpfvm_run(cg, NINSNS(cg), &c, &env, STEPS, &r0), 0, "cgroup id helper with hook");
	is_int(r0, 0x1234, "cgroup id from hook");
	struct bpf_insn anc[] = {MOV64_IMM(1, 3), CALL(BPF_FUNC_get_current_ancestor_cgroup_id),
				 EXIT()};
	bpfvm_run(anc, NINSNS(anc), &c, &env, STEPS, &r0);
	is_int(r0, 0x1003, "ancestor id for level in r1");

	/* snapd-style: key {u8 type; u32 major; u32 minor} packed on the stack, value u8. */
	struct bpf_insn map[] = {
	    LDX(BPF_W, 2, 1, 0),
	    ALU32_IMM(BPF_AND, 2, 0xffff),
	    STX(BPF_B, 10, 2, -9),
	    LDX(BPF_W, 2, 1, 4),
	    STX(BPF_W, 10, 2, -8),
	    LDX(BPF_W, 2, 1, 8),
	    STX(BPF_W, 10, 2, -4),
	    MOV64_REG(2, 10),
	    ALU64_IMM(BPF_ADD, 2, -9),
	    LD_MAP(1, 77),
	    CALL(BPF_FUNC_map_lookup_elem),
	    JMP_IMM(BPF_JEQ, 0, 0, 2),
	    LDX(BPF_B, 0, 0, 0),
	    EXIT(),
	    MOV64_IMM(0, 0),
	    EXIT(),
	};
	d.value[0] = 1;
	is_int(bpfvm_run(map, NINSNS(map), &c, &env, STEPS, &r0), 0, "map lookup program runs");
	is_int(r0, 1, "value read through the returned pointer");
	is_int(d.map_ref, 77, "map reference passed to the hook");
	uint8_t want_key[9] = {2, 195, 0, 0, 0, 3, 0, 0, 0};
	ok(memcmp(d.key, want_key, 9) == 0, "packed key built on the stack reaches the hook");
	d.found = false;
	bpfvm_run(map, NINSNS(map), &c, &env, STEPS, &r0);
	is_int(r0, 0, "missing key returns NULL and takes the null branch");
	is_int(run(map, NINSNS(map), &r0), -EOPNOTSUPP, "map lookup without a hook is opaque");

	/* Kernel-inlined hash lookup: the element header is skipped by r0 += K afterwards. */
	struct bpf_insn htab[] = {
	    ST(BPF_W, 10, -4, 5),
	    MOV64_REG(2, 10),
	    ALU64_IMM(BPF_ADD, 2, -4),
	    LD_MAP(1, 9),
	    CALL(BPFVM_CALL_HTAB_ELEM),
	    JMP_IMM(BPF_JEQ, 0, 0, 1),
	    ALU64_IMM(BPF_ADD, 0, 56),
	    JMP_IMM(BPF_JEQ, 0, 0, 2),
	    LDX(BPF_W, 0, 0, 0),
	    EXIT(),
	    MOV64_IMM(0, 9),
	    EXIT(),
	};
	d.found = true;
	d.value[0] = 0x21;
	d.value[1] = 0x43;
	d.value[2] = 0;
	d.value[3] = 0;
	is_int(bpfvm_run(htab, NINSNS(htab), &c, &env, STEPS, &r0), 0, "inlined htab lookup runs");
	is_int(r0, 0x4321, "value found after the element offset");
	d.found = false;
	bpfvm_run(htab, NINSNS(htab), &c, &env, STEPS, &r0);
	is_int(r0, 9, "inlined htab miss");

	/* bpf-to-bpf call: callee sees its own frame; r6 survives. */
	struct bpf_insn sub[] = {
	    MOV64_IMM(6, 100),
	    ST(BPF_DW, 10, -8, 1),
	    INSN(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, 4),
	    ALU64_REG(BPF_ADD, 0, 6),
	    LDX(BPF_DW, 2, 10, -8),
	    ALU64_REG(BPF_ADD, 0, 2),
	    EXIT(),
	    /* callee */
	    MOV64_IMM(6, 5),
	    ST(BPF_DW, 10, -8, 1000),
	    MOV64_IMM(0, 20),
	    EXIT(),
	};
	is_int(run(sub, NINSNS(sub), &r0), 0, "subprogram call runs");
	is_int(r0, 121, "callee result + preserved r6 + caller's own stack slot");
	/* As the kernel dumps a JIT-compiled program: offset in off, subprogram index in imm. */
	sub[2] = INSN(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 4, 1);
	r0 = 0;
	is_int(run(sub, NINSNS(sub), &r0), 0, "translated subprogram call runs");
	is_int(r0, 121, "translated call goes to pc+off");
}

struct seen {
	int n;
	uint64_t b[8];
	uint8_t ta[8], tb[8];
};

static void on_compare(void *u, uint8_t op, bool is32, uint64_t a, uint8_t ta, uint64_t b,
		       uint8_t tb)
{
	struct seen *s = u;
	if (s->n < 8) {
		s->b[s->n] = b;
		s->ta[s->n] = ta;
		s->tb[s->n] = tb;
	}
	s->n++;
}

static void test_trace(void)
{
	/* The major goes through the stack; the minor is compared against a blinded constant. */
	struct bpf_insn p[] = {
	    LDX(BPF_W, 2, 1, 4),
	    STX(BPF_W, 10, 2, -4),
	    LDX(BPF_W, 3, 10, -4),
	    LDX(BPF_W, 4, 1, 8),
	    MOV32_IMM(11, 0x77 ^ 9),
	    ALU32_IMM(BPF_XOR, 11, 0x77),
	    JMP_REG(BPF_JEQ, 4, 11, 2),
	    JMP_IMM(BPF_JNE, 3, 195, 1),
	    MOV64_IMM(0, 1),
	    EXIT(),
	};
	struct bpfvm_devctx c = {.access_type = (2u << 16) | 2, .major = 195, .minor = 3};
	struct seen s = {0};
	struct bpfvm_trace tr = {on_compare, &s};
	uint64_t r0 = 0;

	is_int(bpfvm_check(p, NINSNS(p)), 0, "trace program is valid");
	is_int(bpfvm_run_checked(p, NINSNS(p), &c, NULL, &tr, STEPS, &r0), 0, "traced run");
	is_int(s.n, 2, "two context-dependent comparisons reported");
	is_int(s.ta[0], BPFVM_T_MINOR | BPFVM_T_EXACT, "first compares the minor, unchanged");
	is_int(s.b[0], 9, "against the unblinded constant 9");
	is_int(s.tb[0], 0, "constant side untainted");
	is_int(s.ta[1], BPFVM_T_MAJOR | BPFVM_T_EXACT,
	       "major stays the unchanged field through a stack spill");
	is_int(s.b[1], 195, "against 195");
	/* A second run on the reused machine starts from a clean stack. */
	struct bpf_insn q[] = {LDX(BPF_W, 0, 10, -4), EXIT()};
	is_int(bpfvm_run(q, NINSNS(q), &c, NULL, STEPS, &r0), 0, "run reading stale stack");
	is_int(r0, 0, "stack is zero again in the next run");
}

/* Strict (decoding) runs refuse every flow of the major/minor the decoder cannot partition. */
static int strict_run(const struct bpf_insn *p, size_t n, const struct bpfvm_env *env,
		      struct seen *s, uint64_t *r0)
{
	struct bpfvm_trace tr = {.compare = on_compare, .userdata = s, .strict = true};
	struct bpfvm_devctx c = {.access_type = (2u << 16) | 2, .major = 1, .minor = 5};
	int r = bpfvm_check(p, n);
	return r < 0 ? r : bpfvm_run_checked(p, n, &c, env, &tr, STEPS, r0);
}

static uint64_t anc_hook(void *u, int level)
{
	(void)u;
	return (uint64_t)level + 100;
}

static uint8_t lookup_val[BPFVM_MAP_VALUE_MAX];
static const void *lookup_hook(void *u, uint64_t ref, const void *key)
{
	(void)u;
	(void)ref;
	(void)key;
	return lookup_val;
}

static void test_strict(void)
{
	struct seen s = {0};
	uint64_t r0 = 0;

	/* T7: the minor's low bit returned as the verdict. */
	struct bpf_insn t7[] = {LDX(BPF_W, 0, 1, 8), ALU64_IMM(BPF_AND, 0, 1), EXIT()};
	is_int(strict_run(t7, NINSNS(t7), NULL, &s, &r0), -EOPNOTSUPP,
	       "T7: r0 computed from the minor is refused in a decoding run");
	ok(strstr(jobcg_last_error()->message, "major/minor") != NULL, "says why: %s",
	   jobcg_last_error()->message);
	is_int(bpfvm_run(t7, NINSNS(t7), &(struct bpfvm_devctx){2, 1, 5}, NULL, STEPS, &r0), 0,
	       "T7: a plain run answers");
	is_int(r0, 1, "T7: minor 5 allowed by the plain run");
	/* r0 computed from type and access only is fine: those are enumerated. */
	struct bpf_insn acc[] = {LDX(BPF_W, 0, 1, 0), ALU64_IMM(BPF_RSH, 0, 16), EXIT()};
	is_int(strict_run(acc, NINSNS(acc), NULL, &s, &r0), 0, "r0 from the access is accepted");
	/* T9: a lookup table on the stack indexed by the minor. */
	struct bpf_insn t9[] = {
	    ST(BPF_DW, 10, -16, 0),	ST(BPF_DW, 10, -8, 1),
	    LDX(BPF_W, 2, 1, 8),	ALU64_IMM(BPF_AND, 2, 1),
	    ALU64_IMM(BPF_LSH, 2, 3),	MOV64_REG(3, 10),
	    ALU64_IMM(BPF_ADD, 3, -16), ALU64_REG(BPF_ADD, 3, 2),
	    LDX(BPF_DW, 0, 3, 0),	EXIT(),
	};
	is_int(strict_run(t9, NINSNS(t9), NULL, &s, &r0), -EOPNOTSUPP,
	       "T9: a load through an address computed from the minor is refused");
	/* The same with scalar + pointer (dst scalar) keeps the dependency too. */
	struct bpf_insn t9b[] = {
	    ST(BPF_DW, 10, -16, 0),    ST(BPF_DW, 10, -8, 1),	 LDX(BPF_W, 2, 1, 8),
	    ALU64_IMM(BPF_AND, 2, 1),  ALU64_IMM(BPF_LSH, 2, 3), ALU64_IMM(BPF_ADD, 2, -16),
	    ALU64_REG(BPF_ADD, 2, 10), LDX(BPF_DW, 0, 2, 0),	 EXIT(),
	};
	is_int(strict_run(t9b, NINSNS(t9b), NULL, &s, &r0), -EOPNOTSUPP,
	       "T9: scalar + pointer keeps the dependency");
	/* T8: the minor passed to a helper. */
	struct bpf_insn t8[] = {LDX(BPF_W, 1, 1, 8), CALL(BPF_FUNC_get_current_ancestor_cgroup_id),
				EXIT()};
	struct bpfvm_env env = {.ancestor_cgroup_id = anc_hook, .map_lookup = lookup_hook};
	is_int(strict_run(t8, NINSNS(t8), &env, &s, &r0), -EOPNOTSUPP,
	       "T8: a helper argument computed from the minor is refused");
	/* A map key with the minor and no key check: refused. */
	struct bpf_insn key[] = {
	    LDX(BPF_W, 2, 1, 8), STX(BPF_W, 10, 2, -4),
	    MOV64_REG(2, 10),	 ALU64_IMM(BPF_ADD, 2, -4),
	    LD_MAP(1, 3),	 CALL(BPF_FUNC_map_lookup_elem),
	    MOV64_IMM(0, 1),	 EXIT(),
	};
	is_int(strict_run(key, NINSNS(key), &env, &s, &r0), -EOPNOTSUPP,
	       "a map key built from the minor is refused without a layout check");
	/* The minor stored into a map value and read back. */
	struct bpf_insn launder[] = {
	    MOV64_REG(6, 1),
	    ST(BPF_W, 10, -4, 0),
	    LD_MAP(1, 3),
	    MOV64_REG(2, 10),
	    ALU64_IMM(BPF_ADD, 2, -4),
	    CALL(BPF_FUNC_map_lookup_elem),
	    JMP_IMM(BPF_JEQ, 0, 0, 3),
	    LDX(BPF_W, 2, 6, 8),
	    STX(BPF_W, 0, 2, 0),
	    LDX(BPF_W, 0, 0, 0),
	    EXIT(),
	};
	is_int(strict_run(launder, NINSNS(launder), &env, &s, &r0), -EOPNOTSUPP,
	       "the minor stored into a map value is refused");
	/* T5-like arithmetic before a compare: reported without the exact bit. */
	struct bpf_insn t5[] = {LDX(BPF_W, 2, 1, 8),
				ALU64_IMM(BPF_ADD, 2, 1),
				JMP_IMM(BPF_JEQ, 2, 6, 2),
				MOV64_IMM(0, 0),
				EXIT(),
				MOV64_IMM(0, 1),
				EXIT()};
	s = (struct seen){0};
	is_int(strict_run(t5, NINSNS(t5), NULL, &s, &r0), 0, "T5 runs");
	is_int(s.ta[0], BPFVM_T_MINOR, "minor + 1 is reported as computed, not exact");
	/* 8-byte spill of the field, zero-extended, and a 32-bit move keep it exact. */
	struct bpf_insn spill[] = {LDX(BPF_W, 2, 1, 4),
				   STX(BPF_DW, 10, 2, -8),
				   LDX(BPF_DW, 3, 10, -8),
				   INSN(BPF_ALU | BPF_MOV | BPF_X, 4, 3, 0, 0),
				   JMP_IMM(BPF_JEQ, 4, 1, 0),
				   MOV64_IMM(0, 0),
				   EXIT()};
	s = (struct seen){0};
	is_int(strict_run(spill, NINSNS(spill), NULL, &s, &r0), 0, "spill program runs");
	is_int(s.ta[0], BPFVM_T_MAJOR | BPFVM_T_EXACT, "8-byte spill and w = w keep the field");
	/* A 2-byte store of it is only part of the field. */
	struct bpf_insn part[] = {LDX(BPF_W, 2, 1, 4),
				  ST(BPF_W, 10, -4, 0),
				  STX(BPF_H, 10, 2, -4),
				  LDX(BPF_W, 3, 10, -4),
				  JMP_IMM(BPF_JEQ, 3, 1, 0),
				  MOV64_IMM(0, 0),
				  EXIT()};
	s = (struct seen){0};
	is_int(strict_run(part, NINSNS(part), NULL, &s, &r0), 0, "partial store program runs");
	is_int(s.ta[0], BPFVM_T_MAJOR, "a truncated copy is not the field");
}

int main(void)
{
	test_trace();
	test_strict();
	test_alu();
	test_jumps();
	test_context_and_seed_shape();
	test_ldimm64_and_blinding();
	test_limits_and_malformed();
	test_stack_calls_maps();
	return tap_done();
}
