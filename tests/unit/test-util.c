/* Unit tests for the string, file and error helpers every part of the library uses. */
#include <fcntl.h>

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

int main(void)
{
	test_strv();
	test_uint_pair();
	test_strstrip();
	test_error();
	test_read_file();
	return tap_done();
}
