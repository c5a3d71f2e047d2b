/* Fuzz target: reading the accounting log (torn lines, garbage, huge numbers) never crashes, and
 * every record it returns writes back and reads again as the same record. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
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
	char p[64];

	snprintf(p, sizeof(p), "%s/input", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/acct.jsonl.lock", dir); /* made by the writer */
	unlink(p);
	rmdir(dir);
}

/* Real files in a directory of our own: logs are opened with O_NOFOLLOW (no /proc/self/fd link)
 * and must be writable by no one else (no memfd, mode 0777), and the log's directory may not be
 * writable by others (/tmp). */
static void make_dir(void)
{
	if (made)
		return;
	if (!mkdtemp(dir))
		abort();
	atexit(remove_dir);
	made = true;
}

static int rewrite(const struct jobcg_acct_record *r, void *u)
{
	struct ctx *c = u;
	char path[64];

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
	make_dir();
	snprintf(c.path, sizeof(c.path), "%s/input", dir);
	fd = open(c.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	close(fd);
	if (jobcg_acctlog_read(c.path, NULL, rewrite, &c) == -ELOOP)
		abort(); /* the input is never read */
	return 0;
}
