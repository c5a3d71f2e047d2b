/* Unit tests for jobcg_spank.so's translations (spank/slurm_map.c): Slurm step ids, abstract core
 * ids through a fake sysfs topology (lib/src/core/cputopo.c, its cache included), SLURM_STEP_GPUS
 * onto gres.conf devices and the errors when Slurm's and jobcg's gres.conf disagree, plugin
 * arguments, exit codes. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "jobcg/config.h"
#include "slurm_map.h"
#include "tap.h"
#include "util.h"

static char tmp[] = "/tmp/jobcg-spank-map-XXXXXX";

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

static void topo_cpu_in(const char *top, unsigned cpu, unsigned pkg, unsigned core)
{
	char rel[128], v[16];

	snprintf(v, sizeof(v), "%u\n", pkg);
	snprintf(rel, sizeof(rel), "%s/cpu%u/topology/physical_package_id", top, cpu);
	put(rel, v);
	snprintf(v, sizeof(v), "%u\n", core);
	snprintf(rel, sizeof(rel), "%s/cpu%u/topology/core_id", top, cpu);
	put(rel, v);
}

static void topo_cpu(unsigned cpu, unsigned pkg, unsigned core)
{
	topo_cpu_in("cpu", cpu, pkg, core);
}

static void test_step_names(void)
{
	char s[JOBCG_STEP_ID_MAX];

	ok(jspank_step_name(0, s) == 0 && streq(s, "0"), "step 0 is jobcg's step 0");
	ok(jspank_step_name(17, s) == 0 && streq(s, "17"), "step 17 is jobcg's step 17");
	ok(jspank_step_name(0xfffffffb, s) == 0 && streq(s, "batch"), "SLURM_BATCH_SCRIPT: batch");
	ok(jspank_step_name(0xfffffffc, s) == 0 && streq(s, "extern"), "SLURM_EXTERN_CONT: extern");
	ok(jspank_step_name(0xfffffffa, s) == 0 && streq(s, "interactive"),
	   "SLURM_INTERACTIVE_STEP: interactive");
	ok(jspank_step_name(4294967279u, s) == 0 && jobcg_step_id_valid(s),
	   "the highest numbered step is a valid jobcg step id");
	ok(jspank_step_name(0xfffffffd, s) == -EINVAL, "SLURM_PENDING_STEP has no jobcg step");
}

static void test_cores(void)
{
	char dir[512];
	struct cputopo t = {};
	char *cpus = NULL;
	int r;

	/* Two sockets of two cores with two threads each, Linux numbering (siblings +4), core_id
	 * not contiguous on socket 1, and cpu8 offline (no topology directory). */
	topo_cpu(0, 0, 0), topo_cpu(4, 0, 0);
	topo_cpu(1, 0, 1), topo_cpu(5, 0, 1);
	topo_cpu(2, 1, 8), topo_cpu(6, 1, 8);
	topo_cpu(3, 1, 9), topo_cpu(7, 1, 9);
	put("cpu/cpu8/online", "0\n");
	put("cpu/online", "0-7\n");
	snprintf(dir, sizeof(dir), "%s/cpu", tmp);
	is_int(cputopo_load(dir, &t), 0, "the fake topology loads");
	is_int((int)t.ncores, 4, "4 cores: offline cpu8 left out, threads grouped by core");

	r = cputopo_cores_to_cpus(&t, "0", &cpus);
	ok(r == 0 && streq(cpus, "0,4"), "abstract core 0 is CPUs 0,4 (got %s)", cpus ? cpus : "-");
	free(cpus), cpus = NULL;
	r = cputopo_cores_to_cpus(&t, "2", &cpus);
	ok(r == 0 && streq(cpus, "2,6"),
	   "abstract core 2 is socket 1's first core, CPUs 2,6 (got %s)", cpus ? cpus : "-");
	free(cpus), cpus = NULL;
	r = cputopo_cores_to_cpus(&t, "1-3", &cpus);
	ok(r == 0 && streq(cpus, "1-3,5-7"), "abstract cores 1-3 are CPUs 1-3,5-7 (got %s)",
	   cpus ? cpus : "-");
	free(cpus), cpus = NULL;
	ok(cputopo_cores_to_cpus(&t, "4", &cpus) == -EINVAL && !cpus &&
	       strstr(jobcg_last_error()->message, "core 4") &&
	       strstr(jobcg_last_error()->message, "4 cores"),
	   "a core beyond the node's is refused, naming both (%s)", jobcg_last_error()->message);
	ok(cputopo_cores_to_cpus(&t, "0-x", &cpus) < 0 && !cpus,
	   "a malformed core list is refused");
	cputopo_done(&t);

	/* Firmware ids that do not follow the CPU numbers: Slurm numbers cores as hwloc does,
	 * by the lowest CPU each package and core holds. Package 1 holds cpu0; on it, core_id 7
	 * holds cpu0,1 and core_id 2 holds cpu2,3; package 0 holds cpu4-7 with core_id 5 on cpu4,5
	 * and core_id 3 on cpu6,7. */
	topo_cpu_in("cpu2", 0, 1, 7), topo_cpu_in("cpu2", 1, 1, 7);
	topo_cpu_in("cpu2", 2, 1, 2), topo_cpu_in("cpu2", 3, 1, 2);
	topo_cpu_in("cpu2", 4, 0, 5), topo_cpu_in("cpu2", 5, 0, 5);
	topo_cpu_in("cpu2", 6, 0, 3), topo_cpu_in("cpu2", 7, 0, 3);
	snprintf(dir, sizeof(dir), "%s/cpu2", tmp);
	is_int(cputopo_load(dir, &t), 0, "a topology with ids out of CPU order loads");
	{
		static const char *const want[] = {"0-1", "2-3", "4-5", "6-7"};

		for (unsigned i = 0; i < 4; i++) {
			char core[8];

			snprintf(core, sizeof(core), "%u", i);
			r = cputopo_cores_to_cpus(&t, core, &cpus);
			ok(r == 0 && streq(cpus, want[i]),
			   "...abstract core %u is CPUs %s, as hwloc orders them (got %s)", i,
			   want[i], cpus ? cpus : "-");
			free(cpus), cpus = NULL;
		}
	}
	cputopo_done(&t);
	snprintf(dir, sizeof(dir), "%s/none", tmp);
	ok(cputopo_load(dir, &t) < 0, "no such directory: an error");
}

static char *cpus_of_core(const struct cputopo *t, const char *core)
{
	char *cpus = NULL;

	return cputopo_cores_to_cpus(t, core, &cpus) == 0 ? cpus : strdup("-");
}

/* The topology cache: written by the first load of a boot, read instead of sysfs afterwards,
 * ignored for another boot, another set of online CPUs, or anything malformed. Runs after
 * test_cores() (its fake sysfs). */
static void test_topology_cache(void)
{
	char dir[512], cache[512], boot[512], *text = NULL, *c = NULL;
	struct cputopo t = {};
	size_t len = 0;
	struct stat st;
	int r;

	snprintf(dir, sizeof(dir), "%s/cpu", tmp);
	snprintf(cache, sizeof(cache), "%s/cpu-topology", tmp);
	snprintf(boot, sizeof(boot), "%s/boot_id", tmp);
	put("boot_id", "6f1c1d2e-boot-one\n");

	is_int(cputopo_load_cached(dir, cache, boot, &t), 0, "first load: from sysfs");
	c = cpus_of_core(&t, "2");
	ok(t.ncores == 4 && streq(c, "2,6"), "the same 4 cores as without a cache (core 2 is %s)",
	   c);
	free(c);
	cputopo_done(&t);
	ok(stat(cache, &st) == 0 && (st.st_mode & 0777) == 0644, "the cache was written, 0644");

	/* sysfs changes under the cache (a test's trick: the real one does not within a boot):
	 * the cache answers while boot and online CPUs are the same. */
	topo_cpu(2, 1, 9);
	is_int(cputopo_load_cached(dir, cache, boot, &t), 0, "second load");
	c = cpus_of_core(&t, "2");
	ok(t.ncores == 4 && streq(c, "2,6"), "answered by the cache, not sysfs (core 2 is %s)", c);
	free(c);
	cputopo_done(&t);

	put("boot_id", "0a0b0c0d-boot-two\n");
	is_int(cputopo_load_cached(dir, cache, boot, &t), 0, "after a reboot");
	c = cpus_of_core(&t, "2");
	ok(t.ncores == 4 && streq(c, "2-3,7"),
	   "another boot: sysfs again (cpu2 now on core 9 with cpu3,7, the lowest CPUs of socket "
	   "1: core 2 is %s)",
	   c);
	free(c);
	cputopo_done(&t);
	ok(read_full_file_at(AT_FDCWD, cache, 1 << 20, &text, &len) == 0 &&
	       strstr(text, "boot 0a0b0c0d-boot-two\n"),
	   "and the cache rewritten for that boot");
	free(text), text = NULL;

	topo_cpu(2, 1, 8);
	put("cpu/online", "0-8\n");
	is_int(cputopo_load_cached(dir, cache, boot, &t), 0, "other CPUs online");
	ok(t.ncores == 4, "another CPU set: sysfs again (4 cores, got %zu)", t.ncores);
	cputopo_done(&t);

	put("cpu-topology", "jobcg-cpu-topology 1\nboot 0a0b0c0d-boot-two\nonline 0-8\n0 0 0 x\n");
	is_int(cputopo_load_cached(dir, cache, boot, &t), 0, "a malformed cache");
	ok(t.ncores == 4, "is read from sysfs again (%zu cores)", t.ncores);
	cputopo_done(&t);
	ok(read_full_file_at(AT_FDCWD, cache, 1 << 20, &text, &len) == 0 && !strstr(text, " x\n"),
	   "and replaced");
	free(text), text = NULL;

	/* Another user's, or writable by others: not trusted, whatever it says. */
	put("cpu-topology", "jobcg-cpu-topology 1\nboot 0a0b0c0d-boot-two\nonline 0-8\n"
			    "0 0 0 0\n1 0 0 0\n2 0 0 0\n3 0 0 0\n4 0 0 0\n5 0 0 0\n6 0 0 0\n"
			    "7 0 0 0\n");
	(void)chmod(cache, 0666);
	is_int(cputopo_load_cached(dir, cache, boot, &t), 0, "a world-writable cache");
	ok(t.ncores == 4, "is not believed (%zu cores, the forged file says 1)", t.ncores);
	cputopo_done(&t);
	put("cpu-topology", "jobcg-cpu-topology 1\nboot 0a0b0c0d-boot-two\nonline 0-8\n"
			    "0 0 0 0\n1 0 0 0\n2 0 0 0\n3 0 0 0\n4 0 0 0\n5 0 0 0\n6 0 0 0\n"
			    "7 0 0 0\n");
	(void)chmod(cache, 0644);
	if (geteuid() == 0 && chown(cache, 65534, 65534) == 0) {
		is_int(cputopo_load_cached(dir, cache, boot, &t), 0, "another user's cache");
		ok(t.ncores == 4, "is not believed either (%zu cores)", t.ncores);
		cputopo_done(&t);
	} else
		tap_skip("another user's cache: not root");

	/* The parser alone. */
	static const char good[] = "jobcg-cpu-topology 1\nboot b\nonline 0-1\n1 0 0 0\n0 0 -1 0\n";
	static const char *const bad[] = {
	    "",
	    "jobcg-cpu-topology 2\nboot b\nonline 0-1\n0 0 0 0\n",
	    "jobcg-cpu-topology 1\nboot c\nonline 0-1\n0 0 0 0\n",
	    "jobcg-cpu-topology 1\nboot b\nonline 0-2\n0 0 0 0\n",
	    "jobcg-cpu-topology 1\nboot b\nonline 0-1\n",
	    "jobcg-cpu-topology 1\nboot b\nonline 0-1\n0 0 0 0",
	    "jobcg-cpu-topology 1\nboot b\nonline 0-1\n0 0 0 0\n0 0 0 1\n",
	    "jobcg-cpu-topology 1\nboot b\nonline 0-1\n99999 0 0 0\n",
	    "jobcg-cpu-topology 1\nboot b\nonline 0-1\n0 -2 0 0\n",
	    "jobcg-cpu-topology 1\nboot b\nonline 0-1\n0 99999999999999999999 0 0\n",
	    "jobcg-cpu-topology 1\nboot b\nonline 0-1\n0 0 0 0 0\n",
	};
	r = cputopo_parse_cache(good, strlen(good), "b", "0-1", &t);
	ok(r == 0 && t.ncores == 2, "a well-formed cache parses (%zu cores)", t.ncores);
	cputopo_done(&t);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(cputopo_parse_cache(bad[i], strlen(bad[i]), "b", "0-1", &t) == -EINVAL,
		   "malformed or foreign cache %zu is refused", i);
}

static struct jobcg_gres_node *node_from(const char *rel, const char *text, const char *host,
					 struct jobcg_config **ret_conf)
{
	char path[512];
	struct jobcg_gres_node *n = NULL;

	put(rel, text);
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	if (jobcg_config_load_files(NULL, path, host, JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV,
				    ret_conf) < 0 ||
	    jobcg_gres_node_new(*ret_conf, &n) < 0)
		tap_diag("cannot load %s: %s", path, jobcg_last_error()->message);
	return n;
}

static void test_gpus(void)
{
	struct jobcg_config *jc = NULL, *sc = NULL, *bc = NULL;
	struct jobcg_gres_node *jn, *sn, *bad;
	char *s = NULL;
	int r;

	/* Two nodes in one file, as a cluster's shared gres.conf: n2's GPUs are nvidia2-3. */
	jn = node_from("jobcg/gres.conf",
		       "NodeName=n1 Name=gpu File=/dev/nvidia[0-1]\n"
		       "NodeName=n2 Name=gpu File=/dev/nvidia[2-3]\n",
		       "n2", &jc);
	sn = node_from("slurm/gres.conf", "NodeName=n[1-2] Name=gpu File=/dev/nvidia[2-3]\n", "n2",
		       &sc);
	bad = node_from("slurm/bad.conf",
			"NodeName=n2 Name=gpu File=/dev/nvidia3\n"
			"NodeName=n2 Name=gpu File=/dev/nvidia2\n",
			"n2", &bc);
	if (!jn || !sn || !bad) {
		tap_skip("gres.conf did not load");
		return;
	}
	r = jspank_gpus_map(jn, "J", sn, "S", "SLURM_STEP_GPUS", "1", &s);
	ok(r == 0 && streq(s, "gpu:1"), "SLURM_STEP_GPUS=1 is jobcg's gpu:1 (got %s)", s ? s : "-");
	free(s), s = NULL;
	r = jspank_gpus_map(jn, "J", sn, "S", "SLURM_STEP_GPUS", "0,1", &s);
	ok(r == 0 && streq(s, "gpu:0,1"), "SLURM_STEP_GPUS=0,1 is gpu:0,1 (got %s)", s ? s : "-");
	free(s), s = NULL;
	ok(jspank_gpus_map(jn, "J", NULL, NULL, "SLURM_JOB_GPUS", "0", &s) == 0 &&
	       streq(s, "gpu:0"),
	   "without Slurm's gres.conf only jobcg's is consulted");
	free(s), s = NULL;
	ok(jspank_gpus_map(jn, "J", sn, "S", "SLURM_STEP_GPUS", "", &s) == 0 && streq(s, ""),
	   "no GPUs: no devices");
	free(s), s = NULL;
	r = jspank_gpus_map(jn, "/etc/jobcg/gres.conf", sn, "S", "SLURM_STEP_GPUS", "2", &s);
	ok(r == -EINVAL && !s && strstr(jobcg_last_error()->message, "/etc/jobcg/gres.conf") &&
	       strstr(jobcg_last_error()->message, "GPU 2") &&
	       strstr(jobcg_last_error()->message, "SLURM_STEP_GPUS=2"),
	   "a GPU jobcg's gres.conf does not have is refused naming it (%s)",
	   jobcg_last_error()->message);
	r = jspank_gpus_map(jn, "/etc/jobcg/gres.conf", bad, "/etc/slurm/gres.conf",
			    "SLURM_STEP_GPUS", "0", &s);
	/* Named by the files the records came from, with their lines. */
	ok(r == -EINVAL && !s && strstr(jobcg_last_error()->message, "slurm/bad.conf:1") &&
	       strstr(jobcg_last_error()->message, "jobcg/gres.conf:2") &&
	       strstr(jobcg_last_error()->message, "/dev/nvidia3") &&
	       strstr(jobcg_last_error()->message, "/dev/nvidia2") &&
	       strstr(jobcg_last_error()->message, "SLURM_STEP_GPUS=0"),
	   "GPU 0 is another file in Slurm's gres.conf: refused naming both files, lines and "
	   "devices (%s)",
	   jobcg_last_error()->message);
	r = jspank_gpus_map(jn, "J", sn, "S", "SLURM_STEP_GPUS", "0,x", &s);
	ok(r == -EINVAL && !s && strstr(jobcg_last_error()->message, "SLURM_STEP_GPUS='0,x'"),
	   "a malformed list is refused naming the variable");
	jobcg_gres_node_free(jn), jobcg_gres_node_free(sn), jobcg_gres_node_free(bad);
	jobcg_config_free(jc), jobcg_config_free(sc), jobcg_config_free(bc);
}

/* Slurm's --gpu-bind (SLURM_GPU_BIND) in jobcg's terms over the step's GPUs. */
static void test_gpu_bind(void)
{
	static const struct {
		const char *bind, *step, *want; /* want NULL: not bound */
	} good[] = {
	    {NULL, "0,1", NULL},
	    {"none", "0,1", NULL},
	    {"closest", "0,1", NULL},
	    {"verbose,closest", "0,1", NULL},
	    {"single:2", "0,1", "single:2"},
	    {"verbose,per_task:1", "0,1", "per_task:1"},
	    /* Slurm takes the type in any case; the library only in lower case. */
	    {"SINGLE:2", "0,1", "single:2"},
	    {"Per_Task:3", "0-3", "per_task:3"},
	    {"map_gpu:0,1", "0,1", "map_gpu:0,1"},
	    {"map_gpu:1,0", "0,1", "map_gpu:1,0"},
	    /* Node indices: the step holds GPUs 2 and 3, which are its positions 0 and 1. */
	    {"map_gpu:3,2", "2-3", "map_gpu:1,0"},
	    {"map_gpu:3*2,2", "1,3,2", "map_gpu:2*2,1"},
	    {"map_gpu:0x3", "3", "map_gpu:0"},
	    /* Decimal, never octal: "010" is GPU 10. */
	    {"map_gpu:010,9", "9-10", "map_gpu:1,0"},
	};
	static const struct {
		const char *bind, *step, *says;
	} bad[] = {
	    {"map_gpu:1", "0", "GPU 1, which this step does not hold"},
	    {"mask_gpu:0x1,0x2", "0,1", "only single:N"},
	    {"map_gpu:a", "0", "'a' is not a GPU index"},
	    {"map_gpu:-1", "0", "'-1' is not a GPU index"},
	    {"map_gpu:0*0", "0", "'0*0' is not a GPU index"},
	    {"map_gpu:1x", "1", "'1x' is not a GPU index"},
	    {"map_gpu:+1", "1", "'+1' is not a GPU index"},
	    {"map_gpu:1*2x", "1", "'1*2x' is not a GPU index"},
	    {"map_gpu:1*-2", "1", "'1*-2' is not a GPU index"},
	    {"map_gpu:0x", "0", "'0x' is not a GPU index"},
	    {"map_gpu:99999999999", "0", "'99999999999' is not a GPU index"},
	    {"map_gpu:", "0", "an empty map"},
	    {"sometimes", "0", "only single:N"},
	    /* Refused before any cgroup exists. */
	    {"single:)1", "1", "--gpu-bind: tasks per GPU ')1' is not a number"},
	    {"per_task:0", "0", "--gpu-bind per_task:0: N must be at least 1"},
	    {"verbose,single:", "0", "--gpu-bind: tasks per GPU '' is not a number"},
	    /* The library's limits: a repeat count up to 1024. */
	    {"map_gpu:0*2731", "0", "repeat count"},
	};

	for (size_t i = 0; i < ELEMENTSOF(good); i++) {
		char *got = (char *)"x";
		int r = jspank_gpu_bind(good[i].bind, good[i].step, &got);

		ok(r == 0 && (good[i].want ? got && streq(got, good[i].want) : !got),
		   "--gpu-bind=%s over GPUs %s is %s (got %s)",
		   good[i].bind ? good[i].bind : "(unset)", good[i].step,
		   good[i].want ? good[i].want : "not bound", got ? got : "not bound");
		free(got);
	}
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		char *got = NULL;
		int r = jspank_gpu_bind(bad[i].bind, bad[i].step, &got);

		ok(r == -EINVAL && !got && strstr(jobcg_last_error()->message, bad[i].says),
		   "--gpu-bind=%s over GPUs %s is refused (%s)", bad[i].bind, bad[i].step,
		   jobcg_last_error()->message);
	}
}

static void test_args(void)
{
	struct jspank_args a = {};
	char *good[] = {(char *)"conf=/etc/jobcg/%n", (char *)"slurm_gres=none",
			(char *)"jobcg=/opt/jobcg/bin/jobcg"};
	char *bad[] = {(char *)"conf=/x", (char *)"confx=/y"};
	char *relative[] = {(char *)"conf=/x", (char *)"jobcg=jobcg"};
	char *e;

	ok(jspank_args_parse(3, good, &a) == 0 && streq(a.conf, "/etc/jobcg/%n") &&
	       streq(a.slurm_gres, "none") && streq(a.jobcg, "/opt/jobcg/bin/jobcg"),
	   "conf=, slurm_gres= and jobcg= parse");
	jspank_args_done(&a);
	ok(jspank_args_parse(2, bad, &a) == -EINVAL && !a.conf &&
	       strstr(jobcg_last_error()->message, "confx=/y"),
	   "an unknown argument is refused naming it, nothing kept");
	ok(jspank_args_parse(2, relative, &a) == -EINVAL && !a.conf && !a.jobcg &&
	       strstr(jobcg_last_error()->message, "'jobcg=jobcg': jobcg= needs an absolute path"),
	   "jobcg= without an absolute path is refused (slurmstepd's PATH is no guide)");
	{
		char *rel_conf[] = {(char *)"conf=etc/jobcg"},
		     *rel_gres[] = {(char *)"slurm_gres=g"};

		ok(jspank_args_parse(1, rel_conf, &a) == -EINVAL && !a.conf &&
		       strstr(jobcg_last_error()->message, "conf= needs an absolute path"),
		   "conf= without an absolute path is refused (slurmstepd's working directory)");
		ok(jspank_args_parse(1, rel_gres, &a) == -EINVAL && !a.slurm_gres &&
		       strstr(jobcg_last_error()->message, "slurm_gres= needs an absolute path"),
		   "slurm_gres= neither none nor an absolute path is refused");
	}
	{
		char *twice[] = {"conf=/etc/jobcg", "slurm_gres=none", "conf=/etc/jobcg/%n"};

		ok(jspank_args_parse(3, twice, &a) == -EINVAL && !a.conf && !a.slurm_gres &&
		       strstr(jobcg_last_error()->message,
			      "'conf=/etc/jobcg/%n': conf= given twice"),
		   "an argument given twice is refused, not the last one taken: %s",
		   jobcg_last_error()->message);
	}
	ok(jspank_args_parse(0, NULL, &a) == 0 && !a.conf, "no arguments: defaults");
	e = jspank_expand("/etc/jobcg/%n/x%%", "n2");
	ok(e && streq(e, "/etc/jobcg/n2/x%"), "%%n is the node name, %%%% a percent sign");
	free(e);
	ok(!jspank_expand("/etc/%q", "n2"), "an unknown %% sequence is refused");
}

static void test_exit_code(void)
{
	int st[3] = {0, 3 << 8, 1 << 8};
	int sig[3] = {2 << 8, SIGKILL, SIGTERM};

	is_int(jspank_exit_code(st, 3), 3, "the highest exit code of the tasks");
	is_int(jspank_exit_code(sig, 3), 128 + SIGKILL, "the first task killed by a signal wins");
	is_int(jspank_exit_code(NULL, 0), 0, "no task: 0");
}

/* How the extern step's sleep is found among slurmstepd's children (task_post_fork). */
static void test_extern_child(void)
{
	pid_t pids[3];
	size_t n = 9;
	unsigned long long start = 0;
	pid_t ppid = 0;
	static const char sleep_cmd[] = "sleep\0"
					"100000000";

	ok(jspank_children_parse("12 345 \n", pids, 3, &n) == 0 && n == 2 && pids[0] == 12 &&
	       pids[1] == 345,
	   "a children file: its pids");
	ok(jspank_children_parse("", pids, 3, &n) == 0 && n == 0, "no child: none");
	is_int(jspank_children_parse("1 2 3 4", pids, 3, &n), -E2BIG, "more than asked: refused");
	is_int(jspank_children_parse("1 x", pids, 3, &n), -EINVAL, "not a pid: refused");
	is_int(jspank_children_parse("0", pids, 3, &n), -EINVAL, "pid 0: refused");
	is_int(jspank_children_parse("-4", pids, 3, &n), -EINVAL, "a sign: refused");
	ok(jspank_stat_parse("77 (sl) e) (p) S 42 77 77 0 -1 4194560 90 0 0 0 0 0 0 0 20 0 1 0 "
			     "123456 5337088 187 18446744073709551615\n",
			     &ppid, &start) == 0 &&
	       ppid == 42 && start == 123456,
	   "stat: parent and start time, past a command name with ') ('");
	is_int(jspank_stat_parse("77 (x) S", &ppid, &start), -EINVAL, "a short stat: refused");
	is_int(jspank_stat_parse("77 x S 1", &ppid, &start), -EINVAL, "no command name: refused");
	ok(jspank_is_extern_sleep(sleep_cmd, sizeof(sleep_cmd)), "Slurm's sleep 100000000");
	ok(!jspank_is_extern_sleep(sleep_cmd, sizeof(sleep_cmd) - 1), "without its last NUL: not");
	ok(!jspank_is_extern_sleep("sleep\0"
				   "10",
				   9),
	   "another sleep: not");
	ok(!jspank_is_extern_sleep("/usr/sbin/slurmstepd", 21), "slurmstepd before its exec: not");
}

/* SLURM_TRES_BIND's gpu part, as srun writes it. */
static void test_tres_bind(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
	    {"gres/gpu:closest", "closest"},
	    {"gres/gpu:verbose,single:1", "verbose,single:1"},
	    {"gres/gpu:map_gpu:1,0;gres/nic:closest", "map_gpu:1,0"},
	    {"gres/nic:closest;gres/gpu:per_task:2", "per_task:2"},
	    {"gres/gpu:", ""},
	    {"gres/nic:closest", NULL},
	    {"", NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[128];
		const char *got;

		snprintf(buf, sizeof(buf), "%s", cases[i].in);
		got = jspank_tres_gpu_bind(buf);
		ok(cases[i].want ? got && strcmp(got, cases[i].want) == 0 : got == NULL,
		   "SLURM_TRES_BIND '%s': gpu part '%s'", cases[i].in, got ? got : "(none)");
	}
}

int main(void)
{
	if (!mkdtemp(tmp))
		return 1;
	test_step_names();
	test_cores();
	test_topology_cache();
	test_gpus();
	test_gpu_bind();
	test_tres_bind();
	test_args();
	test_exit_code();
	test_extern_child();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
		(void)!system(cmd);
	}
	return tap_done();
}
