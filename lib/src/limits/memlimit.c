/* jobcg: Slurm's memory.max / memory.high / memory.swap.max formulas, and the node's RAM. */
#include <fcntl.h>
#include <math.h>

#include "memlimit.h"
#include "spec.h"
#include "log.h"
#include "util.h"

static double clamp(double v, double lo, double hi)
{
	if (v < lo)
		v = lo;
	if (v > hi)
		v = hi;
	return v;
}

static uint64_t to_bytes(double v)
{
	/* 2^64 as a double; anything at or above it (INFINITY included) is no limit. */
	if (!(v < 18446744073709551616.0))
		return JOBCG_MEM_UNLIMITED;
	return (uint64_t)v;
}

int jobcg_mem_limits_compute(const struct jobcg_cgroup_conf *c, uint64_t job_mem, uint64_t node_ram,
			     struct jobcg_mem_limits *ret)
{
	double ram = (double)node_ram, mem, min_space, max_ram, max_memsw, hard, soft, memsw,
	       allowed;
	uint64_t max, high, memsw_b;

	if (node_ram == 0)
		return error_set(-EINVAL, "node RAM is unknown (0)");
	if (c->allowed_ram_space < 0 || c->allowed_swap_space < 0 || c->max_ram_percent < 0 ||
	    c->max_swap_percent < 0 || isnan(c->allowed_ram_space) ||
	    isnan(c->allowed_swap_space) || isnan(c->max_ram_percent) || isnan(c->max_swap_percent))
		return error_set(-EINVAL, "negative or invalid memory percentage in cgroup.conf");

	/* As Slurm's RealMemory - MemSpecLimit: what the system keeps is never a job's. */
	if (c->mem_spec_limit) {
		uint64_t left;
		int r = jobcg_spec_job_ram(c, node_ram, &left);

		if (r < 0)
			return r;
		ram = (double)left;
	}
	/* Slurm: no memory requested means the whole node's RAM. */
	mem = job_mem ? (double)job_mem : ram;
	min_space = (double)c->min_ram_space_mb * 1048576.0;
	max_ram = ram * c->max_ram_percent / 100.0;
	max_memsw = max_ram + ram * c->max_swap_percent / 100.0;

	/* Slurm's task_cgroup_memory_init(): without ConstrainRAMSpace, AllowedRAMSpace is 100
	 * (the swap limit, if constrained, is then counted on top of the whole request). */
	allowed = c->constrain_ram_space ? c->allowed_ram_space : 100.0;
	hard = clamp(job_mem ? mem * allowed / 100.0 : mem, min_space, max_ram);
	soft = clamp(mem, min_space, max_ram);
	if (soft > hard)
		soft = hard;
	memsw = clamp(mem * c->allowed_swap_space / 100.0 + hard, min_space, max_memsw);

	max = to_bytes(hard);
	high = to_bytes(soft);
	memsw_b = to_bytes(memsw);
	*ret = (struct jobcg_mem_limits){
	    .max = max,
	    .high = high,
	    /* cgroup v2 limits swap alone, Slurm's value is memory plus swap. */
	    .swap_max = memsw_b == JOBCG_MEM_UNLIMITED ? JOBCG_MEM_UNLIMITED
			: memsw_b > max		       ? memsw_b - max
						       : 0,
	    .set_max = c->constrain_ram_space,
	    .set_swap = c->constrain_swap_space,
	};
	return 0;
}

int memlimit_parse_meminfo(const char *text, uint64_t *ret)
{
	const char *p = strstr(text, "MemTotal:"), *end;
	uint64_t kb;

	/* At a line's start only, and digits only: sscanf's %llu took "-1" as 2^64-1 kB, which
	 * then wrapped when made bytes. */
	while (p && p != text && p[-1] != '\n')
		p = strstr(p + 1, "MemTotal:");
	if (!p)
		return -EINVAL;
	p += strlen("MemTotal:");
	p += strspn(p, " \t");
	if (parse_u64_prefix(p, UINT64_MAX / 1024, &kb, &end) < 0 || kb == 0 ||
	    !startswith(end, " kB"))
		return -EINVAL;
	*ret = kb * 1024;
	return 0;
}

int jobcg_node_ram(uint64_t *ret)
{
	_cleanup_free_ char *text = NULL;
	int r = read_full_file_at(AT_FDCWD, "/proc/meminfo", 1 << 20, &text, NULL);

	if (r < 0)
		return error_set(r, "cannot read /proc/meminfo: %s", strerror(-r));
	if (memlimit_parse_meminfo(text, ret) < 0)
		return error_set(-EIO, "/proc/meminfo has no MemTotal line");
	return 0;
}
