/* Unit tests for the string, file and error helpers every part of the library uses. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

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
	is_str(jobcg_error_format(buf, sizeof(buf)), "gres.conf:7:3: no such device /dev/x",
	       "error format names file, line and column");
	jobcg_error_prefix("loading");
	is_str(jobcg_last_error()->message, "loading: no such device /dev/x", "error prefix");
	jobcg_error_clear();
	is_int(jobcg_last_error()->code, 0, "error clear");
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
}

static void test_uint_pair(void)
{
	unsigned a = 7, b = 7;

	ok(parse_uint_pair("6.1.0-56-amd64", '.', &a, &b) && a == 6 && b == 1, "kernel release");
	ok(parse_uint_pair("1000:100", ':', &a, &b) && a == 1000 && b == 100, "owner uid:gid");
	ok(parse_uint_pair("4294967295:0", ':', &a, &b) && a == 4294967295u, "UINT_MAX fits");
	a = b = 7;
	ok(!parse_uint_pair("4294967296:0", ':', &a, &b), "past UINT_MAX: refused");
	ok(!parse_uint_pair("5", '.', &a, &b), "one number only");
	ok(!parse_uint_pair("5.", '.', &a, &b), "nothing after the separator");
	ok(!parse_uint_pair("5.x", '.', &a, &b), "no digit after the separator");
	ok(!parse_uint_pair(" 5.1", '.', &a, &b), "leading space");
	ok(!parse_uint_pair("-5.1", '.', &a, &b), "sign");
	ok(!parse_uint_pair("5:1", '.', &a, &b), "another separator");
	ok(!parse_uint_pair("", '.', &a, &b) && !parse_uint_pair(NULL, '.', &a, &b), "empty");
	is_int(a, 7, "outputs untouched on failure");
	is_int(b, 7, "...both");
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

int main(void)
{
	test_strv();
	test_uint_pair();
	test_strstrip();
	test_error();
	test_read_file();
	test_env_program();
	return tap_done();
}
