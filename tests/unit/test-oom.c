/* Unit tests for the OUT_OF_MEMORY verdict: the job's own limit versus a node-wide OOM. */
#include "jobcg/oom.h"
#include "tap.h"

int main(void)
{
	is_int(jobcg_oom_classify(0, 0), JOBCG_OOM_NONE, "no kill: no OOM");
	is_int(jobcg_oom_classify(0, 3), JOBCG_OOM_NONE, "limit hit but nothing killed: no OOM");
	is_int(jobcg_oom_classify(1, 1), JOBCG_OOM_JOB, "killed while the job's limit was hit");
	is_int(jobcg_oom_classify(2, 0), JOBCG_OOM_NODE, "killed without any limit hit: node-wide");
	is_str(jobcg_oom_cause_name(JOBCG_OOM_JOB), "job", "name job");
	is_str(jobcg_oom_cause_name(JOBCG_OOM_NODE), "node", "name node");
	is_str(jobcg_oom_cause_name(JOBCG_OOM_NONE), "none", "name none");
	return tap_done();
}
