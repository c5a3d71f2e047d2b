/* jobcg internal: the text of the GPU drivers' files parsed, apart from reading them (fuzzed). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Each parser takes the file's bytes @text[0..@size), which need not end in a NUL (one inside
 * ends the line it is on for the value read there), and returns 0 or -errno; its outputs are
 * untouched on failure.
 */

/* A line of a driver file: where it starts in the text, its length without the line end
 * ("\n" or "\r\n"), and its number (from 1) for warnings. */
struct gpufile_line {
	const char *p;
	size_t len;
	unsigned no;
};

/*
 * The value of the "@key: value" line of an NVIDIA driver file (.../gpus/<pci>/information,
 * .../capabilities/.../access), blanks stripped; the first such line counts. -ENOENT when no
 * line starts with "@key:", -ENOMEM.
 */
int gpufile_field(const char *text, size_t size, const char *key, char **ret);
/* The same, with the number of the line in *@ret_line (may be NULL). */
int gpufile_field_at(const char *text, size_t size, const char *key, char **ret,
		     unsigned *ret_line);
/* The same, as a number of at most @max ("Device Minor", "DeviceFileMinor"); -EBADMSG when
 * the value is not one (*@ret_line, when not NULL, is then set to its line all the same). */
int gpufile_field_unsigned(const char *text, size_t size, const char *key, unsigned max,
			   unsigned *ret, unsigned *ret_line);

/* A capability file's DeviceFileMinor: this bounds garbage only. */
#define GPUFILE_MINOR_MAX (1u << 20)
/* NVIDIA GPU minors: 254 and 255 are nvidia-modeset and nvidiactl. */
#define GPUFILE_NVIDIA_MINOR_MAX 253
#define GPUFILE_UUID_MAX	 127
/* Whether @uuid is one a GPU's (or MIG instance's) UUID can be: 1 to GPUFILE_UUID_MAX letters,
 * digits, '-' and '/'. Detection and the runtime (CUDA_VISIBLE_DEVICES) use the same test. */
bool gpufile_uuid_valid(const char *uuid);
/*
 * The "Device Minor:" (at most GPUFILE_NVIDIA_MINOR_MAX) and the "GPU UUID:"
 * (gpufile_uuid_valid()) of a GPU's information file: what ties /dev/nvidiaN to its UUID.
 * -EBADMSG when either is missing or not valid, -ENOMEM.
 */
int gpufile_nvidia_minor_uuid(const char *text, size_t size, unsigned *ret_minor, char **ret_uuid);

/* The major of character device driver @name in /proc/devices text (its "Character devices:"
 * part); -ENOENT when it is not listed. */
int gpufile_chr_major(const char *text, size_t size, const char *name, unsigned *ret);

/* /proc/driver/nvidia-caps/mig-minors: which cap minor belongs to which GPU, GI and CI. */
#define MIG_MINOR_OTHER (-2)
struct mig_minor {
	unsigned gpu, gi, minor; /* each at most INT_MAX */
	int ci; /* -1: the GI's own access file; MIG_MINOR_OTHER: "config 1", "monitor 2" */
};
/*
 * The lines of mig-minors ("gpu0/gi1/access 21", "gpu0/gi1/ci0/access 22", and the other
 * capabilities' "config 1", "monitor 2", gpu and gi 0), in file order; lines past the
 * 1 048 576th are not read. A line that is none of these is skipped, and the first such is
 * put in *@bad_line when not NULL (its len and no 0 when there is none). An empty list is
 * *ret NULL, *ret_n 0. -ENOMEM.
 */
int gpufile_mig_minors(const char *text, size_t size, struct mig_minor **ret, size_t *ret_n,
		       struct gpufile_line *bad_line);

/*
 * The number of the "@key VALUE" line of an AMD kfd topology node's properties file. -ENOENT
 * when there is no such line; -EBADMSG when VALUE is not a 64-bit number, the line then in
 * *bad_line (when not NULL) for the warning to quote.
 */
int gpufile_kfd_property(const char *text, size_t size, const char *key, uint64_t *ret,
			 struct gpufile_line *bad_line);
