/* jobcg: device rules in devices.list-style text ("c 195:0 rw", "b *:* m"), parse and print. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "jobcg/devrule.h"
#include "log.h"
#include "util.h"

/* Parse a major or minor number or "*" at *p; advances *p. */
static int parse_num(const char *s, const char **p, uint32_t *ret)
{
	const char *q = *p, *end;
	uint64_t v;
	int r;

	if (*q == '*') {
		*ret = JOBCG_DEV_ANY;
		*p = q + 1;
		return 0;
	}
	/* Linux device numbers: 12-bit major, 20-bit minor; anything 2^32-1 and up is no device. */
	r = parse_u64_prefix(q, JOBCG_DEV_ANY - 1, &v, &end);
	if (r == -ERANGE)
		return error_set_at(-EINVAL, "", 0, (unsigned)(q - s) + 1,
				    "device rule '%s': number too large", s);
	if (r < 0)
		return error_set_at(-EINVAL, "", 0, (unsigned)(q - s) + 1,
				    "device rule '%s': expected a number or '*'", s);
	*ret = (uint32_t)v;
	*p = end;
	return 0;
}

JOBCG_EXPORT int jobcg_devrule_parse(const char *s, struct jobcg_devrule *ret)
{
	return_if_null(ret);
	struct jobcg_devrule r = {.major = JOBCG_DEV_ANY,
				  .minor = JOBCG_DEV_ANY,
				  .access = JOBCG_DEV_ACC_ALL,
				  .allow = true};
	const char *p;
	int e;

	if (!s)
		return error_set(-EINVAL, "device rule: missing");
	p = s;
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '!') {
		r.allow = false;
		p++;
		while (isspace((unsigned char)*p))
			p++;
	} else if (startswith(p, "deny") && (isspace((unsigned char)p[4]))) {
		r.allow = false;
		p += 4;
		while (isspace((unsigned char)*p))
			p++;
	}
	if (*p != 'a' && *p != 'b' && *p != 'c')
		return error_set_at(-EINVAL, "", 0, (unsigned)(p - s) + 1,
				    "device rule '%s': type must be 'a', 'b' or 'c'", s);
	r.type = *p++;
	if (*p && !isspace((unsigned char)*p))
		return error_set_at(-EINVAL, "", 0, (unsigned)(p - s) + 1,
				    "device rule '%s': expected a space after the type", s);
	while (isspace((unsigned char)*p))
		p++;
	if (*p == 0)
		goto done;

	if (r.type == 'a' && !isdigit((unsigned char)*p) && *p != '*')
		goto access; /* "a rw" */
	e = parse_num(s, &p, &r.major);
	if (e < 0)
		return e;
	if (*p != ':')
		return error_set_at(-EINVAL, "", 0, (unsigned)(p - s) + 1,
				    "device rule '%s': expected ':' after the major number", s);
	p++;
	e = parse_num(s, &p, &r.minor);
	if (e < 0)
		return e;
	if (*p && !isspace((unsigned char)*p))
		return error_set_at(-EINVAL, "", 0, (unsigned)(p - s) + 1,
				    "device rule '%s': unexpected character '%c'", s, *p);
	while (isspace((unsigned char)*p))
		p++;
	if (*p == 0)
		goto done;
access:
	if (*p == '-' && (p[1] == 0 || isspace((unsigned char)p[1]))) {
		r.access = 0;
		p++;
	} else {
		r.access = 0;
		for (; *p && !isspace((unsigned char)*p); p++) {
			unsigned bit = *p == 'r'   ? JOBCG_DEV_ACC_READ
				       : *p == 'w' ? JOBCG_DEV_ACC_WRITE
				       : *p == 'm' ? JOBCG_DEV_ACC_MKNOD
						   : 0;
			if (!bit)
				return error_set_at(-EINVAL, "", 0, (unsigned)(p - s) + 1,
						    "device rule '%s': access must be made of 'r', "
						    "'w', 'm' or be '-'",
						    s);
			if (r.access & bit)
				return error_set_at(-EINVAL, "", 0, (unsigned)(p - s) + 1,
						    "device rule '%s': access '%c' given twice", s,
						    *p);
			r.access |= bit;
		}
	}
	while (isspace((unsigned char)*p))
		p++;
	if (*p)
		return error_set_at(-EINVAL, "", 0, (unsigned)(p - s) + 1,
				    "device rule '%s': trailing text", s);
done:
	*ret = r;
	return 0;
}

JOBCG_EXPORT char *jobcg_devaccess_format(unsigned access, char *buf)
{
	char *p = buf;

	if (access & JOBCG_DEV_ACC_READ)
		*p++ = 'r';
	if (access & JOBCG_DEV_ACC_WRITE)
		*p++ = 'w';
	if (access & JOBCG_DEV_ACC_MKNOD)
		*p++ = 'm';
	if (p == buf)
		*p++ = '-';
	*p = 0;
	return buf;
}

static void format_num(uint32_t v, char *buf, size_t size)
{
	if (v == JOBCG_DEV_ANY)
		snprintf(buf, size, "*");
	else
		snprintf(buf, size, "%u", v);
}

JOBCG_EXPORT char *jobcg_devrule_format(const struct jobcg_devrule *r, char *buf, size_t size)
{
	char maj[16], min[16], acc[4];

	if (!buf || size == 0)
		return buf;
	format_num(r->major, maj, sizeof(maj));
	format_num(r->minor, min, sizeof(min));
	snprintf(buf, size, "%s%c %s:%s %s", r->allow ? "" : "deny ", r->type ? r->type : '?', maj,
		 min, jobcg_devaccess_format(r->access & JOBCG_DEV_ACC_ALL, acc));
	return buf;
}
