/* jobcg kernel tests: device programs attached to real cgroups are read back, decoded and
 * checked against what the kernel actually lets a process open. */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devgen.h"
#include "config_internal.h"
#include "devices.h"
#include "jobcg/inspect.h"
#include "ktest.h"
#include "tap.h"

static char job[PATH_MAX], step[PATH_MAX], snapcg[PATH_MAX];
static char *pin_base; /* ktest_pin_dir(): static storage */

static int load(const char *name, const struct prog *p)
{
	char log[8192] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = sizeof(log), .log_level = 1);
	int fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, name, "GPL", p->v, p->n, &o);
	if (fd < 0) {
		/* Retry without a log: a log level makes some kernels fail on a full buffer. */
		LIBBPF_OPTS(bpf_prog_load_opts, o2);
		fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, name, "GPL", p->v, p->n, &o2);
		if (fd < 0)
			tap_diag("load %s: %s\n%.2000s", name, strerror(errno), log);
	}
	return fd;
}

/* What the kernel decides: a child moves itself into @cg and opens @dev. */
static int kernel_allows(const char *cg, const char *dev, int flags)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		char p[PATH_MAX], buf[32];
		snprintf(p, sizeof(p), "%s/cgroup.procs", cg);
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		int l = snprintf(buf, sizeof(buf), "%d", (int)getpid());
		if (fd < 0 || write(fd, buf, (size_t)l) != l)
			_exit(3);
		close(fd);
		fd = open(dev, flags | O_CLOEXEC);
		if (fd >= 0)
			_exit(0);
		_exit(errno == EPERM ? 1 : 2);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st) == 0 ? 1 : WEXITSTATUS(st) == 1 ? 0 : -1;
}

static void compare_with_kernel(const char *cg, const struct jobcg_cginspect *in, const char *label)
{
	static const char *const devs[] = {"/dev/null",	  "/dev/zero",	  "/dev/full",
					   "/dev/random", "/dev/urandom", "/dev/tty"};
	unsigned agree = 0, total = 0;

	for (size_t k = 0; k < sizeof(devs) / sizeof(devs[0]); k++) {
		struct stat st;
		if (stat(devs[k], &st) < 0 || !S_ISCHR(st.st_mode))
			continue;
		for (int f = 0; f < 2; f++) {
			int kr = kernel_allows(cg, devs[k], f ? O_WRONLY : O_RDONLY);
			int dr =
			    jobcg_cginspect_allows(in, 'c', major(st.st_rdev), minor(st.st_rdev),
						   f ? JOBCG_DEV_ACC_WRITE : JOBCG_DEV_ACC_READ);
			if (kr < 0)
				continue; /* e.g. /dev/tty without a terminal: ENXIO, not a device
					     decision */
			total++;
			if (kr == dr)
				agree++;
			else
				tap_diag("%s: %s %s: kernel %d, decoded %d", label, devs[k],
					 f ? "write" : "read", kr, dr);
		}
	}
	ok(total > 0 && agree == total, "%s: decoded rules match the kernel on %u/%u real opens",
	   label, agree, total);
}

static char *run_cli(const char *args);

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info);
	return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
}

/* On how many character devices 0-199:0-11 and accesses @a and @b differ. */
static unsigned decoded_differ(const struct jobcg_decoded *a, const struct jobcg_decoded *b)
{
	unsigned n = 0;

	for (uint32_t ma = 0; ma < 200; ma++)
		for (uint32_t mi = 0; mi < 12; mi++)
			for (unsigned acc = 0; acc <= 6; acc++)
				n += jobcg_decoded_allows(a, 'c', ma, mi, acc) !=
				     jobcg_decoded_allows(b, 'c', ma, mi, acc);
	return n;
}

/*
 * What bpftool prints and writes for a loaded program must decode to the same rules as the
 * live path (both forms: text, and raw instructions with kernel call addresses).
 */
static void compare_bpftool(int fd, const struct jobcg_decoded *live, const char *label,
			    bool has_maps)
{
	char cmd[PATH_MAX * 2], file[PATH_MAX];
	uint32_t id = prog_id(fd);
	size_t len = 0;
	struct jobcg_decoded *d = NULL;

	if (access("/usr/sbin/bpftool", X_OK) != 0 && access("/usr/bin/bpftool", X_OK) != 0) {
		tap_skip("bpftool not installed");
		return;
	}
	snprintf(cmd, sizeof(cmd), "bpftool prog dump xlated id %u", id);
	char *text = ktest_capture(cmd, &len);
	if (!ok(text != NULL, "%s: bpftool prints the program", label))
		return;
	int r = jobcg_decode_data(text, len, "bpftool", NULL, &d);
	if (has_maps) {
		ok(r == -EOPNOTSUPP, "%s: bpftool text alone is opaque (maps not in it): %s", label,
		   jobcg_last_error()->message);
	} else if (ok(r == 0, "%s: bpftool text decodes (%s)", label,
		      r ? jobcg_last_error()->message : "ok")) {
		ok(decoded_differ(d, live) == 0, "%s: bpftool text decodes like the live program",
		   label);
		jobcg_decoded_free(d);
		d = NULL;
	}
	if (r != 0 && !has_maps)
		ktest_diag_lines("", text);
	if (!has_maps) {
		snprintf(cmd, sizeof(cmd), "bpftool -j prog dump xlated id %u", id);
		char *js = ktest_capture(cmd, &len);
		r = js ? jobcg_decode_data(js, len, "bpftool-json", NULL, &d) : -EIO;
		if (ok(r == 0, "%s: bpftool -j output decodes (%s)", label,
		       r ? jobcg_last_error()->message : "ok")) {
			ok(decoded_differ(d, live) == 0,
			   "%s: bpftool -j output decodes like the live program", label);
			jobcg_decoded_free(d);
			d = NULL;
		}
	}
	if (has_maps) {
		/* As root on this host the CLI reads the maps the text names by id. */
		char tf[PATH_MAX];
		snprintf(tf, sizeof(tf), "%s/prog-%u.txt", ktest_tmpdir(), id);
		FILE *t = fopen(tf, "we");
		if (t) {
			fputs(text, t);
			fclose(t);
		}
		snprintf(cmd, sizeof(cmd), "decode %s", tf);
		char *out = run_cli(cmd);
		ok(out && strstr(out, "c *:* -\n") && strstr(out, "c 1:3 rwm\n") &&
		       strstr(out, "c 195:* rwm\n"),
		   "%s: jobcg decode of bpftool text reads the live map", label);
		if (out && !strstr(out, "c 195:* rwm"))
			ktest_diag_lines("", out);
	}
	snprintf(file, sizeof(file), "%s/prog-%u.bin", ktest_tmpdir(), id);
	snprintf(cmd, sizeof(cmd), "bpftool prog dump xlated id %u file %s", id, file);
	if (!ok(ktest_capture(cmd, NULL) != NULL, "%s: bpftool writes raw instructions", label))
		return;
	FILE *f = fopen(file, "re");
	static char raw[1 << 16];
	size_t n = f ? fread(raw, 1, sizeof(raw), f) : 0;
	if (f)
		fclose(f);
	r = jobcg_decode_data(raw, n, file, NULL, &d);
	if (has_maps)
		ok(r == -EOPNOTSUPP, "%s: raw file alone is opaque: %s", label,
		   jobcg_last_error()->message);
	else if (ok(r == 0, "%s: raw file decodes (%s)", label,
		    r ? jobcg_last_error()->message : "ok")) {
		ok(decoded_differ(d, live) == 0, "%s: raw file decodes like the live program",
		   label);
		jobcg_decoded_free(d);
	}
}

static char *run_cli(const char *args)
{
	const char *b = getenv("JOBCG_BUILD_ROOT");
	char cmd[PATH_MAX * 3];
	static char out[1 << 20];
	char sink[4096];
	size_t n;

	snprintf(cmd, sizeof(cmd), "%s/cli/jobcg %s 2>&1", b ? b : ".", args);
	FILE *f = popen(cmd, "re");
	if (!f)
		return NULL;
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	while (fread(sink, 1, sizeof(sink), f) > 0) /* drain, so the command never gets SIGPIPE */
		;
	int st = pclose(f);
	if (st != 0)
		tap_diag("`%s` exited with %d:\n%s", cmd, st, out);
	return st == 0 ? out : NULL;
}

int main(void)
{
	const char *root = ktest_setup("decode-live");
	pin_base = ktest_pin_dir("decode");
	int jobfd = -1, stepfd = -1, snapfd = -1, pa = -1, pb = -1, ps = -1, map = -1;
	static struct prog a, b, s;
	struct jobcg_cginspect *in = NULL;

	snprintf(job, sizeof(job), "%s/job_77", root);
	snprintf(step, sizeof(step), "%s/step_0", job);
	snprintf(snapcg, sizeof(snapcg), "%s/snap", root);
	if (mkdir(job, 0755) < 0 || mkdir(step, 0755) < 0 || mkdir(snapcg, 0755) < 0) {
		printf("Bail out! mkdir: %s\n", strerror(errno));
		return 1;
	}
	jobfd = open(job, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	stepfd = open(step, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snapfd = open(snapcg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	/* Job: Slurm-shaped, /dev/zero (1:5) managed and denied, GPUs 195:0-2 denied, 195:3
	 * allowed. */
	struct rule slurm[] = {
	    {'c', 1, 5, 7, false},   {'c', 195, 0, 7, false}, {'c', 195, 1, 7, false},
	    {'c', 195, 2, 7, false}, {'c', 195, 3, 7, true},
	};
	gen_slurm(&a, slurm, sizeof(slurm) / sizeof(slurm[0]));
	/* Step: crun-shaped allow list, /dev/null rwm, /dev/full read-only, /dev/random rw, GPUs
	 * rw. */
	struct rule crun[] = {
	    {'c', 1, 3, 7, true},     {'c', 1, 7, 2, true}, {'c', 1, 8, 6, true},
	    {'c', 195, ANY, 6, true}, {'c', 1, 5, 7, true},
	};
	gen_first_match(&b, crun, sizeof(crun) / sizeof(crun[0]), false, CRUN);
	pa = load("jobcg_tslurm", &a);
	pb = load("jobcg_tcrun", &b);
	if (!ok(pa >= 0 && pb >= 0, "programs load"))
		goto out;
	ok(bpf_prog_attach(pa, jobfd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) == 0,
	   "attach at the job (multi)");
	ok(bpf_prog_attach(pb, stepfd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) == 0,
	   "attach at the step (multi)");

	/* The library path. */
	if (is_int(jobcg_cgroup_inspect(step, NULL, &in), 0, "inspect the step")) {
		is_int(in->n_progs, 2, "two effective programs at the step");
		int seen_job = 0, seen_step = 0;
		for (size_t k = 0; k < in->n_progs; k++) {
			const struct jobcg_cgprog *p = &in->progs[k];
			tap_diag("prog %u %s at %s flags %u %s", p->id, p->name,
				 p->attached_at ? p->attached_at : "?", p->attach_flags,
				 p->opaque_reason ? p->opaque_reason : "decoded");
			if (strcmp(p->name, "jobcg_tslurm") == 0)
				seen_job = p->attached_at && strcmp(p->attached_at, job) == 0 &&
					   p->attach_flags == BPF_F_ALLOW_MULTI && p->decoded;
			if (strcmp(p->name, "jobcg_tcrun") == 0)
				seen_step = p->attached_at && strcmp(p->attached_at, step) == 0 &&
					    p->attach_flags == BPF_F_ALLOW_MULTI && p->decoded;
		}
		ok(seen_job, "Slurm program found attached at the job with multi, decoded");
		ok(seen_step, "crun program found attached at the step with multi, decoded");
		ok(in->combined && !in->any_opaque, "combined rules complete");
		ok(jobcg_cginspect_allows(in, 'c', 195, 3, JOBCG_DEV_ACC_READ) == 1,
		   "195:3 r allowed");
		ok(jobcg_cginspect_allows(in, 'c', 195, 3, JOBCG_DEV_ACC_MKNOD) == 0,
		   "195:3 m denied by the step");
		ok(jobcg_cginspect_allows(in, 'c', 195, 1, JOBCG_DEV_ACC_READ) == 0,
		   "195:1 denied by the job");
		ok(jobcg_cginspect_allows(in, 'c', 1, 5, JOBCG_DEV_ACC_READ) == 0,
		   "1:5 allowed by the step, denied by the job");
		compare_with_kernel(step, in, "step (job + step programs)");
		for (size_t k = 0; k < in->n_progs; k++)
			if (in->progs[k].decoded)
				compare_bpftool(in->progs[k].id == prog_id(pa) ? pa : pb,
						in->progs[k].decoded, in->progs[k].name, false);
		jobcg_cginspect_free(in);
		in = NULL;
	}
	if (jobcg_cgroup_inspect(job, NULL, &in) == 0) {
		is_int(in->n_progs, 1, "one effective program at the job");
		compare_with_kernel(job, in, "job (Slurm program)");
		jobcg_cginspect_free(in);
		in = NULL;
	}

	/* A map-driven program (snapd layout): decoded by reading the live map. */
	LIBBPF_OPTS(bpf_map_create_opts, mo);
	map = bpf_map_create(BPF_MAP_TYPE_HASH, "jobcg_tsnap", 9, 1, 64, &mo);
	if (ok(map >= 0, "snapd-layout map created")) {
		uint8_t one = 1;
		struct snapd_map keys = {0};
		snapd_add(&keys, 2, 1, 3);
		snapd_add(&keys, 2, 1, 8);
		snapd_add(&keys, 2, 195, UINT32_MAX);
		for (int k = 0; k < keys.n; k++)
			bpf_map_update_elem(map, keys.keys[k].key, &one, BPF_ANY);
		gen_snapd(&s, map, true);
		ps = load("jobcg_tsnapd", &s);
		if (ok(ps >= 0, "snapd-shaped program loads") &&
		    ok(bpf_prog_attach(ps, snapfd, BPF_CGROUP_DEVICE, 0) == 0,
		       "attach (no flags)") &&
		    is_int(jobcg_cgroup_inspect(snapcg, NULL, &in), 0, "inspect the snap cgroup")) {
			ok(in->n_progs == 1 && in->progs[0].decoded, "map program decoded: %s",
			   in->n_progs && in->progs[0].opaque_reason ? in->progs[0].opaque_reason
								     : "yes");
			ok(in->n_progs == 1 && in->progs[0].attach_flags == 0, "attach flags none");
			compare_with_kernel(snapcg, in,
					    "snap (map lookups, inlined by the kernel)");
			if (in->n_progs == 1 && in->progs[0].decoded)
				compare_bpftool(ps, in->progs[0].decoded, "snapd-shaped", true);
			ok(jobcg_cginspect_allows(in, 'c', 195, 77, JOBCG_DEV_ACC_WRITE) == 1,
			   "195:77 via the wildcard key");
			jobcg_cginspect_free(in);
			in = NULL;
		}
		/* A kernel before 5.6 has no batch lookup: the map is read key by key, and the
		 * answer must be the same. */
		if (!tap_test_hooks())
			tap_skip("the map read key by key: needs -Dtest_hooks=true");
		else {
			setenv("JOBCG_TEST_FLAGS", "no-map-batch", 1);
			if (is_int(jobcg_cgroup_inspect(snapcg, NULL, &in), 0,
				   "inspect the snap cgroup, its map read key by key")) {
				ok(in->n_progs == 1 && in->progs[0].decoded,
				   "map program decoded from the map read key by key");
				compare_with_kernel(snapcg, in, "snap, map read key by key");
				ok(jobcg_cginspect_allows(in, 'c', 195, 77, JOBCG_DEV_ACC_WRITE) ==
					   1 &&
				       jobcg_cginspect_allows(in, 'c', 1, 8, JOBCG_DEV_ACC_READ) ==
					   1,
				   "195:77 via the wildcard key, 1:8 via its own");
				jobcg_cginspect_free(in);
				in = NULL;
			}
			unsetenv("JOBCG_TEST_FLAGS");
		}
	}

	/* The CLI, as an administrator runs it. */
	char args[PATH_MAX * 2];
	snprintf(args, sizeof(args), "devices %s", step);
	char *out = run_cli(args);
	ok(out && strstr(out, "name jobcg_tslurm") && strstr(out, "flags multi") &&
	       strstr(out, job),
	   "jobcg devices lists the job's program and where it is attached");
	/* 195:3 behaves like the rest of major 195 there, so it has no line of its own. */
	const char *comb = out ? strstr(out, "combined rules:") : NULL;
	ok(comb && strstr(comb, "c 195:* rw\n") && strstr(comb, "c 195:1 -\n") &&
	       !strstr(comb, "c 195:3") && strstr(comb, "c 1:3 rwm") && !strstr(comb, "c 1:5"),
	   "jobcg devices prints the combined rules");
	ok(out && strstr(out, "/dev/null"), "device nodes named from /dev");
	snprintf(args, sizeof(args), "devices --json %s", step);
	out = run_cli(args);
	struct json_object *j = out ? json_tokener_parse(out) : NULL, *progs = NULL;
	ok(j && json_object_object_get_ex(j, "programs", &progs) &&
	       json_object_array_length(progs) == 2,
	   "jobcg devices --json lists two programs");
	json_object_put(j);
	/* JOB.STEP resolution under a root given by JOBCG_ROOT. */
	setenv("JOBCG_ROOT", root + strlen(ktest_cgroup_mount()), 1);
	out = run_cli("devices 77.0");
	ok(out && strstr(out, step), "JOB.STEP resolved under $JOBCG_ROOT");
	unsetenv("JOBCG_ROOT");

	snprintf(args, sizeof(args), "who-has --root %s 'c 1:3'", root);
	out = run_cli(args);
	ok(out && strstr(out, step) && strstr(out, "job 77 step 0") && strstr(out, snapcg),
	   "who-has c 1:3: the step (with job and step ids) and the snap cgroup");
	snprintf(args, sizeof(args), "who-has --root %s 'c 195:1'", root);
	out = run_cli(args);
	ok(out && !strstr(out, step) && strstr(out, snapcg) && strstr(out, "# "),
	   "who-has c 195:1: not the job's step (Slurm denies), the snap cgroup yes");
	if (out)
		ktest_diag_lines("", out);
	snprintf(args, sizeof(args), "who-has --json --root %s /dev/zero", root);
	out = run_cli(args);
	j = out ? json_tokener_parse(out) : NULL;
	struct json_object *cgs = NULL;
	bool has_step = false;
	if (j && json_object_object_get_ex(j, "cgroups", &cgs))
		for (size_t k = 0; k < json_object_array_length(cgs); k++) {
			struct json_object *c = json_object_array_get_idx(cgs, k), *p = NULL;
			if (json_object_object_get_ex(c, "cgroup", &p) &&
			    strcmp(json_object_get_string(p), step) == 0)
				has_step = true;
		}
	ok(j && cgs && !has_step, "who-has --json /dev/zero: the step may not (job denies 1:5)");
	json_object_put(j);

	/* A program with a bpf-to-bpf call: the kernel's translated form stores the call
	 * differently. */
	{
		char sc[PATH_MAX];
		static struct prog q;
		snprintf(sc, sizeof(sc), "%s/subprog", root);
		emit(&q, LDX(BPF_W, 6, 1, 4));				      /* r6 = major */
		emit(&q, LDX(BPF_W, 1, 1, 8));				      /* r1 = minor */
		emit(&q, INSN(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, 4)); /* r0 = f(minor) */
		emit(&q, JMP_IMM(BPF_JNE, 6, 1, 1));			      /* major 1 only */
		emit(&q, EXIT());
		emit(&q, MOV64_IMM(0, 1));
		emit(&q, EXIT());
		/* f: deny minor 5 (/dev/zero under major 1) */
		emit(&q, MOV64_IMM(0, 1));
		emit(&q, JMP_IMM(BPF_JNE, 1, 5, 1));
		emit(&q, MOV64_IMM(0, 0));
		emit(&q, EXIT());
		int pq = load("jobcg_tsubprog", &q);
		int qfd = mkdir(sc, 0755) == 0 ? open(sc, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		if (pq < 0)
			tap_skip("kernel refused a device program with a bpf-to-bpf call");
		else if (ok(qfd >= 0 && bpf_prog_attach(pq, qfd, BPF_CGROUP_DEVICE, 0) == 0,
			    "subprogram program attached") &&
			 is_int(jobcg_cgroup_inspect(sc, NULL, &in), 0, "inspect it")) {
			ok(in->n_progs == 1 && in->progs[0].decoded,
			   "subprogram program decoded (%s)",
			   in->n_progs && in->progs[0].opaque_reason ? in->progs[0].opaque_reason
								     : "yes");
			compare_with_kernel(sc, in, "bpf-to-bpf call");
			jobcg_cginspect_free(in);
			in = NULL;
		}
		if (pq >= 0 && qfd >= 0)
			bpf_prog_detach2(pq, qfd, BPF_CGROUP_DEVICE);
		if (pq >= 0)
			close(pq);
		if (qfd >= 0)
			close(qfd);
	}

	/* A program whose answer depends on the caller's uid: opaque, with the reason, and the
	 * combined answer says "unknown" where no decodable program denies. */
	{
		char opq[PATH_MAX];
		static struct prog o;
		snprintf(opq, sizeof(opq), "%s/opaque", step);
		emit(&o, CALL(BPF_FUNC_get_current_uid_gid));
		emit(&o, JMP_IMM(BPF_JEQ, 0, 12345, 2));
		emit(&o, MOV64_IMM(0, 1));
		emit(&o, EXIT());
		emit(&o, MOV64_IMM(0, 0));
		emit(&o, EXIT());
		int po = load("jobcg_tuid", &o);
		int ofd =
		    mkdir(opq, 0755) == 0 ? open(opq, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		if (ok(po >= 0 && ofd >= 0 &&
			   bpf_prog_attach(po, ofd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) == 0,
		       "uid-dependent program attached below the step") &&
		    is_int(jobcg_cgroup_inspect(opq, NULL, &in), 0, "inspect it")) {
			const struct jobcg_cgprog *op = NULL;
			for (size_t k = 0; k < in->n_progs; k++)
				if (strcmp(in->progs[k].name, "jobcg_tuid") == 0)
					op = &in->progs[k];
			ok(in->n_progs == 3 && op && !op->decoded && op->opaque_reason &&
			       strstr(op->opaque_reason, "bpf_get_current_uid_gid"),
			   "opaque with the reason: %s",
			   op && op->opaque_reason ? op->opaque_reason : "?");
			ok(in->any_opaque && in->combined,
			   "combined from the other two, marked incomplete");
			is_int(jobcg_cginspect_allows(in, 'c', 1, 3, JOBCG_DEV_ACC_READ), -1,
			       "1:3: unknown (only the opaque program could deny)");
			is_int(jobcg_cginspect_allows(in, 'c', 195, 1, JOBCG_DEV_ACC_READ), 0,
			       "195:1: denied by a decodable program");
			jobcg_cginspect_free(in);
			in = NULL;
			snprintf(args, sizeof(args), "devices %s", opq);
			out = run_cli(args);
			ok(out && strstr(out, "opaque: ") && strstr(out, "# incomplete"),
			   "jobcg devices explains the opaque program");
			snprintf(args, sizeof(args), "who-has --root %s 'c 1:3'", opq);
			out = run_cli(args);
			ok(out && strstr(out, "rwm?"), "who-has marks the answer uncertain");
		}
		if (po >= 0 && ofd >= 0)
			bpf_prog_detach2(po, ofd, BPF_CGROUP_DEVICE);
		if (po >= 0)
			close(po);
		if (ofd >= 0)
			close(ofd);
	}

	/* jobcg's own programs, set up through its device policy API, read back live. */
	for (int mode = 0; mode < 2; mode++) {
		const char *mname = mode == 0 ? "jobcg node program" : "jobcg linear program";
		char jroot[PATH_MAX], jjob[PATH_MAX + 16], jstep[PATH_MAX + 32],
		    jtask[PATH_MAX + 64];
		struct jobcg_config conf = {0};
		struct jobcg_devpolicy *pol = NULL;
		struct jobcg_devrule managed[2] = {{'c', 1, 5, 7, true}, {'c', 1, 7, 7, true}};
		struct jobcg_devrule grant[1] = {{'c', 1, 5, JOBCG_DEV_ACC_READ, true}};

		snprintf(jroot, sizeof(jroot), "%s/jroot%d", root, mode);
		snprintf(jjob, sizeof(jjob), "%s/job_9", jroot);
		snprintf(jstep, sizeof(jstep), "%s/step_1", jjob);
		snprintf(jtask, sizeof(jtask), "%s/user", jstep);
		if (mkdir(jroot, 0755) < 0 || mkdir(jjob, 0755) < 0 || mkdir(jstep, 0755) < 0 ||
		    mkdir(jtask, 0755) < 0)
			continue;
		conf.cgroup.device_program = mode == 0 ? JOBCG_DEVPROG_NODE : JOBCG_DEVPROG_LINEAR;
		conf.cgroup.bpf_pin_dir = pin_base;
		if (!ok(jobcg_devpolicy_open(&conf, jroot, managed, 2, &pol) == 0,
			"%s: policy opened", mname)) {
			tap_diag("%s", jobcg_last_error()->message);
			continue;
		}
		if (mode == 0 && jobcg_devpolicy_mode(pol) != JOBCG_DEVPROG_NODE)
			tap_diag("node mode fell back: %s", jobcg_devpolicy_fallback_reason(pol));
		ok(jobcg_devpolicy_grant(pol, jjob, grant, 1) == 0, "%s: job granted c 1:5 r",
		   mname);
		/* The step's child cgroup is where the processes are: decoded for that cgroup. */
		if (is_int(jobcg_cgroup_inspect(jtask, NULL, &in), 0,
			   "inspect below the granted job")) {
			ok(in->n_progs == 1 && in->progs[0].decoded, "%s decoded (%s)", mname,
			   in->n_progs && in->progs[0].opaque_reason ? in->progs[0].opaque_reason
								     : "yes");
			if (in->n_progs == 1)
				tap_diag("%s: %s at %s", mname, in->progs[0].name,
					 in->progs[0].attached_at ? in->progs[0].attached_at : "?");
			ok(jobcg_cginspect_allows(in, 'c', 1, 5, JOBCG_DEV_ACC_READ) == 1 &&
			       jobcg_cginspect_allows(in, 'c', 1, 5, JOBCG_DEV_ACC_WRITE) == 0 &&
			       jobcg_cginspect_allows(in, 'c', 1, 7, JOBCG_DEV_ACC_READ) == 0 &&
			       jobcg_cginspect_allows(in, 'c', 1, 3, JOBCG_DEV_ACC_WRITE) == 1,
			   "%s: zero read-only, full denied, null free", mname);
			compare_with_kernel(jtask, in, mname);
			jobcg_cginspect_free(in);
			in = NULL;
		}
		snprintf(args, sizeof(args), "devices %s", jtask);
		out = run_cli(args);
		ok(out && strstr(out, "c 1:5 r ") && strstr(out, "c 1:7 -"),
		   "%s: jobcg devices shows the grant", mname);
		if (out && !strstr(out, "c 1:5 r "))
			ktest_diag_lines("", out);
		jobcg_devpolicy_revoke(pol, jjob);
		if (mode == 0)
			jobcg_devpolicy_destroy(pol);
		else
			jobcg_devpolicy_free(pol);
	}

	/* who-has over a thousand cgroups stays fast: programs are read once, by id. */
	char many[PATH_MAX];
	snprintf(many, sizeof(many), "%s/many", root);
	int manyfd = -1;
	unsigned made = 0;
	if (mkdir(many, 0755) == 0) {
		for (int g = 0; g < 10; g++) {
			char d[PATH_MAX + 64];
			snprintf(d, sizeof(d), "%s/g%d", many, g);
			if (mkdir(d, 0755) < 0)
				break;
			made++;
			for (int c = 0; c < 100; c++) {
				snprintf(d, sizeof(d), "%s/g%d/c%d", many, g, c);
				if (mkdir(d, 0755) == 0)
					made++;
			}
		}
		manyfd = open(many, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (ok(made == 1010 && manyfd >= 0 &&
		   bpf_prog_attach(pa, manyfd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) == 0,
	       "1010 cgroups under one program")) {
		uint64_t t0 = now_ms();
		snprintf(args, sizeof(args), "who-has --root %s 'c 195:3'", many);
		out = run_cli(args);
		uint64_t ms = now_ms() - t0;
		char want[64];
		snprintf(want, sizeof(want), "# %u of %u cgroups", made + 1, made + 1);
		ok(out && strstr(out, want), "who-has finds all %u cgroups for an allowed device",
		   made + 1);
		ok(ms < 60000, "who-has over %u cgroups took %llu ms", made + 1,
		   (unsigned long long)ms);
		snprintf(args, sizeof(args), "who-has --root %s 'c 195:1'", many);
		out = run_cli(args);
		snprintf(want, sizeof(want), "# 0 of %u cgroups", made + 1);
		ok(out && strstr(out, want), "who-has finds none for a denied device");
		bpf_prog_detach2(pa, manyfd, BPF_CGROUP_DEVICE);
	}
	if (manyfd >= 0)
		close(manyfd);

out:
	if (pa >= 0)
		bpf_prog_detach2(pa, jobfd, BPF_CGROUP_DEVICE);
	if (pb >= 0)
		bpf_prog_detach2(pb, stepfd, BPF_CGROUP_DEVICE);
	if (ps >= 0)
		bpf_prog_detach2(ps, snapfd, BPF_CGROUP_DEVICE);
	for (int *fd = (int[]){pa, pb, ps, map, jobfd, stepfd, snapfd, -2}; *fd != -2; fd++)
		if (*fd >= 0)
			close(*fd);
	return tap_done();
}
