/* Unit test: jobcg_spank.so's hooks as slurmstepd and srun call them, the plugin loaded with
 * dlopen() against stand-ins for Slurm's spank_* and slurm_* calls (this program exports them,
 * as slurmstepd does). What needs no jobcg tree: how a bad plugstack.conf line fails. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <slurm/spank.h>

#include "tap.h"

/* What this "slurmstepd" tells the plugin, and what the plugin said. */
static int remote_ctx = 1;
static uint32_t job_id = 42, step_id = 0;
static char logged[8192];
/* Written by the task (a child here, as in slurmstepd), read by the test: shared memory. */
static char *task_log;
#define TASK_LOG_SIZE 4096

#pragma GCC visibility push(default)
int spank_remote(spank_t sp)
{
	(void)sp;
	return remote_ctx;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;
	spank_err_t r = ESPANK_SUCCESS;

	(void)sp;
	va_start(ap, item);
	if (item == S_JOB_ID)
		*va_arg(ap, uint32_t *) = job_id;
	else if (item == S_JOB_STEPID)
		*va_arg(ap, uint32_t *) = step_id;
	else
		r = ESPANK_ERROR;
	va_end(ap);
	return r;
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	(void)sp, (void)var, (void)buf, (void)len;
	return ESPANK_ENV_NOEXIST;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
	(void)sp, (void)var, (void)val, (void)overwrite;
	return ESPANK_ERROR;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
	(void)sp, (void)var;
	return ESPANK_SUCCESS;
}

static void vlog(char *buf, size_t size, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void vlog(char *buf, size_t size, const char *fmt, va_list ap)
{
	size_t n = strlen(buf);

	if (n + 2 < size) {
		vsnprintf(buf + n, size - n - 1, fmt, ap);
		strcat(buf, "\n");
	}
}

#define LOGGER(name, buf)                                                                          \
	void name(const char *fmt, ...)                                                            \
	{                                                                                          \
		va_list ap;                                                                        \
		va_start(ap, fmt);                                                                 \
		vlog(buf, sizeof(buf), fmt, ap);                                                   \
		va_end(ap);                                                                        \
	}
LOGGER(slurm_error, logged)
LOGGER(slurm_info, logged)
LOGGER(slurm_verbose, logged)
LOGGER(slurm_debug, logged)
LOGGER(slurm_debug2, logged)
LOGGER(slurm_debug3, logged)
void slurm_spank_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(task_log, TASK_LOG_SIZE, fmt, ap);
	va_end(ap);
}
#pragma GCC visibility pop

typedef int hook_f(spank_t, int, char **);
static hook_f *h_init, *h_task_init, *h_exit;

/* Exit statuses of the task's process when task_init returned instead of exiting. */
#define RETURNED_0     10
#define RETURNED_ERROR 11

/*
 * One step's life as slurmstepd runs it with @av as plugstack.conf's arguments, up to its first
 * task's task_init, which runs in the task's own process (a child, as slurmstepd's exec_task
 * calls it): *init_r what init returned, *task_r the task's exit status (RETURNED_* when the
 * hook returned; -2 when init failed and no task ran).
 */
static void step(char **av, int ac, int *init_r, int *task_r)
{
	int status = 0;
	pid_t pid;

	logged[0] = task_log[0] = 0;
	*init_r = h_init(NULL, ac, av);
	*task_r = -2;
	if (*init_r == 0) {
		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			int r = h_task_init(NULL, ac, av);

			/* An optional plugin's -1 is ignored by slurmstepd: the task would exec. */
			_exit(r == 0 ? RETURNED_0 : RETURNED_ERROR);
		}
		if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
			*task_r = WEXITSTATUS(status);
		else
			*task_r = -3;
	}
	(void)h_exit(NULL, ac, av);
}

int main(void)
{
	char *bogus[] = {"conf=/nonexistent-jobcg-conf", "jobcg=/bin/true", "bogus"};
	char *relative[] = {"conf=etc/jobcg"};
	char *unknown[] = {"slurm_gres=none", "speed=fast"};
	int ir, tr;
	void *so;

	task_log =
	    mmap(NULL, TASK_LOG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!ok(task_log != MAP_FAILED, "shared memory for the task's log"))
		return tap_done();

	so = dlopen(JOBCG_SPANK_SO, RTLD_NOW | RTLD_LOCAL);
	if (!so) {
		fprintf(stderr, "%s\n", dlerror());
		ok(0, "dlopen %s", JOBCG_SPANK_SO);
		return tap_done();
	}
	h_init = (hook_f *)dlsym(so, "slurm_spank_init");
	h_task_init = (hook_f *)dlsym(so, "slurm_spank_task_init");
	h_exit = (hook_f *)dlsym(so, "slurm_spank_exit");
	if (!ok(h_init && h_task_init && h_exit, "the plugin exports init, task_init and exit"))
		return tap_done();

	/* In slurmstepd: a failed init is a launch failure (srun exits 0, a batch job drains the
	 * node); the plugin fails every task instead, before its exec, as for any other fault. */
	step(bogus, 3, &ir, &tr);
	is_int(ir, 0, "a bad argument: init lets slurmstepd go on (no launch failure)");
	/* Exits itself: slurmstepd runs the task anyway when an `optional` plugin returns -1. */
	is_int(tr, 1, "a bad argument: the task exits 1 in task_init, before its exec");
	ok(strstr(task_log, "'bogus'") && strstr(task_log, "job 42 step 0"),
	   "the task's stderr names the argument, the job and the step: %s", task_log);
	ok(strstr(logged, "'bogus'") != NULL, "slurmd's log names it too: %s", logged);

	step_id = 0xfffffffb; /* SLURM_BATCH_SCRIPT */
	step(relative, 1, &ir, &tr);
	is_int(ir, 0, "a relative conf=, batch step: init lets slurmstepd go on (no drain)");
	is_int(tr, 1, "a relative conf=, batch step: the script exits 1 before its exec");
	ok(strstr(task_log, "absolute path") && strstr(task_log, "step batch"), "and says why: %s",
	   task_log);

	step_id = 3;
	step(unknown, 2, &ir, &tr);
	ok(ir == 0 && tr == 1 && strstr(task_log, "'speed=fast'"),
	   "an unknown argument fails the task too: %s", task_log);

	/* srun, sbatch, salloc: no step to fail, the command stops at once. */
	remote_ctx = 0;
	step(bogus, 3, &ir, &tr);
	is_int(ir, -1, "in srun (local context) a bad argument fails init: srun stops");
	ok(strstr(logged, "'bogus'") != NULL, "naming it: %s", logged);
	return tap_done();
}
