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
 * What the keeper is told in its environment: the scope's cgroup (relative to the v2 mount, as
 * /proc/PID/cgroup shows it without its leading '/'), and how long after its start it must be
 * in it (or below it). The keeper starts in its starter's cgroup and is moved into the scope
 * afterwards; one whose starter was killed before the move would otherwise pause for ever
 * where it was (a login session): past the grace it checks once and leaves if not there.
 */
#define SCOPE_KEEPER_ENV_SCOPE "JOBCG_KEEPER_SCOPE"
#define SCOPE_KEEPER_ENV_GRACE "JOBCG_KEEPER_GRACE_MS"

/*
 * Start @exe as the keeper ("jobcg keeper") of the scope at @scope_rel, detached from the
 * caller (not its child, in a session of its own, no descriptor open): its pid into *ret_pid.
 * It leaves if it is not in the scope @grace_ms after it started. -errno with the error record
 * set when it could not be started: exec's errno when @exe would not run, fork's when no
 * process could be made.
 */
int scope_keeper_spawn(const char *exe, const char *scope_rel, unsigned grace_ms, pid_t *ret_pid);

/*
 * Is the process whose /proc/PID/cgroup text is @text in the cgroup @scope_rel (or below it)?
 * Its cgroup v2 line ("0::/path") is looked at; true when there is none to tell by.
 */
bool scope_keeper_in_scope(const char *text, const char *scope_rel);
