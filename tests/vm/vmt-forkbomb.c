/*
 * VM test helper: a fork bomb with a safety cap. Every process keeps forking until the shared
 * count reaches MAX or fork() fails; then all of them wait. The first process prints
 * "forks=N eagain=M" once no process can fork any more, and with --hold stays (for a kill from
 * outside), with --leave exits leaving the bomb behind (for whoever contains it to kill), else
 * kills the bomb's process group and exits 0. The cap keeps the unlimited comparison run from
 * taking the VM down.
 * Usage: vmt-forkbomb MAX [--hold|--leave]
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct shared {
	atomic_long forks;
	atomic_long eagain;
	atomic_long stopped; /* processes that gave up forking */
};

static void bomb(struct shared *s, long max)
{
	for (;;) {
		pid_t pid;

		if (atomic_fetch_add(&s->forks, 1) >= max) {
			atomic_fetch_sub(&s->forks, 1);
			break;
		}
		pid = fork();
		if (pid == 0)
			continue; /* the child bombs too */
		if (pid < 0) {
			atomic_fetch_sub(&s->forks, 1);
			if (errno == EAGAIN)
				atomic_fetch_add(&s->eagain, 1);
			break;
		}
	}
	atomic_fetch_add(&s->stopped, 1);
}

int main(int argc, char **argv)
{
	long max = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
	int hold = argc > 2 && strcmp(argv[2], "--hold") == 0;
	int leave = argc > 2 && strcmp(argv[2], "--leave") == 0;
	struct shared *s;
	pid_t bomber;

	if (max <= 0) {
		fprintf(stderr, "usage: vmt-forkbomb MAX [--hold|--leave]\n");
		return 2;
	}
	s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED)
		return 2;
	/* The bomb gets its own process group so that this coordinator can kill all of it. */
	bomber = fork();
	if (bomber < 0)
		return 2;
	if (bomber == 0) {
		setpgid(0, 0);
		bomb(s, max);
		for (;;)
			pause();
	}
	setpgid(bomber, bomber);
	/* Every bomb process (forks + 1) stops once; wait for that, bounded to ~60 s. */
	for (int i = 0; i < 6000 && atomic_load(&s->stopped) < atomic_load(&s->forks) + 1; i++)
		usleep(10000);
	printf("forks=%ld eagain=%ld\n", atomic_load(&s->forks), atomic_load(&s->eagain));
	fflush(stdout);
	if (hold)
		for (;;)
			pause();
	if (!leave)
		kill(-bomber, SIGKILL);
	return 0;
}
