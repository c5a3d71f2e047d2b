/* Unit tests for Slurm's core indices against CPU ids (lib/src/core/cputopo.c) and their use
 * in device selection: gres.conf's Cores= are core indices, the CPUs a job runs on CPU ids. A
 * fake SMT node under JOBCG_SYSROOT: 2 sockets x 2 cores x 2 threads, numbered as Linux does
 * (siblings N and N+4), so core 0 = CPUs 0,4, core 1 = 1,5, core 2 = 2,6, core 3 = 3,7. */
#include <fcntl.h>
#include <sys/stat.h>

#include "cputopo.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "tap.h"
#include "util.h"

static char tmp[] = "/tmp/jobcg-cputopo-XXXXXX";

static void put(const char *rel, const char *text)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	for (char *p = path + strlen(tmp) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		(void)mkdir(path, 0755);
		*p = '/';
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		tap_diag("cannot write %s", path);
	if (fd >= 0)
		close(fd);
}

static void topo_cpu(unsigned cpu, unsigned pkg, unsigned core)
{
	char rel[128], v[16];

	snprintf(v, sizeof(v), "%u\n", pkg);
	snprintf(rel, sizeof(rel), "smt/sys/devices/system/cpu/cpu%u/topology/physical_package_id",
		 cpu);
	put(rel, v);
	snprintf(rel, sizeof(rel), "smt/sys/devices/system/cpu/cpu%u/topology/die_id", cpu);
	put(rel, "0\n");
	snprintf(v, sizeof(v), "%u\n", core);
	snprintf(rel, sizeof(rel), "smt/sys/devices/system/cpu/cpu%u/topology/core_id", cpu);
	put(rel, v);
}

static void smt_node(void)
{
	for (unsigned cpu = 0; cpu < 8; cpu++)
		topo_cpu(cpu, (cpu % 4) / 2, cpu % 2);
}

static char *cpulist(const uint64_t *bits)
{
	static char buf[128];
	char *s = NULL;

	if (jobcg_format_cpulist(bits, JOBCG_CPU_MAX / 64, &s) < 0)
		return (char *)"(error)";
	snprintf(buf, sizeof(buf), "%s", s);
	free(s);
	return buf;
}

static void test_bits(void)
{
	char root[512];
	struct cputopo t = {};
	uint64_t in[2] = {}, out[JOBCG_CPU_MAX / 64];
	size_t beyond = 99;

	snprintf(root, sizeof(root), "%s/smt", tmp);
	if (!ok(cputopo_load_under(root, &t) == 0 && t.ncores == 4,
		"the fake SMT node has 4 cores"))
		return;
	in[0] = 0x3; /* cores 0-1 */
	cputopo_cores_to_cpu_bits(&t, in, 1, out, &beyond);
	is_str(cpulist(out), "0-1,4-5", "cores 0-1 are CPUs 0-1,4-5");
	ok(beyond == 0, "no core beyond the node's");
	in[0] = 0x33; /* cores 0-1,4-5: what CPU ids read as cores give */
	cputopo_cores_to_cpu_bits(&t, in, 1, out, &beyond);
	is_str(cpulist(out), "0-1,4-5", "cores 4-5 are left out");
	ok(beyond == 2, "two cores beyond the node's (%zu)", beyond);
	in[0] = 0;
	in[1] = 1; /* core 64, in a second word */
	cputopo_cores_to_cpu_bits(&t, in, 2, out, NULL);
	is_str(cpulist(out), "", "a core far beyond: no CPU");

	in[0] = 0x33, in[1] = 0; /* CPUs 0-1,4-5 */
	cputopo_cpu_bits_to_cores(&t, in, 2, out);
	is_str(cpulist(out), "0-1", "CPUs 0-1,4-5 are cores 0-1");
	in[0] = 0x40; /* CPU 6 alone: one thread of core 2 */
	cputopo_cpu_bits_to_cores(&t, in, 1, out);
	is_str(cpulist(out), "2", "a core is in when any of its CPUs is");
	in[0] = 0;
	cputopo_cpu_bits_to_cores(&t, in, 1, out);
	is_str(cpulist(out), "", "no CPU, no core");
	cputopo_done(&t);
}

/* Two GPUs: gpu 0 on cores 0-1 (socket 0), gpu 1 on cores 2-3 (socket 1). */
static struct jobcg_gres_file files[2] = {
    {(char *)"/dev/nvidia0", 'c', 195, 0},
    {(char *)"/dev/nvidia1", 'c', 195, 1},
};
static uint64_t cores_s0 = 0x3, cores_s1 = 0xc;
static struct jobcg_gres_record recs[2];
static struct jobcg_gres_conf conf = {.records = recs, .nrecords = 2};

static struct jobcg_gres_node *two_gpus(bool with_cores)
{
	struct jobcg_gres_node *n = NULL;

	for (unsigned i = 0; i < 2; i++)
		recs[i] = (struct jobcg_gres_record){
		    .name = (char *)"gpu",
		    .files = &files[i],
		    .nfiles = 1,
		    .count = 1,
		    .cores = with_cores ? (i == 0 ? &cores_s0 : &cores_s1) : NULL,
		    .cores_words = with_cores ? 1 : 0,
		    .index = i,
		};
	if (gres_node_new(&conf, &n) < 0)
		abort();
	return n;
}

static const char *pick(const struct jobcg_gres_node *n, uint64_t cpus)
{
	static char buf[64];
	struct jobcg_gres_request *r = NULL;
	struct jobcg_gres_set all, got = {};
	char *s = NULL;

	jobcg_gres_node_all(n, NULL, &all);
	if (jobcg_gres_request_parse("gpu:1", &r) < 0 ||
	    jobcg_gres_select(n, r, &all, &cpus, 1, &got) < 0 ||
	    jobcg_gres_set_format(n, &got, &s) < 0)
		snprintf(buf, sizeof(buf), "(error)");
	else
		snprintf(buf, sizeof(buf), "%s", s);
	free(s);
	jobcg_gres_request_free(r);
	return buf;
}

static void test_select(void)
{
	char root[512];
	struct jobcg_gres_node *n;

	snprintf(root, sizeof(root), "%s/smt", tmp);
	setenv("JOBCG_SYSROOT", root, 1);
	n = two_gpus(true);
	ok(!n->cores_tried && !n->dev_cpus,
	   "building the table reads no topology (every step's start builds one)");
	/* CPU 6 is core 2's second thread: socket 1, gpu 1. As CPU ids, Cores=2-3 would not
	 * hold it, and gpu 0 (the lowest index) would win. */
	is_str(pick(n, UINT64_C(1) << 6), "gpu:1", "CPU 6 (core 2) prefers the GPU on cores 2-3");
	ok(!gres_cores_match(n, &n->dev[0], &(uint64_t){UINT64_C(1) << 6}, 1) &&
	       gres_cores_match(n, &n->dev[1], &(uint64_t){UINT64_C(1) << 6}, 1),
	   "CPU 6 meets cores 2-3, not cores 0-1");
	is_str(pick(n, UINT64_C(1) << 5), "gpu:0", "CPU 5 (core 1's second thread) prefers gpu 0");
	jobcg_gres_node_free(n);

	/* No topology to read: indices taken as CPU ids (affinity is only a preference). */
	snprintf(root, sizeof(root), "%s/none", tmp);
	setenv("JOBCG_SYSROOT", root, 1);
	n = two_gpus(true);
	ok(n->dev_cpus == NULL, "without a topology the table keeps the indices");
	is_str(pick(n, UINT64_C(1) << 6), "gpu:0", "CPU 6 meets neither: the lowest index");
	is_str(pick(n, UINT64_C(1) << 3), "gpu:1", "CPU 3 taken as core 3: gpu 1");
	jobcg_gres_node_free(n);

	/* No record with Cores=: no conversion (no sysfs read on a step's start). */
	snprintf(root, sizeof(root), "%s/smt", tmp);
	setenv("JOBCG_SYSROOT", root, 1);
	n = two_gpus(false);
	ok(n->dev_cpus == NULL, "no Cores= anywhere: no conversion");
	is_str(pick(n, UINT64_C(1) << 6), "gpu:0", "no Cores=: any GPU suits, the lowest index");
	jobcg_gres_node_free(n);
	unsetenv("JOBCG_SYSROOT");
}

int main(void)
{
	if (!mkdtemp(tmp))
		return tap_diag("mkdtemp: %s", strerror(errno)), 1;
	smt_node();
	test_bits();
	test_select();
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
		(void)!system(cmd);
	}
	return tap_done();
}
