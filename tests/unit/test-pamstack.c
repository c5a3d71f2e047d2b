/* Unit tests for the PAM stack reader behind `jobcg check` and `jobcg adopt --pam`: Debian's
 * sshd stack with pam_systemd in common-session, and the documented fix. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jobcg/adopt.h"
#include "tap.h"

static char dir[] = "/tmp/jobcg-pamstack-XXXXXX";

static void put(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
}

/* Debian 12's files, shortened, as pam-auth-update writes them with libpam-systemd. */
static const char *const common_session =
    "# here are the per-package modules (the \"Primary\" block)\n"
    "session\t[default=1]\t\t\tpam_permit.so\n"
    "session\trequisite\t\t\tpam_deny.so\n"
    "session\trequired\t\t\tpam_permit.so\n"
    "session\trequired\tpam_unix.so \n"
    "session\toptional\tpam_systemd.so \n";
static const char *const common_session_ni = "session\t[default=1]\t\t\tpam_permit.so\n"
					     "session\trequisite\t\t\tpam_deny.so\n"
					     "session\trequired\t\t\tpam_permit.so\n"
					     "session\trequired\tpam_unix.so \n";
static const char *const common_account = "account\t[success=1 new_authtok_reqd=done "
					  "default=ignore]\tpam_unix.so \n"
					  "account\trequisite\t\t\tpam_deny.so\n"
					  "account\trequired\t\t\tpam_permit.so\n";

static struct jobcg_pam_scan *scan(const char *service)
{
	struct jobcg_pam_scan *s = NULL;

	if (jobcg_pam_scan(dir, service, &s) < 0)
		return NULL;
	return s;
}

int main(void)
{
	struct jobcg_pam_scan *s;
	char want[512];

	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	put("common-session", common_session);
	put("common-session-noninteractive", common_session_ni);
	put("common-account", common_account);

	put("sshd", "# PAM configuration for the Secure Shell service\n"
		    "@include common-auth\n"
		    "account    required     pam_nologin.so\n"
		    "@include common-account\n"
		    "session [success=ok ignore=ignore module_unknown=ignore default=bad] "
		    "pam_selinux.so close\n"
		    "@include common-session\n"
		    "session    optional     pam_motd.so  motd=/run/motd.dynamic\n");
	s = scan("sshd");
	ok(s != NULL, "Debian's sshd stack is read (a missing common-auth is only noted)");
	snprintf(want, sizeof(want), "%s/common-session:6 (included from %s/sshd:6)", dir, dir);
	is_str(s ? s->pam_systemd : NULL, want,
	       "pam_systemd is found in common-session, with the line that includes it");
	ok(s && !s->adopt_account && !s->adopt_session, "no jobcg adopt in it");
	ok(s && s->notes && s->notes[0] && strstr(s->notes[0], "common-auth"),
	   "the unreadable include is noted");
	jobcg_pam_scan_free(s);

	/* The documented configuration (docs/pam.md). */
	put("sshd", "@include common-auth\n"
		    "account    required     pam_nologin.so\n"
		    "@include common-account\n"
		    "account required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n"
		    "@include common-session-noninteractive\n"
		    "session    optional     pam_motd.so  motd=/run/motd.dynamic\n"
		    "session required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n");
	s = scan("sshd");
	ok(s && !s->pam_systemd, "with common-session-noninteractive pam_systemd does not run");
	snprintf(want, sizeof(want), "%s/sshd:4", dir);
	is_str(s ? s->adopt_account : NULL, want, "the account line running jobcg adopt --pam");
	snprintf(want, sizeof(want), "%s/sshd:7", dir);
	is_str(s ? s->adopt_session : NULL, want, "and the session line");
	jobcg_pam_scan_free(s);

	/* pam_systemd spelled every way PAM accepts it, and the ways it is not there. */
	put("a", "-session optional /lib/x86_64-linux-gnu/security/pam_systemd.so\n");
	s = scan("a");
	ok(s && s->pam_systemd, "-session with a full module path counts");
	jobcg_pam_scan_free(s);
	put("b", "# session optional pam_systemd.so\n"
		 "session optional pam_unix.so # pam_systemd.so\n"
		 "account optional pam_systemd.so\n"
		 "session optional pam_systemd_home.so\n");
	s = scan("b");
	ok(s && !s->pam_systemd,
	   "comments, an account line and pam_systemd_home are not pam_systemd's session");
	jobcg_pam_scan_free(s);
	put("inc", "session include common-session\n");
	s = scan("inc");
	ok(s && s->pam_systemd, "'session include' is followed");
	jobcg_pam_scan_free(s);
	put("sub", "account substack common-session\nsession substack sub2\n");
	put("sub2", "session \\\n  optional pam_systemd.so\n");
	s = scan("sub");
	snprintf(want, sizeof(want), "%s/sub2:1 (included from %s/sub:2)", dir, dir);
	is_str(s ? s->pam_systemd : NULL, want,
	       "only the session lines of a session substack count; a backslash joins lines");
	jobcg_pam_scan_free(s);
	put("loop", "@include loop\n");
	s = scan("loop");
	ok(s && s->notes && strstr(s->notes[0], "nested"), "an include loop ends, noted");
	jobcg_pam_scan_free(s);
	put("exec", "account required pam_exec.so /usr/bin/jobcg --pam adopt\n"
		    "account required pam_exec.so quiet stdout log=/tmp/x /usr/sbin/jobcg -v adopt "
		    "--pam --service sshd\n");
	s = scan("exec");
	snprintf(want, sizeof(want), "%s/exec:2", dir);
	is_str(s ? s->adopt_account : NULL, want,
	       "jobcg adopt --pam after pam_exec's options, not '--pam adopt'");
	jobcg_pam_scan_free(s);
	{
		char fifo[256];

		snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
		mkfifo(fifo, 0600);
		put("usesfifo", "@include fifo\n");
		s = scan("usesfifo");
		ok(s && s->notes && strstr(s->notes[0], "fifo"),
		   "an included FIFO is not waited on, only noted");
		jobcg_pam_scan_free(s);
		unlink(fifo);
	}

	/* pam_env with user_readenv=1 hands a user's ~/.pam_environment to what runs after it. */
	put("sshd",
	    "@include common-auth\n"
	    "account required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n"
	    "session    required     pam_env.so # [1]\n"
	    "session    required     pam_env.so user_readenv=1 envfile=/etc/default/locale\n"
	    "@include common-session-noninteractive\n"
	    "session required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n");
	s = scan("sshd");
	snprintf(want, sizeof(want), "%s/sshd:4", dir);
	is_str(s ? s->user_env : NULL, want,
	       "Debian's pam_env line reading the user's file, before the session line, is found");
	is_str(s ? s->adopt_exe : NULL, "/usr/local/bin/jobcg", "...and the program adopt runs");
	jobcg_pam_scan_free(s);
	put("env", "auth optional pam_env.so user_readenv=1\n");
	s = scan("env");
	ok(s && s->user_env, "an auth line counts (pam_env sets the environment at setcred)");
	ok(s && !s->adopt_exe, "no adopt line, no program");
	jobcg_pam_scan_free(s);
	put("env", "session required pam_env.so user_readenv=1 user_readenv=0\n"
		   "session required pam_env.so readenv=1 envfile=/etc/default/locale\n"
		   "account required pam_env.so user_readenv=1\n"
		   "session required pam_exec.so /usr/sbin/jobcg adopt --pam\n"
		   "session required pam_env.so user_readenv=1\n");
	s = scan("env");
	ok(s && !s->user_env,
	   "not: user_readenv=0 last, readenv=1 (the system's files), an account line, a line "
	   "after the session line");
	jobcg_pam_scan_free(s);

	s = NULL;
	is_int(jobcg_pam_scan(dir, "nosuch", &s), -ENOENT, "a missing service file is an error");
	ok(strstr(jobcg_last_error()->message, "nosuch") != NULL, "...naming the file");
	is_int(jobcg_pam_scan(dir, "../etc", &s), -EINVAL, "a service name with a '/' is refused");

	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			tap_diag("could not remove %s", dir);
	}
	return tap_done();
}
