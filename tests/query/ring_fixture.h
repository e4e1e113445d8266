/* Helpers that build rings for the query tests and benchmarks with the real store API. */
#ifndef PFR_QUERY_RING_FIXTURE_H
#define PFR_QUERY_RING_FIXTURE_H

#include <stdint.h>

#include "pfr_profile.h"
#include "pfr_store.h"

#define FX_S 1000000000LL

/* A new profile with one sample type (unit from the type name's last field). */
pfr_profile *fx_profile(const char *type);
/* Add a sample: stack in folded form, root first ("main;work;hash"). pid < 0 / comm NULL: no
 * such label. Returns 0 or a negative errno. */
int fx_sample(pfr_profile *p, const char *folded, int64_t value, int64_t pid, const char *comm);

/* Open (create) a writable ring at path; aborts the test program on failure. */
pfr_store *fx_open(const char *path);
/* Append p as the chunk [start, start + len) of service with labels (may be NULL, n = 0). */
int fx_append(pfr_store *s, const char *service, const pfr_kv *labels, size_t nlabels,
              int64_t start, int64_t len, const pfr_profile *p);

/* The "shift" workload: chunks of 10 s from start; in the first half hot_before takes most CPU,
 * in the second half hot_after does; steady work stays the same all along. */
int fx_shift_ring(pfr_store *s, const char *service, int64_t start, int nchunks);

#endif
