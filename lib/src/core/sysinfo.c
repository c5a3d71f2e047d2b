/* jobcg: host discovery: the cgroup v2 mount, controllers, kernel features, what cannot be
 * enforced. */
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <linux/bpf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/xattr.h>

#include "bpfsys.h"
#include "cgroupfs.h"
#include "context_internal.h"
#include "sysinfo_internal.h"
#include "scope_systemd.h"
#include "log.h"
#include "scope_choose.h"
#include "util.h"

/*
 * Iterate "dev dir type opts ..." lines; calls @fn for each, stops when it returns non-zero.
 * The fields are cut out of one copy of the text in place: the table is read on every command
 * of a hybrid host, and an allocation per field was a third of a launch's instructions.
 */
static int each_mount(const char *mounts,
		      int (*fn)(const char *dir, const char *type, char *opts, void *u), void *u)
{
	_cleanup_free_ char *copy = strdup(mounts);
	char *line, *next;

	if (!copy)
		return -ENOMEM;
	for (line = copy; line && *line; line = next) {
		char *f[4];
		size_t n = 0;
		int r;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		for (char *p = line; n < ELEMENTSOF(f);) {
			p += strspn(p, " \t");
			if (!*p)
				break;
			f[n++] = p;
			p += strcspn(p, " \t");
			if (*p)
				*p++ = '\0';
		}
		if (n < ELEMENTSOF(f))
			continue;
		r = fn(f[1], f[2], f[3], u);
		if (r)
			return r;
	}
	return 0;
}

struct mount_scan {
	char **v2; /* cgroup2 mount points */
	bool have_v1;
	unsigned v1;
};

static int scan_one(const char *dir, const char *type, char *opts, void *u)
{
	struct mount_scan *s = u;

	if (streq(type, "cgroup2"))
		return strv_push(&s->v2, strdup(dir)) < 0 ? -ENOMEM : 0;
	if (streq(type, "cgroup")) {
		char *save = NULL;

		s->have_v1 = true;
		for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
			/* v1 calls the io controller blkio */
			int c = jobcg_controller_from_name(streq(o, "blkio") ? "io" : o);

			if (c >= 0)
				s->v1 |= 1u << c;
		}
	}
	return 0;
}

static char *strip_slashes(const char *p)
{
	size_t n = strlen(p);

	while (n > 1 && p[n - 1] == '/')
		n--;
	return strndup(p, n);
}

int discover_mount(const char *mounts, const char *configured, char **ret_mount,
		   enum jobcg_layout *ret_layout)
{
	struct mount_scan s = {};
	_cleanup_strv_free_ char **v2 = NULL;
	_cleanup_free_ char *conf = NULL, *conf_unified = NULL;
	const char *pick = NULL;
	enum jobcg_layout layout = JOBCG_LAYOUT_OTHER;
	char *m;
	int r;

	r = each_mount(mounts, scan_one, &s);
	v2 = s.v2;
	if (r < 0)
		return r;
	if (configured && *configured) {
		conf = strip_slashes(configured);
		conf_unified = conf ? cgfs_path(conf, "unified") : NULL;
		if (!conf_unified)
			return -ENOMEM;
		if (strv_contains(v2, conf)) {
			pick = conf;
			layout = JOBCG_LAYOUT_CONFIGURED;
		} else if (strv_contains(v2, conf_unified)) {
			pick = conf_unified;
			layout = JOBCG_LAYOUT_HYBRID;
		} else
			return error_set(
			    -ENOENT, "CgroupMountpoint=%s: neither it nor %s is a cgroup v2 mount",
			    conf, conf_unified);
	} else if (strv_contains(v2, "/sys/fs/cgroup")) {
		pick = "/sys/fs/cgroup";
		layout = JOBCG_LAYOUT_UNIFIED;
	} else if (strv_contains(v2, "/sys/fs/cgroup/unified")) {
		pick = "/sys/fs/cgroup/unified";
		layout = JOBCG_LAYOUT_HYBRID;
	} else if (v2 && v2[0]) {
		pick = v2[0];
		layout = JOBCG_LAYOUT_OTHER;
	} else if (s.have_v1)
		return error_set(
		    -EOPNOTSUPP,
		    "this system has only cgroup v1 mounted: jobcg needs cgroup v2 (boot with "
		    "systemd.unified_cgroup_hierarchy=1, or mount cgroup2 at "
		    "/sys/fs/cgroup/unified)");
	else
		return error_set(
		    -ENOENT, "no cgroup file system is mounted (mount cgroup2 at /sys/fs/cgroup)");
	m = strdup(pick);
	if (!m)
		return -ENOMEM;
	*ret_mount = m;
	*ret_layout = layout;
	return 0;
}

struct mount_opt {
	const char *dir, *opt;
	int found; /* -1: no such cgroup2 mount */
};

static int find_opt(const char *dir, const char *type, char *opts, void *u)
{
	struct mount_opt *m = u;
	char *save = NULL;

	if (!streq(type, "cgroup2") || !streq(dir, m->dir))
		return 0;
	m->found = 0;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
		if (streq(o, m->opt))
			m->found = 1;
	return 0; /* the last mount on a path is the one in effect */
}

/* 1 when the cgroup2 mount at @dir has option @opt, 0 when not, -1 when @dir is no such
 * mount. */
static int mount_option(const char *mounts, const char *dir, const char *opt)
{
	struct mount_opt m = {.dir = dir, .opt = opt, .found = -1};

	return each_mount(mounts, find_opt, &m) < 0 ? -1 : m.found;
}

unsigned discover_v1_controllers(const char *mounts)
{
	struct mount_scan s = {};

	(void)each_mount(mounts, scan_one, &s);
	strv_free(s.v2);
	return s.v1;
}

int discover_root_strip(const char *mount, const char *root, const char **ret)
{
	size_t ml = mount ? strlen(mount) : 0, first;

	if (root[0] == '/' && ml > 1) {
		if (strncmp(root, mount, ml) == 0 && (root[ml] == '/' || !root[ml])) {
			root += ml;
		} else {
			/* "/sys/fs/cgroup/x" on a host whose mount is /sys/fs/cgroup/unified: a
			 * file name, not a cgroup path. Taken as relative it would make
			 * "sys/fs/cgroup/x" below the mount. "/system.slice/x" (cgroup notation)
			 * does not start so. */
			first = strcspn(mount + 1, "/");
			if (strncmp(root + 1, mount + 1, first) == 0 &&
			    (root[1 + first] == '/' || !root[1 + first]))
				return error_set(
				    -EINVAL,
				    "invalid jobcg tree root '%s' (JobcgRoot=/JOBCG_ROOT): "
				    "a file name outside the cgroup v2 mount %s; give the "
				    "cgroup path relative to the mount",
				    root, mount);
		}
	}
	while (*root == '/')
		root++;
	*ret = root;
	return 0;
}

int discover_root_rel(const struct jobcg_config *conf, const char *mount, char **ret)
{
	const struct jobcg_cgroup_conf *c = &conf->cgroup;
	const char *root = c->tree_root;
	char *s;

	if (root && *root) {
		int r = discover_root_strip(mount, root, &root);

		if (r < 0)
			return r;
		s = strip_slashes(root);
	} else {
		/* Where systemd puts the scope: nested slices ("a-b.slice" is in "a.slice"), and
		 * "-.slice", the root slice, is the root cgroup itself. */
		int r = scope_expected_root(
		    c->slice && *c->slice ? c->slice : "system.slice",
		    c->scope_name && *c->scope_name ? c->scope_name : "jobcg.scope", &s);
		if (r < 0)
			return r;
	}
	if (!s)
		return -ENOMEM;
	if (!*s || streq(s, "/") || strstr(s, "..") || strstr(s, "//")) {
		int r = error_set(-EINVAL,
				  "invalid jobcg tree root '%s' (JobcgRoot=/JOBCG_ROOT): "
				  "need a relative cgroup path without '..'",
				  s);
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

bool discover_kernel_at_least(const char *release, unsigned maj, unsigned min)
{
	uint64_t a, b;
	const char *end;

	if (parse_u64_prefix(release, UINT32_MAX, &a, &end) < 0 || *end != '.' ||
	    parse_u64_prefix(end + 1, UINT32_MAX, &b, NULL) < 0)
		return false;
	return a > maj || (a == maj && b >= min);
}

/*
 * What a context's probe leaves for later: the facts only reports need (kernel, controllers
 * of the mount root, what v1 holds, freeze/kill/memory.peak, limitations, write access, systemd)
 * are found the first time someone asks (jobcg_ctx_sysinfo(), a limitation's wording), not by
 * every command.
 */
struct sysinfo_priv {
	struct jobcg_sysinfo pub; /* first: the public pointer is the private one */
	char *deepest;		  /* deepest existing directory on the way to the root */
	bool quick;		  /* layout from statfs(), no mount table read */
	int favordynmods;	  /* the mount's option: 1 set, 0 not, -1 not looked up */
	bool complete;
};

static struct sysinfo_priv *priv(struct jobcg_sysinfo *s)
{
	return (struct sysinfo_priv *)s;
}

JOBCG_EXPORT void jobcg_sysinfo_free(struct jobcg_sysinfo *s)
{
	if (!s)
		return;
	free(priv(s)->deepest);
	free(s->mount);
	free(s->kernel);
	free(s->root_rel);
	free(s->root);
	free(s->bpf_device.detail);
	free(s->freeze.detail);
	free(s->kill.detail);
	free(s->memory_peak.detail);
	free(s->xattr.detail);
	free(s->favordynmods.detail);
	strv_free(s->limitations);
	free(s->cannot_run_reason);
	free(s);
}

static int feature(struct jobcg_feature *f, bool supported, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int feature(struct jobcg_feature *f, bool supported, const char *fmt, ...)
{
	va_list ap;

	f->supported = supported;
	va_start(ap, fmt);
	f->detail = strdup_vprintf(fmt, ap);
	va_end(ap);
	return f->detail ? 0 : -ENOMEM;
}

static bool is_dir(const char *p)
{
	return access(p, F_OK) == 0;
}

/* Deepest existing directory on the way from the mount to the root (the mount at worst). */
static char *deepest_existing(const struct jobcg_sysinfo *s)
{
	_cleanup_strv_free_ char **parts = strv_split(s->root_rel, "/");
	char *cur = strdup(s->mount);

	if (!parts || !cur) {
		free(cur);
		return NULL;
	}
	for (char **p = parts; *p; p++) {
		char *next = cgfs_path(cur, *p);

		if (!next || !is_dir(next)) {
			free(next);
			break;
		}
		free(cur);
		cur = next;
	}
	return cur;
}

/* A non-root cgroup on this mount whose interface files show what the kernel offers children. */
static char *sample_child(const struct jobcg_sysinfo *s, const char *deepest)
{
	_cleanup_strv_free_ char **kids = NULL;

	if (!streq(deepest, s->mount))
		return strdup(deepest);
	if (cgfs_children(s->mount, &kids) < 0 || !kids[0])
		return NULL;
	return cgfs_path(s->mount, kids[0]);
}

/* Job metadata lives in xattrs: every job operation needs to know, so every context asks. */
static int probe_xattr(struct jobcg_sysinfo *s)
{
	const char *where = s->root_exists ? s->root : s->mount;
	char v[8];

	if (getxattr(where, "trusted.jobcg.probe", v, sizeof(v)) >= 0 || errno == ENODATA ||
	    errno == ERANGE)
		return feature(&s->xattr, true, "trusted.* xattrs on %s", where);
	return feature(&s->xattr, false, "xattrs on %s: %s", where, strerror(errno));
}

static int probe_files(struct jobcg_sysinfo *s, const char *deepest, bool probe_bpf)
{
	_cleanup_free_ char *child = sample_child(s, deepest);
	static const struct {
		const char *file;
		unsigned maj, min;
		size_t off;
	} files[] = {
	    {"cgroup.freeze", 5, 2, offsetof(struct jobcg_sysinfo, freeze)},
	    {"cgroup.kill", 5, 14, offsetof(struct jobcg_sysinfo, kill)},
	};
	int r;

	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		struct jobcg_feature *f = (struct jobcg_feature *)((char *)s + files[i].off);

		if (child) {
			_cleanup_free_ char *p = cgfs_path(child, files[i].file);
			bool present;

			if (!p)
				return -ENOMEM;
			present = is_dir(p); /* one access() per file: every command probes */
			r = feature(f, present, "%s %s", files[i].file,
				    present ? "present" : "missing (kernel too old)");
		} else {
			bool ok = discover_kernel_at_least(s->kernel, files[i].maj, files[i].min);

			r = feature(f, ok, "kernel %s %s Linux %u.%u", s->kernel,
				    ok ? "is at least" : "is older than", files[i].maj,
				    files[i].min);
		}
		if (r < 0)
			return r;
	}

	if (!(s->usable & (1u << JOBCG_CTRL_MEMORY)))
		r = feature(&s->memory_peak, false, "%s",
			    s->v1_bound & (1u << JOBCG_CTRL_MEMORY)
				? "memory controller is bound to cgroup v1"
				: "memory controller not available to jobcg's tree");
	else if (s->root_exists) {
		_cleanup_free_ char *p = cgfs_path(s->root, "memory.peak");
		bool present;

		if (!p)
			return -ENOMEM;
		present = is_dir(p);

		r = feature(&s->memory_peak, present, "memory.peak %s",
			    present ? "present" : "missing (kernel older than 5.19)");
	} else {
		bool ok = discover_kernel_at_least(s->kernel, 5, 19);

		r = feature(&s->memory_peak, ok, "kernel %s %s Linux 5.19", s->kernel,
			    ok ? "is at least" : "is older than");
	}
	if (r < 0)
		return r;

	if (!probe_bpf)
		return feature(&s->bpf_device, false, "not probed (jobcg check probes it)");
	{
		/* Loading a program tests the kernel (CONFIG_CGROUP_BPF,
		 * BPF_PROG_TYPE_CGROUP_DEVICE) and our privilege; attaching needs a cgroup and is
		 * left to the device code. */
		libbpf_print_fn_t old = bpfsys_print_begin();
		int p = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_CGROUP_DEVICE, NULL);

		bpfsys_print_end(old);

		if (p > 0)
			r = feature(&s->bpf_device, true,
				    "BPF_PROG_TYPE_CGROUP_DEVICE programs load");
		else if (p == 0)
			r = feature(&s->bpf_device, false,
				    "kernel does not support BPF_PROG_TYPE_CGROUP_DEVICE");
		else
			r = feature(&s->bpf_device, false, "cannot load a device program: %s",
				    strerror(-p));
		if (r < 0)
			return r;
	}
	return 0;
}

char *discover_limitation(const struct jobcg_sysinfo *s, unsigned ctrl, const char *what)
{
	const char *name = jobcg_controller_name(ctrl);

	if (s->v1_bound & (1u << ctrl))
		return strdup_printf("%s controller is bound to cgroup v1: %s cannot be enforced",
				     name, what);
	if (!(s->available & (1u << ctrl)))
		return strdup_printf("%s controller is not available on cgroup v2: %s cannot be "
				     "enforced",
				     name, what);
	return strdup_printf("%s controller is not enabled down to %s: %s cannot be enforced", name,
			     s->root, what);
}

static int add_limitation(struct jobcg_sysinfo *s, unsigned ctrl, const char *what)
{
	if (s->usable & (1u << ctrl))
		return 0;
	return strv_push(&s->limitations, discover_limitation(s, ctrl, what));
}

static int read_mounts(char **ret)
{
	int r = read_full_file_at(AT_FDCWD, "/proc/self/mounts", 1u << 22, ret, NULL);

	return r < 0 ? error_set(r, "cannot read /proc/self/mounts: %s", strerror(-r)) : 0;
}

unsigned discover_v1_from_proc_cgroups(const char *text)
{
	unsigned v1 = 0;

	/* "#subsys_name hierarchy num_cgroups enabled"; hierarchy 0 is v2 (or none) */
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n'), *h = l + strcspn(l, " \t\n");
		char name[32];
		size_t n = (size_t)(h - l);
		int c;

		h += strspn(h, " \t");
		if (*l != '#' && n < sizeof(name) && *h >= '1' && *h <= '9') {
			memcpy(name, l, n);
			name[n] = '\0';
			c = jobcg_controller_from_name(streq(name, "blkio") ? "io" : name);
			if (c >= 0)
				v1 |= 1u << c;
		}
		l = nl ? nl + 1 : NULL;
	}
	return v1;
}

/*
 * Controllers bound to a v1 hierarchy, from /proc/cgroups: a few lines the kernel writes
 * cheaply, where /proc/self/mounts formats every mount of the namespace (a tenth of a step's
 * launch, measured). It also sees a hierarchy that is mounted only in another namespace, or
 * no longer mounted but still holding cgroups: its controllers are as unavailable to v2. The
 * table is the fallback where /proc/cgroups cannot be read.
 */
static int v1_bound_quick(unsigned *ret)
{
	_cleanup_free_ char *text = NULL;
	int r = read_full_file_at(AT_FDCWD, "/proc/cgroups", 1u << 16, &text, NULL);

	if (r >= 0) {
		*ret = discover_v1_from_proc_cgroups(text);
		return 0;
	}
	r = read_mounts(&text);
	if (r < 0)
		return r;
	*ret = discover_v1_controllers(text);
	return 0;
}

static bool is_cgroup2(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

/*
 * Every command probes. A context on the usual layouts does without the mount table: statfs()
 * tells that /sys/fs/cgroup is cgroup v2 (unified), or that it is not and
 * /sys/fs/cgroup/unified is (hybrid: a cgroup2 file system below one that is not is its mount
 * root), as the table would. Which controllers v1 holds is asked later, and only if a
 * controller jobcg wants is missing (only those can be bound to v1). A configured
 * CgroupMountpoint=, and `jobcg check`, read the table.
 */
static bool quick_layout(const struct jobcg_config *conf, enum jobcg_layout *ret)
{
	if (conf->cgroup.mountpoint && *conf->cgroup.mountpoint)
		return false;
	if (is_cgroup2("/sys/fs/cgroup")) {
		*ret = JOBCG_LAYOUT_UNIFIED;
		return true;
	}
	if (is_cgroup2("/sys/fs/cgroup/unified")) {
		*ret = JOBCG_LAYOUT_HYBRID;
		return true;
	}
	return false;
}

/* What every context needs before it touches the tree: mount, root, usable controllers, xattrs. */
static int probe_core(const struct jobcg_config *conf, bool full, struct jobcg_sysinfo **ret)
{
	struct sysinfo_priv *p = calloc(1, sizeof(*p));
	struct jobcg_sysinfo *s = &p->pub;
	_cleanup_free_ char *mounts = NULL;
	unsigned v;
	int r;

	if (!p)
		return -ENOMEM;
	p->favordynmods = -1;
	p->quick = !full && quick_layout(conf, &s->layout);
	if (p->quick) {
		s->mount = strdup(s->layout == JOBCG_LAYOUT_UNIFIED ? "/sys/fs/cgroup"
								    : "/sys/fs/cgroup/unified");
		if (!s->mount) {
			r = -ENOMEM;
			goto fail;
		}
	} else {
		if ((r = read_mounts(&mounts)) < 0)
			goto fail;
		r = discover_mount(mounts, conf->cgroup.mountpoint, &s->mount, &s->layout);
		if (r < 0)
			goto fail;
		s->v1_bound = discover_v1_controllers(mounts);
		p->favordynmods = mount_option(mounts, s->mount, "favordynmods");
	}
	r = discover_root_rel(conf, s->mount, &s->root_rel);
	if (r < 0)
		goto fail;
	s->root = cgfs_path(s->mount, s->root_rel);
	if (!s->root) {
		r = -ENOMEM;
		goto fail;
	}
	s->root_exists = is_dir(s->root);
	/* The walk is for a root yet to be made; an existing one is its own deepest. */
	p->deepest = s->root_exists ? strdup(s->root) : deepest_existing(s);
	if (!p->deepest) {
		r = -ENOMEM;
		goto fail;
	}
	if (cgfs_controllers(p->deepest, "cgroup.controllers", &v) < 0)
		v = 0;
	/* The tree root's cgroup.controllers is what it can hand to jobs. Until the root exists,
	 * the mkdir backend would enable what the deepest existing ancestor offers on the way. */
	s->usable = v & (s->root_exists ? ~0u : ctx_wanted_controllers(conf));
	r = probe_xattr(s);
	if (r < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	jobcg_sysinfo_free(s);
	return r;
}

/* The rest of jobcg_sysinfo: what reports and the wording of limitations need. */
static int probe_rest(const struct jobcg_config *conf, struct jobcg_sysinfo *s, bool probe_bpf)
{
	struct sysinfo_priv *p = priv(s);
	struct utsname u;
	int r;

	s->kernel = strdup(uname(&u) == 0 ? u.release : "unknown");
	if (!s->kernel)
		return -ENOMEM;
	r = cgfs_controllers(s->mount, "cgroup.controllers", &s->available);
	if (r < 0)
		return r;
	if (cgfs_controllers(s->mount, "cgroup.subtree_control", &s->enabled_top) < 0)
		s->enabled_top = 0;
	/* Only a controller missing from v2 can be bound to v1: worth asking only then. */
	if (p->quick && (ctx_wanted_controllers(conf) & ~s->available) &&
	    (r = v1_bound_quick(&s->v1_bound)) < 0)
		return r;
	/* One lstat() of /run/systemd/system answers both (it was asked three times). */
	s->systemd = scope_systemd_running();
	s->backend = scope_backend_name_for(conf, s->systemd);

	r = probe_files(s, p->deepest, probe_bpf);
	if (r < 0)
		return r;
	if (p->favordynmods < 0)
		r = feature(&s->favordynmods, false,
			    "not looked up (jobcg check reads the mount table)");
	else if (p->favordynmods)
		r = feature(&s->favordynmods, true, "%s is mounted with favordynmods", s->mount);
	else if (!discover_kernel_at_least(s->kernel, 6, 0))
		r = feature(&s->favordynmods, false, "kernel %s has no favordynmods (Linux 6.0+)",
			    s->kernel);
	else
		r = feature(
		    &s->favordynmods, false,
		    "%s is mounted without favordynmods: moving a process into a job (each "
		    "task of a Slurm step) first waits for an RCU grace period, milliseconds; "
		    "mount -o remount,favordynmods %s",
		    s->mount, s->mount);
	if (r < 0)
		return r;
	if ((r = add_limitation(s, JOBCG_CTRL_CPUSET, "CPU binding (cpuset.cpus)")) < 0 ||
	    (r = add_limitation(s, JOBCG_CTRL_MEMORY, "memory limits (memory.max)")) < 0 ||
	    (r = add_limitation(s, JOBCG_CTRL_PIDS, "process count limits (pids.max)")) < 0)
		return r;
	/* Resource specialisation is listed only when configured: it is a promise made to the
	 * admin that this host may not keep. */
	if ((conf->cgroup.spec_cpus || conf->cgroup.core_spec_count) &&
	    (r = add_limitation(s, JOBCG_CTRL_CPUSET,
				"the CPUs reserved for the system (SpecCPUs/CoreSpecCount)")) < 0)
		return r;
	if (conf->cgroup.mem_spec_limit &&
	    (r = add_limitation(s, JOBCG_CTRL_MEMORY,
				"the memory reserved for the system (MemSpecLimit)")) < 0)
		return r;
	if (!(s->usable & (1u << JOBCG_CTRL_MEMORY)) &&
	    (r = strv_push(&s->limitations,
			   strdup("memory accounting (memory.current, memory.peak, memory.stat, "
				  "memory.events) is unavailable"))) < 0)
		return r;
	if (probe_bpf && !s->bpf_device.supported &&
	    (r = strv_push(&s->limitations, strdup_printf("device access cannot be constrained: %s",
							  s->bpf_device.detail))) < 0)
		return r;
	if (!s->freeze.supported &&
	    (r = strv_push(&s->limitations, strdup("jobs cannot be frozen (no cgroup.freeze)"))) <
		0)
		return r;
	if (!s->xattr.supported &&
	    (r = strv_push(&s->limitations,
			   strdup("job metadata (owner, limits) cannot be stored as xattrs"))) < 0)
		return r;

	if (access(p->deepest, W_OK) < 0) {
		s->can_run = false;
		s->cannot_run_reason = strdup_printf(
		    "no write access to %s: run as root or delegate that cgroup", p->deepest);
	} else
		s->can_run = true;
	p->complete = true;
	return 0;
}

static int probe(const struct jobcg_config *conf, bool probe_bpf, struct jobcg_sysinfo **ret)
{
	struct jobcg_sysinfo *s = NULL;
	int r = probe_core(conf, true, &s);

	if (r < 0)
		return r;
	r = probe_rest(conf, s, probe_bpf);
	if (r < 0) {
		jobcg_sysinfo_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

JOBCG_EXPORT int jobcg_sysinfo_probe(const struct jobcg_config *conf, struct jobcg_sysinfo **ret)
{
	return_if_null(conf);
	return_if_null(ret);
	return probe(conf, true, ret);
}

int discover_probe_for_ctx(const struct jobcg_config *conf, struct jobcg_sysinfo **ret)
{
	return probe_core(conf, false, ret);
}

const struct jobcg_sysinfo *discover_complete(const struct jobcg_config *conf,
					      struct jobcg_sysinfo *s)
{
	struct sysinfo_priv *p = priv(s);
	int r;

	if (p->complete)
		return s;
	r = probe_rest(conf, s, false);
	if (r < 0) {
		/* What was found stays; the rest reads as unknown (not supported, not bound). */
		log_warning("probing the host: %s", strerror(-r));
		p->complete = true;
	}
	return s;
}
