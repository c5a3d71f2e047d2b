/* jobcg internal: state shared by the cgroup.conf and gres.conf readers while one configuration
 * loads. */
#pragma once

#include <stdbool.h>

#include "config_internal.h"
#include "confparse.h"

#define CGROUP_MAX_KEYS 64

struct confload {
	struct jobcg_config *c;	 /* being filled; freed by the caller on error */
	unsigned flags;		 /* JOBCG_CONFIG_* */
	bool no_include;	 /* fuzzing: Include is an error */
	bool trusted_paths;	 /* root's configuration directory: see struct conf_parser */
	const char *trusted_dir; /* that directory, checked, and open as trusted_dirfd (or -1) */
	int trusted_dirfd;
	struct jobcg_origin cg_origin[CGROUP_MAX_KEYS]; /* per cgroup.conf key, table order */
	void *gres;					/* gresconf.c's cross-line state */
};

/* Record a warning "file:line: text" in c->warnings and log it. */
void confload_warn(struct confload *l, const char *file, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The warning for Key+=Value (or -=, *=, /=): read as @key=Value, as Slurm reads it. */
void confload_warn_op(struct confload *l, const char *file, const struct conf_pair *pr,
		      const char *key);

/* Parse @path (@buf NULL; a missing file is no error) or the buffer @buf, calling @fn with
 * @l for each statement; every file read is listed in the configuration's files. */
int confload_parse(struct confload *l, const char *path, const char *buf, size_t len,
		   conf_stmt_fn fn);

/* cgroupconf.c */
int cgconf_defaults(struct jobcg_cgroup_conf *cg);
/* Parse @path (buf NULL) or the buffer @buf as cgroup.conf. A missing @path is not an error. */
int cgconf_parse(struct confload *l, const char *path, const char *buf, size_t len);
/* Apply the environment overrides (unless JOBCG_CONFIG_NO_ENV) and list the entries. */
int cgconf_finish(struct confload *l);
void cgconf_done(struct jobcg_cgroup_conf *cg);

/* gresconf.c */
int gres_conf_parse(struct confload *l, const char *path, const char *buf, size_t len);
/* stat() the device files (unless JOBCG_CONFIG_NO_STAT), number records, set AutoDetect. */
int gres_conf_finish(struct confload *l);
void gres_conf_done(struct jobcg_gres_conf *g);
/* Free the cross-line state (after finish or on error). */
void gres_conf_state_free(struct confload *l);

/* config.c: load from in-memory buffers (fuzzing): Include is refused, the environment ignored.
 * A NULL buffer means no such file. */
int config_load_buffers(const char *cgroup_buf, size_t cgroup_len, const char *gres_buf,
			size_t gres_len, const char *hostname, unsigned flags,
			struct jobcg_config **ret);
