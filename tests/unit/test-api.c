/* Unit tests for the public API's contracts: the error record (formatted from itself, stale,
 * INT_MIN), hand-filled targets, runner strings, kernel threads told from /proc/PID/stat, and
 * libbpf's messages kept off stderr. */
#include <bpf/libbpf.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "bpfsys.h"
#include "jobcg/acct.h"
#include "jobcg/acctlog.h"
#include "jobcg/adopt.h"
#include "jobcg/config.h"
#include "jobcg/decode.h"
#include "jobcg/devrule.h"
#include "jobcg/gres.h"
#include "jobcg/inspect.h"
#include "jobcg/job.h"
#include "jobcg/sysinfo.h"
#include "log.h"
#include "procs.h"
#include "tap.h"
#include "util.h"

static int caller_prints, logged_libbpf;

static int caller_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level, (void)fmt, (void)ap;
	caller_prints++;
	return 0;
}

static void log_cb(enum jobcg_log_level level, const char *msg, void *u)
{
	(void)u;
	if (level == JOBCG_LOG_DEBUG && strncmp(msg, "libbpf: ", 8) == 0)
		logged_libbpf++;
}

static bool message_has(int r, const char *what)
{
	return strstr(jobcg_error_message(r), what) != NULL;
}

int main(void)
{
	struct jobcg_target t;
	char buf[256], *s;
	int r;

	/* A message formatted from the record's own message (as "--cpus %s: %s" did). */
	error_set(-EINVAL, "CPU list 'abc': expected a CPU number at 'abc'");
	r = error_set(-EINVAL, "--cpus %s: %s", "abc", jobcg_last_error()->message);
	is_str(jobcg_error_message(r), "--cpus abc: CPU list 'abc': expected a CPU number at 'abc'",
	       "a message made from the record's own keeps it whole");

	/* INT_MIN has no positive counterpart (UBSan stops the test on the negation). */
	jobcg_error_clear();
	is_str(jobcg_error_message(INT_MIN), strerror(EINVAL), "jobcg_error_message(INT_MIN)");
	ok(jobcg_error_format(INT_MIN, buf, sizeof(buf)) == buf && streq(buf, strerror(EINVAL)),
	   "jobcg_error_format(INT_MIN)");

	/* Failures with the same code as an earlier one name their own input. */
	uint32_t id;
	r = jobcg_job_id_parse("x", &id);
	ok(r == -EINVAL && message_has(r, "job id 'x'"), "job id 'x' refused, saying so");
	r = jobcg_controller_from_name("gpu");
	ok(r == -EINVAL && message_has(r, "'gpu'") && !message_has(r, "job id"),
	   "unknown controller: its own message (%s)", jobcg_error_message(r));
	r = jobcg_acct_state_from_name("RUNNING");
	ok(r == -EINVAL && message_has(r, "'RUNNING'") && !message_has(r, "controller"),
	   "unknown accounting state: its own message (%s)", jobcg_error_message(r));
	is_int(jobcg_controller_from_name(NULL), -EINVAL, "controller NULL refused");
	is_int(jobcg_controller_from_name("memory"), JOBCG_CTRL_MEMORY, "memory is a controller");

	/* Targets filled by hand. */
	t = (struct jobcg_target){.job = 1, .step = "../../..", .task = JOBCG_TASK_ALL};
	errno = 0;
	ok(!jobcg_target_relpath(&t) && errno == EINVAL, "step '../../..' has no path");
	t = (struct jobcg_target){.job = 1, .step = "0", .task = -7};
	ok(!jobcg_target_relpath(&t) && errno == EINVAL, "task -7 has no path");
	t = (struct jobcg_target){.job = 1, .step = "0", .task = JOBCG_TASK_MAX + 1};
	ok(!jobcg_target_relpath(&t), "task %d has no path", JOBCG_TASK_MAX + 1);
	t = (struct jobcg_target){.job = 0, .task = JOBCG_TASK_ALL};
	ok(!jobcg_target_relpath(&t), "job 0 has no path");
	t = (struct jobcg_target){.job = 1, .task = 3};
	ok(!jobcg_target_relpath(&t), "a task without a step has no path");
	t = (struct jobcg_target){.job = 1, .task = JOBCG_TASK_ALL};
	memset(t.step, '7', sizeof(t.step)); /* no NUL: read past the struct before */
	ok(!jobcg_target_relpath(&t) && errno == EINVAL, "a step without its NUL has no path");
	jobcg_target_format(&t, buf, sizeof(buf));
	ok(strlen(buf) == 2 + JOBCG_STEP_ID_MAX, "...and formats within its array (%s)", buf);
	t = (struct jobcg_target){.job = 4, .step = "extern", .task = JOBCG_TASK_SPECIAL};
	s = jobcg_target_relpath(&t);
	is_str(s, "job_4/step_extern/user/task_special", "a good target still has its path");
	free(s);
	ok(jobcg_target_parse("4.0.65535", &t) == 0 && (s = jobcg_target_relpath(&t)) &&
	       streq(s, "job_4/step_0/user/task_65535"),
	   "so has a parsed one");
	free(s);

	/* Runner strings are "PID:STARTTIME", digits only (4194305 is above any pid_max). */
	is_int(jobcg_runner_wait("4194305:-5", 0), -EINVAL, "runner '4194305:-5' refused");
	is_int(jobcg_runner_wait("4194305: 5", 0), -EINVAL, "runner '4194305: 5' refused");
	is_int(jobcg_runner_wait(" 4194305:5", 0), -EINVAL, "runner ' 4194305:5' refused");
	is_int(jobcg_runner_wait("+4194305:5", 0), -EINVAL, "runner '+4194305:5' refused");
	is_int(jobcg_runner_wait("4194305:5x", 0), -EINVAL, "runner '4194305:5x' refused");
	is_int(jobcg_runner_wait("4194305:", 0), -EINVAL, "runner '4194305:' refused");
	is_int(jobcg_runner_wait("0:5", 0), -EINVAL, "runner '0:5' refused");
	/* A pid that cannot exist (above pid_max's limit): gone, so the wait ends at once. */
	is_int(jobcg_runner_wait("4194305:5", 0), 0, "a runner that is gone ends the wait");

	/* NULL where a result or the input of a parser goes: -EINVAL, not a crash. */
	{
		static const struct bpf_insn two[2] = {{.code = 0xb7}, {.code = 0x95}};
		struct jobcg_decoded *d = NULL;
		struct bpf_insn *insns = NULL;
		size_t n = 0;
		const char *mnt = NULL;

		is_int(jobcg_job_id_parse("1", NULL), -EINVAL, "job id: no ret");
		is_int(jobcg_target_parse("1.0", NULL), -EINVAL, "target: no ret");
		is_int(jobcg_devrule_parse("c 1:3 rwm", NULL), -EINVAL, "device rule: no ret");
		is_int(jobcg_gres_request_parse("gpu:1", NULL), -EINVAL, "gres request: no ret");
		is_int(jobcg_gpu_bind_parse("closest", NULL), -EINVAL, "gpu bind: no ret");
		is_int(jobcg_config_load_files("/nonexistent", NULL, NULL, 0, NULL), -EINVAL,
		       "configuration: no ret");
		is_int(jobcg_pid_uid(getpid(), NULL), -EINVAL, "pid uid: no ret");
		is_int(jobcg_progcache_new(NULL), -EINVAL, "program cache: no ret");
		is_int(jobcg_cgroup2_mount(NULL), -EINVAL, "cgroup2 mount: no ret");
		is_int(jobcg_devices_v1_notes(NULL), -EINVAL, "v1 notes: no ret");
		is_int(jobcg_acct_parse("memory.events", NULL, &(struct jobcg_acct){0}), -EINVAL,
		       "accounting: no text");
		is_int(jobcg_acct_parse("memory.events", "oom 1\n", NULL), -EINVAL,
		       "accounting: no result");
		is_int(jobcg_acct_read_dir(NULL, &(struct jobcg_acct){0}), -EINVAL,
		       "accounting: no directory");
		is_int(jobcg_acctlog_read(NULL, NULL, NULL, NULL), -EINVAL,
		       "accounting log: no path");
		is_int(jobcg_decode_parse(NULL, 8, NULL, &insns, &n), -EINVAL, "decode: no data");
		is_int(jobcg_decode_program(NULL, 5, NULL, &d), -EINVAL, "decode: no program");
		is_int(jobcg_decode_program(two, 2, NULL, NULL), -EINVAL, "decode: no result");
		is_int(jobcg_decode_with_live_maps(NULL, 0, &d), -EINVAL,
		       "an empty program is -EINVAL live too, as jobcg_decode_program() says");
		is_int(jobcg_decode_for_cgroup(two, 2, NULL, &d), -EINVAL,
		       "decoding for no cgroup is refused");
		if (jobcg_cgroup2_mount(&mnt) == 0) {
			unsigned acc;
			bool opaque;
			size_t np;

			is_int(jobcg_cgroup_device_access(mnt, NULL, 'q', 1, 3, &acc, &opaque, &np),
			       -EINVAL, "device type 'q' refused");
			is_int(jobcg_cgroup_devices_access(NULL, 999, NULL,
							   &(struct jobcg_devreq){'c', 1, 3, 0}, 1,
							   &acc, &opaque, &np),
			       -EINVAL, "a cgroup without its path refused, dirfd or not");
		} else {
			tap_skip("no cgroup v2 mount: device type checks");
			tap_skip("no cgroup v2 mount: device type checks");
		}
	}

	/* Kernel threads, told by PF_KTHREAD (0x00200000) in /proc/PID/stat's ninth field. */
	is_int(proc_stat_is_kthread("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0\n"), 1,
	       "kthreadd is a kernel thread");
	is_int(proc_stat_is_kthread("77 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0\n"), 1,
	       "a kworker is one");
	is_int(proc_stat_is_kthread("1234 (a) S 1 (b) R 1 1234 1234 0 -1 4194560 5 0\n"), 0,
	       "a process whose name holds ') S 1 (' is not (fields after the last ')')");
	is_int(proc_stat_is_kthread("1234 (sh) S 1 1234 1234 0 -1 4194304 5 0\n"), 0,
	       "a shell is not");
	is_int(proc_stat_is_kthread("12 (x"), -EINVAL, "truncated text does not parse");
	is_int(proc_stat_is_kthread("12 (x) S 1 2 3"), -EINVAL, "nor does a short one");
	is_int(proc_stat_is_kthread("12 (x) S 1 2 3 4 5 z 0"), -EINVAL, "nor flags 'z'");
	is_int(pid_movable(getpid()), 0, "this process may be moved");
	is_int(pid_movable(0), -EINVAL, "pid 0 refused");
	is_int(pid_movable(-4), -EINVAL, "pid -4 refused");
	is_int(pid_movable(4194305), -ESRCH, "a pid that cannot exist: no such process");

	/* libbpf's messages go to the log callback, and the caller's print function is back. A
	 * field of 3 bytes is given a 4-byte type: a member past its struct's end, which every
	 * kernel refuses (as it refuses any BTF to a process without CAP_BPF), and libbpf says so.
	 * No stand-in for the system call: Debian's libbpf.so makes its calls without syscall(). */
	{
		static const struct bpfsys_field f[] = {{.name = "a", .size = 3}};
		struct bpfsys_struct st = {.name = "x", .fields = f, .n_fields = 1};
		uint32_t ids[1];
		int fd = -1;
		libbpf_print_fn_t prev;

		jobcg_set_log(log_cb, NULL, JOBCG_LOG_DEBUG);
		libbpf_set_print(caller_print);
		r = bpfsys_btf_load(&st, 1, &fd, ids);
		ok(r < 0, "BTF loading refused (%d)", r);
		is_int(caller_prints, 0, "libbpf printed nothing through the process's printer");
		ok(logged_libbpf > 0, "libbpf's message reached the log callback at debug level");
		prev = libbpf_set_print(NULL);
		ok(prev == caller_print, "the caller's print function is restored");
		jobcg_set_log(NULL, NULL, JOBCG_LOG_INFO);
	}
	return tap_done();
}
