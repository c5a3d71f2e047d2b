/* libFuzzer target: gres.conf text through the whole loader, as host node1, without stat(). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "confload.h"
#include "config_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcg_config *c = NULL;

	if (size > 1 << 20)
		return 0;
	if (config_load_buffers(NULL, 0, (const char *)data, size, "node1", JOBCG_CONFIG_NO_STAT,
				&c) == 0) {
		/* every record must be well formed */
		for (size_t i = 0; i < c->gres.nrecords; i++) {
			const struct jobcg_gres_record *r = &c->gres.records[i];

			if (!r->name || (r->nfiles && !r->files) || (r->cores && !r->cores_words))
				abort();
		}
		jobcg_config_free(c);
	}
	return 0;
}
