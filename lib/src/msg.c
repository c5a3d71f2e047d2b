/* jobcg: the fields of a daemon message, their frames on a unix socket, and their checks. */
#include <stdarg.h>
#include <sys/socket.h>

#include "jobcg/msg.h"
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

JOBCG_EXPORT int jobcg_msg_add(struct jobcg_msg *m, const char *key, const char *fmt, ...)
{
	size_t kl = strlen(key), need;
	va_list ap;
	int vl;

	if (!key_valid(key, kl))
		return error_set(-EINVAL, "message key '%s' is not [a-z0-9_]{1,32}", key);
	va_start(ap, fmt);
	vl = format_vbuf(NULL, 0, fmt, ap);
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
	format_vbuf(m->buf + m->len + kl + 1, (size_t)vl + 1, fmt, ap);
	va_end(ap);
	if (strlen(m->buf + m->len + kl + 1) != (size_t)vl)
		return error_set(-EINVAL, "message field '%s': the value holds a NUL byte", key);
	m->len = need;
	return 0;
}

JOBCG_EXPORT int jobcg_msg_parse(const char *buf, size_t len, struct jobcg_msg *ret)
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

JOBCG_EXPORT const char *jobcg_msg_next(const struct jobcg_msg *m, const char *key, size_t *pos)
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

JOBCG_EXPORT const char *jobcg_msg_get(const struct jobcg_msg *m, const char *key)
{
	size_t pos = 0;

	return jobcg_msg_next(m, key, &pos);
}

JOBCG_EXPORT int jobcg_msg_get_u64(const struct jobcg_msg *m, const char *key, uint64_t max,
				   uint64_t *ret)
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

JOBCG_EXPORT void jobcg_msg_free(struct jobcg_msg *m)
{
	free(m->buf);
	*m = (struct jobcg_msg){};
}

JOBCG_EXPORT int jobcg_msg_send(int fd, const struct jobcg_msg *m, const int *fds, unsigned nfds)
{
	uint8_t hdr[4] = {(uint8_t)m->len, (uint8_t)(m->len >> 8), (uint8_t)(m->len >> 16),
			  (uint8_t)(m->len >> 24)};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * JOBCG_MSG_FDS_MAX)];
	} ctl = {};
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {m->buf, m->len}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	size_t total = sizeof(hdr) + m->len, sent = 0;

	if (nfds > JOBCG_MSG_FDS_MAX)
		return error_set(-EINVAL, "%u descriptors: at most %d a message", nfds,
				 JOBCG_MSG_FDS_MAX);
	if (nfds) {
		struct cmsghdr *c;

		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	while (sent < total) {
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return error_set(negative_errno(), "sending to the daemon socket: %s",
					 strerror(errno));
		}
		sent += (size_t)n;
		/* The rest goes without the descriptors, from where the kernel stopped. */
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		while (mh.msg_iovlen && (size_t)n >= mh.msg_iov->iov_len) {
			n -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + n;
			mh.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* Read exactly @len bytes; the first read may bring descriptors. */
static int read_full(int fd, void *buf, size_t len, struct msghdr *first)
{
	size_t got = 0;

	while (got < len) {
		struct iovec iov = {(char *)buf + got, len - got};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		ssize_t n;

		if (first) {
			mh.msg_control = first->msg_control;
			mh.msg_controllen = first->msg_controllen;
		}
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return error_set(negative_errno(), "reading from the daemon socket: %s",
					 strerror(errno));
		}
		if (first) {
			first->msg_controllen = mh.msg_controllen;
			first->msg_flags = mh.msg_flags;
			first = NULL;
		}
		if (n == 0)
			return error_set(-ECONNRESET, "the other end closed the daemon socket%s",
					 got ? " mid-message" : "");
		got += (size_t)n;
	}
	return 0;
}

JOBCG_EXPORT int jobcg_msg_recv(int fd, struct jobcg_msg *ret, int *fds, unsigned max_fds,
				unsigned *ret_nfds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * JOBCG_MSG_FDS_MAX)];
	} ctl = {};
	struct msghdr first = {.msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
	int got[JOBCG_MSG_FDS_MAX];
	unsigned ngot = 0;
	uint8_t hdr[4];
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int r;

	r = read_full(fd, hdr, sizeof(hdr), &first);
	/* Collect what came, whatever else happens, so that nothing leaks. */
	if (first.msg_controllen)
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&first); c; c = CMSG_NXTHDR(&first, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

				for (size_t i = 0; i < n; i++) {
					int d;

					memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
					if (ngot < JOBCG_MSG_FDS_MAX)
						got[ngot++] = d;
					else
						close(d);
				}
			}
	if (r < 0)
		goto fail;
	if (first.msg_flags & MSG_CTRUNC || ngot > max_fds) {
		r = error_set(-EPROTO, "daemon message with more descriptors than expected (%u)",
			      max_fds);
		goto fail;
	}
	len = (size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
	if (len > JOBCG_MSG_MAX) {
		r = error_set(-EPROTO, "daemon message of %zu bytes: more than %u", len,
			      JOBCG_MSG_MAX);
		goto fail;
	}
	buf = malloc(len ? len : 1);
	if (!buf) {
		r = -ENOMEM;
		goto fail;
	}
	r = read_full(fd, buf, len, NULL);
	if (r < 0)
		goto fail;
	r = jobcg_msg_parse(buf, len, ret);
	if (r < 0) {
		if (r == -EINVAL)
			r = -EPROTO;
		goto fail;
	}
	for (unsigned i = 0; i < ngot; i++)
		fds[i] = got[i];
	if (ret_nfds)
		*ret_nfds = ngot;
	return 0;
fail:
	for (unsigned i = 0; i < ngot; i++)
		close(got[i]);
	return r;
}
