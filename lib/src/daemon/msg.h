/* jobcg internal (the CLI and the daemon): the messages `jobcg daemon` and its clients exchange
 * over a unix stream socket. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobcg/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A message is a sequence of fields "key=value", each ending in a NUL byte; keys are
 * [a-z0-9_], 1..32 characters, and may repeat (lists keep their order); values are any bytes
 * but NUL. On the socket a message travels as a frame: its length (4 bytes, little endian)
 * and then the fields. File descriptors ride along as SCM_RIGHTS on the frame's first byte.
 */
#define JOBCG_MSG_MAX	  (16u << 20) /* largest frame payload accepted */
#define JOBCG_MSG_KEY_MAX 32
#define JOBCG_MSG_FDS_MAX 8 /* most descriptors one frame carries */

struct jobcg_msg {
	char *buf; /* the fields, back to back */
	size_t len, cap;
};

/** Append field @key=printf(@fmt...). 0, -EINVAL for a bad key or a value holding a NUL byte
 * (error set), -ENOMEM, or -E2BIG past JOBCG_MSG_MAX. */
int jobcg_msg_add(struct jobcg_msg *m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/**
 * Check that @len bytes at @buf are well-formed fields and copy them into *ret (freed first
 * with jobcg_msg_free()). -EINVAL names the offending field by number.
 */
int jobcg_msg_parse(const char *buf, size_t len, struct jobcg_msg *ret);
/** Value of the first field @key, NULL if there is none. */
const char *jobcg_msg_get(const struct jobcg_msg *m, const char *key);
/** Iterate the values of every field @key: start with *pos = 0; NULL at the end. */
const char *jobcg_msg_next(const struct jobcg_msg *m, const char *key, size_t *pos);
/** Field @key as a decimal number 0..@max (no sign, no spaces). -ENOENT if absent, -EINVAL
 * (error set, naming the key) if malformed or above @max. */
int jobcg_msg_get_u64(const struct jobcg_msg *m, const char *key, uint64_t max, uint64_t *ret);
void jobcg_msg_free(struct jobcg_msg *m);

/** Send @m as one frame on stream socket @fd with @nfds descriptors (-ETIMEDOUT when the
 * socket's SO_SNDTIMEO ran out). */
int jobcg_msg_send(int fd, const struct jobcg_msg *m, const int *fds, unsigned nfds);
/**
 * Send @m as jobcg_msg_send() does, from *@off (0 to start), but giving up at @deadline_ms
 * (CLOCK_MONOTONIC, milliseconds): -ETIMEDOUT with the error set when the peer has not taken
 * all of it by then (*@off says how far it got: call again with a later deadline to go on).
 * @fd may be blocking: it is made non-blocking for the while.
 */
int jobcg_msg_send_until(int fd, const struct jobcg_msg *m, const int *fds, unsigned nfds,
			 uint64_t deadline_ms, size_t *off);
/**
 * Receive one frame from @fd into *ret, with up to @max_fds descriptors into @fds (O_CLOEXEC;
 * *ret_nfds how many; more than @max_fds is an error and all are closed). -ECONNRESET when the
 * peer closed the socket before a whole frame (0 bytes read: the peer is gone), -EPROTO for a
 * malformed frame, -ETIMEDOUT when the socket's SO_RCVTIMEO ran out. On error no descriptor is
 * left open.
 */
int jobcg_msg_recv(int fd, struct jobcg_msg *ret, int *fds, unsigned max_fds, unsigned *ret_nfds);

/*
 * The same frames on a non-blocking socket, a piece at a time, for a server that must not wait
 * on any one peer. A frame being received lives in a struct jobcg_msg_rx, zeroed to start.
 */
struct jobcg_msg_rx {
	uint8_t hdr[4];
	size_t got; /* bytes of the frame so far, its header included */
	size_t len; /* the payload's length, once the header is in */
	char *buf;
	size_t cap;
	int fds[JOBCG_MSG_FDS_MAX];
	unsigned nfds;
	bool lost_fds; /* more came than a frame may carry: the extra ones were closed */
};

/**
 * Read what @fd has of the frame in @rx, whose payload may be at most @max bytes (capped at
 * JOBCG_MSG_MAX); the buffer grows with what arrives, not with what the header announces. 0
 * when the frame is whole: *ret gets it (as jobcg_msg_recv()), @rx is empty again. -EAGAIN when
 * @fd has no more for now (what came stays in @rx; rx->got says how much). Else, with the error
 * set and @rx emptied (its descriptors closed): -ECONNRESET (the peer closed), -EPROTO (a frame
 * too big, malformed, or with more than @max_fds descriptors), or the socket's -errno.
 */
int jobcg_msg_recv_some(int fd, struct jobcg_msg_rx *rx, size_t max, struct jobcg_msg *ret,
			int *fds, unsigned max_fds, unsigned *ret_nfds);
/** Forget a frame being received: free its bytes, close its descriptors. */
void jobcg_msg_rx_free(struct jobcg_msg_rx *rx);
/**
 * Send what @fd takes of @m's frame, from *@off (0 to start; the descriptors go with the first
 * byte). 0 once all of it is sent; -EAGAIN when @fd is full (*@off says how far it got: call
 * again, with the same @m and @fds, when @fd is writable); else -errno with the error set.
 */
int jobcg_msg_send_some(int fd, const struct jobcg_msg *m, const int *fds, unsigned nfds,
			size_t *off);

#ifdef __cplusplus
}
#endif
