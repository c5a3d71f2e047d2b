/* jobcg: accounting readings of a job, step or task from its cgroup files. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "jobcg/job.h"

#ifdef __cplusplus
extern "C" {
#endif

enum jobcg_acct_item {
	JOBCG_ACCT_CPU_USAGE_USEC,  /* cpu.stat usage_usec */
	JOBCG_ACCT_CPU_USER_USEC,   /* cpu.stat user_usec */
	JOBCG_ACCT_CPU_SYSTEM_USEC, /* cpu.stat system_usec */
	JOBCG_ACCT_MEM_CURRENT,	    /* memory.current, bytes */
	JOBCG_ACCT_MEM_PEAK,	    /* memory.peak, bytes */
	JOBCG_ACCT_MEM_ANON,	    /* memory.stat anon */
	JOBCG_ACCT_MEM_FILE,	    /* memory.stat file */
	JOBCG_ACCT_PGMAJFAULT,	    /* memory.stat pgmajfault */
	JOBCG_ACCT_OOM,		    /* memory.events oom */
	JOBCG_ACCT_OOM_KILL,	    /* memory.events oom_kill */
	JOBCG_ACCT_PIDS_CURRENT,    /* pids.current */
	JOBCG_ACCT_PIDS_PEAK,	    /* pids.peak */
	_JOBCG_ACCT_MAX,
};

/* Readings; an item whose file is missing (controller not available) is unavailable, never 0. */
struct jobcg_acct {
	uint64_t value[_JOBCG_ACCT_MAX];
	uint32_t have; /* bit (1u << item) set when value[item] was read */
};

static inline bool jobcg_acct_has(const struct jobcg_acct *a, enum jobcg_acct_item i)
{
	return (a->have >> i) & 1u;
}

/** Stable name of an item ("cpu_usage_usec", "mem_peak", ...), NULL when out of range. */
JOBCG_EXPORT const char *jobcg_acct_item_name(enum jobcg_acct_item i);
/** Read every item of a target. -ENOENT if the target's cgroup does not exist. */
JOBCG_EXPORT int jobcg_acct_read(struct jobcg_ctx *ctx, const struct jobcg_target *t,
				 struct jobcg_acct *ret);
/**
 * Read only the items one cgroup file (a name jobcg_acct_parse() knows, e.g. "memory.events")
 * provides: a cheap reading where one counter is all that is needed. Items of a file that does
 * not exist (controller not enabled) stay unset; -ENOENT if the target's cgroup does not exist.
 */
JOBCG_EXPORT int jobcg_acct_read_file(struct jobcg_ctx *ctx, const struct jobcg_target *t,
				      const char *file, struct jobcg_acct *ret);
/** Read every item from a cgroup directory (absolute path). */
JOBCG_EXPORT int jobcg_acct_read_dir(const char *dir, struct jobcg_acct *ret);
/**
 * Fill the items that the contents @text of cgroup file @file ("cpu.stat", "memory.stat",
 * "memory.events", "memory.current", "memory.peak", "pids.current", "pids.peak") provides.
 * "max" in a single-value file is UINT64_MAX. -EINVAL (error set, naming file and line) on
 * malformed text; -ENOENT for an unknown file name.
 */
JOBCG_EXPORT int jobcg_acct_parse(const char *file, const char *text, struct jobcg_acct *acct);

/**
 * Append a step's record to the accounting log (acct.jsonl in the state dir, jobcg/acctlog.h)
 * from readings @a taken at the step's end. @start_usec is CLOCK_REALTIME microseconds (0 =
 * unknown); @res the step's result (NULL: none was seen, the record says NODE_FAIL); @cancelled
 * when jobcg ended it on request. Owner and GRES come from the job's xattrs.
 */
JOBCG_EXPORT int jobcg_acct_log_step(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
				     uint64_t start_usec, const struct jobcg_run_result *res,
				     const struct jobcg_acct *a, bool cancelled);

#ifdef __cplusplus
}
#endif
