/* jobcg_spank.so: what Slurm hands a SPANK plugin, translated into jobcg's terms (step names,
 * gres.conf devices, plugin arguments; Slurm's cores are cputopo.h's). Plain functions: no
 * spank.h, unit-tested. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "jobcg/gres.h"
#include "jobcg/job.h"
#include "cputopo.h"
#include "parse.h"

/* Slurm's step ids beyond its numbered steps (slurm.h), repeated: this file builds without it. */
#define JSPANK_PENDING_STEP	0xfffffffdu
#define JSPANK_EXTERN_CONT	0xfffffffcu
#define JSPANK_BATCH_SCRIPT	0xfffffffbu
#define JSPANK_INTERACTIVE_STEP 0xfffffffau

/** jobcg's step id for Slurm's @step_id ("0", "batch", "extern", "interactive") into @ret
 * (JOBCG_STEP_ID_MAX bytes). -EINVAL (error set) for ids jobcg has no step for. */
int jspank_step_name(uint32_t step_id, char *ret);

/**
 * Map the GPU indices Slurm gave (@var=@value: "SLURM_STEP_GPUS", "0,2") onto this node's
 * devices in jobcg's gres.conf (@jobcg, read from @jobcg_conf), as jobcg_gres_set_format()
 * "gpu:0,2". With @slurm (Slurm's gres.conf for this node, read from @slurm_conf; may be
 * NULL) each index must name the same device file in both. -EINVAL naming both files when
 * the two configurations disagree or the value does not parse.
 */
int jspank_gpus_map(const struct jobcg_gres_node *jobcg, const char *jobcg_conf,
		    const struct jobcg_gres_node *slurm, const char *slurm_conf, const char *var,
		    const char *value, char **ret);

/**
 * jobcg's --gpu-bind (jobcg_gpu_bind_parse() syntax) for Slurm's @bind (SLURM_GPU_BIND, or the
 * gpu part of SLURM_TRES_BIND: "[verbose,]TYPE") over a step whose GPUs are @step_gpus
 * (SLURM_STEP_GPUS' node indices, "0,2"). single:N and per_task:N carry over; map_gpu:LIST
 * names node GPU indices (Slurm's, with "*N" repeats) and becomes positions among the step's
 * GPUs. *ret NULL when tasks are not bound: none, closest (NUMA affinity, which jobcg does not
 * know: every task keeps all of the step's GPUs), or no @bind. -EINVAL naming the value for
 * mask_gpu, a GPU the step does not hold, or what does not parse.
 */
int jspank_gpu_bind(const char *bind, const char *step_gpus, char **ret);
/* The gpu part of SLURM_TRES_BIND @tres_bind ("gres/gpu:[verbose,]TYPE", other items after a
 * ';'): what follows its "gpu:", cut at the next ';' in place; NULL when it has none. */
char *jspank_tres_gpu_bind(char *tres_bind);

/* The plugin's arguments (plugstack.conf). */
struct jspank_args {
	char *conf;	  /* conf=DIR: jobcg's config dir, %n = Slurm's node name (NULL: default) */
	char *slurm_gres; /* slurm_gres=PATH|none: Slurm's gres.conf to compare with */
	char *jobcg;	  /* jobcg=PATH: the jobcg that watches each step (NULL: the installed) */
};

/** Parse plugstack.conf arguments. -EINVAL naming the argument for an unknown one, one given
 * twice, or a path that is not absolute. */
int jspank_args_parse(int argc, char *const argv[], struct jspank_args *ret);
void jspank_args_done(struct jspank_args *a);

/** @tmpl with every "%n" replaced by @node ("%%" is "%"); NULL on ENOMEM or a bad '%'. */
char *jspank_expand(const char *tmpl, const char *node);

/**
 * A step's exit code as jobcg_step_run() gives it: the highest exit code of its tasks' wait
 * statuses, or 128+N for the first task killed by signal N.
 */
int jspank_exit_code(const int *status, unsigned n);

/* A process slurmstepd forked: its pid and start time (/proc/PID/stat field 22), so that a pid
 * reused by another process is never taken for it. */
struct jspank_child {
	pid_t pid;
	unsigned long long start;
};

/**
 * Parse a /proc/PID/task/TID/children file ("12 345 \n"): at most @max pids into @pids, their
 * count to *ret_n. -EINVAL for anything but decimal pids separated by blanks, -E2BIG for more
 * than @max.
 */
int jspank_children_parse(const char *text, pid_t *pids, size_t max, size_t *ret_n);

/** The parent pid (field 4) and start time (field 22) of /proc/PID/stat text @stat. -EINVAL if
 * malformed. */
int jspank_stat_parse(const char *stat, pid_t *ret_ppid, unsigned long long *ret_start);

/** Is @cmdline (@len bytes of /proc/PID/cmdline) exactly "sleep 100000000", the extern step's
 * process Slurm 22.05 runs (slurmstepd's _spawn_job_container)? */
bool jspank_is_extern_sleep(const char *cmdline, size_t len);
