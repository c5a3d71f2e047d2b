/* jobcg internal: pause points, test flags and failures made on request, for deterministic race
 * and rollback tests (built with -Dtest_hooks=true). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testhook.h"
#include "util.h"

#ifdef JOBCG_TEST_HOOKS
static bool listed(const char *list, const char *point)
{
	size_t n = strlen(point);

	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n && strncmp(p, point, n) == 0)
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

bool test_flag(const char *flag)
{
	return listed(getenv("JOBCG_TEST_FLAGS"), flag);
}

static bool fail_onward;
static unsigned long fail_at, fail_count;
static char *fail_log;

/* Read as the process starts, not at its first change: a daemon serves each request in its
 * client's JOBCG_* environment, and what it was started with must count for the daemon. */
__attribute__((constructor)) static void test_fail_init(void)
{
	const char *v = getenv("JOBCG_TEST_FAIL_AT");
	char *end = NULL;

	if (!v)
		return;
	fail_at = strtoul(v, &end, 10);
	fail_onward = end && *end == '+';
	(void)unsetenv("JOBCG_TEST_FAIL_AT");
	if ((v = getenv("JOBCG_TEST_FAIL_LOG")))
		fail_log = strdup(v);
}

bool test_fail(const char *what, const char *detail)
{
	int saved = errno;

	if (fail_at == 0 || (++fail_count != fail_at && !(fail_onward && fail_count > fail_at))) {
		errno = saved;
		return false;
	}
	int fd = fail_log ? open(fail_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;

	if (fd >= 0) {
		dprintf(fd, "%lu %s %s\n", fail_count, what, detail ? detail : "-");
		close(fd);
	}
	return true;
}

void test_pause(const char *point)
{
	const char *dir = getenv("JOBCG_TEST_PAUSE_DIR");
	char reached[4096], go[4096];

	if (listed(getenv("JOBCG_TEST_CRASH"), point))
		(void)kill(getpid(), SIGKILL);
	if (!dir || !listed(getenv("JOBCG_TEST_PAUSE"), point))
		return;
	if ((size_t)snprintf(reached, sizeof(reached), "%s/%s.reached", dir, point) >=
		sizeof(reached) ||
	    (size_t)snprintf(go, sizeof(go), "%s/%s.go", dir, point) >= sizeof(go))
		return;
	int fd = open(reached, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 6000 && access(go, F_OK) != 0; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}
#endif
