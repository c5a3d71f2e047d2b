/* Unit tests for adopt's pure parts: which job a login goes to, a process's uid and cgroup, and
 * the job a cgroup path belongs to. */
#include "adopt_internal.h"
#include "tap.h"
#include "util.h"

int main(void)
{
	const struct adopt_candidate c[] = {
	    {.id = 10, .have_owner = 1, .uid = 1000, .created_sec = 100, .joinable = 1},
	    {.id = 11, .have_owner = 1, .uid = 1001, .created_sec = 300, .joinable = 1},
	    {.id = 12, .have_owner = 1, .uid = 1000, .created_sec = 200, .joinable = 1},
	    {.id = 9, .have_owner = 1, .uid = 1000, .created_sec = 200, .joinable = 1},
	    {.id = 99, .have_owner = 0, .uid = 1000, .created_sec = 900, .joinable = 1},
	    /* newest, but half created, being released or ephemeral */
	    {.id = 98, .have_owner = 1, .uid = 1000, .created_sec = 950, .joinable = 0},
	    {.id = 97, .have_owner = 1, .uid = 1002, .created_sec = 0, .joinable = 0},
	};
	char *s = NULL;
	uid_t u = 0;
	uint32_t id = 0;

	is_int(adopt_choose(c, 7, 1000), 2,
	       "the newest joinable job of uid 1000 wins (equal time: higher id)");
	is_int(adopt_choose(c, 7, 1001), 1, "uid 1001 has exactly one job");
	is_int(adopt_choose(c, 7, 1003), -1, "a user without a job gets none");
	is_int(adopt_choose(c, 1, 1000), 0, "a single candidate");
	is_int(adopt_choose(c, 0, 1000), -1, "no jobs at all");
	is_int(adopt_choose(&c[4], 1, 1000), -1, "a job without a recorded owner is never chosen");
	is_int(adopt_choose(&c[5], 1, 1000), -1,
	       "a job that is not joinable is never chosen, however new");
	is_int(adopt_choose(c, 7, 1002), -1, "a user whose only job is half created gets none");

	is_int(adopt_parse_status_uid("Name:\tsshd\nUid:\t1000\t0\t0\t0\nGid:\t1\n", &u), 0,
	       "Uid line parsed");
	is_int(u, 1000, "the real uid is the first field");
	is_int(adopt_parse_status_uid("Name:\tx\n", &u), -EINVAL, "no Uid line");
	is_int(adopt_parse_status_uid("Uid:\tabc\n", &u), -EINVAL, "garbage uid");
	u = 7;
	is_int(adopt_parse_status_uid("Uid:\t12x\t0\t0\t0\n", &u), -EINVAL, "'12x' is not a uid");
	is_int(adopt_parse_status_uid("Uid:\t+5\t0\t0\t0\n", &u), -EINVAL, "nor is '+5'");
	is_int(adopt_parse_status_uid("Uid:\t4294967295\n", &u), -EINVAL, "nor (uid_t)-1");
	is_int(u, 7, "output untouched on failure");
	is_int(adopt_parse_status_uid("Uid:\t0", &u), 0, "a Uid line at the very end");
	is_int(u, 0, "reads 0");

	is_int(adopt_parse_proc_cgroup("12:devices:/x\n0::/user.slice/session-3.scope\n", &s), 0,
	       "the v2 line of a hybrid /proc/PID/cgroup");
	is_str(s, "/user.slice/session-3.scope", "...its path");
	free(s);
	s = NULL;
	is_int(adopt_parse_proc_cgroup("0::/\n", &s), 0, "the root cgroup");
	is_str(s, "/", "...is /");
	free(s);
	is_int(adopt_parse_proc_cgroup("1:name=systemd:/x\n", &s), -EINVAL, "no v2 line");
	s = NULL;
	is_int(adopt_parse_proc_cgroup("12:memory:/slurm\n0::/a/task_1", &s), 0,
	       "a v2 line without its newline, last");
	is_str(s, "/a/task_1", "...its whole path");
	free(s);

	is_int(
	    adopt_job_of_path("/cg/jobcg", "/cg/jobcg/job_42/step_extern/user/task_special", &id),
	    1, "a task below job_42 is in a job");
	is_int(id, 42, "...job 42");
	is_int(adopt_job_of_path("/cg/jobcg", "/cg/jobcg/job_7", &id), 1, "the job dir itself");
	is_int(id, 7, "...job 7");
	is_int(adopt_job_of_path("/cg/jobcg", "/cg/jobcg/system", &id), 0, "system/ is no job");
	is_int(adopt_job_of_path("/cg/jobcg", "/cg/jobcg2/job_1", &id), 0,
	       "a sibling tree with the root as prefix is not ours");
	is_int(
	    adopt_job_of_path("/cg/jobcg", "/cg/user.slice/user-1000.slice/session-3.scope", &id),
	    0, "a logind session scope is no job");
	is_int(adopt_job_of_path("/cg/jobcg", "/cg/jobcg/job_x1", &id), 0, "job_x1 is no job");
	is_int(adopt_job_of_path("/cg/jobcg", "/cg/jobcg/job_0", &id), 0, "job_0 is no job");
	is_int(adopt_job_of_path("/cg/jobcg", "/cg/jobcg/resv_gpu-pool/job_43/step_0/user/task_0",
				 &id),
	       1, "a task of a job inside a reservation is in a job");
	is_int(id, 43, "...job 43");
	is_int(adopt_job_of_path("/cg/jobcg", "/cg/jobcg/resv_gpu-pool", &id), 0,
	       "the reservation itself is no job");
	is_int(adopt_job_of_path("/cg/jobcg", "/cg/jobcg/resv_Bad/job_43", &id), 0,
	       "below a directory that is no reservation: no job");
	return tap_done();
}
