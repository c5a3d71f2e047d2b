/* jobcg fuzz replay: runs a libFuzzer target over every file of a corpus directory, as TAP. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int read_all(const char *path, uint8_t **ret, size_t *ret_len)
{
	FILE *f = fopen(path, "rbe");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f)
		return -1;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	*ret = buf;
	*ret_len = len;
	return 0;
}

int main(int argc, char **argv)
{
	struct dirent **ents;
	int n;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	n = scandir(argv[1], &ents, NULL, alphasort);
	if (n < 0) {
		ok(0, "corpus directory %s readable", argv[1]);
		return tap_done();
	}
	int files = 0;
	for (int i = 0; i < n; i++) {
		char path[4096];
		uint8_t *data;
		size_t len;

		if (ents[i]->d_name[0] == '.') {
			free(ents[i]);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", argv[1], ents[i]->d_name);
		if (read_all(path, &data, &len) == 0) {
			/* A crash or sanitizer report aborts the run, which fails the test. */
			LLVMFuzzerTestOneInput(data, len);
			free(data);
			files++;
		}
		free(ents[i]);
	}
	free(ents);
	ok(files > 0, "replayed %d corpus files from %s without a crash", files, argv[1]);
	return tap_done();
}
