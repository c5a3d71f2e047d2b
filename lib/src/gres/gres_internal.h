/* jobcg internal: the node's GRES table, shared by the files of gres/ that read its devices. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "jobcg/gres.h"

struct jobcg_gres_node {
	struct jobcg_gres_device *dev;
	size_t ndev;
};

/* Append ",item" (or "item") to a growing string; -ENOMEM. */
int gres_append(char **s, const char *item);
/* GRES types compare without case; NULL only matches NULL. */
bool gres_same_type(const char *a, const char *b);
