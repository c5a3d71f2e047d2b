/* jobcg internal: the devices of a job or step, kept as an extended attribute on its cgroup
 * directory, and the walk that derives the node's held devices from them. */
#pragma once

#include <stdbool.h>

#include "jobcg/gres.h"

/* The extended attribute holding a job's or step's devices on its cgroup directory. */
#define JOBCG_GRES_XATTR "trusted.jobcg.gres"

/** Store @s on directory @dirfd under @xattr (NULL: JOBCG_GRES_XATTR). */
int jobcg_gres_xattr_write(const struct jobcg_gres_node *n, int dirfd, const char *xattr,
			   const struct jobcg_gres_set *s);
/** Read it back; -ENODATA when the directory holds none, -EBADMSG when what it holds names
 * devices this node does not have (gres.conf changed under a live job). */
int jobcg_gres_xattr_read(const struct jobcg_gres_node *n, int dirfd, const char *xattr,
			  struct jobcg_gres_set *ret);

/** One item of a device list, the @len bytes at @s: an index or a range of them ("2", "0-3"),
 * digits only, below JOBCG_GRES_MAX, the range not backwards. 0, or -EINVAL. */
int gres_index_range(const char *s, size_t len, unsigned *ret_lo, unsigned *ret_hi);

/** jobcg_gres_set_parse() naming @s as @what ("--devices") in its errors. */
int gres_set_parse_as(const struct jobcg_gres_node *n, const char *s, const char *what,
		      struct jobcg_gres_set *ret);

/**
 * Parse stored state @s as the tree scan does: a device gres.conf no longer has (a GPU taken out
 * after a failure) is logged and left out, *ret_dropped set, every device still known kept, so
 * that what a job or reservation still holds never counts as free. -EBADMSG when @s is not a
 * device list at all.
 */
int gres_set_parse_known(const struct jobcg_gres_node *n, const char *s, struct jobcg_gres_set *ret,
			 bool *ret_dropped);

/* Called by jobcg_gres_scan() for each directory holding the attribute. */
typedef int (*jobcg_gres_scan_fn)(const char *relpath, unsigned depth,
				  const struct jobcg_gres_set *s, void *userdata);

/**
 * Walk the tree below @rootfd (its directories, and those of reservations inside it, not
 * following symlinks) and return in *ret_used the union of their devices: the devices held on
 * this node, derived from the cgroup tree itself. Steps and tasks are not read: what they hold
 * is a part of their job's. Call it under the node lock. @fn (may be NULL) sees each directory;
 * a nonzero return stops the walk and is returned. Attributes that do not parse (gres.conf
 * changed under a running job) are logged; their unknown entries count as nothing.
 */
int jobcg_gres_scan(const struct jobcg_gres_node *n, int rootfd, const char *xattr,
		    jobcg_gres_scan_fn fn, void *userdata, struct jobcg_gres_set *ret_used);
