/* jobcg: accounting from cgroup files; a file that is missing leaves its items unavailable. */
#include <sys/wait.h>

#include "acctlog_internal.h"
#include "cgroupfs.h"
#include "context_internal.h"
#include "jobcg/acct.h"
#include "jobcg/acctlog.h"
#include "testhook.h"
#include "tree.h"
#include "log.h"
#include "util.h"

static const char *const item_names[_JOBCG_ACCT_MAX] = {
    [JOBCG_ACCT_CPU_USAGE_USEC] = "cpu_usage_usec",
    [JOBCG_ACCT_CPU_USER_USEC] = "cpu_user_usec",
    [JOBCG_ACCT_CPU_SYSTEM_USEC] = "cpu_system_usec",
    [JOBCG_ACCT_MEM_CURRENT] = "mem_current",
    [JOBCG_ACCT_MEM_PEAK] = "mem_peak",
    [JOBCG_ACCT_MEM_ANON] = "mem_anon",
    [JOBCG_ACCT_MEM_FILE] = "mem_file",
    [JOBCG_ACCT_PGMAJFAULT] = "pgmajfault",
    [JOBCG_ACCT_OOM] = "oom",
    [JOBCG_ACCT_OOM_KILL] = "oom_kill",
    [JOBCG_ACCT_PIDS_CURRENT] = "pids_current",
    [JOBCG_ACCT_PIDS_PEAK] = "pids_peak",
};

JOBCG_EXPORT const char *jobcg_acct_item_name(enum jobcg_acct_item i)
{
	return (unsigned)i < _JOBCG_ACCT_MAX ? item_names[i] : NULL;
}

struct keyed_item {
	const char *key;
	enum jobcg_acct_item item;
};

static const struct keyed_item cpu_stat[] = {
    {"usage_usec", JOBCG_ACCT_CPU_USAGE_USEC},
    {"user_usec", JOBCG_ACCT_CPU_USER_USEC},
    {"system_usec", JOBCG_ACCT_CPU_SYSTEM_USEC},
    {NULL, 0},
};
static const struct keyed_item memory_stat[] = {
    {"anon", JOBCG_ACCT_MEM_ANON},
    {"file", JOBCG_ACCT_MEM_FILE},
    {"pgmajfault", JOBCG_ACCT_PGMAJFAULT},
    {NULL, 0},
};
static const struct keyed_item memory_events[] = {
    {"oom", JOBCG_ACCT_OOM},
    {"oom_kill", JOBCG_ACCT_OOM_KILL},
    {NULL, 0},
};

static const struct acct_file {
	const char *name;
	const struct keyed_item *keys; /* NULL: a single-value file */
	enum jobcg_acct_item item;     /* for single-value files */
} acct_files[] = {
    {"cpu.stat", cpu_stat, 0},
    {"memory.current", NULL, JOBCG_ACCT_MEM_CURRENT},
    {"memory.peak", NULL, JOBCG_ACCT_MEM_PEAK},
    {"memory.stat", memory_stat, 0},
    {"memory.events", memory_events, 0},
    {"pids.current", NULL, JOBCG_ACCT_PIDS_CURRENT},
    {"pids.peak", NULL, JOBCG_ACCT_PIDS_PEAK},
};

/* Check every line is "key number" so that a garbled file is reported, not half read. */
static int check_keyed(const char *file, const char *text)
{
	unsigned line = 1;

	for (const char *p = text; *p; line++) {
		const char *eol = strchr(p, '\n'), *sp;
		size_t len = eol ? (size_t)(eol - p) : strlen(p);

		if (len > 0) {
			sp = memchr(p, ' ', len);
			if (!sp || sp == p || sp + 1 >= p + len)
				return error_set_at(-EINVAL, file, line, 0, "expected 'key value'");
			for (const char *q = sp + 1; q < p + len; q++)
				if (*q < '0' || *q > '9')
					return error_set_at(-EINVAL, file, line,
							    (unsigned)(q - p) + 1,
							    "expected a number");
		}
		if (!eol)
			break;
		p = eol + 1;
	}
	return 0;
}

JOBCG_EXPORT int jobcg_acct_parse(const char *file, const char *text, struct jobcg_acct *acct)
{
	return_if_null(text);
	return_if_null(acct);
	for (size_t i = 0; i < ELEMENTSOF(acct_files); i++) {
		const struct acct_file *f = &acct_files[i];

		if (!streq(f->name, file))
			continue;
		if (f->keys) {
			int r = check_keyed(file, text);

			if (r < 0)
				return r;
			for (const struct keyed_item *k = f->keys; k->key; k++) {
				uint64_t v;

				if (cgfs_parse_keyed(text, k->key, &v) == 0) {
					acct->value[k->item] = v;
					acct->have |= 1u << k->item;
				}
			}
		} else {
			_cleanup_free_ char *t = strdup(text);
			char *s, *end;
			unsigned long long v;

			if (!t)
				return -ENOMEM;
			s = strstrip(t);
			if (streq(s, "max"))
				v = UINT64_MAX;
			else {
				errno = 0;
				v = strtoull(s, &end, 10);
				if (errno || end == s || *end || *s < '0' || *s > '9')
					return error_set_at(-EINVAL, file, 1, 1,
							    "expected a number, got '%s'", s);
			}
			acct->value[f->item] = v;
			acct->have |= 1u << f->item;
		}
		return 0;
	}
	return error_set(-ENOENT, "not an accounting file: %s", file);
}

/* ONLY: one file's name, or NULL for all of them. */
static int read_dir(const char *dir, const char *only, struct jobcg_acct *ret)
{
	struct jobcg_acct a = {};
	bool known = !only;

	if (access(dir, F_OK) < 0)
		return error_set(-ENOENT, "no cgroup %s", dir);
	for (size_t i = 0; i < ELEMENTSOF(acct_files); i++) {
		_cleanup_free_ char *text = NULL;
		int r;

		if (only && !streq(only, acct_files[i].name))
			continue;
		known = true;
		r = cgfs_read_optional(dir, acct_files[i].name, &text);
		if (r == -ENOENT)
			continue; /* controller not enabled here: unavailable, not 0 */
		if (r < 0)
			return r;
		r = jobcg_acct_parse(acct_files[i].name, text, &a);
		if (r < 0) {
			jobcg_error_prefix("%s", dir);
			return r;
		}
	}
	if (!known)
		return error_set(-EINVAL, "not an accounting file: %s", only);
	*ret = a;
	return 0;
}

JOBCG_EXPORT int jobcg_acct_read_dir(const char *dir, struct jobcg_acct *ret)
{
	return_if_null(dir);
	return_if_null(ret);
	return read_dir(dir, NULL, ret);
}

JOBCG_EXPORT int jobcg_acct_read_file(struct jobcg_ctx *ctx, const struct jobcg_target *t,
				      const char *file, struct jobcg_acct *ret)
{
	_cleanup_free_ char *dir = NULL;
	int r;

	if (!file)
		return error_set(-EINVAL, "jobcg_acct_read_file: no file name");
	if ((r = jobcg_target_path(ctx, t, &dir)) < 0)
		return r;
	return read_dir(dir, file, ret);
}

JOBCG_EXPORT int jobcg_acct_read(struct jobcg_ctx *ctx, const struct jobcg_target *t,
				 struct jobcg_acct *ret)
{
	_cleanup_free_ char *dir = NULL;
	int r = jobcg_target_path(ctx, t, &dir);

	if (r < 0)
		return r;
	return jobcg_acct_read_dir(dir, ret);
}

void acct_pending_done(struct acct_pending *p)
{
	free(p->jid);
	free(p->sid);
	free(p->gres);
	free(p->resv);
	free(p->reason);
	free(p->line);
	free(p->holder);
	free(p->xattr);
	*p = (struct acct_pending){0};
}

/*
 * A start time jobcg wrote (@unit microseconds per count), 0 when it is not a number: the
 * record is still written (the job has ended; losing its record is worse), with a warning
 * naming the cgroup and attribute, and the next source tried.
 */
static uint64_t start_xattr(const char *dir, const char *name, const char *value, uint64_t unit)
{
	uint64_t v;

	if (parse_u64(value, UINT64_MAX / unit, &v) < 0) {
		log_warning("%s: %s '%s' is not a number: start time unknown", dir, name, value);
		return 0;
	}
	return v * unit;
}

int acct_log_prepare(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
		     uint64_t start_usec, int exit_code, int exit_signal, unsigned ntasks,
		     bool cancelled, const struct jobcg_acct *a, struct acct_pending *ret)
{
	_cleanup_free_ char *jdir = tree_job_dir(ctx, job_id), *owner = NULL, *created = NULL;
	struct acct_pending p = {
	    .rec =
		{
		    .kind = step_id ? JOBCG_ACCT_STEP : JOBCG_ACCT_JOB,
		    .start_usec = start_usec,
		    .end_usec = realtime_usec(),
		    .exit_code = exit_code,
		    .exit_signal = exit_signal,
		    .ntasks = ntasks,
		},
	    .jid = strdup_printf("%u", job_id),
	    .sid = step_id ? strdup(step_id) : NULL,
	};
	unsigned u, g;

	/* The job's reservation, from where its directory is (resv_<name>/job_<id>): the records
	 * of gc, written for a job whose runner died, name it as its runner's would. */
	errno = 0;
	p.resv = jdir ? tree_job_resv(ctx, jdir) : NULL;
	p.rec.reservation = p.resv;
	if (!jdir || !p.jid || (step_id && !p.sid) || (!p.resv && errno == ENOMEM)) {
		acct_pending_done(&p);
		return -ENOMEM;
	}
	p.rec.job_id = p.jid;
	p.rec.step_id = p.sid;
	if (cgfs_xattr_get(jdir, "trusted.jobcg.owner", &owner) == 0 &&
	    parse_owner(owner, &u, &g) == 0) {
		p.rec.uid = (uid_t)u;
		p.rec.gid = (gid_t)g;
	}
	/* A step's own devices (a subset of its job's), else the job's. A step recorded by
	 * someone other than its runner (gc, after the runner died) started when its directory
	 * says it did. */
	if (step_id) {
		_cleanup_free_ char *sdir = tree_step_dir(ctx, job_id, step_id), *started = NULL;

		if (sdir && cgfs_xattr_get(sdir, "trusted.jobcg.gres", &p.gres) < 0)
			p.gres = NULL;
		if (!start_usec && sdir &&
		    cgfs_xattr_get(sdir, "trusted.jobcg.started", &started) == 0)
			p.rec.start_usec = start_xattr(sdir, "trusted.jobcg.started", started, 1);
	}
	/* A job's start, or the last resort for a step made before steps kept theirs: never 0,
	 * which would read as a step that began in 1970. */
	if (!p.rec.start_usec && cgfs_xattr_get(jdir, "trusted.jobcg.created", &created) == 0)
		p.rec.start_usec = start_xattr(jdir, "trusted.jobcg.created", created, 1000000);
	/* A job whose creation died before its mark: when its directory was made, else its
	 * end (a length of 0 rather than one since 1970). */
	if (!p.rec.start_usec)
		p.rec.start_usec = tree_dir_made_usec(jdir);
	if (!p.rec.start_usec || p.rec.start_usec > p.rec.end_usec)
		p.rec.start_usec = p.rec.end_usec;
	if (p.gres || cgfs_xattr_get(jdir, "trusted.jobcg.gres", &p.gres) == 0) {
		if (p.gres && *p.gres)
			p.rec.gres = p.gres;
	}
	if (!jobcg_acct_has(a, JOBCG_ACCT_CPU_USAGE_USEC))
		p.rec.unavailable |= JOBCG_ACCTREC_NO_CPU;
	if (!jobcg_acct_has(a, JOBCG_ACCT_MEM_PEAK))
		p.rec.unavailable |= JOBCG_ACCTREC_NO_MEM_PEAK;
	if (!jobcg_acct_has(a, JOBCG_ACCT_OOM_KILL))
		p.rec.unavailable |= JOBCG_ACCTREC_NO_OOM;
	if (jobcg_acct_has(a, JOBCG_ACCT_CPU_USAGE_USEC))
		p.rec.cpu_usec = a->value[JOBCG_ACCT_CPU_USAGE_USEC];
	if (jobcg_acct_has(a, JOBCG_ACCT_CPU_USER_USEC))
		p.rec.user_usec = a->value[JOBCG_ACCT_CPU_USER_USEC];
	if (jobcg_acct_has(a, JOBCG_ACCT_CPU_SYSTEM_USEC))
		p.rec.system_usec = a->value[JOBCG_ACCT_CPU_SYSTEM_USEC];
	if (jobcg_acct_has(a, JOBCG_ACCT_MEM_PEAK))
		p.rec.mem_peak = a->value[JOBCG_ACCT_MEM_PEAK];
	if (jobcg_acct_has(a, JOBCG_ACCT_OOM_KILL))
		p.rec.oom_kills = a->value[JOBCG_ACCT_OOM_KILL];
	p.rec.state = jobcg_acct_state_of(exit_code, exit_signal, p.rec.oom_kills, cancelled);
	*ret = p;
	return 0;
}

/* @a and @b are files of one directory (by name: the paths as configured). */
static bool same_dir(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');

	return sa && sb && sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0;
}

static int log_commit(struct jobcg_ctx *ctx, struct acct_pending *p);

int acct_log_commit(struct jobcg_ctx *ctx, struct acct_pending *p)
{
	int r = log_commit(ctx, p);

	/* Written: the entry set aside for a crash goes. Not written: it stays, and gc tries
	 * again. */
	if (r >= 0 && p->holder) {
		test_pause("record-before-pending-drop");
		acct_pending_discard(p);
	}
	return r;
}

static int log_commit(struct jobcg_ctx *ctx, struct acct_pending *p)
{
	_cleanup_free_ char *path = NULL;
	const struct jobcg_config *conf = jobcg_ctx_config(ctx);
	unsigned flags = 0;
	int r = jobcg_acctlog_path(conf, &path);

	if (r < 0)
		return r;
	/* The fsync waits for the disk, which on a node's local disk costs more than a whole
	 * fork+exec (docs/bench.md): a step's record goes to the page cache, and the job's record,
	 * fsynced, makes its steps' records durable with it. A kernel crash or power loss can
	 * only lose steps of jobs that were still running (the node failed under them);
	 * AccountingSync=step makes every record durable at once. */
	if (p->rec.kind == JOBCG_ACCT_JOB || !conf ||
	    conf->cgroup.acct_sync == JOBCG_ACCT_SYNC_STEP)
		flags |= JOBCG_ACCTLOG_SYNC;
	/* The log beside the node lock: its directory is checked once per context, not per
	 * record. */
	if (same_dir(path, jobcg_ctx_lock_path(ctx))) {
		r = ctx_state_dir_ready(ctx);
		if (r < 0)
			return r;
	}
	if (!p->line && (r = acctlog_format(&p->rec, &p->line, &p->len)) < 0)
		return r;
	return acctlog_write_line(path, p->line, p->len, flags,
				  same_dir(path, jobcg_ctx_lock_path(ctx)));
}

int acct_step_prepare(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
		      uint64_t start_usec, const struct jobcg_run_result *res,
		      const struct jobcg_acct *a, bool cancelled, struct acct_pending *ret)
{
	int code = -1, sig = 0;

	if (!jobcg_step_id_valid(step_id))
		return error_set(-EINVAL, "invalid step id '%s'", step_id ? step_id : "");
	if (res) {
		code = res->exit_code;
		/* the signal that ended the first task killed by one */
		for (unsigned i = 0; i < res->ntasks && res->task_status; i++)
			if (WIFSIGNALED(res->task_status[i])) {
				sig = WTERMSIG(res->task_status[i]);
				break;
			}
		if (sig)
			code = 0;
	}
	return acct_log_prepare(ctx, job_id, step_id, start_usec, code, sig, res ? res->ntasks : 0,
				cancelled, a, ret);
}

JOBCG_EXPORT int jobcg_acct_log_step(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				     uint64_t start_usec, const struct jobcg_run_result *res,
				     const struct jobcg_acct *a, bool cancelled)
{
	struct acct_pending p;
	int r = acct_step_prepare(ctx, job_id, step_id, start_usec, res, a, cancelled, &p);

	if (r < 0)
		return r;
	r = acct_log_commit(ctx, &p);
	acct_pending_done(&p);
	return r;
}
