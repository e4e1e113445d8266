/* Helpers shared by the store's tests: temporary folders, small hand-made profiles and a
 * content comparison of profiles that ignores table order. */
#ifndef PFR_STORE_TEST_UTIL_H
#define PFR_STORE_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_profile.h"

/* A fresh folder under $TMPDIR (or /tmp); malloc'ed path. Aborts on failure. */
char *pfr_tu_tmpdir(const char *tag);
/* rm -rf of a folder made by pfr_tu_tmpdir. */
void pfr_tu_rmdir(const char *dir);
/* path joined with name (malloc'ed). */
char *pfr_tu_path(const char *dir, const char *name);

/* A small deterministic profile: nsamples samples over a fixed set of frames, labels pid and
 * comm, one sample type (type_name, "nanoseconds"), period 10 ms. variant changes the values
 * and some stacks. */
pfr_profile *pfr_tu_small_profile(unsigned variant, size_t nsamples, const char *type_name);

/* Compare content: sample types, period, time, and the multiset of samples as
 * (frames, labels) -> summed values. Writes the first difference to why. */
bool pfr_tu_profiles_equal(const pfr_profile *a, const pfr_profile *b, char *why, size_t whylen);

/* Canonical text of a profile's samples (sorted, duplicates summed); malloc'ed. */
char *pfr_tu_canon(const pfr_profile *p);

/* A 64-bit digest of the same content pfr_tu_canon writes out (much cheaper: for bulk checks). */
uint64_t pfr_tu_digest(const pfr_profile *p);

uint64_t pfr_tu_file_size(const char *path);

/* The first column of the first row sql gives on the SQLite file at path (aborts, saying why,
 * when it gives none). */
int64_t pfr_tu_sql_int(const char *path, const char *sql);

#endif
