/* jobcg kernel test: device access enforced by the node program and by linear programs. */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "bpfsys.h"
#include "devprog.h"
#include "config_internal.h"
#include "devices.h"
#include "jobcg/error.h"
#include "ktest.h"
#include "tap.h"
#include "util.h"

#define GPU_MAJOR   195
#define OTHER_MAJOR 196

#define ELEMENTSOF_(a) (sizeof(a) / sizeof((a)[0]))

static const char *root, *tmp;
static char pin_base[256];

/* Ids of every BPF object our code created, checked gone at the end. */
static uint32_t made_progs[256], made_maps[16];
static size_t n_made_progs, n_made_maps;
static uint32_t made_btf;

static void note_prog(uint32_t id)
{
	for (size_t i = 0; i < n_made_progs; i++)
		if (made_progs[i] == id)
			return;
	if (n_made_progs < ELEMENTSOF_(made_progs))
		made_progs[n_made_progs++] = id;
}
/* Record the node program's and maps' ids (and the maps' BTF) to check they are released. */
static void note_pins(struct jobcg_devpolicy *p)
{
	static const char *const names[] = {"prog", "jobcg_managed", "jobcg_policy"};
	struct bpf_map_info mi;
	char pp[512];
	uint32_t id;
	int fd;

	for (int i = 0; i < 3; i++) {
		snprintf(pp, sizeof(pp), "%s/%s", jobcg_devpolicy_pin_dir(p), names[i]);
		if (bpfsys_get_pinned(pp, &fd) < 0)
			continue;
		if (i == 0 && bpfsys_prog_info(fd, &id, NULL) == 0)
			note_prog(id);
		if (i > 0 && bpfsys_map_info(fd, &id, &mi) == 0 && n_made_maps < 16) {
			made_maps[n_made_maps++] = id;
			if (mi.btf_id)
				made_btf = mi.btf_id;
		}
		close(fd);
	}
}

static void path_of(char *buf, size_t size, const char *rel)
{
	snprintf(buf, size, "%s/%s", root, rel);
}

static void mkcg(const char *rel)
{
	char p[4096];

	path_of(p, sizeof(p), rel);
	if (mkdir_p_safe(p, 0755, "cgroup") < 0)
		tap_diag("%s", jobcg_last_error()->message);
}

static void dev_path(char *buf, size_t size, unsigned major_, unsigned minor_)
{
	snprintf(buf, size, "%s/dev%u_%u", tmp, major_, minor_);
}

/*
 * Run a child in cgroup @rel that opens a device node with @flags (or mknods one when @flags is
 * -1). Returns 0 when it got past the device check, else the errno it saw (EPERM = denied).
 */
static int try_in(const char *rel, unsigned major_, unsigned minor_, int flags)
{
	char cg[4096], dev[4096], node[4200];

	path_of(cg, sizeof(cg), rel);
	dev_path(dev, sizeof(dev), major_, minor_);
	if (flags != -1)
		return ktest_open_in(cg, dev, flags);
	snprintf(node, sizeof(node), "%s.mk%d", dev, (int)getpid());
	return ktest_mknod_in(cg, node, makedev(major_, minor_));
}

static struct jobcg_devrule rule(const char *s)
{
	struct jobcg_devrule r = {0};
	if (jobcg_devrule_parse(s, &r) < 0)
		tap_diag("bad rule %s", s);
	return r;
}

static int grant(struct jobcg_devpolicy *p, const char *rel, const char *const *rules, size_t n)
{
	struct jobcg_devrule r[16];
	char path[4096];
	int e;

	for (size_t i = 0; i < n; i++)
		r[i] = rule(rules[i]);
	path_of(path, sizeof(path), rel);
	e = jobcg_devpolicy_grant(p, path, r, n);
	if (e < 0) {
		char buf[8192];
		tap_diag("grant %s: %s", rel, jobcg_error_format(e, buf, sizeof(buf)));
	}
	return e;
}

static int revoke_rel(struct jobcg_devpolicy *p, const char *rel)
{
	char path[4096];
	path_of(path, sizeof(path), rel);
	return jobcg_devpolicy_revoke(p, path);
}

/* Record ids of linear programs attached under the root (to check they are released). */
static void note_linear(struct jobcg_devpolicy *p)
{
	struct jobcg_devgrant *g = NULL;
	size_t n = 0;
	if (jobcg_devpolicy_list(p, &g, &n) == 0)
		for (size_t i = 0; i < n; i++)
			if (g[i].prog_id)
				note_prog(g[i].prog_id);
	jobcg_devgrants_free(g, n);
}

static const struct jobcg_devgrant *find_grant(const struct jobcg_devgrant *g, size_t n,
					       const char *rel)
{
	for (size_t i = 0; i < n; i++)
		if (g[i].path && strcmp(g[i].path, rel) == 0)
			return &g[i];
	return NULL;
}

/* Run a shell command; its stdout and stderr together into @out. Returns the exit status. */
static int shell(const char *cmd, char *out, size_t size)
{
	FILE *f = popen(cmd, "r");
	size_t len;

	out[0] = 0;
	if (!f)
		return -1;
	len = fread(out, 1, size - 1, f);
	out[len] = 0;
	int st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* What decoded rule text ("c 195:0 rw", "c 195:* -", "c *:* rwm") says for c @maj:@min and the
 * access letter @acc: the most specific line decides. -1 when no line matches. */
static int rules_allow(const char *text, unsigned maj, unsigned min, char acc)
{
	int best = -1, answer = -1;

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char t, a[8], b[8], access[8];
		if (sscanf(l, "%c %7[^:]:%7s %7s", &t, a, b, access) != 4 || t != 'c')
			continue;
		if ((strcmp(a, "*") && (unsigned)atoi(a) != maj) ||
		    (strcmp(b, "*") && (unsigned)atoi(b) != min))
			continue;
		int spec = !!strcmp(a, "*") + !!strcmp(b, "*");
		if (spec > best) {
			best = spec;
			answer = strchr(access, acc) != NULL;
		}
	}
	return answer;
}

/*
 * The README's `bpftool prog dump xlated id N | jobcg decode ...` on the node program: opaque
 * without --cgroup (the message says what to run), and with --cgroup it answers what the kernel
 * does for that cgroup's processes: real opens and mknods of the stand-in GPUs.
 */
static void check_decode_node(void)
{
	const char *build = getenv("JOBCG_BUILD_ROOT");
	static const char *const cgs[] = {"job_2/step_0/user/task_0", "job_3/step_0/user/task_0",
					  "job_1/step_0/user/task_0"};
	static char out[1 << 16];
	char cmd[8192], path[4096];
	uint32_t *ids = NULL;
	size_t n = 0;
	int rfd;

	if (!build || access("/usr/sbin/bpftool", X_OK) < 0) {
		tap_skip(
		    "JOBCG_BUILD_ROOT not set or no /usr/sbin/bpftool: jobcg decode of the node "
		    "program not checked");
		return;
	}
	rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0 || bpfsys_query(rfd, &ids, &n) < 0 || n != 1) {
		ok(false, "node: decode: the node program is attached at the root");
		if (rfd >= 0)
			close(rfd);
		free(ids);
		return;
	}
	close(rfd);
	snprintf(cmd, sizeof(cmd),
		 "/usr/sbin/bpftool prog dump xlated id %u | %s/cli/jobcg decode - 2>&1", ids[0],
		 build);
	int st = shell(cmd, out, sizeof(out));
	if (!ok(st == 1 && strstr(out, "opaque") &&
		    strstr(out, "bpftool prog dump xlated id N | jobcg decode --cgroup CGROUP -"),
		"node: decode without --cgroup: opaque, and says to run 'jobcg decode --cgroup'"))
		tap_diag("status %d: %s", st, out);

	unsigned agree = 0, total = 0, allowed = 0;
	for (size_t c = 0; c < ELEMENTSOF_(cgs); c++) {
		path_of(path, sizeof(path), cgs[c]);
		snprintf(
		    cmd, sizeof(cmd),
		    "/usr/sbin/bpftool prog dump xlated id %u | %s/cli/jobcg decode --cgroup %s - "
		    "2>&1",
		    ids[0], build, path);
		st = shell(cmd, out, sizeof(out));
		if (!ok(st == 0, "node: decode --cgroup %s exits 0", cgs[c])) {
			tap_diag("%s", out);
			continue;
		}
		for (unsigned minor = 0; minor < 4; minor++) {
			static const struct {
				char letter;
				int flags;
			} acc[] = {{'r', O_RDONLY}, {'w', O_WRONLY}, {'m', -1}};
			for (size_t a = 0; a < ELEMENTSOF_(acc); a++) {
				int says = rules_allow(out, GPU_MAJOR, minor, acc[a].letter);
				int kernel = try_in(cgs[c], GPU_MAJOR, minor, acc[a].flags);
				total++;
				if ((kernel == 0 && says == 1) || (kernel == EPERM && says == 0))
					agree++;
				else
					tap_diag("%s: c 195:%u %c: decode says %d, kernel %d\n%s",
						 cgs[c], minor, acc[a].letter, says, kernel, out);
				allowed += kernel == 0;
			}
		}
		if (c == 0)
			ok(strstr(out, "c 195:0 rw\n") != NULL,
			   "node: decode --cgroup of job 2's task names its grant c 195:0 rw");
	}
	ok(total == 36 && agree == total && allowed > 0 && allowed < total,
	   "node: decode --cgroup answers as the kernel on %u/%u opens and mknods (%u allowed)",
	   agree, total, allowed);
	snprintf(cmd, sizeof(cmd),
		 "/usr/sbin/bpftool prog dump xlated id %u | %s/cli/jobcg decode --cgroup "
		 "%s/nonexistent - "
		 "2>&1",
		 ids[0], build, root);
	st = shell(cmd, out, sizeof(out));
	ok(st == 1 && strstr(out, "nonexistent"),
	   "node: decode --cgroup of no cgroup fails naming it");

	/* A name relative to the mount without a slash (the test root's own) is a path, not a
	 * job: only a job id (with a step id) is taken for one. */
	const char *base = strrchr(root, '/') + 1;
	snprintf(
	    cmd, sizeof(cmd),
	    "/usr/sbin/bpftool prog dump xlated id %u | %s/cli/jobcg decode --cgroup %s - 2>&1",
	    ids[0], build, base);
	st = shell(cmd, out, sizeof(out));
	if (!ok(st == 0 && strstr(out, "c *:* ") && !strstr(out, "job_"),
		"node: decode --cgroup %s (relative to the mount) decodes that cgroup", base))
		tap_diag("status %d: %s", st, out);

	/* JOB.STEP under the root cgroup.conf names (JobcgRoot=), as every other command finds
	 * it: the same rules as the step's path gives. */
	char want[4096], confdir[4096];
	path_of(path, sizeof(path), "job_2/step_0");
	snprintf(
	    cmd, sizeof(cmd),
	    "/usr/sbin/bpftool prog dump xlated id %u | %s/cli/jobcg decode --cgroup %s - 2>&1",
	    ids[0], build, path);
	st = shell(cmd, want, sizeof(want));
	snprintf(confdir, sizeof(confdir), "%s/conf-root", ktest_tmpdir());
	(void)mkdir(confdir, 0755);
	snprintf(path, sizeof(path), "%s/cgroup.conf", confdir);
	FILE *cf = fopen(path, "we");
	if (cf) {
		fprintf(cf, "JobcgRoot=%s\n", base);
		fclose(cf);
	}
	snprintf(cmd, sizeof(cmd),
		 "/usr/sbin/bpftool prog dump xlated id %u | env -u JOBCG_ROOT %s/cli/jobcg "
		 "--config-dir %s decode --cgroup 2.0 - 2>&1",
		 ids[0], build, confdir);
	int st2 = shell(cmd, out, sizeof(out));
	if (!ok(st == 0 && st2 == 0 && strcmp(out, want) == 0,
		"node: decode --cgroup 2.0 finds the step under cgroup.conf's JobcgRoot"))
		tap_diag("status %d/%d: %s\nwanted: %s", st, st2, out, want);
	free(ids);
}

/* `jobcg policy --json` names the cgroups and the device nodes. */
static void check_cli(const char *mname)
{
	const char *build = getenv("JOBCG_BUILD_ROOT");
	char cmd[8192], out[65536];
	size_t len = 0;
	FILE *f;

	if (!build) {
		tap_skip("JOBCG_BUILD_ROOT not set: jobcg policy not checked");
		return;
	}
	/* An empty --dev-dir: the names can only come from gres.conf (one that does not exist
	 * is refused). */
	snprintf(cmd, sizeof(cmd), "%s/nodev", ktest_tmpdir());
	(void)mkdir(cmd, 0755);
	snprintf(cmd, sizeof(cmd),
		 "JOBCG_BPF_PIN_DIR=%s %s/cli/jobcg --config-dir %s policy "
		 "--json --root %s --dev-dir %s/nodev",
		 pin_base, build, tmp, root, ktest_tmpdir());
	f = popen(cmd, "r");
	if (!f) {
		ok(false, "%s: run jobcg policy", mname);
		return;
	}
	len = fread(out, 1, sizeof(out) - 1, f);
	out[len] = 0;
	int st = pclose(f);
	if (!ok(st == 0, "%s: jobcg policy --json exits 0", mname))
		tap_diag("%s -> status %d", cmd, st);
	ok(strstr(out, "\"job_1/step_0\"") != NULL, "%s: jobcg policy shows job_1/step_0", mname);
	ok(strstr(out, "dev195_1") != NULL,
	   "%s: jobcg policy names the device node dev195_1 (from gres.conf)", mname);
	ok(strstr(out, mname) != NULL, "%s: jobcg policy reports the mode", mname);
	if (!strstr(out, "dev195_1"))
		tap_diag("%s", out);

	/* The text form, shown in the log for people reading it; names from --dev-dir. */
	snprintf(cmd, sizeof(cmd),
		 "JOBCG_BPF_PIN_DIR=%s %s/cli/jobcg --config-dir %s policy --root %s --dev-dir %s",
		 pin_base, build, tmp, root, tmp);
	f = popen(cmd, "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = 0;
			tap_diag("  %s", line);
		}
		ok(pclose(f) == 0, "%s: jobcg policy (text) exits 0", mname);
	}
}

/* The pinned policy map is readable with bpftool, as the issue asks. */
static void check_bpftool(const char *pins)
{
	char cmd[1024], line[512];
	unsigned entries = 0;
	FILE *f;

	if (access("/usr/sbin/bpftool", X_OK) != 0 && access("/usr/bin/bpftool", X_OK) != 0) {
		tap_skip("bpftool not installed");
		return;
	}
	snprintf(cmd, sizeof(cmd), "bpftool map dump pinned %s/jobcg_policy 2>&1", pins);
	f = popen(cmd, "r");
	if (!f)
		return;
	bool first = true;
	while (fgets(line, sizeof(line), f)) {
		/* With BTF, bpftool prints named fields, one "cgroup_id" per entry. */
		entries += strstr(line, "\"cgroup_id\"") != NULL;
		if (first)
			tap_diag("bpftool: %s", line);
		first = false;
	}
	/* job_1: marker + 1; step_0: marker + 2; task: marker + 1; job_2: marker + 1. */
	ok(pclose(f) == 0 && entries == 9,
	   "node: bpftool map dump shows the 9 policy entries with named fields (saw %u)", entries);
}

static bool gone(bool prog, uint32_t id)
{
	/* Freeing is deferred to RCU/workqueue in the kernel: give it a bounded moment. */
	for (int i = 0; i < 200; i++) {
		int fd = prog ? bpf_prog_get_fd_by_id(id) : bpf_map_get_fd_by_id(id);
		if (fd < 0)
			return true;
		close(fd);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return false;
}

/* Entries of the pinned policy map for cgroup REL (marker included). */
static int entries_of(struct jobcg_devpolicy *p, const char *rel)
{
	struct devprog_policy_key key, next;
	char pp[512], path[4096];
	uint64_t id;
	int fd, n = 0;
	bool first = true;

	path_of(path, sizeof(path), rel);
	snprintf(pp, sizeof(pp), "%s/%s", jobcg_devpolicy_pin_dir(p), DEVPROG_PIN_POLICY);
	if (jobcg_cgroup_id(path, &id) < 0 || bpfsys_get_pinned(pp, &fd) < 0)
		return -1;
	while (bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
		first = false;
		key = next;
		n += next.cgroup_id == id;
	}
	close(fd);
	return n;
}

/* Size of the key index xattr of REL, -errno when there is none. */
static long index_size(const char *rel)
{
	char path[4096];
	ssize_t sz;

	path_of(path, sizeof(path), rel);
	sz = getxattr(path, "trusted.jobcg.devkeys", NULL, 0);
	return sz < 0 ? -errno : (long)sz;
}

/*
 * The key index: a grant lists its entries in an xattr of the cgroup so that a revoke deletes
 * them without walking the map; without a usable index the walk still finds every one.
 */
static void check_key_index(struct jobcg_devpolicy *p)
{
	static const char *const two[] = {"c 195:0 rw", "c 195:1 rw"}, *const one[] = {
									   "c 195:1 rw"};
	const long head = 16, key = (long)sizeof(struct devprog_policy_key);
	char path[4096], other[4096];

	mkcg("job_6/step_0");
	mkcg("job_7");
	path_of(path, sizeof(path), "job_6");
	path_of(other, sizeof(other), "job_7");
	ok(grant(p, "job_6", two, 2) == 0, "index: grant job_6 two GPUs");
	is_int(entries_of(p, "job_6"), 3, "index: two entries and the marker in the map");
	is_int(index_size("job_6"), head + 2 * key, "index: the xattr lists the two entries");
	ok(grant(p, "job_6", one, 1) == 0, "index: re-grant job_6 one GPU");
	is_int(entries_of(p, "job_6"), 2, "index: one entry and the marker left");
	is_int(index_size("job_6"), head + key, "index: the xattr shrank with the grant");
	ok(revoke_rel(p, "job_6") == 0, "index: revoke job_6");
	is_int(entries_of(p, "job_6"), 0, "index: revoke left no entry");
	is_int(index_size("job_6"), -ENODATA, "index: revoke removed the xattr");
	is_int(revoke_rel(p, "job_6/step_0"), 0,
	       "index: revoking a cgroup never granted is a no-op");

	/* No index (removed by hand, or xattrs refused): the revoke walks the map. */
	ok(grant(p, "job_6", two, 2) == 0 && removexattr(path, "trusted.jobcg.devkeys") == 0,
	   "index: grant, then remove the index");
	ok(revoke_rel(p, "job_6") == 0 && entries_of(p, "job_6") == 0,
	   "index: without it the revoke still removes every entry");
	/* Garbage: ignored. */
	ok(grant(p, "job_6", two, 2) == 0 &&
	       setxattr(path, "trusted.jobcg.devkeys", "garbage!", 8, 0) == 0,
	   "index: grant, then overwrite the index with garbage");
	ok(revoke_rel(p, "job_6") == 0 && entries_of(p, "job_6") == 0,
	   "index: a garbled index is ignored, every entry removed");
	/* Another cgroup's index (copied): ignored, and the other cgroup keeps its grant. */
	{
		char buf[1024];
		ssize_t n;

		ok(grant(p, "job_6", two, 2) == 0 && grant(p, "job_7", one, 1) == 0,
		   "index: grant job_6 and job_7");
		n = getxattr(other, "trusted.jobcg.devkeys", buf, sizeof(buf));
		ok(n > 0 && setxattr(path, "trusted.jobcg.devkeys", buf, (size_t)n, 0) == 0,
		   "index: job_7's index copied onto job_6");
		ok(revoke_rel(p, "job_6") == 0 && entries_of(p, "job_6") == 0,
		   "index: another cgroup's index is not trusted, every entry of job_6 removed");
		is_int(entries_of(p, "job_7"), 2, "index: job_7 keeps its entry and marker");
		ok(revoke_rel(p, "job_7") == 0 && entries_of(p, "job_7") == 0,
		   "index: revoke job_7");
	}
}

/* The managed set's digest: an open that finds it current writes nothing, a stale one resyncs. */
static void check_managed_digest(const struct jobcg_config *conf,
				 const struct jobcg_devrule *managed)
{
	struct jobcg_devpolicy *p2 = NULL;
	struct jobcg_devrule *m = NULL;
	struct devprog_managed_key extra = {2, GPU_MAJOR, 9}, lo = {0, 0, 0};
	uint32_t v = JOBCG_DEV_ACC_ALL;
	size_t nm = 0;
	char pp[512];
	int fd = -1;

	if (jobcg_devpolicy_open(conf, root, managed, 4, &p2) < 0) {
		ok(false, "digest: open");
		return;
	}
	snprintf(pp, sizeof(pp), "%s/%s", jobcg_devpolicy_pin_dir(p2), DEVPROG_PIN_MANAGED);
	ok(bpfsys_get_pinned(pp, &fd) == 0, "digest: managed map opened");
	/* Someone else's change (an older jobcg without the digest drops it): resynced. */
	ok(fd >= 0 && bpf_map_update_elem(fd, &extra, &v, BPF_ANY) == 0 &&
	       bpf_map_delete_elem(fd, &lo) == 0,
	   "digest: a stray managed entry added, the digest dropped");
	jobcg_devpolicy_free(p2);
	p2 = NULL;
	ok(jobcg_devpolicy_open(conf, root, managed, 4, &p2) == 0 &&
	       jobcg_devpolicy_managed(p2, &m, &nm) == 0 && nm == 4,
	   "digest: reopen resyncs: exactly the four managed GPUs, no digest entry listed");
	free(m);
	ok(fd >= 0 && bpf_map_lookup_elem(fd, &extra, &v) < 0 && errno == ENOENT,
	   "digest: the stray entry is gone");
	ok(fd >= 0 && bpf_map_lookup_elem(fd, &lo, &v) == 0, "digest: the digest is back");
	if (fd >= 0)
		close(fd);
	jobcg_devpolicy_free(p2);
}

static void run_mode(enum jobcg_device_program mode)
{
	const char *mname = mode == JOBCG_DEVPROG_NODE ? "node" : "linear";
	struct jobcg_config conf = {0};
	struct jobcg_devrule managed[4];
	struct jobcg_devpolicy *p = NULL;
	char buf[8192], rel[256];
	int e;

	conf.cgroup.device_program = mode;
	conf.cgroup.bpf_pin_dir = pin_base;
	for (int i = 0; i < 4; i++) {
		snprintf(buf, sizeof(buf), "c %d:%d rwm", GPU_MAJOR, i);
		managed[i] = rule(buf);
	}
	e = jobcg_devpolicy_open(&conf, root, managed, 4, &p);
	if (!ok(e == 0, "%s: open policy", mname)) {
		tap_diag("%s", jobcg_error_format(e, buf, sizeof(buf)));
		return;
	}
	if (mode == JOBCG_DEVPROG_NODE && !ok(jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE,
					      "node: node program loaded (no fallback)"))
		tap_diag("fallback: %s", jobcg_devpolicy_fallback_reason(p));
	if (jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE) {
		char pp[512];
		snprintf(pp, sizeof(pp), "%s/prog", jobcg_devpolicy_pin_dir(p));
		ok(access(pp, F_OK) == 0, "node: program pinned at %s", pp);
		note_pins(p);
		/* Reopening reuses the pinned program instead of attaching a second one. */
		struct jobcg_devpolicy *p2 = NULL;
		ok(jobcg_devpolicy_open(&conf, root, managed, 4, &p2) == 0, "node: reopen");
		{
			int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			uint32_t *ids = NULL;
			size_t n = 0;
			if (rfd >= 0 && bpfsys_query(rfd, &ids, &n) == 0)
				is_int(n, 1, "node: one program attached at the root after reopen");
			free(ids);
			if (rfd >= 0)
				close(rfd);
		}
		jobcg_devpolicy_free(p2);

		/* A restart with fewer managed devices drops the others from the managed map. */
		struct jobcg_devrule *m = NULL;
		size_t nm = 0;
		ok(jobcg_devpolicy_open(&conf, root, managed, 2, &p2) == 0,
		   "node: reopen with 2 managed");
		ok(p2 && jobcg_devpolicy_managed(p2, &m, &nm) == 0 && nm == 2 && m[0].minor == 0 &&
		       m[1].minor == 1,
		   "node: managed map now holds c 195:0 and c 195:1 only");
		free(m);
		jobcg_devpolicy_free(p2);
		p2 = NULL;
		ok(jobcg_devpolicy_open(&conf, root, managed, 4, &p2) == 0 &&
		       jobcg_devpolicy_managed(p2, &m, &nm) == 0 && nm == 4,
		   "node: reopen with 4 managed restores them");
		free(m);
		jobcg_devpolicy_free(p2);
	}

	mkcg("job_1/step_0/user/task_0");
	mkcg("job_1/step_0/jobcg");
	mkcg("job_1/step_1/user/task_0");
	mkcg("job_2/step_0/user/task_0");
	mkcg("job_2/step_0/jobcg");
	mkcg("job_3/step_0/user/task_0");
	mkcg("system");

	/* Job 1 may use all four read/write; its step 0 only gpu 1 and 2. */
	static const char *const all_rw[] = {"c 195:* rw"};
	static const char *const gpu12[] = {"c 195:1 rwm", "c 195:2 rwm"};
	ok(grant(p, "job_1", all_rw, 1) == 0, "%s: grant job_1 c 195:* rw", mname);
	ok(grant(p, "job_1/step_0", gpu12, 2) == 0, "%s: grant job_1/step_0 gpu 1,2", mname);
	const char *t = "job_1/step_0/user/task_0";
	is_int(try_in(t, GPU_MAJOR, 0, O_RDWR), EPERM, "step gpu1,2: gpu0 denied");
	is_int(try_in(t, GPU_MAJOR, 1, O_RDWR), 0, "step gpu1,2: gpu1 allowed");
	is_int(try_in(t, GPU_MAJOR, 2, O_RDWR), 0, "step gpu1,2: gpu2 allowed");
	is_int(try_in(t, GPU_MAJOR, 3, O_RDWR), EPERM, "step gpu1,2: gpu3 denied");
	is_int(try_in("job_1/step_0/jobcg", GPU_MAJOR, 3, O_RDWR), EPERM,
	       "step gpu1,2: step's jobcg leaf denied gpu3");
	/* The step grants m but the job does not: both levels must allow. */
	is_int(try_in(t, GPU_MAJOR, 1, -1), EPERM, "job without m: mknod gpu1 denied");
	is_int(try_in(t, OTHER_MAJOR, 0, O_RDWR), 0, "unmanaged device allowed");

	/* Task level: step 1 unconstrained, its task read-only on gpu3. */
	static const char *const gpu3_r[] = {"c 195:3 r"};
	ok(grant(p, "job_1/step_1/user/task_0", gpu3_r, 1) == 0, "%s: grant task gpu3 r", mname);
	t = "job_1/step_1/user/task_0";
	is_int(try_in(t, GPU_MAJOR, 3, O_RDONLY), 0, "task gpu3 r: O_RDONLY allowed");
	is_int(try_in(t, GPU_MAJOR, 3, O_WRONLY), EPERM, "task gpu3 r: O_WRONLY denied");
	is_int(try_in(t, GPU_MAJOR, 0, O_RDONLY), EPERM, "task gpu3 r: gpu0 denied");
	is_int(try_in("job_1/step_1", GPU_MAJOR, 0, O_RDWR), 0,
	       "task grant does not constrain its step");

	/* Job level only. */
	static const char *const gpu0_rw[] = {"c 195:0 rw"};
	ok(grant(p, "job_2", gpu0_rw, 1) == 0, "%s: grant job_2 gpu0 rw", mname);
	is_int(try_in("job_2/step_0/user/task_0", GPU_MAJOR, 0, O_RDWR), 0,
	       "job gpu0: gpu0 allowed");
	is_int(try_in("job_2/step_0/user/task_0", GPU_MAJOR, 1, O_RDWR), EPERM,
	       "job gpu0: gpu1 denied");
	is_int(try_in("job_2/step_0/jobcg", GPU_MAJOR, 2, O_RDONLY), EPERM,
	       "job gpu0: jobcg leaf gpu2 denied");
	is_int(try_in("job_2/step_0/user/task_0", GPU_MAJOR, 0, -1), EPERM,
	       "job gpu0 rw: mknod denied");
	/* Fail closed: below the root, no grant at any level means no managed device. */
	ok(try_in("job_3/step_0/user/task_0", GPU_MAJOR, 2, O_RDWR) == EPERM,
	   "%s: ungranted job (made by hand): gpu2 denied", mname);
	ok(try_in("job_3/step_0/user/task_0", GPU_MAJOR, 2, -1) == EPERM,
	   "%s: ungranted job: mknod gpu2 denied", mname);
	ok(try_in("job_3/step_0/user/task_0", 1, 3, -1) == 0,
	   "%s: ungranted job: unmanaged device (c 1:3) still allowed", mname);
	ok(try_in("system", GPU_MAJOR, 0, O_RDONLY) == EPERM, "%s: system/: gpu0 denied", mname);
	ok(try_in("job_2/step_0/user/task_0", 1, 3, -1) == 0,
	   "%s: granted job: unmanaged device (c 1:3) allowed", mname);

	if (mode == JOBCG_DEVPROG_NODE && jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE)
		check_decode_node();
	if (mode == JOBCG_DEVPROG_LINEAR)
		note_linear(p); /* the program about to be replaced must be released too */
	/* Re-grant replaces (linear: BPF_F_REPLACE, still one program). */
	ok(grant(p, "job_1/step_1/user/task_0", gpu0_rw, 1) == 0, "%s: re-grant task gpu0 rw",
	   mname);
	is_int(try_in(t, GPU_MAJOR, 0, O_WRONLY), 0, "re-grant: gpu0 now allowed");
	is_int(try_in(t, GPU_MAJOR, 3, O_RDONLY), EPERM, "re-grant: gpu3 now denied");

	/* Listing shows paths and rules. */
	{
		struct jobcg_devgrant *g = NULL;
		size_t n = 0;
		ok(jobcg_devpolicy_list(p, &g, &n) == 0, "%s: list", mname);
		const struct jobcg_devgrant *s0 = find_grant(g, n, "job_1/step_0");
		ok(s0 && s0->n_rules == 2 && s0->level == 2,
		   "%s: list shows job_1/step_0 with 2 rules, level 2", mname);
		const struct jobcg_devgrant *tk = find_grant(g, n, "job_1/step_1/user/task_0");
		ok(tk && tk->n_rules == 1 && tk->rules[0].minor == 0 &&
		       tk->rules[0].access == (JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE),
		   "%s: list shows the re-granted task rule c 195:0 rw", mname);
		size_t count = 0;
		for (size_t i = 0; i < n; i++)
			count += g[i].path && strcmp(g[i].path, "job_1/step_1/user/task_0") == 0;
		is_int(count, 1, "re-grant left one entry/program for the task");
		jobcg_devgrants_free(g, n);
	}
	if (mode == JOBCG_DEVPROG_LINEAR)
		note_linear(p);
	if (jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE) {
		check_key_index(p);
		check_managed_digest(&conf, managed);
	}
	check_cli(mname);
	if (jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE)
		check_bpftool(jobcg_devpolicy_pin_dir(p));

	/* A grant made by a process that is then SIGKILLed stays enforced. */
	mkcg("job_4/step_0/user/task_0");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct jobcg_devpolicy *q = NULL;
		if (jobcg_devpolicy_open(&conf, root, managed, 4, &q) < 0)
			_exit(1);
		if (grant(q, "job_4", gpu0_rw, 1) < 0)
			_exit(2);
		raise(SIGKILL);
		_exit(3);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: granting process SIGKILLed",
	   mname);
	is_int(try_in("job_4/step_0/user/task_0", GPU_MAJOR, 1, O_RDWR), EPERM,
	       "after SIGKILL: job_4 still denied gpu1");
	is_int(try_in("job_4/step_0/user/task_0", GPU_MAJOR, 0, O_RDWR), 0,
	       "after SIGKILL: job_4 still allowed gpu0");
	if (mode == JOBCG_DEVPROG_LINEAR)
		note_linear(p);

	/* gc: entries of a cgroup removed without revoke go; live ones stay. */
	if (jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE) {
		char path[4096];
		size_t removed = 99, n_before = 0, n_after = 0;
		struct jobcg_devgrant *g = NULL;
		mkcg("job_5");
		ok(grant(p, "job_5", gpu0_rw, 1) == 0, "node: grant job_5");
		jobcg_devpolicy_list(p, &g, &n_before);
		jobcg_devgrants_free(g, n_before);
		path_of(path, sizeof(path), "job_5");
		ok(rmdir(path) == 0, "node: job_5 removed without revoke");
		ok(jobcg_devpolicy_gc(p, &removed) == 0, "node: gc");
		is_int(removed, 1, "node: gc removed the one dead cgroup");
		jobcg_devpolicy_list(p, &g, &n_after);
		jobcg_devgrants_free(g, n_after);
		is_int(n_after, n_before - 1, "node: gc kept the live grants");
	}

	/* A policy opened as pinned (what job teardown does whatever the configuration says)
	 * revokes too. */
	if (jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE) {
		struct jobcg_devpolicy *pin = NULL;
		ok(jobcg_devpolicy_open_pinned(&conf, root, &pin) == 0, "node: open pinned");
		ok(pin && revoke_rel(pin, "job_4") == 0,
		   "node: revoke job_4 through the pinned policy");
		is_int(try_in("job_4/step_0/user/task_0", GPU_MAJOR, 1, O_RDWR), EPERM,
		       "after revoke: job_4 gets no managed device");
		jobcg_devpolicy_free(pin);
	}

	/* Revoke: nothing left for the cgroup. */
	ok(revoke_rel(p, "job_1/step_0") == 0, "%s: revoke job_1/step_0", mname);
	is_int(try_in("job_1/step_0/user/task_0", GPU_MAJOR, 0, O_RDWR), 0,
	       "after step revoke: job grant (all rw) applies again");
	{
		struct jobcg_devgrant *g = NULL;
		size_t n = 0;
		uint64_t id = 0;
		char path[4096];
		path_of(path, sizeof(path), "job_1/step_0");
		jobcg_cgroup_id(path, &id);
		ok(jobcg_devpolicy_list(p, &g, &n) == 0, "%s: list after revoke", mname);
		bool found = false;
		for (size_t i = 0; i < n; i++)
			found |= g[i].cgroup_id == id;
		ok(!found, "%s: no entry left for the revoked cgroup", mname);
		jobcg_devgrants_free(g, n);
	}
	static const char *const granted[] = {"job_1", "job_1/step_1/user/task_0", "job_2",
					      "job_4"};
	for (size_t i = 0; i < ELEMENTSOF_(granted); i++)
		ok(revoke_rel(p, granted[i]) == 0, "%s: revoke %s", mname, granted[i]);
	{
		struct jobcg_devgrant *g = NULL;
		size_t n = 0;
		ok(jobcg_devpolicy_list(p, &g, &n) == 0 && n == 0, "%s: policy empty after revokes",
		   mname);
		jobcg_devgrants_free(g, n);
	}
	/* Node level restrictions: the user/ level cannot be granted in node mode. */
	if (jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE)
		ok(grant(p, "job_1/step_0/user", gpu0_rw, 1) == -EINVAL,
		   "node: grant at the user/ level refused");

	e = jobcg_devpolicy_destroy(p);
	ok(e == 0, "%s: destroy", mname);
	snprintf(rel, sizeof(rel), "job_1");
	for (int j = 1; j <= 4; j++) {
		char path[4096];
		snprintf(rel, sizeof(rel), "job_%d", j);
		path_of(path, sizeof(path), rel);
		ktest_remove_tree(path);
	}
}

/* A node program this kernel refuses: device programs may not call bpf_probe_read_kernel. */
static int refused_builder(int managed_ref, int policy_ref, unsigned root_level, uint64_t root_id,
			   struct devprog_buf *ret)
{
	struct bpf_insn *i = calloc(6, sizeof(*i));
	if (!i)
		return -ENOMEM;
	i[0] = (struct bpf_insn){.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 1};
	i[1] = (struct bpf_insn){.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 2};
	i[2] = (struct bpf_insn){.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 3};
	i[3] = (struct bpf_insn){.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_probe_read_kernel};
	i[4] = (struct bpf_insn){.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 1};
	i[5] = (struct bpf_insn){.code = BPF_JMP | BPF_EXIT};
	*ret = (struct devprog_buf){i, 6, 6};
	return 0;
}

/* The node program built with a level that is off (as inside a cgroup namespace). */
static int shifted_builder(int managed_ref, int policy_ref, unsigned root_level, uint64_t root_id,
			   struct devprog_buf *ret)
{
	return devprog_build_node(managed_ref, policy_ref, root_level + 3, root_id, ret);
}

static void run_shifted(void)
{
	struct jobcg_config conf = {0};
	struct jobcg_devrule managed[4];
	struct jobcg_devpolicy *p = NULL;
	char buf[64], path[4096];

	conf.cgroup.device_program = JOBCG_DEVPROG_NODE;
	conf.cgroup.bpf_pin_dir = pin_base;
	for (int i = 0; i < 4; i++) {
		snprintf(buf, sizeof(buf), "c %d:%d rwm", GPU_MAJOR, i);
		managed[i] = rule(buf);
	}
	devprog_node_builder = shifted_builder;
	ok(jobcg_devpolicy_open(&conf, root, managed, 4, &p) == 0, "shifted level: open");
	devprog_node_builder = devprog_build_node;
	if (!p)
		return;
	ok(jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE, "shifted level: node mode");
	note_pins(p);
	mkcg("job_8/step_0/user/task_0");
	static const char *const gpu12[] = {"c 195:1 rwm", "c 195:2 rwm"};
	static const char *const gpu3[] = {"c 195:3 r"};
	ok(grant(p, "job_8/step_0", gpu12, 2) == 0, "shifted level: grant step gpu 1,2");
	is_int(try_in("job_8/step_0/user/task_0", GPU_MAJOR, 0, O_RDWR), EPERM,
	       "shifted level: gpu0 denied at the step");
	is_int(try_in("job_8/step_0/user/task_0", GPU_MAJOR, 1, O_RDWR), 0,
	       "shifted level: gpu1 allowed");
	ok(grant(p, "job_8/step_0/user/task_0", gpu3, 1) == 0, "shifted level: grant task gpu3");
	is_int(try_in("job_8/step_0/user/task_0", GPU_MAJOR, 1, O_RDWR), EPERM,
	       "shifted level: task level found too (gpu1 now denied)");
	ok(revoke_rel(p, "job_8/step_0/user/task_0") == 0 && revoke_rel(p, "job_8/step_0") == 0,
	   "shifted level: revoke");
	ok(jobcg_devpolicy_destroy(p) == 0, "shifted level: destroy");
	path_of(path, sizeof(path), "job_8");
	ktest_remove_tree(path);
}

static char warned[4096];
static void log_cb(enum jobcg_log_level level, const char *msg, void *userdata)
{
	if (level <= JOBCG_LOG_WARNING && !warned[0])
		snprintf(warned, sizeof(warned), "%s", msg);
}

/* When the node program does not load, open() falls back to linear programs and says why. */
static void run_fallback(void)
{
	struct jobcg_config conf = {0};
	struct jobcg_devrule managed[4];
	struct jobcg_devpolicy *p = NULL;
	char buf[64];

	conf.cgroup.device_program = JOBCG_DEVPROG_NODE;
	conf.cgroup.bpf_pin_dir = pin_base;
	for (int i = 0; i < 4; i++) {
		snprintf(buf, sizeof(buf), "c %d:%d rwm", GPU_MAJOR, i);
		managed[i] = rule(buf);
	}
	devprog_node_builder = refused_builder;
	jobcg_set_log(log_cb, NULL, JOBCG_LOG_DEBUG);
	ok(jobcg_devpolicy_open(&conf, root, managed, 4, &p) == 0, "fallback: open succeeds");
	devprog_node_builder = devprog_build_node;
	jobcg_set_log(NULL, NULL, JOBCG_LOG_ERR);
	if (!p)
		return;
	is_int(jobcg_devpolicy_mode(p), JOBCG_DEVPROG_LINEAR, "fallback: linear mode in effect");
	ok(jobcg_devpolicy_fallback_reason(p) &&
	       strstr(jobcg_devpolicy_fallback_reason(p), "jobcg_node"),
	   "fallback: reason names the program: %s", jobcg_devpolicy_fallback_reason(p));
	ok(strstr(warned, "linear") != NULL, "fallback: a warning was logged: %s", warned);
	ok(jobcg_devpolicy_pin_dir(p) == NULL, "fallback: no pin directory in linear mode");
	mkcg("job_9/step_0/user/task_0");
	static const char *const gpu12[] = {"c 195:1 rwm", "c 195:2 rwm"};
	ok(grant(p, "job_9/step_0", gpu12, 2) == 0, "fallback: grant step gpu 1,2");
	note_linear(p);
	is_int(try_in("job_9/step_0/user/task_0", GPU_MAJOR, 0, O_RDWR), EPERM,
	       "fallback: gpu0 denied");
	is_int(try_in("job_9/step_0/user/task_0", GPU_MAJOR, 2, O_RDWR), 0,
	       "fallback: gpu2 allowed");
	ok(revoke_rel(p, "job_9/step_0") == 0, "fallback: revoke");
	jobcg_devpolicy_destroy(p);
	char path[4096];
	path_of(path, sizeof(path), "job_9");
	ktest_remove_tree(path);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)remove(path);
	return 0;
}

/* Pins left by a test that stopped half-way must not outlive it. */
static void remove_pins(void)
{
	if (pin_base[0])
		nftw(pin_base, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	char dev[4096];
	uint32_t *progs_before = NULL, *maps_before = NULL;
	size_t np = 0, nm = 0;

	root = ktest_setup("devices");
	tmp = ktest_tmpdir();
	snprintf(pin_base, sizeof(pin_base), "/sys/fs/bpf/jobcg-test-%d-%ld", (int)getpid(),
		 (long)time(NULL));
	atexit(remove_pins);
	for (unsigned i = 0; i < 4; i++) {
		dev_path(dev, sizeof(dev), GPU_MAJOR, i);
		if (mknod(dev, S_IFCHR | 0666, makedev(GPU_MAJOR, i)) < 0)
			tap_plan_skip_all("mknod not permitted");
	}
	/* gres.conf in the configuration directory names the stand-in GPUs (for jobcg policy). */
	{
		char gres[4200];
		snprintf(gres, sizeof(gres), "%s/gres.conf", tmp);
		FILE *g = fopen(gres, "we");
		if (g) {
			fprintf(g, "Name=gpu File=%s/dev195_[0-3]\n", tmp);
			fclose(g);
		}
	}
	dev_path(dev, sizeof(dev), OTHER_MAJOR, 0);
	mknod(dev, S_IFCHR | 0666, makedev(OTHER_MAJOR, 0));
	bpfsys_all_prog_ids(&progs_before, &np);
	bpfsys_all_map_ids(&maps_before, &nm);

	run_mode(JOBCG_DEVPROG_NODE);
	run_mode(JOBCG_DEVPROG_LINEAR);
	run_fallback();
	run_shifted();

	bool all_gone = true;
	for (size_t i = 0; i < n_made_progs; i++)
		if (!gone(true, made_progs[i])) {
			all_gone = false;
			tap_diag("program %u still loaded", made_progs[i]);
		}
	ok(all_gone && n_made_progs >= 3, "no leaked programs (%zu created, all released)",
	   n_made_progs);
	all_gone = true;
	for (size_t i = 0; i < n_made_maps; i++)
		if (!gone(false, made_maps[i])) {
			all_gone = false;
			tap_diag("map %u still exists", made_maps[i]);
		}
	ok(all_gone && n_made_maps == 4, "no leaked maps (%zu created, all released)", n_made_maps);
	/* The maps' BTF type description goes with them. */
	bool btf_gone = false;
	for (int i = 0; i < 200 && made_btf && !btf_gone; i++) {
		int fd = bpf_btf_get_fd_by_id(made_btf);
		btf_gone = fd < 0;
		if (fd >= 0) {
			close(fd);
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	ok(made_btf && btf_gone, "maps had BTF (id %u), released with them", made_btf);
	/* Anything new named jobcg_* that we did not release shows here too (others' tests may
	 * run at the same time, so this only reports). */
	{
		uint32_t *after = NULL;
		size_t na = 0;
		bpfsys_all_prog_ids(&after, &na);
		for (size_t i = 0; i < na; i++) {
			bool old = false;
			for (size_t j = 0; j < np && !old; j++)
				old = progs_before[j] == after[i];
			if (!old)
				tap_diag("new program id %u exists after the test", after[i]);
		}
		free(after);
	}
	free(progs_before);
	free(maps_before);
	ok(rmdir(pin_base) == 0 || errno == ENOENT, "pin directory removed");
	return tap_done();
}
