/*
 * jobcg: a reservation's CPUs as a cpuset partition and its memory as memory.min, each written
 * and then read back. The kernel accepts a partition it cannot make (it reads back "root invalid
 * (...)"), lets a sibling's cpuset.cpus write break one silently, and shrinks one without saying
 * so (hotplug, an ancestor's cpuset.cpus.exclusive cut): only the files tell, so every write here
 * is followed by a read, and verify looks at what other cgroups got as well.
 *
 *   <mount>                         root cgroup: loses the reserved CPUs from its effective set
 *   `-- system.slice                cpuset.cpus.exclusive += CPUS   (remote partitions only)
 *       `-- jobcg.scope             cpuset.cpus.exclusive += CPUS, memory.min >= sum (MemoryMin)
 *           `-- resv_NAME           cpuset.cpus = CPUS, cpuset.cpus.partition = root|isolated,
 *                                   memory.min = BYTES
 */
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cgroupfs.h"
#include "cpupart.h"
#include "parse.h"
#include "log.h"
#include "sdbus_dl.h"
#include "spec.h"
#include "util.h"

#define WORDS (JOBCG_CPU_MAX / 64)

/* ---- pure helpers ----------------------------------------------------------------------- */

/* A CPU list into a full-size bitmap; the empty list (an unset cpuset file) is the empty set. */
static int cpus_load(const char *list, uint64_t *ret)
{
	_cleanup_free_ char *copy = strdup(list ? list : "");
	_cleanup_free_ uint64_t *bits = NULL;
	size_t words;
	char *s;
	int r;

	if (!copy)
		return -ENOMEM;
	s = strstrip(copy);
	memset(ret, 0, WORDS * sizeof(uint64_t));
	if (!*s)
		return 0;
	r = jobcg_parse_cpulist(s, &bits, &words);
	if (r < 0)
		return r;
	memcpy(ret, bits, (words < WORDS ? words : WORDS) * sizeof(uint64_t));
	return 0;
}

int cpulist_combine(const char *a, enum cpulist_op op, const char *b, char **ret)
{
	uint64_t x[WORDS], y[WORDS];
	int r;

	if ((r = cpus_load(a, x)) < 0 || (r = cpus_load(b, y)) < 0)
		return r;
	for (size_t i = 0; i < WORDS; i++)
		switch (op) {
		case CPULIST_UNION:
			x[i] |= y[i];
			break;
		case CPULIST_MINUS:
			x[i] &= ~y[i];
			break;
		case CPULIST_INTERSECT:
			x[i] &= y[i];
			break;
		}
	return jobcg_format_cpulist(x, WORDS, ret);
}

int cpulist_equal(const char *a, const char *b)
{
	uint64_t x[WORDS], y[WORDS];
	int r;

	if ((r = cpus_load(a, x)) < 0 || (r = cpus_load(b, y)) < 0)
		return r;
	return memcmp(x, y, sizeof(x)) == 0;
}

int cpupart_parse_state(const char *text, char **ret_mode, bool *ret_invalid, char **ret_reason)
{
	_cleanup_free_ char *copy = strdup(text ? text : "");
	_cleanup_free_ char *mode = NULL, *reason = NULL;
	char *s, *sp, *open;
	bool invalid = false;

	if (!copy)
		return -ENOMEM;
	s = strstrip(copy);
	/* The mode is the first word, whatever blank ends it (a line break too: the file is
	 * one line, but what is read is not checked to be). */
	sp = s + strcspn(s, " \t\n");
	mode = strndup(s, (size_t)(sp - s));
	if (!mode)
		return -ENOMEM;
	s = sp + strspn(sp, " \t\n");
	if (startswith(s, "invalid")) {
		invalid = true;
		s += strlen("invalid");
	}
	open = strchr(s, '(');
	if (open) {
		char *close = strrchr(open, ')');

		reason = strndup(open + 1, close ? (size_t)(close - open - 1) : strlen(open + 1));
	} else
		reason = strdup("");
	if (!reason)
		return -ENOMEM;
	*ret_mode = TAKE_PTR(mode);
	*ret_invalid = invalid;
	*ret_reason = TAKE_PTR(reason);
	return 0;
}

int cpupart_levels(const char *mount, const char *dir, char ***ret)
{
	_cleanup_strv_free_ char **v = NULL;
	size_t m = strlen(mount);
	const char *p;

	while (m > 1 && mount[m - 1] == '/')
		m--;
	if (strncmp(dir, mount, m) != 0 || dir[m] != '/' || !dir[m + 1])
		return -EINVAL;
	v = calloc(1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	for (p = dir + m + 1;; p++) {
		if (*p == '/' || !*p) {
			char *s = strndup(dir, (size_t)(p - dir));

			if (!s || strv_push(&v, s) < 0)
				return -ENOMEM;
			if (!*p)
				break;
			while (p[1] == '/')
				p++;
			if (!p[1])
				break;
		}
	}
	*ret = TAKE_PTR(v);
	return 0;
}

static char *parent_of(const char *dir)
{
	const char *slash = strrchr(dir, '/');

	return slash && slash != dir ? strndup(dir, (size_t)(slash - dir)) : strdup("/");
}

/* cgfs_read, whitespace stripped, as a malloc'd string. */
static int read_value(const char *dir, const char *file, bool optional, char **ret)
{
	_cleanup_free_ char *s = NULL;
	char *t;
	int r = optional ? cgfs_read_optional(dir, file, &s) : cgfs_read(dir, file, &s);

	if (r < 0)
		return r;
	t = strstrip(s);
	if (t != s)
		memmove(s, t, strlen(t) + 1);
	*ret = TAKE_PTR(s);
	return 0;
}

/* A cpuset list write; the empty set is a newline, as the kernel takes a zero-length write as
 * nothing at all. */
static int write_cpus(const char *dir, const char *file, const char *cpus)
{
	return cgfs_write(dir, file, *cpus ? cpus : "\n");
}

static const char *mount_of(struct jobcg_ctx *ctx)
{
	return ctx->info->mount;
}

/* The tree root as a partition root (Linux < 6.7), at the end of this file. */
#define X_TREEPART "trusted.jobcg.treepart"
/* On each ancestor whose memory.min jobcg raised for reservations: by how much (bytes). */
#define X_MINADDED "trusted.jobcg.min_added"
static int tree_make(struct jobcg_ctx *ctx, bool *ret_made);
static int tree_unmake(struct jobcg_ctx *ctx, bool force);
static int tree_problem(struct jobcg_ctx *ctx, const char *dir, char **ret);
static bool systemd_backend(struct jobcg_ctx *ctx);

/* ---- probe ------------------------------------------------------------------------------ */

int cpupart_probe(struct jobcg_ctx *ctx, const char *dir, enum cpupart_kind *ret_kind,
		  char **ret_reason)
{
	_cleanup_free_ char *part = NULL, *excl = NULL, *parent = NULL, *pstate = NULL;
	_cleanup_free_ char *mode = NULL, *why = NULL;
	_cleanup_strv_free_ char **levels = NULL;
	const char *mount = mount_of(ctx);
	char *reason = NULL;
	bool invalid, exists;
	int r;

	r = cpupart_levels(mount, dir, &levels);
	if (r < 0)
		return error_set(r, "%s is not a cgroup below the cgroup v2 mount %s", dir, mount);
	parent = parent_of(dir);
	if (!parent)
		return -ENOMEM;
	/* DIR may not exist yet (a reservation is probed before anything is made): then what its
	 * parent would give a child tells. */
	exists = access(dir, F_OK) == 0;
	if (exists)
		r = read_value(dir, "cpuset.cpus.partition", true, &part);
	else {
		_cleanup_free_ char *sub = NULL;

		r = read_value(parent, "cgroup.subtree_control", false, &sub);
		if (r < 0)
			return r;
		r = cgfs_parse_controllers(sub) & (1u << JOBCG_CTRL_CPUSET) ? 0 : -ENOENT;
	}
	if (r == -ENOENT) {
		reason = strdup_printf("the cpuset controller is not enabled for %s (its parent's "
				       "cgroup.subtree_control lacks cpuset, or cpuset is bound to "
				       "cgroup v1 here), so "
				       "no CPU can be reserved; devices and memory can still be",
				       dir);
		goto unsupported;
	}
	if (r < 0)
		return r;
	/* Remote partitions (Linux >= 6.7) come with this file: known by the file, not by the
	 * kernel's version, since distributions backport. (Below the root cgroup, which lacks
	 * it, a local partition is as good.) */
	if (exists || strv_length(levels) > 1) {
		r = read_value(exists ? dir : parent, "cpuset.cpus.exclusive", true, &excl);
		if (r == 0) {
			*ret_kind = CPUPART_REMOTE;
			*ret_reason = NULL;
			return 0;
		}
		if (r != -ENOENT)
			return r;
	}
	if (strv_length(levels) == 1) {
		*ret_kind = CPUPART_LOCAL;
		*ret_reason = NULL;
		return 0;
	}
	r = read_value(parent, "cpuset.cpus.partition", true, &pstate);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = cpupart_parse_state(pstate, &mode, &invalid, &why);
		if (r < 0)
			return r;
		if (!invalid && (streq(mode, "root") || streq(mode, "isolated"))) {
			*ret_kind = CPUPART_LOCAL;
			*ret_reason = NULL;
			return 0;
		}
	}
	if (strv_length(levels) == 2 && ctx->info->root && streq(parent, ctx->info->root) &&
	    jobcg_spec_cpus_configured(ctx->conf ? &ctx->conf->cgroup : NULL)) {
		/* jobcg's tree directly below the root cgroup: apply makes its root a partition
		 * root of the CPUs jobs may use, SpecCPUs staying with the rest of the node. */
		*ret_kind = CPUPART_TREE;
		*ret_reason = NULL;
		return 0;
	}
	if (strv_length(levels) == 2 && ctx->info->root && streq(parent, ctx->info->root))
		reason = strdup_printf(
		    "this kernel has no remote cpuset partitions (no cpuset.cpus.exclusive: "
		    "Linux < 6.7), so a partition needs its parent, jobcg's tree root %s, to be a "
		    "partition root too (it reads '%s'). jobcg makes it one of the CPUs jobs may "
		    "use, which takes them from every process outside its tree, only when "
		    "cgroup.conf says which CPUs the rest of the node keeps: set SpecCPUs (or "
		    "CoreSpecCount), or use Linux >= 6.7; devices and memory can still be "
		    "reserved",
		    parent, pstate ? pstate : "no cpuset");
	else
		reason = strdup_printf(
		    "this kernel has no remote cpuset partitions (no cpuset.cpus.exclusive: "
		    "Linux < 6.7), and a partition then needs every ancestor up to the root cgroup "
		    "to be a partition root; %s is not one (its cpuset.cpus.partition reads '%s'). "
		    "To reserve CPUs, run jobcg's tree as a direct child of the root cgroup "
		    "(CgroupSlice=-.slice, or the mkdir backend with JobcgRoot at the top) and "
		    "make its root a partition root, or use Linux >= 6.7; devices and memory can "
		    "still be reserved here",
		    parent + strlen(mount), pstate ? pstate : "no cpuset");
unsupported:
	if (!reason)
		return -ENOMEM;
	*ret_kind = CPUPART_UNSUPPORTED;
	*ret_reason = reason;
	return 0;
}

/* ---- apply, release --------------------------------------------------------------------- */

/* What apply changed, to be put back exactly on failure: the files it wrote, in order. */
struct undo {
	char **dirs, **files, **old;
	size_t n;
	char *old_cpus; /* DIR's cpuset.cpus before, when written */
	char *old_part; /* DIR's cpuset.cpus.partition mode before, when written */
};

/* Remember that DIR/FILE held OLD (taken over, even on failure). */
static int undo_add(struct undo *u, const char *dir, const char *file, char *old)
{
	char **d, **f, **o;

	if (!u) {
		free(old);
		return 0;
	}
	d = realloc(u->dirs, (u->n + 1) * sizeof(char *));
	if (d)
		u->dirs = d;
	f = realloc(u->files, (u->n + 1) * sizeof(char *));
	if (f)
		u->files = f;
	o = realloc(u->old, (u->n + 1) * sizeof(char *));
	if (o)
		u->old = o;
	if (!d || !f || !o) {
		free(old);
		return -ENOMEM;
	}
	u->dirs[u->n] = strdup(dir);
	u->files[u->n] = (char *)file; /* string literals only */
	u->old[u->n] = old;
	u->n++;
	return u->dirs[u->n - 1] ? 0 : -ENOMEM;
}

static void undo_run(struct undo *u, const char *dir)
{
	struct jobcg_error saved = *jobcg_last_error();

	if (u->old_part && cgfs_write(dir, "cpuset.cpus.partition", u->old_part) < 0)
		log_warning("undo: %s", jobcg_last_error()->message);
	if (u->old_cpus && write_cpus(dir, "cpuset.cpus", u->old_cpus) < 0)
		log_warning("undo: %s", jobcg_last_error()->message);
	/* Last written first: exclusive sets bottom-up (a parent's must keep covering its
	 * children's), then the claims trimmed before them. */
	for (size_t i = u->n; i-- > 0;)
		if (u->dirs[i] && write_cpus(u->dirs[i], u->files[i], u->old[i]) < 0)
			log_warning("undo: %s", jobcg_last_error()->message);
	jobcg_error_restore(&saved);
}

static void undo_free(struct undo *u)
{
	for (size_t i = 0; i < u->n; i++) {
		free(u->dirs[i]);
		free(u->old[i]);
	}
	free(u->dirs);
	free(u->files);
	free(u->old);
	free(u->old_cpus);
	free(u->old_part);
}

static int conflicts(struct jobcg_ctx *ctx, char **levels, const char *cpus, bool fix,
		     struct undo *u, char **text, bool *foreign);

/* Add CPUS to cpuset.cpus.exclusive on every level, top-down (a child's exclusive set must lie
 * within its parent's), recording old values in U when it is not NULL. */
static int exclusive_add(char **levels, const char *cpus, struct undo *u)
{
	for (size_t i = 0; levels[i]; i++) {
		_cleanup_free_ char *old = NULL, *want = NULL;
		int r = read_value(levels[i], "cpuset.cpus.exclusive", false, &old);

		if (r < 0)
			return r;
		if ((r = cpulist_combine(old, CPULIST_UNION, cpus, &want)) < 0)
			return r;
		if (cpulist_equal(old, want) == 1)
			continue;
		r = write_cpus(levels[i], "cpuset.cpus.exclusive", want);
		if (r < 0) {
			jobcg_error_prefix("cannot give CPUs %s exclusively to %s (another cgroup "
					   "there may claim them in its cpuset.cpus.exclusive)",
					   cpus, levels[i]);
			return r;
		}
		if ((r = undo_add(u, levels[i], "cpuset.cpus.exclusive", TAKE_PTR(old))) < 0)
			return r;
	}
	return 0;
}

int cpupart_apply(struct jobcg_ctx *ctx, const char *dir, const char *cpus, bool isolated)
{
	const char *want = isolated ? "isolated" : "root";
	_cleanup_free_ char *reason = NULL, *cur = NULL, *norm = NULL;
	_cleanup_strv_free_ char **levels = NULL;
	struct cpupart_state st = {0};
	struct undo u = {0};
	enum cpupart_kind kind;
	bool tree_made = false;
	int r;

	if ((r = cpulist_combine(cpus, CPULIST_UNION, "", &norm)) < 0)
		return r;
	if (!*norm)
		return error_set(-EINVAL, "an empty CPU list cannot be reserved");
	r = cpupart_probe(ctx, dir, &kind, &reason);
	if (r < 0)
		return r;
	if (kind == CPUPART_UNSUPPORTED)
		return error_set(-EOPNOTSUPP, "cannot reserve CPUs %s: %s", norm, reason);
	if ((r = cpupart_levels(mount_of(ctx), dir, &levels)) < 0)
		return r;
	if (kind == CPUPART_TREE && (r = tree_make(ctx, &tree_made)) < 0)
		return r;

	/* jobcg's own cgroups beside the partition give the CPUs back first (the reservation
	 * layer has refused running jobs bound to them; what is left is the keeper's leaf after
	 * SpecCPUs, or a stale cgroup), since 6.12 refuses the exclusive set and 6.1 invalidates
	 * the partition while a sibling claims them. Another's claim fails the apply, named. */
	{
		_cleanup_free_ char *claims = strdup("");
		bool foreign = false;

		if (!claims) {
			r = -ENOMEM;
			goto fail;
		}
		if ((r = conflicts(ctx, levels, norm, true, &u, &claims, &foreign)) < 0)
			goto fail;
		if (*claims) {
			r = error_set(
			    -EBUSY,
			    "cannot reserve CPUs %s at %s: claimed beside it by %s (free them "
			    "there first)",
			    norm, dir, claims);
			goto fail;
		}
	}
	if (kind == CPUPART_REMOTE) {
		r = exclusive_add(levels, norm, &u);
		if (r < 0)
			goto fail;
	}
	r = read_value(dir, "cpuset.cpus", false, &cur);
	if (r < 0)
		goto fail;
	if (cpulist_equal(cur, norm) != 1) {
		r = write_cpus(dir, "cpuset.cpus", norm);
		if (r < 0)
			goto fail;
		u.old_cpus = TAKE_PTR(cur);
	}
	{
		_cleanup_free_ char *before = NULL, *why = NULL;
		bool inv;

		r = read_value(dir, "cpuset.cpus.partition", false, &before);
		if (r >= 0)
			r = cpupart_parse_state(before, &u.old_part, &inv, &why);
		if (r < 0)
			goto fail;
	}
	r = cgfs_write(dir, "cpuset.cpus.partition", want);
	if (r < 0)
		goto fail;

	/* The write's success means nothing: read back what the kernel made. */
	r = cpupart_verify(ctx, dir, norm, isolated, &st);
	if (r < 0)
		goto fail;
	if (!st.valid) {
		r = error_set(-EBUSY, "the kernel did not make CPUs %s a partition at %s: %s", norm,
			      dir, st.problem ? st.problem : st.partition);
		goto fail;
	}
	log_info("CPUs %s are a %s partition at %s (%s)", norm, want, dir,
		 kind == CPUPART_REMOTE ? "remote" : "local");
	cpupart_state_clear(&st);
	undo_free(&u);
	return 0;
fail:
	undo_run(&u, dir);
	if (tree_made) {
		struct jobcg_error saved = *jobcg_last_error();

		if (tree_unmake(ctx, false) < 0)
			log_warning("undo: %s", jobcg_last_error()->message);
		jobcg_error_restore(&saved);
	}
	cpupart_state_clear(&st);
	undo_free(&u);
	return r;
}

int cpupart_release(struct jobcg_ctx *ctx, const char *dir, const char *cpus)
{
	_cleanup_strv_free_ char **levels = NULL;
	_cleanup_free_ char *cur = NULL, *norm = NULL;
	struct stat sb;
	int r, first = 0;

	if ((r = cpulist_combine(cpus, CPULIST_UNION, "", &norm)) < 0)
		return r;
	if ((r = cpupart_levels(mount_of(ctx), dir, &levels)) < 0)
		return error_set(r, "%s is not a cgroup below %s", dir, mount_of(ctx));
	if (stat(dir, &sb) == 0) {
		r = cgfs_write(dir, "cpuset.cpus.partition", "member");
		if (r < 0 && r != -ENOENT)
			first = first ?: r;
		if (read_value(dir, "cpuset.cpus", true, &cur) == 0 &&
		    cpulist_equal(cur, norm) == 1) {
			r = write_cpus(dir, "cpuset.cpus", "");
			if (r < 0)
				first = first ?: r;
		}
	}
	/* Bottom-up, the reverse of apply; levels without the file (Linux < 6.7, or gone) are
	 * skipped. */
	for (size_t i = strv_length(levels); i-- > 0;) {
		_cleanup_free_ char *old = NULL, *left = NULL;

		r = read_value(levels[i], "cpuset.cpus.exclusive", true, &old);
		if (r == -ENOENT)
			continue;
		if (r < 0) {
			first = first ?: r;
			continue;
		}
		if ((r = cpulist_combine(old, CPULIST_MINUS, norm, &left)) < 0)
			return r;
		if (cpulist_equal(old, left) == 1)
			continue;
		r = write_cpus(levels[i], "cpuset.cpus.exclusive", left);
		if (r < 0)
			first = first ?: r;
	}
	/* The tree root jobcg made a partition for this one goes back when none is left. */
	if (strv_length(levels) == 2 && ctx->info->root && streq(levels[0], ctx->info->root) &&
	    (r = tree_unmake(ctx, false)) < 0)
		first = first ?: r;
	return first;
}

/* ---- verify, repair --------------------------------------------------------------------- */

void cpupart_state_clear(struct cpupart_state *s)
{
	if (!s)
		return;
	free(s->partition);
	free(s->effective);
	free(s->missing);
	free(s->leaks);
	free(s->problem);
	*s = (struct cpupart_state){0};
}

/* Append "what: cpus" to *leaks (a "; " separated list). */
static int leak_add(char **leaks, const char *what, const char *cpus)
{
	char *n = strdup_printf("%s%s%s: %s", *leaks, **leaks ? "; " : "", what, cpus);

	if (!n)
		return -ENOMEM;
	free(*leaks);
	*leaks = n;
	return 0;
}

/* Every cgroup below TOP other than SKIP and its subtree whose effective CPUs meet CPUS. Bounded:
 * a hostile tree cannot make verify walk forever. */
static int leaks_below(const char *top, const char *skip, const char *cpus, const char *mount,
		       unsigned depth, unsigned *budget, char **leaks)
{
	_cleanup_strv_free_ char **kids = NULL;
	int r;

	if (depth > 16 || *budget == 0)
		return 0;
	r = cgfs_children(top, &kids);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	for (size_t i = 0; kids[i]; i++) {
		_cleanup_free_ char *p = strdup_printf("%s/%s", top, kids[i]);
		_cleanup_free_ char *eff = NULL, *both = NULL;

		if (!p)
			return -ENOMEM;
		if (streq(p, skip) || --*budget == 0)
			continue;
		if (read_value(p, "cpuset.cpus.effective", true, &eff) == 0 &&
		    cpulist_combine(eff, CPULIST_INTERSECT, cpus, &both) == 0 && *both) {
			if ((r = leak_add(leaks, p + strlen(mount), both)) < 0)
				return r;
		}
		jobcg_error_clear();
		r = leaks_below(p, skip, cpus, mount, depth + 1, budget, leaks);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Cgroups beside the partition that claim a reserved CPU: a sibling of DIR whose cpuset.cpus
 * holds one (the kernel accepts that write and invalidates the partition), or a sibling of DIR
 * or of an ancestor whose cpuset.cpus.exclusive does. With FIX, those in jobcg's own tree give
 * the CPUs back (a reservation's CPUs are no job's to keep); the others are only named, in
 * *TEXT ("<cgroup> <file> <cpus>; ..."), and *FOREIGN says there were some.
 */
static int conflicts(struct jobcg_ctx *ctx, char **levels, const char *cpus, bool fix,
		     struct undo *u, char **text, bool *foreign)
{
	const char *mount = mount_of(ctx), *root = ctx->info->root;
	size_t n = strv_length(levels);

	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *parent = parent_of(levels[i]);
		_cleanup_strv_free_ char **kids = NULL;
		int r;

		if (!parent)
			return -ENOMEM;
		if ((r = cgfs_children(parent, &kids)) < 0)
			return r;
		for (size_t k = 0; kids[k]; k++) {
			_cleanup_free_ char *z = strdup_printf("%s/%s", parent, kids[k]);

			if (!z)
				return -ENOMEM;
			if (streq(z, levels[i]))
				continue;
			for (int f = 0; f < 2; f++) {
				const char *file = f ? "cpuset.cpus.exclusive" : "cpuset.cpus";
				_cleanup_free_ char *val = NULL, *both = NULL, *left = NULL;
				bool ours = root && startswith(z, root) && z[strlen(root)] == '/';

				if (!f && i + 1 < n)
					continue; /* cpuset.cpus only matters beside DIR itself */
				if (read_value(z, file, true, &val) < 0) {
					jobcg_error_clear();
					continue;
				}
				if ((r = cpulist_combine(val, CPULIST_INTERSECT, cpus, &both)) < 0)
					return r;
				if (!*both)
					continue;
				if (fix && ours) {
					if ((r = cpulist_combine(val, CPULIST_MINUS, cpus, &left)) <
					    0)
						return r;
					if (write_cpus(z, file, left) == 0) {
						if ((r = undo_add(u, z, file, TAKE_PTR(val))) < 0)
							return r;
						log_notice(
						    "took reserved CPU %s back from %s %s (now "
						    "'%s')",
						    both, z, file, left);
						continue;
					}
					log_warning("%s", jobcg_last_error()->message);
				}
				if (!ours)
					*foreign = true;
				char *t = strdup_printf("%s%s%s %s %s", *text, **text ? "; " : "",
							z + strlen(mount), file, both);
				if (!t)
					return -ENOMEM;
				free(*text);
				*text = t;
			}
		}
	}
	return 0;
}

int cpupart_verify(struct jobcg_ctx *ctx, const char *dir, const char *cpus, bool isolated,
		   struct cpupart_state *ret)
{
	const char *want = isolated ? "isolated" : "root", *mount = mount_of(ctx);
	_cleanup_free_ char *part = NULL, *eff = NULL, *missing = NULL, *extra = NULL;
	_cleanup_free_ char *mode = NULL, *reason = NULL, *leaks = strdup(""), *rooteff = NULL;
	_cleanup_free_ char *problem = NULL, *both = NULL, *norm = NULL;
	unsigned budget = 100000;
	bool invalid = false;
	int r;

	if (!leaks)
		return -ENOMEM;
	if ((r = cpulist_combine(cpus, CPULIST_UNION, "", &norm)) < 0)
		return r;
	if ((r = read_value(dir, "cpuset.cpus.partition", false, &part)) < 0 ||
	    (r = read_value(dir, "cpuset.cpus.effective", false, &eff)) < 0)
		return r;
	if ((r = cpupart_parse_state(part, &mode, &invalid, &reason)) < 0)
		return r;
	if ((r = cpulist_combine(norm, CPULIST_MINUS, eff, &missing)) < 0 ||
	    (r = cpulist_combine(eff, CPULIST_MINUS, norm, &extra)) < 0)
		return r;
	/* Leaks: the root cgroup (where every process outside a partition may run) and every
	 * other cgroup of jobcg's tree. */
	if (read_value(mount, "cpuset.cpus.effective", true, &rooteff) == 0 &&
	    cpulist_combine(rooteff, CPULIST_INTERSECT, norm, &both) == 0 && *both &&
	    (r = leak_add(&leaks, "/ (the root cgroup)", both)) < 0)
		return r;
	jobcg_error_clear();
	if (ctx->info->root && !streq(ctx->info->root, dir)) {
		_cleanup_free_ char *treeeff = NULL, *tb = NULL;

		if (read_value(ctx->info->root, "cpuset.cpus.effective", true, &treeeff) == 0 &&
		    cpulist_combine(treeeff, CPULIST_INTERSECT, norm, &tb) == 0 && *tb &&
		    (r = leak_add(&leaks, ctx->info->root + strlen(mount), tb)) < 0)
			return r;
		jobcg_error_clear();
		r = leaks_below(ctx->info->root, dir, norm, mount, 0, &budget, &leaks);
		if (r < 0)
			return r;
	}

	if ((r = tree_problem(ctx, dir, &problem)) < 0)
		return r;
	if (problem)
		; /* the tree root's own state explains the rest */
	else if (!streq(mode, want) || invalid) {
		_cleanup_strv_free_ char **levels = NULL;
		_cleanup_free_ char *claims = strdup("");
		bool foreign = false;

		if (!claims)
			return -ENOMEM;
		if (cpupart_levels(mount, dir, &levels) == 0 &&
		    conflicts(ctx, levels, norm, false, NULL, &claims, &foreign) < 0)
			jobcg_error_clear();
		problem = strdup_printf(
		    "partition %s reads '%s' (wanted '%s')%s%s", dir + strlen(mount), part, want,
		    *claims ? "; reserved CPUs claimed beside it by " : "", claims);
	} else if (*missing)
		problem =
		    strdup_printf("partition %s reads '%s' but has shrunk: CPU %s missing from "
				  "its cpuset.cpus.effective (%s), offline or cut from an "
				  "ancestor's cpuset.cpus.exclusive",
				  dir + strlen(mount), part, missing, *eff ? eff : "empty");
	else if (*extra)
		problem = strdup_printf("partition %s runs on CPU %s beyond the reserved %s",
					dir + strlen(mount), extra, norm);
	else if (*leaks)
		problem = strdup_printf("reserved CPU reachable outside the partition: %s", leaks);
	if (problem == NULL && (!streq(mode, want) || invalid || *missing || *extra || *leaks))
		return -ENOMEM;

	*ret = (struct cpupart_state){
	    .valid = problem == NULL,
	    .partition = TAKE_PTR(part),
	    .effective = TAKE_PTR(eff),
	    .missing = TAKE_PTR(missing),
	    .leaks = TAKE_PTR(leaks),
	    .problem = TAKE_PTR(problem),
	};
	return 0;
}

int cpupart_repair(struct jobcg_ctx *ctx, const char *dir, const char *cpus, bool isolated,
		   struct cpupart_state *ret)
{
	const char *want = isolated ? "isolated" : "root";
	_cleanup_strv_free_ char **levels = NULL;
	_cleanup_free_ char *norm = NULL, *excl = NULL, *cur = NULL;
	struct cpupart_state st = {0};
	int r;

	if ((r = cpulist_combine(cpus, CPULIST_UNION, "", &norm)) < 0)
		return r;
	if ((r = cpupart_levels(mount_of(ctx), dir, &levels)) < 0)
		return error_set(r, "%s is not a cgroup below %s", dir, mount_of(ctx));
	/* What claims the CPUs beside the partition first: jobcg's own cgroups give them back;
	 * with another's claim standing, member -> root would only hand the CPUs to the root
	 * cgroup (6.12 keeps them out of an invalid remote partition until then), so nothing is
	 * written and the claim is named. */
	{
		_cleanup_free_ char *claims = strdup("");
		bool foreign = false;

		if (!claims)
			return -ENOMEM;
		if ((r = conflicts(ctx, levels, norm, true, NULL, &claims, &foreign)) < 0)
			return r;
		if (foreign) {
			r = cpupart_verify(ctx, dir, norm, isolated, &st);
			if (r < 0)
				return r;
			if (st.valid) {
				*ret = st;
				return 0;
			}
			free(st.problem);
			st.problem = strdup_printf(
			    "CPU %s %s claimed outside jobcg's tree by %s: free them there, then "
			    "repair (nothing was changed)",
			    norm, strchr(norm, ',') || strchr(norm, '-') ? "are" : "is", claims);
			*ret = st;
			return error_set(-EIO, "cannot repair the partition at %s: %s", dir,
					 st.problem ? st.problem : "out of memory");
		}
	}
	/* A tree root jobcg made a partition (Linux < 6.7) is made one again first: the
	 * reservation below cannot be valid while its parent is not. */
	{
		_cleanup_free_ char *tp = NULL;
		bool made;

		if ((r = tree_problem(ctx, dir, &tp)) < 0)
			return r;
		if (tp && (r = tree_make(ctx, &made)) < 0)
			return r;
	}
	/* An ancestor's exclusive set cut is put back first (remote partitions only). */
	if (read_value(dir, "cpuset.cpus.exclusive", true, &excl) == 0 &&
	    (r = exclusive_add(levels, norm, NULL)) < 0)
		log_warning("repair of %s: %s", dir, jobcg_last_error()->message);
	jobcg_error_clear();
	if (read_value(dir, "cpuset.cpus", false, &cur) == 0 && cpulist_equal(cur, norm) != 1 &&
	    write_cpus(dir, "cpuset.cpus", norm) < 0)
		log_warning("repair of %s: %s", dir, jobcg_last_error()->message);
	/* 6.1 leaves an invalid partition invalid when "root" is written again, and 6.12 keeps a
	 * remote partition's CPUs away from the root until "member" is: member first, on both. */
	r = cgfs_write(dir, "cpuset.cpus.partition", "member");
	if (r < 0)
		return r;
	r = cgfs_write(dir, "cpuset.cpus.partition", want);
	if (r < 0)
		return r;
	r = cpupart_verify(ctx, dir, norm, isolated, &st);
	if (r < 0)
		return r;
	if (st.valid)
		log_info("repaired the partition at %s: %s", dir, st.partition);
	*ret = st;
	return st.valid ? 0
			: error_set(-EIO, "cannot repair the partition at %s: %s", dir,
				    st.problem ? st.problem : st.partition);
}

/* ---- memory.min --------------------------------------------------------------------------- */

/* Sum of memory.min over DIR's children, with the child named OVERRIDE counted as VALUE. */
static int children_min(const char *dir, const char *override, uint64_t value, uint64_t *ret)
{
	_cleanup_strv_free_ char **kids = NULL;
	uint64_t sum = 0;
	int r = cgfs_children(dir, &kids);

	if (r < 0)
		return r;
	for (size_t i = 0; kids[i]; i++) {
		_cleanup_free_ char *p = strdup_printf("%s/%s", dir, kids[i]);
		uint64_t v = 0;

		if (!p)
			return -ENOMEM;
		if (override && streq(p, override))
			v = value;
		else if (cgfs_read_u64(p, "memory.min", &v) < 0) {
			jobcg_error_clear();
			v = 0;
		}
		sum = sum + v < sum ? UINT64_MAX : sum + v;
	}
	*ret = sum;
	return 0;
}

static bool systemd_backend(struct jobcg_ctx *ctx)
{
	const char *name = jobcg_ctx_backend(ctx);

	return name && streq(name, "systemd");
}

/* Append one value of D-Bus type SIG (inside its variant) to M. */
typedef int (*unit_value_fn)(sd_bus_message *m, const void *arg);

static int append_u64(sd_bus_message *m, const void *arg)
{
	return sdbus.bus_message_append(m, "t", *(const uint64_t *)arg);
}

/* A CPU list as systemd's AllowedCPUs wants it: a bitmask, CPU 0 in the lowest bit of byte 0. */
static int append_cpumask(sd_bus_message *m, const void *arg)
{
	uint64_t bits[WORDS];
	size_t n = 0;
	int r = cpus_load(arg, bits);

	if (r < 0)
		return r;
	for (size_t i = 0; i < WORDS * 8; i++)
		if ((bits[i / 8] >> (8 * (i % 8))) & 0xff)
			n = i + 1;
	if ((r = sdbus.bus_message_open_container(m, 'a', "y")) < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if ((r = sdbus.bus_message_append(
			 m, "y", (uint8_t)((bits[i / 8] >> (8 * (i % 8))) & 0xff))) < 0)
			return r;
	return sdbus.bus_message_close_container(m);
}

/*
 * Set systemd property KEY of UNIT, runtime only (a reservation lives as long as jobcg says):
 * TEXT is the value as `systemctl set-property` takes it, APPEND writes it as D-Bus type SIG. A
 * dynamically linked jobcg asks over D-Bus itself; a static one, which must not load libsystemd,
 * has systemctl ask.
 */
static int unit_property(const char *unit, const char *key, const char *text, const char *sig,
			 unit_value_fn append, const void *arg)
{
	sd_bus_error err = SD_BUS_ERROR_NULL;
	sd_bus_message *m = NULL, *reply = NULL;
	sd_bus *bus = NULL;
	int r;

	if (process_is_static()) {
		_cleanup_free_ char *val = strdup_printf("%s=%s", key, text);
		char *argv[] = {(char *)"systemctl",
				(char *)"set-property",
				(char *)"--runtime",
				(char *)unit,
				val,
				NULL};
		const char *exe = access("/usr/bin/systemctl", X_OK) == 0 ? "/usr/bin/systemctl"
									  : "/bin/systemctl";
		pid_t pid;
		int st;

		if (!val)
			return -ENOMEM;
		r = posix_spawn(&pid, exe, NULL, NULL, argv, (char *[]){NULL});
		if (r)
			return error_set(-r, "cannot run %s to set %s of %s: %s", exe, val, unit,
					 strerror(r));
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				return error_set(-errno, "waiting for systemctl: %s",
						 strerror(errno));
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return error_set(-EIO, "systemctl set-property %s %s failed", unit, val);
		return 0;
	}
	r = sdbus_load();
	if (r < 0)
		return r;
	r = sdbus.bus_open_system(&bus);
	if (r < 0)
		return error_set(r, "cannot connect to the D-Bus system bus to set %s of %s: %s",
				 key, unit, strerror(-r));
	r = sdbus.bus_message_new_method_call(
	    bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
	    "org.freedesktop.systemd1.Manager", "SetUnitProperties");
	if (r >= 0)
		r = sdbus.bus_message_append(m, "sb", unit, 1);
	if (r >= 0)
		r = sdbus.bus_message_open_container(m, 'a', "(sv)");
	if (r >= 0)
		r = sdbus.bus_message_open_container(m, 'r', "sv");
	if (r >= 0)
		r = sdbus.bus_message_append(m, "s", key);
	if (r >= 0)
		r = sdbus.bus_message_open_container(m, 'v', sig);
	if (r >= 0)
		r = append(m, arg);
	for (int i = 0; i < 3 && r >= 0; i++)
		r = sdbus.bus_message_close_container(m);
	if (r < 0) {
		error_set(r, "systemd: cannot build SetUnitProperties: %s", strerror(-r));
		goto out;
	}
	r = sdbus.bus_call(bus, m, 30 * 1000000ULL, &err, &reply);
	if (r < 0)
		error_set(r, "systemd SetUnitProperties(%s, %s=%s): %s", unit, key, text,
			  err.message ? err.message : strerror(-r));
out:
	sdbus.bus_error_free(&err);
	sdbus.bus_message_unref(reply);
	sdbus.bus_message_unref(m);
	sdbus.bus_flush_close_unref(bus);
	return r;
}

static int same_u64(const char *got, const char *want)
{
	uint64_t a, b;

	return parse_u64(got, UINT64_MAX, &a) == 0 && parse_u64(want, UINT64_MAX, &b) == 0 &&
	       a == b;
}

static int same_cpus(const char *got, const char *want)
{
	return cpulist_equal(got, want) == 1;
}

/*
 * systemd writes a unit's file (memory.min for MemoryMin, cpuset.cpus for AllowedCPUs) when it
 * next realizes the unit's cgroup, after it has answered: wait (bounded) until DIR/FILE holds
 * WANT as SAME compares them, since nothing signals it.
 */
static int wait_systemd_wrote(const char *dir, const char *file, const char *key, const char *want,
			      int (*same)(const char *got, const char *want))
{
	uint64_t end = now_usec() + 5 * 1000000ULL;
	int r;

	for (;;) {
		_cleanup_free_ char *got = NULL;

		if ((r = read_value(dir, file, false, &got)) < 0)
			return r;
		if (same(got, want))
			return 0;
		jobcg_error_clear();
		if (now_usec() > end)
			return error_set(-EIO, "systemd accepted %s=%s but %s/%s reads '%s'", key,
					 want, dir, file, got);
		usleep(10000);
	}
}

/* systemd's MemoryMin of the unit whose cgroup is DIR, once the file says so. */
static int unit_memory_min(const char *dir, uint64_t bytes)
{
	char text[32];
	int r;

	snprintf(text, sizeof(text), "%llu", (unsigned long long)bytes);
	r = unit_property(strrchr(dir, '/') + 1, "MemoryMin", text, "t", append_u64, &bytes);
	return r < 0 ? r : wait_systemd_wrote(dir, "memory.min", "MemoryMin", text, same_u64);
}

void memresv_level_min(uint64_t cur, uint64_t need, uint64_t added, bool raise, uint64_t *ret_min,
		       uint64_t *ret_added)
{
	uint64_t drop;

	/* Lowered by someone else since: jobcg's share is at most what is left. */
	if (added > cur)
		added = cur;
	if (raise) {
		*ret_min = need > cur ? need : cur;
		*ret_added = added + (*ret_min - cur);
		return;
	}
	drop = cur > need ? cur - need : 0;
	if (drop > added)
		drop = added;
	*ret_min = cur - drop;
	*ret_added = added - drop;
}

/* What jobcg added to LV's memory.min (X_MINADDED), 0 when not recorded or unreadable: what
 * jobcg cannot account for is never lowered. */
static uint64_t min_added_get(const char *lv)
{
	_cleanup_free_ char *s = NULL;
	uint64_t v = 0;

	if (cgfs_xattr_get(lv, X_MINADDED, &s) < 0 || parse_u64(s, UINT64_MAX, &v) < 0) {
		jobcg_error_clear();
		return 0;
	}
	return v;
}

static int min_added_set(const char *lv, uint64_t v)
{
	char val[32];

	if (!v) {
		if (removexattr(lv, X_MINADDED) < 0 && errno != ENODATA)
			return error_set(-errno, "cannot remove %s from %s: %s", X_MINADDED, lv,
					 strerror(errno));
		return 0;
	}
	snprintf(val, sizeof(val), "%llu", (unsigned long long)v);
	return cgfs_xattr_set(lv, X_MINADDED, val);
}

/* LV's memory.min = V: through systemd (SD) where systemd owns the file. */
static int level_min_write(const char *lv, bool sd, uint64_t v)
{
	char val[32];

	if (sd)
		return unit_memory_min(lv, v);
	snprintf(val, sizeof(val), "%llu", (unsigned long long)v);
	return cgfs_write(lv, "memory.min", val);
}

/*
 * Set every level above DIR to what its children need: raise (apply) or lower (release), never
 * the other way, and lower by no more than jobcg added there (X_MINADDED), so that a
 * memory.min or MemoryMin the administrator set stays. The record is written after a raise and
 * before a lowering: a crash in between leaves protection behind, never takes someone else's.
 * Levels at and above the tree root belong to systemd under its backend.
 */
static int ancestors_min(struct jobcg_ctx *ctx, const char *dir, bool raise)
{
	_cleanup_strv_free_ char **levels = NULL;
	const char *root = ctx->info->root;
	bool sd = systemd_backend(ctx);
	size_t n;
	int r;

	if ((r = cpupart_levels(mount_of(ctx), dir, &levels)) < 0)
		return error_set(r, "%s is not a cgroup below %s", dir, mount_of(ctx));
	n = strv_length(levels);
	for (size_t i = n - 1; i-- > 0;) {
		const char *lv = levels[i];
		bool at_or_above_root =
		    root && strlen(lv) <= strlen(root) && strncmp(root, lv, strlen(lv)) == 0;
		uint64_t cur = 0, need = 0, added, to = 0, to_added = 0;

		if ((r = cgfs_read_u64(lv, "memory.min", &cur)) < 0 ||
		    (r = children_min(lv, NULL, 0, &need)) < 0)
			return r;
		added = min_added_get(lv);
		memresv_level_min(cur, need, added, raise, &to, &to_added);
		if (!raise && to_added != added && (r = min_added_set(lv, to_added)) < 0)
			return r;
		if (to != cur && (r = level_min_write(lv, sd && at_or_above_root, to)) < 0)
			return r;
		if (raise && to_added != added && (r = min_added_set(lv, to_added)) < 0) {
			struct jobcg_error saved = *jobcg_last_error();

			/* Unrecorded, it could never be given back. */
			if (to != cur && level_min_write(lv, sd && at_or_above_root, cur) < 0)
				log_warning("undo: %s", jobcg_last_error()->message);
			jobcg_error_restore(&saved);
			return r;
		}
	}
	return 0;
}

int memresv_apply(struct jobcg_ctx *ctx, const char *dir, uint64_t bytes)
{
	char val[32];
	int r;

	snprintf(val, sizeof(val), "%llu", (unsigned long long)bytes);
	r = cgfs_write(dir, "memory.min", val);
	if (r < 0)
		return r;
	r = ancestors_min(ctx, dir, true);
	if (r < 0) {
		struct jobcg_error saved = *jobcg_last_error();

		(void)memresv_release(ctx, dir, bytes);
		jobcg_error_restore(&saved);
		return r;
	}
	return 0;
}

int memresv_release(struct jobcg_ctx *ctx, const char *dir, uint64_t bytes)
{
	struct stat sb;
	int r;

	(void)bytes;
	if (stat(dir, &sb) == 0 && (r = cgfs_write(dir, "memory.min", "0")) < 0 && r != -ENOENT)
		return r;
	return ancestors_min(ctx, dir, false);
}

int memresv_verify(struct jobcg_ctx *ctx, const char *dir, uint64_t bytes, char **ret_problem)
{
	_cleanup_strv_free_ char **levels = NULL;
	const char *mount = mount_of(ctx);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	int r;

	if ((r = cpupart_levels(mount, dir, &levels)) < 0)
		return error_set(r, "%s is not a cgroup below %s", dir, mount);
	/* The kernel keeps memory.min in whole pages, rounded down ("--mem 5K" reads back 4096):
	 * what it can hold is all that can be asked of it. */
	if (page > 1)
		bytes -= bytes % page;
	for (size_t i = strv_length(levels); i-- > 0;) {
		uint64_t cur = 0, need = bytes;

		if ((r = cgfs_read_u64(levels[i], "memory.min", &cur)) < 0)
			return r;
		if (levels[i + 1]) {
			uint64_t sum = 0;

			if ((r = children_min(levels[i], NULL, 0, &sum)) < 0)
				return r;
			need = sum > bytes ? sum : bytes;
		}
		if (cur < need) {
			char *p = strdup_printf(
			    "memory.min of %s is %llu, below the %llu its reserved memory needs "
			    "(protection holds only when every ancestor has it)",
			    levels[i] + strlen(mount), (unsigned long long)cur,
			    (unsigned long long)need);

			if (!p)
				return -ENOMEM;
			*ret_problem = p;
			return 0;
		}
	}
	*ret_problem = NULL;
	return 0;
}

/* ---- the tree root as a partition root (Linux < 6.7) ------------------------------------ */

/* The tree root's cpuset.cpus: written by systemd under its backend (AllowedCPUs, which it would
 * otherwise write back over ours when it next realizes the scope), else directly. */
static int tree_set_cpus(struct jobcg_ctx *ctx, const char *cpus)
{
	const char *root = ctx->info->root;
	int r;

	if (!systemd_backend(ctx))
		return write_cpus(root, "cpuset.cpus", cpus);
	r = unit_property(strrchr(root, '/') + 1, "AllowedCPUs", cpus, "ay", append_cpumask, cpus);
	return r < 0 ? r : wait_systemd_wrote(root, "cpuset.cpus", "AllowedCPUs", cpus, same_cpus);
}

/*
 * The tree root's cpuset.cpus back to no restriction: empty, as before tree_make, where the
 * kernel allows it. It refuses to empty the list of a cgroup with processes below it (ENOSPC),
 * so it gets every online CPU then (systemd's AllowedCPUs too, since systemd's own write of an
 * empty list would meet the same refusal): jobs must not stay on the CPUs of an old SpecCPUs.
 */
static int tree_cpus_restore(struct jobcg_ctx *ctx)
{
	_cleanup_free_ char *online = NULL;
	int r;

	if (!systemd_backend(ctx)) {
		r = write_cpus(ctx->info->root, "cpuset.cpus", "");
		if (r != -ENOSPC)
			return r;
		jobcg_error_clear();
	}
	if ((r = jobcg_online_cpus(&online)) < 0)
		return r;
	return tree_set_cpus(ctx, online);
}

/*
 * Make jobcg's tree root, a direct child of the root cgroup, a partition root of the CPUs jobs
 * may use (online minus SpecCPUs/CoreSpecCount): on Linux < 6.7 a reservation's partition below
 * it needs that. Those CPUs leave every process outside the tree, which is why it needs the
 * administrator's SpecCPUs, and why release undoes it once no reservation needs it. Read back
 * like every partition; the mark X_TREEPART says jobcg made it. *RET_MADE: made by this call.
 */
static int tree_make(struct jobcg_ctx *ctx, bool *ret_made)
{
	const char *root = ctx->info->root, *mount = mount_of(ctx);
	_cleanup_free_ char *state = NULL, *mode = NULL, *why = NULL, *online = NULL;
	_cleanup_free_ char *cpus = NULL, *claims = strdup(""), *after = NULL;
	_cleanup_strv_free_ char **levels = NULL;
	bool invalid = false, foreign = false;
	int r;

	*ret_made = false;
	if (!claims)
		return -ENOMEM;
	if ((r = read_value(root, "cpuset.cpus.partition", false, &state)) < 0 ||
	    (r = cpupart_parse_state(state, &mode, &invalid, &why)) < 0)
		return r;
	if (!invalid && (streq(mode, "root") || streq(mode, "isolated")))
		return 0;
	if ((r = jobcg_online_cpus(&online)) < 0 ||
	    (r = jobcg_spec_job_cpus(&ctx->conf->cgroup, online, &cpus)) < 0)
		return r;
	if ((r = cpupart_levels(mount, root, &levels)) < 0)
		return error_set(r, "%s is not a cgroup below %s", root, mount);
	if (strv_length(levels) != 1)
		return error_set(-EOPNOTSUPP,
				 "jobcg's tree root %s is not a direct child of the "
				 "root cgroup: it cannot be a partition root on Linux < 6.7",
				 root);
	if ((r = conflicts(ctx, levels, cpus, false, NULL, &claims, &foreign)) < 0)
		return r;
	if (*claims)
		return error_set(
		    -EBUSY,
		    "cannot make jobcg's tree root %s a partition of CPUs %s (on Linux "
		    "< 6.7 a reservation's CPUs need it): claimed beside it by %s (free "
		    "them there first)",
		    root, cpus, claims);
	if ((r = tree_set_cpus(ctx, cpus)) < 0)
		return r;
	/* 6.1 leaves an invalid partition invalid when "root" is written again. */
	if (invalid)
		(void)cgfs_write(root, "cpuset.cpus.partition", "member");
	if ((r = cgfs_write(root, "cpuset.cpus.partition", "root")) < 0 ||
	    (r = read_value(root, "cpuset.cpus.partition", false, &after)) < 0)
		goto undo;
	if (!streq(after, "root")) {
		r = error_set(
		    -EBUSY,
		    "the kernel did not make jobcg's tree root %s a partition of CPUs %s: "
		    "its cpuset.cpus.partition reads '%s'",
		    root, cpus, after);
		goto undo;
	}
	if ((r = cgfs_xattr_set(root, X_TREEPART, cpus)) < 0)
		goto undo;
	log_notice("made jobcg's tree root %s a partition root of CPUs %s (Linux < 6.7: a "
		   "reservation's CPUs need every ancestor to be one); the rest of the node keeps "
		   "the others",
		   root, cpus);
	*ret_made = true;
	return 0;
undo : {
	struct jobcg_error saved = *jobcg_last_error();

	if (cgfs_write(root, "cpuset.cpus.partition", "member") < 0 || tree_cpus_restore(ctx) < 0)
		log_warning("undo: %s", jobcg_last_error()->message);
	jobcg_error_restore(&saved);
	return r;
}
}

/* Undo tree_make once no child of the tree root is a partition any more (FORCE: regardless).
 * A partition root jobcg did not make (no mark) is the administrator's and stays. */
static int tree_unmake(struct jobcg_ctx *ctx, bool force)
{
	const char *root = ctx->info->root;
	_cleanup_strv_free_ char **kids = NULL;
	_cleanup_free_ char *mark = NULL;
	int r;

	if (!root || cgfs_xattr_get(root, X_TREEPART, &mark) < 0) {
		jobcg_error_clear();
		return 0;
	}
	if (!force) {
		if ((r = cgfs_children(root, &kids)) < 0)
			return r;
		for (size_t i = 0; kids[i]; i++) {
			_cleanup_free_ char *p = strdup_printf("%s/%s", root, kids[i]);
			_cleanup_free_ char *part = NULL;

			if (!p)
				return -ENOMEM;
			if (read_value(p, "cpuset.cpus.partition", true, &part) == 0 &&
			    !startswith(part, "member"))
				return 0; /* still needed */
			jobcg_error_clear();
		}
	}
	if ((r = cgfs_write(root, "cpuset.cpus.partition", "member")) < 0 ||
	    (r = tree_cpus_restore(ctx)) < 0)
		return r;
	if (removexattr(root, X_TREEPART) < 0 && errno != ENODATA)
		return error_set(-errno, "cannot remove %s from %s: %s", X_TREEPART, root,
				 strerror(errno));
	log_notice("jobcg's tree root %s is no partition root any more (no CPU reservation left)",
		   root);
	return 0;
}

/* When DIR's parent is a tree root jobcg made a partition root: *RET says what is wrong with it
 * (malloc'd), NULL when it is a valid partition root or not jobcg's to check. */
static int tree_problem(struct jobcg_ctx *ctx, const char *dir, char **ret)
{
	const char *root = ctx->info->root;
	_cleanup_free_ char *parent = parent_of(dir), *mark = NULL, *state = NULL;
	_cleanup_free_ char *mode = NULL, *why = NULL;
	bool invalid = false;
	int r;

	*ret = NULL;
	if (!parent)
		return -ENOMEM;
	if (!root || !streq(parent, root) || cgfs_xattr_get(root, X_TREEPART, &mark) < 0) {
		jobcg_error_clear();
		return 0;
	}
	if ((r = read_value(root, "cpuset.cpus.partition", false, &state)) < 0 ||
	    (r = cpupart_parse_state(state, &mode, &invalid, &why)) < 0)
		return r;
	if (!invalid && streq(mode, "root"))
		return 0;
	*ret = strdup_printf("jobcg's tree root %s reads '%s' (on Linux < 6.7 it must be a valid "
			     "partition root of CPUs %s for the reservation's CPUs)",
			     root + strlen(mount_of(ctx)), state, mark);
	return *ret ? 0 : -ENOMEM;
}
