/* Slurm's gres.conf against jobcg's, GPU index by index (lib/src/gres/slurmgres.c), and
 * `jobcg check --slurm-gres` reporting each disagreement with both files and lines; whether
 * slurm.conf lists gpu in GresTypes=. */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "config_internal.h"
#include "confparse.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "tap.h"
#include "util.h"

static char tmp[] = "/tmp/jobcg-test-gres-slurm-XXXXXX";

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	for (char *p = path + strlen(tmp) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		(void)mkdir(path, 0755);
		*p = '/';
	}
	f = fopen(path, "we");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

/* The node @host of gres.conf @rel (written from @text); device files are not stat()ed. */
static struct jobcg_gres_node *node_of(const char *rel, const char *text, const char *host,
				       struct jobcg_config **conf)
{
	char path[PATH_MAX];
	struct jobcg_gres_node *n = NULL;

	put(rel, text);
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	if (jobcg_config_load_files(NULL, path, host, JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV,
				    conf) < 0 ||
	    jobcg_gres_node_new(*conf, &n) < 0)
		tap_diag("cannot load %s: %s", path, jobcg_last_error()->message);
	return n;
}

static size_t count(char **v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

static void strv_drop(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

static void test_compare(void)
{
	struct jobcg_config *jc = NULL, *sc = NULL, *wc = NULL, *hc = NULL;
	struct jobcg_gres_node *jn, *sn, *wn, *hn;
	char **d = NULL;
	int r;

	/* A cluster's shared file: Slurm picks this node's lines, and so does jobcg. */
	jn = node_of("jobcg/gres.conf",
		     "NodeName=n1 Name=gpu File=/dev/nvidia[0-1]\n"
		     "NodeName=n2 Name=gpu File=/dev/nvidia[2-3]\n",
		     "n2", &jc);
	sn = node_of("slurm/gres.conf",
		     "# Slurm's own\nNodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[2-3]\n",
		     "n2", &sc);
	/* Swapped order, and a third GPU only Slurm has. */
	wn = node_of("slurm/wrong.conf",
		     "NodeName=n2 Name=gpu File=/dev/nvidia3\n"
		     "NodeName=n2 Name=gpu File=/dev/nvidia2\n"
		     "NodeName=n2 Name=gpu File=/dev/nvidia4\n",
		     "n2", &wc);
	/* A Count-only record leaves index 0 without a device: index 1 still lines up. */
	hn = node_of("slurm/hole.conf",
		     "NodeName=n2 Name=gpu Count=1\nNodeName=n2 Name=gpu File=/dev/nvidia3\n", "n2",
		     &hc);
	if (!jn || !sn || !wn || !hn) {
		tap_skip("gres.conf did not load");
		return;
	}

	ok(jobcg_gres_slurm_compare(jn, "J", sn, "S", &d) == 0 && count(d) == 0,
	   "the same files in the same order agree (types aside)");
	strv_drop(d), d = NULL;
	r = jobcg_gres_slurm_gpu(jn, "J", sn, "S", 1);
	ok(r >= 0 &&
	       streq(jobcg_gres_node_device(jn, (unsigned)r)->rec->files[0].path, "/dev/nvidia3"),
	   "Slurm's GPU 1 is jobcg's /dev/nvidia3 on n2");
	ok(jobcg_gres_slurm_gpu(jn, "J", NULL, NULL, 0) >= 0,
	   "without Slurm's file only jobcg's index is looked up");

	r = jobcg_gres_slurm_compare(jn, "J", wn, "S", &d);
	ok(r == 0 && count(d) == 3, "swapped order and an extra GPU: three differences (got %zu)",
	   count(d));
	if (count(d) == 3) {
		ok(strstr(d[0], "GPU 0 is /dev/nvidia3") && strstr(d[0], "slurm/wrong.conf:1") &&
		       strstr(d[0], "/dev/nvidia2 in jobcg's") && strstr(d[0], "jobcg/gres.conf:2"),
		   "GPU 0: both files with their lines and both devices (%s)", d[0]);
		ok(strstr(d[1], "GPU 1 is /dev/nvidia2") && strstr(d[1], "slurm/wrong.conf:2") &&
		       strstr(d[1], "jobcg/gres.conf:2"),
		   "GPU 1 likewise (%s)", d[1]);
		ok(strstr(d[2], "GPU 2 is /dev/nvidia4") && strstr(d[2], "slurm/wrong.conf:3") &&
		       strstr(d[2], "not in jobcg's (J has 2"),
		   "GPU 2 only in Slurm's: named with its line and jobcg's count (%s)", d[2]);
	}
	strv_drop(d), d = NULL;

	r = jobcg_gres_slurm_compare(jn, "J", hn, "S", &d);
	ok(r == 0 && count(d) == 1 && strstr(d[0], "GPU 0 is /dev/nvidia2 in jobcg's") &&
	       strstr(d[0], "not in Slurm's (S has"),
	   "a Count-only record in Slurm's: GPU 0 differs, GPU 1 agrees (%s)",
	   d && d[0] ? d[0] : "-");
	strv_drop(d), d = NULL;

	r = jobcg_gres_slurm_gpu(jn, "/etc/jobcg/gres.conf", sn, "S", 5);
	ok(r == -EINVAL && strstr(jobcg_last_error()->message, "GPU 5 is not in jobcg's") &&
	       strstr(jobcg_last_error()->message, "/etc/jobcg/gres.conf"),
	   "an index neither has is refused naming jobcg's file (%s)", jobcg_last_error()->message);

	jobcg_gres_node_free(jn), jobcg_gres_node_free(sn), jobcg_gres_node_free(wn);
	jobcg_gres_node_free(hn);
	jobcg_config_free(jc), jobcg_config_free(sc), jobcg_config_free(wc), jobcg_config_free(hc);
}

/*
 * Slurm's GPU numbers for node @host of Slurm's gres.conf @text when slurm.conf gives the node
 * Gres=@gres: "0=/dev/x 1=/dev/y", or "error N: message".
 */
static const char *order_slurm_conf = "/etc/slurm/slurm.conf";

static char *order(const char *text, const char *host, const char *gres)
{
	char path[PATH_MAX], *out = calloc(1, 4096);
	struct jobcg_config *c = NULL;
	struct jobcg_gres_node *n = NULL;
	int r;

	put("order/gres.conf", text);
	snprintf(path, sizeof(path), "%s/order/gres.conf", tmp);
	r = jobcg_config_load_files(NULL, path, host, JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV,
				    &c);
	if (r >= 0)
		r = slurm_gpu_order(&c->gres, path, gres, order_slurm_conf, host);
	if (r >= 0)
		r = jobcg_gres_node_new(c, &n);
	if (r < 0) {
		snprintf(out, 4096, "error %d: %s", r, jobcg_last_error()->message);
	} else {
		for (unsigned i = 0; i < jobcg_gres_node_count(n); i++) {
			int pos = jobcg_gres_node_find(n, "gpu", i);

			if (pos < 0)
				break;
			snprintf(out + strlen(out), 4096 - strlen(out), "%s%u=%s", i ? " " : "", i,
				 jobcg_gres_node_device(n, (unsigned)pos)->rec->files[0].path);
		}
	}
	jobcg_gres_node_free(n);
	jobcg_config_free(c);
	return out;
}

/* slurmd 22.05's numbering (_merge_config, common_node_config_load), not gres.conf's line
 * order: slurm.conf's Gres= types in order, each type's lines taken up to its count. */
static void test_slurm_order(void)
{
	static const struct {
		const char *what, *gres_conf, *gres, *want;
	} cases[] = {
	    {"untyped: line order", "Name=gpu File=/dev/nvidia1\nName=gpu File=/dev/nvidia0\n",
	     "gpu:2", "0=/dev/nvidia1 1=/dev/nvidia0"},
	    {"typed lines under an untyped Gres=: line order",
	     "Name=gpu Type=tb File=/dev/nvidia1\nName=gpu Type=ta File=/dev/nvidia0\n", "gpu:2",
	     "0=/dev/nvidia1 1=/dev/nvidia0"},
	    {"the reviewer's case: ta before tb by Gres=, not by line",
	     "Name=gpu Type=tb File=/dev/nvidia1\nName=gpu Type=ta File=/dev/nvidia0\n",
	     "gpu:ta:1,gpu:tb:1", "0=/dev/nvidia0 1=/dev/nvidia1"},
	    {"several lines of one type, types in any case, sockets and other GRES",
	     "Name=gpu Type=B File=/dev/nvidia0\nName=gpu Type=a File=/dev/nvidia1\n"
	     "Name=gpu Type=b File=/dev/nvidia[2-3]\nName=gpu Type=A File=/dev/nvidia4\n",
	     "mps:100,gpu:a:2(S:0-1),gpu:b:3",
	     "0=/dev/nvidia1 1=/dev/nvidia4 2=/dev/nvidia0 3=/dev/nvidia2 4=/dev/nvidia3"},
	    {"a type given twice counts at its first place",
	     "Name=gpu Type=a File=/dev/nvidia0\nName=gpu Type=b File=/dev/nvidia1\n"
	     "Name=gpu Type=a File=/dev/nvidia2\n",
	     "gpu:a:1,gpu:b:1,gpu:a:1", "0=/dev/nvidia0 1=/dev/nvidia2 2=/dev/nvidia1"},
	    {"truncation: a range cut at the count, later lines of the type left out",
	     "Name=gpu Type=a File=/dev/nvidia[0-3]\nName=gpu Type=a File=/dev/nvidia4\n"
	     "Name=gpu Type=b File=/dev/nvidia5\n",
	     "gpu:b:1,gpu:a:2", "0=/dev/nvidia5 1=/dev/nvidia0 2=/dev/nvidia1"},
	    {"untyped truncation", "Name=gpu File=/dev/nvidia[0-2]\nName=gpu File=/dev/nvidia3\n",
	     "gpu:2", "0=/dev/nvidia0 1=/dev/nvidia1"},
	    {"an empty type is none, as Slurm's strtok_r reads it",
	     "Name=gpu Type=b File=/dev/nvidia0\nName=gpu Type=a File=/dev/nvidia1\n",
	     "gpu:a::1,gpu::b:1", "0=/dev/nvidia1 1=/dev/nvidia0"},
	    {"a type slurm.conf does not give the node is left out; no_consume is no type",
	     "Name=gpu Type=other File=/dev/nvidia0\nName=gpu Type=tesla File=/dev/nvidia1\n",
	     "gpu:tesla:no_consume:1", "0=/dev/nvidia1"},
	    {"Name= lines before NodeName= lines, as slurmd lists them",
	     "NodeName=n1 Name=gpu File=/dev/nvidia1\nName=gpu File=/dev/nvidia0\n", "gpu:2",
	     "0=/dev/nvidia0 1=/dev/nvidia1"},
	    {"a Count-only line takes no index",
	     "Name=gpu Count=1\nName=gpu File=/dev/nvidia3\nName=gpu File=/dev/nvidia4\n", "gpu:3",
	     "0=/dev/nvidia3 1=/dev/nvidia4"},
	    {"a bare gpu is one", "Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n",
	     "gpu,gpu:3", "0=/dev/nvidia0"},
	    {"no gpu in Gres=: none", "Name=gpu File=/dev/nvidia0\n", "mps:100", ""},
	    {"AutoDetect=off keeps the rule",
	     "AutoDetect=off\nName=gpu Type=b File=/dev/nvidia0\nName=gpu Type=a "
	     "File=/dev/nvidia1\n",
	     "gpu:a:1,gpu:b:1", "0=/dev/nvidia1 1=/dev/nvidia0"},
	    {"AutoDetect=nvml, no NVIDIA driver: a File= line is slurmd's config-only GPU",
	     "AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n", "gpu:1", "0=/dev/nvidia0"},
	    {"AutoDetect=nvml, no NVIDIA driver: a Count-only line is no GPU",
	     "AutoDetect=nvml\nName=gpu Count=1\n", "gpu:1", ""},
	    {"a node's AutoDetect=rsmi: refused",
	     "NodeName=n1 AutoDetect=rsmi\nName=gpu File=/dev/dri/renderD128\n", "gpu:1",
	     "error -95: *AutoDetect=rsmi"},
	    {"a count that does not parse", "Name=gpu File=/dev/nvidia0\n", "gpu:a:2x",
	     "error -22: *Gres=gpu:a:2x"},
	};

	/* AutoDetect=nvml reads the driver's files: none here, wherever the test runs. */
	char empty[PATH_MAX];

	snprintf(empty, sizeof(empty), "%s/no-driver", tmp);
	(void)mkdir(empty, 0755);
	setenv("JOBCG_SYSROOT", empty, 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = order(cases[i].gres_conf, "n1", cases[i].gres);
		const char *star = strchr(cases[i].want, '*');
		bool good =
		    star ? strncmp(got, cases[i].want, (size_t)(star - cases[i].want)) == 0 &&
			       strstr(got, star + 1)
			 : streq(got, cases[i].want);

		ok(good, "Slurm's order, %s (Gres=%s: %s)", cases[i].what, cases[i].gres, got);
		free(got);
	}
	unsetenv("JOBCG_SYSROOT");
}

/*
 * A stand-in NVIDIA driver under @tmp/@root: for each "BUS MINOR" of @gpus the driver's
 * information file (@model) and /dev/nvidiaMINOR (c 195:MINOR, so root only). @minor_line
 * false leaves "Device Minor:" out of the last one.
 */
static bool nvidia_tree(const char *root, const char *model, const char *const *gpus, size_t n,
			bool minor_line)
{
	char rel[PATH_MAX], text[512], dev[PATH_MAX];

	for (size_t i = 0; i < n; i++) {
		char bus[32];
		unsigned minor;

		if (sscanf(gpus[i], "%31s %u", bus, &minor) != 2)
			abort();
		snprintf(rel, sizeof(rel), "%s/proc/driver/nvidia/gpus/%s/information", root, bus);
		snprintf(text, sizeof(text),
			 "Model: \t\t %s\nIRQ:   \t\t 41\nGPU UUID: \t "
			 "GPU-0e31e5ef-0c2d-f606-3b38-3af0f5de0d%02zx\nBus Location: \t %s\n%s"
			 "GPU Excluded:\t No\n",
			 model, i, bus,
			 minor_line || i + 1 < n
			     ? (snprintf(dev, sizeof(dev), "Device Minor: \t %u\n", minor), dev)
			     : "");
		put(rel, text);
		snprintf(dev, sizeof(dev), "%s/%s/dev", tmp, root);
		(void)mkdir(dev, 0755);
		snprintf(dev, sizeof(dev), "%s/%s/dev/nvidia%u", tmp, root, minor);
		if (mknod(dev, S_IFCHR | 0600, makedev(195, minor)) < 0 && errno != EEXIST)
			return false;
	}
	return true;
}

/*
 * Slurm's AutoDetect=nvml numbering (gres_gpu.c _merge_system_gres_conf, 22.05) from the
 * driver's files. Each expectation is what Debian 12's slurmd 22.05.8 printed (slurmd -G with
 * DebugFlags=Gres) on 2026-11-28 with a fake_gpus.conf of the same GPUs: NVML's order is the
 * -1 of each Links= row, here nvidia10 (bus 07), nvidia3 (0f), nvidia2 (47), nvidia0 (87),
 * which is neither file order nor natural order.
 */
static void test_nvml_order(void)
{
	static const char *const a4[] = {"0000:07:00.0 10", "0000:0f:00.0 3", "0000:47:00.0 2",
					 "0000:87:00.0 0"};
	static const char *const a3[] = {"0000:07:00.0 10", "0000:47:00.0 2", "0000:87:00.0 0"};
	static const struct {
		const char *what, *tree, *gres_conf, *gres, *want;
	} cases[] = {
	    {"Count= without File=: NVML's order", "a4",
	     "AutoDetect=nvml\nName=gpu Type=a100 Count=4\n", "gpu:a100:4",
	     "0=/dev/nvidia10 1=/dev/nvidia3 2=/dev/nvidia2 3=/dev/nvidia0"},
	    {"a node's AutoDetect=nvml, Type= in another case", "a4",
	     "NodeName=n1 AutoDetect=nvml\nName=gpu Type=A100 Count=4\n", "gpu:a100:4",
	     "0=/dev/nvidia10 1=/dev/nvidia3 2=/dev/nvidia2 3=/dev/nvidia0"},
	    {"no gpu line: slurm.conf's count", "a4", "AutoDetect=nvml\n", "gpu:a100:4",
	     "0=/dev/nvidia10 1=/dev/nvidia3 2=/dev/nvidia2 3=/dev/nvidia0"},
	    {"untyped", "a4", "AutoDetect=nvml\nName=gpu Count=4\n", "gpu:4",
	     "0=/dev/nvidia10 1=/dev/nvidia3 2=/dev/nvidia2 3=/dev/nvidia0"},
	    /* slurmd with NVML: NVML's order whatever the File= order; without (Debian's,
	     * no gpu_nvml.so): "We were configured with nvml functionality, but that lib
	     * wasn't found" and gres.conf's order. jobcg cannot tell which: refused unless
	     * the two agree. */
	    {"File= in NVML's order: the same either way", "a4",
	     "AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia[10,3,2,0]\n", "gpu:a100:4",
	     "0=/dev/nvidia10 1=/dev/nvidia3 2=/dev/nvidia2 3=/dev/nvidia0"},
	    {"File= in another order: refused, naming NVML's", "a4",
	     "AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia[0,2,3,10]\n", "gpu:a100:4",
	     "error -95: *(GPU 0 is /dev/nvidia10 or /dev/nvidia0), so jobcg cannot know which; "
	     "list the files in NVML's order "
	     "(/dev/nvidia10,/dev/nvidia3,/dev/nvidia2,/dev/nvidia0)"},
	    {"2 of 4: the first two by file name take the type, then NVML's order", "a4",
	     "AutoDetect=nvml\nName=gpu Type=a100 Count=2\n", "gpu:a100:2",
	     "0=/dev/nvidia2 1=/dev/nvidia0"},
	    {"a type the model name does not contain: no GPU", "a4",
	     "AutoDetect=nvml\nName=gpu Type=v100 Count=4\n", "gpu:v100:4", ""},
	    {"nvidia3 off the bus, listed with File=: slurmd puts it last (config-only), so "
	     "NVML's order and gres.conf's differ: refused",
	     "a3", "AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia[10,3,2,0]\n", "gpu:a100:4",
	     "error -95: *(GPU 1 is /dev/nvidia2 or /dev/nvidia3)"},
	    {"nvidia3 off the bus, listed last with File=: config-only, last", "a3",
	     "AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia[10,2,0,3]\n", "gpu:a100:4",
	     "0=/dev/nvidia10 1=/dev/nvidia2 2=/dev/nvidia0 3=/dev/nvidia3"},
	    {"nvidia3 off the bus, Count= only: gone, the others shift", "a3",
	     "AutoDetect=nvml\nName=gpu Type=a100 Count=4\n", "gpu:a100:4",
	     "0=/dev/nvidia10 1=/dev/nvidia2 2=/dev/nvidia0"},
	    /* slurmd: 0=nvidia3 1=nvidia10, both config-only (their types were not cut down),
	     * in an order that rests on qsort(): refused. */
	    {"two config-only GPUs: refused", "a4",
	     "AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia[3,10]\n", "gpu:a100:2",
	     "error -95: *qsort()"},
	    {"Cores= (slurmd compares NVML's affinity): refused", "a4",
	     "AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia[0,2,3,10] Cores=0-1\n",
	     "gpu:a100:4", "error -95: *Cores= on a gpu line under AutoDetect=nvml"},
	    {"Links=: refused", "a4",
	     "AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia0 Links=-1,0\n", "gpu:a100:1",
	     "error -95: *Links="},
	    {"a GPU without Device Minor: refused", "bad",
	     "AutoDetect=nvml\nName=gpu Type=a100 Count=2\n", "gpu:a100:2",
	     "error -95: *could not read every NVIDIA GPU"},
	    {"MIG mode: refused", "mig", "AutoDetect=nvml\nName=gpu Type=a100 Count=1\n",
	     "gpu:a100:1", "error -95: *MIG"},
	};
	char root[PATH_MAX];
	bool trees;

	trees = geteuid() == 0 && nvidia_tree("a4", "NVIDIA A100-SXM4-80GB", a4, 4, true) &&
		nvidia_tree("a3", "NVIDIA A100-SXM4-80GB", a3, 3, true) &&
		nvidia_tree("bad", "NVIDIA A100-SXM4-80GB", a3, 2, false) &&
		nvidia_tree("mig", "NVIDIA A100-SXM4-80GB", a4, 1, true);
	if (trees)
		put("mig/proc/driver/nvidia/capabilities/gpu10/mig/gi1/access",
		    "DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got;
		const char *star = strchr(cases[i].want, '*');
		bool good;

		if (!trees) {
			tap_skip(
			    "AutoDetect=nvml, %s: the stand-in driver's device nodes need root",
			    cases[i].what);
			continue;
		}
		snprintf(root, sizeof(root), "%s/%s", tmp, cases[i].tree);
		setenv("JOBCG_SYSROOT", root, 1);
		got = order(cases[i].gres_conf, "n1", cases[i].gres);
		unsetenv("JOBCG_SYSROOT");
		good = star ? strncmp(got, cases[i].want, (size_t)(star - cases[i].want)) == 0 &&
				  strstr(got, star + 1)
			    : streq(got, cases[i].want);
		ok(good, "AutoDetect=nvml, %s (Gres=%s: %s)", cases[i].what, cases[i].gres, got);
		free(got);
	}

	/* fake_gpus.conf beside slurm.conf: slurmd merges it even under AutoDetect=off. */
	put("fk/slurm.conf", "ClusterName=c\n");
	put("fk/fake_gpus.conf", "a100|2|0-1|-1|/dev/nvidia0\n");
	snprintf(root, sizeof(root), "%s/fk/slurm.conf", tmp);
	order_slurm_conf = root;
	for (int off = 0; off < 2; off++) {
		char *got = order(off ? "AutoDetect=off\nName=gpu File=/dev/nvidia0\n"
				      : "AutoDetect=nvml\nName=gpu File=/dev/nvidia0\n",
				  "n1", "gpu:1");

		ok(startswith(got, "error -95: ") && strstr(got, "fake_gpus.conf exists"),
		   "fake_gpus.conf beside slurm.conf, AutoDetect=%s: refused (%s)",
		   off ? "off" : "nvml", got);
		free(got);
	}
	order_slurm_conf = "/etc/slurm/slurm.conf";
}

/* The Slurm node of gres.conf @text under Gres=@gres, from the stand-in driver @tree. */
static struct jobcg_gres_node *nvml_node(const char *tree, const char *text, const char *gres,
					 struct jobcg_config **c)
{
	char path[PATH_MAX], root[PATH_MAX];
	struct jobcg_gres_node *n = NULL;
	int r;

	put("nm/gres.conf", text);
	snprintf(path, sizeof(path), "%s/nm/gres.conf", tmp);
	snprintf(root, sizeof(root), "%s/%s", tmp, tree);
	setenv("JOBCG_SYSROOT", root, 1);
	r = jobcg_config_load_files(NULL, path, "n1", JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV,
				    c);
	if (r >= 0)
		r = slurm_gpu_order(&(*c)->gres, path, gres, "/etc/slurm/slurm.conf", "n1");
	if (r >= 0)
		r = jobcg_gres_node_new(*c, &n);
	unsetenv("JOBCG_SYSROOT");
	if (r < 0)
		tap_diag("Slurm's node: %s", jobcg_last_error()->message);
	return n;
}

/* Under AutoDetect=nvml a Slurm index names a file, and jobcg's record of that file is it,
 * wherever jobcg's gres.conf lists it; a file only one side has is refused. */
static void test_nvml_mapping(void)
{
	struct jobcg_config *sc = NULL, *jc = NULL, *jc2 = NULL, *jc3 = NULL;
	struct jobcg_gres_node *sn, *jn, *jn2, *jn3;
	char **d = NULL;
	int r;

	if (geteuid() != 0) {
		tap_skip("AutoDetect=nvml mapping: the stand-in driver's device nodes need root");
		return;
	}
	sn = nvml_node("a4", "AutoDetect=nvml\nName=gpu Type=a100 Count=4\n", "gpu:a100:4", &sc);
	jn = node_of("nj/gres.conf", "Name=gpu Type=a100 File=/dev/nvidia[0,2,3,10]\n", "n1", &jc);
	jn2 = node_of("nj2/gres.conf", "Name=gpu File=/dev/nvidia[0,2,3,5,10]\n", "n1", &jc2);
	jn3 = node_of("nj3/gres.conf", "Name=gpu File=/dev/nvidia[0,2,10]\n", "n1", &jc3);
	if (!sn || !jn || !jn2 || !jn3) {
		ok(false, "AutoDetect=nvml mapping: the nodes load");
		goto out;
	}
	/* Slurm's 0 is nvidia10, jobcg's fourth line (position 3); Slurm's 3 is nvidia0. */
	r = jobcg_gres_slurm_gpu(jn, "J", sn, "S", 0);
	ok(r == 3, "Slurm's GPU 0 (nvidia10) is jobcg's device 3 (%d)", r);
	r = jobcg_gres_slurm_gpu(jn, "J", sn, "S", 3);
	ok(r == 0, "Slurm's GPU 3 (nvidia0) is jobcg's device 0 (%d)", r);
	r = jobcg_gres_slurm_gpu(jn, "J", sn, "S", 4);
	ok(r == -EINVAL && strstr(jobcg_last_error()->message, "GPU 4 is not among the 4"),
	   "Slurm's GPU 4 does not exist: refused (%s)", jobcg_last_error()->message);
	ok(jobcg_gres_slurm_compare(jn, "J", sn, "S", &d) == 0 && count(d) == 0,
	   "compare: the same files, no difference");
	strv_free(d);
	d = NULL;
	r = jobcg_gres_slurm_gpu(jn2, "J", sn, "S", 0);
	ok(r == -EINVAL && strstr(jobcg_last_error()->message, "lists /dev/nvidia5"),
	   "jobcg lists nvidia5, slurmd does not: every index refused (%s)",
	   jobcg_last_error()->message);
	ok(jobcg_gres_slurm_compare(jn2, "J", sn, "S", &d) == 0 && count(d) == 1 &&
	       strstr(d[0], "/dev/nvidia5"),
	   "compare names nvidia5 (%s)", d && d[0] ? d[0] : "none");
	strv_free(d);
	d = NULL;
	r = jobcg_gres_slurm_gpu(jn3, "J", sn, "S", 1);
	ok(r == -EINVAL && strstr(jobcg_last_error()->message, "GPU 1 is /dev/nvidia3"),
	   "slurmd's GPU 1 (nvidia3) is not in jobcg's gres.conf: refused (%s)",
	   jobcg_last_error()->message);
	r = jobcg_gres_slurm_gpu(jn3, "J", sn, "S", 0);
	ok(r == -EINVAL && strstr(jobcg_last_error()->message, "GPU 1 of slurmd's") &&
	       strstr(jobcg_last_error()->message, "/dev/nvidia3"),
	   "so is its GPU 0 (nvidia10): the two lists disagree (%s)", jobcg_last_error()->message);
	ok(jobcg_gres_slurm_compare(jn3, "J", sn, "S", &d) == 0 && count(d) == 1 &&
	       strstr(d[0], "GPU 1 is /dev/nvidia3"),
	   "compare names slurmd's GPU 1 (%s)", d && d[0] ? d[0] : "none");
	strv_free(d);
	d = NULL;
out:
	jobcg_gres_node_free(sn);
	jobcg_gres_node_free(jn);
	jobcg_gres_node_free(jn2);
	jobcg_gres_node_free(jn3);
	jobcg_config_free(sc);
	jobcg_config_free(jc);
	jobcg_config_free(jc2);
	jobcg_config_free(jc3);
}

/* A node's Gres= in slurm.conf: hostlists, NodeName=DEFAULT, Include. */
static void test_node_gres(void)
{
	static const struct {
		const char *node, *want; /* NULL: -ENOENT */
	} cases[] = {
	    {"n3", "gpu:1"},	{"n6", "gpu:a:2"}, {"x1", "gpu:a:2"}, {"m1", "gpu:b:1"},
	    {"q07", "gpu:c:4"}, {"z1", ""},	   {"zz", NULL},
	};
	char path[PATH_MAX];

	put("ng/nodes.conf", "NodeName=q[01-10] Gres=gpu:c:4 CPUs=8\n");
	put("ng/slurm.conf", "ClusterName=c\nGresTypes=gpu\n"
			     "NodeName=DEFAULT CPUs=4 Gres=gpu:1\n"
			     "NodeName=n[1-4] RealMemory=100\n"
			     "NodeName=DEFAULT gres=gpu:a:2\n"
			     "NodeName=n[5-8],x1 State=UNKNOWN\n"
			     "nodename=m1 CPUs=2 Gres=gpu:b:1\n"
			     "Include nodes.conf\n"
			     "NodeName=DEFAULT Gres=\"\"\n"
			     "NodeName=z1\n"
			     "PartitionName=p Nodes=ALL\n");
	snprintf(path, sizeof(path), "%s/ng/slurm.conf", tmp);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *g = NULL;
		int r = slurm_conf_node_gres(path, cases[i].node, &g);

		ok(cases[i].want
		       ? r == 0 && streq(g, cases[i].want)
		       : r == -ENOENT && strstr(jobcg_last_error()->message, "slurm.conf") &&
			     strstr(jobcg_last_error()->message, cases[i].node),
		   "node %s: Gres=%s (r %d, %s)", cases[i].node,
		   cases[i].want ? cases[i].want : "none", r,
		   r == 0 ? g : jobcg_last_error()->message);
		free(g);
	}
	put("ng/bad.conf", "ClusterName=c\nNodeName=n[1-4 Gres=gpu:1\n");
	snprintf(path, sizeof(path), "%s/ng/bad.conf", tmp);
	{
		char *g = NULL;
		int r = slurm_conf_node_gres(path, "n1", &g);

		ok(r == -EINVAL && jobcg_last_error()->line == 2,
		   "a NodeName= that does not parse: an error at its line (%s)",
		   jobcg_last_error()->message);
	}

	/* What a big cluster's slurm.conf costs each step with GPUs (logged, not asserted: the
	 * sanitizers slow this build). */
	{
		FILE *f;
		struct timespec a, b;
		char *g = NULL;
		int r;

		snprintf(path, sizeof(path), "%s/ng/big.conf", tmp);
		f = fopen(path, "we");
		if (!f)
			abort();
		fputs("ClusterName=big\nGresTypes=gpu\nNodeName=DEFAULT CPUs=128 RealMemory=512000 "
		      "Gres=gpu:a100:4\n",
		      f);
		for (int i = 0; i < 9990; i++)
			fprintf(
			    f,
			    "NodeName=r%04d[01-64] Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 "
			    "Gres=gpu:a100:%d Feature=rack%d\n",
			    i, 1 + i % 8, i);
		fputs("NodeName=last Gres=gpu:h100:8\n", f);
		fclose(f);
		clock_gettime(CLOCK_MONOTONIC, &a);
		r = slurm_conf_node_gres(path, "last", &g);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ok(r == 0 && streq(g, "gpu:h100:8"),
		   "a 10,000-line slurm.conf: the last node's Gres=");
		tap_diag("10,000-line slurm.conf scanned in %.1f ms",
			 (double)(b.tv_sec - a.tv_sec) * 1e3 +
			     (double)(b.tv_nsec - a.tv_nsec) / 1e6);
		free(g);
	}
}

/* The plugin's path end to end: slurm.conf's Gres= orders Slurm's gres.conf, and jobcg's must
 * list the GPUs in that order; a copy in line order is refused naming both files. */
static void test_typed_mapping(void)
{
	struct jobcg_config *jc = NULL, *jc2 = NULL, *sc = NULL;
	struct jobcg_gres_node *jn, *jn2, *sn = NULL;
	char spath[PATH_MAX], cpath[PATH_MAX];
	char **d = NULL;
	int r;

	put("tm/slurm.conf", "ClusterName=c\nGresTypes=gpu\nNodeName=n1 Gres=gpu:ta:1,gpu:tb:1\n");
	put("tm/gres.conf",
	    "Name=gpu Type=tb File=/dev/nvidia1\nName=gpu Type=ta File=/dev/nvidia0\n");
	snprintf(spath, sizeof(spath), "%s/tm/gres.conf", tmp);
	snprintf(cpath, sizeof(cpath), "%s/tm/slurm.conf", tmp);
	/* jobcg's a copy of Slurm's (line order), and one in Slurm's numbering. */
	jn = node_of("tmj/gres.conf",
		     "Name=gpu Type=tb File=/dev/nvidia1\nName=gpu Type=ta File=/dev/nvidia0\n",
		     "n1", &jc);
	jn2 = node_of("tmj2/gres.conf",
		      "Name=gpu Type=ta File=/dev/nvidia0\nName=gpu Type=tb File=/dev/nvidia1\n",
		      "n1", &jc2);
	r = jobcg_config_load_files(NULL, spath, "n1", JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV,
				    &sc);
	if (r >= 0)
		r = slurm_gpu_node_new(sc, spath, cpath, "n1", &sn);
	ok(r == 0, "Slurm's gres.conf ordered by slurm.conf (%s)",
	   r < 0 ? jobcg_last_error()->message : "ok");
	if (r < 0 || !jn || !jn2)
		return;
	r = jobcg_gres_slurm_gpu(jn, "/etc/jobcg/gres.conf", sn, spath, 0);
	ok(r == -EINVAL &&
	       strstr(jobcg_last_error()->message, "GPU 0 is /dev/nvidia0 in Slurm's") &&
	       strstr(jobcg_last_error()->message, "tm/gres.conf:2") &&
	       strstr(jobcg_last_error()->message, "/dev/nvidia1 in jobcg's") &&
	       strstr(jobcg_last_error()->message, "tmj/gres.conf:1"),
	   "gpu:ta's index 0 against a line-order copy: refused naming both files (%s)",
	   jobcg_last_error()->message);
	ok(jobcg_gres_slurm_compare(jn, "J", sn, spath, &d) == 0 && count(d) == 2,
	   "the line-order copy differs at both GPUs");
	strv_drop(d), d = NULL;
	r = jobcg_gres_slurm_gpu(jn2, "J", sn, spath, 0);
	ok(r >= 0 &&
	       streq(jobcg_gres_node_device(jn2, (unsigned)r)->rec->files[0].path, "/dev/nvidia0"),
	   "jobcg's in Slurm's numbering: index 0 is the ta GPU, /dev/nvidia0");
	ok(jobcg_gres_slurm_compare(jn2, "J", sn, spath, &d) == 0 && count(d) == 0,
	   "and the two agree");
	strv_drop(d), d = NULL;
	jobcg_gres_node_free(sn), sn = NULL;
	jobcg_config_free(sc), sc = NULL;

	/* No line for this node in slurm.conf: refused, naming slurm.conf. */
	put("tm/slurm.conf", "ClusterName=c\nNodeName=n9 Gres=gpu:2\n");
	r = jobcg_config_load_files(NULL, spath, "n1", JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV,
				    &sc);
	if (r >= 0)
		r = slurm_gpu_node_new(sc, spath, cpath, "n1", &sn);
	ok(r == -ENOENT &&
	       strstr(jobcg_last_error()->message, "tm/slurm.conf has no NodeName= line") &&
	       strstr(jobcg_last_error()->message, "Gres="),
	   "a node slurm.conf does not list: refused (%s)", jobcg_last_error()->message);
	jobcg_gres_node_free(sn);
	jobcg_config_free(sc);
	jobcg_gres_node_free(jn), jobcg_gres_node_free(jn2);
	jobcg_config_free(jc), jobcg_config_free(jc2);
}

/* Run `jobcg --config-dir tmp/cli check ARGS` as node n1: its output and exit status. */
/* `jobcg check ARGS` for node n1 with the environment's SLURM_CONF set to @slurm_conf, or
 * removed when it is NULL (the host's Slurm, if any, is not this test's). */
static char *check_in(const char *slurm_conf, const char *args, int *rc)
{
	char cmd[PATH_MAX * 3], *out = calloc(1, 65536);
	size_t len = 0, n;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "%s%s%s JOBCG_NODENAME=n1 '%s/cli/jobcg' --config-dir '%s/cli' check %s 2>&1",
		 slurm_conf ? "SLURM_CONF='" : "env -u SLURM_CONF", slurm_conf ? slurm_conf : "",
		 slurm_conf ? "'" : "", getenv("JOBCG_BUILD_ROOT"), tmp, args);
	p = popen(cmd, "re");
	if (!p || !out)
		abort();
	while (len < 65535 && (n = fread(out + len, 1, 65535 - len, p)) > 0)
		len += n;
	*rc = WEXITSTATUS(pclose(p));
	return out;
}

static char *check(const char *args, int *rc)
{
	return check_in(NULL, args, rc);
}

static void test_cli(void)
{
	char args[PATH_MAX + 64], *out;
	int rc;

	if (!getenv("JOBCG_BUILD_ROOT")) {
		tap_skip("JOBCG_BUILD_ROOT not set (run through meson test)");
		return;
	}
	/* Device files that exist on every host: jobcg's gres.conf is stat()ed. */
	put("cli/cgroup.conf", "");
	put("cli/gres.conf", "NodeName=n1 Name=gpu File=/dev/null\n"
			     "NodeName=n1 Name=gpu File=/dev/zero\n");
	put("slurm-good.conf", "NodeName=n1 Name=gpu File=/dev/null\n"
			       "NodeName=n1 Name=gpu File=/dev/zero\n"
			       "NodeName=n9 Name=gpu File=/dev/full\n");
	put("slurm-bad.conf", "NodeName=n1 Name=gpu File=/dev/zero\n"
			      "NodeName=n1 Name=gpu File=/dev/null\n");

	/* Slurm numbers GPUs by the node's Gres= in slurm.conf (SLURM_CONF's, no plugin stack). */
	char cs[PATH_MAX];

	put("cs/slurm.conf", "ClusterName=c\nNodeName=n1 Gres=gpu:2\n");
	snprintf(cs, sizeof(cs), "%s/cs/slurm.conf", tmp);
	snprintf(args, sizeof(args), "--slurm-gres %s/slurm-good.conf", tmp);
	out = check_in(cs, args, &rc);
	ok(strstr(out, "slurm-good.conf lists this node's 2 GPU(s) as jobcg's gres.conf does") !=
	       NULL,
	   "agreeing files: said so (rc %d)", rc);
	free(out);

	snprintf(args, sizeof(args), "--slurm-gres %s/slurm-bad.conf", tmp);
	out = check_in(cs, args, &rc);
	ok(rc == 1 && strstr(out, "slurm-bad.conf differs from jobcg's gres.conf") &&
	       strstr(out, "  - GPU 0 is /dev/zero in Slurm's gres.conf") &&
	       strstr(out, "slurm-bad.conf:1") && strstr(out, "cli/gres.conf:1") &&
	       strstr(out, "  - GPU 1 is /dev/null in Slurm's gres.conf") &&
	       strstr(out, "slurm-bad.conf:2") && strstr(out, "cli/gres.conf:2"),
	   "swapped files: exit 1, each GPU named with both files and lines");
	if (!strstr(out, "GPU 1 is"))
		tap_diag("%s", out);
	free(out);

	snprintf(args, sizeof(args), "--json --slurm-gres %s/slurm-bad.conf", tmp);
	out = check_in(cs, args, &rc);
	ok(rc == 1 && strstr(out, "\"slurm_gres\"") && strstr(out, "\"differences\""),
	   "--json: slurm_gres with its differences");
	free(out);

	/* The reviewer's case: Slurm's lines tb then ta, slurm.conf's Gres= ta then tb. Slurm's
	 * GPU 0 is the ta line's /dev/null, as in jobcg's file: they agree. */
	put("slurm-typed.conf", "NodeName=n1 Name=gpu Type=tb File=/dev/zero\n"
				"NodeName=n1 Name=gpu Type=ta File=/dev/null\n");
	put("cs/slurm.conf", "ClusterName=c\nNodeName=n1 Gres=gpu:ta:1,gpu:tb:1\n");
	snprintf(args, sizeof(args), "--slurm-gres %s/slurm-typed.conf", tmp);
	out = check_in(cs, args, &rc);
	ok(strstr(out, "slurm-typed.conf lists this node's 2 GPU(s) as jobcg's gres.conf does") !=
	       NULL,
	   "typed: Slurm's numbering by Gres= types matches jobcg's file (rc %d)", rc);
	if (!strstr(out, "slurm-typed.conf lists"))
		tap_diag("%s", out);
	free(out);
	put("cs/slurm.conf", "ClusterName=c\nNodeName=n1 Gres=gpu:tb:1,gpu:ta:1\n");
	out = check_in(cs, args, &rc);
	ok(rc == 1 && strstr(out, "slurm-typed.conf differs from jobcg's gres.conf") &&
	       strstr(out, "  - GPU 0 is /dev/zero in Slurm's gres.conf") &&
	       strstr(out, "slurm-typed.conf:1") && strstr(out, "in the order Slurm numbers them"),
	   "typed, tb first in Gres=: GPU 0 is the tb line's file, refused (rc %d)", rc);
	if (!strstr(out, "GPU 0 is /dev/zero"))
		tap_diag("%s", out);
	free(out);
	put("slurm-typed.conf", "AutoDetect=rsmi\nNodeName=n1 Name=gpu File=/dev/null\n"
				"NodeName=n1 Name=gpu File=/dev/zero\n");
	out = check_in(cs, args, &rc);
	ok(rc == 1 && strstr(out, "slurm-typed.conf cannot be compared") &&
	       strstr(out, "AutoDetect=rsmi"),
	   "AutoDetect=rsmi in Slurm's gres.conf: cannot be compared, said why (rc %d)", rc);
	free(out);
	put("cs/slurm.conf", "ClusterName=c\n");
	snprintf(args, sizeof(args), "--slurm-gres %s/slurm-good.conf", tmp);
	out = check_in(cs, args, &rc);
	ok(rc == 1 && strstr(out, "slurm-good.conf cannot be compared") &&
	       strstr(out, "has no NodeName= line for node n1"),
	   "slurm.conf without this node: cannot be compared (rc %d)", rc);
	free(out);

	snprintf(args, sizeof(args), "--slurm-gres %s/no-such.conf", tmp);
	out = check(args, &rc);
	ok(rc == 1 && strstr(out, "no-such.conf cannot be compared") && strstr(out, "No such file"),
	   "a named file that does not exist: exit 1, said why");
	free(out);

	out = check("--slurm-gres none", &rc);
	ok(!strstr(out, "Slurm's gres.conf:"), "--slurm-gres none: not compared");
	free(out);

	/* Slurm's files found through SLURM_CONF, as Slurm's commands find them: the
	 * plugstack.conf beside it loads the plugin, and its gres.conf lists the GPUs swapped. */
	char sc[PATH_MAX], want[PATH_MAX + 64];

	put("scli/slurm.conf", "ClusterName=c\nGresTypes=gpu\nNodeName=n1 Gres=gpu:2\n");
	put("scli/plugstack.conf", "required /usr/lib/jobcg_spank.so conf=/etc/jobcg\n");
	put("scli/gres.conf", "NodeName=n1 Name=gpu File=/dev/zero\n"
			      "NodeName=n1 Name=gpu File=/dev/null\n");
	snprintf(sc, sizeof(sc), "%s/scli/slurm.conf", tmp);
	out = check_in(sc, "", &rc);
	snprintf(want, sizeof(want), "%s/scli/gres.conf differs from jobcg's gres.conf", tmp);
	ok(rc == 1 && strstr(out, want) && strstr(out, "scli/slurm.conf lists gpu"),
	   "SLURM_CONF: the gres.conf and slurm.conf beside it are checked (rc %d)", rc);
	if (!strstr(out, want))
		tap_diag("%s", out);
	free(out);

	/* Where slurm.conf's PlugStackConfig= (relative to its directory) includes, through a glob,
	 * the file that loads the plugin with its slurm_gres=: that file is compared. The
	 * plugstack.conf beside slurm.conf is not Slurm's then. */
	put("sinc/slurm.conf", "ClusterName=c\nGresTypes=gpu\nPlugStackConfig=stack/"
			       "main.conf\nNodeName=n1 Gres=gpu:2\n");
	put("sinc/plugstack.conf", "required /usr/lib/jobcg_spank.so slurm_gres=/nonexistent\n");
	put("sinc/stack/main.conf", "# the site's plugins\ninclude  stack.d/*.conf   # each\n");
	put("sinc/stack/stack.d/10-other.conf", "optional /usr/lib/other.so\n");
	snprintf(want, sizeof(want),
		 "required\t/usr/lib/jobcg_spank.so  conf=/etc/jobcg "
		 "slurm_gres=%s/slurm-bad.conf\n",
		 tmp);
	put("sinc/stack/stack.d/20-jobcg.conf", want);
	snprintf(sc, sizeof(sc), "%s/sinc/slurm.conf", tmp);
	out = check_in(sc, "", &rc);
	ok(rc == 1 && strstr(out, "/slurm-bad.conf differs from jobcg's gres.conf") &&
	       strstr(out, "sinc/slurm.conf lists gpu"),
	   "PlugStackConfig= and its include: the plugin's slurm_gres= file is compared (rc %d)",
	   rc);
	if (!strstr(out, "slurm-bad.conf differs"))
		tap_diag("%s", out);
	free(out);

	/* Slurm's own cgroup plugins beside jobcg's: named, exit 1; proctrack/cgroup is Slurm's
	 * default. The agreeing gres.conf keeps the other checks quiet. */
	static const struct {
		const char *keys, *want;
		int rc;
	} plugins[] = {
	    {"ProctrackType=proctrack/linuxproc\nTaskPlugin=task/affinity\n",
	     "ProctrackType=proctrack/linuxproc, TaskPlugin=task/affinity leave the tasks' cgroups "
	     "to jobcg",
	     0},
	    {"TaskPlugin=task/affinity\n", "ProctrackType=proctrack/cgroup (Slurm's default", 1},
	    {"ProctrackType=proctrack/linuxproc\nTaskPlugin=affinity,CGROUP\n",
	     "TaskPlugin= lists task/cgroup (it moves each task out of jobcg's cgroup", 1},
	};
	put("sp/plugstack.conf", "required /usr/lib/jobcg_spank.so\n");
	put("sp/gres.conf", "NodeName=n1 Name=gpu File=/dev/null\n"
			    "NodeName=n1 Name=gpu File=/dev/zero\n");
	snprintf(sc, sizeof(sc), "%s/sp/slurm.conf", tmp);
	for (size_t i = 0; i < sizeof(plugins) / sizeof(plugins[0]); i++) {
		char text[512];

		snprintf(text, sizeof(text),
			 "ClusterName=c\nGresTypes=gpu\nNodeName=n1 Gres=gpu:2\n%s",
			 plugins[i].keys);
		put("sp/slurm.conf", text);
		out = check_in(sc, "", &rc);
		/* Exit 0 also needs this host's other checks (sshd's PAM stack...) to pass. */
		ok((plugins[i].rc ? rc == 1 : !strstr(out, "jobcg_spank.so needs")) &&
		       strstr(out, plugins[i].want),
		   "Slurm's plugins, case %zu: %s, said so (rc %d)", i,
		   plugins[i].rc ? "exit 1" : "no conflict", rc);
		if (!strstr(out, plugins[i].want))
			tap_diag("%s", out);
		free(out);
	}
	out = check_in(sc, "--json", &rc);
	ok(strstr(out, "\"slurm_plugins\"") && strstr(out, "\"conflict\":true"),
	   "--json: slurm_plugins with the conflict");
	free(out);

	/* Loaded `optional`: Slurm runs the step uncontained where the plugin fails to load. */
	put("sp/slurm.conf", "ClusterName=c\nGresTypes=gpu\nNodeName=n1 Gres=gpu:2\n"
			     "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/affinity\n");
	out = check_in(sc, "", &rc);
	ok(!strstr(out, "as optional") && strstr(out, "loads jobcg_spank.so as required"),
	   "a required plugin line: said so");
	free(out);
	put("sp/plugstack.conf", "optional /usr/lib/jobcg_spank.so\n");
	out = check_in(sc, "", &rc);
	ok(rc == 1 && strstr(out, "loads jobcg_spank.so as optional") &&
	       strstr(out, "use 'required'"),
	   "an optional plugin line: exit 1, said why (rc %d)", rc);
	if (!strstr(out, "as optional"))
		tap_diag("%s", out);
	free(out);
	out = check_in(sc, "--json", &rc);
	ok(rc == 1 && strstr(out, "\"slurm_plugin_line\"") && strstr(out, "\"required\":false"),
	   "--json: slurm_plugin_line required false (rc %d)", rc);
	free(out);
	put("sp/plugstack.conf", "required /usr/lib/jobcg_spank.so\n");

	snprintf(sc, sizeof(sc), "%s/scli/gres.conf", tmp);
	(void)unlink(sc);
	snprintf(sc, sizeof(sc), "%s/scli/slurm.conf", tmp);
	out = check_in(sc, "", &rc);
	snprintf(want, sizeof(want), "is not in %s/scli (the directory of SLURM_CONF=%s)", tmp, sc);
	ok(rc == 1 && strstr(out, want), "SLURM_CONF: no gres.conf beside it: exit 1, said where");
	if (!strstr(out, want))
		tap_diag("%s", out);
	free(out);
}

/* Where Slurm's files are: SLURM_CONF's directory alone when set, else the two defaults. */
static void test_dirs(void)
{
	char path[PATH_MAX], found[PATH_MAX], where[PATH_MAX + 128], big[PATH_MAX + 16];
	struct slurm_dirs d;

	slurm_dirs_init(&d, NULL);
	ok(d.n == 2 && streq(d.dir[0], "/etc/slurm") && streq(d.dir[1], "/run/slurm/conf") &&
	       streq(slurm_dirs_describe(&d, where, sizeof(where)),
		     "/etc/slurm or /run/slurm/conf"),
	   "SLURM_CONF unset: /etc/slurm, then /run/slurm/conf (%s)", where);
	slurm_dirs_init(&d, "");
	ok(d.n == 2, "SLURM_CONF empty: the defaults");
	slurm_dirs_init(&d, "/etc/slurm-llnl/n1.conf");
	ok(d.n == 1 && streq(d.dir[0], "/etc/slurm-llnl") &&
	       streq(slurm_dirs_describe(&d, where, sizeof(where)),
		     "/etc/slurm-llnl (the directory of SLURM_CONF=/etc/slurm-llnl/n1.conf)"),
	   "SLURM_CONF set: its directory alone (%s)", where);
	slurm_dirs_init(&d, "/slurm.conf");
	ok(d.n == 1 && streq(d.dir[0], "/"), "SLURM_CONF in /: the root directory");
	slurm_dirs_init(&d, "etc/slurm.conf");
	ok(d.n == 0 && slurm_dirs_find(&d, "gres.conf", found) == -ENOENT &&
	       strstr(slurm_dirs_describe(&d, where, sizeof(where)), "not an absolute path"),
	   "a relative SLURM_CONF: no directory, said why (%s)", where);
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 12] = '/';
	big[sizeof(big) - 1] = 0;
	slurm_dirs_init(&d, big);
	ok(d.n == 0, "a SLURM_CONF whose directory is longer than PATH_MAX: no directory");

	put("sc/slurm.conf", "ClusterName=c\n");
	put("sc/gres.conf", "Name=gpu File=/dev/null\n");
	snprintf(path, sizeof(path), "%s/sc/slurm.conf", tmp);
	slurm_dirs_init(&d, path);
	ok(slurm_dirs_find(&d, "gres.conf", found) == 0 && strstr(found, "/sc/gres.conf") &&
	       slurm_dirs_find(&d, "cgroup.conf", found) == -ENOENT,
	   "a file beside SLURM_CONF is found, a missing one is not");
}

/* Lines of Slurm's plugstack.conf. */
static void test_plugstack_lines(void)
{
	static const struct {
		const char *line;
		enum slurm_plugstack_line kind;
		const char *arg;
	} cases[] = {
	    {"required /usr/lib/slurm/jobcg_spank.so conf=/etc/jobcg slurm_gres=/x/g.conf\n",
	     SLURM_PLUGSTACK_JOBCG, "/x/g.conf"},
	    {"optional\tjobcg_spank.so\r\n", SLURM_PLUGSTACK_JOBCG_OPTIONAL, ""},
	    /* Slurm's keywords are lower case only: another first word makes the line
	     * invalid, and Slurm ignores it. */
	    {"Optional jobcg_spank.so\n", SLURM_PLUGSTACK_OTHER, ""},
	    {"REQUIRED jobcg_spank.so\n", SLURM_PLUGSTACK_OTHER, ""},
	    {"load jobcg_spank.so slurm_gres=/z\n", SLURM_PLUGSTACK_OTHER, ""},
	    {"jobcg_spank.so\n", SLURM_PLUGSTACK_OTHER, ""},
	    {"required other.so slurm_gres=/y # jobcg_spank.so\n", SLURM_PLUGSTACK_OTHER, ""},
	    /* The plugin is the second word; later ones are its arguments. */
	    {"required other.so jobcg_spank.so slurm_gres=/y\n", SLURM_PLUGSTACK_OTHER, ""},
	    {"# required jobcg_spank.so\n", SLURM_PLUGSTACK_OTHER, ""},
	    {"include /etc/slurm/plugstack.conf.d/*  # all\n", SLURM_PLUGSTACK_INCLUDE,
	     "/etc/slurm/plugstack.conf.d/*"},
	    {"INCLUDE rel/*.conf", SLURM_PLUGSTACK_OTHER, ""},
	    {"Include rel/*.conf", SLURM_PLUGSTACK_OTHER, ""},
	    {"include\n", SLURM_PLUGSTACK_OTHER, ""},
	    {"", SLURM_PLUGSTACK_OTHER, ""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char line[256];
		const char *arg = NULL;
		enum slurm_plugstack_line k;

		snprintf(line, sizeof(line), "%s", cases[i].line);
		k = slurm_plugstack_line(line, &arg);
		ok(k == cases[i].kind && arg && streq(arg, cases[i].arg),
		   "plugstack.conf line %zu: kind %d, '%s'", i, (int)k, arg ? arg : "(null)");
	}
}

/* GresTypes= as Slurm reads slurm.conf: any case, a list, Include files, the latest line. */
static void test_gres_types(void)
{
	static const struct {
		const char *text;
		int want; /* 1 gpu listed, 0 not, -1 an error */
	} cases[] = {
	    {"ClusterName=c\nGresTypes=gpu\nNodeName=n[1-2] CPUs=2 Gres=gpu:2\n", 1},
	    {"gresTYPES = mps,GPU,nic\n", 1},
	    {"GresTypes=gpus,mps\n", 0},
	    {"ClusterName=c\n", 0},
	    {"GresTypes=gpu\nGresTypes=nic\n", 0},
	    {"ClusterName=c\nInclude gres-types.conf\n", 1},
	    {"GresTypes=gpu\nInclude no-such.conf\n", -1},
	    {"ClusterName=c\nGresTypes=\"gpu\n", -1},
	};
	char path[PATH_MAX];

	put("gres-types.conf", "GresTypes=gpu\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct slurm_conf_facts f = {};
		bool gpu;
		int r;

		put("slurm.conf", cases[i].text);
		snprintf(path, sizeof(path), "%s/slurm.conf", tmp);
		r = slurm_conf_read(path, &f);
		gpu = f.gres_gpu;
		slurm_conf_facts_done(&f);
		ok(cases[i].want < 0 ? r < 0 && strstr(jobcg_last_error()->file, "slurm.conf") &&
					   jobcg_last_error()->line == 2
				     : r == 0 && gpu == (cases[i].want == 1),
		   "slurm.conf case %zu: %s (r %d, gpu %d%s%s)", i,
		   cases[i].want < 0 ? "an error naming the file and line"
		   : cases[i].want   ? "gpu listed"
				     : "gpu not listed",
		   r, gpu, r < 0 ? ": " : "", r < 0 ? jobcg_last_error()->message : "");
	}
	snprintf(path, sizeof(path), "%s/no-such-slurm.conf", tmp);
	ok(slurm_conf_read(path, &(struct slurm_conf_facts){}) == -ENOENT,
	   "no slurm.conf: -ENOENT");

	/* PlugStackConfig=: the latest, any case, from an Include too. */
	struct slurm_conf_facts f = {};

	put("ps.conf", "PlugStackConfig=/a/plugstack.conf\n");
	put("slurm.conf", "ClusterName=c\nPLUGSTACKCONFIG=/b/x.conf\nInclude ps.conf\n");
	snprintf(path, sizeof(path), "%s/slurm.conf", tmp);
	ok(slurm_conf_read(path, &f) == 0 && f.plugstack && streq(f.plugstack, "/a/plugstack.conf"),
	   "PlugStackConfig=: the latest line, from an Include (%s)", f.plugstack);
	slurm_conf_facts_done(&f);
	put("slurm.conf", "ClusterName=c\n");
	ok(slurm_conf_read(path, &f) == 0 && !f.plugstack, "no PlugStackConfig=: none");
	slurm_conf_facts_done(&f);
}

/* Slurm 22.05's include modifiers (parse_config.c): "%c" is ClusterName= in lower case, in
 * slurm.conf only. */
static void test_include_modifiers(void)
{
	struct jobcg_config *c = NULL;
	struct slurm_conf_facts f = {};
	char path[PATH_MAX], *g = NULL, *e = NULL;
	int r;

	ok(conf_include_expand("a%cb%c", "X%c", &e) == 0 && streq(e, "ax%cbx%c"),
	   "every %%c expanded, in lower case, the value not looked into again (%s)",
	   e ? e : "(none)");
	free(e);
	e = NULL;
	ok(conf_include_expand("100%%c%d%", "c1", &e) == 0 && streq(e, "100%c1%d%"),
	   "other %% sequences left as Slurm leaves them (%s)", e ? e : "(none)");
	free(e);
	e = NULL;
	ok(conf_include_expand("plain.conf", NULL, &e) == 0 && streq(e, "plain.conf"),
	   "no %%c: the name as it is");
	free(e);
	is_int(conf_include_expand("%c.conf", NULL, &e), -ENOENT, "%%c without a ClusterName");

	put("im/rvslurm_nodes.conf", "NodeName=n1 Gres=gpu:2\n");
	put("im/rvslurm/types.conf", "GresTypes=gpu\n");
	put("im/slurm.conf", "ClusterName=RVslurm\nInclude %c_nodes.conf\nInclude %c/types.conf\n");
	snprintf(path, sizeof(path), "%s/im/slurm.conf", tmp);
	r = slurm_conf_node_gres(path, "n1", &g);
	ok(r == 0 && streq(g, "gpu:2"), "Include %%c_nodes.conf: rvslurm_nodes.conf read (%s)",
	   r == 0 ? g : jobcg_last_error()->message);
	free(g);
	g = NULL;
	r = slurm_conf_read(path, &f);
	ok(r == 0 && f.gres_gpu, "Include %%c/types.conf: GresTypes=gpu read from it (%s)",
	   r == 0 ? "" : jobcg_last_error()->message);
	slurm_conf_facts_done(&f);
	put("im/nested.conf", "ClusterName=Other\nInclude %c_nodes.conf\n");
	put("im/other_nodes.conf", "NodeName=n1 Gres=gpu:3\n");
	put("im/slurm.conf", "ClusterName=rvslurm\nInclude nested.conf\n");
	r = slurm_conf_node_gres(path, "n1", &g);
	ok(r == 0 && streq(g, "gpu:3"), "the latest ClusterName=, from an included file (%s)",
	   r == 0 ? g : jobcg_last_error()->message);
	free(g);
	g = NULL;
	put("im/slurm.conf", "Include %c_nodes.conf\nClusterName=rvslurm\n");
	r = slurm_conf_node_gres(path, "n1", &g);
	ok(r == -EINVAL && jobcg_last_error()->line == 1 &&
	       strstr(jobcg_last_error()->message, "ClusterName"),
	   "%%c before any ClusterName=: an error at its line, as in Slurm (%s)",
	   jobcg_last_error()->message);
	free(g);

	/* Slurm's gres.conf has no ClusterName: Slurm fails on %c there. */
	put("im/gres.conf", "Name=gpu File=/dev/null\nInclude %c_gres.conf\n");
	put("im/c_gres.conf", "\n");
	snprintf(path, sizeof(path), "%s/im/gres.conf", tmp);
	r = jobcg_config_load_files(
	    NULL, path, "n1", JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV | JOBCG_CONFIG_NO_ENTRIES,
	    &c);
	ok(r == -EINVAL && strstr(jobcg_last_error()->message, "slurm.conf only"),
	   "gres.conf: Include %%c refused (%s)", jobcg_last_error()->message);
	jobcg_config_free(c);
}

int main(void)
{
	if (!mkdtemp(tmp))
		tap_plan_skip_all("mkdtemp failed");
	test_compare();
	test_dirs();
	test_plugstack_lines();
	test_cli();
	test_gres_types();
	test_slurm_order();
	test_nvml_order();
	test_nvml_mapping();
	test_node_gres();
	test_typed_mapping();
	test_include_modifiers();
	{
		char cmd[PATH_MAX];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
		(void)system(cmd);
	}
	return tap_done();
}
