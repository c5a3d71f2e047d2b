/* jobcg kernel tests: each test gets its own uniquely named cgroup v2 subtree and removes it. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Skip the whole test (exit 77) unless running as root with a cgroup v2 mount. Then create
 * <v2 mount>/jobcg-test-<name>-<pid>-<random> and return its absolute path (static storage).
 * The subtree (and everything below it) is removed at exit: processes still in it are
 * killed through cgroup.kill of that subtree only, then directories are removed bottom-up.
 */
const char *ktest_setup(const char *name);

/* The cgroup v2 mount point found by ktest_setup(). */
const char *ktest_cgroup_mount(void);

/* Recursively kill (cgroup.kill) and remove a cgroup directory tree we created. 0 or -errno. */
int ktest_remove_tree(const char *path);

/* Unique scratch directory under /tmp, removed at exit (recursively). */
const char *ktest_tmpdir(void);

/* A unique BPF pin directory path, /sys/fs/bpf/jobcg-test-<name>-<pid>-<time> (not created:
 * jobcg makes it), removed at exit with whatever is pinned in it. */
char *ktest_pin_dir(const char *name);

/*
 * A configuration directory (<tmpdir>/conf, static storage) for @n stand-in GPUs: character
 * devices 195:i named <tmpdir>/nvidia<i>, listed in gres.conf (with Type=@type unless NULL),
 * and a cgroup.conf with ConstrainDevices=yes and BpfPinDir=@pins. The device paths go to
 * @ret_devs (n entries; may be NULL). Bails out of the test on failure.
 */
const char *ktest_gpu_conf(unsigned n, const char *type, const char *pins,
			   char (*ret_devs)[PATH_MAX]);

/* tap_diag() every line of @text after @prefix (TAP needs the '#' on each line). */
void ktest_diag_lines(const char *prefix, const char *text);

/* Run the shell command @cmd and return its stdout (static storage, up to 1 MiB, overwritten by
 * the next call; its length to @ret_len unless NULL), or NULL when it could not run or failed. */
char *ktest_capture(const char *cmd, size_t *ret_len);

/*
 * A child moves itself into cgroup @dir and opens @dev with @flags (ktest_open_in), or makes a
 * character node @rdev at @path and removes it again (ktest_mknod_in). 0 when it got past the
 * device check (ENXIO and ENODEV from a node without a driver count: the check let it through),
 * else the errno it saw (EPERM: the check refused), or -1 when no child joined @dir and finished.
 */
int ktest_open_in(const char *dir, const char *dev, int flags);
int ktest_mknod_in(const char *dir, const char *path, dev_t rdev);
