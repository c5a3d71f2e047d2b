/* jobcg internal: what the library's other modules need of an open device policy. */
#pragma once

#include <stdbool.h>

#include "jobcg/devices.h"

/*
 * Whether a policy opened earlier still holds the maps pinned now (always true in linear mode):
 * a policy kept open across calls must not write into maps that were unpinned and replaced.
 */
bool devpolicy_current(const struct jobcg_devpolicy *p);

/*
 * Whether the cgroup at PATH lists its node-mode grant in a key index (so the grant is in
 * place); false when unknown: no grant, linear mode, or xattrs refused.
 */
bool devpolicy_indexed(const char *path);
