/* Fuzz target: the parsers of kernel cgroup files (accounting, flat keyed, controllers, pids) and
 * of job targets. Input: a selector byte, then the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cgroupfs.h"
#include "jobcg/acct.h"
#include "jobcg/job.h"

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
