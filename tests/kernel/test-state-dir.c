/*
 * Kernel test: the state directory (node lock, accounting log) is made without following links
 * and refused, before anything is written in it, when another user could write to it or owns
 * it: such a user could hold the node lock forever or swap the log for a link.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "jobcg/acctlog.h"
#include "jobcg/context.h"
#include "kcli.h"

/* Take and drop the node lock with JOBCG_STATE_DIR=@dir; the error record tells why not. */
static int lock_in(const char *dir)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int r;

	setenv("JOBCG_STATE_DIR", dir, 1);
	jobcg_error_clear();
	r = jobcg_config_load(NULL, NULL, 0, &conf);
	if (r == 0)
		r = jobcg_ctx_open(conf, 0, &ctx);
	if (r == 0) {
		r = jobcg_ctx_lock(ctx);
		if (r == 0)
			jobcg_ctx_unlock(ctx);
	}
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return r;
}

static void lock_bad(const char *dir, int want, const char *needle, const char *what)
{
	char lock[PATH_MAX + 16];
	int r = lock_in(dir);

	snprintf(lock, sizeof(lock), "%s/jobcg.lock", dir);
	ok(r == want && strstr(jobcg_last_error()->message, needle) && access(lock, F_OK) < 0,
	   "%s: the lock is refused (%d '%s') and no lock file made: got %d '%s'", what, want,
	   needle, r, jobcg_last_error()->message);
}

int main(void)
{
	char d[PATH_MAX], t[PATH_MAX + 32];
	const char *tmp;
	struct stat st;
	struct jobcg_acct_record rec = {.kind = JOBCG_ACCT_JOB, .job_id = (char *)"7"};

	kcli_setup("statedir", "jobcg");
	tmp = ktest_tmpdir();

	snprintf(d, sizeof(d), "%s/new/state", tmp);
	int r = lock_in(d);
	ok(r == 0, "a missing state directory is made (%d %s)", r, jobcg_last_error()->message);
	ok(stat(d, &st) == 0 && (st.st_mode & 07777) == 0755 && st.st_uid == geteuid(),
	   "...mode 0755, ours");
	snprintf(t, sizeof(t), "%s/jobcg.lock", d);
	unlink(t);

	chmod(d, 0777);
	lock_bad(d, -EPERM, "writable by its group or by others", "a world-writable state dir");
	chmod(d, 01777);
	lock_bad(d, -EPERM, "(mode 1777)", "a sticky world-writable state dir");
	chmod(d, 0775);
	lock_bad(d, -EPERM, "(mode 0775)", "a group-writable state dir");
	chmod(d, 0755);
	if (chown(d, 4242, 4242) == 0)
		lock_bad(d, -EPERM, "owned by uid 4242", "a state dir of another user");
	else
		tap_skip("cannot chown: %s", strerror(errno));
	if (chown(d, 0, 0) < 0)
		tap_diag("chown back: %s", strerror(errno));

	/* A directory on the way that anyone may write: the state dir below could be swapped. */
	snprintf(t, sizeof(t), "%s/new", tmp);
	chmod(t, 0777);
	snprintf(d, sizeof(d), "%s/new/other", tmp);
	lock_bad(d, -EPERM, "/new) is writable", "an open directory on the way");
	ok(access(d, F_OK) < 0, "...and the state dir was not made below it");
	chmod(t, 0755);

	/* The lock file a link (made before by someone who could): never followed. */
	snprintf(d, sizeof(d), "%s/new/state", tmp);
	snprintf(t, sizeof(t), "%s/new/target", tmp);
	char lock[PATH_MAX + 16];
	snprintf(lock, sizeof(lock), "%s/jobcg.lock", d);
	unlink(lock);
	if (symlink(t, lock) < 0)
		return printf("Bail out! symlink: %s\n", strerror(errno)), 1;
	ok(lock_in(d) == -ELOOP && access(t, F_OK) < 0,
	   "a lock file that is a link is not followed (%s)", jobcg_last_error()->message);
	unlink(lock);

	/* The accounting log is written under the same rules. */
	snprintf(t, sizeof(t), "%s/open", tmp);
	mkdir(t, 0700);
	chmod(t, 0777);
	snprintf(t, sizeof(t), "%s/open/acct.jsonl", tmp);
	jobcg_error_clear();
	ok(jobcg_acctlog_write(t, &rec, 0) == -EPERM && access(t, F_OK) < 0 &&
	       strstr(jobcg_last_error()->message, "writable"),
	   "no accounting record in a world-writable state dir (%s)", jobcg_last_error()->message);
	snprintf(t, sizeof(t), "%s/open", tmp);
	rmdir(t);
	snprintf(t, sizeof(t), "rm -rf '%s/new'", tmp);
	if (system(t) != 0)
		tap_diag("cannot remove %s/new", tmp);
	return tap_done();
}
