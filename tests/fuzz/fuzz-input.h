/* The fuzz input as the text the parsers take: what several targets share. */
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A copy of @data with a NUL after its @size bytes (a NUL inside ends the text early, as it
 * would for the parser's callers), to free(); NULL when it is over @max bytes (0: no limit),
 * which keeps one input fast, or when memory runs out. */
static inline char *fuzz_cstring(const uint8_t *data, size_t size, size_t max)
{
	char *s;

	if (max && size > max)
		return NULL;
	s = malloc(size + 1);
	if (!s)
		return NULL;
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}
