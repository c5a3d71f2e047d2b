/* jobcg: device node names found under /dev, so that `jobcg policy` prints "c 195:1" as
 * /dev/nvidia1. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "devnames.h"
#include "util.h"

struct devname {
	char type;
	uint32_t major, minor;
	char *path;
};

struct jobcg_devnames {
	struct devname *v;
	size_t n, cap;
};

#define DEVNAMES_MAX 65536u

void jobcg_devnames_free(struct jobcg_devnames *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].path);
	free(d->v);
	free(d);
}

static int devnames_push(struct jobcg_devnames *d, const struct stat *st, char *path)
{
	if (d->n >= DEVNAMES_MAX) {
		free(path);
		return -E2BIG;
	}
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 256;
		struct devname *nv = realloc(d->v, nc * sizeof(*nv));
		if (!nv) {
			free(path);
			return -ENOMEM;
		}
		d->v = nv;
		d->cap = nc;
	}
	d->v[d->n++] = (struct devname){S_ISCHR(st->st_mode) ? 'c' : 'b', major(st->st_rdev),
					minor(st->st_rdev), path};
	return 0;
}

static void scan_dev(struct jobcg_devnames *d, const char *dir, int depth)
{
	DIR *dd;
	struct dirent *de;

	if (depth > 3 || !(dd = opendir(dir)))
		return;
	while ((de = readdir(dd)) && d->n < DEVNAMES_MAX) {
		_cleanup_free_ char *path = NULL;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		path = strdup_printf("%s/%s", dir, de->d_name);
		if (!path || lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			scan_dev(d, path, depth + 1);
			continue;
		}
		if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) &&
		    devnames_push(d, &st, TAKE_PTR(path)) < 0)
			break;
	}
	closedir(dd);
}

int jobcg_devnames_new(struct jobcg_devnames **ret)
{
	struct jobcg_devnames *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	*ret = d;
	return 0;
}

int jobcg_devnames_add(struct jobcg_devnames *d, const char *path)
{
	struct stat st;
	char *copy;

	if (!d || !path)
		return -EINVAL;
	if (stat(path, &st) < 0)
		return negative_errno();
	if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
		return -ENODEV;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	return devnames_push(d, &st, copy);
}

int jobcg_devnames_scan(const char *dir, struct jobcg_devnames **ret)
{
	struct jobcg_devnames *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	scan_dev(d, dir ? dir : "/dev", 0);
	*ret = d;
	return 0;
}

const char *jobcg_devnames_find(const struct jobcg_devnames *d, char type, uint32_t major,
				uint32_t minor)
{
	const char *best = NULL;

	if (!d)
		return NULL;
	/* Prefer the shortest name: /dev/nvidia0 over /dev/char/195:0. */
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].type == type && d->v[i].major == major && d->v[i].minor == minor &&
		    (!best || strlen(d->v[i].path) < strlen(best)))
			best = d->v[i].path;
	return best;
}
