/* jobcg internal: the only code that reads and writes cgroup v2 files (paths are absolute). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobcg/sysinfo.h"

#define CGFS_MAX_FILE (1u << 20) /* largest cgroup file we read */

/* "a/b" with exactly one slash between; NULL on ENOMEM. */
char *cgfs_path(const char *dir, const char *name);
/* True if @path is on a cgroup2 file system. */
bool cgfs_is_cgroup2(const char *path);

/* Read the whole file @dir/@file (error record names the path). */
int cgfs_read(const char *dir, const char *file, char **ret);
/* The same, but a missing file (a controller not enabled there) is -ENOENT with no error record:
 * callers that expect it should not pay for formatting a message nobody reads. */
int cgfs_read_optional(const char *dir, const char *file, char **ret);
/* Read a one-value file: a decimal number, or "max" as UINT64_MAX. */
int cgfs_read_u64(const char *dir, const char *file, uint64_t *ret);
/* Write @value with one write(); the kernel's errno is returned with the path in the error. */
int cgfs_write(const char *dir, const char *file, const char *value);

/* mkdir @dir (parent must exist); 0 if made, 1 if it existed and @exist_ok. */
int cgfs_mkdir(const char *dir, bool exist_ok);
/* rmdir with a bounded retry while the kernel says EBUSY (processes still exiting). 0 if gone. */
int cgfs_rmdir(const char *dir);
/* Remove @dir and every cgroup below it, bottom-up, each with cgfs_rmdir(). */
int cgfs_remove_tree(const char *dir);
/* Names of the child cgroups of @dir, sorted; NULL-terminated, never NULL on success. */
int cgfs_children(const char *dir, char ***ret);

/* Controller mask of a space separated list ("cpuset cpu io"); unknown names are ignored. */
unsigned cgfs_parse_controllers(const char *text);
/* Controllers of @dir/cgroup.controllers or cgroup.subtree_control. */
int cgfs_controllers(const char *dir, const char *file, unsigned *ret);
/* Enable in @dir's cgroup.subtree_control those of @want its cgroup.controllers has and
 * subtree_control lacks. Returns the resulting subtree_control mask in *ret (may be NULL). */
int cgfs_enable(const char *dir, unsigned want, unsigned *ret);

/* Value of "key value" line in a flat keyed file text (cgroup.events, cpu.stat, memory.stat).
 * -ENOENT when the key is absent, -EINVAL when the value is not a number. */
int cgfs_parse_keyed(const char *text, const char *key, uint64_t *ret);
/* populated and frozen from @dir/cgroup.events. */
int cgfs_events(const char *dir, bool *ret_populated, bool *ret_frozen);
/* Wait until @dir/cgroup.events has "key want", at most @timeout_ms, woken by inotify (the kernel
 * signals every change of that file). A cgroup that disappears counts as "populated 0". */
int cgfs_wait_events(const char *dir, const char *key, uint64_t want, unsigned timeout_ms);

/* Pids in @dir/cgroup.procs, and below it when @recursive; sorted, unique. */
int cgfs_pids(const char *dir, bool recursive, pid_t **ret, size_t *ret_n);
/* Whether @pid is in @pids, a list as cgfs_pids() gives it (sorted; NULL when empty). */
bool cgfs_pids_have(const pid_t *pids, size_t n, pid_t pid);
/* Parse cgroup.procs text (one pid a line) appending to *pids. */
int cgfs_parse_pids(const char *text, pid_t **pids, size_t *n);
/* Move @pid (0: the caller) into @dir. */
int cgfs_move_pid(const char *dir, pid_t pid);
/* Write cgroup.kill / cgroup.freeze. -EOPNOTSUPP when the kernel lacks the file. */
int cgfs_kill(const char *dir);
int cgfs_freeze(const char *dir, bool freeze);
/* Whether a freeze is asked of @dir (unless @above_only) or of a cgroup above it, up to the
 * cgroup root: 1, the nearest such cgroup's path in *@ret_dir (may be NULL), when one's own
 * cgroup.freeze is 1; 0 when none is; -ENOMEM. While one is, nothing below it thaws, and a
 * populated cgroup below it may still say "frozen 0" in cgroup.events. No error record: a
 * cgroup.freeze that cannot be read asks no freeze. */
int cgfs_freeze_asked(const char *dir, bool above_only, char **ret_dir);

/* trusted.* extended attributes on a cgroup directory. get: -ENODATA when absent; a value of
 * any size the kernel stores is read whole (NUL-terminated). */
int cgfs_xattr_set(const char *dir, const char *name, const char *value);
int cgfs_xattr_get(const char *dir, const char *name, char **ret);
/* The same with its length in *ret_len (may be NULL): NUL bytes in it are kept. */
int cgfs_xattr_get_len(const char *dir, const char *name, char **ret, size_t *ret_len);
/* The same through an open directory, without an error record (callers word their own). */
int cgfs_fxattr_get(int fd, const char *name, char **ret);

/* Open @dir as a directory fd for clone3(CLONE_INTO_CGROUP). */
int cgfs_open_dir(const char *dir, int *ret_fd);
