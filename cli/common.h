/* jobcg CLI: helpers shared by the subcommands that work on the cgroup tree. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "cli.h"
#include "jobcg/acct.h"
#include "jobcg/context.h"
#include "jobcg/job.h"

/* Configuration and context for a subcommand; free both with cli_ctx_close(). Prints the
 * error and returns non-zero on failure. */
int cli_ctx_open(const struct cli_global *g, unsigned flags, struct jobcg_config **ret_conf,
		 struct jobcg_ctx **ret_ctx);
/*
 * For commands that only end, inspect or clean up jobs: an error in gres.conf, or in a key of
 * cgroup.conf that does not locate the tree, is a warning (CLI_CONFIG_TOLERATE: the library
 * then refuses to make, constrain or grant anything and to touch the managed set), so that an
 * admin's typo never keeps the jobs of a busy node from being ended.
 */
int cli_ctx_open_cleanup(const struct cli_global *g, unsigned flags, struct jobcg_config **ret_conf,
			 struct jobcg_ctx **ret_ctx);
void cli_ctx_close(struct jobcg_config *conf, struct jobcg_ctx *ctx);

/* Print @obj as pretty JSON followed by a newline, then drop the reference. */
void cli_json_print(FILE *f, struct json_object *obj);
/* json for one accounting reading: unavailable items are null. */
struct json_object *cli_json_acct(const struct jobcg_acct *a);
/* Text lines for one accounting reading ("  name: value" / "unavailable"). */
void cli_print_acct(FILE *f, const struct jobcg_acct *a);
/* Signal number from "TERM", "SIGTERM", "15" or a real-time one ("RTMIN+2", "SIGRTMAX");
 * -EINVAL otherwise. */
int cli_parse_signal(const char *s);
/*
 * A point in time as `jobcg acct --since/--until` take it, in microseconds since the epoch:
 * "YYYY-MM-DD", "YYYY-MM-DDTHH:MM" or "YYYY-MM-DDTHH:MM:SS" (local time, as sacct reads it),
 * "@SECONDS" (Unix time), "now", or "now-N" with a unit s, m, h, d or w (N at most 10 years).
 * @now_usec is "now". 0, -EINVAL (not such a time) or -ERANGE (in that shape, a date or time
 * that does not exist here: 2026-02-30, 24:00, a local time skipped by a clock change).
 */
int cli_parse_time(const char *s, uint64_t now_usec, uint64_t *ret_usec);
/* The kernel's dev_t: a 12-bit major and a 20-bit minor; no device has a larger number. */
#define CLI_DEV_MAJOR_MAX 0xfffu
#define CLI_DEV_MINOR_MAX 0xfffffu
/* A device as `jobcg who-has` takes it: "c MAJOR:MINOR", "b MAJOR:MINOR" or a device file. 0,
 * else -ERANGE (a number out of range), -EINVAL (not "c/b MAJOR:MINOR" though it starts so), or
 * stat()'s error (-ENODEV: a file that is no device). */
int cli_parse_device(const char *s, char *type, uint32_t *major, uint32_t *minor);
/* The names of a comma-separated list (`resv --users`), each once, in order, empty ones left
 * out; free with strv_free(). 0 or -ENOMEM. */
int cli_split_names(const char *s, char ***ret);
/* A decimal uid or gid below 2^32-1 ((uid_t)-1 means "none" to the kernel), as getent's
 * fields and numeric --user/--group values are read: 0 or -EINVAL/-ERANGE. */
int cli_parse_id(const char *s, unsigned *ret);
/* Parse --timeout MS. */
int cli_parse_uint(const char *opt, const char *s, unsigned max, unsigned *ret);
/* --grace MS of release and teardown: SIGTERM, then up to this long before SIGKILL. */
#define CLI_GRACE_MS_DEFAULT 5000u
/* Parse @cmd's --grace @s into *ret (0..3600000 ms): 0, or the usage error's exit code. */
int cli_grace_option(const char *cmd, const char *s, unsigned *ret);

/*
 * Look @key up in the NSS database @db ("passwd", "group") with getent(1), the system's own
 * resolver: a statically linked jobcg must not load the NSS modules (LDAP, SSSD) of whatever
 * glibc is installed. *ret_fields gets the ':'-separated fields of the entry (7 for passwd, 4
 * for group: checked). 0, or -ENOENT when it is unknown, else -errno with a message printed.
 */
int cli_getent(const char *db, const char *key, char ***ret_fields);
/* A user name or number: its uid, and its primary gid (the number itself when it has no
 * entry). -ENOENT for an unknown name, -EINVAL for neither a name nor a number. */
int cli_lookup_user(const char *s, uid_t *ret_uid, gid_t *ret_gid);
/* A user name only (getent also answers numbers: the entry's name must be @name). */
int cli_getent_user_name(const char *name, uid_t *ret_uid, gid_t *ret_gid);
/* A user name or number that has a passwd entry (no guess for a number without one): -ENOENT
 * when none has. */
int cli_getent_user(const char *s, uid_t *ret_uid, gid_t *ret_gid);
/* A group name or number. */
int cli_lookup_group(const char *s, gid_t *ret_gid);
/*
 * The argument parsers below return 0 to go on, or 1 when they answered (--help) or failed
 * (the error printed), with *ret_exit the command's exit code. For their return statements:
 */
static inline int cli_answered(int *ret_exit, int exit_code)
{
	*ret_exit = exit_code;
	return 1;
}

/* Options --cpus/--mem/--pids/--best-effort shared by alloc and run: returns 1 if @c was one
 * of them (consumed), 0 if not, or -EINVAL for a bad value (printed; *ret_exit the exit code). */
struct cli_limits {
	struct jobcg_limits l;
	const char *mem_arg, *pids_arg, *weight_arg;
};
int cli_limits_option(const char *cmd, int c, const char *arg, struct cli_limits *out,
		      int *ret_exit);

/*
 * An option that takes one value, given again (@first is the value it had, NULL when it is
 * given for the first time): 0 to go on, else the usage error printed (2). Last-one-wins
 * would make, place or show something other than one of the two asked for without a word.
 */
int cli_once(const char *cmd, const char *opt, const char *first, const char *again);
/* Refuse limits the host cannot enforce, naming the option (unless --best-effort), and, best
 * effort or not, CPUs reserved for the system or (for a @new_job) not online. 0 or 1. */
int cli_limits_refuse(struct jobcg_ctx *ctx, const struct cli_limits *cl, bool new_job);

/* Parsed arguments of the commands that take one TARGET (JOB[.STEP[.TASK]]). */
struct cli_target_args {
	struct jobcg_target t;
	bool json;
	unsigned timeout_ms;
	int sig;
};
enum {
	CLI_TARGET_JSON = 1u << 0,    /* accepts --json */
	CLI_TARGET_TIMEOUT = 1u << 1, /* accepts --timeout MS */
	CLI_TARGET_SIGNAL = 1u << 2,  /* accepts -s/--signal SIG */
};
/* Parse "[OPTIONS] TARGET"; prints @help for --help. 0 to go on, else 1 with *ret_exit. */
int cli_target_args(int argc, char **argv, unsigned what, const char *help,
		    struct cli_target_args *ret, int *ret_exit);
/* freeze, thaw, kill: parse "[--timeout MS] TARGET" (printing @help for --help), open the
 * context and call @fn on the target; returns the exit code. */
int cli_target_wait_cmd(int argc, char **argv, const struct cli_global *g, const char *help,
			int (*fn)(struct jobcg_ctx *ctx, const struct jobcg_target *t,
				  unsigned timeout_ms));
/* Commands that take only [--json]: parse it (printing @help for --help). 0 to go on, else 1
 * with *ret_exit. */
int cli_json_only_args(int argc, char **argv, const char *cmd, const char *help, bool *ret_json,
		       int *ret_exit);

/*
 * A text table whose columns widen to their longest cell, so that no row pushes the columns after
 * it out of line: rows are kept until cli_table_print(). Each column is at least as wide as the
 * header's entry in @min_widths (the widths the table had before, so short tables look as they
 * always did); the last column is not padded.
 */
#define CLI_TABLE_MAX_COLS 16
struct cli_table {
	size_t ncols, nrows;
	const unsigned *min_widths;
	char **cells; /* nrows * ncols, row after row, header first */
};

void cli_table_init(struct cli_table *t, size_t ncols, const unsigned *min_widths);
/* Add one row of ncols cells (copied; NULL is "-"). */
void cli_table_add(struct cli_table *t, const char *const *cells);
/* Print every row and free them. */
void cli_table_print(struct cli_table *t, FILE *f);

/* A byte count as a --mem value that gives it back exactly: the largest of T, G, M, K that
 * divides it, else the bytes with a B. */
void cli_format_size(uint64_t bytes, char *buf, size_t size);
