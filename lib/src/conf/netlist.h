/* jobcg internal: lists of IPv4/IPv6 addresses and prefixes (the metrics server's --allow), parsed
 * from an argument and matched against a peer's address. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most items a list may have: far more than any allowlist, and a bound on what it allocates. */
#define JOBCG_NETLIST_MAX 4096

/* One item: an address is a prefix of full length (/32, /128). */
struct jobcg_netprefix {
	int family;	  /* AF_INET or AF_INET6 */
	unsigned len;	  /* prefix length: 0-32 (IPv4), 0-128 (IPv6) */
	uint8_t addr[16]; /* network byte order, IPv4 in the first 4 bytes; bits past @len zero */
};

struct jobcg_netlist {
	size_t n;
	struct jobcg_netprefix *v;
};

/**
 * Parse a comma-separated list of numeric IPv4 and IPv6 addresses and CIDR prefixes
 * ("10.1.2.3,10.1.0.0/16,::1,fd00::/8"). No blanks, names, zone indexes (%eth0) or brackets.
 * A prefix with bits set past its length ("10.1.2.3/16") is refused rather than taken as its
 * network: whether the host or the network was meant is not for the parser to guess. An empty
 * list, an empty item, an address that does not parse, a length that is not 0-32 (IPv4) or
 * 0-128 (IPv6) written in decimal, and more than JOBCG_NETLIST_MAX items are refused with
 * -EINVAL (-ERANGE for a length out of range, -E2BIG for too many), the error record's message
 * naming the item and its column pointing at it. *ret (free with jobcg_netlist_free())
 * untouched on failure.
 */
int jobcg_netlist_parse(const char *s, struct jobcg_netlist **ret);

void jobcg_netlist_free(struct jobcg_netlist *l);

/**
 * Whether the peer address @sa (@salen bytes, as accept() gives it) is on @l. An IPv4 item
 * matches an IPv4 peer and an IPv4-mapped IPv6 one (::ffff:10.1.2.3, how an IPv4 client appears
 * on a dual-stack socket); an IPv6 item matches IPv6 peers, mapped ones included (::/0 is every
 * IPv6 peer). Any other family, or a short @salen, is not on the list.
 */
bool jobcg_netlist_contains(const struct jobcg_netlist *l, const struct sockaddr *sa, size_t salen);

/** The list written back in the form jobcg_netlist_parse() takes, every item with its length
 * ("10.1.2.3/32,fd00::/8"); free *ret with free(). 0 or -ENOMEM. */
int jobcg_netlist_format(const struct jobcg_netlist *l, char **ret);

#ifdef __cplusplus
}
#endif
