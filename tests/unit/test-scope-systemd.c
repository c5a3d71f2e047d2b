/* Unit tests for the systemd scope backend's pure parts: slice paths and unit names. */
#include "scope.h"
#include "scope_systemd.h"
#include "tap.h"
#include "util.h"

static void slice_is(const char *slice, const char *want)
{
	char *p = NULL;
	int r = scope_slice_path(slice, &p);

	if (want)
		ok(r == 0 && p && streq(p, want), "slice %s lives at '%s' (got r=%d '%s')", slice,
		   want, r, p ? p : "(null)");
	else
		ok(r == -EINVAL && !p, "slice '%s' is refused (r=%d)", slice, r);
	free(p);
}

int main(void)
{
	char *p = NULL;

	slice_is("system.slice", "system.slice");
	slice_is("-.slice", "");
	slice_is("a-b.slice", "a.slice/a-b.slice");
	slice_is("a-b-c.slice", "a.slice/a-b.slice/a-b-c.slice");
	slice_is("machine.slice", "machine.slice");
	slice_is(".slice", NULL);
	slice_is("system", NULL);
	slice_is("-a.slice", NULL);
	slice_is("a-.slice", NULL);
	slice_is("a--b.slice", NULL);
	slice_is("a/b.slice", NULL);
	slice_is("sys tem.slice", NULL);

	ok(scope_unit_name_valid("jobcg.scope"), "jobcg.scope is a scope name");
	ok(scope_unit_name_valid("node1_jobcg.scope"), "node1_jobcg.scope is a scope name");
	ok(!scope_unit_name_valid(".scope"), ".scope is not");
	ok(!scope_unit_name_valid("jobcg.service"), "a service is not");
	ok(!scope_unit_name_valid("job cg.scope"), "a space is not allowed");
	ok(!scope_unit_name_valid("a/b.scope"), "a slash is not allowed");

	is_int(scope_expected_root("system.slice", "jobcg.scope", &p), 0, "expected root");
	is_str(p, "system.slice/jobcg.scope", "jobcg.scope goes to system.slice/jobcg.scope");
	free(p);
	p = NULL;
	is_int(scope_expected_root("hpc-jobs.slice", "n1_jobcg.scope", &p), 0, "nested slice");
	is_str(p, "hpc.slice/hpc-jobs.slice/n1_jobcg.scope", "nested slice path");
	free(p);
	p = NULL;
	is_int(scope_expected_root("-.slice", "jobcg.scope", &p), 0, "root slice");
	is_str(p, "jobcg.scope", "a scope in the root slice sits at the top");
	free(p);
	p = NULL;
	is_int(scope_expected_root("system.slice", "jobcg", &p), -EINVAL, "bad scope name refused");
	ok(p == NULL, "nothing returned on error");
	ok(strstr(jobcg_last_error()->message, "JobcgScope") != NULL, "error names JobcgScope");

	ok(!scope_systemd_running() || access("/run/systemd/system", F_OK) == 0,
	   "scope_systemd_running agrees with /run/systemd/system");
	return tap_done();
}
