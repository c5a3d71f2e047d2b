/* Unit tests for adopt's pure parts: which job a login goes to, and a process's uid. */
#include "adopt.h"
#include "tap.h"
#include "util.h"

int main(void)
{
	const struct adopt_candidate c[] = {
	    {.id = 10, .have_owner = 1, .uid = 1000, .created_sec = 100},
	    {.id = 11, .have_owner = 1, .uid = 1001, .created_sec = 300},
	    {.id = 12, .have_owner = 1, .uid = 1000, .created_sec = 200},
	    {.id = 9, .have_owner = 1, .uid = 1000, .created_sec = 200},
	    {.id = 99, .have_owner = 0, .uid = 1000, .created_sec = 900},
	};
	uid_t u = 0;

	is_int(adopt_choose(c, 5, 1000), 2,
	       "the newest job of uid 1000 wins (equal time: higher id)");
	is_int(adopt_choose(c, 5, 1001), 1, "uid 1001 has exactly one job");
	is_int(adopt_choose(c, 5, 1002), -1, "a user without a job gets none");
	is_int(adopt_choose(c, 1, 1000), 0, "a single candidate");
	is_int(adopt_choose(c, 0, 1000), -1, "no jobs at all");
	is_int(adopt_choose(&c[4], 1, 1000), -1, "a job without a recorded owner is never chosen");

	is_int(adopt_parse_status_uid("Name:\tsshd\nUid:\t1000\t0\t0\t0\nGid:\t1\n", &u), 0,
	       "Uid line parsed");
	is_int(u, 1000, "the real uid is the first field");
	is_int(adopt_parse_status_uid("Name:\tx\n", &u), -EINVAL, "no Uid line");
	is_int(adopt_parse_status_uid("Uid:\tabc\n", &u), -EINVAL, "garbage uid");
	return tap_done();
}
