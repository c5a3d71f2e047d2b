/* Unit tests for Slurm's memory formulas (memory.max, memory.high, memory.swap.max). */
#include <math.h>

#include "memlimit.h"
#include "tap.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static struct jobcg_cgroup_conf defaults(void)
{
	return (struct jobcg_cgroup_conf){
	    .allowed_ram_space = 100,
	    .allowed_swap_space = 0,
	    .max_ram_percent = 100,
	    .max_swap_percent = 100,
	    .min_ram_space_mb = 30,
	    .constrain_ram_space = true,
	};
}

int main(void)
{
	const uint64_t ram = 16 * GiB;
	struct jobcg_cgroup_conf c = defaults();
	struct jobcg_mem_limits m = {};

	is_int(jobcg_mem_limits_compute(&c, 4 * GiB, ram, &m), 0, "defaults, 4G job");
	is_int(m.max, 4 * GiB, "max = job memory");
	is_int(m.high, 4 * GiB, "high = job memory");
	is_int(m.swap_max, 0, "no swap allowed by default");
	ok(m.set_max && !m.set_swap, "ConstrainRAMSpace decides memory.max, swap not constrained");

	c.allowed_ram_space = 150;
	jobcg_mem_limits_compute(&c, 4 * GiB, ram, &m);
	is_int(m.max, 6 * GiB, "AllowedRAMSpace=150: max 6G");
	is_int(m.high, 4 * GiB, "high stays at the request");

	c = defaults();
	c.allowed_ram_space = 50;
	jobcg_mem_limits_compute(&c, 4 * GiB, ram, &m);
	is_int(m.max, 2 * GiB, "AllowedRAMSpace=50: max 2G");
	is_int(m.high, 2 * GiB, "high never above max");

	/* Slurm: without ConstrainRAMSpace, AllowedRAMSpace counts as 100. */
	c = defaults();
	c.allowed_ram_space = 50;
	c.constrain_ram_space = false;
	c.constrain_swap_space = true;
	c.allowed_swap_space = 10;
	jobcg_mem_limits_compute(&c, 4 * GiB, ram, &m);
	is_int(m.max, 4 * GiB, "ConstrainRAMSpace=no: AllowedRAMSpace=50 is ignored, max 4G");
	is_int(m.high, 4 * GiB, "ConstrainRAMSpace=no: high 4G");

	c = defaults();
	c.max_ram_percent = 25;
	jobcg_mem_limits_compute(&c, 8 * GiB, ram, &m);
	is_int(m.max, 4 * GiB, "MaxRAMPercent=25 caps an 8G job at 4G");
	is_int(m.high, 4 * GiB, "high capped too");

	c = defaults();
	jobcg_mem_limits_compute(&c, 10 * MiB, ram, &m);
	is_int(m.max, 30 * MiB, "MinRAMSpace=30 raises a 10M job to 30M");
	is_int(m.high, 30 * MiB, "high raised too");

	c = defaults();
	c.allowed_swap_space = 50;
	c.constrain_swap_space = true;
	jobcg_mem_limits_compute(&c, 4 * GiB, ram, &m);
	is_int(m.swap_max, 2 * GiB, "AllowedSwapSpace=50: 2G of swap");
	ok(m.set_swap, "ConstrainSwapSpace sets memory.swap.max");

	c.max_ram_percent = 25;
	c.max_swap_percent = 5;
	jobcg_mem_limits_compute(&c, 4 * GiB, ram, &m);
	is_int(m.max, 4 * GiB, "max at MaxRAMPercent");
	is_int(m.swap_max, 858993459, "swap capped by MaxSwapPercent=5 (0.8G of 16G)");

	c = defaults();
	jobcg_mem_limits_compute(&c, 0, ram, &m);
	is_int(m.max, ram, "no request: the node's RAM");
	c.max_ram_percent = 90;
	jobcg_mem_limits_compute(&c, 0, ram, &m);
	is_int(m.max, (uint64_t)(ram * 0.9), "no request: MaxRAMPercent of RAM");

	c = defaults();
	c.allowed_ram_space = INFINITY;
	c.max_ram_percent = INFINITY;
	c.max_swap_percent = INFINITY;
	c.allowed_swap_space = INFINITY;
	jobcg_mem_limits_compute(&c, 4 * GiB, ram, &m);
	ok(m.max == JOBCG_MEM_UNLIMITED, "UNLIMITED percentages: max");
	ok(m.swap_max == JOBCG_MEM_UNLIMITED, "UNLIMITED percentages: swap");
	is_int(m.high, 4 * GiB, "high is still the request");

	c = defaults();
	m.max = 42;
	is_int(jobcg_mem_limits_compute(&c, GiB, 0, &m), -EINVAL, "node RAM 0 refused");
	c.allowed_ram_space = -1;
	is_int(jobcg_mem_limits_compute(&c, GiB, ram, &m), -EINVAL, "negative percent refused");
	c.allowed_ram_space = NAN;
	is_int(jobcg_mem_limits_compute(&c, GiB, ram, &m), -EINVAL, "NaN refused");
	is_int(m.max, 42, "output untouched on failure");

	uint64_t node = 0;
	is_int(jobcg_node_ram(&node), 0, "node RAM readable");
	ok(node > 16 * MiB, "node RAM plausible (%llu)", (unsigned long long)node);
	return tap_done();
}
