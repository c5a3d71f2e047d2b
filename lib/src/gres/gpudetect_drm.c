/*
 * jobcg: AMD and Intel GPUs from sysfs, no library. AMD: the kfd topology
 * (/sys/class/kfd/kfd/topology/nodes/N/properties) in its order, which is ROCm's, joined to the
 * render node it names; a job needs that node and /dev/kfd. Intel: render nodes
 * (/sys/class/drm/renderD*) whose PCI vendor is 0x8086, in minor order.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <unistd.h>

#include "gpudetect_internal.h"
#include "log.h"
#include "util.h"

#define VENDOR_AMD   "0x1002"
#define VENDOR_INTEL "0x8086"
#define NODES_MAX    1024
#define XCP_NAME     "amdgpu_xcp"

/* The sysfs attribute at @path (owned, may be NULL), stripped; NULL if absent. */
static char *attr_text(const struct gpuscan *s, char *path)
{
	_cleanup_free_ char *p = path;
	char *text = NULL, *t;

	if (!p || gpuscan_read(s, p, &text) < 0)
		return NULL;
	t = strstrip(text);
	memmove(text, t, strlen(t) + 1);
	return text;
}

/* One line of sysfs attribute renderD<minor>/device/<attr>, stripped; NULL if absent. */
static char *render_attr(const struct gpuscan *s, unsigned minor, const char *attr)
{
	return attr_text(s, strdup_printf("/sys/class/drm/renderD%u/device/%s", minor, attr));
}

/* One line of /sys/bus/pci/devices/<pci>/<attr>, stripped; NULL if absent. */
static char *pci_attr(const struct gpuscan *s, const char *pci, const char *attr)
{
	return attr_text(s, strdup_printf("/sys/bus/pci/devices/%s/%s", pci, attr));
}

char *drm_uevent_pci(const char *uevent)
{
	const char *p = uevent ? strstr(uevent, "PCI_SLOT_NAME=") : NULL;
	char buf[64];

	if (!p)
		return NULL;
	snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(p + 14, "\n"), p + 14);
	gpu_pci_normalise(buf, sizeof(buf));
	return str_escape_controls(buf);
}

/* PCI_SLOT_NAME of the render node's device, normalised. */
static char *render_pci(const struct gpuscan *s, unsigned minor)
{
	_cleanup_free_ char *uevent = render_attr(s, minor, "uevent");

	return drm_uevent_pci(uevent);
}

static int render_file(struct gpuscan *s, struct jobcg_gpu *gpu, unsigned minor, const char *why)
{
	unsigned major = DRM_MAJOR;
	char dev[48];
	int r;

	r = gpuscan_chr_major(s, "drm", &major);
	if (r == -ENOMEM)
		return r;
	snprintf(dev, sizeof(dev), "/dev/dri/renderD%u", minor);
	r = gpuscan_check_node(s, dev, major, minor, why);
	if (r < 0)
		return r;
	return gpu_file_push(&gpu->files, &gpu->nfiles, dev, major, minor);
}

/* The "KEY VALUE" line of a kfd properties file; a value that is not a number counts as
 * absent, with a warning naming the file and line (and @then: what follows from it). */
static uint64_t prop(struct gpuscan *s, const char *file, const char *text, const char *key,
		     bool *found, const char *then)
{
	struct gpufile_line bad;
	uint64_t v;
	int r = gpufile_kfd_property(text, strlen(text), key, &v, &bad);

	*found = r >= 0;
	if (r == -EBADMSG)
		(void)gpuscan_warn(s, "%s%s:%u: '%.*s' is not a number%s", s->root, file, bad.no,
				   bad.len > 80 ? 80 : (int)bad.len, bad.p, then);
	return r >= 0 ? v : 0;
}

/* "amdgpu_xcp", "amdgpu_xcp.N" or "amdgpu_xcp_N" (@len bytes at @p): the partition platform
 * devices' names before and after Linux 6.10 (amdgpu_xcp_drv.c names them itself since). */
static bool xcp_name(const char *p, size_t len)
{
	size_t k = strlen(XCP_NAME);

	if (len < k || strncmp(p, XCP_NAME, k) != 0)
		return false;
	if (len == k)
		return true;
	if ((p[k] != '.' && p[k] != '_') || len == k + 1)
		return false;
	for (size_t i = k + 1; i < len; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	return true;
}

/* The last path component of link @rel under the root, or false. */
static bool link_base_is_xcp(const struct gpuscan *s, const char *rel)
{
	_cleanup_free_ char *link = gpuscan_path(s, rel);
	char target[PATH_MAX];
	const char *base;
	ssize_t n;

	if (!link || (n = readlink(link, target, sizeof(target) - 1)) <= 0)
		return false;
	target[n] = '\0';
	base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	return xcp_name(base, strlen(base));
}

/* Whether the render node's device is an AMD partition (MI300 CPX/DPX...): a platform device
 * of amdgpu_xcp, with no PCI vendor file of its own; the kfd node naming it proves the vendor.
 * Its uevent says MODALIAS=platform:<name> (DRIVER= too, were a driver ever bound to it). */
bool drm_uevent_xcp(const char *uevent)
{
	for (const char *p = uevent; p && *p; p += strcspn(p, "\n"), p += *p == '\n') {
		size_t l = strcspn(p, "\n");

		if ((startswith(p, "DRIVER=") && xcp_name(p + 7, l - 7)) ||
		    (startswith(p, "MODALIAS=platform:") && xcp_name(p + 18, l - 18)))
			return true;
	}
	return false;
}

static bool render_is_xcp(const struct gpuscan *s, unsigned minor)
{
	_cleanup_free_ char *uevent = render_attr(s, minor, "uevent");
	char rel[64];

	if (drm_uevent_xcp(uevent))
		return true;
	snprintf(rel, sizeof(rel), "/sys/class/drm/renderD%u/device", minor);
	if (link_base_is_xcp(s, rel))
		return true;
	snprintf(rel, sizeof(rel), "/sys/class/drm/renderD%u/device/driver", minor);
	return link_base_is_xcp(s, rel);
}

static int amd_node(struct gpuscan *s, unsigned node, int kfd_major)
{
	_cleanup_free_ char *pp =
	    strdup_printf("/sys/class/kfd/kfd/topology/nodes/%u/properties", node);
	_cleanup_free_ char *text = NULL, *vendor = NULL, *why = NULL, *devid = NULL, *raw = NULL;
	struct jobcg_gpu gpu = {.vendor = JOBCG_GPU_AMD, .parent = -1};
	bool has_minor, has_simd, has_uid, has_loc, has_dom, xcp;
	uint64_t minor, simd, uid, loc, dom;
	int r;

	if (!pp)
		return -ENOMEM;
	r = gpuscan_read(s, pp, &text);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return gpuscan_warn(s, "%s%s: %s: kfd node left out", s->root, pp, strerror(-r));
	simd = prop(s, pp, text, "simd_count", &has_simd, ": kfd node left out");
	if (!has_simd)
		return 0; /* a CPU node, or the warning said why not */
	if (simd == 0)
		return 0; /* a CPU node */
	minor = prop(s, pp, text, "drm_render_minor", &has_minor, "");
	if (!has_minor || minor < 128 || minor > 255)
		return gpuscan_warn(s, "%s%s: no valid 'drm_render_minor' line: GPU left out",
				    s->root, pp);
	vendor = render_attr(s, (unsigned)minor, "vendor");
	xcp = !vendor && render_is_xcp(s, (unsigned)minor);
	if (!vendor && !xcp)
		return gpuscan_warn(s,
				    "%s%s names render node %" PRIu64 ", whose device "
				    "%s/sys/class/drm/renderD%" PRIu64 "/device has no vendor file "
				    "and is not an amdgpu_xcp partition: GPU left out",
				    s->root, pp, minor, s->root, minor);
	if (vendor && !strcaseeq(vendor, VENDOR_AMD))
		return gpuscan_warn(s,
				    "%s%s names render node %" PRIu64 ", whose "
				    "%s/sys/class/drm/renderD%" PRIu64 "/device/vendor is %s, "
				    "not AMD's " VENDOR_AMD ": GPU left out",
				    s->root, pp, minor, s->root, minor, vendor);
	if (kfd_major < 0)
		return gpuscan_warn(
		    s,
		    "%s/proc/devices has no kfd line (amdgpu without kfd?): the AMD "
		    "GPU of %s%s left out",
		    s->root, s->root, pp);
	why = strdup_printf("%s%s names drm_render_minor %" PRIu64, s->root, pp, minor);
	if (!why)
		return -ENOMEM;
	r = render_file(s, &gpu, (unsigned)minor, why);
	if (r < 0)
		goto out;
	r = gpuscan_check_node(s, "/dev/kfd", (unsigned)kfd_major, 0,
			       "ROCm needs it with every AMD GPU");
	if (r < 0 || (r = gpu_file_push(&gpu.companions, &gpu.ncompanions, "/dev/kfd",
					(unsigned)kfd_major, 0)) < 0)
		goto out;
	uid = prop(s, pp, text, "unique_id", &has_uid, "");
	loc = prop(s, pp, text, "location_id", &has_loc, "");
	dom = prop(s, pp, text, "domain", &has_dom, "");
	/* A partition's platform device has no PCI_SLOT_NAME: kfd's location_id tells. */
	gpu.pci = xcp ? NULL : render_pci(s, (unsigned)minor);
	if (!gpu.pci && has_loc)
		gpu.pci = strdup_printf("%04x:%02x:%02x.%x", (unsigned)(has_dom ? dom & 0xffff : 0),
					(unsigned)(loc >> 8) & 0xff, (unsigned)(loc >> 3) & 0x1f,
					(unsigned)loc & 7);
	if (!gpu.pci)
		gpu.pci = strdup("unknown");
	/* A partition's platform device has no product_name or device: its PCI device has. */
	raw = !xcp	? render_attr(s, (unsigned)minor, "product_name")
	      : gpu.pci ? pci_attr(s, gpu.pci, "product_name")
			: NULL;
	if (!raw || !*raw) {
		devid = !xcp	  ? render_attr(s, (unsigned)minor, "device")
			: gpu.pci ? pci_attr(s, gpu.pci, "device")
				  : NULL;
		free(raw);
		raw = strdup_printf("AMD GPU %s", devid ? devid : "unknown");
	}
	gpu.model = raw ? str_escape_controls(raw) : NULL;
	gpu.source = strdup_printf("%s%s", s->root, pp);
	/* ROCR_VISIBLE_DEVICES takes "GPU-" and the kfd unique_id in hex. */
	if (has_uid && uid)
		gpu.uuid = strdup_printf("GPU-%016" PRIx64, uid);
	gpu.type = raw ? gpu_type_from_model(raw) : NULL;
	gpu.cpus = gpu.pci ? gpuscan_local_cpus(s, gpu.pci) : NULL;
	if (!gpu.pci || !gpu.model || !gpu.type || !gpu.source || (has_uid && uid && !gpu.uuid)) {
		r = -ENOMEM;
		goto out;
	}
	r = gpuscan_add(s, &gpu);
	return r == -EEXIST ? 0 : r;
out:
	gpu_done(&gpu);
	return r == -ENOMEM ? r : 0;
}

int gpudetect_amd(struct gpuscan *s)
{
	_cleanup_free_ unsigned *nodes = NULL;
	size_t n = 0;
	unsigned major;
	int kfd_major = -1, r;

	r = gpuscan_numbered(s, "/sys/class/kfd/kfd/topology/nodes", "", NODES_MAX, &nodes, &n);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0; /* no kfd: no AMD compute GPU */
	r = gpuscan_chr_major(s, "kfd", &major);
	if (r == -ENOMEM)
		return r;
	if (r >= 0)
		kfd_major = (int)major;
	for (size_t i = 0; i < n; i++)
		if ((r = amd_node(s, nodes[i], kfd_major)) < 0)
			return r;
	return 0;
}

int gpudetect_intel(struct gpuscan *s)
{
	_cleanup_free_ unsigned *minors = NULL;
	size_t n = 0;
	int r;

	r = gpuscan_numbered(s, "/sys/class/drm", "renderD", NODES_MAX, &minors, &n);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *vendor = render_attr(s, minors[i], "vendor");
		_cleanup_free_ char *devid = NULL, *why = NULL, *raw = NULL;
		struct jobcg_gpu gpu = {.vendor = JOBCG_GPU_INTEL, .parent = -1};

		if (!vendor || !strcaseeq(vendor, VENDOR_INTEL))
			continue;
		why = strdup_printf("%s/sys/class/drm/renderD%u exists", s->root, minors[i]);
		if (!why)
			return -ENOMEM;
		r = render_file(s, &gpu, minors[i], why);
		if (r < 0) {
			gpu_done(&gpu);
			if (r == -ENOMEM)
				return r;
			continue;
		}
		devid = render_attr(s, minors[i], "device");
		raw = strdup_printf("Intel GPU %s", devid ? devid : "unknown");
		gpu.model = raw ? str_escape_controls(raw) : NULL;
		gpu.source = strdup_printf("%s/sys/class/drm/renderD%u", s->root, minors[i]);
		gpu.pci = render_pci(s, minors[i]);
		if (!gpu.pci)
			gpu.pci = strdup("unknown");
		gpu.type = raw ? gpu_type_from_model(raw) : NULL;
		gpu.cpus = gpu.pci ? gpuscan_local_cpus(s, gpu.pci) : NULL;
		if (!gpu.model || !gpu.pci || !gpu.type || !gpu.source) {
			gpu_done(&gpu);
			return -ENOMEM;
		}
		if ((r = gpuscan_add(s, &gpu)) < 0 && r != -EEXIST)
			return r;
	}
	return 0;
}
