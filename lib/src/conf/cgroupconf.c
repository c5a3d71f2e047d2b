/*
 * jobcg: cgroup.conf, Slurm's keys (declared in one table, as Slurm's cgroup plugin does) plus
 * jobcg's own. Keys that some Slurm release knew but that do nothing now are accepted with a
 * warning and no look at their value, so a node migrating from an old Slurm is not stopped.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>

#include "confload.h"
#include "confparse.h"
#include "parse.h"
#include "scope_systemd.h"
#include "jobcg/sysinfo.h"
#include "log.h"
#include "util.h"

enum ktype {
	K_BOOL,
	K_PERCENT,
	K_MSEC,	    /* unsigned, optional k suffix (x1024) as Slurm's integer keys */
	K_MIB,	    /* uint64 MiB, same syntax */
	K_STRING,   /* with a checker */
	K_LIST,	    /* EnableExtraControllers */
	K_ENUM,	    /* one of key_def.names, stored as its index (the enum's value) */
	K_SIZE_MIB, /* bytes, by jobcg_parse_size (bare numbers are MiB) */
};

typedef int (*check_fn)(const char *v, char **ret_norm, const char **why);

struct key_def {
	const char *name;
	enum ktype type;
	size_t off;
	check_fn check;
	const char *const *names; /* K_ENUM: the values' spellings, index = enum value */
};

/* K_ENUM fields are C enums whose values are the indexes of their names. */
_Static_assert(sizeof(enum jobcg_device_program) == sizeof(int) &&
		   sizeof(enum jobcg_acct_sync) == sizeof(int),
	       "K_ENUM stores an int");
static const char *const devprog_names[] = {
    [JOBCG_DEVPROG_NODE] = "node", [JOBCG_DEVPROG_LINEAR] = "linear", NULL};
static const char *const acct_sync_names[] = {
    [JOBCG_ACCT_SYNC_JOB] = "job", [JOBCG_ACCT_SYNC_STEP] = "step", NULL};

static int check_abs_path(const char *v, char **ret, const char **why)
{
	if (v[0] != '/') {
		*why = "expected an absolute path";
		return -EINVAL;
	}
	return (*ret = strdup(v)) ? 0 : -ENOMEM;
}

static int check_plugin(const char *v, char **ret, const char **why)
{
	static const char *const ok[] = {"autodetect", "cgroup/v2", "cgroup/v1", "disabled", NULL};

	for (size_t i = 0; ok[i]; i++)
		if (strcaseeq(v, ok[i]))
			return (*ret = strdup(ok[i])) ? 0 : -ENOMEM;
	*why = "expected autodetect, cgroup/v2, cgroup/v1 or disabled";
	return -EINVAL;
}

static int check_unit(const char *v, const char *suffix, char **ret)
{
	size_t n = strlen(v), sl = strlen(suffix);

	if (n <= sl || strcmp(v + n - sl, suffix) != 0 || strchr(v, '/'))
		return -EINVAL;
	for (const char *p = v; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("-_.:@\\", *p))
			return -EINVAL;
	return (*ret = strdup(v)) ? 0 : -ENOMEM;
}

static int check_slice(const char *v, char **ret, const char **why)
{
	int r = check_unit(v, ".slice", ret);

	if (r == -EINVAL)
		*why = "expected a systemd slice unit name such as system.slice";
	return r;
}

static int check_scope(const char *v, char **ret, const char **why)
{
	int r = check_unit(v, ".scope", ret);

	if (r == -EINVAL)
		*why = "expected a systemd scope unit name such as jobcg.scope";
	return r;
}

static int check_root(const char *v, char **ret, const char **why)
{
	_cleanup_free_ char *s = NULL;
	char *p;
	size_t n;

	bool abs = *v == '/';

	/* One leading '/' is kept: discovery tells a file name below the cgroup v2 mount
	 * ("/sys/fs/cgroup/unified/x") from cgroup notation ("/x") once the mount is known. */
	while (*v == '/')
		v++;
	s = strdup_printf("%s%s", abs ? "/" : "", v);
	if (!s)
		return -ENOMEM;
	n = strlen(s);
	while (n > (size_t)abs && s[n - 1] == '/')
		s[--n] = '\0';
	if (n == (size_t)abs) {
		*why = "expected a cgroup path below the cgroup v2 mount, such as "
		       "system.slice/jobcg.scope";
		return -EINVAL;
	}
	for (p = s + abs; p;) {
		char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		if (len == 0 || (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.')) {
			*why = "'.', '..' and empty components are not allowed in a cgroup path";
			return -EINVAL;
		}
		p = slash ? slash + 1 : NULL;
	}
	*ret = TAKE_PTR(s);
	return 0;
}

/* A CPU list, stored normalised ("3,1-2" -> "1-3") so everything compares one spelling. */
static int check_cpulist(const char *v, char **ret, const char **why)
{
	_cleanup_free_ uint64_t *bits = NULL;
	size_t words;
	int r = jobcg_parse_cpulist(v, &bits, &words);

	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		/* The caller formats a new error record: the message must not live in it. */
		static __thread char msg[256];

		snprintf(msg, sizeof(msg), "%s", jobcg_last_error()->message);
		*why = msg;
		return r;
	}
	return jobcg_format_cpulist(bits, words, ret);
}

#define OFF(f) offsetof(struct jobcg_cgroup_conf, f)

/* Slurm's current keys, then jobcg's (the order `jobcg config` shows). */
static const struct key_def keys[] = {
    {"CgroupMountpoint", K_STRING, OFF(mountpoint), check_abs_path},
    {"CgroupPlugin", K_STRING, OFF(plugin), check_plugin},
    {"CgroupSlice", K_STRING, OFF(slice), check_slice},
    {"CgroupJobIdPaths", K_BOOL, OFF(job_id_paths)},
    {"SystemdTimeout", K_MSEC, OFF(systemd_timeout_ms)},
    {"IgnoreSystemd", K_BOOL, OFF(ignore_systemd)},
    {"IgnoreSystemdOnFailure", K_BOOL, OFF(ignore_systemd_on_failure)},
    {"EnableControllers", K_BOOL, OFF(enable_controllers)},
    {"EnableExtraControllers", K_LIST, OFF(enable_extra_controllers)},
    {"AllowedRAMSpace", K_PERCENT, OFF(allowed_ram_space)},
    {"AllowedSwapSpace", K_PERCENT, OFF(allowed_swap_space)},
    {"ConstrainCores", K_BOOL, OFF(constrain_cores)},
    {"ConstrainDevices", K_BOOL, OFF(constrain_devices)},
    {"ConstrainRAMSpace", K_BOOL, OFF(constrain_ram_space)},
    {"ConstrainSwapSpace", K_BOOL, OFF(constrain_swap_space)},
    {"MaxRAMPercent", K_PERCENT, OFF(max_ram_percent)},
    {"MaxSwapPercent", K_PERCENT, OFF(max_swap_percent)},
    {"MinRAMSpace", K_MIB, OFF(min_ram_space_mb)},
    {"SignalChildrenProcesses", K_BOOL, OFF(signal_children_processes)},
    {"JobcgRoot", K_STRING, OFF(tree_root), check_root},
    {"JobcgScope", K_STRING, OFF(scope_name), check_scope},
    {"DeviceProgram", K_ENUM, OFF(device_program), NULL, devprog_names},
    {"BpfPinDir", K_STRING, OFF(bpf_pin_dir), check_abs_path},
    {"StateDir", K_STRING, OFF(state_dir), check_abs_path},
    {"AccountingSync", K_ENUM, OFF(acct_sync), NULL, acct_sync_names},
    {"NodeLockTimeout", K_MSEC, OFF(node_lock_timeout_ms)},
    {"RunViaDaemon", K_BOOL, OFF(run_via_daemon)},
    {"SpecCPUs", K_STRING, OFF(spec_cpus), check_cpulist},
    {"CoreSpecCount", K_MSEC, OFF(core_spec_count)},
    {"MemSpecLimit", K_SIZE_MIB, OFF(mem_spec_limit)},
};
_Static_assert(ELEMENTSOF(keys) <= CGROUP_MAX_KEYS, "raise CGROUP_MAX_KEYS");

/*
 * The keys that say where jobcg acts: the cgroup mount, the tree's root, the node lock, the
 * records and the pinned device programs. Their errors are never tolerated
 * (JOBCG_CONFIG_TOLERATE_CGROUP): a default guessed for one of them could make a cleanup
 * release, gc or tear down another tree than the jobs' own.
 */
static bool key_locates(const struct key_def *k)
{
	return k->off == OFF(mountpoint) || k->off == OFF(slice) || k->off == OFF(tree_root) ||
	       k->off == OFF(scope_name) || k->off == OFF(state_dir) ||
	       k->off == OFF(bpf_pin_dir) || k->off == OFF(device_program);
}

/* A key that is, or that may be a misspelling of, a locating key. */
static bool name_may_locate(const char *name)
{
	const char *loc[ELEMENTSOF(keys) + 1];
	size_t n = 0;

	for (size_t i = 0; i < ELEMENTSOF(keys); i++)
		if (key_locates(&keys[i])) {
			if (strcaseeq(name, keys[i].name))
				return true;
			loc[n++] = keys[i].name;
		}
	loc[n] = NULL;
	return conf_suggest(name, (const char *const *)loc) != NULL;
}

/*
 * With JOBCG_CONFIG_TOLERATE_CGROUP, error @r (its record set) of a key that locates nothing
 * is kept as the configuration's cgroup error (the first one; the others counted) and the load
 * goes on, the key keeping its value. Otherwise @r.
 */
static int cg_tolerate(struct confload *l, int r)
{
	struct jobcg_config *c = l->c;
	char buf[8192];

	if (r == -ENOMEM || !(l->flags & JOBCG_CONFIG_TOLERATE_CGROUP))
		return r;
	if (!c->cgroup_error) {
		jobcg_error_format(r, buf, sizeof(buf));
		c->cgroup_error = strdup(buf);
		if (!c->cgroup_error)
			return -ENOMEM;
	}
	c->cgroup_errors++;
	jobcg_error_clear();
	return 0;
}

/* Keys accepted with a warning and never type-checked: why each is ignored. */
static const struct {
	const char *name, *why;
} ignored[] = {
    {"CgroupAutomount", "jobcg never mounts cgroup file systems (defunct since Slurm 23.11)"},
    {"CgroupReleaseAgentDir", "release agents exist only in cgroup v1 (removed in Slurm 22.05)"},
    {"CgroupReleaseAgent", "release agents exist only in cgroup v1 (Slurm 2.2)"},
    {"CgroupMountOptions", "jobcg never mounts cgroup file systems (Slurm 2.2)"},
    {"CgroupSubsystems", "cgroup v1 only (Slurm 17.02 and older)"},
    {"UserCgroupParams", "raw cgroup v1 parameters (Slurm 2.2)"},
    {"JobCgroupParams", "raw cgroup v1 parameters (Slurm 2.2)"},
    {"JobStepCgroupParams", "raw cgroup v1 parameters (Slurm 2.2)"},
    {"TaskAffinity", "CPU binding is not done from cgroup.conf (removed in Slurm 22.05)"},
    {"AllowedKmemSpace", "cgroup v2 has no separate kernel memory limit (removed in Slurm 23.11)"},
    {"MaxKmemPercent", "cgroup v2 has no separate kernel memory limit (removed in Slurm 23.11)"},
    {"MinKmemSpace", "cgroup v2 has no separate kernel memory limit (removed in Slurm 23.11)"},
    {"ConstrainKmemSpace",
     "cgroup v2 has no separate kernel memory limit (removed in Slurm 23.11)"},
    {"AllowedDevicesFile",
     "devices other than the gres.conf ones are always allowed (obsolete in Slurm)"},
    {"MemoryLimitEnforcement", "never read by any Slurm cgroup plugin"},
    {"MemoryLimitThreshold", "never read by any Slurm cgroup plugin"},
    {"RootOwnedCgroups", "cgroup v1 only (Slurm 23.02)"},
    {"MemorySwappiness", "cgroup v2 has no per-cgroup swappiness, so it does nothing here"},
};

void confload_warn(struct confload *l, const char *file, unsigned line, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	char *s;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (file && line)
		s = strdup_printf("%s:%u: %s", file, line, msg);
	else if (file)
		s = strdup_printf("%s: %s", file, msg);
	else
		s = strdup(msg);
	if (s)
		log_warning("%s", s);
	/* A warning that cannot be stored is still logged; losing it is not worth failing for. */
	(void)strv_push(&l->c->warnings, s);
}

void confload_warn_op(struct confload *l, const char *file, const struct conf_pair *pr,
		      const char *key)
{
	confload_warn(l, file, pr->line,
		      "operator '%c=' is ignored, as Slurm ignores it: %s%c=%s sets %s=%s", pr->op,
		      pr->key, pr->op, pr->value, key, pr->value);
}

int cgconf_defaults(struct jobcg_cgroup_conf *cg)
{
	*cg = (struct jobcg_cgroup_conf){
	    .systemd_timeout_ms = 1000,
	    .node_lock_timeout_ms = 30000,
	    .allowed_ram_space = 100,
	    .allowed_swap_space = 0,
	    .max_ram_percent = 100,
	    .max_swap_percent = 100,
	    .min_ram_space_mb = 30,
	    .device_program = JOBCG_DEVPROG_NODE,
	};
	cg->plugin = strdup("autodetect");
	cg->slice = strdup("system.slice");
	cg->scope_name = strdup("jobcg.scope");
	cg->bpf_pin_dir = strdup("/sys/fs/bpf/jobcg");
	cg->state_dir = strdup("/var/lib/jobcg");
	if (!cg->plugin || !cg->slice || !cg->scope_name || !cg->bpf_pin_dir || !cg->state_dir)
		return -ENOMEM;
	return 0;
}

void cgconf_done(struct jobcg_cgroup_conf *cg)
{
	free(cg->mountpoint);
	free(cg->plugin);
	free(cg->slice);
	strv_free(cg->enable_extra_controllers);
	free(cg->tree_root);
	free(cg->scope_name);
	free(cg->bpf_pin_dir);
	free(cg->state_dir);
	free(cg->spec_cpus);
}

static int parse_bool(const char *v, bool *ret)
{
	static const char *const yes[] = {"yes", "true", "up", "1"}, *const no[] = {"no", "false",
										    "down", "0"};

	for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
		if (strcaseeq(v, yes[i])) {
			*ret = true;
			return 0;
		}
		if (strcaseeq(v, no[i])) {
			*ret = false;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * A percentage as Slurm reads it (s_p_handle_float(): strtof(), or UNLIMITED/INFINITE): 98.5,
 * 1e2, .5, inf. Slurm keeps a float, so jobcg keeps the float's value too and computes with
 * what Slurm computes with. Refused with @why, though Slurm takes them: a negative or NaN
 * percentage (Slurm computes a limit from it that means nothing: a negative byte count made
 * unsigned) and hexadecimal (0x10, as jobcg's whole-number keys). Out of a float's range (1e39,
 * 1e-50) Slurm refuses as well. No upper bound: over 100 is meaningful for each key (more than
 * the request, or no cap).
 */
static int parse_percent(const char *v, double *ret, const char **why)
{
	const char *p = v;
	char *end;
	float f;

	if (strcaseeq(v, "UNLIMITED") || strcaseeq(v, "INFINITE")) {
		*ret = INFINITY;
		return 0;
	}
	*why = "expected a percentage such as 100, 99.5 or 1e2 (or UNLIMITED)";
	p += strspn(p, " \t");
	p += *p == '+' || *p == '-';
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		*why =
		    "hexadecimal is not accepted for a percentage (Slurm would read 0x10 as 16): "
		    "write it in decimal";
		return -EINVAL;
	}
	errno = 0;
	f = strtof(v, &end);
	if (end == v || *end)
		return -EINVAL;
	if (errno == ERANGE) {
		*why = "out of range (Slurm refuses it too)";
		return -ERANGE;
	}
	if (isnan(f)) {
		*why = "not a number (Slurm would compute a meaningless limit from it)";
		return -EINVAL;
	}
	if (f < 0) {
		*why = "a percentage cannot be negative (Slurm would compute a meaningless limit "
		       "from it)";
		return -EINVAL;
	}
	*ret = (double)f + 0.0; /* -0 is 0 */
	return 0;
}

/* Unsigned decimal with an optional k/K (x1024), as Slurm's integer keys. */
static int parse_uint_k(const char *v, uint64_t max, uint64_t *ret)
{
	const char *p;
	uint64_t x;
	int r;

	/* Slurm reads these with strtoull(base 0): 010 is 8 there, 10 here. */
	if (v[0] == '0' && isdigit((unsigned char)v[1]))
		return -EDOM;
	r = parse_u64_prefix(v, UINT64_MAX, &x, &p);
	if (r < 0)
		return r;
	if (*p == 'k' || *p == 'K') {
		if (__builtin_mul_overflow(x, 1024, &x))
			return -ERANGE;
		p++;
	}
	if (*p)
		return -EINVAL;
	if (x > max)
		return -ERANGE;
	*ret = x;
	return 0;
}

static int set_value(struct confload *l, const struct conf_stmt *st, const struct key_def *k,
		     const struct conf_pair *pr)
{
	struct jobcg_cgroup_conf *cg = &l->c->cgroup;
	char *field = (char *)cg + k->off;
	const char *v = pr->value;
	int r;

	switch (k->type) {
	case K_BOOL: {
		bool b;

		if (parse_bool(v, &b) < 0)
			return error_set_at(
			    -EINVAL, st->file, pr->vline, pr->vcol,
			    "%s: expected yes or no (or true/false, up/down, 1/0), found '%s'",
			    k->name, v);
		*(bool *)field = b;
		return 0;
	}
	case K_PERCENT: {
		double d;
		const char *why = NULL;

		r = parse_percent(v, &d, &why);
		if (r < 0)
			return error_set_at(r, st->file, pr->vline, pr->vcol, "%s: %s, found '%s'",
					    k->name, why, v);
		*(double *)field = d;
		return 0;
	}
	case K_MSEC:
	case K_MIB: {
		uint64_t x;

		r = parse_uint_k(v, k->type == K_MSEC ? UINT32_MAX : UINT64_MAX, &x);
		if (r < 0)
			return error_set_at(
			    r == -EDOM ? -EINVAL : r, st->file, pr->vline, pr->vcol,
			    "%s: %s, found '%s'", k->name,
			    r == -ERANGE ? "value too large"
			    : r == -EDOM
				? "a leading zero is ambiguous (Slurm reads 010 as octal 8); "
				  "write the number without it"
				: "expected a whole number (optionally with a k suffix)",
			    v);
		if (k->type == K_MSEC)
			*(unsigned *)field = (unsigned)x;
		else
			*(uint64_t *)field = x;
		return 0;
	}
	case K_STRING: {
		char *norm = NULL;
		const char *why = NULL;

		r = k->check(v, &norm, &why);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			return error_set_at(r, st->file, pr->vline, pr->vcol, "%s: %s, found '%s'",
					    k->name, why ? why : "invalid value", v);
		free(*(char **)field);
		*(char **)field = norm;
		if (k->off == OFF(plugin) && streq(norm, "cgroup/v1"))
			confload_warn(l, st->file, pr->line,
				      "CgroupPlugin=cgroup/v1: jobcg works on cgroup v2 only and "
				      "will use it");
		if (k->off == OFF(plugin) && streq(norm, "disabled"))
			confload_warn(
			    l, st->file, pr->line,
			    "CgroupPlugin=disabled has no effect in jobcg: it always "
			    "manages cgroup v2 (do not run jobcg to leave cgroups alone)");
		return 0;
	}
	case K_LIST: {
		_cleanup_strv_free_ char **v2 = strv_split(v, ", \t");

		if (!v2)
			return -ENOMEM;
		for (char **p = v2; *p; p++)
			for (const char *q = *p; *q; q++)
				if (!islower((unsigned char)*q) && *q != '_')
					return error_set_at(-EINVAL, st->file, pr->vline, pr->vcol,
							    "%s: expected cgroup controller names "
							    "such as io,misc, found '%s'",
							    k->name, *p);
		/* Warned here, where the line is known; a newer kernel's controller jobcg does not
		 * know yet must not stop the node, so it is no error. */
		for (char **p = v2; *p; p++)
			if (jobcg_controller_from_name(*p) < 0)
				confload_warn(
				    l, st->file, pr->line,
				    "%s: unknown controller '%s' is ignored (known: cpuset, "
				    "cpu, io, memory, hugetlb, pids, rdma, misc)",
				    k->name, *p);
		strv_free(*(char ***)field);
		if (!v2[0]) {
			*(char ***)field = NULL;
			return 0;
		}
		*(char ***)field = TAKE_PTR(v2);
		return 0;
	}
	case K_SIZE_MIB: {
		uint64_t x;

		r = jobcg_parse_size(v, UINT64_C(1) << 20, 0, &x);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			return error_set_at(
			    r, st->file, pr->vline, pr->vcol,
			    "%s: expected a size such as 2048 (MiB) or 2G, found '%s'", k->name, v);
		*(uint64_t *)field = x;
		return 0;
	}
	case K_ENUM: {
		char expected[128] = "";

		for (size_t i = 0; k->names[i]; i++)
			if (strcaseeq(v, k->names[i])) {
				*(int *)field = (int)i;
				return 0;
			}
		/* "a or b", "a, b or c" */
		for (size_t i = 0; k->names[i]; i++)
			snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected),
				 "%s%s",
				 i == 0		   ? ""
				 : k->names[i + 1] ? ", "
						   : " or ",
				 k->names[i]);
		return error_set_at(-EINVAL, st->file, pr->vline, pr->vcol,
				    "%s: expected %s, found '%s'", k->name, expected, v);
	}
	}
	return -EINVAL;
}

static int on_stmt(const struct conf_stmt *st, void *userdata)
{
	struct confload *l = userdata;
	const struct conf_pair *pr = &st->pairs[0];
	const char *cands[ELEMENTSOF(keys) + ELEMENTSOF(ignored) + 1];
	size_t n = 0;

	if (st->npairs > 1) {
		int r = error_set_at(
		    -EINVAL, st->file, st->pairs[1].line, st->pairs[1].col,
		    "cgroup.conf takes one Key=Value per line (found '%s=' after %s=%s)",
		    st->pairs[1].key, pr->key, pr->value);

		/* Tolerated, the whole line is ignored: unless one of its keys locates. */
		for (size_t i = 0; i < st->npairs; i++)
			if (name_may_locate(st->pairs[i].key))
				return r;
		return cg_tolerate(l, r);
	}
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		if (!strcaseeq(pr->key, keys[i].name))
			continue;
		if (l->cg_origin[i].line)
			confload_warn(
			    l, st->file, pr->line,
			    "%s specified more than once (also at %s:%u), the latest value is used",
			    keys[i].name, l->cg_origin[i].file, l->cg_origin[i].line);
		int r = set_value(l, st, &keys[i], pr);
		if (r < 0)
			return key_locates(&keys[i]) ? r : cg_tolerate(l, r);
		if (pr->op)
			confload_warn_op(l, st->file, pr, keys[i].name);
		l->cg_origin[i] = (struct jobcg_origin){st->file, pr->line};
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(ignored); i++) {
		if (!strcaseeq(pr->key, ignored[i].name))
			continue;
		if (streq(ignored[i].name, "MemorySwappiness"))
			l->c->cgroup.memory_swappiness_set = true;
		confload_warn(l, st->file, pr->line, "%s is ignored: %s", ignored[i].name,
			      ignored[i].why);
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(keys); i++)
		cands[n++] = keys[i].name;
	for (size_t i = 0; i < ELEMENTSOF(ignored); i++)
		cands[n++] = ignored[i].name;
	cands[n] = NULL;
	int r = conf_unknown_key(st, pr, "cgroup.conf", cands);
	/* A misspelt StateDir= must not be read as "StateDir unset". */
	return name_may_locate(pr->key) ? r : cg_tolerate(l, r);
}

int cgconf_parse(struct confload *l, const char *path, const char *buf, size_t len)
{
	return confload_parse(l, path, buf, len, on_stmt); /* missing: the defaults */
}

static char *format_percent(double d)
{
	if (isinf(d))
		return strdup("UNLIMITED");
	return strdup_printf("%g", d);
}

static int entry_text(const struct jobcg_cgroup_conf *cg, const struct key_def *k, char **ret,
		      enum jobcg_config_kind *kind)
{
	const char *field = (const char *)cg + k->off;
	char *s = NULL;

	switch (k->type) {
	case K_BOOL:
		*kind = JOBCG_CONFIG_BOOL;
		s = strdup(*(const bool *)field ? "yes" : "no");
		break;
	case K_PERCENT:
		*kind = JOBCG_CONFIG_NUMBER;
		s = format_percent(*(const double *)field);
		break;
	case K_MSEC:
		*kind = JOBCG_CONFIG_NUMBER;
		s = strdup_printf("%u", *(const unsigned *)field);
		break;
	case K_MIB:
		*kind = JOBCG_CONFIG_NUMBER;
		s = strdup_printf("%llu", (unsigned long long)*(const uint64_t *)field);
		break;
	case K_STRING:
		*kind = JOBCG_CONFIG_STRING;
		if (k->off == OFF(tree_root) && !cg->tree_root) {
			/* Where systemd puts the scope (nested slices, -.slice the root). */
			if (scope_expected_root(cg->slice, cg->scope_name, &s) < 0) {
				jobcg_error_clear();
				s = strdup_printf("%s/%s", cg->slice, cg->scope_name);
			}
		} else if (!*(char *const *)field) {
			*ret = NULL;
			return 0;
		} else
			s = strdup(*(char *const *)field);
		break;
	case K_LIST: {
		char *const *v = *(char **const *)field;
		size_t len = 1;

		*kind = JOBCG_CONFIG_LIST;
		for (size_t i = 0; v && v[i]; i++)
			len += strlen(v[i]) + 1;
		s = calloc(1, len);
		for (size_t i = 0; s && v && v[i]; i++) {
			if (i)
				strcat(s, ",");
			strcat(s, v[i]);
		}
		break;
	}
	case K_SIZE_MIB: {
		uint64_t b = *(const uint64_t *)field;

		*kind = JOBCG_CONFIG_STRING;
		s = b % (1 << 20) ? strdup_printf("%lluB", (unsigned long long)b)
				  : strdup_printf("%lluM", (unsigned long long)(b >> 20));
		break;
	}
	case K_ENUM:
		*kind = JOBCG_CONFIG_STRING;
		s = strdup(k->names[*(const int *)field]);
		break;
	}
	if (!s)
		return -ENOMEM;
	*ret = s;
	return 0;
}

int cgconf_finish(struct confload *l)
{
	struct jobcg_config *c = l->c;
	static const struct {
		const char *env, *origin, *key;
		size_t off;
	} envs[] = {
	    {"JOBCG_ROOT", "env:JOBCG_ROOT", "JobcgRoot", OFF(tree_root)},
	    {"JOBCG_BPF_PIN_DIR", "env:JOBCG_BPF_PIN_DIR", "BpfPinDir", OFF(bpf_pin_dir)},
	    {"JOBCG_STATE_DIR", "env:JOBCG_STATE_DIR", "StateDir", OFF(state_dir)},
	};

	if (!(l->flags & JOBCG_CONFIG_NO_ENV))
		for (size_t i = 0; i < ELEMENTSOF(envs); i++) {
			const char *e = env_secure(envs[i].env);
			char **field = (char **)((char *)&c->cgroup + envs[i].off);
			char *norm = NULL;
			const char *why = NULL;
			int r;

			if (!e)
				continue;
			/* Set, but to nothing: most often a variable of a script that was never
			 * set ("JOBCG_ROOT=$ROOT"). Taken as unset, it would point a teardown or
			 * gc meant for a test tree at the node's own. */
			if (!*e)
				return error_set(-EINVAL,
						 "environment %s is set but empty: unset it to use "
						 "%s= of cgroup.conf (or its default)",
						 envs[i].env, envs[i].key);
			for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
				if (!streq(keys[k].name, envs[i].key))
					continue;
				r = keys[k].check(e, &norm, &why);
				if (r == -ENOMEM)
					return r;
				if (r < 0)
					return error_set(r, "environment %s='%s': %s", envs[i].env,
							 e, why);
				free(*field);
				*field = norm;
				l->cg_origin[k] = (struct jobcg_origin){envs[i].origin, 0};
			}
		}

	if (c->cgroup.spec_cpus && c->cgroup.core_spec_count) {
		const struct jobcg_origin *o = NULL;

		for (size_t k = 0; k < ELEMENTSOF(keys); k++)
			if (streq(keys[k].name, "CoreSpecCount"))
				o = &l->cg_origin[k];
		/* As Slurm: CpuSpecList and CoreSpecCount name the same reservation two ways. */
		int r = error_set_at(-EINVAL, o && o->file ? o->file : NULL, o ? o->line : 0, 0,
				     "SpecCPUs=%s and CoreSpecCount=%u both reserve CPUs: set only "
				     "one of them",
				     c->cgroup.spec_cpus, c->cgroup.core_spec_count);

		if ((r = cg_tolerate(l, r)) < 0)
			return r;
		/* Tolerated: neither (nothing is made from this configuration anyway). */
		free(c->cgroup.spec_cpus);
		c->cgroup.spec_cpus = NULL;
		c->cgroup.core_spec_count = 0;
	}
	for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
		if ((keys[k].off == OFF(spec_cpus) && c->cgroup.spec_cpus) ||
		    (keys[k].off == OFF(core_spec_count) && c->cgroup.core_spec_count))
			c->cgroup.spec_cpus_origin = l->cg_origin[k];
		else if (keys[k].off == OFF(mem_spec_limit))
			c->cgroup.mem_spec_origin = l->cg_origin[k];
	}
	if (l->flags & JOBCG_CONFIG_NO_ENTRIES)
		return 0;
	c->entries = calloc(ELEMENTSOF(keys), sizeof(*c->entries));
	if (!c->entries)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		struct jobcg_config_entry *e = &c->entries[i];
		int r;

		e->key = keys[i].name;
		e->origin = l->cg_origin[i];
		r = entry_text(&c->cgroup, &keys[i], &e->value, &e->kind);
		c->nentries = i + 1;
		if (r < 0)
			return r;
	}
	return 0;
}
