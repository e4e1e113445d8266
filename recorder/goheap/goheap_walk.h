/*
 * goheap_walk: reads the Go runtime's memory-profile bucket list out of a process.
 *
 * Layout (amd64, Go 1.19 to 1.24): runtime.mbuckets points to the newest bucket; each bucket is
 * six 8-byte words {next, allnext, typ, hash, size, nstk}, then nstk program counters, then the
 * memRecord whose first four words are the "active" cycle {allocs, frees, alloc_bytes,
 * free_bytes}. The list is followed through allnext.
 *
 * The memory is another process's and may be hostile or changing under us: every pointer is
 * checked (non-zero, aligned, user space), the walk stops at max_buckets, a stack deeper than
 * max_nstk, a bucket seen twice (loop), a failed read (process exited, memory remapped) or a
 * deadline. Reads go through a cache of large blocks, so a list laid out the way the runtime's
 * persistent allocator lays it out costs one system call per 64 KiB, not one per word.
 */
#ifndef PFR_GOHEAP_WALK_H
#define PFR_GOHEAP_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "goheap_mem.h"

#define PFR_GOHEAP_BUCKET_HDR  48u /* next, allnext, typ, hash, size, nstk */
#define PFR_GOHEAP_RECORD_SIZE 32u /* allocs, frees, alloc_bytes, free_bytes */
#define PFR_GOHEAP_MEM_BUCKET  1u  /* bucketType memProfile */

typedef struct pfr_goheap_bucket {
    uint64_t addr, hash, size;
    uint64_t allocs, frees, alloc_bytes, free_bytes;
    uint32_t nstk;
    uint32_t stk; /* index of the first PC in pfr_goheap_walk.pcs */
} pfr_goheap_bucket;

typedef struct pfr_goheap_walk_limits {
    size_t max_buckets; /* 0 = 100000 */
    uint32_t max_nstk;  /* 0 = 1024 (Go's own upper bound for GODEBUG profstackdepth) */
    size_t max_pcs;     /* bound on all stacks together; 0 = 2,000,000 (16 MB) */
    int64_t max_ns;     /* wall budget of one walk; 0 = 200 ms, < 0 = already expired */
} pfr_goheap_walk_limits;

#define PFR_GOHEAP_WALK_BLOCK  65536u
#define PFR_GOHEAP_WALK_BLOCKS 16u

/* Result of a walk plus the buffers it reuses; zero-initialise, then walk as often as needed. */
typedef struct pfr_goheap_walk {
    pfr_goheap_bucket *buckets; /* newest first, as the list runs */
    size_t nbuckets, cap_buckets;
    uint64_t *pcs; /* the stacks of all buckets, leaf first */
    size_t npcs, cap_pcs;
    uint64_t reads;      /* reader calls made by the last walk */
    uint64_t bytes_read; /* bytes they returned */
    char err[128];       /* why the last walk failed */
    /* private: block cache and the visited set */
    uint8_t *blockmem;
    struct pfr_goheap_block {
        uint64_t base, lo, hi, used; /* [lo, hi) of the block starting at base is valid */
    } blocks[PFR_GOHEAP_WALK_BLOCKS];
    uint64_t tick;
    uint64_t *seen;
    size_t seen_cap, seen_n;
} pfr_goheap_walk;

/* Walk the list whose head pointer is stored at mbuckets_addr. Returns 0 with every bucket in
 * w->buckets, or a negative errno with a reason in w->err and the buckets read so far:
 * -EFAULT/-ESRCH a read failed, -ELOOP a bucket seen twice, -E2BIG more than max_buckets or
 * max_pcs, -EBADMSG a bucket that is not a memory-profile bucket or has an absurd stack depth or a
 * bad pointer, -ETIMEDOUT the deadline passed, -ENOMEM. */
int pfr_goheap_walk_run(pfr_goheap_walk *w, const pfr_goheap_mem *mem, uint64_t mbuckets_addr,
                        const pfr_goheap_walk_limits *limits);
/* Free the walk's buffers (w may be reused after another zero-initialisation). */
void pfr_goheap_walk_free(pfr_goheap_walk *w);

/* Read len bytes at addr through the walk's block cache (used for single words too). */
int pfr_goheap_walk_read(pfr_goheap_walk *w, const pfr_goheap_mem *mem, uint64_t addr, void *dst,
                         size_t len);
/* Forget cached blocks (the process's memory may have changed since). */
void pfr_goheap_walk_reset_cache(pfr_goheap_walk *w);

#endif
