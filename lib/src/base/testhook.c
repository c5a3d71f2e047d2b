/* jobcg internal: pause points for deterministic race tests (built with -Dtest_hooks=true). */
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

bool test_fail(const char *what, const char *detail)
{
	static bool read, onward;
	static unsigned long at, count;
	int saved = errno;

	if (!read) {
		const char *v = getenv("JOBCG_TEST_FAIL_AT");
		char *end = NULL;

		read = true;
		if (v) {
			at = strtoul(v, &end, 10);
			onward = end && *end == '+';
			(void)unsetenv("JOBCG_TEST_FAIL_AT");
		}
	}
	if (at == 0 || (++count != at && !(onward && count > at))) {
		errno = saved;
		return false;
	}
	const char *log = getenv("JOBCG_TEST_FAIL_LOG");
	int fd = log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;

	if (fd >= 0) {
		dprintf(fd, "%lu %s %s\n", count, what, detail ? detail : "-");
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
