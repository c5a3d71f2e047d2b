/* jobcg: decoding cgroup device programs (eBPF) back into device rules, by executing them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/devrule.h"
#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bpf_insn;
struct jobcg_decoded;

/*
 * Optional inputs for programs that call helpers or look up maps. Start with
 * `.size = sizeof(struct jobcg_decode_env)` so the struct can grow.
 */
struct jobcg_decode_env {
	size_t size;
	uint64_t (*cgroup_id)(void *userdata);
	uint64_t (*ancestor_cgroup_id)(void *userdata, int level);
	/* Map lookup by the program's map reference (the map id in translated programs). The
	 * returned value must stay valid until the decode returns and be readable for 256 bytes. */
	const void *(*map_lookup)(void *userdata, uint64_t map_ref, const void *key);
	void *userdata;
	/* Devices the maps mention (major, minor; JOBCG_DEV_ANY = all), used to partition the
	 * input space where the program does not compare against constants itself. */
	const uint32_t (*hints)[2];
	size_t n_hints;
	uint64_t max_steps; /* per execution; 0 means 100000 */
	/*
	 * Where the keys of map @map_ref hold the device: key size and byte offsets of the u32
	 * major and minor (-1: not in the key); 0, or -errno when unknown. A lookup whose key
	 * depends on the request is decoded only when the program stored the request's major and
	 * minor unchanged exactly there (the hints must then list the map's devices); any other
	 * such lookup makes the program opaque.
	 */
	int (*key_layout)(void *userdata, uint64_t map_ref, size_t *ret_key_size,
			  int *ret_major_off, int *ret_minor_off);
	/* Budget of the whole decode: instructions over all runs (0: 200 million) and wall
	 * time in milliseconds (0: 20 s). Exhausted: -E2BIG, with a message saying so. */
	uint64_t max_total_steps;
	uint64_t max_ms;
};

/** One output line: a rule, or a note (printed as "# note"). */
struct jobcg_decoded_line {
	struct jobcg_devrule rule; /* allow = true; access = what is allowed (0 = "-") */
	const char *note;	   /* non-NULL: this line is a note, rule is unused */
};

/**
 * Decode one program. The result lists, for character devices then block devices, a default
 * "c *:* ACCESS", then exceptions "c MAJOR:* ACCESS" and "c MAJOR:MINOR ACCESS"; the most
 * specific matching line decides. Notes flag behaviour the rules cannot express (read and write
 * combined, requests with no access bits, ranges, approximations). Majors are 0..4095 and minors
 * 0..1048575, the kernel's ranges; "*" covers the whole range.
 * Errors: -EINVAL malformed program, -EOPNOTSUPP the program needs helpers or maps that
 * @env does not provide (the message says which: "opaque"), -ELOOP step limit, -E2BIG input
 * space too large. The error record says why.
 */
JOBCG_EXPORT int jobcg_decode_program(const struct bpf_insn *insns, size_t n,
				      const struct jobcg_decode_env *env,
				      struct jobcg_decoded **ret);

/**
 * Parse a program in any form (bpftool "prog dump xlated" text or its -j JSON, or raw 8-byte
 * instructions in host order; detected by content) and decode it. @filename names the input in
 * errors. For raw input, kernel helper call addresses are resolved through /proc/kallsyms.
 */
JOBCG_EXPORT int jobcg_decode_data(const void *data, size_t len, const char *filename,
				   const struct jobcg_decode_env *env, struct jobcg_decoded **ret);

/**
 * Parse without decoding: *ret (free()) gets the instructions. Same input forms as
 * jobcg_decode_data().
 */
JOBCG_EXPORT int jobcg_decode_parse(const void *data, size_t len, const char *filename,
				    struct bpf_insn **ret, size_t *ret_n);

/** Combine programs the way the kernel does: a request is allowed only if all allow it. */
JOBCG_EXPORT int jobcg_decoded_intersect(struct jobcg_decoded *const *list, size_t n,
					 struct jobcg_decoded **ret);

/** Whether the decoded rules allow a request (@type 'c' or 'b'; @access the kernel's bits). */
JOBCG_EXPORT bool jobcg_decoded_allows(const struct jobcg_decoded *d, char type, uint32_t major,
				       uint32_t minor, unsigned access);

/** The output lines; the array belongs to @d. */
JOBCG_EXPORT size_t jobcg_decoded_lines(const struct jobcg_decoded *d,
					const struct jobcg_decoded_line **ret);

/** Program executions the decode needed (0 for combinations). */
JOBCG_EXPORT uint64_t jobcg_decoded_runs(const struct jobcg_decoded *d);

/**
 * Whether the decode is approximate: the program compares values computed from the major or
 * minor (masks, shifts, offsets, bit tests), so cells between its constants were sampled, not
 * proven. Its rules and jobcg_decoded_allows() may then be wrong: treat every answer as
 * uncertain. A combination is approximate when any of its inputs is.
 */
JOBCG_EXPORT bool jobcg_decoded_approximate(const struct jobcg_decoded *d);

/** Format a decoded rule as "c 195:3 rw" / "b *:* -". Returns @buf. */
JOBCG_EXPORT char *jobcg_decoded_rule_format(const struct jobcg_devrule *r, char *buf, size_t size);

JOBCG_EXPORT void jobcg_decoded_free(struct jobcg_decoded *d);

#ifdef __cplusplus
}
#endif
