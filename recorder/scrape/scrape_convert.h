/*
 * scrape_convert: a decoded Go pprof profile -> the profile pfr stores.
 *
 * The sample types an endpoint must have are renamed as Coroot names them (the CPU profile's
 * "samples" column and anything unknown are dropped). Sample labels are dropped and samples with
 * the same stack (the same function/file/line frames) are summed. Cumulative types (heap alloc_*,
 * block, mutex) become the difference from the previous scrape of the same series, keyed by a
 * hash of the stack. The first scrape of a series is a baseline: its cumulative values are 0 (an
 * all-cumulative endpoint yields no profile). A series that went down (a smaller value, or a
 * stack that disappeared) means the program restarted: the new values are all since the
 * restart, so they are taken whole and the baseline starts over.
 */
#ifndef PFR_SCRAPE_CONVERT_H
#define PFR_SCRAPE_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_profile.h"

/* The previous values of a cumulative series, sorted by stack hash. Owned by the caller's
 * target; zero-initialise, release with pfr_scrape_series_free. */
struct sc_series {
    uint64_t *hashes;
    int64_t *values; /* ncum per stack */
    size_t n;
    unsigned ncum;
    bool have; /* a baseline exists */
};
void pfr_scrape_series_free(struct sc_series *s);

struct sc_convert_result {
    pfr_profile *profile; /* NULL when there is nothing to write; owned by the caller */
    bool reset;           /* the series went down */
    bool baseline;        /* first scrape of a cumulative series */
    size_t stacks;        /* distinct stacks in the source */
};

/* Number of sample types endpoint ep writes, and their names (NULL if ep is unknown). */
size_t pfr_scrape_convert_types(int ep, const char *const **names);
/* Does ep have cumulative types? */
bool pfr_scrape_convert_cumulative(int ep);

/* Convert src (the body of endpoint ep) into res->profile covering [start_ns, end_ns), updating
 * st. -EBADMSG with a reason in err if src is not a profile of that endpoint (a required sample
 * type is missing, a value is negative or overflows); st is untouched then. */
int pfr_scrape_convert(int ep, const pfr_profile *src, struct sc_series *st, int64_t start_ns,
                       int64_t end_ns, struct sc_convert_result *res, char *err, size_t errlen);

#endif
