/* jobcg internal: the PAM stack reader on a buffer (fuzzed). */
#pragma once

#include <stddef.h>

#include "jobcg/adopt.h"

/* jobcg_pam_scan() of @text (@len bytes, cut at a NUL) as the service's own file @name; its
 * includes are read from @pam_dir. */
int pam_scan_buffer(const char *pam_dir, const char *name, const char *text, size_t len,
		    struct jobcg_pam_scan **ret);
