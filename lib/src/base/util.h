/* jobcg internal: ownership helpers (cleanup attributes) and small file and string helpers. */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define _cleanup_(f)  __attribute__((cleanup(f)))
#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

static inline void freep(void *p)
{
	free(*(void **)p);
}
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
void strv_free(char **v);
static inline void strv_freep(char ***v)
{
	strv_free(*v);
}

#define _cleanup_free_	    _cleanup_(freep)
#define _cleanup_close_	    _cleanup_(closep)
#define _cleanup_fclose_    _cleanup_(fclosep)
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Hand ownership over: returns the value and clears the variable so cleanup does nothing. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _tp = (p);                                                           \
		(p) = NULL;                                                                        \
		_tp;                                                                               \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _tf = (fd);                                                                    \
		(fd) = -1;                                                                         \
		_tf;                                                                               \
	})

static inline bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}
static inline bool strcaseeq(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;
}
static inline bool startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Negative errno of the last libc failure, never 0. */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

/* Remove leading and trailing white space in place; returns the start. */
char *strstrip(char *s);
/* A copy of @s with each control character (C0, DEL) written as "\xNN", for text read from
 * files that goes to a terminal or into one line; NULL on ENOMEM. */
char *str_escape_controls(const char *s);

/* Read a whole file (at most @max bytes, else -EFBIG) relative to @dirfd (AT_FDCWD ok).
 * The result is NUL-terminated; *ret_len excludes the NUL (may be NULL). */
int read_full_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len);
/* The same from an already open @fd, from its current offset. */
int read_full_fd(int fd, size_t max, char **ret, size_t *ret_len);
/* Read a file and strip the trailing newline (for one-value kernel files). */
int read_one_line_at(int dirfd, const char *path, char **ret);
/* Write @s to an existing file with a single write() (kernel interface files need that). */
int write_string_at(int dirfd, const char *path, const char *s);

/*
 * Close every descriptor numbered @from or above except the @n in @keep (in any order), as a
 * child does before it runs on with less than its parent held. close_range(2) (Linux 5.9),
 * else a close() per number below the descriptor limit. Safe between fork() and exec().
 */
void close_fds_but(int from, const int *keep, size_t n);

/* Write all of @buf to @fd, again after a signal or a short write: 0 or -errno (-EIO when the
 * file takes nothing; -EAGAIN, not another try, when a socket's SO_SNDTIMEO runs out). */
int write_all(int fd, const void *buf, size_t len);
/* The same with send(MSG_NOSIGNAL) for a socket: a peer gone is -EPIPE, never a SIGPIPE. */
int send_all(int fd, const void *buf, size_t len);
/* Read exactly @len bytes into @buf, again after a signal or a short read: 0 or -errno (-EIO
 * at the end of the file before @len; -EAGAIN, not another try, when SO_RCVTIMEO runs out). */
int read_all(int fd, void *buf, size_t len);

enum {
	/* write_file_atomic(): fsync the new file before the rename and its directory after, so
	 * that a crash (power loss) leaves the old file or the new one, whole. */
	WRITE_ATOMIC_SYNC = 1u << 0,
	/* write_file_atomic(): -EEXIST (nothing written) if @path exists, as O_EXCL would. */
	WRITE_ATOMIC_NOREPLACE = 1u << 1,
};
/*
 * Make @s the whole content of @path (mode @mode) at once: written to a hidden file beside it
 * (".NAME.PID.tmp", never a name a directory's readers take for an entry) and renamed over
 * it, so that a reader sees the old file or the new, never part of one. 0 or -errno (no error
 * record); the temporary file is removed on failure.
 */
int write_file_atomic(const char *path, const char *s, mode_t mode, unsigned flags);
/* The same for the entry @name of the directory @dfd (no '/' in it), with @len bytes of @s (NUL
 * bytes too). */
int write_file_atomic_at(int dfd, const char *name, const void *s, size_t len, mode_t mode,
			 unsigned flags);

/* NULL-terminated string vectors. */
size_t strv_length(char *const *v);
int strv_push(char ***v, char *s); /* takes ownership of s, even on failure */
bool strv_contains(char *const *v, const char *s);
char **strv_split(const char *s, const char *separators); /* NULL on ENOMEM */

/* vasprintf() into a returned string: NULL on ENOMEM. */
char *strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *strdup_vprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Monotonic clock in microseconds. */
uint64_t now_usec(void);
/* Sleep @ms milliseconds, through signal interruptions. */
void sleep_ms(unsigned ms);
/* One pause of a poll (a lock tried without blocking): *@pause_ms, which starts at 1, then
 * doubles up to 50 ms for the next. */
void sleep_backoff(unsigned *pause_ms);
/* Wall-clock time (CLOCK_REALTIME) in microseconds: the accounting record's start and end. */
uint64_t realtime_usec(void);

/*
 * The number parsers: unsigned decimal, digits only (no sign, space, base prefix or empty
 * string), at most @max. 0, or -EINVAL when @s is not such a number and -ERANGE when it is
 * above @max; *ret is untouched on failure.
 *
 * parse_u64() and parse_uint() take the whole string. parse_u64_prefix() takes the number @s
 * starts with and leaves what follows it in *ret_end (when not NULL), for "6.1.0-56" or
 * "1000:100": the caller says what may follow.
 */
int parse_u64(const char *s, uint64_t max, uint64_t *ret);
int parse_uint(const char *s, unsigned max, unsigned *ret);
int parse_u64_prefix(const char *s, uint64_t max, uint64_t *ret, const char **ret_end);
/* "UID:GID" (a job's trusted.jobcg.owner); what follows GID is not looked at. */
int parse_owner(const char *s, unsigned *ret_uid, unsigned *ret_gid);

/* True in a statically linked process (no dynamic loader: getauxval(AT_BASE) is 0), which
 * must not dlopen() libraries that need a libc of their own (libsystemd). */
bool process_is_static(void);

/*
 * jobcg's own environment variables (JOBCG_*): as secure_getenv(), so nothing in a setuid,
 * setgid or capability-raised process, and nothing either where the real and effective user or
 * group ids differ (a process that changed them itself, which AT_SECURE does not mark).
 */
const char *env_secure(const char *name);

/*
 * The program named by environment variable @name (JOBCG_KEEPER_EXE, JOBCG_DYNAMIC_EXE), which
 * jobcg runs as root: *ret NULL when unset or empty. Honoured only as env_secure() says and when
 * the file is trusted: an absolute path to a regular file that it and every directory above it
 * (before and after resolving links) are owned by root, by the caller's real uid or by the owner
 * of the running executable (who controls this process's code anyway), and writable by no
 * other (a directory may be, when sticky, as /tmp). Else -EPERM (or the stat() error) with an
 * error record naming the variable and the offending path: never a silent fallback.
 */
int env_program(const char *name, char **ret);

/*
 * mkdir -p for jobcg's own directories (the state directory, BPF pins): @dir and every
 * directory above it, made with @mode where missing, walked from / by descriptor so that a
 * directory swapped for a link on the way is not followed. Each must be owned by root or by
 * our effective uid and writable by no one else; a directory above @dir may be world-writable
 * when it is root's and sticky (/tmp). A link on the way is followed only when root or our
 * effective uid owns it (in a sticky /tmp anyone could have made it; the kernel's
 * fs.protected_symlinks rule, whatever that sysctl says), and its target is walked the same
 * way (nothing is made inside it). @what names the directory in errors ("state directory").
 * 0 or -errno with the error record set.
 */
int mkdir_p_safe(const char *dir, mode_t mode, const char *what);
/*
 * Opens @path with openat() @flags (O_NOFOLLOW and O_CLOEXEC added) the way mkdir_p_safe()
 * walks, making nothing: every directory on the way owned by root or our effective uid and
 * writable by no one else (a sticky root-owned one excepted), the one holding the last name
 * writable by no one else even when sticky unless that name is a directory, a directory
 * opened held to that rule itself, and a
 * link, on the way or the last name, followed only when root or our effective uid owns it,
 * its target walked the same way. For what root reads and trusts (its configuration, the
 * device nodes it manages). A relative @path is taken from the directory @dirfd, which the
 * caller has checked and shows as @dir, or with @dirfd < 0 from the working directory (whose
 * directories are checked too). 0 and the descriptor in *@ret_fd; 1 when the last name of
 * @path is not there (no error record: a link to nothing is an error); else -errno with the
 * error record naming @what ("configuration file") and the directory or link at fault.
 */
int open_trusted_at(int dirfd, const char *dir, const char *path, int flags, const char *what,
		    int *ret_fd);
int open_trusted(const char *path, int flags, const char *what, int *ret_fd);
/* The same checks of a directory that must already exist (-ENOENT, with the error record,
 * where a component is missing): for readers, which make nothing. */
int dir_check_safe(const char *dir, const char *what);
/* mkdir_p_safe() of the directory holding @file, mode 0755: the state directory. */
int state_dir_prepare(const char *file);
/* dir_check_safe() of the directory holding @file. */
int state_dir_check(const char *file);
/* Whether the file open as @fd is still linked and named @path (its last name not followed):
 * 1, 0 when it was removed or replaced, -errno when either cannot be looked at. What a holder of
 * a lock file's flock checks, the lock being the name, not the inode. */
int fd_names_path(int fd, const char *path);
/* The same of @path taken from the directory @dirfd. */
int fd_names_path_at(int fd, int dirfd, const char *path);
/*
 * Open (made mode 0600 where missing, no link followed) the lock file @path of the directory
 * @dirfd, which the caller checked is written by root (or us) alone: a descriptor in *ret_fd.
 * flock() asks for no access mode, so anyone who could open the file could hold its lock for
 * ever: one that is not a regular file of root's (or ours) that only its owner may open is
 * refused (-EPERM, "remove it"). @shown names it in error messages. Every failure sets an
 * error record.
 */
int lock_file_open_at(int dirfd, const char *path, const char *shown, int *ret_fd);
/*
 * Take the lock file @path (lock_file_open_at()), locked by @wait(fd, @userdata) (0, or -errno
 * with its error record set). The flock is on an inode, the lock is the name: a holder that
 * unlinks the file (`jobcg teardown`) lets a waiter be granted an inode nobody will open
 * again while a newcomer locks a new file, and two holders would each hand out the same GPU.
 * So once locked, @path must still name the inode held, else it is opened again. The locked
 * descriptor in *ret_fd.
 */
int lock_file_take(const char *path, int (*wait)(int fd, void *userdata), void *userdata,
		   int *ret_fd);
/* "pid N (its command line)", control characters made '?', for an error message ("pid N" when
 * its command line cannot be read); NULL on ENOMEM. */
char *pid_describe(int pid);
/* "pid N (its command line)" of the process holding the flock on @fd's file, for an error
 * message; NULL when none is found (or on ENOMEM). */
char *flock_holder(int fd);
/* One line of /proc/locks: 0 with the holder's pid (above 0) and the locked file's device
 * (hexadecimal major and minor in the kernel's 12 and 20 bits) and inode when it is a flock()
 * held ("ID: FLOCK ..."; not a waiter's "ID: -> FLOCK ..."), else -EINVAL. */
int flock_parse_line(const char *line, int *ret_pid, unsigned *ret_major, unsigned *ret_minor,
		     uint64_t *ret_ino);
/* flock(@fd, @op | LOCK_NB) tried for at most @timeout_ms, 1 ms doubling to 50 ms apart (flock()
 * itself has no timeout, and a waiter may have signals blocked): 0, -ETIMEDOUT, or flock()'s
 * -errno. Sets no error record: the callers name their lock. */
int flock_wait(int fd, int op, unsigned timeout_ms);

struct rlimit;
/*
 * Make room, under RLIMIT_FSIZE, for a write that ends at byte @end of a regular file: past the
 * limit the kernel kills us with SIGXFSZ (a limit inherited from a batch environment is
 * enough). The soft limit is raised for the write (to the hard one, or past it where we may);
 * each thread's writes see the raised limit meanwhile, a relaxation that kills nothing. 1 when
 * raised (fsize_restore(@saved) afterwards), 0 when already room, -EFBIG (error record set)
 * when it cannot be: the write must not be tried. No signal disposition is touched: the
 * library's host (slurmstepd) keeps its own.
 */
int fsize_allow(uint64_t end, struct rlimit *ret_saved);
void fsize_restore(const struct rlimit *saved);
