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
	is_int(kcli(NULL, "release", "9", NULL), 0, "release 9");
	is_int(kcli_count_dirs(root), 1, "only system/ left");
	return tap_done();
}
