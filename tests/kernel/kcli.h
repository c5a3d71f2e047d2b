/* jobcg kernel tests: run the built jobcg binary against a test's own tree root and capture output.
 */
#pragma once

#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ktest.h"
#include "tap.h"

static char kcli_root_abs[PATH_MAX];

/*
 * Point jobcg at <test subtree>/<sub> (JOBCG_ROOT is relative to the mount) and a private state
 * dir. Returns the absolute tree root.
 */
static inline const char *kcli_setup(const char *name, const char *sub)
{
	const char *top = ktest_setup(name);
	const char *mnt = ktest_cgroup_mount();
	char rel[PATH_MAX];

	snprintf(rel, sizeof(rel), "%s/%s", top + strlen(mnt) + 1, sub);
	setenv("JOBCG_ROOT", rel, 1);
	setenv("JOBCG_STATE_DIR", ktest_tmpdir(), 1);
	snprintf(kcli_root_abs, sizeof(kcli_root_abs), "%s/%s", top, sub);
	return kcli_root_abs;
}

static inline const char *kcli_binary(void)
{
	static char path[PATH_MAX];
	const char *b = getenv("JOBCG_BUILD_ROOT");

	snprintf(path, sizeof(path), "%s/cli/jobcg", b ? b : ".");
	return path;
}
/* Read all of @fd into a malloc()ed string. */
static inline char *kcli_slurp(int fd)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);
	ssize_t n;

	if (!buf)
		return NULL;
	while ((n = read(fd, buf + len, cap - len)) > 0 || (n < 0 && errno == EINTR)) {
		if (n < 0)
			continue;
		len += (size_t)n;
		if (len == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	return buf;
}

/* Start jobcg with @args (NULL-terminated, without argv[0]); stdout/stderr to pipes when wanted. */
static inline pid_t kcli_start(char *const args[], int *out_fd, int *err_fd)
{
	char *argv[64];
	int o[2] = {-1, -1}, e[2] = {-1, -1};
	size_t n = 0;
	pid_t pid;

	argv[n++] = (char *)kcli_binary();
	for (size_t i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if ((out_fd && pipe2(o, O_CLOEXEC) < 0) || (err_fd && pipe2(e, O_CLOEXEC) < 0))
		return -1;
	pid = fork();
	if (pid == 0) {
		if (out_fd)
			dup2(o[1], 1);
		else
			dup2(2, 1); /* never into the TAP stream */
		if (err_fd)
			dup2(e[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	if (out_fd) {
		close(o[1]);
		*out_fd = o[0];
	}
	if (err_fd) {
		close(e[1]);
		*err_fd = e[0];
	}
	return pid;
}

/* Run jobcg to completion. Returns the exit code (128+N for signal N); *out / *err (may be
 * NULL) get what it printed. */
static inline int kcli_run(char *const args[], char **out, char **err)
{
	int ofd = -1, efd = -1, st = 0;
	pid_t pid = kcli_start(args, &ofd, &efd);
	char *o, *e;

	if (pid < 0)
		return -1;
	/* stderr is small; read stdout first, then stderr (both are pipes of the same child). */
	o = kcli_slurp(ofd);
	e = kcli_slurp(efd);
	close(ofd);
	close(efd);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (e && *e)
		ktest_diag_lines("jobcg stderr: ", e);
	if (out)
		*out = o;
	else
		free(o);
	if (err)
		*err = e;
	else
		free(e);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * Pause points (lib/src/base/testhook.h): jobcg started with JOBCG_TEST_PAUSE=@point and
 * JOBCG_TEST_PAUSE_DIR=@dir creates @dir/@point.reached there and waits for @dir/@point.go;
 * with JOBCG_TEST_CRASH=@point it is killed there instead.
 */
static inline bool kcli_wait_file(const char *dir, const char *name, unsigned ms)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	for (unsigned i = 0; i <= ms / 10; i++) {
		if (access(p, F_OK) == 0)
			return true;
		usleep(10000);
	}
	return false;
}

static inline void kcli_pause_go(const char *dir, const char *point)
{
	char p[PATH_MAX + 64];
	int fd;

	snprintf(p, sizeof(p), "%s/%s.go", dir, point);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
}

static inline pid_t kcli_start_paused(const char *dir, const char *point, char *const args[],
				      int *err_fd)
{
	pid_t pid;

	setenv("JOBCG_TEST_PAUSE", point, 1);
	setenv("JOBCG_TEST_PAUSE_DIR", dir, 1);
	pid = kcli_start(args, NULL, err_fd);
	unsetenv("JOBCG_TEST_PAUSE");
	unsetenv("JOBCG_TEST_PAUSE_DIR");
	return pid;
}

/* Wait for a jobcg kcli_start()ed; its exit code as kcli_run() gives it, *err (may be NULL)
 * what it printed on @err_fd (-1: nothing to read). */
static inline int kcli_finish(pid_t pid, int err_fd, char **err)
{
	int st = 0;
	char *e = err_fd >= 0 ? kcli_slurp(err_fd) : NULL;

	if (err_fd >= 0)
		close(err_fd);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (e && *e)
		ktest_diag_lines("jobcg stderr: ", e);
	if (err)
		*err = e;
	else
		free(e);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline int kcli_crash_at(const char *point, char *const args[])
{
	int rc;

	setenv("JOBCG_TEST_CRASH", point, 1);
	rc = kcli_run(args, NULL, NULL);
	unsetenv("JOBCG_TEST_CRASH");
	return rc;
}

/* kcli_run with a printf-built single-string-per-arg vararg list ending in NULL. */
static inline int kcli(char **out, ...)
{
	char *args[64];
	size_t n = 0;
	va_list ap;

	va_start(ap, out);
	while (n < 63 && (args[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	args[n] = NULL;
	return kcli_run(args, out, NULL);
}

/* Does a cgroup directory exist? */
static inline bool kcli_exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline bool kcli_exists(const char *fmt, ...)
{
	char p[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	return access(p, F_OK) == 0;
}

/* Number of subdirectories of @dir (-1 if it cannot be read). */
static inline int kcli_count_dirs(const char *dir)
{
	char cmd[PATH_MAX + 64];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 -type d | wc -l", dir);
	f = popen(cmd, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &n) != 1)
		n = -1;
	pclose(f);
	return n;
}

/* Whether `jobcg check --json` lists @ctrl among the controllers jobs can use here. */
static inline bool kcli_usable(const char *ctrl)
{
	char *out = NULL;
	struct json_object *o, *a;
	bool found = false;

	if (kcli(&out, "check", "--json", NULL) != 0 || !out)
		return false;
	o = json_tokener_parse(out);
	free(out);
	if (o && json_object_object_get_ex(o, "controllers_usable", &a))
		for (size_t i = 0; i < json_object_array_length(a); i++)
			if (strcmp(json_object_get_string(json_object_array_get_idx(a, i)), ctrl) ==
			    0)
				found = true;
	json_object_put(o);
	return found;
}
