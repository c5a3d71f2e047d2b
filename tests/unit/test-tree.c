/* Unit tests: job/step/task names, step id validation, targets, /proc/<pid>/stat parsing. */
#include "jobcg/job.h"
#include "tap.h"
#include "tree.h"

int main(void)
{
	struct jobcg_target t;
	char buf[64], sid[JOBCG_STEP_ID_MAX];
	uint32_t id = 0;
	unsigned long long st = 0;
	char *p;

	ok(jobcg_step_id_valid("0"), "step 0");
	ok(jobcg_step_id_valid("4294967279"), "largest numeric step");
	ok(!jobcg_step_id_valid("4294967280"), "above the numeric range");
	ok(jobcg_step_id_valid("batch") && jobcg_step_id_valid("extern") &&
	       jobcg_step_id_valid("interactive"),
	   "named steps");
	ok(!jobcg_step_id_valid("Batch"), "names are case sensitive");
	ok(!jobcg_step_id_valid("01"), "no leading zeros");
	ok(!jobcg_step_id_valid("-1") && !jobcg_step_id_valid("+1"), "no signs");
	ok(!jobcg_step_id_valid("") && !jobcg_step_id_valid(NULL), "empty / NULL");
	ok(!jobcg_step_id_valid("1/2") && !jobcg_step_id_valid("../x"), "no path characters");

	is_int(jobcg_job_id_parse("42", &id), 0, "job 42");
	is_int(id, 42, "job id value");
	is_int(jobcg_job_id_parse("0", &id), -EINVAL, "job 0 is invalid");
	is_int(jobcg_job_id_parse("4294967295", &id), -EINVAL, "job 2^32-1 is invalid");
	is_int(jobcg_job_id_parse("4294967294", &id), 0, "job 2^32-2 is valid");
	is_int(jobcg_job_id_parse("12a", &id), -EINVAL, "trailing garbage");
	is_int(jobcg_job_id_parse("99999999999999999999999", &id), -EINVAL, "overflow");

	is_int(jobcg_target_parse("42", &t), 0, "target 42");
	ok(t.job == 42 && t.step[0] == 0 && t.task == JOBCG_TASK_ALL, "target 42 fields");
	is_int(jobcg_target_parse("42.batch", &t), 0, "target 42.batch");
	is_str(t.step, "batch", "step batch");
	is_int(jobcg_target_parse("42.3.7", &t), 0, "target 42.3.7");
	ok(t.task == 7 && strcmp(t.step, "3") == 0, "task 7 of step 3");
	is_int(jobcg_target_parse("42.0.special", &t), 0, "target 42.0.special");
	is_int(t.task, JOBCG_TASK_SPECIAL, "task_special");
	is_int(jobcg_target_parse("42.x", &t), -EINVAL, "bad step");
	is_int(jobcg_target_parse("42.0.65536", &t), -EINVAL, "task out of range");
	is_int(jobcg_target_parse("42.0.1.2", &t), -EINVAL, "too many parts");
	is_int(jobcg_target_parse(".0", &t), -EINVAL, "missing job");

	jobcg_target_parse("42.extern.special", &t);
	is_str(jobcg_target_format(&t, buf, sizeof(buf)), "42.extern.special", "format round trip");
	p = jobcg_target_relpath(&t);
	is_str(p, "job_42/step_extern/user/task_special", "relpath of a special task");
	free(p);
	jobcg_target_parse("7.12.3", &t);
	p = jobcg_target_relpath(&t);
	is_str(p, "job_7/step_12/user/task_3", "relpath of a task");
	free(p);
	jobcg_target_parse("7.12", &t);
	p = jobcg_target_relpath(&t);
	is_str(p, "job_7/step_12", "relpath of a step");
	free(p);
	jobcg_target_parse("7", &t);
	p = jobcg_target_relpath(&t);
	is_str(p, "job_7", "relpath of a job");
	free(p);

	is_int(tree_parse_job_dirname("job_15", &id), 0, "job_15");
	is_int(id, 15, "id 15");
	is_int(tree_parse_job_dirname("job_015", &id), -EINVAL, "job_015 is not ours");
	is_int(tree_parse_job_dirname("system", &id), -EINVAL, "system is not a job");
	is_int(tree_parse_job_dirname("job_", &id), -EINVAL, "job_ alone");
	is_int(tree_parse_step_dirname("step_interactive", sid), 0, "step_interactive");
	is_str(sid, "interactive", "step id interactive");
	is_int(tree_parse_step_dirname("step_x", sid), -EINVAL, "step_x is not a step");
	is_int(tree_parse_step_dirname("user", sid), -EINVAL, "user is not a step");

	is_int(tree_parse_starttime("1234 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 "
				    "987654 19 20",
				    &st),
	       0, "stat with ') ' inside comm");
	is_int(st, 987654, "starttime is field 22");
	is_int(tree_parse_starttime("1 (x) S 1 2", &st), -EINVAL, "truncated stat");
	is_int(tree_parse_starttime("garbage", &st), -EINVAL, "no comm");
	return tap_done();
}
