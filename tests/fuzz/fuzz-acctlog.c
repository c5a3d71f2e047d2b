/* Fuzz target: reading the accounting log (torn lines, garbage, huge numbers) never crashes, and
 * every record it returns writes back and reads again as the same record. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "jobcg/acctlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct ctx {
	char path[64];
	unsigned n;
};

static int again(const struct jobcg_acct_record *r, void *u)
{
	struct jobcg_acct_record *want = u;

	if (r->end_usec != want->end_usec || r->cpu_usec != want->cpu_usec ||
	    r->state != want->state || strcmp(r->job_id, want->job_id) != 0 ||
	    (!r->step_id) != (!want->step_id) || (!r->gres) != (!want->gres))
		abort();
	return 1;
}

static char dir[] = "/tmp/jobcg-fuzz-acctlog-XXXXXX";
static bool made;

static void remove_dir(void)
{
	rmdir(dir);
}

static int rewrite(const struct jobcg_acct_record *r, void *u)
{
	struct ctx *c = u;
	char path[64];

	/* A real file: the log is opened with O_NOFOLLOW, so no /proc/self/fd link here; in a
	 * directory of our own, as the log's directory may not be writable by others (/tmp). */
	if (!made) {
		if (!mkdtemp(dir))
			abort();
		atexit(remove_dir);
		made = true;
	}
	snprintf(path, sizeof(path), "%s/acct.jsonl", dir);
	unlink(path);
	if (jobcg_acctlog_append(path, r) != 0 ||
	    jobcg_acctlog_read(path, NULL, again, (void *)r) != 1)
		abort();
	unlink(path);
	c->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {};
	int fd;

	if (size > 1 << 16)
		return 0;
	fd = memfd_create("acct", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(c.path, sizeof(c.path), "/proc/self/fd/%d", fd);
	(void)jobcg_acctlog_read(c.path, NULL, rewrite, &c);
	close(fd);
	return 0;
}
