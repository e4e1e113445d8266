#include "fakemem.h"

#include <stdlib.h>
#include <string.h>

#include "goheap_walk.h"

#define RECORD_FULL 128 /* active + three future cycles */

int pfr_fakemem_init(fakemem *f, uint64_t base, size_t cap)
{
    memset(f, 0, sizeof(*f));
    f->buf = calloc(1, cap);
    if (!f->buf)
        return -1;
    f->cap = cap;
    f->base = base;
    f->mbuckets = base;
    f->rate = base + 8;
    f->len = 64;
    pfr_fakemem_put64(f, f->rate, 524288);
    f->bm = (pfr_goheap_bufmem){f->buf, cap, base, 0};
    f->mem = pfr_goheap_bufmem_reader(&f->bm);
    return 0;
}

void pfr_fakemem_free(fakemem *f)
{
    free(f->buf);
    memset(f, 0, sizeof(*f));
}

void pfr_fakemem_put64(fakemem *f, uint64_t addr, uint64_t v)
{
    if (addr >= f->base && addr - f->base + 8 <= f->cap)
        memcpy(f->buf + (addr - f->base), &v, 8);
}

uint64_t pfr_fakemem_get64(const fakemem *f, uint64_t addr)
{
    uint64_t v = 0;
    if (addr >= f->base && addr - f->base + 8 <= f->cap)
        memcpy(&v, f->buf + (addr - f->base), 8);
    return v;
}

uint64_t pfr_fakemem_bucket(fakemem *f, uint64_t size, const uint64_t *pcs, uint32_t nstk,
                            uint64_t allocs, uint64_t frees)
{
    size_t need = PFR_GOHEAP_BUCKET_HDR + (size_t)nstk * 8 + RECORD_FULL;
    if (f->len + need > f->cap)
        return 0;
    uint64_t a = f->base + f->len;
    uint64_t head = pfr_fakemem_get64(f, f->mbuckets);
    pfr_fakemem_put64(f, a + FAKE_ALLNEXT, head);
    pfr_fakemem_put64(f, a + FAKE_TYP, PFR_GOHEAP_MEM_BUCKET);
    pfr_fakemem_put64(f, a + 24, 0x9e3779b97f4a7c15ull ^ a); /* hash */
    pfr_fakemem_put64(f, a + 32, size);
    pfr_fakemem_put64(f, a + FAKE_NSTK, nstk);
    for (uint32_t i = 0; i < nstk; i++)
        pfr_fakemem_put64(f, a + PFR_GOHEAP_BUCKET_HDR + i * 8ull, pcs[i]);
    uint64_t r = a + PFR_GOHEAP_BUCKET_HDR + nstk * 8ull;
    pfr_fakemem_put64(f, r, allocs);
    pfr_fakemem_put64(f, r + 8, frees);
    pfr_fakemem_put64(f, r + 16, allocs * size);
    pfr_fakemem_put64(f, r + 24, frees * size);
    pfr_fakemem_put64(f, f->mbuckets, a);
    f->len += need;
    return a;
}
