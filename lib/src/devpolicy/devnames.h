/* jobcg internal (jobcg policy, tests): device node names found under /dev, to print "c 195:1" as
 * /dev/nvidia1. */
#pragma once

#include <stdint.h>

struct jobcg_devnames;
/** Scan @dir (NULL: /dev) and three levels below for char and block nodes (at most 65536). */
int jobcg_devnames_scan(const char *dir, struct jobcg_devnames **ret);
/** An empty table, for jobcg_devnames_add(). */
int jobcg_devnames_new(struct jobcg_devnames **ret);
/** Add @path if it is a char or block device node (0), else -ENODEV/-errno. */
int jobcg_devnames_add(struct jobcg_devnames *d, const char *path);
/** The shortest path known for that device, or NULL. @type 'c' or 'b'. */
const char *jobcg_devnames_find(const struct jobcg_devnames *d, char type, uint32_t major,
				uint32_t minor);
void jobcg_devnames_free(struct jobcg_devnames *d);
