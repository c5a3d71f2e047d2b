/*
 * Unit tests for loading cgroup.conf and gres.conf: the line grammar, malformed files (each must
 * fail naming the right line and column, and return nothing), includes, the environment
 * overrides, defaults, and stat() of device nodes made with mknod when running as root.
 */
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "config_internal.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static char tmp[] = "/tmp/jobcg-test-config-XXXXXX";

static void put(const char *name, const char *text, size_t len)
{
	if (len == (size_t)-1)
		len = strlen(text);
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	f = fopen(path, "we");
	if (!f)
		abort();
	fwrite(text, 1, len, f);
	fclose(f);
}

static void rm(const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	unlink(path);
}

/* Load @text as cgroup.conf (@gres false) or gres.conf from the temp dir. */
static int load_text(bool gres, const char *text, size_t len, const char *host, unsigned flags,
		     struct jobcg_config **ret)
{
	rm("cgroup.conf");
	rm("gres.conf");
	put(gres ? "gres.conf" : "cgroup.conf", text, len);
	jobcg_error_clear();
	return jobcg_config_load(tmp, host, flags | JOBCG_CONFIG_NO_ENV, ret);
}

/* The first line of @text, for test names. */
static const char *first_line(const char *text)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(text, "\n"), text);
	return buf;
}

/* @len bytes of @text (which may hold NUL bytes) must fail at @line:@col with @needle. */
static void bad_len(bool gres, const char *text, size_t len, unsigned flags, int want_r,
		    unsigned line, unsigned col, const char *needle)
{
	struct jobcg_config *c = NULL;
	const struct jobcg_error *e = jobcg_last_error();
	const char *fname = gres ? "gres.conf" : "cgroup.conf";
	int r = load_text(gres, text, len, "tux1", flags, &c);
	char buf[8192];

	jobcg_error_format(r, buf, sizeof(buf));
	if (!ok(r == want_r && !c && strstr(e->file, fname) && e->line == line &&
		    e->column == col && strstr(e->message, needle),
		"%s: '%s' fails at %u:%u with '%s'", fname, first_line(text), line, col, needle))
		tap_diag("  got r=%d %s", r, buf);
	jobcg_config_free(c);
}

/* A configuration that must be refused: the error, and where and what its message says. */
struct bad_case {
	const char *text;
	unsigned flags;
	int r;
	unsigned line, col;
	const char *needle;
};

static void bad(bool gres, const char *text, unsigned flags, int want_r, unsigned line,
		unsigned col, const char *needle)
{
	bad_len(gres, text, strlen(text), flags, want_r, line, col, needle);
}

static struct jobcg_config *good(bool gres, const char *text, size_t len, unsigned flags)
{
	struct jobcg_config *c = NULL;
	char buf[8192];
	int r = load_text(gres, text, len, "tux1", flags, &c);

	if (!ok(r == 0 && c, "%s '%s' loads", gres ? "gres.conf" : "cgroup.conf", first_line(text)))
		tap_diag("  got r=%d %s", r, jobcg_error_format(r, buf, sizeof(buf)));
	return c;
}

static void hung(int sig)
{
	static const char msg[] = "not ok - reading the configuration hung on a FIFO\n";

	(void)sig;
	(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
	_exit(1);
}

/* Include of a FIFO, a directory or /dev/null fails at the Include line within 2 s: opening a
 * FIFO for reading blocks until a writer comes, which is every command and every login. */
static void test_include_special(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
	    {"Include fifo\n", "is a FIFO, not a regular file"},
	    {"Include subdir\n", "is a directory, not a regular file"},
	    {"Include /dev/null\n", "is a character device, not a regular file"},
	};
	char fifo[PATH_MAX], dir[PATH_MAX];

	snprintf(fifo, sizeof(fifo), "%s/fifo", tmp);
	snprintf(dir, sizeof(dir), "%s/subdir", tmp);
	if (mkfifo(fifo, 0600) < 0 || mkdir(dir, 0700) < 0)
		abort();
	signal(SIGALRM, hung);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		for (int gres = 0; gres <= 1; gres++) {
			struct jobcg_config *c = NULL;
			const struct jobcg_error *e = jobcg_last_error();
			uint64_t t0 = now_usec();
			int r;

			alarm(2);
			r = load_text(gres, cases[i].text, (size_t)-1, "h", 0, &c);
			alarm(0);
			ok(r == -EINVAL && !c &&
			       strstr(e->file, gres ? "gres.conf" : "cgroup.conf") &&
			       e->line == 1 && e->column == 9 &&
			       strstr(e->message, cases[i].needle),
			   "%s: '%.*s' refused at 1:9 in %.2f s (%s:%u:%u %s)",
			   gres ? "gres.conf" : "cgroup.conf", (int)strlen(cases[i].text) - 1,
			   cases[i].text, (double)(now_usec() - t0) / 1e6, e->file, e->line,
			   e->column, e->message);
			jobcg_config_free(c);
		}
	}
	/* cgroup.conf itself a FIFO */
	{
		struct jobcg_config *c = NULL;
		char path[PATH_MAX + 16];
		int r;

		rm("cgroup.conf");
		rm("gres.conf");
		snprintf(path, sizeof(path), "%s/cgroup.conf", tmp);
		if (mkfifo(path, 0600) < 0)
			abort();
		jobcg_error_clear();
		alarm(2);
		r = jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c);
		alarm(0);
		ok(r == -EINVAL && !c &&
		       strstr(jobcg_last_error()->message, "a FIFO, not a regular file"),
		   "cgroup.conf that is a FIFO is refused (%s)", jobcg_last_error()->message);
		jobcg_config_free(c);
		unlink(path);
	}
	signal(SIGALRM, SIG_DFL);
	unlink(fifo);
	rmdir(dir);
}

static void test_cgroup_errors(void)
{
	static const struct bad_case cases[] = {
	    {"ConstrainCore=yes\n", 0, -EINVAL, 1, 1, "did you mean 'ConstrainCores'"},
	    {"# c\nConstrainRamSpce=yes\n", 0, -EINVAL, 2, 1, "did you mean 'ConstrainRAMSpace'"},
	    {"FooBarBaz=1\n", 0, -EINVAL, 1, 1, "unknown cgroup.conf key 'FooBarBaz'"},
	    {"\n  ConstrainCores = maybe\n", 0, -EINVAL, 2, 20, "expected yes or no"},
	    {"CgroupMountpoint=\"/sys/fs/cgroup\n", 0, -EINVAL, 1, 18, "unterminated quote"},
	    {"CgroupMountpoint=\"/a#b\"\n", 0, -EINVAL, 1, 18,
	     "'#' starts a comment even inside quotes"},
	    {"CgroupMountpoint=\"/a\"b\n", 0, -EINVAL, 1, 22, "after the closing quote"},
	    {"AllowedRAMSpace=abc\n", 0, -EINVAL, 1, 17, "expected a percentage"},
	    {"AllowedRAMSpace=-5\n", 0, -EINVAL, 1, 17, "a percentage cannot be negative"},
	    {"MaxRAMPercent=-inf\n", 0, -EINVAL, 1, 15, "a percentage cannot be negative"},
	    {"AllowedSwapSpace=nan\n", 0, -EINVAL, 1, 18, "not a number"},
	    {"MaxSwapPercent=1e39\n", 0, -ERANGE, 1, 16, "out of range (Slurm refuses it too)"},
	    {"MaxSwapPercent=1e-50\n", 0, -ERANGE, 1, 16, "out of range"},
	    {"AllowedRAMSpace=5e\n", 0, -EINVAL, 1, 17, "expected a percentage such as 100"},
	    {"MaxRAMPercent=99%\n", 0, -EINVAL, 1, 15, "expected a percentage"},
	    {"AllowedSwapSpace=0x10\n", 0, -EINVAL, 1, 18, "hexadecimal is not accepted"},
	    {"AllowedRAMSpace=.\n", 0, -EINVAL, 1, 17, "expected a percentage"},
	    {"AllowedRAMSpace=5.5.5\n", 0, -EINVAL, 1, 17, "expected a percentage"},
	    {"MinRAMSpace=30M\n", 0, -EINVAL, 1, 13, "whole number"},
	    {"MinRAMSpace=010\n", 0, -EINVAL, 1, 13, "leading zero is ambiguous"},
	    {"SystemdTimeout=0100\n", 0, -EINVAL, 1, 16, "reads 010 as octal 8"},
	    {"SystemdTimeout=99999999999\n", 0, -ERANGE, 1, 16, "too large"},
	    {"ConstrainCores=yes ConstrainDevices=yes\n", 0, -EINVAL, 1, 20,
	     "one Key=Value per line"},
	    {"justaword\n", 0, -EINVAL, 1, 1, "expected '=' after 'justaword'"},
	    {"ConstrainCores=yes\nConstrainDevices=\n", 0, -EINVAL, 2, 17, "missing value"},
	    {"ConstrainCores= ConstrainDevices=yes\n", 0, -EINVAL, 1, 15,
	     "next word is another key"},
	    /* an operator must touch its '=', as in Slurm's grammar */
	    {"ConstrainCores+ =yes\n", 0, -EINVAL, 1, 1, "expected '=' after 'ConstrainCores'"},
	    {"\x01x=1\n", 0, -EINVAL, 1, 1, "found byte 0x01"},
	    {"=yes\n", 0, -EINVAL, 1, 1, "expected Key=Value"},
	    {"DeviceProgram=tree\n", 0, -EINVAL, 1, 15, "expected node or linear"},
	    {"AccountingSync=always\n", 0, -EINVAL, 1, 16, "expected job or step"},
	    {"JobcgRoot=a/../b\n", 0, -EINVAL, 1, 11, "'..'"},
	    {"JobcgScope=jobcg\n", 0, -EINVAL, 1, 12, "scope unit name"},
	    {"CgroupSlice=a/b.slice\n", 0, -EINVAL, 1, 13, "slice unit name"},
	    {"CgroupPlugin=cgroup/v3\n", 0, -EINVAL, 1, 14, "expected autodetect"},
	    {"CgroupMountpoint=sys/fs/cgroup\n", 0, -EINVAL, 1, 18, "absolute path"},
	    {"StateDir=\"\"\n", 0, -EINVAL, 1, 11, "absolute path"},
	    {"EnableExtraControllers=io,Mem\n", 0, -EINVAL, 1, 24, "controller names"},
	    /* errors in a continued line name the physical line the bad value is on */
	    {"ConstrainCores=yes\nConstrainDevices=\\\n  maybe\n", 0, -EINVAL, 3, 3,
	     "expected yes or no"},
	    {"Include missing.conf\n", 0, -ENOENT, 1, 9, "cannot read included file"},
	    {"Include  \n", 0, -EINVAL, 1, 1, "Include needs a file name"},
	    {"Include a.conf b.conf\n", 0, -EINVAL, 1, 16, "one file per Include"},
	    {"include /etc/jobcg/*.conf\n", 0, -EINVAL, 1, 9, "wildcards"},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		bad(false, cases[i].text, cases[i].flags, cases[i].r, cases[i].line, cases[i].col,
		    cases[i].needle);

	/* A NUL byte must not silently hide the rest of its line (here a second key). */
	static const char nul_cg[] =
	    "ConstrainCores=yes\nConstrainRAMSpace=yes\0 ConstrainCores=no\n";
	static const char nul_gres[] = "Name=gpu Count=1\0 Bogus=1\n";

	bad_len(false, nul_cg, sizeof(nul_cg) - 1, 0, -EINVAL, 2, 22, "NUL byte");
	bad_len(true, nul_gres, sizeof(nul_gres) - 1, 0, -EINVAL, 1, 17, "NUL byte");

	/* an Include loop: cgroup.conf -> loop-a.conf -> cgroup.conf */
	put("loop-a.conf", "# a\nInclude cgroup.conf\n", (size_t)-1);
	{
		struct jobcg_config *c = NULL;
		int r = load_text(false, "Include loop-a.conf\n", (size_t)-1, "h", 0, &c);
		const struct jobcg_error *e = jobcg_last_error();

		ok(r == -ELOOP && !c && strstr(e->file, "loop-a.conf") && e->line == 2 &&
		       e->column == 9 && strstr(e->message, "Include loop"),
		   "an Include loop is refused at the Include that closes it (%s:%u:%u)", e->file,
		   e->line, e->column);
	}
	rm("loop-a.conf");
	/* an error inside an included file names that file */
	put("inc-bad.conf", "ConstrainCores=yes\nConstrainCpus=yes\n", (size_t)-1);
	{
		struct jobcg_config *c = NULL;
		int r = load_text(false, "Include inc-bad.conf\n", 21, "h", 0, &c);
		const struct jobcg_error *e = jobcg_last_error();

		ok(r == -EINVAL && !c && strstr(e->file, "inc-bad.conf") && e->line == 2 &&
		       e->column == 1 && strstr(e->message, "(included from ") &&
		       strstr(e->message, "cgroup.conf:1)"),
		   "an error in an included file names that file and line (%s:%u)", e->file,
		   e->line);
	}
	rm("inc-bad.conf");
	test_include_special();
}

static void test_cgroup_good(void)
{
	struct jobcg_config *c;

	c = good(false, "EnableExtraControllers=io,bogus\n", (size_t)-1, 0);
	if (c) {
		ok(strv_length(c->warnings) == 1 &&
		       strstr(c->warnings[0], "cgroup.conf:1: EnableExtraControllers: unknown "
					      "controller 'bogus' is ignored"),
		   "an unknown extra controller warns with file:line");
		jobcg_config_free(c);
	}
	c = good(false, "CgroupPlugin=disabled\n", (size_t)-1, 0);
	if (c) {
		ok(strv_length(c->warnings) == 1 &&
		       strstr(c->warnings[0], "CgroupPlugin=disabled has no effect in jobcg"),
		   "CgroupPlugin=disabled warns that it has no effect");
		jobcg_config_free(c);
	}
	c = good(false, "ConstrainCores=yes\nAllowedRAMSpace=50\n", (size_t)-1,
		 JOBCG_CONFIG_NO_ENTRIES);
	if (c) {
		ok(!c->entries && c->nentries == 0 && !jobcg_config_entry(c, "ConstrainCores"),
		   "JOBCG_CONFIG_NO_ENTRIES: no display entries");
		ok(c->cgroup.constrain_cores && c->cgroup.allowed_ram_space == 50,
		   "...but every value parsed (%d %g)", c->cgroup.constrain_cores,
		   c->cgroup.allowed_ram_space);
		jobcg_config_free(c);
	}
	/* Slurm reads percentages with strtof(): fractions, exponents, inf, kept as a float */
	c = good(false,
		 "AllowedRAMSpace=98.5\nMaxRAMPercent=1e2\nAllowedSwapSpace=inf\n"
		 "MaxSwapPercent=99.9\n",
		 (size_t)-1, 0);
	if (c) {
		ok(c->cgroup.allowed_ram_space == 98.5 && c->cgroup.max_ram_percent == 100 &&
		       isinf(c->cgroup.allowed_swap_space) &&
		       c->cgroup.max_swap_percent == (double)99.9f,
		   "percentages 98.5, 1e2, inf and 99.9 as Slurm's float (%g %g %g %.10g)",
		   c->cgroup.allowed_ram_space, c->cgroup.max_ram_percent,
		   c->cgroup.allowed_swap_space, c->cgroup.max_swap_percent);
		ok(strv_length(c->warnings) == 0, "...with no warning");
		jobcg_config_free(c);
	}
	/* Slurm's grammar takes Key+=, -=, *=, /= and every reader ignores the operator */
	c = good(false, "ConstrainCores+=yes\nAllowedRAMSpace -=50\n", (size_t)-1, 0);
	if (c) {
		ok(c->cgroup.constrain_cores && c->cgroup.allowed_ram_space == 50,
		   "ConstrainCores+=yes and AllowedRAMSpace -=50 set the values, as in Slurm");
		ok(strv_length(c->warnings) == 2 &&
		       strstr(c->warnings[0], "cgroup.conf:1: operator '+=' is ignored") &&
		       strstr(c->warnings[0], "sets ConstrainCores=yes") &&
		       strstr(c->warnings[1], "cgroup.conf:2: operator '-=' is ignored"),
		   "...each with a warning naming its line");
		jobcg_config_free(c);
	}
	c = good(false, "AllowedRAMSpace=.5\nMaxRAMPercent=99.\nAllowedSwapSpace=007.25\n",
		 (size_t)-1, 0);
	if (c) {
		ok(c->cgroup.allowed_ram_space == 0.5 && c->cgroup.max_ram_percent == 99 &&
		       c->cgroup.allowed_swap_space == 7.25,
		   "decimal percentages .5, 99. and 007.25 (%g %g %g)", c->cgroup.allowed_ram_space,
		   c->cgroup.max_ram_percent, c->cgroup.allowed_swap_space);
		jobcg_config_free(c);
	}
	c = good(false, "", 0, 0);
	if (c) {
		ok(!c->cgroup.constrain_cores && c->cgroup.allowed_ram_space == 100 &&
		       streq(c->cgroup.slice, "system.slice") && c->cgroup.min_ram_space_mb == 30 &&
		       c->cgroup.systemd_timeout_ms == 1000 && c->cgroup.max_swap_percent == 100 &&
		       c->cgroup.device_program == JOBCG_DEVPROG_NODE && !c->cgroup.tree_root,
		   "an empty file gives Slurm's defaults");
		ok(c->cgroup.acct_sync == JOBCG_ACCT_SYNC_JOB, "AccountingSync defaults to job");
		const struct jobcg_config_entry *e = jobcg_config_entry(c, "JobcgRoot");
		ok(e && e->value && streq(e->value, "system.slice/jobcg.scope") && !e->origin.file,
		   "JobcgRoot shows its computed default");
		jobcg_config_free(c);
	}
	c = good(false,
		 "  constraincores   =   YES   # trailing comment\r\n"
		 "CgroupMountpoint=\"/sys/fs/cgroup\"\n"
		 "CgroupSlice = \"jobcg.slice\"\n"
		 "ConstrainRAMSpace=\\\n   true\n"
		 "AllowedRAMSpace=UNLIMITED\n"
		 "MinRAMSpace=2k\n"
		 "DeviceProgram=Linear\n"
		 "AccountingSync=Step\n"
		 "JobcgRoot=/jobcg.slice/nodes/\n"
		 "EnableExtraControllers=io,misc\n"
		 "StateDir=/var/lib/x\\#y\n"
		 "MemorySwappiness=lots\n"
		 "AllowedKmemSpace=yes\n",
		 (size_t)-1, 0);
	if (c) {
		ok(c->cgroup.constrain_cores,
		   "key case, spaces around '=', trailing comment and CRLF");
		is_str(c->cgroup.mountpoint, "/sys/fs/cgroup", "quoted value");
		is_str(c->cgroup.slice, "jobcg.slice", "quoted value after spaces");
		ok(c->cgroup.constrain_ram_space, "backslash continuation");
		const struct jobcg_config_entry *e = jobcg_config_entry(c, "ConstrainRAMSpace");
		ok(e && e->origin.line == 4, "a continued line's origin is its first line");
		ok(c->cgroup.allowed_ram_space > 1e300, "UNLIMITED");
		is_int(c->cgroup.min_ram_space_mb, 2048, "k suffix");
		ok(c->cgroup.device_program == JOBCG_DEVPROG_LINEAR, "DeviceProgram=linear");
		ok(c->cgroup.acct_sync == JOBCG_ACCT_SYNC_STEP, "AccountingSync=step");
		e = jobcg_config_entry(c, "AccountingSync");
		ok(e && e->value && streq(e->value, "step") && e->origin.line == 9,
		   "AccountingSync shown as step, from line 9");
		is_str(c->cgroup.tree_root, "/jobcg.slice/nodes", "JobcgRoot normalised");
		ok(strv_length(c->cgroup.enable_extra_controllers) == 2,
		   "EnableExtraControllers list");
		is_str(c->cgroup.state_dir, "/var/lib/x#y", "escaped '#'");
		ok(c->cgroup.memory_swappiness_set, "MemorySwappiness noted");
		is_int(strv_length(c->warnings), 2,
		       "two warnings (MemorySwappiness, AllowedKmemSpace)");
		ok(c->warnings &&
		       strstr(c->warnings[0], "cgroup.conf:13: MemorySwappiness is ignored"),
		   "warning names file and line: %s", c->warnings ? c->warnings[0] : "");
		jobcg_config_free(c);
	}
	c = good(false,
		 "\xEF\xBB\xBF"
		 "ConstrainCores=yes\n",
		 (size_t)-1, 0);
	if (c) {
		ok(c->cgroup.constrain_cores, "a UTF-8 byte order mark is skipped");
		jobcg_config_free(c);
	}
	/* Include: relative to the including file; origin is the included file. */
	put("extra.conf", "ConstrainCores=yes\n", (size_t)-1);
	c = good(false, "Include extra.conf\nConstrainDevices=yes\n", 39, 0);
	if (c) {
		const struct jobcg_config_entry *e = jobcg_config_entry(c, "ConstrainCores");
		ok(c->cgroup.constrain_cores && c->cgroup.constrain_devices, "Include read");
		ok(e && e->origin.file && strstr(e->origin.file, "extra.conf") &&
		       e->origin.line == 1,
		   "origin of an included key is the included file");
		is_int(strv_length(c->files), 2, "both files listed");
		jobcg_config_free(c);
	}
	rm("extra.conf");
}

static void test_env_and_dir(void)
{
	struct jobcg_config *c = NULL;
	const struct jobcg_config_entry *e;

	rm("cgroup.conf");
	rm("gres.conf");
	put("cgroup.conf", "JobcgRoot=from/file\nStateDir=/from/file\n", 39);
	setenv("JOBCG_ROOT", "from/env", 1);
	setenv("JOBCG_STATE_DIR", "/from/env", 1);
	ok(jobcg_config_load(tmp, "h", 0, &c) == 0 && c, "loads with environment overrides");
	if (c) {
		is_str(c->cgroup.tree_root, "from/env", "JOBCG_ROOT wins over the file");
		is_str(c->cgroup.state_dir, "/from/env", "JOBCG_STATE_DIR wins over the file");
		e = jobcg_config_entry(c, "JobcgRoot");
		ok(e && e->origin.file && streq(e->origin.file, "env:JOBCG_ROOT"),
		   "origin env:JOBCG_ROOT");
		jobcg_config_free(c);
		c = NULL;
	}
	ok(jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c) == 0 && c, "loads with NO_ENV");
	if (c) {
		is_str(c->cgroup.tree_root, "from/file", "NO_ENV ignores JOBCG_ROOT");
		e = jobcg_config_entry(c, "StateDir");
		ok(e && e->origin.line == 2, "origin is the file's line");
		jobcg_config_free(c);
		c = NULL;
	}
	setenv("JOBCG_ROOT", "../escape", 1);
	ok(jobcg_config_load(tmp, "h", 0, &c) == -EINVAL && !c &&
	       strstr(jobcg_last_error()->message, "JOBCG_ROOT"),
	   "a bad JOBCG_ROOT is an error naming the variable");
	/* Set but empty (JOBCG_ROOT=$UNSET): not the file's, nor the default tree. */
	for (const char *const *v =
		 (const char *const[]){"JOBCG_ROOT", "JOBCG_STATE_DIR", "JOBCG_BPF_PIN_DIR", NULL};
	     *v; v++) {
		setenv("JOBCG_ROOT", "from/env", 1);
		setenv("JOBCG_STATE_DIR", "/from/env", 1);
		setenv(*v, "", 1);
		ok(jobcg_config_load(tmp, "h", 0, &c) == -EINVAL && !c &&
		       strstr(jobcg_last_error()->message, *v) &&
		       strstr(jobcg_last_error()->message, "set but empty"),
		   "%s set but empty is an error naming it", *v);
		unsetenv("JOBCG_BPF_PIN_DIR");
	}
	unsetenv("JOBCG_ROOT");
	unsetenv("JOBCG_STATE_DIR");

	/* JOBCG_NODENAME selects NodeName= lines when no host name is given */
	put("gres.conf", "NodeName=n[1-3] Name=nic Count=2\n", (size_t)-1);
	setenv("JOBCG_NODENAME", "n2", 1);
	c = NULL;
	ok(jobcg_config_load(tmp, NULL, 0, &c) == 0 && c && streq(c->hostname, "n2") &&
	       c->gres.nrecords == 1,
	   "JOBCG_NODENAME names this node");
	jobcg_config_free(c);
	c = NULL;
	ok(jobcg_config_load(tmp, "n7", 0, &c) == 0 && c && c->gres.nrecords == 0,
	   "an explicit host name wins over JOBCG_NODENAME");
	jobcg_config_free(c);
	unsetenv("JOBCG_NODENAME");
	rm("gres.conf");

	/* JOBCG_CONF_DIR is used when no directory is given */
	setenv("JOBCG_CONF_DIR", tmp, 1);
	c = NULL;
	ok(jobcg_config_load(NULL, "h", 0, &c) == 0 && c && c->config_dir &&
	       streq(c->config_dir, tmp),
	   "JOBCG_CONF_DIR names the directory");
	jobcg_config_free(c);
	unsetenv("JOBCG_CONF_DIR");
	rm("cgroup.conf");

	c = NULL;
	ok(jobcg_config_load(tmp, "h", 0, &c) == 0 && c && c->gres.nrecords == 0 && !c->warnings,
	   "missing files give the defaults");
	jobcg_config_free(c);
	c = NULL;
	ok(jobcg_config_load("/nonexistent/jobcg-conf", "h", 0, &c) == -ENOENT && !c,
	   "a named directory that does not exist is an error");
}

static void test_gres_errors(void)
{
	static const struct bad_case cases[] = {
	    {"Name=gpu File=/dev/null Cores=3-1\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 31,
	     "reversed range"},
	    {"Name=gpu File=/dev/null CPUs=[0-4096]\n", JOBCG_CONFIG_NO_STAT, -ERANGE, 1, 33,
	     "beyond the limit"},
	    {"Name=gpu File=/dev/null Cores=[0-3],[5-x]\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 40,
	     "end of the range"},
	    {"Name=gpu File=/dev/null Cores=0-3x\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 34,
	     "unexpected 'x'"},
	    {"Name=tmpdisk Count=10X\n", 0, -EINVAL, 1, 22, "unknown suffix"},
	    {"Name=tmpdisk Count=4.0\n", 0, -EINVAL, 1, 21, "whole number"},
	    {"Name=tmpdisk Count=-1\n", 0, -EINVAL, 1, 20, "negative"},
	    {"Name=tmpdisk Count=99999999999P\n", 0, -ERANGE, 1, 20, "too large"},
	    {"# gpus\nName=gpu File=/dev/jobcg-no-such-device0\n", 0, -ENOENT, 2, 15,
	     "jobcg-no-such-device0"},
	    {"Name=gpu File=/dev/null\nName=gpu NodeName=tux1 File=/dev/zero\n",
	     JOBCG_CONFIG_NO_STAT, -EINVAL, 2, 10, "NodeName= must be the first key"},
	    {"AutoDetect=nvml Name=gpu\n", 0, -EINVAL, 1, 17, "AutoDetect= must be alone"},
	    {"AutoDetect=nvlm\n", 0, -EINVAL, 1, 12, "unknown AutoDetect value 'nvlm'"},
	    {"NodeName=tux1 AutoDetect=bogus\n", 0, -EINVAL, 1, 26,
	     "unknown AutoDetect value 'bogus'"},
	    {"Type=tesla Name=gpu File=/dev/null\n", 0, -EINVAL, 1, 1,
	     "must start with NodeName=, Name= or AutoDetect="},
	    {"Name=gpu Fil=/dev/null\n", 0, -EINVAL, 1, 10, "did you mean 'File'"},
	    {"NodeNam=tux1 Name=gpu\n", 0, -EINVAL, 1, 1, "did you mean 'NodeName'"},
	    {"Name=gpu File=/dev/nvidia[0-1] Count=3\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 38,
	     "does not match the 2 files"},
	    {"Name=gpu File=/dev/nvidia[0-3\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 26,
	     "'[' without ']'"},
	    {"Name=gpu File=/dev/nvidia[3-0]\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 27,
	     "reversed range"},
	    {"Name=gpu File=nvidia0\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 15, "absolute path"},
	    {"Name=gpu File=/dev/a MultipleFiles=/dev/a,/dev/b\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1,
	     22, "exclude each other"},
	    {"Name=gpu MultipleFiles=/dev/a\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 24,
	     "two or more"},
	    {"Name=gpu MultipleFiles=/dev/a,/dev/a\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 24,
	     "MultipleFiles=/dev/a,/dev/a names '/dev/a' twice"},
	    {"Name=gpu MultipleFiles=/dev/a0,/dev/b,/dev/a[0-1]\n", JOBCG_CONFIG_NO_STAT, -EINVAL,
	     1, 24, "names '/dev/a0' twice"},
	    {"Name=gpu File=/dev/nvidia[0-1],/dev/nvidia1\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 15,
	     "names '/dev/nvidia1' twice"},
	    {"Name=gpu MultipleFiles=/dev/a,/dev/b Count=2\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 44,
	     "must be 1"},
	    {"Name=gpu File=/dev/null Flags=no_gpu_env,nvidia_gpu_env\n", JOBCG_CONFIG_NO_STAT,
	     -EINVAL, 1, 31, "no_gpu_env cannot"},
	    {"Name=gpu File=/dev/null Flags=one_sharing,all_sharing\n", JOBCG_CONFIG_NO_STAT,
	     -EINVAL, 1, 31, "exclude each other"},
	    {"Name=gpu File=/dev/null\nName=gpu File=/dev/zero Flags=nvidia_gpu_env\n",
	     JOBCG_CONFIG_NO_STAT, -EINVAL, 2, 31, "differ from the earlier gpu line"},
	    {"NodeName=tux1 AutoDetect=nvml\nNodeName=tux[0-3] AutoDetect=rsmi\n", 0, -EINVAL, 2,
	     30, "conflicts with AutoDetect=nvml"},
	    {"NodeName=tux[1-3 Name=gpu\n", 0, -EINVAL, 1, 13, "'[' without ']'"},
	    {"Name=gpu Type=\"a100 File=/dev/null\n", 0, -EINVAL, 1, 15, "unterminated quote"},
	    {"Name=gpu Type= File=/dev/null\n", 0, -EINVAL, 1, 14, "next word is another key"},
	    {"Name=gpu File=/dev/null stray\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 25,
	     "expected '=' after 'stray'"},
	    {"Name=g:pu\n", 0, -EINVAL, 1, 7, "not allowed in a GRES name"},
	    {"Name=gpu Type=a100:80g\n", 0, -EINVAL, 1, 19, "not allowed in a type"},
	    {"Name=\"\"\n", 0, -EINVAL, 1, 7, "Name= is empty"},
	    {"Include nope.conf\n", 0, -ENOENT, 1, 9, "cannot read included file"},
	    /* Slurm prefers File, Cores, Link over their aliases whatever the order, and a
	     * line's first Name=: jobcg refuses rather than take the later one. */
	    {"Name=gpu File=/dev/nvidia0 Files=/dev/nvidia1\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1,
	     28, "Files= given twice on this line (also as File= at column 10)"},
	    {"Name=gpu Files=/dev/nvidia1 File=/dev/nvidia0\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1,
	     29, "File= given twice"},
	    {"Name=gpu File=/dev/null Cores=0-1 CPUs=2-3\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 35,
	     "CPUs= given twice"},
	    {"Name=gpu File=/dev/null Link=0 Links=-1\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 32,
	     "Links= given twice"},
	    {"Name=gpu File=/dev/null Name=mps\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 25,
	     "Name= given twice"},
	    {"NodeName=tux1 Name=gpu name=shard Count=2\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 24,
	     "name= given twice"},
	    /* GRES names are case-insensitive, as in Slurm: GPU and gpu are one name. */
	    {"Name=GPU File=/dev/nvidia0\nName=gpu File=/dev/nvidia0\n", JOBCG_CONFIG_NO_STAT,
	     -EINVAL, 2, 15, "/dev/nvidia0 is the device of gpu again"},
	    /* A whole-GPU line next to MIG lines on that GPU would grant it twice. */
	    {"Name=gpu File=/dev/nvidia0\nName=gpu MultipleFiles=/dev/nvidia0,/dev/cap1\n",
	     JOBCG_CONFIG_NO_STAT, -EINVAL, 2, 24,
	     "/dev/nvidia0 is the device of gpu again (/dev/nvidia0 at "},
	    {"Name=gpu MultipleFiles=/dev/cap1,/dev/nvidia0\nName=gpu File=/dev/nvidia0\n",
	     JOBCG_CONFIG_NO_STAT, -EINVAL, 2, 15, "/dev/nvidia0 is the device of gpu again"},
	    /* another node's line: its keys and syntax are checked, as Slurm checks them */
	    {"NodeName=other Name=gpu Fle=/dev/null\n", 0, -EINVAL, 1, 25, "did you mean 'File'"},
	    {"NodeName=other Name=gpu File=/dev/null Cores=\"0\n", 0, -EINVAL, 1, 46,
	     "unterminated quote"},
	    {"NodeName=other Name=gpu Type= Count+=1\n", 0, -EINVAL, 1, 29,
	     "next word is another key"},
	    /* Slurm's step form FIRST-LAST:STEP: one range, no brackets */
	    {"Name=gpu File=/dev/null Cores=[0-30:2]\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 31,
	     "expected the first core at '[0-30:2]'"},
	    {"Name=gpu File=/dev/null Cores=0-30:0\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 31,
	     "the step must be 1 or more"},
	    {"Name=gpu File=/dev/null Cores=30-0:2\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 31,
	     "reversed range 30-0"},
	    {"Name=gpu File=/dev/null Cores=0-30:2,40\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 37,
	     "unexpected ',40' after the step"},
	    {"Name=gpu File=/dev/null Cores=5:2\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 32,
	     "expected '-' at ':2'"},
	    {"Name=gpu File=/dev/null Cores=0-5000:2\n", JOBCG_CONFIG_NO_STAT, -ERANGE, 1, 33,
	     "the last core is beyond the limit"},
	    {"Name=gpu File=/dev/null Cores=0-8:-2\n", JOBCG_CONFIG_NO_STAT, -EINVAL, 1, 35,
	     "expected the step at '-2'"},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		bad(true, cases[i].text, cases[i].flags, cases[i].r, cases[i].line, cases[i].col,
		    cases[i].needle);
}

static void test_gres_good(void)
{
	struct jobcg_config *c;

	c = good(true,
		 "AutoDetect=NVML\n"
		 "NodeName=tux[0-3] Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-7 "
		 "Flags=nvidia_gpu_env,env_uuid\n"
		 "NodeName=other Name=gpu File=/dev/nvidia9\n"
		 "Name=gpu Type=a100 File=/dev/nvidia2 Links=-1,0-1\n"
		 "Name=nic Count=2\n"
		 "Name=gpu Type=a100 File=/dev/nvidia3 Flags=Weird Cores=\"[0-1], [4-5]\"\n",
		 (size_t)-1, JOBCG_CONFIG_NO_STAT);
	if (c) {
		is_int(c->gres.nrecords, 5, "4 gpu records and one nic for tux1");
		is_str(c->gres.autodetect, "nvml", "AutoDetect=NVML is nvml");
		if (c->gres.nrecords == 5) {
			const struct jobcg_gres_record *r = c->gres.records;
			ok(r[0].index == 0 && r[1].index == 1 && r[2].index == 2 &&
			       r[3].index == 0 && r[4].index == 3,
			   "indices per name in file order");
			ok(r[0].flags == (JOBCG_GRES_FLAG_ENV_NVIDIA | JOBCG_GRES_FLAG_ENV_UUID),
			   "explicit env flags");
			ok(r[2].flags == JOBCG_GRES_FLAG_ENV_NVIDIA,
			   "env flags carry over to the next gpu line");
			ok(!r[2].links, "a Links range is invalid and dropped");
			ok(r[3].count == 2 && r[3].nfiles == 0 && r[3].flags == 0,
			   "count-only nic");
			ok(r[0].files[0].type == 0, "no stat: type left 0");
			ok(r[4].cores && r[4].cores[0] == 0x33,
			   "Cores=\"[0-1], [4-5]\" skips brackets and blanks");
		}
		is_int(strv_length(c->warnings), 2, "warnings: invalid Links, unknown flag");
		jobcg_config_free(c);
	}
	c = good(true, "Name=gpu File=/dev/nvidia0\n", 26, JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 1 &&
		       c->gres.records[0].flags ==
			   (JOBCG_GRES_FLAG_ENV_NVIDIA | JOBCG_GRES_FLAG_ENV_AMD |
			    JOBCG_GRES_FLAG_ENV_INTEL | JOBCG_GRES_FLAG_ENV_OPENCL),
		   "a gpu line without Flags gets every GPU environment flag (Slurm's default)");
		jobcg_config_free(c);
	}
	/* One device listed twice for one name would be granted to two jobs: refused. */
	bad(true,
	    "Name=gpu File=/dev/nvidia[0-1]\nName=mps Count=2 File=/dev/nvidia0\n"
	    "Name=gpu File=/dev/nvidia1\n",
	    JOBCG_CONFIG_NO_STAT, -EINVAL, 3, 15,
	    "/dev/nvidia1 is the device of gpu again (/dev/nvidia1 at ");
	c = good(true,
		 "Name=gpu File=/dev/nvidia1\nName=mps Count=2 File=/dev/nvidia0\n"
		 "Name=gpu MultipleFiles=/dev/nvidia0,/dev/c1\nName=gpu "
		 "MultipleFiles=/dev/nvidia0,/dev/c2\n",
		 (size_t)-1, JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(strv_length(c->warnings) == 0,
		   "mps sharing a gpu's file and MultipleFiles sharing a parent are no duplicates");
		jobcg_config_free(c);
	}
	/* The same device through another path (a symlink) is caught once stat()ed. */
	{
		char link[PATH_MAX], text[PATH_MAX + 64];

		snprintf(link, sizeof(link), "%s/null-link", tmp);
		if (symlink("/dev/null", link) < 0)
			abort();
		snprintf(text, sizeof(text), "Name=gpu File=/dev/null\nName=gpu File=%s\n", link);
		bad(true, text, 0, -EINVAL, 2, 15, "is the device of gpu again (/dev/null at ");
		unlink(link);
	}
	c = good(true, "Name=shard File=/dev/nvidia[0-2] Count=10\n", 42, JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 3 && c->gres.records[0].count == 3 &&
		       c->gres.records[1].count == 3 && c->gres.records[2].count == 3,
		   "a shared Count gives each file Count/files, as Slurm");
		ok(strv_length(c->warnings) == 1 && strstr(c->warnings[0], "remainder of 1"),
		   "the dropped remainder is warned");
		jobcg_config_free(c);
	}
	c = good(true, "AutoDetect=nvml\nName=gpu Type=a100 Count=4\nName=mps Count=100\n",
		 (size_t)-1, JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(strv_length(c->warnings) == 2 &&
		       strstr(c->warnings[0], "gres.conf:2: Name=gpu") &&
		       strstr(c->warnings[0], "jobcg cannot allocate it") &&
		       strstr(c->warnings[0], "`jobcg gpus --gres-conf` prints them") &&
		       strstr(c->warnings[1], "gres.conf:3: Name=mps") &&
		       strstr(c->warnings[1], "give it the GPUs' device files"),
		   "gpu and mps lines without files warn up front");
		jobcg_config_free(c);
	}
	c = good(true, "Name=gpu Type=a Type=b File=/dev/null\n", (size_t)-1, JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 1 && streq(c->gres.records[0].type, "b") &&
		       strv_length(c->warnings) == 1 &&
		       strstr(c->warnings[0], "latest value is used (as in Slurm)"),
		   "one key twice: the later value, with a warning, as Slurm");
		jobcg_config_free(c);
	}
	c = good(true, "Name=GPU File=/dev/nvidia0\nName=Gpu File=/dev/nvidia1\n", (size_t)-1,
		 JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 2 && streq(c->gres.records[0].name, "gpu") &&
		       streq(c->gres.records[1].name, "gpu") && c->gres.records[1].index == 1 &&
		       (c->gres.records[0].flags & JOBCG_GRES_FLAG_ENV_NVIDIA),
		   "Name=GPU and Name=Gpu are gpu, numbered together");
		jobcg_config_free(c);
	}
	c = good(true,
		 "NodeName=\"tux0, tux1\" Name=gpu File=/dev/nvidia0\n"
		 "NodeName=\"n1\ttux1\" Name=gpu File=/dev/nvidia1\n"
		 "NodeName=tux1, Name=gpu File=/dev/nvidia2\n",
		 (size_t)-1, JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 3,
		   "blanks separate NodeName= names and empty names are skipped, as Slurm");
		jobcg_config_free(c);
	}
	c = good(true,
		 "NodeName=tux1 Name=gpu File=/dev/x AutoDetect=off\nNodeName=tux1 AutoDetect=off\n"
		 "Name=gpu File=/dev/y\n",
		 87, JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 2 && streq(c->gres.node_autodetect, "off") &&
		       c->gres.records[1].autodetect && streq(c->gres.records[1].autodetect, "off"),
		   "the same node-local AutoDetect twice is fine and applies to every record");
		jobcg_config_free(c);
	}
}

/* Lines Slurm 22.05 accepts that jobcg once refused. */
static void test_gres_slurm_forms(void)
{
	struct jobcg_config *c;

	/* Slurm's slurmd reads no value of another node's line: a bad one warns, naming it */
	c = good(true,
		 "NodeName=other Name=gpu File=/dev/nvidiaX Cores=5-2\n"
		 "NodeName=n[1-3] Name=g:pu Count=x\n"
		 "NodeName=tux1 Name=gpu File=/dev/nvidia0\n",
		 (size_t)-1, JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 1 && streq(c->gres.records[0].files[0].path, "/dev/nvidia0"),
		   "other nodes' lines with bad values make no record, this node's line does");
		ok(strv_length(c->warnings) == 2 &&
		       strstr(c->warnings[0], "gres.conf:1: column 49: Cores=5-2") &&
		       strstr(c->warnings[0], "reversed range") &&
		       strstr(c->warnings[0], "NodeName=other, not this node") &&
		       strstr(c->warnings[1], "gres.conf:2: column 23: Name=g:pu") &&
		       strstr(c->warnings[1], "NodeName=n[1-3]"),
		   "...and each bad value is a warning naming file:line:column and the nodes");
		jobcg_config_free(c);
	}
	/* ...but on this node's line it is still an error */
	bad(true, "NodeName=tux[0-1] Name=gpu File=/dev/nvidiaX Cores=5-2\n", JOBCG_CONFIG_NO_STAT,
	    -EINVAL, 1, 52, "reversed range");

	/* the step form: Slurm stops before LAST (0-30:2 is 0,2,...,28), jobcg reads the same */
	c = good(
	    true,
	    "Name=gpu File=/dev/nvidia0 Cores=0-30:2\nName=gpu File=/dev/nvidia1 Cores=0-7:3\n"
	    "Name=gpu File=/dev/nvidia2 CPUs=5-5:1\nName=gpu File=/dev/nvidia3 Cores=64-130:64\n",
	    (size_t)-1, JOBCG_CONFIG_NO_STAT);
	if (c && c->gres.nrecords == 4) {
		const struct jobcg_gres_record *r = c->gres.records;

		ok(r[0].cores_words == 1 && r[0].cores[0] == 0x15555555,
		   "Cores=0-30:2 is 0,2,...,28 (%#llx)", (unsigned long long)r[0].cores[0]);
		ok(r[1].cores_words == 1 && r[1].cores[0] == 0x49, "Cores=0-7:3 is 0,3,6");
		ok(r[2].cores && r[2].cores_words == 1 && r[2].cores[0] == 0,
		   "CPUs=5-5:1 is no core, as Slurm");
		ok(r[3].cores_words == 3 && r[3].cores[0] == 0 && r[3].cores[1] == 1 &&
		       r[3].cores[2] == 1,
		   "Cores=64-130:64 is 64,128");
		ok(strv_length(c->warnings) == 2 &&
		       strstr(c->warnings[0],
			      "gres.conf:1: Cores=0-30:2 leaves out its last core") &&
		       strstr(c->warnings[1], "gres.conf:3: CPUs=5-5:1 names no core"),
		   "an end left out and an empty set warn");
	} else
		ok(false, "four step-form records");
	jobcg_config_free(c);

	/* empty list elements are skipped, as Slurm's hostlist_create() skips them */
	c = good(true, "NodeName=tux1, Name=gpu File=/dev/nvidia0,,/dev/nvidia1,\n", (size_t)-1,
		 JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 2 && streq(c->gres.records[1].files[0].path, "/dev/nvidia1"),
		   "NodeName=tux1, and File=a,,b, are one node and two files");
		jobcg_config_free(c);
	}

	/* Count+=1: Slurm's grammar takes the operator and no reader looks at it */
	c = good(true, "Name=nic Count+=2\nNodeName=tux1 Name=gpu File*=/dev/nvidia0\n", (size_t)-1,
		 JOBCG_CONFIG_NO_STAT);
	if (c) {
		ok(c->gres.nrecords == 2 && c->gres.records[0].count == 2 &&
		       c->gres.records[1].nfiles == 1,
		   "Count+=2 is Count=2 and File*= is File=, as in Slurm");
		ok(strv_length(c->warnings) == 2 &&
		       strstr(c->warnings[0], "gres.conf:1: operator '+=' is ignored") &&
		       strstr(c->warnings[0], "Count+=2 sets Count=2") &&
		       strstr(c->warnings[1], "gres.conf:2: operator '*=' is ignored"),
		   "...each with a warning");
		jobcg_config_free(c);
	}
}

/* Device nodes made with mknod: stat() must learn their type, major and minor. */
static void test_gres_stat(void)
{
	char devdir[PATH_MAX], text[2 * PATH_MAX + 256], p0[PATH_MAX + 16], p1[PATH_MAX + 16],
	    pb[PATH_MAX + 16], preg[PATH_MAX + 16];
	const struct jobcg_error *e = jobcg_last_error();
	struct jobcg_config *c = NULL;
	int err;

	if (geteuid() != 0) {
		tap_skip("mknod needs root");
		return;
	}
	snprintf(devdir, sizeof(devdir), "%s/dev", tmp);
	mkdir(devdir, 0755);
	snprintf(p0, sizeof(p0), "%s/gpu0", devdir);
	snprintf(p1, sizeof(p1), "%s/gpu1", devdir);
	snprintf(pb, sizeof(pb), "%s/disk", devdir);
	snprintf(preg, sizeof(preg), "%s/plain", devdir);
	if (mknod(p0, S_IFCHR | 0600, makedev(195, 0)) < 0 ||
	    mknod(p1, S_IFCHR | 0600, makedev(195, 1)) < 0 ||
	    mknod(pb, S_IFBLK | 0600, makedev(7, 42)) < 0) {
		tap_skip("mknod refused here: %s", strerror(errno));
		goto out;
	}
	close(open(preg, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	snprintf(text, sizeof(text), "Name=gpu File=%s/gpu[0-1]\nName=blk File=%s\n", devdir, pb);
	if (load_text(true, text, strlen(text), "h", 0, &c) == 0 && c && c->gres.nrecords == 3) {
		const struct jobcg_gres_record *r = c->gres.records;
		ok(r[0].files[0].type == 'c' && r[0].files[0].major == 195 &&
		       r[0].files[0].minor == 0,
		   "gpu0 is c 195:0");
		ok(r[1].files[0].type == 'c' && r[1].files[0].major == 195 &&
		       r[1].files[0].minor == 1,
		   "gpu1 is c 195:1");
		ok(r[2].files[0].type == 'b' && r[2].files[0].major == 7 &&
		       r[2].files[0].minor == 42,
		   "disk is b 7:42");
	} else {
		ok(0, "device nodes load: %s", jobcg_last_error()->message);
	}
	jobcg_config_free(c);
	c = NULL;
	snprintf(text, sizeof(text), "Name=gpu File=%s\n", preg);
	ok(load_text(true, text, strlen(text), "h", 0, &c) == -ENODEV && !c &&
	       jobcg_last_error()->line == 1 && jobcg_last_error()->column == 15,
	   "a regular file is not a device (1:15)");

	/* As root, a device file is reached only through what no other user can change: in a
	 * directory a user could write, that user could swap a GPU's node for a link to any
	 * device, which jobcg would then manage and grant as that GPU. */
	snprintf(text, sizeof(text), "Name=gpu File=%s/gpu[0-1]\n", devdir);
	if (chown(devdir, 65534, 65534) < 0)
		abort();
	err = load_text(true, text, strlen(text), "h", 0, &c);
	ok(err == -EPERM && !c && e->line == 1 && e->column == 15 && strstr(e->message, devdir) &&
	       strstr(e->message, "owned by uid 65534"),
	   "device files in a directory of another user: refused at 1:15 (%d %s)", err, e->message);
	jobcg_config_free(c);
	c = NULL;
	err = load_text(true, text, strlen(text), "h", JOBCG_CONFIG_NO_STAT, &c);
	ok(err == 0 && c, "...not looked at with --no-stat (%s)", err ? e->message : "ok");
	jobcg_config_free(c);
	c = NULL;
	if (chown(devdir, 0, 0) < 0 || chmod(devdir, 0775) < 0)
		abort();
	err = load_text(true, text, strlen(text), "h", 0, &c);
	ok(err == -EPERM && !c && strstr(e->message, "(mode 0775)"),
	   "device files in a group-writable directory: refused (%s)", e->message);
	jobcg_config_free(c);
	c = NULL;
	if (chmod(devdir, 0755) < 0)
		abort();
	unlink(p1);
	if (symlink("/dev/null", p1) < 0 || lchown(p1, 65534, 65534) < 0)
		abort();
	err = load_text(true, text, strlen(text), "h", 0, &c);
	ok(err == -EPERM && !c && e->line == 1 && strstr(e->message, "gpu1") &&
	       strstr(e->message, "a symbolic link owned by uid 65534"),
	   "a device file that is another user's link: refused (%s)", e->message);
	jobcg_config_free(c);
	c = NULL;
	if (lchown(p1, 0, 0) < 0)
		abort();
	err = load_text(true, text, strlen(text), "h", 0, &c);
	ok(err == 0 && c && c->gres.nrecords == 2 && c->gres.records[1].files[0].major == 1 &&
	       c->gres.records[1].files[0].minor == 3,
	   "root's link to /dev/null: followed, c 1:3 (%s)", err ? e->message : "ok");
	jobcg_config_free(c);
	c = NULL;
out:
	unlink(p0);
	unlink(p1);
	unlink(pb);
	unlink(preg);
	rmdir(devdir);
}

/* jobcg_config_load(tmp) as root must fail with -EPERM, @needle in the message. */
static void dir_bad(const char *needle, const char *what)
{
	const struct jobcg_error *e = jobcg_last_error();
	struct jobcg_config *c = NULL;
	int r;

	jobcg_error_clear();
	r = jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c);
	ok(r == -EPERM && !c && strstr(e->message, needle), "%s: refused (%d %s:%u:%u: %s)", what,
	   r, e->file, e->line, e->column, e->message);
	jobcg_config_free(c);
}

/*
 * Read as root, the directories holding the files count as the files do: a user who could
 * write the configuration directory could rename gres.conf away (the defaults: no device
 * containment for any job) or swap a file for a link to another of root's.
 */
static void test_owner_dirs(void)
{
	const struct jobcg_error *e = jobcg_last_error();
	struct jobcg_config *c = NULL;
	char inc[PATH_MAX + 16], link[PATH_MAX + 16], real[PATH_MAX + 32];
	int r;

	put("cgroup.conf", "ConstrainDevices=yes\n", (size_t)-1);
	put("gres.conf", "Name=gpu Count=1\n", (size_t)-1);
	if (chown(tmp, 65534, 65534) < 0)
		abort();
	dir_bad("owned by uid 65534", "a configuration directory of another user");
	ok(strstr(e->message, "configuration directory") && strstr(e->message, tmp),
	   "...the message names the directory");
	rm("gres.conf");
	dir_bad("owned by uid 65534", "...and with gres.conf renamed away: no silent defaults");
	put("gres.conf", "Name=gpu Count=1\n", (size_t)-1);
	if (chown(tmp, 0, 0) < 0 || chmod(tmp, 0777) < 0)
		abort();
	dir_bad("writable by its group or by others (mode 0777)",
		"a configuration directory anyone can write");
	if (chmod(tmp, 0700) < 0)
		abort();
	jobcg_error_clear();
	r = jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c);
	ok(r == 0 && c && c->gres.nrecords == 1, "root's directory, mode 0700: read (%s)",
	   r ? e->message : "ok");
	jobcg_config_free(c);
	c = NULL;

	/* an Include's directory, refused at the Include line */
	snprintf(inc, sizeof(inc), "%s/inc", tmp);
	if (mkdir(inc, 0755) < 0 || chown(inc, 65534, 65534) < 0)
		abort();
	put("inc/inc.conf", "ConstrainCores=yes\n", (size_t)-1);
	put("cgroup.conf", "Include inc/inc.conf\n", (size_t)-1);
	dir_bad("owned by uid 65534", "an included file in a directory of another user");
	ok(strstr(e->file, "cgroup.conf") && e->line == 1 && e->column == 9 &&
	       strstr(e->message, "included file") && strstr(e->message, "/inc"),
	   "...at the Include line, naming the directory (%s:%u:%u)", e->file, e->line, e->column);
	put("cgroup.conf", "ConstrainDevices=yes\n", (size_t)-1);

	/* gres.conf a link: root's to a file in a safe place is followed; another user's is not,
	 * and neither is root's to a file in a directory another user can change */
	snprintf(link, sizeof(link), "%s/gres.conf", tmp);
	snprintf(real, sizeof(real), "%s/real.conf", tmp);
	rm("gres.conf");
	put("real.conf", "Name=gpu Count=1\nName=nic Count=1\n", (size_t)-1);
	if (symlink("real.conf", link) < 0)
		abort();
	jobcg_error_clear();
	r = jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c);
	ok(r == 0 && c && c->gres.nrecords == 2, "root's link to a file beside it: followed (%s)",
	   r ? e->message : "ok");
	jobcg_config_free(c);
	c = NULL;
	if (lchown(link, 65534, 65534) < 0)
		abort();
	dir_bad("a symbolic link owned by uid 65534", "gres.conf a link of another user");
	ok(strstr(e->file, "gres.conf") != NULL, "...named as gres.conf (%s)", e->file);
	rm("gres.conf");
	put("inc/real.conf", "Name=gpu Count=2\n", (size_t)-1);
	if (symlink("inc/real.conf", link) < 0)
		abort();
	dir_bad("owned by uid 65534", "root's link to a file in a directory of another user");
	rm("gres.conf");
	rm("real.conf");
	rm("inc/real.conf");
	rm("inc/inc.conf");
	rmdir(inc);
}

/* Read as root, a configuration file another user owns or can write is refused unread, an
 * included one at its Include line; a dangling symbolic link is an error, a missing file not. */
static void test_owner(void)
{
	static const struct {
		const char *file;
		mode_t mode;
		uid_t uid;
		unsigned line, col;
		const char *needle;
	} cases[] = {
	    {"cgroup.conf", 0666, 0, 0, 0, "writable by its group or by others (mode 0666)"},
	    {"cgroup.conf", 0664, 0, 0, 0, "writable by its group or by others (mode 0664)"},
	    {"gres.conf", 0644, 65534, 0, 0, "owned by uid 65534, not by root"},
	    {"inc.conf", 0620, 0, 1, 9, "included file '"},
	    {"inc.conf", 0644, 65534, 1, 9, "owned by uid 65534, not by root"},
	};
	char path[PATH_MAX + 16], link[PATH_MAX + 16];
	struct jobcg_config *c = NULL;
	const struct jobcg_error *e = jobcg_last_error();
	int r;

	if (geteuid() != 0) {
		tap_skip("not root: ownership of configuration files is checked only as root");
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		bool inc = streq(cases[i].file, "inc.conf");
		const char *shown = inc ? "cgroup.conf" : cases[i].file;

		rm("cgroup.conf");
		rm("gres.conf");
		rm("inc.conf");
		put("cgroup.conf", inc ? "Include inc.conf\n" : "ConstrainCores=yes\n", (size_t)-1);
		put("gres.conf", "Name=gpu Count=1\n", (size_t)-1);
		if (inc)
			put("inc.conf", "ConstrainCores=yes\n", (size_t)-1);
		snprintf(path, sizeof(path), "%s/%s", tmp, cases[i].file);
		if (chmod(path, cases[i].mode) < 0 || chown(path, cases[i].uid, 0) < 0)
			abort();
		jobcg_error_clear();
		r = jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c);
		ok(r == -EPERM && !c && strstr(e->file, shown) && e->line == cases[i].line &&
		       e->column == cases[i].col && strstr(e->message, cases[i].needle) &&
		       (!inc || strstr(e->message, "inc.conf' is")),
		   "%s mode %04o uid %u refused as root (%s:%u:%u: %s)", cases[i].file,
		   (unsigned)cases[i].mode, (unsigned)cases[i].uid, e->file, e->line, e->column,
		   e->message);
		jobcg_config_free(c);
		c = NULL;
	}
	rm("inc.conf");

	/* root's and writable by root alone: read */
	put("cgroup.conf", "ConstrainCores=yes\n", (size_t)-1);
	snprintf(path, sizeof(path), "%s/cgroup.conf", tmp);
	if (chmod(path, 0600) < 0)
		abort();
	jobcg_error_clear();
	r = jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c);
	ok(r == 0 && c && c->cgroup.constrain_cores, "cgroup.conf mode 0600 owned by root is read");
	jobcg_config_free(c);
	c = NULL;

	/* a dangling link is named; a missing file gives the defaults */
	rm("cgroup.conf");
	snprintf(link, sizeof(link), "%s/nowhere.conf", tmp);
	if (symlink(link, path) < 0)
		abort();
	jobcg_error_clear();
	r = jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c);
	ok(r == -ENOENT && !c && strstr(e->file, "cgroup.conf") &&
	       strstr(e->message, "a symbolic link to '") && strstr(e->message, "nowhere.conf"),
	   "cgroup.conf a dangling link is an error (%s: %s)", e->file, e->message);
	jobcg_config_free(c);
	c = NULL;
	rm("cgroup.conf");
	jobcg_error_clear();
	r = jobcg_config_load(tmp, "h", JOBCG_CONFIG_NO_ENV, &c);
	ok(r == 0 && c && !c->cgroup.constrain_cores, "missing cgroup.conf gives the defaults");
	jobcg_config_free(c);
	c = NULL;
	rm("gres.conf");
	test_owner_dirs();
}

/* Warnings logged while a configuration loads, the last one kept. */
static unsigned nwarned;
static char last_warning[8192];

static void count_warning(enum jobcg_log_level level, const char *msg, void *userdata)
{
	(void)userdata;
	if (level != JOBCG_LOG_WARNING)
		return;
	nwarned++;
	snprintf(last_warning, sizeof(last_warning), "%s", msg);
}

/*
 * JOBCG_CONFIG_TOLERATE_CGROUP: a bad value of a key that locates nothing is kept as the
 * configuration's cgroup error (its file:line:col), logged once, and the key keeps its default;
 * whatever locates the tree (or might: a misspelt locating key), a line that cannot be read
 * and an Include that fails still fail the load.
 */
static void test_cgroup_tolerate(void)
{
	const unsigned T = JOBCG_CONFIG_TOLERATE_CGROUP;
	static const struct {
		const char *text, *where, *needle;
	} tolerated[] = {
	    {"AllowedRAMSpace=abc\n", "cgroup.conf:1:17", "expected a percentage"},
	    {"ConstrainRAMSpace=maybe\n", "cgroup.conf:1:19", "expected yes or no"},
	    {"MinRAMSpace=010\n", "cgroup.conf:1:13", "leading zero"},
	    {"EnableExtraControllers=io,Mem\n", "cgroup.conf:1:24", "controller names"},
	    {"AccountingSync=always\n", "cgroup.conf:1:16", "expected job or step"},
	    {"CgroupPlugin=cgroup/v3\n", "cgroup.conf:1:14", "expected autodetect"},
	    {"FooBarBaz=1\n", "cgroup.conf:1:1", "unknown cgroup.conf key"},
	    {"ConstrainCore=yes\n", "cgroup.conf:1:1", "did you mean 'ConstrainCores'"},
	    {"ConstrainCores=yes ConstrainDevices=yes\n", "cgroup.conf:1:20",
	     "one Key=Value per line"},
	    {"SpecCPUs=0\nCoreSpecCount=1\n", "cgroup.conf:2", "both reserve CPUs"},
	};
	static const struct bad_case refused[] = {
	    {"StateDir=var/lib/jobcg\n", T, -EINVAL, 1, 10, "absolute path"},
	    {"BpfPinDir=\"\"\n", T, -EINVAL, 1, 12, "absolute path"},
	    {"JobcgRoot=a/../b\n", T, -EINVAL, 1, 11, "'..'"},
	    {"JobcgScope=jobcg\n", T, -EINVAL, 1, 12, "scope unit name"},
	    {"CgroupSlice=a/b.slice\n", T, -EINVAL, 1, 13, "slice unit name"},
	    {"CgroupMountpoint=sys/fs/cgroup\n", T, -EINVAL, 1, 18, "absolute path"},
	    {"DeviceProgram=tree\n", T, -EINVAL, 1, 15, "expected node or linear"},
	    /* A misspelt locating key: read as unset, it would name the default tree. */
	    {"StateDri=/var/lib/jobcg-b\n", T, -EINVAL, 1, 1, "did you mean 'StateDir'"},
	    {"JobcgRot=jobcg-b\n", T, -EINVAL, 1, 1, "did you mean 'JobcgRoot'"},
	    {"ConstrainCores=yes StateDir=/x\n", T, -EINVAL, 1, 20, "one Key=Value per line"},
	    /* Lines that cannot be read: which key they meant is unknown. */
	    {"justaword\n", T, -EINVAL, 1, 1, "expected '=' after 'justaword'"},
	    {"AllowedRAMSpace=\"90\n", T, -EINVAL, 1, 17, "unterminated quote"},
	    {"Include missing.conf\n", T, -ENOENT, 1, 9, "cannot read included file"},
	    /* Only cgroup.conf's own flag tolerates it. */
	    {"AllowedRAMSpace=abc\n", JOBCG_CONFIG_TOLERATE_GRES, -EINVAL, 1, 17,
	     "expected a percentage"},
	};
	struct jobcg_config *c;

	jobcg_set_log(count_warning, NULL, JOBCG_LOG_DEBUG);
	for (size_t i = 0; i < ELEMENTSOF(tolerated); i++) {
		nwarned = 0;
		last_warning[0] = 0;
		c = good(false, tolerated[i].text, (size_t)-1, T);
		ok(c && c->cgroup_error && strstr(c->cgroup_error, tolerated[i].where) &&
		       strstr(c->cgroup_error, tolerated[i].needle) &&
		       jobcg_config_cgroup_error(c) == c->cgroup_error && !jobcg_last_error()->code,
		   "... past its error %s, kept: %s", tolerated[i].where,
		   c && c->cgroup_error ? c->cgroup_error : "(none)");
		ok(nwarned == 1 && strstr(last_warning, tolerated[i].where) &&
		       strstr(last_warning, "none is made or constrained"),
		   "... one warning names it: %s", last_warning);
		if (c && i == 0)
			ok(c->cgroup.allowed_ram_space == 100, "AllowedRAMSpace keeps its default");
		if (c && i == 1)
			ok(!c->cgroup.constrain_ram_space, "ConstrainRAMSpace keeps its default");
		if (c && i == ELEMENTSOF(tolerated) - 1)
			ok(!c->cgroup.spec_cpus && !c->cgroup.core_spec_count,
			   "SpecCPUs and CoreSpecCount both set: neither is kept");
		jobcg_config_free(c);
	}

	/* The other keys are read as written; the first error is kept, the others counted. */
	nwarned = 0;
	c = good(false,
		 "ConstrainCores=yes\nAllowedRAMSpace=abc\nStateDir=/var/lib/jobcg-t\n"
		 "ConstrainRAMSpace=maybe\nJobcgRoot=jobcg-t\nMaxRAMPercent=50\n",
		 (size_t)-1, T | JOBCG_CONFIG_TOLERATE_GRES);
	ok(c && c->cgroup.constrain_cores && streq(c->cgroup.state_dir, "/var/lib/jobcg-t") &&
	       streq(c->cgroup.tree_root, "jobcg-t") && c->cgroup.max_ram_percent == 50 &&
	       !c->cgroup.constrain_ram_space && c->cgroup_errors == 2 &&
	       strstr(c->cgroup_error, "cgroup.conf:2:") && !jobcg_config_gres_error(c),
	   "the valid keys are read around two errors, the first kept (%s)",
	   c && c->cgroup_error ? c->cgroup_error : "(none)");
	ok(nwarned == 1 && strstr(last_warning, "as is 1 more error in it"),
	   "one warning for both: %s", last_warning);
	jobcg_config_free(c);
	/* A valid file has no error, tolerated or not. */
	c = good(false, "ConstrainCores=yes\n", (size_t)-1, T);
	ok(c && !jobcg_config_cgroup_error(c) && c->cgroup_errors == 0,
	   "a valid cgroup.conf has no cgroup error");
	jobcg_config_free(c);
	ok(!jobcg_config_cgroup_error(NULL), "jobcg_config_cgroup_error(NULL) is NULL");
	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);

	for (size_t i = 0; i < ELEMENTSOF(refused); i++)
		bad(false, refused[i].text, refused[i].flags, refused[i].r, refused[i].line,
		    refused[i].col, refused[i].needle);
	/* A NUL byte: a corrupt file. */
	{
		static const char nul[] = "ConstrainCores=yes\0 StateDir=/x\n";

		bad_len(false, nul, sizeof(nul) - 1, T, -EINVAL, 1, 19, "NUL byte");
	}
	/* The environment's locating overrides are checked as ever. */
	rm("gres.conf");
	put("cgroup.conf", "AllowedRAMSpace=abc\n", (size_t)-1);
	setenv("JOBCG_STATE_DIR", "relative", 1);
	c = NULL;
	jobcg_error_clear();
	ok(jobcg_config_load(tmp, "h", T, &c) == -EINVAL && !c &&
	       strstr(jobcg_last_error()->message, "JOBCG_STATE_DIR"),
	   "a bad JOBCG_STATE_DIR still fails a tolerant load: %s", jobcg_last_error()->message);
	jobcg_config_free(c);
	unsetenv("JOBCG_STATE_DIR");
	rm("cgroup.conf");
}

int main(void)
{
	if (!mkdtemp(tmp))
		tap_plan_skip_all("mkdtemp failed");
	test_cgroup_errors();
	test_cgroup_good();
	test_cgroup_tolerate();
	test_env_and_dir();
	test_gres_errors();
	test_gres_good();
	test_gres_slurm_forms();
	test_gres_stat();
	test_owner();
	rm("cgroup.conf");
	rm("gres.conf");
	rmdir(tmp);
	return tap_done();
}
