/* jobcg unit test: device rules, and every generated device program run through bpfvm against
 * the reference decision over many devices and access combinations. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpfvm.h"
#include "devnames.h"
#include "devprog.h"
#include "devices.h"
#include "jobcg/devrule.h"
#include "tap.h"

#define MANAGED_REF 11
#define POLICY_REF  22
#define ROOT_LEVEL  3

static void test_parse(void)
{
	static const struct {
		const char *in, *out;
	} good[] = {
	    {"c 195:0 rw", "c 195:0 rw"},
	    {"c 195:* rwm", "c 195:* rwm"},
	    {"b *:* m", "b *:* m"},
	    {"a", "a *:* rwm"},
	    {"c 1:3", "c 1:3 rwm"},
	    {"deny c 1:3 r", "deny c 1:3 r"},
	    {"!b 8:0 w", "deny b 8:0 w"},
	    {"c 195:0 -", "c 195:0 -"},
	    {"  c 10:200 mwr ", "c 10:200 rwm"},
	    {"a rw", "a *:* rw"},
	};
	static const char *const bad[] = {"",
					  "x 1:2",
					  "c 1",
					  "c 1:2 rx",
					  "c 1:2 rr",
					  "c 1:",
					  "c :1",
					  "c 99999999999:0",
					  "c 1:2 rw extra",
					  "c1:2",
					  "deny",
					  "c 1:2:3"};
	char buf[64];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct jobcg_devrule r;
		int e = jobcg_devrule_parse(good[i].in, &r);
		is_int(e, 0, good[i].in);
		if (e == 0)
			is_str(jobcg_devrule_format(&r, buf, sizeof(buf)), good[i].out, good[i].in);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct jobcg_devrule r = {.type = 'z'};
		int e = jobcg_devrule_parse(bad[i], &r);
		ok(e == -EINVAL && r.type == 'z', "refused: '%s'", bad[i]);
		ok(jobcg_last_error()->message[0] != 0, "  with a message: %s",
		   jobcg_last_error()->message);
	}
	struct jobcg_devrule w = {'c', JOBCG_DEV_ANY, 5, 7, true};
	is_int(devprog_rule_check(&w), -EINVAL, "\"c *:5\" refused by the programs");
	w = (struct jobcg_devrule){'c', 4096, 0, 7, true};
	is_int(devprog_rule_check(&w), -EINVAL, "major 4096 refused");
}

/* Fake maps for the node program. */
struct entry {
	uint8_t key[24];
	uint8_t value[BPFVM_MAP_VALUE_MAX];
};
struct fakemap {
	struct entry *e;
	size_t n, cap, key_size;
};

static void fm_put(struct fakemap *m, const void *key, uint32_t v)
{
	for (size_t i = 0; i < m->n; i++)
		if (memcmp(m->e[i].key, key, m->key_size) == 0) {
			memcpy(m->e[i].value, &v, 4);
			return;
		}
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->e = realloc(m->e, m->cap * sizeof(*m->e));
		if (!m->e)
			abort();
	}
	memset(&m->e[m->n], 0, sizeof(m->e[0]));
	memcpy(m->e[m->n].key, key, m->key_size);
	memcpy(m->e[m->n].value, &v, 4);
	m->n++;
}

struct world {
	struct fakemap managed, policy;
	uint64_t ancestors[16]; /* absolute level -> cgroup id, 0 beyond the process's depth */
	unsigned lookups;
};

static uint64_t w_ancestor(void *ud, int level)
{
	struct world *w = ud;
	return level >= 0 && level < 16 ? w->ancestors[level] : 0;
}

static uint64_t w_cgroup(void *ud)
{
	struct world *w = ud;
	uint64_t id = 0;
	for (int i = 0; i < 16; i++)
		if (w->ancestors[i])
			id = w->ancestors[i];
	return id;
}

static const void *w_lookup(void *ud, uint64_t ref, const void *key)
{
	struct world *w = ud;
	struct fakemap *m = ref == MANAGED_REF	? &w->managed
			    : ref == POLICY_REF ? &w->policy
						: NULL;

	w->lookups++;
	if (!m)
		return NULL;
	for (size_t i = 0; i < m->n; i++)
		if (memcmp(m->e[i].key, key, m->key_size) == 0)
			return m->e[i].value;
	return NULL;
}

/* A small deterministic generator (xorshift), so failures reproduce. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static const uint32_t majors[] = {195, 196, 8};
#define N_MINORS 4

static struct jobcg_devrule random_rule(bool for_managed)
{
	struct jobcg_devrule r = {.allow = true};
	unsigned shape = rnd(10);

	r.type = rnd(8) == 0 ? 'a' : rnd(4) == 0 ? 'b' : 'c';
	r.major = majors[rnd(3)];
	r.minor = rnd(N_MINORS);
	if (shape == 0) {
		r.major = JOBCG_DEV_ANY;
		r.minor = JOBCG_DEV_ANY;
	} else if (shape <= 2) {
		r.minor = JOBCG_DEV_ANY;
	}
	r.access = for_managed ? JOBCG_DEV_ACC_ALL : rnd(8);
	return r;
}

struct grantset {
	bool constrained;
	struct jobcg_devrule r[6];
	size_t n;
};

static void random_grant(struct grantset *g)
{
	g->constrained = rnd(3) != 0;
	g->n = g->constrained ? rnd(5) : 0;
	for (size_t i = 0; i < g->n; i++)
		g->r[i] = random_rule(false);
}

static void put_grant(struct world *w, uint64_t id, unsigned level, const struct grantset *g)
{
	struct devprog_policy_key keys[12];
	uint32_t acc[12];
	size_t nk;

	if (!g->constrained)
		return;
	nk = devprog_policy_entries(id, g->r, g->n, keys, acc);
	for (size_t i = 0; i < nk; i++)
		fm_put(&w->policy, &keys[i], acc[i]);
	struct devprog_policy_key marker = {.cgroup_id = id};
	fm_put(&w->policy, &marker, level);
}

struct scenario {
	struct jobcg_devrule managed[6];
	size_t n_managed;
	struct grantset job, step, task;
	unsigned depth; /* below the root: 0 root, 1 job, 2 step, 3 step/jobcg, 4 task */
	bool outside;	/* the process is not below the root at all */
};

/* The reference: unmanaged is allowed; else every constrained level that applies must grant. */
static bool node_want(const struct scenario *sc, uint32_t type, uint32_t major, uint32_t minor,
		      unsigned acc)
{
	const struct grantset *lv[3] = {&sc->job, &sc->step, &sc->task};
	static const unsigned depth_of[3] = {1, 2, 4};
	bool marked = false;

	if (sc->outside ||
	    devprog_decide(sc->managed, sc->n_managed, NULL, 0, type, major, minor, acc))
		return true;
	for (int i = 0; i < 3; i++) {
		if (!lv[i]->constrained || sc->depth < depth_of[i])
			continue;
		marked = true;
		if (!devprog_decide(sc->managed, sc->n_managed, lv[i]->r, lv[i]->n, type, major,
				    minor, acc))
			return false;
	}
	/* Fail closed: a managed device below the root needs a grant at some level. */
	return marked;
}

static void test_node(void)
{
	/* The level userspace computes may be off (cgroup namespaces, subtree mounts): programs
	 * built with a wrong level must find the root by its id and decide the same. */
	static const unsigned built_levels[] = {ROOT_LEVEL, 0, ROOT_LEVEL + 2};
	struct devprog_buf progs[3] = {{0}};
	struct bpfvm_env env = {w_cgroup, w_ancestor, w_lookup, NULL};
	unsigned mismatches[3] = {0}, runs = 0, errors = 0, denied = 0, direct_bad = 0;
	unsigned min_lookups = ~0u, max_lookups = 0;

	for (int k = 0; k < 3; k++) {
		is_int(devprog_build_node(MANAGED_REF, POLICY_REF, built_levels[k],
					  1000 + ROOT_LEVEL, &progs[k]),
		       0, "node program built");
		is_int(bpfvm_check(progs[k].insns, progs[k].n), 0,
		       "node program passes bpfvm_check");
	}
	tap_diag("node program: %zu instructions", progs[0].n);

	for (int n = 0; n < 300; n++) {
		struct world w = {.managed.key_size = sizeof(struct devprog_managed_key),
				  .policy.key_size = sizeof(struct devprog_policy_key)};
		struct scenario sc = {
		    .n_managed = 1 + rnd(5), .depth = rnd(5), .outside = rnd(20) == 0};

		for (size_t i = 0; i < sc.n_managed; i++) {
			struct devprog_managed_key k[2];
			sc.managed[i] = random_rule(true);
			size_t nk = devprog_rule_keys(&sc.managed[i], k);
			for (size_t j = 0; j < nk; j++)
				fm_put(&w.managed, &k[j], 7);
		}
		random_grant(&sc.job);
		random_grant(&sc.step);
		random_grant(&sc.task);
		/* Cgroups above the root and at depth 3 have ids too: they must not matter. A
		 * process outside the root sees other ids at every level. */
		for (unsigned l = 0; l <= ROOT_LEVEL + sc.depth; l++)
			w.ancestors[l] = (sc.outside ? 5000 : 1000) + l;
		put_grant(&w, 1000 + ROOT_LEVEL + 1, 1, &sc.job);
		put_grant(&w, 1000 + ROOT_LEVEL + 2, 2, &sc.step);
		put_grant(&w, 1000 + ROOT_LEVEL + 4, 4, &sc.task);
		env.userdata = &w;

		for (unsigned c = 0; c < 2 * 3 * N_MINORS * 7; c++) {
			uint32_t type = c % 2 ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
			uint32_t major = majors[(c / 2) % 3], minor = (c / 6) % N_MINORS;
			unsigned acc = 1 + c / (6 * N_MINORS);
			struct bpfvm_devctx ctx = {(acc << 16) | type, major, minor};
			bool want = node_want(&sc, type, major, minor, acc);
			/* The decision computed without the program (the fast path of readers):
			 * per bit, so all of them must be allowed where the program allows. */
			int direct =
			    devprog_node_allowed(1000 + ROOT_LEVEL, w.ancestors, 15, w_lookup, &w,
						 MANAGED_REF, POLICY_REF, type, major, minor, acc);
			direct_bad += direct < 0 || (direct == (int)acc) != want;
			for (unsigned bit = 1; bit <= 4; bit <<= 1) {
				int one = devprog_node_allowed(1000 + ROOT_LEVEL, w.ancestors, 15,
							       w_lookup, &w, MANAGED_REF,
							       POLICY_REF, type, major, minor, bit);
				if ((acc & bit) && direct >= 0 &&
				    (one == (int)bit) != ((direct & (int)bit) != 0))
					direct_bad++;
			}

			for (int k = 0; k < 3; k++) {
				uint64_t r0 = 99;
				w.lookups = 0;
				if (bpfvm_run(progs[k].insns, progs[k].n, &ctx, &env, 100000, &r0) <
				    0) {
					errors++;
					continue;
				}
				mismatches[k] += (r0 != 0) != want;
				if (k > 0)
					continue;
				runs++;
				denied += r0 == 0;
				if (w.lookups < min_lookups)
					min_lookups = w.lookups;
				if (w.lookups > max_lookups)
					max_lookups = w.lookups;
			}
		}
		free(w.managed.e);
		free(w.policy.e);
	}
	is_int(errors, 0, "node program: every run completes in bpfvm");
	is_int(mismatches[0], 0, "node program agrees with the reference decision");
	is_int(mismatches[1], 0, "built with level 0 instead of 3: finds the root, same decisions");
	is_int(mismatches[2], 0, "built with level 5 instead of 3: finds the root, same decisions");
	is_int(direct_bad, 0, "devprog_node_allowed() decides as the node program, bit by bit");
	ok(runs > 40000 && denied > runs / 20 && denied < runs - runs / 20,
	   "node program: %u runs, %u denied (both outcomes well covered)", runs, denied);
	/* Fixed work per check: 3 managed + 3 levels x (1 marker + 3 grant) lookups at most. */
	ok(max_lookups <= 15, "node program: at most 15 map lookups per check (saw %u..%u)",
	   min_lookups, max_lookups);
	for (int k = 0; k < 3; k++)
		devprog_buf_done(&progs[k]);
}

static void test_linear(void)
{
	unsigned mismatches = 0, runs = 0, errors = 0, denied = 0, parse_bad = 0, progs = 0;

	for (int scenario = 0; scenario < 600; scenario++) {
		struct jobcg_devrule managed[6];
		size_t n_managed = rnd(6);
		struct grantset g;
		struct devprog_buf b = {0};
		struct jobcg_devrule *parsed = NULL;
		size_t n_parsed = 0;

		for (size_t i = 0; i < n_managed; i++)
			managed[i] = random_rule(true);
		random_grant(&g);
		if (devprog_build_linear(managed, n_managed, g.r, g.n, &b) < 0 ||
		    bpfvm_check(b.insns, b.n) < 0) {
			errors++;
			continue;
		}
		progs++;
		if (devprog_parse_linear(b.insns, b.n, &parsed, &n_parsed) < 0)
			parse_bad++;
		for (int t = 0; t < 2; t++)
			for (size_t mj = 0; mj < 3; mj++)
				for (uint32_t mn = 0; mn < N_MINORS; mn++)
					for (unsigned acc = 1; acc <= 7; acc++) {
						uint32_t type =
						    t ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
						struct bpfvm_devctx ctx = {(acc << 16) | type,
									   majors[mj], mn};
						uint64_t r0 = 99;
						bool want =
						    devprog_decide(managed, n_managed, g.r, g.n,
								   type, majors[mj], mn, acc);
						if (bpfvm_run(b.insns, b.n, &ctx, NULL, 100000,
							      &r0) < 0) {
							errors++;
							continue;
						}
						runs++;
						denied += r0 == 0;
						if ((r0 != 0) != want)
							mismatches++;
						/* What `jobcg policy` reads back must decide the
						 * same. */
						if (parsed &&
						    devprog_decide(managed, n_managed, parsed,
								   n_parsed, type, majors[mj], mn,
								   acc) != want)
							parse_bad++;
					}
		free(parsed);
		devprog_buf_done(&b);
	}
	is_int(errors, 0, "linear programs: all build, check and run");
	is_int(mismatches, 0, "linear programs agree with the reference decision");
	is_int(parse_bad, 0, "linear programs read back to rules with the same decisions");
	ok(progs == 600 && runs > 50000 && denied > runs / 20,
	   "linear: %u programs, %u runs, %u denied", progs, runs, denied);
}

/* The Slurm example of seed 000: only gpu 3 of 0-3 allowed. */
static void test_linear_shape(void)
{
	struct jobcg_devrule managed[4], allowed = {'c', 195, 3, 7, true};
	struct devprog_buf b = {0};

	for (unsigned i = 0; i < 4; i++)
		managed[i] = (struct jobcg_devrule){'c', 195, i, 7, true};
	is_int(devprog_build_linear(managed, 4, &allowed, 1, &b), 0, "seed 000 example built");
	is_int(b.n, 28, "same size as Slurm's for 4 devices (6 prologue + 4x5 + 2)");
	ok(b.n > 8 && b.insns[6].code == (BPF_JMP | BPF_JNE | BPF_K) && b.insns[6].dst_reg == 2 &&
	       b.insns[6].imm == BPF_DEVCG_DEV_CHAR,
	   "compare-and-exit shape: first block tests the type in r2");
	devprog_buf_done(&b);

	/* Too many rules is refused, not allocated. */
	struct jobcg_devrule *many = calloc(DEVPROG_RULES_MAX + 1, sizeof(*many));
	for (size_t i = 0; many && i <= DEVPROG_RULES_MAX; i++)
		many[i] = (struct jobcg_devrule){'c', 195, (uint32_t)(i & 0xfffff), 7, true};
	is_int(devprog_build_linear(many, DEVPROG_RULES_MAX + 1, NULL, 0, &b), -E2BIG,
	       "more than DEVPROG_RULES_MAX managed rules refused");
	is_int(devprog_build_linear(many, DEVPROG_RULES_MAX, NULL, 0, &b), 0,
	       "DEVPROG_RULES_MAX managed rules accepted");
	devprog_buf_done(&b);
	free(many);
}

/* Device names come from /dev: /dev/null is c 1:3 on every Linux system. */
static void test_devnames(void)
{
	struct jobcg_devnames *d = NULL;

	is_int(jobcg_devnames_scan(NULL, &d), 0, "scan /dev");
	is_str(jobcg_devnames_find(d, 'c', 1, 3), "/dev/null", "c 1:3 is /dev/null");
	ok(jobcg_devnames_find(d, 'b', 1, 3) == NULL, "b 1:3 is not /dev/null");
	jobcg_devnames_free(d);
}

/* gres.conf files become managed rules: stat()ed ones only, each device once. */
static void test_managed_from_config(void)
{
	struct jobcg_gres_file f[4] = {{(char *)"/dev/nvidia0", 'c', 195, 0},
				       {(char *)"/dev/nvidia1", 'c', 195, 1},
				       {(char *)"/dev/nvidia0", 'c', 195, 0},
				       {(char *)"/dev/unknown", 0, 0, 0}};
	struct jobcg_gres_record r[2] = {{.name = (char *)"gpu", .files = f, .nfiles = 2},
					 {.name = (char *)"mps", .files = f + 2, .nfiles = 2}};
	struct jobcg_config conf = {.gres = {.records = r, .nrecords = 2}};
	struct jobcg_devrule *v = NULL;
	size_t n = 0;
	char buf[64];

	is_int(jobcg_devpolicy_managed_from_config(&conf, &v, &n), 0, "managed from gres.conf");
	is_int(n, 2, "two distinct stat()ed device files");
	if (n == 2) {
		is_str(jobcg_devrule_format(&v[0], buf, sizeof(buf)), "c 195:0 rwm",
		       "first is c 195:0");
		is_str(jobcg_devrule_format(&v[1], buf, sizeof(buf)), "c 195:1 rwm",
		       "then c 195:1");
	}
	free(v);
}

int main(void)
{
	test_managed_from_config();
	test_devnames();
	test_parse();
	test_linear_shape();
	test_node();
	test_linear();
	return tap_done();
}
