/*
 * Unit tests for the pure parts of reservations' CPU partitions: CPU set arithmetic on the lists
 * cpuset files hold (the empty set included), the cpuset.cpus.partition states of 6.1 and 6.12,
 * and the ancestor levels from the mount down to a cgroup; the memory.min of ancestors as
 * reservations come and go, never lowered below what someone else set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

#define M (1ULL << 20)

/*
 * A model of memory.min above reservations, as ancestors_min walks it (nearest level first):
 * the slice holds the tree root (scope) and a sibling with its own memory.min; reservations are
 * the scope's children. What the administrator set is where a level starts.
 */
struct level {
	uint64_t min, added;
};
struct model {
	struct level slice, scope;
	uint64_t sibling, resv[4];
};

static void level_step(struct level *l, uint64_t need, bool raise)
{
	uint64_t to, to_added;

	memresv_level_min(l->min, need, l->added, raise, &to, &to_added);
	/* Never the other way: a raise never lowers, a release never raises. */
	ok(raise ? to >= l->min : to <= l->min, "%s: %llu -> %llu", raise ? "raise" : "lower",
	   (unsigned long long)l->min, (unsigned long long)to);
	ok(to_added <= to, "jobcg's share %llu is within the value", (unsigned long long)to_added);
	l->min = to;
	l->added = to_added;
}

static void model_set(struct model *m, int k, uint64_t bytes)
{
	bool raise = bytes > 0;
	uint64_t sum = 0;

	m->resv[k] = bytes;
	for (size_t i = 0; i < sizeof(m->resv) / sizeof(m->resv[0]); i++)
		sum += m->resv[i];
	level_step(&m->scope, sum, raise);
	level_step(&m->slice, m->scope.min + m->sibling, raise);
	if (raise) {
		ok(m->scope.min >= sum, "the scope protects its reservations");
		ok(m->slice.min >= m->scope.min + m->sibling, "the slice protects its children");
	}
}

static void memmin(void)
{
	struct model m = {.slice = {1024 * M, 0}};
	uint64_t to, added;

	/* The level function alone. */
	memresv_level_min(100, 300, 0, true, &to, &added);
	ok(to == 300 && added == 200, "raise 100 -> 300: jobcg added 200");
	memresv_level_min(500, 300, 0, true, &to, &added);
	ok(to == 500 && added == 0, "raise, already enough: unchanged, nothing added");
	memresv_level_min(500, 0, 0, false, &to, &added);
	ok(to == 500 && added == 0, "lower what jobcg never raised: unchanged");
	memresv_level_min(500, 0, 200, false, &to, &added);
	ok(to == 300 && added == 0, "lower: by jobcg's 200 only, not to the children's 0");
	memresv_level_min(500, 450, 200, false, &to, &added);
	ok(to == 450 && added == 150, "lower: not below the children's need");
	memresv_level_min(300, 500, 200, false, &to, &added);
	ok(to == 300 && added == 200, "lower never raises");
	memresv_level_min(100, 0, 200, false, &to, &added);
	ok(to == 0 && added == 0, "lowered by someone else below jobcg's share: at most to 0");
	memresv_level_min(100, 400, 200, true, &to, &added);
	ok(to == 400 && added == 400,
	   "raise after someone lowered it: the share was what was left");
	memresv_level_min(UINT64_MAX - 1, UINT64_MAX, UINT64_MAX, true, &to, &added);
	ok(to == UINT64_MAX && added == UINT64_MAX, "no overflow at the top");

	/* The administrator's 1G on the slice: a 256M reservation fits under it and leaves it. */
	model_set(&m, 0, 256 * M);
	is_int(m.slice.min, 1024 * M, "admin 1G: the slice stays 1G with a 256M reservation");
	is_int(m.scope.min, 256 * M, "...the scope raised to 256M");
	model_set(&m, 0, 0);
	is_int(m.slice.min, 1024 * M,
	       "...and after delete the admin's 1G stays (was lowered to 0)");
	is_int(m.scope.min, 0, "...the scope back to 0");
	ok(!m.slice.added && !m.scope.added, "...nothing left recorded");

	/* Below the reservation: raised, and given back down to the admin's value. */
	m = (struct model){.slice = {64 * M, 0}};
	model_set(&m, 0, 256 * M);
	is_int(m.slice.min, 256 * M, "admin 64M: raised to 256M");
	is_int(m.slice.added, 192 * M, "...jobcg added 192M");
	model_set(&m, 0, 0);
	is_int(m.slice.min, 64 * M, "...after delete the admin's 64M");

	/* Two reservations, a sibling protected by the admin, the admin's 2G on the slice and
	 * 128M on the scope; deleted in either order, every level ends where it started. */
	for (int order = 0; order < 2; order++) {
		m = (struct model){
		    .slice = {2048 * M, 0}, .scope = {128 * M, 0}, .sibling = 512 * M};
		model_set(&m, 0, 1024 * M);
		model_set(&m, 1, 2048 * M);
		is_int(m.scope.min, 3072 * M, "r0 1G + r1 2G: the scope protects 3G");
		is_int(m.slice.min, 3584 * M, "...the slice 3G and the sibling's 512M");
		model_set(&m, order, 0);
		is_int(m.slice.min, order ? 2048 * M : 2560 * M, "one deleted: the slice follows");
		model_set(&m, !order, 0);
		is_int(m.scope.min, 128 * M, "both deleted: the admin's 128M on the scope");
		is_int(m.slice.min, 2048 * M, "...and the admin's 2G on the slice");
		ok(!m.slice.added && !m.scope.added, "...nothing left recorded");
	}

	/* Raised by an older jobcg (nothing recorded): never lowered, protection stays. */
	m = (struct model){.slice = {256 * M, 0}, .scope = {256 * M, 0}};
	model_set(&m, 0, 0);
	is_int(m.slice.min, 256 * M, "unrecorded raise: left as it is");

	/* The admin raises the slice while a reservation holds it: only jobcg's share goes. */
	m = (struct model){};
	model_set(&m, 0, 256 * M);
	m.slice.min += 512 * M;
	model_set(&m, 0, 0);
	is_int(m.slice.min, 512 * M, "admin's later +512M stays after delete");
}

static void put_min(const char *dir, uint64_t v)
{
	char p[512];
	FILE *f;

	mkdir(dir, 0755);
	snprintf(p, sizeof(p), "%s/memory.min", dir);
	f = fopen(p, "w");
	if (f) {
		fprintf(f, "%llu\n", (unsigned long long)v);
		fclose(f);
	}
}

/*
 * Defect: memory.min is held in whole pages, rounded down, so a --mem that is no multiple of the
 * page size ("5K") read back below what was asked at every level, and the reservation verified
 * DEGRADED from its creation (refused, "would start DEGRADED"). A fake mount holding the values
 * the kernel would show.
 */
static void memmin_pages(void)
{
	char top[] = "/tmp/jobcg-test-cpupart-XXXXXX", scope[256], resv[256];
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), asked = page + 1024;
	struct jobcg_sysinfo info = {};
	struct jobcg_ctx ctx = {};
	char *why = NULL;

	if (!mkdtemp(top)) {
		ok(false, "mkdtemp");
		return;
	}
	info.mount = top;
	ctx.info = &info;
	snprintf(scope, sizeof(scope), "%s/jobcg.scope", top);
	snprintf(resv, sizeof(resv), "%s/resv_r1", scope);
	put_min(scope, page);
	put_min(resv, page);
	is_int(memresv_verify(&ctx, resv, asked, &why), 0, "memresv_verify reads the levels");
	ok(!why, "%llu bytes asked, one page held at each level: protected (%s)",
	   (unsigned long long)asked, why ? why : "no problem");
	free(why);
	why = NULL;
	put_min(scope, 0);
	is_int(memresv_verify(&ctx, resv, asked, &why), 0, "read again");
	ok(why && strstr(why, "jobcg.scope"), "an ancestor at 0 still names it (%s)",
	   why ? why : "nothing");
	free(why);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
		if (system(cmd) != 0)
			tap_diag("cannot remove %s", top);
	}
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
	memmin();
	memmin_pages();
	return tap_done();
}
