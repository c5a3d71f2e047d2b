/* jobcg: a reading of the node (jobs, steps, GPUs) taken from the cgroup tree and the kernel's
 * device programs, and its Prometheus text exposition. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobcg/context.h"
#include "jobcg/gres.h"
#include "jobcg/job.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What is read of each job and step cgroup. An item whose file does not exist (its controller
 * is not enabled, or bound to cgroup v1 on this host) is absent, never 0. */
enum jobcg_metric_item {
	JOBCG_METRIC_CPU_USAGE_USEC,  /* cpu.stat usage_usec */
	JOBCG_METRIC_CPU_USER_USEC,   /* cpu.stat user_usec */
	JOBCG_METRIC_CPU_SYSTEM_USEC, /* cpu.stat system_usec */
	JOBCG_METRIC_MEM_CURRENT,     /* memory.current, bytes */
	JOBCG_METRIC_MEM_PEAK,	      /* memory.peak, bytes */
	JOBCG_METRIC_MEM_MAX,	      /* memory.max, bytes; UINT64_MAX for "max" */
	JOBCG_METRIC_SWAP_CURRENT,    /* memory.swap.current, bytes */
	JOBCG_METRIC_SWAP_MAX,	      /* memory.swap.max, bytes; UINT64_MAX for "max" */
	JOBCG_METRIC_OOM_KILL,	      /* memory.events oom_kill */
	JOBCG_METRIC_MEM_HIGH_EVENTS, /* memory.events high */
	JOBCG_METRIC_PIDS_CURRENT,    /* pids.current */
	JOBCG_METRIC_PIDS_MAX,	      /* pids.max; UINT64_MAX for "max" */
	JOBCG_METRIC_IO_READ_BYTES,   /* io.stat rbytes, summed over devices */
	JOBCG_METRIC_IO_WRITE_BYTES,  /* io.stat wbytes, summed over devices */
	_JOBCG_METRIC_MAX,
};

/* One job (step "") or step cgroup. */
struct jobcg_metrics_cg {
	uint32_t job;
	char step[JOBCG_STEP_ID_MAX]; /* "" for the job itself */
	bool have_owner;	      /* the job's recorded owner */
	uid_t uid;
	uint64_t value[_JOBCG_METRIC_MAX];
	uint32_t have; /* bit (1u << item) set when value[item] was read */
	/* GPUs (positions in the node's device table) its processes may open for reading or
	 * writing, asked of the device programs the kernel runs for this cgroup. */
	struct jobcg_gres_set gpus;
	bool gpus_uncertain; /* an opaque program could still deny some of them */
};

static inline bool jobcg_metrics_cg_has(const struct jobcg_metrics_cg *c, enum jobcg_metric_item i)
{
	return (c->have >> i) & 1u;
}

/* One GPU of gres.conf (Name=gpu). */
struct jobcg_metrics_gpu {
	unsigned pos;	  /* position in the node's device table */
	unsigned index;	  /* node-wide index: what `jobcg list` and JOBCG_JOB_GPUS show */
	char *type;	  /* Type= or NULL */
	char *device;	  /* its (first) device file */
	char *uuid;	  /* NULL when unknown */
	char *pci_bus_id; /* NULL when unknown */
	bool allocated;	  /* recorded on some job (trusted.jobcg.gres) */
	bool held;	  /* some job or step cgroup may open it */
};

/* A reservation (jobcg/resv.h) as read without the node lock. */
struct jobcg_metrics_resv {
	char *name;
	char *devices; /* "gpu:0,1", "" for none */
	char *cpus;    /* "" for none */
	uint64_t mem_bytes;
	bool isolated;
	unsigned jobs;
	bool valid; /* jobcg_resv_verify() said VALID */
};

struct jobcg_metrics {
	uint64_t realtime_usec;	      /* when the reading was taken */
	uint64_t duration_usec;	      /* how long it took */
	struct jobcg_metrics_cg *cgs; /* jobs in id order, each followed by its steps */
	size_t n_cgs, n_jobs, n_steps;
	struct jobcg_metrics_gpu *gpus;
	size_t n_gpus;
	unsigned gpus_free;	 /* configured GPUs recorded on no job */
	bool constrain_devices;	 /* ConstrainDevices=yes with devices in gres.conf */
	const char *device_mode; /* "node", "linear" or "off" (not constrained) */
	bool have_reserved_cpus;
	unsigned reserved_cpus;	     /* SpecCPUs / CoreSpecCount */
	uint64_t reserved_mem_bytes; /* MemSpecLimit, 0 = none */
	unsigned errors; /* files or programs that could not be read (not absent ones) */
	struct jobcg_metrics_resv *resvs; /* reservations by name */
	size_t n_resvs;
	/* The context was loaded past an error in that file (JOBCG_CONFIG_TOLERATE_CGROUP,
	 * JOBCG_CONFIG_TOLERATE_GRES): no job is made or constrained until it is fixed. */
	bool cgroup_conf_error, gres_conf_error;
};

/**
 * Read the node: every job_<id> and step_<id> below the tree root (their cgroup files and
 * recorded owner), the GPUs of gres.conf and which of those cgroups the kernel's device programs
 * let open each of them. Never takes the node lock: a job created or removed meanwhile is in the
 * reading or not, whole. What cannot be read for another reason than its absence counts in
 * ->errors (logged at debug level) and the reading goes on. Fails only when nothing can be read
 * (no memory). An absent tree root gives no jobs. Free with jobcg_metrics_free().
 */
JOBCG_EXPORT int jobcg_metrics_collect(struct jobcg_ctx *ctx, struct jobcg_metrics **ret);
JOBCG_EXPORT void jobcg_metrics_free(struct jobcg_metrics *m);

/* A user name for the label "user" (NULL: the uid as a number). */
typedef const char *(*jobcg_metrics_user_fn)(uid_t uid, void *userdata);

/* Options of jobcg_metrics_format(); zero-initialise, set .size = sizeof. */
struct jobcg_metrics_format_opts {
	size_t size;
	jobcg_metrics_user_fn user_name; /* NULL: uids as numbers */
	void *userdata;
	/* Collection errors of earlier readings in this process, added to ->errors: the counter
	 * jobcg_collect_errors_total of a long-running server. */
	uint64_t errors_before;
	const char *version; /* for jobcg_build_info; NULL: the library's */
};

/**
 * The Prometheus text exposition (version 0.0.4) of @m: HELP and TYPE of every family, label
 * values escaped, families whose items nothing has left out. docs/metrics.md lists them.
 * *ret is malloc()ed and NUL-terminated; *ret_len (may be NULL) excludes the NUL.
 */
JOBCG_EXPORT int jobcg_metrics_format(const struct jobcg_metrics *m,
				      const struct jobcg_metrics_format_opts *opts, char **ret,
				      size_t *ret_len);

#ifdef __cplusplus
}
#endif
