/*
 * Loads every real cgroup.conf and gres.conf of ../shared/testdata/slurm-conf (never copied into
 * this repository) and checks the records and values that its INDEX.md says Slurm gets.
 */
#include <limits.h>

#include "config_internal.h"
#include "parse.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static char dir[PATH_MAX];

static struct jobcg_config *load(const char *kind, const char *name, const char *host)
{
	char path[PATH_MAX + 128];
	struct jobcg_config *c = NULL;
	int r;

	snprintf(path, sizeof(path), "%s/%s/%s.conf", dir, kind, name);
	if (streq(kind, "gres"))
		r = jobcg_config_load_files(NULL, path, host,
					    JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV, &c);
	else
		r = jobcg_config_load_files(path, NULL, host,
					    JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV, &c);
	if (!ok(r == 0 && c, "%s/%s loads for host %s", kind, name, host)) {
		char buf[8192];
		tap_diag("  %s", jobcg_error_format(r, buf, sizeof(buf)));
	}
	return c;
}

/* "LINE NAME TYPE FILES COUNT CORES" per record, "; " between records. */
static char *summary(const struct jobcg_config *c)
{
	size_t cap = 1 << 16, len = 0;
	char *out = calloc(1, cap);

	for (size_t i = 0; out && i < c->gres.nrecords; i++) {
		const struct jobcg_gres_record *r = &c->gres.records[i];
		char files[4096] = "";
		_cleanup_free_ char *cores = NULL;

		for (size_t f = 0; f < r->nfiles; f++) {
			if (f)
				strcat(files, ",");
			strncat(files, r->files[f].path, sizeof(files) - strlen(files) - 2);
		}
		if (r->cores && jobcg_format_cpulist(r->cores, r->cores_words, &cores) < 0)
			abort();
		len +=
		    (size_t)snprintf(out + len, cap - len, "%s%u %s %s %s %llu %s", i ? "; " : "",
				     r->origin.line, r->name, r->type ? r->type : "-",
				     r->nfiles ? files : "-", (unsigned long long)r->count,
				     !r->cores ? "-"
				     : *cores  ? cores
					       : "{}");
	}
	return out;
}

static size_t count_warnings(const struct jobcg_config *c, const char *needle)
{
	size_t n = 0;

	for (char **w = c->warnings; w && *w; w++)
		if (strstr(*w, needle))
			n++;
	return n;
}

static void gres(const char *name, const char *host, const char *want)
{
	struct jobcg_config *c = load("gres", name, host);
	_cleanup_free_ char *got = NULL;

	if (!c)
		return;
	got = summary(c);
	is_str(got, want, "  records");
	jobcg_config_free(c);
}

static const char *ad(const struct jobcg_config *c)
{
	return c->gres.node_autodetect ? c->gres.node_autodetect
	       : c->gres.autodetect    ? c->gres.autodetect
				       : "(none)";
}

static void gres_ad(const char *name, const char *host, const char *want_ad, const char *want)
{
	struct jobcg_config *c = load("gres", name, host);
	_cleanup_free_ char *got = NULL;

	if (!c)
		return;
	got = summary(c);
	is_str(got, want, "  records");
	is_str(ad(c), want_ad, "  effective AutoDetect");
	for (size_t i = 0; i < c->gres.nrecords; i++)
		if (streq(want_ad, "(none)") ? c->gres.records[i].autodetect != NULL
					     : !c->gres.records[i].autodetect ||
						   !streq(c->gres.records[i].autodetect, want_ad)) {
			ok(0, "  record %zu carries AutoDetect %s", i, want_ad);
			break;
		}
	jobcg_config_free(c);
}

static void test_gres_files(void)
{
	struct jobcg_config *c;

	gres_ad("01-schedmd-man-ex1-mps-autodetect", "any", "nvml",
		"6 gpu gtx560 /dev/nvidia0 1 0-1; 7 gpu tesla /dev/nvidia1 1 2-3; "
		"8 mps - /dev/nvidia0 100 0-1; 9 mps - /dev/nvidia1 100 2-3");
	gres("02-schedmd-man-ex2-three-gpus", "any",
	     "5 gpu tesla /dev/nvidia0 1 0-1; 5 gpu tesla /dev/nvidia1 1 0-1; 8 gpu tesla "
	     "/dev/nvidia3 1 2-3");
	gres("03-schedmd-man-ex3-hostlists", "tux3",
	     "9 gpu - /dev/nvidia0 1 -; 9 gpu - /dev/nvidia2 1 -; 9 gpu - /dev/nvidia3 1 -");
	gres("03-schedmd-man-ex3-hostlists", "tux10",
	     "10 gpu - /dev/nvidia0 1 -; 10 gpu - /dev/nvidia1 1 -; 10 gpu - /dev/nvidia2 1 -; 10 "
	     "gpu - /dev/nvidia3 1 -");
	gres("03-schedmd-man-ex3-hostlists", "tux16", "");
	gres_ad("04-schedmd-man-ex4-autodetect-off", "tux3", "off",
		"7 gpu - /dev/nvidia0 1 -; 7 gpu - /dev/nvidia1 1 -; 7 gpu - /dev/nvidia2 1 -; 7 "
		"gpu - /dev/nvidia3 1 -");
	gres_ad("04-schedmd-man-ex4-autodetect-off", "tux1", "nvml", "");
	gres_ad("05-schedmd-man-ex5-per-node-autodetect", "tux5", "nvml", "");
	gres_ad("05-schedmd-man-ex5-per-node-autodetect", "tux9", "rsmi", "");
	gres_ad("05-schedmd-man-ex5-per-node-autodetect", "tux13", "(none)",
		"7 gpu - /dev/nvidia0 1 -; 7 gpu - /dev/nvidia1 1 -; 7 gpu - /dev/nvidia2 1 -; 7 "
		"gpu - /dev/nvidia3 1 -");
	if ((c = load("gres", "05-schedmd-man-ex5-per-node-autodetect", "tux5"))) {
		is_int(strv_length(c->warnings), 0,
		       "  a NodeName line with AutoDetect and no Name is silent");
		jobcg_config_free(c);
	}
	if ((c = load("gres", "06-schedmd-man-ex6-bandwidth-countonly", "tux0"))) {
		_cleanup_free_ char *s = summary(c);
		is_str(s, "6 bandwidth lustre - 4294967296 -", "  Count=4G");
		ok(c->gres.nrecords == 1 && (c->gres.records[0].flags & JOBCG_GRES_FLAG_COUNT_ONLY),
		   "  Flags=CountOnly");
		jobcg_config_free(c);
	}
	gres_ad("07-schedmd-gres-html-mps-bandwidth", "any", "nvml",
		"3 gpu gp100 /dev/nvidia0 1 0-1; 4 gpu gp100 /dev/nvidia1 1 0-1; 5 gpu p6000 "
		"/dev/nvidia2 1 2-3; "
		"6 gpu p6000 /dev/nvidia3 1 2-3; 7 mps - /dev/nvidia0 200 -; 8 mps - /dev/nvidia1 "
		"200 -; "
		"9 mps - /dev/nvidia2 100 -; 10 mps - /dev/nvidia3 100 -; 11 bandwidth lustre - "
		"4294967296 -");
	gres_ad("08-schedmd-gres-html-shard-global", "any", "nvml",
		"4 gpu gp100 /dev/nvidia0 1 0-1; 5 gpu gp100 /dev/nvidia1 1 0-1; 6 gpu p6000 "
		"/dev/nvidia2 1 2-3; "
		"7 gpu p6000 /dev/nvidia3 1 2-3; 9 shard - - 32 -");
	gres("09-schedmd-testsuite-7.17.1-bracket-cores", "any",
	     "4 gpu - /dev/tty0 1 0-3; 4 gpu - /dev/tty1 1 0-3; 4 gpu - /dev/tty2 1 0-3; 4 gpu - "
	     "/dev/tty3 1 0-3; "
	     "5 gpu - /dev/tty4 1 4-7; 5 gpu - /dev/tty5 1 4-7; 5 gpu - /dev/tty6 1 4-7; 5 gpu - "
	     "/dev/tty7 1 4-7");
	if ((c = load("gres", "10-schedmd-testsuite-39.18-c10-links", "any"))) {
		static const int want[8][8] = {
		    {-1, 2, 2, 0, 0, 0, 0, 0}, {2, -1, 2, 0, 0, 0, 0, 0}, {2, 2, -1, 0, 0, 0, 0, 0},
		    {0, 0, 0, -1, 0, 1, 0, 0}, {0, 0, 0, 0, -1, 1, 0, 0}, {0, 0, 0, 1, 1, -1, 0, 0},
		    {0, 0, 0, 0, 0, 0, -1, 2}, {0, 0, 0, 0, 0, 0, 2, -1},
		};
		bool good = c->gres.nrecords == 8;
		for (size_t i = 0; good && i < 8; i++) {
			const struct jobcg_gres_record *r = &c->gres.records[i];
			good = r->nlinks == 8 && memcmp(r->links, want[i], sizeof(want[i])) == 0 &&
			       r->cores && r->cores[0] == 0xf && r->type &&
			       streq(r->type, "tesla") && r->index == i;
		}
		ok(good, "  8 tesla records with their Links, Cores 0-3 and index 0..7");
		jobcg_config_free(c);
	}
	if ((c = load("gres", "11-schedmd-testsuite-39.18-c48-cores-empty-null", "any"))) {
		_cleanup_free_ char *s = summary(c);
		is_str(s,
		       "2 gpu tesla /dev/nvidia1 1 -; 3 gpu tesla /dev/nvidia2 1 -; 4 gpu tesla "
		       "/dev/nvidia3 1 {}; "
		       "5 gpu tesla /dev/nvidia4 1 0; 6 gpu tesla /dev/nvidia5 1 0",
		       "  Cores unset, unset, \"\" (empty set), null (core 0 as Slurm), 0");
		is_int(count_warnings(c, "null"), 1, "  Cores=null warns");
		jobcg_config_free(c);
	}
	if ((c = load("gres", "12-schedmd-testsuite-39.18-c40-links-invalid-ignored", "any"))) {
		bool nolinks = c->gres.nrecords == 4;
		for (size_t i = 0; nolinks && i < 4; i++)
			nolinks = !c->gres.records[i].links && c->gres.records[i].nlinks == 0;
		ok(nolinks, "  four records, invalid Links dropped");
		is_int(count_warnings(c, "invalid Links"), 3,
		       "  three invalid Links warnings (as Slurm's errors)");
		jobcg_config_free(c);
	}
	gres("13-schedmd-testsuite-39.18-c22-count-10g", "any", "1 tmpdisk - - 10737418240 -");
	if ((c = load("gres", "14-marshallgarey-multicluster-c1", "n1-3"))) {
		_cleanup_free_ char *s = summary(c);
		is_str(s,
		       "2 gpu tty /dev/tty0 1 -; 2 gpu tty /dev/tty1 1 -; 2 gpu tty /dev/tty2 1 -; "
		       "2 gpu tty /dev/tty3 1 -; "
		       "3 mps - - 1000 -; 4 mem - - 53687091200 -",
		       "  records for n1-3");
		is_int(count_warnings(c, "no_consume"), 1, "  unknown Flags word no_consume warns");
		jobcg_config_free(c);
	}
	gres("14-marshallgarey-multicluster-c1", "n1-7",
	     "2 gpu tty /dev/tty0 1 -; 2 gpu tty /dev/tty1 1 -; 2 gpu tty /dev/tty2 1 -; 2 gpu tty "
	     "/dev/tty3 1 -; "
	     "3 mps - - 1000 -; 5 mem - - 268435456000 -");
	if ((c = load("gres", "15-ceems-testdata-mig-shard-mps", "any"))) {
		_cleanup_free_ char *s = summary(c);
		is_str(
		    s,
		    "3 gpu a100 /dev/nvidia0 1 -; 4 gpu a100 /dev/nvidia1 1 -; "
		    "5 gpu 4g.20gb /dev/nvidia-caps/nvidia-cap283 1 -; 6 gpu 1g.5gb "
		    "/dev/nvidia-caps/nvidia-cap319 1 -; "
		    "7 gpu 1g.5gb /dev/nvidia-caps/nvidia-cap391 1 -; 8 gpu 4g.20gb "
		    "/dev/nvidia-caps/nvidia-cap418 1 -; "
		    "9 gpu 2g.10gb /dev/nvidia-caps/nvidia-cap454 1 -; 10 gpu 1g.5gb "
		    "/dev/nvidia-caps/nvidia-cap463 1 -; "
		    "11 gpu a100 /dev/nvidia4 1 -; 12 gpu a100 /dev/nvidia5 1 -; 13 gpu a100 "
		    "/dev/nvidia6 1 -; "
		    "14 gpu a100 /dev/nvidia7 1 -; 15 shard - /dev/nvidia-caps/nvidia-cap283 8 -; "
		    "16 shard - /dev/nvidia-caps/nvidia-cap418 8 -; 16 shard - "
		    "/dev/nvidia-caps/nvidia-cap454 8 -; "
		    "17 mps - /dev/nvidia4,/dev/nvidia5 1000 -",
		    "  12 gpus, shard Count=16 spread over 2 files, mps MultipleFiles");
		is_str(ad(c), "nvml", "  AutoDetect=nvml");
		ok(c->gres.nrecords == 16 && c->gres.records[11].index == 11 &&
		       c->gres.records[14].index == 2 && c->gres.records[15].index == 0,
		   "  indices count per name in file order");
		jobcg_config_free(c);
	}
	gres("16-ceems-test-nodename-multibracket-tabs", "compute-ia827",
	     "7 shard - /dev/nvidia0 4 -; 7 shard - /dev/nvidia1 4 -; 7 shard - /dev/nvidia2 4 -; "
	     "7 shard - /dev/nvidia3 4 -; "
	     "8 shard - /dev/nvidia4 8 -; 8 shard - /dev/nvidia5 8 -; 8 shard - /dev/nvidia6 8 -; "
	     "8 shard - /dev/nvidia7 8 -");
	gres("16-ceems-test-nodename-multibracket-tabs", "compute-r3i5n2",
	     "4 shard - /dev/nvidia0 4 -; 4 shard - /dev/nvidia1 4 -; 5 shard - /dev/nvidia2 4 -; "
	     "5 shard - /dev/nvidia3 4 -");
	gres("16-ceems-test-nodename-multibracket-tabs", "compute-r7i3n8",
	     "4 shard - /dev/nvidia0 4 -; 4 shard - /dev/nvidia1 4 -; 5 shard - /dev/nvidia2 4 -; "
	     "5 shard - /dev/nvidia3 4 -");
	gres("16-ceems-test-nodename-multibracket-tabs", "compute-r3i8n0", "");
	gres_ad("17-ceems-test-shard-multiplefiles-range-tabs", "any", "nvml",
		"3 gpu 4g.24gb /dev/nvidia-caps/nvidia-cap21 1 -; 4 gpu 1g.6gb "
		"/dev/nvidia-caps/nvidia-cap66 1 -; "
		"5 gpu 1g.6gb /dev/nvidia-caps/nvidia-cap75 1 -; 6 gpu 1g.6gb "
		"/dev/nvidia-caps/nvidia-cap84 1 -; "
		"7 gpu 4g.24gb /dev/nvidia-caps/nvidia-cap156 1 -; 8 gpu 1g.6gb "
		"/dev/nvidia-caps/nvidia-cap201 1 -; "
		"9 gpu 1g.6gb /dev/nvidia-caps/nvidia-cap210 1 -; 10 gpu 1g.6gb "
		"/dev/nvidia-caps/nvidia-cap219 1 -; "
		"11 shard - /dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap156 8 -; "
		"12 shard - /dev/nvidia-caps/nvidia-cap66,/dev/nvidia-caps/nvidia-cap201 16 -; "
		"13 shard - /dev/nvidia-caps/nvidia-cap75,/dev/nvidia-caps/nvidia-cap210 8 -; "
		"14 shard - /dev/nvidia-caps/nvidia-cap84,/dev/nvidia-caps/nvidia-cap219 16 -");
	if ((c = load("gres", "18-mig-readme-rdgpu02-multiplefiles", "any"))) {
		bool good = c->gres.nrecords == 14;
		for (size_t i = 0; good && i < 14; i++) {
			const struct jobcg_gres_record *r = &c->gres.records[i];
			good = r->nfiles == 2 && r->count == 1 && streq(r->name, "gpu") &&
			       streq(r->type, "nvidia_a100_80gb_pcie_1g.10gb") &&
			       r->origin.line == i + 1 && !r->autodetect;
		}
		ok(good, "  14 MultipleFiles records of 2 files, count 1, in-line AutoDetect "
			 "without effect");
		is_str(c->gres.records[0].files[0].path, "/dev/nvidia-caps/nvidia-cap66",
		       "  first file");
		is_str(c->gres.records[13].files[1].path, "/dev/nvidia-caps/nvidia-cap256",
		       "  last file");
		is_int(count_warnings(c, "without NodeName"), 7, "  7 in-line AutoDetect warnings");
		jobcg_config_free(c);
	}
	if ((c = load("gres", "19-quattor-metaconfig-gres-name-not-first", "node002"))) {
		_cleanup_free_ char *s = summary(c);
		is_str(s,
		       "5 mps TeslaP100 /dev/nvidia0 1 -; 5 mps TeslaP100 /dev/nvidia1 1 -; "
		       "5 mps TeslaP100 /dev/nvidia2 1 -; 5 mps TeslaP100 /dev/nvidia3 1 -",
		       "  Name= after File= on a NodeName line (count 4 over 4 files)");
		is_str(c->gres.autodetect, "off", "  global AutoDetect=off");
		is_str(c->gres.node_autodetect, "off", "  node-local off");
		jobcg_config_free(c);
	}
	if ((c = load("gres", "19-quattor-metaconfig-gres-name-not-first", "node003"))) {
		_cleanup_free_ char *s = summary(c);
		is_str(s, "6 mps - /dev/nvidia1 100 2,4", "  node003: Cores=2,4 Count=100");
		ok(c->gres.nrecords == 1 && (c->gres.records[0].flags & JOBCG_GRES_FLAG_COUNT_ONLY),
		   "  CountOnly");
		jobcg_config_free(c);
	}
	gres_ad("19-quattor-metaconfig-gres-name-not-first", "node005", "nvml", "");
	gres("20-danielmc81-tabs-lowercase-nodename", "ibnodo2",
	     "1 gpu m2070q /dev/nvidia0 1 -; 1 gpu m2070q /dev/nvidia1 1 -; 1 gpu m2070q "
	     "/dev/nvidia2 1 -; 1 gpu m2070q /dev/nvidia3 1 -");
	gres("20-danielmc81-tabs-lowercase-nodename", "visualizacion1",
	     "2 gpu gtx970 /dev/nvidia0 1 -; 3 gpu gtx1060 /dev/nvidia1 1 -");
	gres_ad("21-hyxcl-bright-autogenerated", "nvl721001-T07", "nvml",
		"3 gpu - /dev/nvidia0 1 -; 3 gpu - /dev/nvidia1 1 -; 3 gpu - /dev/nvidia2 1 -; 3 "
		"gpu - /dev/nvidia3 1 -");
	gres_ad("21-hyxcl-bright-autogenerated", "nvl721001-T19", "(none)", "");
	if ((c = load("gres", "22-deepsquare-nodename-autodetect-no-name", "cn5"))) {
		is_int(c->gres.nrecords, 0, "  no record from a NodeName line without Name");
		is_str(c->gres.node_autodetect, "nvml", "  node-local AutoDetect=nvml");
		is_int(strv_length(c->warnings), 0, "  silently, as Slurm");
		jobcg_config_free(c);
	}
	gres("23-arlk-lambda-cpus-multirange", "lambda",
	     "1 gpu - /dev/nvidia0 1 0-15,32-47; 2 gpu - /dev/nvidia1 1 0-15,32-47; 3 gpu - "
	     "/dev/nvidia2 1 0-15,32-47; "
	     "4 gpu - /dev/nvidia3 1 0-15,32-47; 5 gpu - /dev/nvidia4 1 16-31,48-63; 6 gpu - "
	     "/dev/nvidia5 1 16-31,48-63; "
	     "7 gpu - /dev/nvidia6 1 16-31,48-63; 8 gpu - /dev/nvidia7 1 16-31,48-63");
	gres("24-andmax-mps-nocount-gpu_mem", "any",
	     "9 gpu tesla_k80 /dev/nvidia0 1 -; 10 gpu tesla_k80 /dev/nvidia1 1 -; 11 gpu "
	     "tesla_k80 /dev/nvidia2 1 -; "
	     "12 gpu tesla_k80 /dev/nvidia3 1 -; 13 mps - /dev/nvidia0 1 -; 14 mps - /dev/nvidia1 "
	     "1 -; "
	     "15 mps - /dev/nvidia2 1 -; 16 mps - /dev/nvidia3 1 -; 17 gpu_mem - - 11441 -");
	gres("25-uhh-comma-separated-files", "node3",
	     "3 gpu h100 /dev/null 1 -; 3 gpu h100 /dev/zero 1 -");
	gres("26-cinek810-tty-tmpfs-commented", "any",
	     "5 gpu tesla /dev/tty0 1 0-15; 5 gpu tesla /dev/tty1 1 0-15; 6 gpu tesla /dev/tty2 1 "
	     "16-31; "
	     "6 gpu tesla /dev/tty3 1 16-31; 9 tmpfs - - 400 -");
	gres("27-luvres-single-element-bracket", "cn81", "1 gpu gtx1060 /dev/nvidia0 1 -");
	gres("27-luvres-single-element-bracket", "cn83",
	     "3 gpu gtx1060 /dev/nvidia0 1 -; 3 gpu gtx1060 /dev/nvidia1 1 -");
	gres_ad("28-hpclab3-autodetect-nvidia", "gpu01", "nvidia",
		"2 gpu tesla_v100-sxm2-32gb /dev/nvidia0 1 -");
	gres("29-unomove-trailing-spaces", "crane2",
	     "19 gpu - /dev/nvidia0 1 -; 20 gpu - /dev/nvidia1 1 -; 21 gpu - /dev/nvidia2 1 -; 22 "
	     "gpu - /dev/nvidia3 1 -");
	if ((c = load("gres", "29-unomove-trailing-spaces", "crane0"))) {
		is_int(c->gres.nrecords, 8, "  crane0 has 8 records");
		jobcg_config_free(c);
	}
	gres("30-yahav-fakegpu-utf8-comments", "c2",
	     "8 gpu - /dev/fakegpu0 1 -; 8 gpu - /dev/fakegpu1 1 -");

	/* The only shared file whose devices exist everywhere: stat() them for real. */
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/gres/25-uhh-comma-separated-files.conf", dir);
	c = NULL;
	ok(jobcg_config_load_files(NULL, path, "node3", JOBCG_CONFIG_NO_ENV, &c) == 0 && c,
	   "25-uhh loads with stat() (/dev/null, /dev/zero)");
	if (c && c->gres.nrecords == 2) {
		const struct jobcg_gres_file *f0 = &c->gres.records[0].files[0],
					     *f1 = &c->gres.records[1].files[0];
		ok(f0->type == 'c' && f0->major == 1 && f0->minor == 3, "  /dev/null is c 1:3");
		ok(f1->type == 'c' && f1->major == 1 && f1->minor == 5, "  /dev/zero is c 1:5");
	}
	jobcg_config_free(c);
}

/* What Slurm gets from one shared cgroup.conf: its keys (value, and line where it matters),
 * the warnings, and what a file needs checked beyond its keys. */
struct key_want {
	const char *key, *value; /* value NULL: the key is unset */
	unsigned line;		 /* 0: any */
};

struct cg_case {
	const char *name;
	struct key_want keys[11];
	size_t ignored, total; /* obsolete keys warned "is ignored"; warnings in all */
	const char *warned;    /* a warning that must be there @nwarned times */
	size_t nwarned;
	bool (*fields)(const struct jobcg_config *c); /* the parsed struct, where it says more */
	const char *fields_what;
};

static bool swap_both(const struct jobcg_config *c)
{
	return c->cgroup.constrain_cores && c->cgroup.constrain_swap_space;
}

static bool swap_10(const struct jobcg_config *c)
{
	return c->cgroup.allowed_swap_space == 10.0;
}

static bool maxram_99(const struct jobcg_config *c)
{
	return c->cgroup.max_ram_percent == 99.0 && c->cgroup.signal_children_processes;
}

static const struct cg_case cg_cases[] = {
    {"01-schedmd-man-master-example",
     {{"ConstrainCores", "yes"},
      {"ConstrainDevices", "yes"},
      {"ConstrainRAMSpace", "yes"},
      {"ConstrainSwapSpace", "yes"},
      {"CgroupMountpoint", NULL}},
     0,
     0,
     .fields = swap_both,
     .fields_what = "struct fields set"},
    {"02-schedmd-etc-example-slurm-2.2",
     {{"ConstrainRAMSpace", "yes"},
      {"AllowedRAMSpace", "100"},
      {"ConstrainSwapSpace", "yes"},
      {"AllowedSwapSpace", "10"},
      {"ConstrainCores", "yes"}},
     5,
     5,
     .fields = swap_10,
     .fields_what = "AllowedSwapSpace is 10 percent"},
    {"03-fgci-ansible-role-releaseagentdir",
     {{"ConstrainCores", "yes"}, {"ConstrainRAMSpace", "no"}},
     2,
     2},
    {"04-npacore-warewulf-bright-generated-duplicates",
     {{"CgroupMountpoint", "/sys/fs/cgroup"},
      {"ConstrainCores", "yes", 22},
      {"ConstrainRAMSpace", "yes", 26},
      {"ConstrainSwapSpace", "no"},
      {"ConstrainDevices", "no"},
      {"AllowedRAMSpace", "100"},
      {"AllowedSwapSpace", "0"},
      {"MaxRAMPercent", "100"},
      {"MaxSwapPercent", "100"},
      {"MinRAMSpace", "30"}},
     5,
     7,
     "more than once",
     2},
    {"05-alicemirror-picluster-allowed-devices-file",
     {{"CgroupMountpoint", "/sys/fs/cgroup"},
      {"ConstrainCores", "no"},
      {"ConstrainRAMSpace", "yes"},
      {"AllowedRAMSpace", "100"},
      {"MinRAMSpace", "30"}},
     4,
     4,
     "AllowedDevicesFile",
     1},
    {"06-marshallgarey-multicluster-c1",
     {{"ConstrainRAMSpace", "yes"}, {"ConstrainDevices", "yes"}},
     1,
     1},
    /* AllowedKmemSpace=yes is warned about, its value not checked. */
    {"07-nebius-soperator-v2-custom-kmem",
     {{"CgroupMountpoint", "/sys/fs/cgroup"},
      {"CgroupPlugin", "cgroup/v2"},
      {"EnableControllers", "yes"},
      {"IgnoreSystemd", "yes"},
      {"ConstrainCores", "no"},
      {"ConstrainSwapSpace", "no"}},
     1,
     1,
     "AllowedKmemSpace",
     1},
    /* One warning that is not an obsolete key: jobcg says it uses v2 anyway. */
    {"08-ubccr-hpc-toolset-v1-no-final-newline",
     {{"CgroupPlugin", "cgroup/v1"}, {"AllowedSwapSpace", "5"}, {"ConstrainSwapSpace", "yes"}},
     0,
     1},
    {"09-deepsquare-taskaffinity-allowedram130",
     {{"AllowedRAMSpace", "130"}, {"ConstrainDevices", "yes"}},
     2,
     2},
    {"10-nviets-nixos-inline-comment",
     {{"CgroupMountpoint", "/sys/fs/cgroup"},
      {"ConstrainRAMSpace", "yes"},
      {"ConstrainSwapSpace", "yes"}},
     2,
     2},
    {"11-pkuhpc-cranesched-autodetect",
     {{"CgroupPlugin", "autodetect"}, {"ConstrainSwapSpace", "yes"}},
     0,
     0},
    {"12-slac-iri-cgroup-v1", {{"CgroupPlugin", "cgroup/v1"}, {"ConstrainDevices", "yes"}}, 0, 1},
    {"13-someone-slurm-conf-leading-blank-kmem",
     {{"CgroupMountpoint", "/sys/fs/cgroup", 2}, {"ConstrainRAMSpace", "no"}},
     3,
     4},
    {"14-jtronge-bee-dev-mountpoint-quoted",
     {{"CgroupMountpoint", "/cgroup"}, {"MaxSwapPercent", "100"}, {"MinRAMSpace", "30"}},
     2,
     2},
    {"15-nstda-commented-obsolete-no-final-newline",
     {{"CgroupMountpoint", "/sys/fs/cgroup"}},
     1,
     1},
    {"16-dagster-slurm-container-comment-tail",
     {{"ConstrainCores", "no"}, {"ConstrainDevices", "no"}},
     1,
     1},
    {"17-schedmd-slurm-gcp-tpl",
     {{"ConstrainRAMSpace", "yes"}, {"ConstrainSwapSpace", "no"}, {"ConstrainDevices", "yes"}},
     1,
     1},
    {"18-aws-hyperpod-signalchildren-maxram",
     {{"SignalChildrenProcesses", "yes"}, {"MaxRAMPercent", "99"}, {"CgroupPlugin", "autodetect"}},
     0,
     0,
     .fields = maxram_99,
     .fields_what = "struct fields"},
};

static void key_is(const struct jobcg_config *c, const struct key_want *k)
{
	const struct jobcg_config_entry *e = jobcg_config_entry(c, k->key);
	char name[256];

	snprintf(name, sizeof(name), "  %s = %s", k->key, k->value ? k->value : "(unset)");
	if (!k->value) {
		ok(e && !e->value, "%s", name);
		return;
	}
	if (!ok(e && e->value && streq(e->value, k->value) &&
		    (!k->line || e->origin.line == k->line),
		"%s%s", name, k->line ? " (from its line)" : ""))
		tap_diag("  got %s at line %u", e && e->value ? e->value : "(null)",
			 e ? e->origin.line : 0);
}

static void test_cgroup_files(void)
{
	for (size_t i = 0; i < ELEMENTSOF(cg_cases); i++) {
		const struct cg_case *t = &cg_cases[i];
		struct jobcg_config *c = load("cgroup", t->name, "h");

		if (!c)
			continue;
		for (const struct key_want *k = t->keys;
		     k < t->keys + ELEMENTSOF(t->keys) && k->key; k++)
			key_is(c, k);
		if (t->warned)
			ok(count_warnings(c, t->warned) == t->nwarned, "  %s warned %zu time(s)",
			   t->warned, t->nwarned);
		is_int(count_warnings(c, "is ignored"), t->ignored, "  obsolete keys warned");
		is_int(strv_length(c->warnings), t->total, "  warnings in all");
		if (t->fields)
			ok(t->fields(c), "  %s", t->fields_what);
		jobcg_config_free(c);
	}
}

int main(void)
{
	const char *shared = getenv("JOBCG_SHARED");

	if (!shared)
		tap_plan_skip_all("JOBCG_SHARED not set (run through meson test)");
	snprintf(dir, sizeof(dir), "%s/testdata/slurm-conf", shared);
	if (access(dir, R_OK) < 0)
		tap_plan_skip_all("shared test data not found");
	test_gres_files();
	test_cgroup_files();
	return tap_done();
}
