/* jobcg: lists of IPv4/IPv6 addresses and prefixes, parsed from an argument (the metrics
 * server's --allow) and matched against a peer's address. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "netlist.h"
#include "log.h"
#include "util.h"

/* Errors carry only a column (no file): the argument is named by the caller. */
#define fail_at(err, col, ...) error_set_at(err, NULL, 0, (unsigned)(col), __VA_ARGS__)

/* How much of a bad item a message shows: enough to find it, not a whole argument. */
#define ITEM_SHOWN 64

void jobcg_netlist_free(struct jobcg_netlist *l)
{
	if (!l)
		return;
	free(l->v);
	free(l);
}

/* Whether @a and @b agree on their first @len bits. */
static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned len)
{
	unsigned whole = len / 8, rest = len % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	return !rest || ((a[whole] ^ b[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* @addr (@bytes long) with the bits past the first @len cleared, in @net. */
static void network_of(const uint8_t *addr, size_t bytes, unsigned len, uint8_t *net)
{
	unsigned whole = len / 8, rest = len % 8;

	memset(net, 0, bytes);
	memcpy(net, addr, whole);
	if (rest)
		net[whole] = addr[whole] & (uint8_t)(0xff << (8 - rest));
}

/* One item, @item (@n bytes, not NUL-terminated) at column @col of the list. */
static int parse_item(const char *item, size_t n, unsigned col, struct jobcg_netprefix *ret)
{
	char buf[INET6_ADDRSTRLEN + 8], shown[16 + INET6_ADDRSTRLEN];
	struct jobcg_netprefix p = {};
	const char *slash;
	unsigned max, len;
	size_t alen;
	int shown_n = n > ITEM_SHOWN ? ITEM_SHOWN : (int)n;
	const char *more = n > ITEM_SHOWN ? "..." : "";

	if (n >= sizeof(buf))
		return fail_at(-EINVAL, col, "'%.*s%s' is not an IPv4 or IPv6 address or prefix",
			       shown_n, item, more);
	memcpy(buf, item, n);
	buf[n] = 0;
	slash = strchr(buf, '/');
	alen = slash ? (size_t)(slash - buf) : n;
	buf[alen] = 0;
	if (strchr(buf, ':')) {
		p.family = AF_INET6;
		max = 128;
	} else {
		p.family = AF_INET;
		max = 32;
	}
	/* inet_pton() takes only dotted quads for IPv4 ("10.1" and "010.1.2.3" are refused), and
	 * no zone index or brackets for IPv6. */
	if (inet_pton(p.family, buf, p.addr) != 1)
		return fail_at(-EINVAL, col, "'%.*s' is not an IPv4 or IPv6 address%s", (int)n,
			       item, slash ? " with a prefix length" : "");
	len = max;
	if (slash) {
		const char *d = slash + 1;
		size_t digits = strspn(d, "0123456789");

		if (digits == 0 || d[digits])
			return fail_at(-EINVAL, col + (unsigned)(d - buf),
				       "'%s/%s': the prefix length must be a number 0-%u", buf, d,
				       max);
		len = 0;
		for (size_t i = 0; i < digits && len <= max; i++)
			len = len * 10 + (unsigned)(d[i] - '0');
		if (len > max)
			return fail_at(-ERANGE, col + (unsigned)(d - buf),
				       "'%s/%s': prefix length out of range (0-%u for %s)", buf, d,
				       max, p.family == AF_INET ? "IPv4" : "IPv6");
	}
	p.len = len;
	{
		struct jobcg_netprefix net = p;
		size_t bytes = p.family == AF_INET ? 4 : 16;

		network_of(p.addr, bytes, len, net.addr);
		if (memcmp(net.addr, p.addr, bytes) != 0) {
			inet_ntop(p.family, net.addr, shown, sizeof(shown));
			return fail_at(-EINVAL, col,
				       "'%s/%u' has bits set past its prefix length: write the "
				       "network (%s/%u) or the address alone",
				       buf, len, shown, len);
		}
	}
	*ret = p;
	return 0;
}

int jobcg_netlist_parse(const char *s, struct jobcg_netlist **ret)
{
	_cleanup_free_ struct jobcg_netprefix *v = NULL;
	struct jobcg_netlist *l;
	size_t n = 0, cap = 0;
	const char *p = s;

	if (!s || !*s)
		return fail_at(-EINVAL, 1,
			       "empty address list (expected addresses or prefixes such as "
			       "10.1.0.0/16,::1)");
	for (;;) {
		size_t k = strcspn(p, ",");
		unsigned col = (unsigned)(p - s) + 1;
		int r;

		if (k == 0)
			return fail_at(-EINVAL, col, "empty item at column %u of '%s'", col, s);
		if (n == JOBCG_NETLIST_MAX)
			return fail_at(-E2BIG, col, "more than %d items in the address list",
				       JOBCG_NETLIST_MAX);
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 4;
			struct jobcg_netprefix *t;

			if (ncap > JOBCG_NETLIST_MAX)
				ncap = JOBCG_NETLIST_MAX;
			t = reallocarray(v, ncap, sizeof(*t));
			if (!t)
				return -ENOMEM;
			v = t;
			cap = ncap;
		}
		r = parse_item(p, k, col, &v[n]);
		if (r < 0)
			return r;
		n++;
		p += k;
		if (!*p)
			break;
		p++;
	}
	l = malloc(sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->n = n;
	l->v = TAKE_PTR(v);
	*ret = l;
	return 0;
}

bool jobcg_netlist_contains(const struct jobcg_netlist *l, const struct sockaddr *sa, size_t salen)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *v4 = NULL, *v6 = NULL;

	if (!l || !sa || salen < sizeof(sa_family_t))
		return false;
	if (sa->sa_family == AF_INET && salen >= sizeof(struct sockaddr_in))
		v4 = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	else if (sa->sa_family == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
		v6 = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		if (memcmp(v6, mapped, sizeof(mapped)) == 0)
			v4 = v6 + 12;
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct jobcg_netprefix *p = &l->v[i];

		if (p->family == AF_INET && v4 && prefix_equal(p->addr, v4, p->len))
			return true;
		if (p->family == AF_INET6 && v6 && prefix_equal(p->addr, v6, p->len))
			return true;
	}
	return false;
}

int jobcg_netlist_format(const struct jobcg_netlist *l, char **ret)
{
	/* Each item at most an address, '/', three digits and ','. */
	size_t size = l->n * (INET6_ADDRSTRLEN + 5) + 1, off = 0;
	char *s = malloc(size);

	if (!s)
		return -ENOMEM;
	s[0] = 0;
	for (size_t i = 0; i < l->n; i++) {
		char a[INET6_ADDRSTRLEN];

		if (!inet_ntop(l->v[i].family, l->v[i].addr, a, sizeof(a))) {
			free(s);
			return -errno;
		}
		off +=
		    (size_t)snprintf(s + off, size - off, "%s%s/%u", i ? "," : "", a, l->v[i].len);
	}
	*ret = s;
	return 0;
}
