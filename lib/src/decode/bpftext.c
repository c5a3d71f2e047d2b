/* jobcg: turn `bpftool prog dump xlated` text or raw dumps back into instructions, strictly,
 * so that a decoded rule list never rests on a line that was misread. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpftext.h"
#include "bpfvm.h"
#include "log.h"
#include "util.h"

#ifndef BPF_MEMSX
#define BPF_MEMSX 0x80
#endif
#ifndef BPF_NOSPEC
#define BPF_NOSPEC 0xc0
#endif

#define MAX_INSNS (1u << 20) /* the kernel's own limit is 1M instructions */

/* Unknown kernel functions get a number no helper has, so the interpreter calls them opaque. */
#define CALL_UNKNOWN 0x7fff00ff

struct cur {
	const char *p;
	const char *end;
};

static void skip_ws(struct cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

static bool eat(struct cur *c, const char *s)
{
	size_t l = strlen(s);

	skip_ws(c);
	if ((size_t)(c->end - c->p) < l || memcmp(c->p, s, l) != 0)
		return false;
	c->p += l;
	return true;
}

static bool at_end(struct cur *c)
{
	skip_ws(c);
	return c->p >= c->end;
}

/* "r3" or "w3"; *ret_w tells which. */
static bool parse_reg(struct cur *c, bool *ret_w, uint8_t *ret)
{
	unsigned v = 0;
	int digits = 0;

	skip_ws(c);
	if (c->p >= c->end || (*c->p != 'r' && *c->p != 'w'))
		return false;
	*ret_w = *c->p == 'w';
	c->p++;
	while (c->p < c->end && isdigit((unsigned char)*c->p) && digits < 3) {
		v = v * 10 + (unsigned)(*c->p - '0');
		c->p++;
		digits++;
	}
	if (digits == 0 || v > 11)
		return false;
	*ret = (uint8_t)v;
	return true;
}

/* Decimal with optional sign, or 0x hex; the value must fit 64 bits. */
static bool parse_num(struct cur *c, int64_t *ret)
{
	bool neg = false;
	uint64_t v = 0;
	int digits = 0;

	skip_ws(c);
	if (c->p < c->end && (*c->p == '+' || *c->p == '-')) {
		neg = *c->p == '-';
		c->p++;
	}
	if (c->end - c->p >= 2 && c->p[0] == '0' && (c->p[1] == 'x' || c->p[1] == 'X')) {
		c->p += 2;
		while (c->p < c->end && isxdigit((unsigned char)*c->p)) {
			if (digits >= 16)
				return false;
			char ch = (char)tolower((unsigned char)*c->p);
			v = v * 16 +
			    (uint64_t)(isdigit((unsigned char)ch) ? ch - '0' : ch - 'a' + 10);
			c->p++;
			digits++;
		}
	} else {
		while (c->p < c->end && isdigit((unsigned char)*c->p)) {
			unsigned d = (unsigned)(*c->p - '0');
			if (v > (UINT64_MAX - d) / 10)
				return false;
			v = v * 10 + d;
			c->p++;
			digits++;
		}
	}
	if (digits == 0)
		return false;
	*ret = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

/* Bit-field friendly wrappers. */
#define REG_INTO(c, w, field)                                                                      \
	({                                                                                         \
		uint8_t _r = 0;                                                                    \
		bool _ok = parse_reg(c, w, &_r);                                                   \
		if (_ok)                                                                           \
			(field) = _r;                                                              \
		_ok;                                                                               \
	})
#define MEM_INTO(c, size, sx, field, offfield)                                                     \
	({                                                                                         \
		uint8_t _r = 0;                                                                    \
		int16_t _o = 0;                                                                    \
		bool _ok = parse_mem(c, size, sx, &_r, &_o);                                       \
		if (_ok) {                                                                         \
			(field) = _r;                                                              \
			(offfield) = _o;                                                           \
		}                                                                                  \
		_ok;                                                                               \
	})

static bool fits_s32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* An immediate printed as %d or as unsigned 0x%x: both mean the same 32 bits. */
static bool imm32(int64_t v, int32_t *ret)
{
	if (v >= INT32_MIN && v <= (int64_t)UINT32_MAX) {
		*ret = (int32_t)(uint32_t)v;
		return true;
	}
	return false;
}

int bpftext_helper_from_name(const char *name)
{
	static const struct {
		const char *name;
		int id;
	} t[] = {
	    {"bpf_get_current_cgroup_id", BPF_FUNC_get_current_cgroup_id},
	    {"get_current_cgroup_id", BPF_FUNC_get_current_cgroup_id},
	    {"bpf_get_current_ancestor_cgroup_id", BPF_FUNC_get_current_ancestor_cgroup_id},
	    {"get_current_ancestor_cgroup_id", BPF_FUNC_get_current_ancestor_cgroup_id},
	    {"bpf_trace_printk", BPF_FUNC_trace_printk},
	    {"trace_printk", BPF_FUNC_trace_printk},
	    {"__htab_map_lookup_elem", BPFVM_CALL_HTAB_ELEM},
	    {"bpf_map_lookup_elem", BPF_FUNC_map_lookup_elem},
	    {"map_lookup_elem", BPF_FUNC_map_lookup_elem},
	};
	size_t l;

	for (size_t i = 0; i < ELEMENTSOF(t); i++)
		if (streq(name, t[i].name))
			return t[i].id;
	/* The map type's own lookup (htab_map_lookup_elem, array_map_lookup_elem, ...). */
	l = strlen(name);
	if (l > 15 && streq(name + l - 15, "map_lookup_elem") && !startswith(name, "__") &&
	    !strstr(name, "percpu"))
		return BPF_FUNC_map_lookup_elem;
	return -1;
}

static const char *const size_names[] = {
    [BPF_W >> 3] = "32", [BPF_H >> 3] = "16", [BPF_B >> 3] = "8", [BPF_DW >> 3] = "64"};

/* "*(u32 *)(r1 +0)" -> size, base register, offset. @sx allows "s" sizes (sign-extending). */
static bool parse_mem(struct cur *c, uint8_t size, bool sx, uint8_t *ret_reg, int16_t *ret_off)
{
	bool w;
	int64_t off;

	if (!eat(c, "*("))
		return false;
	if (!eat(c, sx ? "s" : "u") || !eat(c, size_names[size >> 3]) || !eat(c, "*)("))
		return false;
	if (!parse_reg(c, &w, ret_reg) || w || !parse_num(c, &off) || !eat(c, ")"))
		return false;
	if (off < INT16_MIN || off > INT16_MAX)
		return false;
	*ret_off = (int16_t)off;
	return true;
}

static const char *alu_op_str(uint8_t op, int16_t off)
{
	switch (op) {
	case BPF_ADD:
		return "+=";
	case BPF_SUB:
		return "-=";
	case BPF_MUL:
		return "*=";
	case BPF_DIV:
		return off == 1 ? "s/=" : "/=";
	case BPF_OR:
		return "|=";
	case BPF_AND:
		return "&=";
	case BPF_LSH:
		return "<<=";
	case BPF_RSH:
		return ">>=";
	case BPF_MOD:
		return off == 1 ? "s%=" : "%=";
	case BPF_XOR:
		return "^=";
	case BPF_MOV:
		return "=";
	case BPF_ARSH:
		return "s>>=";
	default:
		return NULL;
	}
}

static const char *jmp_op_str(uint8_t op)
{
	switch (op) {
	case BPF_JEQ:
		return "==";
	case BPF_JGT:
		return ">";
	case BPF_JGE:
		return ">=";
	case BPF_JSET:
		return "&";
	case BPF_JNE:
		return "!=";
	case BPF_JSGT:
		return "s>";
	case BPF_JSGE:
		return "s>=";
	case BPF_JLT:
		return "<";
	case BPF_JLE:
		return "<=";
	case BPF_JSLT:
		return "s<";
	case BPF_JSLE:
		return "s<=";
	default:
		return NULL;
	}
}

/* Operators are matched as whole words, so "s>=" is not read as "s>". */
static bool eat_op(struct cur *c, const char *op)
{
	struct cur save = *c;

	if (!eat(c, op))
		return false;
	if (c->p < c->end && *c->p != ' ' && *c->p != '\t') {
		*c = save;
		return false;
	}
	return true;
}

static bool parse_alu(struct cur *c, uint8_t code, struct bpf_insn *i)
{
	bool is64 = BPF_CLASS(code) == BPF_ALU64, w, w2;
	uint8_t op = BPF_OP(code);
	int64_t v;

	if (!REG_INTO(c, &w, i->dst_reg))
		return false;
	/* Byte swaps always name the 64-bit register; everything else uses w for 32 bits. */
	if (op == BPF_END ? w : w == is64)
		return false;
	if (op == BPF_END) {
		/* "r2 = be16 r2", "r2 = le32 r2", "r2 = bswap64 r2" */
		const char *kind = is64 ? "bswap" : BPF_SRC(code) == BPF_TO_BE ? "be" : "le";
		uint8_t r2;
		if (!eat(c, "=") || !eat(c, kind) || !parse_num(c, &v) || !parse_reg(c, &w2, &r2) ||
		    w2 || r2 != i->dst_reg)
			return false;
		i->imm = (int32_t)v;
		return v == 16 || v == 32 || v == 64;
	}
	if (op == BPF_NEG) {
		uint8_t r2;
		return eat(c, "=") && eat(c, "-") && parse_reg(c, &w2, &r2) && w2 == w &&
		       r2 == i->dst_reg;
	}
	if (op == BPF_MOV && BPF_SRC(code) == BPF_X) {
		struct cur save = *c;
		if (eat(c, "=") && eat(c, "(s")) {
			if (!parse_num(c, &v) || (v != 8 && v != 16 && v != 32) || !eat(c, ")"))
				return false;
			i->off = (int16_t)v;
			return REG_INTO(c, &w2, i->src_reg) && w2 == w;
		}
		*c = save;
	}
	/* Signed division is spelled "s/=" and "s%=". */
	if (op == BPF_DIV || op == BPF_MOD) {
		struct cur save = *c;
		if (eat_op(c, alu_op_str(op, 1)))
			i->off = 1;
		else {
			*c = save;
			if (!eat_op(c, alu_op_str(op, 0)))
				return false;
		}
	} else if (!alu_op_str(op, 0) || !eat_op(c, alu_op_str(op, 0)))
		return false;
	if (BPF_SRC(code) == BPF_X)
		return REG_INTO(c, &w2, i->src_reg) && w2 == w;
	if (!parse_num(c, &v) || !imm32(v, &i->imm))
		return false;
	return true;
}

static bool parse_jmp(struct cur *c, uint8_t code, struct bpf_insn *i, int *ret_call)
{
	bool is32 = BPF_CLASS(code) == BPF_JMP32, w;
	uint8_t op = BPF_OP(code);
	int64_t v;

	if (op == BPF_EXIT)
		return !is32 && eat(c, "exit");
	if (op == BPF_JA) {
		if (!eat(c, is32 ? "gotol" : "goto") || !eat(c, "pc") || !parse_num(c, &v))
			return false;
		if (is32) {
			if (!fits_s32(v))
				return false;
			i->imm = (int32_t)v;
		} else {
			if (v < INT16_MIN || v > INT16_MAX)
				return false;
			i->off = (int16_t)v;
		}
		return true;
	}
	if (op == BPF_CALL) {
		if (is32 || !eat(c, "call"))
			return false;
		if (eat(c, "pc")) { /* bpf-to-bpf call, maybe "#name" after it */
			if (!parse_num(c, &v) || !fits_s32(v))
				return false;
			i->src_reg = BPF_PSEUDO_CALL;
			i->imm = (int32_t)v;
			if (eat(c, "#"))
				c->p = c->end;
			return true;
		}
		/* "call NAME#IMM": the name decides, the number is a kernel address offset. */
		skip_ws(c);
		const char *name = c->p, *hash = memchr(c->p, '#', (size_t)(c->end - c->p));
		char buf[128];
		if (!hash || hash == name || (size_t)(hash - name) >= sizeof(buf))
			return false;
		memcpy(buf, name, (size_t)(hash - name));
		buf[hash - name] = 0;
		c->p = hash + 1;
		if (!parse_num(c, &v) || !fits_s32(v))
			return false;
		int id = bpftext_helper_from_name(buf);
		if (id < 0 && v >= 0 && v < 1000 && !streq(buf, "unknown"))
			id = (int)v; /* a plain helper id, as in programs that were never loaded */
		i->imm = id < 0 ? CALL_UNKNOWN : id;
		*ret_call = 1;
		return true;
	}
	/* "if r2 != 0x2 goto pc+4" / "if w2 s> w3 goto pc-1" */
	const char *ops = jmp_op_str(op);
	if (!ops || !eat(c, "if") || !REG_INTO(c, &w, i->dst_reg) || w != is32 || !eat_op(c, ops))
		return false;
	if (BPF_SRC(code) == BPF_X) {
		bool w2;
		if (!REG_INTO(c, &w2, i->src_reg) || w2 != is32)
			return false;
	} else if (!parse_num(c, &v) || !imm32(v, &i->imm))
		return false;
	if (!eat(c, "goto") || !eat(c, "pc") || !parse_num(c, &v) || v < INT16_MIN || v > INT16_MAX)
		return false;
	i->off = (int16_t)v;
	return true;
}

static bool parse_ldimm64(struct cur *c, struct bpf_insn *i, struct bpf_insn *i2)
{
	bool w;
	int64_t v, v2;

	if (!REG_INTO(c, &w, i->dst_reg) || w || !eat(c, "="))
		return false;
	if (eat(c, "map[id:")) {
		if (!parse_num(c, &v) || v < 0 || v > UINT32_MAX || !eat(c, "]"))
			return false;
		i->imm = (int32_t)(uint32_t)v;
		if (eat(c, "[0]+")) {
			if (!parse_num(c, &v2) || v2 < 0 || v2 > UINT32_MAX)
				return false;
			i->src_reg = BPF_PSEUDO_MAP_VALUE;
			i2->imm = (int32_t)(uint32_t)v2;
		} else
			i->src_reg = BPF_PSEUDO_MAP_FD;
		return true;
	}
	if (eat(c, "map[idx:")) {
		if (!parse_num(c, &v) || v < 0 || v > UINT32_MAX || !eat(c, "]"))
			return false;
		i->imm = (int32_t)(uint32_t)v;
		if (eat(c, "+")) {
			if (!parse_num(c, &v2) || v2 < 0 || v2 > UINT32_MAX)
				return false;
			i->src_reg = BPF_PSEUDO_MAP_IDX_VALUE;
			i2->imm = (int32_t)(uint32_t)v2;
		} else
			i->src_reg = BPF_PSEUDO_MAP_IDX;
		return true;
	}
	if (!parse_num(c, &v))
		return false;
	i->imm = (int32_t)(uint32_t)(uint64_t)v;
	i2->imm = (int32_t)(uint32_t)((uint64_t)v >> 32);
	return true;
}

/* Parse the part after "(xx) " for opcode @code. Returns the number of slots (1 or 2), 0 if
 * the text does not match the opcode. */
static int parse_body(struct cur *c, uint8_t code, struct bpf_insn *i, struct bpf_insn *i2)
{
	uint8_t cls = BPF_CLASS(code), size = BPF_SIZE(code), mode = BPF_MODE(code);
	bool w;
	int64_t v;
	int call = 0;

	memset(i, 0, sizeof(*i));
	memset(i2, 0, sizeof(*i2));
	i->code = code;
	switch (cls) {
	case BPF_LD:
		if (code != (BPF_LD | BPF_IMM | BPF_DW))
			return 0;
		return parse_ldimm64(c, i, i2) && at_end(c) ? 2 : 0;
	case BPF_LDX:
		if (mode != BPF_MEM && mode != BPF_MEMSX)
			return 0;
		if (!REG_INTO(c, &w, i->dst_reg) || w || !eat(c, "=") ||
		    !MEM_INTO(c, size, mode == BPF_MEMSX, i->src_reg, i->off))
			return 0;
		break;
	case BPF_ST:
		if (code == (BPF_ST | BPF_NOSPEC))
			return eat(c, "nospec") && at_end(c) ? 1 : 0;
		if (mode != BPF_MEM || !MEM_INTO(c, size, false, i->dst_reg, i->off) ||
		    !eat(c, "=") || !parse_num(c, &v) || !imm32(v, &i->imm))
			return 0;
		break;
	case BPF_STX:
		if (mode == BPF_ATOMIC) {
			/* Only the plain "lock *(u64 *)(r10 -8) += r1" forms. */
			static const struct {
				const char *s;
				int op;
			} ops[] = {
			    {"+=", BPF_ADD},
			    {"|=", BPF_OR},
			    {"&=", BPF_AND},
			    {"^=", BPF_XOR},
			};
			if (!eat(c, "lock") || !MEM_INTO(c, size, false, i->dst_reg, i->off))
				return 0;
			i->imm = -1;
			for (size_t k = 0; k < ELEMENTSOF(ops); k++)
				if (eat_op(c, ops[k].s)) {
					i->imm = ops[k].op;
					break;
				}
			if (i->imm < 0 || !REG_INTO(c, &w, i->src_reg) || w)
				return 0;
			break;
		}
		if (mode != BPF_MEM || !MEM_INTO(c, size, false, i->dst_reg, i->off) ||
		    !eat(c, "=") || !REG_INTO(c, &w, i->src_reg) || w)
			return 0;
		break;
	case BPF_ALU:
	case BPF_ALU64:
		if (!parse_alu(c, code, i))
			return 0;
		break;
	case BPF_JMP:
	case BPF_JMP32:
		if (!parse_jmp(c, code, i, &call))
			return 0;
		break;
	default:
		return 0;
	}
	return at_end(c) ? 1 : 0;
}

static int hexval(char ch)
{
	return isdigit((unsigned char)ch)    ? ch - '0'
	       : isxdigit((unsigned char)ch) ? tolower((unsigned char)ch) - 'a' + 10
					     : -1;
}

int bpftext_parse(const char *text, size_t len, const char *filename, struct bpf_insn **ret,
		  size_t *ret_n)
{
	_cleanup_free_ struct bpf_insn *insns = NULL;
	size_t n = 0, cap = 0;
	unsigned line = 0;
	const char *p = text, *end = text + len;
	const char *fn = filename ? filename : "<input>";
	int r;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		struct cur c = {p, le};
		const char *ls = p;
		int64_t idx;
		int h1, h2;

		line++;
		p = nl ? nl + 1 : end;
		if (le > c.p && le[-1] == '\r')
			c.end = le - 1;
		skip_ws(&c);
		/* Only "N: (xx) ..." lines are instructions; everything else is commentary. */
		if (c.p >= c.end || !isdigit((unsigned char)*c.p))
			continue;
		struct cur probe = c;
		if (!parse_num(&probe, &idx) || probe.p >= probe.end || *probe.p != ':')
			continue;
		c = probe;
		c.p++;
		skip_ws(&c);
		/* "4197: cgroup_device name ..." from `bpftool prog list` is not an instruction. */
		if (c.p >= c.end || c.p[0] != '(')
			continue;
		if (c.end - c.p < 4 || (h1 = hexval(c.p[1])) < 0 || (h2 = hexval(c.p[2])) < 0 ||
		    c.p[3] != ')')
			return error_set_at(
			    -EINVAL, fn, line, (unsigned)(c.p - ls + 1),
			    "instruction %lld: expected \"(opcode)\" after the number",
			    (long long)idx);
		if (idx < 0 || (uint64_t)idx != n)
			return error_set_at(-EINVAL, fn, line, 1,
					    "instruction number %lld where %zu was expected "
					    "(missing or reordered lines?)",
					    (long long)idx, n);
		if (n + 2 > MAX_INSNS)
			return error_set_at(-E2BIG, fn, line, 1, "more than %u instructions",
					    MAX_INSNS);
		uint8_t code = (uint8_t)(h1 * 16 + h2);
		const char *body = c.p + 4;
		c.p = body;
		if (n + 2 > cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct bpf_insn *t = realloc(insns, ncap * sizeof(*t));
			if (!t)
				return -ENOMEM;
			insns = t;
			cap = ncap;
		}
		r = parse_body(&c, code, &insns[n], &insns[n + 1]);
		if (r == 0)
			return error_set_at(
			    -EINVAL, fn, line, (unsigned)(body - ls + 1),
			    "instruction %zu: cannot read \"%.*s\" as opcode 0x%02x", n,
			    (int)(c.end - body), body, code);
		n += (size_t)r;
	}
	if (n == 0)
		return error_set_at(
		    -EINVAL, fn, 0, 0,
		    "no instructions found (expected lines like \"0: (61) r2 = *(u32 *)(r1 +0)\")");
	r = bpfvm_check(insns, n);
	if (r < 0) {
		jobcg_error_prefix("%s", fn);
		return r;
	}
	*ret_n = n;
	*ret = TAKE_PTR(insns);
	return 0;
}

bool bpftext_looks_raw(const void *data, size_t len)
{
	return memchr(data, 0, len) != NULL;
}

int bpftext_parse_raw(const void *data, size_t len, const char *filename, struct bpf_insn **ret,
		      size_t *ret_n)
{
	const char *fn = filename ? filename : "<input>";
	struct bpf_insn *insns;
	size_t n = len / sizeof(struct bpf_insn);
	int r;

	if (len % sizeof(struct bpf_insn))
		return error_set(-EINVAL,
				 "%s: %zu bytes is not a whole number of 8-byte instructions "
				 "(instruction %zu is truncated)",
				 fn, len, n);
	if (n > MAX_INSNS)
		return error_set(-E2BIG, "%s: more than %u instructions", fn, MAX_INSNS);
	if (n == 0)
		return error_set(-EINVAL, "%s: empty program", fn);
	insns = malloc(len);
	if (!insns)
		return -ENOMEM;
	memcpy(insns, data, len);
	r = bpfvm_check(insns, n);
	if (r < 0) {
		free(insns);
		jobcg_error_prefix("%s", fn);
		return r;
	}
	*ret = insns;
	*ret_n = n;
	return 0;
}

static bool is_helper_id(int32_t imm)
{
	return imm == BPF_FUNC_map_lookup_elem || imm == BPF_FUNC_get_current_cgroup_id ||
	       imm == BPF_FUNC_get_current_ancestor_cgroup_id || imm == BPF_FUNC_trace_printk ||
	       imm == BPFVM_CALL_HTAB_ELEM;
}

struct ksym {
	uint64_t addr;
	char name[KSYM_NAME_MAX];
};

int bpftext_kallsyms_line(const char *line, uint64_t *ret_addr, char *ret_name)
{
	unsigned long long a;
	char type, name[256];
	int end_addr = 0, end_type = 0;

	/* The kernel's "%px %c %s": the address and the type are words of their own, not "12T"
	 * read as address 0x12 of type 'T'. */
	if (sscanf(line, "%llx%n %c%n %255s", &a, &end_addr, &type, &end_type, name) != 3 ||
	    !isspace((unsigned char)line[end_addr]) || !isspace((unsigned char)line[end_type]))
		return KSYM_LINE_OTHER;
	if (streq(name, "__bpf_call_base")) {
		*ret_addr = a;
		return KSYM_LINE_BASE;
	}
	/* Helpers we model, and other bpf_* functions so the reason can name them. */
	if (bpftext_helper_from_name(name) < 0 && !startswith(name, "bpf_"))
		return KSYM_LINE_OTHER;
	/* A name cut to fit would no longer be the kernel's: a map type's lookup kept for its
	 * "...map_lookup_elem" would resolve to nothing once cut, and a message would name a
	 * function that does not exist. */
	if ((type != 't' && type != 'T') || strlen(name) >= KSYM_NAME_MAX)
		return KSYM_LINE_OTHER;
	*ret_addr = a;
	strcpy(ret_name, name);
	return KSYM_LINE_SYM;
}

/* Symbols we care about, plus __bpf_call_base. */
static int load_kallsyms(struct ksym **ret, size_t *ret_n, uint64_t *ret_base)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/kallsyms", "re");
	_cleanup_free_ struct ksym *syms = NULL;
	size_t n = 0, cap = 0;
	uint64_t base = 0;
	char line[512];

	if (!f)
		return negative_errno();
	while (fgets(line, sizeof(line), f)) {
		uint64_t a;
		char name[KSYM_NAME_MAX];
		int k = bpftext_kallsyms_line(line, &a, name);

		if (k == KSYM_LINE_BASE) {
			base = a;
			continue;
		}
		if (k != KSYM_LINE_SYM)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct ksym *t = realloc(syms, nc * sizeof(*t));
			if (!t)
				return -ENOMEM;
			syms = t;
			cap = nc;
		}
		syms[n].addr = a;
		/* shorter than KSYM_NAME_MAX: bpftext_kallsyms_line() keeps no other */
		strcpy(syms[n].name, name);
		n++;
	}
	if (base == 0)
		return -EPERM; /* addresses hidden (kernel.kptr_restrict) */
	*ret = TAKE_PTR(syms);
	*ret_n = n;
	*ret_base = base;
	return 0;
}

/* Read once a process: the table is about a megabyte of text, and a resident reader (the metrics
 * server) decodes the node program again on every scrape. */
static struct ksym *kallsyms;
static size_t n_kallsyms;
static uint64_t kallsyms_base;
static int kallsyms_result;
static pthread_once_t kallsyms_once = PTHREAD_ONCE_INIT;

static void kallsyms_load(void)
{
	kallsyms_result = load_kallsyms(&kallsyms, &n_kallsyms, &kallsyms_base);
}

int bpftext_resolve_calls(struct bpf_insn *insns, size_t n)
{
	const struct ksym *syms = NULL;
	size_t nsyms = 0;
	uint64_t base = 0;
	bool loaded = false;
	int unresolved = 0, r;
	char first[96] = "";
	size_t first_at = 0;

	for (size_t k = 0; k < n; k++) {
		struct bpf_insn *i = &insns[k];
		if (i->code != (BPF_JMP | BPF_CALL) || i->src_reg != 0 || is_helper_id(i->imm))
			continue;
		if (!loaded) {
			pthread_once(&kallsyms_once, kallsyms_load);
			r = kallsyms_result;
			syms = kallsyms;
			nsyms = n_kallsyms;
			base = kallsyms_base;
			if (r < 0)
				return error_set(r,
						 "helper calls in the program cannot be named: "
						 "/proc/kallsyms %s",
						 r == -EPERM
						     ? "hides addresses (kernel.kptr_restrict)"
						     : "is not readable");
			loaded = true;
		}
		uint64_t a = base + (uint64_t)(int64_t)i->imm;
		const char *name = NULL;
		int id = -1;
		for (size_t s = 0; s < nsyms; s++)
			if (syms[s].addr == a) {
				name = syms[s].name;
				id = bpftext_helper_from_name(name);
				break;
			}
		if (id < 0) {
			if (!unresolved) {
				first_at = k;
				if (name)
					snprintf(first, sizeof(first), "%s", name);
				else
					snprintf(first, sizeof(first),
						 "the kernel function at __bpf_call_base%+d",
						 i->imm);
			}
			i->imm = CALL_UNKNOWN;
			unresolved++;
		} else
			i->imm = id;
	}
	if (unresolved)
		error_set(-EOPNOTSUPP, "instruction %zu calls %s, which decoding does not model",
			  first_at, first);
	return unresolved;
}
