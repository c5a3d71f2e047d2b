/*
 * A stand-in libnvidia-ml.so.1 for tests: the NVML calls jobcg makes, answered from the file
 * named by $JOBCG_FAKE_NVML. Lines (blank and '#' ignored):
 *   gpu NAME|UUID|BUSID|MINOR|MIGMODE      a GPU (MIGMODE 0, 1, or -1: not supported)
 *   mig SLOT|GI|CI|UUID|NAME               a MIG instance of the last gpu, in slot SLOT
 *   fail CALL CODE                         CALL returns CODE (an NVML error number)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXG 16
#define MAXM 16

struct dev {
	char name[96], uuid[96], bus[32];
	unsigned minor, gi, ci;
	int mig_mode;
	struct dev *mig[MAXM];
	unsigned nmig_max;
};

struct pci {
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

static struct dev gpus[MAXG], migs[MAXG * MAXM];
static unsigned ngpus, nmigs;
static char fails[32][64];
static int fail_codes[32];
static unsigned nfails;
static int inited;

static int failing(const char *call)
{
	for (unsigned i = 0; i < nfails; i++)
		if (!strcmp(fails[i], call))
			return fail_codes[i];
	return 0;
}

static void field(char **p, char *out, size_t size)
{
	char *bar = strchr(*p, '|');
	size_t n = bar ? (size_t)(bar - *p) : strcspn(*p, "\n");

	snprintf(out, size, "%.*s", (int)n, *p);
	*p += n + (bar ? 1 : 0);
}

static int load(void)
{
	const char *path = getenv("JOBCG_FAKE_NVML");
	char line[512];
	FILE *f;

	ngpus = nmigs = nfails = 0;
	memset(gpus, 0, sizeof(gpus));
	if (!path || !(f = fopen(path, "re")))
		return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
	while (fgets(line, sizeof(line), f)) {
		char *p = line, num[32];

		if (!strncmp(line, "gpu ", 4) && ngpus < MAXG) {
			struct dev *d = &gpus[ngpus++];

			p += 4;
			field(&p, d->name, sizeof(d->name));
			field(&p, d->uuid, sizeof(d->uuid));
			field(&p, d->bus, sizeof(d->bus));
			field(&p, num, sizeof(num));
			d->minor = (unsigned)atoi(num);
			field(&p, num, sizeof(num));
			d->mig_mode = atoi(num);
			d->nmig_max = d->mig_mode == 1 ? 7 : 0;
		} else if (!strncmp(line, "mig ", 4) && ngpus && nmigs < MAXG * MAXM) {
			struct dev *m = &migs[nmigs++];
			unsigned slot;

			p += 4;
			field(&p, num, sizeof(num));
			slot = (unsigned)atoi(num);
			field(&p, num, sizeof(num));
			m->gi = (unsigned)atoi(num);
			field(&p, num, sizeof(num));
			m->ci = (unsigned)atoi(num);
			field(&p, m->uuid, sizeof(m->uuid));
			field(&p, m->name, sizeof(m->name));
			if (slot < MAXM)
				gpus[ngpus - 1].mig[slot] = m;
		} else if (!strncmp(line, "fail ", 5) && nfails < 32) {
			if (sscanf(line, "fail %63s %d", fails[nfails], &fail_codes[nfails]) == 2)
				nfails++;
		}
	}
	fclose(f);
	return 0;
}

int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int e);
int nvmlDeviceGetCount_v2(unsigned *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned i, struct dev **d);
int nvmlDeviceGetName(struct dev *d, char *buf, unsigned len);
int nvmlDeviceGetUUID(struct dev *d, char *buf, unsigned len);
int nvmlDeviceGetPciInfo_v3(struct dev *d, struct pci *p);
int nvmlDeviceGetMinorNumber(struct dev *d, unsigned *m);
int nvmlDeviceGetMigMode(struct dev *d, unsigned *cur, unsigned *pend);
int nvmlDeviceGetMaxMigDeviceCount(struct dev *d, unsigned *n);
int nvmlDeviceGetMigDeviceHandleByIndex(struct dev *d, unsigned i, struct dev **m);
int nvmlDeviceGetGpuInstanceId(struct dev *d, unsigned *id);
int nvmlDeviceGetComputeInstanceId(struct dev *d, unsigned *id);

#define CHECK(call)                                                                                \
	do {                                                                                       \
		int e_ = failing(call);                                                            \
		if (e_)                                                                            \
			return e_;                                                                 \
		if (!inited && strcmp(call, "nvmlInit_v2"))                                        \
			return 1; /* NVML_ERROR_UNINITIALIZED */                                   \
	} while (0)

int nvmlInit_v2(void)
{
	int e = load();

	if (!e)
		e = failing("nvmlInit_v2");
	inited = !e;
	return e;
}

int nvmlShutdown(void)
{
	inited = 0;
	return 0;
}

const char *nvmlErrorString(int e)
{
	switch (e) {
	case 0:
		return "Success";
	case 3:
		return "Not Supported";
	case 6:
		return "Not Found";
	case 9:
		return "Driver Not Loaded";
	default:
		return "Unknown Error";
	}
}

int nvmlDeviceGetCount_v2(unsigned *n)
{
	CHECK("nvmlDeviceGetCount_v2");
	*n = ngpus;
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, struct dev **d)
{
	CHECK("nvmlDeviceGetHandleByIndex_v2");
	if (i >= ngpus)
		return 2;
	*d = &gpus[i];
	return 0;
}

static int copy(char *buf, unsigned len, const char *s)
{
	if (strlen(s) + 1 > len)
		return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
	strcpy(buf, s);
	return 0;
}

int nvmlDeviceGetName(struct dev *d, char *buf, unsigned len)
{
	CHECK("nvmlDeviceGetName");
	return copy(buf, len, d->name);
}

int nvmlDeviceGetUUID(struct dev *d, char *buf, unsigned len)
{
	CHECK("nvmlDeviceGetUUID");
	return copy(buf, len, d->uuid);
}

int nvmlDeviceGetPciInfo_v3(struct dev *d, struct pci *p)
{
	CHECK("nvmlDeviceGetPciInfo_v3");
	memset(p, 0, sizeof(*p));
	snprintf(p->bus_id, sizeof(p->bus_id), "%s", d->bus);
	return 0;
}

int nvmlDeviceGetMinorNumber(struct dev *d, unsigned *m)
{
	CHECK("nvmlDeviceGetMinorNumber");
	*m = d->minor;
	return 0;
}

int nvmlDeviceGetMigMode(struct dev *d, unsigned *cur, unsigned *pend)
{
	CHECK("nvmlDeviceGetMigMode");
	if (d->mig_mode < 0)
		return 3;
	*cur = *pend = (unsigned)d->mig_mode;
	return 0;
}

int nvmlDeviceGetMaxMigDeviceCount(struct dev *d, unsigned *n)
{
	CHECK("nvmlDeviceGetMaxMigDeviceCount");
	*n = d->nmig_max;
	return 0;
}

int nvmlDeviceGetMigDeviceHandleByIndex(struct dev *d, unsigned i, struct dev **m)
{
	CHECK("nvmlDeviceGetMigDeviceHandleByIndex");
	if (i >= MAXM || !d->mig[i])
		return 6;
	*m = d->mig[i];
	return 0;
}

int nvmlDeviceGetGpuInstanceId(struct dev *d, unsigned *id)
{
	CHECK("nvmlDeviceGetGpuInstanceId");
	*id = d->gi;
	return 0;
}

int nvmlDeviceGetComputeInstanceId(struct dev *d, unsigned *id)
{
	CHECK("nvmlDeviceGetComputeInstanceId");
	*id = d->ci;
	return 0;
}
