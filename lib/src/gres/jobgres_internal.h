/* jobcg internal: what jobcg_step_gres_setup() prepared for a step, seen from inside (tests). */
#pragma once

#include "jobcg/jobgres.h"

struct jobcg_step_gres {
	unsigned ntasks;
	char ***task_env; /* per task: NULL-terminated "NAME=VALUE" strings to add to its env */
	char *devices;	  /* the step's devices, "gpu:0" */
};
