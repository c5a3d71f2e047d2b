/* jobcg unit tests: decode output stays readable for range-comparing programs (written apart
 * from tests/devgen.h) while staying exact through jobcg_decoded_allows(). */
#include <stdio.h>
#include <string.h>

#include "jobcg/decode.h"
#include "tap.h"

/* A program that compares ranges (as bpftool prints it): char majors 10..15 are readable
 * only for minors >= 200, major 1 is fully open, block devices get mknod only. */
static const char ranges_text[] = "   0: (61) r6 = *(u32 *)(r1 +0)\n"
				  "   1: (bf) r2 = r6\n"
				  "   2: (57) r2 &= 65535\n"
				  "   3: (bf) r3 = r6\n"
				  "   4: (77) r3 >>= 16\n"
				  "   5: (61) r4 = *(u32 *)(r1 +4)\n"
				  "   6: (61) r5 = *(u32 *)(r1 +8)\n"
				  "   7: (55) if r2 != 0x1 goto pc+5\n"
				  "   8: (45) if r3 & 0x6 goto pc+2\n"
				  "   9: (b7) r0 = 1\n"
				  "  10: (95) exit\n"
				  "  11: (b7) r0 = 0\n"
				  "  12: (95) exit\n"
				  "  13: (a5) if r4 < 0xa goto pc+7\n"
				  "  14: (25) if r4 > 0xf goto pc+6\n"
				  "  15: (a6) if w5 < 0xc8 goto pc+3\n"
				  "  16: (45) if r3 & 0x5 goto pc+2\n"
				  "  17: (b7) r0 = 1\n"
				  "  18: (95) exit\n"
				  "  19: (b7) r0 = 0\n"
				  "  20: (95) exit\n"
				  "  21: (55) if r4 != 0x1 goto pc+2\n"
				  "  22: (b7) r0 = 1\n"
				  "  23: (95) exit\n"
				  "  24: (b7) r0 = 0\n"
				  "  25: (95) exit\n";

int main(void)
{
	struct jobcg_decoded *d = NULL;
	const struct jobcg_decoded_line *l;
	int r = jobcg_decode_data(ranges_text, sizeof(ranges_text) - 1, "ranges", NULL, &d);

	if (!ok(r == 0, "ranges program decodes (%s)", r ? jobcg_last_error()->message : "ok"))
		return tap_done();
	size_t n = jobcg_decoded_lines(d, &l);
	bool range_note = false;
	for (size_t i = 0; i < n; i++)
		if (l[i].note && strstr(l[i].note, "c 12:0-199"))
			range_note = true;
	/* 6 majors x 200 minors listed one by one (plus a note each) made 2400+ lines. */
	ok(n < 80, "a range of 200 minors is one note, not one line per minor (%zu lines)", n);
	ok(range_note, "the range is named in a note (c 12:0-199)");
	ok(jobcg_decoded_allows(d, 'c', 12, 250, 2) && !jobcg_decoded_allows(d, 'c', 12, 199, 2) &&
	       !jobcg_decoded_allows(d, 'c', 12, 250, 4) && jobcg_decoded_allows(d, 'c', 1, 3, 6) &&
	       !jobcg_decoded_allows(d, 'c', 16, 250, 2) && jobcg_decoded_allows(d, 'b', 8, 0, 1) &&
	       !jobcg_decoded_allows(d, 'b', 8, 0, 2),
	   "the decoded answers stay exact");
	jobcg_decoded_free(d);
	return tap_done();
}
