/* jobcg internal: pause points, flags and failures on request that let tests stop a jobcg
 * process at a named place, make it act as on another host, or make one of its changes fail. */
#pragma once

#include <errno.h>
#include <stdbool.h>

/*
 * A race between two jobcg processes (an adopt and a release, a crash between two writes) is
 * reproduced by stopping one of them at a named point. Only builds configured with
 * -Dtest_hooks=true have them; in every other build test_pause() is empty and reads nothing,
 * so no environment variable can stall an installed jobcg.
 *
 * With JOBCG_TEST_PAUSE=POINT[,POINT...] and JOBCG_TEST_PAUSE_DIR=DIR, reaching POINT creates
 * DIR/POINT.reached and waits (at most 60 s) until DIR/POINT.go exists; with
 * JOBCG_TEST_CRASH=POINT the process is killed with SIGKILL there instead.
 */
#ifdef JOBCG_TEST_HOOKS
void test_pause(const char *point);
#else
static inline void test_pause(const char *point)
{
	(void)point;
}
#endif

/*
 * Behaviour a test asks for that the host cannot give (JOBCG_TEST_FLAGS=FLAG[,FLAG...]), in
 * -Dtest_hooks=true builds only; always false in others:
 *   job-lock-file  the job's freeze lock as on a kernel without cgroup.kill (joblock.c)
 *   no-cgroup-kill kills as on a kernel without cgroup.kill: freeze, then each pid (tree.c)
 *   kill-slow      then waits 100 ms between listing the pids and signalling them
 *   no-pidfd       as without pidfd_open(): signals go by kill() (tree.c), the metrics
 *                  relay watches its HTTP process by polling (cli/metrics_http.c)
 *   job-mark-fails a job's creation fails at its last write, the complete mark, after every
 *                  hook attached (job.c): what the rollback undoes can be seen
 *   step-mark-fails a step's creation likewise (job.c)
 *   no-map-batch   maps read back for decoding are read key by key, as on a kernel without
 *                  BPF_MAP_LOOKUP_BATCH (before 5.6; decode/inspect.c)
 */
#ifdef JOBCG_TEST_HOOKS
bool test_flag(const char *flag);
#else
static inline bool test_flag(const char *flag)
{
	(void)flag;
	return false;
}
#endif

/*
 * A change refused by the kernel at any point of an operation: each call that changes the
 * kernel's or the state directory's state (a cgroup mkdir, rmdir or file write, an xattr set,
 * a BPF map update or delete, program load, attach or pin, a state file written, a task
 * cloned, a record appended) is counted, and with JOBCG_TEST_FAIL_AT=N the Nth fails with EIO,
 * once, so that a test can walk N over an operation and see that every failure is rolled back;
 * with N+ every change from the Nth on fails, the rollback's too, and what is left is gc's to
 * finish. When it fires, "N WHAT DETAIL" (DETAIL: the path, when there is one) is appended to the
 * file JOBCG_TEST_FAIL_LOG names (if set). The variable is read as the process starts and removed
 * from its environment: processes it starts (a keeper, a task) do not count, nor does a daemon
 * serving its request (a daemon started with it counts its own changes, from its start).
 * -Dtest_hooks=true builds only; never fires in others.
 *
 * TEST_FAIL(what, detail, call) is @call, or -EIO with errno EIO when this is the call to fail: it
 * suits both system calls (-1 and errno) and libbpf's (a negative errno).
 */
#ifdef JOBCG_TEST_HOOKS
bool test_fail(const char *what, const char *detail);
#else
static inline bool test_fail(const char *what, const char *detail)
{
	(void)what;
	(void)detail;
	return false;
}
#endif
#define TEST_FAIL(what, detail, call) (test_fail(what, detail) ? (errno = EIO, -EIO) : (call))
