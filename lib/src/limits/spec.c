/* jobcg: resource specialisation (Slurm's CpuSpecList/CoreSpecCount/MemSpecLimit) as pure
 * functions. */
#include <fcntl.h>

#include "memlimit.h"
#include "parse.h"
#include "spec.h"
#include "log.h"
#include "util.h"

#define WORDS (JOBCG_CPU_MAX / 64)

static bool bit(const uint64_t *b, unsigned i)
{
	return (b[i / 64] >> (i % 64)) & 1;
}

/* A list into a full-size bitmap, so sets of different widths combine word by word. */
static int load(const char *list, const char *what, uint64_t *ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	size_t words;
	int r = jobcg_parse_cpulist(list, &bits, &words);

	if (r < 0) {
		jobcg_error_prefix("%s", what);
		return r;
	}
	memset(ret, 0, WORDS * sizeof(uint64_t));
	memcpy(ret, bits, words * sizeof(uint64_t));
	return 0;
}

static unsigned count(const uint64_t *b)
{
	unsigned n = 0;

	for (size_t i = 0; i < WORDS; i++)
		n += (unsigned)__builtin_popcountll(b[i]);
	return n;
}

static int format(const uint64_t *b, char **ret)
{
	return jobcg_format_cpulist(b, WORDS, ret);
}

/* The reserved set into @res (all zero when none), checked against @on. Errors name the key
 * and where it was set: every command that finds the reservation impossible says the same. */
static int reserved(const struct jobcg_cgroup_conf *c, const uint64_t *on, uint64_t *res)
{
	const struct jobcg_origin *o = &c->spec_cpus_origin;
	_cleanup_free_ char *online = NULL;
	char key[32] = "";

	memset(res, 0, WORDS * sizeof(uint64_t));
	if (c->spec_cpus && *c->spec_cpus) {
		int r = load(c->spec_cpus, "SpecCPUs", res);

		if (r < 0)
			return r;
		for (unsigned i = 0; i < JOBCG_CPU_MAX; i++)
			if (bit(res, i) && !bit(on, i))
				return error_set_at(-EINVAL, o->file, o->line, 0,
						    "SpecCPUs=%s names CPU %u, which is not online",
						    c->spec_cpus, i);
		snprintf(key, sizeof(key), "SpecCPUs");
	} else if (c->core_spec_count) {
		unsigned left = c->core_spec_count;

		for (unsigned i = JOBCG_CPU_MAX; i-- > 0 && left;)
			if (bit(on, i)) {
				res[i / 64] |= UINT64_C(1) << (i % 64);
				left--;
			}
		snprintf(key, sizeof(key), "CoreSpecCount=%u", c->core_spec_count);
	}
	if (count(res) && count(res) >= count(on)) {
		int r = format(on, &online);

		if (r < 0)
			return r;
		return error_set_at(
		    -EINVAL, o->file, o->line, 0,
		    "%s%s%s reserves every online CPU (%s): no CPU is left for jobs", key,
		    c->spec_cpus ? "=" : "", c->spec_cpus ? c->spec_cpus : "", online);
	}
	return 0;
}

int jobcg_spec_cpus(const struct jobcg_cgroup_conf *conf, const char *online, char **ret)
{
	uint64_t on[WORDS], res[WORDS];
	int r;

	if ((r = load(online, "online CPUs", on)) < 0 || (r = reserved(conf, on, res)) < 0)
		return r;
	return format(res, ret);
}

bool jobcg_spec_cpus_configured(const struct jobcg_cgroup_conf *conf)
{
	return conf && ((conf->spec_cpus && *conf->spec_cpus) || conf->core_spec_count);
}

int jobcg_spec_job_cpus(const struct jobcg_cgroup_conf *conf, const char *online, char **ret)
{
	uint64_t on[WORDS], res[WORDS];
	int r;

	if ((r = load(online, "online CPUs", on)) < 0 || (r = reserved(conf, on, res)) < 0)
		return r;
	for (size_t i = 0; i < WORDS; i++)
		on[i] &= ~res[i];
	return format(on, ret);
}

int jobcg_spec_check_cpus(const struct jobcg_cgroup_conf *conf, const char *online,
			  const char *cpus)
{
	uint64_t on[WORDS], res[WORDS], want[WORDS];
	_cleanup_free_ char *bad = NULL;
	int r;

	if ((r = load(online, "online CPUs", on)) < 0 || (r = reserved(conf, on, res)) < 0)
		return r;
	if ((r = load(cpus, "--cpus", want)) < 0)
		return r;
	for (size_t i = 0; i < WORDS; i++)
		want[i] &= res[i];
	if (!count(want))
		return 0;
	if ((r = format(want, &bad)) < 0)
		return r;
	return error_set(-EPERM,
			 "--cpus %s: CPU %s %s reserved for the system by %s in cgroup.conf "
			 "(jobs may use the other CPUs)",
			 cpus, bad, count(want) > 1 ? "are" : "is",
			 conf->spec_cpus ? "SpecCPUs" : "CoreSpecCount");
}

int jobcg_spec_job_ram(const struct jobcg_cgroup_conf *conf, uint64_t node_ram, uint64_t *ret)
{
	const struct jobcg_origin *o = &conf->mem_spec_origin;

	if (conf->mem_spec_limit >= node_ram)
		return error_set_at(-EINVAL, o->file, o->line, 0,
				    "MemSpecLimit=%lluM is not below the node's RAM (%llu MiB): no "
				    "memory is left for jobs",
				    (unsigned long long)(conf->mem_spec_limit >> 20),
				    (unsigned long long)(node_ram >> 20));
	*ret = node_ram - conf->mem_spec_limit;
	return 0;
}

int jobcg_spec_check(const struct jobcg_cgroup_conf *conf, const char *online, uint64_t node_ram)
{
	uint64_t on[WORDS], res[WORDS], left;
	int r;

	if (online && jobcg_spec_cpus_configured(conf) &&
	    ((r = load(online, "online CPUs", on)) < 0 || (r = reserved(conf, on, res)) < 0))
		return r;
	if (node_ram && conf->mem_spec_limit && (r = jobcg_spec_job_ram(conf, node_ram, &left)) < 0)
		return r;
	return 0;
}

int jobcg_spec_check_node(const struct jobcg_cgroup_conf *conf)
{
	_cleanup_free_ char *online = NULL;
	bool cpus = jobcg_spec_cpus_configured(conf);
	uint64_t ram = 0;
	int r;

	if ((cpus && (r = jobcg_online_cpus(&online)) < 0) ||
	    (conf->mem_spec_limit && (r = jobcg_node_ram(&ram)) < 0))
		return r;
	return jobcg_spec_check(conf, online, ram);
}

int jobcg_check_cpus_online(const char *online, const char *cpus)
{
	uint64_t on[WORDS], want[WORDS];
	_cleanup_free_ char *bad = NULL;
	int r;

	if ((r = load(online, "online CPUs", on)) < 0 || (r = load(cpus, "--cpus", want)) < 0)
		return r;
	for (size_t i = 0; i < WORDS; i++)
		want[i] &= ~on[i];
	if (!count(want))
		return 0;
	if ((r = format(want, &bad)) < 0)
		return r;
	return error_set(-EINVAL, "--cpus %s: %s %s %s not online on this node (online: %s)", cpus,
			 count(want) > 1 ? "CPUs" : "CPU", bad, count(want) > 1 ? "are" : "is",
			 online);
}

int jobcg_online_cpus(char **ret)
{
	char *s = NULL;
	int r = read_one_line_at(AT_FDCWD, "/sys/devices/system/cpu/online", &s);

	if (r < 0)
		return error_set(r, "cannot read /sys/devices/system/cpu/online: %s", strerror(-r));
	*ret = s;
	return 0;
}
