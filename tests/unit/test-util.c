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

int main(void)
{
	test_strv();
	test_strstrip();
	test_error();
	test_read_file();
	return tap_done();
}
