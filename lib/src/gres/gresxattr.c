/* jobcg: device sets as text, kept in xattrs on job and step cgroups, and the walk that
 * derives the devices the node's jobs hold. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "cgroupfs.h"
#include "gpudetect_internal.h"
#include "gresxattr.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "log.h"
#include "testhook.h"
#include "util.h"

JOBCG_EXPORT int jobcg_gres_set_format_name(const struct jobcg_gres_node *n,
					    const struct jobcg_gres_set *s, const char *name,
					    char **ret)
{
	_cleanup_free_ char *out = NULL;

	for (size_t i = 0; i < n->ndev; i++) {
		char num[16];

		if (!jobcg_gres_set_has(s, (unsigned)i) || !streq(n->dev[i].rec->name, name))
			continue;
		snprintf(num, sizeof(num), "%u", n->dev[i].index);
		if (gres_append(&out, num) < 0)
			return -ENOMEM;
	}
	if (!out && !(out = strdup("")))
		return -ENOMEM;
	*ret = TAKE_PTR(out);
	return 0;
}

JOBCG_EXPORT int jobcg_gres_set_format(const struct jobcg_gres_node *n,
				       const struct jobcg_gres_set *s, char **ret)
{
	_cleanup_free_ char *out = strdup("");

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n->ndev; i++) {
		const char *name = n->dev[i].rec->name;
		_cleanup_free_ char *idx = NULL;
		bool seen = false;
		char *t;

		for (size_t j = 0; j < i && !seen; j++)
			seen = streq(n->dev[j].rec->name, name);
		if (seen)
			continue;
		if (jobcg_gres_set_format_name(n, s, name, &idx) < 0)
			return -ENOMEM;
		if (!*idx)
			continue;
		t = strdup_printf("%s%s%s:%s", out, *out ? ";" : "", name, idx);
		if (!t)
			return -ENOMEM;
		free(out);
		out = t;
	}
	*ret = TAKE_PTR(out);
	return 0;
}

int gres_index_range(const char *s, size_t len, unsigned *ret_lo, unsigned *ret_hi)
{
	const char *end;
	uint64_t lo, hi;

	if (parse_u64_prefix(s, JOBCG_GRES_MAX - 1, &lo, &end) < 0)
		return -EINVAL;
	hi = lo;
	if (end < s + len && *end == '-' &&
	    parse_u64_prefix(end + 1, JOBCG_GRES_MAX - 1, &hi, &end) < 0)
		return -EINVAL;
	if (end != s + len || hi < lo)
		return -EINVAL;
	*ret_lo = (unsigned)lo;
	*ret_hi = (unsigned)hi;
	return 0;
}

/*
 * Parse "gpu:0,2;nic:1" (an item may be a range, "gpu:0-3"), naming it as @what in errors.
 * With @lenient, unknown names and indices are skipped with a warning.
 */
static int set_parse(const struct jobcg_gres_node *n, const char *s, const char *what, bool lenient,
		     struct jobcg_gres_set *ret)
{
	_cleanup_strv_free_ char **groups = strv_split(s, ";");
	struct jobcg_gres_set set = {};

	if (!groups)
		return -ENOMEM;
	for (size_t g = 0; groups[g]; g++) {
		char *colon = strchr(groups[g], ':');
		_cleanup_strv_free_ char **idx = NULL;

		if (!colon || colon == groups[g] || !colon[1])
			return error_set(-EINVAL, "%s '%s': '%s' is not NAME:INDEX[,INDEX]", what,
					 s, groups[g]);
		*colon = 0;
		idx = strv_split(colon + 1, ",");
		if (!idx)
			return -ENOMEM;
		for (size_t i = 0; idx[i]; i++) {
			unsigned lo, hi;

			if (gres_index_range(idx[i], strlen(idx[i]), &lo, &hi) < 0)
				return error_set(-EINVAL, "%s '%s': bad index '%s' (N or N-M)",
						 what, s, idx[i]);
			for (unsigned v = lo; v <= hi; v++) {
				int pos = jobcg_gres_node_find(n, groups[g], v);

				if (pos < 0) {
					if (lenient) {
						log_warning(
						    "%s '%s': %s %u is not in gres.conf any "
						    "more",
						    what, s, groups[g], v);
						continue;
					}
					return error_set(
					    -ENOENT, "%s '%s': this node's gres.conf has no %s %u",
					    what, s, groups[g], v);
				}
				jobcg_gres_set_add(&set, (unsigned)pos);
			}
		}
	}
	*ret = set;
	return 0;
}

JOBCG_EXPORT int jobcg_gres_set_parse(const struct jobcg_gres_node *n, const char *s,
				      struct jobcg_gres_set *ret)
{
	return set_parse(n, s, "gres set", false, ret);
}

int gres_set_parse_as(const struct jobcg_gres_node *n, const char *s, const char *what,
		      struct jobcg_gres_set *ret)
{
	return set_parse(n, s, what, false, ret);
}

int gres_set_parse_known(const struct jobcg_gres_node *n, const char *s, struct jobcg_gres_set *ret,
			 bool *ret_dropped)
{
	struct jobcg_gres_set set = {};
	int r = set_parse(n, s, "gres set", false, &set);

	if (r == -ENOENT) {
		jobcg_error_clear();
		r = set_parse(n, s, "gres set", true, &set);
		*ret_dropped = r >= 0;
	} else
		*ret_dropped = false;
	if (r == -EINVAL) {
		char why[1024];

		snprintf(why, sizeof(why), "%s", jobcg_last_error()->message);
		return error_set(-EBADMSG, "'%s' is not a device list: %s", s, why);
	}
	if (r < 0)
		return r;
	*ret = set;
	return 0;
}

int jobcg_gres_xattr_write(const struct jobcg_gres_node *n, int dirfd, const char *xattr,
			   const struct jobcg_gres_set *s)
{
	const char *name = xattr ? xattr : JOBCG_GRES_XATTR;
	_cleanup_free_ char *v = NULL;
	int r = jobcg_gres_set_format(n, s, &v);

	if (r < 0)
		return r;
	if (TEST_FAIL("setxattr", name, fsetxattr(dirfd, name, v, strlen(v), 0)) < 0)
		return error_set(negative_errno(), "cannot set %s: %s", name, strerror(errno));
	return 0;
}

int jobcg_gres_xattr_read(const struct jobcg_gres_node *n, int dirfd, const char *xattr,
			  struct jobcg_gres_set *ret)
{
	_cleanup_free_ char *v = NULL;
	const char *name = xattr ? xattr : JOBCG_GRES_XATTR;
	int r = cgfs_fxattr_get(dirfd, name, &v);

	if (r == -ENODATA)
		return r;
	if (r < 0)
		return error_set(r, "cannot read %s: %s", name, strerror(-r));
	if (!*v) {
		*ret = (struct jobcg_gres_set){};
		return 0;
	}
	r = jobcg_gres_set_parse(n, v, ret);
	if (r == -EINVAL) {
		char why[1024];

		/* Stored state, not a request: the caller's input is not what is wrong. */
		snprintf(why, sizeof(why), "%s", jobcg_last_error()->message);
		return error_set(-EBADMSG,
				 "%s holds '%s', which this node's devices do not match: %s", name,
				 v, why);
	}
	return r;
}

#define SCAN_MAX_DEPTH 8

static int scan_dir(const struct jobcg_gres_node *n, int fd, const char *rel, unsigned depth,
		    const char *xattr, jobcg_gres_scan_fn fn, void *userdata,
		    struct jobcg_gres_set *used)
{
	_cleanup_free_ char *v = NULL;
	DIR *d;
	struct dirent *de;
	int r, dfd;

	r = cgfs_fxattr_get(fd, xattr, &v);
	if (r >= 0) {
		struct jobcg_gres_set s = {};

		/*
		 * A holder whose list no longer parses (written by hand, or by a different
		 * jobcg) may still have devices granted in the kernel. Counting it as holding
		 * nothing would hand them to another job: fail closed and count it as holding
		 * every device of the node until it is released or repaired.
		 */
		if (*v && set_parse(n, v, "gres set", true, &s) < 0) {
			log_warning("%s: %s='%s' does not parse: counted as holding every device "
				    "of the node until it is released",
				    *rel ? rel : ".", xattr, v);
			jobcg_error_clear();
			jobcg_gres_node_all(n, NULL, &s);
		}
		for (size_t i = 0; i < ELEMENTSOF(s.w); i++)
			used->w[i] |= s.w[i];
		if (fn && (r = fn(rel, depth, &s, userdata)) != 0)
			return r;
	} else if (r != -ENODATA && r != -EOPNOTSUPP) {
		return error_set(r, "%s: cannot read %s: %s", *rel ? rel : ".", xattr,
				 strerror(-r));
	}
	/*
	 * Devices are held by jobs and reservations; a step's and a task's are always a part of
	 * their job's (jobgres.c derives them from it), so below a job there is nothing to add.
	 * Only the root and reservations (whose jobs live inside them) are walked: one directory
	 * per job instead of every step, user and task leaf of every job, under the node lock.
	 */
	if (depth >= SCAN_MAX_DEPTH ||
	    (depth > 0 && !startswith(strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel, "resv_")))
		return 0;

	/* A new open file description: a dup() would share (and move) the caller's offset. */
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	d = fdopendir(dfd);
	if (!d) {
		r = negative_errno();
		close(dfd);
		return r;
	}
	r = 0;
	while (r == 0 && (de = readdir(d))) {
		_cleanup_close_ int cfd = -1;
		_cleanup_free_ char *crel = NULL;

		if (de->d_type != DT_DIR || streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			/* A job removed while we look is simply gone. */
			if (errno == ENOENT)
				continue;
			r = error_set(negative_errno(), "cannot open %s/%s: %s", *rel ? rel : ".",
				      de->d_name, strerror(errno));
			break;
		}
		crel = *rel ? strdup_printf("%s/%s", rel, de->d_name) : strdup(de->d_name);
		if (!crel) {
			r = -ENOMEM;
			break;
		}
		r = scan_dir(n, cfd, crel, depth + 1, xattr, fn, userdata, used);
	}
	closedir(d);
	return r;
}

int jobcg_gres_scan(const struct jobcg_gres_node *n, int rootfd, const char *xattr,
		    jobcg_gres_scan_fn fn, void *userdata, struct jobcg_gres_set *ret_used)
{
	struct jobcg_gres_set used = {};
	int r = scan_dir(n, rootfd, "", 0, xattr ? xattr : JOBCG_GRES_XATTR, fn, userdata, &used);

	if (r != 0)
		return r;
	if (ret_used)
		*ret_used = used;
	return 0;
}
