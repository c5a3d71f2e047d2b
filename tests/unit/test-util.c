/* Unit tests for the string, file and error helpers every part of the library uses. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "msg.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static void test_strv(void)
{
	_cleanup_strv_free_ char **v = strv_split("  a,b  c,,", ", ");

	ok(v != NULL, "strv_split allocates");
	is_int(strv_length(v), 3, "strv_split gives three words");
	is_str(v[0], "a", "first word");
	is_str(v[2], "c", "last word");
	ok(strv_contains(v, "b") && !strv_contains(v, "d"), "strv_contains");
}

static void test_strstrip(void)
{
	char s[] = " \t x y \n";

	is_str(strstrip(s), "x y", "strstrip removes both ends");
}

static void test_error(void)
{
	char buf[256];
	int r = error_set_at(ENOENT, "gres.conf", 7, 3, "no such device %s", "/dev/x");

	is_int(r, -ENOENT, "error_set returns a negative errno");
	is_str(jobcg_error_format(r, buf, sizeof(buf)), "gres.conf:7:3: no such device /dev/x",
	       "error format names file, line and column");
	jobcg_error_prefix("loading");
	is_str(jobcg_last_error()->message, "loading: no such device /dev/x", "error prefix");
	jobcg_error_clear();
	is_int(jobcg_last_error()->code, 0, "error clear");
}

/*
 * A record left by an earlier failure never explains a later one that filled none: with only
 * the record to go by, a failed lookup of a missing key (-ENOENT, nothing said) was reported
 * as the earlier bad key's message.
 */
static void test_error_stale(void)
{
	struct jobcg_msg m = {0};
	uint64_t v;
	char buf[256];
	int bad_key, missing;

	jobcg_error_clear();
	bad_key = jobcg_msg_add(&m, "Bad-Key", "x");
	missing = jobcg_msg_get_u64(&m, "absent", 10, &v);
	is_int(bad_key, -EINVAL, "a bad key fails, filling the error record");
	is_int(missing, -ENOENT, "a missing key fails, saying nothing more");
	is_str(jobcg_error_format(missing, buf, sizeof(buf)), strerror(ENOENT),
	       "the later failure is not explained by the earlier one's record");
	is_str(jobcg_error_message(missing), strerror(ENOENT), "nor is its message");
	ok(strstr(jobcg_error_message(bad_key), "Bad-Key") != NULL,
	   "the record still explains its own failure (%s)", jobcg_error_message(bad_key));
	is_str(jobcg_error_format(-bad_key, buf, sizeof(buf)), jobcg_error_message(bad_key),
	       "a positive errno is taken as its negative");
	jobcg_error_clear();
	is_str(jobcg_error_message(bad_key), strerror(EINVAL), "a cleared record explains nothing");
	jobcg_msg_free(&m);
}

static void test_read_file(void)
{
	char *s = NULL;
	size_t len;

	is_int(read_full_file_at(AT_FDCWD, "/proc/self/stat", 1 << 20, &s, &len), 0,
	       "read a /proc file (size 0 in stat)");
	ok(s && len > 0 && strlen(s) == len, "content is NUL-terminated and non-empty");
	free(s);
	is_int(read_full_file_at(AT_FDCWD, "/proc/self/maps", 16, &s, &len), -EFBIG,
	       "a file over the limit gives -EFBIG");
	is_int(read_full_file_at(AT_FDCWD, "/nonexistent/x", 16, &s, &len), -ENOENT,
	       "a missing file gives -ENOENT");

	/* A limit below the first read's buffer holds too: /proc/self/maps is only longer than
	 * that buffer in some builds (sanitizers), a 100-byte file always fits in it. */
	char hundred[100];
	int fd = memfd_create("jobcg-test-read", MFD_CLOEXEC);

	memset(hundred, 'x', sizeof(hundred));
	ok(fd >= 0 && write(fd, hundred, sizeof(hundred)) == (ssize_t)sizeof(hundred) &&
	       lseek(fd, 0, SEEK_SET) == 0,
	   "a 100-byte file");
	s = NULL;
	is_int(read_full_fd(fd, 16, &s, &len), -EFBIG, "100 bytes over a 16-byte limit: -EFBIG");
	ok(!s, "nothing returned on -EFBIG");
	free(s);
	if (fd >= 0)
		close(fd);
}

/* Entries of @dir other than . and .. */
static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (d)
		closedir(d);
	return d ? n : -1;
}

/* A file replaced whole: a reader holding the old one reads all of it, a new open the new one,
 * never a mix or an empty file; no temporary file is left beside it. */
static void test_write_atomic(void)
{
	char base[] = "/tmp/jobcg-test-atomic-XXXXXX", path[PATH_MAX], buf[64] = "";
	struct stat a = {}, b = {};
	char *s = NULL;
	int fd;

	if (!mkdtemp(base)) {
		ok(false, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "%s/counter", base);
	is_int(write_file_atomic(path, "4000000001\n", 0600, WRITE_ATOMIC_SYNC), 0,
	       "write a new file (fsynced)");
	ok(stat(path, &a) == 0 && (a.st_mode & 07777) == 0600, "with the mode asked");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	is_int(write_file_atomic(path, "4000000002\n", 0600, WRITE_ATOMIC_SYNC), 0, "replace it");
	ok(fd >= 0 && pread(fd, buf, sizeof(buf) - 1, 0) == 11 && strcmp(buf, "4000000001\n") == 0,
	   "a reader of the old file still reads all of it: replaced, not rewritten in place");
	ok(stat(path, &b) == 0 && b.st_ino != a.st_ino, "the name now names another inode");
	ok(read_full_file_at(AT_FDCWD, path, 64, &s, NULL) == 0 && s &&
	       strcmp(s, "4000000002\n") == 0,
	   "which holds the new content");
	free(s);
	s = NULL;
	if (fd >= 0)
		close(fd);
	is_int(write_file_atomic(path, "other\n", 0600, WRITE_ATOMIC_NOREPLACE), -EEXIST,
	       "NOREPLACE on an existing name: -EEXIST");
	ok(read_full_file_at(AT_FDCWD, path, 64, &s, NULL) == 0 && s &&
	       strcmp(s, "4000000002\n") == 0,
	   "  and the file is untouched");
	free(s);
	snprintf(path, sizeof(path), "%s/entry", base);
	is_int(write_file_atomic(path, "line\n", 0600, WRITE_ATOMIC_SYNC | WRITE_ATOMIC_NOREPLACE),
	       0, "NOREPLACE on a new name writes it");
	is_int(dir_entries(base), 2, "no temporary file is left");
	{
		/* A crash (then a reboot) may leave the temporary name of a pid that is ours now.
		 */
		char stale[PATH_MAX];
		int sfd;

		snprintf(stale, sizeof(stale), "%s/.fresh.%d.tmp", base, (int)getpid());
		sfd = open(stale, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (sfd >= 0)
			close(sfd);
		snprintf(path, sizeof(path), "%s/fresh", base);
		is_int(write_file_atomic(path, "new\n", 0600, WRITE_ATOMIC_NOREPLACE), 0,
		       "a stale temporary file of our pid does not read as the name's -EEXIST");
		is_int(dir_entries(base), 3, "  and is gone");
	}
	snprintf(path, sizeof(path), "%s/missing/x", base);
	is_int(write_file_atomic(path, "x", 0600, 0), -ENOENT, "a missing directory: -ENOENT");
	snprintf(path, sizeof(path), "rm -rf '%s'", base);
	if (system(path) != 0)
		tap_diag("cannot remove %s", base);
}

/* The one set of number parsers: what each takes and refuses, and outputs untouched on failure. */
static void test_numbers(void)
{
	static const struct {
		const char *s;
		uint64_t max;
		int r;	      /* parse_u64() */
		uint64_t v;   /* its value when r is 0 */
		int prefix_r; /* parse_u64_prefix() */
		size_t end;   /* where the prefix ends when prefix_r is 0 */
	} cases[] = {
	    {"0", 10, 0, 0, 0, 1},
	    {"10", 10, 0, 10, 0, 2},
	    {"11", 10, -ERANGE, 0, -ERANGE, 0},
	    {"007", 10, 0, 7, 0, 3},
	    {"18446744073709551615", UINT64_MAX, 0, UINT64_MAX, 0, 20},
	    {"18446744073709551616", UINT64_MAX, -ERANGE, 0, -ERANGE, 0},
	    {"99999999999999999999999", UINT64_MAX, -ERANGE, 0, -ERANGE, 0},
	    {"4294967295", UINT32_MAX, 0, UINT32_MAX, 0, 10},
	    {"4294967296", UINT32_MAX, -ERANGE, 0, -ERANGE, 0},
	    {"", 10, -EINVAL, 0, -EINVAL, 0},
	    {" 5", 10, -EINVAL, 0, -EINVAL, 0},
	    {"+5", 10, -EINVAL, 0, -EINVAL, 0},
	    {"-5", 10, -EINVAL, 0, -EINVAL, 0},
	    {"0x5", 100, -EINVAL, 0, 0, 1},
	    {"5 ", 10, -EINVAL, 0, 0, 1},
	    {"5\n", 10, -EINVAL, 0, 0, 1},
	    {"6.1.0-56-amd64", 100, -EINVAL, 0, 0, 1},
	    {"1000:100", UINT32_MAX, -EINVAL, 0, 0, 4},
	    {"x", 10, -EINVAL, 0, -EINVAL, 0},
	};
	static const struct {
		const char *s;
		int r;
		unsigned uid, gid;
	} owners[] = {
	    {"1000:100", 0, 1000, 100},
	    {"0:0", 0, 0, 0},
	    {"4294967295:4294967295", 0, UINT32_MAX, UINT32_MAX},
	    {"1000:100 and more", 0, 1000, 100},
	    {"4294967296:0", -ERANGE, 0, 0},
	    {"1000", -EINVAL, 0, 0},
	    {"1000:", -EINVAL, 0, 0},
	    {"1000:x", -EINVAL, 0, 0},
	    {"1000.100", -EINVAL, 0, 0},
	    {" 1000:100", -EINVAL, 0, 0},
	    {"-1:0", -EINVAL, 0, 0},
	    {"", -EINVAL, 0, 0},
	};
	unsigned u = 7, g = 7;
	uint64_t v;
	const char *end;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		int r;

		v = 12345;
		r = parse_u64(cases[i].s, cases[i].max, &v);
		ok(r == cases[i].r && v == (r == 0 ? cases[i].v : 12345),
		   "parse_u64('%s', max %" PRIu64 "): %d (%" PRIu64 ")", cases[i].s, cases[i].max,
		   r, v);
		v = 12345;
		end = NULL;
		r = parse_u64_prefix(cases[i].s, cases[i].max, &v, &end);
		ok(r == cases[i].prefix_r &&
		       (r < 0 ? v == 12345 && !end : end == cases[i].s + cases[i].end),
		   "parse_u64_prefix('%s'): %d, %zd characters", cases[i].s, r,
		   end ? end - cases[i].s : -1);
	}
	is_int(parse_u64(NULL, 10, &v), -EINVAL, "parse_u64(NULL)");
	is_int(parse_uint("4294967295", UINT_MAX, &u), 0, "parse_uint: UINT_MAX");
	is_int(u, UINT_MAX, "...its value");
	u = 7;
	is_int(parse_uint("11", 10, &u), -ERANGE, "parse_uint: above max");
	is_int(u, 7, "...output untouched");

	for (size_t i = 0; i < ELEMENTSOF(owners); i++) {
		int r;

		u = g = 7;
		r = parse_owner(owners[i].s, &u, &g);
		ok(r == owners[i].r &&
		       (r == 0 ? u == owners[i].uid && g == owners[i].gid : u == 7 && g == 7),
		   "parse_owner('%s'): %d", owners[i].s, r);
	}
	is_int(parse_owner(NULL, &u, &g), -EINVAL, "parse_owner(NULL)");
}

static char *mkfile(const char *dir, const char *name, mode_t mode)
{
	char *p = strdup_printf("%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);

	if (fd < 0 || fchmod(fd, mode) < 0)
		abort();
	close(fd);
	return p;
}

/* @value in JOBCG_TEST_EXE must be refused by env_program() with @err and @needle. */
static void program_bad(const char *value, int err, const char *needle, const char *what)
{
	char *got = (char *)0x1;
	int r;

	setenv("JOBCG_TEST_EXE", value, 1);
	jobcg_error_clear();
	r = env_program("JOBCG_TEST_EXE", &got);
	ok(r == err && got == (char *)0x1 && strstr(jobcg_last_error()->message, needle) &&
	       strstr(jobcg_last_error()->message, "JOBCG_TEST_EXE"),
	   "%s: refused (%d '%s'): got %d '%s'", what, err, needle, r, jobcg_last_error()->message);
}

/*
 * A program named in the environment is run as root (JOBCG_KEEPER_EXE, JOBCG_DYNAMIC_EXE): only
 * a file nobody else can change is honoured, and never in a process whose ids differ.
 */
static void test_env_program(void)
{
	char base[] = "/tmp/jobcg-test-util-XXXXXX", *got = NULL;
	_cleanup_free_ char *good = NULL, *ww = NULL, *gw = NULL, *open_dir = NULL, *in_open = NULL,
			    *link = NULL, *other = NULL, *sticky = NULL, *in_sticky = NULL;

	if (!mkdtemp(base))
		abort();
	unsetenv("JOBCG_TEST_EXE");
	ok(env_program("JOBCG_TEST_EXE", &got) == 0 && !got, "unset: no program");
	setenv("JOBCG_TEST_EXE", "", 1);
	ok(env_program("JOBCG_TEST_EXE", &got) == 0 && !got, "empty: no program");

	good = mkfile(base, "good", 0755);
	setenv("JOBCG_TEST_EXE", good, 1);
	ok(env_program("JOBCG_TEST_EXE", &got) == 0 && got && streq(got, good),
	   "a file of ours, mode 0755, in a directory of ours: honoured (%s)",
	   got ? got : jobcg_last_error()->message);
	free(got);
	got = NULL;

	program_bad("good", -EINVAL, "absolute path", "a relative name");
	ww = mkfile(base, "ww", 0757);
	program_bad(ww, -EPERM, "writable by its group or by others", "a world-writable file");
	gw = mkfile(base, "gw", 0775);
	program_bad(gw, -EPERM, "writable by its group or by others", "a group-writable file");
	open_dir = strdup_printf("%s/open", base);
	if (mkdir(open_dir, 0700) < 0 || chmod(open_dir, 0777) < 0)
		abort();
	in_open = mkfile(open_dir, "prog", 0755);
	program_bad(in_open, -EPERM, "mode 0777",
		    "a file in a directory anyone can write (rename over it)");
	link = strdup_printf("%s/link", base);
	if (symlink(in_open, link) < 0)
		abort();
	program_bad(link, -EPERM, "mode 0777", "a link (in a safe place) to a file in an open one");
	sticky = strdup_printf("%s/sticky", base);
	if (mkdir(sticky, 0700) < 0 || chmod(sticky, 01777) < 0)
		abort();
	in_sticky = mkfile(sticky, "prog", 0755);
	setenv("JOBCG_TEST_EXE", in_sticky, 1);
	ok(env_program("JOBCG_TEST_EXE", &got) == 0 && got,
	   "a file of ours in a sticky directory (as /tmp) is honoured");
	free(got);
	got = NULL;
	program_bad("/nonexistent/jobcg-prog", -ENOENT, "/nonexistent", "a missing file is named");

	if (geteuid() == 0) {
		other = mkfile(base, "other", 0755);
		if (chown(other, 4242, 4242) < 0)
			abort();
		program_bad(other, -EPERM, "owned by uid 4242", "a file of another user");

		/* a process whose effective uid differs from its real one (as after setuid) */
		pid_t pid = fork();
		if (pid == 0) {
			int r;

			setenv("JOBCG_TEST_EXE", good, 1);
			setenv("JOBCG_TEST_DIR", "/x", 1);
			if (setresuid(0, 4242, 0) < 0)
				_exit(3);
			r = env_program("JOBCG_TEST_EXE", &got);
			_exit(r == -EPERM && !env_secure("JOBCG_TEST_DIR") &&
				      strstr(jobcg_last_error()->message, "not honoured")
				  ? 0
				  : 1);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		   "real and effective uid differ: JOBCG_* ignored, a program variable refused "
		   "(status %d)",
		   st);
	} else {
		tap_skip("not root: no file of another user");
		tap_skip("not root: no setresuid");
	}
	setenv("JOBCG_TEST_DIR", "/x", 1);
	ok(env_secure("JOBCG_TEST_DIR") && streq(env_secure("JOBCG_TEST_DIR"), "/x"),
	   "an ordinary process reads JOBCG_* as they are");
	unsetenv("JOBCG_TEST_DIR");
	unsetenv("JOBCG_TEST_EXE");

	const char *files[] = {good, ww, gw, in_open, link, other, in_sticky};
	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		if (files[i])
			unlink(files[i]);
	rmdir(open_dir);
	rmdir(sticky);
	rmdir(base);
}

/* @dir must be refused by mkdir_p_safe() with @err and @needle in the message. */
static void safe_bad(const char *dir, int err, const char *needle, const char *what)
{
	int r;

	jobcg_error_clear();
	r = mkdir_p_safe(dir, 0755, "state directory");
	ok(r == err && strstr(jobcg_last_error()->message, needle) &&
	       strstr(jobcg_last_error()->message, "state directory"),
	   "%s: refused (%d '%s'): got %d '%s'", what, err, needle, r, jobcg_last_error()->message);
}

/* The state directory: made without following links, refused where others could write. */
static void test_mkdir_p_safe(void)
{
	char base[] = "/tmp/jobcg-test-util-XXXXXX";
	struct stat st;
	char p[PATH_MAX], q[PATH_MAX + 32];

	if (!mkdtemp(base))
		abort();
	snprintf(p, sizeof(p), "%s/a//b/./c/", base);
	is_int(mkdir_p_safe(p, 0755, "state directory"), 0,
	       "mkdir -p of a/b/c below /tmp (sticky)");
	snprintf(p, sizeof(p), "%s/a/b/c", base);
	ok(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0755,
	   "made with mode 0755");
	is_int(mkdir_p_safe(p, 0755, "state directory"), 0, "an existing safe directory passes");

	snprintf(p, sizeof(p), "%s/a/b/c", base);
	chmod(p, 0777);
	safe_bad(p, -EPERM, "writable by its group or by others (mode 0777)",
		 "a world-writable state directory");
	chmod(p, 0775);
	safe_bad(p, -EPERM, "(mode 0775)", "a group-writable state directory");
	chmod(p, 01777);
	safe_bad(p, -EPERM, "(mode 1777)", "a sticky world-writable state directory (as /tmp)");
	chmod(p, 0755);
	snprintf(p, sizeof(p), "%s/a", base);
	chmod(p, 0777);
	snprintf(q, sizeof(q), "%s/a/b/c/d", base);
	safe_bad(q, -EPERM, "/a) is writable", "an open directory on the way");
	ok(stat(q, &st) < 0 && errno == ENOENT, "...and nothing made below it");
	chmod(p, 0755);

	/* A link made by us in a safe directory is followed; one in an open directory is not. */
	snprintf(p, sizeof(p), "%s/link", base);
	snprintf(q, sizeof(q), "%s/a/b", base);
	if (symlink(q, p) < 0)
		abort();
	snprintf(q, sizeof(q), "%s/link/c/new", base);
	is_int(mkdir_p_safe(q, 0755, "state directory"), 0,
	       "a link in a safe directory is followed");
	snprintf(p, sizeof(p), "%s/open", base);
	if (mkdir(p, 0700) < 0 || chmod(p, 0777) < 0)
		abort();
	snprintf(p, sizeof(p), "%s/open/link", base);
	snprintf(q, sizeof(q), "%s/a", base);
	if (symlink(q, p) < 0)
		abort();
	snprintf(q, sizeof(q), "%s/open/link/b", base);
	safe_bad(q, -EPERM, "/open) is writable", "a link in an open directory");
	snprintf(p, sizeof(p), "%s/file", base);
	close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	safe_bad(p, -ENOTDIR, "Not a directory", "a file where a directory should be");
	safe_bad("rel/dir", -EINVAL, "absolute path", "a relative path");
	snprintf(q, sizeof(q), "%s/a/../a", base);
	safe_bad(q, -EINVAL, "'..'", "'..' in the path");
	/* A link of ours in a safe place whose target passes through an open directory: the
	 * target's directories are walked and checked, not only the last one. */
	snprintf(p, sizeof(p), "%s/open/sub", base);
	if (mkdir(p, 0755) < 0)
		abort();
	snprintf(p, sizeof(p), "%s/to-open", base);
	snprintf(q, sizeof(q), "%s/open/sub", base);
	if (symlink(q, p) < 0)
		abort();
	snprintf(q, sizeof(q), "%s/to-open/state", base);
	safe_bad(q, -EPERM, "/open) is writable", "a link whose target is below an open directory");
	if (geteuid() == 0) {
		snprintf(p, sizeof(p), "%s/a/b/c", base);
		if (chown(p, 4242, 4242) < 0)
			abort();
		safe_bad(p, -EPERM, "owned by uid 4242", "a state directory of another user");

		/* /tmp/<name> planted by another user as a link to a directory of root's: in a
		 * sticky world-writable directory anyone may make links, so only root's (or
		 * ours) are followed, as fs.protected_symlinks=1 would have it. */
		snprintf(p, sizeof(p), "%s/sticky", base);
		if (mkdir(p, 0700) < 0 || chmod(p, 01777) < 0)
			abort();
		snprintf(p, sizeof(p), "%s/sticky/planted", base);
		snprintf(q, sizeof(q), "%s/a/b", base);
		if (symlink(q, p) < 0 || lchown(p, 65534, 65534) < 0)
			abort();
		snprintf(q, sizeof(q), "%s/sticky/planted/state", base);
		safe_bad(q, -EPERM, "planted is a symbolic link owned by uid 65534",
			 "another user's link in a sticky directory");
		snprintf(q, sizeof(q), "%s/a/b/state", base);
		ok(stat(q, &st) < 0 && errno == ENOENT, "...and nothing made in its target");
		if (lchown(p, 0, 0) < 0)
			abort();
		snprintf(q, sizeof(q), "%s/sticky/planted/state", base);
		is_int(mkdir_p_safe(q, 0755, "state directory"), 0,
		       "root's link in the same place is followed");
	} else {
		tap_skip("not root: no directory of another user");
		tap_skip("not root: no link of another user");
		tap_skip("not root: no link of another user");
		tap_skip("not root: no link of another user");
	}

	snprintf(q, sizeof(q), "rm -rf '%s'", base);
	if (system(q) != 0)
		tap_diag("cannot remove %s", base);
}

/* open_trusted() of @path must fail with @err and @needle in the message. */
static void trusted_bad(const char *path, int err, const char *needle, const char *what)
{
	int fd = -1, r;

	jobcg_error_clear();
	r = open_trusted(path, O_RDONLY, "test file", &fd);
	ok(r == err && fd < 0 && strstr(jobcg_last_error()->message, needle),
	   "%s: refused (%d '%s'): got %d '%s'", what, err, needle, r, jobcg_last_error()->message);
	if (fd >= 0)
		close(fd);
}

/* open_trusted() as uid 65534 of @base/@dir/sub (its own): 0 or the error, from a child. */
static int trusted_as_nobody(const char *base, const char *dir)
{
	char p[PATH_MAX];
	int st = 0;
	pid_t pid;

	snprintf(p, sizeof(p), "%s/%s/sub", base, dir);
	pid = fork();
	if (pid == 0) {
		int fd = -1;

		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(100);
		_exit(-open_trusted(p, O_PATH | O_DIRECTORY, "test directory", &fd));
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -ECHILD;
	return -WEXITSTATUS(st);
}

/* A world-writable sticky directory on the way (as /tmp) is safe when it is root's or the
 * caller's: no one else can rename or replace what the caller has in it. */
static void sticky_of_user(const char *base)
{
	static const struct {
		const char *dir;
		uid_t owner;
		int want;
		const char *what;
	} rows[] = {
	    {"st-root", 0, 0, "a sticky directory of root's on the way"},
	    {"st-own", 65534, 0, "a sticky directory of its own on the way"},
	    {"st-other", 4242, -EPERM, "a sticky directory of another user's on the way: refused"},
	};
	char p[PATH_MAX];

	if (chmod(base, 0755) < 0)
		abort();
	for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
		snprintf(p, sizeof(p), "%s/%s", base, rows[i].dir);
		if (mkdir(p, 0700) < 0 || chown(p, rows[i].owner, rows[i].owner) < 0 ||
		    chmod(p, 01777) < 0)
			abort();
		snprintf(p, sizeof(p), "%s/%s/sub", base, rows[i].dir);
		if (mkdir(p, 0755) < 0 || chown(p, 65534, 65534) < 0)
			abort();
		{
			int r = trusted_as_nobody(base, rows[i].dir);

			ok(r == rows[i].want, "as uid 65534, %s (%d)", rows[i].what, r);
		}
	}
	if (chmod(base, 0700) < 0)
		abort();
}

/* What root reads through open_trusted(): the directories on the way and the links followed
 * are root's (or ours) and writable by no one else. */
static void test_open_trusted(void)
{
	char base[] = "/tmp/jobcg-test-util-XXXXXX";
	_cleanup_free_ char *f = NULL, *sticky = NULL, *in_sticky = NULL, *sub = NULL, *link = NULL,
			    *dangling = NULL, *up = NULL;
	_cleanup_close_ int dfd = -1;
	char p[PATH_MAX + 64];
	int fd = -1, r;

	if (!mkdtemp(base))
		abort();
	f = mkfile(base, "f", 0644);
	r = open_trusted(f, O_RDONLY, "test file", &fd);
	ok(r == 0 && fd >= 0, "a file in a safe directory is opened (%s)",
	   r ? jobcg_last_error()->message : "ok");
	if (fd >= 0)
		close(fd);
	fd = -1;
	snprintf(p, sizeof(p), "%s/missing", base);
	is_int(open_trusted(p, O_RDONLY, "test file", &fd), 1, "a missing file: 1");

	sticky = strdup_printf("%s/sticky", base);
	sub = strdup_printf("%s/sticky/sub", base);
	if (mkdir(sticky, 0700) < 0 || chmod(sticky, 01777) < 0 || mkdir(sub, 0755) < 0)
		abort();
	in_sticky = mkfile(sticky, "f", 0644);
	trusted_bad(in_sticky, -EPERM, "sticky) is writable by its group or by others (mode 1777)",
		    "a file in a sticky directory (anyone may make the name first)");
	snprintf(p, sizeof(p), "%s/sticky/missing", base);
	trusted_bad(p, -EPERM, "(mode 1777)", "a missing file in a sticky directory");
	r = open_trusted(sub, O_PATH | O_DIRECTORY, "test directory", &dfd);
	ok(r == 0 && dfd >= 0, "a directory of root's in a sticky directory is opened (%s)",
	   r ? jobcg_last_error()->message : "ok");
	if (dfd >= 0) {
		_cleanup_free_ char *g = mkfile(sub, "g", 0644);

		r = open_trusted_at(dfd, sub, "g", O_RDONLY, "test file", &fd);
		ok(r == 0 && fd >= 0, "a name in a checked directory is opened (%s)",
		   r ? jobcg_last_error()->message : "ok");
		if (fd >= 0)
			close(fd);
		fd = -1;
		unlink(g);
	}

	/* links: root's followed, their targets walked too; a dangling one named */
	link = strdup_printf("%s/link", base);
	if (symlink("f", link) < 0)
		abort();
	r = open_trusted(link, O_RDONLY, "test file", &fd);
	ok(r == 0 && fd >= 0, "root's link to a file beside it is followed (%s)",
	   r ? jobcg_last_error()->message : "ok");
	if (fd >= 0)
		close(fd);
	fd = -1;
	up = strdup_printf("%s/sticky/sub/up", base);
	if (symlink("../../f", up) < 0)
		abort();
	r = open_trusted(up, O_RDONLY, "test file", &fd);
	ok(r == 0 && fd >= 0,
	   "a link up through a sticky directory to a safe file is followed (%s)",
	   r ? jobcg_last_error()->message : "ok");
	if (fd >= 0)
		close(fd);
	fd = -1;
	unlink(up);
	if (symlink("../f", up) < 0)
		abort();
	trusted_bad(up, -EPERM, "(mode 1777)", "a link to a file in a sticky directory");
	dangling = strdup_printf("%s/dangling", base);
	if (symlink("nowhere", dangling) < 0)
		abort();
	trusted_bad(dangling, -ENOENT, "a symbolic link to 'nowhere', which does not exist",
		    "a dangling link");
	if (geteuid() == 0) {
		if (lchown(link, 65534, 65534) < 0)
			abort();
		trusted_bad(link, -EPERM, "a symbolic link owned by uid 65534",
			    "another user's link in a safe directory");
		if (chown(base, 65534, 65534) < 0)
			abort();
		trusted_bad(f, -EPERM, "is owned by uid 65534",
			    "a file in another user's directory");
		if (chown(base, 0, 0) < 0)
			abort();
		sticky_of_user(base);
	} else {
		tap_skip("not root: no link of another user");
		tap_skip("not root: no directory of another user");
		for (int i = 0; i < 3; i++)
			tap_skip("not root: no sticky directory of another user");
	}

	snprintf(p, sizeof(p), "rm -rf '%s'", base);
	if (system(p) != 0)
		tap_diag("cannot remove %s", base);
}

/* A child keeps exactly the descriptors it is told to, whatever their order. */
static void test_close_fds_but(void)
{
	int fds[5], keep[2], st = 0;
	pid_t pid;

	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	keep[0] = fds[3];
	keep[1] = fds[1];
	pid = fork();
	if (pid == 0) {
		int bad = 0;

		close_fds_but(3, keep, ELEMENTSOF(keep));
		for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
			bool open_now = fcntl(fds[i], F_GETFD) >= 0;

			if (open_now != (i == 1 || i == 3))
				bad |= 1 << i;
		}
		if (fcntl(0, F_GETFD) < 0 || fcntl(2, F_GETFD) < 0)
			bad |= 1 << 6;
		_exit(bad);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		st = -1;
	ok(st == 0,
	   "close_fds_but: the kept descriptors stay, the others above 2 close (status %d)", st);
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* A child that writes @a, then after @ms writes @b, then exits (closing its end). */
static pid_t writer(int fd, const char *a, unsigned ms, const char *b)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

		if (*a && write(fd, a, strlen(a)) < 0)
			_exit(1);
		nanosleep(&ts, NULL);
		if (*b && write(fd, b, strlen(b)) < 0)
			_exit(1);
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	int st;

	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}

static double mono_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* read_all(), and send_all() beside write_all(): what the metrics server's channel to its
 * collector relies on (cli/metrics_http.c). */
static void test_io_all(void)
{
	struct sigaction sa = {.sa_handler = on_alarm}, old_alrm;
	struct timeval tv = {0, 100 * 1000};
	char buf[16] = "";
	int sp[2];
	pid_t pid;
	double t;

	/* short reads: two pieces, 100 ms apart, make one read_all() */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	pid = writer(sp[1], "abc", 100, "defgh");
	close(sp[1]);
	is_int(read_all(sp[0], buf, 8), 0, "read_all: 8 bytes sent as 3 and 5");
	ok(memcmp(buf, "abcdefgh", 8) == 0, "  all of them, in order");
	reap(pid);
	is_int(read_all(sp[0], buf, 1), -EIO, "read_all at the end of the file: -EIO");
	close(sp[0]);

	/* the end of the file before all of it */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	pid = writer(sp[1], "xyz", 0, "");
	close(sp[1]);
	is_int(read_all(sp[0], buf, 8), -EIO, "read_all of 8 where the writer sent 3: -EIO");
	reap(pid);
	close(sp[0]);

	/* a signal (no SA_RESTART) while waiting: read on */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	sigaction(SIGALRM, &sa, &old_alrm);
	alarms = 0;
	pid = writer(sp[1], "", 400, "1234");
	close(sp[1]);
	setitimer(ITIMER_REAL, &(struct itimerval){.it_value = {0, 50 * 1000}}, NULL);
	is_int(read_all(sp[0], buf, 4), 0, "read_all interrupted by a signal goes on");
	ok(alarms == 1 && memcmp(buf, "1234", 4) == 0, "  the signal came (%d), the bytes too",
	   (int)alarms);
	sigaction(SIGALRM, &old_alrm, NULL);
	reap(pid);
	close(sp[0]);

	/* SO_RCVTIMEO and SO_SNDTIMEO run out: -EAGAIN, given up, not tried again */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ||
	    setsockopt(sp[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(sp[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		abort();
	if (write(sp[1], "ab", 2) != 2)
		abort();
	t = mono_sec();
	is_int(read_all(sp[0], buf, 4), -EAGAIN, "read_all past SO_RCVTIMEO: -EAGAIN");
	t = mono_sec() - t;
	ok(t < 1.0, "  after the timeout once (%.2f s), not again and again", t);
	{
		size_t big = 8u << 20;
		char *junk = calloc(1, big);

		t = mono_sec();
		is_int(junk ? send_all(sp[0], junk, big) : -ENOMEM, -EAGAIN,
		       "send_all of 8 MiB nobody reads, past SO_SNDTIMEO: -EAGAIN");
		t = mono_sec() - t;
		ok(t < 1.0, "  after the timeout once (%.2f s), not again and again", t);
		free(junk);
	}
	close(sp[1]);

	/* a peer gone: -EPIPE, and no SIGPIPE (whose default would end this test) */
	signal(SIGPIPE, SIG_DFL);
	is_int(send_all(sp[0], "x", 1), -EPIPE, "send_all to a peer gone: -EPIPE, no SIGPIPE");
	close(sp[0]);
}

/* /proc/locks lines as the kernel writes them, and ones it does not. */
static void test_flock_line(void)
{
	static const struct {
		const char *line;
		int pid;
		unsigned maj, mnr;
		uint64_t ino;
	} good[] = {
	    {"1: FLOCK  ADVISORY  WRITE 4242 00:1d:1234 0 EOF\n", 4242, 0, 0x1d, 1234},
	    {"17: FLOCK  ADVISORY  READ 7 103:0a:99 0 EOF", 7, 0x103, 0xa, 99},
	    {"3: FLOCK ADVISORY UNLCK 1 fff:fffff:18446744073709551615 0 EOF\n", 1, 0xfff, 0xfffff,
	     UINT64_MAX},
	};
	static const char *const bad[] = {
	    "1: -> FLOCK  ADVISORY  WRITE 4243 00:1d:1234 0 EOF\n", /* a waiter */
	    "1:  ->  FLOCK  ADVISORY  WRITE 4243 00:1d:1234 0 EOF\n",
	    "2: POSIX  ADVISORY  WRITE 4242 00:1d:1234 0 EOF\n",
	    "2: OFDLCK ADVISORY  WRITE -1 00:1d:1234 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE 0 00:1d:1234 0 EOF\n", /* pid not visible here */
	    "3: FLOCK  ADVISORY  WRITE -5 00:1d:1234 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE +5 00:1d:1234 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE 5 <none>:0 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE 5 1000:1d:1234 0 EOF\n", /* major past 12 bits */
	    "3: FLOCK  ADVISORY  WRITE 5 00:100000:1234 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE 5 0x1:1d:1234 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE 5 00:1d:12x4 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE 2147483648 00:1d:1 0 EOF\n",
	    "3 FLOCK  ADVISORY  WRITE 5 00:1d:1 0 EOF\n",
	    "x: FLOCK  ADVISORY  WRITE 5 00:1d:1 0 EOF\n",
	    "3: FLOCKS ADVISORY  WRITE 5 00:1d:1 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE 5\n00:1d:1 0 EOF\n",
	    "3: FLOCK  ADVISORY  WRITE 5",
	    "",
	};
	char path[] = "/tmp/jobcg-test-util-lock-XXXXXX";
	int fd = mkstemp(path), fd2 = fd >= 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	char want[32];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int pid = 0;
		unsigned maj = 0, mnr = 0;
		uint64_t ino = 0;

		int r = flock_parse_line(good[i].line, &pid, &maj, &mnr, &ino);

		ok(r == 0 && pid == good[i].pid && maj == good[i].maj && mnr == good[i].mnr &&
		       ino == good[i].ino,
		   "/proc/locks line %zu: pid %d, %x:%x, inode %" PRIu64, i, pid, maj, mnr, ino);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int pid = -7;
		unsigned maj = 7, mnr = 7;
		uint64_t ino = 7;

		ok(flock_parse_line(bad[i], &pid, &maj, &mnr, &ino) == -EINVAL && pid == -7 &&
		       maj == 7 && mnr == 7 && ino == 7,
		   "not a held flock, outputs untouched: '%s'", bad[i]);
	}
	/* The real thing: this process holds the lock another descriptor asks about. */
	snprintf(want, sizeof(want), "pid %d", (int)getpid());
	if (fd >= 0 && fd2 >= 0 && flock(fd, LOCK_EX) == 0) {
		_cleanup_free_ char *who = flock_holder(fd2);

		ok(who && strncmp(who, want, strlen(want)) == 0 &&
		       (who[strlen(want)] == 0 || who[strlen(want)] == ' '),
		   "flock_holder names this process: %s", who ? who : "(none)");
	} else
		ok(false, "a locked temporary file");
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	if (fd2 >= 0)
		close(fd2);
}

int main(void)
{
	test_flock_line();
	test_strv();
	test_numbers();
	test_strstrip();
	test_error();
	test_error_stale();
	test_read_file();
	test_write_atomic();
	test_close_fds_but();
	test_io_all();
	test_env_program();
	test_mkdir_p_safe();
	test_open_trusted();
	return tap_done();
}
