/* jobcg: granting and revoking devices to job, step and task cgroups (node program entries or
 * linear programs), the entries' index on each cgroup, revocation tickets, reserved devices, gc. */
#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "bpfsys.h"
#include "devpolicy.h"
#include "devpolicy_internal.h"
#include "devprog.h"
#include "devices.h"
#include "log.h"
#include "testhook.h"
#include "tree.h"
#include "util.h"

/*
 * Number of path components of REL if each is a plain name (no "", "." or ".."), else 0.
 * Below the canonical root everything is on cgroupfs, which has no symlinks: such a path is
 * already canonical and its depth is its component count, with no realpath() and no walk up.
 */
static unsigned plain_depth(const char *rel)
{
	unsigned n = 0;

	for (const char *c = rel;;) {
		const char *e = strchrnul(c, '/');
		size_t len = (size_t)(e - c);

		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		n++;
		if (!*e)
			return n;
		c = e + 1;
	}
}

/* Canonical path, id and level below the root of a cgroup inside the root's tree. */
static int resolve_member(const struct jobcg_devpolicy *p, const char *path, char **ret_path,
			  uint64_t *ret_id, unsigned *ret_rel_level)
{
	_cleanup_free_ char *canon = NULL;
	unsigned level;
	size_t rl = strlen(p->root);
	int e;

	if (path && strncmp(path, p->root, rl) == 0 && path[rl] == '/' &&
	    (level = plain_depth(path + rl + 1)) > 0) {
		struct statfs sf;

		/* The one check the fast path keeps: something else mounted below the root. */
		if (statfs(path, &sf) < 0)
			return error_set(negative_errno(), "cgroup %s: %s", path, strerror(errno));
		if (sf.f_type != CGROUP2_SUPER_MAGIC)
			return error_set(-ENOTDIR, "%s is not a cgroup v2 directory", path);
		if (!(canon = strdup(path)))
			return -ENOMEM;
		level += p->root_level;
	} else if ((e = devpolicy_cg_resolve(path, &canon, &level)) < 0) {
		return e;
	}
	if (strncmp(canon, p->root, rl) != 0 || canon[rl] != '/' || level <= p->root_level)
		return error_set(-EINVAL, "cgroup %s is not below the jobcg root %s", canon,
				 p->root);
	if ((e = jobcg_cgroup_id(canon, ret_id)) < 0)
		return e;
	*ret_rel_level = level - p->root_level;
	if (ret_path)
		*ret_path = TAKE_PTR(canon);
	return 0;
}

/* Collect the policy keys of one cgroup id (bounded by the map size). */
static int keys_push(struct devprog_policy_key **keys, size_t *n, size_t *cap,
		     const struct devprog_policy_key *k)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct devprog_policy_key *nk = realloc(*keys, nc * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		*keys = nk;
		*cap = nc;
	}
	(*keys)[(*n)++] = *k;
	return 0;
}

/*
 * The whole policy map in batches of POLICY_BATCH entries: one syscall per batch instead of
 * one per entry (the map holds every constrained cgroup of the node, and a step's end reads it).
 * 1: batches are not supported here (kernels before 5.6, or a bucket larger than a batch); the
 * caller walks key by key.
 */
#define POLICY_BATCH 4096u
static int policy_keys_batch(int policy_fd, uint64_t id, struct devprog_policy_key **ret,
			     size_t *ret_n)
{
	_cleanup_free_ struct devprog_policy_key *keys = NULL, *kbuf = NULL;
	_cleanup_free_ struct devprog_policy_value *vbuf = NULL;
	/* The batch token of a hash map is a bucket number; key-sized is large enough. */
	struct devprog_policy_key token = {0}, next_token = {0};
	size_t n = 0, cap = 0, seen = 0;
	bool first = true;

	kbuf = calloc(POLICY_BATCH, sizeof(*kbuf));
	vbuf = calloc(POLICY_BATCH, sizeof(*vbuf));
	if (!kbuf || !vbuf)
		return -ENOMEM;
	for (;;) {
		uint32_t count = POLICY_BATCH;
		int e = bpf_map_lookup_batch(policy_fd, first ? NULL : &token, &next_token, kbuf,
					     vbuf, &count, NULL);
		bool done = e < 0 && errno == ENOENT;

		if (e < 0 && !done)
			return 1;
		seen += count;
		if (seen > POLICY_SCAN_MAX)
			return error_set(-EAGAIN, "policy map kept changing while being read");
		for (uint32_t i = 0; i < count; i++)
			if (kbuf[i].cgroup_id == id && keys_push(&keys, &n, &cap, &kbuf[i]) < 0)
				return -ENOMEM;
		if (done)
			break;
		token = next_token;
		first = false;
	}
	*ret = TAKE_PTR(keys);
	*ret_n = n;
	return 0;
}

static int policy_keys_of(int policy_fd, uint64_t id, struct devprog_policy_key **ret,
			  size_t *ret_n)
{
	_cleanup_free_ struct devprog_policy_key *keys = NULL;
	struct devprog_policy_key key, next;
	size_t n = 0, cap = 0, seen = 0;
	bool first = true;
	int e = policy_keys_batch(policy_fd, id, ret, ret_n);

	if (e <= 0)
		return e;
	while (bpf_map_get_next_key(policy_fd, first ? NULL : &key, &next) == 0) {
		first = false;
		key = next;
		/* A hash map walked while others delete may restart; never loop forever. */
		if (++seen > POLICY_SCAN_MAX)
			return error_set(-EAGAIN, "policy map kept changing while being read");
		if (next.cgroup_id != id)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct devprog_policy_key *nk = realloc(keys, nc * sizeof(*nk));
			if (!nk)
				return -ENOMEM;
			keys = nk;
			cap = nc;
		}
		keys[n++] = next;
	}
	*ret = TAKE_PTR(keys);
	*ret_n = n;
	return 0;
}

/*
 * The index of a cgroup's policy entries, kept in an xattr of the cgroup itself: a revoke
 * then deletes what it lists instead of walking the whole map (a hash map walk visits every
 * bucket of its 1M, about 1 ms, which is the largest cost of a step's end otherwise). The map
 * stays the truth: a missing or unusable index (never written, xattrs refused, another
 * writer's) only means walking the map as before. Written as a superset before the map
 * changes, so that it never lacks an entry that exists.
 */
#define DEVKEYS_XATTR "trusted.jobcg.devkeys"
#define DEVKEYS_MAGIC 0x4b444a31u /* "1JDK" */

struct devkeys_head {
	uint32_t magic;
	uint32_t n;
	uint64_t cgroup_id;
};

bool devpolicy_indexed(const char *path)
{
	return getxattr(path, DEVKEYS_XATTR, NULL, 0) >= (ssize_t)sizeof(struct devkeys_head);
}

int devkeys_parse(const void *buf, size_t sz, uint64_t id, struct devprog_policy_key **ret,
		  size_t *ret_n)
{
	struct devkeys_head h;
	struct devprog_policy_key *keys;

	if (sz < sizeof(h))
		return 1;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != DEVKEYS_MAGIC || h.cgroup_id != id ||
	    sz != sizeof(h) + (size_t)h.n * sizeof(*keys))
		return 1;
	keys = calloc(h.n + 1, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	memcpy(keys, (const uint8_t *)buf + sizeof(h), (size_t)h.n * sizeof(*keys));
	for (size_t i = 0; i < h.n; i++)
		if (keys[i].cgroup_id != id || keys[i].type == 0) {
			free(keys);
			return 1;
		}
	*ret = keys;
	*ret_n = h.n;
	return 0;
}

/* 0 and the entries listed for ID; 1 when there is no usable index. */
static int devkeys_get(const char *canon, uint64_t id, struct devprog_policy_key **ret,
		       size_t *ret_n)
{
	_cleanup_free_ uint8_t *buf = NULL;
	ssize_t sz = getxattr(canon, DEVKEYS_XATTR, NULL, 0), got;

	if (sz < (ssize_t)sizeof(struct devkeys_head) || !(buf = malloc((size_t)sz)))
		return 1;
	got = getxattr(canon, DEVKEYS_XATTR, buf, (size_t)sz);
	if (got != sz)
		return 1; /* changed meanwhile: the map walk is always right */
	return devkeys_parse(buf, (size_t)sz, id, ret, ret_n);
}

static int cmp_pkey(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct devprog_policy_key));
}

/* Best effort: without an index a revoke walks the map, so a failure removes a stale one. */
static void devkeys_set(const char *canon, uint64_t id, const struct devprog_policy_key *a,
			size_t na, const struct devprog_policy_key *b, size_t nb)
{
	struct devkeys_head h = {.magic = DEVKEYS_MAGIC, .cgroup_id = id};
	_cleanup_free_ uint8_t *buf = NULL;
	size_t n = 0;

	buf = malloc(sizeof(h) + (na + nb) * sizeof(*a));
	if (buf) {
		struct devprog_policy_key *k =
		    (struct devprog_policy_key *)(void *)(buf + sizeof(h));

		size_t m = 0;

		for (size_t i = 0; i < na + nb; i++) {
			const struct devprog_policy_key *x = i < na ? &a[i] : &b[i - na];

			if (x->type != 0)
				memcpy(&k[m++], x, sizeof(*x));
		}
		qsort(k, m, sizeof(*k), cmp_pkey);
		for (size_t i = 0; i < m; i++)
			if (n == 0 || memcmp(&k[n - 1], &k[i], sizeof(*k)) != 0)
				memmove(&k[n++], &k[i], sizeof(*k));
		h.n = (uint32_t)n;
		memcpy(buf, &h, sizeof(h));
		if (TEST_FAIL("setxattr", canon,
			      setxattr(canon, DEVKEYS_XATTR, buf, sizeof(h) + n * sizeof(*k), 0)) ==
		    0)
			return;
	}
	if (removexattr(canon, DEVKEYS_XATTR) < 0 && errno != ENODATA && errno != ENOTSUP)
		log_warning("cannot remove %s of %s: %s", DEVKEYS_XATTR, canon, strerror(errno));
}

/* A cgroup's entries: from its index, else from a walk of the map. */
static int policy_keys_of_cgroup(int policy_fd, const char *canon, uint64_t id,
				 struct devprog_policy_key **ret, size_t *ret_n)
{
	int e = canon ? devkeys_get(canon, id, ret, ret_n) : 1;

	return e <= 0 ? e : policy_keys_of(policy_fd, id, ret, ret_n);
}

static int node_grant(struct jobcg_devpolicy *p, const char *canon, uint64_t id,
		      unsigned marker_value, const struct jobcg_devrule *allowed, size_t n)
{
	_cleanup_free_ struct devprog_policy_key *keys = NULL, *old = NULL;
	_cleanup_free_ uint32_t *acc = NULL;
	struct devprog_policy_key marker = {.cgroup_id = id};
	struct devprog_policy_value v;
	size_t nk = 0, n_old = 0;
	bool regrant, shrank = false;
	int e;

	keys = calloc(2 * n + 1, sizeof(*keys));
	acc = calloc(2 * n + 1, sizeof(*acc));
	if (!keys || !acc)
		return -ENOMEM;
	nk = devprog_policy_entries(id, allowed, n, keys, acc);
	regrant = bpf_map_lookup_elem(p->policy_fd, &marker, &v) == 0;
	if (regrant && (e = policy_keys_of_cgroup(p->policy_fd, canon, id, &old, &n_old)) < 0)
		return e;
	devkeys_set(canon, id, old, n_old, keys, nk);
	if (regrant) {
		/* Drop what the new grant no longer contains first: never more permissive than
		 * either grant while switching. */
		for (size_t i = 0; i < n_old; i++) {
			bool keep = old[i].type == 0;
			for (size_t j = 0; j < nk && !keep; j++)
				keep = memcmp(&old[i], &keys[j], sizeof(keys[j])) == 0;
			if (!keep) {
				(void)bpf_map_delete_elem(p->policy_fd, &old[i]);
				shrank = true;
			}
		}
	}
	for (size_t i = 0; i < nk; i++) {
		v.access = acc[i];
		e = TEST_FAIL("map update", canon,
			      bpf_map_update_elem(p->policy_fd, &keys[i], &v, BPF_ANY));
		if (e < 0)
			goto fail;
	}
	test_pause("grant-before-marker");
	v.access = marker_value;
	e = TEST_FAIL("map update", canon, bpf_map_update_elem(p->policy_fd, &marker, &v, BPF_ANY));
	if (e < 0)
		goto fail;
	if (shrank)
		devkeys_set(canon, id, keys, nk, NULL, 0);
	return 0;
fail:
	if (!regrant) { /* a fresh grant leaves nothing behind */
		for (size_t i = 0; i < nk; i++)
			(void)bpf_map_delete_elem(p->policy_fd, &keys[i]);
		(void)removexattr(canon, DEVKEYS_XATTR);
	}
	return error_set(e, "cannot update %s%s: %s", DEVPROG_POLICY_NAME,
			 e == -E2BIG ? " (map full)" : "", strerror(-e));
}

/* jobcg_linear programs attached directly to a cgroup: fds in *ret_fds. */
int devpolicy_linear_progs_of(int cg_fd, int **ret_fds, size_t *ret_n)
{
	_cleanup_free_ uint32_t *ids = NULL;
	_cleanup_free_ int *fds = NULL;
	size_t n, nf = 0;
	int e;

	if ((e = bpfsys_query(cg_fd, &ids, &n)) < 0)
		return e;
	fds = calloc(n + 1, sizeof(int));
	if (!fds)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char name[BPF_OBJ_NAME_LEN];
		int fd;
		if (bpfsys_prog_by_id(ids[i], &fd) < 0)
			continue; /* detached meanwhile */
		if (bpfsys_prog_info(fd, NULL, name) < 0 ||
		    strncmp(name, DEVPROG_LINEAR_NAME, sizeof(name)) != 0) {
			close(fd);
			continue;
		}
		fds[nf++] = fd;
	}
	*ret_fds = TAKE_PTR(fds);
	*ret_n = nf;
	return 0;
}

void devpolicy_close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
}

/* Detach every jobcg_linear program of a cgroup (linear mode, or left from it). */
static int detach_linear(const char *cgroup_path)
{
	_cleanup_close_ int cg_fd = open(cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int *fds = NULL;
	size_t nf = 0;
	int e;

	if (cg_fd < 0)
		return error_set(negative_errno(), "cannot open %s: %s", cgroup_path,
				 strerror(errno));
	if ((e = devpolicy_linear_progs_of(cg_fd, &fds, &nf)) < 0)
		return e;
	for (size_t i = 0; i < nf && e == 0; i++)
		e = bpfsys_detach(fds[i], cg_fd);
	devpolicy_close_fds(fds, nf);
	return e;
}

static int linear_grant(struct jobcg_devpolicy *p, const char *cgroup_path,
			const struct jobcg_devrule *allowed, size_t n)
{
	_cleanup_close_ int cg_fd = -1, prog_fd = -1;
	struct devprog_buf b = {0};
	int *old = NULL;
	size_t n_old = 0;
	int e;

	cg_fd = open(cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd < 0)
		return error_set(negative_errno(), "cannot open %s: %s", cgroup_path,
				 strerror(errno));
	if ((e = devprog_build_linear(p->managed, p->n_managed, allowed, n, &b)) < 0)
		return e;
	e = bpfsys_devprog_load(DEVPROG_LINEAR_NAME, b.insns, b.n, &prog_fd);
	devprog_buf_done(&b);
	if (e < 0)
		return e;
	if ((e = devpolicy_linear_progs_of(cg_fd, &old, &n_old)) < 0)
		return e;
	/* Replace in place so the cgroup is never without its constraint. */
	e = bpfsys_attach(prog_fd, cg_fd, n_old > 0 ? old[0] : -1);
	if (e == 0)
		for (size_t i = 1; i < n_old; i++)
			(void)bpf_prog_detach2(old[i], cg_fd, BPF_CGROUP_DEVICE);
	devpolicy_close_fds(old, n_old);
	if (e < 0)
		jobcg_error_prefix("%s", cgroup_path);
	return e;
}

/* Job, step and task levels (1, 2, 4), one deeper below a reservation's directory. */
static bool grant_level_ok(const struct jobcg_devpolicy *p, const char *canon, unsigned rel)
{
	unsigned shift = startswith(canon + strlen(p->root), "/" TREE_RESV_PREFIX) ? 1 : 0;

	return rel == DEVPROG_LEVEL_JOB + shift || rel == DEVPROG_LEVEL_STEP + shift ||
	       rel == DEVPROG_LEVEL_TASK + shift;
}

int jobcg_devpolicy_grant(struct jobcg_devpolicy *p, const char *cgroup_path,
			  const struct jobcg_devrule *allowed, size_t n)
{
	_cleanup_free_ char *canon = NULL;
	unsigned rel;
	uint64_t id;
	int e;

	if (!p)
		return error_set(-EINVAL, "device policy missing");
	if ((e = devpolicy_check_rules(allowed, n, true)) < 0)
		return e;
	if ((e = resolve_member(p, cgroup_path, &canon, &id, &rel)) < 0)
		return e;
	if (p->mode == JOBCG_DEVPROG_LINEAR)
		return linear_grant(p, canon, allowed, n);
	if (!grant_level_ok(p, canon, rel))
		return error_set(
		    -EINVAL,
		    "cgroup %s is %u levels below the root: the node program only "
		    "constrains job (1), step (2) and task (4) levels, one deeper inside "
		    "a reservation",
		    canon, rel);
	if ((e = node_grant(p, canon, id, rel, allowed, n)) < 0)
		return e;
	/* A cgroup granted in linear mode before a switch to node mode would keep its old grant. */
	return detach_linear(canon);
}

/* CANON: the cgroup's path when it still exists (its key index), else NULL. */
static int node_revoke(struct jobcg_devpolicy *p, const char *canon, uint64_t cgroup_id)
{
	_cleanup_free_ struct devprog_policy_key *keys = NULL;
	struct devprog_policy_key marker = {.cgroup_id = cgroup_id};
	struct devprog_policy_value mv;
	size_t n = 0;
	int e;

	/* A live cgroup without a marker holds no grant the program honours (the marker is
	 * written last), so most revokes of a step's directories end with one lookup. Entries a
	 * grant killed before its marker left behind are removed once the cgroup is gone: then
	 * (CANON NULL, from gc) the map is walked for its id, marker or not. */
	if (canon && bpf_map_lookup_elem(p->policy_fd, &marker, &mv) < 0 && errno == ENOENT)
		return 0;
	/* The marker goes last: until then the cgroup stays constrained, never wider. */
	if ((e = policy_keys_of_cgroup(p->policy_fd, canon, cgroup_id, &keys, &n)) < 0)
		return e;
	for (size_t i = 0; i < n; i++)
		if (keys[i].type != 0) {
			e = TEST_FAIL("map delete", canon,
				      bpf_map_delete_elem(p->policy_fd, &keys[i]));
			if (e < 0 && e != -ENOENT)
				return error_set(e, "cannot delete from %s: %s",
						 DEVPROG_POLICY_NAME, strerror(-e));
		}
	e = TEST_FAIL("map delete", canon, bpf_map_delete_elem(p->policy_fd, &marker));
	if (e < 0 && e != -ENOENT)
		return error_set(e, "cannot delete from %s: %s", DEVPROG_POLICY_NAME, strerror(-e));
	if (canon)
		(void)removexattr(canon, DEVKEYS_XATTR);
	return 0;
}

int devpolicy_ticket_take(struct jobcg_devpolicy *p, const char *cgroup_path,
			  struct devpolicy_ticket *ret)
{
	_cleanup_free_ char *canon = NULL;
	struct devprog_policy_value mv;
	struct devprog_policy_key marker;
	unsigned rel;
	uint64_t id;
	int e;

	*ret = (struct devpolicy_ticket){0};
	/* Linear programs go with their cgroups: nothing is left to revoke once they are gone. */
	if (p->mode != JOBCG_DEVPROG_NODE)
		return 0;
	if ((e = resolve_member(p, cgroup_path, &canon, &id, &rel)) < 0)
		return e;
	marker = (struct devprog_policy_key){.cgroup_id = id};
	if (bpf_map_lookup_elem(p->policy_fd, &marker, &mv) < 0 && errno == ENOENT)
		return 0; /* never granted */
	e = devkeys_get(canon, id, &ret->keys, &ret->n);
	if (e < 0)
		return e;
	ret->id = id;
	ret->indexed = e == 0;
	return 0;
}

int devpolicy_ticket_redeem(struct jobcg_devpolicy *p, struct devpolicy_ticket *t)
{
	struct devprog_policy_key marker = {.cgroup_id = t->id};
	int e = 0;

	if (t->id == 0 || p->mode != JOBCG_DEVPROG_NODE)
		goto out;
	/* No usable index: the entries are found by the cgroup id alone. */
	if (!t->indexed && (e = policy_keys_of(p->policy_fd, t->id, &t->keys, &t->n)) < 0)
		goto out;
	for (size_t i = 0; i < t->n; i++)
		if (t->keys[i].type != 0) {
			int d = TEST_FAIL("map delete", NULL,
					  bpf_map_delete_elem(p->policy_fd, &t->keys[i]));
			if (d < 0 && d != -ENOENT) {
				e = error_set(d, "cannot delete from %s: %s", DEVPROG_POLICY_NAME,
					      strerror(-d));
				goto out;
			}
		}
	e = TEST_FAIL("map delete", NULL, bpf_map_delete_elem(p->policy_fd, &marker));
	if (e == -ENOENT)
		e = 0;
	else if (e < 0)
		e = error_set(e, "cannot delete from %s: %s", DEVPROG_POLICY_NAME, strerror(-e));
out:
	devpolicy_ticket_done(t);
	return e;
}

void devpolicy_ticket_done(struct devpolicy_ticket *t)
{
	free(t->keys);
	*t = (struct devpolicy_ticket){0};
}

int jobcg_devpolicy_revoke_id(struct jobcg_devpolicy *p, uint64_t cgroup_id)
{
	if (!p || p->mode != JOBCG_DEVPROG_NODE)
		return error_set(-EBADF, "device policy not open in node mode");
	return node_revoke(p, NULL, cgroup_id);
}

int jobcg_devpolicy_revoke(struct jobcg_devpolicy *p, const char *cgroup_path)
{
	_cleanup_free_ char *canon = NULL;
	unsigned rel;
	uint64_t id;
	int e;

	if (!p)
		return error_set(-EINVAL, "device policy missing");
	if ((e = resolve_member(p, cgroup_path, &canon, &id, &rel)) < 0)
		return e;
	if (p->mode == JOBCG_DEVPROG_NODE && (e = node_revoke(p, canon, id)) < 0)
		return e;
	/* Also in node mode: programs left from a run in linear mode must not outlive the job. */
	return detach_linear(canon);
}

int devpolicy_grant_bound(struct jobcg_devpolicy *p, const char *cgroup_path,
			  const struct jobcg_devrule *allowed, size_t n)
{
	_cleanup_free_ char *canon = NULL;
	unsigned rel;
	uint64_t id;
	int e;

	if (p->mode != JOBCG_DEVPROG_NODE)
		return 0; /* linear programs bound nothing above a job */
	if ((e = devpolicy_check_rules(allowed, n, true)) < 0 ||
	    (e = resolve_member(p, cgroup_path, &canon, &id, &rel)) < 0)
		return e;
	if (rel != DEVPROG_LEVEL_RESV)
		return error_set(-EINVAL, "cgroup %s is not a reservation's level", canon);
	return node_grant(p, canon, id, rel | DEVPROG_MARKER_BOUND, allowed, n);
}

static int reserve_keys(const struct jobcg_devrule *rules, size_t n, uint64_t id,
			struct devprog_policy_key **ret, size_t *ret_n)
{
	_cleanup_free_ struct devprog_policy_key *keys = calloc(2 * n + 1, sizeof(*keys));
	size_t nk = 0;

	if (!keys)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct devprog_managed_key k[2];
		size_t c = devprog_rule_keys(&rules[i], k);

		for (size_t j = 0; j < c; j++) {
			if (k[j].major == DEVPROG_ANY || k[j].minor == DEVPROG_ANY)
				return error_set(-EINVAL,
						 "a reserved device must be one device, not a "
						 "wildcard rule");
			keys[nk++] = (struct devprog_policy_key){id, k[j].type, k[j].major,
								 k[j].minor, DEVPROG_PAD_RESERVED};
		}
	}
	*ret = TAKE_PTR(keys);
	*ret_n = nk;
	return 0;
}

int devpolicy_reserve(struct jobcg_devpolicy *p, const char *resv_path,
		      const struct jobcg_devrule *rules, size_t n)
{
	_cleanup_free_ struct devprog_policy_key *own = NULL, *flags = NULL;
	_cleanup_free_ char *canon = NULL;
	struct devprog_policy_value v = {JOBCG_DEV_ACC_ALL};
	size_t no = 0, nf = 0;
	unsigned rel;
	uint64_t id;
	int e;

	if (p->mode != JOBCG_DEVPROG_NODE || n == 0)
		return 0;
	if ((e = resolve_member(p, resv_path, &canon, &id, &rel)) < 0)
		return e;
	if (rel != DEVPROG_LEVEL_RESV)
		return error_set(-EINVAL, "cgroup %s is not a reservation's level", canon);
	if ((e = reserve_keys(rules, n, id, &own, &no)) < 0 ||
	    (e = reserve_keys(rules, n, 0, &flags, &nf)) < 0)
		return e;
	/* Owner entries first: once a device is flagged reserved, its reservation already has it.
	 */
	for (size_t i = 0; i < no; i++)
		if (TEST_FAIL("map update", canon,
			      bpf_map_update_elem(p->policy_fd, &own[i], &v, BPF_ANY)) < 0)
			goto fail;
	for (size_t i = 0; i < nf; i++)
		if (TEST_FAIL("map update", canon,
			      bpf_map_update_elem(p->policy_fd, &flags[i], &v, BPF_ANY)) < 0)
			goto fail;
	return 0;
fail:
	e = negative_errno();
	/* Only our own keys: a flag may be another reservation's too. One left without its owner
	 * denies the device everywhere until the caller drops the flags no reservation owns. */
	(void)devpolicy_unreserve_owner(p, id, rules, n);
	return error_set(e, "cannot update %s: %s", DEVPROG_POLICY_NAME, strerror(-e));
}

static int keys_delete(struct jobcg_devpolicy *p, const struct devprog_policy_key *k, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (bpf_map_delete_elem(p->policy_fd, &k[i]) < 0 && errno != ENOENT)
			return error_set(negative_errno(), "cannot delete from %s: %s",
					 DEVPROG_POLICY_NAME, strerror(errno));
	return 0;
}

int devpolicy_unreserve_owner(struct jobcg_devpolicy *p, uint64_t resv_id,
			      const struct jobcg_devrule *rules, size_t n)
{
	_cleanup_free_ struct devprog_policy_key *own = NULL;
	size_t no = 0;
	int e;

	if (p->mode != JOBCG_DEVPROG_NODE || n == 0 || resv_id == 0)
		return 0;
	if ((e = reserve_keys(rules, n, resv_id, &own, &no)) < 0)
		return e;
	return keys_delete(p, own, no);
}

int devpolicy_unreserve_flag(struct jobcg_devpolicy *p, const struct jobcg_devrule *rules, size_t n)
{
	_cleanup_free_ struct devprog_policy_key *flags = NULL;
	size_t nf = 0;
	int e;

	if (p->mode != JOBCG_DEVPROG_NODE || n == 0)
		return 0;
	if ((e = reserve_keys(rules, n, 0, &flags, &nf)) < 0)
		return e;
	return keys_delete(p, flags, nf);
}

int devpolicy_reserved_list(struct jobcg_devpolicy *p, struct devpolicy_reserved **ret,
			    size_t *ret_n)
{
	_cleanup_free_ struct devpolicy_reserved *v = NULL;
	struct devprog_policy_key key, next;
	size_t n = 0, cap = 0, seen = 0;
	bool first = true;

	if (p->mode != JOBCG_DEVPROG_NODE) {
		*ret = NULL;
		*ret_n = 0;
		return 0;
	}
	while (bpf_map_get_next_key(p->policy_fd, first ? NULL : &key, &next) == 0) {
		first = false;
		key = next;
		if (++seen > POLICY_SCAN_MAX)
			return error_set(-EAGAIN, "policy map kept changing while being read");
		if (next.pad != DEVPROG_PAD_RESERVED)
			continue;
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			struct devpolicy_reserved *nv = realloc(v, nc * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			v = nv;
			cap = nc;
		}
		v[n++] = (struct devpolicy_reserved){next.cgroup_id,
						     next.type == BPF_DEVCG_DEV_BLOCK ? 'b' : 'c',
						     next.major, next.minor};
	}
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

bool devpolicy_node_mode(const struct jobcg_devpolicy *p)
{
	return p && p->mode == JOBCG_DEVPROG_NODE;
}

int jobcg_devpolicy_gc(struct jobcg_devpolicy *p, size_t *ret_removed)
{
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_close_ int mnt_fd = -1;
	struct devprog_policy_key key, next;
	size_t n = 0, cap = 0, seen = 0, removed = 0;
	bool first = true;
	int e;

	if (!p || p->mode != JOBCG_DEVPROG_NODE)
		return error_set(-EBADF, "device policy not open in node mode");
	while (bpf_map_get_next_key(p->policy_fd, first ? NULL : &key, &next) == 0) {
		first = false;
		key = next;
		if (++seen > POLICY_SCAN_MAX)
			return error_set(-EAGAIN, "policy map kept changing while being read");
		if (next.type != 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			uint64_t *nv = realloc(ids, nc * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			ids = nv;
			cap = nc;
		}
		ids[n++] = next.cgroup_id;
	}
	mnt_fd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mnt_fd < 0)
		return error_set(negative_errno(), "cannot open %s: %s", p->root, strerror(errno));
	for (size_t i = 0; i < n; i++) {
		struct {
			struct file_handle fh;
			uint64_t id;
		} h = {.fh.handle_bytes = sizeof(uint64_t), .id = ids[i]};
		int fd;

		/*
		 * Ask the kernel whether that cgroup id still exists rather than comparing with a
		 * walk of the tree, which would race with cgroups created and granted meanwhile.
		 * Cgroup file handles are of type FILEID_KERNFS (0xfe).
		 */
		h.fh.handle_type = 0xfe;
		fd = open_by_handle_at(mnt_fd, &h.fh, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			continue;
		}
		if (errno != ESTALE && errno != ENOENT)
			return error_set(negative_errno(), "cannot check cgroup id %" PRIu64 ": %s",
					 ids[i], strerror(errno));
		if ((e = jobcg_devpolicy_revoke_id(p, ids[i])) < 0)
			return e;
		removed++;
	}
	if (ret_removed)
		*ret_removed = removed;
	return 0;
}
