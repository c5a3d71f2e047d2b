/*
 * jobcg: GPU detection behind one interface (a backend per source, gpudetect_*.c), the
 * gres.conf lines it suggests and its comparison with gres.conf, and the companion devices a
 * job holding a GPU is granted.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cputopo.h"
#include "gpudetect_internal.h"
#include "parse.h"
#include "log.h"
#include "util.h"

#define GPUS_MAX	 1024
#define DRIVER_FILE_MAX	 65536
#define GPU_WARNINGS_MAX 256

char *gpuscan_path(const struct gpuscan *s, const char *path)
{
	return strdup_printf("%s%s", s->root, path);
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

int gpuscan_numbered(const struct gpuscan *s, const char *dir, const char *prefix, size_t max,
		     unsigned **ret, size_t *ret_n)
{
	_cleanup_free_ char *p = gpuscan_path(s, dir);
	_cleanup_free_ unsigned *v = NULL;
	size_t n = 0, plen = strlen(prefix);
	struct dirent *de;
	DIR *d;

	if (!p)
		return -ENOMEM;
	d = opendir(p);
	if (!d)
		return -errno;
	while ((de = readdir(d)) && n < max) {
		uint64_t x;

		/* Canonical numbers only: "gi01" or "007" would read as another entry's number. */
		if (!startswith(de->d_name, prefix) ||
		    (de->d_name[plen] == '0' && de->d_name[plen + 1]) ||
		    parse_u64(de->d_name + plen, UINT32_MAX, &x) < 0)
			continue;
		if (!v && !(v = calloc(max, sizeof(*v)))) {
			closedir(d);
			return -ENOMEM;
		}
		v[n++] = (unsigned)x;
	}
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_unsigned);
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

int gpuscan_read(const struct gpuscan *s, const char *path, char **ret)
{
	_cleanup_free_ char *p = gpuscan_path(s, path);

	if (!p)
		return -ENOMEM;
	return read_full_file_at(AT_FDCWD, p, DRIVER_FILE_MAX, ret, NULL);
}

int gpuscan_chr_major(const struct gpuscan *s, const char *name, unsigned *ret)
{
	_cleanup_free_ char *text = NULL;
	int r = gpuscan_read(s, "/proc/devices", &text);

	if (r < 0)
		return r == -ENOMEM ? r : -ENOENT;
	return gpufile_chr_major(text, strlen(text), name, ret);
}

int gpuscan_warn(struct gpuscan *s, const char *fmt, ...)
{
	char *msg, *raw;
	va_list ap;

	va_start(ap, fmt);
	raw = strdup_vprintf(fmt, ap);
	va_end(ap);
	/* Warnings quote driver files, which may hold anything: no control character reaches
	 * the terminal. */
	msg = raw ? str_escape_controls(raw) : NULL;
	free(raw);
	if (!msg)
		return -ENOMEM;
	log_warning("%s", msg);
	if (strv_length(s->g->warnings) >= GPU_WARNINGS_MAX) {
		free(msg);
		return 0;
	}
	return strv_push(&s->g->warnings, msg);
}

int gpuscan_note(struct gpuscan *s, const char *fmt, ...)
{
	_cleanup_free_ char *raw = NULL, *msg = NULL;
	va_list ap;

	(void)s;
	va_start(ap, fmt);
	raw = strdup_vprintf(fmt, ap);
	va_end(ap);
	msg = raw ? str_escape_controls(raw) : NULL;
	if (!msg)
		return -ENOMEM;
	log_notice("%s", msg);
	return 0;
}

int gpuscan_check_node(struct gpuscan *s, const char *path, unsigned major, unsigned minor,
		       const char *source)
{
	_cleanup_free_ char *p = gpuscan_path(s, path);
	struct stat st;
	int r;

	if (!p)
		return -ENOMEM;
	if (stat(p, &st) < 0) {
		int e = negative_errno();

		r = gpuscan_warn(s, "%s: %s, but %s: left out", p, strerror(-e), source);
		return r < 0 ? r : -ENOENT;
	}
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != major || minor(st.st_rdev) != minor) {
		if (S_ISCHR(st.st_mode))
			r = gpuscan_warn(s, "%s is c %u:%u, but %s (c %u:%u): left out", p,
					 major(st.st_rdev), minor(st.st_rdev), source, major,
					 minor);
		else
			r = gpuscan_warn(s, "%s is not a character device, but %s: left out", p,
					 source);
		return r < 0 ? r : -ENODEV;
	}
	return 0;
}

int gpu_file_push(struct jobcg_gpu_file **v, size_t *n, const char *path, unsigned major,
		  unsigned minor)
{
	struct jobcg_gpu_file *t = realloc(*v, (*n + 1) * sizeof(*t));
	char *p = strdup(path);

	if (t)
		*v = t;
	if (!t || !p) {
		free(p);
		return -ENOMEM;
	}
	t[(*n)++] = (struct jobcg_gpu_file){p, major, minor};
	return 0;
}

static void files_free(struct jobcg_gpu_file *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

void gpu_done(struct jobcg_gpu *gpu)
{
	free(gpu->model);
	free(gpu->type);
	free(gpu->uuid);
	free(gpu->pci);
	free(gpu->cpus);
	free(gpu->profile);
	free(gpu->source);
	files_free(gpu->files, gpu->nfiles);
	files_free(gpu->companions, gpu->ncompanions);
	*gpu = (struct jobcg_gpu){.parent = -1};
}

/* Whether file @fi of MIG instance @gpu may be file @ei of row @e: its GPU's file, shared with
 * the GPU and its other instances; its GI's cap file, shared with the GI's other instances. */
static bool mig_shares(const struct jobcg_gpu *gpu, size_t fi, const struct jobcg_gpu *e, size_t ei,
		       size_t erow)
{
	if (!gpu->mig || fi != ei || fi > 1)
		return false;
	if (fi == 0)
		return erow == (size_t)gpu->parent || (e->mig && e->parent == gpu->parent);
	return e->mig && e->parent == gpu->parent && e->gi == gpu->gi;
}

/* The earlier row naming a device of @gpu it may not share, or -1. */
static int device_taken(const struct jobcg_gpus *g, const struct jobcg_gpu *gpu, size_t *ret_fi)
{
	for (size_t k = 0; k < g->ngpus; k++) {
		const struct jobcg_gpu *e = &g->gpus[k];

		for (size_t fi = 0; fi < gpu->nfiles; fi++)
			for (size_t ei = 0; ei < e->nfiles; ei++)
				if (gpu->files[fi].major == e->files[ei].major &&
				    gpu->files[fi].minor == e->files[ei].minor &&
				    !mig_shares(gpu, fi, e, ei, k)) {
					*ret_fi = fi;
					return (int)k;
				}
	}
	return -1;
}

int gpuscan_add(struct gpuscan *s, struct jobcg_gpu *gpu)
{
	struct jobcg_gpus *g = s->g;
	size_t fi = 0;
	int k = device_taken(g, gpu, &fi);

	if (k >= 0) {
		const struct jobcg_gpu *e = &g->gpus[k];
		int r = gpuscan_warn(s, "%s gives %s (c %u:%u), which %s gave already: left out",
				     gpu->source ? gpu->source : "detection", gpu->files[fi].path,
				     gpu->files[fi].major, gpu->files[fi].minor,
				     e->source ? e->source : "an earlier row");

		gpu_done(gpu);
		return r < 0 ? r : -EEXIST;
	}
	if (g->ngpus >= GPUS_MAX) {
		gpu_done(gpu);
		return error_set(-E2BIG, "more than %d GPUs and MIG instances", GPUS_MAX);
	}
	if (g->ngpus == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 8;
		struct jobcg_gpu *t = realloc(g->gpus, ncap * sizeof(*t));

		if (!t) {
			gpu_done(gpu);
			return -ENOMEM;
		}
		g->gpus = t;
		s->cap = ncap;
	}
	gpu->index = (unsigned)g->ngpus;
	g->gpus[g->ngpus++] = *gpu;
	*gpu = (struct jobcg_gpu){.parent = -1};
	return 0;
}

char *gpuscan_local_cpus(const struct gpuscan *s, const char *pci)
{
	_cleanup_free_ char *p = strdup_printf("/sys/bus/pci/devices/%s/local_cpulist", pci);
	_cleanup_free_ uint64_t *bits = NULL;
	char *text = NULL, *out = NULL;
	size_t words = 0;

	if (!p || gpuscan_read(s, p, &text) < 0)
		return NULL;
	/* Normalised through the parser: what it cannot read is not passed on to Cores=. */
	if (jobcg_parse_cpulist(strstrip(text), &bits, &words) < 0 ||
	    jobcg_format_cpulist(bits, words, &out) < 0) {
		jobcg_error_clear();
		out = NULL;
	}
	free(text);
	return out;
}

char *gpu_type_from_model(const char *model)
{
	char *t = malloc(strlen(model) + 1), *o = t;
	bool sep = false;

	if (!t)
		return NULL;
	/* A whitelist: gres.conf gives '#', '=', ',' and blanks meanings of their own, and a
	 * Type= that loses its File= to a comment grants nothing it should. */
	for (const char *p = model; *p; p++) {
		char c = (char)tolower((unsigned char)*p);

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("._-", c))) {
			sep = o != t;
			continue;
		}
		if (sep)
			*o++ = '_';
		sep = false;
		*o++ = c;
	}
	*o = '\0';
	if (!*t) {
		free(t);
		return strdup("gpu");
	}
	return t;
}

void gpu_pci_normalise(char *pci, size_t size)
{
	unsigned dom, bus, dev, fn;

	if (sscanf(pci, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4)
		snprintf(pci, size, "%04x:%02x:%02x.%x", dom & 0xffff, bus, dev, fn);
	for (char *p = pci; *p; p++)
		*p = (char)tolower((unsigned char)*p);
}

int gpuscan_nvidia_companions(struct gpuscan *s, struct jobcg_gpu *gpu)
{
	static const struct {
		const char *name, *driver; /* driver: NULL = major 195 */
		unsigned minor;
	} comp[] = {
	    {"nvidiactl", NULL, 255},
	    {"nvidia-modeset", NULL, 254},
	    {"nvidia-uvm", "nvidia-uvm", 0},
	    {"nvidia-uvm-tools", "nvidia-uvm", 1},
	};

	for (size_t i = 0; i < ELEMENTSOF(comp); i++) {
		_cleanup_free_ char *path = strdup_printf("/dev/%s", comp[i].name);
		_cleanup_free_ char *p = path ? gpuscan_path(s, path) : NULL;
		unsigned major = NVIDIA_GPU_MAJOR;
		struct stat st;
		int r;

		if (!p)
			return -ENOMEM;
		if (stat(p, &st) < 0 || !S_ISCHR(st.st_mode))
			continue; /* not loaded (nvidia-uvm) or not made yet: nothing to grant */
		if (comp[i].driver && gpuscan_chr_major(s, comp[i].driver, &major) < 0)
			major = major(st.st_rdev);
		if (major(st.st_rdev) != major || minor(st.st_rdev) != comp[i].minor) {
			r = gpuscan_warn(
			    s, "%s is c %u:%u, not the driver's c %u:%u: not a companion", p,
			    major(st.st_rdev), minor(st.st_rdev), major, comp[i].minor);
			if (r < 0)
				return r;
			continue;
		}
		r = gpu_file_push(&gpu->companions, &gpu->ncompanions, path, major, comp[i].minor);
		if (r < 0)
			return r;
	}
	return 0;
}

int mig_minors_load(const char *path, struct mig_minor **ret, size_t *ret_n, char **ret_bad)
{
	_cleanup_free_ char *text = NULL;
	struct gpufile_line bad = {};
	int r = read_full_file_at(AT_FDCWD, path, 1 << 20, &text, NULL);

	if (r < 0)
		return r;
	r = gpufile_mig_minors(text, strlen(text), ret, ret_n, &bad);
	if (r < 0 || !ret_bad)
		return r;
	*ret_bad = NULL;
	if (bad.no && !(*ret_bad = strdup_printf("%s:%u: '%.*s'", path, bad.no,
						 bad.len > 80 ? 80 : (int)bad.len, bad.p))) {
		free(*ret);
		*ret = NULL;
		return -ENOMEM;
	}
	return 0;
}

int mig_minor_find(const struct mig_minor *v, size_t n, unsigned gpu, unsigned gi, int ci)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].gpu == gpu && v[i].gi == gi && v[i].ci == ci)
			return (int)v[i].minor;
	return -ENOENT;
}

int mig_minor_lookup(const struct mig_minor *v, size_t n, unsigned gpu, unsigned gi, int ci,
		     unsigned *ret)
{
	size_t found = n;

	for (size_t i = 0; i < n; i++)
		if (v[i].ci != MIG_MINOR_OTHER && v[i].gpu == gpu && v[i].gi == gi &&
		    v[i].ci == ci) {
			if (found != n)
				return -EEXIST;
			found = i;
		}
	if (found == n)
		return -ENOENT;
	for (size_t i = 0; i < n; i++)
		if (i != found && v[i].minor == v[found].minor)
			return -EEXIST;
	*ret = v[found].minor;
	return 0;
}

/* ---- the interface ---- */

static const struct {
	const char *name;
	const char *alias; /* Slurm's AutoDetect word */
	int (*fn)(struct gpuscan *s);
} backends[] = {
    {"nvidia", NULL, gpudetect_nvidia},
    {"nvml", NULL, gpudetect_nvml},
    {"amd", "rsmi", gpudetect_amd},
    {"intel", "oneapi", gpudetect_intel},
};

void jobcg_gpus_free(struct jobcg_gpus *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->ngpus; i++)
		gpu_done(&g->gpus[i]);
	free(g->gpus);
	free(g->backends);
	free(g->sysroot);
	strv_free(g->warnings);
	free(g);
}

static int run_backend(struct gpuscan *s, size_t b)
{
	char *t = s->g->backends ? strdup_printf("%s,%s", s->g->backends, backends[b].name)
				 : strdup(backends[b].name);

	if (!t)
		return -ENOMEM;
	free(s->g->backends);
	s->g->backends = t;
	return backends[b].fn(s);
}

int jobcg_gpus_detect(const char *backend, struct jobcg_gpus **ret)
{
	struct jobcg_gpus *g = calloc(1, sizeof(*g));
	/* Only what is read changes, never what is granted: grants come from gres.conf. Still
	 * ignored in a set-uid process, whose caller's environment is not to be believed. */
	const char *root = secure_getenv("JOBCG_SYSROOT");
	_cleanup_free_ char *rootbuf = NULL;
	struct gpuscan s = {.g = g};
	int r = 0;

	if (!g)
		return -ENOMEM;
	if (root && *root) {
		rootbuf = strdup(root);
		if (!rootbuf) {
			free(g);
			return -ENOMEM;
		}
		for (size_t l = strlen(rootbuf); l > 0 && rootbuf[l - 1] == '/'; l--)
			rootbuf[l - 1] = '\0';
		s.root = rootbuf;
		if (*rootbuf && !(g->sysroot = strdup(rootbuf))) {
			free(g);
			return -ENOMEM;
		}
	} else
		s.root = "";
	if (!backend || streq(backend, "all")) {
		for (size_t b = 0; b < ELEMENTSOF(backends) && r >= 0; b++)
			if (!streq(backends[b].name, "nvml"))
				r = run_backend(&s, b);
	} else if (streq(backend, "off")) {
		r = (g->backends = strdup("off")) ? 0 : -ENOMEM;
	} else if (strcaseeq(backend, "nrt")) {
		r = error_set(-EOPNOTSUPP,
			      "AutoDetect=nrt (AWS Trainium) is not supported by jobcg: list the "
			      "devices in gres.conf");
	} else {
		size_t b = 0;

		while (b < ELEMENTSOF(backends) && !strcaseeq(backend, backends[b].name) &&
		       !(backends[b].alias && strcaseeq(backend, backends[b].alias)))
			b++;
		if (b == ELEMENTSOF(backends))
			r = error_set(
			    -EINVAL,
			    "unknown GPU detection backend '%s' (nvidia, nvml, amd or rsmi, "
			    "intel or oneapi, all, off)",
			    backend);
		else
			r = run_backend(&s, b);
	}
	if (r < 0) {
		jobcg_gpus_free(g);
		return r;
	}
	*ret = g;
	return 0;
}

const char *jobcg_gpus_backend_for(const struct jobcg_gres_conf *conf)
{
	const char *ad = conf->node_autodetect ? conf->node_autodetect : conf->autodetect;

	if (!ad)
		return NULL;
	if (streq(ad, "rsmi"))
		return "amd";
	if (streq(ad, "oneapi"))
		return "intel";
	if (streq(ad, "full"))
		return "all";
	return ad; /* nvml, nvidia, nrt, off */
}

/* ---- gres.conf lines ---- */

static int files_text(const struct jobcg_gpu_file *v, size_t n, char **ret)
{
	_cleanup_free_ char *out = strdup("");

	for (size_t i = 0; out && i < n; i++) {
		char *t = strdup_printf("%s%s%s", out, i ? "," : "", v[i].path);

		free(out);
		out = t;
	}
	if (!out)
		return -ENOMEM;
	*ret = TAKE_PTR(out);
	return 0;
}

/* The node's cores as Slurm numbers them, read under @g's sysroot; false (logged) when they
 * cannot be: Cores= are then CPU ids, right only where each core has one thread. */
static bool topology_of(const struct jobcg_gpus *g, struct cputopo *ret)
{
	int r = cputopo_load_under(g->sysroot, ret);

	if (r < 0) {
		log_debug("no CPU topology, Cores= taken as CPU ids: %s", jobcg_error_message(r));
		jobcg_error_clear();
		return false;
	}
	return true;
}

/* Slurm's Cores= for CPUs @cpus (a CPU list): the cores holding any of them. */
static int cores_of_cpus(const struct cputopo *t, const char *cpus, char **ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	uint64_t cores[JOBCG_CPU_MAX / 64];
	size_t words = 0;
	int r = jobcg_parse_cpulist(cpus, &bits, &words);

	if (r < 0)
		return r;
	cputopo_cpu_bits_to_cores(t, bits, words, cores);
	return jobcg_format_cpulist(cores, ELEMENTSOF(cores), ret);
}

int jobcg_gpus_gres_conf(const struct jobcg_gpus *g, const char *nodename, char **ret)
{
	_cleanup_free_ char *out = strdup_printf("# gres.conf lines from jobcg gpus (%s)\n",
						 g->backends ? g->backends : "none");
	struct cputopo topo = {};
	bool have_topo = false;

	for (size_t i = 0; i < g->ngpus && !have_topo; i++)
		if (g->gpus[i].cpus)
			have_topo = topology_of(g, &topo);
	for (size_t i = 0; out && i < g->ngpus; i++) {
		const struct jobcg_gpu *d = &g->gpus[i];
		_cleanup_free_ char *files = NULL, *node = NULL, *line = NULL, *cores = NULL;
		char *t;

		if (d->mig_mode || d->nfiles == 0)
			continue;
		if (files_text(d->files, d->nfiles, &files) < 0)
			goto nomem;
		node = nodename ? strdup_printf("NodeName=%s ", nodename) : strdup("");
		if (!node)
			goto nomem;
		/* Slurm reads Cores= as core indices, sysfs gives the GPU's CPUs. */
		if (d->cpus && have_topo && cores_of_cpus(&topo, d->cpus, &cores) < 0)
			goto nomem;
		if (d->cpus && !cores && !(cores = strdup(d->cpus)))
			goto nomem;
		line = strdup_printf("%sName=gpu Type=%s %s=%s%s%s\n", node, d->type,
				     d->nfiles > 1 ? "MultipleFiles" : "File", files,
				     cores ? " Cores=" : "", cores ? cores : "");
		if (!line)
			goto nomem;
		t = strdup_printf("%s%s", out, line);
		free(out);
		out = t;
	}
	cputopo_done(&topo);
	if (!out)
		return -ENOMEM;
	*ret = TAKE_PTR(out);
	return 0;
nomem:
	cputopo_done(&topo);
	return -ENOMEM;
}

/* ---- comparison with gres.conf ---- */

struct diff {
	char **v;
	int err;
};

static void __attribute__((format(printf, 2, 3))) diff_add(struct diff *d, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (d->err)
		return;
	va_start(ap, fmt);
	s = strdup_vprintf(fmt, ap);
	va_end(ap);
	if (!s || strv_push(&d->v, s) < 0)
		d->err = -ENOMEM;
}

static bool file_is(const struct jobcg_gres_file *f, const struct jobcg_gpu_file *g)
{
	if (f->type)
		return f->type == 'c' && f->major == g->major && f->minor == g->minor;
	return streq(f->path, g->path);
}

/* @r's files, stat()ed under @root where the configuration did not (a copy to free). */
static int resolve_files(const struct jobcg_gres_record *r, const char *root,
			 struct jobcg_gres_record *ret)
{
	struct jobcg_gres_file *v = calloc(r->nfiles + 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	*ret = *r;
	for (size_t i = 0; i < r->nfiles; i++) {
		char p[PATH_MAX];
		struct stat st;

		v[i] = r->files[i];
		if (v[i].type ||
		    snprintf(p, sizeof(p), "%s%s", root ? root : "", v[i].path) >= (int)sizeof(p))
			continue;
		if (stat(p, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
			v[i].type = S_ISCHR(st.st_mode) ? 'c' : 'b';
			v[i].major = major(st.st_rdev);
			v[i].minor = minor(st.st_rdev);
		}
	}
	ret->files = v;
	return 0;
}

static bool record_has(const struct jobcg_gres_record *r, const struct jobcg_gpu_file *g)
{
	for (size_t i = 0; i < r->nfiles; i++)
		if (file_is(&r->files[i], g))
			return true;
	return false;
}

static char *gpu_name(const struct jobcg_gpu *d)
{
	if (d->mig)
		return strdup_printf("MIG instance GI %u CI %u of the GPU at %s (%s)", d->gi, d->ci,
				     d->pci, d->files[d->nfiles - 1].path);
	return strdup_printf("%s at %s (%s)", d->model, d->pci,
			     d->nfiles ? d->files[0].path : "no device file");
}

static bool type_fits(const char *type, const struct jobcg_gpu *d)
{
	_cleanup_free_ char *want = gpu_type_from_model(type);

	/* As Slurm: the configured Type is a case-insensitive part of the detected name. */
	return want && (strcasestr(d->type, want) || strcasestr(d->model, type));
}

/* @r's Cores= against the CPUs local to GPU @d (@name): Slurm's core indices, in CPUs through
 * @topo (NULL: taken as CPU ids). */
static void compare_cores(struct diff *df, const struct jobcg_gres_record *r,
			  const struct jobcg_gpu *d, const char *name, const struct cputopo *topo)
{
	_cleanup_free_ uint64_t *bits = NULL;
	_cleanup_free_ char *have = NULL;
	uint64_t conv[JOBCG_CPU_MAX / 64];
	const uint64_t *cpus = r->cores;
	size_t words = 0, cwords = r->cores_words, beyond = 0;
	bool eq = true;

	if (topo) {
		cputopo_cores_to_cpu_bits(topo, r->cores, r->cores_words, conv, &beyond);
		cpus = conv;
		cwords = ELEMENTSOF(conv);
		if (beyond > 0) {
			if (jobcg_format_cpulist(r->cores, r->cores_words, &have) < 0) {
				df->err = -ENOMEM;
				return;
			}
			diff_add(df,
				 "%s:%u: gpu %u: Cores=%s names %zu core%s beyond this node's %zu "
				 "(Slurm's core indices, 0-%zu here)",
				 r->origin.file, r->origin.line, r->index, have, beyond,
				 beyond == 1 ? "" : "s", topo->ncores, topo->ncores - 1);
		}
	}
	if (!d->cpus)
		return;
	if (jobcg_parse_cpulist(d->cpus, &bits, &words) < 0) {
		jobcg_error_clear();
		return;
	}
	for (size_t i = 0; i < words || i < cwords; i++)
		eq &= (i < words ? bits[i] : 0) == (i < cwords ? cpus[i] : 0);
	if (eq)
		return;
	if (!have && jobcg_format_cpulist(r->cores, r->cores_words, &have) < 0) {
		df->err = -ENOMEM;
		return;
	}
	if (topo) {
		_cleanup_free_ char *want = NULL;

		if (cores_of_cpus(topo, d->cpus, &want) < 0) {
			df->err = -ENOMEM;
			return;
		}
		diff_add(df,
			 "%s:%u: gpu %u: Cores=%s, but the CPUs local to the %s are %s (Cores=%s)",
			 r->origin.file, r->origin.line, r->index, have, name, d->cpus, want);
	} else
		diff_add(df, "%s:%u: gpu %u: Cores=%s, but the CPUs local to the %s are %s",
			 r->origin.file, r->origin.line, r->index, have, name, d->cpus);
}

static void compare_one(struct diff *df, const struct jobcg_gres_record *r,
			const struct jobcg_gpu *d, const struct cputopo *topo)
{
	_cleanup_free_ char *name = gpu_name(d);
	bool same = r->nfiles == d->nfiles;

	if (!name) {
		df->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; same && i < d->nfiles; i++)
		same = file_is(&r->files[i], &d->files[i]);
	if (!same) {
		_cleanup_free_ char *want = NULL;

		if (files_text(d->files, d->nfiles, &want) < 0) {
			df->err = -ENOMEM;
			return;
		}
		for (size_t i = 0; i < r->nfiles; i++) {
			const struct jobcg_gres_file *f = &r->files[i];
			bool found = false;

			for (size_t k = 0; k < d->nfiles && !found; k++)
				found = file_is(f, &d->files[k]);
			if (!found)
				diff_add(df,
					 "%s:%u: gpu %u: %s (c %u:%u) is not a device of the %s",
					 r->origin.file, r->origin.line, r->index, f->path,
					 f->major, f->minor, name);
		}
		diff_add(df, "%s:%u: gpu %u: files differ: detection gives %s=%s", r->origin.file,
			 r->origin.line, r->index, d->nfiles > 1 ? "MultipleFiles" : "File", want);
	}
	if (r->type && !type_fits(r->type, d))
		diff_add(df, "%s:%u: gpu %u: Type=%s, but the %s is of type %s", r->origin.file,
			 r->origin.line, r->index, r->type, name, d->type);
	if (r->cores)
		compare_cores(df, r, d, name, topo);
}

static int compare(const struct jobcg_gpus *g, size_t nrecords,
		   const struct jobcg_gres_record *records, const struct cputopo *topo, int *match,
		   bool *used, char ***ret)
{
	struct diff df = {};
	int last_row = -1;

	/* A MIG instance is recognised by its CI capability file, a whole GPU by its file. */
	for (size_t i = 0; i < nrecords; i++) {
		const struct jobcg_gres_record *r = &records[i];

		match[i] = -1;
		if (!streq(r->name, "gpu") || r->nfiles == 0)
			continue;
		for (int pass = 0; pass < 2 && match[i] < 0; pass++)
			for (size_t k = 0; k < g->ngpus && match[i] < 0; k++) {
				const struct jobcg_gpu *d = &g->gpus[k];

				if (used[k] || d->mig_mode || !d->nfiles || d->mig != (pass == 0))
					continue;
				if (record_has(r, &d->files[d->nfiles - 1])) {
					match[i] = (int)k;
					used[k] = true;
				}
			}
	}
	for (size_t k = 0; k < g->ngpus; k++) {
		const struct jobcg_gpu *d = &g->gpus[k];
		_cleanup_free_ char *name = NULL;

		if (used[k] || d->mig_mode || !d->nfiles)
			continue;
		if (!(name = gpu_name(d)))
			return strv_free(df.v), -ENOMEM;
		diff_add(&df, "the %s%s%s is not in gres.conf", name, d->uuid ? ", " : "",
			 d->uuid ? d->uuid : "");
	}
	for (size_t i = 0; i < nrecords; i++) {
		const struct jobcg_gres_record *r = &records[i];

		if (!streq(r->name, "gpu") || r->nfiles == 0)
			continue;
		if (match[i] < 0) {
			const struct jobcg_gres_file *f = &r->files[r->nfiles - 1];

			diff_add(&df, "%s:%u: gpu %u (%s, c %u:%u) matches no detected GPU",
				 r->origin.file, r->origin.line, r->index, f->path, f->major,
				 f->minor);
			continue;
		}
		compare_one(&df, r, &g->gpus[match[i]], topo);
		/* gres.conf order is the order of indices (and of CUDA_VISIBLE_DEVICES without
		 * constrained devices): it should be the driver's. */
		if (match[i] < last_row) {
			_cleanup_free_ char *name = gpu_name(&g->gpus[match[i]]);

			if (!name)
				return strv_free(df.v), -ENOMEM;
			diff_add(&df,
				 "%s:%u: gpu %u is the %s, which detection lists before the GPU of "
				 "an earlier gres.conf line: a different order",
				 r->origin.file, r->origin.line, r->index, name);
		} else
			last_row = match[i];
	}
	if (!df.err && !df.v && !(df.v = calloc(1, sizeof(char *))))
		df.err = -ENOMEM;
	if (df.err) {
		strv_free(df.v);
		return df.err;
	}
	*ret = df.v;
	return 0;
}

int jobcg_gpus_compare(const struct jobcg_gpus *g, const struct jobcg_gres_conf *conf, char ***ret)
{
	_cleanup_free_ int *match = calloc(conf->nrecords + 1, sizeof(int)); /* record -> row */
	_cleanup_free_ struct jobcg_gres_record *recs = calloc(conf->nrecords + 1, sizeof(*recs));
	_cleanup_free_ bool *used = calloc(g->ngpus + 1, sizeof(bool));

	if (!match || !used || !recs)
		return -ENOMEM;
	for (size_t i = 0; i < conf->nrecords; i++)
		if (resolve_files(&conf->records[i], g->sysroot, &recs[i]) < 0) {
			for (size_t k = 0; k < i; k++)
				free(recs[k].files);
			return -ENOMEM;
		}
	/* The topology only when a gpu record has Cores= to compare. */
	struct cputopo topo = {};
	bool have_topo = false;

	for (size_t i = 0; i < conf->nrecords && !have_topo; i++)
		if (conf->records[i].cores && streq(conf->records[i].name, "gpu"))
			have_topo = topology_of(g, &topo);

	int rr = compare(g, conf->nrecords, recs, have_topo ? &topo : NULL, match, used, ret);

	cputopo_done(&topo);
	for (size_t i = 0; i < conf->nrecords; i++)
		free(recs[i].files);
	return rr;
}

/* ---- what gres.c grants beside a GPU ---- */

static int dir_of(const char *path, unsigned up, char *buf, size_t size)
{
	if (snprintf(buf, size, "%s", path) >= (int)size)
		return -ENAMETOOLONG;
	for (unsigned i = 0; i < up; i++) {
		char *slash = strrchr(buf, '/');

		if (!slash)
			return -EINVAL;
		*slash = '\0';
	}
	return 0;
}

/* c MAJOR:MINOR at @dir/@name, checked against the driver's major where /proc/devices has it
 * (absent there: stand-in nodes on a node without the driver, taken as they are). */
static int companion(const char *proc_devices, const char *dir, const char *name,
		     const char *driver, unsigned major, unsigned minor,
		     int (*add)(void *ud, unsigned major, unsigned minor), void *ud)
{
	char p[PATH_MAX];
	struct stat st;

	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return 0;
	if (stat(p, &st) < 0 || !S_ISCHR(st.st_mode))
		return 0;
	if (driver && (!proc_devices ||
		       gpufile_chr_major(proc_devices, strlen(proc_devices), driver, &major) < 0))
		major = major(st.st_rdev);
	if (major(st.st_rdev) != major || minor(st.st_rdev) != minor) {
		log_warning("%s is c %u:%u, not the driver's c %u:%u: not granted with the GPU", p,
			    major(st.st_rdev), minor(st.st_rdev), major, minor);
		return 0;
	}
	return add(ud, major, minor);
}

static bool sysfs_says_not_amd(unsigned minor)
{
	_cleanup_free_ char *vendor = NULL;
	char p[64];

	snprintf(p, sizeof(p), "/sys/dev/char/%u:%u/device/vendor", DRM_MAJOR, minor);
	/* Stand-in render nodes have no sysfs entry: the kfd beside them decides. */
	if (read_one_line_at(AT_FDCWD, p, &vendor) < 0)
		return false;
	return !strcaseeq(strstrip(vendor), "0x1002");
}

/* Whether @kind's companions in @dir were given already in this pass (and remember them). */
static int seen_dir(struct gres_companions_seen *seen, char kind, const char *dir)
{
	_cleanup_free_ char *key = strdup_printf("%c:%s", kind, dir);
	char **t;

	if (!key)
		return -ENOMEM;
	for (size_t i = 0; i < seen->ndirs; i++)
		if (streq(seen->dirs[i], key))
			return 1;
	t = realloc(seen->dirs, (seen->ndirs + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	seen->dirs = t;
	seen->dirs[seen->ndirs++] = TAKE_PTR(key);
	return 0;
}

void gres_companions_done(struct gres_companions_seen *seen)
{
	for (size_t i = 0; i < seen->ndirs; i++)
		free(seen->dirs[i]);
	free(seen->dirs);
	free(seen->proc_devices);
	*seen = (struct gres_companions_seen){};
}

int gres_companions(const struct jobcg_gres_record *r, struct gres_companions_seen *seen,
		    int (*add)(void *ud, unsigned major, unsigned minor), void *ud)
{
	if (r->flags & JOBCG_GRES_FLAG_NO_COMPANIONS)
		return 0;
	for (size_t i = 0; i < r->nfiles; i++) {
		const struct jobcg_gres_file *f = &r->files[i];
		bool nvidia = f->major == NVIDIA_GPU_MAJOR;
		char dir[PATH_MAX];
		int k = 0;

		if (f->type != 'c')
			continue;
		if (nvidia && f->minor < 254) {
			if (dir_of(f->path, 1, dir, sizeof(dir)) < 0)
				continue;
		} else if (f->major == DRM_MAJOR && f->minor >= 128 && f->minor < 256) {
			if (dir_of(f->path, 2, dir, sizeof(dir)) < 0 ||
			    sysfs_says_not_amd(f->minor))
				continue;
		} else
			continue;
		k = seen_dir(seen, nvidia ? 'n' : 'a', dir);
		if (k != 0) {
			if (k < 0)
				return k;
			continue;
		}
		if (!seen->loaded) {
			if (read_full_file_at(AT_FDCWD, "/proc/devices", 65536, &seen->proc_devices,
					      NULL) == -ENOMEM)
				return -ENOMEM;
			seen->loaded = true;
		}
		if (nvidia) {
			const char *pd = seen->proc_devices;

			if ((k = companion(pd, dir, "nvidiactl", NULL, NVIDIA_GPU_MAJOR, 255, add,
					   ud)) < 0 ||
			    (k = companion(pd, dir, "nvidia-modeset", NULL, NVIDIA_GPU_MAJOR, 254,
					   add, ud)) < 0 ||
			    (k = companion(pd, dir, "nvidia-uvm", "nvidia-uvm", 0, 0, add, ud)) <
				0 ||
			    (k = companion(pd, dir, "nvidia-uvm-tools", "nvidia-uvm", 0, 1, add,
					   ud)) < 0)
				return k;
		} else if ((k = companion(seen->proc_devices, dir, "kfd", "kfd", 0, 0, add, ud)) <
			   0)
			return k;
	}
	return 0;
}

static bool is_cap_file(const struct jobcg_gres_file *f)
{
	const char *base = strrchr(f->path, '/');

	return base && startswith(base + 1, "nvidia-cap") && isdigit((unsigned char)base[11]);
}

bool gres_record_is_mig(const struct jobcg_gres_record *r)
{
	for (size_t i = 0; i < r->nfiles; i++)
		if (is_cap_file(&r->files[i]))
			return true;
	return false;
}

/* The "GPU UUID:" of the GPU whose "Device Minor:" is @minor. */
static int parent_uuid(const char *proc, unsigned minor, char **ret)
{
	_cleanup_free_ char *dir = strdup_printf("%s/driver/nvidia/gpus", proc);
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;
	int r = -ENOENT;

	if (!dir)
		return -ENOMEM;
	while (d && r == -ENOENT && (de = readdir(d))) {
		_cleanup_free_ char *p = NULL, *text = NULL;
		char *uuid = NULL;
		unsigned got;
		int k;

		if (de->d_name[0] == '.')
			continue;
		p = strdup_printf("%s/%s/information", dir, de->d_name);
		if (!p) {
			r = -ENOMEM;
			break;
		}
		if (read_full_file_at(AT_FDCWD, p, DRIVER_FILE_MAX, &text, NULL) < 0)
			continue;
		k = gpufile_nvidia_minor_uuid(text, strlen(text), &got, &uuid);
		if (k == -ENOMEM)
			r = k;
		else if (k == 0 && got == minor) {
			*ret = uuid;
			r = 0;
		} else
			free(uuid);
	}
	if (d)
		closedir(d);
	return r;
}

int gres_mig_uuid(const struct jobcg_gres_record *r, const char *proc, bool use_nvml, char **ret)
{
	_cleanup_free_ struct mig_minor *mm = NULL;
	_cleanup_free_ char *path = NULL, *uuid = NULL;
	size_t nmm = 0;
	int gpu = -1, r2;

	for (size_t i = 0; i < r->nfiles; i++)
		if (r->files[i].type == 'c' && r->files[i].major == NVIDIA_GPU_MAJOR &&
		    r->files[i].minor < 254 && gpu < 0)
			gpu = (int)r->files[i].minor;
	if (gpu < 0 || !gres_record_is_mig(r))
		return -ENOENT;
	path = strdup_printf("%s/driver/nvidia-caps/mig-minors", proc);
	if (!path)
		return -ENOMEM;
	r2 = mig_minors_load(path, &mm, &nmm, NULL);
	if (r2 < 0)
		return r2 == -ENOMEM ? r2 : -ENOENT;
	for (size_t i = 0; i < r->nfiles; i++) {
		if (!is_cap_file(&r->files[i]) || r->files[i].type != 'c')
			continue;
		for (size_t k = 0; k < nmm; k++) {
			if (mm[k].minor != r->files[i].minor || mm[k].ci < 0 ||
			    mm[k].gpu != (unsigned)gpu)
				continue;
			if (use_nvml &&
			    nvml_mig_uuid((unsigned)gpu, mm[k].gi, (unsigned)mm[k].ci, ret) == 0)
				return 0;
			jobcg_error_clear();
			r2 = parent_uuid(proc, (unsigned)gpu, &uuid);
			if (r2 < 0)
				return r2;
			*ret = strdup_printf("MIG-%s/%u/%d", uuid, mm[k].gi, mm[k].ci);
			return *ret ? 0 : -ENOMEM;
		}
	}
	return -ENOENT;
}
