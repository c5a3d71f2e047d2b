/* Kernel test: 200 short steps in a row (ephemeral jobs and steps of one job) leave nothing. */
#include "kcli.h"

int main(void)
{
	const char *root = kcli_setup("cli-loop", "jobcg");
	int fails = 0, i;

	for (i = 0; i < 100; i++)
		if (kcli(NULL, "run", "--", "true", NULL) != 0)
			fails++;
	is_int(fails, 0, "100 ephemeral jobs ran");
	is_int(kcli_count_dirs(root), 1, "nothing but system/ left after 100 ephemeral jobs");

	is_int(kcli(NULL, "alloc", "9", NULL), 0, "alloc 9");
	fails = 0;
	for (i = 0; i < 100; i++)
		if (kcli(NULL, "run", "--job", "9", "--", "sh", "-c", "sleep 100 & :", NULL) != 0)
			fails++;
	is_int(fails, 0, "100 steps of job 9 (each leaving a background process) ran");
	is_int(kcli_count_dirs(root), 2, "only system/ and job_9/ left");
	/* Concurrent runners: ids (ephemeral jobs, step numbers) are picked under the node lock. */
	{
		char *eph[] = {"run", "--", "sh", "-c", "exit 0", NULL};
		char *in9[] = {"run", "--job", "9", "--", "true", NULL};
		pid_t pids[16];
		int bad = 0, st;

		for (int round = 0; round < 5; round++) {
			for (int k = 0; k < 16; k++)
				pids[k] = kcli_start(k % 2 ? eph : in9, NULL, NULL);
			for (int k = 0; k < 16; k++)
				if (pids[k] < 0 || waitpid(pids[k], &st, 0) != pids[k] ||
				    !WIFEXITED(st) || WEXITSTATUS(st) != 0)
					bad++;
		}
		is_int(bad, 0,
		       "80 concurrent runs (ephemeral jobs and steps of job 9) all succeed");
		is_int(kcli_count_dirs(root), 2, "and leave only system/ and job_9/");
	}
	is_int(kcli(NULL, "release", "9", NULL), 0, "release 9");
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	return tap_done();
}
