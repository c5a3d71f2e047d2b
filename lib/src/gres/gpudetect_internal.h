/* jobcg internal: what the GPU detection backends share, and the companion devices of a GPU. */
#pragma once

#include <stdbool.h>

#include "jobcg/config.h"
#include "gpudetect.h"
#include "gpufiles.h"

#define NVIDIA_GPU_MAJOR 195
#define DRM_MAJOR	 226

/* One detection run: where files are read from, and the list being built. */
struct gpuscan {
	const char *root; /* "" or $JOBCG_SYSROOT, without a trailing '/' */
	struct jobcg_gpus *g;
	size_t cap;
};

/* @path ("/proc/...") under the scan's root; NULL on ENOMEM. */
char *gpuscan_path(const struct gpuscan *s, const char *path);
/* Read a small file under the root; -ENOENT when it is not there. */
int gpuscan_read(const struct gpuscan *s, const char *path, char **ret);
/* The numbers of the entries of @dir under the root named @prefix and a number (at most
 * @max of them), sorted; -errno when @dir cannot be read. */
int gpuscan_numbered(const struct gpuscan *s, const char *dir, const char *prefix, size_t max,
		     unsigned **ret, size_t *ret_n);
/* The major of character device driver @name in the root's /proc/devices; -ENOENT if none. */
int gpuscan_chr_major(const struct gpuscan *s, const char *name, unsigned *ret);
/* Record a warning (also logged). Returns 0, or -ENOMEM. */
int gpuscan_warn(struct gpuscan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Log a notice: something left out on purpose (not a warning: the exit status stays 0). */
int gpuscan_note(struct gpuscan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Check that @path (as the node names it) is character device @major:@minor under the root.
 * Returns 0 when it is; else warns naming the file and what @source ("<file>: Device Minor: 1")
 * says, and returns -ENOENT (absent) or -ENODEV (another device). -ENOMEM.
 */
int gpuscan_check_node(struct gpuscan *s, const char *path, unsigned major, unsigned minor,
		       const char *source);
/* Append a file to a vector (path copied). */
int gpu_file_push(struct jobcg_gpu_file **v, size_t *n, const char *path, unsigned major,
		  unsigned minor);
/*
 * Take @gpu (moved; zeroed) into the list, numbering it. A row naming a device (major:minor)
 * an earlier row names already is refused (-EEXIST) with a warning naming both rows' sources,
 * except what a MIG instance shares with its GPU and the instances of its GI (the GPU's file,
 * the GI's cap file). -E2BIG past 1024 rows, -ENOMEM.
 */
int gpuscan_add(struct gpuscan *s, struct jobcg_gpu *gpu);
void gpu_done(struct jobcg_gpu *gpu);
/* CPUs local to PCI device @pci, NULL when sysfs does not say. */
char *gpuscan_local_cpus(const struct gpuscan *s, const char *pci);
/* A Type= from a model name: lower case letters, digits, '.', '-' and '_' kept, every run of
 * other characters one '_' (none at the ends); "gpu" when nothing is left. */
char *gpu_type_from_model(const char *model);
/* The NVIDIA companion devices found beside /dev/nvidiaN under the root. */
int gpuscan_nvidia_companions(struct gpuscan *s, struct jobcg_gpu *gpu);
/* Normalise a PCI bus id to "0000:3b:00.0" (NVML writes "00000000:3B:00.0"); in place. */
void gpu_pci_normalise(char *pci, size_t size);

/* Read and parse /proc/driver/nvidia-caps/mig-minors (gpufile_mig_minors()); *@ret_bad
 * (when not NULL) is "<path>:<line>: '<text>'" for the first line that could not be read, or
 * NULL. */
int mig_minors_load(const char *path, struct mig_minor **ret, size_t *ret_n, char **ret_bad);
/* The cap minor of @gpu/@gi/@ci (-1: the GI's), or -ENOENT. */
int mig_minor_find(const struct mig_minor *v, size_t n, unsigned gpu, unsigned gi, int ci);
/* The same, -ENOENT when no line names @gpu/@gi/@ci and -EEXIST when two do, or when its minor
 * is on another line too (two capabilities cannot share a device file). */
int mig_minor_lookup(const struct mig_minor *v, size_t n, unsigned gpu, unsigned gi, int ci,
		     unsigned *ret);

int gpudetect_nvidia(struct gpuscan *s);
int gpudetect_nvml(struct gpuscan *s);
int gpudetect_amd(struct gpuscan *s);
int gpudetect_intel(struct gpuscan *s);
/* NVML's own UUID ("MIG-...") of instance @gi/@ci of the GPU with minor @minor. */
int nvml_mig_uuid(unsigned minor, unsigned gi, unsigned ci, char **ret);

/*
 * The devices a job holding record @r also needs (JOBCG_GRES_FLAG_NO_COMPANIONS: none): for an
 * NVIDIA GPU file (c 195:N), nvidiactl, nvidia-uvm, nvidia-uvm-tools and nvidia-modeset from the
 * same directory; for an AMD render node (c 226:N, N >= 128), kfd from the directory above. Only
 * character devices whose numbers the running driver confirms (/proc/devices, where it lists
 * them) are given. @add is called for each; its negative return stops and is returned.
 * @seen, zeroed by the caller and shared by the records of one pass, remembers /proc/devices
 * and the directories already looked at (every GPU of a node shares its companions); release
 * it with gres_companions_done().
 */
struct gres_companions_seen {
	char *proc_devices;
	bool loaded;
	char **dirs; /* "<kind>:<dir>" already given */
	size_t ndirs;
};
int gres_companions(const struct jobcg_gres_record *r, struct gres_companions_seen *seen,
		    int (*add)(void *ud, unsigned major, unsigned minor), void *ud);
void gres_companions_done(struct gres_companions_seen *seen);

/*
 * The CUDA_VISIBLE_DEVICES name of the MIG instance record @r names (its GPU's file and its CI
 * cap file), from the driver's files under @proc ("/proc"): "MIG-GPU-<uuid>/<gi>/<ci>", or
 * with NVML (@use_nvml, a dynamically linked process) the instance's own "MIG-<uuid>".
 * -ENOENT when @r is not a MIG instance or the files do not tell.
 */
int gres_mig_uuid(const struct jobcg_gres_record *r, const char *proc, bool use_nvml, char **ret);
/* True when @r names an NVIDIA MIG capability file (/dev/nvidia-caps/nvidia-capN). */
bool gres_record_is_mig(const struct jobcg_gres_record *r);

/* A render node's device uevent text (NUL-terminated, may be NULL): its PCI_SLOT_NAME,
 * normalised and with control characters escaped (to free(); NULL when there is none), and
 * whether it names an AMD partition's platform device (DRIVER= or MODALIAS=platform: of
 * amdgpu_xcp). */
char *drm_uevent_pci(const char *uevent);
bool drm_uevent_xcp(const char *uevent);
