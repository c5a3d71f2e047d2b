/* jobcg_spank.so: Slurm's step ids, GPU indices and plugin arguments in jobcg's
 * terms (see slurm_map.h). */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "parse.h"
#include "log.h"
#include "slurm_map.h"
#include "tree.h"
#include "util.h"

int jspank_step_name(uint32_t step_id, char *ret)
{
	switch (step_id) {
	case JSPANK_BATCH_SCRIPT:
		strcpy(ret, "batch");
		return 0;
	case JSPANK_EXTERN_CONT:
		strcpy(ret, "extern");
		return 0;
	case JSPANK_INTERACTIVE_STEP:
		strcpy(ret, "interactive");
		return 0;
	}
	/* Slurm's numbered steps stop below 0xfffffff0, jobcg's at 4294967279: the same. */
	if (step_id > 4294967279u)
		return error_set(-EINVAL, "Slurm step id %u has no jobcg step", step_id);
	snprintf(ret, JOBCG_STEP_ID_MAX, "%u", step_id);
	return 0;
}

int jspank_gpus_map(const struct jobcg_gres_node *jobcg, const char *jobcg_conf,
		    const struct jobcg_gres_node *slurm, const char *slurm_conf, const char *var,
		    const char *value, char **ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	struct jobcg_gres_set set = {};
	size_t words = 0;
	int r;

	if (!*value)
		return jobcg_gres_set_format(jobcg, &set, ret);
	r = jobcg_parse_cpulist(value, &bits, &words);
	if (r < 0)
		return error_set(-EINVAL, "%s='%s' is not a list of GPU indices", var, value);
	for (size_t i = 0; i < words * 64; i++) {
		if (!(bits[i / 64] >> (i % 64) & 1))
			continue;
		/* The same check `jobcg check --slurm-gres` makes for every index of the node. */
		r = i < JOBCG_GRES_MAX
			? jobcg_gres_slurm_gpu(jobcg, jobcg_conf, slurm, slurm_conf, (unsigned)i)
			: error_set(-EINVAL, "GPU %zu is beyond jobcg's %u devices", i,
				    JOBCG_GRES_MAX);
		if (r < 0) {
			jobcg_error_prefix("%s=%s", var, value);
			return r;
		}
		jobcg_gres_set_add(&set, (unsigned)r);
	}
	return jobcg_gres_set_format(jobcg, &set, ret);
}

/* A GPU id at the start of S: decimal digits, or 0x and hex digits; at most UINT32_MAX. */
static int parse_gpu_id(const char *s, uint64_t *ret, const char **ret_end)
{
	char *end;
	unsigned long long v;

	if ((s[0] != '0' || (s[1] != 'x' && s[1] != 'X')))
		return parse_u64_prefix(s, UINT32_MAX, ret, ret_end);
	if (!isxdigit((unsigned char)s[2]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s + 2, &end, 16);
	if (errno || v > UINT32_MAX)
		return -ERANGE;
	*ret = v;
	*ret_end = end;
	return 0;
}

/* Position of node GPU @idx among the step's GPUs (@bits, @words), or -1. */
static int step_pos(const uint64_t *bits, size_t words, unsigned long idx)
{
	int pos = 0;

	if (idx >= words * 64 || !(bits[idx / 64] >> (idx % 64) & 1))
		return -1;
	for (size_t i = 0; i < idx; i++)
		pos += bits[i / 64] >> (i % 64) & 1;
	return pos;
}

/*
 * *out, taken into *ret where the library's parser takes it too (its limits: a repeat count, a
 * map's length; its message names --gpu-bind): a binding the step cannot use is refused here,
 * before any cgroup exists.
 */
static int bind_checked(char **out, char **ret)
{
	struct jobcg_gpu_bind parsed = {};
	int r = jobcg_gpu_bind_parse(*out, &parsed);

	if (r < 0)
		return r;
	jobcg_gpu_bind_done(&parsed);
	*ret = TAKE_PTR(*out);
	return 0;
}

char *jspank_tres_gpu_bind(char *tres_bind)
{
	char *g = strstr(tres_bind, "gpu:");

	if (!g)
		return NULL;
	g += strlen("gpu:");
	g[strcspn(g, ";")] = 0;
	return g;
}

int jspank_gpu_bind(const char *bind, const char *step_gpus, char **ret)
{
	_cleanup_free_ uint64_t *bits = NULL;
	_cleanup_free_ char *out = NULL, *list = NULL;
	size_t words = 0, len = 0;
	const char *b = bind;
	char *tok, *save = NULL;

	*ret = NULL;
	if (!b || !*b)
		return 0;
	if (strncasecmp(b, "verbose", 7) == 0 && (b[7] == ',' || !b[7]))
		b += b[7] ? 8 : 7;
	if (!*b || strcasecmp(b, "none") == 0 || strcasecmp(b, "closest") == 0)
		return 0;
	if (strncasecmp(b, "single:", 7) == 0 || strncasecmp(b, "per_task:", 9) == 0) {
		/* Slurm takes the type in any case, the library in lower case. */
		bool single = strncasecmp(b, "single:", 7) == 0;

		out = strdup_printf("%s:%s", single ? "single" : "per_task", b + (single ? 7 : 9));
		if (!out)
			return -ENOMEM;
		return bind_checked(&out, ret);
	}
	if (strncasecmp(b, "map_gpu:", 8) != 0)
		return error_set(-EINVAL,
				 "--gpu-bind=%s: jobcg binds only single:N, per_task:N and "
				 "map_gpu:LIST (or none, closest)",
				 bind);
	if (jobcg_parse_cpulist(step_gpus ? step_gpus : "", &bits, &words) < 0)
		return error_set(-EINVAL, "SLURM_STEP_GPUS='%s' is not a list of GPU indices",
				 step_gpus);
	list = strdup(b + 8);
	out = malloc(strlen(b) * 4 + 16);
	if (!list || !out)
		return -ENOMEM;
	len = (size_t)sprintf(out, "map_gpu:");
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const char *end = tok;
		uint64_t idx = 0, rep = 1;
		int pos;

		/* An id is decimal ("010" is GPU 10, not 8) or 0x-prefixed hex, as Slurm's map
		 * lists take them; "ID*N" repeats it N times. */
		bool bad = parse_gpu_id(tok, &idx, &end) < 0;
		if (!bad && *end == '*')
			bad = parse_u64(end + 1, UINT32_MAX, &rep) < 0 || rep == 0;
		else if (!bad && *end)
			bad = true;
		if (bad)
			return error_set(-EINVAL, "--gpu-bind=%s: '%s' is not a GPU index", bind,
					 tok);
		pos = step_pos(bits, words, idx);
		if (pos < 0)
			return error_set(-EINVAL,
					 "--gpu-bind=%s names GPU %llu, which this step does not "
					 "hold here (SLURM_STEP_GPUS=%s)",
					 bind, (unsigned long long)idx, step_gpus ? step_gpus : "");
		len += (size_t)sprintf(out + len, "%s%d", len > 8 ? "," : "", pos);
		if (rep > 1)
			len += (size_t)sprintf(out + len, "*%llu", (unsigned long long)rep);
	}
	if (len == 8)
		return error_set(-EINVAL, "--gpu-bind=%s: an empty map", bind);
	return bind_checked(&out, ret);
}

int jspank_args_parse(int argc, char *const argv[], struct jspank_args *ret)
{
	struct jspank_args a = {};

	for (int i = 0; i < argc; i++) {
		char **slot = NULL;
		const char *v = NULL;

		if (startswith(argv[i], "conf="))
			slot = &a.conf, v = argv[i] + 5;
		else if (startswith(argv[i], "slurm_gres="))
			slot = &a.slurm_gres, v = argv[i] + 11;
		else if (startswith(argv[i], "jobcg="))
			slot = &a.jobcg, v = argv[i] + 6;
		if (!slot || !*v) {
			jspank_args_done(&a);
			return error_set(-EINVAL,
					 "plugstack.conf argument '%s': expected conf=DIR, "
					 "slurm_gres=PATH|none or jobcg=PATH",
					 argv[i]);
		}
		/* slurmstepd's PATH and working directory are not the admin's: a relative name
		 * would be a guess. */
		if (*v != '/' && !(slot == &a.slurm_gres && streq(v, "none"))) {
			const char *key = slot == &a.conf	  ? "conf="
					  : slot == &a.slurm_gres ? "slurm_gres="
								  : "jobcg=";

			jspank_args_done(&a);
			return error_set(-EINVAL,
					 "plugstack.conf argument '%s': %s needs an absolute path",
					 argv[i], key);
		}
		/* Which one the admin meant is not known: the second could be a stale line's. */
		if (*slot) {
			jspank_args_done(&a);
			return error_set(-EINVAL, "plugstack.conf argument '%s': %.*s given twice",
					 argv[i], (int)(v - argv[i]), argv[i]);
		}
		if (!(*slot = strdup(v))) {
			jspank_args_done(&a);
			return -ENOMEM;
		}
	}
	*ret = a;
	return 0;
}

void jspank_args_done(struct jspank_args *a)
{
	free(a->conf);
	free(a->slurm_gres);
	free(a->jobcg);
	*a = (struct jspank_args){};
}

char *jspank_expand(const char *tmpl, const char *node)
{
	size_t len = strlen(tmpl) + 1, nl = strlen(node);
	char *out, *o;

	for (const char *p = tmpl; *p; p++)
		if (p[0] == '%' && p[1] == 'n')
			len += nl;
	o = out = malloc(len);
	if (!out)
		return NULL;
	for (const char *p = tmpl; *p; p++) {
		if (*p != '%') {
			*o++ = *p;
			continue;
		}
		if (p[1] == 'n') {
			memcpy(o, node, nl);
			o += nl;
		} else if (p[1] == '%') {
			*o++ = '%';
		} else {
			free(out);
			return NULL;
		}
		p++;
	}
	*o = 0;
	return out;
}

int jspank_exit_code(const int *status, unsigned n)
{
	int code = 0;

	for (unsigned i = 0; i < n; i++) {
		if (WIFSIGNALED(status[i]))
			return 128 + WTERMSIG(status[i]);
		if (WIFEXITED(status[i]) && WEXITSTATUS(status[i]) > code)
			code = WEXITSTATUS(status[i]);
	}
	return code;
}

int jspank_children_parse(const char *text, pid_t *pids, size_t max, size_t *ret_n)
{
	size_t n = 0;

	for (const char *p = text;;) {
		uint64_t v;
		const char *end;

		p += strspn(p, " \n");
		if (!*p)
			break;
		if (parse_u64_prefix(p, INT32_MAX, &v, &end) < 0 || v == 0 ||
		    (*end && *end != ' ' && *end != '\n'))
			return error_set(-EINVAL, "not a list of pids: '%.64s'", text);
		if (n == max)
			return error_set(-E2BIG, "more than %zu children", max);
		pids[n++] = (pid_t)v;
		p = end;
	}
	*ret_n = n;
	return 0;
}

int jspank_stat_parse(const char *stat, pid_t *ret_ppid, unsigned long long *ret_start)
{
	/* "PID (COMM) STATE PPID ...": COMM may hold blanks and parentheses, the last ')' ends
	 * it. */
	const char *p = strrchr(stat, ')');
	unsigned long long start;
	const char *end;
	uint64_t ppid;

	if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
		return -EINVAL;
	p += 4;
	if (parse_u64_prefix(p, INT32_MAX, &ppid, &end) < 0 || *end != ' ')
		return -EINVAL;
	if (tree_parse_starttime(stat, &start) < 0)
		return -EINVAL;
	*ret_ppid = (pid_t)ppid;
	*ret_start = start;
	return 0;
}

bool jspank_is_extern_sleep(const char *cmdline, size_t len)
{
	static const char want[] = "sleep\0"
				   "100000000";

	return len == sizeof(want) && memcmp(cmdline, want, sizeof(want)) == 0;
}
