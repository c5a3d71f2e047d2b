/* Fuzz target: the GRES request, --gpu-bind and persisted-set parsers (first line of input each).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gres_internal.h"
#include "jobcg/gres.h"
#include "fuzz-gres-node.h"
#include "fuzz-input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jobcg_gres_node *n = NULL;
	struct jobcg_gres_request *req = NULL;
	struct jobcg_gres_set all, got, t;
	struct jobcg_gpu_bind b = {};
	char *s;

	s = fuzz_cstring(data, size, 4096);
	if (!s)
		return 0;
	if (fuzz_gres_node(&n) < 0)
		abort();
	jobcg_gres_node_all(n, NULL, &all);
	if (jobcg_gres_request_parse(s, &req) == 0) {
		if (jobcg_gres_select(n, req, &all, NULL, 0, &got) == 0 &&
		    !jobcg_gres_set_subset(&got, &all))
			abort();
		jobcg_gres_request_free(req);
	}
	if (jobcg_gpu_bind_parse(s, &b) == 0) {
		for (unsigned i = 0; i < 4; i++)
			if (jobcg_gpu_bind_task(n, &b, &all, i, 4, &t) == 0 &&
			    !jobcg_gres_set_subset(&t, &all))
				abort();
		jobcg_gpu_bind_done(&b);
	}
	if (jobcg_gres_set_parse(n, s, &got) == 0) {
		char *back = NULL;
		struct jobcg_gres_set again;

		if (jobcg_gres_set_format(n, &got, &back) < 0)
			abort();
		if (*back && (jobcg_gres_set_parse(n, back, &again) < 0 ||
			      memcmp(&again, &got, sizeof(got)) != 0))
			abort();
		free(back);
	}
	jobcg_gres_node_free(n);
	free(s);
	return 0;
}
