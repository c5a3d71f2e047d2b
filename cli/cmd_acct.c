/* jobcg acct: print the accounting log (per step and per job), as a table or JSON. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "jobcg/acctlog.h"
#include "jobcg/job.h"
#include "jobcg/resv.h"
#include "util.h"

struct acct_out {
	bool json;
	struct json_object *arr;
	const char *resv;      /* --reservation: only records of jobs that ran in it */
	uint64_t since, until; /* --since/--until: records that overlap the window (usec) */
	struct cli_table tab;
};

static void fmt_duration(uint64_t usec, char *buf, size_t size)
{
	uint64_t s = usec / 1000000;

	snprintf(buf, size, "%02llu:%02llu:%02llu", (unsigned long long)(s / 3600),
		 (unsigned long long)(s / 60 % 60), (unsigned long long)(s % 60));
}

static void fmt_bytes(uint64_t b, char *buf, size_t size)
{
	static const char units[] = "KMGTPE";
	double v = (double)b;
	int u = -1;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, size, "%llu", (unsigned long long)b);
	else
		snprintf(buf, size, "%.1f%c", v, units[u]);
}

/* An unavailable reading is null in JSON, never 0. */
static struct json_object *u64_or_null(uint64_t v, const struct jobcg_acct_record *r, unsigned bit)
{
	return (r->unavailable & bit) ? NULL : json_object_new_uint64(v);
}

/* A number, as in the JSON of list, show, alloc and run; an id that is no jobcg job id
 * (written by another program through the library) as the string it is. */
static struct json_object *job_json(const char *id)
{
	uint32_t v;
	char buf[16];

	if (jobcg_job_id_parse(id, &v) == 0) {
		snprintf(buf, sizeof(buf), "%u", v);
		if (strcmp(buf, id) == 0)
			return json_object_new_uint64(v);
	}
	return json_object_new_string(id);
}

/* Control characters (C0, DEL) as '?': job ids and gres of old logs were written as they came,
 * and the table goes to a terminal (the step id is checked when read). */
static char *mask_controls(char *s)
{
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return s;
}

static int print_one(const struct jobcg_acct_record *r, void *u)
{
	struct acct_out *o = u;
	char elapsed[32], cpu[32], mem[32], oom[32], exit_s[32], id[256], gres[256];

	if (o->resv && (!r->reservation || strcmp(r->reservation, o->resv) != 0))
		return 0;
	/* As sacct's window: what ran at any time in it (a start not known counts as the end) */
	if (r->end_usec < o->since || (r->start_usec ? r->start_usec : r->end_usec) > o->until)
		return 0;
	if (o->json) {
		struct json_object *j = json_object_new_object();

		json_object_object_add(
		    j, "type", json_object_new_string(r->kind == JOBCG_ACCT_JOB ? "job" : "step"));
		json_object_object_add(j, "job", job_json(r->job_id));
		if (r->step_id)
			json_object_object_add(j, "step", json_object_new_string(r->step_id));
		json_object_object_add(j, "uid", json_object_new_int64(r->uid));
		json_object_object_add(j, "gid", json_object_new_int64(r->gid));
		json_object_object_add(j, "start_usec", json_object_new_uint64(r->start_usec));
		json_object_object_add(j, "end_usec", json_object_new_uint64(r->end_usec));
		json_object_object_add(j, "exit_code", json_object_new_int(r->exit_code));
		json_object_object_add(j, "exit_signal", json_object_new_int(r->exit_signal));
		json_object_object_add(j, "state",
				       json_object_new_string(jobcg_acct_state_name(r->state)));
		json_object_object_add(j, "cpu_usec",
				       u64_or_null(r->cpu_usec, r, JOBCG_ACCTREC_NO_CPU));
		json_object_object_add(j, "user_usec",
				       u64_or_null(r->user_usec, r, JOBCG_ACCTREC_NO_CPU));
		json_object_object_add(j, "system_usec",
				       u64_or_null(r->system_usec, r, JOBCG_ACCTREC_NO_CPU));
		json_object_object_add(j, "mem_peak",
				       u64_or_null(r->mem_peak, r, JOBCG_ACCTREC_NO_MEM_PEAK));
		json_object_object_add(j, "oom_kills",
				       u64_or_null(r->oom_kills, r, JOBCG_ACCTREC_NO_OOM));
		json_object_object_add(j, "ntasks", json_object_new_int64(r->ntasks));
		json_object_object_add(j, "gres", r->gres ? json_object_new_string(r->gres) : NULL);
		json_object_object_add(j, "reservation",
				       r->reservation ? json_object_new_string(r->reservation)
						      : NULL);
		if (r->reason)
			json_object_object_add(j, "reason", json_object_new_string(r->reason));
		json_object_array_add(o->arr, j);
		return 0;
	}
	snprintf(id, sizeof(id), "%s%s%s", r->job_id, r->step_id ? "." : "",
		 r->step_id ? r->step_id : "");
	fmt_duration(r->end_usec > r->start_usec ? r->end_usec - r->start_usec : 0, elapsed,
		     sizeof(elapsed));
	if (r->unavailable & JOBCG_ACCTREC_NO_CPU)
		snprintf(cpu, sizeof(cpu), "-");
	else
		fmt_duration(r->cpu_usec, cpu, sizeof(cpu));
	if (r->unavailable & JOBCG_ACCTREC_NO_MEM_PEAK)
		snprintf(mem, sizeof(mem), "-");
	else
		fmt_bytes(r->mem_peak, mem, sizeof(mem));
	if (r->unavailable & JOBCG_ACCTREC_NO_OOM)
		snprintf(oom, sizeof(oom), "-");
	else
		snprintf(oom, sizeof(oom), "%llu", (unsigned long long)r->oom_kills);
	if (r->exit_signal)
		snprintf(exit_s, sizeof(exit_s), "0:%d", r->exit_signal);
	else if (r->exit_code < 0)
		snprintf(exit_s, sizeof(exit_s), "-");
	else
		snprintf(exit_s, sizeof(exit_s), "%d:0", r->exit_code);
	snprintf(gres, sizeof(gres), "%s", r->gres ? r->gres : "-");
	/* (a reservation's name is checked when read: nothing to mask) */
	cli_table_add(&o->tab, (const char *const[]){
				   mask_controls(id), jobcg_acct_state_name(r->state), exit_s,
				   elapsed, cpu, mem, oom, r->reservation, mask_controls(gres)});
	return 0;
}

static void acct_help(FILE *f)
{
	fprintf(f,
		"Usage: jobcg acct [--job ID] [--reservation NAME] [--since TIME] [--until TIME]\n"
		"                  [--json]\n\n"
		"Print the accounting records of ended steps and jobs from <StateDir>/acct.jsonl.\n"
		"  --job ID              only records of job ID\n"
		"  --reservation NAME    only records of jobs that ran in reservation NAME\n"
		"  --since TIME          only records of what still ran at TIME or later\n"
		"  --until TIME          only records of what had started by TIME\n"
		"                        TIME: YYYY-MM-DD[THH:MM[:SS]] (local time), @UNIXTIME,\n"
		"                        now or now-N with a unit s, m, h, d or w (now-2h)\n"
		"  --json                one JSON array of records\n");
}

static int cmd_acct(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"job", required_argument, NULL, 'j'},
	    {"json", no_argument, NULL, 'J'},
	    {"reservation", required_argument, NULL, 'R'},
	    {"since", required_argument, NULL, 'S'},
	    {"until", required_argument, NULL, 'U'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *conf = NULL;
	static const unsigned min_widths[] = {16, 14, 7, 9, 9, 8, 4, 12, 0};
	struct acct_out o = {.until = UINT64_MAX};
	const char *job = NULL, *since = NULL, *until = NULL;
	uint64_t now = realtime_usec();
	char *path = NULL;
	int c, r;

	cli_table_init(&o.tab, 9, min_widths);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': {
			uint32_t id;

			/* One job: a second --job would silently replace the first, not add to it.
			 */
			if ((r = cli_once("acct", "--job", job, optarg)))
				return r;
			/* An id no job can have would silently match nothing. */
			if (jobcg_job_id_parse(optarg, &id) < 0)
				return cli_usage_error(
				    "acct", "--job '%s': need a number 1..4294967294", optarg);
			job = optarg;
			break;
		}
		case 'J':
			o.json = true;
			break;
		case 'R':
			if ((r = cli_once("acct", "--reservation", o.resv, optarg)))
				return r;
			/* A name no reservation can have would silently match nothing. */
			if (!jobcg_resv_name_valid(optarg))
				return cli_usage_error("acct",
						       "--reservation '%s': need a name "
						       "[a-z0-9][a-z0-9_-]{0,31}",
						       optarg);
			o.resv = optarg;
			break;
		case 'S':
		case 'U': {
			const char **arg = c == 'S' ? &since : &until;
			const char *opt = c == 'S' ? "--since" : "--until";

			if ((r = cli_once("acct", opt, *arg, optarg)))
				return r;
			r = cli_parse_time(optarg, now, c == 'S' ? &o.since : &o.until);
			if (r == -ERANGE)
				return cli_usage_error("acct", "%s '%s': no such date or time", opt,
						       optarg);
			if (r < 0)
				return cli_usage_error("acct",
						       "%s '%s': need YYYY-MM-DD[THH:MM[:SS]], "
						       "@UNIXTIME, now or now-N[smhdw]",
						       opt, optarg);
			*arg = optarg;
			break;
		}
		case 'h':
			acct_help(stdout);
			return 0;
		default:
			return cli_option_error("acct", argc, argv, "h");
		}
	}
	if (optind < argc)
		return cli_usage_error("acct", "unexpected argument '%s'", argv[optind]);
	/* An empty window would silently match nothing. */
	if (o.since > o.until)
		return cli_usage_error("acct", "--since '%s' is after --until '%s'", since, until);
	if (cli_load_config(g, JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENTRIES | CLI_CONFIG_TOLERATE,
			    &conf) != 0)
		return 1;
	r = jobcg_acctlog_path(conf, &path);
	jobcg_config_free(conf);
	if (r < 0)
		return cli_fail("out of memory");
	if (o.json)
		o.arr = json_object_new_array();
	else
		cli_table_add(&o.tab,
			      (const char *const[]){"JOBID", "STATE", "EXIT", "ELAPSED", "CPUTIME",
						    "MAXMEM", "OOM", "RESV", "GRES"});
	r = jobcg_acctlog_read_all(path, job, print_one, &o);
	free(path);
	/* What was read, also before a failure, as a table whose columns fit every row (a job
	 * id of 10 digits with a named step is wider than the header). */
	if (!o.json)
		cli_table_print(&o.tab, stdout);
	if (r < 0) {
		json_object_put(o.arr);
		cli_print_error(r, "acct");
		return 1;
	}
	if (o.json) {
		printf("%s\n", json_object_to_json_string_ext(o.arr, JSON_C_TO_STRING_PRETTY));
		json_object_put(o.arr);
	}
	return 0;
}
CLI_COMMAND(acct, cmd_acct, "show accounting records of ended steps and jobs");
