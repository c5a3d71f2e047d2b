/*
 * Unit tests for resource specialisation: SpecCPUs/CoreSpecCount/MemSpecLimit in cgroup.conf
 * (parsing, errors naming the line), the reserved and default job CPU sets, the refusal of a
 * --cpus naming a reserved CPU, and the memory cap (node RAM minus MemSpecLimit).
 */
#include <limits.h>

#include "config_internal.h"
#include "memlimit.h"
#include "spec.h"
#include "log.h"
#include "tap.h"
#include "util.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static char tmp[] = "/tmp/jobcg-test-spec-XXXXXX";

static int load(const char *text, struct jobcg_config **ret)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.conf", tmp);
	f = fopen(path, "we");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
	jobcg_error_clear();
	return jobcg_config_load(tmp, NULL, JOBCG_CONFIG_NO_ENV, ret);
}

static const char *entry(const struct jobcg_config *c, const char *key)
{
	const struct jobcg_config_entry *e = jobcg_config_entry(c, key);

	return e && e->value ? e->value : "(null)";
}

static void test_config(void)
{
	struct jobcg_config *c = NULL;

	is_int(load("", &c), 0, "no keys: loads");
	ok(c && !c->cgroup.spec_cpus && !c->cgroup.core_spec_count && !c->cgroup.mem_spec_limit,
	   "no keys: nothing reserved");
	jobcg_config_free(c);

	is_int(load("SpecCPUs=7,3,4-5\nMemSpecLimit=512\n", &c), 0, "SpecCPUs and MemSpecLimit");
	is_str(c->cgroup.spec_cpus, "3-5,7", "SpecCPUs is stored normalised");
	is_int(c->cgroup.mem_spec_limit, 512 * MiB, "MemSpecLimit bare number is MiB");
	is_str(entry(c, "SpecCPUs"), "3-5,7", "jobcg config shows SpecCPUs");
	is_str(entry(c, "MemSpecLimit"), "512M", "jobcg config shows MemSpecLimit in MiB");
	jobcg_config_free(c);

	c = NULL;
	is_int(load("CoreSpecCount=2\nMemSpecLimit=2G\n", &c), 0, "CoreSpecCount, MemSpecLimit=2G");
	is_int(c->cgroup.core_spec_count, 2, "CoreSpecCount=2");
	is_int(c->cgroup.mem_spec_limit, 2 * GiB, "MemSpecLimit=2G is 2 GiB");
	is_str(entry(c, "CoreSpecCount"), "2", "jobcg config shows CoreSpecCount");
	jobcg_config_free(c);

	c = NULL;
	is_int(load("SpecCPUs=1\nCoreSpecCount=1\n", &c), -EINVAL, "SpecCPUs with CoreSpecCount");
	ok(!c, "...returns no configuration");
	ok(strstr(jobcg_last_error()->message, "set only one"), "...and says set only one: %s",
	   jobcg_last_error()->message);
	is_int(jobcg_last_error()->line, 2, "...at CoreSpecCount's line");

	is_int(load("\nSpecCPUs=3-1\n", &c), -EINVAL, "reversed SpecCPUs range refused");
	is_int(jobcg_last_error()->line, 2, "...naming line 2");
	ok(strstr(jobcg_last_error()->message, "SpecCPUs"), "...and the key: %s",
	   jobcg_last_error()->message);
	is_int(load("MemSpecLimit=12X\n", &c), -EINVAL, "MemSpecLimit with a bad suffix refused");
	is_int(load("MemSpecLimit=-1\n", &c), -EINVAL, "negative MemSpecLimit refused");
	is_int(load("CoreSpecCount=two\n", &c), -EINVAL, "CoreSpecCount not a number refused");
	is_int(load("SpecCPUs=\n", &c), -EINVAL, "empty SpecCPUs refused");
}

static void test_cpus(void)
{
	struct jobcg_cgroup_conf c = {};
	char *s = NULL;

	is_int(jobcg_spec_cpus(&c, "0-7", &s), 0, "no reservation");
	is_str(s, "", "...reserves nothing");
	free(s);
	is_int(jobcg_spec_job_cpus(&c, "0-7", &s), 0, "no reservation: job CPUs");
	is_str(s, "0-7", "...are all online CPUs");
	free(s);
	is_int(jobcg_spec_check_cpus(&c, "0-7", "0-7"), 0, "no reservation: any --cpus is fine");
	/* A CPU the node does not have online is no job's, reserved CPUs or not. */
	is_int(jobcg_check_cpus_online("0-7", "0-7"), 0, "--cpus 0-7 on 0-7 online");
	is_int(jobcg_check_cpus_online("0-1,64", "1,64"), 0, "--cpus 1,64 on 0-1,64");
	is_int(jobcg_check_cpus_online("0-1", "0-999"), -EINVAL, "--cpus 0-999 on 0-1: refused");
	ok(strstr(jobcg_last_error()->message, "--cpus 0-999: CPUs 2-999 are not online") &&
	       strstr(jobcg_last_error()->message, "(online: 0-1)"),
	   "...naming the option, the CPUs and what is online: %s", jobcg_last_error()->message);
	is_int(jobcg_check_cpus_online("0-3", "2,5"), -EINVAL, "--cpus 2,5 on 0-3: refused");
	ok(strstr(jobcg_last_error()->message, "CPU 5 is not online"), "...naming CPU 5: %s",
	   jobcg_last_error()->message);
	is_int(jobcg_check_cpus_online("0-3", "3-1"), -EINVAL, "a malformed --cpus is an error");

	c.spec_cpus = (char *)"1";
	is_int(jobcg_spec_cpus(&c, "0-1", &s), 0, "SpecCPUs=1 on 0-1");
	is_str(s, "1", "...reserves CPU 1");
	free(s);
	is_int(jobcg_spec_job_cpus(&c, "0-1", &s), 0, "SpecCPUs=1 on 0-1: job CPUs");
	is_str(s, "0", "...are CPU 0 only");
	free(s);
	is_int(jobcg_spec_check_cpus(&c, "0-1", "0"), 0, "--cpus 0 is allowed");
	is_int(jobcg_spec_check_cpus(&c, "0-1", "0-1"), -EPERM, "--cpus 0-1 is refused");
	ok(strstr(jobcg_last_error()->message, "--cpus 0-1") &&
	       strstr(jobcg_last_error()->message, "CPU 1 is reserved") &&
	       strstr(jobcg_last_error()->message, "SpecCPUs"),
	   "...naming the option, the CPU and the key: %s", jobcg_last_error()->message);
	is_int(jobcg_spec_check_cpus(&c, "0-1", "1-"), -EINVAL, "a malformed --cpus is an error");

	c.spec_cpus = (char *)"0,2";
	is_int(jobcg_spec_job_cpus(&c, "0-3,64-65", &s), 0, "SpecCPUs=0,2 beyond one word");
	is_str(s, "1,3,64-65", "...job CPUs are the others");
	free(s);
	is_int(jobcg_spec_check_cpus(&c, "0-3", "1-2"), -EPERM, "--cpus 1-2 touches CPU 2");
	ok(strstr(jobcg_last_error()->message, "CPU 2 is"), "...names only CPU 2: %s",
	   jobcg_last_error()->message);
	is_int(jobcg_spec_check_cpus(&c, "0-3", "0-3"), -EPERM, "--cpus 0-3");
	ok(strstr(jobcg_last_error()->message, "CPU 0,2 are"), "...names CPUs 0,2: %s",
	   jobcg_last_error()->message);

	c.spec_cpus = (char *)"9";
	is_int(jobcg_spec_cpus(&c, "0-7", &s), -EINVAL, "SpecCPUs naming an offline CPU");
	ok(strstr(jobcg_last_error()->message, "not online"), "...says so: %s",
	   jobcg_last_error()->message);
	c.spec_cpus = (char *)"0-1";
	is_int(jobcg_spec_job_cpus(&c, "0-1", &s), -EINVAL, "SpecCPUs taking every CPU");
	ok(strstr(jobcg_last_error()->message, "no CPU is left"), "...says so: %s",
	   jobcg_last_error()->message);

	c.spec_cpus = NULL;
	c.core_spec_count = 2;
	is_int(jobcg_spec_cpus(&c, "0-7", &s), 0, "CoreSpecCount=2 on 0-7");
	is_str(s, "6-7", "...reserves the two highest-numbered CPUs");
	free(s);
	is_int(jobcg_spec_cpus(&c, "0-3,8,10", &s), 0, "CoreSpecCount=2 on 0-3,8,10");
	is_str(s, "8,10", "...highest online, skipping offline ones");
	free(s);
	is_int(jobcg_spec_job_cpus(&c, "0-3,8,10", &s), 0, "...job CPUs");
	is_str(s, "0-3", "...are the rest");
	free(s);
	is_int(jobcg_spec_check_cpus(&c, "0-7", "5-6"), -EPERM, "--cpus 5-6 with CoreSpecCount=2");
	ok(strstr(jobcg_last_error()->message, "CoreSpecCount"), "...names CoreSpecCount: %s",
	   jobcg_last_error()->message);
	c.core_spec_count = 2;
	is_int(jobcg_spec_cpus(&c, "0-1", &s), -EINVAL, "CoreSpecCount=2 on a 2-CPU node");
}

static void test_mem(void)
{
	struct jobcg_cgroup_conf c = {
	    .allowed_ram_space = 100,
	    .max_ram_percent = 100,
	    .max_swap_percent = 100,
	    .min_ram_space_mb = 30,
	    .constrain_ram_space = true,
	};
	struct jobcg_mem_limits m = {};
	uint64_t left = 0;

	is_int(jobcg_spec_job_ram(&c, 16 * GiB, &left), 0, "no MemSpecLimit");
	is_int(left, 16 * GiB, "...jobs may have all RAM");
	c.mem_spec_limit = 2 * GiB;
	is_int(jobcg_spec_job_ram(&c, 16 * GiB, &left), 0, "MemSpecLimit=2G of 16G");
	is_int(left, 14 * GiB, "...jobs may have 14G");
	is_int(jobcg_mem_limits_compute(&c, 0, 16 * GiB, &m), 0, "no --mem with MemSpecLimit=2G");
	is_int(m.max, 14 * GiB, "...memory.max is node RAM minus MemSpecLimit");
	is_int(jobcg_mem_limits_compute(&c, 20 * GiB, 16 * GiB, &m), 0, "--mem 20G");
	is_int(m.max, 14 * GiB, "...is capped at 14G");
	is_int(jobcg_mem_limits_compute(&c, 4 * GiB, 16 * GiB, &m), 0, "--mem 4G");
	is_int(m.max, 4 * GiB, "...below the cap is untouched");
	c.max_ram_percent = 50;
	is_int(jobcg_mem_limits_compute(&c, 0, 16 * GiB, &m), 0, "MaxRAMPercent=50");
	is_int(m.max, 7 * GiB, "...applies to RAM minus MemSpecLimit (as Slurm's RealMemory)");
	c.mem_spec_limit = 16 * GiB;
	is_int(jobcg_spec_job_ram(&c, 16 * GiB, &left), -EINVAL, "MemSpecLimit = all RAM refused");
	is_int(jobcg_mem_limits_compute(&c, 0, 16 * GiB, &m), -EINVAL, "...also by the formulas");
}

/* What this node cannot honour (offline CPUs, no CPU or memory left for jobs) is found by
 * jobcg_spec_check(), naming the key and its file:line, for `jobcg check` and `jobcg config`. */
static void test_check(void)
{
	static const struct {
		const char *text, *needle;
	} bad[] = {
	    {"ConstrainCores=yes\nSpecCPUs=99\n", "SpecCPUs=99 names CPU 99, which is not online"},
	    {"ConstrainCores=yes\nSpecCPUs=0-1\n",
	     "SpecCPUs=0-1 reserves every online CPU (0-1): no CPU is left for jobs"},
	    {"ConstrainCores=yes\nCoreSpecCount=2\n",
	     "CoreSpecCount=2 reserves every online CPU (0-1): no CPU is left for jobs"},
	    {"ConstrainCores=yes\nCoreSpecCount=99\n",
	     "CoreSpecCount=99 reserves every online CPU (0-1)"},
	    {"ConstrainCores=yes\nMemSpecLimit=999999G\n",
	     "MemSpecLimit=1023998976M is not below the node's RAM (16384 MiB)"},
	    {"ConstrainCores=yes\nMemSpecLimit=16G\n", "is not below the node's RAM"},
	};
	static const char *const good[] = {
	    "SpecCPUs=1\n",
	    "CoreSpecCount=1\nMemSpecLimit=2G\n",
	    "ConstrainCores=yes\n",
	};
	const struct jobcg_error *e = jobcg_last_error();
	struct jobcg_config *c = NULL;
	char buf[4096];

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		const char *key = strchr(bad[i].text, '\n') + 1;
		int r;

		if (load(bad[i].text, &c) < 0)
			abort();
		jobcg_error_clear();
		r = jobcg_spec_check(&c->cgroup, "0-1", 16 * GiB);
		jobcg_error_format(r, buf, sizeof(buf));
		ok(r == -EINVAL && strstr(e->file, "cgroup.conf") && e->line == 2 &&
		       strstr(e->message, bad[i].needle),
		   "'%.*s' cannot be honoured on CPUs 0-1, 16 GiB: %s", (int)strcspn(key, "\n"),
		   key, buf);
		/* The half not asked about is not looked at. */
		is_int(jobcg_spec_check(&c->cgroup, strstr(bad[i].text, "Mem") ? "0-1" : NULL,
					strstr(bad[i].text, "Mem") ? 0 : 16 * GiB),
		       0, "...and nothing is checked without the CPUs or RAM it needs");
		jobcg_config_free(c);
		c = NULL;
	}
	for (size_t i = 0; i < ELEMENTSOF(good); i++) {
		if (load(good[i], &c) < 0)
			abort();
		ok(jobcg_spec_check(&c->cgroup, "0-1", 16 * GiB) == 0, "'%.*s' can be honoured",
		   (int)strcspn(good[i], "\n"), good[i]);
		jobcg_config_free(c);
		c = NULL;
	}
}

int main(void)
{
	if (!mkdtemp(tmp))
		abort();
	test_config();
	test_cpus();
	test_mem();
	test_check();
	{
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/cgroup.conf", tmp);
		unlink(path);
		rmdir(tmp);
	}
	return tap_done();
}
