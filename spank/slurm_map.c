/* jobcg_spank.so: Slurm's step ids, abstract cores, GPU indices and plugin arguments in jobcg's
 * terms (see slurm_map.h). */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "parse.h"
#include "log.h"
#include "slurm_map.h"
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
};

static int key_cmp(const void *a, const void *b)
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

int jspank_topology_load(const char *cpu_dir, struct jspank_topology *ret)
{
	_cleanup_free_ struct core_key *keys = NULL;
	struct jspank_topology t = {};
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
		if (n == cap) {
			struct core_key *nk =
			    realloc(keys, (cap = cap ? 2 * cap : 64) * sizeof(*nk));

			if (!nk) {
				closedir(d);
				return -ENOMEM;
			}
			keys = nk;
		}
		keys[n++] = k;
	}
	closedir(d);
	if (n == 0)
		return error_set(-ENOENT, "%s: no CPU with a topology", cpu_dir);
	qsort(keys, n, sizeof(*keys), key_cmp);
	t.cpus = calloc(n, sizeof(*t.cpus));
	if (!t.cpus)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || keys[i].pkg != keys[i - 1].pkg || keys[i].die != keys[i - 1].die ||
		    keys[i].core != keys[i - 1].core)
			t.ncores++;
		t.cpus[t.ncores - 1][keys[i].cpu / 64] |= UINT64_C(1) << (keys[i].cpu % 64);
	}
	*ret = t;
	return 0;
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

/* Position of node GPU @idx among the step's GPUs (@bits, @words), or -1. */
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

static int step_pos(const uint64_t *bits, size_t words, unsigned long idx)
{
	int pos = 0;

	if (idx >= words * 64 || !(bits[idx / 64] >> (idx % 64) & 1))
		return -1;
	for (size_t i = 0; i < idx; i++)
		pos += bits[i / 64] >> (i % 64) & 1;
	return pos;
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
	if (strncasecmp(b, "single:", 7) == 0 || strncasecmp(b, "per_task:", 9) == 0)
		return (*ret = strdup(b)) ? 0 : -ENOMEM;
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
	*ret = TAKE_PTR(out);
	return 0;
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
		/* slurmstepd's PATH is not the admin's: a relative name would be a guess. */
		if (slot == &a.jobcg && *v != '/') {
			jspank_args_done(&a);
			return error_set(
			    -EINVAL, "plugstack.conf argument '%s': jobcg= needs an absolute path",
			    argv[i]);
		}
		free(*slot);
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
