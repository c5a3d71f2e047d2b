/* Kernel test: processes added to a step but to no task land in user/task_special; tasks are
 * listed; pids of a task target are exactly its own. */
#include <signal.h>
#include <sys/stat.h>

#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

static bool in_cgroup(pid_t pid, const char *suffix)
{
	char p[64], line[PATH_MAX];
	FILE *f;
	bool found = false;

	snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
	f = fopen(p, "re");
	while (f && fgets(line, sizeof(line), f)) {
		size_t n = strlen(line), s = strlen(suffix);

		if (n && line[n - 1] == '\n')
			line[--n] = '\0';
		if (strncmp(line, "0::", 3) == 0 && n >= s && strcmp(line + n - s, suffix) == 0)
			found = true;
	}
	if (f)
		fclose(f);
	return found;
}

int main(void)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_target t;
	char *argv[] = {"sleep", "1000", NULL};
	pid_t outsider, task1, *pids = NULL;
	int *tasks = NULL, st;
	size_t n = 0;

	kcli_setup("special", "jobcg");
	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context\n");
		return 1;
	}
	is_int(jobcg_job_create(ctx, 41, NULL, 0, NULL), 0, "job 41");
	is_int(jobcg_step_create(ctx, 41, "extern", 0, NULL), 0, "step 41.extern");
	outsider = fork();
	if (outsider == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	is_int(jobcg_task_add_pid(ctx, 41, "extern", JOBCG_TASK_SPECIAL, outsider), 0,
	       "add a process to the step but no task");
	ok(in_cgroup(outsider, "/job_41/step_extern/user/task_special"), "it is in task_special");
	is_int(jobcg_task_spawn(ctx, 41, "extern", 1, argv, NULL, &task1), 0, "spawn task 1");
	ok(in_cgroup(task1, "/job_41/step_extern/user/task_1"), "task 1 is in task_1");
	is_int(jobcg_task_list(ctx, 41, "extern", &tasks, &n), 0, "list tasks");
	ok(n == 2 && tasks[0] == 1 && tasks[1] == JOBCG_TASK_SPECIAL, "tasks: 1, special");
	free(tasks);
	jobcg_target_parse("41.extern.special", &t);
	is_int(jobcg_pids(ctx, &t, &pids, &n), 0, "pids of 41.extern.special");
	ok(n == 1 && pids[0] == outsider, "exactly the added process");
	free(pids);
	jobcg_target_parse("41.extern", &t);
	is_int(jobcg_pids(ctx, &t, &pids, &n), 0, "pids of the step");
	is_int(n, 2, "both processes");
	free(pids);
	is_int(jobcg_task_add_pid(ctx, 41, "extern", 1, outsider), 0, "move it into task 1");
	ok(in_cgroup(outsider, "/job_41/step_extern/user/task_1"), "moved from task_special");
	is_int(jobcg_task_add_pid(ctx, 41, "nope", 0, outsider), -EINVAL, "invalid step refused");
	is_int(jobcg_task_add_pid(ctx, 41, "0", 0, outsider), -ENOENT,
	       "a step that does not exist is not made by adding a process");
	{
		char jdir[PATH_MAX], *mark = NULL;

		/* A job directory made by hand, or one whose creation died before its mark. */
		snprintf(jdir, sizeof(jdir), "%s/job_43", jobcg_ctx_root(ctx));
		ok(mkdir(jdir, 0755) == 0, "job 43 made by hand (no created mark)");
		is_int(jobcg_task_add_pid(ctx, 43, "extern", JOBCG_TASK_SPECIAL, outsider), -EBUSY,
		       "no process is put into a job without the created mark");
		ok(strstr(jobcg_last_error()->message, "not completely created") != NULL,
		   "...saying why");
		rmdir(jdir);
		/* A release that died after marking the job (its grants may be gone). */
		is_int(jobcg_job_xattr_set(ctx, 41, "removing", "1"), 0, "job 41 marked removing");
		is_int(jobcg_task_add_pid(ctx, 41, "extern", 1, outsider), -ESHUTDOWN,
		       "no process is put into a job being released");
		ok(in_cgroup(outsider, "/job_41/step_extern/user/task_1"), "it stays where it was");
		is_int(jobcg_job_xattr_get(ctx, 41, "removing", &mark), 0, "(mark read back)");
		free(mark);
	}
	is_int(jobcg_job_remove(ctx, 41, 0), 0, "remove the job (kills both)");
	ok(waitpid(outsider, &st, 0) == outsider && WIFSIGNALED(st), "added process was killed");
	ok(waitpid(task1, &st, 0) == task1 && WIFSIGNALED(st), "task was killed");
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
