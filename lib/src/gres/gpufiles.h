/* jobcg internal: the text of the GPU drivers' files parsed, apart from reading them (fuzzed). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * Each parser takes the file's bytes @text[0..@size), which need not end in a NUL (one inside
 * ends the line it is on for the value read there), and returns 0 or -errno; its outputs are
 * untouched on failure.
 */

/* A line of a driver file: where it starts in the text, and its length without the '\n'. */
struct gpufile_line {
	const char *p;
	size_t len;
};

/*
 * The value of the "@key: value" line of an NVIDIA driver file (.../gpus/<pci>/information,
 * .../capabilities/.../access), blanks stripped; the first such line counts. -ENOENT when no
 * line starts with "@key:", -ENOMEM.
 */
int gpufile_field(const char *text, size_t size, const char *key, char **ret);
/* The same, as a number of at most @max ("Device Minor", "DeviceFileMinor"); -EBADMSG when
 * the value is not one. */
int gpufile_field_unsigned(const char *text, size_t size, const char *key, unsigned max,
			   unsigned *ret);

/* NVIDIA minors are below 254 (nvidia-modeset, nvidiactl); this bounds garbage only. */
#define GPUFILE_MINOR_MAX (1u << 20)
#define GPUFILE_UUID_MAX  127
/*
 * The "Device Minor:" (at most GPUFILE_MINOR_MAX) and the "GPU UUID:" (one word of at most
 * GPUFILE_UUID_MAX characters) of a GPU's
 * information file: what ties /dev/nvidiaN to its UUID. -EBADMSG when either is missing or not
 * valid, -ENOMEM.
 */
int gpufile_nvidia_minor_uuid(const char *text, size_t size, unsigned *ret_minor, char **ret_uuid);

/* The major of character device driver @name in /proc/devices text (its "Character devices:"
 * part); -ENOENT when it is not listed. */
int gpufile_chr_major(const char *text, size_t size, const char *name, unsigned *ret);

/* /proc/driver/nvidia-caps/mig-minors: which cap minor belongs to which GPU, GI and CI. */
struct mig_minor {
	unsigned gpu, gi, minor; /* each at most INT_MAX */
	int ci;			 /* -1: the GI's own access file */
};
/*
 * The instance lines of mig-minors ("gpu0/gi1/access 21", "gpu0/gi1/ci0/access 22"), in file
 * order; other lines ("config 1", "monitor 2", garbage) are skipped, and lines past the
 * 1 048 576th instance are not read. An empty list is *ret NULL, *ret_n 0. -ENOMEM.
 */
int gpufile_mig_minors(const char *text, size_t size, struct mig_minor **ret, size_t *ret_n);

/*
 * The number of the "@key VALUE" line of an AMD kfd topology node's properties file. -ENOENT
 * when there is no such line; -EBADMSG when VALUE is not a 64-bit number, the line then in
 * *bad_line (when not NULL) for the warning to quote.
 */
int gpufile_kfd_property(const char *text, size_t size, const char *key, uint64_t *ret,
			 struct gpufile_line *bad_line);
