/* jobcg internal: pure helpers of the systemd scope backend (unit tested without systemd). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/*
 * The cgroup path (relative to the v2 mount, no leading '/') systemd gives a slice unit:
 * "system.slice" -> "system.slice", "a-b.slice" -> "a.slice/a-b.slice", "-.slice" -> "".
 * -EINVAL with the error record set for names systemd would refuse.
 */
int scope_slice_path(const char *slice, char **ret);

/* Where systemd puts scope @scope in @slice: "<slice path>/<scope>". -EINVAL for bad names. */
int scope_expected_root(const char *slice, const char *scope, char **ret);

/* A unit name systemd accepts for a scope: [A-Za-z0-9:_.\-], at most 255 bytes, ".scope". */
bool scope_unit_name_valid(const char *name);

/* The keeper's command line as /proc/<pid>/cmdline shows it ("jobcg\0keeper\0"). */
#define SCOPE_KEEPER_ARGV0 "jobcg"
#define SCOPE_KEEPER_ARGV1 "keeper"

/*
 * Start @exe as the scope's keeper ("jobcg keeper"), detached from the caller (not its child,
 * in a session of its own, no descriptor open): its pid into *ret_pid. -errno with the error
 * record set when it could not be started: exec's errno when @exe would not run, fork's when
 * no process could be made.
 */
int scope_keeper_spawn(const char *exe, pid_t *ret_pid);
