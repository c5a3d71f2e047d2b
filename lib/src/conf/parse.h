/* jobcg internal: value parsers shared by the configuration files and the CLI (sizes, CPU lists,
 * hostlists). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Highest CPU number + 1 a CPU list may name (bitmaps have at most JOBCG_CPU_MAX / 64 words). */
#define JOBCG_CPU_MAX 4096

/* Default limit on the number of names a hostlist may expand to. */
#define JOBCG_HOSTLIST_MAX 65536

enum {
	/* Also accept Slurm's gres.conf Count= decimal suffixes: KB, MB, GB, TB, PB mean x1000^n.
	 */
	JOBCG_SIZE_DECIMAL = 1u << 0,
};

/**
 * Parse a size: decimal digits, then an optional suffix in any case: K, M, G, T, P or KiB ..
 * PiB (x1024^n, as Slurm). A bare number is multiplied by @default_unit (1 for a count,
 * 1 << 20 for `--mem`, whose bare numbers are MiB as in Slurm). Signs, spaces, fractions, unknown
 * suffixes and values above UINT64_MAX are refused with -EINVAL / -ERANGE; the error record's
 * column (1-based, in @s) points at the offending character. *ret untouched on failure.
 */
int jobcg_parse_size(const char *s, uint64_t default_unit, unsigned flags, uint64_t *ret);

/**
 * Parse a CPU list such as "0-3,8,10-11" into a bitmap (bit i of word i / 64 = CPU i).
 * *ret_words is the number of words up to the highest CPU set (at least 1); free *ret with free().
 * Reversed ranges ("3-1"), CPUs >= JOBCG_CPU_MAX, empty elements, signs and trailing text are
 * -EINVAL (-ERANGE beyond the bound) with the column set in the error record. The empty string
 * is refused: an empty set is never what a user meant.
 */
int jobcg_parse_cpulist(const char *s, uint64_t **ret, size_t *ret_words);

/** Format a CPU bitmap as a list with ranges ("0-3,8"; "" for the empty set). */
int jobcg_format_cpulist(const uint64_t *bits, size_t words, char **ret);

/**
 * Expand a Slurm hostlist: names separated by commas or blanks (space, tab; empty names are
 * skipped, as Slurm's hostlist_create() does), each with any number of bracket groups
 * ("node[01-16]", "r3i[4-7]n[0-8]" as a cross product, last group fastest, "node[1,3-5]-ib").
 * Zero padding is kept: a range's width is that of its lower bound as written. The same syntax
 * names gres.conf device files ("/dev/nvidia[0-3]"). Refuses an unbalanced or empty bracket,
 * a reversed range, a list with no name and more than @max names (0: JOBCG_HOSTLIST_MAX) with
 * -EINVAL / -E2BIG, the column set in the error record. *ret is a NULL-terminated string vector.
 */
int jobcg_hostlist_expand(const char *s, size_t max, char ***ret);

/**
 * Whether hostlist @s names @name: 1 yes, 0 no, or a negative errno (-EINVAL, -ERANGE, with
 * the column in the error record, as jobcg_hostlist_expand()) when any part of @s does not
 * parse. The name is matched against the ranges without expanding them, so the work is linear
 * in the lengths of @s and @name however many names @s stands for ("x[0-999][0-999]").
 */
int jobcg_hostlist_contains(const char *s, const char *name);

#ifdef __cplusplus
}
#endif
