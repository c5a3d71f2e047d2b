/* jobcg: grant and revoke device access for job/step/task cgroups (node program or linear). */
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
#include "devprog.h"
#include "jobcg/devices.h"
#include "log.h"
#include "tree.h"
#include "util.h"

#define TREE_DEPTH_MAX	8	/* root/job/step/user/task is 4; leave room */
#define TREE_DIRS_MAX	200000u /* cgroups we are willing to walk when resolving ids */
#define POLICY_SCAN_MAX (DEVPROG_POLICY_MAX + 1024u)

struct jobcg_devpolicy {
	enum jobcg_device_program mode;
	char *root; /* absolute, canonical */
	uint64_t root_id;
	unsigned root_level; /* absolute cgroup level of the root */
	char *pin_dir;	     /* node mode */
	int prog_fd, managed_fd, policy_fd;
	uint32_t policy_id; /* node mode: the id of the map behind policy_fd */
	struct jobcg_devrule *managed;
	size_t n_managed;
	char *fallback_reason;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

JOBCG_EXPORT void jobcg_devpolicy_free(struct jobcg_devpolicy *p)
{
	if (!p)
		return;
	close_fd(&p->prog_fd);
	close_fd(&p->managed_fd);
	close_fd(&p->policy_fd);
	free(p->root);
	free(p->pin_dir);
	free(p->managed);
	free(p->fallback_reason);
	free(p);
}

static inline void devpolicy_freep(struct jobcg_devpolicy **p)
{
	jobcg_devpolicy_free(*p);
}

JOBCG_EXPORT int jobcg_cgroup_id(const char *path, uint64_t *ret)
{
	struct {
		struct file_handle fh;
		uint64_t id;
	} h = {.fh.handle_bytes = sizeof(uint64_t)};
	int mnt_id;
	struct stat st;

	/* The cgroup id is the kernfs node id, which name_to_handle_at() returns as 8 bytes. */
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mnt_id, 0) == 0 && h.fh.handle_bytes == 8) {
		*ret = h.id;
		return 0;
	}
	if (stat(path, &st) < 0)
		return error_set(negative_errno(), "cannot stat cgroup %s: %s", path,
				 strerror(errno));
	*ret = (uint64_t)st.st_ino;
	return 0;
}

/* Canonical path of a cgroup v2 directory and its absolute level (depth below the v2 root). */
static int cg_resolve(const char *path, char **ret_path, unsigned *ret_level)
{
	_cleanup_free_ char *canon = NULL;
	struct statfs sf;
	struct stat st, up;
	unsigned level = 0;

	if (!path || path[0] != '/')
		return error_set(-EINVAL, "cgroup path '%s' must be absolute", path ? path : "");
	canon = realpath(path, NULL);
	if (!canon)
		return error_set(negative_errno(), "cgroup %s: %s", path, strerror(errno));
	if (statfs(canon, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
		return error_set(-ENOTDIR, "%s is not a cgroup v2 directory", canon);
	if (stat(canon, &st) < 0)
		return error_set(negative_errno(), "cgroup %s: %s", canon, strerror(errno));
	/* Walk up while still on the same cgroup2 mount; each step is one cgroup level. */
	{
		_cleanup_free_ char *cur = strdup(canon);
		if (!cur)
			return -ENOMEM;
		for (;;) {
			char *slash = strrchr(cur, '/');
			if (!slash || slash == cur)
				break;
			*slash = 0;
			if (stat(cur, &up) < 0 || up.st_dev != st.st_dev)
				break;
			if (statfs(cur, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
				break;
			if (++level > 4096)
				return error_set(-ELOOP, "cgroup %s is implausibly deep", canon);
		}
	}
	if (ret_path)
		*ret_path = TAKE_PTR(canon);
	if (ret_level)
		*ret_level = level;
	return 0;
}

static int check_rules(const struct jobcg_devrule *r, size_t n, bool must_allow)
{
	int e;

	if (n > DEVPROG_RULES_MAX)
		return error_set(-E2BIG, "%zu device rules, at most %u are supported", n,
				 DEVPROG_RULES_MAX);
	if (n > 0 && !r)
		return error_set(-EINVAL, "device rules missing");
	for (size_t i = 0; i < n; i++) {
		if ((e = devprog_rule_check(&r[i])) < 0)
			return e;
		if (must_allow && !r[i].allow)
			return error_set(-EINVAL,
					 "device rule %zu: only allow rules can be granted", i);
	}
	return 0;
}

static int pin_path(const struct jobcg_devpolicy *p, const char *name, char **ret)
{
	char *s = strdup_printf("%s/%s", p->pin_dir, name);
	if (!s)
		return -ENOMEM;
	*ret = s;
	return 0;
}

static void unpin_all(const struct jobcg_devpolicy *p)
{
	static const char *const names[] = {DEVPROG_PIN_PROG, DEVPROG_PIN_MANAGED,
					    DEVPROG_PIN_POLICY};

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		_cleanup_free_ char *path = NULL;
		if (pin_path(p, names[i], &path) == 0)
			(void)unlink(path);
	}
}

static int prog_attached_at(int cgroup_fd, int prog_fd, bool *ret)
{
	_cleanup_free_ uint32_t *ids = NULL;
	uint32_t id;
	size_t n;
	int e;

	if ((e = bpfsys_prog_info(prog_fd, &id, NULL)) < 0 ||
	    (e = bpfsys_query(cgroup_fd, &ids, &n)) < 0)
		return e;
	*ret = false;
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			*ret = true;
	return 0;
}

/* Open the three pins if they all exist and look like ours; -ENOENT if none does. */
static int open_pins(struct jobcg_devpolicy *p)
{
	_cleanup_free_ char *pp = NULL, *pm = NULL, *pol = NULL;
	char name[BPF_OBJ_NAME_LEN];
	struct bpf_map_info mi;
	int e, found = 0;

	if ((e = pin_path(p, DEVPROG_PIN_PROG, &pp)) < 0 ||
	    (e = pin_path(p, DEVPROG_PIN_MANAGED, &pm)) < 0 ||
	    (e = pin_path(p, DEVPROG_PIN_POLICY, &pol)) < 0)
		return e;
	found += bpfsys_get_pinned(pp, &p->prog_fd) == 0;
	found += bpfsys_get_pinned(pm, &p->managed_fd) == 0;
	found += bpfsys_get_pinned(pol, &p->policy_fd) == 0;
	if (found == 0)
		return -ENOENT;
	if (found != 3)
		return error_set(-EBADF, "%s holds only part of the node program's pins",
				 p->pin_dir);
	if ((e = bpfsys_prog_info(p->prog_fd, NULL, name)) < 0)
		return e;
	if (strncmp(name, DEVPROG_NODE_NAME, sizeof(name)) != 0)
		return error_set(-EBADF, "%s is not a %s program", pp, DEVPROG_NODE_NAME);
	if ((e = bpfsys_map_info(p->managed_fd, NULL, &mi)) < 0)
		return e;
	if (mi.key_size != sizeof(struct devprog_managed_key) || mi.value_size != sizeof(uint32_t))
		return error_set(-EBADF, "%s has an unexpected layout", pm);
	if ((e = bpfsys_map_info(p->policy_fd, &p->policy_id, &mi)) < 0)
		return e;
	if (mi.key_size != sizeof(struct devprog_policy_key) ||
	    mi.value_size != sizeof(struct devprog_policy_value))
		return error_set(-EBADF, "%s has an unexpected layout", pol);
	return 0;
}

/* Create maps, load the program and pin all three. -ENOEXEC (error record set) when the
 * program does not load, so the caller can fall back to linear mode. */
static int create_pins(struct jobcg_devpolicy *p)
{
	_cleanup_free_ char *pp = NULL, *pm = NULL, *pol = NULL;
	struct devprog_buf b = {0};
	int e;

	if ((e = pin_path(p, DEVPROG_PIN_PROG, &pp)) < 0 ||
	    (e = pin_path(p, DEVPROG_PIN_MANAGED, &pm)) < 0 ||
	    (e = pin_path(p, DEVPROG_PIN_POLICY, &pol)) < 0)
		return e;
	/* Typed maps let `bpftool map dump` print field names; without BTF they still work. */
	static const struct bpfsys_field mk[] = {{"type", 4}, {"major", 4}, {"minor", 4}};
	static const struct bpfsys_field mv[] = {{"access", 4}};
	static const struct bpfsys_field pk[] = {
	    {"cgroup_id", 8}, {"type", 4}, {"major", 4}, {"minor", 4}, {"pad", 4}};
	static const struct bpfsys_field pv[] = {{"access", 4}};
	static const struct bpfsys_struct types[] = {
	    {"jobcg_managed_key", mk, 3},
	    {"jobcg_managed_value", mv, 1},
	    {"jobcg_policy_key", pk, 5},
	    {"jobcg_policy_value", pv, 1},
	};
	_cleanup_close_ int btf_fd = -1;
	uint32_t tid[4] = {0};
	int be = bpfsys_btf_load(types, 4, &btf_fd, tid);
	if (be < 0)
		log_debug("policy maps without BTF types: %s", strerror(-be));

	if ((e = bpfsys_map_create(DEVPROG_MANAGED_NAME, sizeof(struct devprog_managed_key),
				   sizeof(uint32_t), DEVPROG_MANAGED_MAX, 0, btf_fd, tid[0], tid[1],
				   &p->managed_fd)) < 0)
		return e;
	/* No prealloc: a full-size preallocated policy map would pin a lot of kernel memory. */
	if ((e = bpfsys_map_create(DEVPROG_POLICY_NAME, sizeof(struct devprog_policy_key),
				   sizeof(struct devprog_policy_value), DEVPROG_POLICY_MAX,
				   BPF_F_NO_PREALLOC, btf_fd, tid[2], tid[3], &p->policy_fd)) < 0)
		return e;
	if ((e = devprog_node_builder(p->managed_fd, p->policy_fd, p->root_level, p->root_id, &b)) <
	    0)
		return e;
	e = bpfsys_devprog_load(DEVPROG_NODE_NAME, b.insns, b.n, &p->prog_fd);
	devprog_buf_done(&b);
	if (e == -EPERM)
		return e; /* no privilege: a linear program would not load either */
	if (e < 0)
		return -ENOEXEC;
	if ((e = bpfsys_pin(p->managed_fd, pm)) < 0 || (e = bpfsys_pin(p->policy_fd, pol)) < 0 ||
	    (e = bpfsys_pin(p->prog_fd, pp)) < 0) {
		unpin_all(p);
		return e;
	}
	return 0;
}

/* Make the managed map hold exactly the keys of p->managed. */
static int cmp_mkey(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct devprog_managed_key));
}

/*
 * Keys of type 0 (never a device type: the program looks up 1 for block, 2 for char) hold a
 * digest of the whole managed set, so that an open, which every step does, compares two
 * entries instead of walking up to DEVPROG_MANAGED_MAX keys.
 */
#define DIGEST_TYPE 0u

static uint64_t managed_digest(const struct devprog_managed_key *k, size_t n)
{
	const unsigned char *b = (const unsigned char *)k;
	uint64_t h = 0xcbf29ce484222325ull ^ n; /* FNV-1a over the sorted keys */

	for (size_t i = 0; i < n * sizeof(*k); i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static bool digest_matches(int fd, uint64_t d)
{
	struct devprog_managed_key lo = {DIGEST_TYPE, 0, 0}, hi = {DIGEST_TYPE, 0, 1};
	uint32_t vl, vh;

	return bpf_map_lookup_elem(fd, &lo, &vl) == 0 && bpf_map_lookup_elem(fd, &hi, &vh) == 0 &&
	       vl == (uint32_t)d && vh == (uint32_t)(d >> 32);
}

static int digest_set(int fd, const uint64_t *d)
{
	struct devprog_managed_key lo = {DIGEST_TYPE, 0, 0}, hi = {DIGEST_TYPE, 0, 1};
	uint32_t vl, vh;

	if (!d) {
		(void)bpf_map_delete_elem(fd, &lo);
		(void)bpf_map_delete_elem(fd, &hi);
		return 0;
	}
	vl = (uint32_t)*d;
	vh = (uint32_t)(*d >> 32);
	if (bpf_map_update_elem(fd, &lo, &vl, BPF_ANY) < 0 ||
	    bpf_map_update_elem(fd, &hi, &vh, BPF_ANY) < 0)
		return negative_errno();
	return 0;
}

/* The managed map's keys for p->managed, sorted, and their digest. */
static int managed_want(const struct jobcg_devpolicy *p, struct devprog_managed_key **ret,
			size_t *ret_n, uint64_t *ret_digest)
{
	struct devprog_managed_key *want = calloc(2 * p->n_managed + 1, sizeof(*want));
	size_t n = 0;

	if (!want)
		return -ENOMEM;
	for (size_t j = 0; j < p->n_managed; j++)
		n += devprog_rule_keys(&p->managed[j], want + n);
	qsort(want, n, sizeof(*want), cmp_mkey);
	*ret_digest = managed_digest(want, n);
	*ret = want;
	*ret_n = n;
	return 0;
}

/* Already set up as wanted: pins ours, managed set the same, program attached at the root. */
static bool node_ready(struct jobcg_devpolicy *p)
{
	_cleanup_free_ struct devprog_managed_key *want = NULL;
	_cleanup_close_ int root_fd = -1;
	size_t n;
	uint64_t d;
	bool attached = false;

	if (open_pins(p) < 0 || managed_want(p, &want, &n, &d) < 0 ||
	    !digest_matches(p->managed_fd, d))
		return false;
	root_fd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return root_fd >= 0 && prog_attached_at(root_fd, p->prog_fd, &attached) == 0 && attached;
}

/* Make the managed map hold exactly the keys of p->managed, touching only what differs: this
 * runs at every open, on the launch path, with up to thousands of devices. */
static int sync_managed(struct jobcg_devpolicy *p)
{
	_cleanup_free_ struct devprog_managed_key *have = NULL, *want = NULL;
	struct devprog_managed_key key, next;
	size_t n_have = 0, n_want = 0;
	bool first = true;
	uint64_t d;
	int e;

	if ((e = managed_want(p, &want, &n_want, &d)) < 0)
		return e;
	if (digest_matches(p->managed_fd, d))
		return 0;
	/* The digest goes first and comes back last: a sync cut short is never taken as done. */
	(void)digest_set(p->managed_fd, NULL);
	have = calloc(DEVPROG_MANAGED_MAX, sizeof(*have));
	if (!have)
		return -ENOMEM;
	while (n_have < DEVPROG_MANAGED_MAX &&
	       bpf_map_get_next_key(p->managed_fd, first ? NULL : &key, &next) == 0) {
		key = next;
		first = false;
		if (next.type != DIGEST_TYPE)
			have[n_have++] = next;
	}
	qsort(have, n_have, sizeof(*have), cmp_mkey);
	for (size_t i = 0; i < n_have; i++)
		if (!bsearch(&have[i], want, n_want, sizeof(*want), cmp_mkey))
			(void)bpf_map_delete_elem(p->managed_fd, &have[i]);
	for (size_t i = 0; i < n_want; i++) {
		uint32_t v = JOBCG_DEV_ACC_ALL;
		if (bsearch(&want[i], have, n_have, sizeof(*have), cmp_mkey))
			continue;
		e = bpf_map_update_elem(p->managed_fd, &want[i], &v, BPF_ANY);
		if (e < 0)
			return error_set(e, "cannot update %s: %s", DEVPROG_MANAGED_NAME,
					 strerror(-e));
	}
	if ((e = digest_set(p->managed_fd, &d)) < 0)
		return error_set(e, "cannot update %s: %s", DEVPROG_MANAGED_NAME, strerror(-e));
	return 0;
}

static int devpolicy_new(const struct jobcg_config *conf, const char *root,
			 struct jobcg_devpolicy **ret)
{
	_cleanup_(devpolicy_freep) struct jobcg_devpolicy *p = calloc(1, sizeof(*p));
	const char *pin_base;
	int e;

	if (!p)
		return -ENOMEM;
	p->prog_fd = p->managed_fd = p->policy_fd = -1;
	p->mode = conf ? conf->cgroup.device_program : JOBCG_DEVPROG_NODE;
	if ((e = cg_resolve(root, &p->root, &p->root_level)) < 0)
		return e;
	if ((e = jobcg_cgroup_id(p->root, &p->root_id)) < 0)
		return e;
	pin_base =
	    conf && conf->cgroup.bpf_pin_dir ? conf->cgroup.bpf_pin_dir : "/sys/fs/bpf/jobcg";
	p->pin_dir =
	    strdup_printf("%s/root-%" PRIu64 "-v%d", pin_base, p->root_id, DEVPROG_LAYOUT_VERSION);
	if (!p->pin_dir)
		return -ENOMEM;
	*ret = TAKE_PTR(p);
	return 0;
}

/* Is the program FD exactly INSNS (names compared by the caller)? */
static bool prog_is(int fd, const struct devprog_buf *b)
{
	_cleanup_free_ struct bpf_insn *x = NULL;
	size_t n = 0;

	return bpfsys_prog_xlated(fd, &x, &n) == 0 && n == b->n &&
	       memcmp(x, b->insns, n * sizeof(*x)) == 0;
}

/*
 * Linear mode's guard (devprog.h): the program denying every managed device, attached at the
 * root so that a cgroup with no grant of its own falls under it. Nothing is written when it is
 * already there as wanted. A node program of ours left at the root by node mode (attached with
 * BPF_F_ALLOW_MULTI, which excludes an override program there) is detached first; any other
 * program at the root is not ours to replace, and the guard is refused: linear grants are then
 * refused too rather than made without it.
 */
static int ensure_guard(struct jobcg_devpolicy *p)
{
	_cleanup_close_ int root_fd = -1, prog_fd = -1;
	_cleanup_free_ uint32_t *ids = NULL;
	struct devprog_buf b = {0};
	uint32_t flags = 0;
	size_t n = 0;
	int e;

	root_fd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return error_set(negative_errno(), "cannot open %s: %s", p->root, strerror(errno));
	if ((e = devprog_build_linear(p->managed, p->n_managed, NULL, 0, &b)) < 0)
		return e;
	if ((e = bpfsys_query_flags(root_fd, &ids, &n, &flags)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		_cleanup_close_ int fd = -1;
		char name[BPF_OBJ_NAME_LEN];

		if (bpfsys_prog_by_id(ids[i], &fd) < 0)
			continue; /* detached meanwhile */
		if ((e = bpfsys_prog_info(fd, NULL, name)) < 0)
			goto out;
		if (strncmp(name, DEVPROG_GUARD_NAME, sizeof(name)) == 0) {
			if (n == 1 && !(flags & BPF_F_ALLOW_MULTI) && prog_is(fd, &b))
				goto out; /* in place */
		} else if (strncmp(name, DEVPROG_NODE_NAME, sizeof(name)) == 0 &&
			   (flags & BPF_F_ALLOW_MULTI)) {
			log_warning("linear mode: detaching the node device program left at %s",
				    p->root);
			if ((e = bpfsys_detach(fd, root_fd)) < 0)
				goto out;
			unpin_all(p);
			(void)rmdir(p->pin_dir);
		} else {
			e = error_set(
			    -EBUSY,
			    "cannot guard %s in linear mode: device program %u (%.*s) is "
			    "attached there; jobcg will not grant devices without its guard",
			    p->root, ids[i], (int)sizeof(name), name);
			goto out;
		}
	}
	if ((e = bpfsys_devprog_load(DEVPROG_GUARD_NAME, b.insns, b.n, &prog_fd)) < 0)
		goto out;
	/* Without BPF_F_ALLOW_MULTI an attach replaces the guard there, so the root is never
	 * unguarded while it changes. */
	if ((e = bpfsys_attach_override(prog_fd, root_fd)) < 0)
		jobcg_error_prefix("%s", p->root);
	else
		log_info("attached %s at %s", DEVPROG_GUARD_NAME, p->root);
out:
	devprog_buf_done(&b);
	return e;
}

/* Node mode after linear mode: the guard's override attachment excludes the node program's
 * multi attachment at the root, so it goes first. */
static int drop_guard(int root_fd)
{
	_cleanup_free_ uint32_t *ids = NULL;
	uint32_t flags = 0;
	size_t n = 0;
	int e;

	if ((e = bpfsys_query_flags(root_fd, &ids, &n, &flags)) < 0)
		return e;
	for (size_t i = 0; i < n; i++) {
		_cleanup_close_ int fd = -1;
		char name[BPF_OBJ_NAME_LEN];

		if (bpfsys_prog_by_id(ids[i], &fd) < 0 || bpfsys_prog_info(fd, NULL, name) < 0)
			continue;
		if (strncmp(name, DEVPROG_GUARD_NAME, sizeof(name)) == 0 &&
		    (e = bpfsys_detach(fd, root_fd)) < 0)
			return e;
	}
	return 0;
}

JOBCG_EXPORT int jobcg_devpolicy_open(const struct jobcg_config *conf, const char *root_cgroup_path,
				      const struct jobcg_devrule *managed, size_t n_managed,
				      struct jobcg_devpolicy **ret)
{
	_cleanup_(devpolicy_freep) struct jobcg_devpolicy *p = NULL;
	_cleanup_close_ int root_fd = -1, lock_fd = -1;
	bool created = false, attached = false;
	int e;

	if (!ret)
		return error_set(-EINVAL, "jobcg_devpolicy_open: ret missing");
	if ((e = check_rules(managed, n_managed, true)) < 0)
		return e;
	if ((e = devpolicy_new(conf, root_cgroup_path, &p)) < 0)
		return e;
	if (n_managed > 0) {
		p->managed = calloc(n_managed, sizeof(*managed));
		if (!p->managed)
			return -ENOMEM;
		memcpy(p->managed, managed, n_managed * sizeof(*managed));
	}
	p->n_managed = n_managed;
	if (p->mode == JOBCG_DEVPROG_LINEAR) {
		if (n_managed > 0 && (e = ensure_guard(p)) < 0)
			return e;
		*ret = TAKE_PTR(p);
		return 0;
	}

	/* The common case, every step of every job: nothing to create, lock or write. */
	if (node_ready(p)) {
		*ret = TAKE_PTR(p);
		return 0;
	}
	close_fd(&p->prog_fd);
	close_fd(&p->managed_fd);
	close_fd(&p->policy_fd);
	jobcg_error_clear();

	if ((e = bpfsys_ensure_pin_dir(p->pin_dir)) < 0)
		return e;
	/* Two jobcg processes starting together must not both create and attach a program. */
	lock_fd = open(p->pin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0)
		return error_set(negative_errno(), "cannot lock %s: %s", p->pin_dir,
				 strerror(errno));
	root_fd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return error_set(negative_errno(), "cannot open %s: %s", p->root, strerror(errno));

	e = open_pins(p);
	if (e == -EBADF) {
		/* Debris of an interrupted setup: nothing can be attached from it that we would
		 * keep. */
		log_warning("removing unusable pins in %s: %s", p->pin_dir,
			    jobcg_last_error()->message);
		if (p->prog_fd >= 0)
			(void)bpf_prog_detach2(p->prog_fd, root_fd, BPF_CGROUP_DEVICE);
		close_fd(&p->prog_fd);
		close_fd(&p->managed_fd);
		close_fd(&p->policy_fd);
		unpin_all(p);
		e = -ENOENT;
	}
	if (e == -ENOENT) {
		e = create_pins(p);
		if (e == -ENOEXEC) {
			p->fallback_reason = strdup(jobcg_last_error()->message);
			log_warning("node device program unavailable, using linear programs: %s",
				    p->fallback_reason ? p->fallback_reason : "");
			close_fd(&p->prog_fd);
			close_fd(&p->managed_fd);
			close_fd(&p->policy_fd);
			(void)rmdir(p->pin_dir);
			p->mode = JOBCG_DEVPROG_LINEAR;
			if (n_managed > 0 && (e = ensure_guard(p)) < 0)
				return e;
			*ret = TAKE_PTR(p);
			return 0;
		}
		if (e < 0)
			goto fail;
		created = true;
	} else if (e < 0) {
		goto fail;
	}
	if ((e = sync_managed(p)) < 0)
		goto fail;
	if ((e = prog_attached_at(root_fd, p->prog_fd, &attached)) < 0)
		goto fail;
	if (!attached) {
		if ((e = drop_guard(root_fd)) < 0 ||
		    (e = bpfsys_attach(p->prog_fd, root_fd, -1)) < 0)
			goto fail;
		log_info("attached %s at %s", DEVPROG_NODE_NAME, p->root);
	}
	*ret = TAKE_PTR(p);
	return 0;
fail:
	if (created) {
		unpin_all(p);
		(void)rmdir(p->pin_dir);
	}
	return e;
}

JOBCG_EXPORT int jobcg_devpolicy_open_pinned(const struct jobcg_config *conf,
					     const char *root_cgroup_path,
					     struct jobcg_devpolicy **ret)
{
	_cleanup_(devpolicy_freep) struct jobcg_devpolicy *p = NULL;
	int e;

	if ((e = devpolicy_new(conf, root_cgroup_path, &p)) < 0)
		return e;
	p->mode = JOBCG_DEVPROG_NODE;
	e = open_pins(p);
	if (e == -ENOENT)
		return error_set(-ENOENT, "no node device program pinned in %s", p->pin_dir);
	if (e < 0)
		return e;
	*ret = TAKE_PTR(p);
	return 0;
}

bool devpolicy_current(const struct jobcg_devpolicy *p)
{
	_cleanup_free_ char *pol = NULL;
	_cleanup_close_ int fd = -1;
	uint32_t id = 0;

	if (p->mode != JOBCG_DEVPROG_NODE)
		return true; /* nothing pinned to be replaced */
	return pin_path(p, DEVPROG_PIN_POLICY, &pol) == 0 && bpfsys_get_pinned(pol, &fd) == 0 &&
	       bpfsys_map_info(fd, &id, NULL) == 0 && id == p->policy_id;
}

JOBCG_EXPORT enum jobcg_device_program jobcg_devpolicy_mode(const struct jobcg_devpolicy *p)
{
	return p->mode;
}

JOBCG_EXPORT const char *jobcg_devpolicy_fallback_reason(const struct jobcg_devpolicy *p)
{
	return p->fallback_reason;
}

JOBCG_EXPORT const char *jobcg_devpolicy_root(const struct jobcg_devpolicy *p)
{
	return p->root;
}

JOBCG_EXPORT const char *jobcg_devpolicy_pin_dir(const struct jobcg_devpolicy *p)
{
	return p->mode == JOBCG_DEVPROG_NODE ? p->pin_dir : NULL;
}

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
	} else if ((e = cg_resolve(path, &canon, &level)) < 0) {
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

/* 0 and the entries listed for ID; 1 when there is no usable index. */
static int devkeys_get(const char *canon, uint64_t id, struct devprog_policy_key **ret,
		       size_t *ret_n)
{
	_cleanup_free_ uint8_t *buf = NULL;
	struct devkeys_head h;
	struct devprog_policy_key *keys;
	ssize_t sz = getxattr(canon, DEVKEYS_XATTR, NULL, 0), got;

	if (sz < (ssize_t)sizeof(h) || !(buf = malloc((size_t)sz)))
		return 1;
	got = getxattr(canon, DEVKEYS_XATTR, buf, (size_t)sz);
	if (got != sz)
		return 1; /* changed meanwhile: the map walk is always right */
	memcpy(&h, buf, sizeof(h));
	if (h.magic != DEVKEYS_MAGIC || h.cgroup_id != id ||
	    (size_t)sz != sizeof(h) + (size_t)h.n * sizeof(*keys))
		return 1;
	keys = calloc(h.n + 1, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	memcpy(keys, buf + sizeof(h), (size_t)h.n * sizeof(*keys));
	for (size_t i = 0; i < h.n; i++)
		if (keys[i].cgroup_id != id || keys[i].type == 0) {
			free(keys);
			return 1;
		}
	*ret = keys;
	*ret_n = h.n;
	return 0;
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
		if (setxattr(canon, DEVKEYS_XATTR, buf, sizeof(h) + n * sizeof(*k), 0) == 0)
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
		e = bpf_map_update_elem(p->policy_fd, &keys[i], &v, BPF_ANY);
		if (e < 0)
			goto fail;
	}
	v.access = marker_value;
	e = bpf_map_update_elem(p->policy_fd, &marker, &v, BPF_ANY);
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
static int linear_progs_of(int cg_fd, int **ret_fds, size_t *ret_n)
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

static void close_fds(int *fds, size_t n)
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
	if ((e = linear_progs_of(cg_fd, &fds, &nf)) < 0)
		return e;
	for (size_t i = 0; i < nf && e == 0; i++)
		e = bpfsys_detach(fds[i], cg_fd);
	close_fds(fds, nf);
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
	if ((e = linear_progs_of(cg_fd, &old, &n_old)) < 0)
		return e;
	/* Replace in place so the cgroup is never without its constraint. */
	e = bpfsys_attach(prog_fd, cg_fd, n_old > 0 ? old[0] : -1);
	if (e == 0)
		for (size_t i = 1; i < n_old; i++)
			(void)bpf_prog_detach2(old[i], cg_fd, BPF_CGROUP_DEVICE);
	close_fds(old, n_old);
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

JOBCG_EXPORT int jobcg_devpolicy_grant(struct jobcg_devpolicy *p, const char *cgroup_path,
				       const struct jobcg_devrule *allowed, size_t n)
{
	_cleanup_free_ char *canon = NULL;
	unsigned rel;
	uint64_t id;
	int e;

	if (!p)
		return error_set(-EINVAL, "device policy missing");
	if ((e = check_rules(allowed, n, true)) < 0)
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

	/* A cgroup without a marker was never granted (a fresh grant's entries that lost their
	 * marker are removed by the grant itself), so most revokes of a step's directories end
	 * with one lookup. */
	if (bpf_map_lookup_elem(p->policy_fd, &marker, &mv) < 0 && errno == ENOENT)
		return 0;
	/* The marker goes last: until then the cgroup stays constrained, never wider. */
	if ((e = policy_keys_of_cgroup(p->policy_fd, canon, cgroup_id, &keys, &n)) < 0)
		return e;
	for (size_t i = 0; i < n; i++)
		if (keys[i].type != 0) {
			e = bpf_map_delete_elem(p->policy_fd, &keys[i]);
			if (e < 0 && e != -ENOENT)
				return error_set(e, "cannot delete from %s: %s",
						 DEVPROG_POLICY_NAME, strerror(-e));
		}
	e = bpf_map_delete_elem(p->policy_fd, &marker);
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
			int d = bpf_map_delete_elem(p->policy_fd, &t->keys[i]);
			if (d < 0 && d != -ENOENT) {
				e = error_set(d, "cannot delete from %s: %s", DEVPROG_POLICY_NAME,
					      strerror(-d));
				goto out;
			}
		}
	e = bpf_map_delete_elem(p->policy_fd, &marker);
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

JOBCG_EXPORT int jobcg_devpolicy_revoke_id(struct jobcg_devpolicy *p, uint64_t cgroup_id)
{
	if (!p || p->mode != JOBCG_DEVPROG_NODE)
		return error_set(-EBADF, "device policy not open in node mode");
	return node_revoke(p, NULL, cgroup_id);
}

JOBCG_EXPORT int jobcg_devpolicy_revoke(struct jobcg_devpolicy *p, const char *cgroup_path)
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
	if ((e = check_rules(allowed, n, true)) < 0 ||
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
		if (bpf_map_update_elem(p->policy_fd, &own[i], &v, BPF_ANY) < 0)
			goto fail;
	for (size_t i = 0; i < nf; i++)
		if (bpf_map_update_elem(p->policy_fd, &flags[i], &v, BPF_ANY) < 0)
			goto fail;
	return 0;
fail:
	e = negative_errno();
	(void)devpolicy_unreserve(p, id, rules, n);
	return error_set(e, "cannot update %s: %s", DEVPROG_POLICY_NAME, strerror(-e));
}

int devpolicy_unreserve(struct jobcg_devpolicy *p, uint64_t resv_id,
			const struct jobcg_devrule *rules, size_t n)
{
	_cleanup_free_ struct devprog_policy_key *own = NULL, *flags = NULL;
	size_t no = 0, nf = 0;
	int e;

	if (p->mode != JOBCG_DEVPROG_NODE || n == 0)
		return 0;
	if ((e = reserve_keys(rules, n, resv_id, &own, &no)) < 0 ||
	    (e = reserve_keys(rules, n, 0, &flags, &nf)) < 0)
		return e;
	/* The flag first: never a moment where the device is flagged without its owner. */
	for (size_t i = 0; i < nf; i++)
		if (bpf_map_delete_elem(p->policy_fd, &flags[i]) < 0 && errno != ENOENT)
			return error_set(negative_errno(), "cannot delete from %s: %s",
					 DEVPROG_POLICY_NAME, strerror(errno));
	for (size_t i = 0; resv_id && i < no; i++)
		if (bpf_map_delete_elem(p->policy_fd, &own[i]) < 0 && errno != ENOENT)
			return error_set(negative_errno(), "cannot delete from %s: %s",
					 DEVPROG_POLICY_NAME, strerror(errno));
	return 0;
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

JOBCG_EXPORT int jobcg_devpolicy_gc(struct jobcg_devpolicy *p, size_t *ret_removed)
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

/* id -> path below the root, found by walking the tree (ids are inode numbers). */
struct idpath {
	uint64_t id;
	char *rel;
	int level;
};

struct walk {
	struct idpath *v;
	size_t n, cap;
};

static void walk_free(struct walk *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i].rel);
	free(w->v);
}

static int walk_tree(const char *abs, const char *rel, int level, struct walk *w)
{
	DIR *d;
	struct dirent *de;
	int e = 0;

	if (level > TREE_DEPTH_MAX)
		return 0;
	d = opendir(abs);
	if (!d)
		return 0; /* removed meanwhile */
	while ((de = readdir(d))) {
		_cleanup_free_ char *a = NULL, *r = NULL;
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (w->n >= TREE_DIRS_MAX) {
			e = error_set(-E2BIG, "more than %u cgroups below the root", TREE_DIRS_MAX);
			break;
		}
		a = strdup_printf("%s/%s", abs, de->d_name);
		r = rel ? strdup_printf("%s/%s", rel, de->d_name) : strdup(de->d_name);
		if (!a || !r) {
			e = -ENOMEM;
			break;
		}
		if (w->n == w->cap) {
			size_t nc = w->cap ? w->cap * 2 : 64;
			struct idpath *nv = realloc(w->v, nc * sizeof(*nv));
			if (!nv) {
				e = -ENOMEM;
				break;
			}
			w->v = nv;
			w->cap = nc;
		}
		w->v[w->n] = (struct idpath){.id = (uint64_t)de->d_ino, .level = level};
		(void)jobcg_cgroup_id(a, &w->v[w->n].id);
		w->v[w->n++].rel = TAKE_PTR(r);
		if ((e = walk_tree(a, w->v[w->n - 1].rel, level + 1, w)) < 0)
			break;
	}
	closedir(d);
	return e;
}

static const struct idpath *walk_find(const struct walk *w, uint64_t id)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->v[i].id == id)
			return &w->v[i];
	return NULL;
}

JOBCG_EXPORT void jobcg_devgrants_free(struct jobcg_devgrant *g, size_t n)
{
	if (!g)
		return;
	for (size_t i = 0; i < n; i++) {
		free(g[i].path);
		free(g[i].rules);
	}
	free(g);
}

static int grants_add(struct jobcg_devgrant **v, size_t *n, size_t *cap, uint64_t id,
		      struct jobcg_devgrant **ret)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].cgroup_id == id) {
			*ret = &(*v)[i];
			return 0;
		}
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct jobcg_devgrant *nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[*n] = (struct jobcg_devgrant){.cgroup_id = id, .level = -1};
	*ret = &(*v)[(*n)++];
	return 0;
}

static int rule_from_key(uint32_t type, uint32_t major, uint32_t minor, unsigned access,
			 struct jobcg_devrule *r)
{
	*r = (struct jobcg_devrule){.type = type == BPF_DEVCG_DEV_BLOCK ? 'b' : 'c',
				    .major = major,
				    .minor = minor,
				    .access = access & 7,
				    .allow = true};
	return 0;
}

static int cmp_grant(const void *a, const void *b)
{
	const struct jobcg_devgrant *x = a, *y = b;

	if (!x->path || !y->path)
		return x->path ? -1 : y->path ? 1 : (x->cgroup_id < y->cgroup_id ? -1 : 1);
	return strcmp(x->path, y->path);
}

static int list_node(struct jobcg_devpolicy *p, struct walk *w, struct jobcg_devgrant **v,
		     size_t *n, size_t *cap)
{
	struct devprog_policy_key key, next;
	struct devprog_policy_value val;
	size_t seen = 0;
	bool first = true;
	int e;

	while (bpf_map_get_next_key(p->policy_fd, first ? NULL : &key, &next) == 0) {
		struct jobcg_devgrant *g;
		first = false;
		key = next;
		if (++seen > POLICY_SCAN_MAX)
			return error_set(-EAGAIN, "policy map kept changing while being read");
		if (bpf_map_lookup_elem(p->policy_fd, &next, &val) < 0)
			continue;
		if (next.pad != 0)
			continue; /* reservation entries: devpolicy_reserved_list() */
		if ((e = grants_add(v, n, cap, next.cgroup_id, &g)) < 0)
			return e;
		if (next.type == 0) {
			g->level = (int)(val.access & ~DEVPROG_MARKER_BOUND);
			continue;
		}
		struct jobcg_devrule *nr = realloc(g->rules, (g->n_rules + 1) * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		g->rules = nr;
		rule_from_key(next.type, next.major, next.minor, val.access,
			      &g->rules[g->n_rules++]);
	}
	for (size_t i = 0; i < *n; i++) {
		const struct idpath *ip = walk_find(w, (*v)[i].cgroup_id);
		if (ip && !((*v)[i].path = strdup(ip->rel)))
			return -ENOMEM;
	}
	return 0;
}

static int list_linear(struct jobcg_devpolicy *p, struct walk *w, struct jobcg_devgrant **v,
		       size_t *n, size_t *cap)
{
	int e;

	for (size_t i = 0; i < w->n; i++) {
		_cleanup_free_ char *abs = strdup_printf("%s/%s", p->root, w->v[i].rel);
		_cleanup_close_ int cg_fd = -1;
		int *fds = NULL;
		size_t nf = 0;

		if (!abs)
			return -ENOMEM;
		cg_fd = open(abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (cg_fd < 0 || linear_progs_of(cg_fd, &fds, &nf) < 0)
			continue;
		for (size_t j = 0; j < nf; j++) {
			struct bpf_prog_info info = {0};
			uint32_t len = sizeof(info), cnt;
			_cleanup_free_ struct bpf_insn *insns = NULL;
			struct jobcg_devgrant *g;

			if (bpf_obj_get_info_by_fd(fds[j], &info, &len) < 0)
				continue;
			cnt = info.xlated_prog_len / sizeof(struct bpf_insn);
			insns = calloc(cnt + 1, sizeof(*insns));
			if (!insns) {
				close_fds(fds, nf);
				return -ENOMEM;
			}
			uint32_t id = info.id;
			info =
			    (struct bpf_prog_info){.xlated_prog_len = cnt * sizeof(*insns),
						   .xlated_prog_insns = (uint64_t)(uintptr_t)insns};
			len = sizeof(info);
			if (bpf_obj_get_info_by_fd(fds[j], &info, &len) < 0)
				continue;
			/* One entry per program: a cgroup with two is listed twice. */
			if ((e = grants_add(v, n, cap, UINT64_MAX - *n, &g)) < 0) {
				close_fds(fds, nf);
				return e;
			}
			g->cgroup_id = w->v[i].id;
			g->prog_id = id;
			g->level = w->v[i].level;
			g->path = strdup(w->v[i].rel);
			if (devprog_parse_linear(insns, cnt, &g->rules, &g->n_rules) < 0)
				log_warning("program %u on %s is not in jobcg's linear shape", id,
					    abs);
		}
		close_fds(fds, nf);
	}
	return 0;
}

JOBCG_EXPORT int jobcg_devpolicy_list(struct jobcg_devpolicy *p, struct jobcg_devgrant **ret,
				      size_t *ret_n)
{
	struct jobcg_devgrant *v = NULL;
	struct walk w = {0};
	size_t n = 0, cap = 0;
	int e;

	if (!p)
		return -EINVAL;
	e = walk_tree(p->root, NULL, 1, &w);
	if (e == 0)
		e = p->mode == JOBCG_DEVPROG_NODE ? list_node(p, &w, &v, &n, &cap)
						  : list_linear(p, &w, &v, &n, &cap);
	walk_free(&w);
	if (e < 0) {
		jobcg_devgrants_free(v, n);
		return e;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_grant);
	*ret = v;
	*ret_n = n;
	return 0;
}

static int cmp_rule(const void *a, const void *b)
{
	const struct jobcg_devrule *x = a, *y = b;

	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->major != y->major)
		return x->major < y->major ? -1 : 1;
	if (x->minor != y->minor)
		return x->minor < y->minor ? -1 : 1;
	return 0;
}

bool devpolicy_manages_any(const struct jobcg_devpolicy *p)
{
	struct devprog_managed_key key, next;
	bool first = true;

	if (p->mode != JOBCG_DEVPROG_NODE)
		return p->n_managed > 0;
	/* The digest's keys (type 0) are not devices; a few lookups at most. */
	while (bpf_map_get_next_key(p->managed_fd, first ? NULL : &key, &next) == 0) {
		if (next.type != DIGEST_TYPE)
			return true;
		first = false;
		key = next;
	}
	return false;
}

JOBCG_EXPORT int jobcg_devpolicy_managed(struct jobcg_devpolicy *p, struct jobcg_devrule **ret,
					 size_t *ret_n)
{
	_cleanup_free_ struct jobcg_devrule *v = NULL;
	size_t n = 0;

	if (!p)
		return -EINVAL;
	if (p->mode == JOBCG_DEVPROG_NODE) {
		struct devprog_managed_key key, next;
		bool first = true;
		v = calloc(DEVPROG_MANAGED_MAX, sizeof(*v));
		if (!v)
			return -ENOMEM;
		while (n < DEVPROG_MANAGED_MAX &&
		       bpf_map_get_next_key(p->managed_fd, first ? NULL : &key, &next) == 0) {
			uint32_t acc = JOBCG_DEV_ACC_ALL;
			first = false;
			key = next;
			if (next.type == DIGEST_TYPE)
				continue;
			(void)bpf_map_lookup_elem(p->managed_fd, &next, &acc);
			rule_from_key(next.type, next.major, next.minor, acc, &v[n++]);
		}
	} else {
		v = calloc(p->n_managed + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		if (p->n_managed)
			memcpy(v, p->managed, p->n_managed * sizeof(*v));
		n = p->n_managed;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_rule);
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

JOBCG_EXPORT int jobcg_devpolicy_destroy(struct jobcg_devpolicy *p)
{
	int e = 0;

	if (!p)
		return 0;
	if (p->mode == JOBCG_DEVPROG_NODE) {
		_cleanup_close_ int root_fd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (root_fd >= 0 && p->prog_fd >= 0) {
			e = bpf_prog_detach2(p->prog_fd, root_fd, BPF_CGROUP_DEVICE);
			if (e == -ENOENT)
				e = 0;
			if (e < 0)
				error_set(e, "cannot detach %s from %s: %s", DEVPROG_NODE_NAME,
					  p->root, strerror(-e));
		}
		unpin_all(p);
		(void)rmdir(p->pin_dir);
	}
	jobcg_devpolicy_free(p);
	return e;
}

JOBCG_EXPORT int jobcg_devpolicy_managed_from_config(const struct jobcg_config *conf,
						     struct jobcg_devrule **ret, size_t *ret_n)
{
	_cleanup_free_ struct jobcg_devrule *v = NULL;
	size_t n = 0, total = 0;

	for (size_t i = 0; i < conf->gres.nrecords; i++)
		total += conf->gres.records[i].nfiles;
	if (total > DEVPROG_RULES_MAX)
		return error_set(-E2BIG, "gres.conf names %zu device files, at most %u supported",
				 total, DEVPROG_RULES_MAX);
	v = calloc(total + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < conf->gres.nrecords; i++)
		for (size_t j = 0; j < conf->gres.records[i].nfiles; j++) {
			const struct jobcg_gres_file *f = &conf->gres.records[i].files[j];
			bool dup = false;
			if (f->type != 'c' && f->type != 'b')
				continue; /* not stat()ed: nothing to manage */
			for (size_t k = 0; k < n && !dup; k++)
				dup = v[k].type == f->type && v[k].major == f->major &&
				      v[k].minor == f->minor;
			if (!dup)
				v[n++] = (struct jobcg_devrule){f->type, f->major, f->minor,
								JOBCG_DEV_ACC_ALL, true};
		}
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

/* Device names. */
struct devname {
	char type;
	uint32_t major, minor;
	char *path;
};

struct jobcg_devnames {
	struct devname *v;
	size_t n, cap;
};

#define DEVNAMES_MAX 65536u

JOBCG_EXPORT void jobcg_devnames_free(struct jobcg_devnames *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].path);
	free(d->v);
	free(d);
}

static int devnames_push(struct jobcg_devnames *d, const struct stat *st, char *path)
{
	if (d->n >= DEVNAMES_MAX) {
		free(path);
		return -E2BIG;
	}
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 256;
		struct devname *nv = realloc(d->v, nc * sizeof(*nv));
		if (!nv) {
			free(path);
			return -ENOMEM;
		}
		d->v = nv;
		d->cap = nc;
	}
	d->v[d->n++] = (struct devname){S_ISCHR(st->st_mode) ? 'c' : 'b', major(st->st_rdev),
					minor(st->st_rdev), path};
	return 0;
}

static void scan_dev(struct jobcg_devnames *d, const char *dir, int depth)
{
	DIR *dd;
	struct dirent *de;

	if (depth > 3 || !(dd = opendir(dir)))
		return;
	while ((de = readdir(dd)) && d->n < DEVNAMES_MAX) {
		_cleanup_free_ char *path = NULL;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		path = strdup_printf("%s/%s", dir, de->d_name);
		if (!path || lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			scan_dev(d, path, depth + 1);
			continue;
		}
		if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) &&
		    devnames_push(d, &st, TAKE_PTR(path)) < 0)
			break;
	}
	closedir(dd);
}

JOBCG_EXPORT int jobcg_devnames_new(struct jobcg_devnames **ret)
{
	struct jobcg_devnames *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	*ret = d;
	return 0;
}

JOBCG_EXPORT int jobcg_devnames_add(struct jobcg_devnames *d, const char *path)
{
	struct stat st;
	char *copy;

	if (!d || !path)
		return -EINVAL;
	if (stat(path, &st) < 0)
		return negative_errno();
	if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
		return -ENODEV;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	return devnames_push(d, &st, copy);
}

JOBCG_EXPORT int jobcg_devnames_scan(const char *dir, struct jobcg_devnames **ret)
{
	struct jobcg_devnames *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	scan_dev(d, dir ? dir : "/dev", 0);
	*ret = d;
	return 0;
}

JOBCG_EXPORT const char *jobcg_devnames_find(const struct jobcg_devnames *d, char type,
					     uint32_t major, uint32_t minor)
{
	const char *best = NULL;

	if (!d)
		return NULL;
	/* Prefer the shortest name: /dev/nvidia0 over /dev/char/195:0. */
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].type == type && d->v[i].major == major && d->v[i].minor == minor &&
		    (!best || strlen(d->v[i].path) < strlen(best)))
			best = d->v[i].path;
	return best;
}
