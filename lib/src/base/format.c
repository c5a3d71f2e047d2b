/* jobcg: string formatting for the formats the library builds paths and values with.
 *
 * Every step launch builds some thirty paths and values ("%s/job_%u", "%d:%llu"). Through
 * glibc's printf engine that is a thousand distinct instructions a fresh `jobcg run` faults in,
 * and under emulation (the VM tier's QEMU) translates anew in every process: about a tenth of
 * the cost of a bare fork+exec there. The conversions those calls use are few: this file does
 * them and hands every other format to glibc, so the output is always printf's own
 * (tests/unit/test-format.c compares the two). */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

enum fmt_len { LEN_INT, LEN_LONG, LEN_LLONG, LEN_SIZE };

/* Whether @fmt uses only: %%, %c, %s and %.*s / %.Ns, %d %i %u %x with no, l, ll or z length,
 * those four zero-padded to a width (%05u, %0*lu). No other flag or width: anything else goes
 * to glibc. */
static bool fmt_simple(const char *fmt)
{
	for (const char *p = fmt; *p; p++) {
		if (*p != '%')
			continue;
		p++;
		if (*p == '%')
			continue;
		if (*p == '.') {
			p++;
			if (*p == '*')
				p++;
			else
				while (*p >= '0' && *p <= '9')
					p++;
			if (*p != 's')
				return false;
			continue;
		}
		if (*p == 'c' || *p == 's')
			continue;
		if (*p == '0') {
			p++;
			if (*p == '*')
				p++;
			else
				while (*p >= '0' && *p <= '9')
					p++;
		}
		if (*p == 'l')
			p += p[1] == 'l' ? 2 : 1;
		else if (*p == 'z')
			p++;
		if (*p != 'd' && *p != 'i' && *p != 'u' && *p != 'x')
			return false;
	}
	return true;
}

struct out {
	char *buf;
	size_t cap; /* bytes of buf that may hold characters (its size less the NUL) */
	size_t len; /* characters produced, written or not */
};

/* Not inlined: the point of this file is little code, and every call site would copy it. */
static __attribute__((noinline)) void put(struct out *o, const char *s, size_t n)
{
	if (o->len < o->cap) {
		size_t room = o->cap - o->len;

		memcpy(o->buf + o->len, s, n < room ? n : room);
	}
	o->len += n;
}

static void put_fill(struct out *o, char c, size_t n)
{
	for (; n; n--)
		put(o, &c, 1);
}

/* @v in @base, after a '-' if @negative; @width > 0: zero-padded to it (after the sign), < 0:
 * space-padded after it to -@width (what printf makes of a negative '*' width). */
static __attribute__((noinline)) void put_num(struct out *o, unsigned long long v, bool negative,
					      unsigned base, long long width)
{
	char d[24];
	size_t i = sizeof(d), n;

	do {
		d[--i] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	n = sizeof(d) - i + negative;
	if (negative)
		put(o, "-", 1);
	if (width > 0 && (size_t)width > n)
		put_fill(o, '0', (size_t)width - n);
	put(o, d + i, sizeof(d) - i);
	if (width < 0 && (size_t)-width > n)
		put_fill(o, ' ', (size_t)-width - n);
}

/* Formats @fmt (which fmt_simple() accepted) into @o. */
static void fmt_run(struct out *o, const char *fmt, va_list ap)
{
	const char *p = fmt;

	while (*p) {
		const char *lit = p;
		enum fmt_len len = LEN_INT;
		long long width = 0;

		while (*p && *p != '%')
			p++;
		if (p > lit)
			put(o, lit, (size_t)(p - lit));
		if (!*p)
			break;
		p++; /* the '%' */
		if (*p == '%') {
			put(o, "%", 1);
			p++;
			continue;
		}
		if (*p == 'c') {
			char c = (char)va_arg(ap, int);

			put(o, &c, 1);
			p++;
			continue;
		}
		if (*p == '.' || *p == 's') {
			int prec = -1;
			const char *s;

			if (*p == '.') {
				p++;
				if (*p == '*') {
					prec = va_arg(ap, int);
					p++;
				} else
					for (prec = 0; *p >= '0' && *p <= '9'; p++)
						prec = prec * 10 + (*p - '0');
			}
			p++; /* the 's' */
			s = va_arg(ap, const char *);
			if (!s) /* glibc's rule: "(null)" unless a precision cuts it short */
				s = prec < 0 || prec >= 6 ? "(null)" : "";
			put(o, s, prec < 0 ? strlen(s) : strnlen(s, (size_t)prec));
			continue;
		}
		if (*p == '0') {
			p++;
			if (*p == '*') {
				width = va_arg(ap, int);
				p++;
			} else
				for (; *p >= '0' && *p <= '9'; p++)
					width = width * 10 + (*p - '0');
		}
		if (*p == 'l' && p[1] == 'l') {
			len = LEN_LLONG;
			p += 2;
		} else if (*p == 'l') {
			len = LEN_LONG;
			p++;
		} else if (*p == 'z') {
			len = LEN_SIZE;
			p++;
		}
		if (*p == 'd' || *p == 'i') {
			long long v = len == LEN_LLONG	? va_arg(ap, long long)
				      : len == LEN_LONG ? va_arg(ap, long)
				      : len == LEN_SIZE ? (long long)va_arg(ap, ssize_t)
							: va_arg(ap, int);

			/* the magnitude as unsigned: -LLONG_MIN does not fit a long long */
			put_num(o, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v,
				v < 0, 10, width);
		} else {
			unsigned long long v = len == LEN_LLONG	 ? va_arg(ap, unsigned long long)
					       : len == LEN_LONG ? va_arg(ap, unsigned long)
					       : len == LEN_SIZE ? va_arg(ap, size_t)
								 : va_arg(ap, unsigned);

			put_num(o, v, false, *p == 'x' ? 16 : 10, width);
		}
		p++;
	}
}

int format_vbuf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct out o = {.buf = buf, .cap = size ? size - 1 : 0};

	if (!fmt_simple(fmt))
		return vsnprintf(buf, size, fmt, ap);
	fmt_run(&o, fmt, ap);
	if (size)
		buf[o.len < o.cap ? o.len : o.cap] = '\0';
	return o.len > INT_MAX ? -1 : (int)o.len;
}

int format_buf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = format_vbuf(buf, size, fmt, ap);
	va_end(ap);
	return r;
}

char *strdup_vprintf(const char *fmt, va_list ap)
{
	struct out o = {};
	va_list ap2;
	char *s;

	if (!fmt_simple(fmt)) {
		if (vasprintf(&s, fmt, ap) < 0)
			return NULL;
		return s;
	}
	/* Once to measure, once to write. */
	va_copy(ap2, ap);
	fmt_run(&o, fmt, ap2);
	va_end(ap2);
	s = malloc(o.len + 1);
	if (!s)
		return NULL;
	o = (struct out){.buf = s, .cap = o.len};
	fmt_run(&o, fmt, ap);
	s[o.len] = '\0';
	return s;
}

char *strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = strdup_vprintf(fmt, ap);
	va_end(ap);
	return s;
}
