/*
 * unwind_index: see unwind_index.h. One pass over the rows: for each granule start, the last
 * row at or below it (a cursor that only moves forward), then the counts from consecutive
 * entries.
 */
#include "unwind_index.h"

#include <errno.h>
#include <stdlib.h>

/* The smallest granule that keeps the index within its share of the rows. */
static uint32_t index_shift(uint32_t max_pc, size_t nrows)
{
    size_t most = nrows / PFR_UNWIND_INDEX_ROWS_PER;
    uint32_t shift = PFR_UNWIND_INDEX_MIN_SHIFT;
    while (shift < 31 && (size_t)(max_pc >> shift) + 1 > most)
        shift++;
    return shift;
}

int pfr_unwind_index_build(const struct pfr_unwind_row *rows, size_t nrows, pfr_unwind_index *out)
{
    *out = (pfr_unwind_index){0};
    if (nrows < PFR_UNWIND_INDEX_MIN_ROWS || nrows > UINT32_MAX)
        return 0;
    uint32_t shift = index_shift(rows[nrows - 1].pc, nrows);
    uint32_t n = (rows[nrows - 1].pc >> shift) + 1;
    struct pfr_unwind_row *ent = calloc(n, sizeof(*ent));
    if (!ent)
        return -ENOMEM;
    size_t i = 0; /* the last row at or below the granule's start (0 if none is) */
    for (uint32_t g = 0; g < n; g++) {
        uint32_t start = g << shift;
        while (i + 1 < nrows && rows[i + 1].pc <= start)
            i++;
        ent[g].pc = (uint32_t)i;
    }
    /* granule g's addresses are covered by rows ent[g].pc .. ent[g + 1].pc (the last row at or
     * below the next start, which may begin exactly there); the last granule's, to the end */
    for (uint32_t g = 0; g < n; g++) {
        uint32_t last = g + 1 < n ? ent[g + 1].pc : (uint32_t)(nrows - 1);
        ent[g].rule = last - ent[g].pc + 1;
    }
    out->ent = ent;
    out->n = n;
    out->shift = shift;
    return 0;
}

void pfr_unwind_index_free(pfr_unwind_index *ix)
{
    free(ix->ent);
    *ix = (pfr_unwind_index){0};
}

void pfr_unwind_index_range(const pfr_unwind_index *ix, uint32_t x, uint32_t *lo, uint32_t *n)
{
    uint32_t g = x >> ix->shift;
    if (g >= ix->n)
        g = ix->n - 1; /* past the last granule's start: the last rows */
    *lo = ix->ent[g].pc;
    *n = ix->ent[g].rule;
}
