/* jobcg internal: Slurm's memory limit formulas (task/cgroup) as pure functions of cgroup.conf
 * values. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "config_internal.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define JOBCG_MEM_UNLIMITED UINT64_MAX /* written as "max" */

/* The values for memory.max, memory.high and memory.swap.max of a job or step, in bytes. */
struct jobcg_mem_limits {
	uint64_t max;	   /* memory.max */
	uint64_t high;	   /* memory.high: never above max */
	uint64_t swap_max; /* memory.swap.max (swap only, as cgroup v2 counts it) */
	bool set_max;	   /* ConstrainRAMSpace=yes (or an explicit limit the caller insists on) */
	bool set_swap;	   /* ConstrainSwapSpace=yes */
};

/**
 * Slurm's formulas, with @job_mem the job's memory in bytes (0: none requested, then the node's
 * RAM is used as Slurm does) and @node_ram the node's RAM in bytes:
 *   max      = job_mem * AllowedRAMSpace%, at least MinRAMSpace, at most MaxRAMPercent% of RAM
 *   high     = job_mem clamped the same way, and never above max (the soft limit)
 *   mem+swap = job_mem * AllowedSwapSpace% + max, at least MinRAMSpace, at most
 *              (MaxRAMPercent + MaxSwapPercent)% of RAM; swap_max = mem+swap - max
 * Percentages may be INFINITY (UNLIMITED); results beyond 2^64 are JOBCG_MEM_UNLIMITED.
 * -EINVAL for @node_ram 0 or negative percentages.
 */
int jobcg_mem_limits_compute(const struct jobcg_cgroup_conf *conf, uint64_t job_mem,
			     uint64_t node_ram, struct jobcg_mem_limits *ret);

/** Physical RAM of this node in bytes (MemTotal of /proc/meminfo). */
int jobcg_node_ram(uint64_t *ret);
/* ... from /proc/meminfo text: its "MemTotal: N kB" line, in bytes. -EINVAL without one, or
 * one of 0 kB or too large for bytes in 64 bits. */
int memlimit_parse_meminfo(const char *text, uint64_t *ret);

#ifdef __cplusplus
}
#endif
