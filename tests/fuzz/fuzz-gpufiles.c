/*
 * libFuzzer target: the parsers of the GPU drivers' files (lib/src/gres/gpufiles.c), the code
 * detection runs. Input: a selector byte, then the file's text; the selector % 5 picks the
 * file: 0 an NVIDIA GPU's information (then its model as a Type= and its bus id normalised),
 * 1 a capability access file, 2 nvidia-caps/mig-minors, 3 /proc/devices, 4 a kfd node's
 * properties. The text is copied without a terminating NUL, so that ASan sees any read past
 * the length the parsers are given. A selector from 0xf0 up (none of the seeds of the five
 * files) is a DRM render node's uevent (gpudetect_drm.c), read as a string.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpudetect_internal.h"
#include "gpufiles.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void information(const char *text, size_t n)
{
	char *model = NULL, *pci = NULL, *uuid = NULL;
	unsigned minor;

	if (gpufile_field(text, n, "Model", &model) == 0) {
		char *type = gpu_type_from_model(model);

		/* A Type= is one word of the whitelist, and a model printed has no control
		 * character. */
		if (type && (!*type || strspn(type, "abcdefghijklmnopqrstuvwxyz0123456789._-") !=
					   strlen(type)))
			abort();
		free(type);
		type = str_escape_controls(model);
		for (const char *p = type; p && *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				abort();
		free(type);
	}
	if (gpufile_field(text, n, "Bus Location", &pci) == 0) {
		char buf[64];

		snprintf(buf, sizeof(buf), "%s", pci);
		gpu_pci_normalise(buf, sizeof(buf));
	}
	if (gpufile_nvidia_minor_uuid(text, n, &minor, &uuid) == 0 &&
	    (minor > GPUFILE_NVIDIA_MINOR_MAX || !gpufile_uuid_valid(uuid) ||
	     strpbrk(uuid, " \t\r\n,")))
		abort();
	free(model);
	free(pci);
	free(uuid);
}

static void mig_minors(const char *text, size_t n)
{
	struct gpufile_line bad;
	struct mig_minor *v = NULL;
	size_t nv = 0;

	if (gpufile_mig_minors(text, n, &v, &nv, &bad) < 0)
		return;
	/* The line a warning quotes lies inside the text. */
	if (bad.no && (bad.p < text || bad.p + bad.len > text + n || memchr(bad.p, '\n', bad.len)))
		abort();
	/* Every instance line read can be looked up: the first with its GPU, GI and CI answers,
	 * and the strict lookup gives that minor or refuses. */
	for (size_t i = 0; i < nv; i++) {
		unsigned m;
		int k;

		if (v[i].ci == MIG_MINOR_OTHER)
			continue;
		if (v[i].ci < -1 || mig_minor_find(v, nv, v[i].gpu, v[i].gi, v[i].ci) < 0)
			abort();
		k = mig_minor_lookup(v, nv, v[i].gpu, v[i].gi, v[i].ci, &m);
		if (k != -EEXIST &&
		    (k != 0 || (int)m != mig_minor_find(v, nv, v[i].gpu, v[i].gi, v[i].ci)))
			abort();
	}
	free(v);
}

static void proc_devices(const char *text, size_t n)
{
	static const char *const names[] = {"nvidia", "nvidia-caps", "nvidia-uvm", "kfd", "drm"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		unsigned major;

		if (gpufile_chr_major(text, n, names[i], &major) == 0 && major > 4095)
			abort();
	}
}

static void kfd_properties(const char *text, size_t n)
{
	static const char *const keys[] = {"simd_count", "drm_render_minor", "unique_id",
					   "location_id", "domain"};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		struct gpufile_line bad;
		uint64_t v;

		/* The line quoted in the warning lies inside the text. */
		if (gpufile_kfd_property(text, n, keys[i], &v, &bad) == -EBADMSG &&
		    (bad.p < text || bad.p + bad.len > text + n || memchr(bad.p, '\n', bad.len)))
			abort();
	}
}

/* A render node's device uevent (NUL-terminated: its readers take a string): the bus id is
 * printable, lower case and cut to what a bus id can be. */
static void drm_uevent(const uint8_t *data, size_t n)
{
	char *text = malloc(n + 1), *pci;

	if (!text)
		return;
	memcpy(text, data, n);
	text[n] = '\0';
	pci = drm_uevent_pci(text);
	for (const char *p = pci; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || (*p >= 'A' && *p <= 'Z'))
			abort();
	if (pci && strlen(pci) > 63 * 4)
		abort();
	(void)drm_uevent_xcp(text);
	free(pci);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned access_minor;
	size_t n;
	char *text;

	if (size < 1 || size > 65536)
		return 0;
	n = size - 1;
	text = malloc(n ? n : 1);
	if (!text)
		return 0;
	memcpy(text, data + 1, n);
	if (data[0] >= 0xf0) {
		drm_uevent(data + 1, n);
		free(text);
		return 0;
	}
	switch (data[0] % 5) {
	case 0:
		information(text, n);
		break;
	case 1:
		if (gpufile_field_unsigned(text, n, "DeviceFileMinor", GPUFILE_MINOR_MAX,
					   &access_minor, NULL) == 0 &&
		    access_minor > GPUFILE_MINOR_MAX)
			abort();
		break;
	case 2:
		mig_minors(text, n);
		break;
	case 3:
		proc_devices(text, n);
		break;
	default:
		kfd_properties(text, n);
		break;
	}
	free(text);
	return 0;
}
