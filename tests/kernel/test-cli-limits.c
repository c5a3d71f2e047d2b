/* Kernel test: limits the host cannot enforce are refused naming the option, run with
 * --best-effort, and what was asked and skipped is kept on the job (xattrs) for list/show. */
#include <json-c/json.h>

#include "kcli.h"

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char buf[256] = "";

	if (!f)
		return NULL;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return strdup(buf);
}

int main(void)
{
	const char *root = kcli_setup("cli-limits", "jobcg");
	bool mem_ok, pids_ok;
	char *out = NULL, *err = NULL, p[PATH_MAX], *v;
	struct json_object *o, *x;
	int rc;

	is_int(kcli(NULL, "init", NULL), 0, "init");
	mem_ok = kcli_usable("memory");
	pids_ok = kcli_usable("pids");
	tap_diag("memory %s, pids %s", mem_ok ? "usable" : "not usable",
		 pids_ok ? "usable" : "not usable");
	{
		char *args[] = {"run", "--mem", "1G", "--", "true", NULL};

		rc = kcli_run(args, NULL, &err);
	}
	if (mem_ok) {
		is_int(rc, 0, "--mem 1G runs where memory is enforced");
		ok(!err || !strstr(err, "refusing"), "and nothing is refused");
	} else {
		is_int(rc, 1, "--mem 1G is refused where memory cannot be enforced");
		ok(err && strstr(err, "--mem 1G") && strstr(err, "memory controller") &&
		       strstr(err, "--best-effort"),
		   "the error names the option, the reason and the way out");
	}
	free(err);
	is_int(
	    kcli(NULL, "run", "--mem", "1G", "--pids", "64", "--best-effort", "--", "true", NULL),
	    0, "--best-effort runs either way");
	is_int(kcli_count_dirs(root), 1, "nothing left behind");

	is_int(kcli(NULL, "alloc", "8", "--mem", "512M", "--pids", "64", "--best-effort", NULL), 0,
	       "alloc 8 with limits, best effort");
	snprintf(p, sizeof(p), "%s/job_8/memory.max", root);
	v = read_file(p);
	if (mem_ok)
		is_str(v, "536870912", "memory.max set to 512 MiB");
	else
		ok(v == NULL, "no memory.max file: the limit could not be set");
	free(v);
	snprintf(p, sizeof(p), "%s/job_8/pids.max", root);
	v = read_file(p);
	if (pids_ok)
		is_str(v, "64", "pids.max set to 64");
	else
		ok(v == NULL, "no pids.max file: the limit could not be set");
	free(v);

	/* A new process (as after a restart) sees exactly what was asked and what was skipped. */
	is_int(kcli(&out, "show", "--json", "8", NULL), 0, "show 8 --json");
	o = out ? json_tokener_parse(out) : NULL;
	free(out);
	ok(o && json_object_object_get_ex(o, "mem_bytes", &x) &&
	       json_object_get_int64(x) == 536870912,
	   "recorded mem_bytes");
	ok(o && json_object_object_get_ex(o, "pids_max", &x) && json_object_get_int64(x) == 64,
	   "recorded pids_max");
	ok(o && json_object_object_get_ex(o, "best_effort", &x) && json_object_get_boolean(x),
	   "recorded best_effort");
	ok(o && json_object_object_get_ex(o, "skipped_limits", &x) &&
	       json_object_array_length(x) == (size_t)(!mem_ok + !pids_ok),
	   "skipped limits: exactly those not enforceable here");
	ok(o && json_object_object_get_ex(o, "uid", &x) && json_object_get_int(x) == (int)getuid(),
	   "owner uid recorded");
	ok(o && json_object_object_get_ex(o, "created", &x) &&
	       json_object_get_int64(x) > 1600000000,
	   "creation time recorded");
	json_object_put(o);
	is_int(kcli(&out, "list", NULL), 0, "list");
	ok(out && strstr(out, "mem=512M") && strstr(out, "pids=64"), "list shows the limits");
	free(out);
	is_int(kcli(NULL, "alloc", "8", NULL), 1, "alloc of an existing job fails");
	is_int(kcli(NULL, "alloc", "x", NULL), 2, "alloc of a bad id is a usage error");
	is_int(kcli(NULL, "alloc", "9", "--mem", "lots", NULL), 2, "a bad --mem is a usage error");
	is_int(kcli(NULL, "run", "--job", "8", "--mem", "1G", "--", "true", NULL), 1,
	       "limits for an existing job are refused");
	is_int(kcli(NULL, "release", "8", NULL), 0, "release 8");
	is_int(kcli(NULL, "release", "8", NULL), 1, "release again fails");
	is_int(kcli_count_dirs(root), 1, "nothing left behind");

	/* A CPU list is kept as the set it names, however long it was written. */
	{
		size_t n = 2100;
		char *cpus = malloc(2 * n), *q = cpus;

		for (size_t i = 0; cpus && i < n; i++)
			q += sprintf(q, "%s0", i ? "," : "");
		is_int(kcli(NULL, "alloc", "91", "--cpus", cpus, "--best-effort", NULL), 0,
		       "alloc 91 --cpus 0,0,... (4199 bytes), best effort");
		free(cpus);
	}
	is_int(kcli(&out, "show", "--json", "91", NULL), 0, "show 91 --json");
	o = out ? json_tokener_parse(out) : NULL;
	free(out);
	ok(o && json_object_object_get_ex(o, "cpus", &x) &&
	       strcmp(json_object_get_string(x) ?: "", "0") == 0,
	   "recorded cpus: 0");
	json_object_put(o);
	is_int(kcli(NULL, "release", "91", NULL), 0, "release 91");
	return tap_done();
}
