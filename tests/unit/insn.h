/* jobcg tests: builders for raw eBPF instructions, for hand-written and generated programs. */
#pragma once

#include <linux/bpf.h>

#define INSN(c, d, s, o, i)                                                                        \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define ALU64_IMM(op, d, i)    INSN(BPF_ALU64 | (op) | BPF_K, d, 0, 0, i)
#define ALU64_REG(op, d, s)    INSN(BPF_ALU64 | (op) | BPF_X, d, s, 0, 0)
#define ALU32_IMM(op, d, i)    INSN(BPF_ALU | (op) | BPF_K, d, 0, 0, i)
#define ALU32_REG(op, d, s)    INSN(BPF_ALU | (op) | BPF_X, d, s, 0, 0)
#define MOV64_IMM(d, i)	       ALU64_IMM(BPF_MOV, d, i)
#define MOV64_REG(d, s)	       ALU64_REG(BPF_MOV, d, s)
#define MOV32_IMM(d, i)	       ALU32_IMM(BPF_MOV, d, i)
#define JMP_IMM(op, d, i, o)   INSN(BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define JMP_REG(op, d, s, o)   INSN(BPF_JMP | (op) | BPF_X, d, s, o, 0)
#define JMP32_IMM(op, d, i, o) INSN(BPF_JMP32 | (op) | BPF_K, d, 0, o, i)
#define JMP32_REG(op, d, s, o) INSN(BPF_JMP32 | (op) | BPF_X, d, s, o, 0)
#define JA(o)		       INSN(BPF_JMP | BPF_JA, 0, 0, o, 0)
#define LDX(sz, d, s, o)       INSN(BPF_LDX | BPF_MEM | (sz), d, s, o, 0)
#define STX(sz, d, s, o)       INSN(BPF_STX | BPF_MEM | (sz), d, s, o, 0)
#define ST(sz, d, o, i)	       INSN(BPF_ST | BPF_MEM | (sz), d, 0, o, i)
#define CALL(f)		       INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT()		       INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
/* Two slots: use as LD_IMM64(d, v) inside an initialiser list. */
#define LD_IMM64_SRC(d, s, v)                                                                      \
	INSN(BPF_LD | BPF_DW | BPF_IMM, d, s, 0, (int32_t)(uint32_t)(uint64_t)(v)),                \
	    INSN(0, 0, 0, 0, (int32_t)(uint32_t)((uint64_t)(v) >> 32))
#define LD_IMM64(d, v) LD_IMM64_SRC(d, 0, v)
#define LD_MAP(d, id)  LD_IMM64_SRC(d, BPF_PSEUDO_MAP_FD, id)
#define NINSNS(a)      (sizeof(a) / sizeof((a)[0]))
