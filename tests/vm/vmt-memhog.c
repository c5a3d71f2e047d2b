/*
 * VM test helper: allocate and touch MIB mebibytes in 1 MiB steps, printing how far it got
 * (a memory limit shows as an OOM kill part way, or as reclaim/throttling with memory.high).
 * Usage: vmt-memhog MIB [--hold]   (--hold: sleep after touching, for readings from outside)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
	int hold = argc > 2 && strcmp(argv[2], "--hold") == 0;

	if (mib <= 0) {
		fprintf(stderr, "usage: vmt-memhog MIB [--hold]\n");
		return 2;
	}
	for (long i = 1; i <= mib; i++) {
		char *p = malloc(1 << 20);

		if (!p) {
			printf("malloc failed after %ld MiB\n", i - 1);
			return 1;
		}
		memset(p, (int)i, 1 << 20);
		if (i % 16 == 0 || i == mib) {
			printf("touched %ld MiB\n", i);
			fflush(stdout);
		}
	}
	printf("done %ld MiB\n", mib);
	fflush(stdout);
	while (hold)
		pause();
	return 0;
}
