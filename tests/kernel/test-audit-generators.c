/* jobcg kernel tests: device programs shaped like those of systemd, runc (old and new), crun,
 * LXC, Slurm and a range/JSET generator, written independently of tests/devgen.h, are attached
 * to test cgroups; what jobcg decodes (live, bpftool text, bpftool raw file) is compared
 * request by request with what the kernel lets a process in the cgroup do (open r/w/rw, mknod). */
#include <bpf/bpf.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobcg/decode.h"
#include "jobcg/inspect.h"
#include "ktest.h"
#include "tap.h"

#define ACC_M	1
#define ACC_R	2
#define ACC_W	4
#define ACC_RWM 7
#define ACC_RW	(ACC_R | ACC_W)
#define ANY	(-1)

struct rule {
	char type; /* 'c', 'b', 'a' */
	int major, minor;
	int acc;
	int allow;
};

struct gen {
	struct bpf_insn v[1024];
	int n;
};

static void emit(struct gen *g, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	g->v[g->n++] =
	    (struct bpf_insn){.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}

#define LDXW(g, d, s, o) emit(g, BPF_LDX | BPF_MEM | BPF_W, d, s, o, 0)
#define LDXH(g, d, s, o) emit(g, BPF_LDX | BPF_MEM | BPF_H, d, s, o, 0)
#define AND32(g, d, i)	 emit(g, BPF_ALU | BPF_AND | BPF_K, d, 0, 0, i)
#define RSH32(g, d, i)	 emit(g, BPF_ALU | BPF_RSH | BPF_K, d, 0, 0, i)
#define MOV32R(g, d, s)	 emit(g, BPF_ALU | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV32I(g, d, i)	 emit(g, BPF_ALU | BPF_MOV | BPF_K, d, 0, 0, i)
#define MOV64I(g, d, i)	 emit(g, BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define JNEI(g, d, i, o) emit(g, BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define JEQI(g, d, i, o) emit(g, BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, i)
#define JNER(g, d, s, o) emit(g, BPF_JMP | BPF_JNE | BPF_X, d, s, o, 0)
#define EXIT(g)		 emit(g, BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

static int devtype(char t)
{
	return t == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
}

/* The prologue systemd, crun, LXC, Slurm and runc >= 1.1 share: r2 type, r3 access, r4/r5. */
static void prologue(struct gen *g, bool half_type)
{
	if (half_type) {
		LDXH(g, 2, 1, 0); /* runc 1.0: 16-bit narrow load of the type */
	} else {
		LDXW(g, 2, 1, 0);
		AND32(g, 2, 0xFFFF);
	}
	LDXW(g, 3, 1, 0);
	RSH32(g, 3, 16);
	LDXW(g, 4, 1, 4);
	LDXW(g, 5, 1, 8);
}

/* systemd bpf-devices.c: access check first (jumping over the rest), then type/major/minor,
 * "r0 = 1; exit" per allow-list entry, "r0 = 0; exit" at the end (strict/closed). */
static void gen_systemd(struct gen *g, const struct rule *r, size_t n)
{
	prologue(g, false);
	for (size_t i = 0; i < n; i++) {
		int checks = (r[i].type != 'a') + (r[i].major != ANY) + (r[i].minor != ANY);
		if (r[i].acc != ACC_RWM) {
			MOV32R(g, 1, 3);
			AND32(g, 1, r[i].acc);
			JNER(g, 1, 3, checks + 2);
		}
		int left = checks;
		if (r[i].type != 'a')
			JNEI(g, 2, devtype(r[i].type), left-- + 1);
		if (r[i].major != ANY)
			JNEI(g, 4, r[i].major, left-- + 1);
		if (r[i].minor != ANY)
			JNEI(g, 5, r[i].minor, left-- + 1);
		MOV64I(g, 0, 1);
		EXIT(g);
	}
	MOV64I(g, 0, 0);
	EXIT(g);
}

/* runc libcontainer devicefilter: rules in reverse order (the last one wins), type check, then
 * the access check ("w1 = w3; w1 &= acc; if r1 != r3" in >= 1.1, "if r1 == 0" in 1.0), then
 * major and minor; mov32 r0. crun emits the same shape in forward order with mov64. */
enum flavour { RUNC_NEW, RUNC_OLD, CRUN };

static void gen_runc(struct gen *g, const struct rule *r, size_t n, int def, enum flavour f)
{
	prologue(g, f == RUNC_OLD);
	for (size_t k = 0; k < n; k++) {
		const struct rule *x = f == CRUN ? &r[k] : &r[n - 1 - k];
		int len = (x->type != 'a') + (x->acc != ACC_RWM ? 3 : 0) + (x->major != ANY) +
			  (x->minor != ANY) + 2;
		int pos = 0;
		if (x->type != 'a')
			JNEI(g, 2, devtype(x->type), len - ++pos);
		if (x->acc != ACC_RWM) {
			MOV32R(g, 1, 3);
			AND32(g, 1, x->acc);
			pos += 2;
			if (f == RUNC_OLD)
				JEQI(g, 1, 0, len - ++pos);
			else
				JNER(g, 1, 3, len - ++pos);
		}
		if (x->major != ANY)
			JNEI(g, 4, x->major, len - ++pos);
		if (x->minor != ANY)
			JNEI(g, 5, x->minor, len - ++pos);
		if (f == CRUN)
			MOV64I(g, 0, x->allow);
		else
			MOV32I(g, 0, x->allow);
		EXIT(g);
	}
	if (f == CRUN)
		MOV64I(g, 0, def);
	else
		MOV32I(g, 0, def);
	EXIT(g);
}

/* LXC cgroup2_devices.c: access check first, then type/major/minor, "r0 = allow" per entry, the
 * list type (allow-list 0 / deny-list 1) as the default. */
static void gen_lxc(struct gen *g, const struct rule *r, size_t n, int def)
{
	prologue(g, false);
	for (size_t i = 0; i < n; i++) {
		int jump_nr = 1 + (r[i].type != 'a') + (r[i].major != ANY) + (r[i].minor != ANY);
		if (r[i].acc != ACC_RWM) {
			jump_nr += 3;
			MOV32R(g, 1, 3);
			AND32(g, 1, r[i].acc);
			JNER(g, 1, 3, jump_nr - 2);
			jump_nr -= 3;
		}
		if (r[i].type != 'a')
			JNEI(g, 2, devtype(r[i].type), jump_nr--);
		if (r[i].major != ANY)
			JNEI(g, 4, r[i].major, jump_nr--);
		if (r[i].minor != ANY)
			JNEI(g, 5, r[i].minor, jump_nr--);
		MOV64I(g, 0, r[i].allow);
		EXIT(g);
	}
	MOV64I(g, 0, def);
	EXIT(g);
}

/* Slurm src/plugins/cgroup/common/cgroup_common.c ebpf: the seed 000 shape, no access check. */
static void gen_slurm(struct gen *g, const struct rule *r, size_t n, int def)
{
	prologue(g, false);
	for (size_t i = 0; i < n; i++) {
		JNEI(g, 2, devtype(r[i].type), 4);
		JNEI(g, 4, r[i].major, 3);
		JNEI(g, 5, r[i].minor, 2);
		MOV64I(g, 0, r[i].allow);
		EXIT(g);
	}
	MOV64I(g, 0, def);
	EXIT(g);
}

/* A generator outside the common shape: JSET access test, a major range with JGT/JLT, 64-bit
 * ALU on the whole context word and JGE on minors. */
static void gen_ranges(struct gen *g)
{
	LDXW(g, 6, 1, 0); /* r6 = access_type (no mask) */
	emit(g, BPF_ALU64 | BPF_MOV | BPF_X, 2, 6, 0, 0);
	emit(g, BPF_ALU64 | BPF_AND | BPF_K, 2, 0, 0, 0xFFFF);
	emit(g, BPF_ALU64 | BPF_MOV | BPF_X, 3, 6, 0, 0);
	emit(g, BPF_ALU64 | BPF_RSH | BPF_K, 3, 0, 0, 16);
	LDXW(g, 4, 1, 4);
	LDXW(g, 5, 1, 8);
	/* 0: block devices: only mknod */
	JNEI(g, 2, BPF_DEVCG_DEV_BLOCK, 5);
	emit(g, BPF_JMP | BPF_JSET | BPF_K, 3, 0, 2, ACC_R | ACC_W); /* r|w requested: deny */
	MOV64I(g, 0, 1);
	EXIT(g);
	MOV64I(g, 0, 0);
	EXIT(g);
	/* char majors 10..15 (JLT 10 / JGT 15 skip): read only when minor >= 200 */
	emit(g, BPF_JMP | BPF_JLT | BPF_K, 4, 0, 7, 10);
	emit(g, BPF_JMP | BPF_JGT | BPF_K, 4, 0, 6, 15);
	emit(g, BPF_JMP32 | BPF_JLT | BPF_K, 5, 0, 3, 200);
	emit(g, BPF_JMP | BPF_JSET | BPF_K, 3, 0, 2, ACC_W | ACC_M);
	MOV64I(g, 0, 1);
	EXIT(g);
	MOV64I(g, 0, 0);
	EXIT(g);
	/* mem devices (major 1): everything; others: deny */
	JNEI(g, 4, 1, 2);
	MOV64I(g, 0, 1);
	EXIT(g);
	MOV64I(g, 0, 0);
	EXIT(g);
}

/* snap-confine (device-cgroup-support.c): a hash map keyed by the packed {u8 'c'|'b', u32
 * major, u32 minor} built on the stack; looked up with the minor, then with minor UINT32_MAX
 * (any minor). Access bits are ignored. */
static int snapd_map = -1;

static void ld_map(struct gen *g, int fd)
{
	emit(g, BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, fd);
	emit(g, 0, 0, 0, 0, 0);
}

static int gen_snapd(struct gen *g)
{
	struct __attribute__((packed)) {
		uint8_t type;
		uint32_t major, minor;
	} key;
	static const struct {
		char t;
		uint32_t ma, mi;
	} allow[] = {{'c', 1, 3}, {'c', 5, UINT32_MAX}, {'c', 195, 1}, {'b', 7, 0}};
	uint8_t one = 1;

	snapd_map = bpf_map_create(BPF_MAP_TYPE_HASH, "snap_devs", sizeof(key), 1, 64, NULL);
	if (snapd_map < 0)
		return -errno;
	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++) {
		key.type = (uint8_t)allow[i].t;
		key.major = allow[i].ma;
		key.minor = allow[i].mi;
		if (bpf_map_update_elem(snapd_map, &key, &one, BPF_ANY) < 0)
			return -errno;
	}
	MOV64I(g, 0, 0);
	emit(g, BPF_ALU64 | BPF_MOV | BPF_X, 6, 10, 0, 0);
	emit(g, BPF_ALU64 | BPF_ADD | BPF_K, 6, 0, 0, -(int)sizeof(key));
	LDXW(g, 2, 1, 4);
	emit(g, BPF_STX | BPF_MEM | BPF_W, 6, 2, 1, 0);
	LDXW(g, 2, 1, 8);
	emit(g, BPF_STX | BPF_MEM | BPF_W, 6, 2, 5, 0);
	LDXW(g, 2, 1, 0);
	AND32(g, 2, 0xFFFF);
	JEQI(g, 2, BPF_DEVCG_DEV_CHAR, 2);
	emit(g, BPF_ST | BPF_MEM | BPF_B, 6, 0, 0, 'b');
	emit(g, BPF_JMP | BPF_JA, 0, 0, 1, 0);
	emit(g, BPF_ST | BPF_MEM | BPF_B, 6, 0, 0, 'c');
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			emit(g, BPF_ST | BPF_MEM | BPF_W, 6, 0, 5, -1);
		ld_map(g, snapd_map);
		emit(g, BPF_ALU64 | BPF_MOV | BPF_X, 2, 6, 0, 0);
		emit(g, BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem);
		JEQI(g, 0, 0, 2);
		MOV64I(g, 0, 1);
		EXIT(g);
	}
	MOV64I(g, 0, 0);
	EXIT(g);
	return 0;
}

/* Narrow context loads (u8 type at offset 0, u16 access at offset 2: the kernel allows narrow
 * loads of access_type only), byte-swapped and shifted constants, XOR/NEG/ARSH/MOD/DIV on the
 * access bits and JMP32 with registers: decided only by access and type, so exact. */
static void gen_alu(struct gen *g)
{
	emit(g, BPF_LDX | BPF_MEM | BPF_B, 2, 1, 0, 0); /* type */
	emit(g, BPF_LDX | BPF_MEM | BPF_H, 3, 1, 2, 0); /* access */
	LDXW(g, 4, 1, 4);
	emit(g, BPF_ALU64 | BPF_MOV | BPF_K, 7, 0, 0, 0x0200); /* 2 in big-endian u16 */
	emit(g, BPF_ALU | BPF_END | BPF_TO_BE, 7, 0, 0, 16);   /* -> 2 on little endian */
	emit(g, BPF_JMP32 | BPF_JNE | BPF_X, 2, 7, 11, 0);     /* not char: to the block part */
	/* char: r8 = -(access ^ 7) >> 63 (arith), computed and unused: exercises XOR/NEG/ARSH */
	emit(g, BPF_ALU64 | BPF_MOV | BPF_X, 8, 3, 0, 0);
	emit(g, BPF_ALU64 | BPF_XOR | BPF_K, 8, 0, 0, 7);
	emit(g, BPF_ALU64 | BPF_NEG, 8, 0, 0, 0);
	emit(g, BPF_ALU64 | BPF_ARSH | BPF_K, 8, 0, 0, 63);
	/* char: allowed when access % 4 == 2 (r alone, and r|w: 6 % 4 == 2) */
	emit(g, BPF_ALU64 | BPF_MOV | BPF_X, 9, 3, 0, 0);
	emit(g, BPF_ALU64 | BPF_MOD | BPF_K, 9, 0, 0, 4); /* access % 4: 2 for r, 0 w/4, 1 m */
	emit(g, BPF_JMP | BPF_JEQ | BPF_K, 9, 0, 2, 2);	  /* read alone: allowed */
	MOV64I(g, 0, 0);
	EXIT(g);
	MOV64I(g, 0, 1);
	EXIT(g);
	/* block: allowed when access / 2 == 0 (mknod only) */
	emit(g, BPF_ALU | BPF_DIV | BPF_K, 3, 0, 0, 2);
	emit(g, BPF_JMP32 | BPF_JEQ | BPF_K, 3, 0, 2, 0);
	MOV64I(g, 0, 0);
	EXIT(g);
	MOV64I(g, 0, 1);
	EXIT(g);
}

/* runc/crun default container devices (libcontainer/specconv AllowedDevices + fuse, tun). */
static const struct rule container_rules[] = {
    {'c', ANY, ANY, ACC_M, 1},
    {'b', ANY, ANY, ACC_M, 1},
    {'c', 1, 3, ACC_RWM, 1},
    {'c', 1, 8, ACC_RWM, 1},
    {'c', 1, 7, ACC_RWM, 1},
    {'c', 5, 0, ACC_RWM, 1},
    {'c', 1, 5, ACC_RWM, 1},
    {'c', 1, 9, ACC_RWM, 1},
    {'c', 5, 2, ACC_RWM, 1},
    {'c', 136, ANY, ACC_RWM, 1},
    {'c', 10, 229, ACC_RWM, 1},
    {'c', 10, 200, ACC_RWM, 1},
    /* a read-only GPU and a deny after an allow (runc: last wins) */
    {'c', 195, 0, ACC_R, 1},
    {'c', 195, ANY, ACC_RW, 1},
    {'c', 195, 2, ACC_RWM, 0},
    {'c', 4, 1, ACC_R, 1}, /* O_RDWR: runc 1.0 allows (any bit), runc >= 1.1 refuses */
};

/* systemd DevicePolicy=closed: the pseudo devices, char-pts rw, plus DeviceAllow= entries:
 * "char-nvidia rw" (major wildcard), "/dev/nvidia1 r", "block-loop m", "char-* m". */
static const struct rule systemd_closed[] = {
    {'c', 1, 3, ACC_RWM, 1}, {'c', 1, 5, ACC_RWM, 1},		{'c', 1, 7, ACC_RWM, 1},
    {'c', 1, 8, ACC_RWM, 1}, {'c', 1, 9, ACC_RWM, 1},		{'c', 5, 0, ACC_RWM, 1},
    {'c', 5, 2, ACC_RWM, 1}, {'c', 136, ANY, ACC_R | ACC_W, 1}, {'c', 195, ANY, ACC_R | ACC_W, 1},
    {'c', 195, 1, ACC_R, 1}, {'b', 7, ANY, ACC_M, 1},		{'c', ANY, ANY, ACC_M, 1},
};

/* systemd DevicePolicy=strict: DeviceAllow=/dev/nvidia3 rw, /dev/loop0 rwm, char-* is absent. */
static const struct rule systemd_strict[] = {
    {'c', 195, 3, ACC_R | ACC_W, 1},
    {'b', 7, 0, ACC_RWM, 1},
    {'a', 10, 200, ACC_W, 1}, /* a type-less entry (LXC "a 10:200 w" shape) */
};

/* LXC deny list (lxc.cgroup2.devices.deny): default allow, deny some; and an allow list. */
static const struct rule lxc_deny[] = {
    {'c', 195, ANY, ACC_W, 0},
    {'c', 10, 200, ACC_RWM, 0},
    {'b', ANY, ANY, ACC_M, 0},
    {'a', 5, 2, ACC_R, 0},
};
static const struct rule lxc_allow[] = {
    {'c', 1, 3, ACC_RWM, 1},
    {'c', 136, ANY, ACC_R | ACC_W, 1},
    {'c', ANY, ANY, ACC_M, 1},
    {'b', 8, ANY, ACC_R, 1},
};

/* Slurm: a job with gpu 1 and 2 of 0-3 (deny 0 and 3, default allow). */
static const struct rule slurm_rules[] = {
    {'c', 195, 0, 0, 0},
    {'c', 195, 1, 0, 1},
    {'c', 195, 2, 0, 1},
    {'c', 195, 3, 0, 0},
};

struct dev {
	char type;
	unsigned major, minor;
};

static const struct dev devs[] = {
    {'c', 1, 3},    {'c', 1, 5},   {'c', 1, 7},	   {'c', 1, 8},	   {'c', 1, 9},	  {'c', 1, 1},
    {'c', 5, 0},    {'c', 5, 1},   {'c', 5, 2},	   {'c', 136, 0},  {'c', 136, 7}, {'c', 10, 229},
    {'c', 10, 200}, {'c', 10, 1},  {'c', 10, 199}, {'c', 12, 250}, {'c', 15, 0},  {'c', 16, 250},
    {'c', 9, 250},  {'c', 195, 0}, {'c', 195, 1},  {'c', 195, 2},  {'c', 195, 3}, {'c', 195, 255},
    {'c', 4, 1},    {'c', 7, 0},   {'b', 7, 0},	   {'b', 7, 1},	   {'b', 8, 0},	  {'b', 259, 1},
    {'b', 10, 200}, {'b', 5, 2},   {'b', 195, 3},
};
#define NDEVS (sizeof(devs) / sizeof(devs[0]))

/* The requests checked: m (mknod), r, w and r|w (O_RDWR: one request with both bits). */
static const unsigned reqs[] = {ACC_M, ACC_R, ACC_W, ACC_R | ACC_W};

static char nodes[NDEVS][PATH_MAX];

/* A child joins @cg and tries every request on @d: bit i of the result set when reqs[i] is
 * allowed by the device check (anything but EPERM), 0x80 on setup failure. */
static int kernel_bits(const char *cg, size_t di)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		char p[PATH_MAX], buf[32];
		int bits = 0;
		snprintf(p, sizeof(p), "%s/cgroup.procs", cg);
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		int l = snprintf(buf, sizeof(buf), "%d", (int)getpid());
		if (fd < 0 || write(fd, buf, (size_t)l) != l)
			_exit(0x80);
		close(fd);
		snprintf(p, sizeof(p), "%s/mk-%d", ktest_tmpdir(), (int)getpid());
		if (mknod(p, (devs[di].type == 'b' ? S_IFBLK : S_IFCHR) | 0600,
			  makedev(devs[di].major, devs[di].minor)) == 0) {
			bits |= 1;
			unlink(p);
		} else if (errno != EPERM)
			_exit(0x80);
		static const int fl[] = {O_RDONLY, O_WRONLY, O_RDWR};
		for (int k = 0; k < 3; k++) {
			fd = open(nodes[di], fl[k] | O_CLOEXEC | O_NONBLOCK);
			if (fd >= 0 || errno != EPERM)
				bits |= 2 << k;
			if (fd >= 0)
				close(fd);
		}
		_exit(bits);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int bad_total;

/* Compare one decode with the kernel's answers; print the first disagreements. */
static unsigned compare(const char *label, const char *form, const int *kb,
			int (*allows)(const void *, char, unsigned, unsigned, unsigned),
			const void *obj)
{
	unsigned bad = 0;
	for (size_t di = 0; di < NDEVS; di++)
		for (size_t q = 0; q < 4; q++) {
			if (kb[di] < 0 || (kb[di] & 0x80))
				continue;
			int k = !!(kb[di] & (1 << q));
			int d = allows(obj, devs[di].type, devs[di].major, devs[di].minor, reqs[q]);
			if (k != d) {
				if (bad++ < 6)
					tap_diag("%s/%s: %c %u:%u acc %u: kernel %d, jobcg %d",
						 label, form, devs[di].type, devs[di].major,
						 devs[di].minor, reqs[q], k, d);
			}
		}
	return bad;
}

static int allows_inspect(const void *o, char t, unsigned ma, unsigned mi, unsigned acc)
{
	return jobcg_cginspect_allows(o, t, ma, mi, acc);
}

static int allows_decoded(const void *o, char t, unsigned ma, unsigned mi, unsigned acc)
{
	return jobcg_decoded_allows(o, t, ma, mi, acc);
}

static bool has_maps;
static char snapd_raw[65536];
static size_t snapd_raw_len;

/* bpftool's dumps carry map ids, not contents: a program with maps is decoded by reading those
 * maps from the kernel (jobcg_decode_with_live_maps), the way `jobcg decode` does on a live id. */
static int decode_dump(const char *data, size_t len, const char *name, struct jobcg_decoded **ret)
{
	struct bpf_insn *insns = NULL;
	size_t n = 0;
	int r;

	if (!has_maps)
		return jobcg_decode_data(data, len, name, NULL, ret);
	r = jobcg_decode_parse(data, len, name, &insns, &n);
	if (r == 0)
		r = jobcg_decode_with_live_maps(insns, n, ret);
	free(insns);
	return r;
}

static void check_program(const char *top, const char *label, const struct gen *g)
{
	char cg[PATH_MAX], cmd[PATH_MAX * 2], raw[PATH_MAX];
	int kb[NDEVS];
	struct bpf_prog_info info = {0};
	uint32_t ilen = sizeof(info);

	snprintf(cg, sizeof(cg), "%s/%s", top, label);
	if (!ok(mkdir(cg, 0755) == 0, "%s: cgroup created", label))
		return;
	char log[16384] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = sizeof(log), .log_level = 1);
	int fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, label, "GPL", g->v, (size_t)g->n, &o);
	if (!ok(fd >= 0, "%s: %d instructions load", label, g->n)) {
		tap_diag("%s: %s\n%.3000s", label, strerror(errno), log);
		return;
	}
	int cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = bpf_prog_attach(fd, cgfd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI);
	ok(r == 0, "%s: attached with ALLOW_MULTI", label);
	bpf_obj_get_info_by_fd(fd, &info, &ilen);

	unsigned allowed = 0, denied = 0, failed = 0;
	for (size_t di = 0; di < NDEVS; di++) {
		kb[di] = kernel_bits(cg, di);
		if (kb[di] < 0 || (kb[di] & 0x80)) {
			failed++;
			continue;
		}
		for (size_t q = 0; q < 4; q++)
			(kb[di] & (1 << q)) ? allowed++ : denied++;
	}
	/* A comparison is only worth something if the kernel both allowed and refused. */
	ok(failed == 0 && allowed > 0 && denied > 0,
	   "%s: kernel answered every request (%u allowed, %u denied, %u failed)", label, allowed,
	   denied, failed);

	struct jobcg_cginspect *in = NULL;
	r = jobcg_cgroup_inspect(cg, NULL, &in);
	if (ok(r == 0 && in && !in->any_opaque && in->n_progs == 1, "%s: inspected (%s)", label,
	       r ? jobcg_last_error()->message : "ok")) {
		unsigned bad = compare(label, "live", kb, allows_inspect, in);
		bad_total += (int)bad;
		ok(bad == 0, "%s: live decode agrees with the kernel on %zu requests", label,
		   NDEVS * 4);
	}
	jobcg_cginspect_free(in);

	size_t len = 0;
	snprintf(cmd, sizeof(cmd), "bpftool prog dump xlated id %u", info.id);
	char *text = ktest_capture(cmd, &len);
	struct jobcg_decoded *d = NULL;
	r = text ? decode_dump(text, len, "bpftool", &d) : -EIO;
	if (ok(r == 0, "%s: bpftool text decodes (%s)", label,
	       r ? jobcg_last_error()->message : "ok")) {
		unsigned bad = compare(label, "text", kb, allows_decoded, d);
		bad_total += (int)bad;
		ok(bad == 0, "%s: bpftool text decode agrees with the kernel", label);
	} else if (text)
		ktest_diag_lines("", text);
	jobcg_decoded_free(d);
	d = NULL;

	snprintf(raw, sizeof(raw), "%s/%s.raw", ktest_tmpdir(), label);
	snprintf(cmd, sizeof(cmd), "bpftool prog dump xlated id %u file %s", info.id, raw);
	r = system(cmd);
	FILE *f = fopen(raw, "re");
	static char buf[65536];
	len = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	if (has_maps && len <= sizeof(snapd_raw)) {
		memcpy(snapd_raw, buf, len);
		snapd_raw_len = len;
	}
	r = (r == 0 && len > 0) ? decode_dump(buf, len, raw, &d) : -EIO;
	if (ok(r == 0, "%s: bpftool raw file decodes (%s)", label,
	       r ? jobcg_last_error()->message : "ok")) {
		unsigned bad = compare(label, "raw", kb, allows_decoded, d);
		bad_total += (int)bad;
		ok(bad == 0, "%s: raw decode agrees with the kernel", label);
	}
	jobcg_decoded_free(d);

	/* The CLI on the same inputs: devices on the live cgroup, decode of the raw file and of
	 * the bpftool text pasted on stdin, text and --json. */
	const char *b = getenv("JOBCG_BUILD_ROOT");
	static const char *const forms[][2] = {{"devices ", ""},
					       {"devices ", " --json"},
					       {"decode ", ""},
					       {"decode --json ", ""},
					       {"decode - < ", ".txt"}};
	snprintf(cmd, sizeof(cmd), "bpftool prog dump xlated id %u > %s.txt", info.id, raw);
	r = system(cmd);
	for (size_t k = 0; k < (has_maps ? 2 : sizeof(forms) / sizeof(forms[0])); k++) {
		char args[PATH_MAX + 64];
		snprintf(args, sizeof(args), "%s%s%s", forms[k][0], k < 2 ? cg : raw, forms[k][1]);
		snprintf(cmd, sizeof(cmd), "%s/cli/jobcg %s", b ? b : ".", args);
		text = ktest_capture(cmd, &len);
		bool is_json = strstr(args, "--json") != NULL;
		struct json_object *jo = is_json && text ? json_tokener_parse(text) : NULL;
		if (is_json)
			ok(jo != NULL, "%s: jobcg %s prints valid JSON", label, args);
		json_object_put(jo);
		if (ok(text && len > 0, "%s: jobcg %s exits 0", label, args) && k == 0 &&
		    getenv("AUDIT_SHOW"))
			ktest_diag_lines("", text);
	}
	if (getenv("AUDIT_SAVE")) { /* keep the dumps for checks by hand */
		snprintf(cmd, sizeof(cmd), "cp %s %s.txt %s/", raw, raw, getenv("AUDIT_SAVE"));
		r = system(cmd);
	}
	snprintf(cmd, sizeof(cmd), "%s.txt", raw);
	unlink(cmd);
	unlink(raw);

	bpf_prog_detach2(fd, cgfd, BPF_CGROUP_DEVICE);
	close(cgfd);
	close(fd);
	rmdir(cg);
}

static int load_attach(const struct gen *g, const char *name, const char *cg, int *ret_cgfd)
{
	int fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, name, "GPL", g->v, (size_t)g->n, NULL);
	int cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || cgfd < 0 || bpf_prog_attach(fd, cgfd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI)) {
		tap_diag("load/attach %s on %s: %m", name, cg);
		if (fd >= 0)
			close(fd);
		if (cgfd >= 0)
			close(cgfd);
		return -1;
	}
	*ret_cgfd = cgfd;
	return fd;
}

/* Two generators stacked (LXC allow-list on the parent, Slurm on the child, both
 * ALLOW_MULTI): the kernel runs both; jobcg must intersect them. Then who-has over the test
 * subtree must name the child for a device both allow to a process in it. */
static void check_stacked(const char *top, struct gen *g)
{
	char parent[PATH_MAX], child[PATH_MAX];
	int pcg = -1, ccg = -1, kb[NDEVS];

	snprintf(parent, sizeof(parent), "%s/stack", top);
	snprintf(child, sizeof(child), "%s/stack/job_77", top);
	if (!ok(mkdir(parent, 0755) == 0 && mkdir(child, 0755) == 0, "stacked: cgroups created"))
		return;
	static const struct rule parent_rules[] = {
	    {'c', 1, 3, ACC_RWM, 1}, {'c', 195, ANY, ACC_R | ACC_W, 1}, {'c', ANY, ANY, ACC_M, 1}};
	memset(g, 0, sizeof(*g));
	gen_lxc(g, parent_rules, 3, 0);
	int pfd = load_attach(g, "lxc_parent", parent, &pcg);
	memset(g, 0, sizeof(*g));
	gen_slurm(g, slurm_rules, 4, 1);
	int cfd = load_attach(g, "slurm_child", child, &ccg);
	if (!ok(pfd >= 0 && cfd >= 0, "stacked: both programs attached"))
		goto out;
	unsigned allowed = 0, denied = 0;
	for (size_t di = 0; di < NDEVS; di++) {
		kb[di] = kernel_bits(child, di);
		for (size_t q = 0; q < 4 && kb[di] >= 0 && !(kb[di] & 0x80); q++)
			(kb[di] & (1 << q)) ? allowed++ : denied++;
	}
	ok(allowed > 0 && denied > 0, "stacked: kernel allowed %u, denied %u", allowed, denied);
	struct jobcg_cginspect *in = NULL;
	int r = jobcg_cgroup_inspect(child, NULL, &in);
	if (ok(r == 0 && in->n_progs == 2 && !in->any_opaque, "stacked: two effective programs")) {
		unsigned bad = compare("stacked", "live", kb, allows_inspect, in);
		bad_total += (int)bad;
		ok(bad == 0, "stacked: combined decode agrees with the kernel");
	}
	jobcg_cginspect_free(in);

	/* A process in the child so who-has has a pid to show. */
	pid_t pid = fork();
	if (pid == 0) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/cgroup.procs", child);
		FILE *f = fopen(p, "we");
		if (f) {
			fprintf(f, "%d", (int)getpid());
			fclose(f);
		}
		pause();
		_exit(0);
	}
	usleep(200000);
	char cmd[PATH_MAX * 3], out[8192];
	const char *b = getenv("JOBCG_BUILD_ROOT");
	size_t len = 0;
	snprintf(cmd, sizeof(cmd), "%s/cli/jobcg who-has %s --root %s", b ? b : ".",
		 nodes[20] /* c 195:1 */, top);
	char *t = ktest_capture(cmd, &len);
	snprintf(out, sizeof(out), "%s", t ? t : "");
	ktest_diag_lines("", out);
	char pidstr[32];
	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	ok(t && strstr(out, "job_77") && strstr(out, pidstr),
	   "who-has c 195:1 names job_77 and pid %d", (int)pid);
	snprintf(cmd, sizeof(cmd), "%s/cli/jobcg who-has %s --root %s", b ? b : ".",
		 nodes[19] /* c 195:0 */, top);
	t = ktest_capture(cmd, &len);
	ok(t && !strstr(t, "job_77"), "who-has c 195:0 does not name job_77");
	snprintf(cmd, sizeof(cmd), "%s/cli/jobcg who-has --json %s --root %s", b ? b : ".",
		 nodes[20], top);
	t = ktest_capture(cmd, &len);
	struct json_object *jo = t ? json_tokener_parse(t) : NULL;
	ok(jo && strstr(t, "\"job\":77,") && strstr(t, pidstr),
	   "who-has --json is valid JSON with job 77");
	json_object_put(jo);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
out:
	if (pfd >= 0) {
		bpf_prog_detach2(pfd, pcg, BPF_CGROUP_DEVICE);
		close(pfd);
		close(pcg);
	}
	if (cfd >= 0) {
		bpf_prog_detach2(cfd, ccg, BPF_CGROUP_DEVICE);
		close(cfd);
		close(ccg);
	}
	rmdir(child);
	rmdir(parent);
}

int main(void)
{
	const char *top = ktest_setup("audit-gen");
	struct gen *g = calloc(1, sizeof(*g));

	if (access("/usr/sbin/bpftool", X_OK) != 0 && access("/usr/bin/bpftool", X_OK) != 0) {
		tap_skip("bpftool not installed");
		return tap_done();
	}
	for (size_t di = 0; di < NDEVS; di++) {
		snprintf(nodes[di], sizeof(nodes[di]), "%s/%c-%u-%u", ktest_tmpdir(), devs[di].type,
			 devs[di].major, devs[di].minor);
		if (mknod(nodes[di], (devs[di].type == 'b' ? S_IFBLK : S_IFCHR) | 0666,
			  makedev(devs[di].major, devs[di].minor)) < 0) {
			tap_diag("mknod %s: %m", nodes[di]);
			return 1;
		}
	}
#define RUN(label, call)                                                                           \
	do {                                                                                       \
		memset(g, 0, sizeof(*g));                                                          \
		call;                                                                              \
		check_program(top, label, g);                                                      \
	} while (0)
#define N(a) (sizeof(a) / sizeof((a)[0]))
	RUN("systemd_closed", gen_systemd(g, systemd_closed, N(systemd_closed)));
	RUN("systemd_strict", gen_systemd(g, systemd_strict, N(systemd_strict)));
	RUN("runc_new", gen_runc(g, container_rules, N(container_rules), 0, RUNC_NEW));
	RUN("runc_old", gen_runc(g, container_rules, N(container_rules), 0, RUNC_OLD));
	RUN("crun", gen_runc(g, container_rules, N(container_rules), 0, CRUN));
	RUN("lxc_deny", gen_lxc(g, lxc_deny, N(lxc_deny), 1));
	RUN("lxc_allow", gen_lxc(g, lxc_allow, N(lxc_allow), 0));
	RUN("slurm", gen_slurm(g, slurm_rules, N(slurm_rules), 1));
	RUN("ranges", gen_ranges(g));
	RUN("alu", gen_alu(g));
	has_maps = true;
	memset(g, 0, sizeof(*g));
	if (ok(gen_snapd(g) == 0, "snapd: map created and filled"))
		check_program(top, "snapd", g);
	if (snapd_map >= 0) {
		struct bpf_map_info mi = {0};
		uint32_t ml = sizeof(mi);
		bpf_obj_get_info_by_fd(snapd_map, &mi, &ml);
		close(snapd_map);
		/* The program's reference to the map goes away after an RCU grace period. */
		for (int i = 0; i < 100; i++) {
			int mfd = bpf_map_get_fd_by_id(mi.id);
			if (mfd < 0)
				break;
			close(mfd);
			usleep(20000);
		}
		/* A dump of a program that is gone: opaque, naming the map, not a bare ENOENT. */
		struct jobcg_decoded *d = NULL;
		int r =
		    snapd_raw_len ? decode_dump(snapd_raw, snapd_raw_len, "snapd.raw", &d) : -EIO;
		char want[64];
		snprintf(want, sizeof(want), "map id %u", mi.id);
		ok(r == -EOPNOTSUPP && strstr(jobcg_last_error()->message, want),
		   "snapd dump after unload: opaque, naming %s (%d: %s)", want, r,
		   jobcg_last_error()->message);
		jobcg_decoded_free(d);
	}
	has_maps = false;
	check_stacked(top, g);
	ok(bad_total == 0, "no disagreement with the kernel in any generator (%d)", bad_total);
	free(g);
	return tap_done();
}
