/* jobcg internal: GPUs and NVIDIA MIG instances found on this node, and how they compare with
 * gres.conf. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config_internal.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum jobcg_gpu_vendor {
	JOBCG_GPU_NVIDIA = 1,
	JOBCG_GPU_AMD,
	JOBCG_GPU_INTEL,
};

/* One device file as a job on the node opens it (never prefixed with JOBCG_SYSROOT). */
struct jobcg_gpu_file {
	char *path;
	unsigned major, minor; /* character device; checked against the node's /dev */
};

/*
 * One row: a whole GPU, or one MIG instance of an NVIDIA GPU in MIG mode. A GPU in MIG mode
 * is listed (mig_mode) before its instances but is not a device of its own: gres.conf names
 * its instances instead.
 */
struct jobcg_gpu {
	unsigned index; /* row number, in detection order */
	enum jobcg_gpu_vendor vendor;
	char *model; /* as the driver names it ("NVIDIA A100-SXM4-40GB"), never NULL */
	char *type;  /* a gres.conf Type= derived from model (and MIG profile), never NULL */
	char *uuid;  /* "GPU-...", "MIG-..." or NULL when the source gives none */
	char *pci;   /* PCI bus id "0000:3b:00.0" (the parent's for a MIG instance) */
	char *cpus;  /* CPUs local to the device ("0-15,32-47"), NULL when unknown */
	struct jobcg_gpu_file *files; /* what a gres.conf line names: File= or MultipleFiles= */
	size_t nfiles;
	/* Opened by the runtime beside any of this vendor's GPUs (nvidiactl, nvidia-uvm, kfd),
	 * as found on the node; jobcg grants them with the GPU (jobcg-gres.conf(5)). */
	struct jobcg_gpu_file *companions;
	size_t ncompanions;
	bool mig_mode; /* an NVIDIA GPU in MIG mode (its instances follow it) */
	bool mig;      /* this row is a MIG instance */
	int parent;    /* MIG: the row of its GPU; else -1 */
	unsigned gi, ci;
	char *profile; /* MIG profile ("1g.10gb"), NULL when the source does not tell (nvidia) */
	char *source;  /* where the row comes from, for warnings ("<root>/proc/.../information") */
};

struct jobcg_gpus {
	struct jobcg_gpu *gpus;
	size_t ngpus;
	char *backends; /* the backends that ran, "nvidia,amd,intel" */
	char *sysroot;	/* $JOBCG_SYSROOT the files were read under, NULL for / */
	/* Each GPU or instance left out, or fact that could not be checked, as one sentence
	 * naming the file ("<file>: ..."); NULL when none. Also logged as warnings. */
	char **warnings;
};

/*
 * Detect the node's GPUs with @backend: "nvidia" (the NVIDIA driver's /proc files), "nvml"
 * (libnvidia-ml.so.1, loaded at run time), "amd" or Slurm's "rsmi" (sysfs and the kfd
 * topology, no library), "intel" or Slurm's "oneapi" (sysfs), "all" or NULL (nvidia, amd and
 * intel: the backends that need no library), or "off" (nothing). Slurm's "nrt" is refused
 * (-EOPNOTSUPP). Files are read under $JOBCG_SYSROOT when it is set and the process is not
 * set-uid (secure_getenv). Missing driver files mean no GPU of that vendor, not an error;
 * files that exist but are wrong leave their GPU out with a warning naming the file.
 * Errors: -EINVAL unknown backend, -ELIBACC NVML cannot be loaded (the error names the
 * library), -ELIBEXEC NVML asked in a statically linked process, -EIO an NVML call failed.
 */
int jobcg_gpus_detect(const char *backend, struct jobcg_gpus **ret);
void jobcg_gpus_free(struct jobcg_gpus *g);

/**
 * The backend gres.conf's AutoDetect= selects ("nvml" -> "nvml", "rsmi" -> "amd", ...), or
 * NULL when it sets none ("off" gives "off").
 */
const char *jobcg_gpus_backend_for(const struct jobcg_gres_conf *conf);

/**
 * The gres.conf lines for @g: one per GPU not in MIG mode (File=) and one per MIG instance
 * (MultipleFiles=parent,GI cap,CI cap), each with Type= and Cores= where known (Slurm's core
 * indices of the cores holding the GPU's local CPUs, from the CPU topology under @g's sysroot;
 * the CPU ids themselves when it cannot be read), prefixed by "NodeName=@nodename " when
 * @nodename is not NULL. *ret is one malloc'ed string.
 */
int jobcg_gpus_gres_conf(const struct jobcg_gpus *g, const char *nodename, char **ret);

/**
 * Compare @g with the gpu records of @conf. Files a record names that were not stat()ed
 * (JOBCG_CONFIG_NO_STAT) are looked at under @g's sysroot.
 * *ret lists every difference as a sentence (a GPU gres.conf lacks, a record no GPU matches,
 * a different major:minor, Type, Cores (core indices, compared in CPUs through the CPU
 * topology under @g's sysroot; indices beyond the node's cores are named) or file list, a
 * different order), NULL-terminated,
 * empty when they agree. Free each string, then the array.
 */
int jobcg_gpus_compare(const struct jobcg_gpus *g, const struct jobcg_gres_conf *conf, char ***ret);

#ifdef __cplusplus
}
#endif
