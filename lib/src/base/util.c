/* jobcg: small file and string helpers used across the library. */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "util.h"

void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

char *strstrip(char *s)
{
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

char *str_escape_controls(const char *s)
{
	size_t n = 0;
	char *out, *o;

	for (const char *p = s; *p; p++)
		n += (unsigned char)*p < 0x20 || *p == 0x7f ? 4 : 1;
	out = o = malloc(n + 1);
	if (!out)
		return NULL;
	for (const char *p = s; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			snprintf(o, 5, "\\x%02x", (unsigned char)*p);
			o += 4;
		} else
			*o++ = *p;
	}
	*o = '\0';
	return out;
}

int read_full_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 4096;

	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *nb;

			if (cap >= max)
				return -EFBIG;
			cap = cap * 2 > max ? max : cap * 2;
			nb = realloc(buf, cap + 1);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (ret_len)
		*ret_len = len;
	*ret = TAKE_PTR(buf);
	return 0;
}

int read_full_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return negative_errno();
	return read_full_fd(fd, max, ret, ret_len);
}

int read_one_line_at(int dirfd, const char *path, char **ret)
{
	char *s = NULL;
	size_t len;
	int r;

	r = read_full_file_at(dirfd, path, 1 << 20, &s, &len);
	if (r < 0)
		return r;
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == ' '))
		s[--len] = '\0';
	*ret = s;
	return 0;
}

int write_string_at(int dirfd, const char *path, const char *s)
{
	_cleanup_close_ int fd = -1;
	size_t len = strlen(s);
	ssize_t n;

	fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	do
		n = write(fd, s, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

size_t strv_length(char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

int strv_push(char ***v, char *s)
{
	size_t n = strv_length(*v);
	char **nv;

	if (!s)
		return -ENOMEM;
	nv = realloc(*v, (n + 2) * sizeof(char *));
	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[n] = s;
	nv[n + 1] = NULL;
	*v = nv;
	return 0;
}

bool strv_contains(char *const *v, const char *s)
{
	for (; v && *v; v++)
		if (streq(*v, s))
			return true;
	return false;
}

char **strv_split(const char *s, const char *separators)
{
	_cleanup_strv_free_ char **v = calloc(1, sizeof(char *));
	const char *p = s;

	if (!v)
		return NULL;
	for (;;) {
		size_t n;

		p += strspn(p, separators);
		if (!*p)
			break;
		n = strcspn(p, separators);
		if (strv_push(&v, strndup(p, n)) < 0)
			return NULL;
		p += n;
	}
	return TAKE_PTR(v);
}

static uint64_t clock_usec(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t now_usec(void)
{
	return clock_usec(CLOCK_MONOTONIC);
}

uint64_t realtime_usec(void)
{
	return clock_usec(CLOCK_REALTIME);
}

bool process_is_static(void)
{
	return getauxval(AT_BASE) == 0;
}

char *strdup_vprintf(const char *fmt, va_list ap)
{
	char *s;

	return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

char *strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = strdup_vprintf(fmt, ap);
	va_end(ap);
	return s;
}

int parse_u64_prefix(const char *s, uint64_t max, uint64_t *ret, const char **ret_end)
{
	uint64_t v = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++)
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v) || v > max)
			return -ERANGE;
	*ret = v;
	if (ret_end)
		*ret_end = s;
	return 0;
}

int parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
	const char *end;
	uint64_t v;
	int r = parse_u64_prefix(s, max, &v, &end);

	if (r < 0)
		return r;
	if (*end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int parse_uint(const char *s, unsigned max, unsigned *ret)
{
	uint64_t v;
	int r = parse_u64(s, max, &v);

	if (r < 0)
		return r;
	*ret = (unsigned)v;
	return 0;
}

int parse_owner(const char *s, unsigned *ret_uid, unsigned *ret_gid)
{
	uint64_t u, g;
	const char *end;
	int r = parse_u64_prefix(s, UINT_MAX, &u, &end);

	if (r < 0)
		return r;
	if (*end != ':')
		return -EINVAL;
	r = parse_u64_prefix(end + 1, UINT_MAX, &g, NULL);
	if (r < 0)
		return r;
	*ret_uid = (unsigned)u;
	*ret_gid = (unsigned)g;
	return 0;
}

const char *env_secure(const char *name)
{
	const char *v = secure_getenv(name);

	/* The ids only where it is set: most lookups find nothing and ask the kernel nothing. */
	if (!v || getuid() != geteuid() || getgid() != getegid())
		return NULL;
	return v;
}

static bool owner_trusted(uid_t u, uid_t exe_owner)
{
	return u == 0 || u == getuid() || u == exe_owner;
}

/* @path and each directory above it: owned by a trusted user and writable by nobody else. */
static int path_chain_trusted(const char *name, const char *value, const char *path,
			      uid_t exe_owner)
{
	_cleanup_free_ char *p = strdup(path);

	if (!p)
		return -ENOMEM;
	for (;;) {
		struct stat st;
		char *slash;

		if (stat(p, &st) < 0) {
			int r = negative_errno();

			return error_set(r, "%s=%s: cannot stat %s: %s", name, value, p,
					 strerror(-r));
		}
		if (!owner_trusted(st.st_uid, exe_owner))
			return error_set(-EPERM,
					 "%s=%s is not trusted: %s is owned by uid %u (only root, "
					 "uid %u and the owner of this jobcg may own what it runs)",
					 name, value, p, (unsigned)st.st_uid, (unsigned)getuid());
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
		    !(S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)))
			return error_set(-EPERM,
					 "%s=%s is not trusted: %s is writable by its group or by "
					 "others (mode %04o)",
					 name, value, p, (unsigned)(st.st_mode & 07777));
		if (streq(p, "/"))
			return 0;
		slash = strrchr(p, '/');
		if (slash == p)
			p[1] = '\0';
		else
			*slash = '\0';
	}
}

int env_program(const char *name, char **ret)
{
	const char *raw = getenv(name), *e = env_secure(name);
	_cleanup_free_ char *real = NULL;
	struct stat st, self;
	uid_t exe_owner;
	int r;

	if (!raw || !*raw) {
		*ret = NULL;
		return 0;
	}
	/* Set by whoever started a privileged process: refused rather than ignored, so that the
	 * caller learns why the program it named is not the one run. */
	if (!e)
		return error_set(-EPERM,
				 "%s is not honoured in a process whose real and effective ids "
				 "differ (setuid or setgid): unset it",
				 name);
	if (e[0] != '/')
		return error_set(-EINVAL, "%s=%s: need an absolute path", name, e);
	exe_owner = stat("/proc/self/exe", &self) == 0 ? self.st_uid : 0;
	r = path_chain_trusted(name, e, e, exe_owner);
	if (r < 0)
		return r;
	real = realpath(e, NULL);
	if (!real)
		return error_set(negative_errno(), "%s=%s: %s", name, e, strerror(errno));
	if (!streq(real, e) && (r = path_chain_trusted(name, e, real, exe_owner)) < 0)
		return r;
	if (stat(real, &st) < 0)
		return error_set(negative_errno(), "%s=%s: %s", name, e, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return error_set(-EPERM, "%s=%s is not a regular file", name, e);
	*ret = TAKE_PTR(real);
	return 0;
}

/* @fd, a directory shown as @shown on the way to @dir: ours or root's, and writable by no one
 * else (sticky root-owned directories above the last one excepted). */
static int dir_fd_safe(int fd, const char *dir, const char *shown, bool last, const char *what)
{
	struct stat st;
	char where[PATH_MAX + 32] = "";

	if (!last)
		snprintf(where, sizeof(where), " (on the way, %s)", shown);
	if (fstat(fd, &st) < 0)
		return error_set(negative_errno(), "%s %s%s: cannot stat: %s", what, dir, where,
				 strerror(errno));
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return error_set(-EPERM, "%s %s%s is owned by uid %u, not by root or uid %u", what,
				 dir, where, (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
	    (last || st.st_uid != 0 || !(st.st_mode & S_ISVTX)))
		return error_set(-EPERM,
				 "%s %s%s is writable by its group or by others (mode %04o): "
				 "anyone could replace what jobcg keeps there",
				 what, dir, where, (unsigned)(st.st_mode & 07777));
	return 0;
}

int mkdir_p_safe(const char *dir, mode_t mode, const char *what)
{
	_cleanup_free_ char *p = NULL, *shown = NULL;
	_cleanup_close_ int fd = -1;
	size_t n = 0;
	char *s, *comp;
	int r;

	if (!dir || dir[0] != '/')
		return error_set(-EINVAL, "%s '%s': need an absolute path", what, dir ? dir : "");
	p = strdup(dir);
	shown = calloc(1, strlen(dir) + 2);
	if (!p || !shown)
		return -ENOMEM;
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return error_set(negative_errno(), "cannot open /: %s", strerror(errno));
	s = p + strspn(p, "/");
	r = dir_fd_safe(fd, dir, "/", !*s, what);
	if (r < 0)
		return r;
	while (*s) {
		size_t len = strcspn(s, "/");
		bool last;
		int nfd;

		comp = s;
		s += len;
		if (*s) {
			*s++ = '\0';
			s += strspn(s, "/");
		}
		last = !*s;
		if (streq(comp, "."))
			continue;
		if (streq(comp, ".."))
			return error_set(-EINVAL, "%s %s: '..' is not allowed", what, dir);
		shown[n++] = '/';
		memcpy(shown + n, comp, len);
		n += len;
		shown[n] = '\0';
		nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT) {
			if (mkdirat(fd, comp, mode) < 0 && errno != EEXIST)
				return error_set(negative_errno(), "cannot create the %s %s: %s",
						 what, shown, strerror(errno));
			nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0 && errno == ENOTDIR) {
			struct stat lst;

			/* A link in a directory that passed was made by root or by us. */
			if (fstatat(fd, comp, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(lst.st_mode))
				nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_CLOEXEC);
			else
				errno = ENOTDIR;
		}
		if (nfd < 0)
			return error_set(negative_errno(), "%s %s: %s", what, shown,
					 strerror(errno));
		close(fd);
		fd = nfd;
		r = dir_fd_safe(fd, dir, shown, last, what);
		if (r < 0)
			return r;
	}
	return 0;
}

int state_dir_prepare(const char *file)
{
	_cleanup_free_ char *dir = strdup(file);
	char *slash;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return error_set(-EINVAL, "state directory of '%s': need an absolute path", file);
	*slash = '\0';
	return mkdir_p_safe(dir, 0755, "state directory");
}
