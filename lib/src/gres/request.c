/* jobcg: parsing GRES requests (--gres gpu:2, gpu:a100:1,gpu:v100:2). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "gpudetect_internal.h"
#include "gresxattr.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "log.h"
#include "util.h"

JOBCG_EXPORT void jobcg_gres_request_free(struct jobcg_gres_request *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nitems; i++) {
		free(r->items[i].name);
		free(r->items[i].type);
	}
	free(r->items);
	free(r);
}

static bool valid_word(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(s[i] == '_' || s[i] == '-' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

static bool all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/*
 * A count as Slurm reads one (_is_valid_number): digits with an optional suffix, k/m/g/t/p or
 * kib/mib/... (x1024 per step) or kb/mb/... (x1000). False for a word that is not one, which
 * names a type. *ret saturates at UINT64_MAX, so a huge count is refused as too many.
 */
static bool parse_count(const char *s, size_t len, uint64_t *ret)
{
	static const char units[] = "kmgtp";
	const char *u;
	uint64_t v = 0, mult = 1, base = 1024;
	size_t i = 0;

	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
		v = v > (UINT64_MAX - 9) / 10 ? UINT64_MAX : v * 10 + (uint64_t)(s[i] - '0');
	if (i == 0)
		return false;
	if (i < len) {
		u = s[i] ? strchr(units, s[i] | 0x20) : NULL;
		if (!u)
			return false;
		if (len - i == 2 && (s[i + 1] | 0x20) == 'b')
			base = 1000;
		else if (!(len - i == 1 || (len - i == 3 && strncasecmp(s + i + 1, "ib", 2) == 0)))
			return false;
		for (const char *k = units; k <= u; k++)
			mult *= base;
		v = v > UINT64_MAX / mult ? UINT64_MAX : v * mult;
	}
	*ret = v;
	return true;
}

/* One "NAME[:TYPE][:COUNT]" item spanning s[0..len), at column col (1-based) of the request. */
static int parse_item(const char *whole, const char *s, size_t len, struct jobcg_gres_req_item *ret)
{
	unsigned col = (unsigned)(s - whole) + 1;
	char item[96] = "";
	const char *parts[3] = {0};
	size_t plen[3] = {0}, np = 0;
	const char *p = s, *end = s + len;
	const char *name, *type = NULL;
	size_t name_len, type_len = 0;
	unsigned count = 1;

	/* The caller names the request; an item of several is named here. */
	if (len != strlen(whole))
		snprintf(item, sizeof(item), "item '%.*s': ", (int)len, s);
	if (len >= 5 && strncmp(s, "gres/", 5) == 0) {
		p += 5;
		col += 5;
	}
	while (p <= end) {
		const char *c = memchr(p, ':', (size_t)(end - p));

		if (np == 3)
			return error_set_at(-EINVAL, NULL, 0, col,
					    "%stoo many ':' (want NAME[:TYPE][:COUNT])", item);
		parts[np] = p;
		plen[np] = c ? (size_t)(c - p) : (size_t)(end - p);
		np++;
		if (!c)
			break;
		p = c + 1;
	}
	name = parts[0];
	name_len = plen[0];
	if (!valid_word(name, name_len) || all_digits(name, name_len))
		return error_set_at(-EINVAL, NULL, 0, col, "%sbad or missing name", item);
	if (np >= 2) {
		const char *last = parts[np - 1];
		size_t last_len = plen[np - 1];
		unsigned last_col = col + (unsigned)(last - parts[0]);

		uint64_t v;

		/* "gpu:-1" is a count gone wrong, not a type named "-1". A count of 0 asks for
		 * none, as in Slurm. */
		if (last_len > 1 && (last[0] == '-' || last[0] == '+') &&
		    parse_count(last + 1, last_len - 1, &v))
			return error_set_at(-EINVAL, NULL, 0, last_col,
					    "%sinvalid count '%.*s' (need 0..%d)", item,
					    (int)last_len, last, JOBCG_GRES_MAX);
		if (parse_count(last, last_len, &v)) {
			if (v > JOBCG_GRES_MAX && all_digits(last, last_len))
				return error_set_at(-EINVAL, NULL, 0, last_col,
						    "%scount %.*s exceeds %d", item, (int)last_len,
						    last, JOBCG_GRES_MAX);
			if (v > JOBCG_GRES_MAX)
				return error_set_at(
				    -EINVAL, NULL, 0, last_col, "%scount %.*s (%s%llu) exceeds %d",
				    item, (int)last_len, last, v == UINT64_MAX ? "more than " : "",
				    (unsigned long long)v, JOBCG_GRES_MAX);
			count = (unsigned)v;
			if (np == 3) {
				type = parts[1];
				type_len = plen[1];
			}
		} else if (np == 3) {
			return error_set_at(-EINVAL, NULL, 0, last_col,
					    "%scount '%.*s' is not a number", item, (int)last_len,
					    last);
		} else {
			type = parts[1];
			type_len = plen[1];
		}
		if (type && !valid_word(type, type_len))
			return error_set_at(-EINVAL, NULL, 0, col + (unsigned)(type - parts[0]),
					    "%sbad or empty type", item);
	}
	ret->name = strndup(name, name_len);
	ret->type = type ? strndup(type, type_len) : NULL;
	ret->count = count;
	if (!ret->name || (type && !ret->type)) {
		free(ret->name);
		free(ret->type);
		return -ENOMEM;
	}
	return 0;
}

JOBCG_EXPORT int jobcg_gres_request_parse(const char *s, struct jobcg_gres_request **ret)
{
	return_if_null(ret);
	struct jobcg_gres_request *r;
	const char *p = s;

	if (!s || !*s)
		return error_set(-EINVAL, "empty request (want NAME[:TYPE][:COUNT])");
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (;;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		struct jobcg_gres_req_item item = {}, *items;
		int k;

		if (len == 0) {
			jobcg_gres_request_free(r);
			return error_set_at(-EINVAL, NULL, 0, (unsigned)(p - s) + 1, "empty item");
		}
		if (r->nitems >= 64) {
			jobcg_gres_request_free(r);
			return error_set(-E2BIG, "more than 64 items");
		}
		k = parse_item(s, p, len, &item);
		if (k < 0) {
			jobcg_gres_request_free(r);
			return k;
		}
		/* As Slurm: a name may come once per type, but an item without a type already
		 * asks for that name whatever the type, so it is the name given twice. */
		for (size_t i = 0; i < r->nitems; i++)
			if (streq(r->items[i].name, item.name) &&
			    (!r->items[i].type || !item.type ||
			     gres_same_type(r->items[i].type, item.type))) {
				bool typed = r->items[i].type && item.type;

				k = error_set_at(-EINVAL, NULL, 0, (unsigned)(p - s) + 1,
						 "%s%s%s given twice", item.name, typed ? ":" : "",
						 typed ? item.type : "");
				free(item.name);
				free(item.type);
				jobcg_gres_request_free(r);
				return k;
			}
		items = realloc(r->items, (r->nitems + 1) * sizeof(*items));
		if (!items) {
			free(item.name);
			free(item.type);
			jobcg_gres_request_free(r);
			return -ENOMEM;
		}
		r->items = items;
		r->items[r->nitems++] = item;
		if (!c)
			break;
		p = c + 1;
	}
	*ret = r;
	return 0;
}
