/*
 * Unit tests for the pure parts of reservations' CPU partitions: CPU set arithmetic on the lists
 * cpuset files hold (the empty set included), the cpuset.cpus.partition states of 6.1 and 6.12,
 * and the ancestor levels from the mount down to a cgroup.
 */
#include "cpupart.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static void combine(const char *a, enum cpulist_op op, const char *b, const char *want)
{
	_cleanup_free_ char *got = NULL;
	int r = cpulist_combine(a, op, b, &got);

	is_int(r, 0, "combine parses");
	is_str(got, want, want);
}

static void state(const char *text, const char *mode, bool invalid, const char *reason)
{
	_cleanup_free_ char *m = NULL, *why = NULL;
	bool inv = !invalid;

	is_int(cpupart_parse_state(text, &m, &inv, &why), 0, text);
	is_str(m, mode, "mode");
	ok(inv == invalid, "'%s' invalid=%d", text, invalid);
	is_str(why, reason, "reason");
}

int main(void)
{
	_cleanup_free_ char *s = NULL;
	char **v = NULL;

	combine("0-3", CPULIST_UNION, "6,8-9", "0-3,6,8-9");
	combine("", CPULIST_UNION, "2-3", "2-3");
	combine("\n", CPULIST_UNION, "", "");
	combine("0-7\n", CPULIST_MINUS, "2-3", "0-1,4-7");
	combine("0-7", CPULIST_MINUS, "0-7", "");
	combine("0-3", CPULIST_INTERSECT, "2-5", "2-3");
	combine("0-1", CPULIST_INTERSECT, "2-5", "");
	combine("100-130", CPULIST_MINUS, "101-129", "100,130");
	is_int(cpulist_combine("0-", CPULIST_UNION, "1", &s), -EINVAL, "bad list refused");
	ok(strstr(jobcg_last_error()->message, "0-"), "the error names the list: %s",
	   jobcg_last_error()->message);
	ok(s == NULL, "nothing returned on error");
	is_int(cpulist_equal("2,3", "2-3\n"), 1, "2,3 == 2-3");
	is_int(cpulist_equal("", "\n"), 1, "empty == empty");
	is_int(cpulist_equal("2", "2-3"), 0, "2 != 2-3");
	is_int(cpulist_equal("x", "2-3"), -EINVAL, "x does not parse");

	state("member\n", "member", false, "");
	state("root", "root", false, "");
	state("isolated", "isolated", false, "");
	state("root invalid (Cpu list in cpuset.cpus not exclusive)\n", "root", true,
	      "Cpu list in cpuset.cpus not exclusive");
	state("root invalid", "root", true, "");
	state("isolated invalid (Parent is not a partition root)", "isolated", true,
	      "Parent is not a partition root");

	is_int(cpupart_levels("/sys/fs/cgroup", "/sys/fs/cgroup/a.slice/b.scope/r", &v), 0,
	       "levels");
	is_int(strv_length(v), 3, "three levels");
	is_str(v[0], "/sys/fs/cgroup/a.slice", "top level");
	is_str(v[2], "/sys/fs/cgroup/a.slice/b.scope/r", "DIR last");
	strv_free(v);
	v = NULL;
	is_int(cpupart_levels("/sys/fs/cgroup/", "/sys/fs/cgroup/x/", &v), 0, "trailing slashes");
	is_int(strv_length(v), 1, "one level");
	is_str(v[0], "/sys/fs/cgroup/x", "the child");
	strv_free(v);
	v = NULL;
	is_int(cpupart_levels("/sys/fs/cgroup", "/sys/fs/cgroup", &v), -EINVAL, "the root itself");
	is_int(cpupart_levels("/sys/fs/cgroup", "/sys/fs/cgroupx/a", &v), -EINVAL, "a look-alike");
	is_int(cpupart_levels("/sys/fs/cgroup", "/tmp/a", &v), -EINVAL, "elsewhere");
	return tap_done();
}
