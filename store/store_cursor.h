/* Cursors (layer 4, internal; the public calls are in pfr_store.h). */
#ifndef PFR_STORE_CURSOR_H
#define PFR_STORE_CURSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store_handle.h"

/* What the writer reads of the consumers when it gives chunks up: each one's cursor (to count
 * what it evicts past each cursor, per consumer) and the chunks any consumer set aside (below
 * its cursor, not taken: never rolled up). */
struct store_consumer {
    char name[129];
    int64_t cursor;
    int64_t lost; /* chunks past the cursor given up by the eviction being made */
};
struct store_cursors {
    bool any;
    int64_t min_cursor; /* INT64_MAX when none */
    struct store_consumer *v;
    size_t n, cap;
    int64_t *aside; /* ascending, duplicates removed */
    size_t naside, cap_aside;
};
int pfr_st_cursors_read(pfr_store *s, struct store_cursors *out);
void pfr_st_cursors_free(struct store_cursors *c);
/* Whether a consumer set chunk id aside. */
bool pfr_st_cursors_aside(const struct store_cursors *c, int64_t id);
/* Count an evicted chunk against every consumer whose cursor is below it; true when some is. */
bool pfr_st_cursors_count_lost(struct store_cursors *c, int64_t id);

/* The meta key of a consumer's count of chunks given up past its cursor. */
#define STORE_LOST_KEY_PREFIX "lost_unshipped."

#endif
