/* jobcg: the device policy of a tree root: its node program, maps and pins made, synced and
 * attached (or linear mode and its guard), an earlier layout's program detached, the managed set.
 */
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

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void jobcg_devpolicy_free(struct jobcg_devpolicy *p)
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

int jobcg_cgroup_id(const char *path, uint64_t *ret)
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
int devpolicy_cg_resolve(const char *path, char **ret_path, unsigned *ret_level)
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
	/* A file of the cgroup file system (cgroup.procs) has an inode too: no pins for it. */
	if (!S_ISDIR(st.st_mode))
		return error_set(-ENOTDIR, "%s is not a cgroup v2 directory", canon);
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

int devpolicy_check_rules(const struct jobcg_devrule *r, size_t n, bool must_allow)
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
	if (TEST_FAIL("map update", "digest", bpf_map_update_elem(fd, &lo, &vl, BPF_ANY)) < 0 ||
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
		e = TEST_FAIL("map update", DEVPROG_MANAGED_NAME,
			      bpf_map_update_elem(p->managed_fd, &want[i], &v, BPF_ANY));
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
	if ((e = devpolicy_cg_resolve(root, &p->root, &p->root_level)) < 0)
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

/*
 * An upgrade that changes the layout leaves the earlier jobcg's node program attached at the
 * root, pinned under root-<id>-v<N> with N < DEVPROG_LAYOUT_VERSION. Multi-attached beside
 * ours, it would still judge every open by a map nobody writes any more, denying every new
 * grant. It goes, with its pins; a program found in no such pin directory is not ours to
 * remove. Grants made under the old layout go with it: drain a node before such an upgrade.
 */
static int drop_old_layouts(const struct jobcg_devpolicy *p, int root_fd)
{
	_cleanup_free_ char *base = strdup(p->pin_dir);
	char *slash = base ? strrchr(base, '/') : NULL;
	int e;

	if (!slash)
		return base ? 0 : -ENOMEM;
	*slash = 0;
	for (int v = 1; v < DEVPROG_LAYOUT_VERSION; v++) {
		_cleanup_free_ char *dir =
		    strdup_printf("%s/root-%" PRIu64 "-v%d", base, p->root_id, v);
		_cleanup_free_ char *prog =
		    dir ? strdup_printf("%s/%s", dir, DEVPROG_PIN_PROG) : NULL;
		_cleanup_close_ int fd = -1;
		static const char *const names[] = {DEVPROG_PIN_PROG, DEVPROG_PIN_MANAGED,
						    DEVPROG_PIN_POLICY};

		if (!prog)
			return -ENOMEM;
		if (access(dir, F_OK) < 0)
			continue;
		if (bpfsys_get_pinned(prog, &fd) == 0) {
			e = bpfsys_detach(fd, root_fd);
			if (e == 0)
				log_warning(
				    "detached the node program of jobcg's device layout v%d "
				    "from %s: jobs granted under it lose their devices",
				    v, p->root);
			else if (e == -ENOENT)
				jobcg_error_clear(); /* pinned but no longer attached */
			else
				return e;
		}
		for (size_t i = 0; i < ELEMENTSOF(names); i++) {
			_cleanup_free_ char *pin = strdup_printf("%s/%s", dir, names[i]);
			if (pin)
				(void)unlink(pin);
		}
		(void)rmdir(dir);
	}
	return 0;
}

int jobcg_devpolicy_open(const struct jobcg_config *conf, const char *root_cgroup_path,
			 const struct jobcg_devrule *managed, size_t n_managed,
			 struct jobcg_devpolicy **ret)
{
	_cleanup_(devpolicy_freep) struct jobcg_devpolicy *p = NULL;
	_cleanup_close_ int root_fd = -1, lock_fd = -1;
	bool created = false, attached = false;
	int e;

	if (!ret)
		return error_set(-EINVAL, "jobcg_devpolicy_open: ret missing");
	if ((e = devpolicy_check_rules(managed, n_managed, true)) < 0)
		return e;
	if ((e = devpolicy_new(conf, root_cgroup_path, &p)) < 0)
		return e;
	/* The last line of defence for JOBCG_CONFIG_TOLERATE_GRES: the managed set given is a
	 * view without gres.conf, and syncing the node program to it would let every cgroup open
	 * the devices it leaves out. */
	if (conf && jobcg_config_gres_error(conf) &&
	    (p->mode == JOBCG_DEVPROG_NODE || n_managed > 0))
		return error_set(-EINVAL,
				 "%s (the device policy is not set up from a configuration that "
				 "lost gres.conf)",
				 jobcg_config_gres_error(conf));
	/* Nor from one past an error in cgroup.conf: ConstrainDevices= may be a default. */
	if (conf && jobcg_config_cgroup_error(conf) &&
	    (p->mode == JOBCG_DEVPROG_NODE || n_managed > 0))
		return error_set(-EINVAL,
				 "%s (the device policy is not set up from a configuration with "
				 "an error in cgroup.conf)",
				 jobcg_config_cgroup_error(conf));
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
		if ((e = drop_guard(root_fd)) < 0 || (e = drop_old_layouts(p, root_fd)) < 0 ||
		    (e = bpfsys_attach(p->prog_fd, root_fd, -1)) < 0)
			goto fail;
		if (created)
			log_info("attached %s at %s", DEVPROG_NODE_NAME, p->root);
		else
			log_warning("%s was pinned in %s but not attached at %s (a setup "
				    "interrupted?): attached it again",
				    DEVPROG_NODE_NAME, p->pin_dir, p->root);
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

int jobcg_devpolicy_open_pinned(const struct jobcg_config *conf, const char *root_cgroup_path,
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

int jobcg_devpolicy_attached(const struct jobcg_devpolicy *p, bool *ret)
{
	_cleanup_close_ int root_fd = -1;
	bool attached = false;
	int e;

	if (p->mode != JOBCG_DEVPROG_NODE) {
		*ret = true;
		return 0;
	}
	root_fd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return error_set(negative_errno(), "cannot open %s: %s", p->root, strerror(errno));
	if ((e = prog_attached_at(root_fd, p->prog_fd, &attached)) < 0)
		return e;
	*ret = attached;
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

int devpolicy_node_ident(const struct jobcg_devpolicy *p, struct devpolicy_node_ident *ret)
{
	struct devpolicy_node_ident id = {.root_id = p->root_id};
	char name[BPF_OBJ_NAME_LEN];
	int e;

	if (p->mode != JOBCG_DEVPROG_NODE || p->prog_fd < 0 || p->managed_fd < 0 ||
	    p->policy_fd < 0)
		return -ENOENT;
	if ((e = bpfsys_prog_info(p->prog_fd, &id.prog_id, name)) < 0 ||
	    (e = bpfsys_map_info(p->managed_fd, &id.managed_id, NULL)) < 0 ||
	    (e = bpfsys_map_info(p->policy_fd, &id.policy_id, NULL)) < 0)
		return e;
	if (strncmp(name, DEVPROG_NODE_NAME, sizeof(name)) != 0)
		return -ENOENT;
	*ret = id;
	return 0;
}

enum jobcg_device_program jobcg_devpolicy_mode(const struct jobcg_devpolicy *p)
{
	return p->mode;
}

const char *jobcg_devpolicy_fallback_reason(const struct jobcg_devpolicy *p)
{
	return p->fallback_reason;
}

const char *jobcg_devpolicy_root(const struct jobcg_devpolicy *p)
{
	return p->root;
}

const char *jobcg_devpolicy_pin_dir(const struct jobcg_devpolicy *p)
{
	return p->mode == JOBCG_DEVPROG_NODE ? p->pin_dir : NULL;
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

int jobcg_devpolicy_managed(struct jobcg_devpolicy *p, struct jobcg_devrule **ret, size_t *ret_n)
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
			devpolicy_rule_from_key(next.type, next.major, next.minor, acc, &v[n++]);
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

int jobcg_devpolicy_destroy(struct jobcg_devpolicy *p)
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

int jobcg_devpolicy_managed_from_config(const struct jobcg_config *conf, struct jobcg_devrule **ret,
					size_t *ret_n)
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
