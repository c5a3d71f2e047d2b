/* jobcg internal: the node's cores as Slurm numbers them (hwloc's logical order), read from
 * sysfs or from a per-boot cache, and Slurm's core indices in CPU ids and back (see cputopo.h). */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cputopo.h"
#include "log.h"
#include "parse.h"
#include "util.h"

int cputopo_parse_id(const char *text, long *ret)
{
	char *end;
	long v;

	/* Signed: sysfs says -1 for a package or die id the firmware does not give. */
	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || (*end && strcmp(end, "\n") != 0))
		return -EINVAL;
	*ret = v;
	return 0;
}

static int read_uint(int dirfd, const char *path, long *ret)
{
	char buf[CPUTOPO_ID_MAX + 1];
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t l;

	if (fd < 0)
		return -errno;
	l = read(fd, buf, sizeof(buf) - 1);
	if (l <= 0)
		return l < 0 ? -errno : -EINVAL;
	buf[l] = 0;
	return cputopo_parse_id(buf, ret);
}

struct core_key {
	long pkg, die, core;
	unsigned cpu;
	/* The lowest CPU of the key's package, die and core: hwloc's order, filled in below. */
	unsigned pkg_first, die_first, core_first;
};

static int id_cmp(const void *a, const void *b)
{
	const struct core_key *x = a, *y = b;

	if (x->pkg != y->pkg)
		return x->pkg < y->pkg ? -1 : 1;
	if (x->die != y->die)
		return x->die < y->die ? -1 : 1;
	if (x->core != y->core)
		return x->core < y->core ? -1 : 1;
	return x->cpu < y->cpu ? -1 : x->cpu > y->cpu;
}

static int order_cmp(const void *a, const void *b)
{
	const struct core_key *x = a, *y = b;

	if (x->pkg_first != y->pkg_first)
		return x->pkg_first < y->pkg_first ? -1 : 1;
	if (x->die_first != y->die_first)
		return x->die_first < y->die_first ? -1 : 1;
	if (x->core_first != y->core_first)
		return x->core_first < y->core_first ? -1 : 1;
	return x->cpu < y->cpu ? -1 : x->cpu > y->cpu;
}

/*
 * Cores in Slurm's order from (package, die, core, cpu) keys, sorted in place. Slurm's
 * abstract core N is hwloc's: packages, then the cores below each, in hwloc's logical order,
 * which sorts siblings by the lowest CPU they hold, not by the ids the firmware gave them
 * (core_id 4 holding cpu0 comes first).
 */
static int topology_from_keys(struct core_key *keys, size_t n, struct cputopo *ret)
{
	struct cputopo t = {};

	/* Group by ids; each group's first key collects the group's lowest CPU, then every key
	 * takes its groups' and the keys are sorted by those. */
	qsort(keys, n, sizeof(*keys), id_cmp);
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0, p = 0, d = 0, c = 0; i < n; i++) {
			struct core_key *k = &keys[i];

			if (i == 0 || k->pkg != keys[p].pkg)
				p = d = c = i;
			else if (k->die != keys[d].die)
				d = c = i;
			else if (k->core != keys[c].core)
				c = i;
			if (pass == 1) {
				k->pkg_first = keys[p].pkg_first;
				k->die_first = keys[d].die_first;
				k->core_first = keys[c].core_first;
				continue;
			}
			if (p == i)
				k->pkg_first = k->cpu;
			if (d == i)
				k->die_first = k->cpu;
			if (c == i)
				k->core_first = k->cpu;
			if (k->cpu < keys[p].pkg_first)
				keys[p].pkg_first = k->cpu;
			if (k->cpu < keys[d].die_first)
				keys[d].die_first = k->cpu;
			if (k->cpu < keys[c].core_first)
				keys[c].core_first = k->cpu;
		}
	qsort(keys, n, sizeof(*keys), order_cmp);
	t.cpus = calloc(n, sizeof(*t.cpus));
	if (!t.cpus)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && keys[i].cpu == keys[i - 1].cpu) {
			free(t.cpus);
			return -EINVAL; /* one CPU twice: only a forged cache says so */
		}
		if (i == 0 || keys[i].pkg != keys[i - 1].pkg || keys[i].die != keys[i - 1].die ||
		    keys[i].core != keys[i - 1].core)
			t.ncores++;
		t.cpus[t.ncores - 1][keys[i].cpu / 64] |= UINT64_C(1) << (keys[i].cpu % 64);
	}
	*ret = t;
	return 0;
}

static int keys_push(struct core_key **keys, size_t *n, size_t *cap, const struct core_key *k)
{
	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 64;
		struct core_key *nk = realloc(*keys, ncap * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		*keys = nk;
		*cap = ncap;
	}
	(*keys)[(*n)++] = *k;
	return 0;
}

static int scan_keys(const char *cpu_dir, struct core_key **ret, size_t *ret_n)
{
	_cleanup_free_ struct core_key *keys = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(cpu_dir);

	if (!d)
		return error_set(-errno, "cannot open %s: %s", cpu_dir, strerror(errno));
	while ((de = readdir(d))) {
		char path[128];
		unsigned cpu;
		struct core_key k;

		if (strncmp(de->d_name, "cpu", 3) != 0 ||
		    parse_uint(de->d_name + 3, JOBCG_CPU_MAX - 1, &cpu) < 0)
			continue;
		snprintf(path, sizeof(path), "%s/topology/physical_package_id", de->d_name);
		if (read_uint(dirfd(d), path, &k.pkg) < 0)
			continue; /* offline: no topology */
		snprintf(path, sizeof(path), "%s/topology/core_id", de->d_name);
		if (read_uint(dirfd(d), path, &k.core) < 0)
			continue;
		snprintf(path, sizeof(path), "%s/topology/die_id", de->d_name);
		if (read_uint(dirfd(d), path, &k.die) < 0)
			k.die = 0; /* kernels before 5.2 */
		k.cpu = (unsigned)cpu;
		if (keys_push(&keys, &n, &cap, &k) < 0) {
			closedir(d);
			return -ENOMEM;
		}
	}
	closedir(d);
	if (n == 0)
		return error_set(-ENOENT, "%s: no CPU with a topology", cpu_dir);
	*ret = TAKE_PTR(keys);
	*ret_n = n;
	return 0;
}

int cputopo_load(const char *cpu_dir, struct cputopo *ret)
{
	_cleanup_free_ struct core_key *keys = NULL;
	size_t n = 0;
	int r = scan_keys(cpu_dir, &keys, &n);

	return r < 0 ? r : topology_from_keys(keys, n, ret);
}

#define TOPO_CACHE_MAGIC "jobcg-cpu-topology 1"

/* "KEY VALUE\n" at *@p, VALUE being @want exactly; moves *@p past the line. */
static bool cache_line_is(const char **p, const char *end, const char *key, const char *want)
{
	size_t kl = strlen(key), wl = strlen(want);
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));

	if (!nl || (size_t)(nl - *p) != kl + 1 + wl || memcmp(*p, key, kl) != 0 ||
	    (*p)[kl] != ' ' || memcmp(*p + kl + 1, want, wl) != 0)
		return false;
	*p = nl + 1;
	return true;
}

static bool cache_long(const char **p, const char *end, long min, long max, char sep, long *ret)
{
	bool neg = false;
	long v = 0;
	const char *q = *p;

	if (q < end && *q == '-') {
		neg = true;
		q++;
	}
	if (q >= end || !isdigit((unsigned char)*q))
		return false;
	for (; q < end && isdigit((unsigned char)*q); q++) {
		if (v > (max + 1) / 10)
			return false;
		v = v * 10 + (*q - '0');
	}
	if (neg)
		v = -v;
	if (v < min || v > max || q >= end || *q != sep)
		return false;
	*p = q + 1;
	*ret = v;
	return true;
}

int cputopo_parse_cache(const char *text, size_t len, const char *boot, const char *online,
			struct cputopo *ret)
{
	_cleanup_free_ struct core_key *keys = NULL;
	const char *p = text, *end = text + len;
	size_t n = 0, cap = 0;
	const size_t ml = strlen(TOPO_CACHE_MAGIC);

	if (len < ml + 1 || memcmp(p, TOPO_CACHE_MAGIC "\n", ml + 1) != 0)
		return -EINVAL;
	p += ml + 1;
	if (!cache_line_is(&p, end, "boot", boot) || !cache_line_is(&p, end, "online", online))
		return -EINVAL;
	while (p < end) {
		struct core_key k;
		long cpu;

		/* sysfs says -1 for an id the firmware does not give. */
		if (!cache_long(&p, end, 0, JOBCG_CPU_MAX - 1, ' ', &cpu) ||
		    !cache_long(&p, end, -1, INT32_MAX, ' ', &k.pkg) ||
		    !cache_long(&p, end, -1, INT32_MAX, ' ', &k.die) ||
		    !cache_long(&p, end, -1, INT32_MAX, '\n', &k.core))
			return -EINVAL;
		k.cpu = (unsigned)cpu;
		if (keys_push(&keys, &n, &cap, &k) < 0)
			return -ENOMEM;
	}
	if (n == 0)
		return -EINVAL;
	return topology_from_keys(keys, n, ret);
}

/* The cache's text for @keys: what cputopo_parse_cache() reads back. */
static char *cache_format(const char *boot, const char *online, const struct core_key *keys,
			  size_t n)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return NULL;
	fprintf(f, "%s\nboot %s\nonline %s\n", TOPO_CACHE_MAGIC, boot, online);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%u %ld %ld %ld\n", keys[i].cpu, keys[i].pkg, keys[i].die, keys[i].core);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Replaced whole (a new file renamed over it), so that a reader never sees half of one. */
static void cache_write(const char *cache, const char *text)
{
	/* No fsync: a cache lost in a crash is read from sysfs again. */
	int r = write_file_atomic(cache, text, 0644, 0);

	if (r < 0)
		log_debug("cannot write the CPU topology cache %s: %s", cache, strerror(-r));
}

/* The cache's text, if it is a regular file of ours that nobody else can write. */
static int cache_read(const char *cache, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(cache, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022))
		return -EPERM;
	return read_full_fd(fd, 1u << 20, ret, ret_len);
}

int cputopo_load_cached(const char *cpu_dir, const char *cache, const char *boot_id_path,
			struct cputopo *ret)
{
	_cleanup_free_ char *online = NULL, *boot = NULL, *text = NULL, *p = NULL;
	_cleanup_free_ struct core_key *keys = NULL;
	size_t len = 0, n = 0;
	int r;

	p = strdup_printf("%s/online", cpu_dir);
	if (!p)
		return -ENOMEM;
	/* Without a key for it, no cache: the topology as it is now. */
	if (read_one_line_at(AT_FDCWD, p, &online) < 0 ||
	    read_one_line_at(AT_FDCWD, boot_id_path, &boot) < 0 || !*online || !*boot ||
	    strchr(online, '\n') || strchr(boot, '\n'))
		return cputopo_load(cpu_dir, ret);
	if (cache_read(cache, &text, &len) >= 0) {
		r = cputopo_parse_cache(text, len, boot, online, ret);
		if (r != -EINVAL)
			return r;
	}
	r = scan_keys(cpu_dir, &keys, &n);
	if (r < 0)
		return r;
	{
		_cleanup_free_ char *fresh = cache_format(boot, online, keys, n);

		if (fresh)
			cache_write(cache, fresh);
	}
	return topology_from_keys(keys, n, ret);
}

void cputopo_done(struct cputopo *t)
{
	free(t->cpus);
	*t = (struct cputopo){};
}

int cputopo_cores_to_cpus(const struct cputopo *t, const char *cores, char **ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	uint64_t out[JOBCG_CPU_MAX / 64];
	size_t words = 0, beyond = 0, c;
	int r = jobcg_parse_cpulist(cores, &bits, &words);

	if (r < 0) {
		jobcg_error_prefix("Slurm's core list '%s'", cores);
		return r;
	}
	cputopo_cores_to_cpu_bits(t, bits, words, out, &beyond);
	if (beyond > 0) {
		/* Name the first: one is set at or past ncores. */
		for (c = t->ncores; !(bits[c / 64] >> (c % 64) & 1); c++)
			;
		return error_set(-EINVAL,
				 "Slurm allocated core %zu, but this node has %zu cores: "
				 "slurm.conf's node description does not match the hardware",
				 c, t->ncores);
	}
	return jobcg_format_cpulist(out, ELEMENTSOF(out), ret);
}

int cputopo_load_under(const char *root, struct cputopo *ret)
{
	_cleanup_free_ char *dir = strdup_printf("%s/sys/devices/system/cpu", root ? root : "");

	if (!dir)
		return -ENOMEM;
	return cputopo_load(dir, ret);
}

int cputopo_load_node(struct cputopo *ret)
{
	return cputopo_load_under(secure_getenv("JOBCG_SYSROOT"), ret);
}

void cputopo_cores_to_cpu_bits(const struct cputopo *t, const uint64_t *cores, size_t words,
			       uint64_t *ret, size_t *ret_beyond)
{
	size_t beyond = 0;

	memset(ret, 0, JOBCG_CPU_MAX / 8);
	for (size_t c = 0; c < words * 64; c++) {
		if (!(cores[c / 64] >> (c % 64) & 1))
			continue;
		if (c >= t->ncores) {
			beyond++;
			continue;
		}
		for (size_t w = 0; w < JOBCG_CPU_MAX / 64; w++)
			ret[w] |= t->cpus[c][w];
	}
	if (ret_beyond)
		*ret_beyond = beyond;
}

void cputopo_cpu_bits_to_cores(const struct cputopo *t, const uint64_t *cpus, size_t words,
			       uint64_t *ret)
{
	size_t n = words < JOBCG_CPU_MAX / 64 ? words : JOBCG_CPU_MAX / 64;

	memset(ret, 0, JOBCG_CPU_MAX / 8);
	for (size_t c = 0; c < t->ncores && c < JOBCG_CPU_MAX; c++)
		for (size_t w = 0; w < n; w++)
			if (t->cpus[c][w] & cpus[w]) {
				ret[c / 64] |= UINT64_C(1) << (c % 64);
				break;
			}
}
