/* jobcg: size, CPU list and hostlist parsers, shared by cgroup.conf/gres.conf and the CLI. */
#include <ctype.h>
#include <inttypes.h>

#include "parse.h"
#include "log.h"
#include "util.h"

/* Errors carry only a column (no file): callers that know the file re-raise with it. */
#define fail_at(err, col, ...) error_set_at(err, NULL, 0, (unsigned)(col), __VA_ARGS__)

static int mul_overflows(uint64_t a, uint64_t b, uint64_t *ret)
{
	return __builtin_mul_overflow(a, b, ret);
}

/* Reads decimal digits at *p into *ret; refuses overflow. Returns number of digits or -errno. */
static int read_u64(const char *s, const char **p, uint64_t *ret)
{
	const char *q = *p;
	uint64_t v = 0;

	while (isdigit((unsigned char)*q)) {
		if (mul_overflows(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*q - '0'), &v))
			return fail_at(-ERANGE, *p - s + 1, "number too large");
		q++;
	}
	*ret = v;
	int n = (int)(q - *p);
	*p = q;
	return n;
}

int jobcg_parse_size(const char *s, uint64_t default_unit, unsigned flags, uint64_t *ret)
{
	static const char units[] = "kmgtp";
	const char *p = s, *suffix;
	uint64_t v = 0, mult = default_unit ? default_unit : 1;
	int r;

	if (!s)
		return fail_at(-EINVAL, 0, "missing size");
	if (!isdigit((unsigned char)*p)) {
		if (*p == '-')
			return fail_at(-EINVAL, 1, "size '%s' is negative", s);
		return fail_at(-EINVAL, 1, "size '%s' does not start with a number", s);
	}
	r = read_u64(s, &p, &v);
	if (r < 0) {
		jobcg_error_prefix("size '%s'", s);
		return r;
	}
	suffix = p;
	if (*p) {
		const char *u = strchr(units, tolower((unsigned char)*p));
		uint64_t base = 1024;
		unsigned exp;

		if (!u || !*u)
			goto bad_suffix;
		exp = (unsigned)(u - units) + 1;
		p++;
		if (strcaseeq(p, "ib"))
			p += 2;
		else if ((flags & JOBCG_SIZE_DECIMAL) && strcaseeq(p, "b")) {
			base = 1000;
			p++;
		}
		if (*p)
			goto bad_suffix;
		mult = 1;
		for (unsigned i = 0; i < exp; i++)
			mult *= base;
	}
	if (mul_overflows(v, mult, &v))
		return fail_at(-ERANGE, 1, "size '%s' is too large (limit %" PRIu64 ")", s,
			       UINT64_MAX);
	*ret = v;
	return 0;

bad_suffix:
	if (*suffix == '.')
		return fail_at(-EINVAL, suffix - s + 1, "size '%s' must be a whole number", s);
	return fail_at(-EINVAL, suffix - s + 1,
		       "size '%s' has an unknown suffix '%s' (expected K, M, G, T or P%s)", s,
		       suffix,
		       (flags & JOBCG_SIZE_DECIMAL) ? ", with KiB or KB forms" : ", or KiB .. PiB");
}

static void bit_set_range(uint64_t *bits, unsigned lo, unsigned hi)
{
	for (unsigned i = lo; i <= hi; i++)
		bits[i / 64] |= UINT64_C(1) << (i % 64);
}

int jobcg_parse_cpulist(const char *s, uint64_t **ret, size_t *ret_words)
{
	_cleanup_free_ uint64_t *bits = NULL;
	const char *p = s;
	unsigned highest = 0;
	bool any = false;

	if (!s || !*s)
		return fail_at(-EINVAL, 1, "empty CPU list (expected CPU numbers such as 0-3,8)");
	bits = calloc(JOBCG_CPU_MAX / 64, sizeof(uint64_t));
	if (!bits)
		return -ENOMEM;
	for (;;) {
		const char *start = p;
		uint64_t lo = 0, hi = 0;
		int r;

		if (!isdigit((unsigned char)*p)) {
			if (*p == ',' || !*p)
				return fail_at(-EINVAL, p - s + 1, "empty element in CPU list '%s'",
					       s);
			return fail_at(-EINVAL, p - s + 1,
				       "CPU list '%s': expected a CPU number at '%s'", s, p);
		}
		r = read_u64(s, &p, &lo);
		if (r < 0 || lo >= JOBCG_CPU_MAX)
			return fail_at(-ERANGE, start - s + 1,
				       "CPU list '%s': CPU %.*s is beyond the limit %d", s,
				       (int)strspn(start, "0123456789"), start, JOBCG_CPU_MAX - 1);
		hi = lo;
		if (*p == '-') {
			const char *hstart = ++p;

			if (!isdigit((unsigned char)*p))
				return fail_at(
				    -EINVAL, p - s + 1,
				    "CPU list '%s': expected the end of the range after '-'", s);
			r = read_u64(s, &p, &hi);
			if (r < 0 || hi >= JOBCG_CPU_MAX)
				return fail_at(-ERANGE, hstart - s + 1,
					       "CPU list '%s': CPU %.*s is beyond the limit %d", s,
					       (int)strspn(hstart, "0123456789"), hstart,
					       JOBCG_CPU_MAX - 1);
			if (hi < lo)
				return fail_at(-EINVAL, start - s + 1,
					       "CPU list '%s': reversed range %" PRIu64 "-%" PRIu64
					       " (write the lower CPU first: %" PRIu64 "-%" PRIu64
					       ")",
					       s, lo, hi, hi, lo);
		}
		bit_set_range(bits, (unsigned)lo, (unsigned)hi);
		if (!any || hi > highest)
			highest = (unsigned)hi;
		any = true;
		if (!*p)
			break;
		if (*p != ',')
			return fail_at(-EINVAL, p - s + 1,
				       "CPU list '%s': unexpected '%c' (expected ',' or '-')", s,
				       *p);
		p++;
	}
	size_t words = highest / 64 + 1;
	uint64_t *shrunk = realloc(bits, words * sizeof(uint64_t));
	if (shrunk)
		bits = shrunk;
	*ret = TAKE_PTR(bits);
	*ret_words = words;
	return 0;
}

static bool bit_test(const uint64_t *bits, size_t i)
{
	return (bits[i / 64] >> (i % 64)) & 1;
}

int jobcg_format_cpulist(const uint64_t *bits, size_t words, char **ret)
{
	size_t n = words * 64, cap = 16, len = 0;
	_cleanup_free_ char *out = malloc(cap);

	if (!out)
		return -ENOMEM;
	out[0] = '\0';
	for (size_t i = 0; i < n;) {
		size_t j;
		char tmp[48];
		int k;

		if (!bit_test(bits, i)) {
			i++;
			continue;
		}
		for (j = i; j + 1 < n && bit_test(bits, j + 1); j++)
			;
		if (j == i)
			k = snprintf(tmp, sizeof(tmp), "%s%zu", len ? "," : "", i);
		else
			k = snprintf(tmp, sizeof(tmp), "%s%zu-%zu", len ? "," : "", i, j);
		if (len + (size_t)k + 1 > cap) {
			char *no;

			cap = (len + (size_t)k + 1) * 2;
			no = realloc(out, cap);
			if (!no)
				return -ENOMEM;
			out = no;
		}
		memcpy(out + len, tmp, (size_t)k + 1);
		len += (size_t)k;
		i = j + 1;
	}
	*ret = TAKE_PTR(out);
	return 0;
}

/* ---- hostlists ---- */

struct hl_range {
	uint64_t lo, hi;
	int width;
};

struct hl_seg {
	const char *lit; /* literal text, or NULL for a bracket group */
	size_t litlen;
	struct hl_range *ranges;
	size_t nranges;
	/* iteration state */
	size_t ri;
	uint64_t cur;
};

struct hl_item {
	struct hl_seg *segs;
	size_t nsegs;
	size_t maxlen; /* upper bound of an expanded name's length */
};

static void hl_item_done(struct hl_item *it)
{
	for (size_t i = 0; i < it->nsegs; i++)
		free(it->segs[i].ranges);
	free(it->segs);
	it->segs = NULL;
	it->nsegs = 0;
}

/* Separators between hostlist items, as Slurm's hostlist_create(). */
#define HL_SEPS ", \t"

/* Parse one comma-separated item starting at *p (s is the whole list, for columns). */
static int hl_parse_item(const char *s, const char **p, struct hl_item *ret)
{
	struct hl_item it = {};
	const char *q = *p;
	int r = 0;

	if (!*q || strchr(HL_SEPS, *q))
		return fail_at(-EINVAL, q - s + 1, "empty name in list '%s'", s);
	while (*q && !strchr(HL_SEPS, *q)) {
		struct hl_seg seg = {};
		struct hl_seg *ns;

		if (*q == ']') {
			r = fail_at(-EINVAL, q - s + 1, "']' without '[' in '%s'", s);
			goto fail_seg;
		}
		if (*q != '[') {
			seg.lit = q;
			seg.litlen = strcspn(q, HL_SEPS "[]");
			q += seg.litlen;
			it.maxlen += seg.litlen;
		} else {
			const char *open = q++;
			size_t maxw = 0;

			for (;;) {
				struct hl_range rg;
				struct hl_range *nr;
				const char *numstart = q;

				if (!isdigit((unsigned char)*q)) {
					if (*q == ']' && q == open + 1)
						r = fail_at(-EINVAL, q - s + 1,
							    "empty brackets in '%s'", s);
					else if (!*q)
						r = fail_at(-EINVAL, open - s + 1,
							    "'[' without ']' in '%s'", s);
					else
						r = fail_at(-EINVAL, q - s + 1,
							    "expected a number inside brackets in "
							    "'%s', found '%c'",
							    s, *q);
					goto fail_seg;
				}
				if (strspn(q, "0123456789") > 18) {
					r = fail_at(-ERANGE, q - s + 1, "number too long in '%s'",
						    s);
					goto fail_seg;
				}
				r = read_u64(s, &q, &rg.lo);
				if (r < 0)
					goto fail_seg;
				rg.width = (int)(q - numstart);
				rg.hi = rg.lo;
				if (*q == '-') {
					const char *hs = ++q;

					if (!isdigit((unsigned char)*q)) {
						r = fail_at(-EINVAL, q - s + 1,
							    "expected the end of the range after "
							    "'-' in '%s'",
							    s);
						goto fail_seg;
					}
					if (strspn(q, "0123456789") > 18) {
						r = fail_at(-ERANGE, q - s + 1,
							    "number too long in '%s'", s);
						goto fail_seg;
					}
					r = read_u64(s, &q, &rg.hi);
					if (r < 0)
						goto fail_seg;
					if ((size_t)(q - hs) > maxw)
						maxw = (size_t)(q - hs);
					if (rg.hi < rg.lo) {
						r = fail_at(-EINVAL, numstart - s + 1,
							    "reversed range %.*s in '%s' (write "
							    "the lower bound first)",
							    (int)(q - numstart), numstart, s);
						goto fail_seg;
					}
				}
				if ((size_t)rg.width > maxw)
					maxw = (size_t)rg.width;
				nr = realloc(seg.ranges, (seg.nranges + 1) * sizeof(*nr));
				if (!nr) {
					r = -ENOMEM;
					goto fail_seg;
				}
				seg.ranges = nr;
				seg.ranges[seg.nranges++] = rg;
				if (*q == ',') {
					q++;
					continue;
				}
				if (*q == ']') {
					q++;
					break;
				}
				if (!*q)
					r = fail_at(-EINVAL, open - s + 1,
						    "'[' without ']' in '%s'", s);
				else if (*q == '[')
					r = fail_at(-EINVAL, q - s + 1, "nested '[' in '%s'", s);
				else
					r = fail_at(-EINVAL, q - s + 1,
						    "unexpected '%c' inside brackets in '%s' "
						    "(expected ',', '-' or ']')",
						    *q, s);
				goto fail_seg;
			}
			it.maxlen += maxw;
		}
		ns = realloc(it.segs, (it.nsegs + 1) * sizeof(*ns));
		if (!ns) {
			r = -ENOMEM;
			goto fail_seg;
		}
		it.segs = ns;
		it.segs[it.nsegs++] = seg;
		continue;
	fail_seg:
		free(seg.ranges);
		goto fail;
	}
	*p = q;
	*ret = it;
	return 0;
fail:
	hl_item_done(&it);
	return r;
}

/* Calls fn for each name of the item, in order; stops when fn returns non-zero. */
static int hl_item_foreach(struct hl_item *it, size_t *budget, int (*fn)(const char *, void *),
			   void *ud)
{
	_cleanup_free_ char *buf = malloc(it->maxlen + 1);

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < it->nsegs; i++) {
		it->segs[i].ri = 0;
		if (it->segs[i].ranges)
			it->segs[i].cur = it->segs[i].ranges[0].lo;
	}
	for (;;) {
		size_t len = 0;
		int r;

		if (*budget == 0)
			return -E2BIG;
		(*budget)--;
		for (size_t i = 0; i < it->nsegs; i++) {
			struct hl_seg *g = &it->segs[i];

			if (g->lit) {
				memcpy(buf + len, g->lit, g->litlen);
				len += g->litlen;
			} else {
				len +=
				    (size_t)snprintf(buf + len, it->maxlen + 1 - len, "%0*" PRIu64,
						     g->ranges[g->ri].width, g->cur);
			}
		}
		buf[len] = '\0';
		r = fn(buf, ud);
		if (r)
			return r;
		/* odometer: the last bracket group moves fastest */
		size_t i = it->nsegs;
		for (;;) {
			struct hl_seg *g;

			if (i == 0)
				return 0;
			g = &it->segs[--i];
			if (g->lit)
				continue;
			if (g->cur < g->ranges[g->ri].hi) {
				g->cur++;
				break;
			}
			if (g->ri + 1 < g->nranges) {
				g->ri++;
				g->cur = g->ranges[g->ri].lo;
				break;
			}
			g->ri = 0;
			g->cur = g->ranges[0].lo;
		}
	}
}

/* Parses each item of @s in turn and hands it to @fn, which may keep nothing of it; stops at
 * the first parse error or negative return of @fn. As Slurm's hostlist_create(), blanks
 * separate items like commas ("tux1, tux2") and empty items ("vm,") are skipped. */
static int hl_items(const char *s, int (*fn)(struct hl_item *, void *), void *ud)
{
	const char *p = s;

	if (!s || !s[strspn(s, HL_SEPS)])
		return fail_at(-EINVAL, 1, "empty list");
	for (;;) {
		struct hl_item it;
		int r;

		p += strspn(p, HL_SEPS);
		if (!*p)
			return 0;
		r = hl_parse_item(s, &p, &it);

		if (r < 0)
			return r;
		r = fn(&it, ud);
		hl_item_done(&it);
		if (r)
			return r;
	}
}

struct hl_expand {
	const char *s;
	size_t max, budget;
	int (*fn)(const char *, void *);
	void *ud;
};

static int hl_expand_item(struct hl_item *it, void *ud)
{
	struct hl_expand *x = ud;
	int r = hl_item_foreach(it, &x->budget, x->fn, x->ud);

	if (r == -E2BIG)
		return fail_at(-E2BIG, 1, "'%s' expands to more than %zu names", x->s, x->max);
	return r;
}

static int hl_foreach(const char *s, size_t max, int (*fn)(const char *, void *), void *ud)
{
	struct hl_expand x = {.s = s, .max = max, .budget = max, .fn = fn, .ud = ud};

	return hl_items(s, hl_expand_item, &x);
}

struct hl_collect {
	char **v;
	size_t n, cap;
};

static int hl_collect_fn(const char *name, void *ud)
{
	struct hl_collect *c = ud;

	if (c->n + 2 > c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 8;
		char **nv = realloc(c->v, ncap * sizeof(char *));

		if (!nv)
			return -ENOMEM;
		c->v = nv;
		c->cap = ncap;
	}
	c->v[c->n] = strdup(name);
	if (!c->v[c->n])
		return -ENOMEM;
	c->v[++c->n] = NULL;
	return 0;
}

int jobcg_hostlist_expand(const char *s, size_t max, char ***ret)
{
	struct hl_collect c = {};
	int r;

	r = hl_foreach(s, max ? max : JOBCG_HOSTLIST_MAX, hl_collect_fn, &c);
	if (r < 0) {
		strv_free(c.v);
		return r;
	}
	*ret = c.v;
	return 0;
}

/*
 * Whether range @rg prints the @n digits at @d, as hl_item_foreach() prints it: "%0*u" with the
 * lower bound's width, so a number is exactly that wide when it fits and unpadded when wider.
 */
static bool hl_range_prints(const struct hl_range *rg, const char *d, size_t n)
{
	uint64_t v = 0;

	/* Bounds have at most 18 digits (hl_parse_item), so a wider number is none of ours. */
	if (n < (size_t)rg->width || n > 18 || (n > (size_t)rg->width && d[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (uint64_t)(d[i] - '0');
	return v >= rg->lo && v <= rg->hi;
}

struct hl_match {
	const char *name;
	size_t len;
	bool *reach, *next; /* len + 1 each: which prefixes of name the segments so far can spell */
	bool found;
};

/*
 * Whether the item spells the name, without expanding it: left to right over the segments, the
 * set of name positions the segments so far can reach (a bracket group may take one of several
 * digit counts, so there can be more than one). Linear in the name times the item's length.
 */
static int hl_match_item(struct hl_item *it, void *ud)
{
	struct hl_match *m = ud;

	if (m->found)
		return 0; /* only the rest of the list's syntax is still checked */
	memset(m->reach, 0, m->len + 1);
	m->reach[0] = true;
	for (size_t i = 0; i < it->nsegs; i++) {
		const struct hl_seg *g = &it->segs[i];
		bool any = false;

		memset(m->next, 0, m->len + 1);
		for (size_t p = 0; p <= m->len; p++) {
			if (!m->reach[p])
				continue;
			if (g->lit) {
				if (g->litlen <= m->len - p &&
				    memcmp(m->name + p, g->lit, g->litlen) == 0)
					any = m->next[p + g->litlen] = true;
				continue;
			}
			for (size_t e = p + 1;
			     e <= m->len && e - p <= 18 && isdigit((unsigned char)m->name[e - 1]);
			     e++)
				for (size_t k = 0; k < g->nranges; k++)
					if (hl_range_prints(&g->ranges[k], m->name + p, e - p)) {
						any = m->next[e] = true;
						break;
					}
		}
		if (!any)
			return 0;
		bool *t = m->reach;
		m->reach = m->next;
		m->next = t;
	}
	m->found = m->reach[m->len];
	return 0;
}

int jobcg_hostlist_contains(const char *s, const char *name)
{
	struct hl_match m = {.name = name, .len = name ? strlen(name) : 0};
	_cleanup_free_ bool *a = NULL, *b = NULL;
	int r;

	if (!name)
		return -EINVAL;
	a = malloc(m.len + 1);
	b = malloc(m.len + 1);
	if (!a || !b)
		return -ENOMEM;
	m.reach = a;
	m.next = b;
	/* The whole list is parsed even after a match: a malformed list is an error whatever the
	 * name, as jobcg_hostlist_expand() says. */
	r = hl_items(s, hl_match_item, &m);
	return r < 0 ? r : m.found;
}
