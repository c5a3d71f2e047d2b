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
 * 0 when every CPU of the list @cpus (as --cpus) is in @online, else -EINVAL with an error
 * naming --cpus and the CPUs that are not online.
 */
int jobcg_check_cpus_online(const char *online, const char *cpus);

/**
 * 0 when the CPU list @cpus (as --cpus) names no reserved CPU, else -EPERM with an error naming
 * --cpus, the reserved CPUs it names and the cgroup.conf key.
 */
int jobcg_spec_check_cpus(const struct jobcg_cgroup_conf *conf, const char *online,
			  const char *cpus);

/** The node's RAM jobs may be given: @node_ram minus MemSpecLimit (-EINVAL if nothing is left). */
int jobcg_spec_job_ram(const struct jobcg_cgroup_conf *conf, uint64_t node_ram, uint64_t *ret);

/**
 * Whether this node can honour the reservation: -EINVAL, with the error record naming the key
 * and the file:line that set it, when SpecCPUs names a CPU not in @online, the CPUs reserved
 * leave none of @online for jobs, or MemSpecLimit is not below @node_ram (bytes). @online NULL
 * or @node_ram 0 skips that half. The same errors stop job creation where it applies them.
 */
int jobcg_spec_check(const struct jobcg_cgroup_conf *conf, const char *online, uint64_t node_ram);

/** jobcg_spec_check() with this node's online CPUs and RAM (read only where a key needs them). */
int jobcg_spec_check_node(const struct jobcg_cgroup_conf *conf);

/** The online CPUs of this node (/sys/devices/system/cpu/online), a list such as "0-3". */
int jobcg_online_cpus(char **ret);

#ifdef __cplusplus
}
#endif
