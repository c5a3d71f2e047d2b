/* jobcg: the device rule model (devices.list-style text: "c 195:0 rw", "b *:* m"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define JOBCG_DEV_ANY UINT32_MAX /* wildcard major or minor ("*") */

enum {
	JOBCG_DEV_ACC_MKNOD = 1u << 0, /* same values as the kernel's BPF_DEVCG_ACC_* */
	JOBCG_DEV_ACC_READ = 1u << 1,
	JOBCG_DEV_ACC_WRITE = 1u << 2,
	JOBCG_DEV_ACC_ALL = 7u,
};

struct jobcg_devrule {
	char type;	 /* 'c', 'b', or 'a' (both) */
	uint32_t major;	 /* or JOBCG_DEV_ANY */
	uint32_t minor;	 /* or JOBCG_DEV_ANY */
	unsigned access; /* JOBCG_DEV_ACC_* bits */
	bool allow;	 /* true: allow these accesses; false: deny them */
};

/**
 * Parse one rule such as "c 195:0 rw", "c 195:* rwm", "b *:* m", "a" (everything).
 * The access part may be omitted (means rwm) and "-" means none. A leading '!' or "deny "
 * makes it a deny rule. Returns 0 or -EINVAL with the error record set (column inside @s).
 */
JOBCG_EXPORT int jobcg_devrule_parse(const char *s, struct jobcg_devrule *ret);

/** Format a rule as "c 195:0 rw" (deny rules are prefixed "deny "). Returns @buf. */
JOBCG_EXPORT char *jobcg_devrule_format(const struct jobcg_devrule *r, char *buf, size_t size);

/** Format access bits as a subset of "rwm", or "-" for none. @buf needs 4 bytes. */
JOBCG_EXPORT char *jobcg_devaccess_format(unsigned access, char *buf);

#ifdef __cplusplus
}
#endif
