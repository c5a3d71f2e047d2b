/* jobcg CLI: printing decoded device rules (text and JSON), shared by decode, devices, who-has. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "jobcg/decode.h"

static inline bool streq_dash(const char *s)
{
	return strcmp(s, "-") == 0;
}

/* Device nodes found under /dev, to name decoded rules. */
struct devnames;
struct devnames *devnames_load(const char *root);
/* Space-separated node paths for a device ("" when none); valid until devnames_free(). */
const char *devnames_get(const struct devnames *dn, char type, unsigned major, unsigned minor);
void devnames_free(struct devnames *dn);

/* Rule lines (and "# note" lines); with @dn, c/b MAJ:MIN lines get their /dev names. */
void decode_out_text(FILE *f, const struct jobcg_decoded *d, const struct devnames *dn);
/* {"rules":[{"type","major","minor","access"}...],"notes":[...]} ("*" for wildcards). */
struct json_object *decode_out_json(const struct jobcg_decoded *d);

/*
 * Resolve a `jobcg devices` or `jobcg decode --cgroup` argument: an absolute cgroup path, JOB
 * or JOB.STEP (a job id, a step id) under the jobcg root of @g's configuration (JobcgRoot=,
 * $JOBCG_ROOT), also inside a reservation, or a path relative to the v2 mount. -ECANCELED when
 * the configuration did not load or names no such job or step (the error is printed). Kept in one
 * place until the tree API provides it.
 */
struct cli_global;
int resolve_cgroup_arg(const struct cli_global *g, const char *arg, char *buf, size_t size);

/* Job and step ids from a cgroup path ("job_42", "step_0", "step_batch"), "" when absent. */
void job_step_from_path(const char *path, char *job, size_t jsize, char *step, size_t ssize);
