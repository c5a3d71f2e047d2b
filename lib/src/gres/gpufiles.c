/*
 * jobcg: the text of the GPU drivers' files parsed, apart from reading them, so that a fuzzer
 * (tests/fuzz/fuzz-gpufiles.c) reaches the same code as detection: NVIDIA's information and
 * capability access files and mig-minors, /proc/devices, and AMD's kfd node properties.
 * Every read is bounded by the size given: the text need not end in a NUL.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpufiles.h"
#include "util.h"

/* mig-minors lists 8 CIs for each of 8 GIs of each GPU: far fewer than this. */
#define MIG_MINORS_MAX (1u << 20)
/* dev_t has 12 bits of major; /proc/devices lists nothing above. */
#define MAJOR_MAX 4095

/* The text being read line by line, and the number of the line last read (from 1). */
struct cursor {
	const char *p, *end;
	unsigned no;
};

/* The next line, up to its '\n' (a '\r' before it is part of the line end: files copied
 * through another system) or a NUL; false at the end of the text. */
static bool next_line(struct cursor *c, struct gpufile_line *ret)
{
	const char *nl;

	if (c->p >= c->end)
		return false;
	nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	ret->p = c->p;
	ret->len = strnlen(c->p, (size_t)((nl ? nl : c->end) - c->p));
	if (ret->len > 0 && ret->p[ret->len - 1] == '\r' && ret->p + ret->len == (nl ? nl : c->end))
		ret->len--;
	ret->no = ++c->no;
	c->p = nl ? nl + 1 : c->end;
	return true;
}

static bool line_starts(const struct gpufile_line *l, const char *s, size_t n)
{
	return l->len >= n && memcmp(l->p, s, n) == 0;
}

/* A decimal number at *p (digits only, before @end), at most @max; *p moves past it. */
static int number(const char **p, const char *end, uint64_t max, uint64_t *ret)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return -EINVAL;
	for (; s < end && *s >= '0' && *s <= '9'; s++)
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v) || v > max)
			return -ERANGE;
	*ret = v;
	*p = s;
	return 0;
}

static const char *skip_blanks(const char *s, const char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

/* @lit at *p; *p moves past it. */
static bool literal(const char **p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0)
		return false;
	*p += n;
	return true;
}

int gpufile_field_at(const char *text, size_t size, const char *key, char **ret, unsigned *ret_line)
{
	struct cursor c = {text, text + size, 0};
	size_t klen = strlen(key);
	struct gpufile_line l;

	while (next_line(&c, &l)) {
		const char *v, *e;
		char *out;

		if (!line_starts(&l, key, klen) || l.len == klen || l.p[klen] != ':')
			continue;
		v = l.p + klen + 1;
		e = l.p + l.len;
		while (v < e && isspace((unsigned char)*v))
			v++;
		while (e > v && isspace((unsigned char)e[-1]))
			e--;
		out = strndup(v, (size_t)(e - v));
		if (!out)
			return -ENOMEM;
		*ret = out;
		if (ret_line)
			*ret_line = l.no;
		return 0;
	}
	return -ENOENT;
}

int gpufile_field(const char *text, size_t size, const char *key, char **ret)
{
	return gpufile_field_at(text, size, key, ret, NULL);
}

int gpufile_field_unsigned(const char *text, size_t size, const char *key, unsigned max,
			   unsigned *ret, unsigned *ret_line)
{
	_cleanup_free_ char *v = NULL;
	unsigned line = 0, x;
	int r = gpufile_field_at(text, size, key, &v, &line);

	if (r < 0)
		return r;
	if (ret_line)
		*ret_line = line; /* also for a value that is not valid: the warning names it */
	if (parse_uint(v, max, &x) < 0)
		return -EBADMSG;
	*ret = x;
	return 0;
}

bool gpufile_uuid_valid(const char *uuid)
{
	size_t n = strlen(uuid);

	/* The driver's form ("GPU-" and 36 hex digits and dashes; NVML's "MIG-..."): it goes
	 * into CUDA_VISIBLE_DEVICES, a comma-separated list, and onto terminals and metrics
	 * labels. '/' for the MIG form of drivers before R470 ("MIG-GPU-<uuid>/1/0"). */
	if (n == 0 || n > GPUFILE_UUID_MAX)
		return false;
	for (const char *p = uuid; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '/')
			return false;
	return true;
}

int gpufile_nvidia_minor_uuid(const char *text, size_t size, unsigned *ret_minor, char **ret_uuid)
{
	_cleanup_free_ char *uuid = NULL;
	unsigned minor;
	int r = gpufile_field_unsigned(text, size, "Device Minor", GPUFILE_NVIDIA_MINOR_MAX, &minor,
				       NULL);

	if (r == 0)
		r = gpufile_field(text, size, "GPU UUID", &uuid);
	if (r == -ENOMEM)
		return r;
	if (r < 0 || !gpufile_uuid_valid(uuid))
		return -EBADMSG;
	*ret_minor = minor;
	*ret_uuid = TAKE_PTR(uuid);
	return 0;
}

int gpufile_chr_major(const char *text, size_t size, const char *name, unsigned *ret)
{
	struct cursor c = {text, text + size, 0};
	size_t nlen = strlen(name);
	struct gpufile_line l;
	bool chr = false;

	while (next_line(&c, &l)) {
		const char *s = l.p, *e = l.p + l.len, *w;
		uint64_t major;

		if (line_starts(&l, "Character devices:", 18)) {
			chr = true;
			continue;
		}
		if (line_starts(&l, "Block devices:", 14))
			chr = false;
		if (!chr)
			continue;
		/* "195 nvidia": the major right-aligned in 3 columns, one blank, the name. */
		s = skip_blanks(s, e);
		if (number(&s, e, MAJOR_MAX, &major) < 0 || s == e || (*s != ' ' && *s != '\t'))
			continue;
		s = skip_blanks(s, e);
		for (w = s; w < e && !isspace((unsigned char)*w);)
			w++;
		if ((size_t)(w - s) == nlen && memcmp(s, name, nlen) == 0) {
			*ret = (unsigned)major;
			return 0;
		}
	}
	return -ENOENT;
}

/* A line of mig-minors: "gpu0/gi1/access 21", "gpu0/gi1/ci0/access 22", or another
 * capability's "config 1", "monitor 2" (ci MIG_MINOR_OTHER). -EINVAL for a line that is none of
 * these. */
static int mig_minor_line(const struct gpufile_line *l, struct mig_minor *ret)
{
	const char *s = l->p, *e = l->p + l->len;
	uint64_t gpu = 0, gi = 0, ci = 0, minor;
	int kind = -1; /* the GI's */

	if (literal(&s, e, "gpu")) {
		if (number(&s, e, INT_MAX, &gpu) < 0 || !literal(&s, e, "/gi") ||
		    number(&s, e, INT_MAX, &gi) < 0)
			return -EINVAL;
		if (literal(&s, e, "/ci")) {
			if (number(&s, e, INT_MAX, &ci) < 0)
				return -EINVAL;
			kind = (int)ci;
		}
		if (!literal(&s, e, "/access"))
			return -EINVAL;
	} else {
		const char *w = s;

		while (s < e && (isalnum((unsigned char)*s) || *s == '-' || *s == '_' || *s == '/'))
			s++;
		if (s == w)
			return -EINVAL;
		kind = MIG_MINOR_OTHER;
	}
	if (s == e || (*s != ' ' && *s != '\t'))
		return -EINVAL;
	s = skip_blanks(s, e);
	/* INT_MAX: mig_minor_find() returns a minor as an int, negative meaning none. */
	if (number(&s, e, INT_MAX, &minor) < 0 || skip_blanks(s, e) != e)
		return -EINVAL;
	*ret = (struct mig_minor){
	    .gpu = (unsigned)gpu,
	    .gi = (unsigned)gi,
	    .minor = (unsigned)minor,
	    .ci = kind,
	};
	return 0;
}

int gpufile_mig_minors(const char *text, size_t size, struct mig_minor **ret, size_t *ret_n,
		       struct gpufile_line *bad_line)
{
	_cleanup_free_ struct mig_minor *v = NULL;
	struct cursor c = {text, text + size, 0};
	struct gpufile_line l;
	size_t n = 0, cap = 0;
	bool bad = false;

	while (n < MIG_MINORS_MAX && next_line(&c, &l)) {
		struct mig_minor m;

		if (l.len == 0)
			continue;
		if (mig_minor_line(&l, &m) < 0) {
			if (!bad && bad_line)
				*bad_line = l;
			bad = true;
			continue;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct mig_minor *t = realloc(v, ncap * sizeof(*t));

			if (!t)
				return -ENOMEM;
			v = t;
			cap = ncap;
		}
		v[n++] = m;
	}
	if (bad_line && !bad)
		*bad_line = (struct gpufile_line){};
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

int gpufile_kfd_property(const char *text, size_t size, const char *key, uint64_t *ret,
			 struct gpufile_line *bad_line)
{
	struct cursor c = {text, text + size, 0};
	size_t klen = strlen(key);
	struct gpufile_line l;

	while (next_line(&c, &l)) {
		const char *s, *e = l.p + l.len;
		uint64_t v;

		if (!line_starts(&l, key, klen) || l.len == klen || l.p[klen] != ' ')
			continue;
		s = l.p + klen + 1;
		/* "simd_count 0": the value whole, not its leading digits ("12abc"). */
		if (number(&s, e, UINT64_MAX, &v) < 0 || s != e) {
			if (bad_line)
				*bad_line = l;
			return -EBADMSG;
		}
		*ret = v;
		return 0;
	}
	return -ENOENT;
}
