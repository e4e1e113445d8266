/* u64map: an open-addressing hash map from uint64_t keys to uint64_t values (indices, pointers).
 * Small and fast for the recorder's per-interval tables. Any key value is allowed. */
#ifndef PFR_RECORDER_U64MAP_H
#define PFR_RECORDER_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pfr_u64map {
    uint64_t *keys;
    uint64_t *vals;
    uint8_t *used; /* 0 empty, 1 used, 2 deleted */
    size_t cap;    /* power of two, or 0 */
    size_t n;      /* live entries */
    size_t tomb;   /* deleted slots */
} pfr_u64map;

/* A zeroed struct is an empty map. */
void pfr_u64map_free(pfr_u64map *m);
/* Remove every entry, keeping the memory. */
void pfr_u64map_clear(pfr_u64map *m);
/* Pointer to key's value, or NULL. Valid until the next insertion. */
uint64_t *pfr_u64map_get(const pfr_u64map *m, uint64_t key);
/* Set key to val (insert or replace). 0 or -ENOMEM. */
int pfr_u64map_put(pfr_u64map *m, uint64_t key, uint64_t val);
/* Remove key; returns true if it was there. */
bool pfr_u64map_del(pfr_u64map *m, uint64_t key);
/* Iterate: start with *pos = 0; returns false at the end. */
bool pfr_u64map_next(const pfr_u64map *m, size_t *pos, uint64_t *key, uint64_t *val);

#endif
