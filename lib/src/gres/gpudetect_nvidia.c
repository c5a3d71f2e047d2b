/*
 * jobcg: NVIDIA GPUs and MIG instances from the driver's own files, no library:
 * /proc/driver/nvidia/gpus/<pci>/information, the MIG capability files under
 * /proc/driver/nvidia/capabilities/gpu<minor>/mig and /proc/driver/nvidia-caps/mig-minors.
 */
#include <dirent.h>
#include <fcntl.h>

#include "gpudetect_internal.h"
#include "log.h"
#include "util.h"

#define GI_MAX 64

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The DeviceFileMinor of a capability access file; warns naming it when it has none. */
static int access_minor(struct gpuscan *s, const char *path, unsigned *ret)
{
	_cleanup_free_ char *text = NULL;
	unsigned line = 0;
	int r = gpuscan_read(s, path, &text);

	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		r = gpuscan_warn(s, "%s%s: %s: MIG instance left out", s->root, path, strerror(-r));
		return r < 0 ? r : -ENOENT;
	}
	r = gpufile_field_unsigned(text, strlen(text), "DeviceFileMinor", GPUFILE_MINOR_MAX, ret,
				   &line);
	if (r == -ENOMEM)
		return r;
	if (r == -EBADMSG) {
		r = gpuscan_warn(s,
				 "%s%s:%u: not a valid 'DeviceFileMinor: N' line: MIG instance "
				 "left out",
				 s->root, path, line);
		return r < 0 ? r : -EBADMSG;
	}
	if (r < 0) {
		r = gpuscan_warn(s, "%s%s: no 'DeviceFileMinor: N' line: MIG instance left out",
				 s->root, path);
		return r < 0 ? r : -EBADMSG;
	}
	return 0;
}

struct parent {
	unsigned row, minor;
	const char *model, *type, *uuid, *pci, *cpus;
	int caps_major;		    /* -1: /proc/devices has no nvidia-caps */
	const struct mig_minor *mm; /* from mig-minors, which the driver always writes */
	size_t nmm;
};

/* The cap file of minor @m, checked against /dev and against mig-minors. */
static int cap_file(struct gpuscan *s, const struct parent *p, const char *access, unsigned gi,
		    int ci, unsigned m, struct jobcg_gpu *inst)
{
	char path[64], src[512], what[64];
	unsigned want = 0;
	int r;

	/* Without mig-minors' word, the access file could name any capability's minor (the
	 * config cap, another instance's): instances() did not get here. */
	if (ci < 0)
		snprintf(what, sizeof(what), "gpu%u/gi%u/access", p->minor, gi);
	else
		snprintf(what, sizeof(what), "gpu%u/gi%u/ci%d/access", p->minor, gi, ci);
	r = mig_minor_lookup(p->mm, p->nmm, p->minor, gi, ci, &want);
	if (r == -ENOENT)
		r = gpuscan_warn(s,
				 "%s%s says DeviceFileMinor: %u, but %s/proc/driver/nvidia-caps/"
				 "mig-minors has no %s line: MIG instance left out",
				 s->root, access, m, s->root, what);
	else if (r == -EEXIST)
		r = gpuscan_warn(s,
				 "%s/proc/driver/nvidia-caps/mig-minors gives %s's minor twice, or "
				 "to another capability too: MIG instance of %s%s left out",
				 s->root, what, s->root, access);
	else if (want != m)
		r = gpuscan_warn(s,
				 "%s%s says DeviceFileMinor: %u, but %s/proc/driver/nvidia-caps/"
				 "mig-minors says %s %u: MIG instance left out",
				 s->root, access, m, s->root, what, want);
	else
		r = 1;
	if (r <= 0)
		return r < 0 ? r : -EBADMSG;
	snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%u", m);
	snprintf(src, sizeof(src), "%s%s says DeviceFileMinor: %u", s->root, access, m);
	r = gpuscan_check_node(s, path, (unsigned)p->caps_major, m, src);
	if (r < 0)
		return r;
	return gpu_file_push(&inst->files, &inst->nfiles, path, (unsigned)p->caps_major, m);
}

static int one_instance(struct gpuscan *s, const struct parent *p, unsigned gi, unsigned ci,
			const char *gi_access, unsigned gi_minor)
{
	struct jobcg_gpu inst = {.vendor = JOBCG_GPU_NVIDIA, .mig = true, .gi = gi, .ci = ci};
	_cleanup_free_ char *ci_access = strdup_printf(
	    "/proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%u/access", p->minor, gi, ci);
	char dev[32];
	unsigned ci_minor;
	int r;

	if (!ci_access)
		return -ENOMEM;
	r = access_minor(s, ci_access, &ci_minor);
	if (r < 0)
		return r == -ENOMEM ? r : 0;
	inst.parent = (int)p->row;
	inst.model = strdup(p->model);
	/* The driver's files give no profile ("1g.10gb"): only NVML does. */
	inst.type = strdup_printf("%s_mig", p->type);
	inst.uuid = strdup_printf("MIG-%s/%u/%u", p->uuid, gi, ci);
	inst.source = strdup_printf("%s%s", s->root, ci_access);
	inst.pci = strdup(p->pci);
	inst.cpus = p->cpus ? strdup(p->cpus) : NULL;
	snprintf(dev, sizeof(dev), "/dev/nvidia%u", p->minor);
	if (!inst.model || !inst.type || !inst.uuid || !inst.source || !inst.pci ||
	    (p->cpus && !inst.cpus) ||
	    (r = gpu_file_push(&inst.files, &inst.nfiles, dev, NVIDIA_GPU_MAJOR, p->minor)) < 0 ||
	    (r = gpuscan_nvidia_companions(s, &inst)) < 0) {
		gpu_done(&inst);
		return -ENOMEM;
	}
	if ((r = cap_file(s, p, gi_access, gi, -1, gi_minor, &inst)) < 0 ||
	    (r = cap_file(s, p, ci_access, gi, (int)ci, ci_minor, &inst)) < 0) {
		gpu_done(&inst);
		return r == -ENOMEM ? r : 0;
	}
	r = gpuscan_add(s, &inst);
	return r == -EEXIST ? 0 : r;
}

static int instances(struct gpuscan *s, struct parent *p, const unsigned *gis, size_t ngi)
{
	_cleanup_free_ char *mmpath = gpuscan_path(s, "/proc/driver/nvidia-caps/mig-minors");
	_cleanup_free_ struct mig_minor *mm = NULL;
	_cleanup_free_ char *bad = NULL;
	unsigned major;
	int r;

	if (!mmpath)
		return -ENOMEM;
	r = gpuscan_chr_major(s, "nvidia-caps", &major);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return gpuscan_warn(s,
				    "%s/proc/devices has no nvidia-caps line: the MIG instances "
				    "of GPU %s left out",
				    s->root, p->pci);
	p->caps_major = (int)major;
	r = mig_minors_load(mmpath, &mm, &p->nmm, &bad);
	if (r == -ENOMEM)
		return r;
	/* As the nvml backend: the access files alone could name any capability's minor. */
	if (r < 0)
		return gpuscan_warn(s, "%s: %s: the MIG instances of GPU %s left out", mmpath,
				    strerror(-r), p->pci);
	if (bad && (r = gpuscan_warn(s, "%s is not a line mig-minors has: skipped", bad)) < 0)
		return r;
	p->mm = mm;
	for (size_t i = 0; i < ngi; i++) {
		_cleanup_free_ char *gidir = strdup_printf(
		    "/proc/driver/nvidia/capabilities/gpu%u/mig/gi%u", p->minor, gis[i]);
		_cleanup_free_ char *giacc = gidir ? strdup_printf("%s/access", gidir) : NULL;
		_cleanup_free_ unsigned *cis = NULL;
		size_t nci = 0;
		unsigned gi_minor;

		if (!giacc)
			return -ENOMEM;
		r = access_minor(s, giacc, &gi_minor);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			continue;
		r = gpuscan_numbered(s, gidir, "ci", GI_MAX, &cis, &nci);
		if (r == -ENOMEM)
			return r;
		for (size_t k = 0; k < nci; k++)
			if ((r = one_instance(s, p, gis[i], cis[k], giacc, gi_minor)) < 0)
				return r;
	}
	p->mm = NULL;
	return 0;
}

static int one_gpu(struct gpuscan *s, const char *bus)
{
	_cleanup_free_ char *info = strdup_printf("/proc/driver/nvidia/gpus/%s/information", bus);
	_cleanup_free_ char *text = NULL, *capdir = NULL, *src = NULL, *excluded = NULL,
			    *raw = NULL;
	_cleanup_free_ unsigned *gis = NULL;
	struct jobcg_gpu gpu = {.vendor = JOBCG_GPU_NVIDIA, .parent = -1};
	struct parent p = {.caps_major = -1};
	const char *what;
	unsigned line = 0;
	size_t ngi = 0, n;
	char dev[32], pcibuf[64];
	int r;

	if (!info)
		return -ENOMEM;
	r = gpuscan_read(s, info, &text);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return gpuscan_warn(s, "%s%s: %s: GPU %s left out", s->root, info, strerror(-r),
				    bus);
	/* The first line missing or not valid is the one the warning names. */
	n = strlen(text);
	r = gpufile_field(text, n, what = "Model", &gpu.model);
	if (r >= 0 && (r = gpufile_field_at(text, n, what = "GPU UUID", &gpu.uuid, &line)) >= 0 &&
	    !gpufile_uuid_valid(gpu.uuid))
		r = -EBADMSG; /* the runtime's test: what it refuses, detection does not list */
	if (r >= 0)
		r = gpufile_field_unsigned(text, n, what = "Device Minor", GPUFILE_NVIDIA_MINOR_MAX,
					   &p.minor, &line);
	/* Without "Bus Location:", the directory's name is the bus id. */
	if (r >= 0 && gpufile_field(text, n, "Bus Location", &gpu.pci) == -ENOMEM)
		r = -ENOMEM;
	if (r >= 0 && gpufile_field(text, n, "GPU Excluded", &excluded) == -ENOMEM)
		r = -ENOMEM;
	if (r == -ENOMEM) {
		gpu_done(&gpu);
		return r;
	}
	if (r == -EBADMSG) {
		gpu_done(&gpu);
		return gpuscan_warn(
		    s, "%s%s:%u: not a valid '%s:' line%s: GPU %s left out", s->root, info, line,
		    what,
		    streq(what, "Device Minor")
			? " (GPU minors are 0-253: 254 and 255 are nvidia-modeset's "
			  "and nvidiactl's)"
			: "",
		    bus);
	}
	if (r < 0) {
		gpu_done(&gpu);
		return gpuscan_warn(s, "%s%s: no '%s:' line (truncated?): GPU %s left out", s->root,
				    info, what, bus);
	}
	/* NVreg_ExcludedGpus: the driver keeps the GPU from use, NVML and CUDA do not list it,
	 * and its indices would shift against nvidia-smi's. Not a fault: a note. */
	if (excluded && strcaseeq(excluded, "Yes")) {
		gpu_done(&gpu);
		return gpuscan_note(s,
				    "%s%s: GPU Excluded: Yes: GPU %s left out, as NVML and CUDA "
				    "leave it out",
				    s->root, info, bus);
	}
	raw = TAKE_PTR(gpu.model);
	gpu.model = str_escape_controls(raw);
	if (!gpu.model || !(gpu.source = strdup_printf("%s%s", s->root, info))) {
		gpu_done(&gpu);
		return -ENOMEM;
	}
	/* Normalised in room for the long form: "0:3b:0.0" grows to "0000:3b:00.0". */
	snprintf(pcibuf, sizeof(pcibuf), "%s", gpu.pci ? gpu.pci : bus);
	gpu_pci_normalise(pcibuf, sizeof(pcibuf));
	free(gpu.pci);
	if (!(gpu.pci = str_escape_controls(pcibuf))) {
		gpu_done(&gpu);
		return -ENOMEM;
	}
	snprintf(dev, sizeof(dev), "/dev/nvidia%u", p.minor);
	src = strdup_printf("%s%s says Device Minor: %u", s->root, info, p.minor);
	if (!src) {
		gpu_done(&gpu);
		return -ENOMEM;
	}
	r = gpuscan_check_node(s, dev, NVIDIA_GPU_MAJOR, p.minor, src);
	if (r < 0) {
		gpu_done(&gpu);
		return r == -ENOMEM ? r : 0;
	}
	gpu.type = gpu_type_from_model(raw);
	gpu.cpus = gpuscan_local_cpus(s, gpu.pci);
	if (!gpu.type ||
	    (r = gpu_file_push(&gpu.files, &gpu.nfiles, dev, NVIDIA_GPU_MAJOR, p.minor)) < 0 ||
	    (r = gpuscan_nvidia_companions(s, &gpu)) < 0) {
		gpu_done(&gpu);
		return -ENOMEM;
	}
	capdir = strdup_printf("/proc/driver/nvidia/capabilities/gpu%u/mig", p.minor);
	if (!capdir) {
		gpu_done(&gpu);
		return -ENOMEM;
	}
	r = gpuscan_numbered(s, capdir, "gi", GI_MAX, &gis, &ngi);
	if (r == -ENOMEM) {
		gpu_done(&gpu);
		return r;
	}
	/* A GPU in MIG mode without instances cannot be told from the driver's files: it is
	 * listed as a whole GPU (NVML tells). */
	gpu.mig_mode = ngi > 0;
	p.row = (unsigned)s->g->ngpus;
	r = gpuscan_add(s, &gpu);
	if (r == -EEXIST)
		return 0; /* its instances are the earlier row's (or nobody's) */
	if (r < 0 || !ngi)
		return r;
	/* The strings stay valid: the row is in the list, and only appended to. */
	p.model = s->g->gpus[p.row].model;
	p.type = s->g->gpus[p.row].type;
	p.uuid = s->g->gpus[p.row].uuid;
	p.pci = s->g->gpus[p.row].pci;
	p.cpus = s->g->gpus[p.row].cpus;
	return instances(s, &p, gis, ngi);
}

int gpudetect_nvidia(struct gpuscan *s)
{
	_cleanup_free_ char *dir = gpuscan_path(s, "/proc/driver/nvidia/gpus");
	_cleanup_strv_free_ char **buses = NULL;
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0; /* no NVIDIA driver */
		return error_set(negative_errno(), "cannot open %s: %s", dir, strerror(errno));
	}
	while ((de = readdir(d)) && r >= 0)
		if (de->d_name[0] != '.' && strv_length(buses) < 1024)
			r = strv_push(&buses, strdup(de->d_name));
	closedir(d);
	if (r < 0)
		return r;
	/* Directory names are PCI bus ids: sorted, they give NVML's (and nvidia-smi's) order. */
	if (buses)
		qsort(buses, strv_length(buses), sizeof(char *), cmp_str);
	for (char **b = buses; b && *b; b++)
		if ((r = one_gpu(s, *b)) < 0)
			return r;
	return 0;
}
