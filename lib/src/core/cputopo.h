/* jobcg internal: the node's cores as Slurm numbers them (hwloc's logical order), read from
 * sysfs or from a per-boot cache, and Slurm's core indices in CPU ids and back. Slurm's Cores=
 * (gres.conf) and allocated cores are core indices; jobcg's cgroups and sysfs speak CPU ids. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "parse.h"

/* The node's cores as Slurm numbers them: by socket, then core within socket. Core index N is
 * what Slurm means by core N in gres.conf's Cores=, S_STEP_ALLOC_CORES and its core bitmaps. */
struct cputopo {
	size_t ncores;
	uint64_t (*cpus)[JOBCG_CPU_MAX / 64]; /* per core: its hardware threads (OS CPUs) */
};

/**
 * Read the cores of @cpu_dir (/sys/devices/system/cpu; offline CPUs have no topology and are
 * left out): each core is (physical_package_id, die_id, core_id), ordered as Slurm's abstract
 * core ids are: hwloc's logical order, packages, dies and cores each by the lowest CPU they
 * hold, not by their ids. -ENOENT when no CPU has a topology.
 */
int cputopo_load(const char *cpu_dir, struct cputopo *ret);

/* The text of a sysfs topology id file (physical_package_id, die_id, core_id), of which
 * cputopo_load() reads at most CPUTOPO_ID_MAX bytes: 0 with the decimal number in @ret (-1 where
 * the firmware gives no id), -EINVAL (@ret untouched) for anything but one number and an
 * optional line break. */
#define CPUTOPO_ID_MAX 31
int cputopo_parse_id(const char *text, long *ret);
void cputopo_done(struct cputopo *t);

/**
 * cputopo_load() through the file @cache, written by the first step after boot: a node
 * with 256 CPUs otherwise reads 768 sysfs files at every step's start. The file is used only
 * when it names this boot (@boot_id_path's text, /proc/sys/kernel/random/boot_id) and the CPUs
 * online now (@cpu_dir/online), is owned by this process's user and writable by nobody else;
 * anything else, unreadable or malformed, is read again from @cpu_dir and the file replaced
 * (best effort: a cache that cannot be written only costs the next step the sysfs walk).
 */
int cputopo_load_cached(const char *cpu_dir, const char *cache, const char *boot_id_path,
			struct cputopo *ret);

/**
 * The topology cache's text (@text, @len bytes) for boot @boot with CPUs @online: the
 * topology it records, -EINVAL when it is for another boot or CPU set, or malformed, -ENOMEM.
 * Exposed for the unit test and the fuzz target.
 */
int cputopo_parse_cache(const char *text, size_t len, const char *boot, const char *online,
			struct cputopo *ret);

/**
 * The OS CPU list ("0-1,4") of Slurm's abstract core list @cores (S_STEP_ALLOC_CORES, "0-1"):
 * each core's hardware threads. -EINVAL naming the core when it is beyond this node's cores.
 */
int cputopo_cores_to_cpus(const struct cputopo *t, const char *cores, char **ret);

/**
 * cputopo_load() of the running node's <$JOBCG_SYSROOT>/sys/devices/system/cpu (the prefix only
 * when set and the process is not set-uid, as GPU detection reads it), so that tests can replay
 * another node's tree.
 */
int cputopo_load_node(struct cputopo *ret);
/* cputopo_load() of <@root>/sys/devices/system/cpu (@root NULL or "": the running system). */
int cputopo_load_under(const char *root, struct cputopo *ret);

/**
 * The CPUs (bit i = CPU i, @ret JOBCG_CPU_MAX / 64 words, overwritten) of the core indices in
 * @cores (@words words): each core's hardware threads. Indices beyond the node's cores are
 * left out; their count goes to *@ret_beyond when not NULL.
 */
void cputopo_cores_to_cpu_bits(const struct cputopo *t, const uint64_t *cores, size_t words,
			       uint64_t *ret, size_t *ret_beyond);

/**
 * The core indices (bit i = core i, @ret JOBCG_CPU_MAX / 64 words, overwritten) whose hardware
 * threads meet the CPUs @cpus (@words words): a core is in when any of its CPUs is.
 */
void cputopo_cpu_bits_to_cores(const struct cputopo *t, const uint64_t *cpus, size_t words,
			       uint64_t *ret);
