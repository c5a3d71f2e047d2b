/* libFuzzer target: the readers of the metrics collector (lib/src/acct/metrics.c), over the
 * cgroup files it reads itself (one-value files, cpu.stat, memory.events, io.stat), the NVIDIA
 * information file it takes a GPU's PCI bus id from, and cgroup.conf's SpecCPUs. Input: a
 * selector byte (its value modulo 5 picks the reader), then the text. Besides "no crash": what
 * a reader takes is what the text says, as a reader written here independently finds it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpufiles.h"
#include "metrics_internal.h"
#include "parse.h"
#include "util.h"
#include "fuzz-input.h"

/* Do the decimal digits at @p (leading zeros allowed) spell @v, up to a byte of @ends? */
static bool digits_are(const char *p, uint64_t v, const char *ends)
{
	char buf[32];
	size_t n;

	while (p[0] == '0' && p[1] >= '0' && p[1] <= '9')
		p++;
	n = (size_t)snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return strncmp(p, buf, n) == 0 && (p[n] == '\0' || strchr(ends, p[n]));
}

/* A one-value file: "max", or the digits written, ending the line or followed by a space. */
static void value(const char *s)
{
	uint64_t v;

	if (!metrics_parse_value(s, &v))
		return;
	if (strncmp(s, "max", 3) == 0) {
		if (v != UINT64_MAX || (s[3] != '\n' && s[3] != '\0' && s[3] != ' '))
			abort();
	} else if (!digits_are(s, v, "\n "))
		abort();
}

/* A flat keyed file: an item set is that of a key whose first line "KEY ..." is "KEY DIGITS",
 * those digits. */
static void keyed(const char *text, const struct metrics_key *keys)
{
	struct jobcg_metrics_cg cg = {};

	metrics_parse_keyed(text, keys, &cg);
	for (const struct metrics_key *k = keys; k->key; k++) {
		size_t n = strlen(k->key);
		const char *line = text;

		if (!jobcg_metrics_cg_has(&cg, k->item))
			continue;
		while (line && (strncmp(line, k->key, n) != 0 || line[n] != ' '))
			line = (line = strchr(line, '\n')) ? line + 1 : NULL;
		if (!line || !digits_are(line + n + 1, cg.value[k->item], "\n "))
			abort();
	}
	/* No item of a key not asked for. */
	for (unsigned i = 0; i < _JOBCG_METRIC_MAX; i++) {
		bool asked = false;

		for (const struct metrics_key *k = keys; k->key; k++)
			asked |= k->item == i;
		if (!asked && (cg.have >> i & 1))
			abort();
	}
}

/* @a + @b, or UINT64_MAX when that is more. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/*
 * io.stat as the kernel writes it: per line, the fields after the device, separated by single
 * spaces; a field "rbytes=DIGITS" or "wbytes=DIGITS" (a number that fits 64 bits) counts. The
 * sums, worked out here field by field, must be the reader's, and no field more than its sum.
 */
static void io(char *text)
{
	uint64_t rd, wr, want_rd = 0, want_wr = 0, max_rd = 0, max_wr = 0;

	metrics_parse_io(text, &rd, &wr);
	for (char *line = text, *next; line; line = next) {
		char *f;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		f = strchr(line, ' ');
		while (f) {
			char *end = strchr(f + 1, ' ');
			uint64_t v;

			f++;
			if (end)
				*end = '\0';
			if ((startswith(f, "rbytes=") || startswith(f, "wbytes=")) &&
			    parse_u64(f + 7, UINT64_MAX, &v) == 0) {
				if (f[0] == 'r') {
					want_rd = add_sat(want_rd, v);
					max_rd = v > max_rd ? v : max_rd;
				} else {
					want_wr = add_sat(want_wr, v);
					max_wr = v > max_wr ? v : max_wr;
				}
			}
			if (end)
				*end = ' ';
			f = end;
		}
	}
	if (rd != want_rd || wr != want_wr || rd < max_rd || wr < max_wr)
		abort();
}

/* SpecCPUs (checked by the project's CPU list parser when cgroup.conf is read): as many CPUs
 * as that parser sets. */
static void cpulist(const char *s)
{
	uint64_t *bits = NULL;
	unsigned n = metrics_cpulist_count(s), want = 0;
	size_t words;

	if (jobcg_parse_cpulist(s, &bits, &words) < 0)
		return;
	for (size_t i = 0; i < words; i++)
		want += (unsigned)__builtin_popcountll(bits[i]);
	if (n != want)
		abort();
	free(bits);
}

/* An NVIDIA information file: the minor taken is the digits of its "Device Minor:" line (the
 * first line that starts so, as GPU detection reads it), a GPU's minor. */
static void device_minor(const char *text)
{
	char *v = NULL;
	unsigned minor;

	if (metrics_device_minor(text, &minor) < 0)
		return;
	if (gpufile_field(text, strlen(text), "Device Minor", &v) < 0 ||
	    strspn(v, "0123456789") != strlen(v) || !digits_are(v, minor, "") ||
	    minor > GPUFILE_NVIDIA_MINOR_MAX)
		abort();
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	/* The collector reads at most 64 KiB of a file. */
	if (size < 1)
		return 0;
	s = fuzz_cstring(data + 1, size - 1, 65536);
	if (!s)
		return 0;
	switch (data[0] % 5) {
	case 0:
		value(s);
		break;
	case 1:
		keyed(s, data[0] % 2 ? metrics_cpu_keys : metrics_mem_event_keys);
		break;
	case 2:
		io(s);
		break;
	case 3:
		cpulist(s);
		break;
	default:
		device_minor(s);
		break;
	}
	free(s);
	return 0;
}
