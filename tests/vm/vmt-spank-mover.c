/* A SPANK plugin for 60-slurm's check 16, loaded after jobcg_spank.so: its task_post_fork moves
 * each task into the cgroup directory its argument names, as Slurm's task/cgroup would after
 * jobcg placed the task. jobcg_spank.so must then fail the task before its exec. */
#include <stdio.h>
#include <sys/types.h>

#include <slurm/spank.h>

/* Slurm looks these symbols up: visible, unlike the project's default. */
#pragma GCC visibility push(default)

SPANK_PLUGIN(vmt_mover, 1);

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	char path[4096];
	pid_t pid = 0;
	FILE *f;

	if (ac < 1 || spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS || pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "%s/cgroup.procs", av[0]);
	f = fopen(path, "we");
	if (!f)
		return -1;
	fprintf(f, "%d\n", (int)pid);
	return fclose(f) == 0 ? 0 : -1;
}
