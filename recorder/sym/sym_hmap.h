/*
 * sym_hmap: open-addressing hash map from a 128-bit key (two u64) to a u64 value, used for pid,
 * dev:inode, build-id and address tables. Linear probing with backward-shift deletion, so there
 * are no tombstones and lookups stay short. Not thread-safe. The map owns its slot array.
 */
#ifndef PFR_SYM_HMAP_H
#define PFR_SYM_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pfr_sym_hslot {
    uint64_t k1, k2, val;
    uint64_t used;
};

struct pfr_sym_hmap {
    struct pfr_sym_hslot *slots;
    size_t cap; /* power of two, or 0 before the first insert */
    size_t n;
};

/* Insert or replace. Returns 0 or -ENOMEM. */
int pfr_sym_hmap_put(struct pfr_sym_hmap *m, uint64_t k1, uint64_t k2, uint64_t val);
bool pfr_sym_hmap_get(const struct pfr_sym_hmap *m, uint64_t k1, uint64_t k2, uint64_t *val);
bool pfr_sym_hmap_del(struct pfr_sym_hmap *m, uint64_t k1, uint64_t k2);
void pfr_sym_hmap_clear(struct pfr_sym_hmap *m);
void pfr_sym_hmap_free(struct pfr_sym_hmap *m);
size_t pfr_sym_hmap_bytes(const struct pfr_sym_hmap *m);

/* 64-bit FNV-1a of a byte string, then mixed; good enough to key files and strings. */
uint64_t pfr_sym_hash(const void *p, size_t len, uint64_t seed);

#endif
