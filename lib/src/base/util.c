/* jobcg: small file and string helpers used across the library. */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "log.h"
#include "testhook.h"
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
	/* The first buffer is bigger than a small @max: the limit is checked here too. */
	if (len > max)
		return -EFBIG;
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
		n = TEST_FAIL("write", path, write(fd, s, len));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

enum io_op { IO_READ, IO_WRITE, IO_SEND };

/* read_all(), write_all() and send_all(): one loop, a socket's sends without SIGPIPE. Any
 * error but EINTR ends it, EAGAIN too: on a blocking socket that is SO_SNDTIMEO or SO_RCVTIMEO
 * run out, and trying again would wait that long once more for a peer that does nothing. */
static int io_all(int fd, char *buf, size_t len, enum io_op op)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = op == IO_READ    ? read(fd, buf + done, len - done)
			    : op == IO_WRITE ? write(fd, buf + done, len - done)
					     : send(fd, buf + done, len - done, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return negative_errno();
		if (n == 0) /* the end of the file, or a file that takes nothing */
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

int read_all(int fd, void *buf, size_t len)
{
	return io_all(fd, buf, len, IO_READ);
}

/* (io_all() writes nothing into @buf for these two) */
int write_all(int fd, const void *buf, size_t len)
{
	return io_all(fd, (char *)buf, len, IO_WRITE);
}

int send_all(int fd, const void *buf, size_t len)
{
	return io_all(fd, (char *)buf, len, IO_SEND);
}

int write_file_atomic(const char *path, const char *s, mode_t mode, unsigned flags)
{
	const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
	_cleanup_free_ char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
	_cleanup_close_ int dfd = -1;

	if (!dir)
		return -ENOMEM;
	if (!*name)
		return -EINVAL;
	dfd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	return write_file_atomic_at(dfd, name, s, strlen(s), mode, flags);
}

int write_file_atomic_at(int dfd, const char *name, const void *s, size_t len, mode_t mode,
			 unsigned flags)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -1;
	int r = 0;

	if (!*name || strchr(name, '/'))
		return -EINVAL;
	if (!(tmp = strdup_printf(".%s.%d.tmp", name, (int)getpid())))
		return -ENOMEM;
	if (test_fail("write file", name))
		return -EIO;
	for (int tries = 0;; tries++) {
		fd = openat(dfd, tmp,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
		/* One left by a writer that crashed with this pid (before a reboot): no live
		 * process but us has this name, and an -EEXIST from it would read as @path's. */
		if (fd < 0 && errno == EEXIST && tries == 0 && unlinkat(dfd, tmp, 0) == 0)
			continue;
		if (fd < 0)
			return errno == EEXIST ? -EBUSY : negative_errno();
		break;
	}
	/* The mode asked, whatever the umask. */
	if (fchmod(fd, mode) < 0)
		r = negative_errno();
	if (r == 0)
		r = write_all(fd, s, len);
	if (r == 0 && (flags & WRITE_ATOMIC_SYNC) && fsync(fd) < 0)
		r = negative_errno();
	if (r == 0 && !(flags & WRITE_ATOMIC_NOREPLACE) && renameat(dfd, tmp, dfd, name) < 0)
		r = negative_errno();
	if (r == 0 && (flags & WRITE_ATOMIC_NOREPLACE)) {
		/* link(2) fails on an existing name, on every file system (renameat2's
		 * RENAME_NOREPLACE does not); the temporary name goes below. */
		if (linkat(dfd, tmp, dfd, name, 0) < 0)
			r = negative_errno();
	}
	if (r < 0 || (flags & WRITE_ATOMIC_NOREPLACE))
		(void)unlinkat(dfd, tmp, 0);
	if (r == 0 && (flags & WRITE_ATOMIC_SYNC) && fsync(dfd) < 0)
		r = negative_errno();
	return r;
}

static void close_fd_range(unsigned first, unsigned last)
{
	if (first > last)
		return;
	if (syscall(SYS_close_range, first, last, 0) == 0)
		return;
	for (long fd = first, n = sysconf(_SC_OPEN_MAX); fd < n && fd <= (long)last; fd++)
		close((int)fd);
}

void close_fds_but(int from, const int *keep, size_t n)
{
	unsigned next = from < 0 ? 0 : (unsigned)from;

	/* The kept numbers in increasing order, without sorting a copy: no allocation here. */
	for (;;) {
		bool found = false;
		unsigned k = 0;

		for (size_t i = 0; i < n; i++)
			if (keep[i] >= 0 && (unsigned)keep[i] >= next &&
			    (!found || (unsigned)keep[i] < k)) {
				k = (unsigned)keep[i];
				found = true;
			}
		if (!found) {
			close_fd_range(next, ~0U);
			return;
		}
		if (k > next)
			close_fd_range(next, k - 1);
		next = k + 1;
	}
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

void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void sleep_backoff(unsigned *pause_ms)
{
	sleep_ms(*pause_ms);
	*pause_ms = *pause_ms < 25 ? *pause_ms * 2 : 50;
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

/* A walk by descriptor from / to a path root may trust (mkdir_p_safe(), open_trusted()). */
struct walk {
	const char *what, *dir; /* in messages: "state directory", the path asked for */
	char shown[PATH_MAX];	/* where the walk is, links resolved */
	char target[PATH_MAX];	/* the last link read, its target */
	unsigned links;		/* links followed so far */
	bool create;		/* mkdir -p: missing directories are made, with @mode */
	mode_t mode;
	uid_t euid; /* ours, asked once per walk */
};

/* How a directory reached is checked: on the way (a sticky root-owned directory such as /tmp
 * may be world-writable), holding the file asked for, or the directory asked for itself. */
enum {
	DIR_ON_WAY = 0,
	DIR_STRICT = 1 << 0,
	DIR_SELF = DIR_STRICT | 1 << 1,
};

#define WALK_MAX_LINKS 40

static int shown_push(struct walk *w, const char *comp)
{
	size_t n = strlen(w->shown);
	bool root = streq(w->shown, "/");

	if (n + strlen(comp) + 2 > sizeof(w->shown))
		return error_set(-ENAMETOOLONG, "%s %s: the path is too long", w->what, w->dir);
	snprintf(w->shown + n, sizeof(w->shown) - n, "%s%s", root ? "" : "/", comp);
	return 0;
}

static void shown_pop(struct walk *w)
{
	char *slash = strrchr(w->shown, '/');

	if (slash == w->shown)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
}

/* @fd, the directory w->shown: ours or root's, and writable by no one else (for DIR_ON_WAY, a
 * sticky one of root's or ours excepted: no one else can rename or replace what is ours in it). */
static int dir_fd_safe(int fd, const struct walk *w, unsigned how)
{
	struct stat st;
	char where[PATH_MAX + 32] = "", who[32] = "";

	if ((how & DIR_SELF) != DIR_SELF)
		snprintf(where, sizeof(where), " (on the way, %s)", w->shown);
	if (w->euid != 0)
		snprintf(who, sizeof(who), " or uid %u", (unsigned)w->euid);
	if (fstat(fd, &st) < 0)
		return error_set(negative_errno(), "%s %s%s: cannot stat: %s", w->what, w->dir,
				 where, strerror(errno));
	if (st.st_uid != 0 && st.st_uid != w->euid)
		return error_set(-EPERM, "%s %s%s is owned by uid %u, not by root%s", w->what,
				 w->dir, where, (unsigned)st.st_uid, who);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && ((how & DIR_STRICT) || !(st.st_mode & S_ISVTX)))
		return error_set(-EPERM,
				 "%s %s%s is writable by its group or by others (mode %04o): "
				 "anyone could replace what jobcg keeps there",
				 w->what, w->dir, where, (unsigned)(st.st_mode & 07777));
	return 0;
}

static bool is_link_at(int fd, const char *name)
{
	struct stat st;

	return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

/* The target of the link @name in the directory @fd (w->shown) into w->target, when the link
 * is root's or ours: a link made by another user, even in a sticky directory such as /tmp, is
 * not followed (the kernel's fs.protected_symlinks rule, whatever that sysctl says here). */
static int link_read(struct walk *w, int fd, const char *name)
{
	char who[32] = "", link[PATH_MAX + NAME_MAX + 8];
	struct stat st;
	ssize_t n;

	if (w->euid != 0)
		snprintf(who, sizeof(who), " or uid %u", (unsigned)w->euid);
	snprintf(link, sizeof(link), "%s%s%s", w->shown, streq(w->shown, "/") ? "" : "/", name);
	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return error_set(negative_errno(), "%s %s: cannot stat %s: %s", w->what, w->dir,
				 link, strerror(errno));
	if (st.st_uid != 0 && st.st_uid != w->euid)
		return error_set(-EPERM,
				 "%s %s: %s%sa symbolic link owned by uid %u, not by root%s (not "
				 "followed)",
				 w->what, w->dir, streq(link, w->dir) ? "" : link,
				 streq(link, w->dir) ? "" : " is ", (unsigned)st.st_uid, who);
	if (++w->links > WALK_MAX_LINKS)
		return error_set(-ELOOP, "%s %s: more than %d symbolic links", w->what, w->dir,
				 WALK_MAX_LINKS);
	n = readlinkat(fd, name, w->target, sizeof(w->target) - 1);
	if (n < 0)
		return error_set(negative_errno(), "%s %s: cannot read the link %s: %s", w->what,
				 w->dir, link, strerror(errno));
	w->target[n] = '\0';
	return 0;
}

static int walk_dir(struct walk *w, int *fd, const char *path, unsigned how, bool dotdot);

/* Steps from the directory *@fd (w->shown) into its directory @comp, checked as @how says. */
static int walk_step(struct walk *w, int *fd, const char *comp, unsigned how)
{
	int nfd, r;

	if (streq(comp, "..")) {
		nfd = openat(*fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (nfd < 0)
			return error_set(negative_errno(), "%s %s: %s/..: %s", w->what, w->dir,
					 w->shown, strerror(errno));
		shown_pop(w);
	} else {
		nfd = openat(*fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && w->create) {
			if (TEST_FAIL("mkdir", comp, mkdirat(*fd, comp, w->mode)) < 0 &&
			    errno != EEXIST) {
				r = negative_errno();
				(void)shown_push(w, comp);
				return error_set(r, "cannot create the %s %s: %s", w->what,
						 w->shown, strerror(-r));
			}
			nfd = openat(*fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0 && (errno == ENOTDIR || errno == ELOOP) && is_link_at(*fd, comp)) {
			bool create = w->create;

			/* A link's target is what its owner made it: nothing is made there. */
			r = link_read(w, *fd, comp);
			if (r < 0)
				return r;
			w->create = false;
			r = walk_dir(w, fd, w->target, how, true);
			w->create = create;
			return r;
		}
		if (nfd < 0) {
			r = negative_errno();
			(void)shown_push(w, comp);
			return error_set(r, "%s %s: %s", w->what, w->shown, strerror(-r));
		}
		r = shown_push(w, comp);
		if (r < 0) {
			close(nfd);
			return r;
		}
	}
	close(*fd);
	*fd = nfd;
	return dir_fd_safe(*fd, w, how);
}

/* Walks *@fd through the directories of @path (from / when it is absolute), the last one
 * checked as @how says, every other one as on the way. */
static int walk_dir(struct walk *w, int *fd, const char *path, unsigned how, bool dotdot)
{
	_cleanup_free_ char *p = strdup(path);
	_cleanup_free_ char **comps = calloc(strlen(path) / 2 + 2, sizeof(*comps));
	char *s, *save = NULL;
	size_t n = 0;
	int r;

	if (!p || !comps)
		return -ENOMEM;
	for (s = strtok_r(p, "/", &save); s; s = strtok_r(NULL, "/", &save))
		if (!streq(s, "."))
			comps[n++] = s;
	if (path[0] == '/') {
		int nfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

		if (nfd < 0)
			return error_set(negative_errno(), "cannot open /: %s", strerror(errno));
		close(*fd);
		*fd = nfd;
		snprintf(w->shown, sizeof(w->shown), "/");
		r = dir_fd_safe(*fd, w, n ? DIR_ON_WAY : how);
		if (r < 0)
			return r;
	} else if (!n)
		return dir_fd_safe(*fd, w, how);
	for (size_t i = 0; i < n; i++) {
		if (!dotdot && streq(comps[i], ".."))
			return error_set(-EINVAL, "%s %s: '..' is not allowed", w->what, w->dir);
		r = walk_step(w, fd, comps[i], i + 1 == n ? how : DIR_ON_WAY);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Opens @name in the directory *@fd (w->shown) with @flags, a link followed as link_read()
 * allows. 1 when nothing is there and no link led there. */
static int walk_open(struct walk *w, int *fd, const char *name, int flags, int *ret_fd)
{
	_cleanup_free_ char *base = NULL, *to = NULL;
	int r;

	for (;;) {
		int nfd = openat(*fd, name, flags | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		char *slash;

		if (nfd >= 0) {
			if (fstat(nfd, &st) < 0) {
				r = negative_errno();
				close(nfd);
				return error_set(r, "%s %s: cannot stat: %s", w->what, w->dir,
						 strerror(-r));
			}
			if (!S_ISLNK(st.st_mode)) { /* else O_PATH opened the link itself */
				r = 0;
				/* A directory is held to the rules itself; a file, through the
				 * directory holding it (a sticky one would let anyone make a
				 * name there first). */
				if (S_ISDIR(st.st_mode))
					r = streq(name, ".") ? 0 : shown_push(w, name);
				if (r >= 0)
					r = dir_fd_safe(S_ISDIR(st.st_mode) ? nfd : *fd, w,
							S_ISDIR(st.st_mode) ? DIR_SELF
									    : DIR_STRICT);
				if (r < 0) {
					close(nfd);
					return r;
				}
				*ret_fd = nfd;
				return 0;
			}
			close(nfd);
		} else if (errno == ENOENT && !to) {
			r = dir_fd_safe(*fd, w, DIR_STRICT);
			return r < 0 ? r : 1;
		} else if (errno == ENOENT) {
			return error_set(-ENOENT,
					 "%s %s: a symbolic link to '%s', which does not exist",
					 w->what, w->dir, to);
		} else if ((errno != ELOOP && errno != ENOTDIR) || !is_link_at(*fd, name)) {
			r = negative_errno();
			return error_set(r, "%s %s: %s", w->what, w->dir, strerror(-r));
		}
		r = link_read(w, *fd, name);
		if (r < 0)
			return r;
		/* The link's directory part, then its last name opened as this one was. */
		free(base);
		free(to);
		slash = strrchr(w->target, '/');
		base = strdup(slash ? slash + 1 : w->target);
		to = strdup(w->target);
		if (!base || !to)
			return -ENOMEM;
		if (!*base || streq(base, ".") || streq(base, "..")) {
			r = walk_dir(w, fd, w->target, DIR_SELF, true);
			name = ".";
		} else if (slash) {
			slash[slash == w->target] = '\0';
			r = walk_dir(w, fd, w->target, DIR_ON_WAY, true);
			name = base;
		} else {
			r = 0;
			name = base;
		}
		if (r < 0)
			return r;
	}
}

int open_trusted_at(int dirfd, const char *dir, const char *path, int flags, const char *what,
		    int *ret_fd)
{
	_cleanup_free_ char *abs = NULL, *parent = NULL, *shown = NULL;
	_cleanup_close_ int fd = -1;
	struct walk w = {.what = what, .dir = path, .euid = geteuid()};
	const char *slash, *name;
	int r;

	if (path[0] != '/' && dirfd < 0) {
		_cleanup_free_ char *cwd = getcwd(NULL, 0);

		if (!cwd)
			return error_set(negative_errno(), "%s %s: no working directory: %s", what,
					 path, strerror(errno));
		abs = strdup_printf("%s/%s", cwd, path);
		if (!abs)
			return -ENOMEM;
		path = abs;
	}
	if (path[0] == '/' || dirfd < 0)
		fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	else
		fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return error_set(negative_errno(), "%s %s: %s", what, path, strerror(errno));
	if (path[0] != '/') {
		shown = strdup_printf("%s/%s", dir, path);
		if (!shown)
			return -ENOMEM;
		w.dir = shown;
	}
	snprintf(w.shown, sizeof(w.shown), "%s", path[0] == '/' ? "/" : dir);
	slash = strrchr(path, '/');
	name = slash ? slash + 1 : path;
	if (!*name || streq(name, ".") || streq(name, "..")) {
		r = walk_dir(&w, &fd, path, DIR_SELF, true);
		name = ".";
	} else if (slash) {
		parent = strndup(path, slash == path ? 1 : (size_t)(slash - path));
		if (!parent)
			return -ENOMEM;
		r = walk_dir(&w, &fd, parent, DIR_ON_WAY, true);
	} else
		r = 0; /* @dirfd, checked by the caller */
	if (r < 0)
		return r;
	return walk_open(&w, &fd, name, flags, ret_fd);
}

int open_trusted(const char *path, int flags, const char *what, int *ret_fd)
{
	return open_trusted_at(-1, NULL, path, flags, what, ret_fd);
}

/* The walk of mkdir_p_safe() (@create) and dir_check_safe(), from / to @dir. */
static int walk_from_root(const char *dir, bool create, mode_t mode, const char *what)
{
	struct walk w = {
	    .what = what, .dir = dir, .create = create, .mode = mode, .euid = geteuid()};
	_cleanup_close_ int fd = -1;

	if (!dir || dir[0] != '/')
		return error_set(-EINVAL, "%s '%s': need an absolute path", what, dir ? dir : "");
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return error_set(negative_errno(), "cannot open /: %s", strerror(errno));
	return walk_dir(&w, &fd, dir, DIR_SELF, false);
}

int mkdir_p_safe(const char *dir, mode_t mode, const char *what)
{
	return walk_from_root(dir, true, mode, what);
}

int dir_check_safe(const char *dir, const char *what)
{
	return walk_from_root(dir, false, 0, what);
}

/* The state directory holding @file, made (@create) or only checked. */
static int state_dir_of(const char *file, bool create)
{
	_cleanup_free_ char *dir = strdup(file);
	char *slash;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return error_set(-EINVAL, "state directory of '%s': need an absolute path", file);
	*slash = '\0';
	return create ? mkdir_p_safe(dir, 0755, "state directory")
		      : dir_check_safe(dir, "state directory");
}

int state_dir_prepare(const char *file)
{
	return state_dir_of(file, true);
}

int state_dir_check(const char *file)
{
	return state_dir_of(file, false);
}

int fsize_allow(uint64_t end, struct rlimit *ret_saved)
{
	struct rlimit cur, up;

	if (getrlimit(RLIMIT_FSIZE, &cur) < 0 || cur.rlim_cur == RLIM_INFINITY ||
	    end <= (uint64_t)cur.rlim_cur)
		return 0;
	up = cur;
	/* Past the hard limit only with CAP_SYS_RESOURCE (root's); else up to it. */
	up.rlim_cur = up.rlim_max = RLIM_INFINITY;
	if (setrlimit(RLIMIT_FSIZE, &up) < 0) {
		up = cur;
		up.rlim_cur = cur.rlim_max;
		if (up.rlim_cur == cur.rlim_cur ||
		    (up.rlim_cur != RLIM_INFINITY && end > (uint64_t)up.rlim_cur) ||
		    setrlimit(RLIMIT_FSIZE, &up) < 0)
			return error_set(-EFBIG,
					 "writing up to byte %llu passes the file size limit "
					 "(RLIMIT_FSIZE, ulimit -f) of %llu bytes",
					 (unsigned long long)end, (unsigned long long)cur.rlim_cur);
	}
	*ret_saved = cur;
	return 1;
}

void fsize_restore(const struct rlimit *saved)
{
	/* Lowering a limit is always allowed. */
	(void)setrlimit(RLIMIT_FSIZE, saved);
}

int fd_names_path(int fd, const char *path)
{
	return fd_names_path_at(fd, AT_FDCWD, path);
}

int fd_names_path_at(int fd, int dirfd, const char *path)
{
	struct stat fst, pst;

	if (fstat(fd, &fst) < 0)
		return negative_errno();
	if (fstatat(dirfd, path, &pst, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	return fst.st_nlink > 0 && fst.st_dev == pst.st_dev && fst.st_ino == pst.st_ino;
}

int lock_file_open_at(int dirfd, const char *path, const char *shown, int *ret_fd)
{
	_cleanup_close_ int fd =
	    openat(dirfd, path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
	struct stat st;

	if (fd < 0)
		return error_set(negative_errno(), "cannot open the lock file %s: %s", shown,
				 strerror(errno));
	if (fstat(fd, &st) < 0)
		return error_set(negative_errno(), "cannot stat %s: %s", shown, strerror(errno));
	/* Made otherwise than here: who else can open it, and hold it, is not known. */
	if (!S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & 077))
		return error_set(-EPERM,
				 "the lock file %s is not a file only root can open (owner uid %u, "
				 "mode %04o): remove it",
				 shown, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int lock_file_take(const char *path, int (*wait)(int fd, void *userdata), void *userdata,
		   int *ret_fd)
{
	for (;;) {
		_cleanup_close_ int fd = -1;
		int r = lock_file_open_at(AT_FDCWD, path, path, &fd);

		if (r < 0 || (r = wait(fd, userdata)) < 0)
			return r;
		r = fd_names_path(fd, path);
		if (r < 0)
			return error_set(r, "cannot stat the lock file %s: %s", path, strerror(-r));
		if (r > 0) {
			*ret_fd = TAKE_FD(fd);
			return 0;
		}
		log_debug("lock file %s was removed or replaced while waiting; opening it again",
			  path);
	}
}

char *pid_describe(int pid)
{
	_cleanup_free_ char *c = NULL, *path = strdup_printf("/proc/%d/cmdline", pid);
	char cmd[256] = "";
	size_t n = 0;

	if (path && read_full_file_at(AT_FDCWD, path, 4096, &c, &n) == 0) {
		/* Another user's command line goes into our messages and logs: no control
		 * character of it does. */
		for (size_t i = 0; i < n; i++)
			if (c[i] == '\0')
				c[i] = ' ';
			else if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
				c[i] = '?';
		while (n > 0 && c[n - 1] == ' ')
			c[--n] = '\0';
		snprintf(cmd, sizeof(cmd), " (%s)", c);
	}
	return strdup_printf("pid %d%s", pid, cmd);
}

/* The next blank-separated word of *@p (moved past it), its length in *@ret_len; NULL at the end
 * of the line. (Any other white space ends a word too, as it would for scanf().) */
static const char *next_word(const char **p, size_t *ret_len)
{
	const char *w = *p + strspn(*p, " \t");

	*ret_len = strcspn(w, " \t\n\v\f\r");
	*p = w + *ret_len;
	return *ret_len ? w : NULL;
}

/* A hexadecimal number of @len digits at @s, at most @max. */
static bool parse_hex_word(const char *s, size_t len, unsigned max, unsigned *ret)
{
	unsigned v = 0;

	if (len == 0 || len > 8)
		return false;
	for (size_t i = 0; i < len; i++) {
		int d = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
			: s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
						     : -1;

		if (d < 0)
			return false;
		v = v * 16 + (unsigned)d;
	}
	if (v > max)
		return false;
	*ret = v;
	return true;
}

int flock_parse_line(const char *line, int *ret_pid, unsigned *ret_major, unsigned *ret_minor,
		     uint64_t *ret_ino)
{
	const char *p = line, *w[6], *end;
	size_t len[6];
	unsigned maj, mnr;
	uint64_t id, pid, ino;

	/* "ID: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END"; a waiter has "->" after ID:. */
	for (int i = 0; i < 6; i++)
		if (!(w[i] = next_word(&p, &len[i])))
			return -EINVAL;
	if (parse_u64_prefix(w[0], UINT64_MAX, &id, &end) < 0 || end != w[0] + len[0] - 1 ||
	    *end != ':' || len[1] != 5 || strncmp(w[1], "FLOCK", 5) != 0)
		return -EINVAL;
	/* the pid as this pid namespace sees it: 0 or -1 when it cannot */
	if (parse_u64_prefix(w[4], INT32_MAX, &pid, &end) < 0 || end != w[4] + len[4] || pid == 0)
		return -EINVAL;
	const char *c1 = memchr(w[5], ':', len[5]);
	const char *c2 = c1 ? memchr(c1 + 1, ':', len[5] - (size_t)(c1 + 1 - w[5])) : NULL;

	if (!c2 || !parse_hex_word(w[5], (size_t)(c1 - w[5]), 0xfff, &maj) ||
	    !parse_hex_word(c1 + 1, (size_t)(c2 - c1 - 1), 0xfffff, &mnr) ||
	    parse_u64_prefix(c2 + 1, UINT64_MAX, &ino, &end) < 0 || end != w[5] + len[5])
		return -EINVAL;
	*ret_pid = (int)pid;
	*ret_major = maj;
	*ret_minor = mnr;
	*ret_ino = ino;
	return 0;
}

/* flock_holder() (util.h): /proc/locks names the pid that took it (FLOCK lines whose dev:inode
 * is the file's; "->" lines are waiters). */
char *flock_holder(int fd)
{
	_cleanup_fclose_ FILE *f = NULL;
	struct stat st;
	char line[512];

	if (fstat(fd, &st) < 0 || !(f = fopen("/proc/locks", "re")))
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, mnr;
		uint64_t ino;
		int pid;

		if (flock_parse_line(line, &pid, &maj, &mnr, &ino) < 0 ||
		    ino != (uint64_t)st.st_ino || makedev(maj, mnr) != st.st_dev)
			continue;
		return pid_describe(pid);
	}
	return NULL;
}

int flock_wait(int fd, int op, unsigned timeout_ms)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000u;
	unsigned pause_ms = 1;

	for (;;) {
		if (flock(fd, op | LOCK_NB) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return negative_errno();
		if (now_usec() >= deadline)
			return -ETIMEDOUT;
		sleep_backoff(&pause_ms);
	}
}
