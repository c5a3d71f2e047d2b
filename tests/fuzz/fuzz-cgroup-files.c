/* Fuzz target: the parsers of kernel cgroup files (accounting, flat keyed, controllers, pids,
 * cpuset.cpus.partition), of the /proc files of a process jobcg reads (stat, status, children),
 * of /proc/self/mounts, /proc/self/mountinfo, /proc/cgroups and /proc/meminfo, of the tree's
 * directory names, of job targets, of a pidfd's /proc/self/fdinfo, of the names of rotated
 * accounting logs, of a /proc/locks line, of a process's /proc/PID/cgroup (v1) and of a
 * /proc/kallsyms line and of a sysfs CPU topology id. Input: a
 * selector byte, then the text. Selectors below 0xf0 pick the cgroup files by their value modulo 5,
 * those from 0xf0 up the others (so that the seeds written before those stay what they were). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acctlog_internal.h"
#include "adopt_internal.h"
#include "bpftext.h"
#include "cgroupfs.h"
#include "cpupart.h"
#include "cputopo.h"
#include "inspect_internal.h"
#include "jobcg/acct.h"
#include "jobcg/job.h"
#include "jobcg/sysinfo.h"
#include "memlimit.h"
#include "procs.h"
#include "slurm_map.h"
#include "sysinfo_internal.h"
#include "tree.h"
#include "util.h"

/* /proc/PID/stat: the three readers of its fields agree on what parses. */
static void proc_stat(const char *text)
{
	unsigned long long st = 0, st2 = 0;
	int t = tree_parse_starttime(text, &st);
	int k = proc_stat_is_kthread(text);
	pid_t ppid;

	if (k != -EINVAL && k != 0 && k != 1)
		abort();
	if (jspank_stat_parse(text, &ppid, &st2) == 0 && (t < 0 || st2 != st || ppid < 0))
		abort();
}

static void proc_status(const char *text)
{
	uid_t uid;

	if (adopt_parse_status_uid(text, &uid) == 0 && uid == (uid_t)-1)
		abort();
	unsigned threads = tree_parse_threads(text);

	if (threads) {
		/* The count is the digits written after "Threads:", nothing made up from a sign. */
		const char *t = strstr(text, "\nThreads:") + strlen("\nThreads:");
		char buf[16];

		t += strspn(t, " \t");
		while (t[0] == '0' && t[1] >= '0' && t[1] <= '9')
			t++; /* "03" is 3 */
		snprintf(buf, sizeof(buf), "%u", threads);
		if (strncmp(t, buf, strlen(buf)) != 0 ||
		    (t[strlen(buf)] >= '0' && t[strlen(buf)] <= '9'))
			abort();
	}
}

static void proc_children(const char *text)
{
	pid_t pids[8];
	size_t n = 0;

	if (jspank_children_parse(text, pids, 8, &n) == 0) {
		if (n > 8)
			abort();
		for (size_t i = 0; i < n; i++)
			if (pids[i] <= 0)
				abort();
	}
}

/* /proc/self/mounts: the cgroup2 mount picked is one the text names, the v1 controllers are
 * ones jobcg knows. */
static void mounts(const char *text)
{
	static const char *const configured[] = {NULL, "/sys/fs/cgroup", "/x//"};
	enum jobcg_layout layout;
	char *m = NULL;

	for (size_t i = 0; i < sizeof(configured) / sizeof(configured[0]); i++) {
		if (discover_mount(text, configured[i], &m, &layout) == 0) {
			if (!*m || !strstr(text, m) || layout > JOBCG_LAYOUT_OTHER)
				abort();
			free(m);
		}
		m = NULL;
	}
	if (discover_v1_controllers(text) >> _JOBCG_CTRL_MAX)
		abort();
}

/* /proc/self/mountinfo and mounts lines as `jobcg decode` and the device checks read them: a
 * mount point found is a word of the line (of mountinfo, one before its " - "). */
static void mountinfo(char *text)
{
	for (char *line = text, *next; line; line = next) {
		char mp[PATH_MAX];
		const char *sep;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (inspect_mounts_cgroup2(line, mp) && (!*mp || !strstr(line, mp)))
			abort();
		if (inspect_mountinfo_v1_devices(line, mp)) {
			sep = strstr(line, " - ");
			if (!*mp || !sep || !memmem(line, (size_t)(sep - line), mp, strlen(mp)))
				abort();
		}
	}
}

/* A directory name of the cgroup tree (the tree is listed, not trusted): what parses as a job,
 * step or reservation is exactly the name jobcg gives it. */
static void dirname(const char *name)
{
	char buf[JOBCG_STEP_ID_MAX + 16], step[JOBCG_STEP_ID_MAX];
	const char *resv;
	uint32_t job;

	if (tree_parse_job_dirname(name, &job) == 0) {
		snprintf(buf, sizeof(buf), "job_%u", job);
		if (strcmp(buf, name) != 0)
			abort();
	}
	if (tree_parse_step_dirname(name, step) == 0) {
		snprintf(buf, sizeof(buf), "step_%s", step);
		if (strcmp(buf, name) != 0)
			abort();
	}
	if (tree_parse_resv_dirname(name, &resv) == 0 &&
	    (strncmp(name, TREE_RESV_PREFIX, strlen(TREE_RESV_PREFIX)) != 0 ||
	     resv != name + strlen(TREE_RESV_PREFIX)))
		abort();
}

static void meminfo(const char *text)
{
	uint64_t bytes;
	char buf[32];
	const char *p;

	if (memlimit_parse_meminfo(text, &bytes) < 0)
		return;
	/* The kB written after MemTotal:, in bytes, not a value wrapped around. */
	snprintf(buf, sizeof(buf), "%" PRIu64 " kB", bytes / 1024);
	p = strstr(text, "MemTotal:");
	if (!bytes || bytes % 1024 || !p || !strstr(p, buf))
		abort();
}

static void partition(const char *text)
{
	char *mode = NULL, *why = NULL;
	bool invalid;

	if (cpupart_parse_state(text, &mode, &invalid, &why) == 0) {
		/* The mode is one word. */
		if (strpbrk(mode, " \t\n"))
			abort();
		free(mode);
		free(why);
	}
}

/* /proc/self/fdinfo/FD of a pidfd: the pid taken is the digits of its "Pid:" line, an ended
 * process is the line's "-1". */
static void fdinfo(const char *text)
{
	const char *p = strstr(text, "\nPid:");
	char buf[16];
	size_t n;
	pid_t pid;
	int r = adopt_parse_fdinfo_pid(text, &pid);

	if (r == -EBADF)
		return;
	if (!p || (r != 0 && r != -ESRCH))
		abort();
	p += strlen("\nPid:");
	p += strspn(p, " \t");
	if (r == -ESRCH) {
		/* A negative number, digits after the sign. */
		n = strspn(p + 1, "0123456789");
		if (p[0] != '-' || n == 0 || (p[1 + n] && p[1 + n] != '\n'))
			abort();
		return;
	}
	while (p[0] == '0' && p[1] >= '0' && p[1] <= '9')
		p++;
	n = (size_t)snprintf(buf, sizeof(buf), "%d", pid);
	if (pid <= 0 || strncmp(p, buf, n) != 0 || (p[n] && p[n] != '\n'))
		abort();
}

/* A file beside the accounting log (the log's name, a line break, the file's): a rotated copy
 * taken is the log's name, '.' or '-', its number or suffix, and ".gz" when compressed, exactly. */
static void rotated(const char *text)
{
	const char *nl = strchr(text, '\n');
	struct acctlog_rotated_name r;
	char *base, buf[512];

	if (!nl || strlen(nl + 1) >= sizeof(buf))
		return;
	base = strndup(text, (size_t)(nl - text));
	if (!base)
		return;
	if (acctlog_parse_rotated(base, nl + 1, &r)) {
		if (r.dated)
			snprintf(buf, sizeof(buf), "%s-%.*s%s", base, (int)r.keylen, r.key,
				 r.gz ? ".gz" : "");
		else
			snprintf(buf, sizeof(buf), "%s.%lu%s", base, r.num, r.gz ? ".gz" : "");
		if (strcmp(buf, nl + 1) != 0 || (r.dated ? r.keylen == 0 : r.num == 0) ||
		    (r.dated && r.key != nl + 1 + strlen(base) + 1))
			abort();
	}
	free(base);
}

/* A line of /proc/locks: one taken as a held flock is one the kernel's own format reads the same
 * (the lenient scanf reading jobcg used before agrees), with a pid and a device that can be. */
static void locks_line(const char *text)
{
	unsigned maj, mnr, maj2, mnr2;
	unsigned long long ino2;
	uint64_t ino;
	int pid, pid2;

	if (flock_parse_line(text, &pid, &maj, &mnr, &ino) < 0)
		return;
	if (pid <= 0 || maj > 0xfff || mnr > 0xfffff ||
	    sscanf(text, "%*d: FLOCK %*s %*s %d %x:%x:%llu", &pid2, &maj2, &mnr2, &ino2) != 4 ||
	    pid2 != pid || maj2 != maj || mnr2 != mnr || ino2 != ino)
		abort();
}

/* A process's /proc/PID/cgroup as `jobcg decode` reads it on a host with a v1 devices
 * hierarchy: a cgroup found is the path of a line whose controllers include "devices" ("" for
 * "/"), absolute, one line, with no ".." component. */
static void proc_cgroup_v1(const char *text)
{
	char path[PATH_MAX], want[PATH_MAX + 2];

	if (!inspect_proc_cgroup_v1_devices(text, path))
		return;
	snprintf(want, sizeof(want), ":%s\n", *path ? path : "/");
	if ((*path && path[0] != '/') || strchr(path, '\n') || strstr(path, "/../") ||
	    (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0) ||
	    !strstr(text, "devices"))
		abort();
	/* the path ends its line (or the text) */
	const char *at = strstr(text, want);

	if (!at) {
		size_t tl = strlen(text), wl = strlen(want) - 1;

		if (tl < wl || strncmp(text + tl - wl, want, wl) != 0)
			abort();
	}
}

/* A line of /proc/kallsyms as `jobcg decode` names a program's helper calls by it: a symbol kept
 * is the whole third word of the line (none longer than the table keeps), one the decoder
 * models or a bpf_* one, of type 't' or 'T' (a one-letter second word), at the address that the
 * first word is; __bpf_call_base is that exact word. */
static void kallsyms_line(const char *text)
{
	const char *w[3];
	size_t wl[3], i;
	const char *p = text;
	char name[KSYM_NAME_MAX];
	uint64_t addr;
	int k = bpftext_kallsyms_line(text, &addr, name);

	if (k == KSYM_LINE_OTHER)
		return;
	for (i = 0; i < 3; i++) {
		p += strspn(p, " \t\n\v\f\r");
		w[i] = p;
		wl[i] = strcspn(p, " \t\n\v\f\r");
		if (!wl[i])
			abort();
		p += wl[i];
	}
	if (strtoull(w[0], NULL, 16) != addr)
		abort();
	if (k == KSYM_LINE_BASE) {
		if (wl[2] != strlen("__bpf_call_base") || strncmp(w[2], "__bpf_call_base", wl[2]))
			abort();
		return;
	}
	if (k != KSYM_LINE_SYM || wl[1] != 1 || (w[1][0] != 't' && w[1][0] != 'T') ||
	    strlen(name) != wl[2] || strncmp(w[2], name, strlen(name)) != 0 ||
	    (bpftext_helper_from_name(name) < 0 && strncmp(name, "bpf_", 4) != 0))
		abort();
}

/* A sysfs topology id (core_id, die_id, physical_package_id), as much of it as cputopo_load()
 * reads: an id taken is the decimal number written (a sign, no leading zero), then at most a
 * line break; nothing else is taken. */
static void topology_id(char *text)
{
	char buf[32];
	const char *p = text;
	size_t n;
	long id;

	if (strlen(text) > CPUTOPO_ID_MAX)
		text[CPUTOPO_ID_MAX] = '\0';
	if (cputopo_parse_id(text, &id) < 0)
		return;
	p += strspn(p, " \t\n\v\f\r");
	if (*p == '+' || (*p == '-' && id <= 0))
		p++;
	while (p[0] == '0' && p[1] >= '0' && p[1] <= '9')
		p++;
	n = (size_t)snprintf(buf, sizeof(buf), "%lu",
			     id < 0 ? -(unsigned long)id : (unsigned long)id);
	if (strncmp(p, buf, n) != 0 || (p[n] && strcmp(p + n, "\n") != 0))
		abort();
}

static const char *const files[] = {
    "cpu.stat",	   "memory.stat",  "memory.events", "memory.current",
    "memory.peak", "pids.current", "pids.peak",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcg_acct a = {};
	struct jobcg_target t;
	pid_t *pids = NULL;
	size_t n = 0;
	uint64_t v;
	char *text;
	unsigned sel;

	if (size < 1 || size > 65536)
		return 0;
	sel = data[0];
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (sel >= 0xf0) {
		switch (sel - 0xf0) {
		case 0:
			proc_stat(text);
			break;
		case 1:
			proc_status(text);
			break;
		case 2:
			proc_children(text);
			break;
		case 3:
			partition(text);
			break;
		case 4:
			mounts(text);
			break;
		case 5:
			if (discover_v1_from_proc_cgroups(text) >> _JOBCG_CTRL_MAX)
				abort();
			break;
		case 6:
			meminfo(text);
			break;
		case 7:
			mountinfo(text);
			break;
		case 8:
			dirname(text);
			break;
		case 9:
			fdinfo(text);
			break;
		case 10:
			rotated(text);
			break;
		case 11:
			locks_line(text);
			break;
		case 12:
			proc_cgroup_v1(text);
			break;
		case 13:
			kallsyms_line(text);
			break;
		case 14:
			topology_id(text);
			break;
		default:
			break;
		}
		free(text);
		return 0;
	}
	switch (sel % 5) {
	case 0:
		(void)jobcg_acct_parse(files[(sel / 5) % (sizeof(files) / sizeof(files[0]))], text,
				       &a);
		break;
	case 1:
		(void)cgfs_parse_controllers(text);
		(void)cgfs_parse_keyed(text, "populated", &v);
		break;
	case 2:
		(void)cgfs_parse_pids(text, &pids, &n);
		break;
	case 3:
		if (jobcg_target_parse(text, &t) == 0) {
			char buf[128], *p = jobcg_target_relpath(&t);
			struct jobcg_target u;

			jobcg_target_format(&t, buf, sizeof(buf));
			/* a parsed target must print back to something that parses the same */
			if (jobcg_target_parse(buf, &u) != 0 || u.job != t.job ||
			    u.task != t.task || strcmp(u.step, t.step) != 0)
				abort();
			free(p);
		}
		break;
	default:
		(void)cgfs_parse_keyed(text, "frozen", &v);
		break;
	}
	free(pids);
	free(text);
	return 0;
}
