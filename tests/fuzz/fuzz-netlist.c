/* libFuzzer target: the address list of `jobcg metrics --allow`. A parsed list formats and parses
 * back to itself, and holds the first and last address of each of its prefixes (an IPv4 one also
 * as an IPv4-mapped IPv6 peer). */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netlist.h"
#include "fuzz-input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The address of @p with every bit past its length set to @ones (0: the first, 1: the last). */
static void edge(const struct jobcg_netprefix *p, int ones, uint8_t *out)
{
	memcpy(out, p->addr, 16);
	for (unsigned b = p->len; b < (p->family == AF_INET ? 32u : 128u); b++)
		if (ones)
			out[b / 8] |= (uint8_t)(0x80 >> (b % 8));
}

static void must_hold(const struct jobcg_netlist *l, const struct jobcg_netprefix *p)
{
	for (int ones = 0; ones <= 1; ones++) {
		uint8_t a[16];

		edge(p, ones, a);
		if (p->family == AF_INET) {
			struct sockaddr_in in4 = {.sin_family = AF_INET};
			struct sockaddr_in6 m = {.sin6_family = AF_INET6};

			memcpy(&in4.sin_addr, a, 4);
			m.sin6_addr.s6_addr[10] = m.sin6_addr.s6_addr[11] = 0xff;
			memcpy(&m.sin6_addr.s6_addr[12], a, 4);
			if (!jobcg_netlist_contains(l, (struct sockaddr *)&in4, sizeof(in4)) ||
			    !jobcg_netlist_contains(l, (struct sockaddr *)&m, sizeof(m)))
				abort();
		} else {
			struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};

			memcpy(&in6.sin6_addr, a, 16);
			if (!jobcg_netlist_contains(l, (struct sockaddr *)&in6, sizeof(in6)))
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstring(data, size, 1 << 16), *text = NULL;
	struct jobcg_netlist *l = NULL, *again = NULL;

	if (!s)
		return 0;
	if (jobcg_netlist_parse(s, &l) == 0) {
		if (l->n == 0 || l->n > JOBCG_NETLIST_MAX)
			abort();
		for (size_t i = 0; i < l->n; i++) {
			const struct jobcg_netprefix *p = &l->v[i];

			if ((p->family != AF_INET || p->len > 32) &&
			    (p->family != AF_INET6 || p->len > 128))
				abort();
			must_hold(l, p);
		}
		if (jobcg_netlist_format(l, &text) == 0) {
			if (jobcg_netlist_parse(text, &again) != 0 || again->n != l->n ||
			    memcmp(again->v, l->v, l->n * sizeof(*l->v)) != 0)
				abort();
		}
	}
	jobcg_netlist_free(again);
	jobcg_netlist_free(l);
	free(text);
	free(s);
	return 0;
}
