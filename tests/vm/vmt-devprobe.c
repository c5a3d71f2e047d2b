/*
 * VM test helper: proves the guest kernel enforces BPF_PROG_TYPE_CGROUP_DEVICE programs,
 * independently of jobcg. Creates cgroup DIR, attaches a program that denies only c 1:3
 * (/dev/null), and checks from a child inside DIR that /dev/null gives EPERM while /dev/zero
 * opens. Exit 0 when enforced, 1 when not, 2 on setup errors. Usage: vmt-devprobe DIR
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int sysbpf(int cmd, union bpf_attr *attr)
{
	return (int)syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

#define INSN(c, d, s, o, i)                                                                        \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

int main(int argc, char **argv)
{
	/* ctx: u32 access_type (type in the low 16 bits), u32 major, u32 minor */
	const struct bpf_insn prog[] = {
	    INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 4, 0),
	    INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_3, BPF_REG_1, 8, 0),
	    INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1),
	    INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 2, 1),
	    INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 1, 3),
	    INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),
	    INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	char log[4096] = "", procs[4096];
	union bpf_attr a;
	int prog_fd, cg_fd, status;
	pid_t pid;

	if (argc != 2) {
		fprintf(stderr, "usage: vmt-devprobe CGROUP-DIR\n");
		return 2;
	}
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	a.insns = (unsigned long)prog;
	a.insn_cnt = sizeof(prog) / sizeof(prog[0]);
	a.license = (unsigned long)"GPL";
	a.log_buf = (unsigned long)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	prog_fd = sysbpf(BPF_PROG_LOAD, &a);
	if (prog_fd < 0) {
		printf("BPF_PROG_LOAD: %s\n%s\n", strerror(errno), log);
		return 2;
	}
	if (mkdir(argv[1], 0755) < 0 && errno != EEXIST) {
		printf("mkdir %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	cg_fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd < 0) {
		printf("open %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	memset(&a, 0, sizeof(a));
	a.target_fd = (unsigned)cg_fd;
	a.attach_bpf_fd = (unsigned)prog_fd;
	a.attach_type = BPF_CGROUP_DEVICE;
	a.attach_flags = BPF_F_ALLOW_MULTI;
	if (sysbpf(BPF_PROG_ATTACH, &a) < 0) {
		printf("BPF_PROG_ATTACH: %s\n", strerror(errno));
		return 2;
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", argv[1]);
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		int fd = open(procs, O_WRONLY | O_CLOEXEC), null_fd, null_errno, zero_fd;

		if (fd < 0 || dprintf(fd, "0\n") < 0) {
			printf("joining %s: %s\n", argv[1], strerror(errno));
			_exit(2);
		}
		null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		null_errno = errno;
		zero_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
		printf("/dev/null: %s, /dev/zero: %s\n",
		       null_fd < 0 ? strerror(null_errno) : "opened",
		       zero_fd < 0 ? strerror(errno) : "opened");
		fflush(stdout);
		_exit(null_fd < 0 && null_errno == EPERM && zero_fd >= 0 ? 0 : 1);
	}
	if (waitpid(pid, &status, 0) < 0)
		return 2;
	rmdir(argv[1]);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}
