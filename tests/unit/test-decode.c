/* jobcg tests: decoding device programs shaped like those of Slurm, systemd, runc, crun, LXC,
 * HTCondor and snapd; rules compared with the generators' rule lists and request by request. */
#include <errno.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpftext.h"
#include "bpfvm.h"
#include "unit/insn.h"
#include "devprog.h"
#include "inspect_internal.h"
#include "jobcg/decode.h"
#include "tap.h"

#include "devgen.h"

/* ---- checking ---- */

/* The decoded text, rules and notes, one line each. */
static char *render(const struct jobcg_decoded *d)
{
	const struct jobcg_decoded_line *lines;
	size_t n = jobcg_decoded_lines(d, &lines);
	static char out[1 << 16];
	size_t o = 0;

	out[0] = 0;
	for (size_t i = 0; i < n && o < sizeof(out) - 128; i++) {
		char buf[128];
		if (lines[i].note)
			o += (size_t)snprintf(out + o, sizeof(out) - o, "# %s\n", lines[i].note);
		else
			o += (size_t)snprintf(
			    out + o, sizeof(out) - o, "%s\n",
			    jobcg_decoded_rule_format(&lines[i].rule, buf, sizeof(buf)));
	}
	return out;
}

/* Evaluate the printed rules as a reader would: the most specific line decides. */
static int lines_allow(const struct jobcg_decoded *d, char type, uint32_t major, uint32_t minor,
		       unsigned acc)
{
	const struct jobcg_decoded_line *lines;
	size_t n = jobcg_decoded_lines(d, &lines);
	int best = -1, found = -1;

	for (size_t i = 0; i < n; i++) {
		const struct jobcg_devrule *r = &lines[i].rule;
		if (lines[i].note || r->type != type)
			continue;
		int spec = r->major == JOBCG_DEV_ANY ? 0 : r->minor == JOBCG_DEV_ANY ? 1 : 2;
		if ((r->major == JOBCG_DEV_ANY || r->major == major) &&
		    (r->minor == JOBCG_DEV_ANY || r->minor == minor) && spec > best) {
			best = spec;
			found = (int)i;
		}
	}
	if (found < 0)
		return -1;
	return (lines[found].rule.access & acc) == acc;
}

typedef bool (*ref_fn)(const void *ctx, char type, uint32_t major, uint32_t minor, unsigned acc);

struct checker {
	const char *name;
	const struct bpf_insn *insns;
	size_t n;
	const struct bpfvm_env *env;
	const struct jobcg_decoded *d;
	ref_fn ref;
	const void *refctx;
	unsigned checked, mismatches;
};

static void check_one(struct checker *c, char type, uint32_t major, uint32_t minor, unsigned acc)
{
	/* The kernel's dev_t has 12 bits of major and 20 of minor: nothing else is ever asked. */
	if (major > 4095 || minor > 0xfffff)
		return;
	struct bpfvm_devctx ctx = {
	    .access_type = (acc << 16) | bpf_type(type), .major = major, .minor = minor};
	uint64_t r0 = 0;
	int r = bpfvm_run(c->insns, c->n, &ctx, c->env, 100000, &r0);
	bool prog = r == 0 && r0 != 0;
	bool dec = jobcg_decoded_allows(c->d, type, major, minor, acc);
	bool ref = c->ref ? c->ref(c->refctx, type, major, minor, acc) : prog;
	int lin = (acc == ACC_M || acc == ACC_R || acc == ACC_W)
		      ? lines_allow(c->d, type, major, minor, acc)
		      : (int)prog;

	c->checked++;
	if (r < 0 || prog != dec || prog != ref || lin != (int)prog) {
		if (c->mismatches++ < 5)
			tap_diag("%s: %c %u:%u acc %u: program %d (r=%d) decoded %d reference %d "
				 "lines %d",
				 c->name, type, major, minor, acc, prog, r, dec, ref, lin);
	}
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

/* Every request built from the interesting values (constants, neighbours, extremes) plus
 * random samples. */
static void check_all(struct checker *c, const uint32_t *consts, size_t nconsts)
{
	static const unsigned accs[] = {0, 1, 2, 4, 6};
	uint32_t vals[512];
	size_t nv = 0;

	vals[nv++] = 0;
	vals[nv++] = UINT32_MAX;
	vals[nv++] = 0x7fffffff;
	vals[nv++] = 0x80000000;
	for (size_t k = 0; k < nconsts && nv + 3 < ELEMENTS(vals); k++) {
		vals[nv++] = consts[k];
		vals[nv++] = consts[k] + 1;
		vals[nv++] = consts[k] - 1;
	}
	for (int t = 0; t < 2; t++)
		for (size_t a = 0; a < nv; a++)
			for (size_t b = 0; b < nv; b++)
				for (size_t k = 0; k < ELEMENTS(accs); k++)
					check_one(c, t ? 'b' : 'c', vals[a], vals[b], accs[k]);
	for (int s = 0; s < 3000; s++) {
		uint32_t ma = s % 3 == 0   ? rnd32()
			      : s % 3 == 1 ? rnd32() % 300
					   : consts[rnd32() % nconsts];
		uint32_t mi = s % 2 ? rnd32() % 300 : rnd32();
		check_one(c, rnd32() % 2 ? 'c' : 'b', ma, mi, accs[rnd32() % ELEMENTS(accs)]);
	}
	ok(c->mismatches == 0,
	   "%s: program, decoded rules, printed lines and generator agree on %u requests", c->name,
	   c->checked);
}

static void rule_consts(const struct rule *rules, size_t n, uint32_t *out, size_t *nout)
{
	*nout = 0;
	for (size_t k = 0; k < n; k++) {
		if (rules[k].major != ANY)
			out[(*nout)++] = (uint32_t)rules[k].major;
		if (rules[k].minor != ANY)
			out[(*nout)++] = (uint32_t)rules[k].minor;
	}
	out[(*nout)++] = 1;
}

struct refctx {
	const struct rule *rules;
	size_t n;
	bool dflt;
	bool (*fn)(const struct rule *, size_t, bool, char, uint32_t, uint32_t, unsigned);
};

static bool ref_rules(const void *u, char type, uint32_t major, uint32_t minor, unsigned acc)
{
	const struct refctx *r = u;
	return r->fn(r->rules, r->n, r->dflt, type, major, minor, acc);
}

/* Decode a generated program; compare the text with @want and check request by request. */
static struct jobcg_decoded *decode_and_check(const char *name, const struct prog *p,
					      const struct refctx *rc, const char *want,
					      const struct jobcg_decode_env *denv,
					      const struct bpfvm_env *env)
{
	struct jobcg_decoded *d = NULL;
	int r = jobcg_decode_program(p->v, p->n, denv, &d);
	uint32_t consts[256];
	size_t nc = 0;

	if (!is_int(r, 0, name)) {
		tap_diag("%s", jobcg_last_error()->message);
		return NULL;
	}
	char label[128];
	snprintf(label, sizeof(label), "%s: decoded rules", name);
	is_str(render(d), want, label);
	if (rc)
		rule_consts(rc->rules, rc->n, consts, &nc);
	else
		for (uint32_t k = 0; k < 10; k++)
			consts[nc++] = k, consts[nc++] = 195 + k;
	struct checker c = {.name = name,
			    .insns = p->v,
			    .n = p->n,
			    .env = env,
			    .d = d,
			    .ref = rc ? ref_rules : NULL,
			    .refctx = rc};
	check_all(&c, consts, nc);
	return d;
}

/* ---- the cases ---- */

static char *read_seed(void)
{
	const char *shared = getenv("JOBCG_SHARED");
	char pat[4096];
	glob_t g;
	char *buf = NULL;

	snprintf(pat, sizeof(pat), "%s/seeds/000_*.txt", shared ? shared : "../shared");
	if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc == 0)
		return NULL;
	FILE *f = fopen(g.gl_pathv[0], "re");
	globfree(&g);
	if (!f)
		return NULL;
	buf = calloc(1, 1 << 20);
	if (buf)
		buf[fread(buf, 1, (1 << 20) - 1, f)] = 0;
	fclose(f);
	return buf;
}

static void test_seed000(void)
{
	char *text = read_seed();
	struct bpf_insn *insns = NULL;
	size_t n = 0;
	struct jobcg_decoded *d = NULL;

	if (!text) {
		/* A user's clone has no ../shared beside it; CI has (JOBCG_MUST_WORK fails this).
		 */
		tap_skip("seed 000 not found under $JOBCG_SHARED/seeds (no ../shared here)");
		return;
	}
	/* The whole mail is the input, as an administrator might paste it. */
	is_int(bpftext_parse(text, strlen(text), "seed000", &insns, &n), 0, "seed 000 text parses");
	is_int(n, 28, "28 instructions");
	is_int(jobcg_decode_data(text, strlen(text), "seed000", NULL, &d), 0, "seed 000 decodes");
	if (d) {
		/* GPUs 195:0-2 are denied, GPU 3 (the job's) and everything else allowed. */
		is_str(render(d),
		       "c *:* rwm\n"
		       "c 195:0 -\n# c 195:0: a request with no access bits is denied\n"
		       "c 195:1 -\n# c 195:1: a request with no access bits is denied\n"
		       "c 195:2 -\n# c 195:2: a request with no access bits is denied\n"
		       "b *:* rwm\n",
		       "seed 000: only 195:3 of the four GPUs is open to the job");
		ok(jobcg_decoded_allows(d, 'c', 195, 3, ACC_R | ACC_W), "195:3 rw allowed");
		ok(!jobcg_decoded_allows(d, 'c', 195, 2, ACC_R), "195:2 r denied");
		ok(jobcg_decoded_allows(d, 'b', 195, 2, ACC_R), "block 195:2 allowed");
		struct rule managed[] = {
		    {'c', 195, 0, 7, false},
		    {'c', 195, 1, 7, false},
		    {'c', 195, 2, 7, false},
		    {'c', 195, 3, 7, true},
		};
		struct refctx rc = {managed, 4, true, ref_slurm};
		uint32_t consts[] = {195, 0, 1, 2, 3};
		struct checker c = {.name = "seed 000",
				    .insns = insns,
				    .n = n,
				    .d = d,
				    .ref = ref_rules,
				    .refctx = &rc};
		check_all(&c, consts, ELEMENTS(consts));
	}
	/* The same program as `bpftool -j prog dump xlated` prints it. */
	if (d) {
		char json[8192] = "[";
		const char *p0 = strstr(text, "0: (61)");
		int idx = 0;
		while (p0 && idx < 28) {
			const char *colon = strchr(p0, ':'), *nl = strchr(p0, '\n');
			if (!colon || !nl)
				break;
			snprintf(json + strlen(json), sizeof(json) - strlen(json),
				 "%s{\"disasm\":\"%.*s\"}", idx ? "," : "", (int)(nl - colon - 2),
				 colon + 2);
			idx++;
			p0 = nl + 1;
		}
		strcat(json, "]");
		struct jobcg_decoded *dj = NULL;
		if (is_int(jobcg_decode_data(json, strlen(json), "json", NULL, &dj), 0,
			   "bpftool JSON dump decodes")) {
			is_str(render(dj), render(d), "JSON dump gives the same rules");
			jobcg_decoded_free(dj);
		}
	}
	/* Mangled copies fail naming the line. */
	char *bad = strdup(text);
	char *p = strstr(bad, "23: (55) if r5 != 0x3 goto pc+2");
	if (ok(p != NULL, "seed line 23 found")) {
		p[30] = '9';
		ok(jobcg_decode_data(bad, strlen(bad), "seed000", NULL, &d) == -EINVAL,
		   "jump out of range refused: %s", jobcg_last_error()->message);
	}
	free(bad);
	bad = strdup(text);
	p = strstr(bad, "12: (55)");
	if (ok(p != NULL, "seed line 12 found")) {
		memcpy(p, "12: (57)", 8);
		struct jobcg_decoded *d2 = NULL;
		ok(jobcg_decode_data(bad, strlen(bad), "seed000", NULL, &d2) == -EINVAL &&
		       jobcg_last_error()->line > 0,
		   "opcode that does not match the text refused at line %u: %s",
		   jobcg_last_error()->line, jobcg_last_error()->message);
		jobcg_decoded_free(d2);
	}
	free(bad);
	jobcg_decoded_free(d);
	free(insns);
	free(text);
}

static const struct rule systemd_rules[] = {
    {'c', 1, 3, ACC_ALL, true},		  {'c', 1, 5, ACC_R, true},
    {'c', 136, ANY, ACC_R | ACC_W, true}, {'b', 8, 0, ACC_R, true},
    {'c', 195, 0, ACC_R | ACC_W, true},
};
static const char systemd_want[] = "c *:* -\n"
				   "# c *:*: a request with no access bits is denied\n"
				   "c 1:3 rwm\n"
				   "c 1:5 r\n"
				   "c 136:* rw\n"
				   "c 195:0 rw\n"
				   "b *:* -\n"
				   "# b *:*: a request with no access bits is denied\n"
				   "b 8:0 r\n";

static struct jobcg_decoded *test_systemd(bool jset)
{
	static struct prog p;
	struct refctx rc = {systemd_rules, ELEMENTS(systemd_rules), false, ref_allow_list};
	p.n = 0;
	gen_systemd(&p, systemd_rules, ELEMENTS(systemd_rules), jset);
	return decode_and_check(jset ? "systemd (JSET access test)" : "systemd (AND access test)",
				&p, &rc, systemd_want, NULL, NULL);
}

static void test_runc(void)
{
	static const struct rule rules[] = {
	    {'c', 5, 2, ACC_W, false},	  {'c', ANY, ANY, ACC_M, true},
	    {'b', ANY, ANY, ACC_M, true}, {'c', 1, 3, ACC_ALL, true},
	    {'c', 1, 5, ACC_ALL, true},	  {'c', 136, ANY, ACC_R | ACC_W, true},
	    {'c', 5, 2, ACC_ALL, true},	  {'c', 10, 200, ACC_R | ACC_W, true},
	};
	static struct prog p;
	struct refctx rc = {rules, ELEMENTS(rules), false, ref_first_match};
	gen_first_match(&p, rules, ELEMENTS(rules), false, RUNC);
	jobcg_decoded_free(
	    decode_and_check("runc", &p, &rc,
			     "c *:* m\n"
			     "c 1:3 rwm\n"
			     "c 1:5 rwm\n"
			     "c 5:2 rm\n"
			     "# c 5:2: read+write together is allowed, but w alone is not\n"
			     "# c 5:2: a request with no access bits is denied\n"
			     "c 10:200 rwm\n"
			     "c 136:* rwm\n"
			     "b *:* m\n",
			     NULL, NULL));
}

static void test_crun(void)
{
	static const struct rule rules[] = {
	    {'c', 195, 255, ACC_R | ACC_W, true},
	    {'c', 195, 0, ACC_R | ACC_W, true},
	    {'c', 195, ANY, ACC_M, true},
	    {'a', 1, 3, ACC_ALL, true},
	};
	static struct prog p;
	struct refctx rc = {rules, ELEMENTS(rules), false, ref_first_match};
	gen_first_match(&p, rules, ELEMENTS(rules), false, CRUN);
	jobcg_decoded_free(decode_and_check("crun (JMP32)", &p, &rc,
					    "c *:* -\n"
					    "# c *:*: a request with no access bits is denied\n"
					    "c 1:3 rwm\n"
					    "c 195:* m\n"
					    "c 195:0 rwm\n"
					    "c 195:255 rwm\n"
					    "b *:* -\n"
					    "# b *:*: a request with no access bits is denied\n"
					    "b 1:3 rwm\n",
					    NULL, NULL));
}

static void test_lxc(void)
{
	static const struct rule rules[] = {
	    {'c', 10, 229, ACC_ALL, false},
	    {'b', ANY, ANY, ACC_W, false},
	};
	static struct prog p;
	struct refctx rc = {rules, ELEMENTS(rules), true, ref_first_match};
	gen_first_match(&p, rules, ELEMENTS(rules), true, LXC);
	jobcg_decoded_free(
	    decode_and_check("LXC (deny list, narrow loads)", &p, &rc,
			     "c *:* rwm\n"
			     "c 10:229 -\n"
			     "# c 10:229: a request with no access bits is denied\n"
			     "b *:* rm\n"
			     "# b *:*: read+write together is allowed, but w alone is not\n"
			     "# b *:*: a request with no access bits is denied\n",
			     NULL, NULL));
}

static struct jobcg_decoded *test_slurm(void)
{
	static struct rule rules[9];
	static struct prog p;
	int n = 0;
	for (int g = 0; g < 8; g++)
		rules[n++] = (struct rule){'c', 195, g, ACC_ALL, g == 2 || g == 5};
	rules[n++] = (struct rule){'c', 195, 255, ACC_ALL, true};
	struct refctx rc = {rules, (size_t)n, true, ref_slurm};
	gen_slurm(&p, rules, (size_t)n);
	char want[2048] = "c *:* rwm\n";
	for (int g = 0; g < 8; g++)
		if (g != 2 && g != 5)
			snprintf(
			    want + strlen(want), sizeof(want) - strlen(want),
			    "c 195:%d -\n# c 195:%d: a request with no access bits is denied\n", g,
			    g);
	strcat(want, "b *:* rwm\n");
	return decode_and_check("Slurm (8 GPUs, 2 and 5 allowed)", &p, &rc, want, NULL, NULL);
}

static const void *htc_ctx[4];
static bool ref_htc(const void *u, char type, uint32_t major, uint32_t minor, unsigned acc)
{
	return ref_htcondor(type, major, minor, acc, 195, 2, 3, 255);
}

static void test_htcondor(void)
{
	static struct prog p;
	struct jobcg_decoded *d = NULL;
	gen_htcondor(&p, 195, 2, 3, 255);
	is_int(jobcg_decode_program(p.v, p.n, NULL, &d), 0, "HTCondor-like decodes");
	if (!d)
		return;
	is_str(render(d),
	       "c *:* rwm\n"
	       "c 195:* -\n# c 195:*: a request with no access bits is denied\n"
	       "c 195:2 rw\n"
	       "c 195:3 rw\n"
	       "c 195:255 rwm\n"
	       "b *:* rwm\n",
	       "HTCondor-like: range of GPUs rw, control device, rest of the major denied");
	uint32_t consts[] = {195, 2, 3, 255, 4};
	struct checker c = {.name = "HTCondor-like",
			    .insns = p.v,
			    .n = p.n,
			    .d = d,
			    .ref = ref_htc,
			    .refctx = htc_ctx};
	check_all(&c, consts, ELEMENTS(consts));
	jobcg_decoded_free(d);
}

static int snapd_layout(void *u, uint64_t ref, size_t *size, int *maj, int *min)
{
	(void)u;
	if (ref != 12)
		return -ENOENT;
	*size = 9, *maj = 1, *min = 5;
	return 0;
}

/* A layout that does not match what the program stores: the lookup is not trusted. */
static int wrong_layout(void *u, uint64_t ref, size_t *size, int *maj, int *min)
{
	(void)u;
	(void)ref;
	*size = 9, *maj = 5, *min = 1;
	return 0;
}

static void test_snapd(void)
{
	static struct prog p;
	static struct snapd_map m;
	struct jobcg_decoded *d = NULL;
	static const uint32_t hints[][2] = {{1, 3}, {1, 5}, {195, JOBCG_DEV_ANY}, {8, 0}};

	gen_snapd(&p, 12, false);
	m.one[0] = 1;
	snapd_add(&m, 2, 1, 3);
	snapd_add(&m, 2, 1, 5);
	snapd_add(&m, 2, 195, UINT32_MAX);
	snapd_add(&m, 1, 8, 0);
	is_int(jobcg_decode_program(p.v, p.n, NULL, &d), -EOPNOTSUPP,
	       "snapd map program without maps is opaque");
	ok(strstr(jobcg_last_error()->message, "map") != NULL, "reason names the map: %s",
	   jobcg_last_error()->message);
	struct jobcg_decode_env env = {.size = sizeof(env),
				       .map_lookup = snapd_lookup,
				       .userdata = &m,
				       .hints = hints,
				       .n_hints = ELEMENTS(hints),
				       .key_layout = wrong_layout};
	struct bpfvm_env venv = {.map_lookup = snapd_lookup, .userdata = &m};
	is_int(jobcg_decode_program(p.v, p.n, &env, &d), -EOPNOTSUPP,
	       "snapd map with a key layout the program does not use is opaque");
	ok(strstr(jobcg_last_error()->message, "not the field itself") != NULL, "says why: %s",
	   jobcg_last_error()->message);
	env.key_layout = NULL;
	is_int(jobcg_decode_program(p.v, p.n, &env, &d), -EOPNOTSUPP,
	       "snapd map without a known key layout is opaque");
	env.key_layout = snapd_layout;
	jobcg_decoded_free(decode_and_check("snapd (map lookups)", &p, NULL,
					    "c *:* -\n"
					    "# c *:*: a request with no access bits is denied\n"
					    "c 1:3 rwm\n"
					    "c 1:5 rwm\n"
					    "c 195:* rwm\n"
					    "b *:* -\n"
					    "# b *:*: a request with no access bits is denied\n"
					    "b 8:0 rwm\n",
					    &env, &venv));
}

static bool ref_and(const void *u, char type, uint32_t major, uint32_t minor, unsigned acc)
{
	struct refctx *const *rc = u;
	return ref_rules(rc[0], type, major, minor, acc) &&
	       ref_rules(rc[1], type, major, minor, acc);
}

static void test_intersect(struct jobcg_decoded *sd, struct jobcg_decoded *sl)
{
	struct jobcg_decoded *list[2] = {sd, sl}, *d = NULL;
	if (!sd || !sl)
		return;
	is_int(jobcg_decoded_intersect(list, 2, &d), 0, "systemd + Slurm programs combine");
	if (!d)
		return;
	/* systemd allows only 195:0 (rw) of the GPUs; Slurm denies 195:0: nothing of 195 left. */
	is_str(render(d),
	       "c *:* -\n"
	       "# c *:*: a request with no access bits is denied\n"
	       "c 1:3 rwm\n"
	       "c 1:5 r\n"
	       "c 136:* rw\n"
	       "b *:* -\n"
	       "# b *:*: a request with no access bits is denied\n"
	       "b 8:0 r\n",
	       "combined rules are the intersection");
	static struct rule slurm_rules[9];
	int n = 0;
	for (int g = 0; g < 8; g++)
		slurm_rules[n++] = (struct rule){'c', 195, g, ACC_ALL, g == 2 || g == 5};
	slurm_rules[n++] = (struct rule){'c', 195, 255, ACC_ALL, true};
	struct refctx a = {systemd_rules, ELEMENTS(systemd_rules), false, ref_allow_list};
	struct refctx b = {slurm_rules, (size_t)n, true, ref_slurm};
	struct refctx *both[2] = {&a, &b};
	unsigned bad = 0, total = 0;
	static const unsigned accs[] = {0, 1, 2, 4, 6};
	for (uint32_t ma = 0; ma < 200; ma++)
		for (uint32_t mi = 0; mi < 260; mi += (ma == 195 || ma == 1 ? 1 : 37))
			for (size_t k = 0; k < ELEMENTS(accs); k++)
				for (int t = 0; t < 2; t++) {
					char ty = t ? 'b' : 'c';
					total++;
					if (jobcg_decoded_allows(d, ty, ma, mi, accs[k]) !=
					    ref_and(both, ty, ma, mi, accs[k]))
						bad++;
				}
	ok(bad == 0, "combined decision equals both generators' decisions on %u requests", total);
	jobcg_decoded_free(d);
}

/* jobcg's own node program, decoded for one cgroup with its maps supplied through hooks. */
struct nodeworld {
	struct devprog_managed_key mkeys[8];
	size_t nm;
	struct devprog_policy_key pkeys[32];
	uint32_t pval[32][BPFVM_MAP_VALUE_MAX / 4];
	size_t np;
	uint32_t seven[BPFVM_MAP_VALUE_MAX / 4];
	uint64_t anc[16];
	int depth;
};

static const void *node_lookup(void *u, uint64_t ref, const void *key)
{
	struct nodeworld *w = u;
	if (ref == 11) {
		for (size_t k = 0; k < w->nm; k++)
			if (memcmp(&w->mkeys[k], key, sizeof(w->mkeys[k])) == 0)
				return w->seven;
	} else if (ref == 22) {
		for (size_t k = 0; k < w->np; k++)
			if (memcmp(&w->pkeys[k], key, sizeof(w->pkeys[k])) == 0)
				return w->pval[k];
	}
	return NULL;
}

static uint64_t node_cgid(void *u)
{
	struct nodeworld *w = u;
	return w->anc[w->depth];
}

static uint64_t node_anc(void *u, int level)
{
	struct nodeworld *w = u;
	return level >= 0 && level <= w->depth ? w->anc[level] : 0;
}

static int node_layout(void *u, uint64_t ref, size_t *size, int *maj, int *min)
{
	(void)u;
	if (ref == 11)
		*size = sizeof(struct devprog_managed_key), *maj = 4, *min = 8;
	else if (ref == 22)
		*size = sizeof(struct devprog_policy_key), *maj = 12, *min = 16;
	else
		return -ENOENT;
	return 0;
}

static void test_node_program(void)
{
	static struct nodeworld w;
	struct devprog_buf b = {0};
	const unsigned root_level = 2;
	struct jobcg_devrule managed[] = {{'c', 195, JOBCG_DEV_ANY, 7, true},
					  {'b', 8, JOBCG_DEV_ANY, 7, true}};
	struct jobcg_devrule grant[] = {
	    {'c', 195, 0, JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE, true},
	    {'c', 195, 1, JOBCG_DEV_ACC_READ, true},
	    {'b', 8, 16, JOBCG_DEV_ACC_ALL, true}};
	uint32_t hints[64][2];
	size_t nh = 0;

	if (!is_int(devprog_build_node(11, 22, root_level, 500 + root_level, &b), 0,
		    "node program built"))
		return;
	w.seven[0] = 7;
	for (size_t k = 0; k < ELEMENTS(managed); k++)
		w.nm += devprog_rule_keys(&managed[k], &w.mkeys[w.nm]);
	/* The job (level root+1) is constrained; we inspect its step (root+2). */
	w.depth = (int)root_level + 2;
	for (int l = 0; l <= w.depth; l++)
		w.anc[l] = 500 + (uint64_t)l;
	uint64_t jobid = w.anc[root_level + 1];
	uint32_t acc[8];
	w.np = devprog_policy_entries(jobid, grant, ELEMENTS(grant), w.pkeys, acc);
	for (size_t k = 0; k < w.np; k++)
		w.pval[k][0] = acc[k];
	w.pkeys[w.np] = (struct devprog_policy_key){.cgroup_id = jobid};
	w.pval[w.np++][0] = 1; /* marker: level 1 */
	/* Hints as `jobcg devices` takes them from the live maps' keys. */
	for (size_t k = 0; k < w.nm; k++)
		hints[nh][0] = w.mkeys[k].major, hints[nh++][1] = w.mkeys[k].minor;
	for (size_t k = 0; k < w.np; k++)
		hints[nh][0] = w.pkeys[k].major, hints[nh++][1] = w.pkeys[k].minor;

	struct jobcg_decode_env env = {.size = sizeof(env),
				       .cgroup_id = node_cgid,
				       .ancestor_cgroup_id = node_anc,
				       .map_lookup = node_lookup,
				       .userdata = &w,
				       .hints = (const uint32_t(*)[2])hints,
				       .n_hints = nh,
				       .key_layout = node_layout};
	struct jobcg_decoded *d = NULL;
	if (is_int(jobcg_decode_program(b.insns, b.n, &env, &d), 0,
		   "node program decodes for a job's step")) {
		is_str(render(d),
		       "c *:* rwm\n"
		       "c 195:* -\n"
		       "c 195:0 rw\n"
		       "c 195:1 r\n"
		       "b *:* rwm\n"
		       "b 8:* -\n"
		       "b 8:16 rwm\n",
		       "node program: the job's grants, managed devices denied, others allowed");
		unsigned bad = 0, total = 0;
		static const unsigned accs[] = {0, 1, 2, 4, 6};
		for (int t = 0; t < 2; t++)
			for (uint32_t ma = 0; ma < 260;
			     ma += (ma < 7 || (ma > 190 && ma < 200) ? 1 : 13))
				for (uint32_t mi = 0; mi < 40; mi++)
					for (size_t k = 0; k < ELEMENTS(accs); k++) {
						bool want = devprog_decide(
						    managed, ELEMENTS(managed), grant,
						    ELEMENTS(grant), t ? 1 : 2, ma, mi, accs[k]);
						total++;
						bad += jobcg_decoded_allows(d, t ? 'b' : 'c', ma,
									    mi, accs[k]) != want;
					}
		ok(bad == 0, "node program decode equals devprog_decide on %u requests (%u differ)",
		   total, bad);
		jobcg_decoded_free(d);
	}
	/* Without the maps it is opaque, with the reason. */
	is_int(jobcg_decode_program(b.insns, b.n, NULL, &d), -EOPNOTSUPP,
	       "node program without maps is opaque");
	devprog_buf_done(&b);
}

static void test_blowup_and_opaque(void)
{
	/* A program comparing the minor against 4096 constants still decodes (per-major cells). */
	static struct prog p;
	static struct rule rules[1024];
	for (int k = 0; k < 1024; k++)
		rules[k] = (struct rule){'c', 240, k, ACC_ALL, k % 2 == 0};
	gen_slurm(&p, rules, 1024);
	struct jobcg_decoded *d = NULL;
	is_int(jobcg_decode_program(p.v, p.n, NULL, &d), 0, "1024-device program decodes");
	if (d) {
		ok(!jobcg_decoded_allows(d, 'c', 240, 1023, ACC_R) &&
		       jobcg_decoded_allows(d, 'c', 240, 1022, ACC_R) &&
		       jobcg_decoded_allows(d, 'c', 240, 1024, ACC_R),
		   "1024-device decode answers at the edges (%llu runs)",
		   (unsigned long long)jobcg_decoded_runs(d));
		jobcg_decoded_free(d);
	}
	/* A masked comparison cannot be partitioned exactly: the result says so. */
	struct bpf_insn masked[] = {
	    LDX(BPF_W, 4, 1, 4),
	    ALU32_IMM(BPF_AND, 4, 0xff00),
	    JMP_IMM(BPF_JNE, 4, 0xc300, 2),
	    MOV64_IMM(0, 0),
	    EXIT(),
	    MOV64_IMM(0, 1),
	    EXIT(),
	};
	if (is_int(jobcg_decode_program(masked, NINSNS(masked), NULL, &d), 0,
		   "masked program decodes")) {
		ok(strstr(render(d), "# approximate:") != NULL,
		   "masked compare flagged approximate");
		jobcg_decoded_free(d);
	}
	/* A range of majors and a minor rule for every major become notes, not wrong rules. */
	/* Minor 7 of any major: deny; majors 1000..1999: deny. */
	struct bpf_insn ranges2[] = {
	    LDX(BPF_W, 4, 1, 4),
	    LDX(BPF_W, 5, 1, 8),
	    JMP_IMM(BPF_JEQ, 5, 7, 4),
	    JMP_IMM(BPF_JLT, 4, 1000, 5),
	    JMP_IMM(BPF_JGT, 4, 1999, 4),
	    MOV64_IMM(0, 0),
	    EXIT(),
	    MOV64_IMM(0, 0),
	    EXIT(),
	    MOV64_IMM(0, 1),
	    EXIT(),
	};
	if (is_int(jobcg_decode_program(ranges2, NINSNS(ranges2), NULL, &d), 0,
		   "range program decodes")) {
		const char *txt = render(d);
		ok(strstr(txt, "# c 1000-1999:* -") && strstr(txt, "# c *:7 -") &&
		       strstr(txt, "c *:* rwm\n"),
		   "major range and every-major minor rule reported as notes");
		ok(!strstr(txt, "0-999"), "ranges behaving like the default get no note");
		ok(!jobcg_decoded_allows(d, 'c', 1500, 3, 2) &&
		       jobcg_decoded_allows(d, 'c', 2000, 3, 2) &&
		       !jobcg_decoded_allows(d, 'c', 5, 7, 2),
		   "range program answers exactly");
		jobcg_decoded_free(d);
	}
	/* Step limit reaches the caller as -ELOOP. */
	struct bpf_insn loop[] = {LDX(BPF_W, 2, 1, 4), JMP_IMM(BPF_JNE, 2, 7, -1), MOV64_IMM(0, 1),
				  EXIT()};
	is_int(jobcg_decode_program(loop, NINSNS(loop), NULL, &d), -ELOOP,
	       "looping program hits the step limit");
	struct bpf_insn cg[] = {CALL(BPF_FUNC_get_current_cgroup_id), EXIT()};
	is_int(jobcg_decode_program(cg, NINSNS(cg), NULL, &d), -EOPNOTSUPP,
	       "cgroup-dependent program is opaque");
}

/* ---- the review's cases: never a wrong allow or deny without a flag ---- */

static uint64_t anc_ids(void *u, int level)
{
	(void)u;
	return level < 3 ? 100 + (uint64_t)level : 0;
}

static uint8_t tbl_one[BPFVM_MAP_VALUE_MAX] = {1};
static const void *tbl_lookup(void *u, uint64_t ref, const void *key)
{
	uint32_t k[3];
	(void)u;
	memcpy(k, key, sizeof(k));
	if (ref == 7) /* array keyed by the minor: A[5] = 1 */
		return k[0] == 5 ? tbl_one : tbl_one + 1;
	if (ref == 8) /* hash keyed {major, minor, type}: {1, 5, 2} */
		return k[0] == 1 && k[1] == 5 && k[2] == 2 ? tbl_one : NULL;
	return NULL;
}

/* The jobcg 12-byte key guess ({type, major, minor}) for a map laid out otherwise. */
static int guess_layout(void *u, uint64_t ref, size_t *size, int *maj, int *min)
{
	(void)u;
	(void)ref;
	*size = 12, *maj = 4, *min = 8;
	return 0;
}

static int decode_rc(const struct bpf_insn *p, size_t n, const struct jobcg_decode_env *env,
		     struct jobcg_decoded **d)
{
	*d = NULL;
	return jobcg_decode_program(p, n, env, d);
}

static void test_review_cases(void)
{
	struct jobcg_decoded *d = NULL;
	static const uint32_t t3hints[][2] = {{5, 2}}; /* what a 12-byte guess reads from {1,5,2} */
	struct jobcg_decode_env env = {.size = sizeof(env),
				       .ancestor_cgroup_id = anc_ids,
				       .map_lookup = tbl_lookup,
				       .key_layout = guess_layout,
				       .hints = t3hints,
				       .n_hints = 1};

	/* T1: a signed 32-bit compare of the minor against 0. */
	struct bpf_insn t1[] = {LDX(BPF_W, 2, 1, 8), JMP32_IMM(BPF_JSGT, 2, 0, 2),
				MOV64_IMM(0, 0),     EXIT(),
				MOV64_IMM(0, 1),     EXIT()};
	if (is_int(decode_rc(t1, NINSNS(t1), NULL, &d), 0, "T1 decodes")) {
		ok(jobcg_decoded_allows(d, 'c', 1, 5, ACC_R) &&
		       jobcg_decoded_allows(d, 'c', 1, 0xfffff, ACC_R | ACC_W) &&
		       !jobcg_decoded_allows(d, 'c', 1, 0, ACC_R) && !jobcg_decoded_approximate(d),
		   "T1: minors 1.. allowed, 0 denied, exactly (a field is never negative)");
		is_str(render(d),
		       "c *:* rwm\n# c *:0 -  (these minors of every major not listed)\n"
		       "# c *:0: a request with no access bits is denied\n"
		       "b *:* rwm\n# b *:0 -  (these minors of every major not listed)\n"
		       "# b *:0: a request with no access bits is denied\n",
		       "T1: rules");
		jobcg_decoded_free(d);
	}
	/* T7: r0 = minor & 1. */
	struct bpf_insn t7[] = {LDX(BPF_W, 0, 1, 8), ALU64_IMM(BPF_AND, 0, 1), EXIT()};
	is_int(decode_rc(t7, NINSNS(t7), NULL, &d), -EOPNOTSUPP,
	       "T7: verdict from the minor: opaque");
	ok(strstr(jobcg_last_error()->message, "returns a value computed") != NULL, "T7: %s",
	   jobcg_last_error()->message);
	/* T9: a table on the stack indexed by the minor. */
	struct bpf_insn t9[] = {
	    ST(BPF_DW, 10, -16, 0),	ST(BPF_DW, 10, -8, 1),
	    LDX(BPF_W, 2, 1, 8),	ALU64_IMM(BPF_AND, 2, 1),
	    ALU64_IMM(BPF_LSH, 2, 3),	MOV64_REG(3, 10),
	    ALU64_IMM(BPF_ADD, 3, -16), ALU64_REG(BPF_ADD, 3, 2),
	    LDX(BPF_DW, 0, 3, 0),	EXIT(),
	};
	is_int(decode_rc(t9, NINSNS(t9), NULL, &d), -EOPNOTSUPP, "T9: stack table: opaque");
	/* T8: allow if the ancestor at level (minor) exists. */
	struct bpf_insn t8[] = {LDX(BPF_W, 1, 1, 8), CALL(BPF_FUNC_get_current_ancestor_cgroup_id),
				EXIT()};
	is_int(decode_rc(t8, NINSNS(t8), &env, &d), -EOPNOTSUPP,
	       "T8: minor as helper argument: opaque");
	/* T2: an array map indexed by the minor. */
	struct bpf_insn t2[] = {
	    LDX(BPF_W, 2, 1, 8),
	    STX(BPF_W, 10, 2, -4),
	    MOV64_REG(2, 10),
	    ALU64_IMM(BPF_ADD, 2, -4),
	    LD_MAP(1, 7),
	    CALL(BPF_FUNC_map_lookup_elem),
	    JMP_IMM(BPF_JEQ, 0, 0, 3),
	    LDX(BPF_B, 0, 0, 0),
	    JMP_IMM(BPF_JEQ, 0, 0, 1),
	    EXIT(),
	    MOV64_IMM(0, 0),
	    EXIT(),
	};
	is_int(decode_rc(t2, NINSNS(t2), &env, &d), -EOPNOTSUPP, "T2: array map by minor: opaque");
	/* T3: hash key {major, minor, type}, while the 12-byte guess is {type, major, minor}. */
	struct bpf_insn t3[] = {
	    LDX(BPF_W, 2, 1, 4),
	    STX(BPF_W, 10, 2, -12),
	    LDX(BPF_W, 2, 1, 8),
	    STX(BPF_W, 10, 2, -8),
	    LDX(BPF_W, 2, 1, 0),
	    ALU64_IMM(BPF_AND, 2, 0xffff),
	    STX(BPF_W, 10, 2, -4),
	    MOV64_REG(2, 10),
	    ALU64_IMM(BPF_ADD, 2, -12),
	    LD_MAP(1, 8),
	    CALL(BPF_FUNC_map_lookup_elem),
	    JMP_IMM(BPF_JEQ, 0, 0, 2),
	    MOV64_IMM(0, 1),
	    EXIT(),
	    MOV64_IMM(0, 0),
	    EXIT(),
	};
	is_int(decode_rc(t3, NINSNS(t3), &env, &d), -EOPNOTSUPP,
	       "T3: key layout other than the one the hints come from: opaque");
	/* T5: minor + 1 == 6: sampled, flagged approximate for every consumer. */
	struct bpf_insn t5[] = {LDX(BPF_W, 2, 1, 8),
				ALU64_IMM(BPF_ADD, 2, 1),
				JMP_IMM(BPF_JEQ, 2, 6, 2),
				MOV64_IMM(0, 0),
				EXIT(),
				MOV64_IMM(0, 1),
				EXIT()};
	if (is_int(decode_rc(t5, NINSNS(t5), NULL, &d), 0, "T5 decodes")) {
		ok(jobcg_decoded_approximate(d), "T5: approximate, through the accessor");
		struct jobcg_decoded *list[1] = {d}, *c = NULL;
		if (is_int(jobcg_decoded_intersect(list, 1, &c), 0, "T5 combines"))
			ok(jobcg_decoded_approximate(c), "T5: a combination stays approximate");
		jobcg_decoded_free(c);
		jobcg_decoded_free(d);
	}
	/* Minor 3 of every major except major 7: the listing must say 7:3 is denied. */
	struct bpf_insn exc[] = {LDX(BPF_W, 4, 1, 4),	    LDX(BPF_W, 5, 1, 8),
				 JMP_IMM(BPF_JNE, 5, 3, 3), JMP_IMM(BPF_JEQ, 4, 7, 2),
				 MOV64_IMM(0, 1),	    EXIT(),
				 MOV64_IMM(0, 0),	    EXIT()};
	if (is_int(decode_rc(exc, NINSNS(exc), NULL, &d), 0, "exception program decodes")) {
		const char *txt = render(d);
		ok(strstr(txt, "c 7:3 -\n") != NULL, "the listing names the exception c 7:3 -:\n%s",
		   txt);
		is_int(lines_allow(d, 'c', 7, 3, ACC_R), 0,
		       "the most specific line for 7:3 denies");
		is_int(lines_allow(d, 'c', 6, 3, ACC_R), 0,
		       "6:3 has no line of its own: the every-major note covers it");
		ok(!jobcg_decoded_allows(d, 'c', 7, 3, ACC_R) &&
		       jobcg_decoded_allows(d, 'c', 6, 3, ACC_R),
		   "the decode itself is right");
		jobcg_decoded_free(d);
	}
	/* A program with 400 major and 400 minor constants stops at the step budget. */
	static struct prog big;
	big.n = 0;
	emit(&big, LDX(BPF_W, 4, 1, 4));
	emit(&big, LDX(BPF_W, 5, 1, 8));
	for (int k = 0; k < 400; k++) {
		emit(&big, JMP_IMM(BPF_JEQ, 4, 10 + k, 0));
		emit(&big, JMP_IMM(BPF_JEQ, 5, 10 + k, 0));
	}
	emit(&big, MOV64_IMM(0, 1));
	emit(&big, EXIT());
	struct jobcg_decode_env benv = {.size = sizeof(benv), .max_total_steps = 2000000};
	is_int(decode_rc(big.v, big.n, &benv, &d), -E2BIG, "big program: step budget reached");
	ok(strstr(jobcg_last_error()->message, "budget") != NULL, "says so: %s",
	   jobcg_last_error()->message);
	benv.max_total_steps = 0;
	benv.max_ms = 300;
	is_int(decode_rc(big.v, big.n, &benv, &d), -E2BIG, "big program: time budget reached");
	jobcg_decoded_free(d);
}

/* Ancestor levels count from the real root (id 1): a cgroup namespace or a subtree mount shows
 * another cgroup as the mount's root, whose levels are not the kernel's. */
static void test_levels(void)
{
	ok(inspect_levels_real(1), "a mount of the real root: levels are the kernel's");
	ok(!inspect_levels_real(4242), "a mount whose root is another cgroup: levels unknown");
	ok(!inspect_levels_real(0), "no id: levels unknown");
}

static void test_json_errors(void)
{
	struct bpf_insn *insns = NULL;
	size_t n = 0;
	const char *missing = "[{\"disasm\": \"(b7) r0 = 1\"}, {\"opcodes\": []}, "
			      "{\"disasm\": \"(95) exit\"}]";
	is_int(jobcg_decode_parse(missing, strlen(missing), "j", &insns, &n), -EINVAL,
	       "JSON: an element without disasm is an error");
	ok(strstr(jobcg_last_error()->message, "element 1") != NULL, "names it: %s",
	   jobcg_last_error()->message);
	const char *trunc = "[{\"disasm\": \"(b7) r0 = 1\"}, {\"disasm\": \"(95) ex";
	is_int(jobcg_decode_parse(trunc, strlen(trunc), "j", &insns, &n), -EINVAL,
	       "JSON: truncated input is an error");
	ok(strstr(jobcg_last_error()->message, "invalid JSON") != NULL, "as JSON: %s",
	   jobcg_last_error()->message);
	const char *good = "[{\"disasm\": \"(b7) r0 = 1\"}, {\"disasm\": \"(95) exit\"}]\n";
	is_int(jobcg_decode_parse(good, strlen(good), "j", &insns, &n), 0, "JSON: a dump parses");
	is_int(n, 2, "JSON: two instructions");
	free(insns);
}

static void test_raw_and_text_errors(void)
{
	struct bpf_insn *insns = NULL;
	size_t n = 0;
	struct bpf_insn raw[] = {MOV64_IMM(0, 1), EXIT()};
	is_int(bpftext_parse_raw(raw, sizeof(raw) - 3, "f", &insns, &n), -EINVAL,
	       "raw: truncated instruction");
	ok(strstr(jobcg_last_error()->message, "instruction 1") != NULL, "names it: %s",
	   jobcg_last_error()->message);
	is_int(bpftext_parse_raw(raw, sizeof(raw), "f", &insns, &n), 0, "raw: whole program");
	is_int(n, 2, "raw: two instructions");
	free(insns);
	ok(bpftext_looks_raw(raw, sizeof(raw)), "raw detected");
	const char *t = "0: (b7) r0 = 1\n1: (95) exit\n";
	ok(!bpftext_looks_raw(t, strlen(t)), "text detected");

	static const struct {
		const char *text, *what;
		unsigned line;
	} bad[] = {
	    {"0: (b7) r0 = 1\n2: (95) exit\n", "gap in instruction numbers", 2},
	    {"0: (b7) r0 = 1\n1: (95) exit please\n", "trailing junk", 2},
	    {"0: (b7) w0 = 1\n1: (95) exit\n", "w register in a 64-bit op", 1},
	    {"0: (b7) r12 = 1\n1: (95) exit\n", "register 12", 1},
	    {"0: (55) if r2 != 0x2 goto pc+40000\n1: (95) exit\n", "offset too large", 1},
	    {"0: (15) if r2 != 0x2 goto pc+0\n1: (95) exit\n", "operator does not match opcode", 1},
	    {"0: (ff) r0 = 1\n1: (95) exit\n", "unknown opcode", 1},
	    {"0: (18) r1 = map[id:5\n2: (95) exit\n", "unterminated map reference", 1},
	};
	for (size_t k = 0; k < ELEMENTS(bad); k++) {
		int r = bpftext_parse(bad[k].text, strlen(bad[k].text), "in", &insns, &n);
		ok(r == -EINVAL && jobcg_last_error()->line == bad[k].line,
		   "text: %s refused at line %u (%s)", bad[k].what, jobcg_last_error()->line,
		   jobcg_last_error()->message);
	}
	const char *oor = "0: (55) if r2 != 0x2 goto pc+4\n1: (95) exit\n";
	is_int(bpftext_parse(oor, strlen(oor), "in", &insns, &n), -EINVAL,
	       "text: jump out of range");

	/* Forms bpftool prints, read back to the right instructions. */
	const char *forms = "0: (61) r2 = *(u32 *)(r1 +0)\n"
			    "1: (54) w2 &= 65535\n"
			    "2: (bc) w1 = w3\n"
			    "3: (5e) if w1 != w3 goto pc+9\n"
			    "4: (56) if w2 != 0x2 goto pc+8\n"
			    "5: (18) r1 = map[id:12]\n"
			    "7: (85) call bpf_get_current_cgroup_id#123456\n"
			    "8: (85) call __htab_map_lookup_elem#-1234\n"
			    "9: (7b) *(u64 *)(r10 -8) = r1\n"
			    "10: (dc) r2 = be16 r2\n"
			    "11: (c5) if r2 s< 0xffffffff goto pc+1\n"
			    "12: (b4) w11 = 1515852340\n"
			    "13: (18) r0 = 0x100000001\n"
			    "15: (95) exit\n";
	is_int(bpftext_parse(forms, strlen(forms), "forms", &insns, &n), 0, "bpftool forms parse");
	if (insns) {
		is_int(n, 16, "16 slots (two ld_imm64)");
		is_int(insns[1].code, BPF_ALU | BPF_AND | BPF_K, "w2 &= 65535 opcode");
		is_int(insns[1].imm, 65535, "w2 &= 65535 imm");
		is_int(insns[3].code, BPF_JMP32 | BPF_JNE | BPF_X, "jmp32 reg");
		is_int(insns[5].src_reg, BPF_PSEUDO_MAP_FD, "map reference");
		is_int(insns[5].imm, 12, "map id");
		is_int(insns[7].imm, BPF_FUNC_get_current_cgroup_id, "helper by name");
		is_int(insns[8].imm, BPFVM_CALL_HTAB_ELEM, "inlined htab lookup by name");
		is_int(insns[9].off, -8, "store offset");
		is_int(insns[10].imm, 16, "be16");
		is_int(insns[11].imm, -1, "0xffffffff immediate is -1");
		is_int(insns[12].dst_reg, 11, "r11 of constant blinding");
		is_int((uint32_t)insns[14].imm, 1, "ld_imm64 high half");
		free(insns);
	}
}

/* A process's /proc/PID/cgroup on a host with a v1 devices hierarchy. */
static void test_proc_cgroup_v1(void)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
	    {"12:devices:/user.slice\n11:memory:/user.slice\n0::/user.slice/x\n", "/user.slice"},
	    {"5:cpu,devices,pids:/a/b\n", "/a/b"},
	    {"5:devices:/\n", ""},
	    {"5:devices:/last-line-without-newline", "/last-line-without-newline"},
	    {"5:devices:/..x/y..\n", "/..x/y.."},
	    {"0::/only/v2\n", NULL},
	    {"5:devicesx:/a\n6:xdevices:/b\n", NULL},
	    {"5:devices:/../../x\n", NULL}, /* another cgroup namespace's view */
	    {"5:devices:/a/..\n", NULL},
	    {"5:devices:relative\n", NULL},
	    {"5:devices:\n", NULL},
	    {"5:name=devices:/a\n", NULL},
	    {"", NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[PATH_MAX] = "untouched";
		bool found = inspect_proc_cgroup_v1_devices(cases[i].text, path);

		ok(cases[i].want ? found && strcmp(path, cases[i].want) == 0 : !found,
		   "/proc/PID/cgroup case %zu: %s '%s'", i, found ? "found" : "none",
		   found ? path : "");
	}
}

int main(void)
{
	test_proc_cgroup_v1();
	test_seed000();
	struct jobcg_decoded *sd = test_systemd(false);
	jobcg_decoded_free(test_systemd(true));
	test_runc();
	test_crun();
	test_lxc();
	struct jobcg_decoded *sl = test_slurm();
	test_htcondor();
	test_snapd();
	test_node_program();
	test_intersect(sd, sl);
	jobcg_decoded_free(sd);
	jobcg_decoded_free(sl);
	test_blowup_and_opaque();
	test_raw_and_text_errors();
	test_review_cases();
	test_json_errors();
	test_levels();
	return tap_done();
}
