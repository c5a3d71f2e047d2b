/* jobcg: telling a step killed by its job's memory limit from one killed by a node-wide OOM. */
#pragma once

#include <stdint.h>

#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum jobcg_oom_cause {
	JOBCG_OOM_NONE = 0, /* no process of the step was OOM-killed */
	JOBCG_OOM_JOB,	    /* the job's own memory limit was hit (memory.events oom counted) */
	JOBCG_OOM_NODE,	    /* killed by an OOM outside the job's limits: the node ran out */
};

/**
 * Classify a step's end. @step_oom_kills: memory.events oom_kill of the step (processes of
 * the step the kernel OOM-killed, whoever's limit it was). @job_limit_ooms: how much the job's
 * memory.events oom counter grew while the step ran (the kernel counts it only when a memory
 * cgroup limit at the job or below was hit, never for the global OOM killer).
 */
JOBCG_EXPORT enum jobcg_oom_cause jobcg_oom_classify(uint64_t step_oom_kills,
						     uint64_t job_limit_ooms);
/** "none", "job" or "node". */
JOBCG_EXPORT const char *jobcg_oom_cause_name(enum jobcg_oom_cause c);

#ifdef __cplusplus
}
#endif
