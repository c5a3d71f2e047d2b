/* Kernel test: `jobcg check` describes this host's cgroup v2 (here: hybrid, controllers on v1). */
#include <json-c/json.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include "kcli.h"

static bool is_cgroup2(const char *p)
{
	struct statfs fs;

	return statfs(p, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

static bool array_has(struct json_object *o, const char *key, const char *val)
{
	struct json_object *a;

	if (!json_object_object_get_ex(o, key, &a) || !json_object_is_type(a, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(a); i++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(a, i)), val) == 0)
			return true;
	return false;
}

/* Whether a mount of file system @type (at @dir, or anywhere when NULL) lists option @opt, as
 * /proc/self/mounts says, read here without jobcg. A v1 controller is such an option of a
 * "cgroup" mount; cgroup2's options are its one hierarchy's, the same on every mount of it. */
static bool mount_has_option(const char *type, const char *dir, const char *opt)
{
	FILE *f = fopen("/proc/self/mounts", "re");
	char line[4096];
	bool found = false;

	while (f && fgets(line, sizeof(line), f)) {
		char d[PATH_MAX], t[64], opts[2048], *save = NULL;

		if (sscanf(line, "%*s %4095s %63s %2047s", d, t, opts) != 3 ||
		    strcmp(t, type) != 0 || (dir && strcmp(d, dir) != 0))
			continue;
		for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
			if (strcmp(o, opt) == 0)
				found = true;
	}
	if (f)
		fclose(f);
	return found;
}

static bool v1_mounted(const char *ctrl)
{
	return mount_has_option("cgroup", NULL, ctrl);
}

static void put(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "we");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* sshd's PAM stack: pam_systemd beside `jobcg adopt --pam` is a failure, said loudly. */
static void pam_checks(void)
{
	char dir[PATH_MAX], want[PATH_MAX + 64], *out = NULL, *err = NULL;
	struct json_object *o = NULL, *pam = NULL, *v;
	int rc;

	snprintf(dir, sizeof(dir), "%s/pam.d", ktest_tmpdir());
	mkdir(dir, 0755);
	put(dir, "common-session",
	    "session required pam_unix.so\nsession optional pam_systemd.so\n");
	put(dir, "common-session-noninteractive", "session required pam_unix.so\n");
	put(dir, "sshd",
	    "@include common-account\n"
	    "account required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n"
	    "@include common-session\n"
	    "session required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n");
	rc = kcli_run((char *[]){"check", "--pam-dir", dir, NULL}, &out, &err);
	is_int(rc, 1, "check fails when pam_systemd runs for adopted ssh logins");
	snprintf(want, sizeof(want), "%s/common-session:2", dir);
	ok(out && strstr(out, "WARNING: adopted ssh logins leave their jobs") && strstr(out, want),
	   "...with a warning naming the line");
	ok(out && strstr(out, "common-session-noninteractive"), "...and the fix");
	ok(err && strstr(err, "WARNING"), "...on stderr as well");
	free(out);
	free(err);
	rc = kcli(&out, "check", "--json", "--pam-dir", dir, NULL);
	is_int(rc, 1, "the same with --json");
	o = out ? json_tokener_parse(out) : NULL;
	ok(o && json_object_object_get_ex(o, "ssh_pam", &pam) &&
	       json_object_object_get_ex(pam, "logins_escape", &v) && json_object_get_boolean(v),
	   "json ssh_pam.logins_escape is true");
	ok(pam && json_object_object_get_ex(pam, "pam_systemd", &v) &&
	       strstr(json_object_get_string(v), want),
	   "json ssh_pam.pam_systemd names the line");
	json_object_put(o);
	free(out);

	put(dir, "sshd",
	    "@include common-account\n"
	    "account required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n"
	    "@include common-session-noninteractive\n"
	    "session required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n");
	rc = kcli(&out, "check", "--pam-dir", dir, NULL);
	is_int(rc, 0, "with the documented stack check passes");
	ok(out && strstr(out, "adopted into jobs") && strstr(out, "checked after the session") &&
	       !strstr(out, "WARNING"),
	   "...saying logins are adopted and checked");
	free(out);
	put(dir, "sshd", "account required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n");
	rc = kcli(&out, "check", "--pam-dir", dir, NULL);
	is_int(rc, 0, "without the session line: passes");
	ok(out && strstr(out, "note: no session line"), "...with a note");
	free(out);
	put(dir, "sshd", "@include common-session\n");
	rc = kcli(&out, "check", "--pam-dir", dir, NULL);
	is_int(rc, 0, "pam_systemd without jobcg adopt is no concern of jobcg's");
	ok(out && strstr(out, "not adopted"), "...logins are not adopted, it says");
	free(out);

	/* Debian's pam_env line reads users' ~/.pam_environment before the session line. */
	{
		char text[3 * PATH_MAX], stat_exe[PATH_MAX], dyn_exe[PATH_MAX];

		/* A dynamically linked program named like jobcg (the jobcg under test may be a
		 * static build): /bin/sh. */
		snprintf(dyn_exe, sizeof(dyn_exe), "%s/jobcg-dynamic", ktest_tmpdir());
		if (symlink("/bin/sh", dyn_exe) < 0 && errno != EEXIST)
			tap_diag("symlink %s: %s", dyn_exe, strerror(errno));
		snprintf(text, sizeof(text),
			 "account required pam_exec.so quiet %s adopt --pam\n"
			 "session required pam_env.so user_readenv=1 envfile=/etc/default/locale\n"
			 "session required pam_exec.so quiet %s adopt --pam\n",
			 dyn_exe, dyn_exe);
		put(dir, "sshd", text);
		rc = kcli_run((char *[]){"check", "--pam-dir", dir, NULL}, &out, &err);
		is_int(rc, 1,
		       "check fails when users' ~/.pam_environment reaches a dynamically linked "
		       "jobcg");
		snprintf(want, sizeof(want), "%s/sshd:2", dir);
		ok(out && strstr(out, "WARNING: users' environments reach a root jobcg") &&
		       strstr(out, want) && strstr(out, "linked dynamically"),
		   "...naming the pam_env line and why");
		ok(err && strstr(err, "WARNING"), "...on stderr as well");
		free(out);
		free(err);
		rc = kcli(&out, "check", "--json", "--pam-dir", dir, NULL);
		o = out ? json_tokener_parse(out) : NULL;
		ok(o && json_object_object_get_ex(o, "ssh_pam", &pam) &&
		       json_object_object_get_ex(pam, "root_from_user_env", &v) &&
		       json_object_get_boolean(v) &&
		       json_object_object_get_ex(pam, "user_env", &v) &&
		       strstr(json_object_get_string(v), want),
		   "json ssh_pam.root_from_user_env is true, user_env names the line");
		json_object_put(o);
		free(out);
		/* A statically linked program: glibc's ldconfig, named like jobcg. */
		snprintf(stat_exe, sizeof(stat_exe), "%s/jobcg-static", ktest_tmpdir());
		if (symlink("/sbin/ldconfig", stat_exe) < 0 && errno != EEXIST)
			tap_diag("symlink %s: %s", stat_exe, strerror(errno));
		snprintf(text, sizeof(text),
			 "account required pam_exec.so quiet %s adopt --pam\n"
			 "session required pam_env.so user_readenv=1 envfile=/etc/default/locale\n"
			 "session required pam_exec.so quiet %s adopt --pam\n",
			 stat_exe, stat_exe);
		put(dir, "sshd", text);
		rc = kcli(&out, "check", "--pam-dir", dir, NULL);
		if (access("/sbin/ldconfig", X_OK) == 0) {
			is_int(rc, 0, "with a statically linked jobcg on the lines: passes");
			ok(out && strstr(out, "note: pam_env hands users' own") &&
			       strstr(out, "statically linked and drops it") &&
			       !strstr(out, "WARNING"),
			   "...with a note to keep it static");
		} else {
			tap_skip("no /sbin/ldconfig to stand in for a static jobcg");
			tap_skip("no /sbin/ldconfig to stand in for a static jobcg");
		}
		free(out);
		unlink(stat_exe);
		unlink(dyn_exe);
	}
}

/* A reservation this node cannot honour fails every job that applies it: check says jobs cannot
 * run, naming the key and its line, and exits 1. */
static void spec_checks(void)
{
	static const struct {
		const char *text, *needle;
	} cases[] = {
	    {"ConstrainCores=yes\nCoreSpecCount=4096\n",
	     "cgroup.conf:2: CoreSpecCount=4096 reserves every online CPU"},
	    {"ConstrainCores=yes\nSpecCPUs=4095\n",
	     "cgroup.conf:2: SpecCPUs=4095 names CPU 4095, which is not online"},
	    {"ConstrainCores=yes\nMemSpecLimit=999999999\n",
	     "cgroup.conf:2: MemSpecLimit=999999999M is not below the node's RAM"},
	};
	char dir[PATH_MAX], *out = NULL, *err = NULL;
	struct json_object *o, *v;
	int rc;

	snprintf(dir, sizeof(dir), "%s/specconf", ktest_tmpdir());
	mkdir(dir, 0755);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *key = strchr(cases[i].text, '\n') + 1;
		int n = (int)strcspn(key, "\n");

		put(dir, "cgroup.conf", cases[i].text);
		rc = kcli_run((char *[]){"--config-dir", dir, "check", NULL}, &out, &err);
		ok(rc == 1 && out && strstr(out, "jobs can run:          no: ") &&
		       strstr(out, cases[i].needle),
		   "%.*s: check exits 1 (rc %d), jobs cannot run, naming the line", n, key, rc);
		if (rc != 1 && out)
			ktest_diag_lines("", out);
		free(out);
		free(err);
		rc = kcli_run((char *[]){"--config-dir", dir, "check", "--json", NULL}, &out, &err);
		o = out ? json_tokener_parse(out) : NULL;
		ok(rc == 1 && o && json_object_object_get_ex(o, "can_run", &v) &&
		       !json_object_get_boolean(v) &&
		       json_object_object_get_ex(o, "cannot_run_reason", &v) &&
		       strstr(json_object_get_string(v), cases[i].needle),
		   "...--json: can_run false, cannot_run_reason names it (rc %d)", rc);
		json_object_put(o);
		free(out);
		free(err);
	}
	put(dir, "cgroup.conf", "CoreSpecCount=0\nMemSpecLimit=1\n");
	rc = kcli_run((char *[]){"--config-dir", dir, "check", NULL}, &out, &err);
	ok(out && strstr(out, "jobs can run:          yes"),
	   "a reservation the node can honour leaves jobs runnable (rc %d)", rc);
	free(out);
	free(err);
}

/* A bad value on a gres.conf line for other nodes does not stop this node (Slurm reads no
 * value there), but check still reports it: a count in the text, the warning in the JSON. */
static void other_node_checks(void)
{
	char dir[PATH_MAX], *out = NULL, *err = NULL;
	struct json_object *o, *a = NULL;
	int rc, rc0;

	snprintf(dir, sizeof(dir), "%s/othernode", ktest_tmpdir());
	mkdir(dir, 0755);
	put(dir, "gres.conf", "NodeName=jobcg-no-such-node Name=gpu File=/dev/null\n");
	rc0 = kcli_run((char *[]){"--config-dir", dir, "check", "--slurm-gres", "none", NULL}, &out,
		       &err);
	ok(out && strstr(out, "configuration:         no warnings"),
	   "check says the configuration has no warnings (rc %d)", rc0);
	free(out);
	free(err);
	put(dir, "gres.conf", "NodeName=jobcg-no-such-node Name=gpu File=/dev/null Cores=5-2\n");
	rc = kcli_run((char *[]){"--config-dir", dir, "check", "--slurm-gres", "none", NULL}, &out,
		      &err);
	ok(rc == rc0 && out && strstr(out, "configuration:         1 warning (on stderr above"),
	   "another node's bad Cores=: check runs as before (rc %d, was %d) and counts the "
	   "warning",
	   rc, rc0);
	ok(err && strstr(err, "gres.conf:1: column 59: Cores=5-2") &&
	       strstr(err, "NodeName=jobcg-no-such-node, not this node"),
	   "...which stderr shows with its file, line and column");
	if (rc != 0 || !out || !strstr(out, "configuration:"))
		ktest_diag_lines("", err ? err : "");
	free(out);
	free(err);
	rc = kcli_run(
	    (char *[]){"--config-dir", dir, "check", "--json", "--slurm-gres", "none", NULL}, &out,
	    &err);
	o = out ? json_tokener_parse(out) : NULL;
	ok(rc == rc0 && o && json_object_object_get_ex(o, "config_warnings", &a) &&
	       json_object_array_length(a) == 1 &&
	       strstr(json_object_get_string(json_object_array_get_idx(a, 0)),
		      "gres.conf:1: column 59: Cores=5-2"),
	   "...and --json lists it in config_warnings (rc %d)", rc);
	json_object_put(o);
	free(out);
	free(err);
}

int main(void)
{
	const char *root = kcli_setup("cli-check", "jobcg");
	const char *mnt = ktest_cgroup_mount();
	struct json_object *o = NULL, *v;
	char *out = NULL;
	int rc;

	/* What this host is, found independently of jobcg. */
	bool unified = is_cgroup2("/sys/fs/cgroup");
	bool hybrid = !unified && strcmp(mnt, "/sys/fs/cgroup/unified") == 0;
	const char *layout_name = unified ? "unified" : hybrid ? "hybrid" : "other";
	const char *layout_text = unified ? "pure cgroup v2" : hybrid ? "hybrid" : "cgroup2 mount";

	rc = kcli(&out, "check", NULL);
	is_int(rc, 0, "jobcg check exits 0 (jobs can run)");
	if (out)
		ktest_diag_lines("", out);
	ok(out && strstr(out, mnt), "text names the v2 mount %s", mnt);
	ok(out && strstr(out, layout_text), "text says the layout is %s", layout_name);
	if (v1_mounted("memory"))
		ok(out && strstr(out, "memory controller is bound to cgroup v1: memory limits"),
		   "text says memory limits cannot be enforced (memory on v1)");
	else
		ok(out && !strstr(out, "memory controller is bound to cgroup v1"),
		   "memory is not said to be on v1");
	free(out);

	rc = kcli(&out, "check", "--json", NULL);
	is_int(rc, 0, "jobcg check --json exits 0");
	o = out ? json_tokener_parse(out) : NULL;
	ok(o != NULL, "--json output parses");
	free(out);
	if (!o)
		return tap_done();
	ok(json_object_object_get_ex(o, "mount", &v) && strcmp(json_object_get_string(v), mnt) == 0,
	   "json mount");
	ok(json_object_object_get_ex(o, "root", &v) && strcmp(json_object_get_string(v), root) == 0,
	   "json root is the JOBCG_ROOT subtree %s", root);
	ok(json_object_object_get_ex(o, "layout", &v) &&
	       strcmp(json_object_get_string(v), layout_name) == 0,
	   "json layout %s", layout_name);
	is_int(array_has(o, "controllers_v1", "memory"), v1_mounted("memory"),
	       "memory listed as bound to v1 exactly when it is");
	if (v1_mounted("memory"))
		ok(!array_has(o, "controllers_usable", "memory"), "memory not usable by jobs");
	else
		ok(json_object_object_get_ex(o, "controllers_usable", &v),
		   "usable controllers listed");
	{
		/* The test's own cgroup shows what the kernel offers a non-root cgroup. */
		char top[PATH_MAX];
		struct json_object *f, *sup;

		snprintf(top, sizeof(top), "%.*s", (int)(strlen(root) - strlen("/jobcg")), root);
		ok(json_object_object_get_ex(o, "freeze", &f) &&
		       json_object_object_get_ex(f, "supported", &sup) &&
		       json_object_get_boolean(sup) == kcli_exists("%s/cgroup.freeze", top),
		   "freeze support matches cgroup.freeze in a child cgroup");
		ok(json_object_object_get_ex(o, "kill", &f) &&
		       json_object_object_get_ex(f, "supported", &sup) &&
		       json_object_get_boolean(sup) == kcli_exists("%s/cgroup.kill", top),
		   "kill support matches cgroup.kill in a child cgroup");
	}
	{
		/* favordynmods as the mount table has it, read here without jobcg. */
		bool want = mount_has_option("cgroup2", mnt, "favordynmods");
		struct json_object *f, *sup;

		ok(json_object_object_get_ex(o, "favordynmods", &f) &&
		       json_object_object_get_ex(f, "supported", &sup) &&
		       json_object_get_boolean(sup) == want,
		   "favordynmods is %s, as %s's mount options say", want ? "on" : "off", mnt);
	}
	ok(json_object_object_get_ex(o, "can_run", &v) && json_object_get_boolean(v),
	   "can_run true");
	ok(!kcli_exists("%s", root), "check created nothing (root still absent)");
	json_object_put(o);

	is_int(kcli(NULL, "init", NULL), 0, "jobcg init");
	ok(kcli_exists("%s/system", root), "init made the root and its system/ leaf");
	is_int(kcli(NULL, "init", NULL), 0, "jobcg init again is fine");
	is_int(kcli_count_dirs(root), 1, "and made nothing more");

	pam_checks();
	spec_checks();
	other_node_checks();
	return tap_done();
}
