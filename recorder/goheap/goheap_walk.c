#include "goheap_walk.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfr_clock.h"
#include "pfr_hash.h"

#define USER_LIMIT     (1ull << 47) /* x86-64 user space ends below this */
#define PAGE_MASK      (~(uint64_t)4095)
#define DEADLINE_EVERY 64u

static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v; /* the targets are little-endian, like the host */
}

void pfr_goheap_walk_reset_cache(pfr_goheap_walk *w)
{
    for (unsigned i = 0; i < PFR_GOHEAP_WALK_BLOCKS; i++)
        w->blocks[i].used = 0;
}

void pfr_goheap_walk_free(pfr_goheap_walk *w)
{
    free(w->buckets);
    free(w->pcs);
    free(w->blockmem);
    free(w->seen);
    memset(w, 0, sizeof(*w));
}

/* Fill slot i with [from, base + BLOCK) of the block at base. */
static int block_fill(pfr_goheap_walk *w, const pfr_goheap_mem *mem, unsigned i, uint64_t base,
                      uint64_t from)
{
    struct pfr_goheap_block *b = &w->blocks[i];
    uint8_t *dst = w->blockmem + (size_t)i * PFR_GOHEAP_WALK_BLOCK + (from - base);
    size_t want = (size_t)(base + PFR_GOHEAP_WALK_BLOCK - from);
    w->reads++;
    ssize_t n = mem->read(mem->ctx, from, dst, want);
    b->base = base;
    b->used = ++w->tick;
    if (n <= 0) {
        b->lo = b->hi = from;
        return n < 0 ? (int)n : -EFAULT;
    }
    if ((size_t)n > want)
        n = (ssize_t)want; /* a reader that claims more than asked */
    w->bytes_read += (uint64_t)n;
    b->lo = from;
    b->hi = from + (uint64_t)n;
    return 0;
}

/* The slot holding addr, loading its block (from the block's start, or failing that from
 * addr's page, as the start of a block may lie before the mapping) when needed. */
static int block_for(pfr_goheap_walk *w, const pfr_goheap_mem *mem, uint64_t addr, unsigned *slot)
{
    uint64_t base = addr & ~(uint64_t)(PFR_GOHEAP_WALK_BLOCK - 1);
    unsigned victim = 0;
    for (unsigned i = 0; i < PFR_GOHEAP_WALK_BLOCKS; i++) {
        struct pfr_goheap_block *b = &w->blocks[i];
        if (b->used && b->base == base) {
            if (addr >= b->lo && addr < b->hi) {
                b->used = ++w->tick;
                *slot = i;
                return 0;
            }
            victim = i; /* same block, other part: refill in place */
            goto fill;
        }
        if (w->blocks[i].used < w->blocks[victim].used)
            victim = i;
    }
    int rc = block_fill(w, mem, victim, base, base);
    if (rc == 0 && addr >= w->blocks[victim].lo && addr < w->blocks[victim].hi) {
        *slot = victim;
        return 0;
    }
    if (rc == -ESRCH)
        return rc;
fill:
    rc = block_fill(w, mem, victim, base, addr & PAGE_MASK);
    if (rc < 0 && rc != -ESRCH && (addr & ~PAGE_MASK)) /* a reader with sub-page mappings */
        rc = block_fill(w, mem, victim, base, addr);
    if (rc < 0)
        return rc;
    if (addr >= w->blocks[victim].hi)
        return -EFAULT;
    *slot = victim;
    return 0;
}

int pfr_goheap_walk_read(pfr_goheap_walk *w, const pfr_goheap_mem *mem, uint64_t addr, void *dst,
                         size_t len)
{
    if (addr >= USER_LIMIT || len > USER_LIMIT - addr)
        return -EFAULT;
    if (!w->blockmem) {
        w->blockmem = malloc((size_t)PFR_GOHEAP_WALK_BLOCK * PFR_GOHEAP_WALK_BLOCKS);
        if (!w->blockmem)
            return -ENOMEM;
        pfr_goheap_walk_reset_cache(w);
    }
    uint8_t *out = dst;
    while (len > 0) {
        unsigned i;
        int rc = block_for(w, mem, addr, &i);
        if (rc < 0)
            return rc;
        struct pfr_goheap_block *b = &w->blocks[i];
        size_t n = (size_t)(b->hi - addr);
        if (n > len)
            n = len;
        memcpy(out, w->blockmem + (size_t)i * PFR_GOHEAP_WALK_BLOCK + (addr - b->base), n);
        out += n;
        addr += n;
        len -= n;
    }
    return 0;
}

/* Insert addr into the visited set; 1 if it was there already, 0 if new, -ENOMEM. */
static int seen_add(pfr_goheap_walk *w, uint64_t addr)
{
    if ((w->seen_n + 1) * 2 > w->seen_cap) {
        size_t ncap = w->seen_cap ? w->seen_cap * 2 : 1024;
        uint64_t *ns = calloc(ncap, sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        for (size_t i = 0; i < w->seen_cap; i++) {
            if (!w->seen[i])
                continue;
            size_t j = pfr_mix64_fast(w->seen[i]) & (ncap - 1);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = w->seen[i];
        }
        free(w->seen);
        w->seen = ns;
        w->seen_cap = ncap;
    }
    size_t j = pfr_mix64_fast(addr) & (w->seen_cap - 1);
    while (w->seen[j]) {
        if (w->seen[j] == addr)
            return 1;
        j = (j + 1) & (w->seen_cap - 1);
    }
    w->seen[j] = addr;
    w->seen_n++;
    return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 256;
    while (ncap < need)
        ncap *= 2;
    void *np = realloc(*p, ncap * elem);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = ncap;
    return 0;
}

__attribute__((format(printf, 3, 4))) static int fail(pfr_goheap_walk *w, int rc, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof(w->err), fmt, ap);
    va_end(ap);
    return rc;
}

static const char *read_what(int rc)
{
    return rc == -ESRCH ? "process gone" : rc == -ENOMEM ? "out of memory" : "unreadable";
}

/* Read the bucket at addr and append it; returns its allnext in *next. */
static int read_bucket(pfr_goheap_walk *w, const pfr_goheap_mem *mem, uint64_t addr,
                       const pfr_goheap_walk_limits *lim, uint64_t *next)
{
    uint8_t hdr[PFR_GOHEAP_BUCKET_HDR];
    int rc = pfr_goheap_walk_read(w, mem, addr, hdr, sizeof(hdr));
    if (rc < 0)
        return fail(w, rc, "bucket 0x%" PRIx64 ": %s", addr, read_what(rc));
    uint64_t typ = rd64(hdr + 16), nstk = rd64(hdr + 40);
    if (typ != PFR_GOHEAP_MEM_BUCKET)
        return fail(w, -EBADMSG, "bucket 0x%" PRIx64 ": type %" PRIu64 " is not a memory bucket",
                    addr, typ);
    if (nstk > lim->max_nstk)
        return fail(w, -EBADMSG, "bucket 0x%" PRIx64 ": absurd stack depth %" PRIu64, addr, nstk);
    if (w->npcs + nstk > lim->max_pcs)
        return fail(w, -E2BIG, "more than %zu stack words (bucket 0x%" PRIx64 ")", lim->max_pcs,
                    addr);
    if (grow((void **)&w->pcs, &w->cap_pcs, w->npcs + nstk, sizeof(uint64_t)) < 0 ||
        grow((void **)&w->buckets, &w->cap_buckets, w->nbuckets + 1, sizeof(pfr_goheap_bucket)) < 0)
        return fail(w, -ENOMEM, "out of memory at bucket 0x%" PRIx64, addr);
    uint64_t at = addr + PFR_GOHEAP_BUCKET_HDR;
    rc = nstk ? pfr_goheap_walk_read(w, mem, at, w->pcs + w->npcs, (size_t)nstk * 8) : 0;
    uint8_t rec[PFR_GOHEAP_RECORD_SIZE];
    if (rc == 0)
        rc = pfr_goheap_walk_read(w, mem, at + nstk * 8, rec, sizeof(rec));
    if (rc < 0)
        return fail(w, rc, "bucket 0x%" PRIx64 " body: %s", addr, read_what(rc));
    pfr_goheap_bucket *b = &w->buckets[w->nbuckets++];
    b->addr = addr;
    b->hash = rd64(hdr + 24);
    b->size = rd64(hdr + 32);
    b->nstk = (uint32_t)nstk;
    b->stk = (uint32_t)w->npcs;
    b->allocs = rd64(rec);
    b->frees = rd64(rec + 8);
    b->alloc_bytes = rd64(rec + 16);
    b->free_bytes = rd64(rec + 24);
    w->npcs += nstk;
    *next = rd64(hdr + 8);
    return 0;
}

int pfr_goheap_walk_run(pfr_goheap_walk *w, const pfr_goheap_mem *mem, uint64_t mbuckets_addr,
                        const pfr_goheap_walk_limits *limits)
{
    pfr_goheap_walk_limits lim = {100000, 1024, 2000000, 200 * 1000000ll};
    if (limits) {
        if (limits->max_buckets)
            lim.max_buckets = limits->max_buckets;
        if (limits->max_nstk)
            lim.max_nstk = limits->max_nstk;
        if (limits->max_pcs)
            lim.max_pcs = limits->max_pcs;
        if (limits->max_ns)
            lim.max_ns = limits->max_ns;
    }
    if (lim.max_pcs > UINT32_MAX)
        lim.max_pcs = UINT32_MAX;
    w->nbuckets = w->npcs = 0;
    w->reads = w->bytes_read = 0;
    w->err[0] = '\0';
    if (w->seen)
        memset(w->seen, 0, w->seen_cap * sizeof(*w->seen));
    w->seen_n = 0;
    pfr_goheap_walk_reset_cache(w); /* the process has moved on since the last walk */
    int64_t deadline = pfr_clock_mono_ns() + (lim.max_ns > 0 ? lim.max_ns : 0);

    uint8_t word[8];
    int rc = pfr_goheap_walk_read(w, mem, mbuckets_addr, word, sizeof(word));
    if (rc < 0)
        return fail(w, rc, "runtime.mbuckets at 0x%" PRIx64 ": %s", mbuckets_addr, read_what(rc));
    uint64_t addr = rd64(word);
    while (addr != 0) {
        if (w->nbuckets >= lim.max_buckets)
            return fail(w, -E2BIG, "more than %zu buckets", lim.max_buckets);
        if ((addr & 7) || addr >= USER_LIMIT)
            return fail(w, -EBADMSG, "bad bucket pointer 0x%" PRIx64 " after %zu buckets", addr,
                        w->nbuckets);
        rc = seen_add(w, addr);
        if (rc < 0)
            return fail(w, rc, "out of memory");
        if (rc == 1)
            return fail(w, -ELOOP, "bucket 0x%" PRIx64 " seen twice: loop after %zu buckets", addr,
                        w->nbuckets);
        uint64_t next = 0;
        rc = read_bucket(w, mem, addr, &lim, &next);
        if (rc < 0)
            return rc;
        if (w->nbuckets % DEADLINE_EVERY == 0 && pfr_clock_mono_ns() > deadline)
            return fail(w, -ETIMEDOUT, "walk deadline passed after %zu buckets", w->nbuckets);
        addr = next;
    }
    return 0;
}
