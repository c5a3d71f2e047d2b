/* jobcg: the policy in force below a root, listed cgroup by cgroup (jobcg policy). */
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
#include "tree.h"
#include "util.h"

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

void jobcg_devgrants_free(struct jobcg_devgrant *g, size_t n)
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

int devpolicy_rule_from_key(uint32_t type, uint32_t major, uint32_t minor, unsigned access,
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
		devpolicy_rule_from_key(next.type, next.major, next.minor, val.access,
					&g->rules[g->n_rules++]);
	}
	for (size_t i = 0; i < *n; i++) {
		const struct idpath *ip = walk_find(w, (*v)[i].cgroup_id);
		if (ip && !((*v)[i].path = strdup(ip->rel)))
			return -ENOMEM;
		(*v)[i].in_reservation = ip && startswith(ip->rel, TREE_RESV_PREFIX);
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
		if (cg_fd < 0 || devpolicy_linear_progs_of(cg_fd, &fds, &nf) < 0)
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
				devpolicy_close_fds(fds, nf);
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
				devpolicy_close_fds(fds, nf);
				return e;
			}
			g->cgroup_id = w->v[i].id;
			g->prog_id = id;
			g->level = w->v[i].level;
			g->path = strdup(w->v[i].rel);
			g->in_reservation = startswith(w->v[i].rel, TREE_RESV_PREFIX);
			if (devprog_parse_linear(insns, cnt, &g->rules, &g->n_rules) < 0)
				log_warning("program %u on %s is not in jobcg's linear shape", id,
					    abs);
		}
		devpolicy_close_fds(fds, nf);
	}
	return 0;
}

int jobcg_devpolicy_list(struct jobcg_devpolicy *p, struct jobcg_devgrant **ret, size_t *ret_n)
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
