/* jobcg: generic resources (GPUs) on this node: state, selection, task binding, environment. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/config.h"
#include "jobcg/devrule.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Devices on a node are numbered by position ("pos") in gres.conf order over all names; sets of
 * devices are bitmaps over positions. Each device also has its node-wide index among devices of
 * the same name (gpu 0..n-1): that index is what users, JOBCG_JOB_GPUS and the persisted state
 * ("gpu:0,2") show. A gres.conf with more devices than this is refused.
 */
#define JOBCG_GRES_MAX 512

struct jobcg_gres_set {
	uint64_t w[JOBCG_GRES_MAX / 64];
};

static inline void jobcg_gres_set_add(struct jobcg_gres_set *s, unsigned pos)
{
	s->w[pos / 64] |= UINT64_C(1) << (pos % 64);
}
static inline void jobcg_gres_set_del(struct jobcg_gres_set *s, unsigned pos)
{
	s->w[pos / 64] &= ~(UINT64_C(1) << (pos % 64));
}
static inline bool jobcg_gres_set_has(const struct jobcg_gres_set *s, unsigned pos)
{
	return pos < JOBCG_GRES_MAX && (s->w[pos / 64] >> (pos % 64)) & 1;
}
JOBCG_EXPORT unsigned jobcg_gres_set_count(const struct jobcg_gres_set *s);
/* True when every device of @a is in @b. */
JOBCG_EXPORT bool jobcg_gres_set_subset(const struct jobcg_gres_set *a,
					const struct jobcg_gres_set *b);

/* A gres.conf record (opaque: the configuration's, lib/src/conf/config_internal.h). */
struct jobcg_gres_record;

/* One device (one gres.conf record after range expansion). */
struct jobcg_gres_device {
	unsigned pos;			     /* position over all devices of the node */
	unsigned index;			     /* node-wide index among devices of this name */
	const struct jobcg_gres_record *rec; /* name, type, files, cores, links, flags (config's) */
	const char *uuid; /* NULL when unknown (see jobcg_gres_node_load_uuids) */
};

struct jobcg_gres_node;

/**
 * Build the node's device table from @conf's gres.conf (@conf must outlive the node state).
 * Records with no device file (Count= only) cannot be given out by device and are left out with
 * a debug message. When a record has Cores= (Slurm's core indices), the node's CPU topology is
 * read from sysfs (under $JOBCG_SYSROOT when set) to know their CPUs; without one the indices
 * are taken as CPU ids. Returns -E2BIG when there are more than JOBCG_GRES_MAX devices.
 */
JOBCG_EXPORT int jobcg_gres_node_new(const struct jobcg_config *conf, struct jobcg_gres_node **ret);
JOBCG_EXPORT void jobcg_gres_node_free(struct jobcg_gres_node *n);
JOBCG_EXPORT size_t jobcg_gres_node_count(const struct jobcg_gres_node *n);
/** Device at position @pos, or NULL when out of range. */
JOBCG_EXPORT const struct jobcg_gres_device *jobcg_gres_node_device(const struct jobcg_gres_node *n,
								    unsigned pos);
/** Position of device @index of gres @name, or -ENOENT. */
JOBCG_EXPORT int jobcg_gres_node_find(const struct jobcg_gres_node *n, const char *name,
				      unsigned index);
/** Every device of gres @name (NULL: all names). */
JOBCG_EXPORT void jobcg_gres_node_all(const struct jobcg_gres_node *n, const char *name,
				      struct jobcg_gres_set *ret);

/**
 * Learn NVIDIA GPU UUIDs from @proc_dir (NULL: /proc/driver/nvidia/gpus): each
 * <pci>/information file names "Device Minor: N" and "GPU UUID: GPU-...", matched to the record
 * whose files include character device 195:N. Devices without a match keep uuid NULL. Returns the
 * number of devices that got a UUID (0 when the directory does not exist).
 */
JOBCG_EXPORT int jobcg_gres_node_load_uuids(struct jobcg_gres_node *n, const char *proc_dir);
/** Set one device's UUID (copied). */
JOBCG_EXPORT int jobcg_gres_node_set_uuid(struct jobcg_gres_node *n, unsigned pos,
					  const char *uuid);

/* A request such as "gpu:a100:2,nic:1": one item per comma-separated part. */
struct jobcg_gres_req_item {
	char *name;
	char *type; /* NULL: any type */
	unsigned count;
};
struct jobcg_gres_request {
	struct jobcg_gres_req_item *items;
	size_t nitems;
};

/**
 * Parse "NAME[:TYPE][:COUNT]" items separated by commas ("gpu" alone means one, an optional
 * "gres/" prefix is accepted, "gpu:0" asks for none). Errors name the column in @s (-EINVAL);
 * their message names the item at fault when @s has several, never @s itself: the caller
 * names it as its user wrote it ("--gres 'gpu:x:y:z': too many ':' ...").
 */
JOBCG_EXPORT int jobcg_gres_request_parse(const char *s, struct jobcg_gres_request **ret);
JOBCG_EXPORT void jobcg_gres_request_free(struct jobcg_gres_request *r);

/**
 * Choose devices for @req from @avail. For each item, devices whose Cores' CPUs intersect
 * @cpus (CPU ids) (or have no Cores) come first, then the others; among equals, devices with more
 * Links to the devices already chosen, then the lowest index. @cpus may be NULL (no preference).
 * Errors: -ENOENT when the node has no such gres/type at all, -ENOSPC when too few are in
 * @avail; the error record says how many were asked, available and configured.
 */
JOBCG_EXPORT int jobcg_gres_select(const struct jobcg_gres_node *n,
				   const struct jobcg_gres_request *req,
				   const struct jobcg_gres_set *avail, const uint64_t *cpus,
				   size_t cpus_words, struct jobcg_gres_set *ret);

/**
 * Choose a step's devices: a subset of @job's devices, taken from @avail (the job's devices not
 * held by other steps; NULL = all of @job). A request asking more of some gres than the job
 * has is refused with -E2BIG, whatever @avail holds; too few free ones give -EBUSY.
 */
JOBCG_EXPORT int jobcg_gres_select_step(const struct jobcg_gres_node *n,
					const struct jobcg_gres_request *req,
					const struct jobcg_gres_set *job,
					const struct jobcg_gres_set *avail, const uint64_t *cpus,
					size_t cpus_words, struct jobcg_gres_set *ret);

/*
 * Slurm's gres.conf beside jobcg's on a node running jobcg_spank.so: Slurm gives steps GPU
 * indices in its file's order, jobcg maps index N onto its own gpu N; both must be one file.
 */

/**
 * The position in @jobcg (read from @jobcg_conf) of GPU @index as Slurm numbers it: jobcg's gpu
 * @index, which must have the same device file as gpu @index of @slurm (Slurm's gres.conf, read
 * from @slurm_conf; NULL: not compared). -EINVAL naming both files (and the records' lines) when
 * either lacks the index or the files differ.
 */
JOBCG_EXPORT int jobcg_gres_slurm_gpu(const struct jobcg_gres_node *jobcg, const char *jobcg_conf,
				      const struct jobcg_gres_node *slurm, const char *slurm_conf,
				      unsigned index);
/**
 * jobcg_gres_slurm_gpu() for every GPU index of either file: *@ret gets one message per index
 * that disagrees (NULL-terminated; empty when they agree; free with each string).
 */
JOBCG_EXPORT int jobcg_gres_slurm_compare(const struct jobcg_gres_node *jobcg,
					  const char *jobcg_conf,
					  const struct jobcg_gres_node *slurm,
					  const char *slurm_conf, char ***ret);

enum jobcg_gpu_bind_mode {
	JOBCG_GPU_BIND_NONE = 0, /* every task sees all of the step's GPUs */
	JOBCG_GPU_BIND_SINGLE,	 /* single:N: one GPU per task, N tasks per GPU */
	JOBCG_GPU_BIND_PER_TASK, /* per_task:N: N GPUs per task, round robin */
	JOBCG_GPU_BIND_MAP,	 /* map_gpu:LIST: task i gets the step's GPU LIST[i % len] */
};

struct jobcg_gpu_bind {
	enum jobcg_gpu_bind_mode mode;
	unsigned n;    /* N of single/per_task */
	unsigned *map; /* map_gpu list: positions inside the step's GPUs (0 = the step's first) */
	size_t nmap;
};

/** Parse --gpu-bind: none | single:N | per_task:N | map_gpu:LIST (LIST: "0,1", "0*2,1"). */
JOBCG_EXPORT int jobcg_gpu_bind_parse(const char *s, struct jobcg_gpu_bind *ret);
JOBCG_EXPORT void jobcg_gpu_bind_done(struct jobcg_gpu_bind *b);

/**
 * The GPUs task @task (of @ntasks) is bound to, out of the step's @step set (GPUs only; other
 * gres of the step stay with every task). -EINVAL when the binding cannot be satisfied (map entry
 * beyond the step's GPUs, per_task:N with fewer than N GPUs).
 */
JOBCG_EXPORT int jobcg_gpu_bind_task(const struct jobcg_gres_node *n,
				     const struct jobcg_gpu_bind *b,
				     const struct jobcg_gres_set *step, unsigned task,
				     unsigned ntasks, struct jobcg_gres_set *ret);

/* What a task's environment is built from. */
struct jobcg_gres_env_in {
	const struct jobcg_gres_set *job;  /* the job's devices (JOBCG_JOB_GPUS) */
	const struct jobcg_gres_set *step; /* the step's devices (JOBCG_STEP_GPUS) */
	const struct jobcg_gres_set *task; /* the task's bound devices (NULL = the step's) */
	/*
	 * With ConstrainDevices the program can only open its cgroup's devices, so the GPU runtime
	 * numbers them from 0: indices are renumbered within @visible (the set its cgroup is
	 * granted: the task set when tasks are constrained, else the step set). Without, node-wide
	 * indices.
	 */
	bool constrained;
	const struct jobcg_gres_set *visible; /* NULL = the step's set */
};

/* Every variable jobcg_gres_env() may set; a caller removes inherited ones first. */
JOBCG_EXPORT extern const char *const jobcg_gres_env_names[];

/**
 * The GPU environment of a task as "NAME=VALUE" strings (NULL-terminated, free with strv
 * freeing: each string then the array). CUDA_VISIBLE_DEVICES (env_nvidia), ROCR_VISIBLE_DEVICES
 * (env_amd), ZE_AFFINITY_MASK (env_intel), GPU_DEVICE_ORDINAL (env_opencl) follow the gres.conf
 * Flags of the task's GPUs (none: all four; no_gpu_env: none of them); env_uuid puts UUIDs in
 * CUDA/ROCR variables where known (a warning is logged otherwise and the index used).
 * JOBCG_JOB_GPUS and JOBCG_STEP_GPUS always carry node-wide indices.
 */
JOBCG_EXPORT int jobcg_gres_env(const struct jobcg_gres_node *n, const struct jobcg_gres_env_in *in,
				char ***ret);

/**
 * Allow rules (rwm) for every file of every device in @set (MultipleFiles included), without
 * duplicates; with @set NULL, the managed devices: every file of every record in gres.conf.
 * Files not stat()ed (type 0) give -ENODEV naming the file. *ret is malloc'ed.
 */
JOBCG_EXPORT int jobcg_gres_devrules(const struct jobcg_gres_node *n,
				     const struct jobcg_gres_set *set, struct jobcg_devrule **ret,
				     size_t *ret_n);

/** The device files of @set alone, without the companions jobcg_gres_devrules() adds (what a
 * reservation takes out of the shared pool; the companions stay shared). */
JOBCG_EXPORT int jobcg_gres_file_devrules(const struct jobcg_gres_node *n,
					  const struct jobcg_gres_set *set,
					  struct jobcg_devrule **ret, size_t *ret_n);

/** Format a set as "gpu:0,2;nic:1" (names in gres.conf order, "" for the empty set). */
JOBCG_EXPORT int jobcg_gres_set_format(const struct jobcg_gres_node *n,
				       const struct jobcg_gres_set *s, char **ret);
/** Only the indices of gres @name, "0,2" ("" for none): the form of JOBCG_JOB_GPUS. */
JOBCG_EXPORT int jobcg_gres_set_format_name(const struct jobcg_gres_node *n,
					    const struct jobcg_gres_set *s, const char *name,
					    char **ret);
/** Parse jobcg_gres_set_format() output, or such a list written by hand, where an item may
 * also be a range ("gpu:0-3"). Unknown names or indices give -ENOENT, bad syntax -EINVAL. */
JOBCG_EXPORT int jobcg_gres_set_parse(const struct jobcg_gres_node *n, const char *s,
				      struct jobcg_gres_set *ret);

#ifdef __cplusplus
}
#endif
