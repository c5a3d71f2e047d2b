/* jobcg internal: the node's GRES table, shared by the files of gres/ that read its devices. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "config_internal.h"
#include "jobcg/gres.h"

struct jobcg_gres_node {
	struct jobcg_gres_device *dev;
	size_t ndev;
};

/* jobcg_gres_node_new() from gres.conf records alone (the tests build them by hand). */
int gres_node_new(const struct jobcg_gres_conf *conf, struct jobcg_gres_node **ret);

/* Append ",item" (or "item") to a growing string; -ENOMEM. */
int gres_append(char **s, const char *item);
/* GRES types compare without case; NULL only matches NULL. */
bool gres_same_type(const char *a, const char *b);

/*
 * Where a node's Slurm configuration is, in the order looked in (NULL-terminated):
 * /etc/slurm (Slurm's packages), then /run/slurm/conf (configless mode: the link slurmd makes
 * to its cached copy of slurmctld's files).
 */
extern const char *const slurm_conf_dirs[];
/* The first <dir>/@name of slurm_conf_dirs that exists, in @buf: 0, else -ENOENT. */
int slurm_conf_find(const char *name, char buf[PATH_MAX]);

/* Does Slurm's slurm.conf @path (Include files followed) list gpu in GresTypes=, the latest
 * one? 0 and *ret, or a negative errno with the error record naming the file and line. */
int slurm_conf_gres_gpu(const char *path, bool *ret);
