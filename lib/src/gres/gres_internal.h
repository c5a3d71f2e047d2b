/* jobcg internal: the node's GRES table, shared by the files of gres/ that read its devices. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "config_internal.h"
#include "parse.h"
#include "jobcg/gres.h"

struct jobcg_gres_node {
	struct jobcg_gres_device *dev;
	size_t ndev;
	const struct jobcg_gres_conf *conf; /* made from; its Count-only records have no device */
	/* Per device (by position): its record's Cores= (Slurm's core indices) as CPU ids, for
	 * matching the CPUs a job runs on. NULL when no record has Cores=, or when the node's
	 * topology could not be read: then the indices are taken as CPU ids. */
	uint64_t (*dev_cpus)[JOBCG_CPU_MAX / 64];
	bool cores_tried; /* gres_node_cores_to_cpus() ran (dev_cpus filled or left NULL) */
};

/* Fill @n's dev_cpus from the node's topology, once (a cache of the table's own). */
void gres_node_cores_to_cpus(const struct jobcg_gres_node *n);

/* Do the CPUs @cpus (CPU ids; NULL: no preference) meet device @d's Cores=? Exposed for the
 * unit test. */
bool gres_cores_match(const struct jobcg_gres_node *n, const struct jobcg_gres_device *d,
		      const uint64_t *cpus, size_t cpus_words);

/* jobcg_gres_node_new() from gres.conf records alone (the tests build them by hand). */
int gres_node_new(const struct jobcg_gres_conf *conf, struct jobcg_gres_node **ret);

/* Append ",item" (or "item") to a growing string; -ENOMEM. */
int gres_append(char **s, const char *item);
/* GRES types compare without case; NULL only matches NULL. */
bool gres_same_type(const char *a, const char *b);

/*
 * Where a node's Slurm configuration is, in the order Slurm looks: the directory of
 * SLURM_CONF alone when it is set (slurmd exports the slurm.conf it reads, from -f, its
 * configless cache or the default, to every slurmstepd; Slurm's commands honour it too, and
 * Slurm reads gres.conf beside slurm.conf), else /etc/slurm (Slurm's packages), then
 * /run/slurm/conf (configless mode: the link slurmd makes to its cached copy of slurmctld's
 * files). A SLURM_CONF that is not an absolute path gives no directory: it says nothing
 * certain about where slurmd's files are.
 */
struct slurm_dirs {
	const char *dir[2];
	size_t n;
	const char *slurm_conf; /* the SLURM_CONF that chose them, NULL for the defaults */
	char buf[PATH_MAX];
};
/* @slurm_conf: SLURM_CONF's value, NULL or "" when unset. */
void slurm_dirs_init(struct slurm_dirs *d, const char *slurm_conf);
/* The first <dir>/@name of @d that exists, in @buf: 0, else -ENOENT. */
int slurm_dirs_find(const struct slurm_dirs *d, const char *name, char buf[PATH_MAX]);
/* Where @d looked, for messages: "/etc/slurm or /run/slurm/conf", "/x (SLURM_CONF's
 * directory)", or why nowhere. */
const char *slurm_dirs_describe(const struct slurm_dirs *d, char *buf, size_t size);

/* What jobcg reads of a slurm.conf, Include files followed, the latest line of a key winning
 * as in Slurm. */
struct slurm_conf_facts {
	bool gres_gpu;	   /* GresTypes= lists gpu */
	char *plugstack;   /* PlugStackConfig=, NULL when not set */
	char *proctrack;   /* ProctrackType=, NULL when not set */
	char *task_plugin; /* TaskPlugin=, NULL when not set */
};
/* Slurm's slurm.conf @path: 0 and *ret (free with slurm_conf_facts_done()), or a negative errno
 * with the error record naming the file and line (-ENOENT: no such file). */
int slurm_conf_read(const char *path, struct slurm_conf_facts *ret);
void slurm_conf_facts_done(struct slurm_conf_facts *f);

/* The slurm.conf Slurm uses with @d: SLURM_CONF itself when absolute, else the first
 * <dir>/slurm.conf; -ENOENT (error set) when none. */
int slurm_conf_locate(const struct slurm_dirs *d, char buf[PATH_MAX]);

/* Node @node's Gres= in slurm.conf @path (Include followed; NodeName= hostlists and
 * NodeName=DEFAULT as Slurm reads them): *ret, "" when the node has none; -ENOENT (error set)
 * when the file or the node's line is missing, -EINVAL for a NodeName= that does not parse. */
int slurm_conf_node_gres(const char *path, const char *node, char **ret);

/* slurm_conf_read() and slurm_conf_node_gres() of the text @buf (@len bytes) named @name, an
 * Include in it an error (no file is opened): for fuzzing. */
int slurm_conf_read_buffer(const char *name, const char *buf, size_t len,
			   struct slurm_conf_facts *ret);
int slurm_conf_node_gres_buffer(const char *name, const char *buf, size_t len, const char *node,
				char **ret);

/* One GPU type of a node's Gres=, in Slurm's order (the first time the type appears). */
struct gpu_type {
	char *name;
	uint64_t count;
};
/*
 * slurm.conf's Gres= of a node (gpu:2,gpu:a100:2(S:0-1),gpu:tesla:no_consume:1,mps:100) as
 * slurmd reads it (_get_gres_cnt, gres_add_type): the gpu types in their first order with
 * their counts (free with slurm_gpu_types_free()), or none and *ret_untyped, the count of
 * untyped GPUs. -EINVAL (error set) for a count that does not parse.
 */
int slurm_gres_gpu_types(const char *gres, struct gpu_type **ret, size_t *ret_n,
			 uint64_t *ret_untyped);
void slurm_gpu_types_free(struct gpu_type *t, size_t n);

/*
 * Slurm's gres.conf @g for one node (read with JOBCG_CONFIG_NO_STAT from @gres_path), its gpu
 * records renumbered the way slurmd 22.05 numbers them (_merge_config, then
 * common_node_config_load): the gres.conf lines of the node's slurm.conf @node_gres types in
 * that Gres= order (case-insensitive type match; without types the lines in order), each
 * type's lines taken until its count, the last one cut short; Name= lines before NodeName=
 * lines; each device file the next index. Lines slurmd leaves out are dropped. With AutoDetect
 * other than off slurmd sorts what the driver reports, which jobcg cannot repeat:
 * -EOPNOTSUPP (error set). -EINVAL for a Gres= that does not parse.
 */
int slurm_gpu_order(struct jobcg_gres_conf *g, const char *gres_path, const char *node_gres,
		    const char *slurm_conf, const char *node);

/* slurm_conf_node_gres() for @node in @slurm_conf, slurm_gpu_order() on @sconf (changed in
 * place), then its gres table: Slurm's GPU indices as slurmd gives them. */
int slurm_gpu_node_new(struct jobcg_config *sconf, const char *gres_path, const char *slurm_conf,
		       const char *node, struct jobcg_gres_node **ret);

/* One line of Slurm's plugstack.conf, as Slurm reads it: `include GLOB`, a plugin line naming
 * jobcg_spank.so, or anything else. */
enum slurm_plugstack_line {
	SLURM_PLUGSTACK_OTHER,
	SLURM_PLUGSTACK_INCLUDE, /* *ret_arg: the glob */
	SLURM_PLUGSTACK_JOBCG,	 /* *ret_arg: its slurm_gres= argument, "" when none */
	/* The same, loaded `optional`: Slurm ignores a failure of such a plugin (to load, or a
	 * hook's), and the step runs without it. */
	SLURM_PLUGSTACK_JOBCG_OPTIONAL,
};
/* @line (NUL-terminated, cut in place; its '#' comment dropped). *ret_arg points into @line or
 * is "". */
enum slurm_plugstack_line slurm_plugstack_line(char *line, const char **ret_arg);
