/* libFuzzer target: daemon messages, as fields (jobcg_msg_parse) and as frames off a socket
 * (jobcg_msg_recv, descriptors and all). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void use(const struct jobcg_msg *m)
{
	static const char *const keys[] = {"op", "v", "arg", "env", "status", "code", "job"};
	uint64_t v;

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		size_t pos = 0;

		while (jobcg_msg_next(m, keys[k], &pos))
			;
		(void)jobcg_msg_get_u64(m, keys[k], UINT32_MAX, &v);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcg_msg m = {};
	int sv[2], fds[JOBCG_MSG_FDS_MAX];
	unsigned nfds = 0;

	if (jobcg_msg_parse((const char *)data, size, &m) == 0) {
		struct jobcg_msg copy = {};
		size_t pos = 0;
		const char *f;

		use(&m);
		/* Every field that parsed goes back out the same. */
		for (f = m.buf; f && (size_t)(f - m.buf) < m.len; f += strlen(f) + 1) {
			size_t kl = strcspn(f, "=");
			char key[JOBCG_MSG_KEY_MAX + 1];

			memcpy(key, f, kl);
			key[kl] = '\0';
			if (jobcg_msg_add(&copy, key, "%s", f + kl + 1) < 0)
				abort();
		}
		if (copy.len != m.len || (m.len && memcmp(copy.buf, m.buf, m.len) != 0))
			abort();
		(void)pos;
		jobcg_msg_free(&copy);
	}
	jobcg_msg_free(&m);

	/* The same bytes as a stream: a frame header and whatever follows, then EOF. */
	if (size <= 65536 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
		if (write(sv[0], data, size) == (ssize_t)size) {
			close(sv[0]);
			sv[0] = -1;
			if (jobcg_msg_recv(sv[1], &m, fds, JOBCG_MSG_FDS_MAX, &nfds) == 0) {
				use(&m);
				for (unsigned i = 0; i < nfds; i++)
					close(fds[i]);
			}
			jobcg_msg_free(&m);
		}
		if (sv[0] >= 0)
			close(sv[0]);
		close(sv[1]);
	}
	return 0;
}
