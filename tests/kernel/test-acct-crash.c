/* Kernel test: a removal killed between its rmdir and its accounting record loses no record and
 * writes none twice (gc writes what it set aside), and a step a release records says the signal
 * that ended it. Skipped without -Dtest_hooks=true (its crash points). */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "jobcg/acctlog.h"
#include "jobcg/config.h"
#include "kcli.h"

static const char *root;
static char pause_dir[PATH_MAX];
static char *log_path;

struct count {
	const char *job, *step; /* step NULL: the job's own record */
	unsigned n;
	/* of the last one */
	enum jobcg_acct_state state;
	int exit_code, exit_signal;
	uint64_t end_usec;
};

static int count_fn(const struct jobcg_acct_record *r, void *u)
{
	struct count *c = u;

	if ((c->step == NULL) != (r->step_id == NULL) || (c->step && strcmp(c->step, r->step_id)))
		return 0;
	c->n++;
	c->state = r->state;
	c->exit_code = r->exit_code;
	c->exit_signal = r->exit_signal;
	c->end_usec = r->end_usec;
	return 0;
}

static struct count records(const char *job, const char *step)
{
	struct count c = {.job = job, .step = step};

	if (jobcg_acctlog_read(log_path, job, count_fn, &c) < 0)
		tap_diag("cannot read %s", log_path);
	return c;
}

static bool has_xattr(const char *dir, const char *name)
{
	return getxattr(dir, name, NULL, 0) >= 0;
}

static bool pending_file(const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/pending/%s", ktest_tmpdir(), name);
	return access(p, F_OK) == 0;
}

/* A pause point used again: its files of the last time would let it through at once. */
static void pause_reset(const char *point)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s.reached", pause_dir, point);
	unlink(p);
	snprintf(p, sizeof(p), "%s/%s.go", pause_dir, point);
	unlink(p);
}

static void gc_writes(unsigned n, const char *what)
{
	char *out = NULL, want[64];

	ok(kcli(&out, "gc", NULL) == 0, "gc (%s)", what);
	snprintf(want, sizeof(want), "; %u pending accounting record(s) written", n);
	ok(out && (n ? strstr(out, want) != NULL : strstr(out, "pending") == NULL),
	   "gc says it wrote %u pending record(s): %s", n, out ? out : "");
	free(out);
}

/* `jobcg run --job` killed after its step's rmdir, before its record: gc writes that record, with
 * the exit status its runner saw, once. */
static void test_step_end(void)
{
	char *args[] = {"run", "--job", "21", "--", "sh", "-c", "exit 3", NULL};
	char jdir[PATH_MAX];
	struct count c;

	snprintf(jdir, sizeof(jdir), "%s/job_21", root);
	is_int(kcli(NULL, "alloc", "21", NULL), 0, "alloc 21");
	is_int(kcli_crash_at("step-end-before-record", args), 128 + SIGKILL,
	       "run --job 21 killed after its step's rmdir");
	ok(!kcli_exists("%s/step_0", jdir), "the step is gone");
	ok(has_xattr(jdir, "trusted.jobcg.pending.0"), "its record waits on the job's directory");
	is_int(records("21", "0").n, 0, "21.0 has no record yet");
	gc_writes(1, "step 21.0 pending");
	c = records("21", "0");
	ok(c.n == 1 && c.state == JOBCG_ACCT_FAILED && c.exit_code == 3,
	   "21.0 has its record, FAILED with exit code 3, as its runner saw it (%u, %d)", c.n,
	   c.exit_code);
	ok(!has_xattr(jdir, "trusted.jobcg.pending.0"), "the pending entry is gone");
	gc_writes(0, "again");
	is_int(records("21", "0").n, 1, "still one record of 21.0");
	is_int(kcli(NULL, "release", "21", NULL), 0, "release 21");
	is_int(records("21", NULL).n, 1, "21 has one record");
}

/* The same killed after the append, before the entry's removal: gc finds the line in the log. */
static void test_after_append(void)
{
	char *args[] = {"run", "--job", "22", "--", "true", NULL};
	char jdir[PATH_MAX];

	snprintf(jdir, sizeof(jdir), "%s/job_22", root);
	is_int(kcli(NULL, "alloc", "22", NULL), 0, "alloc 22");
	is_int(kcli_crash_at("record-before-pending-drop", args), 128 + SIGKILL,
	       "run --job 22 killed after its record, before removing its pending entry");
	is_int(records("22", "0").n, 1, "22.0 has its record");
	ok(has_xattr(jdir, "trusted.jobcg.pending.0"), "and its pending entry is still there");
	gc_writes(0, "22.0 written already");
	is_int(records("22", "0").n, 1, "22.0 still has one record");
	ok(!has_xattr(jdir, "trusted.jobcg.pending.0"), "the pending entry is gone");

	{
		char *rel[] = {"release", "22", NULL};

		is_int(kcli_crash_at("record-before-pending-drop", rel), 128 + SIGKILL,
		       "release 22 killed after its record");
	}
	ok(pending_file("22"), "the job's pending entry is left in the state directory");
	gc_writes(0, "22 written already");
	is_int(records("22", NULL).n, 1, "22 has one record");
	ok(!pending_file("22"), "its pending entry is gone");
}

/*
 * A release killed after the rmdir, with a step its runner has not ended yet: gc writes the
 * job's record and the step's, which says SIGKILL (the removal's, which ended it), and the job's
 * record ends no earlier than the step's.
 */
static void test_release(void)
{
	char *run[] = {"run", "--job", "23", "--", "sleep", "60", NULL};
	char *rel[] = {"release", "23", "--grace", "0", NULL};
	char step[PATH_MAX];
	struct count c, j;
	int efd = -1, i;
	pid_t runner;

	snprintf(step, sizeof(step), "%s/job_23/step_0", root);
	is_int(kcli(NULL, "alloc", "23", NULL), 0, "alloc 23");
	runner = kcli_start_paused(pause_dir, "step-end-before-lock", run, &efd);
	for (i = 0; i < 500 && !kcli_exists("%s/user/task_0", step); i++)
		usleep(10000);
	usleep(100000);
	is_int(kcli_crash_at("remove-before-record", rel), 128 + SIGKILL,
	       "release 23 killed after its rmdir");
	ok(!kcli_exists("%s/job_23", root), "the job is gone");
	ok(pending_file("23") && pending_file("23.0"), "its record and its step's wait in files");
	is_int(records("23", NULL).n + records("23", "0").n, 0, "neither is written yet");
	gc_writes(2, "23 and 23.0 pending");
	c = records("23", "0");
	j = records("23", NULL);
	ok(c.n == 1 && c.state == JOBCG_ACCT_CANCELLED && c.exit_signal == SIGKILL,
	   "23.0 has one record, CANCELLED by SIGKILL (%u, signal %d)", c.n, c.exit_signal);
	ok(j.n == 1 && j.state == JOBCG_ACCT_CANCELLED, "23 has one record, CANCELLED");
	ok(j.end_usec >= c.end_usec, "the job's record ends no earlier than its step's");
	ok(!pending_file("23") && !pending_file("23.0"), "the pending entries are gone");
	kcli_pause_go(pause_dir, "step-end-before-lock");
	is_int(kcli_finish(runner, efd, NULL), 128 + SIGKILL, "the runner exits 137");
	is_int(records("23", "0").n, 1, "its runner wrote no second record");
	pause_reset("step-end-before-lock");
}

/* A release whose SIGTERM ends the step during the grace period records SIGTERM for it. */
static void test_grace_signal(void)
{
	char *run[] = {"run", "--job", "24", "--", "sleep", "60", NULL};
	char step[PATH_MAX];
	struct count c, j;
	int efd = -1, i;
	pid_t runner;

	snprintf(step, sizeof(step), "%s/job_24/step_0", root);
	is_int(kcli(NULL, "alloc", "24", NULL), 0, "alloc 24");
	runner = kcli_start_paused(pause_dir, "step-end-before-lock", run, &efd);
	for (i = 0; i < 500 && !kcli_exists("%s/user/task_0", step); i++)
		usleep(10000);
	usleep(100000);
	is_int(kcli(NULL, "release", "24", "--grace", "5000", NULL), 0, "release 24");
	c = records("24", "0");
	j = records("24", NULL);
	ok(c.n == 1 && c.state == JOBCG_ACCT_CANCELLED && c.exit_signal == SIGTERM,
	   "24.0 has one record, CANCELLED by SIGTERM, the signal that ended it (%u, signal %d)",
	   c.n, c.exit_signal);
	ok(j.n == 1 && j.end_usec >= c.end_usec,
	   "the job's record ends no earlier than its step's");
	kcli_pause_go(pause_dir, "step-end-before-lock");
	is_int(kcli_finish(runner, efd, NULL), 128 + SIGTERM, "the runner exits 143");
	is_int(records("24", "0").n, 1, "its runner wrote no second record");
	pause_reset("step-end-before-lock");
}

/* Killed before the rmdir: the entries are stale (gc's own removal records the job), and an
 * entry of an earlier job of the same id is written before the next one is set aside. */
static void test_stale_and_reused(void)
{
	char *rel[] = {"release", "25", NULL};

	is_int(kcli(NULL, "alloc", "25", NULL), 0, "alloc 25");
	is_int(kcli_crash_at("remove-before-rmdir", rel), 128 + SIGKILL,
	       "release 25 killed before its rmdir");
	ok(pending_file("25"), "its record was set aside");
	gc_writes(0, "25 still there");
	is_int(records("25", NULL).n, 1, "gc's removal wrote the one record of 25");
	ok(!pending_file("25"), "the stale entry is gone");

	is_int(kcli(NULL, "alloc", "25", NULL), 0, "alloc 25 again");
	is_int(kcli_crash_at("remove-before-record", rel), 128 + SIGKILL,
	       "release 25 killed after its rmdir");
	is_int(kcli(NULL, "alloc", "25", NULL), 0, "alloc 25 a third time, before any gc");
	is_int(kcli(NULL, "release", "25", NULL), 0, "release 25");
	is_int(records("25", NULL).n, 3, "each of the three jobs 25 has its record");
	ok(!pending_file("25"), "no entry is left");
}

/* An ephemeral run killed after each rmdir: gc writes the step's record and the job's. */
static void test_ephemeral(void)
{
	char idfile[PATH_MAX], sh[PATH_MAX + 64], id[32] = "";
	char *args[] = {"run", "--", "sh", "-c", sh, NULL};
	struct count c, j;
	FILE *f;

	snprintf(idfile, sizeof(idfile), "%s/eph-id", ktest_tmpdir());
	snprintf(sh, sizeof(sh), "echo $JOBCG_JOB_ID > %s", idfile);
	is_int(kcli_crash_at("remove-before-record", args), 128 + SIGKILL,
	       "an ephemeral run killed after its job's rmdir");
	if ((f = fopen(idfile, "re"))) {
		if (!fgets(id, sizeof(id), f))
			id[0] = '\0';
		fclose(f);
	}
	id[strcspn(id, "\n")] = '\0';
	ok(*id && !kcli_exists("%s/job_%s", root, id), "its job %s is gone", id);
	is_int(records(id, "0").n, 1, "its step's record was written");
	is_int(records(id, NULL).n, 0, "its job's not");
	gc_writes(1, "the ephemeral job");
	c = records(id, "0");
	j = records(id, NULL);
	ok(j.n == 1 && j.state == JOBCG_ACCT_COMPLETED,
	   "the job has one record, COMPLETED as its run meant it (%u, %s)", j.n,
	   jobcg_acct_state_name(j.state));
	is_int(c.n, 1, "the step still one");
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

static bool plant_len(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	bool good = fd >= 0 && write(fd, text, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return good;
}

static bool plant(const char *path, const char *text)
{
	return plant_len(path, text, strlen(text));
}

static bool log_has_byte(int c)
{
	FILE *f = fopen(log_path, "re");
	bool found = false;
	int x;

	while (f && (x = getc(f)) != EOF)
		found |= x == c;
	if (f)
		fclose(f);
	return found;
}

/* A record line as jobcg writes it, for job @job, with @reason as it is (raw bytes included). */
#define REC(job, reason)                                                                           \
	"{\"type\":\"job\",\"job\":" job ",\"uid\":0,\"gid\":0,\"start_usec\":1,\"end_usec\":2,"   \
	"\"exit_code\":0,\"exit_signal\":0,\"state\":\"COMPLETED\",\"cpu_usec\":null,"             \
	"\"user_usec\":null,\"system_usec\":null,\"mem_peak\":null,\"oom_kills\":null,"            \
	"\"ntasks\":0,\"reason\":\"" reason "\"}\n"

/*
 * Entries that are no pending record: cut short (a full disk as it was written), without a
 * header, a line that is not JSON, a record line with a raw escape byte. None reaches the log
 * (the reader would skip or print them); each is moved aside as .bad-NAME for a human, not
 * deleted, and gc says so (exit 1) once. A hard link into pending/ is left alone. The owed
 * entry next to them is still written.
 */
static void test_bad_entries(void)
{
	char *rel[] = {"release", "29", NULL}, *gc[] = {"gc", NULL};
	char p[PATH_MAX], aside[PATH_MAX + 8], outside[PATH_MAX];
	static const struct {
		const char *name, *text;
	} bad[] = {
	    {"99", "1 0 0 /nonexistent/job_99\n{\"type\":\"job\",\"job\":99"},
	    {"98", "garbage"},
	    {"97", "1 0 0 /nonexistent/job_97\nNOT JSON \033[31mred\n"},
	    {"96", "1 0 0 /nonexistent/job_96\n" REC("96", "\033[31mred")},
	};
	char *out = NULL, *err = NULL;
	off_t before;
	int rc;

	is_int(kcli(NULL, "alloc", "29", NULL), 0, "alloc 29");
	is_int(kcli_crash_at("remove-before-record", rel), 128 + SIGKILL,
	       "release 29 killed after its rmdir: its record waits in pending/");
	before = file_size(log_path);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(p, sizeof(p), "%s/pending/%s", ktest_tmpdir(), bad[i].name);
		ok(plant(p, bad[i].text), "pending/%s: no pending record", bad[i].name);
	}
	snprintf(outside, sizeof(outside), "%s/not-pending", ktest_tmpdir());
	snprintf(p, sizeof(p), "%s/pending/95", ktest_tmpdir());
	ok(plant(outside, "1 0 0 /nonexistent/job_95\n" REC("95", "linked")) &&
	       link(outside, p) == 0,
	   "pending/95: a valid entry, a hard link to a file outside pending/");
	rc = kcli_run(gc, &out, &err);
	ok(rc == 1 && err && strstr(err, "moved aside as") && strstr(err, "more than one name"),
	   "gc fails, saying what it moved aside and what it left: %s", err ? err : "");
	is_int(records("29", NULL).n, 1, "the owed record of 29 is written");
	ok(!pending_file("29"), "and its entry removed");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(aside, sizeof(aside), ".bad-%s", bad[i].name);
		ok(!pending_file(bad[i].name) && pending_file(aside), "pending/%s moved to %s",
		   bad[i].name, aside);
		ok(records(bad[i].name, NULL).n == 0, "no record of %s in the log", bad[i].name);
	}
	ok(!log_has_byte('\033'), "no raw escape byte in the log");
	ok(pending_file("95") && records("95", NULL).n == 0,
	   "the hard link is left alone, not written");
	ok(file_size(log_path) > before, "the log grew (29's record)");
	free(out);
	free(err);
	out = err = NULL;
	ok(unlink(p) == 0 && unlink(outside) == 0, "the link removed by hand");
	is_int(kcli_run(gc, NULL, NULL), 0, "gc succeeds: what was moved aside is not seen again");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(p, sizeof(p), "%s/pending/.bad-%s", ktest_tmpdir(), bad[i].name);
		unlink(p);
	}
}

static bool file_is(const char *path, const char *want, size_t len)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)len && memcmp(buf, want, len) == 0;
}

/*
 * Entries on a live job's directory that are no pending record (cut short, garbage with control
 * and NUL bytes): gc moves each to pending/.bad-JOB.STEP (".bad-JOB.STEP~2" when a human left
 * one of that name), byte for byte, takes it off the job and fails that once; the next gc
 * succeeds. A valid entry that the log cannot take now stays on the job until it can; a bad one
 * that pending/ cannot take (pending/ a regular file) stays too.
 */
static void test_bad_on_job(void)
{
	static const char cut[] = "1 0 0 /nonexistent/job_31/step_7\n{\"type\":\"job\",\"job\":31";
	static const char junk[] = "junk\001\033[31m\0after the NUL";
	char *run[] = {"run", "--job", "31", "--", "true", NULL}, *gc[] = {"gc", NULL};
	char jdir[PATH_MAX], pdir[PATH_MAX], lock[PATH_MAX + 8], p[PATH_MAX + 32];
	char want[PATH_MAX + 64];
	char *out = NULL, *err = NULL;
	int rc, fd;

	snprintf(jdir, sizeof(jdir), "%s/job_31", root);
	snprintf(pdir, sizeof(pdir), "%s/pending", ktest_tmpdir());
	snprintf(lock, sizeof(lock), "%s.lock", log_path);
	is_int(kcli(NULL, "alloc", "31", NULL), 0, "alloc 31");
	ok(setxattr(jdir, "trusted.jobcg.pending.7", cut, strlen(cut), XATTR_CREATE) == 0 &&
	       setxattr(jdir, "trusted.jobcg.pending.8", junk, sizeof(junk) - 1, XATTR_CREATE) == 0,
	   "job 31 has entries 7 (cut short) and 8 (garbage) that are no record");
	snprintf(p, sizeof(p), "%s/.bad-31.8", pdir);
	ok(plant(p, "an earlier one"), "pending/.bad-31.8 left by a human");
	rc = kcli_run(gc, &out, &err);
	snprintf(want, sizeof(want), "moved aside from job 31's directory as %s/.bad-31.7", pdir);
	ok(rc == 1 && err && strstr(err, "step 31.7: not a pending accounting record") &&
	       strstr(err, want),
	   "gc fails, naming the step and where its entry went: %s", err ? err : "");
	snprintf(want, sizeof(want), "as %s/.bad-31.8~2", pdir);
	ok(err && strstr(err, "step 31.8: not a pending accounting record") && strstr(err, want),
	   "and the other one, beside the human's");
	snprintf(p, sizeof(p), "%s/.bad-31.7", pdir);
	ok(file_is(p, cut, strlen(cut)), ".bad-31.7 holds the entry as it was");
	snprintf(p, sizeof(p), "%s/.bad-31.8~2", pdir);
	ok(file_is(p, junk, sizeof(junk) - 1), ".bad-31.8~2 holds the entry, NUL byte and all");
	snprintf(p, sizeof(p), "%s/.bad-31.8", pdir);
	ok(file_is(p, "an earlier one", 14), "the human's .bad-31.8 is untouched");
	ok(!has_xattr(jdir, "trusted.jobcg.pending.7") &&
	       !has_xattr(jdir, "trusted.jobcg.pending.8"),
	   "both are off the job");
	ok(records("31", "7").n == 0 && !log_has_byte('\033'), "nothing of them in the log");
	free(out);
	free(err);
	out = err = NULL;
	is_int(kcli_run(gc, NULL, NULL), 0, "the next gc succeeds");
	ok(kcli_exists("%s", jdir), "job 31 is still there");

	/* a valid entry, the log refusing it for now */
	is_int(kcli_crash_at("step-end-before-record", run), 128 + SIGKILL,
	       "run --job 31 killed after its step's rmdir: its record waits on the job");
	ok(chmod(lock, 0644) == 0, "the log's lock made unusable");
	rc = kcli_run(gc, &out, &err);
	ok(rc == 1 && err && strstr(err, "step 31.0: pending accounting record not written") &&
	       !strstr(err, ".bad-31.0"),
	   "gc fails, the record not written: %s", err ? err : "");
	ok(has_xattr(jdir, "trusted.jobcg.pending.0"), "its entry stays on the job");
	snprintf(p, sizeof(p), "%s/.bad-31.0", pdir);
	ok(access(p, F_OK) < 0, "and is not moved aside");
	free(out);
	free(err);
	out = err = NULL;
	ok(chmod(lock, 0600) == 0, "the lock usable again");
	gc_writes(1, "31.0, the log writable again");
	ok(!has_xattr(jdir, "trusted.jobcg.pending.0") && records("31", "0").n == 1,
	   "31.0's record written once, its entry gone");

	/* a bad entry where pending/ takes nothing */
	ok(setxattr(jdir, "trusted.jobcg.pending.9", "garbage", 7, XATTR_CREATE) == 0,
	   "job 31 has an entry 9 that is no record");
	snprintf(p, sizeof(p), "%s.moved", pdir);
	ok(rename(pdir, p) == 0, "pending/ moved away");
	fd = open(pdir, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ok(fd >= 0, "a regular file where pending/ should be");
	if (fd >= 0)
		close(fd);
	rc = kcli_run(gc, &out, &err);
	ok(rc == 1 && err && strstr(err, "step 31.9: pending accounting record not written") &&
	       strstr(err, "not moved aside either"),
	   "gc fails, saying the entry could not be moved aside: %s", err ? err : "");
	ok(has_xattr(jdir, "trusted.jobcg.pending.9"), "it stays on the job");
	free(out);
	free(err);
	out = err = NULL;
	ok(unlink(pdir) == 0 && rename(p, pdir) == 0, "pending/ put back by hand");
	is_int(kcli_run(gc, NULL, NULL), 1, "gc moves it aside now, and fails");
	ok(!has_xattr(jdir, "trusted.jobcg.pending.9"), "it is off the job");
	is_int(kcli_run(gc, NULL, NULL), 0, "and the next gc succeeds");

	/* a copy made by a gc that could not take the entry off the job: not copied again */
	ok(setxattr(jdir, "trusted.jobcg.pending.10", junk, sizeof(junk) - 1, XATTR_CREATE) == 0,
	   "job 31 has an entry 10 that is no record");
	snprintf(p, sizeof(p), "%s/.bad-31.10", pdir);
	ok(plant_len(p, junk, sizeof(junk) - 1), "pending/.bad-31.10 already holds its bytes");
	rc = kcli_run(gc, &out, &err);
	snprintf(want, sizeof(want), "kept already as %s/.bad-31.10", pdir);
	ok(rc == 1 && err && strstr(err, want), "gc fails, naming the copy there: %s",
	   err ? err : "");
	snprintf(p, sizeof(p), "%s/.bad-31.10~2", pdir);
	ok(access(p, F_OK) < 0, "no second copy");
	ok(!has_xattr(jdir, "trusted.jobcg.pending.10"), "the entry is off the job");
	free(out);
	free(err);
	out = err = NULL;
	is_int(kcli_run(gc, NULL, NULL), 0, "and the next gc succeeds");
	for (const char *const *n = (const char *const[]){".bad-31.7", ".bad-31.8", ".bad-31.8~2",
							  ".bad-31.9", ".bad-31.10", NULL};
	     *n; n++) {
		snprintf(p, sizeof(p), "%s/%s", pdir, *n);
		unlink(p);
	}

	/* the job removed with such an entry on it: set aside at once, every byte */
	ok(setxattr(jdir, "trusted.jobcg.pending.11", junk, sizeof(junk) - 1, XATTR_CREATE) == 0,
	   "job 31 has an entry 11 that is no record");
	rc = kcli_run((char *[]){"release", "31", NULL}, &out, &err);
	snprintf(want, sizeof(want), "as %s/.bad-31.11", pdir);
	ok(rc == 0 && err && strstr(err, want), "release 31 sets it aside: %s", err ? err : "");
	snprintf(p, sizeof(p), "%s/.bad-31.11", pdir);
	ok(file_is(p, junk, sizeof(junk) - 1), ".bad-31.11 holds the entry, NUL byte and all");
	snprintf(p, sizeof(p), "%s/31.11", pdir);
	ok(access(p, F_OK) < 0, "nothing parked for gc under its plain name");
	is_int(kcli_run(gc, NULL, NULL), 0, "the next gc succeeds");
	free(out);
	free(err);
	snprintf(p, sizeof(p), "%s/.bad-31.11", pdir);
	unlink(p);
}

/* gc of a state directory where pending/ holds what is no record (or is no directory): each such
 * path named, left alone, everything else cleaned (an owed record written, a stray step
 * removed), and gc fails until it is clean. */
static void test_pending_not_ours(void)
{
	char *rel[] = {"release", "26", NULL}, *gc[] = {"gc", NULL};
	char pdir[PATH_MAX], dent[PATH_MAX + 8], lent[PATH_MAX + 8], want[PATH_MAX + 64];
	char *out = NULL, *err = NULL;
	int rc, fd;

	snprintf(pdir, sizeof(pdir), "%s/pending", ktest_tmpdir());
	snprintf(dent, sizeof(dent), "%s/98", pdir);
	snprintf(lent, sizeof(lent), "%s/97", pdir);
	is_int(kcli(NULL, "alloc", "26", NULL), 0, "alloc 26");
	is_int(kcli_crash_at("remove-before-record", rel), 128 + SIGKILL,
	       "release 26 killed after its rmdir: its record waits in pending/");
	ok(mkdir(dent, 0700) == 0 && symlink("/etc/hostname", lent) == 0,
	   "pending/98 a directory, pending/97 a symbolic link");
	is_int(kcli(NULL, "alloc", "28", NULL), 0, "alloc 28");
	ok(mkdir(strcat(strcpy(want, root), "/job_28/step_5"), 0755) == 0,
	   "a stray step 28.5 (left half made)");
	rc = kcli_run(gc, &out, &err);
	snprintf(want, sizeof(want), "%s: not a pending accounting record of jobcg's (a directory)",
		 dent);
	ok(rc == 1 && err && strstr(err, want) && strstr(err, lent),
	   "gc fails, naming both entries: %s", err ? err : "");
	ok(access(dent, F_OK) == 0 && faccessat(AT_FDCWD, lent, F_OK, AT_SYMLINK_NOFOLLOW) == 0,
	   "and leaves them alone");
	is_int(records("26", NULL).n, 1, "but writes the record of 26 that was owed");
	ok(!pending_file("26"), "and removes its entry");
	ok(!kcli_exists("%s/job_28/step_5", root), "and removes the stray step");
	free(out);
	free(err);
	out = err = NULL;
	ok(rmdir(dent) == 0 && unlink(lent) == 0, "removed by hand");
	rc = kcli_run(gc, &out, &err);
	is_int(rc, 0, "gc succeeds");
	free(out);
	free(err);
	out = err = NULL;

	/* pending/ a regular file */
	ok(rmdir(pdir) == 0, "pending/ removed");
	fd = open(pdir, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ok(fd >= 0, "a regular file where pending/ should be");
	if (fd >= 0)
		close(fd);
	ok(mkdir(strcat(strcpy(want, root), "/job_28/step_6"), 0755) == 0, "a stray step 28.6");
	rc = kcli_run(gc, &out, &err);
	snprintf(want, sizeof(want), "%s is not a directory", pdir);
	ok(rc == 1 && err && strstr(err, want), "gc fails, naming it: %s", err ? err : "");
	ok(!kcli_exists("%s/job_28/step_6", root), "and still removes the stray step");
	free(out);
	free(err);
	is_int(kcli(NULL, "release", "28", NULL), 0, "release 28 (its record not set aside)");
	is_int(records("28", NULL).n, 1, "and written");
	ok(unlink(pdir) == 0, "the file removed by hand");
	is_int(kcli(NULL, "gc", NULL), 0, "gc succeeds");
}

int main(void)
{
	struct jobcg_config *conf = NULL;

	tap_require_hooks("jobcg is killed at its crash points: a build without test hooks");
	root = kcli_setup("acct-crash", "jobcg");
	snprintf(pause_dir, sizeof(pause_dir), "%s/pause", ktest_tmpdir());
	if (mkdir(pause_dir, 0700) < 0 && errno != EEXIST) {
		printf("Bail out! cannot make %s\n", pause_dir);
		return 1;
	}
	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 ||
	    jobcg_acctlog_path(conf, &log_path) < 0) {
		printf("Bail out! no accounting log path\n");
		return 1;
	}
	jobcg_config_free(conf);
	test_step_end();
	test_after_append();
	test_release();
	test_grace_signal();
	test_stale_and_reused();
	test_ephemeral();
	test_bad_entries();
	test_bad_on_job();
	test_pending_not_ours();
	(void)kcli(NULL, "gc", NULL);
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	free(log_path);
	return tap_done();
}
