/*
 * pfr_map: an open-addressing hash map from uint64_t keys to uint64_t values (indices, offsets,
 * pointers), the one map of pfr's in-memory tables. Any key value is allowed (key 0 is kept
 * beside the table). Linear probing at a load of at most 1/2 with backward-shift deletion: no
 * tombstones, so lookups stay short however many keys come and go. Not thread-safe.
 *
 * A zeroed struct is an empty map; pfr_map_free releases its memory (the map owns its arrays,
 * never what the values point to). Pointers to values stay valid until the next put or del.
 * Deleting while iterating with pfr_map_next may skip or repeat entries: collect, then delete.
 */
#ifndef PFR_MAP_H
#define PFR_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pfr_map {
    uint64_t *keys;    /* cap slots; 0 marks an empty slot */
    uint64_t *vals;    /* cap slots */
    size_t cap;        /* power of two, or 0 before the first insertion */
    size_t n;          /* live entries, key 0 included */
    bool has_zero;     /* key 0 is present ... */
    uint64_t zero_val; /* ... with this value */
} pfr_map;

/* Release the arrays; the map is empty and usable again. */
void pfr_map_free(pfr_map *m);
/* Remove every entry, keeping the memory. */
void pfr_map_clear(pfr_map *m);
/* Make room for n entries in all, so that the next inserts do not allocate. 0 or -ENOMEM. */
int pfr_map_reserve(pfr_map *m, size_t n);
/* @return a pointer to key's value, or NULL when absent. */
uint64_t *pfr_map_get(const pfr_map *m, uint64_t key);
/* Set key to val, inserting or replacing. @return 0 or -ENOMEM (the map unchanged). */
int pfr_map_put(pfr_map *m, uint64_t key, uint64_t val);
/* Find key, inserting it with val_if_new when absent; *valp (may be NULL) points to its value.
 * @return 1 if key was there, 0 if it was inserted, -ENOMEM (the map unchanged). */
int pfr_map_intern(pfr_map *m, uint64_t key, uint64_t val_if_new, uint64_t **valp);
/* Remove key. @return true if it was there. */
bool pfr_map_del(pfr_map *m, uint64_t key);
/* Iterate: start with *pos = 0; each call gives one entry (val may be NULL); false at the end. */
bool pfr_map_next(const pfr_map *m, size_t *pos, uint64_t *key, uint64_t *val);
/* Heap bytes held, for memory accounting. */
size_t pfr_map_bytes(const pfr_map *m);

#endif
