/* Unit tests for the address list parser and matcher (netlist.h), what `jobcg metrics --allow`
 * takes from its argument and applies to every connection. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "log.h"
#include "netlist.h"
#include "tap.h"
#include "util.h"

/* @s parses, and writes back as @want. */
static void list_ok(const char *s, const char *want)
{
	struct jobcg_netlist *l = NULL;
	char *text = NULL;
	int r = jobcg_netlist_parse(s, &l);

	if (r == 0)
		r = jobcg_netlist_format(l, &text);
	ok(r == 0 && text && strcmp(text, want) == 0, "'%s' parses as '%s' (got r=%d '%s': %s)", s,
	   want, r, text ? text : "", r ? jobcg_last_error()->message : "");
	free(text);
	jobcg_netlist_free(l);
}

/* @s is refused with @want_r, at column @want_col, the message holding @needle (the item). */
static void list_bad(const char *s, int want_r, unsigned want_col, const char *needle)
{
	struct jobcg_netlist *l = (struct jobcg_netlist *)0x1;
	int r = jobcg_netlist_parse(s, &l);
	const struct jobcg_error *e = jobcg_last_error();

	ok(r == want_r && l == (struct jobcg_netlist *)0x1 && e->column == want_col &&
	       strstr(e->message, needle),
	   "'%s' refused with %d at column %u naming '%s' (got %d col %u: %s)", s, want_r, want_col,
	   needle, r, e->column, e->message);
	if (r == 0 && l != (struct jobcg_netlist *)0x1)
		jobcg_netlist_free(l);
}

/* Whether the list @s holds the peer @addr (IPv4 or IPv6 text, as a sockaddr of its family). */
static int has(const char *s, const char *addr)
{
	struct jobcg_netlist *l = NULL;
	struct sockaddr_in in4 = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	bool found;

	if (jobcg_netlist_parse(s, &l) < 0)
		return -1;
	if (inet_pton(AF_INET, addr, &in4.sin_addr) == 1)
		found = jobcg_netlist_contains(l, (struct sockaddr *)&in4, sizeof(in4));
	else if (inet_pton(AF_INET6, addr, &in6.sin6_addr) == 1)
		found = jobcg_netlist_contains(l, (struct sockaddr *)&in6, sizeof(in6));
	else {
		jobcg_netlist_free(l);
		return -2;
	}
	jobcg_netlist_free(l);
	return found;
}

static void test_parse(void)
{
	list_ok("10.1.2.3", "10.1.2.3/32");
	list_ok("10.1.0.0/16", "10.1.0.0/16");
	list_ok("::1", "::1/128");
	list_ok("fd00::/8", "fd00::/8");
	list_ok("10.1.2.3,10.1.0.0/16,::1,fd00::/8", "10.1.2.3/32,10.1.0.0/16,::1/128,fd00::/8");
	list_ok("0.0.0.0/0", "0.0.0.0/0");
	list_ok("::/0", "::/0");
	list_ok("10.1.2.3/32", "10.1.2.3/32");
	list_ok("2001:db8::1/128", "2001:db8::1/128");
	list_ok("::ffff:10.1.2.3", "::ffff:10.1.2.3/128");
	list_ok("10.1.2.128/25", "10.1.2.128/25");
	list_ok("10.0.0.0/016", "10.0.0.0/16");

	list_bad("", -EINVAL, 1, "empty address list");
	list_bad(",", -EINVAL, 1, "empty item");
	list_bad("10.1.2.3,", -EINVAL, 10, "empty item");
	list_bad("10.1.2.3,,::1", -EINVAL, 10, "empty item");
	list_bad(",10.1.2.3", -EINVAL, 1, "empty item");
	list_bad("10.1.2.3,bogus", -EINVAL, 10, "'bogus'");
	list_bad("localhost", -EINVAL, 1, "'localhost'");
	list_bad("10.1.2", -EINVAL, 1, "'10.1.2'");
	list_bad("10.1.2.256", -EINVAL, 1, "'10.1.2.256'");
	list_bad(" 10.1.2.3", -EINVAL, 1, "' 10.1.2.3'");
	list_bad("10.1.2.3, ::1", -EINVAL, 10, "' ::1'");
	list_bad("[::1]", -EINVAL, 1, "'[::1]'");
	list_bad("fe80::1%eth0", -EINVAL, 1, "'fe80::1%eth0'");
	list_bad("10.1.2.3/33", -ERANGE, 10, "'10.1.2.3/33'");
	list_bad("::1/129", -ERANGE, 5, "'::1/129'");
	list_bad("::/99999999999999999999", -ERANGE, 4, "'::/99999999999999999999'");
	list_bad("10.0.0.0/", -EINVAL, 10, "'10.0.0.0/'");
	list_bad("10.0.0.0/-1", -EINVAL, 10, "'10.0.0.0/-1'");
	list_bad("10.0.0.0/+8", -EINVAL, 10, "'10.0.0.0/+8'");
	list_bad("10.0.0.0/8/8", -EINVAL, 10, "'10.0.0.0/8/8'");
	list_bad("10.0.0.0/8x", -EINVAL, 10, "'10.0.0.0/8x'");
	list_bad("/8", -EINVAL, 1, "'/8'");
	/* Host bits set: refused, the network shown, rather than guessed. */
	list_bad("10.1.2.3/16", -EINVAL, 1, "'10.1.2.3/16' has bits set past its prefix length");
	list_bad("10.1.2.3/16", -EINVAL, 1, "10.1.0.0/16");
	list_bad("::1,fd00::1/8", -EINVAL, 5, "fd00::/8");
	list_bad("10.1.2.3/0", -EINVAL, 1, "0.0.0.0/0");
	list_bad("10.1.2.129/25", -EINVAL, 1, "10.1.2.128/25");
}

static void test_too_many(void)
{
	size_t n = JOBCG_NETLIST_MAX + 1, off = 0;
	char *s = malloc(n * 16);
	struct jobcg_netlist *l = NULL;
	int r;

	for (size_t i = 0; i < n; i++)
		off += (size_t)sprintf(s + off, "%s10.%zu.%zu.1", i ? "," : "", i / 256, i % 256);
	r = jobcg_netlist_parse(s, &l);
	ok(r == -E2BIG, "%d items refused with -E2BIG (got %d)", JOBCG_NETLIST_MAX + 1, r);
	/* The bound itself is taken. */
	*strrchr(s, ',') = 0;
	r = jobcg_netlist_parse(s, &l);
	ok(r == 0 && l && l->n == JOBCG_NETLIST_MAX, "%d items taken (got %d)", JOBCG_NETLIST_MAX,
	   r);
	jobcg_netlist_free(l);
	free(s);
}

static void test_match(void)
{
	is_int(has("10.1.2.3", "10.1.2.3"), 1, "an address matches itself");
	is_int(has("10.1.2.3", "10.1.2.4"), 0, "and not its neighbour");
	is_int(has("10.1.2.3/32", "10.1.2.3"), 1, "/32 is the address");
	is_int(has("10.1.0.0/16", "10.1.255.255"), 1, "/16: last address in");
	is_int(has("10.1.0.0/16", "10.2.0.0"), 0, "/16: next network out");
	is_int(has("10.1.2.128/25", "10.1.2.200"), 1, "/25: upper half in");
	is_int(has("10.1.2.128/25", "10.1.2.127"), 0, "/25: lower half out");
	is_int(has("0.0.0.0/0", "192.0.2.1"), 1, "/0 holds every IPv4 address");
	is_int(has("0.0.0.0/0", "2001:db8::1"), 0, "IPv4 /0 holds no IPv6 address");
	is_int(has("::/0", "2001:db8::1"), 1, "::/0 holds every IPv6 address");
	is_int(has("::/0", "192.0.2.1"), 0, "::/0 holds no IPv4 peer");
	is_int(has("::1", "::1"), 1, "::1 matches itself");
	is_int(has("::1/128", "::2"), 0, "/128 is one address");
	is_int(has("fd00::/8", "fdff:1::5"), 1, "fd00::/8 holds fdff:1::5");
	is_int(has("fd00::/8", "fe00::1"), 0, "fd00::/8 does not hold fe00::1");
	is_int(has("2001:db8::/33", "2001:db8:7fff::1"), 1, "/33: in");
	is_int(has("2001:db8::/33", "2001:db8:8000::1"), 0, "/33: out");
	/* An IPv4 client on a dual-stack socket. */
	is_int(has("10.1.2.3", "::ffff:10.1.2.3"), 1, "IPv4 item matches the mapped peer");
	is_int(has("10.1.0.0/16", "::ffff:10.1.9.9"), 1, "IPv4 prefix matches a mapped peer");
	is_int(has("10.1.0.0/16", "::ffff:10.2.0.1"), 0, "and not a mapped peer outside");
	is_int(has("0.0.0.0/0", "::ffff:192.0.2.1"), 1, "IPv4 /0 holds every mapped peer");
	is_int(has("10.1.2.3", "::10.1.2.3"), 0, "the compatible form is not a mapped peer");
	is_int(has("10.1.2.3", "::fffe:10.1.2.3"), 0, "nor one a bit off");
	is_int(has("::ffff:10.1.2.3", "::ffff:10.1.2.3"), 1, "an IPv6 mapped item matches");
	is_int(has("::ffff:10.1.2.3", "10.1.2.3"), 0, "an IPv6 item never matches IPv4 peers");
	is_int(has("127.0.0.2,::1", "127.0.0.1"), 0, "127.0.0.1 not in 127.0.0.2,::1");
	is_int(has("127.0.0.2,::1", "127.0.0.2"), 1, "a later item matches");
	is_int(has("127.0.0.2,::1", "::1"), 1, "an IPv6 item after an IPv4 one");
}

static void test_match_odd(void)
{
	struct jobcg_netlist *l = NULL;
	struct sockaddr_in in4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a010203)};
	struct sockaddr_un {
		sa_family_t f;
		char path[8];
	} un = {.f = AF_UNIX};

	if (jobcg_netlist_parse("0.0.0.0/0,::/0", &l) < 0)
		abort();
	ok(jobcg_netlist_contains(l, (struct sockaddr *)&in4, sizeof(in4)), "full length matches");
	ok(!jobcg_netlist_contains(l, (struct sockaddr *)&in4, sizeof(in4) - 1),
	   "a short address is on no list");
	ok(!jobcg_netlist_contains(l, (struct sockaddr *)&un, sizeof(un)),
	   "another family is on no list");
	ok(!jobcg_netlist_contains(l, NULL, 0), "no address is on no list");
	ok(!jobcg_netlist_contains(NULL, (struct sockaddr *)&in4, sizeof(in4)),
	   "no list holds nothing");
	jobcg_netlist_free(l);
}

int main(void)
{
	test_parse();
	test_too_many();
	test_match();
	test_match_odd();
	return tap_done();
}
