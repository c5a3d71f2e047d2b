/*
 * jobcg: NVIDIA GPUs and MIG instances through NVML, loaded at run time from
 * libnvidia-ml.so.1 (the driver's library; its header is not ours to ship, so the few calls
 * used are declared here). NVML adds what the driver's files lack: MIG profiles and the
 * instances' own "MIG-..." UUIDs. Capability device minors still come from mig-minors.
 */
#include <dlfcn.h>
#include <fcntl.h>

#include "gpudetect_internal.h"
#include "log.h"
#include "util.h"

#define NVML_SONAME "libnvidia-ml.so.1"

typedef int nvml_ret;
typedef struct nvml_device *nvml_dev;

enum {
	NVML_OK = 0,
	NVML_NOT_SUPPORTED = 3,
	NVML_NOT_FOUND = 6,
};

/* nvmlPciInfo_t as NVML lays it out (v3). */
struct nvml_pci {
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

struct nvml {
	void *dl;
	nvml_ret (*init)(void);
	nvml_ret (*shutdown)(void);
	const char *(*error_string)(nvml_ret);
	nvml_ret (*count)(unsigned *);
	nvml_ret (*by_index)(unsigned, nvml_dev *);
	nvml_ret (*name)(nvml_dev, char *, unsigned);
	nvml_ret (*uuid)(nvml_dev, char *, unsigned);
	nvml_ret (*pci)(nvml_dev, struct nvml_pci *);
	nvml_ret (*minor)(nvml_dev, unsigned *);
	nvml_ret (*mig_mode)(nvml_dev, unsigned *, unsigned *);
	nvml_ret (*mig_max)(nvml_dev, unsigned *);
	nvml_ret (*mig_by_index)(nvml_dev, unsigned, nvml_dev *);
	nvml_ret (*gi_id)(nvml_dev, unsigned *);
	nvml_ret (*ci_id)(nvml_dev, unsigned *);
};

#define SYM(field, name)                                                                           \
	{                                                                                          \
		offsetof(struct nvml, field), name                                                 \
	}
static const struct {
	size_t offset;
	const char *name;
} symbols[] = {
    SYM(init, "nvmlInit_v2"),
    SYM(shutdown, "nvmlShutdown"),
    SYM(error_string, "nvmlErrorString"),
    SYM(count, "nvmlDeviceGetCount_v2"),
    SYM(by_index, "nvmlDeviceGetHandleByIndex_v2"),
    SYM(name, "nvmlDeviceGetName"),
    SYM(uuid, "nvmlDeviceGetUUID"),
    SYM(pci, "nvmlDeviceGetPciInfo_v3"),
    SYM(minor, "nvmlDeviceGetMinorNumber"),
    SYM(mig_mode, "nvmlDeviceGetMigMode"),
    SYM(mig_max, "nvmlDeviceGetMaxMigDeviceCount"),
    SYM(mig_by_index, "nvmlDeviceGetMigDeviceHandleByIndex"),
    SYM(gi_id, "nvmlDeviceGetGpuInstanceId"),
    SYM(ci_id, "nvmlDeviceGetComputeInstanceId"),
};
#undef SYM

static void nvml_close(struct nvml *n)
{
	if (n->dl) {
		if (n->shutdown)
			n->shutdown();
		dlclose(n->dl);
	}
	*n = (struct nvml){};
}

static int nvml_fail(const struct nvml *n, nvml_ret e, const char *call)
{
	return error_set(-EIO, "NVML (%s): %s failed: %s (%d)", NVML_SONAME, call,
			 n->error_string ? n->error_string(e) : "?", e);
}

static int nvml_open(struct nvml *ret)
{
	struct nvml n = {};
	nvml_ret e;

	if (process_is_static())
		return error_set(-ELIBEXEC,
				 "this jobcg is linked statically and cannot load %s: "
				 "run jobcg-dynamic (libexecdir/jobcg) for NVML",
				 NVML_SONAME);
	/* RTLD_LOCAL: its symbols serve our table only. RTLD_NOW: a broken library fails here. */
	n.dl = dlopen(NVML_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!n.dl)
		return error_set(-ELIBACC,
				 "GPU detection with NVML needs %s, from the NVIDIA driver: %s "
				 "(AutoDetect=nvidia reads the driver's files without it)",
				 NVML_SONAME, dlerror());
	for (size_t i = 0; i < ELEMENTSOF(symbols); i++) {
		void *f = dlsym(n.dl, symbols[i].name);

		if (!f) {
			int r = error_set(-ELIBACC, "%s has no %s: too old a driver?", NVML_SONAME,
					  symbols[i].name);

			dlclose(n.dl);
			return r;
		}
		memcpy((char *)&n + symbols[i].offset, &f, sizeof(f));
	}
	e = n.init();
	if (e != NVML_OK) {
		int r = nvml_fail(&n, e, "nvmlInit_v2");

		n.shutdown = NULL; /* not initialised: nothing to shut down */
		nvml_close(&n);
		return r;
	}
	*ret = n;
	return 0;
}

/* "NVIDIA A100-SXM4-40GB MIG 3g.20gb" -> "3g.20gb" */
static char *profile_of(const char *name)
{
	const char *p = strstr(name, "MIG ");

	return p && p[4] ? strdup(p + 4) : NULL;
}

static int mig_instance(struct gpuscan *s, struct nvml *n, nvml_dev mig, unsigned row,
			unsigned minor, int caps_major, const struct mig_minor *mm, size_t nmm)
{
	const struct jobcg_gpu *parent = &s->g->gpus[row];
	struct jobcg_gpu inst = {.vendor = JOBCG_GPU_NVIDIA, .mig = true, .parent = (int)row};
	char name[128] = "", uuid[128] = "", dev[32], src[256];
	int r = 0;
	nvml_ret e;

	if ((e = n->gi_id(mig, &inst.gi)) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetGpuInstanceId");
	if ((e = n->ci_id(mig, &inst.ci)) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetComputeInstanceId");
	if ((e = n->uuid(mig, uuid, sizeof(uuid))) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetUUID (MIG)");
	if ((e = n->name(mig, name, sizeof(name))) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetName (MIG)");
	uuid[sizeof(uuid) - 1] = name[sizeof(name) - 1] = '\0';
	if (!gpufile_uuid_valid(uuid)) {
		r = gpuscan_warn(s,
				 "NVML gives MIG instance GI %u CI %u of GPU %u the UUID '%s', "
				 "which CUDA_VISIBLE_DEVICES cannot carry: left out",
				 inst.gi, inst.ci, minor, uuid);
		return r < 0 ? r : 0;
	}
	inst.model = strdup(parent->model);
	inst.profile = str_escape_controls(name);
	if (inst.profile) {
		char *pr = profile_of(inst.profile);

		free(inst.profile);
		inst.profile = pr;
	}
	/* The profile comes from the library as it is: the whitelist makes it a Type= word. */
	if (inst.profile) {
		_cleanup_free_ char *t = strdup_printf("%s_%s", parent->type, inst.profile);

		inst.type = t ? gpu_type_from_model(t) : NULL;
	} else
		inst.type = strdup_printf("%s_mig", parent->type);
	inst.uuid = strdup(uuid);
	inst.source = strdup_printf("NVML's MIG instance %s", uuid);
	inst.pci = strdup(parent->pci);
	inst.cpus = parent->cpus ? strdup(parent->cpus) : NULL;
	snprintf(dev, sizeof(dev), "/dev/nvidia%u", minor);
	if (!inst.model || !inst.type || !inst.uuid || !inst.source || !inst.pci ||
	    (parent->cpus && !inst.cpus) ||
	    gpu_file_push(&inst.files, &inst.nfiles, dev, NVIDIA_GPU_MAJOR, minor) < 0 ||
	    gpuscan_nvidia_companions(s, &inst) < 0) {
		gpu_done(&inst);
		return -ENOMEM;
	}
	for (int k = 0; k < 2 && r >= 0; k++) {
		int ci = k == 0 ? -1 : (int)inst.ci;
		char path[64], what[64];
		unsigned m = 0;

		if (ci < 0)
			snprintf(what, sizeof(what), "gpu%u/gi%u/access", minor, inst.gi);
		else
			snprintf(what, sizeof(what), "gpu%u/gi%u/ci%d/access", minor, inst.gi, ci);
		r = mig_minor_lookup(mm, nmm, minor, inst.gi, ci, &m);
		if (r < 0) {
			r = gpuscan_warn(
			    s,
			    r == -EEXIST ? "%s/proc/driver/nvidia-caps/mig-minors gives %s's minor "
					   "twice, or to another capability too: MIG instance %s "
					   "left out"
					 : "%s/proc/driver/nvidia-caps/mig-minors has no line for "
					   "%s: MIG instance %s left out",
			    s->root, what, uuid);
			r = r < 0 ? r : -ENOENT;
			break;
		}
		snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%u", m);
		snprintf(src, sizeof(src), "mig-minors gives it to %s (%s)", what, uuid);
		r = gpuscan_check_node(s, path, (unsigned)caps_major, m, src);
		if (r >= 0)
			r = gpu_file_push(&inst.files, &inst.nfiles, path, (unsigned)caps_major, m);
	}
	if (r < 0) {
		gpu_done(&inst);
		return r == -ENOMEM ? r : 0;
	}
	r = gpuscan_add(s, &inst);
	return r == -EEXIST ? 0 : r;
}

static int one_gpu(struct gpuscan *s, struct nvml *n, unsigned i, const struct mig_minor *mm,
		   size_t nmm, int caps_major, const char *mm_error)
{
	struct jobcg_gpu gpu = {.vendor = JOBCG_GPU_NVIDIA, .parent = -1};
	char name[128] = "", uuid[128] = "", dev[32], src[160], pcibuf[64];
	unsigned minor, cur = 0, pend = 0, max = 0, row;
	struct nvml_pci pci = {};
	nvml_dev h;
	nvml_ret e;
	int r;

	if ((e = n->by_index(i, &h)) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetHandleByIndex_v2");
	if ((e = n->name(h, name, sizeof(name))) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetName");
	if ((e = n->uuid(h, uuid, sizeof(uuid))) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetUUID");
	if ((e = n->pci(h, &pci)) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetPciInfo_v3");
	if ((e = n->minor(h, &minor)) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetMinorNumber");
	e = n->mig_mode(h, &cur, &pend);
	if (e == NVML_NOT_SUPPORTED)
		cur = 0;
	else if (e != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetMigMode");
	pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
	uuid[sizeof(uuid) - 1] = name[sizeof(name) - 1] = '\0';
	if (minor > GPUFILE_NVIDIA_MINOR_MAX || !gpufile_uuid_valid(uuid)) {
		r = gpuscan_warn(s, "NVML gives GPU %u minor %u and UUID '%s': %s: left out", i,
				 minor, uuid,
				 minor > GPUFILE_NVIDIA_MINOR_MAX
				     ? "GPU minors are 0-253 (254 and 255 are nvidia-modeset's and "
				       "nvidiactl's)"
				     : "CUDA_VISIBLE_DEVICES cannot carry that UUID");
		return r;
	}
	snprintf(dev, sizeof(dev), "/dev/nvidia%u", minor);
	snprintf(src, sizeof(src), "NVML gives GPU %u (%s) minor %u", i, uuid, minor);
	r = gpuscan_check_node(s, dev, NVIDIA_GPU_MAJOR, minor, src);
	if (r < 0)
		return r == -ENOMEM ? r : 0;
	/* Normalised in room for the long form: "0:3b:0.0" grows to "0000:3b:00.0". */
	snprintf(pcibuf, sizeof(pcibuf), "%s", pci.bus_id);
	gpu_pci_normalise(pcibuf, sizeof(pcibuf));
	gpu.model = str_escape_controls(name);
	gpu.uuid = strdup(uuid);
	gpu.pci = str_escape_controls(pcibuf);
	gpu.type = gpu_type_from_model(name);
	gpu.source = strdup_printf("NVML's GPU %u (%s)", i, uuid);
	gpu.mig_mode = cur == 1;
	if (!gpu.model || !gpu.uuid || !gpu.pci || !gpu.type || !gpu.source) {
		gpu_done(&gpu);
		return -ENOMEM;
	}
	gpu.cpus = gpuscan_local_cpus(s, gpu.pci);
	if (gpu_file_push(&gpu.files, &gpu.nfiles, dev, NVIDIA_GPU_MAJOR, minor) < 0 ||
	    gpuscan_nvidia_companions(s, &gpu) < 0) {
		gpu_done(&gpu);
		return -ENOMEM;
	}
	row = (unsigned)s->g->ngpus;
	r = gpuscan_add(s, &gpu);
	if (r == -EEXIST)
		return 0;
	if (r < 0 || cur != 1)
		return r;
	if (mm_error)
		return gpuscan_warn(s, "%s: the MIG instances of GPU %s left out", mm_error, uuid);
	if (caps_major < 0)
		return gpuscan_warn(s,
				    "%s/proc/devices has no nvidia-caps line: the MIG instances of "
				    "GPU %s left out",
				    s->root, uuid);
	if ((e = n->mig_max(h, &max)) != NVML_OK)
		return nvml_fail(n, e, "nvmlDeviceGetMaxMigDeviceCount");
	for (unsigned k = 0; k < max && k < 64; k++) {
		nvml_dev mig;

		e = n->mig_by_index(h, k, &mig);
		if (e == NVML_NOT_FOUND)
			continue;
		if (e != NVML_OK)
			return nvml_fail(n, e, "nvmlDeviceGetMigDeviceHandleByIndex");
		if ((r = mig_instance(s, n, mig, row, minor, caps_major, mm, nmm)) < 0)
			return r;
	}
	return 0;
}

int gpudetect_nvml(struct gpuscan *s)
{
	_cleanup_free_ char *mmpath = gpuscan_path(s, "/proc/driver/nvidia-caps/mig-minors");
	_cleanup_free_ struct mig_minor *mm = NULL;
	_cleanup_free_ char *mm_error = NULL, *bad = NULL;
	struct nvml n = {};
	size_t nmm = 0;
	unsigned count = 0, major;
	int caps_major = -1, r;
	nvml_ret e;

	if (!mmpath)
		return -ENOMEM;
	r = nvml_open(&n);
	if (r < 0)
		return r;
	r = mig_minors_load(mmpath, &mm, &nmm, &bad);
	if (r == -ENOMEM)
		goto out;
	if (r < 0 && !(mm_error = strdup_printf("%s: %s", mmpath, strerror(-r)))) {
		r = -ENOMEM;
		goto out;
	}
	if (bad && (r = gpuscan_warn(s, "%s is not a line mig-minors has: skipped", bad)) < 0)
		goto out;
	if ((r = gpuscan_chr_major(s, "nvidia-caps", &major)) == -ENOMEM)
		goto out;
	caps_major = r >= 0 ? (int)major : -1;
	r = 0;
	e = n.count(&count);
	if (e != NVML_OK)
		r = nvml_fail(&n, e, "nvmlDeviceGetCount_v2");
	for (unsigned i = 0; r >= 0 && i < count && i < 1024; i++)
		r = one_gpu(s, &n, i, mm, nmm, caps_major, mm_error);
out:
	nvml_close(&n);
	return r;
}

int nvml_mig_uuid(unsigned minor, unsigned gi, unsigned ci, char **ret)
{
	struct nvml n = {};
	unsigned count = 0;
	int r = nvml_open(&n);

	if (r < 0)
		return r;
	r = -ENOENT;
	if (n.count(&count) != NVML_OK)
		count = 0;
	for (unsigned i = 0; r == -ENOENT && i < count && i < 1024; i++) {
		unsigned m, max = 0;
		nvml_dev h;

		if (n.by_index(i, &h) != NVML_OK || n.minor(h, &m) != NVML_OK || m != minor ||
		    n.mig_max(h, &max) != NVML_OK)
			continue;
		for (unsigned k = 0; r == -ENOENT && k < max && k < 64; k++) {
			unsigned g, c;
			char uuid[128];
			nvml_dev mig;

			if (n.mig_by_index(h, k, &mig) == NVML_OK && n.gi_id(mig, &g) == NVML_OK &&
			    n.ci_id(mig, &c) == NVML_OK && g == gi && c == ci &&
			    n.uuid(mig, uuid, sizeof(uuid)) == NVML_OK) {
				uuid[sizeof(uuid) - 1] = '\0';
				if (!gpufile_uuid_valid(uuid))
					r = -EBADMSG; /* detection's test: the same answer */
				else
					r = (*ret = strdup(uuid)) ? 0 : -ENOMEM;
			}
		}
	}
	nvml_close(&n);
	return r;
}
