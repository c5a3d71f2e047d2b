/* jobcg internal: resource specialisation: CPUs and memory kept for the system, never given to
 * jobs. */
#pragma once

#include <stdint.h>

#include "config_internal.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The reserved CPUs as a list ("" when none) for the CPUs @online (a list such as "0-7", as
 * /sys/devices/system/cpu/online): SpecCPUs as given, or CoreSpecCount's N highest-numbered
 * online CPUs (as Slurm picks specialised cores). -EINVAL when SpecCPUs names an offline CPU or
 * the reservation would leave no CPU for jobs.
 */
int jobcg_spec_cpus(const struct jobcg_cgroup_conf *conf, const char *online, char **ret);

/** Whether cgroup.conf keeps CPUs for the system (SpecCPUs or CoreSpecCount). */
bool jobcg_spec_cpus_configured(const struct jobcg_cgroup_conf *conf);

/** The CPUs a job gets by default: @online minus the reserved ones (@online when none). */
int jobcg_spec_job_cpus(const struct jobcg_cgroup_conf *conf, const char *online, char **ret);

/**
 * 0 when the CPU list @cpus (as --cpus) names no reserved CPU, else -EPERM with an error naming
 * --cpus, the reserved CPUs it names and the cgroup.conf key.
 */
int jobcg_spec_check_cpus(const struct jobcg_cgroup_conf *conf, const char *online,
			  const char *cpus);

/** The node's RAM jobs may be given: @node_ram minus MemSpecLimit (-EINVAL if nothing is left). */
int jobcg_spec_job_ram(const struct jobcg_cgroup_conf *conf, uint64_t node_ram, uint64_t *ret);

/** The online CPUs of this node (/sys/devices/system/cpu/online), a list such as "0-3". */
int jobcg_online_cpus(char **ret);

#ifdef __cplusplus
}
#endif
