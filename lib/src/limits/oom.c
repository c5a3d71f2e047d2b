/* jobcg: OUT_OF_MEMORY verdicts from memory.events counters (see jobcg/oom.h). */
#include "jobcg/oom.h"

JOBCG_EXPORT enum jobcg_oom_cause jobcg_oom_classify(uint64_t step_oom_kills,
						     uint64_t job_limit_ooms)
{
	if (step_oom_kills == 0)
		return JOBCG_OOM_NONE;
	return job_limit_ooms > 0 ? JOBCG_OOM_JOB : JOBCG_OOM_NODE;
}

JOBCG_EXPORT const char *jobcg_oom_cause_name(enum jobcg_oom_cause c)
{
	switch (c) {
	case JOBCG_OOM_JOB:
		return "job";
	case JOBCG_OOM_NODE:
		return "node";
	case JOBCG_OOM_NONE:
		break;
	}
	return "none";
}
