/* jobcg: choosing devices for a request among the free ones (type, cores, links). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "gpudetect_internal.h"
#include "gresxattr.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "log.h"
#include "util.h"

static bool record_matches(const struct jobcg_gres_record *r, const struct jobcg_gres_req_item *it)
{
	return streq(r->name, it->name) && (!it->type || gres_same_type(r->type, it->type));
}

/* Do the CPUs @cpus (CPU ids) meet device @d's Cores= (core indices, in CPUs when the table
 * could read the node's topology)? A device without Cores= suits any. */
bool gres_cores_match(const struct jobcg_gres_node *n, const struct jobcg_gres_device *d,
		      const uint64_t *cpus, size_t cpus_words)
{
	const struct jobcg_gres_record *r = d->rec;
	const uint64_t *have = r->cores;
	size_t words = r->cores_words;

	if (!cpus || !r->cores)
		return true;
	gres_node_cores_to_cpus(n);
	if (n->dev_cpus) {
		have = n->dev_cpus[d->pos];
		words = JOBCG_CPU_MAX / 64;
	}
	for (size_t i = 0; i < words && i < cpus_words; i++)
		if (have[i] & cpus[i])
			return true;
	return false;
}

/* Links from device @d to the devices of the same name already in @chosen. */
static int link_score(const struct jobcg_gres_node *n, const struct jobcg_gres_device *d,
		      const struct jobcg_gres_set *chosen)
{
	int score = 0;

	for (size_t i = 0; i < n->ndev; i++) {
		const struct jobcg_gres_device *o = &n->dev[i];

		if (o == d || !jobcg_gres_set_has(chosen, o->pos) ||
		    !streq(o->rec->name, d->rec->name))
			continue;
		if (o->index < d->rec->nlinks && d->rec->links[o->index] > 0)
			score += d->rec->links[o->index];
	}
	return score;
}

static void describe(const struct jobcg_gres_req_item *it, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s%s", it->name, it->type ? ":" : "", it->type ? it->type : "");
}

static unsigned count_matching(const struct jobcg_gres_node *n,
			       const struct jobcg_gres_req_item *it,
			       const struct jobcg_gres_set *in)
{
	unsigned c = 0;

	for (size_t i = 0; i < n->ndev; i++)
		if (record_matches(n->dev[i].rec, it) &&
		    (!in || jobcg_gres_set_has(in, (unsigned)i)))
			c++;
	return c;
}

/* No device matches @it: a Count-only record of gres.conf (no File=) may still name it, which
 * jobcg cannot give out (it grants device files), so that is said rather than "none". */
static int none_configured(const struct jobcg_gres_node *n, const struct jobcg_gres_req_item *it,
			   const char *what)
{
	for (size_t i = 0; n->conf && i < n->conf->nrecords; i++) {
		const struct jobcg_gres_record *r = &n->conf->records[i];

		char where[PATH_MAX + 16] = "gres.conf";

		if (r->nfiles || !record_matches(r, it))
			continue;
		if (r->origin.file)
			snprintf(where, sizeof(where), "%s:%u", r->origin.file, r->origin.line);
		return error_set(-ENOENT,
				 "%s: %s gives it Count=%llu but no device files (File=) on this "
				 "node, so jobcg cannot allocate it",
				 what, where, (unsigned long long)r->count);
	}
	return error_set(-ENOENT, "%s: none configured on this node", what);
}

static int select_item(const struct jobcg_gres_node *n, const struct jobcg_gres_req_item *it,
		       const struct jobcg_gres_set *avail, const uint64_t *cpus, size_t cpus_words,
		       struct jobcg_gres_set *chosen, int short_err)
{
	unsigned configured = count_matching(n, it, NULL), usable = 0;
	char what[256];

	describe(it, what, sizeof(what));
	if (it->count == 0)
		return 0;
	if (configured == 0)
		return none_configured(n, it, what);
	for (size_t i = 0; i < n->ndev; i++)
		if (record_matches(n->dev[i].rec, it) && jobcg_gres_set_has(avail, (unsigned)i) &&
		    !jobcg_gres_set_has(chosen, (unsigned)i))
			usable++;
	if (usable < it->count)
		return error_set(short_err, "%s: %u asked, only %u free (%u configured)", what,
				 it->count, usable, configured);

	for (unsigned k = 0; k < it->count; k++) {
		const struct jobcg_gres_device *best = NULL;
		bool best_aff = false;
		int best_links = -1;

		for (size_t i = 0; i < n->ndev; i++) {
			const struct jobcg_gres_device *d = &n->dev[i];
			bool aff;
			int links;

			if (!record_matches(d->rec, it) || !jobcg_gres_set_has(avail, d->pos) ||
			    jobcg_gres_set_has(chosen, d->pos))
				continue;
			aff = gres_cores_match(n, d, cpus, cpus_words);
			links = link_score(n, d, chosen);
			/* Devices come in position order, so ties keep the lowest index. */
			if (!best || (aff && !best_aff) ||
			    (aff == best_aff && links > best_links)) {
				best = d;
				best_aff = aff;
				best_links = links;
			}
		}
		jobcg_gres_set_add(chosen, best->pos);
	}
	return 0;
}

JOBCG_EXPORT int jobcg_gres_select(const struct jobcg_gres_node *n,
				   const struct jobcg_gres_request *req,
				   const struct jobcg_gres_set *avail, const uint64_t *cpus,
				   size_t cpus_words, struct jobcg_gres_set *ret)
{
	struct jobcg_gres_set chosen = {};

	/* Typed items first, so that an untyped one (a request not parsed from text may mix them)
	 * does not take a device a typed one needs. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < req->nitems; i++) {
			const struct jobcg_gres_req_item *it = &req->items[i];
			int r;

			if ((pass == 0) != (it->type != NULL))
				continue;
			r = select_item(n, it, avail, cpus, cpus_words, &chosen, -ENOSPC);
			if (r < 0)
				return r;
		}
	*ret = chosen;
	return 0;
}

JOBCG_EXPORT int jobcg_gres_select_step(const struct jobcg_gres_node *n,
					const struct jobcg_gres_request *req,
					const struct jobcg_gres_set *job,
					const struct jobcg_gres_set *avail, const uint64_t *cpus,
					size_t cpus_words, struct jobcg_gres_set *ret)
{
	struct jobcg_gres_set free_in_job = *job, chosen = {};

	if (avail)
		for (size_t i = 0; i < ELEMENTSOF(free_in_job.w); i++)
			free_in_job.w[i] &= avail->w[i];

	/* A step never gets more than its job: refuse before looking at what is free. */
	for (size_t i = 0; i < req->nitems; i++) {
		const struct jobcg_gres_req_item *it = &req->items[i];
		unsigned have = count_matching(n, it, job);
		char what[256];

		describe(it, what, sizeof(what));
		if (it->count > have)
			return error_set(-E2BIG, "step asks for %u %s but its job has %u",
					 it->count, what, have);
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < req->nitems; i++) {
			const struct jobcg_gres_req_item *it = &req->items[i];
			int r;

			if ((pass == 0) != (it->type != NULL))
				continue;
			r = select_item(n, it, &free_in_job, cpus, cpus_words, &chosen, -EBUSY);
			if (r < 0) {
				jobcg_error_prefix("step");
				return r;
			}
		}
	*ret = chosen;
	return 0;
}
