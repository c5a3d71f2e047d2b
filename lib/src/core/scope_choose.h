/* jobcg internal: the scope backend chooser (scope.c). */
#pragma once

#include "scope.h"

/* systemd is the running init and IgnoreSystemd is not set. */
bool scope_use_systemd(const struct jobcg_config *conf);
/* Ensure the tree root with the chosen backend (falling back to mkdir per
 * IgnoreSystemdOnFailure); returns the backend used and the absolute root. */
int scope_ensure(const struct jobcg_config *conf, const char *mount, const char *root_rel,
		 const struct scope_backend **ret_backend, char **ret_root);
/* Name of the backend scope_ensure() would try first. */
const char *scope_backend_name(const struct jobcg_config *conf);
/* The same, when whether systemd runs (scope_systemd_running()) is already known. */
const char *scope_backend_name_for(const struct jobcg_config *conf, bool systemd_running);
