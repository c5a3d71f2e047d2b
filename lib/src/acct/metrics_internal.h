/* jobcg internal: the readers of the metrics collector (metrics.c) over text already read, for
 * the fuzz target that feeds them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "jobcg/metrics.h"

/* A cgroup file's value: a number or "max" (UINT64_MAX), ending the line or followed by a
 * space. */
bool metrics_parse_value(const char *s, uint64_t *ret);

/* One key of a flat keyed file and the item its value sets. */
struct metrics_key {
	const char *key;
	enum jobcg_metric_item item;
};
/* The keys read from cpu.stat and memory.events, each table ended by a NULL key. */
extern const struct metrics_key metrics_cpu_keys[];
extern const struct metrics_key metrics_mem_event_keys[];

/* A flat keyed file ("key value" lines) @text: sets in @cg the items of the keys of @keys that
 * it has. */
void metrics_parse_keyed(const char *text, const struct metrics_key *keys,
			 struct jobcg_metrics_cg *cg);

/* io.stat ("MAJ:MIN rbytes=N wbytes=N rios=N ..." per device): the bytes read and written,
 * summed over its devices (UINT64_MAX when a sum would not fit). */
void metrics_parse_io(const char *text, uint64_t *ret_read, uint64_t *ret_write);

/* The number of CPUs of a CPU list (cgroup.conf's SpecCPUs), each counted once; 0 when it is
 * not one. */
unsigned metrics_cpulist_count(const char *s);

/* The "Device Minor:" of an NVIDIA GPU's information file (the first line that starts so, a
 * number of at most GPUFILE_NVIDIA_MINOR_MAX): 0, -EBADMSG when it has none, -ENOMEM. */
int metrics_device_minor(const char *text, unsigned *ret);
