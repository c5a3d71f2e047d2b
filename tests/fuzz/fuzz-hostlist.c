/* libFuzzer target: hostlist expansion and matching; every expanded name must match its list. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobcg/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), **v = NULL;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (jobcg_hostlist_expand(s, 4096, &v) == 0) {
		for (size_t i = 0; v[i] && i < 4; i++)
			if (jobcg_hostlist_contains(s, v[i]) != 1)
				abort();
		for (size_t i = 0; v[i]; i++)
			free(v[i]);
		free(v);
	}
	(void)jobcg_hostlist_contains(s, "node1");
	free(s);
	return 0;
}
