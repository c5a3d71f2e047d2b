/* jobcg: jobs, steps and tasks in the cgroup tree: create, remove, list, spawn, signal, freeze,
 * kill. */
#pragma once

#include <signal.h> /* sigset_t of jobcg_spawn_opts */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobcg/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The tree (see docs/design.md):
 *   <root>/system/                          parking leaf (scope keeper, processes found in root)
 *   <root>/job_<id>/step_<sid>/jobcg/       the step's own helper processes (leaf)
 *   <root>/job_<id>/step_<sid>/user/task_<n>/      one leaf per task
 *   <root>/job_<id>/step_<sid>/user/task_special/  pids added to the step but to no task
 * Job ids are 1..4294967294. Step ids are a number (0..4294967279) or batch, extern, interactive.
 */

#define JOBCG_JOB_ID_AUTO	    0u		/* jobcg_job_create(): pick a free ephemeral id */
#define JOBCG_JOB_ID_EPHEMERAL_BASE 4000000000u /* auto-picked ids start here */
#define JOBCG_STEP_ID_MAX	    32		/* buffer size for a step id, including the NUL */
#define JOBCG_TASK_ALL		    (-1)	/* target: every task of the step */
#define JOBCG_TASK_SPECIAL	    (-2)	/* target: user/task_special */
#define JOBCG_TASK_MAX		    65535

/** true if @s is a valid step id: decimal 0..4294967279 (no sign, no leading zeros), batch, extern,
 * interactive. */
JOBCG_EXPORT bool jobcg_step_id_valid(const char *s);
/** Parse a job id (decimal 1..4294967294). 0 or -EINVAL. */
JOBCG_EXPORT int jobcg_job_id_parse(const char *s, uint32_t *ret);

/* What a command acts on: a job, one step of it, or one task of a step. */
struct jobcg_target {
	uint32_t job;
	char step[JOBCG_STEP_ID_MAX]; /* "" = the whole job */
	int task;		      /* JOBCG_TASK_ALL, JOBCG_TASK_SPECIAL or 0..JOBCG_TASK_MAX */
};

/** Parse "JOB", "JOB.STEP" or "JOB.STEP.TASK" (TASK a number or "special"). 0 or -EINVAL (error
 * set). */
JOBCG_EXPORT int jobcg_target_parse(const char *s, struct jobcg_target *ret);
/** Format a target as parsed above into @buf. Returns @buf. */
JOBCG_EXPORT char *jobcg_target_format(const struct jobcg_target *t, char *buf, unsigned long size);
/** Cgroup path of a target relative to the tree root ("job_42/step_0/user/task_1"); free() it.
 * NULL with errno EINVAL (record set) for a target that jobcg_target_parse() would not give, as
 * one filled by hand may be; NULL with ENOMEM when out of memory. */
JOBCG_EXPORT char *jobcg_target_relpath(const struct jobcg_target *t);
/** Absolute cgroup directory of a target; free() it. -EINVAL for a target that
 * jobcg_target_parse() would not give (every call taking a target checks it so), else -ENOMEM
 * only (existence is not checked). */
JOBCG_EXPORT int jobcg_target_path(const struct jobcg_ctx *ctx, const struct jobcg_target *t,
				   char **ret);

/* Limits of a job, applied to job_<id>/ when it is created. Zero/NULL fields are no limit. */
struct jobcg_limits {
	const char *cpus;    /* cpuset.cpus list ("0-3,8"), NULL = all */
	uint64_t mem_bytes;  /* memory.max, 0 = unlimited */
	uint64_t pids_max;   /* pids.max, 0 = unlimited */
	uint64_t cpu_weight; /* cpu.weight 1..10000 (share of contended CPUs), 0 = default (100) */
	bool best_effort;    /* skip limits this host cannot enforce (logged) instead of failing */
	const char
	    *gres; /* GRES request ("gpu:2", "gpu:a100:1,nic:1"), NULL = none; see jobgres.h */
	bool have_owner; /* uid/gid below are the job's owner (recorded, and in accounting) */
	uid_t uid;
	gid_t gid;
	/* Reservation the job is made in (resv_<name>/job_<id>; jobcg/resv.h), NULL = none: its
	 * owner must be one of its users, it must be VALID, and --gres draws only from its devices.
	 */
	const char *reservation;
};

/* Bits for jobcg_limits_check(). */
enum {
	JOBCG_LIMIT_CPUS = 1u << 0,
	JOBCG_LIMIT_MEM = 1u << 1,
	JOBCG_LIMIT_PIDS = 1u << 2,
	JOBCG_LIMIT_CPU_WEIGHT = 1u << 3,
};

/**
 * Which of @limits this host cannot enforce (controller missing from the tree). Returns the
 * JOBCG_LIMIT_* mask (0: all can be enforced); for each set bit, *ret_reasons (may be NULL)
 * gets a sentence such as "memory controller is bound to cgroup v1: memory limits cannot be
 * enforced", NULL-terminated, in bit order. Free with jobcg_strv_free().
 */
JOBCG_EXPORT unsigned jobcg_limits_check(const struct jobcg_ctx *ctx,
					 const struct jobcg_limits *limits, char ***ret_reasons);
/** Free a NULL-terminated string vector returned by the library. */
JOBCG_EXPORT void jobcg_strv_free(char **v);

enum {
	JOBCG_JOB_EPHEMERAL = 1u << 0, /* made by `jobcg run`: removed by its runner; gc may sweep
					  it once that runner is gone */
	/* Made by jobcg_spank.so for a Slurm job (trusted.jobcg.slurm, written before the job is
	 * marked complete): the plugin adopts and removes only such jobs, never an allocation
	 * of an admin's that happens to have a Slurm job's id. */
	JOBCG_JOB_SLURM = 1u << 1,
};

/**
 * Create job_<id> (under the node lock, creating the tree if needed): apply @limits (may be
 * NULL), record metadata as trusted.jobcg.* xattrs (owner, creation time, limits, runner), run
 * the extension hooks. Any failure rolls back everything made so far. @job_id
 * JOBCG_JOB_ID_AUTO picks a free id >= JOBCG_JOB_ID_EPHEMERAL_BASE. -EEXIST if it exists.
 */
JOBCG_EXPORT int jobcg_job_create(struct jobcg_ctx *ctx, uint32_t job_id,
				  const struct jobcg_limits *limits, unsigned flags,
				  uint32_t *ret_job_id);
/* Flags of jobcg_job_remove(). */
enum {
	/* The caller already ended the job's processes on request (jobcg release after SIGTERM):
	 * its record says CANCELLED even when nothing is left running at removal. */
	JOBCG_JOB_REMOVE_CANCELLED = 1u << 0,
	/* The job's work failed (the one step of an ephemeral job exited non-zero, or its
	 * command could not be started): its record says FAILED with exit code 1. */
	JOBCG_JOB_REMOVE_FAILED = 1u << 1,
	/* Only a job nothing uses: no step directory and no process in it, checked under the
	 * same hold of the node lock as the removal, so a step being created waits for the
	 * removal and then finds no job (-ENOENT), or comes first and keeps the job. -EBUSY,
	 * the job untouched, otherwise. For a launcher that removes a job with its last step. */
	JOBCG_JOB_REMOVE_IF_UNUSED = 1u << 2,
	/* Write no job record: the caller removes a job whose steps have their records and
	 * which may be made again by its next step (the plugin for Slurm, whose steps of one
	 * job can follow one another with none in between): a job record each time would give
	 * one Slurm job several job records that each tell part of it. */
	JOBCG_JOB_REMOVE_NO_RECORD = 1u << 3,
	/* Only a job made with JOBCG_JOB_SLURM, checked under the same hold of the node lock as
	 * the removal: -EPERM, the job untouched, otherwise (where cgroupfs has no xattrs no job
	 * has the mark, and this flag checks nothing). */
	JOBCG_JOB_REMOVE_IF_SLURM = 1u << 4,
};

/**
 * Remove a job: kill every process in it (cgroup.kill, bounded wait without the node lock),
 * remove the directories bottom-up (bounded EBUSY retry), then append its accounting record
 * and undo the extension hooks (device grants are revoked only once the cgroups are gone).
 * A step a runner began that is still there gets its record too (CANCELLED while its runner
 * lives, NODE_FAIL when it died): its runner finds it gone and writes none.
 * -ENOENT if there is no such job; -EINPROGRESS while another live process removes it. On
 * failure the job stays marked "removing" with everything it holds, and gc finishes it.
 */
JOBCG_EXPORT int jobcg_job_remove(struct jobcg_ctx *ctx, uint32_t job_id, unsigned flags);

/**
 * End step @job_id.@step_id as lost when the process that began it (its runner, recorded with
 * it) died without ending it: kill what is left in it (cgroup.kill, bounded wait), revoke its
 * device grants, remove it and append its record (NODE_FAIL: nobody saw how its tasks ended),
 * as jobcg_gc() does for such a step, for this one step and at once. @runner, when not NULL,
 * must be the runner the step recorded ("PID:STARTTIME", jobcg_runner_wait()): a step begun
 * by another process is left alone. *@ret_reaped (may be NULL) says whether the step was
 * removed; false without error when there is nothing to do (no such job or step, a step
 * without a runner, or one whose runner lives). On failure the step stays, for gc.
 */
JOBCG_EXPORT int jobcg_step_reap(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				 const char *runner, bool *ret_reaped);

/**
 * Wait until the process @runner ("PID:STARTTIME", STARTTIME field 22 of /proc/PID/stat, as
 * steps record their runner) has exited: at once when it is not running (that pid runs
 * another process, or none, or it exited and only its parent has not reaped it yet). A pidfd
 * (Linux 5.3) tells the exit as it happens; without one the process is looked at once a
 * second. @timeout_ms -1 waits for as long as it takes.
 * 0 once it is gone, -ETIMEDOUT, -EINVAL for a malformed @runner.
 */
JOBCG_EXPORT int jobcg_runner_wait(const char *runner, int timeout_ms);

/** Sorted job ids present under the tree root. An absent root gives 0 jobs. */
JOBCG_EXPORT int jobcg_job_list(struct jobcg_ctx *ctx, uint32_t **ret_ids, size_t *ret_n);

/* A job as found on disk (from its directory and xattrs). */
struct jobcg_job_info {
	uint32_t id;
	char *path; /* absolute cgroup directory */
	bool have_owner;
	uid_t uid;
	gid_t gid;
	uint64_t created_sec; /* CLOCK_REALTIME seconds, 0 = unknown */
	bool ephemeral;
	pid_t runner; /* ephemeral job: pid of the `jobcg run` that owns it, 0 = none */
	char *cpus;   /* recorded limits (NULL/0 = none) */
	uint64_t mem_bytes;
	uint64_t pids_max;
	bool best_effort;
	char **skipped; /* limits skipped under best effort ("mem", ...), NULL-terminated or NULL */
	char **steps;	/* step ids, NULL-terminated (never NULL) */
	bool populated; /* cgroup.events populated 1 */
	bool frozen;	/* cgroup.events frozen 1 */
	/* Left behind by a process that died: an ephemeral job whose `jobcg run` is gone, or a
	 * removal whose remover is ('jobcg gc' finishes it and writes its record). */
	bool orphaned;
	/* Steps whose runner is gone (gc removes them), NULL-terminated (never NULL). */
	char **orphaned_steps;
	/* A live `jobcg release` (or removal) is ending it: gc leaves it to that process. */
	bool releasing;
	/* Made by jobcg_spank.so for a Slurm job (JOBCG_JOB_SLURM). */
	bool slurm;
	/* Such a job that no live step holds any more, made more than a minute ago: its
	 * slurmstepds and their watchers died without removing it. gc removes it (without a job
	 * record, as they would have) once its stray steps are gone and no process is left. */
	bool slurm_stale;
	/* The reservation the job runs in (its directory is resv_<name>/job_<id>), or NULL. */
	char *reservation;
};
JOBCG_EXPORT int jobcg_job_info_get(struct jobcg_ctx *ctx, uint32_t job_id,
				    struct jobcg_job_info **ret);
JOBCG_EXPORT void jobcg_job_info_free(struct jobcg_job_info *i);

/**
 * Persist / read extension state on the job directory as the xattr "trusted.jobcg.<key>".
 * @key is [a-z0-9_.-]+. get: -ENODATA when absent; *ret is a NUL-terminated malloc()ed string.
 */
JOBCG_EXPORT int jobcg_job_xattr_set(struct jobcg_ctx *ctx, uint32_t job_id, const char *key,
				     const char *value);
JOBCG_EXPORT int jobcg_job_xattr_get(struct jobcg_ctx *ctx, uint32_t job_id, const char *key,
				     char **ret);

enum {
	/* jobcg_step_create(): record no runner, so the step belongs to the job and gc leaves it
	 * (the extern step that `jobcg adopt` makes for login sessions). */
	JOBCG_STEP_NO_RUNNER = 1u << 1,
	/* jobcg_step_create(): @step_id was assigned by a scheduler that never reuses one in a
	 * job (Slurm's), whose steps may reach this node out of order: a number below the
	 * job's count, or a name the job had, is taken, not refused. */
	JOBCG_STEP_ID_SCHEDULED = 1u << 2,
};

/**
 * Create step_<step_id> in an existing job with its jobcg/ and user/ directories (under the
 * node lock). @step_id NULL picks the lowest free number. The calling process is recorded as
 * the step's runner (gc removes steps whose runner is gone). Writes the chosen id into
 * @ret_step_id (JOBCG_STEP_ID_MAX bytes) if not NULL. -EEXIST if the step exists or, unless
 * JOBCG_STEP_ID_SCHEDULED, its number is below the job's count of numbers used or its name
 * (batch, extern, interactive) was made in the job before (a step id is never reused),
 * -EBUSY if the job is frozen, -ESHUTDOWN if the job is being released (jobcg_job_release()),
 * -EPERM if it is an ephemeral job (JOBCG_JOB_EPHEMERAL) another process made: it is removed
 * when that process's step ends.
 * Same as jobcg_step_create_limited() with no limits.
 */
JOBCG_EXPORT int jobcg_step_create(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				   unsigned flags, char *ret_step_id);

/*
 * Limits of a step: a subset of its job's allocation, never more. Zero/NULL fields: the
 * job's (inherited, nothing written).
 */
struct jobcg_step_limits {
	const char *cpus;   /* cpuset.cpus of the step: a subset of the job's CPUs (its recorded
			       cpus, else all the job may use); cpuset.mems as the job's */
	uint64_t mem_bytes; /* memory.max (and memory.high, swap) of the step by the same
			       formulas as a job's; at most the job's memory request */
	bool best_effort;   /* skip limits this host cannot enforce (recorded as "skipped") */
};

/**
 * jobcg_step_create() applying @limits (may be NULL) to step_<id>/ and recording them as
 * trusted.jobcg.{cpus,mem,skipped} on the step directory (read with jobcg_step_xattr_get()).
 * Checked before anything is made: -EINVAL when the step asks for CPUs outside the job's or
 * more memory than the job has (the message names the `jobcg run` option, --cpus or --mem,
 * and what the job has); -EOPNOTSUPP when the controller is unusable here and !best_effort.
 * Any later failure removes the step again.
 */
JOBCG_EXPORT int jobcg_step_create_limited(struct jobcg_ctx *ctx, uint32_t job_id,
					   const char *step_id, unsigned flags,
					   const struct jobcg_step_limits *limits,
					   char *ret_step_id);
/** Read "trusted.jobcg.<key>" of a step directory (as jobcg_job_xattr_get()). */
JOBCG_EXPORT int jobcg_step_xattr_get(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				      const char *key, char **ret);
/** Kill a step's processes, then remove its directories bottom-up. -ENOENT if absent. */
JOBCG_EXPORT int jobcg_step_remove(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				   unsigned flags);
/** Step ids of a job (numbers ascending, then names), NULL-terminated. */
JOBCG_EXPORT int jobcg_step_list(struct jobcg_ctx *ctx, uint32_t job_id, char ***ret);

/* Options for spawning a task. */
struct jobcg_spawn_opts {
	char *const *envp;	 /* NULL: inherit environ */
	bool no_clone3;		 /* force the fork + migrate-before-exec fallback (tests) */
	const sigset_t *sigmask; /* mask for the child, NULL: empty mask (all signals unblocked) */
	/* Per task (indexed by task number, at least as many as tasks started): "NAME=VALUE"
	 * strings added to that task's environment, replacing inherited ones of the same name
	 * (a task's own GPU variables). NULL: none. The library changes none of them; the type is
	 * what jobcg_step_gres_task_env() returns. */
	char **const *task_env;
};

/**
 * Start @argv (argv[0] looked up in PATH) as task @task (0..JOBCG_TASK_MAX or
 * JOBCG_TASK_SPECIAL) of a step: the task directory is created if needed and the process is
 * born in it (clone3 CLONE_INTO_CGROUP) or, where that is not available, moved there before
 * exec. Env JOBCG_JOB_ID, JOBCG_STEP_ID and JOBCG_TASK_ID are set. Returns the pid; the
 * caller reaps it. If exec fails the child exits 127 (126: not executable).
 */
JOBCG_EXPORT int jobcg_task_spawn(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				  int task, char *const argv[], const struct jobcg_spawn_opts *opts,
				  pid_t *ret_pid);
/**
 * Move an existing process into a task (JOBCG_TASK_SPECIAL: added to the step but no task) of
 * an existing step, making the task's directory when missing. The job is checked and the
 * process moved in one hold of the node lock: -EBUSY for a job without its created mark,
 * -ESHUTDOWN for one being released, -ENOENT when the job or step does not exist, -EPERM for
 * pid 1 or a kernel thread, -ESRCH when there is no such process.
 *
 * Any other process is moved, whoever owns it: the job's limits then apply to it and the
 * job's or step's end kills it. The caller must have checked that @pid belongs to whoever
 * asked for the move (its uid from SO_PEERCRED, for example, against the process's).
 */
JOBCG_EXPORT int jobcg_task_add_pid(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				    int task, pid_t pid);

/** populated / frozen of a target from its cgroup.events. -ENOENT if the target is absent. */
JOBCG_EXPORT int jobcg_target_events(struct jobcg_ctx *ctx, const struct jobcg_target *t,
				     bool *ret_populated, bool *ret_frozen);
/** Task numbers present in a step (ascending; JOBCG_TASK_SPECIAL last if present). */
JOBCG_EXPORT int jobcg_task_list(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				 int **ret, size_t *ret_n);

/** Pids in a target's cgroups (recursively), sorted. -EREMOTE when one is a process of another
 * pid namespace (listed as 0: it can be neither signalled nor moved from here). */
JOBCG_EXPORT int jobcg_pids(struct jobcg_ctx *ctx, const struct jobcg_target *t, pid_t **ret,
			    size_t *ret_n);
/** Send @sig to every process of a target, each through a pidfd checked to be still the
 * target's (Linux 5.3; kill() before), so that a pid reused meanwhile is not hit. Returns the
 * number signalled, or -errno (-EREMOTE as jobcg_pids()). */
JOBCG_EXPORT int jobcg_signal(struct jobcg_ctx *ctx, const struct jobcg_target *t, int sig);
/**
 * Note on a job or step (a task target notes nothing) that its owner's side is about to send
 * @sig to it, as Slurm's scancel does: a step whose task then dies of that signal records
 * CANCELLED rather than FAILED (jobcg_step_end()). `jobcg signal` and `jobcg kill` call it
 * before sending; a scheduler's own kill of what a step left behind does not. 0 or -errno;
 * without xattrs on the cgroup file system 0, noting nothing.
 */
JOBCG_EXPORT int jobcg_target_note_signal(struct jobcg_ctx *ctx, const struct jobcg_target *t,
					  int sig);
/**
 * Freeze / thaw a target through cgroup.freeze and wait (inotify on cgroup.events, no polling
 * loop) until it reports "frozen 1" / "frozen 0", at most @timeout_ms. Thaw also thaws the
 * cgroups below the target that were frozen on their own (a step frozen, then its job thawed).
 * -ETIMEDOUT on expiry, -EOPNOTSUPP when the kernel has no cgroup.freeze. A freeze that timed
 * out is undone (the target's cgroup.freeze set back to 0, unless it was 1 before the call):
 * nothing stays half frozen. @timeout_ms 0: request it and return 0 without waiting. Thaw of a
 * target with a frozen cgroup above it (its step or job), which could never report "frozen 0",
 * is -EBUSY at once, naming that cgroup, with nothing changed.
 */
JOBCG_EXPORT int jobcg_freeze(struct jobcg_ctx *ctx, const struct jobcg_target *t,
			      unsigned timeout_ms);
JOBCG_EXPORT int jobcg_thaw(struct jobcg_ctx *ctx, const struct jobcg_target *t,
			    unsigned timeout_ms);
/**
 * SIGKILL every process of a target with cgroup.kill (falling back to signalling each pid on
 * kernels without it) and wait until cgroup.events says "populated 0", at most @timeout_ms
 * (0: do not wait).
 */
JOBCG_EXPORT int jobcg_kill(struct jobcg_ctx *ctx, const struct jobcg_target *t,
			    unsigned timeout_ms);

/* Result of jobcg_step_run(). */
struct jobcg_run_result {
	int exit_code;	  /* the step's: the highest task exit code, or 128+N for a task
			     killed by signal N (the first such task) */
	int *task_status; /* raw wait statuses, one per task; free() it */
	unsigned ntasks;
	int lost_signal; /* signal the runner received and forwarded (0: none) */
};

/**
 * Run @ntasks copies of @argv as tasks 0..ntasks-1 of an existing step and wait for all of
 * them; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the caller are forwarded
 * to the step's tasks meanwhile. When the last task has exited, processes left in the step are
 * killed (the step ends). Does not remove the step (read accounting first). The signals are
 * blocked with sigprocmask() meanwhile: a multi-threaded caller must block them in its other
 * threads too, or they may take the forwarded signals.
 */
JOBCG_EXPORT int jobcg_step_run(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				unsigned ntasks, char *const argv[],
				const struct jobcg_spawn_opts *opts, struct jobcg_run_result *ret);

/**
 * jobcg_step_run() for a step named by its directory: the tasks start in
 * @step_dir/user/task_<n>. @step_dir may be "/proc/self/fd/<fd>" of a directory descriptor
 * received from `jobcg daemon`, which works whatever this process's mount namespace shows.
 * @ctx may be NULL. On a kernel without cgroup.kill (before Linux 5.14) the job's freeze lock
 * is a file of the context's state directory: without a context the launch takes none there,
 * and a freeze that lands in it holds it until a thaw.
 */
JOBCG_EXPORT int jobcg_step_run_dir(struct jobcg_ctx *ctx, const char *step_dir, uint32_t job_id,
				    const char *step_id, unsigned ntasks, char *const argv[],
				    const struct jobcg_spawn_opts *opts,
				    struct jobcg_run_result *ret);

/**
 * Record @pid instead of the calling process as the runner of the jobs and steps this process
 * creates from now on (0: itself again): what `jobcg daemon` does for the client it serves,
 * so that gc sweeps a step when the client is gone, not when the daemon is.
 */
JOBCG_EXPORT void jobcg_set_runner(pid_t pid);

/** Statistics of gc. */
struct jobcg_gc_stats {
	unsigned jobs_removed;
	unsigned steps_removed;
	unsigned kept; /* job directories left because they are alive */
	/* reservations left half made or half deleted, and reservations removed by hand whose
	 * entries in the device policy gc dropped (one each, however many devices) */
	unsigned resv_removed;
	/* accounting records that removers killed after their rmdir had set aside and not
	 * written (written now) */
	unsigned records_written;
};
/**
 * Sweep stray directories under the node lock: ephemeral jobs and steps whose runner process
 * is gone (what is left in them is killed; their accounting records say NODE_FAIL) and job
 * directories left half made (no trusted.jobcg.created). Jobs made by jobcg_job_create()
 * without EPHEMERAL live until jobcg_job_remove(), except those made with JOBCG_JOB_SLURM:
 * one left with no step and no process a minute after its creation is removed (no job record),
 * as its last step's end or watcher would have. Directories that are not job_<id> are left
 * alone. Without xattr support nothing can be judged stray and everything is kept.
 */
JOBCG_EXPORT int jobcg_gc(struct jobcg_ctx *ctx, unsigned flags, struct jobcg_gc_stats *ret);

/* Flags of jobcg_tree_teardown(). */
enum {
	/* Release the jobs found (as cancelled), and remove directories that are not jobcg's. */
	JOBCG_TEARDOWN_FORCE = 1u << 0,
};
/** What jobcg_tree_teardown() removed. */
struct jobcg_teardown_stats {
	unsigned jobs_removed;	/* forced: by gc (strays) and released (the others) */
	unsigned steps_removed; /* stray steps gc swept first */
	bool pins_removed;	/* the node program detached and its pins removed */
	bool root_removed;
	unsigned resv_removed; /* forced: reservations deleted (or removed with the tree) */
};
/**
 * Remove the context's whole tree: a test root, a side-by-side install. Under the node lock:
 * refuse (-EBUSY, naming them) while jobs exist unless @flags has JOBCG_TEARDOWN_FORCE, which
 * first runs jobcg_gc() (dead runners' steps get NODE_FAIL records) and then releases every
 * other job as cancelled, each with its record, as jobcg_job_release() would with @grace_ms,
 * but all at once: SIGTERM to every process of the tree (frozen jobs excepted), one wait of
 * up to @grace_ms (0: none) for them to exit, with the lock held, then what is left is
 * killed; detach the node device program pinned for
 * this root and remove its pins and pin directory; kill what is left (system/: a scope's
 * keeper) and remove the directories; last, remove the node lock file. The accounting log
 * stays. Refused (-EPERM) for a root that is the cgroup mount or holds the caller, and
 * (-ENOTEMPTY) for one holding directories other than system/ and job_<id> unless forced.
 * A missing root is success with nothing removed. Processes waiting for the node lock
 * meanwhile find the tree gone.
 */
JOBCG_EXPORT int jobcg_tree_teardown(struct jobcg_ctx *ctx, unsigned flags, unsigned grace_ms,
				     struct jobcg_teardown_stats *ret);

#ifdef __cplusplus
}
#endif
