/*
 * unwind_index: an index in front of a table's rows for the sampler's search (unwind.bpf.h).
 *
 * The sampler finds the row covering an address by a binary search of its file's rows: 16-20
 * steps in a large table (libLLVM's 0.95M rows), each a cache miss in the 16 MiB rows map,
 * measured at 0.5 µs a search on the busy host. The index cuts the address space of the table
 * into granules of 2^shift bytes, and entry g names the rows that can cover an address of
 * granule g: from the last row at or below its start to the last row at or below the next
 * granule's start (a few rows, on one or two cache lines). The sampler reads that entry and
 * searches only there.
 *
 * The granule is the smallest power of two (at least 256 bytes) that keeps the index at one
 * entry per PFR_UNWIND_INDEX_ROWS_PER rows at most, so it costs the rows map that share of room;
 * tables of fewer than PFR_UNWIND_INDEX_MIN_ROWS rows get none (their search is short).
 *
 * Entries have the rows' layout, so they live in the rows map beside their table: .pc is the
 * first row (from the table's first), .rule the count of rows to search.
 *
 * Errors: 0 or a negative errno. Ownership: *out's entries are the caller's
 * (pfr_unwind_index_free()).
 */
#ifndef PFR_UNWIND_INDEX_H
#define PFR_UNWIND_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_profile.h"

#define PFR_UNWIND_INDEX_MIN_ROWS  64
#define PFR_UNWIND_INDEX_ROWS_PER  16
#define PFR_UNWIND_INDEX_MIN_SHIFT 8

typedef struct pfr_unwind_index {
    struct pfr_unwind_row *ent; /* n entries; NULL when n is 0 */
    uint32_t n;
    uint32_t shift; /* granule: 2^shift bytes of the table's addresses (row pcs) */
} pfr_unwind_index;

/* The index of rows (sorted by pc, as a table's) into *out; out->n 0 when the table is too
 * small to need one. -ENOMEM. */
int pfr_unwind_index_build(const struct pfr_unwind_row *rows, size_t nrows, pfr_unwind_index *out);

void pfr_unwind_index_free(pfr_unwind_index *ix);

/* The rows [*lo, *lo + *n) the sampler searches for address x (a row pc): as unwind.bpf.h
 * computes them, for tests. */
void pfr_unwind_index_range(const pfr_unwind_index *ix, uint32_t x, uint32_t *lo, uint32_t *n);

#endif
