/* jobcg: read a live cgroup's effective device programs (ids, attachment, translated
 * instructions, maps) from the kernel and decode them for that cgroup. */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpftext.h"
#include "bpfvm.h"
#include "inspect_internal.h"
#include "devpolicy.h"
#include "devprog.h"
#include "jobcg/inspect.h"
#include "log.h"
#include "testhook.h"
#include "util.h"

#define MAP_ENTRIES_MAX	 (1u << 20)
#define VALUE_STRIDE_MIN BPFVM_MAP_VALUE_MAX

struct mapsnap {
	uint32_t id;
	uint32_t type, key_size, value_size, stride;
	int off_major, off_minor; /* where the keys hold the device (map_hints()); -1: unknown */
	size_t n;
	uint8_t *keys;	 /* n * key_size, sorted by memcmp */
	uint8_t *values; /* n * stride, zero padded */
};

struct centry {
	uint32_t id;
	char name[16];
	struct bpf_insn *insns;
	size_t n;
	bool cg_dependent;
	struct mapsnap *maps;
	size_t nmaps;
	uint32_t (*hints)[2];
	size_t nhints;
	struct jobcg_decoded *decoded; /* when not cgroup dependent, once decoded */
	char *undecodable;	       /* reason the whole-space decode failed (runs still work) */
	bool decode_tried;
	char *opaque;	 /* reason, when it cannot even be run */
	int checked;	 /* bpfvm_check(): 0 not yet, 1 passed, -errno failed */
	int node;	 /* a trusted node program: 0 not yet known, 1 yes, -1 no */
	bool unresolved; /* helper calls not named yet (centry_complete()) */
};

struct jobcg_progcache {
	struct centry *e;
	size_t n, cap;
	/* The last cgroup asked about and its ancestors' ids (levels 0..last_depth): a walk asks
	 * about siblings and children in a row, whose ancestors then cost no path lookups. */
	char *last_path;
	uint64_t *last_ids;
	int last_depth;
	/* jobcg's node programs as their pins name them (jobcg_progcache_trust_policy()). */
	struct devpolicy_node_ident *nodes;
	size_t n_nodes;
	struct progcache_counts counts;
};

struct inspect_priv {
	struct jobcg_cginspect pub;
	struct jobcg_decoded **owned; /* per-cgroup decodes and their reasons */
	size_t nowned;
	char **reasons;
	struct jobcg_progcache *own_cache;
	uint64_t *ancestors; /* ids of levels 0..depth */
	int depth;
	bool anc_known; /* level 0 is the real root (cg_levels_real()) */
};

JOBCG_EXPORT int jobcg_progcache_new(struct jobcg_progcache **ret)
{
	return_if_null(ret);
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

static void centry_done(struct centry *e)
{
	free(e->insns);
	for (size_t k = 0; k < e->nmaps; k++) {
		free(e->maps[k].keys);
		free(e->maps[k].values);
	}
	free(e->maps);
	free(e->hints);
	jobcg_decoded_free(e->decoded);
	free(e->undecodable);
	free(e->opaque);
}

JOBCG_EXPORT void jobcg_progcache_free(struct jobcg_progcache *c)
{
	if (!c)
		return;
	for (size_t k = 0; k < c->n; k++)
		centry_done(&c->e[k]);
	free(c->e);
	free(c->last_path);
	free(c->last_ids);
	free(c->nodes);
	free(c);
}

int jobcg_progcache_trust_policy(struct jobcg_progcache *c, const struct jobcg_devpolicy *p)
{
	struct devpolicy_node_ident id;
	int r = devpolicy_node_ident(p, &id);
	void *t;

	if (r < 0)
		return r;
	for (size_t k = 0; k < c->n_nodes; k++)
		if (c->nodes[k].prog_id == id.prog_id)
			return 0;
	t = realloc(c->nodes, (c->n_nodes + 1) * sizeof(*c->nodes));
	if (!t)
		return -ENOMEM;
	c->nodes = t;
	c->nodes[c->n_nodes++] = id;
	return 0;
}

void progcache_counts(const struct jobcg_progcache *c, struct progcache_counts *ret)
{
	*ret = c->counts;
}

bool inspect_mounts_cgroup2(const char *line, char dir[PATH_MAX])
{
	char dev[256], type[64];

	return sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 && streq(type, "cgroup2");
}

bool inspect_mountinfo_v1_devices(const char *line, char mp[PATH_MAX])
{
	const char *sep = strstr(line, " - ");
	char fstype[64], src[256], opts[1024];
	unsigned a, b;
	int end = 0;

	/* The mount point is the fifth field, before the " - ": of a line with fewer fields
	 * there, the "-" itself would be taken for it. */
	if (!sep || sscanf(line, "%u %u %*s %*s %4095s%n", &a, &b, mp, &end) != 3 ||
	    line + end > sep || sscanf(sep + 3, "%63s %255s %1023s", fstype, src, opts) != 3 ||
	    !streq(fstype, "cgroup"))
		return false;
	for (char *save = NULL, *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (streq(t, "devices"))
			return true;
	return false;
}

JOBCG_EXPORT int jobcg_cgroup2_mount(const char **ret)
{
	return_if_null(ret);
	static char mount[PATH_MAX];
	_cleanup_fclose_ FILE *f = NULL;
	char line[4096];

	if (mount[0]) {
		*ret = mount;
		return 0;
	}
	f = fopen("/proc/self/mounts", "re");
	if (!f)
		return error_set(negative_errno(), "cannot read /proc/self/mounts");
	while (fgets(line, sizeof(line), f)) {
		char dir[PATH_MAX];

		if (inspect_mounts_cgroup2(line, dir)) {
			snprintf(mount, sizeof(mount), "%s", dir);
			*ret = mount;
			return 0;
		}
	}
	return error_set(-ENOENT, "no cgroup v2 mount found in /proc/self/mounts");
}

/* The mount point of a v1 devices hierarchy into @buf, or "" if there is none. */
static void v1_devices_mount(char *buf, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];

	buf[0] = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX];

		if (inspect_mountinfo_v1_devices(line, mp)) {
			snprintf(buf, size, "%s", mp);
			return;
		}
	}
}

bool inspect_proc_cgroup_v1_devices(const char *text, char path[PATH_MAX])
{
	for (const char *line = text; *line;) {
		const char *eol = strchrnul(line, '\n'),
			   *c1 = memchr(line, ':', (size_t)(eol - line));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		bool devices = false;

		/* "ID:CONTROLLER,CONTROLLER:PATH"; v2's "0::PATH" has none */
		for (const char *t = c1 ? c1 + 1 : eol; c2 && t < c2;) {
			size_t n = strcspn(t, ",:");

			devices |= n == strlen("devices") && strncmp(t, "devices", n) == 0;
			t += n + (t[n] == ',');
		}
		if (devices) {
			size_t n = (size_t)(eol - c2 - 1);
			const char *cg = c2 + 1;

			/* An absolute path below the hierarchy's root; one seen from another cgroup
			 * namespace ("/../x") cannot be found under the mount. */
			if (n == 0 || n >= PATH_MAX || cg[0] != '/')
				return false;
			for (size_t i = 0; i + 3 <= n; i++)
				if (memcmp(cg + i, "/..", 3) == 0 &&
				    (i + 3 == n || cg[i + 3] == '/'))
					return false;
			if (n == 1)
				n = 0; /* the root: the mount point itself */
			memcpy(path, cg, n);
			path[n] = 0;
			return true;
		}
		line = *eol ? eol + 1 : eol;
	}
	return false;
}

/* What the v1 devices controller says for the processes of @path (via its first pid). */
static char *v1_detail(const char *path)
{
	char mount[PATH_MAX], p[PATH_MAX * 2], v1path[PATH_MAX] = "";
	_cleanup_free_ char *pidline = NULL, *list = NULL, *cgtext = NULL;

	v1_devices_mount(mount, sizeof(mount));
	if (!mount[0])
		return NULL;
	snprintf(p, sizeof(p), "%s/cgroup.procs", path);
	if (read_full_file_at(AT_FDCWD, p, 4096, &pidline, NULL) < 0 || !pidline[0])
		return strdup_printf(
		    "a cgroup v1 devices controller is mounted at %s: its devices.list rules apply "
		    "as well (no process here to find its v1 cgroup)",
		    mount);
	uint64_t v;
	const char *end;
	if (parse_u64_prefix(pidline, INT32_MAX, &v, &end) < 0 || (*end && *end != '\n') || !v)
		return strdup_printf(
		    "a cgroup v1 devices controller is mounted at %s: its devices.list rules apply "
		    "as well (%s starts with '%.20s', not a pid)",
		    mount, p, pidline);
	int pid = (int)v;
	snprintf(p, sizeof(p), "/proc/%d/cgroup", pid);
	if (read_full_file_at(AT_FDCWD, p, 1 << 20, &cgtext, NULL) < 0 ||
	    !inspect_proc_cgroup_v1_devices(cgtext, v1path))
		v1path[0] = 0;
	snprintf(p, sizeof(p), "%s%s/devices.list", mount, v1path);
	if (read_full_file_at(AT_FDCWD, p, 65536, &list, NULL) < 0)
		return strdup_printf("a cgroup v1 devices controller is mounted at %s: its "
				     "devices.list rules apply as well",
				     mount);
	/* One line: the rules joined with "; " (the list can be long; keep the start). */
	for (char *q = list; *q; q++)
		if (*q == '\n')
			*q = q[1] ? ';' : 0;
	return strdup_printf("cgroup v1 devices controller also active: pid %d is in %s%s, whose "
			     "devices.list is \"%.300s\"; both v1 and v2 must allow",
			     pid, mount, v1path, list);
}

JOBCG_EXPORT int jobcg_devices_v1_notes(char ***ret)
{
	return_if_null(ret);
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_strv_free_ char **notes = NULL;
	char line[4096];

	if (!f)
		return error_set(negative_errno(), "cannot read /proc/self/mountinfo");
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX];

		if (!inspect_mountinfo_v1_devices(line, mp))
			continue;
		char *n = strdup_printf("a cgroup v1 devices controller is mounted at %s: its "
					"devices.list rules apply as well (the kernel checks both)",
					mp);
		if (!n || strv_push(&notes, n) < 0)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(notes);
	return 0;
}

/* ---- reading programs and maps ---- */

static int perm_error(int r, const char *what)
{
	if (r == -EPERM || r == -EACCES)
		return error_set(-EPERM, "%s needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN): %s",
				 what, strerror(-r));
	return error_set(r, "%s: %s", what, strerror(-r));
}

static int sysctl_int(const char *path)
{
	_cleanup_free_ char *s = NULL;
	unsigned v;
	if (read_one_line_at(AT_FDCWD, path, &s) < 0 || parse_uint(s, INT32_MAX, &v) < 0)
		return -1;
	return (int)v;
}

/* qsort()'s comparator has no argument for the size: this thread's, as threads (the metrics
 * collector's, one per HTTP thread) snapshot maps of other key sizes at the same time. */
static __thread int key_cmp_size;
static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, (size_t)key_cmp_size);
}

/* Key then value, one lookup each: for kernels without batch lookups (before 5.6). */
static int snapshot_by_key(int fd, const struct bpf_map_info *info, size_t cap, uint32_t stride,
			   uint8_t **ret_keys, uint8_t **ret_values, size_t *ret_n)
{
	_cleanup_free_ uint8_t *keys = NULL, *values = NULL, *tmpv = NULL, *cur = NULL,
			       *next = NULL;
	size_t n = 0;
	int r;

	keys = malloc((size_t)info->key_size * (cap ? cap : 1));
	tmpv = malloc(info->value_size ? info->value_size : 1);
	cur = calloc(1, info->key_size);
	next = calloc(1, info->key_size);
	if (!keys || !tmpv || !cur || !next)
		return -ENOMEM;
	/* Keys first; a key deleted meanwhile is skipped at lookup. Bounded by max_entries. */
	bool first = true;
	while (n < cap) {
		r = bpf_map_get_next_key(fd, first ? NULL : cur, next);
		if (r < 0) {
			if (r == -ENOENT)
				break;
			return perm_error(r, "iterating a map");
		}
		first = false;
		memcpy(keys + n * info->key_size, next, info->key_size);
		memcpy(cur, next, info->key_size);
		n++;
	}
	key_cmp_size = (int)info->key_size;
	qsort(keys, n, info->key_size, key_cmp);
	values = calloc(n ? n : 1, stride);
	if (!values)
		return -ENOMEM;
	size_t w = 0;
	for (size_t k = 0; k < n; k++) {
		if (bpf_map_lookup_elem(fd, keys + k * info->key_size, tmpv) < 0)
			continue;
		memmove(keys + w * info->key_size, keys + k * info->key_size, info->key_size);
		memcpy(values + w * stride, tmpv, info->value_size);
		w++;
	}
	*ret_keys = TAKE_PTR(keys);
	*ret_values = TAKE_PTR(values);
	*ret_n = w;
	return 0;
}

/*
 * Keys and values a few thousand at a time (BPF_MAP_LOOKUP_BATCH): the policy map of a node
 * with a thousand jobs in a handful of system calls instead of two per entry. -EOPNOTSUPP
 * when the kernel has no batch lookup for this map (nothing read then).
 */
static int snapshot_batch(int fd, const struct bpf_map_info *info, size_t cap, uint32_t stride,
			  uint8_t **ret_keys, uint8_t **ret_values, size_t *ret_n)
{
	size_t ks = info->key_size, vs = info->value_size ? info->value_size : 1, rec = ks + vs;
	_cleanup_free_ uint8_t *recs = NULL, *kbuf = NULL, *vbuf = NULL, *keys = NULL,
			       *values = NULL;
	uint64_t in[8] = {0}, out[8] = {0}; /* the batch position: at most a key (<= 64 bytes) */
	uint32_t chunk = 4096;
	size_t n = 0, have = 0;
	bool first = true;

	if (ks > sizeof(in))
		return -EOPNOTSUPP;
	for (int rounds = 0; n < cap; rounds++) {
		uint32_t count = chunk;
		LIBBPF_OPTS(bpf_map_batch_opts, opts);
		int r;

		if (rounds > 4096)
			return error_set(-EAGAIN, "a map kept changing while it was read");
		if (have < chunk) {
			free(kbuf);
			free(vbuf);
			kbuf = malloc(chunk * ks);
			vbuf = malloc(chunk * vs);
			have = chunk;
			if (!kbuf || !vbuf)
				return -ENOMEM;
		}
		r = bpf_map_lookup_batch(fd, first ? NULL : in, out, kbuf, vbuf, &count, &opts);
		if (r < 0 && r != -ENOENT) {
			if (first && (r == -EINVAL || r == -524 /* ENOTSUPP */ || r == -EOPNOTSUPP))
				return -EOPNOTSUPP;
			if (r == -ENOSPC && chunk < (1u << 20)) {
				chunk *= 4; /* a bucket holds more than a chunk */
				continue;
			}
			return perm_error(r, "reading a map");
		}
		if (count > cap - n)
			count = (uint32_t)(cap - n);
		uint8_t *t = realloc(recs, (n + count) * rec + 1);
		if (!t)
			return -ENOMEM;
		recs = t;
		for (uint32_t k = 0; k < count; k++) {
			memcpy(recs + (n + k) * rec, kbuf + k * ks, ks);
			memcpy(recs + (n + k) * rec + ks, vbuf + k * vs, vs);
		}
		n += count;
		if (r == -ENOENT)
			break;
		memcpy(in, out, sizeof(in));
		first = false;
	}
	/* Sorted by key (key first in each record), then split. */
	key_cmp_size = (int)ks;
	qsort(recs, n, rec, key_cmp);
	keys = malloc(n ? n * ks : 1);
	values = calloc(n ? n : 1, stride);
	if (!keys || !values)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		memcpy(keys + k * ks, recs + k * rec, ks);
		memcpy(values + k * stride, recs + k * rec + ks, info->value_size);
	}
	*ret_keys = TAKE_PTR(keys);
	*ret_values = TAKE_PTR(values);
	*ret_n = n;
	return 0;
}

static int snapshot_map(uint32_t id, struct mapsnap *ret, char **ret_reason)
{
	_cleanup_close_ int fd = bpf_map_get_fd_by_id(id);
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	_cleanup_free_ uint8_t *keys = NULL, *values = NULL;
	size_t n = 0, cap;
	int r;

	if (fd < 0 && errno == ENOENT) {
		/* Dumps name maps by id: once the program is unloaded its maps are gone. */
		*ret_reason =
		    strdup_printf("uses map id %u, which no longer exists: decode the dump "
				  "while the program is loaded, or use 'jobcg devices' on "
				  "its cgroup",
				  id);
		return *ret_reason ? 0 : -ENOMEM;
	}
	if (fd < 0)
		return perm_error(-errno, "opening a map of the program");
	r = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (r < 0)
		return perm_error(r, "reading map information");
	if (info.type != BPF_MAP_TYPE_HASH && info.type != BPF_MAP_TYPE_ARRAY &&
	    info.type != BPF_MAP_TYPE_LRU_HASH) {
		*ret_reason =
		    strdup_printf("uses map %u (%s) of type %u, which decoding does not read", id,
				  info.name, info.type);
		return 0;
	}
	if (info.key_size == 0 || info.key_size > BPFVM_MAP_KEY_MAX || info.value_size > 65536) {
		*ret_reason =
		    strdup_printf("uses map %u (%s) with unusual key/value sizes", id, info.name);
		return 0;
	}
	cap = info.max_entries < MAP_ENTRIES_MAX ? info.max_entries : MAP_ENTRIES_MAX;
	uint32_t stride = info.value_size > VALUE_STRIDE_MIN ? info.value_size : VALUE_STRIDE_MIN;
	/* (tests read every map by key, as on a kernel before 5.6) */
	r = test_flag("no-map-batch") ? -EOPNOTSUPP
				      : snapshot_batch(fd, &info, cap, stride, &keys, &values, &n);
	if (r == -EOPNOTSUPP)
		r = snapshot_by_key(fd, &info, cap, stride, &keys, &values, &n);
	if (r < 0)
		return r;
	*ret = (struct mapsnap){.id = id,
				.type = info.type,
				.key_size = info.key_size,
				.value_size = info.value_size,
				.stride = stride,
				.n = n,
				.keys = TAKE_PTR(keys),
				.values = TAKE_PTR(values)};
	return 0;
}

/*
 * Devices named in map keys, for the layouts we know (jobcg, snapd). The layout is only a
 * candidate: the decoder trusts a lookup by device only when the program stored the major and
 * minor exactly at these offsets (decode_key_layout()); other maps get no hints, and a lookup
 * keyed by the device in them makes the decode opaque (running the program stays exact).
 */
static int map_hints(struct centry *e, struct mapsnap *m)
{
	int off_major, off_minor;

	m->off_major = m->off_minor = -1;
	if (m->type == BPF_MAP_TYPE_ARRAY)
		return 0; /* indexed by a number: not a table of devices we can list */

	switch (m->key_size) {
	case 9: /* snapd: packed {u8 type; u32 major; u32 minor} */
		off_major = 1, off_minor = 5;
		break;
	case 12: /* jobcg managed map: {u32 type, major, minor} */
		off_major = 4, off_minor = 8;
		break;
	case 24: /* jobcg policy map: {u64 cgroup_id; u32 type, major, minor, pad} */
		off_major = 12, off_minor = 16;
		break;
	default:
		return 0;
	}
	m->off_major = off_major;
	m->off_minor = off_minor;
	void *t = realloc(e->hints, (e->nhints + m->n) * sizeof(*e->hints));
	if (!t)
		return -ENOMEM;
	e->hints = t;
	for (size_t k = 0; k < m->n; k++) {
		uint32_t maj, min;
		memcpy(&maj, m->keys + k * m->key_size + off_major, 4);
		memcpy(&min, m->keys + k * m->key_size + off_minor, 4);
		e->hints[e->nhints][0] = maj;
		e->hints[e->nhints][1] = min;
		e->nhints++;
	}
	return 0;
}

struct lookup_ctx {
	const struct centry *e;
	uint64_t cgroup_id;
	const uint64_t *ancestors; /* levels 0..depth */
	int depth;
};

static const void *snap_find(const struct mapsnap *m, const void *key)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = memcmp(m->keys + mid * m->key_size, key, m->key_size);
		if (c == 0)
			return m->values + mid * m->stride;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static const void *hook_lookup(void *u, uint64_t ref, const void *key)
{
	const struct lookup_ctx *lc = u;
	for (size_t k = 0; k < lc->e->nmaps; k++)
		if (lc->e->maps[k].id == ref)
			return snap_find(&lc->e->maps[k], key);
	return NULL;
}

static uint64_t hook_cgroup_id(void *u)
{
	const struct lookup_ctx *lc = u;
	return lc->cgroup_id;
}

static uint64_t hook_ancestor(void *u, int level)
{
	const struct lookup_ctx *lc = u;
	if (level < 0 || level > lc->depth)
		return 0;
	return lc->ancestors[level];
}

static bool insn_calls(const struct centry *e, int helper)
{
	for (size_t k = 0; k < e->n; k++)
		if (e->insns[k].code == (BPF_JMP | BPF_CALL) && e->insns[k].src_reg == 0 &&
		    e->insns[k].imm == helper)
			return true;
	return false;
}

static int load_maps(struct centry *e);

/*
 * Name the helpers the program calls (the kernel shows them as addresses): reading
 * /proc/kallsyms for that costs more than a whole scrape, so programs the fast path decides
 * without running them (try_fast()) leave it until something runs or decodes them.
 */
static int resolve_calls(struct centry *e)
{
	int r = bpftext_resolve_calls(e->insns, e->n);

	if (r > 0) {
		e->opaque = strdup(jobcg_last_error()->message);
		return e->opaque ? 0 : -ENOMEM;
	}
	if (r < 0) {
		int kr = sysctl_int("/proc/sys/kernel/kptr_restrict");
		char krs[16] = "unreadable";
		if (kr >= 0)
			snprintf(krs, sizeof(krs), "%d", kr);
		e->opaque = strdup_printf("its helper calls cannot be identified: %s "
					  "(kernel.kptr_restrict=%s)",
					  jobcg_last_error()->message, krs);
		return e->opaque ? 0 : -ENOMEM;
	}
	e->cg_dependent = insn_calls(e, BPF_FUNC_get_current_cgroup_id) ||
			  insn_calls(e, BPF_FUNC_get_current_ancestor_cgroup_id);
	return 0;
}

static int fetch_prog(uint32_t id, struct centry *e)
{
	_cleanup_close_ int fd = bpf_prog_get_fd_by_id(id);
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info);
	int r;

	e->id = id;
	if (fd < 0)
		return perm_error(-errno, "opening a device program by id");
	r = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (r < 0)
		return perm_error(r, "reading program information");
	memcpy(e->name, info.name, sizeof(e->name) - 1);
	if (info.xlated_prog_len == 0 || info.xlated_prog_len % sizeof(struct bpf_insn)) {
		e->opaque = strdup_printf("the kernel did not return its instructions "
					  "(xlated_prog_len %u; needs CAP_SYS_ADMIN/CAP_BPF)",
					  info.xlated_prog_len);
		return e->opaque ? 0 : -ENOMEM;
	}
	uint32_t xlen = info.xlated_prog_len;
	e->insns = calloc(1, xlen);
	if (!e->insns)
		return -ENOMEM;
	memset(&info, 0, sizeof(info));
	info.xlated_prog_len = xlen;
	info.xlated_prog_insns = (uint64_t)(uintptr_t)e->insns;
	len = sizeof(info);
	r = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (r < 0)
		return perm_error(r, "reading the program's instructions");
	e->n =
	    (info.xlated_prog_len < xlen ? info.xlated_prog_len : xlen) / sizeof(struct bpf_insn);
	if (bpfvm_check(e->insns, e->n) < 0) {
		e->opaque = strdup_printf("its translated instructions are not understood: %s",
					  jobcg_last_error()->message);
		return e->opaque ? 0 : -ENOMEM;
	}
	e->unresolved = true;
	return load_maps(e);
}

/* Snapshot the maps a program references and collect device hints from their keys. */
static int load_maps(struct centry *e)
{
	int r;

	for (size_t k = 0; k < e->n; k++) {
		const struct bpf_insn *i = &e->insns[k];
		if (i->code != (BPF_LD | BPF_IMM | BPF_DW))
			continue;
		k++;
		if (i->src_reg != BPF_PSEUDO_MAP_FD && i->src_reg != BPF_PSEUDO_MAP_VALUE)
			continue;
		bool have = false;
		for (size_t m = 0; m < e->nmaps; m++)
			have |= e->maps[m].id == (uint32_t)i->imm;
		if (have)
			continue;
		struct mapsnap snap = {0};
		char *reason = NULL;
		r = snapshot_map((uint32_t)i->imm, &snap, &reason);
		if (r < 0)
			return r;
		if (reason) {
			e->opaque = reason;
			return 0;
		}
		void *t = realloc(e->maps, (e->nmaps + 1) * sizeof(*e->maps));
		if (!t) {
			free(snap.keys);
			free(snap.values);
			return -ENOMEM;
		}
		e->maps = t;
		e->maps[e->nmaps++] = snap;
		r = map_hints(e, &e->maps[e->nmaps - 1]);
		if (r < 0)
			return r;
	}
	return 0;
}

static int decode_key_layout(void *u, uint64_t ref, size_t *ret_size, int *ret_major,
			     int *ret_minor)
{
	const struct lookup_ctx *lc = u;
	for (size_t k = 0; k < lc->e->nmaps; k++) {
		const struct mapsnap *m = &lc->e->maps[k];
		if (m->id != ref)
			continue;
		if (m->off_major < 0)
			return -ENOENT;
		*ret_size = m->key_size;
		*ret_major = m->off_major;
		*ret_minor = m->off_minor;
		return 0;
	}
	return -ENOENT;
}

/* Decode @e as the cgroup whose ids (levels 0..@depth) are @anc would run it; @anc NULL: as no
 * cgroup in particular (a program asking for one stays opaque). @anc_known false: the levels
 * are not the kernel's (cg_ancestor_ids()), so a program asking for an ancestor stays opaque. */
static int decode_entry(const struct centry *e, const uint64_t *anc, int depth, bool anc_known,
			struct jobcg_decoded **ret, char **ret_reason)
{
	struct lookup_ctx lc = {e, anc ? anc[depth] : 0, anc, anc ? depth : -1};
	struct jobcg_decode_env env = {
	    .size = sizeof(env),
	    .cgroup_id = anc ? hook_cgroup_id : NULL,
	    .ancestor_cgroup_id = anc && anc_known ? hook_ancestor : NULL,
	    .map_lookup = e->nmaps ? hook_lookup : NULL,
	    .userdata = &lc,
	    .hints = (const uint32_t(*)[2])e->hints,
	    .n_hints = e->nhints,
	    .key_layout = decode_key_layout,
	};
	int r = jobcg_decode_program(e->insns, e->n, &env, ret);

	if (r == -EOPNOTSUPP || r == -ELOOP || r == -E2BIG || r == -EINVAL) {
		const char *msg = jobcg_last_error()->message;
		if (anc && !anc_known && strstr(msg, "ancestor"))
			*ret_reason = strdup_printf(
			    "%s: the cgroup v2 mount's root is not the root cgroup (a cgroup "
			    "namespace or a mount of a subtree), so the kernel's ancestor levels "
			    "are unknown",
			    msg);
		else
			*ret_reason = strdup(msg);
		return *ret_reason ? 0 : -ENOMEM;
	}
	return r;
}

/* What fetch_prog() left for later: helpers named. Decoding the whole space waits until a
 * listing asks for it (centry_decode()): point questions run the program instead. */
static int centry_complete(struct centry *e)
{
	int r;

	if (!e->unresolved)
		return 0;
	if (!e->opaque) {
		r = resolve_calls(e);
		if (r < 0)
			return r;
	}
	e->unresolved = false;
	return 0;
}

/* A program that does not depend on the cgroup, decoded once for every cgroup that has it. */
static int centry_decode(struct centry *e)
{
	if (e->decode_tried || e->opaque || e->cg_dependent)
		return 0;
	int r = decode_entry(e, NULL, -1, false, &e->decoded, &e->undecodable);
	if (r < 0)
		return r;
	e->decode_tried = true;
	return 0;
}

/* The program @id, fetched at its first use. @lazy: its helper calls may stay unnamed (the fast
 * path, which never runs it); otherwise the entry is complete. */
static int cache_get(struct jobcg_progcache *c, uint32_t id, bool lazy, struct centry **ret)
{
	for (size_t k = 0; k < c->n; k++)
		if (c->e[k].id == id) {
			int r = lazy ? 0 : centry_complete(&c->e[k]);
			if (r < 0)
				return r;
			*ret = &c->e[k];
			return 0;
		}
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 16;
		struct centry *t = realloc(c->e, nc * sizeof(*t));
		if (!t)
			return -ENOMEM;
		c->e = t;
		c->cap = nc;
	}
	struct centry *e = &c->e[c->n];
	*e = (struct centry){0};
	int r = fetch_prog(id, e);
	if (r >= 0 && !lazy)
		r = centry_complete(e);
	if (r < 0) {
		centry_done(e);
		return r;
	}
	c->n++;
	*ret = e;
	return 0;
}

/* ---- cgroups ---- */

static int query(int cgfd, uint32_t flags, uint32_t **ret_ids, size_t *ret_n, uint32_t *ret_flags)
{
	uint32_t cap = 64;

	/* The list can grow between calls; a bounded number of retries. */
	for (int attempt = 0; attempt < 6; attempt++) {
		_cleanup_free_ uint32_t *ids = calloc(cap, sizeof(*ids));
		LIBBPF_OPTS(bpf_prog_query_opts, opts, .query_flags = flags, .prog_ids = ids,
			    .prog_cnt = cap);
		if (!ids)
			return -ENOMEM;
		int r = bpf_prog_query_opts(cgfd, BPF_CGROUP_DEVICE, &opts);
		if (r == -ENOSPC) {
			cap *= 4;
			continue;
		}
		if (r < 0)
			return perm_error(r,
					  "querying the cgroup's device programs (BPF_PROG_QUERY)");
		*ret_n = opts.prog_cnt;
		*ret_ids = TAKE_PTR(ids);
		if (ret_flags)
			*ret_flags = opts.attach_flags;
		return 0;
	}
	return error_set(-EAGAIN, "the cgroup's program list kept changing");
}

static void inspect_free(struct inspect_priv *ip)
{
	if (!ip)
		return;
	for (size_t k = 0; k < ip->pub.n_progs; k++)
		free(ip->pub.progs[k].attached_at);
	free(ip->pub.progs);
	free(ip->pub.path);
	jobcg_decoded_free(ip->pub.combined);
	strv_free(ip->pub.notes);
	for (size_t k = 0; k < ip->nowned; k++)
		jobcg_decoded_free(ip->owned[k]);
	free(ip->owned);
	strv_free(ip->reasons);
	jobcg_progcache_free(ip->own_cache);
	free(ip->ancestors);
	free(ip);
}

JOBCG_EXPORT void jobcg_cginspect_free(struct jobcg_cginspect *i)
{
	inspect_free((struct inspect_priv *)i);
}

/*
 * Whether ancestor ids counted from the cgroup2 mount's root are the kernel's levels, as
 * bpf_get_current_ancestor_cgroup_id(level) counts them from the real root (id 1). Inside a
 * cgroup namespace, or with a mount of a subtree (mountinfo root other than "/"), the mount's
 * root is some other cgroup and the real levels above it cannot be seen: answers that depend on
 * an ancestor's id are then uncertain, never computed from the shifted levels.
 */
bool inspect_levels_real(uint64_t root_id)
{
	return root_id == 1;
}

/* Ids of the cgroup at @path and its ancestors (level 0 = the mount root). */
static int cg_ancestor_ids(const char *path, const char *mount, uint64_t **ret, int *ret_depth)
{
	const char *rel = path + strlen(mount);
	_cleanup_free_ uint64_t *anc = NULL;
	char buf[PATH_MAX];
	struct stat st;
	int depth = 0;

	for (const char *p = rel; *p; p++)
		if (*p == '/' && p[1] && p[1] != '/')
			depth++;
	anc = calloc((size_t)depth + 1, sizeof(uint64_t));
	if (!anc)
		return -ENOMEM;
	snprintf(buf, sizeof(buf), "%s", mount);
	if (stat(buf, &st) < 0)
		return error_set(negative_errno(), "cannot stat %s", buf);
	anc[0] = st.st_ino;
	const char *p = rel;
	for (int level = 1; level <= depth; level++) {
		while (*p == '/')
			p++;
		const char *end = strchr(p, '/');
		size_t l = end ? (size_t)(end - p) : strlen(p);
		size_t bl = strlen(buf);
		snprintf(buf + bl, sizeof(buf) - bl, "/%.*s", (int)l, p);
		if (stat(buf, &st) < 0)
			return error_set(negative_errno(), "cannot stat %s", buf);
		anc[level] = st.st_ino; /* a cgroup v2 directory's inode is its id */
		p += l;
	}
	*ret_depth = depth;
	*ret = TAKE_PTR(anc);
	return 0;
}

/* Where each effective program is attached: the nearest ancestor listing it directly. */
static int find_attachments(struct inspect_priv *ip, const char *mount)
{
	char buf[PATH_MAX];
	size_t ml = strlen(mount);
	size_t left = ip->pub.n_progs;

	snprintf(buf, sizeof(buf), "%s", ip->pub.path);
	for (int guard = 0; left > 0 && guard < 4096; guard++) {
		_cleanup_close_ int fd = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		_cleanup_free_ uint32_t *ids = NULL;
		size_t n = 0;
		uint32_t flags = 0;

		if (fd >= 0 && query(fd, 0, &ids, &n, &flags) == 0)
			for (size_t k = 0; k < ip->pub.n_progs; k++) {
				struct jobcg_cgprog *p = &ip->pub.progs[k];
				if (p->attached_at)
					continue;
				for (size_t j = 0; j < n; j++)
					if (ids[j] == p->id) {
						p->attached_at = strdup(buf);
						if (!p->attached_at)
							return -ENOMEM;
						p->attach_flags = flags;
						left--;
						break;
					}
			}
		if (strlen(buf) <= ml)
			break;
		char *slash = strrchr(buf, '/');
		if (!slash || (size_t)(slash - buf) < ml)
			break;
		*slash = 0;
		if (strlen(buf) < ml)
			break;
	}
	return 0;
}

/* @path made absolute and checked to be a cgroup v2 directory, into @real (PATH_MAX). */
static int cg_resolve(const char *path, char *real, const char **ret_mount)
{
	const char *mount;
	int r = jobcg_cgroup2_mount(&mount);

	if (r < 0)
		return r;
	if (!realpath(path, real))
		return error_set(negative_errno(), "%s: %s", path, strerror(errno));
	if (!startswith(real, mount) || (real[strlen(mount)] != '/' && real[strlen(mount)] != 0))
		return error_set(-EINVAL, "%s is not under the cgroup v2 mount %s", real, mount);
	*ret_mount = mount;
	return 0;
}

JOBCG_EXPORT int jobcg_cgroup_inspect(const char *path, struct jobcg_progcache *cache,
				      struct jobcg_cginspect **ret)
{
	return_if_null(path);
	return_if_null(ret);
	struct inspect_priv *ip = NULL;
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint32_t *ids = NULL;
	_cleanup_free_ struct jobcg_decoded **list = NULL;
	size_t n = 0;
	const char *mount;
	char real[PATH_MAX];
	int r;

	r = cg_resolve(path, real, &mount);
	if (r < 0)
		return r;
	fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return error_set(negative_errno(), "%s: %s", real, strerror(errno));
	if (faccessat(fd, "cgroup.procs", F_OK, 0) < 0)
		return error_set(-ENOENT, "%s is not a cgroup (no cgroup.procs)", real);
	r = query(fd, BPF_F_QUERY_EFFECTIVE, &ids, &n, NULL);
	if (r < 0)
		return r;

	ip = calloc(1, sizeof(*ip));
	if (!ip)
		return -ENOMEM;
	ip->pub.path = strdup(real);
	if (!ip->pub.path) {
		r = -ENOMEM;
		goto fail;
	}
	if (!cache) {
		r = jobcg_progcache_new(&ip->own_cache);
		if (r < 0)
			goto fail;
		cache = ip->own_cache;
	}
	r = cg_ancestor_ids(ip->pub.path, mount, &ip->ancestors, &ip->depth);
	if (r < 0)
		goto fail;
	ip->anc_known = inspect_levels_real(ip->ancestors[0]);
	ip->pub.cgroup_id = ip->ancestors[ip->depth];
	ip->pub.progs = calloc(n ? n : 1, sizeof(*ip->pub.progs));
	ip->owned = calloc(n ? n : 1, sizeof(*ip->owned));
	if (!ip->pub.progs || !ip->owned) {
		r = -ENOMEM;
		goto fail;
	}
	ip->pub.n_progs = n;
	size_t nlist = 0;
	list = calloc(n ? n : 1, sizeof(*list));
	if (!list) {
		r = -ENOMEM;
		goto fail;
	}
	for (size_t k = 0; k < n; k++) {
		struct jobcg_cgprog *p = &ip->pub.progs[k];
		struct centry *e;

		p->id = ids[k];
		r = cache_get(cache, ids[k], false, &e);
		if (r == -ENOENT) { /* detached and freed meanwhile */
			p->opaque_reason = "the program went away while reading it";
			ip->pub.any_opaque = true;
			continue;
		}
		if (r < 0)
			goto fail;
		memcpy(p->name, e->name, sizeof(p->name));
		p->n_insns = e->n;
		if (e->opaque) {
			p->opaque_reason = e->opaque;
		} else if (e->cg_dependent) {
			char *reason = NULL;
			r = decode_entry(e, ip->ancestors, ip->depth, ip->anc_known,
					 &ip->owned[ip->nowned], &reason);
			if (r < 0)
				goto fail;
			if (reason) {
				if (strv_push(&ip->reasons, reason) < 0) {
					r = -ENOMEM;
					goto fail;
				}
				p->opaque_reason = reason;
			} else
				p->decoded = ip->owned[ip->nowned++];
		} else {
			r = centry_decode(e);
			if (r < 0)
				goto fail;
			p->decoded = e->decoded;
			if (!p->decoded)
				p->opaque_reason = e->undecodable;
		}
		if (p->decoded)
			list[nlist++] = (struct jobcg_decoded *)p->decoded;
		if (!p->decoded)
			ip->pub.any_opaque = true;
	}
	if (nlist > 0) {
		r = jobcg_decoded_intersect(list, nlist, &ip->pub.combined);
		if (r < 0)
			goto fail;
	}
	r = find_attachments(ip, mount);
	if (r < 0)
		goto fail;
	char *v1 = v1_detail(ip->pub.path);
	if (v1 && strv_push(&ip->pub.notes, v1) < 0) {
		r = -ENOMEM;
		goto fail;
	}
	*ret = &ip->pub;
	return 0;
fail:
	inspect_free(ip);
	return r;
}

JOBCG_EXPORT int jobcg_cginspect_allows(const struct jobcg_cginspect *i, char type, uint32_t major,
					uint32_t minor, unsigned access)
{
	/* Sampled, not proven: neither answer is certain. */
	if (i->combined && jobcg_decoded_approximate(i->combined))
		return -1;
	if (i->combined && !jobcg_decoded_allows(i->combined, type, major, minor, access))
		return 0;
	return i->any_opaque ? -1 : 1;
}

JOBCG_EXPORT int jobcg_cgroup_device_access(const char *path, struct jobcg_progcache *cache,
					    char type, uint32_t major, uint32_t minor,
					    unsigned *ret_access, bool *ret_opaque,
					    size_t *ret_nprogs)
{
	struct jobcg_devreq q = {type, major, minor};
	unsigned access;
	bool opaque;
	size_t n;
	int r = jobcg_cgroup_devices_access(path, -1, cache, &q, 1, &access, &opaque, &n);

	if (r < 0)
		return r;
	*ret_access = access;
	*ret_opaque = opaque;
	*ret_nprogs = n;
	return 0;
}

/*
 * Ids of the cgroup open as @fd at @path and of its ancestors, from @c's memory of the last
 * cgroup asked about when that is its parent or a sibling (a walk asks about a job, then its
 * steps), checked by the parent's inode: a parent removed and made again under the same name
 * is looked up afresh.
 */
static int cached_ancestor_ids(struct jobcg_progcache *c, const char *path, int fd,
			       const char *mount, uint64_t **ret, int *ret_depth)
{
	const char *slash = strrchr(path, '/');
	size_t plen = slash ? (size_t)(slash - path) : 0;
	struct stat self, parent;
	uint64_t *anc = NULL;
	int r, depth, pd = -1;

	if (c->last_path && slash) {
		const char *ls = strrchr(c->last_path, '/');
		if (strlen(c->last_path) == plen && !strncmp(c->last_path, path, plen))
			pd = c->last_depth; /* a child of the last one */
		else if (ls && (size_t)(ls - c->last_path) == plen &&
			 !strncmp(c->last_path, path, plen))
			pd = c->last_depth - 1; /* a sibling */
	}
	if (pd >= 0 && fstat(fd, &self) == 0 && fstatat(fd, "..", &parent, 0) == 0 &&
	    parent.st_ino == c->last_ids[pd]) {
		anc = calloc((size_t)pd + 2, sizeof(*anc));
		if (!anc)
			return -ENOMEM;
		memcpy(anc, c->last_ids, ((size_t)pd + 1) * sizeof(*anc));
		anc[pd + 1] = self.st_ino;
		depth = pd + 1;
	} else {
		r = cg_ancestor_ids(path, mount, &anc, &depth);
		if (r < 0)
			return r;
	}
	char *p = strdup(path);
	uint64_t *ids = malloc(((size_t)depth + 1) * sizeof(*ids));
	if (p && ids) {
		memcpy(ids, anc, ((size_t)depth + 1) * sizeof(*ids));
		free(c->last_path);
		free(c->last_ids);
		c->last_path = p;
		c->last_ids = ids;
		c->last_depth = depth;
	} else {
		free(p);
		free(ids);
	}
	*ret = anc;
	*ret_depth = depth;
	return 0;
}

/*
 * Whether @e is the node program @t names: its name, the two maps it references being the
 * pinned ones with the node program's layouts, and every other 64-bit constant it loads being
 * the root's id it was built for. Anything else (another kernel's rewrites included) leaves it
 * to the interpreter. Checked once per program.
 */
static bool node_program_is(struct centry *e, const struct devpolicy_node_ident *t)
{
	bool managed = false, policy = false, first_map = true;
	size_t roots = 0;

	if (e->node)
		return e->node > 0;
	e->node = -1;
	if (e->opaque || strncmp(e->name, DEVPROG_NODE_NAME, sizeof(e->name)))
		return false;
	if (e->nmaps != 2)
		return false;
	for (size_t k = 0; k < e->nmaps; k++) {
		const struct mapsnap *m = &e->maps[k];

		if (m->id == t->managed_id && m->type == BPF_MAP_TYPE_HASH &&
		    m->key_size == sizeof(struct devprog_managed_key) && m->value_size == 4)
			managed = true;
		else if (m->id == t->policy_id && m->type == BPF_MAP_TYPE_HASH &&
			 m->key_size == sizeof(struct devprog_policy_key) &&
			 m->value_size == sizeof(struct devprog_policy_value))
			policy = true;
	}
	if (!managed || !policy)
		return false;
	for (size_t k = 0; k + 1 < e->n; k++) {
		const struct bpf_insn *i = &e->insns[k];

		if (i->code != (BPF_LD | BPF_IMM | BPF_DW))
			continue;
		k++;
		if (i->src_reg == BPF_PSEUDO_MAP_FD) {
			/* The program asks the managed map first, then the policy map. */
			if ((uint32_t)i->imm != (first_map ? t->managed_id : t->policy_id) &&
			    (first_map || (uint32_t)i->imm != t->managed_id))
				return false;
			first_map = false;
			continue;
		}
		if (i->src_reg != 0 ||
		    ((uint64_t)(uint32_t)i[1].imm << 32 | (uint32_t)i->imm) != t->root_id)
			return false;
		roots++;
	}
	if (!roots)
		return false;
	e->node = 1;
	return true;
}

struct fast_lookup {
	const struct centry *e;
};

static const void *fast_hook(void *u, uint64_t ref, const void *key)
{
	const struct fast_lookup *f = u;
	for (size_t k = 0; k < f->e->nmaps; k++)
		if (f->e->maps[k].id == ref)
			return snap_find(&f->e->maps[k], key);
	return NULL;
}

/*
 * The fast path: when every effective program of the cgroup is a node program of jobcg that
 * the caller trusts (its pins name it), the access is computed from the same map snapshot the
 * interpreter would read, as the program decides (devprog_node_allowed()), without running it.
 * 1 when decided (@access filled), 0 when the interpreter must run, or -errno.
 */
static int try_fast(struct jobcg_progcache *c, const uint32_t *ids, size_t n, const uint64_t *anc,
		    int depth, const struct jobcg_devreq *reqs, size_t n_reqs, unsigned *access)
{
	const struct devpolicy_node_ident *t = NULL;
	struct centry *e;
	int r;

	if (!c || !c->n_nodes || n == 0 || !inspect_levels_real(anc[0]))
		return 0;
	for (size_t k = 0; k < c->n_nodes && !t; k++)
		if (c->nodes[k].prog_id == ids[0])
			t = &c->nodes[k];
	if (!t)
		return 0;
	for (size_t k = 1; k < n; k++)
		if (ids[k] != ids[0])
			return 0; /* another program too: it may decide otherwise */
	r = cache_get(c, ids[0], true, &e);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (!node_program_is(e, t))
		return 0;
	struct fast_lookup fl = {e};
	for (size_t d = 0; d < n_reqs; d++) {
		const struct jobcg_devreq *q = &reqs[d];
		int a = devprog_node_allowed(
		    t->root_id, anc, depth, fast_hook, &fl, t->managed_id, t->policy_id,
		    q->type == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK, q->major, q->minor,
		    access[d]);
		if (a < 0)
			return 0;
		access[d] = (unsigned)a;
	}
	return 1;
}

static void progcache_freep(struct jobcg_progcache **c)
{
	jobcg_progcache_free(*c);
}

JOBCG_EXPORT int jobcg_cgroup_devices_access(const char *path, int dirfd,
					     struct jobcg_progcache *cache,
					     const struct jobcg_devreq *reqs, size_t n_reqs,
					     unsigned *ret_access, bool *ret_opaque,
					     size_t *ret_nprogs)
{
	_cleanup_close_ int own_fd = -1;
	__attribute__((cleanup(progcache_freep))) struct jobcg_progcache *own_cache = NULL;
	int fd = dirfd;
	_cleanup_free_ uint32_t *ids = NULL;
	_cleanup_free_ uint64_t *anc = NULL;
	_cleanup_free_ unsigned *access = calloc(n_reqs ? n_reqs : 1, sizeof(*access));
	size_t n = 0;
	const char *mount;
	bool opaque = false;
	int depth = 0, fast, r;

	if (!access)
		return -ENOMEM;
	/* @path is needed with a @dirfd too: the mount and the ancestors are found from it. */
	return_if_null(path);
	if (!reqs && n_reqs)
		return error_set(-EINVAL, "%s: no reqs given", __func__);
	return_if_null(ret_access);
	for (size_t k = 0; k < n_reqs; k++)
		if (reqs[k].type != 'c' && reqs[k].type != 'b')
			return error_set(-EINVAL, "device type '%c' is neither 'c' nor 'b'",
					 reqs[k].type);
	if (!cache) {
		/* One call: the programs are fetched once here and dropped at return. */
		r = jobcg_progcache_new(&own_cache);
		if (r < 0)
			return r;
		cache = own_cache;
	}
	r = jobcg_cgroup2_mount(&mount);
	if (r < 0)
		return r;
	if (!startswith(path, mount))
		return error_set(-EINVAL, "%s is not under the cgroup v2 mount %s", path, mount);
	if (fd < 0) {
		fd = own_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return error_set(negative_errno(), "%s: %s", path, strerror(errno));
	}
	r = query(fd, BPF_F_QUERY_EFFECTIVE, &ids, &n, NULL);
	if (r < 0)
		return r;
	if (n > 0) {
		r = cache ? cached_ancestor_ids(cache, path, fd, mount, &anc, &depth)
			  : cg_ancestor_ids(path, mount, &anc, &depth);
		if (r < 0)
			return r;
	}
	for (size_t d = 0; d < n_reqs; d++)
		access[d] = reqs[d].access ? reqs[d].access & JOBCG_DEV_ACC_ALL : JOBCG_DEV_ACC_ALL;
	fast = try_fast(cache, ids, n, anc, depth, reqs, n_reqs, access);
	if (fast < 0)
		return fast;
	if (cache && n > 0)
		*(fast ? &cache->counts.fast : &cache->counts.interpreted) += 1;
	/*
	 * Each program is run for each request, exactly as the kernel would (a decode of the
	 * whole space may be approximate, and costs far more). Read and write are also asked
	 * together: open(O_RDWR) makes one request with both bits, which a program may answer
	 * differently from the two alone.
	 */
	_cleanup_free_ unsigned *both = calloc(n_reqs ? n_reqs : 1, sizeof(*both));
	if (!both)
		return -ENOMEM;
	for (size_t d = 0; d < n_reqs; d++)
		both[d] = (access[d] & JOBCG_DEV_ACC_READ) && (access[d] & JOBCG_DEV_ACC_WRITE);
	bool levels = n > 0 && inspect_levels_real(anc[0]);
	for (size_t k = 0; k < n && !fast; k++) {
		struct centry *e;
		r = cache_get(cache, ids[k], false, &e);
		if (r == -ENOENT) {
			opaque = true;
			continue;
		}
		if (r < 0)
			return r;
		if (e->opaque) {
			opaque = true;
			continue;
		}
		/* Checked once per program: the check costs more than a run. */
		if (!e->checked)
			e->checked = bpfvm_check(e->insns, e->n) < 0 ? -EINVAL : 1;
		if (e->checked < 0) {
			opaque = true;
			continue;
		}
		struct lookup_ctx lc = {e, anc[depth], anc, depth};
		struct bpfvm_env env = {hook_cgroup_id, levels ? hook_ancestor : NULL,
					e->nmaps ? hook_lookup : NULL, &lc};
		for (size_t d = 0; d < n_reqs; d++) {
			const struct jobcg_devreq *q = &reqs[d];
			static const unsigned asks[] = {JOBCG_DEV_ACC_MKNOD, JOBCG_DEV_ACC_READ,
							JOBCG_DEV_ACC_WRITE,
							JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE};

			for (size_t a = 0; a < ELEMENTSOF(asks); a++) {
				unsigned bit = asks[a];
				bool is_both = a == 3;
				if (is_both ? !both[d] : !(access[d] & bit))
					continue; /* not asked, or another program denies it */
				struct bpfvm_devctx ctx = {
				    .access_type = (bit << 16) | (q->type == 'c' ? 2u : 1u),
				    .major = q->major,
				    .minor = q->minor};
				uint64_t r0 = 0;
				r = bpfvm_run_checked(e->insns, e->n, &ctx, &env, NULL, 100000,
						      &r0);
				if (r < 0) {
					opaque = true;
					break;
				}
				if ((uint32_t)r0 == 0) {
					if (is_both)
						both[d] = 0;
					else
						access[d] &= ~bit;
				}
			}
		}
	}
	/* r and w alone but not together, or together but not alone: neither set of letters
	 * says it; the bits become the upper bound (r and w) and the answer uncertain. */
	for (size_t d = 0; d < n_reqs && !fast && n > 0; d++) {
		unsigned asked =
		    reqs[d].access ? reqs[d].access & JOBCG_DEV_ACC_ALL : JOBCG_DEV_ACC_ALL;
		if (!(asked & JOBCG_DEV_ACC_READ) || !(asked & JOBCG_DEV_ACC_WRITE))
			continue;
		bool r_and_w =
		    (access[d] & JOBCG_DEV_ACC_READ) && (access[d] & JOBCG_DEV_ACC_WRITE);
		if (r_and_w != (bool)both[d]) {
			access[d] |= JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE;
			opaque = true;
		}
	}
	memcpy(ret_access, access, n_reqs * sizeof(*access));
	*ret_opaque = opaque;
	*ret_nprogs = n;
	return 0;
}

/* The live-map decode, as the cgroup at @cgroup_path would run the program (NULL: none). */
static int decode_live(const struct bpf_insn *insns, size_t n, const char *cgroup_path,
		       struct jobcg_decoded **ret)
{
	_cleanup_free_ uint64_t *anc = NULL;
	struct centry e = {0};
	struct jobcg_decoded *d = NULL;
	int depth = -1, r;

	/* As jobcg_decode_program() answers the same input. */
	if (!insns || !n)
		return error_set(-EINVAL, "no program to decode");
	if (!ret)
		return error_set(-EINVAL, "no place for the decoded program");
	if (cgroup_path) {
		char real[PATH_MAX];
		const char *mount;

		r = cg_resolve(cgroup_path, real, &mount);
		if (r < 0)
			return r;
		char procs[PATH_MAX + 16];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", real);
		if (access(procs, F_OK) < 0)
			return error_set(-ENOENT, "%s is not a cgroup (no cgroup.procs)", real);
		r = cg_ancestor_ids(real, mount, &anc, &depth);
		if (r < 0)
			return r;
	}
	e.insns = malloc(n * sizeof(*insns));
	if (!e.insns)
		return -ENOMEM;
	memcpy(e.insns, insns, n * sizeof(*insns));
	e.n = n;
	r = load_maps(&e);
	if (r >= 0 && e.opaque)
		r = error_set(-EOPNOTSUPP, "%s", e.opaque);
	if (r >= 0) {
		r = decode_entry(&e, anc, depth, anc && inspect_levels_real(anc[0]), &d, &e.opaque);
		if (r >= 0 && e.opaque)
			r = error_set(-EOPNOTSUPP, "%s", e.opaque);
	}
	centry_done(&e);
	if (r < 0) {
		jobcg_decoded_free(d);
		return r;
	}
	*ret = d;
	return 0;
}

JOBCG_EXPORT int jobcg_decode_with_live_maps(const struct bpf_insn *insns, size_t n,
					     struct jobcg_decoded **ret)
{
	return decode_live(insns, n, NULL, ret);
}

JOBCG_EXPORT int jobcg_decode_for_cgroup(const struct bpf_insn *insns, size_t n,
					 const char *cgroup_path, struct jobcg_decoded **ret)
{
	/* NULL would be jobcg_decode_with_live_maps(), which the caller did not ask for. */
	if (!cgroup_path)
		return error_set(-EINVAL, "no cgroup to decode the program for");
	return decode_live(insns, n, cgroup_path, ret);
}
