/* jobcg internal: the few BPF system operations jobcg needs (load, attach, pin, query, maps). */
#pragma once

#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>

/*
 * libbpf prints through a process-wide function (stderr by default), and the library never
 * prints: around a libbpf call that can print, bpfsys_print_begin() sends libbpf's messages to
 * the log callback (debug level) and returns the caller's function, which bpfsys_print_end()
 * puts back.
 */
libbpf_print_fn_t bpfsys_print_begin(void);
void bpfsys_print_end(libbpf_print_fn_t old);

/* Make sure @dir exists on a bpffs (mounting one at /sys/fs/bpf if none is mounted there). */
int bpfsys_ensure_pin_dir(const char *dir);

/* Load a BPF_PROG_TYPE_CGROUP_DEVICE program. On failure the error record carries the first
 * lines of the verifier log. Returns 0 and the fd in *ret_fd. */
int bpfsys_devprog_load(const char *name, const struct bpf_insn *insns, size_t n, int *ret_fd);

/* Attach to a cgroup as BPF_CGROUP_DEVICE with BPF_F_ALLOW_MULTI; @replace_fd >= 0 replaces that
 * program atomically (BPF_F_REPLACE). */
int bpfsys_attach(int prog_fd, int cgroup_fd, int replace_fd);
int bpfsys_detach(int prog_fd, int cgroup_fd);
/* Attach with BPF_F_ALLOW_OVERRIDE (one program per cgroup, replacing the one there, which
 * descendants with programs of their own override). */
int bpfsys_attach_override(int prog_fd, int cgroup_fd);
/* Programs attached directly to CGROUP_FD and their attach flags (0 when none). */
int bpfsys_query_flags(int cgroup_fd, uint32_t **ret_ids, size_t *ret_n, uint32_t *ret_flags);
/* The program's instructions as the kernel holds them (xlated), malloc'ed. */
int bpfsys_prog_xlated(int prog_fd, struct bpf_insn **ret, size_t *ret_n);

/* Ids of the device programs attached directly to a cgroup (not inherited). Caller frees. */
int bpfsys_query(int cgroup_fd, uint32_t **ret_ids, size_t *ret_n);

/* Name and id of a program or map fd. @name gets BPF_OBJ_NAME_LEN bytes. */
int bpfsys_prog_info(int fd, uint32_t *ret_id, char name[BPF_OBJ_NAME_LEN]);
int bpfsys_map_info(int fd, uint32_t *ret_id, struct bpf_map_info *ret_info);

/*
 * Type descriptions for maps, so that `bpftool map dump` prints named fields. A struct is a list
 * of unsigned integer fields of 4 or 8 bytes, laid out in order without holes.
 */
struct bpfsys_field {
	const char *name;
	unsigned size; /* 4 or 8 */
};
struct bpfsys_struct {
	const char *name;
	const struct bpfsys_field *fields;
	size_t n_fields;
};

/* Load BTF describing @structs; *ret_fd is the BTF fd and ret_ids[i] the type id of
 * structs[i]. Returns -errno (no error record: callers go on without types). */
int bpfsys_btf_load(const struct bpfsys_struct *structs, size_t n, int *ret_fd, uint32_t *ret_ids);

/* A hash map with @flags (BPF_F_NO_PREALLOC...). @btf_fd < 0: no types; else the key and
 * value type ids in it. */
int bpfsys_map_create(const char *name, size_t key_size, size_t value_size, uint32_t max_entries,
		      uint32_t flags, int btf_fd, uint32_t key_type, uint32_t value_type,
		      int *ret_fd);

int bpfsys_pin(int fd, const char *path);
int bpfsys_get_pinned(const char *path, int *ret_fd);

/* Open a program by id (0 and the fd, or -errno). */
int bpfsys_prog_by_id(uint32_t id, int *ret_fd);

/* Ids of every program / map currently loaded (for leak checks in tests). Caller frees. */
int bpfsys_all_prog_ids(uint32_t **ret_ids, size_t *ret_n);
int bpfsys_all_map_ids(uint32_t **ret_ids, size_t *ret_n);
