/* Runs `jobcg decode` from the build tree: the seed 000 mail as a file and on stdin, --json,
 * a raw instruction file, and malformed input. */
#include <errno.h>
#include <glob.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "unit/insn.h"

static char tmp[] = "/tmp/jobcg-test-cmd-decode-XXXXXX";

/* Run a shell command line; stdout (static buffer) and exit status. */
static char *sh(const char *cmd, int *ret_status)
{
	static char out[1 << 16];
	char sink[4096];
	FILE *f = popen(cmd, "re");
	size_t n;

	if (!f)
		return NULL;
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	while (fread(sink, 1, sizeof(sink), f) > 0)
		;
	int st = pclose(f);
	*ret_status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return out;
}

int main(void)
{
	const char *b = getenv("JOBCG_BUILD_ROOT"), *shared = getenv("JOBCG_SHARED");
	char jobcg[PATH_MAX], cmd[PATH_MAX * 4], pat[PATH_MAX], path[PATH_MAX];
	glob_t g;
	int st;
	char *out;

	if (!b)
		tap_plan_skip_all("JOBCG_BUILD_ROOT not set");
	snprintf(jobcg, sizeof(jobcg), "%s/cli/jobcg", b);
	snprintf(pat, sizeof(pat), "%s/seeds/000_*.txt", shared ? shared : "../shared");
	/* A user's clone has no ../shared beside it (CI has, and makes this a failure). */
	if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
		if (tap_must_work()) {
			printf("not ok 1 - (JOBCG_MUST_WORK) seed 000 not found under %s\n1..1\n",
			       pat);
			return 1;
		}
		tap_plan_skip_all("seed 000 not found (no ../shared beside this clone)");
	}
	if (!mkdtemp(tmp))
		tap_plan_skip_all("cannot make a temporary directory");
	snprintf(path, sizeof(path), "%s", g.gl_pathv[0]);
	globfree(&g);

	static const char want[] = "c *:* rwm\n"
				   "c 195:0 -\n# c 195:0: a request with no access bits is denied\n"
				   "c 195:1 -\n# c 195:1: a request with no access bits is denied\n"
				   "c 195:2 -\n# c 195:2: a request with no access bits is denied\n"
				   "b *:* rwm\n";
	snprintf(cmd, sizeof(cmd), "%s decode '%s' 2>/dev/null", jobcg, path);
	out = sh(cmd, &st);
	is_int(st, 0, "decode FILE exits 0");
	is_str(out, want, "decode FILE: the seed's rules");
	snprintf(cmd, sizeof(cmd), "%s decode - < '%s' 2>/dev/null", jobcg, path);
	out = sh(cmd, &st);
	is_str(out, want, "decode - reads stdin");
	snprintf(cmd, sizeof(cmd), "%s decode < '%s' 2>/dev/null", jobcg, path);
	out = sh(cmd, &st);
	is_str(out, want, "decode with no FILE reads stdin");

	snprintf(cmd, sizeof(cmd), "%s decode --json '%s' 2>/dev/null", jobcg, path);
	out = sh(cmd, &st);
	struct json_object *j = json_tokener_parse(out), *rules = NULL, *notes = NULL;
	ok(j && json_object_object_get_ex(j, "rules", &rules) &&
	       json_object_array_length(rules) == 5 &&
	       json_object_object_get_ex(j, "notes", &notes) &&
	       json_object_array_length(notes) == 3,
	   "--json: 5 rules, 3 notes");
	if (rules && json_object_array_length(rules) == 5) {
		struct json_object *r1 = json_object_array_get_idx(rules, 1), *v = NULL;
		ok(json_object_object_get_ex(r1, "major", &v) && json_object_get_int(v) == 195,
		   "--json: major is a number");
		ok(json_object_object_get_ex(r1, "access", &v) &&
		       strcmp(json_object_get_string(v), "-") == 0,
		   "--json: access '-'");
		struct json_object *r0 = json_object_array_get_idx(rules, 0);
		ok(json_object_object_get_ex(r0, "minor", &v) &&
		       strcmp(json_object_get_string(v), "*") == 0,
		   "--json: wildcard is \"*\"");
	}
	json_object_put(j);

	/* Raw instructions, as bpftool writes them. */
	struct bpf_insn raw[] = {
	    LDX(BPF_W, 2, 1, 0),
	    ALU32_IMM(BPF_AND, 2, 0xffff),
	    LDX(BPF_W, 4, 1, 4),
	    JMP_IMM(BPF_JNE, 2, 1, 3),
	    JMP_IMM(BPF_JNE, 4, 8, 2),
	    MOV64_IMM(0, 0),
	    EXIT(),
	    MOV64_IMM(0, 1),
	    EXIT(),
	};
	snprintf(path, sizeof(path), "%s/prog.bin", tmp);
	FILE *f = fopen(path, "we");
	if (f) {
		fwrite(raw, sizeof(raw), 1, f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd), "%s decode '%s' 2>/dev/null", jobcg, path);
	out = sh(cmd, &st);
	is_str(out,
	       "c *:* rwm\nb *:* rwm\nb 8:* -\n# b 8:*: a request with no access bits is denied\n",
	       "raw file detected and decoded");
	f = fopen(path, "we");
	if (f) {
		fwrite(raw, sizeof(raw) - 5, 1, f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd), "%s decode '%s' 2>&1", jobcg, path);
	out = sh(cmd, &st);
	ok(st == 1 && strstr(out, "instruction 8 is truncated"),
	   "truncated raw file: exit 1, names the instruction");

	snprintf(path, sizeof(path), "%s/bad.txt", tmp);
	f = fopen(path, "we");
	if (f) {
		fputs(
		    "0: (61) r2 = *(u32 *)(r1 +0)\n1: (55) if r2 != 0x2 goto pc+9\n2: (95) exit\n",
		    f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd), "%s decode '%s' 2>&1", jobcg, path);
	out = sh(cmd, &st);
	ok(st == 1 && strstr(out, "instruction 1") && strstr(out, "outside the program"),
	   "jump out of range: exit 1, names the instruction");
	snprintf(cmd, sizeof(cmd), "%s decode /nonexistent 2>&1", jobcg);
	out = sh(cmd, &st);
	ok(st == 1 && strstr(out, "/nonexistent"), "missing file named");
	snprintf(cmd, sizeof(cmd), "%s decode a b 2>&1", jobcg);
	out = sh(cmd, &st);
	is_int(st, 2, "two files: usage error");

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", tmp);
	return tap_done();
}
