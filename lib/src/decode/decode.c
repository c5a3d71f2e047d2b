/* jobcg: decode a device program by executing it on one request from every cell of the input
 * space that its own comparisons define, then compress the answers into device rules. */
#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bpftext.h"
#include "bpfvm.h"
#include "jobcg/decode.h"
#include "log.h"
#include "util.h"

#define DEFAULT_STEPS 100000
#define MAX_RUNS      20000000ull /* executions per decode; beyond that the input space is refused */
/* Instructions executed in all runs of one decode, and its wall time: a program with thousands
 * of distinct devices would otherwise keep who-has or devices busy for hours. */
#define DEFAULT_TOTAL_STEPS 200000000ull
#define DEFAULT_MAX_MS	    20000
/* The kernel's dev_t has 12 bits of major and 20 of minor (MINORBITS in linux/kdev_t.h):
 * no request outside these ranges reaches a device program. */
#define MAJOR_MAX  0xfffu
#define MINOR_MAX  0xfffffu
#define MAX_ROUNDS 64  /* rounds of constant discovery */
#define ENUM_LIMIT 256 /* a cell this small is listed value by value */
/* Minors are listed one by one only in runs this short: a range comparison on minors, repeated
 * for every major it applies to, would otherwise print thousands of lines (one per minor and
 * major); longer runs become one note each. */
#define MINOR_ENUM_LIMIT 32
#define N_TYPES		 2

/* The access values the kernel passes: none, m, r, w, rw (mknod never combines with r/w). */
static const unsigned accesses[] = {0, 1, 2, 4, 6};
#define MASK_BIT(acc) (1u << (acc)) /* bit per access value in a cell's allow mask */

static const uint32_t type_value[N_TYPES] = {2, 1}; /* BPF_DEVCG_DEV_CHAR, _BLOCK */
static const char type_char[N_TYPES] = {'c', 'b'};

struct ncell {
	uint32_t lo, hi;
	uint8_t allow;
};

struct mcell {
	uint32_t lo, hi;
	struct ncell *n;
	size_t nn;
};

struct part {
	struct mcell *m;
	size_t nm;
};

struct jobcg_decoded {
	struct part t[N_TYPES];
	bool approximate;
	uint64_t runs;
	struct jobcg_decoded_line *lines;
	size_t nlines, caplines;
	char **notes; /* owned strings the lines point to */
};

/* A sorted set of uint32 points. */
struct pts {
	uint32_t *v;
	size_t n, cap;
};

static bool pts_has(const struct pts *p, uint32_t x, size_t *ret_pos)
{
	size_t lo = 0, hi = p->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (p->v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (ret_pos)
		*ret_pos = lo;
	return lo < p->n && p->v[lo] == x;
}

static int pts_add(struct pts *p, uint32_t x)
{
	size_t pos;

	if (pts_has(p, x, &pos))
		return 0;
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 16;
		uint32_t *t = realloc(p->v, nc * sizeof(*t));
		if (!t)
			return -ENOMEM;
		p->v = t;
		p->cap = nc;
	}
	memmove(p->v + pos + 1, p->v + pos, (p->n - pos) * sizeof(*p->v));
	p->v[pos] = x;
	p->n++;
	return 1;
}

static void pts_done(struct pts *p)
{
	free(p->v);
	*p = (struct pts){0};
}

/* Cells of a point set: each point alone, and the gaps between points. */
struct range {
	uint32_t lo, hi;
};

static int pts_cells(const struct pts *p, uint32_t max, struct range **ret, size_t *ret_n)
{
	struct range *c = malloc((2 * p->n + 1) * sizeof(*c));
	size_t n = 0;
	uint64_t next = 0;

	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < p->n && p->v[i] <= max; i++) {
		if (p->v[i] > next)
			c[n++] = (struct range){(uint32_t)next, p->v[i] - 1};
		c[n++] = (struct range){p->v[i], p->v[i]};
		next = (uint64_t)p->v[i] + 1;
	}
	if (next <= max)
		c[n++] = (struct range){(uint32_t)next, max};
	*ret = c;
	*ret_n = n;
	return 0;
}

static void part_done(struct part *p)
{
	for (size_t i = 0; i < p->nm; i++)
		free(p->m[i].n);
	free(p->m);
	*p = (struct part){0};
}

JOBCG_EXPORT void jobcg_decoded_free(struct jobcg_decoded *d)
{
	if (!d)
		return;
	for (int t = 0; t < N_TYPES; t++)
		part_done(&d->t[t]);
	free(d->lines);
	strv_free(d->notes);
	free(d);
}

/* ---- exploration ---- */

/*
 * The value a cell is executed with. The middle of a gap rather than its edge: a linear
 * program compares a value that matches nothing against all of its constants, so one round
 * finds them all instead of one per round.
 */
static uint32_t rep_of(uint32_t lo, uint32_t hi)
{
	return (uint32_t)(lo + ((uint64_t)hi - lo) / 2);
}

struct explore {
	const struct bpf_insn *insns;
	size_t n;
	struct bpfvm_env env;
	uint64_t max_steps;
	const struct jobcg_decode_env *denv;
	uint64_t runs;
	uint64_t steps, max_total_steps;
	struct timespec deadline;
	bool approximate;
	/* Filled by the trace hook during one run. */
	struct bpfvm_devctx ctx;
	struct pts *majors_found, *minors_found;
	int err;
};

static void on_compare(void *u, uint8_t op, bool is32, uint64_t a, uint8_t ta, uint64_t b,
		       uint8_t tb)
{
	struct explore *e = u;
	uint64_t konst;
	uint8_t t;
	int r = 0;

	/* Only field-against-constant comparisons partition the space; type and access are
	 * enumerated completely anyway. */
	if (ta && tb) {
		if ((ta | tb) & (BPFVM_T_MAJOR | BPFVM_T_MINOR))
			e->approximate = true;
		return;
	}
	t = ta ? ta : tb;
	konst = ta ? b : a;
	bool exact = t & BPFVM_T_EXACT;
	t &= (uint8_t)~BPFVM_T_EXACT;
	if (!(t & (BPFVM_T_MAJOR | BPFVM_T_MINOR)))
		return;
	if (t != BPFVM_T_MAJOR && t != BPFVM_T_MINOR) {
		e->approximate = true; /* mixes fields (e.g. a combined dev_t) */
		return;
	}
	/*
	 * Exact only on the field itself: its values are 0..MAJOR_MAX or 0..MINOR_MAX, never
	 * negative as 32 or 64 bits, so signed and unsigned orders agree and a cell between two
	 * constants is uniform. Anything computed from it (masked, shifted, offset) is sampled.
	 */
	if (!exact || op == BPF_JSET)
		e->approximate = true;
	if (is32)
		konst = (uint32_t)konst;
	if (konst > (t == BPFVM_T_MAJOR ? MAJOR_MAX : MINOR_MAX))
		return; /* above every value the field can have: ordering against it is uniform */
	r = pts_add(t == BPFVM_T_MAJOR ? e->majors_found : e->minors_found, (uint32_t)konst);
	if (r < 0)
		e->err = r;
}

/* A lookup whose key depends on the device: trusted only when the program put the unchanged
 * major (and minor) exactly where the map's layout has them, the places the hints come from. */
static int on_key(void *u, uint64_t map_ref, const uint8_t *taint, const uint8_t *tag, size_t len)
{
	struct explore *e = u;
	int moff = -1, noff = -1;
	size_t ksize = 0;

	if (!e->denv || !e->denv->key_layout ||
	    e->denv->key_layout(e->denv->userdata, map_ref, &ksize, &moff, &noff) < 0 ||
	    ksize > len)
		return error_set(-EOPNOTSUPP,
				 "looks up map %llu with a key built from the device's major/minor "
				 "in a layout decoding does not know",
				 (unsigned long long)map_ref);
	bool have_major = moff >= 0 && (size_t)moff + 4 <= ksize,
	     have_minor = noff >= 0 && (size_t)noff + 4 <= ksize;
	for (int b = 0; b < 4; b++) {
		have_major = have_major && tag[moff + b] == BPFVM_TAG(BPFVM_T_MAJOR, b);
		have_minor = have_minor && tag[noff + b] == BPFVM_TAG(BPFVM_T_MINOR, b);
	}
	for (size_t b = 0; b < ksize; b++) {
		if (!(taint[b] & BPFVM_T_DEVICE))
			continue;
		bool in_major = have_major && b >= (size_t)moff && b < (size_t)moff + 4,
		     in_minor = have_minor && b >= (size_t)noff && b < (size_t)noff + 4;
		if (!in_major && !in_minor)
			return error_set(-EOPNOTSUPP,
					 "looks up map %llu with key byte %zu computed from the "
					 "device's major/minor, not the field itself where the "
					 "map's layout has it",
					 (unsigned long long)map_ref, b);
	}
	/* Minor hints are taken per major: a key with the minor but not the major is not covered.
	 */
	if (have_minor && !have_major)
		return error_set(-EOPNOTSUPP,
				 "looks up map %llu by minor without the major; its devices cannot "
				 "be partitioned",
				 (unsigned long long)map_ref);
	return 0;
}

static bool past_deadline(const struct timespec *d)
{
	struct timespec now;

	if (!d->tv_sec)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

static int run_one(struct explore *e, int type, uint32_t major, uint32_t minor, unsigned access,
		   bool *ret_allow)
{
	struct bpfvm_trace tr = {
	    .compare = on_compare, .userdata = e, .strict = true, .key = on_key};
	uint64_t r0 = 0;
	int r;

	if (++e->runs > MAX_RUNS)
		return error_set(-E2BIG,
				 "the program needs more than %llu executions to decode (too many "
				 "distinct devices)",
				 (unsigned long long)MAX_RUNS);
	if (e->steps > e->max_total_steps || ((e->runs & 1023) == 0 && past_deadline(&e->deadline)))
		return error_set(-E2BIG,
				 "decoding budget exhausted after %llu runs (%llu instructions%s): "
				 "too many distinct devices to list; ask about single devices "
				 "(who-has) instead",
				 (unsigned long long)e->runs, (unsigned long long)e->steps,
				 e->steps > e->max_total_steps ? "" : ", time limit");
	e->ctx = (struct bpfvm_devctx){
	    .access_type = (access << 16) | type_value[type], .major = major, .minor = minor};
	r = bpfvm_run_checked(e->insns, e->n, &e->ctx, &e->env, &tr, e->max_steps, &r0);
	e->steps += tr.steps;
	if (r < 0) {
		jobcg_error_prefix("running the program on %c %u:%u access %u", type_char[type],
				   major, minor, access);
		return r;
	}
	if (e->err < 0)
		return e->err;
	/* The kernel allows on any non-zero return (cgroup programs return 0 or 1). */
	*ret_allow = (uint32_t)r0 != 0;
	return 0;
}

/* Round @round of finding the values the program tells apart: the cells of @p, replacing those
 * of the last round; -E2BIG once @what has kept changing for MAX_ROUNDS rounds. */
static int round_cells(const struct pts *p, uint32_t max, int round, const char *what,
		       struct range **cells, size_t *ncells)
{
	if (round >= MAX_ROUNDS)
		return error_set(-E2BIG, "%s of the program did not settle after %d rounds", what,
				 MAX_ROUNDS);
	free(*cells);
	*cells = NULL;
	return pts_cells(p, max, cells, ncells);
}

/* Explore one major cell: learn its minor cells and their allow masks. */
static int explore_major(struct explore *e, int type, uint32_t major, struct pts *majors_found,
			 struct mcell *ret)
{
	struct pts minors = {0};
	_cleanup_free_ struct range *cells = NULL;
	size_t ncells = 0;
	int r;

	/* Minor hints for this major or for every major. */
	if (e->denv && e->denv->hints)
		for (size_t h = 0; h < e->denv->n_hints; h++) {
			uint32_t hm = e->denv->hints[h][0], hn = e->denv->hints[h][1];
			if ((hm == major || hm == JOBCG_DEV_ANY) && hn != JOBCG_DEV_ANY &&
			    (r = pts_add(&minors, hn)) < 0)
				goto out;
		}
	for (int round = 0;; round++) {
		size_t before = minors.n;

		r = round_cells(&minors, MINOR_MAX, round, "constants", &cells, &ncells);
		if (r < 0)
			goto out;
		free(ret->n);
		ret->n = calloc(ncells, sizeof(*ret->n));
		ret->nn = ncells;
		if (!ret->n) {
			r = -ENOMEM;
			goto out;
		}
		e->majors_found = majors_found;
		e->minors_found = &minors;
		for (size_t c = 0; c < ncells; c++) {
			ret->n[c] = (struct ncell){cells[c].lo, cells[c].hi, 0};
			for (size_t a = 0; a < ELEMENTSOF(accesses); a++) {
				bool allow = false;
				r = run_one(e, type, major, rep_of(cells[c].lo, cells[c].hi),
					    accesses[a], &allow);
				if (r < 0)
					goto out;
				if (allow)
					ret->n[c].allow |= (uint8_t)MASK_BIT(accesses[a]);
			}
		}
		if (minors.n == before)
			break;
	}
	r = 0;
out:
	pts_done(&minors);
	return r;
}

static int explore_type(struct explore *e, int type, struct part *ret)
{
	struct pts majors = {0}, found = {0};
	_cleanup_free_ struct range *cells = NULL;
	struct mcell *m = NULL;
	size_t nm = 0, ncells = 0;
	int r;

	if (e->denv && e->denv->hints)
		for (size_t h = 0; h < e->denv->n_hints; h++)
			if (e->denv->hints[h][0] != JOBCG_DEV_ANY &&
			    (r = pts_add(&majors, e->denv->hints[h][0])) < 0)
				goto out;
	for (int round = 0;; round++) {
		struct mcell *nmc;

		r = round_cells(&majors, MAJOR_MAX, round, "major numbers", &cells, &ncells);
		if (r < 0)
			goto out;
		nmc = calloc(ncells, sizeof(*nmc));
		if (!nmc) {
			r = -ENOMEM;
			goto out;
		}
		/* Cells that did not change since the last round keep their results. */
		for (size_t c = 0, old = 0; c < ncells; c++) {
			while (old < nm && m[old].hi < cells[c].lo)
				old++;
			if (old < nm && m[old].lo == cells[c].lo && m[old].hi == cells[c].hi) {
				nmc[c] = m[old];
				m[old].n = NULL;
				continue;
			}
			nmc[c].lo = cells[c].lo;
			nmc[c].hi = cells[c].hi;
			r = explore_major(e, type, rep_of(cells[c].lo, cells[c].hi), &found,
					  &nmc[c]);
			if (r < 0) {
				for (size_t k = 0; k <= c; k++)
					free(nmc[k].n);
				free(nmc);
				goto out;
			}
		}
		for (size_t k = 0; k < nm; k++)
			free(m[k].n);
		free(m);
		m = nmc;
		nm = ncells;
		bool grew = false;
		for (size_t k = 0; k < found.n; k++) {
			r = pts_add(&majors, found.v[k]);
			if (r < 0)
				goto out;
			grew |= r > 0;
		}
		if (!grew)
			break;
	}
	ret->m = TAKE_PTR(m);
	ret->nm = nm;
	r = 0;
out:
	if (m) {
		for (size_t k = 0; k < nm; k++)
			free(m[k].n);
		free(m);
	}
	pts_done(&majors);
	pts_done(&found);
	return r;
}

/* ---- compression into rules ---- */

static const struct ncell *find_ncell(const struct mcell *mc, uint32_t minor);

/* Merge neighbouring cells that behave the same, so the largest cell is the real default. */
static void merge_cells(struct part *p)
{
	for (size_t i = 0; i < p->nm; i++) {
		struct mcell *mc = &p->m[i];
		size_t w = 0;
		for (size_t k = 0; k < mc->nn; k++) {
			if (w > 0 && mc->n[w - 1].allow == mc->n[k].allow)
				mc->n[w - 1].hi = mc->n[k].hi;
			else
				mc->n[w++] = mc->n[k];
		}
		mc->nn = w;
	}
	size_t w = 0;
	for (size_t i = 0; i < p->nm; i++) {
		if (w > 0 && p->m[w - 1].nn == p->m[i].nn) {
			bool same = true;
			for (size_t k = 0; k < p->m[i].nn && same; k++)
				same = p->m[w - 1].n[k].lo == p->m[i].n[k].lo &&
				       p->m[w - 1].n[k].hi == p->m[i].n[k].hi &&
				       p->m[w - 1].n[k].allow == p->m[i].n[k].allow;
			if (same) {
				p->m[w - 1].hi = p->m[i].hi;
				free(p->m[i].n);
				continue;
			}
		}
		p->m[w++] = p->m[i];
	}
	p->nm = w;
}

static uint64_t span(uint32_t lo, uint32_t hi)
{
	return (uint64_t)hi - lo + 1;
}

static size_t largest_ncell(const struct mcell *mc)
{
	size_t best = 0;
	for (size_t k = 1; k < mc->nn; k++)
		if (span(mc->n[k].lo, mc->n[k].hi) > span(mc->n[best].lo, mc->n[best].hi))
			best = k;
	return best;
}

static size_t largest_mcell(const struct part *p)
{
	size_t best = 0;
	for (size_t k = 1; k < p->nm; k++)
		if (span(p->m[k].lo, p->m[k].hi) > span(p->m[best].lo, p->m[best].hi))
			best = k;
	return best;
}

static unsigned mask_access(uint8_t allow)
{
	return (allow & MASK_BIT(1) ? JOBCG_DEV_ACC_MKNOD : 0) |
	       (allow & MASK_BIT(2) ? JOBCG_DEV_ACC_READ : 0) |
	       (allow & MASK_BIT(4) ? JOBCG_DEV_ACC_WRITE : 0);
}

static char *access_str(unsigned acc, char buf[4])
{
	return jobcg_devaccess_format(acc, buf);
}

/* Decoded rules are always allow rules, so this is devrule's format ("c 195:3 rw"). */
JOBCG_EXPORT char *jobcg_decoded_rule_format(const struct jobcg_devrule *r, char *buf, size_t size)
{
	return jobcg_devrule_format(r, buf, size);
}

static int add_line(struct jobcg_decoded *d, const struct jobcg_devrule *rule, char *note)
{
	if (d->nlines == d->caplines) {
		size_t nc = d->caplines ? d->caplines * 2 : 32;
		struct jobcg_decoded_line *t = realloc(d->lines, nc * sizeof(*t));
		if (!t) {
			free(note);
			return -ENOMEM;
		}
		d->lines = t;
		d->caplines = nc;
	}
	if (note) {
		if (strv_push(&d->notes, note) < 0)
			return -ENOMEM;
		d->lines[d->nlines++] = (struct jobcg_decoded_line){.note = note};
	} else
		d->lines[d->nlines++] = (struct jobcg_decoded_line){.rule = *rule};
	return 0;
}

static void spec(char *buf, size_t size, char type, uint64_t majlo, uint64_t majhi, uint64_t minlo,
		 uint64_t minhi)
{
	char a[32], b[32];
	if (majlo == 0 && majhi >= MAJOR_MAX)
		snprintf(a, sizeof(a), "*");
	else if (majlo == majhi)
		snprintf(a, sizeof(a), "%llu", (unsigned long long)majlo);
	else
		snprintf(a, sizeof(a), "%llu-%llu", (unsigned long long)majlo,
			 (unsigned long long)majhi);
	if (minlo == 0 && minhi >= MINOR_MAX)
		snprintf(b, sizeof(b), "*");
	else if (minlo == minhi)
		snprintf(b, sizeof(b), "%llu", (unsigned long long)minlo);
	else
		snprintf(b, sizeof(b), "%llu-%llu", (unsigned long long)minlo,
			 (unsigned long long)minhi);
	snprintf(buf, size, "%c %s:%s", type, a, b);
}

/* Notes for behaviour the access letters cannot express. */
static int combo_notes(struct jobcg_decoded *d, const char *where, uint8_t allow)
{
	bool r = allow & MASK_BIT(2), w = allow & MASK_BIT(4), rw = allow & MASK_BIT(6);
	int ret;

	if (rw != (r && w)) {
		char *n =
		    rw ? strdup_printf("%s: read+write together is allowed, but %s alone is not",
				       where,
				       r   ? "w"
				       : w ? "r"
					   : "r or w")
		       : strdup_printf(
			     "%s: r and w are each allowed, but a read+write request is denied",
			     where);
		if (!n || (ret = add_line(d, NULL, n)) < 0)
			return -ENOMEM;
	}
	if (!(allow & MASK_BIT(0))) {
		char *n = strdup_printf("%s: a request with no access bits is denied", where);
		if (!n || (ret = add_line(d, NULL, n)) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int emit_rule(struct jobcg_decoded *d, char type, uint32_t major, uint32_t minor,
		     uint8_t allow)
{
	struct jobcg_devrule rule = {.type = type,
				     .major = major,
				     .minor = minor,
				     .access = mask_access(allow),
				     .allow = true};
	char where[64];
	int r = add_line(d, &rule, NULL);

	if (r < 0)
		return r;
	jobcg_decoded_rule_format(&rule, where, sizeof(where));
	*strrchr(where, ' ') = 0;
	return combo_notes(d, where, allow);
}

static int range_note(struct jobcg_decoded *d, char type, uint32_t majlo, uint32_t majhi,
		      uint32_t minlo, uint32_t minhi, uint8_t allow, const char *why)
{
	char where[96], acc[4];
	char *n;

	spec(where, sizeof(where), type, majlo, majhi, minlo, minhi);
	n = strdup_printf("%s %s  (%s)", where, access_str(mask_access(allow), acc), why);
	if (!n)
		return -ENOMEM;
	int r = add_line(d, NULL, n);
	if (r < 0)
		return r;
	return combo_notes(d, where, allow);
}

/* Lines for one minor range of one major where it differs from what the reader would take. */
static int emit_minors(struct jobcg_decoded *d, char type, uint32_t major, uint32_t lo, uint32_t hi,
		       uint8_t allow)
{
	int r;

	if (span(lo, hi) <= MINOR_ENUM_LIMIT) {
		for (uint64_t v = lo; v <= hi; v++)
			if ((r = emit_rule(d, type, major, (uint32_t)v, allow)) < 0)
				return r;
		return 0;
	}
	return range_note(d, type, major, major, lo, hi, allow,
			  "a range of minors; not listed one by one");
}

/*
 * Lines for one major value (or a range already found small enough to list). Without a
 * "MAJOR:*" line a reader takes the default majors' minor notes ("c *:3 rwm") for this major
 * too, so every minor where this major differs from them gets its own line ("c 7:3 -"):
 * the listing never implies an access the program denies, or the reverse.
 */
static int emit_major(struct jobcg_decoded *d, char type, uint32_t major, const struct mcell *mc,
		      const struct mcell *dmc, uint8_t def)
{
	size_t dn = largest_ncell(mc);
	uint8_t mdef = mc->n[dn].allow;
	int r;

	if (mdef != def && (r = emit_rule(d, type, major, JOBCG_DEV_ANY, mdef)) < 0)
		return r;
	for (size_t k = 0; k < mc->nn; k++) {
		const struct ncell *nc = &mc->n[k];
		if (mdef != def) {
			if (nc->allow != mdef &&
			    (r = emit_minors(d, type, major, nc->lo, nc->hi, nc->allow)) < 0)
				return r;
			continue;
		}
		/* Split by the default majors' cells: what the reader takes varies with them. */
		for (uint64_t lo = nc->lo; lo <= nc->hi;) {
			const struct ncell *dc = find_ncell(dmc, (uint32_t)lo);
			uint64_t hi = dc && dc->hi < nc->hi ? dc->hi : nc->hi;
			uint8_t want = dc ? dc->allow : def;
			if (nc->allow != want && (r = emit_minors(d, type, major, (uint32_t)lo,
								  (uint32_t)hi, nc->allow)) < 0)
				return r;
			lo = hi + 1;
		}
	}
	return 0;
}

static int compress(struct jobcg_decoded *d)
{
	int r;

	for (int t = 0; t < N_TYPES; t++) {
		struct part *p = &d->t[t];
		char type = type_char[t];

		merge_cells(p);
		size_t dm = largest_mcell(p);
		const struct mcell *dmc = &p->m[dm];
		uint8_t def = dmc->n[largest_ncell(dmc)].allow;

		if ((r = emit_rule(d, type, JOBCG_DEV_ANY, JOBCG_DEV_ANY, def)) < 0)
			return r;
		/* Minor exceptions of the default majors cannot be written as rules. */
		for (size_t k = 0; k < dmc->nn; k++)
			if (dmc->n[k].allow != def &&
			    (r = range_note(d, type, 0, MAJOR_MAX, dmc->n[k].lo, dmc->n[k].hi,
					    dmc->n[k].allow,
					    "these minors of every major not listed")) < 0)
				return r;
		for (size_t i = 0; i < p->nm; i++) {
			const struct mcell *mc = &p->m[i];
			if (i == dm)
				continue;
			if (span(mc->lo, mc->hi) <= ENUM_LIMIT) {
				for (uint64_t v = mc->lo; v <= mc->hi; v++)
					if ((r = emit_major(d, type, (uint32_t)v, mc, dmc, def)) <
					    0)
						return r;
				continue;
			}
			/* A large range of majors: notes where it differs from the default majors.
			 */
			uint8_t mdef = mc->n[largest_ncell(mc)].allow;
			if (mdef != def &&
			    (r = range_note(d, type, mc->lo, mc->hi, 0, MINOR_MAX, mdef,
					    "a range of majors; not listed one by one")) < 0)
				return r;
			for (size_t k = 0; k < mc->nn; k++) {
				const struct ncell *nc = &mc->n[k];
				if (mdef != def) {
					if (nc->allow != mdef &&
					    (r = range_note(
						 d, type, mc->lo, mc->hi, nc->lo, nc->hi, nc->allow,
						 "a range of majors; not listed one by one")) < 0)
						return r;
					continue;
				}
				for (uint64_t lo = nc->lo; lo <= nc->hi;) {
					const struct ncell *dc = find_ncell(dmc, (uint32_t)lo);
					uint64_t hi = dc && dc->hi < nc->hi ? dc->hi : nc->hi;
					if ((dc ? dc->allow : def) != nc->allow &&
					    (r = range_note(
						 d, type, mc->lo, mc->hi, (uint32_t)lo,
						 (uint32_t)hi, nc->allow,
						 "a range of majors; not listed one by one")) < 0)
						return r;
					lo = hi + 1;
				}
			}
		}
	}
	if (d->approximate) {
		char *n = strdup("approximate: the program transforms major/minor before comparing "
				 "(masks, shifts, bit tests); values between the constants it uses "
				 "were sampled, not proven");
		if (!n || (r = add_line(d, NULL, n)) < 0)
			return -ENOMEM;
	}
	return 0;
}

JOBCG_EXPORT int jobcg_decode_program(const struct bpf_insn *insns, size_t n,
				      const struct jobcg_decode_env *env,
				      struct jobcg_decoded **ret)
{
	if (!(insns || !n))
		return error_set(-EINVAL, "%s: no insns given", __func__);
	return_if_null(ret);
	struct explore e = {.insns = insns, .n = n, .denv = env};
	struct jobcg_decoded *d;
	uint64_t max_ms = 0;
	int r;

	r = bpfvm_check(insns, n);
	if (r < 0)
		return r;
	if (env && env->size >= sizeof(*env)) {
		e.env = (struct bpfvm_env){env->cgroup_id, env->ancestor_cgroup_id, env->map_lookup,
					   env->userdata};
		e.max_steps = env->max_steps;
		e.max_total_steps = env->max_total_steps;
		max_ms = env->max_ms;
	} else
		env = NULL;
	e.denv = env;
	if (!e.max_steps)
		e.max_steps = DEFAULT_STEPS;
	if (!e.max_total_steps)
		e.max_total_steps = DEFAULT_TOTAL_STEPS;
	if (!max_ms)
		max_ms = DEFAULT_MAX_MS;
	clock_gettime(CLOCK_MONOTONIC, &e.deadline);
	e.deadline.tv_sec += (time_t)(max_ms / 1000);
	e.deadline.tv_nsec += (long)(max_ms % 1000) * 1000000;
	if (e.deadline.tv_nsec >= 1000000000) {
		e.deadline.tv_sec++;
		e.deadline.tv_nsec -= 1000000000;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	for (int t = 0; t < N_TYPES; t++) {
		r = explore_type(&e, t, &d->t[t]);
		if (r < 0) {
			jobcg_decoded_free(d);
			return r;
		}
	}
	d->approximate = e.approximate;
	d->runs = e.runs;
	r = compress(d);
	if (r < 0) {
		jobcg_decoded_free(d);
		return r;
	}
	*ret = d;
	return 0;
}

/*
 * `bpftool -j prog dump xlated` prints [{"disasm": "(61) r2 = ..."}, ...] without instruction
 * numbers: rebuild the text form, counting two slots for each ld_imm64.
 */
static int json_to_text(const char *data, size_t len, const char *filename, char **ret)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *j;
	char *out = NULL;
	size_t olen = 0, idx = 0;
	int r = 0;

	if (!tok)
		return -ENOMEM;
	j = json_tokener_parse_ex(tok, data, (int)(len > INT32_MAX ? INT32_MAX : len));
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!j) {
		const char *why = jerr == json_tokener_continue ? "input ends inside the JSON"
								: json_tokener_error_desc(jerr);
		return error_set(-EINVAL, "%s: invalid JSON at byte %zu: %s",
				 filename ? filename : "<input>", end, why);
	}
	while (end < len && isspace((unsigned char)data[end]))
		end++;
	if (end < len || !json_object_is_type(j, json_type_array)) {
		json_object_put(j);
		return error_set(-EINVAL,
				 end < len ? "%s: unexpected data after the JSON array at byte %zu"
					   : "%s: not a bpftool JSON instruction dump (expected an "
					     "array of {\"disasm\": ...})",
				 filename ? filename : "<input>", end);
	}
	for (size_t k = 0; k < json_object_array_length(j) && r >= 0; k++) {
		struct json_object *o = json_object_array_get_idx(j, k), *d = NULL;
		/* Skipping one would renumber every instruction after it and shift jumps. */
		if (!json_object_object_get_ex(o, "disasm", &d) ||
		    !json_object_is_type(d, json_type_string)) {
			r = error_set(-EINVAL,
				      "%s: JSON element %zu has no \"disasm\" string (instruction "
				      "%zu)",
				      filename ? filename : "<input>", k, idx);
			break;
		}
		const char *line = json_object_get_string(d);
		char *t = realloc(out, olen + strlen(line) + 32);
		if (!t) {
			r = -ENOMEM;
			break;
		}
		out = t;
		olen += (size_t)sprintf(out + olen, "%zu: %s\n", idx, line);
		idx += startswith(line, "(18)") ? 2 : 1;
	}
	json_object_put(j);
	if (r < 0) {
		free(out);
		return r;
	}
	*ret = out ? out : strdup("");
	return *ret ? 0 : -ENOMEM;
}

/* "[" then "{" or "]": bpftool's JSON (a pasted mail starting "[list-name]" is text). */
static bool looks_json(const char *data, size_t len)
{
	size_t i = 0;
	while (i < len && isspace((unsigned char)data[i]))
		i++;
	if (i >= len || data[i] != '[')
		return false;
	for (i++; i < len && isspace((unsigned char)data[i]); i++)
		;
	return i >= len || data[i] == '{' || data[i] == ']';
}

JOBCG_EXPORT int jobcg_decode_parse(const void *data, size_t len, const char *filename,
				    struct bpf_insn **ret, size_t *ret_n)
{
	if (!(data || !len))
		return error_set(-EINVAL, "%s: no data given", __func__);
	return_if_null(ret);
	return_if_null(ret_n);
	if (!bpftext_looks_raw(data, len) && looks_json(data, len)) {
		_cleanup_free_ char *text = NULL;
		int r = json_to_text(data, len, filename, &text);
		if (r < 0)
			return r;
		return bpftext_parse(text, strlen(text), filename, ret, ret_n);
	}
	if (bpftext_looks_raw(data, len)) {
		struct bpf_insn *insns = NULL;
		size_t n = 0;
		int r = bpftext_parse_raw(data, len, filename, &insns, &n);
		if (r < 0)
			return r;
		r = bpftext_resolve_calls(insns, n);
		if (r < 0)
			log_debug("%s", jobcg_last_error()->message); /* calls stay opaque */
		*ret = insns;
		*ret_n = n;
		return 0;
	}
	return bpftext_parse(data, len, filename, ret, ret_n);
}

JOBCG_EXPORT int jobcg_decode_data(const void *data, size_t len, const char *filename,
				   const struct jobcg_decode_env *env, struct jobcg_decoded **ret)
{
	return_if_null(ret);
	_cleanup_free_ struct bpf_insn *insns = NULL;
	size_t n = 0;
	int r = jobcg_decode_parse(data, len, filename, &insns, &n);

	if (r < 0)
		return r;
	return jobcg_decode_program(insns, n, env, ret);
}

static const struct mcell *find_mcell(const struct part *p, uint32_t major)
{
	size_t lo = 0, hi = p->nm;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (p->m[mid].hi < major)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < p->nm ? &p->m[lo] : NULL;
}

static const struct ncell *find_ncell(const struct mcell *mc, uint32_t minor)
{
	size_t lo = 0, hi = mc->nn;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (mc->n[mid].hi < minor)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < mc->nn ? &mc->n[lo] : NULL;
}

static uint8_t lookup_mask(const struct jobcg_decoded *d, int t, uint32_t major, uint32_t minor)
{
	const struct mcell *mc = find_mcell(&d->t[t], major);
	const struct ncell *nc = mc ? find_ncell(mc, minor) : NULL;
	return nc ? nc->allow : 0;
}

JOBCG_EXPORT bool jobcg_decoded_allows(const struct jobcg_decoded *d, char type, uint32_t major,
				       uint32_t minor, unsigned access)
{
	int t = type == 'c' ? 0 : type == 'b' ? 1 : -1;

	if (t < 0 || access > 7)
		return false;
	/* Combinations the decoder did not run (mknod with r/w) are answered bit by bit. */
	if ((access & JOBCG_DEV_ACC_MKNOD) && (access & 6)) {
		uint8_t m = lookup_mask(d, t, major, minor);
		return (m & MASK_BIT(1)) && (m & MASK_BIT(access & 6));
	}
	return lookup_mask(d, t, major, minor) & MASK_BIT(access);
}

JOBCG_EXPORT size_t jobcg_decoded_lines(const struct jobcg_decoded *d,
					const struct jobcg_decoded_line **ret)
{
	*ret = d->lines;
	return d->nlines;
}

JOBCG_EXPORT uint64_t jobcg_decoded_runs(const struct jobcg_decoded *d)
{
	return d->runs;
}

JOBCG_EXPORT bool jobcg_decoded_approximate(const struct jobcg_decoded *d)
{
	return d->approximate;
}

/* Union of cell start points of all inputs, as a point set of starts. */
JOBCG_EXPORT int jobcg_decoded_intersect(struct jobcg_decoded *const *list, size_t n,
					 struct jobcg_decoded **ret)
{
	struct jobcg_decoded *d;
	int r = 0;

	if (n == 0)
		return error_set(-EINVAL, "no programs to combine");
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	for (int t = 0; t < N_TYPES && r >= 0; t++) {
		struct pts starts = {0};
		for (size_t k = 0; k < n && r >= 0; k++)
			for (size_t i = 0; i < list[k]->t[t].nm && r >= 0; i++)
				r = pts_add(&starts, list[k]->t[t].m[i].lo);
		if (r >= 0) {
			d->t[t].m = calloc(starts.n, sizeof(struct mcell));
			if (!d->t[t].m)
				r = -ENOMEM;
		}
		for (size_t i = 0; i < starts.n && r >= 0; i++) {
			struct mcell *mc = &d->t[t].m[i];
			struct pts mstarts = {0};
			mc->lo = starts.v[i];
			mc->hi = i + 1 < starts.n ? starts.v[i + 1] - 1 : MAJOR_MAX;
			d->t[t].nm = i + 1;
			for (size_t k = 0; k < n && r >= 0; k++) {
				const struct mcell *src = find_mcell(&list[k]->t[t], mc->lo);
				for (size_t j = 0; src && j < src->nn && r >= 0; j++)
					r = pts_add(&mstarts, src->n[j].lo);
			}
			if (r >= 0) {
				mc->n = calloc(mstarts.n, sizeof(*mc->n));
				if (!mc->n)
					r = -ENOMEM;
			}
			for (size_t j = 0; j < mstarts.n && r >= 0; j++) {
				uint8_t allow = 0xff;
				mc->n[j].lo = mstarts.v[j];
				mc->n[j].hi = j + 1 < mstarts.n ? mstarts.v[j + 1] - 1 : MINOR_MAX;
				for (size_t k = 0; k < n; k++)
					allow &= lookup_mask(list[k], t, mc->lo, mc->n[j].lo);
				mc->n[j].allow = allow;
				mc->nn = j + 1;
			}
			pts_done(&mstarts);
		}
		pts_done(&starts);
	}
	for (size_t k = 0; k < n; k++)
		d->approximate |= list[k]->approximate;
	if (r >= 0)
		r = compress(d);
	if (r < 0) {
		jobcg_decoded_free(d);
		return r;
	}
	*ret = d;
	return 0;
}
