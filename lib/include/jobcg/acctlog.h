/* jobcg: the durable accounting log, one JSON object a line (acct.jsonl under the state dir). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobcg/config.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Final states, named as Slurm's sacct names them. */
enum jobcg_acct_state {
	JOBCG_ACCT_COMPLETED = 0, /* exit code 0 */
	JOBCG_ACCT_FAILED,	  /* non-zero exit, or killed by a signal we did not send */
	JOBCG_ACCT_OUT_OF_MEMORY, /* the kernel's OOM killer killed something in it */
	JOBCG_ACCT_CANCELLED,	  /* ended by jobcg release (or a signal sent on request) */
	JOBCG_ACCT_NODE_FAIL,	  /* found dead by jobcg gc: no exit status was seen */
	_JOBCG_ACCT_STATE_MAX,
};

enum jobcg_acct_kind {
	JOBCG_ACCT_STEP = 0,
	JOBCG_ACCT_JOB = 1,
};

/* Bits of jobcg_acct_record.unavailable: readings whose cgroup file did not exist (controller
 * missing). They are written as JSON null and shown as "-": never as 0. */
enum {
	JOBCG_ACCTREC_NO_CPU = 1u << 0,	     /* cpu_usec, user_usec, system_usec */
	JOBCG_ACCTREC_NO_MEM_PEAK = 1u << 1, /* mem_peak */
	JOBCG_ACCTREC_NO_OOM = 1u << 2,	     /* oom_kills */
};

struct jobcg_acct_record {
	enum jobcg_acct_kind kind;
	char *job_id;
	char *step_id; /* NULL for a job record */
	uid_t uid;
	gid_t gid;
	uint64_t start_usec; /* CLOCK_REALTIME, microseconds since the epoch */
	uint64_t end_usec;
	int exit_code;	   /* exit status of the step's command; -1 unknown */
	int exit_signal;   /* signal that ended it, 0 none */
	uint64_t cpu_usec; /* cpu.stat usage_usec */
	uint64_t user_usec;
	uint64_t system_usec;
	uint64_t mem_peak;  /* memory.peak in bytes */
	uint64_t oom_kills; /* memory.events oom_kill (the job's counts all its steps) */
	enum jobcg_acct_state state;
	char *gres; /* "gpu:0,2" or NULL */
	unsigned ntasks;
	unsigned unavailable; /* JOBCG_ACCTREC_NO_* */
	/* Why a job or step that never ran is FAILED (jobcg_spank.so's record of a step it
	 * could not contain, a job whose creation never finished), NULL otherwise. Written only
	 * when set. */
	char *reason;
	/* The reservation (jobcg resv) the job ran in, NULL when none: on the records of the job
	 * and of its steps, so that its use can be billed after the reservation is gone. Written
	 * only when set; a reader takes only a name jobcg_resv_name_valid() accepts. */
	char *reservation;
};

/** "COMPLETED", "FAILED", ... or NULL for an unknown value. */
JOBCG_EXPORT const char *jobcg_acct_state_name(enum jobcg_acct_state s);
/** The state for a name, or -EINVAL. */
JOBCG_EXPORT int jobcg_acct_state_from_name(const char *name);

/**
 * The final state of a step or job from how it ended: cancelled wins (we ended it), then any
 * OOM kill, then a signal or non-zero exit (FAILED), else COMPLETED. @exit_code -1 and no
 * signal means nothing was seen (NODE_FAIL).
 */
JOBCG_EXPORT enum jobcg_acct_state jobcg_acct_state_of(int exit_code, int exit_signal,
						       uint64_t oom_kills, bool cancelled);

/** The log's path: <state dir>/acct.jsonl (state dir from @conf, else JOBCG_STATE_DIR, else
 *  /var/lib/jobcg). */
JOBCG_EXPORT int jobcg_acctlog_path(const struct jobcg_config *conf, char **ret);

/* Flags of jobcg_acctlog_write(). */
enum {
	/* fsync the log after the record: it, and every record written before it, is then on
	 * disk. Without it the record is in the page cache: it survives jobcg being killed, not
	 * a kernel crash or power loss before writeback. */
	JOBCG_ACCTLOG_SYNC = 1u << 0,
};

/**
 * Append one record as one JSON line (fsynced with JOBCG_ACCTLOG_SYNC). The directory is
 * created if missing. Appends are serialised with flock() on the file @path.lock (made mode
 * 0600; -EPERM, "remove it", when someone other than root or us could open it), not on the
 * log, so that whoever may read the log cannot hold writers back: concurrent writers never
 * interleave, and a torn last line left by a crash is terminated first so it cannot swallow
 * this record. The log is opened by path for each record once the lock is held, and opened
 * again when it was renamed (rotated) meanwhile, so a record never lands in a file logrotate
 * has moved. The directory must be safe (root's or ours, writable by no one else), and so must
 * the log (-EPERM when it is another user's or writable by its group or others). Unknown
 * @flags bits are -EINVAL.
 */
JOBCG_EXPORT int jobcg_acctlog_write(const char *path, const struct jobcg_acct_record *r,
				     unsigned flags);

/** jobcg_acctlog_write() with JOBCG_ACCTLOG_SYNC: the record is on disk when this returns. */
JOBCG_EXPORT int jobcg_acctlog_append(const char *path, const struct jobcg_acct_record *r);

typedef int (*jobcg_acctlog_fn)(const struct jobcg_acct_record *r, void *userdata);

/**
 * Read the log, calling @fn for each record (of job @job_id only, when not NULL) in file order;
 * a nonzero return from @fn stops and is returned. Lines that are not a complete record (a torn
 * last line after a crash, garbage, more after the record, a negative number) are skipped with
 * a warning naming file and line. A missing log is an empty one. A gzip-compressed file is read
 * as well. A symbolic link, a file that is not regular, another user's (not root's) or one
 * writable by its group or others is refused (-ELOOP, -EINVAL, -EPERM): its records could be
 * anyone's. The record passed to @fn is only valid during the call.
 */
JOBCG_EXPORT int jobcg_acctlog_read(const char *path, const char *job_id, jobcg_acctlog_fn fn,
				    void *userdata);

/**
 * jobcg_acctlog_read() of the log's rotated copies, oldest first, then of @path itself:
 * logrotate's names beside it, compressed (.gz) or not: PATH-SUFFIX (dateext) in the order of
 * their suffixes, then PATH.N from the highest N to PATH.1. All are opened before any is read
 * and the set is taken again if a rotation moved a file meanwhile, so a concurrent rotation
 * neither skips nor repeats a record. Where PATH.N and PATH.N.gz both exist (gzip at work), the
 * plain one is read. The directory of an absolute @path is checked as writers check it (none:
 * no records); a rotated copy jobcg_acctlog_read() would refuse, or an entry merely named like
 * one (a directory, a FIFO), is skipped with a warning, the live log refused.
 */
JOBCG_EXPORT int jobcg_acctlog_read_all(const char *path, const char *job_id, jobcg_acctlog_fn fn,
					void *userdata);

/** Free the strings of a record (not the record itself). */
JOBCG_EXPORT void jobcg_acct_record_done(struct jobcg_acct_record *r);

#ifdef __cplusplus
}
#endif
