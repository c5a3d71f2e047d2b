/* libjobcg: reservations, named bundles of devices, CPUs and memory that only their own jobs use.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobcg/context.h"
#include "jobcg/gres.h"

#ifdef __cplusplus
extern "C" {
#endif

#define JOBCG_RESV_NAME_MAX 32

/*
 * A reservation is the cgroup <root>/resv_<name>/ with its spec in trusted.jobcg.* xattrs; its
 * jobs live at resv_<name>/job_<id>. Devices leave the shared pool (the node program denies
 * them to every cgroup of jobcg's tree outside it), CPUs become a cpuset partition, memory is
 * memory.min (protection) and memory.max (the cap of its jobs together) on it.
 */
struct jobcg_resv_spec {
	const char *name;    /* [a-z0-9][a-z0-9_-]{0,31} */
	const char *devices; /* exact devices "gpu:0,2" (gres.conf indices), NULL = none */
	const char *gres;    /* or a count picked among the free ones: "gpu:2", NULL = none */
	const char *cpus;    /* CPU list "4-7", NULL = none */
	uint64_t mem_bytes;  /* memory.min, 0 = none */
	bool isolated;	     /* cpuset.cpus.partition=isolated instead of root */
	const uid_t *users;  /* who may place jobs in it; n_users 0 = anyone */
	size_t n_users;
};

/** Whether @name is a valid reservation name. */
JOBCG_EXPORT bool jobcg_resv_name_valid(const char *name);

/** 0 when @devices (a --devices value, NULL or "" for none) is written as NAME:INDEX[,INDEX]
 * groups separated by ';', with no empty group or item and no device named twice, within a
 * group or across groups; -EINVAL naming what is wrong otherwise. Whether gres.conf has the
 * devices is not looked at. */
JOBCG_EXPORT int jobcg_resv_devices_syntax(const char *devices);

/**
 * Create a reservation under the node lock: the rules (jobcg_resv_rules_check()) are checked
 * before anything is made, then the directory, its spec, the device policy, the CPU partition
 * and memory.min, each read back; the trusted.jobcg.created mark comes last. Any failure undoes
 * everything (gc finishes what a crash left). -EEXIST, -EINVAL/-EBUSY (a rule, named in the
 * error), -EOPNOTSUPP (CPUs asked for where no partition can be made; the reason is given).
 */
JOBCG_EXPORT int jobcg_resv_create(struct jobcg_ctx *ctx, const struct jobcg_resv_spec *spec);

/** Delete an empty reservation (-EBUSY naming the jobs inside otherwise), -ENOENT if none. */
JOBCG_EXPORT int jobcg_resv_delete(struct jobcg_ctx *ctx, const char *name);

/** Names of the node's reservations (complete or not), sorted, NULL-terminated; free with
 * jobcg_strv_free(). */
JOBCG_EXPORT int jobcg_resv_list(struct jobcg_ctx *ctx, char ***ret_names);

struct jobcg_resv_info {
	char *name;
	char *path;
	char *devices; /* "gpu:0,2", "" for none */
	char *cpus;    /* "" for none */
	uint64_t mem_bytes;
	bool isolated;
	uid_t *users; /* n_users 0: anyone */
	size_t n_users;
	int64_t created_sec; /* 0: not completely created (gc removes it) */
	bool removing;	     /* a deletion began (gc finishes it) */
	uint32_t *jobs;	     /* the jobs inside, sorted */
	size_t n_jobs;
};
/** What a reservation holds, read from its directory. -ENOENT if there is none. */
JOBCG_EXPORT int jobcg_resv_info_get(struct jobcg_ctx *ctx, const char *name,
				     struct jobcg_resv_info **ret);
JOBCG_EXPORT void jobcg_resv_info_free(struct jobcg_resv_info *i);

struct jobcg_resv_status {
	bool valid;	 /* VALID; else DEGRADED and problems says why */
	char **problems; /* the kernel's own words, one per problem; NULL-terminated */
	char *partition; /* cpuset.cpus.partition as read back; NULL without CPUs */
	char *effective; /* cpuset.cpus.effective; NULL without CPUs */
	char *note;	 /* what is not enforced here and why (not a problem); NULL if none */
	bool repaired;	 /* a repair was attempted (JOBCG_RESV_REPAIR and it was degraded) */
};
enum {
	JOBCG_RESV_REPAIR = 1u << 0, /* when degraded: member -> root, device entries and memory.min
				      * written again, then verified again */
};
/**
 * Read the kernel's view of reservation @name: the partition state and its reason, the
 * effective CPUs against the reserved ones and their absence elsewhere (cpupart.h), memory.min
 * down the ancestors, and the device pool: the policy map's reservation entries and no device
 * of it held by a cgroup outside. 0 with *ret filled, valid or not.
 */
JOBCG_EXPORT int jobcg_resv_verify(struct jobcg_ctx *ctx, const char *name, unsigned flags,
				   struct jobcg_resv_status **ret);
JOBCG_EXPORT void jobcg_resv_status_free(struct jobcg_resv_status *s);

/* ---- the rules, a pure function of what exists (unit-tested) ---- */

struct jobcg_resv_rules_entry {
	const char *name;
	const char *cpus; /* NULL or "" for none */
	struct jobcg_gres_set devices;
	uint64_t mem_bytes;
};
struct jobcg_resv_rules_job {
	uint32_t id;
	const char *cpus; /* its recorded --cpus, NULL when it has none (it floats) */
	struct jobcg_gres_set devices;
};
struct jobcg_resv_rules {
	struct jobcg_resv_rules_entry want;	     /* the reservation asked for */
	const struct jobcg_resv_rules_entry *others; /* every existing reservation */
	size_t n_others;
	const struct jobcg_resv_rules_job *jobs; /* running jobs outside reservations */
	size_t n_jobs;
	const char *online;    /* online CPUs */
	const char *spec_cpus; /* CPUs kept for the system (SpecCPUs), NULL or "" for none */
	uint64_t mem_avail;    /* RAM - MemSpecLimit */
	const struct jobcg_gres_node *node; /* names devices in messages; NULL: "#<position>" */
};
/**
 * 0 when @in->want may be made: its CPUs online and none of them SpecCPUs, no CPU or device
 * shared with another reservation, no CPU of a running job's --cpus and no device a running job
 * holds (named: drain them first), at least one online CPU left to the rest of the node, and
 * the sum of reserved memory <= mem_avail. Else -EINVAL or -EBUSY with the reason.
 */
JOBCG_EXPORT int jobcg_resv_rules_check(const struct jobcg_resv_rules *in);

#ifdef __cplusplus
}
#endif
