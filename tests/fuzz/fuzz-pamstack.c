/* libFuzzer target: a PAM service file through the stack reader of check and adopt --pam. */
#include <stddef.h>
#include <stdint.h>

#include "pamstack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcg_pam_scan *s = NULL;

	if (size > 1 << 20)
		return 0;
	/* Includes name files in a directory that does not exist: only noted, never read. */
	if (pam_scan_buffer("/nonexistent-jobcg-fuzz", "sshd", (const char *)data, size, &s) == 0)
		jobcg_pam_scan_free(s);
	return 0;
}
