/* jobcg_spank.so: Slurm's step ids, abstract cores, GPU indices and plugin arguments in jobcg's
 * terms (see slurm_map.h). */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "parse.h"
#include "log.h"
#include "slurm_map.h"
#include "tree.h"
#include "util.h"

int jspank_step_name(uint32_t step_id, char *ret)
{
	switch (step_id) {
	case JSPANK_BATCH_SCRIPT:
		strcpy(ret, "batch");
		return 0;
	case JSPANK_EXTERN_CONT:
		strcpy(ret, "extern");
		return 0;
	case JSPANK_INTERACTIVE_STEP:
		strcpy(ret, "interactive");
		return 0;
	}
	/* Slurm's numbered steps stop below 0xfffffff0, jobcg's at 4294967279: the same. */
	if (step_id > 4294967279u)
		return error_set(-EINVAL, "Slurm step id %u has no jobcg step", step_id);
	snprintf(ret, JOBCG_STEP_ID_MAX, "%u", step_id);
	return 0;
}

static int read_uint(int dirfd, const char *path, long *ret)
{
	char buf[32];
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t l;
	char *end;

	if (fd < 0)
		return -errno;
	l = read(fd, buf, sizeof(buf) - 1);
	if (l <= 0)
		return l < 0 ? -errno : -EINVAL;
	buf[l] = 0;
	/* Signed: sysfs says -1 for a package or die id the firmware does not give. */
	errno = 0;
	*ret = strtol(buf, &end, 10);
	if (errno || end == buf || (*end && strcmp(end, "\n") != 0))
		return -EINVAL;
	return 0;
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
static int topology_from_keys(struct core_key *keys, size_t n, struct jspank_topology *ret)
{
	struct jspank_topology t = {};

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

int jspank_topology_load(const char *cpu_dir, struct jspank_topology *ret)
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

int jspank_topology_parse_cache(const char *text, size_t len, const char *boot, const char *online,
				struct jspank_topology *ret)
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

/* The cache's text for @keys: what jspank_topology_parse_cache() reads back. */
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
	_cleanup_free_ char *tmp = strdup_printf("%s.%d.tmp", cache, (int)getpid());
	_cleanup_close_ int fd = -1;
	size_t len = strlen(text);

	if (!tmp)
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, text, len) != (ssize_t)len || rename(tmp, cache) < 0) {
		log_debug("cannot write the CPU topology cache %s: %s", cache, strerror(errno));
		(void)unlink(tmp);
	}
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

int jspank_topology_load_cached(const char *cpu_dir, const char *cache, const char *boot_id_path,
				struct jspank_topology *ret)
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
		return jspank_topology_load(cpu_dir, ret);
	if (cache_read(cache, &text, &len) >= 0) {
		r = jspank_topology_parse_cache(text, len, boot, online, ret);
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

void jspank_topology_done(struct jspank_topology *t)
{
	free(t->cpus);
	*t = (struct jspank_topology){};
}

int jspank_cores_to_cpus(const struct jspank_topology *t, const char *cores, char **ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	uint64_t out[JOBCG_CPU_MAX / 64] = {};
	size_t words = 0;
	int r = jobcg_parse_cpulist(cores, &bits, &words);

	if (r < 0) {
		jobcg_error_prefix("Slurm's core list '%s'", cores);
		return r;
	}
	for (size_t c = 0; c < words * 64; c++) {
		if (!(bits[c / 64] >> (c % 64) & 1))
			continue;
		if (c >= t->ncores)
			return error_set(
			    -EINVAL,
			    "Slurm allocated core %zu, but this node has %zu cores: "
			    "slurm.conf's node description does not match the hardware",
			    c, t->ncores);
		for (size_t w = 0; w < ELEMENTSOF(out); w++)
			out[w] |= t->cpus[c][w];
	}
	return jobcg_format_cpulist(out, ELEMENTSOF(out), ret);
}

int jspank_gpus_map(const struct jobcg_gres_node *jobcg, const char *jobcg_conf,
		    const struct jobcg_gres_node *slurm, const char *slurm_conf, const char *var,
		    const char *value, char **ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	struct jobcg_gres_set set = {};
	size_t words = 0;
	int r;

	if (!*value)
		return jobcg_gres_set_format(jobcg, &set, ret);
	r = jobcg_parse_cpulist(value, &bits, &words);
	if (r < 0)
		return error_set(-EINVAL, "%s='%s' is not a list of GPU indices", var, value);
	for (size_t i = 0; i < words * 64; i++) {
		if (!(bits[i / 64] >> (i % 64) & 1))
			continue;
		/* The same check `jobcg check --slurm-gres` makes for every index of the node. */
		r = i < JOBCG_GRES_MAX
			? jobcg_gres_slurm_gpu(jobcg, jobcg_conf, slurm, slurm_conf, (unsigned)i)
			: error_set(-EINVAL, "GPU %zu is beyond jobcg's %u devices", i,
				    JOBCG_GRES_MAX);
		if (r < 0) {
			jobcg_error_prefix("%s=%s", var, value);
			return r;
		}
		jobcg_gres_set_add(&set, (unsigned)r);
	}
	return jobcg_gres_set_format(jobcg, &set, ret);
}

/* A GPU id at the start of S: decimal digits, or 0x and hex digits; at most UINT32_MAX. */
static int parse_gpu_id(const char *s, uint64_t *ret, const char **ret_end)
{
	char *end;
	unsigned long long v;

	if ((s[0] != '0' || (s[1] != 'x' && s[1] != 'X')))
		return parse_u64_prefix(s, UINT32_MAX, ret, ret_end);
	if (!isxdigit((unsigned char)s[2]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s + 2, &end, 16);
	if (errno || v > UINT32_MAX)
		return -ERANGE;
	*ret = v;
	*ret_end = end;
	return 0;
}

/* Position of node GPU @idx among the step's GPUs (@bits, @words), or -1. */
static int step_pos(const uint64_t *bits, size_t words, unsigned long idx)
{
	int pos = 0;

	if (idx >= words * 64 || !(bits[idx / 64] >> (idx % 64) & 1))
		return -1;
	for (size_t i = 0; i < idx; i++)
		pos += bits[i / 64] >> (i % 64) & 1;
	return pos;
}

/*
 * *out, taken into *ret where the library's parser takes it too (its limits: a repeat count, a
 * map's length; its message names --gpu-bind): a binding the step cannot use is refused here,
 * before any cgroup exists.
 */
static int bind_checked(char **out, char **ret)
{
	struct jobcg_gpu_bind parsed = {};
	int r = jobcg_gpu_bind_parse(*out, &parsed);

	if (r < 0)
		return r;
	jobcg_gpu_bind_done(&parsed);
	*ret = TAKE_PTR(*out);
	return 0;
}

int jspank_gpu_bind(const char *bind, const char *step_gpus, char **ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	_cleanup_free_ char *out = NULL, *list = NULL;
	size_t words = 0, len = 0;
	const char *b = bind;
	char *tok, *save = NULL;

	*ret = NULL;
	if (!b || !*b)
		return 0;
	if (strncasecmp(b, "verbose", 7) == 0 && (b[7] == ',' || !b[7]))
		b += b[7] ? 8 : 7;
	if (!*b || strcasecmp(b, "none") == 0 || strcasecmp(b, "closest") == 0)
		return 0;
	if (strncasecmp(b, "single:", 7) == 0 || strncasecmp(b, "per_task:", 9) == 0) {
		/* Slurm takes the type in any case, the library in lower case. */
		bool single = strncasecmp(b, "single:", 7) == 0;

		out = strdup_printf("%s:%s", single ? "single" : "per_task", b + (single ? 7 : 9));
		if (!out)
			return -ENOMEM;
		return bind_checked(&out, ret);
	}
	if (strncasecmp(b, "map_gpu:", 8) != 0)
		return error_set(-EINVAL,
				 "--gpu-bind=%s: jobcg binds only single:N, per_task:N and "
				 "map_gpu:LIST (or none, closest)",
				 bind);
	if (jobcg_parse_cpulist(step_gpus ? step_gpus : "", &bits, &words) < 0)
		return error_set(-EINVAL, "SLURM_STEP_GPUS='%s' is not a list of GPU indices",
				 step_gpus);
	list = strdup(b + 8);
	out = malloc(strlen(b) * 4 + 16);
	if (!list || !out)
		return -ENOMEM;
	len = (size_t)sprintf(out, "map_gpu:");
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const char *end = tok;
		uint64_t idx = 0, rep = 1;
		int pos;

		/* An id is decimal ("010" is GPU 10, not 8) or 0x-prefixed hex, as Slurm's map
		 * lists take them; "ID*N" repeats it N times. */
		bool bad = parse_gpu_id(tok, &idx, &end) < 0;
		if (!bad && *end == '*')
			bad = parse_u64(end + 1, UINT32_MAX, &rep) < 0 || rep == 0;
		else if (!bad && *end)
			bad = true;
		if (bad)
			return error_set(-EINVAL, "--gpu-bind=%s: '%s' is not a GPU index", bind,
					 tok);
		pos = step_pos(bits, words, idx);
		if (pos < 0)
			return error_set(-EINVAL,
					 "--gpu-bind=%s names GPU %llu, which this step does not "
					 "hold here (SLURM_STEP_GPUS=%s)",
					 bind, (unsigned long long)idx, step_gpus ? step_gpus : "");
		len += (size_t)sprintf(out + len, "%s%d", len > 8 ? "," : "", pos);
		if (rep > 1)
			len += (size_t)sprintf(out + len, "*%llu", (unsigned long long)rep);
	}
	if (len == 8)
		return error_set(-EINVAL, "--gpu-bind=%s: an empty map", bind);
	return bind_checked(&out, ret);
}

int jspank_args_parse(int argc, char *const argv[], struct jspank_args *ret)
{
	struct jspank_args a = {};

	for (int i = 0; i < argc; i++) {
		char **slot = NULL;
		const char *v = NULL;

		if (startswith(argv[i], "conf="))
			slot = &a.conf, v = argv[i] + 5;
		else if (startswith(argv[i], "slurm_gres="))
			slot = &a.slurm_gres, v = argv[i] + 11;
		else if (startswith(argv[i], "jobcg="))
			slot = &a.jobcg, v = argv[i] + 6;
		if (!slot || !*v) {
			jspank_args_done(&a);
			return error_set(-EINVAL,
					 "plugstack.conf argument '%s': expected conf=DIR, "
					 "slurm_gres=PATH|none or jobcg=PATH",
					 argv[i]);
		}
		/* slurmstepd's PATH and working directory are not the admin's: a relative name
		 * would be a guess. */
		if (*v != '/' && !(slot == &a.slurm_gres && streq(v, "none"))) {
			const char *key = slot == &a.conf	  ? "conf="
					  : slot == &a.slurm_gres ? "slurm_gres="
								  : "jobcg=";

			jspank_args_done(&a);
			return error_set(-EINVAL,
					 "plugstack.conf argument '%s': %s needs an absolute path",
					 argv[i], key);
		}
		/* Which one the admin meant is not known: the second could be a stale line's. */
		if (*slot) {
			jspank_args_done(&a);
			return error_set(-EINVAL, "plugstack.conf argument '%s': %.*s given twice",
					 argv[i], (int)(v - argv[i]), argv[i]);
		}
		if (!(*slot = strdup(v))) {
			jspank_args_done(&a);
			return -ENOMEM;
		}
	}
	*ret = a;
	return 0;
}

void jspank_args_done(struct jspank_args *a)
{
	free(a->conf);
	free(a->slurm_gres);
	free(a->jobcg);
	*a = (struct jspank_args){};
}

char *jspank_expand(const char *tmpl, const char *node)
{
	size_t len = strlen(tmpl) + 1, nl = strlen(node);
	char *out, *o;

	for (const char *p = tmpl; *p; p++)
		if (p[0] == '%' && p[1] == 'n')
			len += nl;
	o = out = malloc(len);
	if (!out)
		return NULL;
	for (const char *p = tmpl; *p; p++) {
		if (*p != '%') {
			*o++ = *p;
			continue;
		}
		if (p[1] == 'n') {
			memcpy(o, node, nl);
			o += nl;
		} else if (p[1] == '%') {
			*o++ = '%';
		} else {
			free(out);
			return NULL;
		}
		p++;
	}
	*o = 0;
	return out;
}

int jspank_exit_code(const int *status, unsigned n)
{
	int code = 0;

	for (unsigned i = 0; i < n; i++) {
		if (WIFSIGNALED(status[i]))
			return 128 + WTERMSIG(status[i]);
		if (WIFEXITED(status[i]) && WEXITSTATUS(status[i]) > code)
			code = WEXITSTATUS(status[i]);
	}
	return code;
}

int jspank_children_parse(const char *text, pid_t *pids, size_t max, size_t *ret_n)
{
	size_t n = 0;

	for (const char *p = text;;) {
		uint64_t v;
		const char *end;

		p += strspn(p, " \n");
		if (!*p)
			break;
		if (parse_u64_prefix(p, INT32_MAX, &v, &end) < 0 || v == 0 ||
		    (*end && *end != ' ' && *end != '\n'))
			return error_set(-EINVAL, "not a list of pids: '%.64s'", text);
		if (n == max)
			return error_set(-E2BIG, "more than %zu children", max);
		pids[n++] = (pid_t)v;
		p = end;
	}
	*ret_n = n;
	return 0;
}

int jspank_stat_parse(const char *stat, pid_t *ret_ppid, unsigned long long *ret_start)
{
	/* "PID (COMM) STATE PPID ...": COMM may hold blanks and parentheses, the last ')' ends
	 * it. */
	const char *p = strrchr(stat, ')');
	unsigned long long start;
	const char *end;
	uint64_t ppid;

	if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
		return -EINVAL;
	p += 4;
	if (parse_u64_prefix(p, INT32_MAX, &ppid, &end) < 0 || *end != ' ')
		return -EINVAL;
	if (tree_parse_starttime(stat, &start) < 0)
		return -EINVAL;
	*ret_ppid = (pid_t)ppid;
	*ret_start = start;
	return 0;
}

bool jspank_is_extern_sleep(const char *cmdline, size_t len)
{
	static const char want[] = "sleep\0"
				   "100000000";

	return len == sizeof(want) && memcmp(cmdline, want, sizeof(want)) == 0;
}
