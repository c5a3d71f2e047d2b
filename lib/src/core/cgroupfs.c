/* jobcg: cgroup v2 file access: read/write interface files, directories, events, pids, xattrs. */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <linux/limits.h>
#include <linux/magic.h>

#include "cgroupfs.h"
#include "log.h"
#include "testhook.h"
#include "util.h"

#define RMDIR_TRIES    50 /* EBUSY retries: exiting tasks leave the cgroup within ms */
#define RMDIR_WAIT_MS  20
#define TREE_MAX_DEPTH 16 /* our tree is 5 deep below the root; guard against loops */

static const char *const controller_names[_JOBCG_CTRL_MAX] = {
    [JOBCG_CTRL_CPUSET] = "cpuset", [JOBCG_CTRL_CPU] = "cpu",	      [JOBCG_CTRL_IO] = "io",
    [JOBCG_CTRL_MEMORY] = "memory", [JOBCG_CTRL_HUGETLB] = "hugetlb", [JOBCG_CTRL_PIDS] = "pids",
    [JOBCG_CTRL_RDMA] = "rdma",	    [JOBCG_CTRL_MISC] = "misc",
};

JOBCG_EXPORT const char *jobcg_controller_name(enum jobcg_controller c)
{
	if ((unsigned)c >= _JOBCG_CTRL_MAX)
		return NULL;
	return controller_names[c];
}

JOBCG_EXPORT int jobcg_controller_from_name(const char *name)
{
	for (unsigned i = 0; i < _JOBCG_CTRL_MAX; i++)
		if (name && streq(controller_names[i], name))
			return (int)i;
	return error_set(-EINVAL, "unknown controller '%s'", name ? name : "(null)");
}

char *cgfs_path(const char *dir, const char *name)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	while (*name == '/')
		name++;
	if (!*name)
		return strndup(dir, n);
	return strdup_printf("%.*s/%s", (int)n, dir, name);
}

bool cgfs_is_cgroup2(const char *path)
{
	struct statfs fs;

	return statfs(path, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

static int read_file(const char *dir, const char *file, bool quiet_enoent, char **ret)
{
	_cleanup_free_ char *p = cgfs_path(dir, file);
	int r;

	if (!p)
		return -ENOMEM;
	r = read_full_file_at(AT_FDCWD, p, CGFS_MAX_FILE, ret, NULL);
	if (r == -ENOENT && quiet_enoent)
		return r;
	if (r < 0)
		return error_set(r, "cannot read %s: %s", p, strerror(-r));
	return 0;
}

int cgfs_read(const char *dir, const char *file, char **ret)
{
	return read_file(dir, file, false, ret);
}

int cgfs_read_optional(const char *dir, const char *file, char **ret)
{
	return read_file(dir, file, true, ret);
}

int cgfs_read_u64(const char *dir, const char *file, uint64_t *ret)
{
	_cleanup_free_ char *s = NULL;
	char *t;
	uint64_t v;
	int r;

	r = cgfs_read(dir, file, &s);
	if (r < 0)
		return r;
	t = strstrip(s);
	if (streq(t, "max")) {
		*ret = UINT64_MAX;
		return 0;
	}
	if (parse_u64(t, UINT64_MAX, &v) < 0)
		return error_set(-EINVAL, "%s/%s: expected a number, got '%s'", dir, file, t);
	*ret = v;
	return 0;
}

int cgfs_write(const char *dir, const char *file, const char *value)
{
	_cleanup_free_ char *p = cgfs_path(dir, file);
	int r;

	if (!p)
		return -ENOMEM;
	r = write_string_at(AT_FDCWD, p, value);
	if (r < 0)
		return error_set(r, "cannot write '%s' to %s: %s", value, p, strerror(-r));
	log_debug("wrote '%s' to %s", value, p);
	return 0;
}

int cgfs_mkdir(const char *dir, bool exist_ok)
{
	if (TEST_FAIL("mkdir", dir, mkdir(dir, 0755)) == 0) {
		log_debug("created %s", dir);
		return 0;
	}
	if (errno == EEXIST && exist_ok)
		return 1;
	return error_set(negative_errno(), "cannot create cgroup %s: %s", dir, strerror(errno));
}

int cgfs_rmdir(const char *dir)
{
	for (unsigned i = 0;; i++) {
		if (TEST_FAIL("rmdir", dir, rmdir(dir)) == 0) {
			log_debug("removed %s", dir);
			return 0;
		}
		if (errno == ENOENT)
			return 0;
		/* A cgroup stays busy for a moment after its last task was reaped: the kernel
		 * detaches exiting tasks asynchronously. No event says when, so retry a bounded
		 * number of times. */
		if (errno != EBUSY || i + 1 >= RMDIR_TRIES)
			return error_set(negative_errno(), "cannot remove cgroup %s: %s", dir,
					 strerror(errno));
		sleep_ms(RMDIR_WAIT_MS);
	}
}

static int remove_tree_depth(const char *dir, unsigned depth)
{
	_cleanup_strv_free_ char **kids = NULL;
	int r, ret = 0;

	if (depth > TREE_MAX_DEPTH)
		return error_set(-ELOOP, "cgroup tree below %s is too deep", dir);
	/* Leaves (task and helper cgroups, most of a step) go with one rmdir: only a cgroup that
	 * is busy (children, or a task still detaching) is listed, then retried by cgfs_rmdir. */
	if (TEST_FAIL("rmdir", dir, rmdir(dir)) == 0) {
		log_debug("removed %s", dir);
		return 0;
	}
	if (errno == ENOENT)
		return 0;
	if (errno != EBUSY && errno != ENOTEMPTY)
		return error_set(negative_errno(), "cannot remove cgroup %s: %s", dir,
				 strerror(errno));
	r = cgfs_children(dir, &kids);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	for (char **k = kids; *k; k++) {
		_cleanup_free_ char *sub = cgfs_path(dir, *k);

		if (!sub)
			return -ENOMEM;
		r = remove_tree_depth(sub, depth + 1);
		if (r < 0 && ret == 0)
			ret = r;
	}
	if (ret < 0)
		return ret;
	return cgfs_rmdir(dir);
}

int cgfs_remove_tree(const char *dir)
{
	return remove_tree_depth(dir, 0);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int cgfs_children(const char *dir, char ***ret)
{
	_cleanup_strv_free_ char **v = calloc(1, sizeof(char *));
	DIR *d;
	struct dirent *e;
	int r = 0;

	if (!v)
		return -ENOMEM;
	d = opendir(dir);
	if (!d) {
		r = negative_errno();
		if (r == -ENOENT)
			return r;
		return error_set(r, "cannot list %s: %s", dir, strerror(-r));
	}
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || streq(e->d_name, ".") || streq(e->d_name, ".."))
			continue;
		r = strv_push(&v, strdup(e->d_name));
		if (r < 0)
			break;
	}
	closedir(d);
	if (r < 0)
		return r;
	qsort(v, strv_length(v), sizeof(char *), cmp_str);
	*ret = TAKE_PTR(v);
	return 0;
}

unsigned cgfs_parse_controllers(const char *text)
{
	_cleanup_strv_free_ char **v = strv_split(text, " \t\n");
	unsigned mask = 0;

	for (char **p = v; p && *p; p++) {
		int c = jobcg_controller_from_name(*p);

		if (c >= 0)
			mask |= 1u << c;
	}
	return mask;
}

int cgfs_controllers(const char *dir, const char *file, unsigned *ret)
{
	_cleanup_free_ char *s = NULL;
	int r = cgfs_read(dir, file, &s);

	if (r < 0)
		return r;
	*ret = cgfs_parse_controllers(s);
	return 0;
}

int cgfs_enable(const char *dir, unsigned want, unsigned *ret)
{
	unsigned avail, enabled, missing;
	char buf[256] = "";
	int r;

	r = cgfs_controllers(dir, "cgroup.controllers", &avail);
	if (r < 0)
		return r;
	/* Nothing wanted is offered here (a hybrid host's v2 tree): nothing to read or enable. */
	if (!(want & avail) && !ret)
		return 0;
	r = cgfs_controllers(dir, "cgroup.subtree_control", &enabled);
	if (r < 0)
		return r;
	missing = want & avail & ~enabled;
	if (missing) {
		for (unsigned i = 0; i < _JOBCG_CTRL_MAX; i++)
			if (missing & (1u << i)) {
				strcat(buf, buf[0] ? " +" : "+");
				strcat(buf, controller_names[i]);
			}
		/* Fails with EBUSY if @dir holds processes (no internal processes rule): callers
		 * move every pid to a leaf first. */
		r = cgfs_write(dir, "cgroup.subtree_control", buf);
		if (r < 0)
			return r;
		enabled |= missing;
	}
	if (ret)
		*ret = enabled;
	return 0;
}

int cgfs_parse_keyed(const char *text, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);
	const char *p = text;

	while (p && *p) {
		const char *eol = strchr(p, '\n');

		if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
			const char *v = p + klen + 1;
			const char *end;
			uint64_t n;

			if (parse_u64_prefix(v, UINT64_MAX, &n, &end) < 0 ||
			    (*end && *end != '\n' && *end != ' '))
				return -EINVAL;
			*ret = n;
			return 0;
		}
		p = eol ? eol + 1 : NULL;
	}
	return -ENOENT;
}

int cgfs_events(const char *dir, bool *ret_populated, bool *ret_frozen)
{
	_cleanup_free_ char *s = NULL;
	uint64_t pop = 0, fr = 0;
	int r;

	r = cgfs_read(dir, "cgroup.events", &s);
	if (r < 0)
		return r;
	if (cgfs_parse_keyed(s, "populated", &pop) < 0)
		return error_set(-EINVAL, "%s/cgroup.events has no 'populated' line", dir);
	(void)cgfs_parse_keyed(s, "frozen", &fr); /* absent before Linux 5.2 */
	if (ret_populated)
		*ret_populated = pop != 0;
	if (ret_frozen)
		*ret_frozen = fr != 0;
	return 0;
}

int cgfs_wait_events(const char *dir, const char *key, uint64_t want, unsigned timeout_ms)
{
	_cleanup_free_ char *path = cgfs_path(dir, "cgroup.events");
	_cleanup_close_ int ifd = -1;
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000u;

	if (!path)
		return -ENOMEM;
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ifd < 0)
		return error_set(negative_errno(), "inotify_init1: %s", strerror(errno));
	/* Watch before the first read so that no change between read and wait is lost. */
	if (inotify_add_watch(ifd, path, IN_MODIFY) < 0) {
		if (errno == ENOENT && streq(key, "populated") && want == 0)
			return 0;
		return error_set(negative_errno(), "cannot watch %s: %s", path, strerror(errno));
	}
	for (;;) {
		_cleanup_free_ char *s = NULL;
		uint64_t v, now;
		struct pollfd pfd = {.fd = ifd, .events = POLLIN};
		char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
		int r;

		r = read_full_file_at(AT_FDCWD, path, CGFS_MAX_FILE, &s, NULL);
		/* Gone, or removed between open and read (kernfs says ENODEV): empty for good. */
		if ((r == -ENOENT || r == -ENODEV) && streq(key, "populated") && want == 0)
			return 0;
		if (r < 0)
			return error_set(r, "cannot read %s: %s", path, strerror(-r));
		r = cgfs_parse_keyed(s, key, &v);
		if (r == -ENOENT)
			return error_set(-EOPNOTSUPP, "%s has no '%s' line", path, key);
		if (r < 0)
			return error_set(r, "%s: bad '%s' line", path, key);
		if (v == want)
			return 0;
		now = now_usec();
		if (now >= deadline)
			return error_set(-ETIMEDOUT,
					 "timed out after %u ms waiting for '%s %llu' in %s",
					 timeout_ms, key, (unsigned long long)want, path);
		r = poll(&pfd, 1, (int)((deadline - now + 999) / 1000));
		if (r < 0 && errno != EINTR)
			return error_set(negative_errno(), "poll: %s", strerror(errno));
		while (read(ifd, buf, sizeof(buf)) > 0)
			; /* drain: we re-read the file anyway */
	}
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

int cgfs_parse_pids(const char *text, pid_t **pids, size_t *n)
{
	const char *p = text;

	while (*p) {
		const char *end;
		uint64_t v;
		pid_t *np;

		if (*p == '\n') {
			p++;
			continue;
		}
		if (parse_u64_prefix(p, INT32_MAX, &v, &end) < 0 || (*end && *end != '\n'))
			return error_set(-EINVAL, "bad pid line in cgroup.procs");
		if (v == 0) /* how the kernel lists a process that this pid namespace cannot see */
			return error_set(-EREMOTE,
					 "cgroup.procs lists a process of another pid "
					 "namespace (pid 0): jobcg cannot signal or move it");
		np = realloc(*pids, (*n + 1) * sizeof(pid_t));
		if (!np)
			return -ENOMEM;
		*pids = np;
		(*pids)[(*n)++] = (pid_t)v;
		p = end;
	}
	return 0;
}

static int pids_rec(const char *dir, bool recursive, unsigned depth, pid_t **pids, size_t *n)
{
	_cleanup_free_ char *s = NULL;
	_cleanup_strv_free_ char **kids = NULL;
	int r;

	if (depth > TREE_MAX_DEPTH)
		return error_set(-ELOOP, "cgroup tree below %s is too deep", dir);
	r = cgfs_read(dir, "cgroup.procs", &s);
	if (r < 0)
		return r;
	r = cgfs_parse_pids(s, pids, n);
	if (r == -EINVAL || r == -EREMOTE)
		jobcg_error_prefix("%s", dir);
	if (r < 0 || !recursive)
		return r;
	r = cgfs_children(dir, &kids);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	for (char **k = kids; *k; k++) {
		_cleanup_free_ char *sub = cgfs_path(dir, *k);

		if (!sub)
			return -ENOMEM;
		r = pids_rec(sub, true, depth + 1, pids, n);
		if (r < 0 && r != -ENOENT) /* a child may vanish while we walk */
			return r;
	}
	return 0;
}

int cgfs_pids(const char *dir, bool recursive, pid_t **ret, size_t *ret_n)
{
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0, m = 0;
	int r;

	r = pids_rec(dir, recursive, 0, &pids, &n);
	if (r < 0)
		return r;
	if (n) {
		qsort(pids, n, sizeof(pid_t), cmp_pid);
		for (size_t i = 0; i < n; i++)
			if (m == 0 || pids[m - 1] != pids[i])
				pids[m++] = pids[i];
	}
	*ret = TAKE_PTR(pids);
	*ret_n = m;
	return 0;
}

bool cgfs_pids_have(const pid_t *pids, size_t n, pid_t pid)
{
	return n && bsearch(&pid, pids, n, sizeof(pid_t), cmp_pid);
}

int cgfs_move_pid(const char *dir, pid_t pid)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%d", (int)pid);
	return cgfs_write(dir, "cgroup.procs", buf);
}

static int write_feature(const char *dir, const char *file, const char *v)
{
	_cleanup_free_ char *p = cgfs_path(dir, file);

	if (!p)
		return -ENOMEM;
	if (access(p, F_OK) < 0 && errno == ENOENT && access(dir, F_OK) == 0)
		return error_set(-EOPNOTSUPP, "this kernel has no %s (cgroup %s)", file, dir);
	return cgfs_write(dir, file, v);
}

int cgfs_kill(const char *dir)
{
	if (test_flag("no-cgroup-kill"))
		return error_set(-EOPNOTSUPP, "cgroup.kill is not used (JOBCG_TEST_FLAGS)");
	return write_feature(dir, "cgroup.kill", "1");
}

int cgfs_freeze(const char *dir, bool freeze)
{
	return write_feature(dir, "cgroup.freeze", freeze ? "1" : "0");
}

int cgfs_freeze_asked(const char *dir, bool above_only, char **ret_dir)
{
	_cleanup_free_ char *p = strdup(dir);
	char *slash;

	if (!p)
		return -ENOMEM;
	for (bool self = true;; self = false) {
		if (!self || !above_only) {
			_cleanup_free_ char *f = cgfs_path(p, "cgroup.freeze"), *s = NULL;
			int r;

			if (!f)
				return -ENOMEM;
			r = read_full_file_at(AT_FDCWD, f, CGFS_MAX_FILE, &s, NULL);
			/* The cgroup root has no cgroup.freeze (nor has any cgroup before Linux
			 * 5.2): nothing at or above it can be frozen. */
			if (r == -ENOENT)
				return 0;
			if (r == 0 && streq(strstrip(s), "1")) {
				if (ret_dir)
					*ret_dir = TAKE_PTR(p);
				return 1;
			}
		}
		if (!(slash = strrchr(p, '/')) || slash == p)
			return 0;
		*slash = '\0';
	}
}

int cgfs_xattr_set(const char *dir, const char *name, const char *value)
{
	if (TEST_FAIL("setxattr", dir, setxattr(dir, name, value, strlen(value), 0)) < 0)
		return error_set(negative_errno(), "cannot set xattr %s on %s: %s", name, dir,
				 strerror(errno));
	return 0;
}

/* FD >= 0: read through it, else through PATH. The size is asked first (values have no bound
 * below the kernel's XATTR_SIZE_MAX); one that grows between the two calls is asked again. */
static int xattr_read(int fd, const char *path, const char *name, char **ret, size_t *ret_len)
{
	for (unsigned tries = 0;; tries++) {
		_cleanup_free_ char *buf = NULL;
		ssize_t size, n;

		size = fd >= 0 ? fgetxattr(fd, name, NULL, 0) : getxattr(path, name, NULL, 0);
		if (size < 0)
			return negative_errno();
		if (size > XATTR_SIZE_MAX)
			return -E2BIG;
		buf = malloc((size_t)size + 1);
		if (!buf)
			return -ENOMEM;
		n = fd >= 0 ? fgetxattr(fd, name, buf, (size_t)size)
			    : getxattr(path, name, buf, (size_t)size);
		if (n < 0 && errno == ERANGE && tries < 8)
			continue;
		if (n < 0)
			return negative_errno();
		buf[n] = '\0';
		*ret = TAKE_PTR(buf);
		if (ret_len)
			*ret_len = (size_t)n;
		return 0;
	}
}

int cgfs_xattr_get(const char *dir, const char *name, char **ret)
{
	return cgfs_xattr_get_len(dir, name, ret, NULL);
}

int cgfs_xattr_get_len(const char *dir, const char *name, char **ret, size_t *ret_len)
{
	int r = xattr_read(-1, dir, name, ret, ret_len);

	if (r == -ENODATA || r == -ENOENT || r == -ENOMEM)
		return r;
	if (r < 0)
		return error_set(r, "cannot read xattr %s of %s: %s", name, dir, strerror(-r));
	return 0;
}

int cgfs_fxattr_get(int fd, const char *name, char **ret)
{
	return xattr_read(fd, NULL, name, ret, NULL);
}

int cgfs_open_dir(const char *dir, int *ret_fd)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return error_set(negative_errno(), "cannot open cgroup %s: %s", dir,
				 strerror(errno));
	*ret_fd = fd;
	return 0;
}
