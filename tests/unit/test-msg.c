/* Unit tests for msg.c's frames on non-blocking sockets: a frame that arrives a byte at a time
 * with its descriptor, a size limit checked at the header, a full socket resumed, a peer gone. */
#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "tap.h"

static int pair(int sv[2])
{
	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv);
}

/* The frame of @m as bytes, through a blocking send on a socketpair. */
static size_t frame_bytes(const struct jobcg_msg *m, char *buf, size_t size)
{
	int sv[2];
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    jobcg_msg_send(sv[0], m, NULL, 0) < 0)
		return 0;
	close(sv[0]);
	n = read(sv[1], buf, size);
	close(sv[1]);
	return n > 0 ? (size_t)n : 0;
}

static void piecewise(void)
{
	struct jobcg_msg m = {}, got = {};
	struct jobcg_msg_rx rx = {};
	char frame[256];
	size_t len;
	int sv[2], fds[1] = {-1}, devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	unsigned nfds = 0, eagain = 0;
	int r = -EAGAIN;

	jobcg_msg_add(&m, "op", "run");
	jobcg_msg_add(&m, "arg", "hello world");
	len = frame_bytes(&m, frame, sizeof(frame));
	if (pair(sv) < 0 || devnull < 0 || len == 0) {
		ok(false, "socketpair, /dev/null and a frame");
		return;
	}
	/* Byte by byte; the descriptor rides on the first one. */
	for (size_t i = 0; i < len && r == -EAGAIN; i++) {
		struct iovec iov = {frame + i, 1};
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} ctl = {};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

		if (i == 0) {
			struct cmsghdr *c;

			mh.msg_control = ctl.b;
			mh.msg_controllen = sizeof(ctl.b);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &devnull, sizeof(int));
		}
		if (sendmsg(sv[0], &mh, 0) != 1)
			break;
		r = jobcg_msg_recv_some(sv[1], &rx, 1024, &got, fds, 1, &nfds);
		if (r == -EAGAIN)
			eagain++;
	}
	ok(r == 0 && eagain == len - 1,
	   "a frame sent a byte at a time: -EAGAIN %u times, then whole", eagain);
	is_str(jobcg_msg_get(&got, "arg"), "hello world", "its fields");
	ok(nfds == 1 && fds[0] >= 0 && fcntl(fds[0], F_GETFD) == FD_CLOEXEC,
	   "its descriptor, close-on-exec");
	ok(rx.got == 0 && rx.buf == NULL && rx.nfds == 0, "the receiver is empty again");
	if (fds[0] >= 0)
		close(fds[0]);
	jobcg_msg_free(&got);

	/* Too big for the caller's limit: refused at the header, nothing allocated for it. */
	ok(write(sv[0], "\xff\xff\x0f\x00", 4) == 4, "a header announcing ~1 MiB");
	r = jobcg_msg_recv_some(sv[1], &rx, 1024, &got, fds, 1, &nfds);
	is_int(r, -EPROTO, "refused at once with a limit of 1 KiB");
	ok(rx.got == 0 && rx.buf == NULL, "and the receiver emptied");

	/* The peer gone mid-frame. */
	ok(write(sv[0], frame, 6) == 6, "half a frame");
	r = jobcg_msg_recv_some(sv[1], &rx, 1024, &got, fds, 1, &nfds);
	is_int(r, -EAGAIN, "waits for the rest");
	close(sv[0]);
	r = jobcg_msg_recv_some(sv[1], &rx, 1024, &got, fds, 1, &nfds);
	is_int(r, -ECONNRESET, "the peer closed mid-frame: -ECONNRESET");
	close(sv[1]);
	close(devnull);
	jobcg_msg_free(&m);
}

static void resumed_send(void)
{
	struct jobcg_msg m = {}, got = {};
	struct jobcg_msg_rx rx = {};
	static char big[300000];
	size_t off = 0;
	int sv[2], r, w = -EAGAIN, fds[1];
	unsigned rounds = 0, nfds = 0;

	memset(big, 'x', sizeof(big) - 1);
	if (pair(sv) < 0 || jobcg_msg_add(&m, "out", "%s", big) < 0) {
		ok(false, "socketpair and a 300 kB message");
		return;
	}
	r = jobcg_msg_send_some(sv[0], &m, NULL, 0, &off);
	ok(r == -EAGAIN && off > 0 && off < m.len + 4,
	   "a frame larger than the socket takes: -EAGAIN after %zu bytes", off);
	/* Reader and writer take turns, as the daemon's loop does. */
	for (r = -EAGAIN; r == -EAGAIN && rounds < 10000; rounds++) {
		r = jobcg_msg_recv_some(sv[1], &rx, 1u << 20, &got, fds, 0, &nfds);
		if (w == -EAGAIN)
			w = jobcg_msg_send_some(sv[0], &m, NULL, 0, &off);
	}
	ok(r == 0 && w == 0 && off == m.len + 4, "resumed until all of it went (%u rounds)",
	   rounds);
	ok(got.len == m.len && memcmp(got.buf, m.buf, m.len) == 0, "and it arrived whole");
	jobcg_msg_free(&got);
	jobcg_msg_free(&m);
	close(sv[0]);
	close(sv[1]);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A frame bigger than the socket takes, to a peer that reads nothing (a stopped daemon), on a
 * blocking socket: given up at the deadline, resumable from where it stopped. */
static void bounded_send(void)
{
	struct jobcg_msg m = {};
	static char big[600000];
	size_t off = 0, first;
	uint64_t t0;
	int sv[2], r, fl;

	memset(big, 'y', sizeof(big) - 1);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    jobcg_msg_add(&m, "arg", "%s", big) < 0) {
		ok(false, "socketpair and a 600 kB message");
		return;
	}
	t0 = now_ms();
	r = jobcg_msg_send_until(sv[0], &m, NULL, 0, t0 + 300, &off);
	ok(r == -ETIMEDOUT && off > 0 && off < m.len + 4 &&
	       strstr(jobcg_last_error()->message, "timed out"),
	   "a blocking send to a peer that reads nothing ends at its deadline: %d after %zu "
	   "bytes (%s)",
	   r, off, jobcg_last_error()->message);
	ok(now_ms() - t0 >= 290 && now_ms() - t0 < 5000, "after the time it was given (%llu ms)",
	   (unsigned long long)(now_ms() - t0));
	fl = fcntl(sv[0], F_GETFL);
	ok(fl >= 0 && !(fl & O_NONBLOCK), "the socket is blocking again");
	first = off;
	r = jobcg_msg_send_until(sv[0], &m, NULL, 0, now_ms(), &off);
	ok(r == -ETIMEDOUT && off == first, "a deadline already past: nothing more, nothing lost");
	/* A reader comes: the rest goes. */
	if (fork() == 0) {
		char buf[65536];

		close(sv[0]);
		while (read(sv[1], buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	r = jobcg_msg_send_until(sv[0], &m, NULL, 0, now_ms() + 30000, &off);
	ok(r == 0 && off == m.len + 4, "resumed with a later deadline, all of it goes (r=%d)", r);
	close(sv[0]);
	close(sv[1]);
	jobcg_msg_free(&m);
}

int main(void)
{
	piecewise();
	resumed_send();
	bounded_send();
	return tap_done();
}
