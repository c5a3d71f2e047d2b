/* jobcg internal: names of the tree's directories and the helpers that make and remove them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "context_internal.h"

#define TREE_KILL_TIMEOUT_MS 10000 /* how long removal waits for killed processes to be gone */
/* Longer than any creation of a job or step takes: one found without its completion mark by a
 * reader that does not hold the node lock (list) is taken for a creation that died. */
#define TREE_CREATE_WINDOW_SEC 10

/* The highest step number: above it Slurm keeps special step ids (jobcg_step_id_valid()). */
#define TREE_STEP_NUM_MAX 4294967279ULL

/* Whether a target (perhaps filled by hand) names a job, step or task: job 1..4294967294,
 * step "" or a step id NUL-terminated within its array, task JOBCG_TASK_ALL (any step),
 * JOBCG_TASK_SPECIAL or 0..JOBCG_TASK_MAX (a step only). 0 or -EINVAL with the record set. */
int tree_target_valid(const struct jobcg_target *t);
/* Whether @job is 1..4294967294 and @step (NULL: none, the job itself) a step id, for the calls
 * that take them apart. 0 or -EINVAL with the record set. */
int tree_ids_valid(uint32_t job, const char *step);
/* "job_<id>" -> id; -EINVAL for other names. */
int tree_parse_job_dirname(const char *name, uint32_t *ret);
/* "step_<sid>" -> sid (JOBCG_STEP_ID_MAX buffer); -EINVAL for other names. */
int tree_parse_step_dirname(const char *name, char *ret);
/* Absolute directories; NULL on ENOMEM. */
/* A reservation's directory is <root>/resv_<name>; a job inside it <root>/resv_<name>/job_<id>. */
#define TREE_RESV_PREFIX   "resv_"
#define TREE_RESV_NAME_MAX 32
/* [a-z0-9][a-z0-9_-]{0,31} */
bool tree_resv_name_valid(const char *name);
/* "resv_<name>" -> name (pointing into NAME); -EINVAL for other names. */
int tree_parse_resv_dirname(const char *name, const char **ret);
char *tree_resv_dir(const struct jobcg_ctx *ctx, const char *name);
/* Names of the reservation directories present (complete or not), NULL-terminated. */
int tree_resv_names(const struct jobcg_ctx *ctx, char ***ret);
/* The job's directory wherever it is (top level or inside a reservation); the top-level path when
 * the job exists nowhere (where a job without a reservation is made). NULL on ENOMEM. */
char *tree_job_dir(const struct jobcg_ctx *ctx, uint32_t job);
/* The reservation holding the job directory JOB_DIR (malloc'd name), NULL when none. */
char *tree_job_resv(const struct jobcg_ctx *ctx, const char *job_dir);
char *tree_step_dir(const struct jobcg_ctx *ctx, uint32_t job, const char *step);
char *tree_task_dir(const struct jobcg_ctx *ctx, uint32_t job, const char *step, int task);
/* A task's directory below its step's (@sdir may be any path to it, /proc/self/fd/N too). */
char *tree_task_subdir(const char *sdir, int task);
/* tree_task_dir() of a step id and task number checked first (-EINVAL, error set). */
int tree_task_dir_checked(const struct jobcg_ctx *ctx, uint32_t job, const char *step, int task,
			  char **ret);
/* Make step_<sid>/{jobcg,user} with controllers enabled top-down; -EEXIST if the step exists. */
int tree_make_step(const struct jobcg_ctx *ctx, const char *job_dir, const char *step);
/* Send @sig to every process in @dir and below: how many, or -errno (exited ones are fine). */
int tree_signal(const char *dir, int sig);
/* SIGKILL everything below @dir (cgroup.kill, else per pid) and wait for populated 0. */
int tree_kill(const char *dir, unsigned timeout_ms);
/* tree_kill() then remove bottom-up. A missing @dir is success. */
int tree_kill_and_remove(const char *dir);
/* The same for a step directory, its own layout removed leaf first without listing it. */
int tree_kill_and_remove_step(const char *sdir);

/* "pid:starttime" identifying the calling process (survives pid reuse checks): the client a
 * daemon acts for (jobcg_set_runner()) when it set one. */
char *tree_runner_self(void);
/* The same of this very process, whoever it acts for. */
char *tree_process_self(void);
/* Is the process described by a tree_runner_self() string still alive? An exited process that
 * its parent has not reaped yet (a zombie with no thread left) is not. */
bool tree_runner_alive(const char *runner);
/* A runner mark "PID:STARTTIME" (a trusted.jobcg.* xattr) as tree_runner_self() writes it, and
 * nothing else: -EINVAL otherwise. */
int tree_runner_parse(const char *runner, int *ret_pid, unsigned long long *ret_start);
/* The "Threads:" count of /proc/<pid>/status text, 0 when there is none that parses. */
unsigned tree_parse_threads(const char *status);
/* Field 22 (starttime) of /proc/<pid>/stat text; -EINVAL if malformed. */
int tree_parse_starttime(const char *stat, unsigned long long *ret);

/* When DIR (a job's or step's) was made, as near as cgroupfs tells (CLOCK_REALTIME
 * microseconds); 0 when unknown. */
uint64_t tree_dir_made_usec(const char *dir);
/* DIR was made more than TREE_CREATE_WINDOW_SEC ago. */
bool tree_half_made_old(const char *dir);
