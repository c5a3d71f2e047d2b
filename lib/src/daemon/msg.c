/* jobcg: the fields of a daemon message, their frames on a unix socket, and their checks. */
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/socket.h>

#include "msg.h"
#include "log.h"
#include "util.h"

static bool key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

static bool key_valid(const char *k, size_t n)
{
	if (n == 0 || n > JOBCG_MSG_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!key_char(k[i]))
			return false;
	return true;
}

int jobcg_msg_add(struct jobcg_msg *m, const char *key, const char *fmt, ...)
{
	size_t kl = strlen(key), need;
	va_list ap;
	int vl;

	if (!key_valid(key, kl))
		return error_set(-EINVAL, "message key '%s' is not [a-z0-9_]{1,32}", key);
	va_start(ap, fmt);
	vl = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (vl < 0)
		return -EINVAL;
	need = m->len + kl + 1 + (size_t)vl + 1;
	if (need > JOBCG_MSG_MAX)
		return error_set(-E2BIG, "message larger than %u bytes", JOBCG_MSG_MAX);
	if (need > m->cap) {
		size_t cap = m->cap ? m->cap : 256;
		char *b;

		while (cap < need)
			cap *= 2;
		b = realloc(m->buf, cap);
		if (!b)
			return -ENOMEM;
		m->buf = b;
		m->cap = cap;
	}
	memcpy(m->buf + m->len, key, kl);
	m->buf[m->len + kl] = '=';
	va_start(ap, fmt);
	vsnprintf(m->buf + m->len + kl + 1, (size_t)vl + 1, fmt, ap);
	va_end(ap);
	if (strlen(m->buf + m->len + kl + 1) != (size_t)vl)
		return error_set(-EINVAL, "message field '%s': the value holds a NUL byte", key);
	m->len = need;
	return 0;
}

int jobcg_msg_parse(const char *buf, size_t len, struct jobcg_msg *ret)
{
	size_t nfield = 0;
	char *copy;

	if (len > JOBCG_MSG_MAX)
		return error_set(-EINVAL, "message of %zu bytes: more than %u", len, JOBCG_MSG_MAX);
	if (len && buf[len - 1] != '\0')
		return error_set(-EINVAL, "message does not end with a complete field");
	for (size_t off = 0; off < len; nfield++) {
		const char *f = buf + off, *eq;
		size_t fl = strlen(f);

		eq = memchr(f, '=', fl);
		if (!eq || !key_valid(f, (size_t)(eq - f)))
			return error_set(-EINVAL,
					 "message field %zu: not key=value with a key of "
					 "[a-z0-9_]{1,32}",
					 nfield + 1);
		off += fl + 1;
	}
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	if (len)
		memcpy(copy, buf, len);
	jobcg_msg_free(ret);
	ret->buf = copy;
	ret->len = ret->cap = len;
	return 0;
}

const char *jobcg_msg_next(const struct jobcg_msg *m, const char *key, size_t *pos)
{
	size_t kl = strlen(key);

	while (*pos < m->len) {
		const char *f = m->buf + *pos;

		*pos += strlen(f) + 1;
		if (strncmp(f, key, kl) == 0 && f[kl] == '=')
			return f + kl + 1;
	}
	return NULL;
}

const char *jobcg_msg_get(const struct jobcg_msg *m, const char *key)
{
	size_t pos = 0;

	return jobcg_msg_next(m, key, &pos);
}

int jobcg_msg_get_u64(const struct jobcg_msg *m, const char *key, uint64_t max, uint64_t *ret)
{
	const char *v = jobcg_msg_get(m, key);
	uint64_t n = 0;

	if (!v)
		return -ENOENT;
	if (!*v || (v[0] == '0' && v[1]))
		goto bad;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '9' || n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			goto bad;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (n > max)
		goto bad;
	*ret = n;
	return 0;
bad:
	return error_set(-EINVAL, "message field %s='%.64s': need a number 0..%llu", key, v,
			 (unsigned long long)max);
}

void jobcg_msg_free(struct jobcg_msg *m)
{
	free(m->buf);
	*m = (struct jobcg_msg){};
}

int jobcg_msg_send_some(int fd, const struct jobcg_msg *m, const int *fds, unsigned nfds,
			size_t *off)
{
	uint8_t hdr[4] = {(uint8_t)m->len, (uint8_t)(m->len >> 8), (uint8_t)(m->len >> 16),
			  (uint8_t)(m->len >> 24)};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * JOBCG_MSG_FDS_MAX)];
	} ctl = {};
	size_t total = sizeof(hdr) + m->len;

	if (nfds > JOBCG_MSG_FDS_MAX)
		return error_set(-EINVAL, "%u descriptors: at most %d a message", nfds,
				 JOBCG_MSG_FDS_MAX);
	while (*off < total) {
		struct iovec iov[2];
		struct msghdr mh = {.msg_iov = iov};
		ssize_t n;

		if (*off < sizeof(hdr))
			iov[mh.msg_iovlen++] = (struct iovec){hdr + *off, sizeof(hdr) - *off};
		if (m->len) {
			size_t from = *off > sizeof(hdr) ? *off - sizeof(hdr) : 0;

			iov[mh.msg_iovlen++] = (struct iovec){m->buf + from, m->len - from};
		}
		if (*off == 0 && nfds) {
			struct cmsghdr *c;

			mh.msg_control = ctl.b;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
		}
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EAGAIN;
			return error_set(negative_errno(), "sending to the daemon socket: %s",
					 strerror(errno));
		}
		/* The rest goes without the descriptors, from where the kernel stopped. */
		*off += (size_t)n;
	}
	return 0;
}

int jobcg_msg_send(int fd, const struct jobcg_msg *m, const int *fds, unsigned nfds)
{
	size_t off = 0;
	int r = jobcg_msg_send_some(fd, m, fds, nfds, &off);

	/* A blocking socket says EAGAIN only when its SO_SNDTIMEO ran out. */
	if (r == -EAGAIN)
		return error_set(-ETIMEDOUT, "sending to the daemon socket: timed out");
	return r;
}

int jobcg_msg_send_until(int fd, const struct jobcg_msg *m, const int *fds, unsigned nfds,
			 uint64_t deadline_ms, size_t *off)
{
	int fl = fcntl(fd, F_GETFL), r;

	if (fl < 0)
		return error_set(negative_errno(), "the daemon socket: %s", strerror(errno));
	/* Non-blocking for the while: a blocking sendmsg() of a frame bigger than the socket
	 * takes would wait for a peer that reads nothing (a stopped daemon) with no end. */
	if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return error_set(negative_errno(), "the daemon socket: %s", strerror(errno));
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		uint64_t now;
		int ms;

		r = jobcg_msg_send_some(fd, m, fds, nfds, off);
		if (r != -EAGAIN)
			break;
		now = now_usec() / 1000;
		if (now >= deadline_ms) {
			r = error_set(-ETIMEDOUT, "sending to the daemon socket: timed out");
			break;
		}
		ms = deadline_ms - now > INT32_MAX ? INT32_MAX : (int)(deadline_ms - now);
		if (poll(&p, 1, ms) < 0 && errno != EINTR) {
			r = error_set(negative_errno(), "the daemon socket: %s", strerror(errno));
			break;
		}
	}
	if (!(fl & O_NONBLOCK))
		(void)fcntl(fd, F_SETFL, fl);
	return r;
}

void jobcg_msg_rx_free(struct jobcg_msg_rx *rx)
{
	for (unsigned i = 0; i < rx->nfds; i++)
		close(rx->fds[i]);
	free(rx->buf);
	*rx = (struct jobcg_msg_rx){};
}

/* Keep the descriptors a read brought; past JOBCG_MSG_FDS_MAX they are closed and noted. */
static void take_fds(struct jobcg_msg_rx *rx, struct msghdr *mh)
{
	if (mh->msg_flags & MSG_CTRUNC)
		rx->lost_fds = true;
	if (!mh->msg_controllen)
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int d;

			memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (rx->nfds < JOBCG_MSG_FDS_MAX)
				rx->fds[rx->nfds++] = d;
			else {
				close(d);
				rx->lost_fds = true;
			}
		}
	}
}

/* Where the next bytes of the frame go, and how many may come; the buffer grows by doubling
 * as the payload arrives. -ENOMEM. */
static int rx_room(struct jobcg_msg_rx *rx, char **ret, size_t *ret_len)
{
	size_t have = rx->got - sizeof(rx->hdr);

	if (rx->got < sizeof(rx->hdr)) {
		*ret = (char *)rx->hdr + rx->got;
		*ret_len = sizeof(rx->hdr) - rx->got;
		return 0;
	}
	if (have == rx->cap) {
		size_t cap = rx->cap ? rx->cap * 2 : 4096;
		char *b;

		if (cap > rx->len)
			cap = rx->len;
		b = realloc(rx->buf, cap);
		if (!b)
			return -ENOMEM;
		rx->buf = b;
		rx->cap = cap;
	}
	*ret = rx->buf + have;
	*ret_len = rx->cap - have;
	return 0;
}

int jobcg_msg_recv_some(int fd, struct jobcg_msg_rx *rx, size_t max, struct jobcg_msg *ret,
			int *fds, unsigned max_fds, unsigned *ret_nfds)
{
	int r;

	if (max > JOBCG_MSG_MAX)
		max = JOBCG_MSG_MAX;
	while (rx->got < sizeof(rx->hdr) || rx->got - sizeof(rx->hdr) < rx->len) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int) * JOBCG_MSG_FDS_MAX)];
		} ctl;
		struct iovec iov;
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl.b,
				    .msg_controllen = sizeof(ctl.b)};
		char *dst;
		size_t room;
		ssize_t n;

		r = rx_room(rx, &dst, &room);
		if (r < 0)
			goto fail;
		iov = (struct iovec){dst, room};
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EAGAIN;
			r = error_set(negative_errno(), "reading from the daemon socket: %s",
				      strerror(errno));
			goto fail;
		}
		take_fds(rx, &mh);
		if (n == 0) {
			r = error_set(-ECONNRESET, "the other end closed the daemon socket%s",
				      rx->got ? " mid-message" : "");
			goto fail;
		}
		rx->got += (size_t)n;
		if (rx->got == sizeof(rx->hdr)) {
			const uint8_t *h = rx->hdr;

			rx->len = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 |
				  (size_t)h[3] << 24;
			if (rx->len > max) {
				r = error_set(-EPROTO, "daemon message of %zu bytes: more than %zu",
					      rx->len, max);
				goto fail;
			}
		}
	}
	if (rx->lost_fds || rx->nfds > max_fds) {
		r = error_set(-EPROTO, "daemon message with more descriptors than expected (%u)",
			      max_fds);
		goto fail;
	}
	r = jobcg_msg_parse(rx->buf, rx->len, ret);
	if (r < 0) {
		if (r == -EINVAL)
			r = -EPROTO;
		goto fail;
	}
	for (unsigned i = 0; i < rx->nfds; i++)
		fds[i] = rx->fds[i];
	if (ret_nfds)
		*ret_nfds = rx->nfds;
	rx->nfds = 0;
	jobcg_msg_rx_free(rx);
	return 0;
fail:
	jobcg_msg_rx_free(rx);
	return r;
}

int jobcg_msg_recv(int fd, struct jobcg_msg *ret, int *fds, unsigned max_fds, unsigned *ret_nfds)
{
	struct jobcg_msg_rx rx = {};
	int r = jobcg_msg_recv_some(fd, &rx, JOBCG_MSG_MAX, ret, fds, max_fds, ret_nfds);

	/* A blocking socket says EAGAIN only when its SO_RCVTIMEO ran out. */
	if (r == -EAGAIN) {
		jobcg_msg_rx_free(&rx);
		return error_set(-ETIMEDOUT, "reading from the daemon socket: timed out");
	}
	return r;
}
