/* libFuzzer target: what jobcg reads back from its own trusted.jobcg.* xattrs and state files,
 * which a crash can leave cut short and root (or another program) can write anything into.
 * Input: a selector byte picking the value, then the value (bytes for devkeys, text otherwise).
 * Besides "no crash": what parsed writes back as jobcg writes it and parses the same. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acctlog_internal.h"
#include "devpolicy_internal.h"
#include "devprog.h"
#include "gres_internal.h"
#include "gresxattr.h"
#include "job_internal.h"
#include "joblock.h"
#include "resv_internal.h"
#include "tree.h"
#include "util.h"
#include "fuzz-gres-node.h"
#include "fuzz-input.h"

enum kind {
	K_RUNNER,   /* runner, a removing mark's remover: "PID:STARTTIME" */
	K_FREEZING, /* a job lock's freezing mark: "PID:STARTTIME DEADLINE" */
	K_REMOVING, /* removing: "OUTCOME PID:STARTTIME" (or an old "1") */
	K_OWNER,    /* owner: "UID:GID" */
	K_NUMBER,   /* next_step, created, started, signalled, mem, minadded */
	K_PENDING,  /* pending.STEP and <StateDir>/pending/ files */
	K_DEVKEYS,  /* devkeys: a binary index of the policy map's entries */
	K_USERS,    /* a reservation's users */
	K_GRES,	    /* gres: the devices a job, step or reservation holds */
	K_COUNT,
};

static void runner(const char *s)
{
	unsigned long long st;
	char buf[64];
	int pid;

	if (tree_runner_parse(s, &pid, &st) < 0)
		return;
	/* One runner, one spelling: what parsed is exactly what tree_runner_self() writes. */
	snprintf(buf, sizeof(buf), "%d:%llu", pid, st);
	if (pid <= 0 || strcmp(buf, s) != 0)
		abort();
}

static void freezing(const char *s)
{
	unsigned long long st;
	uint64_t deadline;
	char *who = NULL;
	int pid, p2;

	if (joblock_mark_parse(s, &who, &pid, &deadline) < 0)
		return;
	/* The freezer is the mark up to its blank, and its pid the one a runner check sees. */
	if (pid <= 0 || strncmp(s, who, strlen(who)) != 0 || s[strlen(who)] != ' ' ||
	    (tree_runner_parse(who, &p2, &st) == 0 && p2 != pid))
		abort();
	free(who);
}

static void removing(const char *s)
{
	const char *remover;
	enum outcome o;

	job_removing_parse(s, &o, &remover);
	if (o > OUT_UNMADE)
		abort();
	/* The remover is the mark's tail, after one word and its blank. */
	if (remover && (remover <= s || remover > s + strlen(s) || remover[-1] != ' '))
		abort();
	if (remover)
		runner(remover);
}

static void owner(const char *s)
{
	unsigned u, g, u2, g2;
	char buf[32];

	if (parse_owner(s, &u, &g) < 0)
		return;
	snprintf(buf, sizeof(buf), "%u:%u", u, g);
	if (parse_owner(buf, &u2, &g2) < 0 || u2 != u || g2 != g)
		abort();
}

static void number(const char *s)
{
	uint64_t v, v2;
	char buf[32];

	if (parse_u64(s, UINT64_MAX, &v) < 0)
		return;
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	if (parse_u64(buf, UINT64_MAX, &v2) < 0 || v2 != v ||
	    ((s[0] != '0' || !s[1]) && strcmp(buf, s) != 0))
		abort();
}

static void pending(const char *s)
{
	struct acct_pending_entry e, e2;
	char *again;
	size_t n;

	if (acct_pending_parse(s, &e) < 0)
		return;
	/* The line is all the rest, one whole line: nothing cut goes into the log. */
	n = strlen(e.line);
	if (!*e.dir || strchr(e.dir, '\n') || n == 0 || e.line[n - 1] != '\n' ||
	    memchr(e.line, '\n', n - 1))
		abort();
	again = strdup_printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n%s", e.dir_ino, e.log_ino,
			      e.log_size, e.dir, e.line);
	if (!again)
		abort();
	if (acct_pending_parse(again, &e2) < 0 || e2.dir_ino != e.dir_ino ||
	    e2.log_ino != e.log_ino || e2.log_size != e.log_size || strcmp(e2.dir, e.dir) != 0 ||
	    strcmp(e2.line, e.line) != 0)
		abort();
	free(e2.dir);
	free(again);
	free(e.dir);
}

static void devkeys(const uint8_t *data, size_t size)
{
	struct devprog_policy_key *keys = NULL;
	uint64_t id = 0;
	size_t n = 0;

	/* The cgroup asked about is the one the index names (bytes 8-15), so that the fuzzer
	 * reaches the entries; and another one, which no index of that one answers for. */
	if (size >= 16)
		memcpy(&id, data + 8, sizeof(id));
	if (devkeys_parse(data, size, id, &keys, &n) == 0) {
		for (size_t i = 0; i < n; i++)
			if (keys[i].cgroup_id != id || keys[i].type == 0)
				abort();
		free(keys);
		keys = NULL;
		if (devkeys_parse(data, size, id + 1, &keys, &n) != 1)
			abort();
	}
	free(keys);
}

static void users(const char *s)
{
	uid_t *u = NULL, *u2 = NULL;
	size_t n = 0, n2 = 0;
	char *text = NULL;

	if (resv_users_parse(s, &u, &n) < 0)
		return;
	/* Uids as jobcg writes them, digits and commas: no blank or sign taken for a uid. */
	if (strspn(s, "0123456789,") != strlen(s))
		abort();
	if (resv_users_text(u, n, &text) < 0)
		abort();
	if (resv_users_parse(text, &u2, &n2) < 0 || n2 != n ||
	    (n && memcmp(u, u2, n * sizeof(*u)) != 0))
		abort();
	for (size_t i = 0; i < n; i++)
		if (u[i] == (uid_t)-1)
			abort();
	free(text);
	free(u);
	free(u2);
}

static void gres(const char *s)
{
	struct jobcg_gres_node *n = NULL;
	struct jobcg_gres_set all, got, again;
	bool dropped = false;
	char *text = NULL;

	if (fuzz_gres_node(&n) < 0)
		abort();
	jobcg_gres_node_all(n, NULL, &all);
	if (gres_set_parse_known(n, s, &got, &dropped) == 0) {
		/* Only devices the node has, and what is kept is held: it formats and parses
		 * back (strictly) to the same set. */
		if (!jobcg_gres_set_subset(&got, &all) ||
		    jobcg_gres_set_format(n, &got, &text) < 0 ||
		    jobcg_gres_set_parse(n, text, &again) < 0 || memcmp(&got, &again, sizeof(got)))
			abort();
		free(text);
	}
	jobcg_gres_node_free(n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum kind k;
	char *s;

	if (size < 1 || size > 65536)
		return 0;
	k = (enum kind)(data[0] % K_COUNT);
	if (k == K_DEVKEYS) {
		/* A copy the exact size, so that a read past the value is caught. */
		uint8_t *v = malloc(size - 1 ? size - 1 : 1);

		if (!v)
			return 0;
		memcpy(v, data + 1, size - 1);
		devkeys(v, size - 1);
		free(v);
		return 0;
	}
	s = fuzz_cstring(data + 1, size - 1, 0);
	if (!s)
		return 0;
	switch (k) {
	case K_RUNNER:
		runner(s);
		break;
	case K_FREEZING:
		freezing(s);
		break;
	case K_REMOVING:
		removing(s);
		break;
	case K_OWNER:
		owner(s);
		break;
	case K_NUMBER:
		number(s);
		break;
	case K_PENDING:
		pending(s);
		break;
	case K_USERS:
		users(s);
		break;
	case K_GRES:
		gres(s);
		break;
	default:
		break;
	}
	free(s);
	return 0;
}
