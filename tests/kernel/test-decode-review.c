/* jobcg kernel tests: the review's device programs (T1, T4, T4b, T5, T7) attached to private
 * cgroups; what jobcg answers for one device (who-has, metrics) must be what the kernel does
 * on open(), and the listing (devices, decode) must be exact or say it is not. */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "devgen.h"
#include "jobcg/inspect.h"
#include "ktest.h"
#include "tap.h"

static int load(const char *name, const struct bpf_insn *v, size_t n)
{
	char log[8192] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, o, .log_buf = log, .log_size = sizeof(log), .log_level = 1);
	int fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, name, "GPL", v, n, &o);
	if (fd < 0)
		tap_diag("load %s: %s\n%.2000s", name, strerror(errno), log);
	return fd;
}

struct node {
	char path[PATH_MAX];
	uint32_t minor;
};

static struct node nodes[4];

static const char *flag_name(int f)
{
	return f == O_RDONLY ? "r" : f == O_WRONLY ? "w" : "rw";
}

/*
 * For every node and open mode: the kernel's answer against jobcg's per-device answer. An
 * answer jobcg marks uncertain may differ; a certain one must not. Returns the number of
 * uncertain answers.
 */
static unsigned check_against_kernel(const char *cg, const char *label)
{
	static const int flags[] = {O_RDONLY, O_WRONLY, O_RDWR};
	unsigned wrong = 0, uncertain = 0, total = 0;

	for (size_t k = 0; k < ELEMENTS(nodes); k++) {
		unsigned access = 0;
		bool opaque = false;
		size_t np = 0;
		int r = jobcg_cgroup_device_access(cg, NULL, 'c', 1, nodes[k].minor, &access,
						   &opaque, &np);
		if (r < 0) {
			tap_diag("%s: device_access 1:%u: %s", label, nodes[k].minor,
				 jobcg_last_error()->message);
			wrong++;
			continue;
		}
		for (size_t f = 0; f < ELEMENTS(flags); f++) {
			int e = ktest_open_in(cg, nodes[k].path, flags[f]);
			if (e != 0 && e != EPERM) {
				tap_diag("%s: open %s: %s", label, nodes[k].path, strerror(e));
				continue;
			}
			bool kernel = e == 0;
			unsigned need = flags[f] == O_RDONLY ? JOBCG_DEV_ACC_READ
					: flags[f] == O_WRONLY
					    ? JOBCG_DEV_ACC_WRITE
					    : JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE;
			bool jobcg = (access & need) == need;
			total++;
			if (opaque) {
				uncertain++;
				continue;
			}
			if (jobcg != kernel) {
				wrong++;
				tap_diag("%s: c 1:%u %s: kernel %s, jobcg %s (certain)", label,
					 nodes[k].minor, flag_name(flags[f]),
					 kernel ? "allows" : "denies", jobcg ? "allows" : "denies");
			}
		}
	}
	ok(wrong == 0 && total > 0,
	   "%s: every certain per-device answer equals the kernel's open() (%u checks, %u "
	   "uncertain)",
	   label, total, uncertain);
	return uncertain;
}

/* The listing: decoded (and then exact, not approximate) or opaque with a reason. */
static void check_listing(const char *cg, const char *label, int want_decoded)
{
	struct jobcg_cginspect *in = NULL;

	if (!ok(jobcg_cgroup_inspect(cg, NULL, &in) == 0, "%s: inspect", label))
		return;
	if (in->n_progs == 1) {
		const struct jobcg_cgprog *p = &in->progs[0];
		if (want_decoded)
			ok(p->decoded && in->combined && !in->any_opaque, "%s: decoded", label);
		else
			ok(!p->decoded && p->opaque_reason && in->any_opaque,
			   "%s: opaque, because %s", label,
			   p->opaque_reason ? p->opaque_reason : "(none)");
		/* Whatever the listing claims for certain must be what the kernel does. */
		unsigned wrong = 0;
		for (size_t k = 0; k < ELEMENTS(nodes); k++) {
			int a =
			    jobcg_cginspect_allows(in, 'c', 1, nodes[k].minor, JOBCG_DEV_ACC_READ);
			int e = ktest_open_in(cg, nodes[k].path, O_RDONLY);
			if (a >= 0 && (e == 0) != (a == 1)) {
				wrong++;
				tap_diag("%s: listing says c 1:%u r %s, kernel %s", label,
					 nodes[k].minor, a ? "allowed" : "denied",
					 e == 0 ? "allows" : "denies");
			}
		}
		ok(wrong == 0, "%s: the listing's certain answers equal the kernel's", label);
	} else
		ok(0, "%s: one program (%zu)", label, in->n_progs);
	jobcg_cginspect_free(in);
}

/* Whether `jobcg who-has --json DEVICE` over @root lists @cg: 1 certain, 2 uncertain, 0 not,
 * -1 no answer. @ret_access gets its access letters. */
static int who_has(const char *root, const char *dev, const char *cg, char *ret_access)
{
	const char *b = getenv("JOBCG_BUILD_ROOT");
	char cmd[PATH_MAX * 3];
	struct json_object *j = NULL, *list = NULL;
	int found = 0;

	snprintf(cmd, sizeof(cmd), "%s/cli/jobcg who-has --json '%s' --root %s", b ? b : ".", dev,
		 root);
	char *out = ktest_capture(cmd, NULL);
	if (!out || !(j = json_tokener_parse(out)) ||
	    !json_object_object_get_ex(j, "cgroups", &list)) {
		json_object_put(j);
		return -1;
	}
	for (size_t k = 0; k < json_object_array_length(list); k++) {
		struct json_object *o = json_object_array_get_idx(list, k), *v = NULL;
		if (!json_object_object_get_ex(o, "cgroup", &v) ||
		    strcmp(json_object_get_string(v), cg) != 0)
			continue;
		json_object_object_get_ex(o, "access", &v);
		snprintf(ret_access, 8, "%s", v ? json_object_get_string(v) : "");
		json_object_object_get_ex(o, "uncertain", &v);
		found = v && json_object_get_boolean(v) ? 2 : 1;
	}
	json_object_put(j);
	return found;
}

/* The command: who-has c 1:5 lists T7's cgroup (rwm, certain); c 1:2 does not. */
static void check_who_has(const char *root, const char *cg)
{
	char acc[8] = "";
	int r = who_has(root, "c 1:5", cg, acc);
	ok(r == 1 && !strcmp(acc, "rwm"), "t7: who-has c 1:5 lists it, rwm, certain (%d, %s)", r,
	   acc);
	r = who_has(root, "c 1:2", cg, acc);
	ok(r == 0, "t7: who-has c 1:2 does not list it, as the kernel denies (%d)", r);
}

struct tcase {
	const char *name;
	struct bpf_insn v[16];
	size_t n;
};

int main(void)
{
	const char *root = ktest_setup("decode-review");
	const char *tmp = ktest_tmpdir();
	static const uint32_t minors[] = {0, 2, 3, 5};

	/* Nodes of our own: c 1:0 and 1:2 have no driver (ENXIO = let through), 1:3 null, 1:5
	 * zero. */
	for (size_t k = 0; k < ELEMENTS(nodes); k++) {
		nodes[k].minor = minors[k];
		snprintf(nodes[k].path, sizeof(nodes[k].path), "%s/c1_%u", tmp, minors[k]);
		if (mknod(nodes[k].path, S_IFCHR | 0666, makedev(1, minors[k])) < 0) {
			printf("Bail out! mknod %s: %s\n", nodes[k].path, strerror(errno));
			return 1;
		}
	}
	static const struct tcase cases[] = {
	    /* T7: the minor's low bit is the verdict. */
	    {"t7", {LDX(BPF_W, 0, 1, 8), ALU64_IMM(BPF_AND, 0, 1), EXIT()}, 3},
	    /* T1: signed 32-bit compare of the minor with 0. */
	    {"t1",
	     {LDX(BPF_W, 2, 1, 8), JMP32_IMM(BPF_JSGT, 2, 0, 2), MOV64_IMM(0, 0), EXIT(),
	      MOV64_IMM(0, 1), EXIT()},
	     6},
	    /* T4: r alone and w alone, but not read+write together. */
	    {"t4",
	     {LDX(BPF_W, 2, 1, 0), ALU64_IMM(BPF_RSH, 2, 16), JMP_IMM(BPF_JEQ, 2, 6, 2),
	      MOV64_IMM(0, 1), EXIT(), MOV64_IMM(0, 0), EXIT()},
	     7},
	    /* T4b: only read+write together. */
	    {"t4b",
	     {LDX(BPF_W, 2, 1, 0), ALU64_IMM(BPF_RSH, 2, 16), JMP_IMM(BPF_JEQ, 2, 6, 2),
	      MOV64_IMM(0, 0), EXIT(), MOV64_IMM(0, 1), EXIT()},
	     7},
	    /* T8: allowed when the ancestor at level (minor) exists. */
	    {"t8",
	     {LDX(BPF_W, 1, 1, 8), CALL(BPF_FUNC_get_current_ancestor_cgroup_id),
	      JMP_IMM(BPF_JNE, 0, 0, 2), MOV64_IMM(0, 0), EXIT(), MOV64_IMM(0, 1), EXIT()},
	     7},
	    /* T5: minor + 1 == 6 (arithmetic before the compare). */
	    {"t5",
	     {LDX(BPF_W, 2, 1, 8), ALU64_IMM(BPF_ADD, 2, 1), JMP_IMM(BPF_JEQ, 2, 6, 2),
	      MOV64_IMM(0, 0), EXIT(), MOV64_IMM(0, 1), EXIT()},
	     7},
	};
	for (size_t c = 0; c < ELEMENTS(cases); c++) {
		char cg[PATH_MAX], label[64];
		snprintf(cg, sizeof(cg), "%s/%s", root, cases[c].name);
		snprintf(label, sizeof(label), "%s", cases[c].name);
		if (mkdir(cg, 0755) < 0) {
			printf("Bail out! mkdir %s: %s\n", cg, strerror(errno));
			return 1;
		}
		int fd = load(cases[c].name, cases[c].v, cases[c].n);
		int cfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (!ok(fd >= 0 && cfd >= 0 && bpf_prog_attach(fd, cfd, BPF_CGROUP_DEVICE, 0) == 0,
			"%s: loaded and attached", label)) {
			if (fd >= 0)
				close(fd);
			if (cfd >= 0)
				close(cfd);
			continue;
		}
		close(fd);
		close(cfd);
		unsigned unc = check_against_kernel(cg, label);
		bool exact_runs = !strcmp(cases[c].name, "t7") || !strcmp(cases[c].name, "t1") ||
				  !strcmp(cases[c].name, "t5") || !strcmp(cases[c].name, "t8");
		if (exact_runs)
			ok(unc == 0,
			   "%s: per-device answers are all certain (the program is run, %u)", label,
			   unc);
		else
			ok(unc == ELEMENTS(nodes) * 3,
			   "%s: read+write differs from r and w alone: uncertain (%u)", label, unc);
		/* T7: opaque listing; T1 exact; T5 approximate (uncertain); T4: exact with notes.
		 */
		check_listing(cg, label,
			      strcmp(cases[c].name, "t7") != 0 && strcmp(cases[c].name, "t8") != 0);
		if (!strcmp(cases[c].name, "t7"))
			check_who_has(root, cg);
		if (!strcmp(cases[c].name, "t5")) {
			struct jobcg_cginspect *in = NULL;
			if (jobcg_cgroup_inspect(cg, NULL, &in) == 0) {
				is_int(jobcg_cginspect_allows(in, 'c', 1, 5, JOBCG_DEV_ACC_READ),
				       -1, "t5: the approximate listing answers uncertain");
				jobcg_cginspect_free(in);
			}
		}
	}
	return tap_done();
}
