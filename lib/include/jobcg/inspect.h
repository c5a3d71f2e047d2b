/* jobcg: reading live cgroups' device programs back from the kernel (devices, who-has). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/decode.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One program in a cgroup's effective list. */
struct jobcg_cgprog {
	uint32_t id;
	char name[16];
	char *attached_at;     /* absolute cgroup path where it is attached; NULL if not found */
	uint32_t attach_flags; /* BPF_F_ALLOW_MULTI / BPF_F_ALLOW_OVERRIDE of that attachment */
	const struct jobcg_decoded *decoded; /* NULL when opaque; owned by the cache */
	const char *opaque_reason;	     /* why it could not be decoded, or NULL */
	size_t n_insns;
};

/** A cgroup's effective device programs and what they allow together. */
struct jobcg_cginspect {
	char *path; /* absolute cgroup path */
	uint64_t cgroup_id;
	struct jobcg_cgprog *progs;
	size_t n_progs;
	struct jobcg_decoded *combined; /* all decodable programs intersected; NULL if none */
	bool any_opaque;		/* some program could not be decoded */
	char **notes;			/* NULL-terminated: v1 devices controller, hardening... */
};

/**
 * Decoded programs by id, so a walk over many cgroups reads and decodes each program once
 * (programs whose result depends on the calling cgroup are re-run per cgroup from cached
 * instructions and map contents).
 */
struct jobcg_progcache;
JOBCG_EXPORT int jobcg_progcache_new(struct jobcg_progcache **ret);
JOBCG_EXPORT void jobcg_progcache_free(struct jobcg_progcache *c);

/**
 * Inspect the cgroup at absolute path @path (a cgroup v2 directory). @cache may be NULL.
 * Errors: -ENOENT not a cgroup, -EPERM not privileged (the message says what is needed).
 * A program that cannot be decoded is not an error: it is reported with its reason.
 */
JOBCG_EXPORT int jobcg_cgroup_inspect(const char *path, struct jobcg_progcache *cache,
				      struct jobcg_cginspect **ret);
JOBCG_EXPORT void jobcg_cginspect_free(struct jobcg_cginspect *i);

/**
 * Answer for one request from the decoded rules: 1 allowed, 0 denied, -1 unknown (an opaque
 * program could decide, or the combined decode is approximate).
 * Without effective programs everything is allowed (cgroup v2 has no other device control).
 */
JOBCG_EXPORT int jobcg_cginspect_allows(const struct jobcg_cginspect *i, char type, uint32_t major,
					uint32_t minor, unsigned access);

/**
 * For walks over many cgroups (who-has): the access bits (JOBCG_DEV_ACC_*) for one device that
 * every effective program of the cgroup at absolute @path allows. Each program is run for the
 * device (no decode, so the answer is exact): m, r and w each alone, and r+w as one request
 * (what open(O_RDWR) asks). *ret_opaque is set when the answer is uncertain: some program could
 * not be run, or r+w together is decided differently from r and w alone (both bits are then
 * set); the bits are then an upper bound.
 */
JOBCG_EXPORT int jobcg_cgroup_device_access(const char *path, struct jobcg_progcache *cache,
					    char type, uint32_t major, uint32_t minor,
					    unsigned *ret_access, bool *ret_opaque,
					    size_t *ret_nprogs);

/* One device asked about by jobcg_cgroup_devices_access(). */
struct jobcg_devreq {
	char type; /* 'c' or 'b' */
	uint32_t major, minor;
	unsigned access; /* the JOBCG_DEV_ACC_* bits to try; 0: all three */
};

/**
 * jobcg_cgroup_device_access() for @n_reqs devices at once: the cgroup's programs are queried
 * once, so a walk asking about every GPU of the node pays one query per cgroup, not one per
 * GPU. @dirfd is the cgroup directory already open (-1: @path is opened; @path is needed
 * either way, for the mount and the ancestors); with a @cache, the
 * ancestors' ids of siblings asked about in a row are looked up once. @ret_access has @n_reqs
 * entries, each holding those of the bits asked that every program allows; *ret_opaque is set
 * when some program could not be run (the bits are then an upper bound). -EINVAL for a type
 * other than 'c' or 'b'.
 */
JOBCG_EXPORT int jobcg_cgroup_devices_access(const char *path, int dirfd,
					     struct jobcg_progcache *cache,
					     const struct jobcg_devreq *reqs, size_t n_reqs,
					     unsigned *ret_access, bool *ret_opaque,
					     size_t *ret_nprogs);

/**
 * Decode a program whose ld_imm64 map references are live map ids (as in bpftool's dumps of a
 * loaded program), reading those maps from the kernel. Programs that depend on the calling
 * cgroup stay opaque (-EOPNOTSUPP): use jobcg_cgroup_inspect() on a cgroup instead.
 */
JOBCG_EXPORT int jobcg_decode_with_live_maps(const struct bpf_insn *insns, size_t n,
					     struct jobcg_decoded **ret);

/**
 * jobcg_decode_with_live_maps() for a program whose verdict depends on the calling cgroup (it
 * calls bpf_get_current_cgroup_id or bpf_get_current_ancestor_cgroup_id, as jobcg's node
 * program does): decoded as processes of the cgroup at @cgroup_path (a cgroup v2 directory)
 * would see it, with that cgroup's and its ancestors' ids. Its maps are read live, by id.
 * Errors: those of jobcg_decode_with_live_maps(); -ENOENT or -EINVAL when @cgroup_path is not
 * a cgroup v2 directory.
 */
JOBCG_EXPORT int jobcg_decode_for_cgroup(const struct bpf_insn *insns, size_t n,
					 const char *cgroup_path, struct jobcg_decoded **ret);

/** The cgroup v2 mount point (e.g. "/sys/fs/cgroup/unified"); static storage. */
JOBCG_EXPORT int jobcg_cgroup2_mount(const char **ret);

/** Notes about device control outside cgroup v2 (a mounted v1 devices controller). */
JOBCG_EXPORT int jobcg_devices_v1_notes(char ***ret);

#ifdef __cplusplus
}
#endif
