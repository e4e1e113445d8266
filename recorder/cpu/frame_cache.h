/*
 * frame_cache: symbolized frames kept across intervals, keyed by (space, address), so a
 * steady workload is symbolized once rather than every interval. A space is a process (its
 * addresses), or a file the symbolizer holds (PFR_FRAME_CACHE_FILE | its frame key: file
 * offsets), whose frames then serve every process that maps it, new ones included. Strings are
 * interned once for all processes. Bounded: past max_bytes everything is dropped and refilled from
 * the symbolizer (whose own file cache makes that cheap). A process's entries go when it is
 * forgotten or execs.
 */
#ifndef PFR_RECORDER_FRAME_CACHE_H
#define PFR_RECORDER_FRAME_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "pfr_map.h"

#define PFR_FRAME_CACHE_KERNEL 0u           /* the "process" of kernel addresses */
#define PFR_FRAME_CACHE_FILE   (1ull << 63) /* or'ed into a file's space (never a pid) */

typedef struct pfr_cached_frame {
    const char *function, *file, *module; /* interned; never NULL */
    int64_t line;
} pfr_cached_frame;

typedef struct pfr_frame_cache {
    pfr_map by_pid;  /* space (tgid, or a file's) -> pfr_map * (address -> entry index) */
    pfr_map strings; /* string hash -> interned string (chained on collision) */
    pfr_cached_frame *frames;
    size_t nframes, cap;
    size_t bytes, max_bytes;
    uint64_t hits, misses, resets;
} pfr_frame_cache;

void pfr_frame_cache_init(pfr_frame_cache *c, size_t max_bytes);
void pfr_frame_cache_free(pfr_frame_cache *c);

/* The frames of (space, addr), innermost first: returns their count, 0 on a miss. */
size_t pfr_frame_cache_get(pfr_frame_cache *c, uint64_t space, uint64_t addr,
                           const pfr_cached_frame **frames);
/* Remember n frames (innermost first) for (space, addr). Strings are copied. 0 or -ENOMEM. */
int pfr_frame_cache_put(pfr_frame_cache *c, uint64_t space, uint64_t addr,
                        const pfr_cached_frame *frames, size_t n);
/* The length and hash (pfr_hash_bytes) of a string of a frame the cache returned, kept beside it
 * when it was interned: the profiles it goes into need not measure or hash it again. s must be
 * one of those strings (valid until the next clear). */
void pfr_frame_cache_str(const char *s, size_t *len, uint64_t *hash);
void pfr_frame_cache_forget(pfr_frame_cache *c, uint32_t tgid);
void pfr_frame_cache_clear(pfr_frame_cache *c);

#endif
