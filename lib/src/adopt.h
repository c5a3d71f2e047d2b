/* jobcg internal: the pure choice of adopt.c (unit tested). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct adopt_candidate {
	uint32_t id;
	int have_owner;
	uid_t uid;
	uint64_t created_sec;
};

/* Index of the newest job owned by @uid (creation time, then id), or -1 when there is none. */
long adopt_choose(const struct adopt_candidate *c, size_t n, uid_t uid);
/* Real uid from /proc/<pid>/status text ("Uid:\t<real>\t..."). -EINVAL when absent. */
int adopt_parse_status_uid(const char *status, uid_t *ret);
