/* Fuzz targets' shared GRES node: two typed GPUs and a NIC, as a gres.conf would give them. */
#pragma once

#include "gres_internal.h"
#include "jobcg/gres.h"

/* The node of those records in *ret (gres_node_new()); 0 or -errno. */
static inline int fuzz_gres_node(struct jobcg_gres_node **ret)
{
	static struct jobcg_gres_file f[3] = {{(char *)"/dev/nvidia0", 'c', 195, 0},
					      {(char *)"/dev/nvidia1", 'c', 195, 1},
					      {(char *)"/dev/nic0", 'c', 231, 0}};
	static struct jobcg_gres_record r[3] = {
	    {.name = (char *)"gpu", .type = (char *)"a100", .files = &f[0], .nfiles = 1},
	    {.name = (char *)"gpu",
	     .type = (char *)"v100",
	     .files = &f[1],
	     .nfiles = 1,
	     .index = 1},
	    {.name = (char *)"nic", .files = &f[2], .nfiles = 1},
	};
	static const struct jobcg_gres_conf conf = {.records = r, .nrecords = 3};

	return gres_node_new(&conf, ret);
}
