/*
 * libFuzzer target: hostlist expansion and matching. The matcher never expands, so it is held to
 * the expander: every expanded name matches, names next to them match exactly when expanded
 * too, and a list the expander refuses as malformed is refused by the matcher with the same code.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "fuzz-input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool listed(char **v, const char *name)
{
	for (size_t i = 0; v[i]; i++)
		if (strcmp(v[i], name) == 0)
			return true;
	return false;
}

/* @name changed by one step: a '0' put in at @k, or the character at @k dropped. */
static void check_near(const char *s, char **v, const char *name, size_t k)
{
	size_t len = strlen(name);
	char *t = malloc(len + 2);

	if (!t)
		return;
	k %= len + 1;
	memcpy(t, name, k);
	t[k] = '0';
	memcpy(t + k + 1, name + k, len - k + 1);
	if (jobcg_hostlist_contains(s, t) != (int)listed(v, t))
		abort();
	if (k < len) {
		memcpy(t, name, k);
		memcpy(t + k, name + k + 1, len - k);
		if (jobcg_hostlist_contains(s, t) != (int)listed(v, t))
			abort();
	}
	free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstring(data, size, 0), **v = NULL;
	int r;

	if (!s)
		return 0;
	r = jobcg_hostlist_expand(s, 4096, &v);
	if (r == 0) {
		size_t n = 0;

		while (v[n])
			n++;
		for (size_t i = 0; i < n && i < 8; i++) {
			const char *name = v[i * 7919 % n];

			if (jobcg_hostlist_contains(s, name) != 1)
				abort();
			check_near(s, v, name, i + size);
		}
		for (size_t i = 0; v[i]; i++)
			free(v[i]);
		free(v);
	} else if (r != -E2BIG && r != -ENOMEM) {
		if (jobcg_hostlist_contains(s, "node1") != r)
			abort();
	}
	(void)jobcg_hostlist_contains(s, "node1");
	free(s);
	return 0;
}
