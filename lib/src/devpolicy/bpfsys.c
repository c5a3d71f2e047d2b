/* jobcg: BPF system operations through libbpf (load, attach, pin, query, maps), errors recorded. */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "bpfsys.h"
#include "log.h"
#include "testhook.h"
#include "util.h"

#define BPFFS_DEFAULT "/sys/fs/bpf"
#define QUERY_MAX     65536u /* programs attached to one cgroup that we are willing to list */
#define IDS_MAX	      (1u << 20)

static int print_to_log(enum libbpf_print_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static int print_to_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[4096];
	size_t n;

	(void)level; /* libbpf's warnings are about what the caller handles: all debug */
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_debug("libbpf: %s", buf);
	return 0;
}

libbpf_print_fn_t bpfsys_print_begin(void)
{
	return libbpf_set_print(print_to_log);
}

void bpfsys_print_end(libbpf_print_fn_t old)
{
	libbpf_set_print(old);
}

static bool is_bpffs(const char *path)
{
	struct statfs s;

	return statfs(path, &s) == 0 && s.f_type == BPF_FS_MAGIC;
}

int bpfsys_ensure_pin_dir(const char *dir)
{
	int e;

	if (!dir || dir[0] != '/')
		return error_set(-EINVAL, "BPF pin directory must be an absolute path");
	if (startswith(dir, BPFFS_DEFAULT "/") && !is_bpffs(BPFFS_DEFAULT)) {
		/* Pins only survive our exit on a bpffs; mode 0700 as the kernel's own default is
		 * world-readable and pins give access to the policy maps. */
		if (mount("bpf", BPFFS_DEFAULT, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  "mode=0700") < 0)
			return error_set(negative_errno(), "cannot mount bpffs on %s: %s",
					 BPFFS_DEFAULT, strerror(errno));
		if (!is_bpffs(BPFFS_DEFAULT))
			return error_set(-EIO, "mounted bpffs on %s but it does not show",
					 BPFFS_DEFAULT);
	}
	/* Nothing is made where no pin can live: a directory made below the nearest one that
	 * exists is on its file system. */
	{
		_cleanup_free_ char *up = strdup(dir);
		struct stat st;
		char *slash;

		if (!up)
			return -ENOMEM;
		while (stat(up, &st) < 0 && errno == ENOENT && (slash = strrchr(up, '/')) &&
		       slash != up)
			*slash = '\0';
		if (stat(up, &st) == 0 && S_ISDIR(st.st_mode) && !is_bpffs(up))
			return error_set(
			    -ENOTDIR,
			    "BPF pin directory %s is not on a bpf filesystem (%s is not "
			    "one)",
			    dir, up);
	}
	/* Pins give access to the policy maps: nobody else may swap the directory. */
	e = mkdir_p_safe(dir, 0700, "BPF pin directory");
	if (e < 0)
		return e;
	if (!is_bpffs(dir))
		return error_set(-ENOTDIR, "BPF pin directory %s is not on a bpf filesystem", dir);
	return 0;
}

int bpfsys_devprog_load(const char *name, const struct bpf_insn *insns, size_t n, int *ret_fd)
{
	_cleanup_free_ char *log = NULL;
	LIBBPF_OPTS(bpf_prog_load_opts, opts);
	int fd;

	if (test_fail("prog load", name))
		return error_set(-EIO, "cannot load device program %s: %s", name, strerror(EIO));
	/* No log on the first try: the verifier is faster without one. */
	fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, name, "Dual MIT/GPL", insns, n, &opts);
	if (fd >= 0) {
		*ret_fd = fd;
		return 0;
	}
	if (fd == -EPERM)
		return error_set(fd, "cannot load device program %s: not permitted", name);
	log = calloc(1, 65536);
	if (log) {
		opts.log_buf = log;
		opts.log_size = 65536;
		opts.log_level = 1;
		int fd2 = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, name, "Dual MIT/GPL", insns, n,
					&opts);
		if (fd2 >= 0) { /* a transient failure */
			*ret_fd = fd2;
			return 0;
		}
		/* The verifier's reason is on the last lines, before its statistics. */
		char *lines[2] = {NULL, NULL}, *save = NULL;
		for (char *l = strtok_r(log, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			if (startswith(l, "processed ") || startswith(l, "verification time"))
				continue;
			lines[0] = lines[1];
			lines[1] = l;
		}
		return error_set(fd, "cannot load device program %s: %s%s%s%s%s", name,
				 strerror(-fd), lines[0] ? ": " : "", lines[0] ? lines[0] : "",
				 lines[1] ? ": " : "", lines[1] ? lines[1] : "");
	}
	return error_set(fd, "cannot load device program %s: %s", name, strerror(-fd));
}

int bpfsys_attach(int prog_fd, int cgroup_fd, int replace_fd)
{
	LIBBPF_OPTS(bpf_prog_attach_opts, opts, .flags = BPF_F_ALLOW_MULTI);
	int e;

	if (replace_fd >= 0) {
		opts.flags |= BPF_F_REPLACE;
		opts.replace_prog_fd = replace_fd;
	}
	e = TEST_FAIL("attach", NULL,
		      bpf_prog_attach_opts(prog_fd, cgroup_fd, BPF_CGROUP_DEVICE, &opts));
	if (e < 0)
		return error_set(e, "cannot attach device program: %s", strerror(-e));
	return 0;
}

int bpfsys_detach(int prog_fd, int cgroup_fd)
{
	int e = bpf_prog_detach2(prog_fd, cgroup_fd, BPF_CGROUP_DEVICE);

	if (e < 0)
		return error_set(e, "cannot detach device program: %s", strerror(-e));
	return 0;
}

int bpfsys_attach_override(int prog_fd, int cgroup_fd)
{
	LIBBPF_OPTS(bpf_prog_attach_opts, opts, .flags = BPF_F_ALLOW_OVERRIDE);
	int e = TEST_FAIL("attach", NULL,
			  bpf_prog_attach_opts(prog_fd, cgroup_fd, BPF_CGROUP_DEVICE, &opts));

	if (e < 0)
		return error_set(e, "cannot attach device program: %s", strerror(-e));
	return 0;
}

int bpfsys_prog_xlated(int prog_fd, struct bpf_insn **ret, size_t *ret_n)
{
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info), cnt;
	_cleanup_free_ struct bpf_insn *insns = NULL;
	int e = bpf_obj_get_info_by_fd(prog_fd, &info, &len);

	if (e < 0)
		return error_set(e, "cannot read program info: %s", strerror(-e));
	cnt = info.xlated_prog_len / sizeof(struct bpf_insn);
	insns = calloc(cnt + 1, sizeof(*insns));
	if (!insns)
		return -ENOMEM;
	info = (struct bpf_prog_info){.xlated_prog_len = cnt * sizeof(*insns),
				      .xlated_prog_insns = (uint64_t)(uintptr_t)insns};
	len = sizeof(info);
	e = bpf_obj_get_info_by_fd(prog_fd, &info, &len);
	if (e < 0)
		return error_set(e, "cannot read program instructions: %s", strerror(-e));
	*ret = TAKE_PTR(insns);
	*ret_n = cnt;
	return 0;
}

int bpfsys_query(int cgroup_fd, uint32_t **ret_ids, size_t *ret_n)
{
	uint32_t flags;

	return bpfsys_query_flags(cgroup_fd, ret_ids, ret_n, &flags);
}

int bpfsys_query_flags(int cgroup_fd, uint32_t **ret_ids, size_t *ret_n, uint32_t *ret_flags)
{
	uint32_t cap = 64;

	/* Programs may be attached between two calls: grow a bounded number of times. */
	for (int attempt = 0; attempt < 16; attempt++) {
		_cleanup_free_ uint32_t *ids = calloc(cap, sizeof(uint32_t));
		uint32_t cnt = cap, flags = 0;
		int e;

		if (!ids)
			return -ENOMEM;
		e = bpf_prog_query(cgroup_fd, BPF_CGROUP_DEVICE, 0, &flags, ids, &cnt);
		if (e == -ENOSPC && cap < QUERY_MAX) {
			cap *= 4;
			continue;
		}
		if (e < 0)
			return error_set(e, "cannot query device programs: %s", strerror(-e));
		*ret_ids = TAKE_PTR(ids);
		*ret_n = cnt;
		*ret_flags = flags;
		return 0;
	}
	return error_set(-EAGAIN, "device programs kept changing while being listed");
}

int bpfsys_prog_info(int fd, uint32_t *ret_id, char name[BPF_OBJ_NAME_LEN])
{
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info);
	int e = bpf_obj_get_info_by_fd(fd, &info, &len);

	if (e < 0)
		return error_set(e, "cannot read program info: %s", strerror(-e));
	if (ret_id)
		*ret_id = info.id;
	if (name)
		memcpy(name, info.name, BPF_OBJ_NAME_LEN);
	return 0;
}

int bpfsys_map_info(int fd, uint32_t *ret_id, struct bpf_map_info *ret_info)
{
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	int e = bpf_obj_get_info_by_fd(fd, &info, &len);

	if (e < 0)
		return error_set(e, "cannot read map info: %s", strerror(-e));
	if (ret_id)
		*ret_id = info.id;
	if (ret_info)
		*ret_info = info;
	return 0;
}

int bpfsys_btf_load(const struct bpfsys_struct *structs, size_t n, int *ret_fd, uint32_t *ret_ids)
{
	struct btf *btf = btf__new_empty();
	int u32_id, u64_id, e = 0;

	if (!btf)
		return -ENOMEM;
	u32_id = btf__add_int(btf, "__u32", 4, 0);
	u64_id = btf__add_int(btf, "__u64", 8, 0);
	if (u32_id < 0 || u64_id < 0) {
		e = u32_id < 0 ? u32_id : u64_id;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned size = 0, off = 0;
		for (size_t j = 0; j < structs[i].n_fields; j++)
			size += structs[i].fields[j].size;
		int id = btf__add_struct(btf, structs[i].name, size);
		if (id < 0) {
			e = id;
			goto out;
		}
		for (size_t j = 0; j < structs[i].n_fields; j++) {
			const struct bpfsys_field *f = &structs[i].fields[j];
			e = btf__add_field(btf, f->name, f->size == 8 ? u64_id : u32_id, off * 8,
					   0);
			if (e < 0)
				goto out;
			off += f->size;
		}
		ret_ids[i] = (uint32_t)id;
	}
	{
		/* It prints the kernel's refusal (with its verifier log) where libbpf's default
		 * would reach stderr; the caller falls back on maps without BTF. */
		libbpf_print_fn_t old = bpfsys_print_begin();

		e = btf__load_into_kernel(btf);
		bpfsys_print_end(old);
	}
	if (e < 0)
		goto out;
	/* The fd belongs to the btf object; keep our own copy beyond btf__free(). */
	e = fcntl(btf__fd(btf), F_DUPFD_CLOEXEC, 3);
	if (e < 0) {
		e = negative_errno();
		goto out;
	}
	*ret_fd = e;
	e = 0;
out:
	btf__free(btf);
	return e;
}

int bpfsys_map_create(const char *name, size_t key_size, size_t value_size, uint32_t max_entries,
		      uint32_t flags, int btf_fd, uint32_t key_type, uint32_t value_type,
		      int *ret_fd)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);

	if (btf_fd >= 0) {
		opts.btf_fd = (uint32_t)btf_fd;
		opts.btf_key_type_id = key_type;
		opts.btf_value_type_id = value_type;
	}
	int fd = TEST_FAIL("map create", name,
			   bpf_map_create(BPF_MAP_TYPE_HASH, name, (uint32_t)key_size,
					  (uint32_t)value_size, max_entries, &opts));

	if (fd < 0)
		return error_set(fd, "cannot create BPF map %s: %s", name, strerror(-fd));
	*ret_fd = fd;
	return 0;
}

int bpfsys_pin(int fd, const char *path)
{
	int e = TEST_FAIL("pin", path, bpf_obj_pin(fd, path));

	if (e < 0)
		return error_set(e, "cannot pin %s: %s", path, strerror(-e));
	return 0;
}

int bpfsys_get_pinned(const char *path, int *ret_fd)
{
	int fd = bpf_obj_get(path);

	if (fd < 0)
		return fd; /* -ENOENT is an ordinary answer; callers decide */
	*ret_fd = fd;
	return 0;
}

int bpfsys_prog_by_id(uint32_t id, int *ret_fd)
{
	int fd = bpf_prog_get_fd_by_id(id);

	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

static int all_ids(int (*next)(uint32_t, uint32_t *), uint32_t **ret_ids, size_t *ret_n)
{
	_cleanup_free_ uint32_t *ids = NULL;
	size_t n = 0, cap = 0;
	uint32_t id = 0;

	for (;;) {
		int e = next(id, &id);
		if (e == -ENOENT)
			break;
		if (e < 0)
			return error_set(e, "cannot list BPF ids: %s", strerror(-e));
		if (n >= IDS_MAX)
			return error_set(-E2BIG, "more than %u BPF objects", IDS_MAX);
		if (n == cap) {
			uint32_t *nn = realloc(ids, (cap ? cap * 2 : 256) * sizeof(uint32_t));
			if (!nn)
				return -ENOMEM;
			ids = nn;
			cap = cap ? cap * 2 : 256;
		}
		ids[n++] = id;
	}
	*ret_ids = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}

int bpfsys_all_prog_ids(uint32_t **ret_ids, size_t *ret_n)
{
	return all_ids(bpf_prog_get_next_id, ret_ids, ret_n);
}

int bpfsys_all_map_ids(uint32_t **ret_ids, size_t *ret_n)
{
	return all_ids(bpf_map_get_next_id, ret_ids, ret_n);
}
