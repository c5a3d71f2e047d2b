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

/* The next line of [*p, end), up to its '\n' or a NUL; false at the end of the text. */
static bool next_line(const char **p, const char *end, struct gpufile_line *ret)
{
	const char *nl;

	if (*p >= end)
		return false;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	ret->p = *p;
	ret->len = strnlen(*p, (size_t)((nl ? nl : end) - *p));
	*p = nl ? nl + 1 : end;
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

int gpufile_field(const char *text, size_t size, const char *key, char **ret)
{
	const char *p = text, *end = text + size;
	size_t klen = strlen(key);
	struct gpufile_line l;

	while (next_line(&p, end, &l)) {
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
		return 0;
	}
	return -ENOENT;
}

int gpufile_field_unsigned(const char *text, size_t size, const char *key, unsigned max,
			   unsigned *ret)
{
	_cleanup_free_ char *v = NULL;
	int r = gpufile_field(text, size, key, &v);

	if (r < 0)
		return r;
	return parse_uint(v, max, ret) < 0 ? -EBADMSG : 0;
}

int gpufile_nvidia_minor_uuid(const char *text, size_t size, unsigned *ret_minor, char **ret_uuid)
{
	_cleanup_free_ char *uuid = NULL;
	unsigned minor;
	int r = gpufile_field_unsigned(text, size, "Device Minor", GPUFILE_MINOR_MAX, &minor);

	if (r == 0)
		r = gpufile_field(text, size, "GPU UUID", &uuid);
	if (r == -ENOMEM)
		return r;
	/* One word, as the driver writes it ("GPU-" and 36 characters): it goes into
	 * CUDA_VISIBLE_DEVICES. */
	if (r < 0 || !*uuid || strlen(uuid) > GPUFILE_UUID_MAX || strpbrk(uuid, " \t\r\v\f"))
		return -EBADMSG;
	*ret_minor = minor;
	*ret_uuid = TAKE_PTR(uuid);
	return 0;
}

int gpufile_chr_major(const char *text, size_t size, const char *name, unsigned *ret)
{
	const char *p = text, *end = text + size;
	size_t nlen = strlen(name);
	struct gpufile_line l;
	bool chr = false;

	while (next_line(&p, end, &l)) {
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

/* "gpu0/gi1/access 21" or "gpu0/gi1/ci0/access 22"; false for any other line. */
static bool mig_minor_line(const struct gpufile_line *l, struct mig_minor *ret)
{
	const char *s = l->p, *e = l->p + l->len;
	uint64_t gpu, gi, ci = 0, minor;
	bool has_ci = false;

	if (!literal(&s, e, "gpu") || number(&s, e, INT_MAX, &gpu) < 0 || !literal(&s, e, "/gi") ||
	    number(&s, e, INT_MAX, &gi) < 0)
		return false;
	if (literal(&s, e, "/ci")) {
		if (number(&s, e, INT_MAX, &ci) < 0)
			return false;
		has_ci = true;
	}
	if (!literal(&s, e, "/access") || s == e || (*s != ' ' && *s != '\t'))
		return false;
	s = skip_blanks(s, e);
	/* INT_MAX: mig_minor_find() returns a minor as an int, negative meaning none. */
	if (number(&s, e, INT_MAX, &minor) < 0 || skip_blanks(s, e) != e)
		return false;
	*ret = (struct mig_minor){
	    .gpu = (unsigned)gpu,
	    .gi = (unsigned)gi,
	    .minor = (unsigned)minor,
	    .ci = has_ci ? (int)ci : -1,
	};
	return true;
}

int gpufile_mig_minors(const char *text, size_t size, struct mig_minor **ret, size_t *ret_n)
{
	_cleanup_free_ struct mig_minor *v = NULL;
	const char *p = text, *end = text + size;
	struct gpufile_line l;
	size_t n = 0, cap = 0;

	while (n < MIG_MINORS_MAX && next_line(&p, end, &l)) {
		struct mig_minor m;

		if (!mig_minor_line(&l, &m))
			continue;
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
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

int gpufile_kfd_property(const char *text, size_t size, const char *key, uint64_t *ret,
			 struct gpufile_line *bad_line)
{
	const char *p = text, *end = text + size;
	size_t klen = strlen(key);
	struct gpufile_line l;

	while (next_line(&p, end, &l)) {
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
