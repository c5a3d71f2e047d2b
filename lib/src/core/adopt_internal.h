/* jobcg internal: the pure choice of adopt.c (unit tested). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct adopt_candidate {
	uint32_t id;
	int have_owner;
	uid_t uid;
	uint64_t created_sec;
	int joinable; /* created completely, not being released, not ephemeral */
};

/* Index of the newest joinable job owned by @uid (creation time, then id), or -1 when there is
 * none. */
long adopt_choose(const struct adopt_candidate *c, size_t n, uid_t uid);
/* Real uid from /proc/<pid>/status text ("Uid:\t<real>\t..."). -EINVAL when absent. */
int adopt_parse_status_uid(const char *status, uid_t *ret);
/* The cgroup v2 path ("0::PATH" line) of /proc/<pid>/cgroup text, malloc()ed. -EINVAL when
 * there is none. */
int adopt_parse_proc_cgroup(const char *text, char **ret);
/* 1 and the job's id when @path is @root's job_<id> or below it, else 0. */
int adopt_job_of_path(const char *root, const char *path, uint32_t *ret);
/* The "Pid:" of /proc/self/fdinfo/FD text: 0 and the pid of a pidfd, -ESRCH when its process
 * has ended ("Pid: -1"), -EBADF when the text is no pidfd's. */
int adopt_parse_fdinfo_pid(const char *text, pid_t *ret);
