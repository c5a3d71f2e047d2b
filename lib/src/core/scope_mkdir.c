/* jobcg: the mkdir scope backend: the tree root is a plain directory made below the v2 mount. */
#include "cgroupfs.h"
#include "context_internal.h"
#include "log.h"
#include "scope.h"
#include "testhook.h"
#include "util.h"

/*
 * Without systemd nobody else hands controllers down to us, so enable the ones jobcg wants in
 * each ancestor's cgroup.subtree_control on the way down (what Slurm does with IgnoreSystemd and
 * CgroupAutomount). An ancestor holding processes refuses (no internal processes): that is only
 * a warning, `jobcg check` then reports what cannot be enforced. One walk down from the mount:
 * -ENOENT when a directory on the way vanished behind us.
 */
static int mkdir_walk(const char *mount, char **parts, unsigned want, char **ret_root)
{
	_cleanup_free_ char *cur = strdup(mount);

	if (!cur)
		return -ENOMEM;
	for (char **p = parts; *p; p++) {
		char *next;
		int r;

		r = cgfs_enable(cur, want, NULL);
		if (r == -ENOENT)
			return r;
		if (r < 0) {
			log_warning("%s", jobcg_last_error()->message);
			jobcg_error_clear();
		}
		next = cgfs_path(cur, *p);
		if (!next)
			return -ENOMEM;
		free(cur);
		cur = next;
		r = cgfs_mkdir(cur, true);
		if (r < 0)
			return r;
		if (r == 0 && p[1]) {
			/* Without the mark (a kernel without xattrs on cgroups, or killed before
			 * it) the directory is left at teardown, as one found. */
			if (cgfs_xattr_set(cur, SCOPE_MADE_XATTR, "1") < 0) {
				log_debug("%s", jobcg_last_error()->message);
				jobcg_error_clear();
			}
			test_pause("root-mkdir-made");
		}
	}
	*ret_root = TAKE_PTR(cur);
	return 0;
}

static int mkdir_ensure(const struct jobcg_config *conf, const char *mount, const char *root_rel,
			char **ret_root)
{
	_cleanup_strv_free_ char **parts = strv_split(root_rel, "/");
	unsigned want = ctx_wanted_controllers(conf);
	int r = -ENOENT;

	if (!parts)
		return -ENOMEM;
	if (!parts[0])
		return error_set(-EINVAL,
				 "the jobcg tree root must not be the cgroup v2 mount itself");
	for (char **p = parts; *p; p++)
		if (streq(*p, "..") || streq(*p, "."))
			return error_set(-EINVAL, "tree root '%s' must not contain '.' or '..'",
					 root_rel);
	/* A directory jobcg made above the root is removed by the teardown of the last tree
	 * below it, which may be another tree's, between our making (or finding) it and our
	 * mkdir below it: that mkdir then finds no parent. Walk again: the teardown removes
	 * only what is empty, so each walk that loses the race lets that teardown finish. */
	for (unsigned tries = 0; r == -ENOENT && tries < 5; tries++) {
		if (tries)
			jobcg_error_clear();
		r = mkdir_walk(mount, parts, want, ret_root);
	}
	return r;
}

const struct scope_backend scope_mkdir_backend = {
    .name = "mkdir",
    .ensure = mkdir_ensure,
};
