/*
 * pfr_hash: the hash functions and bit mixers of pfr, in one place.
 *
 * pfr_mix64, pfr_mix64_fast and pfr_hash_combine only spread bits for in-memory tables: a table
 * may change its mixer freely. pfr_hash_bytes and pfr_hash_fnv1a are fixed functions whose values
 * are stored (the store's slice ids, sinks' fingerprints): never change what they return.
 * Header-only: every function is static inline, so no library exports them.
 */
#ifndef PFR_HASH_H
#define PFR_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The 64-bit golden ratio, the usual odd multiplier for Fibonacci hashing and combining. */
#define PFR_HASH_GOLDEN 0x9e3779b97f4a7c15ull
/* FNV-1a's 64-bit offset basis and prime. */
#define PFR_HASH_FNV_OFFSET 0xcbf29ce484222325ull
#define PFR_HASH_FNV_PRIME  0x100000001b3ull

/* splitmix64's finalizer: spreads small integers, pids and aligned addresses over a table. */
static inline uint64_t pfr_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Half of murmur3's fmix64: one multiply, enough for addresses in hot loops. */
static inline uint64_t pfr_mix64_fast(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* Fold x into the running hash h (order matters: combine(a, b) != combine(b, a)). */
static inline uint64_t pfr_hash_combine(uint64_t h, uint64_t x)
{
    return pfr_mix64((h ^ x) * PFR_HASH_GOLDEN + (h << 6) + (h >> 2));
}

/* FNV-1a over n bytes, continuing from h (start with PFR_HASH_FNV_OFFSET). Byte at a time: for
 * short strings and for values that must match FNV-1a as others define it. */
static inline uint64_t pfr_hash_fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * PFR_HASH_FNV_PRIME;
    return h;
}

/* FNV-1a of a C string, continuing from h. */
static inline uint64_t pfr_hash_fnv1a_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * PFR_HASH_FNV_PRIME;
    return h;
}

/* Word-at-a-time hash of n bytes (multiply/xorshift, then pfr_mix64). Fast for long keys; keys
 * are pfr's own, not chosen by an attacker in bulk. Stored as the store's slice ids. */
static inline uint64_t pfr_hash_bytes(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t h = PFR_HASH_GOLDEN ^ (n * PFR_HASH_FNV_PRIME);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * 0x94d049bb133111ebull;
    }
    return pfr_mix64(h);
}

#endif
