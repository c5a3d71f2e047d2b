/*
 * jobcg: reservations. <root>/resv_<name>/ holds the spec in trusted.jobcg.* xattrs (devices in
 * trusted.jobcg.gres, like a job's, so that every scan of the tree counts them as taken), made
 * and removed under the node lock like a job: mkdir, spec, device policy, CPU partition,
 * memory.min, then the "created" mark; deletion marks "removing" first. gc finishes either.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/limits.h>
#include <stdarg.h>
#include <time.h>

#include "cgroupfs.h"
#include "cpupart.h"
#include "devpolicy.h"
#include "devprog.h"
#include "devices.h"
#include "gresxattr.h"
#include "memlimit.h"
#include "parse.h"
#include "log.h"
#include "resv_internal.h"
#include "spec.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

#define X_CPUS	   "trusted.jobcg.cpus"
#define X_MEM	   "trusted.jobcg.mem"
#define X_ISOLATED "trusted.jobcg.isolated"
#define X_USERS	   "trusted.jobcg.users"
#define X_CREATED  "trusted.jobcg.created"
#define X_REMOVING "trusted.jobcg.removing"

static void node_freep(struct jobcg_gres_node **n)
{
	jobcg_gres_node_free(*n);
}

JOBCG_EXPORT bool jobcg_resv_name_valid(const char *name)
{
	return tree_resv_name_valid(name);
}

static int name_check(const char *name)
{
	if (!tree_resv_name_valid(name))
		return error_set(-EINVAL,
				 "invalid reservation name '%s': need [a-z0-9][a-z0-9_-]{0,31}",
				 name ? name : "");
	return 0;
}

/* ---- rules ---- */

static bool cpus_empty(const char *s)
{
	return !s || !*s;
}

static int cpus_bits(const char *s, uint64_t **ret, size_t *ret_words)
{
	if (cpus_empty(s)) {
		*ret = calloc(1, sizeof(uint64_t));
		*ret_words = 1;
		return *ret ? 0 : -ENOMEM;
	}
	return jobcg_parse_cpulist(s, ret, ret_words);
}

/* a & b as a list ("" when disjoint) */
static int cpus_common(const char *a, const char *b, char **ret)
{
	_cleanup_free_ uint64_t *x = NULL, *y = NULL;
	size_t nx = 0, ny = 0;
	int r;

	if ((r = cpus_bits(a, &x, &nx)) < 0 || (r = cpus_bits(b, &y, &ny)) < 0)
		return r;
	for (size_t i = 0; i < nx; i++)
		x[i] &= i < ny ? y[i] : 0;
	return jobcg_format_cpulist(x, nx, ret);
}

static bool set_empty(const struct jobcg_gres_set *s)
{
	for (size_t i = 0; i < ELEMENTSOF(s->w); i++)
		if (s->w[i])
			return false;
	return true;
}

static void set_and(const struct jobcg_gres_set *a, const struct jobcg_gres_set *b,
		    struct jobcg_gres_set *ret)
{
	for (size_t i = 0; i < ELEMENTSOF(ret->w); i++)
		ret->w[i] = a->w[i] & b->w[i];
}

static char *set_name(const struct jobcg_gres_node *n, const struct jobcg_gres_set *s)
{
	char *out = NULL;

	if (n && jobcg_gres_set_format(n, s, &out) == 0)
		return out;
	for (unsigned i = 0; i < JOBCG_GRES_MAX; i++) {
		char *t;

		if (!jobcg_gres_set_has(s, i))
			continue;
		t = strdup_printf("%s%s#%u", out ? out : "", out ? "," : "", i);
		free(out);
		if (!(out = t))
			return NULL;
	}
	return out ? out : strdup("");
}

JOBCG_EXPORT int jobcg_resv_rules_check(const struct jobcg_resv_rules *in)
{
	return_if_null(in);
	const struct jobcg_resv_rules_entry *w = &in->want;
	_cleanup_free_ uint64_t *online = NULL, *left = NULL, *mine = NULL;
	size_t non = 0, nleft = 0, nmine = 0;
	uint64_t mem = w->mem_bytes;
	bool any_left = false;
	int r;

	if (!cpus_empty(w->cpus)) {
		_cleanup_free_ char *off = NULL, *spec = NULL;

		if ((r = cpus_bits(w->cpus, &mine, &nmine)) < 0)
			return error_set(r, "invalid CPU list '%s'", w->cpus);
		if ((r = cpus_bits(in->online, &online, &non)) < 0)
			return r;
		for (size_t i = 0; i < nmine; i++)
			if (mine[i] & ~(i < non ? online[i] : 0)) {
				uint64_t *o = calloc(nmine, sizeof(*o));

				if (!o)
					return -ENOMEM;
				for (size_t j = 0; j < nmine; j++)
					o[j] = mine[j] & ~(j < non ? online[j] : 0);
				r = jobcg_format_cpulist(o, nmine, &off);
				free(o);
				if (r < 0)
					return r;
				return error_set(-EINVAL, "CPUs %s are not online (online: %s)",
						 off, in->online ? in->online : "");
			}
		if ((r = cpus_common(w->cpus, in->spec_cpus, &spec)) < 0)
			return r;
		if (*spec)
			return error_set(-EINVAL,
					 "CPUs %s are kept for the system (SpecCPUs): a "
					 "reservation cannot take them",
					 spec);
	}
	for (size_t k = 0; k < in->n_others; k++) {
		const struct jobcg_resv_rules_entry *o = &in->others[k];
		_cleanup_free_ char *both = NULL;
		struct jobcg_gres_set common;

		if (!cpus_empty(w->cpus) && !cpus_empty(o->cpus)) {
			if ((r = cpus_common(w->cpus, o->cpus, &both)) < 0)
				return r;
			if (*both)
				return error_set(-EBUSY,
						 "CPUs %s are already reserved by reservation %s",
						 both, o->name);
		}
		set_and(&w->devices, &o->devices, &common);
		if (!set_empty(&common)) {
			_cleanup_free_ char *d = set_name(in->node, &common);

			return error_set(-EBUSY,
					 "devices %s are already reserved by reservation %s",
					 d ? d : "?", o->name);
		}
		mem += o->mem_bytes;
	}
	for (size_t k = 0; k < in->n_jobs; k++) {
		const struct jobcg_resv_rules_job *j = &in->jobs[k];
		_cleanup_free_ char *both = NULL;
		struct jobcg_gres_set common;

		if (!cpus_empty(w->cpus) && !cpus_empty(j->cpus)) {
			if ((r = cpus_common(w->cpus, j->cpus, &both)) < 0)
				return r;
			if (*both)
				return error_set(-EBUSY,
						 "CPUs %s are bound to running job %u: drain it "
						 "first",
						 both, j->id);
		}
		set_and(&w->devices, &j->devices, &common);
		if (!set_empty(&common)) {
			_cleanup_free_ char *d = set_name(in->node, &common);

			return error_set(-EBUSY,
					 "devices %s are held by running job %u: drain it "
					 "first",
					 d ? d : "?", j->id);
		}
	}
	if (!cpus_empty(w->cpus)) {
		/* What the rest of the node keeps: online minus SpecCPUs minus every reservation.
		 */
		if ((r = cpus_bits(in->online, &left, &nleft)) < 0)
			return r;
		for (size_t k = 0; k <= in->n_others; k++) {
			_cleanup_free_ uint64_t *b = NULL;
			size_t nb = 0;
			const char *c = k < in->n_others ? in->others[k].cpus : in->spec_cpus;

			if ((r = cpus_bits(c, &b, &nb)) < 0)
				return r;
			for (size_t i = 0; i < nb && i < nleft; i++)
				left[i] &= ~b[i];
		}
		for (size_t i = 0; i < nleft; i++) {
			left[i] &= ~(i < nmine ? mine[i] : 0);
			any_left |= left[i] != 0;
		}
		if (!any_left)
			return error_set(
			    -EINVAL, "CPUs %s would leave no CPU to the rest of the node", w->cpus);
	}
	if (w->mem_bytes && mem > in->mem_avail)
		return error_set(-EINVAL,
				 "memory: %" PRIu64
				 " bytes reserved in all would exceed the %" PRIu64
				 " the node has for jobs (RAM - MemSpecLimit)",
				 mem, in->mem_avail);
	return 0;
}

/* ---- reading a reservation ---- */

static int xget(const char *dir, const char *key, char **ret)
{
	int r = cgfs_xattr_get(dir, key, ret);

	if (r == -ENODATA) {
		*ret = NULL;
		return 0;
	}
	return r;
}

int resv_users_parse(const char *s, uid_t **ret, size_t *ret_n)
{
	_cleanup_strv_free_ char **v = NULL;
	_cleanup_free_ uid_t *u = NULL;
	size_t n = 0;

	*ret = NULL;
	*ret_n = 0;
	if (!s || !*s)
		return 0;
	if (!(v = strv_split(s, ",")) || !(u = calloc(strv_length(v) + 1, sizeof(*u))))
		return -ENOMEM;
	for (char **p = v; *p; p++) {
		uint64_t x;

		/* Digits only, as written (strtoul would take blanks and a sign); -1 is no uid. */
		if (parse_u64(*p, UINT32_MAX - 1, &x) < 0)
			return -EBADMSG;
		u[n++] = (uid_t)x;
	}
	*ret = TAKE_PTR(u);
	*ret_n = n;
	return 0;
}

/* trusted.jobcg.mem as spec_write() wrote it, absent: none. */
static int mem_parse(const char *dir, const char *mem, uint64_t *ret)
{
	if (!mem) {
		*ret = 0;
		return 0;
	}
	if (parse_u64(mem, UINT64_MAX, ret) < 0)
		return error_set(-EBADMSG, "%s: " X_MEM " '%s' is not a number", dir, mem);
	return 0;
}

static int resv_jobs(const char *dir, uint32_t **ret, size_t *ret_n)
{
	_cleanup_strv_free_ char **kids = NULL;
	_cleanup_free_ uint32_t *ids = NULL;
	size_t n = 0;
	int r = cgfs_children(dir, &kids);

	if (r < 0)
		return r;
	if (!(ids = calloc(strv_length(kids) + 1, sizeof(*ids))))
		return -ENOMEM;
	for (char **k = kids; *k; k++) {
		uint32_t id;

		if (tree_parse_job_dirname(*k, &id) == 0)
			ids[n++] = id;
	}
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			uint32_t t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	*ret = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}

JOBCG_EXPORT void jobcg_resv_info_free(struct jobcg_resv_info *i)
{
	if (!i)
		return;
	free(i->name);
	free(i->path);
	free(i->devices);
	free(i->cpus);
	free(i->users);
	free(i->jobs);
	free(i);
}

static void infop(struct jobcg_resv_info **i)
{
	jobcg_resv_info_free(*i);
}

/* What a lenient read (delete, gc) could not take from a reservation's xattrs. */
enum {
	BAD_DEVICES = 1u << 0,
	BAD_CPUS = 1u << 1,
	BAD_MEM = 1u << 2,
};

/* Strict: the first xattr that cannot be read or does not parse is the error. LENIENT (delete,
 * gc): each is logged and read as absent (a mark as present), *ret_bad says which parts of the
 * spec are unknown, so that one damaged value never keeps a reservation from going. */
static int info_read_opt(struct jobcg_ctx *ctx, const char *name, bool lenient,
			 struct jobcg_resv_info **ret, unsigned *ret_bad)
{
	static const char *const keys[] = {JOBCG_GRES_XATTR, X_CPUS,	X_MEM,	   X_ISOLATED,
					   X_USERS,	     X_CREATED, X_REMOVING};
	_cleanup_(infop) struct jobcg_resv_info *i = calloc(1, sizeof(*i));
	char *val[ELEMENTSOF(keys)] = {};
	bool unreadable[ELEMENTSOF(keys)] = {};
	unsigned bad = 0;
	int r = 0;

	if (!i)
		return -ENOMEM;
	if ((r = name_check(name)) < 0)
		return r;
	if (!(i->name = strdup(name)) || !(i->path = tree_resv_dir(ctx, name)))
		return -ENOMEM;
	if (access(i->path, F_OK) < 0)
		return error_set(-ENOENT, "no reservation %s", name);
	for (size_t k = 0; k < ELEMENTSOF(keys) && r >= 0; k++) {
		r = xget(i->path, keys[k], &val[k]);
		if (r < 0 && lenient && r != -ENOENT && r != -ENOMEM) {
			log_warning("reservation %s: %s", name, jobcg_last_error()->message);
			jobcg_error_clear();
			unreadable[k] = true;
			r = 0;
		}
	}
	if (r < 0)
		goto out;
	i->devices = TAKE_PTR(val[0]);
	i->cpus = TAKE_PTR(val[1]);
	if ((!i->devices && !(i->devices = strdup(""))) || (!i->cpus && !(i->cpus = strdup("")))) {
		r = -ENOMEM;
		goto out;
	}
	if (unreadable[0])
		bad |= BAD_DEVICES;
	if (*i->cpus && lenient) {
		_cleanup_free_ uint64_t *bits = NULL;
		size_t words = 0;

		if (jobcg_parse_cpulist(i->cpus, &bits, &words) < 0) {
			log_warning("reservation %s: %s: " X_CPUS " '%s' is not a CPU list", name,
				    i->path, i->cpus);
			jobcg_error_clear();
			i->cpus[0] = '\0';
			unreadable[1] = true;
		}
	}
	if (unreadable[1]) {
		_cleanup_free_ char *cur = NULL;

		/* What the partition holds is what its release must give back. */
		bad |= BAD_CPUS;
		if (cgfs_read_optional(i->path, "cpuset.cpus", &cur) == 0 && *strstrip(cur)) {
			free(i->cpus);
			if (!(i->cpus = strdup(strstrip(cur)))) {
				r = -ENOMEM;
				goto out;
			}
		}
		jobcg_error_clear();
	}
	if ((r = mem_parse(i->path, val[2], &i->mem_bytes)) < 0) {
		if (!lenient)
			goto out;
		log_warning("reservation %s: %s", name, jobcg_last_error()->message);
		jobcg_error_clear();
		unreadable[2] = true;
		r = 0;
	}
	if (unreadable[2])
		bad |= BAD_MEM;
	i->isolated = val[3] && streq(val[3], "1");
	if (resv_users_parse(val[4], &i->users, &i->n_users) < 0) {
		r = error_set(-EBADMSG, "%s: " X_USERS " '%s' is not a list of user ids", i->path,
			      val[4]);
		if (!lenient)
			goto out;
		log_warning("reservation %s: %s", name, jobcg_last_error()->message);
		jobcg_error_clear();
		r = 0;
	}
	if (val[5]) {
		uint64_t c;

		if (parse_u64(val[5], INT64_MAX, &c) < 0) {
			r = error_set(-EBADMSG, "%s: " X_CREATED " '%s' is not a number", i->path,
				      val[5]);
			if (!lenient)
				goto out;
			log_warning("reservation %s: %s", name, jobcg_last_error()->message);
			jobcg_error_clear();
			r = 0;
			c = 1;
		}
		/* 0 means "not completely created": a mark that says 0 is still a mark. */
		i->created_sec = c ? (int64_t)c : 1;
	} else if (unreadable[5])
		i->created_sec = 1;
	i->removing = val[6] != NULL || unreadable[6];
	if ((r = resv_jobs(i->path, &i->jobs, &i->n_jobs)) < 0)
		goto out;
	*ret = TAKE_PTR(i);
	if (ret_bad)
		*ret_bad = bad;
out:
	for (size_t k = 0; k < ELEMENTSOF(keys); k++)
		free(val[k]);
	return r;
}

static int info_read(struct jobcg_ctx *ctx, const char *name, struct jobcg_resv_info **ret)
{
	return info_read_opt(ctx, name, false, ret, NULL);
}

JOBCG_EXPORT int jobcg_resv_info_get(struct jobcg_ctx *ctx, const char *name,
				     struct jobcg_resv_info **ret)
{
	return info_read(ctx, name, ret);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

JOBCG_EXPORT int jobcg_resv_list(struct jobcg_ctx *ctx, char ***ret_names)
{
	char **names = NULL;
	int r = tree_resv_names(ctx, &names);

	if (r < 0)
		return r;
	qsort(names, strv_length(names), sizeof(char *), cmp_str);
	*ret_names = names;
	return 0;
}

static char *jobs_text(const uint32_t *ids, size_t n)
{
	char *out = strdup("");

	for (size_t i = 0; out && i < n && i < 16; i++) {
		char *t = strdup_printf("%s%s%u", out, i ? ", " : "", ids[i]);
		free(out);
		out = t;
	}
	if (out && n > 16) {
		char *t = strdup_printf("%s and %zu more", out, n - 16);
		free(out);
		out = t;
	}
	return out;
}

/* ---- device part ---- */

struct resv_devs {
	struct jobcg_gres_node *node; /* NULL when gres.conf has no device */
	struct jobcg_gres_set set;
	struct jobcg_devrule *files, *grant; /* the reserved files; files + companions */
	size_t nfiles, ngrant;
};

static void devs_done(struct resv_devs *d)
{
	jobcg_gres_node_free(d->node);
	free(d->files);
	free(d->grant);
	*d = (struct resv_devs){};
}

static int devs_load(struct jobcg_ctx *ctx, const char *devices, struct resv_devs *ret)
{
	struct resv_devs d = {};
	int r;

	if (!devices || !*devices) {
		*ret = d;
		return 0;
	}
	if ((r = gres_node_open(ctx, &d.node)) < 0)
		return r;
	if ((r = gres_set_parse_as(d.node, devices, "devices", &d.set)) < 0) {
		devs_done(&d);
		return r;
	}
	if ((r = jobcg_gres_file_devrules(d.node, &d.set, &d.files, &d.nfiles)) < 0 ||
	    (r = jobcg_gres_devrules(d.node, &d.set, &d.grant, &d.ngrant)) < 0) {
		devs_done(&d);
		return r;
	}
	*ret = d;
	return 0;
}

/* Bound the reservation to its devices and take them out of the pool, in the kernel. */
static int devs_apply(struct jobcg_ctx *ctx, const char *dir, struct resv_devs *d)
{
	struct jobcg_devpolicy *p = NULL;
	int r;

	if (!d->node || !gres_constrained(ctx, d->node))
		return 0;
	if ((r = gres_ctx_policy(ctx, d->node, false, &p)) < 0)
		return r;
	if ((r = devpolicy_grant_bound(p, dir, d->grant, d->ngrant)) < 0)
		return r;
	test_pause("resv-create-before-reserve");
	return devpolicy_reserve(p, dir, d->files, d->nfiles);
}

/* The cgroup ids of every reservation directory there is now (under the node lock). */
static int live_ids(struct jobcg_ctx *ctx, uint64_t **ret, size_t *ret_n)
{
	_cleanup_strv_free_ char **names = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0;
	int r;

	if ((r = tree_resv_names(ctx, &names)) < 0)
		return r;
	if (!(ids = calloc(strv_length(names) + 1, sizeof(*ids))))
		return -ENOMEM;
	for (char **k = names; *k; k++) {
		_cleanup_free_ char *dir = tree_resv_dir(ctx, *k);

		if (!dir)
			return -ENOMEM;
		r = jobcg_cgroup_id(dir, &ids[n]);
		if (r == -ENOENT) {
			jobcg_error_clear();
			continue;
		}
		if (r < 0)
			return r;
		n++;
	}
	*ret = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}

static bool id_in(const uint64_t *ids, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* Whether entry V[K] (a flag) has an owner entry in V whose reservation is alive. */
static bool flag_owned(const struct devpolicy_reserved *v, size_t nv, size_t k,
		       const uint64_t *live, size_t nlive)
{
	for (size_t j = 0; j < nv; j++)
		if (v[j].owner && v[j].type == v[k].type && v[j].major == v[k].major &&
		    v[j].minor == v[k].minor && id_in(live, nlive, v[j].owner))
			return true;
	return false;
}

/*
 * The device guard's entries that no live reservation holds: the owner entries of reservation
 * cgroups that are gone (removed by hand, or a deletion that died), then the "reserved" flags of
 * devices left with no live owner. A flag that a live reservation owns is never touched, so a
 * stale owner of the same device cannot take a live reservation's guard with it. *removed
 * counts the gone reservations whose entries were dropped (one each, however many devices).
 */
static int gc_entries(struct jobcg_ctx *ctx, unsigned *removed)
{
	_cleanup_free_ struct devpolicy_reserved *v = NULL;
	_cleanup_free_ uint64_t *live = NULL;
	struct jobcg_devpolicy *p = NULL;
	size_t nv = 0, nlive = 0;
	int r = gres_ctx_policy(ctx, NULL, true, &p);

	if (r == -ENOENT) {
		jobcg_error_clear();
		return 0;
	}
	if (r < 0)
		return r;
	if ((r = devpolicy_reserved_list(p, &v, &nv)) < 0 || nv == 0)
		return r;
	if ((r = live_ids(ctx, &live, &nlive)) < 0)
		return r;
	for (size_t k = 0; k < nv; k++) {
		struct jobcg_devrule f = {.type = v[k].type,
					  .major = v[k].major,
					  .minor = v[k].minor,
					  .access = JOBCG_DEV_ACC_ALL,
					  .allow = true};

		if (v[k].owner && !id_in(live, nlive, v[k].owner)) {
			bool counted = false;

			log_info("device %c %u:%u: dropping the entry of reservation cgroup id "
				 "%" PRIu64 ", which is gone",
				 f.type, f.major, f.minor, v[k].owner);
			if ((r = devpolicy_unreserve_owner(p, v[k].owner, &f, 1)) < 0)
				return r;
			for (size_t j = 0; j < k && !counted; j++)
				counted = v[j].owner == v[k].owner;
			if (removed && !counted)
				(*removed)++;
		} else if (!v[k].owner && !flag_owned(v, nv, k, live, nlive)) {
			log_info("gc: device %c %u:%u reserved by no reservation: released", f.type,
				 f.major, f.minor);
			if ((r = devpolicy_unreserve_flag(p, &f, 1)) < 0)
				return r;
		}
	}
	return 0;
}

static bool file_named(const struct resv_devs *d, const struct devpolicy_reserved *e)
{
	for (size_t k = 0; k < d->nfiles; k++)
		if (d->files[k].type == e->type && d->files[k].major == e->major &&
		    d->files[k].minor == e->minor)
			return true;
	return false;
}

/*
 * Drop the owner entries of reservation ID for device files D does not name (D NULL: every one
 * of them): a spec edited by hand, or a gres.conf whose indices moved, leaves the guard on files
 * the reservation no longer names, which no job outside could then open, and which its deletion
 * (undoing only what the spec names) would leave behind. *ret_n counts them.
 */
static int drop_unnamed(struct jobcg_devpolicy *p, uint64_t id, const struct resv_devs *d,
			unsigned *ret_n)
{
	_cleanup_free_ struct devpolicy_reserved *v = NULL;
	size_t nv = 0;
	int r;

	*ret_n = 0;
	if (!id || (r = devpolicy_reserved_list(p, &v, &nv)) < 0)
		return id ? r : 0;
	for (size_t k = 0; k < nv; k++) {
		struct jobcg_devrule f = {.type = v[k].type,
					  .major = v[k].major,
					  .minor = v[k].minor,
					  .access = JOBCG_DEV_ACC_ALL,
					  .allow = true};

		if (v[k].owner != id || (d && file_named(d, &v[k])))
			continue;
		if ((r = devpolicy_unreserve_owner(p, id, &f, 1)) < 0)
			return r;
		(*ret_n)++;
	}
	return 0;
}

/* Undo devs_apply; fine on a half-applied or never-applied reservation. Only this reservation's
 * owner entries go (every one, whatever its spec names now); a device's "reserved" flag goes with
 * them only when no live reservation owns the device any more (gc_entries). */
static int devs_release(struct jobcg_ctx *ctx, const char *dir, struct resv_devs *d)
{
	struct jobcg_devpolicy *p = NULL;
	uint64_t id = 0;
	unsigned dropped = 0;
	int r = gres_ctx_policy(ctx, NULL, true, &p);

	if (r == -ENOENT) {
		jobcg_error_clear();
		return 0; /* no node program: nothing was written */
	}
	if (r < 0)
		return r;
	if (access(dir, F_OK) == 0 && (r = jobcg_cgroup_id(dir, &id)) < 0)
		return r;
	if (d->node && (r = devpolicy_unreserve_owner(p, id, d->files, d->nfiles)) < 0)
		return r;
	if ((r = drop_unnamed(p, id, NULL, &dropped)) < 0)
		return r;
	if ((d->node || dropped) && (r = gc_entries(ctx, NULL)) < 0)
		return r;
	if (id && access(dir, F_OK) == 0)
		return jobcg_devpolicy_revoke(p, dir);
	return 0;
}

/* ---- create ---- */

struct resv_view {
	struct jobcg_resv_rules_entry *others;
	char **other_cpus, **other_names;
	size_t n_others;
	struct jobcg_resv_rules_job *jobs;
	char **job_cpus;
	size_t n_jobs;
	struct jobcg_gres_set used; /* every device held anywhere (reservations included) */
};

static void view_done(struct resv_view *v)
{
	free(v->others);
	strv_free(v->other_cpus);
	strv_free(v->other_names);
	free(v->jobs);
	strv_free(v->job_cpus);
	*v = (struct resv_view){};
}

static int strv_append(char ***v, size_t *n, char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(char *));

	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[*n] = s;
	nv[*n + 1] = NULL;
	*v = nv;
	return 0;
}

/*
 * The devices a reservation or job at DIR still holds, from its stored list: fail closed. A
 * device gres.conf no longer has is left out with a warning, every one still known stays held
 * (an admin who takes a failed GPU out of gres.conf must not free the others); a value that is
 * no device list at all is an error naming the cgroup.
 */
static int held_parse(const struct jobcg_gres_node *n, const char *dir, const char *val,
		      struct jobcg_gres_set *ret)
{
	bool dropped = false;
	int r = gres_set_parse_known(n, val, ret, &dropped);

	if (r < 0) {
		jobcg_error_prefix("%s: " JOBCG_GRES_XATTR, dir);
		return r;
	}
	if (dropped)
		log_warning("%s: " JOBCG_GRES_XATTR " '%s' names devices gres.conf no longer has: "
			    "the others still count as held",
			    dir, val);
	return 0;
}

/* What exists now: every reservation (complete or not) and the jobs outside reservations. */
static int view_read(struct jobcg_ctx *ctx, const struct jobcg_gres_node *n, const char *skip,
		     struct resv_view *ret)
{
	_cleanup_strv_free_ char **names = NULL, **kids = NULL;
	struct resv_view v = {};
	int r;

	if ((r = tree_resv_names(ctx, &names)) < 0)
		return r;
	if (!(v.others = calloc(strv_length(names) + 1, sizeof(*v.others))))
		return -ENOMEM;
	for (char **k = names; *k; k++) {
		_cleanup_(infop) struct jobcg_resv_info *i = NULL;
		struct jobcg_resv_rules_entry *e;

		if (skip && streq(*k, skip))
			continue;
		if ((r = info_read(ctx, *k, &i)) < 0)
			goto fail;
		e = &v.others[v.n_others];
		if ((r = strv_append(&v.other_cpus, &v.n_others, i->cpus)) < 0)
			goto fail;
		i->cpus = NULL;
		if ((r = strv_append(&v.other_names, &v.n_others, i->name)) < 0)
			goto fail;
		i->name = NULL;
		e->cpus = v.other_cpus[v.n_others];
		e->name = v.other_names[v.n_others];
		e->mem_bytes = i->mem_bytes;
		if (n && *i->devices && (r = held_parse(n, i->path, i->devices, &e->devices)) < 0)
			goto fail;
		v.n_others++;
	}
	r = cgfs_children(jobcg_ctx_root(ctx), &kids);
	if (r < 0 && r != -ENOENT)
		goto fail;
	if (!(v.jobs = calloc(strv_length(kids) + 1, sizeof(*v.jobs)))) {
		r = -ENOMEM;
		goto fail;
	}
	for (char **k = kids; kids && *k; k++) {
		_cleanup_free_ char *jdir = NULL, *cpus = NULL;
		struct jobcg_resv_rules_job *j = &v.jobs[v.n_jobs];
		uint32_t id;

		if (tree_parse_job_dirname(*k, &id) < 0)
			continue;
		if (!(jdir = cgfs_path(jobcg_ctx_root(ctx), *k))) {
			r = -ENOMEM;
			goto fail;
		}
		/* Unreadable (not absent): refused, since what it holds is unknown. */
		r = xget(jdir, X_CPUS, &cpus);
		if (r == -ENOENT) /* released meanwhile */
			continue;
		if (r < 0)
			goto fail;
		j->id = id;
		if (n) {
			_cleanup_free_ char *held = NULL;

			r = xget(jdir, JOBCG_GRES_XATTR, &held);
			if (r == -ENOENT)
				continue;
			if (r < 0)
				goto fail;
			if (held && *held && (r = held_parse(n, jdir, held, &j->devices)) < 0)
				goto fail;
		}
		if ((r = strv_append(&v.job_cpus, &v.n_jobs, cpus ? TAKE_PTR(cpus) : strdup(""))) <
		    0)
			goto fail;
		j->cpus = *v.job_cpus[v.n_jobs] ? v.job_cpus[v.n_jobs] : NULL;
		v.n_jobs++;
	}
	if (n) {
		_cleanup_close_ int rootfd =
		    open(jobcg_ctx_root(ctx), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (rootfd < 0) {
			r = error_set(negative_errno(), "cannot open %s: %s", jobcg_ctx_root(ctx),
				      strerror(errno));
			goto fail;
		}
		if ((r = jobcg_gres_scan(n, rootfd, NULL, NULL, NULL, &v.used)) < 0)
			goto fail;
	}
	*ret = v;
	return 0;
fail:
	view_done(&v);
	return r;
}

int resv_users_text(const uid_t *u, size_t n, char **ret)
{
	/* Linear: a list may hold thousands of users. 11 bytes: a uid and its comma. */
	char *out = malloc(n * 11 + 1), *p = out;

	if (!out)
		return -ENOMEM;
	*p = '\0';
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%u", i ? "," : "", (unsigned)u[i]);
	*ret = out;
	return 0;
}

static int spec_write(const char *dir, const struct jobcg_resv_spec *s, const char *devices)
{
	_cleanup_free_ char *users = NULL;
	char buf[32];
	int r;

	/* Devices first: a crash after this leaves them claimed (never shared) until gc. */
	if (devices && *devices && (r = cgfs_xattr_set(dir, JOBCG_GRES_XATTR, devices)) < 0)
		return r;
	if (!cpus_empty(s->cpus) && (r = cgfs_xattr_set(dir, X_CPUS, s->cpus)) < 0)
		return r;
	if (s->mem_bytes) {
		snprintf(buf, sizeof(buf), "%" PRIu64, s->mem_bytes);
		if ((r = cgfs_xattr_set(dir, X_MEM, buf)) < 0)
			return r;
	}
	if (s->isolated && (r = cgfs_xattr_set(dir, X_ISOLATED, "1")) < 0)
		return r;
	if (s->n_users) {
		if ((r = resv_users_text(s->users, s->n_users, &users)) < 0 ||
		    (r = cgfs_xattr_set(dir, X_USERS, users)) < 0)
			return r;
	}
	return 0;
}

/* Pick the devices of a --gres count among those nobody holds. */
static int devices_pick(const struct jobcg_gres_node *n, const char *gres,
			const struct jobcg_gres_set *used, char **ret)
{
	struct jobcg_gres_request *req = NULL;
	struct jobcg_gres_set avail, set;
	int r = jobcg_gres_request_parse(gres, &req);

	if (r < 0) {
		jobcg_error_prefix("--gres");
		return r;
	}
	jobcg_gres_node_all(n, NULL, &avail);
	for (size_t i = 0; i < ELEMENTSOF(avail.w); i++)
		avail.w[i] &= ~used->w[i];
	r = jobcg_gres_select(n, req, &avail, NULL, 0, &set);
	jobcg_gres_request_free(req);
	if (r < 0) {
		jobcg_error_prefix("--gres %s (devices held by running jobs and other reservations "
				   "are not free)",
				   gres);
		return r;
	}
	return jobcg_gres_set_format(n, &set, ret);
}

/* memory.max of the reservation at what it reserves: its jobs together, whatever each one's
 * own cap, never take more (other reservations' memory, or what jobs outside were left). */
static int mem_cap(const char *dir, uint64_t bytes)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, bytes);
	return cgfs_write(dir, "memory.max", buf);
}

static int cpus_probe(struct jobcg_ctx *ctx, const char *dir)
{
	_cleanup_free_ char *reason = NULL;
	enum cpupart_kind kind = CPUPART_UNSUPPORTED;
	int r = cpupart_probe(ctx, dir, &kind, &reason);

	if (r < 0)
		return r;
	if (kind == CPUPART_UNSUPPORTED)
		return error_set(-EOPNOTSUPP,
				 "--cpus: no CPU partition can be made here: %s (a reservation "
				 "without --cpus still reserves devices and memory)",
				 reason ? reason : "cpuset partitions are not available");
	return 0;
}

static uint64_t mem_avail(struct jobcg_ctx *ctx)
{
	uint64_t ram = 0, cap = 0;

	if (jobcg_node_ram(&ram) < 0)
		return 0;
	if (jobcg_spec_job_ram(&ctx->conf->cgroup, ram, &cap) < 0)
		return ram;
	return cap;
}

static int verify_once(struct jobcg_ctx *ctx, const struct jobcg_resv_info *i,
		       struct jobcg_resv_status *st);
static void statusp(struct jobcg_resv_status **s);

/* What create made verifies VALID (read as if already marked created). */
static int created_check(struct jobcg_ctx *ctx, const char *name)
{
	_cleanup_(infop) struct jobcg_resv_info *i = NULL;
	_cleanup_(statusp) struct jobcg_resv_status *st = calloc(1, sizeof(*st));
	_cleanup_free_ char *all = NULL;
	int r;

	if (!st)
		return -ENOMEM;
	if ((r = info_read(ctx, name, &i)) < 0)
		return r;
	i->created_sec = 1;
	if ((r = verify_once(ctx, i, st)) < 0)
		return r;
	if (st->valid)
		return 0;
	for (char **p = st->problems; p && *p; p++) {
		char *t = strdup_printf("%s%s%s", all ? all : "", all ? "; " : "", *p);

		if (!t)
			return -ENOMEM;
		free(all);
		all = t;
	}
	return error_set(-EIO, "reservation %s would start DEGRADED (%s): nothing was made", name,
			 all ? all : "?");
}

static int create_locked(struct jobcg_ctx *ctx, const struct jobcg_resv_spec *s)
{
	_cleanup_(node_freep) struct jobcg_gres_node *n = NULL;
	_cleanup_free_ char *dir = NULL, *devices = NULL, *online = NULL, *spec_cpus = NULL;
	struct resv_view v = {};
	struct resv_devs d = {};
	struct jobcg_resv_rules rules = {};
	bool made = false, cpus_done = false, mem_done = false;
	char buf[32];
	int r;

	if ((r = jobcg_ctx_ensure_tree(ctx)) < 0)
		return r;
	if (!ctx->info->xattr.supported)
		return error_set(-EOPNOTSUPP, "reservations keep their state in trusted.* xattrs, "
					      "which this cgroup file system refuses");
	if (!(dir = tree_resv_dir(ctx, s->name)))
		return -ENOMEM;
	if (access(dir, F_OK) == 0) {
		_cleanup_free_ char *created = NULL, *removing = NULL;

		/* Under the node lock: without the mark, or marked removing, its maker died. */
		(void)xget(dir, X_CREATED, &created);
		(void)xget(dir, X_REMOVING, &removing);
		jobcg_error_clear();
		if (!created || removing)
			return error_set(-EEXIST,
					 "reservation %s already exists (%s), %s: 'jobcg gc' "
					 "removes it",
					 s->name, dir, removing ? "half deleted" : "half made");
		return error_set(-EEXIST, "reservation %s already exists (%s)", s->name, dir);
	}
	if ((s->devices && *s->devices) || (s->gres && *s->gres)) {
		if ((r = gres_node_open(ctx, &n)) < 0)
			return r;
		if (jobcg_gres_node_count(n) == 0)
			return error_set(-EINVAL, "devices asked for, but gres.conf names none");
	}
	if ((r = view_read(ctx, n, NULL, &v)) < 0)
		return r;
	if (s->devices && *s->devices) {
		if ((r = gres_set_parse_as(n, s->devices, "--devices", &rules.want.devices)) < 0)
			goto out;
		if ((r = jobcg_gres_set_format(n, &rules.want.devices, &devices)) < 0)
			goto out;
	} else if (s->gres && *s->gres) {
		if ((r = devices_pick(n, s->gres, &v.used, &devices)) < 0 ||
		    (r = jobcg_gres_set_parse(n, devices, &rules.want.devices)) < 0)
			goto out;
	}
	if ((r = jobcg_online_cpus(&online)) < 0)
		goto out;
	if (jobcg_spec_cpus(&ctx->conf->cgroup, online, &spec_cpus) < 0)
		spec_cpus = NULL;
	rules.want.name = s->name;
	rules.want.cpus = s->cpus;
	rules.want.mem_bytes = s->mem_bytes;
	rules.others = v.others;
	rules.n_others = v.n_others;
	rules.jobs = v.jobs;
	rules.n_jobs = v.n_jobs;
	rules.online = online;
	rules.spec_cpus = spec_cpus;
	rules.mem_avail = s->mem_bytes ? mem_avail(ctx) : 0;
	rules.node = n;
	if ((r = jobcg_resv_rules_check(&rules)) < 0)
		goto out;
	if ((r = devs_load(ctx, devices, &d)) < 0)
		goto out;
	/* The stale entries of a reservation removed behind jobcg's back would share our devices'
	 * guard (DEGRADED from the start, and a gc that took the guard with them). */
	if (d.node && (r = gc_entries(ctx, NULL)) < 0)
		goto out;

	/* Checked: now the kernel. Everything below is undone on failure. */
	if ((r = cgfs_mkdir(dir, false)) < 0)
		goto out;
	made = true;
	test_pause("resv-create-after-mkdir");
	if ((r = spec_write(dir, s, devices)) < 0 || (r = cgfs_enable(dir, ctx->want, NULL)) < 0)
		goto undo;
	/* The probe reads the cgroup itself (its controllers, its ancestors): after mkdir, before
	 * anything is reserved; a refusal removes the directory again. */
	if (!cpus_empty(s->cpus) && (r = cpus_probe(ctx, dir)) < 0)
		goto undo;
	if ((r = devs_apply(ctx, dir, &d)) < 0)
		goto undo;
	test_pause("resv-create-before-cpus");
	if (!cpus_empty(s->cpus)) {
		if ((r = cpupart_apply(ctx, dir, s->cpus, s->isolated)) < 0)
			goto undo;
		cpus_done = true;
	}
	if (s->mem_bytes) {
		if ((r = memresv_apply(ctx, dir, s->mem_bytes)) < 0)
			goto undo;
		mem_done = true;
		if ((r = mem_cap(dir, s->mem_bytes)) < 0)
			goto undo;
	}
	test_pause("resv-create-before-mark");
	/* Read back as verify reads it, before the mark: a reservation that would start DEGRADED
	 * is not made at all (and a crash here still leaves it half-made, for gc). */
	if ((r = created_check(ctx, s->name)) < 0)
		goto undo;
	snprintf(buf, sizeof(buf), "%lld", (long long)time(NULL));
	if ((r = cgfs_xattr_set(dir, X_CREATED, buf)) < 0)
		goto undo;
	log_info("created reservation %s at %s (devices '%s', CPUs '%s', memory %" PRIu64 ")",
		 s->name, dir, devices ? devices : "", s->cpus ? s->cpus : "", s->mem_bytes);
	r = 0;
	goto out;
undo : {
	struct jobcg_error saved = *jobcg_last_error();

	if (mem_done && memresv_release(ctx, dir, s->mem_bytes) < 0)
		log_warning("rollback: memory.min: %s", jobcg_last_error()->message);
	if (cpus_done && cpupart_release(ctx, dir, s->cpus) < 0)
		log_warning("rollback: CPU partition: %s", jobcg_last_error()->message);
	if (devs_release(ctx, dir, &d) < 0)
		log_warning("rollback: device policy: %s", jobcg_last_error()->message);
	if (made && cgfs_rmdir(dir) < 0)
		log_warning("rollback: %s", jobcg_last_error()->message);
	jobcg_error_restore(&saved);
}
out:
	devs_done(&d);
	view_done(&v);
	return r;
}

static int cmp_uid(const void *a, const void *b)
{
	uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * SPEC as it is stored: users sorted without repeats, CPUs as their canonical list, so that what
 * is read back is what was meant however it was written. A value the kernel could not store
 * (an xattr holds at most XATTR_SIZE_MAX bytes) is refused here, before anything exists.
 */
static int spec_normalize(const struct jobcg_resv_spec *spec, struct jobcg_resv_spec *ret,
			  uid_t **ret_users, char **ret_cpus)
{
	_cleanup_free_ uid_t *u = NULL;
	_cleanup_free_ char *text = NULL, *cpus = NULL;
	size_t n = 0;
	int r;

	*ret = *spec;
	if (spec->n_users) {
		if (!(u = calloc(spec->n_users, sizeof(*u))))
			return -ENOMEM;
		memcpy(u, spec->users, spec->n_users * sizeof(*u));
		qsort(u, spec->n_users, sizeof(*u), cmp_uid);
		for (size_t k = 0; k < spec->n_users; k++)
			if (n == 0 || u[n - 1] != u[k])
				u[n++] = u[k];
		if ((r = resv_users_text(u, n, &text)) < 0)
			return r;
		if (strlen(text) > XATTR_SIZE_MAX)
			return error_set(-E2BIG,
					 "--users: %zu users make a list of %zu bytes, more than "
					 "the %d a cgroup attribute holds",
					 n, strlen(text), XATTR_SIZE_MAX);
		ret->users = u;
		ret->n_users = n;
	}
	if (!cpus_empty(spec->cpus)) {
		_cleanup_free_ uint64_t *bits = NULL;
		size_t words = 0;

		if ((r = jobcg_parse_cpulist(spec->cpus, &bits, &words)) < 0)
			return error_set(r, "--cpus '%s': %s", spec->cpus,
					 jobcg_last_error()->message);
		if ((r = jobcg_format_cpulist(bits, words, &cpus)) < 0)
			return r;
		ret->cpus = cpus;
	}
	*ret_users = TAKE_PTR(u);
	*ret_cpus = TAKE_PTR(cpus);
	return 0;
}

/* --devices as written: no empty group or item, no device named twice, in one group or across
 * groups (the set would hide both). */
JOBCG_EXPORT int jobcg_resv_devices_syntax(const char *devices)
{
	const char *g, *end, *p;
	size_t len;

	if (!devices || !*devices)
		return 0;
	for (g = devices;; g = end + 1) {
		size_t glen = strcspn(g, ";"), nlen;
		const char *colon = memchr(g, ':', glen);

		end = g + glen;
		if (glen == 0)
			return error_set(
			    -EINVAL, "--devices '%s': empty group (nothing between ';')", devices);
		if (!colon || colon == g)
			return error_set(-EINVAL,
					 "--devices '%s': '%.*s' is not NAME:INDEX[,INDEX]",
					 devices, (int)glen, g);
		nlen = (size_t)(colon - g);
		for (p = colon + 1;; p += len + 1) {
			unsigned lo, hi, qlo, qhi;

			len = strcspn(p, ",;");
			if (len == 0)
				return error_set(-EINVAL, "--devices '%s': empty item in '%.*s'",
						 devices, (int)glen, g);
			if (gres_index_range(p, len, &lo, &hi) < 0)
				return error_set(
				    -EINVAL,
				    "--devices '%s': '%.*s' is not an index or a range "
				    "(N or N-M, below %d)",
				    devices, (int)len, p, JOBCG_GRES_MAX);
			/* Every earlier item of the same name, in this group or an earlier one. */
			for (const char *h = devices; h <= g; h += strcspn(h, ";") + 1) {
				size_t hlen = strcspn(h, ";");
				const char *hc = memchr(h, ':', hlen),
					   *stop = h == g ? p : h + hlen;

				if (!hc || (size_t)(hc - h) != nlen || strncmp(h, g, nlen) != 0)
					continue;
				for (const char *q = hc + 1; q < stop; q += strcspn(q, ",;") + 1) {
					int bad = gres_index_range(q, strcspn(q, ",;"), &qlo, &qhi);

					if (!bad && qlo <= hi && lo <= qhi)
						return error_set(-EINVAL,
								 "--devices '%s': %.*s %u named "
								 "twice",
								 devices, (int)nlen, g,
								 qlo > lo ? qlo : lo);
				}
			}
			if (p[len] != ',')
				break;
		}
		if (!*end)
			break;
	}
	return 0;
}

/* *ret: --gres asks for no device at all (absent, or every count 0). */
static int gres_none(const char *gres, bool *ret)
{
	struct jobcg_gres_request *req = NULL;
	unsigned total = 0;
	int r;

	*ret = true;
	if (!gres || !*gres)
		return 0;
	if ((r = jobcg_gres_request_parse(gres, &req)) < 0) {
		jobcg_error_prefix("--gres");
		return r;
	}
	for (size_t i = 0; i < req->nitems; i++)
		total += req->items[i].count;
	jobcg_gres_request_free(req);
	*ret = total == 0;
	return 0;
}

/* --mem needs memory.min, which only a memory controller reaching the tree has. */
static int mem_usable(struct jobcg_ctx *ctx, const struct jobcg_resv_spec *s)
{
	_cleanup_free_ char *why = NULL;

	if (!s->mem_bytes || (ctx->info->usable & (1u << JOBCG_CTRL_MEMORY)))
		return 0;
	why = ctx_limitation(ctx, JOBCG_CTRL_MEMORY, "memory reservations (memory.min)");
	return error_set(-EOPNOTSUPP,
			 "--mem: no memory can be reserved here: %s (a reservation without --mem "
			 "still reserves devices and CPUs)",
			 why ? why : "the memory controller does not reach the tree");
}

/* --devices that gres.conf lacks, or a --gres asking more than it has at all. */
static int devices_configured(struct jobcg_ctx *ctx, const struct jobcg_resv_spec *s)
{
	_cleanup_(node_freep) struct jobcg_gres_node *n = NULL;
	struct jobcg_gres_request *req = NULL;
	struct jobcg_gres_set set, all;
	bool none;
	int r;

	if (!(s->devices && *s->devices) && (gres_none(s->gres, &none) < 0 || none))
		return 0;
	if ((r = gres_node_open(ctx, &n)) < 0)
		return r;
	if (jobcg_gres_node_count(n) == 0)
		return error_set(-EINVAL, "devices asked for, but gres.conf names none");
	if (s->devices && *s->devices) {
		return gres_set_parse_as(n, s->devices, "--devices", &set);
	}
	if ((r = jobcg_gres_request_parse(s->gres, &req)) < 0)
		return r;
	jobcg_gres_node_all(n, NULL, &all);
	r = jobcg_gres_select(n, req, &all, NULL, 0, &set);
	jobcg_gres_request_free(req);
	if (r < 0)
		jobcg_error_prefix("--gres %s", s->gres);
	return r;
}

JOBCG_EXPORT int jobcg_resv_create(struct jobcg_ctx *ctx, const struct jobcg_resv_spec *spec)
{
	_cleanup_free_ uid_t *users = NULL;
	_cleanup_free_ char *cpus = NULL;
	struct jobcg_resv_spec s;
	int r;

	bool no_devices;

	if (!spec)
		return error_set(-EINVAL, "no reservation spec");
	if ((r = name_check(spec->name)) < 0 || (r = ctx_refuse_cgroup_broken(ctx)) < 0 ||
	    (r = gres_refuse_broken(ctx)) < 0)
		return r;
	if (spec->devices && *spec->devices && spec->gres && *spec->gres)
		return error_set(-EINVAL, "--devices and --gres: give one of them");
	if ((r = jobcg_resv_devices_syntax(spec->devices)) < 0 ||
	    (r = gres_none(spec->gres, &no_devices)) < 0)
		return r;
	if (!(spec->devices && *spec->devices) && no_devices && cpus_empty(spec->cpus) &&
	    !spec->mem_bytes)
		return error_set(-EINVAL,
				 "reservation %s would hold nothing: give --devices, "
				 "--gres (a count above 0), --cpus or --mem",
				 spec->name);
	if (spec->isolated && cpus_empty(spec->cpus))
		return error_set(-EINVAL, "--isolated needs --cpus");
	if ((r = spec_normalize(spec, &s, &users, &cpus)) < 0)
		return r;
	/* What the configuration alone refuses is refused before the tree is made. */
	if ((r = mem_usable(ctx, &s)) < 0 || (r = devices_configured(ctx, &s)) < 0)
		return r;
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	r = create_locked(ctx, &s);
	jobcg_ctx_unlock(ctx);
	return r;
}

/* ---- delete ---- */

/* Whether DIR has memory.min (the memory controller enabled for it) to give back. */
static bool has_memory_min(const char *dir)
{
	_cleanup_free_ char *p = cgfs_path(dir, "memory.min");

	return p && access(p, F_OK) == 0;
}

/* What would keep DIR from being removed, other than jobs: a cgroup made by hand below it, or
 * processes in it. Refused naming them, before anything is changed. */
static int stay_check(const char *name, const char *dir)
{
	_cleanup_strv_free_ char **kids = NULL;
	_cleanup_free_ pid_t *pids = NULL;
	_cleanup_free_ char *list = strdup("");
	size_t np = 0;
	int r;

	if (!list)
		return -ENOMEM;
	if ((r = cgfs_children(dir, &kids)) < 0)
		return r;
	if (kids[0])
		return error_set(-EBUSY,
				 "reservation %s is not empty: %s/%s is a cgroup that is no job "
				 "(remove it first)",
				 name, dir, kids[0]);
	if ((r = cgfs_pids(dir, false, &pids, &np)) < 0)
		return r;
	if (!np)
		return 0;
	for (size_t k = 0; k < np && k < 16; k++) {
		char *t = strdup_printf("%s%s%d", list, k ? " " : "", (int)pids[k]);

		if (!t)
			return -ENOMEM;
		free(list);
		list = t;
	}
	return error_set(-EBUSY,
			 "reservation %s is not empty: process%s %s%s in %s (move them out or end "
			 "them first)",
			 name, np > 1 ? "es" : "", list, np > 16 ? " ..." : "", dir);
}

/* FORCE (gc): a half-made or half-deleted reservation, which no job can have entered. A spec
 * value that cannot be read or parsed does not stop the removal (it is logged): what it named is
 * released from what the kernel holds instead (the partition's cpuset.cpus, memory.min down the
 * ancestors, the policy map's entries of no reservation). */
static int remove_locked(struct jobcg_ctx *ctx, const char *name, bool force)
{
	_cleanup_(infop) struct jobcg_resv_info *i = NULL;
	_cleanup_free_ char *me = NULL;
	struct resv_devs d = {};
	bool devs_unknown;
	unsigned bad = 0, swept = 0;
	int r;

	if ((r = info_read_opt(ctx, name, true, &i, &bad)) < 0)
		return r;
	if (i->n_jobs) {
		_cleanup_free_ char *jobs = jobs_text(i->jobs, i->n_jobs);

		return error_set(-EBUSY, "reservation %s is not empty: job%s %s inside%s", name,
				 i->n_jobs > 1 ? "s" : "", jobs ? jobs : "?",
				 force ? "" : " (release them first)");
	}
	/* Anything else in it would fail the rmdir at the end, after everything is released. */
	if ((r = stay_check(name, i->path)) < 0)
		return r;
	if (!(me = tree_runner_self()))
		return -ENOMEM;
	/* From here no job enters (admission refuses a reservation marked removing). */
	if ((r = cgfs_xattr_set(i->path, X_REMOVING, me)) < 0)
		return r;
	test_pause("resv-delete-after-mark");
	if (i->mem_bytes || ((bad & BAD_MEM) && has_memory_min(i->path))) {
		r = memresv_release(ctx, i->path, i->mem_bytes);
		if (r < 0 && !(bad & BAD_MEM))
			return r;
		if (r < 0) {
			log_warning("reservation %s: memory.min: %s", name,
				    jobcg_last_error()->message);
			jobcg_error_clear();
		}
	}
	if (*i->cpus && (r = cpupart_release(ctx, i->path, i->cpus)) < 0) {
		if (!(bad & BAD_CPUS))
			return r;
		log_warning("reservation %s: CPU partition: %s", name, jobcg_last_error()->message);
		jobcg_error_clear();
	}
	r = devs_load(ctx, i->devices, &d);
	devs_unknown = r < 0 || (bad & BAD_DEVICES);
	if (r < 0) {
		/* gres.conf changed, or the value is damaged: the sweep below drops what no
		 * reservation holds once this one is gone. */
		log_warning("reservation %s: %s: " JOBCG_GRES_XATTR ": %s", name, i->path,
			    jobcg_last_error()->message);
		jobcg_error_clear();
	}
	r = devs_release(ctx, i->path, &d);
	devs_done(&d);
	if (r < 0)
		return r;
	test_pause("resv-delete-before-rmdir");
	if ((r = cgfs_rmdir(i->path)) < 0)
		return r;
	if (devs_unknown && gc_entries(ctx, &swept) < 0) {
		log_warning("reservation %s: devices may stay out of the pool until 'jobcg gc': %s",
			    name, jobcg_last_error()->message);
		jobcg_error_clear();
	}
	log_info("deleted reservation %s", name);
	return 0;
}

JOBCG_EXPORT int jobcg_resv_delete(struct jobcg_ctx *ctx, const char *name)
{
	int r;

	if ((r = name_check(name)) < 0)
		return r;
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	r = remove_locked(ctx, name, false);
	jobcg_ctx_unlock(ctx);
	return r;
}

/* ---- verify ---- */

JOBCG_EXPORT void jobcg_resv_status_free(struct jobcg_resv_status *s)
{
	if (!s)
		return;
	strv_free(s->problems);
	free(s->partition);
	free(s->effective);
	free(s->note);
	free(s);
}

static void statusp(struct jobcg_resv_status **s)
{
	jobcg_resv_status_free(*s);
}

static int problem(struct jobcg_resv_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int problem(struct jobcg_resv_status *st, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = strdup_vprintf(fmt, ap);
	va_end(ap);
	if (!s)
		return -ENOMEM;
	st->valid = false;
	if (!st->problems && !(st->problems = calloc(1, sizeof(char *)))) {
		free(s);
		return -ENOMEM;
	}
	return strv_push(&st->problems, s);
}

/* Outside the reservation, a directory holding one of its devices. */
struct outside_scan {
	const char *own; /* "resv_<name>" */
	const struct jobcg_gres_set *set;
	struct jobcg_resv_status *st;
	const struct jobcg_gres_node *n;
};

static int outside_fn(const char *relpath, unsigned depth, const struct jobcg_gres_set *s,
		      void *userdata)
{
	struct outside_scan *o = userdata;
	size_t l = strlen(o->own);
	struct jobcg_gres_set common;

	(void)depth;
	if (strncmp(relpath, o->own, l) == 0 && (relpath[l] == '\0' || relpath[l] == '/'))
		return 0;
	set_and(s, o->set, &common);
	if (!set_empty(&common)) {
		_cleanup_free_ char *names = set_name(o->n, &common);

		return problem(o->st, "devices %s are held by %s, outside the reservation",
			       names ? names : "?", relpath) < 0
			   ? -ENOMEM
			   : 0;
	}
	return 0;
}

static bool reserved_has(const struct devpolicy_reserved *v, size_t n, uint64_t owner,
			 const struct jobcg_devrule *f)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].owner == owner && v[i].type == f->type && v[i].major == f->major &&
		    v[i].minor == f->minor)
			return true;
	return false;
}

/* A reservation without devices owns no guard entry: one left behind (its devices edited to
 * nothing, or a delete cut short) is as DEGRADED as one on a file its devices do not name. */
static int devs_none_verify(struct jobcg_ctx *ctx, const struct jobcg_resv_info *i,
			    struct jobcg_resv_status *st)
{
	_cleanup_free_ struct devpolicy_reserved *v = NULL;
	struct jobcg_devpolicy *p = NULL;
	size_t nv = 0;
	uint64_t id = 0;
	int r = gres_ctx_policy(ctx, NULL, true, &p);

	if (r == -ENOENT) { /* no node program: no entry anywhere */
		jobcg_error_clear();
		return 0;
	}
	if (r < 0)
		return problem(st, "devices: cannot read the node device program: %s",
			       jobcg_last_error()->message);
	if (!devpolicy_node_mode(p))
		return 0;
	if ((r = jobcg_cgroup_id(i->path, &id)) < 0 ||
	    (r = devpolicy_reserved_list(p, &v, &nv)) < 0)
		return r;
	for (size_t k = 0; k < nv; k++)
		if (v[k].owner == id &&
		    (r = problem(st,
				 "devices: %c %u:%u is reserved to this reservation in %s, but it "
				 "has no devices: no job can open it",
				 v[k].type, v[k].major, v[k].minor, DEVPROG_POLICY_NAME)) < 0)
			return r;
	return 0;
}

static int devs_verify(struct jobcg_ctx *ctx, const struct jobcg_resv_info *i,
		       struct jobcg_resv_status *st)
{
	_cleanup_free_ struct devpolicy_reserved *v = NULL;
	_cleanup_free_ char *own = strdup_printf(TREE_RESV_PREFIX "%s", i->name);
	_cleanup_close_ int rootfd = -1;
	struct jobcg_devpolicy *p = NULL;
	struct resv_devs d = {};
	struct outside_scan o;
	size_t nv = 0;
	uint64_t id = 0;
	int r;

	if (!own)
		return -ENOMEM;
	if (!*i->devices)
		return devs_none_verify(ctx, i, st);
	if ((r = devs_load(ctx, i->devices, &d)) < 0)
		return problem(st, "devices: %s", jobcg_last_error()->message);
	o = (struct outside_scan){own, &d.set, st, d.node};
	rootfd = open(jobcg_ctx_root(ctx), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0 || (r = jobcg_gres_scan(d.node, rootfd, NULL, outside_fn, &o, NULL)) < 0) {
		r = rootfd < 0 ? negative_errno() : r;
		goto out;
	}
	if (!gres_constrained(ctx, d.node)) {
		st->note = strdup("ConstrainDevices=no: the devices are kept out of the pool by "
				  "allocation only, not in the kernel");
		goto out;
	}
	r = gres_ctx_policy(ctx, NULL, true, &p);
	if (r == -ENOENT) {
		jobcg_error_clear();
		r = problem(st, "devices: no node device program is pinned for this tree");
		goto out;
	}
	if (r < 0)
		goto out;
	if (!devpolicy_node_mode(p)) {
		st->note = strdup("linear device programs: each job's own program keeps the "
				  "reserved devices out; there is no node-wide guard");
		goto out;
	}
	if ((r = jobcg_cgroup_id(i->path, &id)) < 0 ||
	    (r = devpolicy_reserved_list(p, &v, &nv)) < 0)
		goto out;
	for (size_t k = 0; k < nv; k++)
		if (v[k].owner == id && !file_named(&d, &v[k]) &&
		    (r = problem(st,
				 "devices: %c %u:%u is reserved to this reservation in %s, but its "
				 "devices (%s) do not name it: no job can open it",
				 v[k].type, v[k].major, v[k].minor, DEVPROG_POLICY_NAME,
				 i->devices)) < 0)
			goto out;
	for (size_t k = 0; k < d.nfiles; k++) {
		const struct jobcg_devrule *f = &d.files[k];

		if (!reserved_has(v, nv, 0, f) || !reserved_has(v, nv, id, f))
			r = problem(st,
				    "devices: %c %u:%u is not reserved in %s (open to cgroups "
				    "outside the reservation)",
				    f->type, f->major, f->minor, DEVPROG_POLICY_NAME);
		for (size_t j = 0; r >= 0 && j < nv; j++)
			if (v[j].owner && v[j].owner != id && v[j].type == f->type &&
			    v[j].major == f->major && v[j].minor == f->minor)
				r = problem(
				    st, "devices: %c %u:%u is also reserved to cgroup id %" PRIu64,
				    f->type, f->major, f->minor, v[j].owner);
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	devs_done(&d);
	return r;
}

static int verify_once(struct jobcg_ctx *ctx, const struct jobcg_resv_info *i,
		       struct jobcg_resv_status *st)
{
	int r;

	st->valid = true;
	strv_free(st->problems);
	st->problems = NULL;
	free(st->partition);
	free(st->effective);
	free(st->note);
	st->partition = st->effective = st->note = NULL;
	if (!i->created_sec &&
	    (r = problem(st, "not completely created ('jobcg gc' removes it)")) < 0)
		return r;
	if (i->removing && (r = problem(st, "being deleted ('jobcg gc' finishes it)")) < 0)
		return r;
	if (*i->cpus) {
		struct cpupart_state cs = {};

		r = cpupart_verify(ctx, i->path, i->cpus, i->isolated, &cs);
		if (r < 0) {
			r = problem(st, "CPUs: cannot read the partition: %s",
				    jobcg_last_error()->message);
		} else {
			st->partition = cs.partition ? strdup(cs.partition) : NULL;
			st->effective = cs.effective ? strdup(cs.effective) : NULL;
			if (!cs.valid)
				r = problem(st, "CPUs: %s",
					    cs.problem ? cs.problem : "partition not valid");
		}
		cpupart_state_clear(&cs);
		if (r < 0)
			return r;
	}
	if (i->mem_bytes) {
		_cleanup_free_ char *why = NULL;

		_cleanup_free_ char *max = NULL;
		uint64_t cap = 0;

		r = memresv_verify(ctx, i->path, i->mem_bytes, &why);
		if (r < 0)
			r = problem(st, "memory: cannot read memory.min: %s",
				    jobcg_last_error()->message);
		else if (why)
			r = problem(st, "memory: %s", why);
		if (r < 0)
			return r;
		if ((r = cgfs_read(i->path, "memory.max", &max)) < 0)
			r = problem(st, "memory: cannot read memory.max: %s",
				    jobcg_last_error()->message);
		else if (parse_u64(strstrip(max), UINT64_MAX, &cap) < 0 ||
			 cap != (i->mem_bytes & ~((uint64_t)sysconf(_SC_PAGESIZE) - 1)))
			r = problem(st,
				    "memory: memory.max is %s, not the %" PRIu64
				    " reserved (its jobs together could take more)",
				    strstrip(max), i->mem_bytes);
		if (r < 0)
			return r;
	}
	return devs_verify(ctx, i, st);
}

/* Repair: the guard this reservation keeps on files its devices no longer name goes, with the
 * "reserved" flags nobody else owns. */
static void devs_unnamed_drop(struct jobcg_ctx *ctx, const struct jobcg_resv_info *i,
			      const struct resv_devs *d)
{
	struct jobcg_devpolicy *p = NULL;
	unsigned dropped = 0;
	uint64_t id = 0;
	int r = gres_ctx_policy(ctx, NULL, true, &p);

	if (r == -ENOENT) {
		jobcg_error_clear();
		return;
	}
	if (r < 0 || (r = jobcg_cgroup_id(i->path, &id)) < 0 ||
	    (r = drop_unnamed(p, id, d, &dropped)) < 0 ||
	    (dropped && (r = gc_entries(ctx, NULL)) < 0))
		log_warning("reservation %s: device entries it does not name: %s", i->name,
			    jobcg_last_error()->message);
}

static int repair(struct jobcg_ctx *ctx, const struct jobcg_resv_info *i)
{
	struct resv_devs d = {};
	int r = 0;

	/* (tests stand in here for the kernel, which notifies a partition file jobcg writes) */
	test_pause("resv-repair");
	if (*i->cpus) {
		struct cpupart_state cs = {};

		if (cpupart_repair(ctx, i->path, i->cpus, i->isolated, &cs) < 0)
			log_warning("reservation %s: CPU partition still degraded: %s", i->name,
				    cs.problem ? cs.problem : jobcg_last_error()->message);
		cpupart_state_clear(&cs);
	}
	if (i->mem_bytes && memresv_apply(ctx, i->path, i->mem_bytes) < 0)
		log_warning("reservation %s: memory.min: %s", i->name, jobcg_last_error()->message);
	if (i->mem_bytes && mem_cap(i->path, i->mem_bytes) < 0)
		log_warning("reservation %s: memory.max: %s", i->name, jobcg_last_error()->message);
	/* Stale owners of its devices (a reservation removed by hand) first: rewriting our own
	 * entries cannot make it VALID while they stand. */
	if (*i->devices && gc_entries(ctx, NULL) < 0)
		log_warning("reservation %s: stale device entries: %s", i->name,
			    jobcg_last_error()->message);
	if (*i->devices && (r = devs_load(ctx, i->devices, &d)) == 0) {
		if (devs_apply(ctx, i->path, &d) < 0)
			log_warning("reservation %s: device policy: %s", i->name,
				    jobcg_last_error()->message);
		devs_unnamed_drop(ctx, i, &d);
		devs_done(&d);
	} else if (!*i->devices) {
		devs_unnamed_drop(ctx, i, &d);
	}
	return 0;
}

static int verify_locked(struct jobcg_ctx *ctx, const char *name, unsigned flags,
			 struct jobcg_resv_status **ret)
{
	_cleanup_(infop) struct jobcg_resv_info *i = NULL;
	_cleanup_(statusp) struct jobcg_resv_status *st = calloc(1, sizeof(*st));
	int r;

	if (!st)
		return -ENOMEM;
	if ((r = info_read(ctx, name, &i)) < 0)
		return r;
	if ((r = verify_once(ctx, i, st)) < 0)
		return r;
	if (!st->valid && (flags & JOBCG_RESV_REPAIR) && i->created_sec && !i->removing) {
		for (char **p = st->problems; p && *p; p++)
			log_info("reservation %s degraded, repairing: %s", name, *p);
		(void)repair(ctx, i);
		st->repaired = true;
		if ((r = verify_once(ctx, i, st)) < 0)
			return r;
	}
	*ret = TAKE_PTR(st);
	return 0;
}

JOBCG_EXPORT int jobcg_resv_verify(struct jobcg_ctx *ctx, const char *name, unsigned flags,
				   struct jobcg_resv_status **ret)
{
	int r;

	if ((r = name_check(name)) < 0)
		return r;
	/* Under the lock: a reservation being made or deleted is not judged half way. */
	if ((r = jobcg_ctx_lock(ctx)) < 0)
		return r;
	r = verify_locked(ctx, name, flags, ret);
	jobcg_ctx_unlock(ctx);
	return r;
}

int resv_verify_unlocked(struct jobcg_ctx *ctx, const char *name, struct jobcg_resv_status **ret)
{
	int r = name_check(name);

	return r < 0 ? r : verify_locked(ctx, name, 0, ret);
}

/* ---- jobs entering, gc ---- */

static int user_allowed(const struct jobcg_resv_info *i, uid_t uid)
{
	_cleanup_free_ char *users = NULL;

	for (size_t k = 0; k < i->n_users; k++)
		if (i->users[k] == uid)
			return 0;
	if (!i->n_users)
		return 0;
	(void)resv_users_text(i->users, i->n_users, &users);
	return error_set(-EPERM, "user %u may not place jobs in reservation %s (users: %s)",
			 (unsigned)uid, i->name, users ? users : "?");
}

int resv_user_check(struct jobcg_ctx *ctx, uint32_t job_id, uid_t uid)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job_id), *name = NULL;
	_cleanup_(infop) struct jobcg_resv_info *i = NULL;
	int r;

	if (!jdir)
		return -ENOMEM;
	if (!(name = tree_job_resv(ctx, jdir)))
		return 0;
	if ((r = info_read(ctx, name, &i)) < 0)
		return r;
	return user_allowed(i, uid);
}

int resv_admit(struct jobcg_ctx *ctx, const char *name, const struct jobcg_limits *limits,
	       char **ret_dir)
{
	_cleanup_(infop) struct jobcg_resv_info *i = NULL;
	_cleanup_(statusp) struct jobcg_resv_status *st = NULL;
	uid_t uid = limits && limits->have_owner ? limits->uid : getuid();
	int r;

	if ((r = name_check(name)) < 0)
		return r;
	if ((r = info_read(ctx, name, &i)) < 0)
		return r;
	if (!i->created_sec || i->removing)
		return error_set(-ESHUTDOWN, "reservation %s is %s: no job may enter", name,
				 i->removing ? "being deleted" : "not completely created");
	if ((r = user_allowed(i, uid)) < 0)
		return r;
	if ((r = verify_locked(ctx, name, 0, &st)) < 0)
		return r;
	if (!st->valid)
		return error_set(-EBUSY,
				 "reservation %s is DEGRADED (%s): no new job until 'jobcg resv "
				 "verify --repair %s' makes it VALID",
				 name, st->problems && st->problems[0] ? st->problems[0] : "?",
				 name);
	*ret_dir = TAKE_PTR(i->path);
	return 0;
}

/* A op B on CPU lists, formatted ("" when empty). MINUS: a & ~b. */
static int cpus_op(const char *a, const char *b, bool minus, char **ret)
{
	_cleanup_free_ uint64_t *x = NULL, *y = NULL;
	size_t nx = 0, ny = 0;
	int r;

	if (!minus)
		return cpus_common(a, b, ret);
	if ((r = cpus_bits(a, &x, &nx)) < 0 || (r = cpus_bits(b, &y, &ny)) < 0)
		return r;
	for (size_t i = 0; i < nx && i < ny; i++)
		x[i] &= ~y[i];
	return jobcg_format_cpulist(x, nx, ret);
}

int resv_job_cpus(struct jobcg_ctx *ctx, const char *resv, const char *want, char **ret_default)
{
	_cleanup_strv_free_ char **names = NULL;
	_cleanup_free_ char *reserved = strdup(""), *mine = NULL;
	int r;

	*ret_default = NULL;
	if (!reserved)
		return -ENOMEM;
	if ((r = tree_resv_names(ctx, &names)) < 0)
		return r;
	for (char **k = names; *k; k++) {
		_cleanup_free_ char *dir = tree_resv_dir(ctx, *k), *cpus = NULL, *u = NULL;

		if (!dir)
			return -ENOMEM;
		if ((r = xget(dir, X_CPUS, &cpus)) < 0)
			return r;
		if (cpus_empty(cpus))
			continue;
		if (resv && streq(*k, resv)) {
			mine = TAKE_PTR(cpus);
			continue;
		}
		if (!cpus_empty(want)) {
			_cleanup_free_ char *both = NULL;

			if ((r = cpus_common(want, cpus, &both)) < 0)
				return r;
			if (*both)
				return error_set(-EBUSY,
						 "--cpus: CPUs %s are reserved by reservation %s",
						 both, *k);
		}
		u = strdup_printf("%s%s%s", reserved, *reserved ? "," : "", cpus);
		if (!u)
			return -ENOMEM;
		free(reserved);
		reserved = TAKE_PTR(u);
	}
	if (!cpus_empty(want)) {
		_cleanup_free_ char *extra = NULL;

		if (!mine)
			return 0;
		if ((r = cpus_op(want, mine, true, &extra)) < 0)
			return r;
		if (*extra)
			return error_set(-EINVAL, "--cpus: CPUs %s are not reservation %s's (%s)",
					 extra, resv, mine);
		return 0;
	}
	/* No --cpus: inside a reservation with CPUs, its CPUs; outside, never a reserved CPU (a
	 * sibling's cpuset.cpus overlapping a partition invalidates it). */
	if (mine) {
		*ret_default = TAKE_PTR(mine);
		return 0;
	}
	if (*reserved) {
		_cleanup_free_ char *online = NULL, *base = NULL;

		if ((r = jobcg_online_cpus(&online)) < 0 ||
		    (r = jobcg_spec_job_cpus(&ctx->conf->cgroup, online, &base)) < 0)
			return r;
		return cpus_op(base, reserved, true, ret_default);
	}
	return 0;
}

int resv_mem_held(struct jobcg_ctx *ctx, uint64_t *ret)
{
	_cleanup_strv_free_ char **names = NULL;
	uint64_t sum = 0;
	int r;

	if (tree_resv_names(ctx, &names) < 0) {
		*ret = 0;
		return 0;
	}
	for (char **k = names; *k; k++) {
		_cleanup_free_ char *dir = tree_resv_dir(ctx, *k), *mem = NULL;
		uint64_t v;

		if (!dir)
			return -ENOMEM;
		if ((r = xget(dir, X_MEM, &mem)) == -ENOENT) /* deleted meanwhile */
			continue;
		if (r < 0)
			return r;
		if ((r = mem_parse(dir, mem, &v)) < 0)
			return r;
		sum = v > UINT64_MAX - sum ? UINT64_MAX : sum + v;
	}
	*ret = sum;
	return 0;
}

int resv_gc(struct jobcg_ctx *ctx, unsigned *ret_removed)
{
	_cleanup_strv_free_ char **names = NULL;
	unsigned removed = 0;
	int r, first = 0;

	if ((r = tree_resv_names(ctx, &names)) < 0)
		return r;
	for (char **k = names; *k; k++) {
		_cleanup_(infop) struct jobcg_resv_info *i = NULL;

		if ((r = info_read_opt(ctx, *k, true, &i, NULL)) < 0) {
			if (r == -ENOENT)
				continue;
			first = first ? first : r;
			continue;
		}
		/* Under the node lock, which creation and deletion hold throughout: a reservation
		 * without the mark, or marked removing, was left by a process that died. */
		if (i->created_sec && !i->removing)
			continue;
		log_info("gc: %s reservation %s",
			 i->removing ? "finishing the deletion of" : "removing the half-made", *k);
		if ((r = remove_locked(ctx, *k, true)) < 0) {
			first = first ? first : r;
			continue;
		}
		removed++;
	}
	if ((r = gc_entries(ctx, &removed)) < 0 && !first)
		first = r;
	if (ret_removed)
		*ret_removed = removed;
	return first;
}
