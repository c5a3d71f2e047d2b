/* jobcg internal: appending job and step records to the accounting log (acct.c). */
#pragma once

#include "jobcg/acct.h"

/* One record; @step_id NULL for the job's. @exit_code -1 and no signal: end not seen. */
int acct_log_append(struct jobcg_ctx *ctx, uint32_t job_id, const char *step_id,
		    uint64_t start_usec, int exit_code, int exit_signal, unsigned ntasks,
		    bool cancelled, const struct jobcg_acct *a);
