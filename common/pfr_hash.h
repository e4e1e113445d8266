/* pfr_hash: the bit mixer of pfr's in-memory hash tables. Never persisted: a table may change
 * its mixer freely (hashes written to disk or to sinks are defined where they are written). */
#ifndef PFR_HASH_H
#define PFR_HASH_H

#include <stdint.h>

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

#endif
