/*
 * Kernel test: a job's owner from 'jobcg alloc --uid/--gid' names and numbers, resolved with
 * getent (a statically linked jobcg must not load NSS modules), and the errors around it.
 */
#include <grp.h>
#include <json-c/json.h>
#include <pwd.h>
#include <sys/xattr.h>

#include "kcli.h"

/* "uid:gid" of job @id as 'jobcg show --json' reports it, or "" when it cannot be read. */
static void owner_of(const char *id, char *buf, size_t len)
{
	char *out = NULL;
	struct json_object *o, *u, *g;

	buf[0] = '\0';
	if (kcli(&out, "show", id, "--json", NULL) == 0 && (o = json_tokener_parse(out))) {
		if (json_object_object_get_ex(o, "uid", &u) &&
		    json_object_object_get_ex(o, "gid", &g))
			snprintf(buf, len, "%d:%d", json_object_get_int(u), json_object_get_int(g));
		json_object_put(o);
	}
	free(out);
}

int main(void)
{
	struct passwd *pw = getpwnam("nobody");
	struct group *gr = getgrnam("nogroup") ? getgrnam("nogroup") : getgrnam("nobody");
	char want[64], got[64], *err = NULL;
	unsigned free_id = 42420;
	int rc;

	kcli_setup("owner", "jobcg");
	if (!pw || !gr) {
		tap_skip("no 'nobody' user or 'nogroup'/'nobody' group on this host");
		return tap_done();
	}
	/* A number that no passwd entry has: its own group, as before getent. */
	while (getpwuid(free_id))
		free_id++;

	is_int(kcli(NULL, "alloc", "51", "--uid", "nobody", "--gid", gr->gr_name, NULL), 0,
	       "alloc --uid nobody --gid <nogroup>");
	snprintf(want, sizeof(want), "%u:%u", (unsigned)pw->pw_uid, (unsigned)gr->gr_gid);
	owner_of("51", got, sizeof(got));
	is_str(got, want, "owner is nobody's uid and the group's gid, as getpwnam/getgrnam say");

	is_int(kcli(NULL, "alloc", "52", "--user", "nobody", NULL), 0, "alloc --user nobody");
	snprintf(want, sizeof(want), "%u:%u", (unsigned)pw->pw_uid, (unsigned)pw->pw_gid);
	owner_of("52", got, sizeof(got));
	is_str(got, want, "without --gid the owner's group is the user's primary group");

	{
		char num[16];

		snprintf(num, sizeof(num), "%u", free_id);
		is_int(kcli(NULL, "alloc", "53", "--uid", num, NULL), 0,
		       "alloc --uid <a number without passwd entry>");
		snprintf(want, sizeof(want), "%u:%u", free_id, free_id);
		owner_of("53", got, sizeof(got));
		is_str(got, want, "a uid without a passwd entry is its own group");
	}

	{
		char *args[] = {"alloc", "54", "--uid", "no-such-user-jobcg", NULL};

		rc = kcli_run(args, NULL, &err);
		is_int(rc, 2, "an unknown user name is a usage error");
		ok(err && strstr(err, "'no-such-user-jobcg': no such user"), "...naming it");
		free(err);
	}
	{
		char *args[] = {"alloc", "54", "--gid", "no-such-group-jobcg", NULL};

		rc = kcli_run(args, NULL, &err);
		is_int(rc, 2, "an unknown group name is a usage error");
		ok(err && strstr(err, "'no-such-group-jobcg': no such group"), "...naming it");
		free(err);
	}
	is_int(kcli(NULL, "alloc", "54", "--uid", "-nobody", NULL), 2,
	       "a name starting with '-' is never passed to getent as an option");
	is_int(kcli(NULL, "alloc", "54", "--uid", "12abc", NULL), 2, "'12abc' is no uid");
	ok(!kcli_exists("%s/job_54", kcli_root_abs), "none of the refused allocs made job 54");

	{
		char *args[] = {"alloc", "54", "--uid", "nobody", NULL};
		char *path = strdup(getenv("PATH") ? getenv("PATH") : "");

		/* getent is run by absolute path: an empty PATH changes nothing. */
		setenv("PATH", "/nonexistent", 1);
		is_int(kcli(NULL, "alloc", "55", "--uid", "nobody", NULL), 0,
		       "getent is found without PATH");
		setenv("PATH", path, 1);
		free(path);
		is_int(kcli(NULL, "release", "55", NULL), 0, "release job 55");
		/* A test build only: the getent it runs can be replaced by one that is missing. */
		if (tap_test_hooks()) {
			setenv("JOBCG_TEST_GETENT", "/nonexistent/getent", 1);
			rc = kcli_run(args, NULL, &err);
			unsetenv("JOBCG_TEST_GETENT");
			is_int(rc, 1,
			       "without getent a name cannot be resolved: an error, not a guess");
			ok(err && strstr(err, "getent") && strstr(err, "libc-bin"),
			   "...saying getent could not run");
			free(err);
			ok(!kcli_exists("%s/job_54", kcli_root_abs), "...and job 54 was not made");
		} else {
			tap_skip(
			    "a name without getent: a build without test hooks runs the real one");
		}
	}

	{
		/* The mark is read as jobcg writes it, digits only: sscanf's %u would take "-1" as
		 * uid 4294967295 and make a job of nobody's someone's. */
		char path[PATH_MAX], *out = NULL;
		struct json_object *o = NULL, *u = NULL;
		bool seen = false;

		snprintf(path, sizeof(path), "%s/job_52", kcli_root_abs);
		ok(setxattr(path, "trusted.jobcg.owner", "-1:-1", 5, 0) == 0,
		   "job 52's owner mark replaced by '-1:-1'");
		if (kcli(&out, "show", "52", "--json", NULL) == 0 && (o = json_tokener_parse(out)))
			seen = json_object_object_get_ex(o, "uid", &u);
		ok(seen && !u, "...which names no owner (uid null), not uid 4294967295");
		if (o)
			json_object_put(o);
		free(out);
	}

	for (const char *const *id = (const char *const[]){"51", "52", "53", NULL}; *id; id++)
		is_int(kcli(NULL, "release", *id, NULL), 0, "release a job");
	return tap_done();
}
