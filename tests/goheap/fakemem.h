/* fakemem: a Go runtime's memory-profile bucket list laid out in a byte buffer, read through
 * pfr_goheap_bufmem (unit tests, fuzzing, benchmarks). */
#ifndef PFR_TEST_FAKEMEM_H
#define PFR_TEST_FAKEMEM_H

#include <stddef.h>
#include <stdint.h>

#include "goheap_mem.h"

typedef struct fakemem {
    uint8_t *buf;
    size_t len, cap;
    uint64_t base;
    uint64_t mbuckets; /* address of the runtime.mbuckets variable */
    uint64_t rate;     /* address of runtime.MemProfileRate */
    pfr_goheap_bufmem bm;
    pfr_goheap_mem mem;
} fakemem;

/* A zeroed space of cap bytes at base; the two variables come first (rate set to 524288). */
int pfr_fakemem_init(fakemem *f, uint64_t base, size_t cap);
void pfr_fakemem_free(fakemem *f);
/* Append a memory bucket and make it the list head (allnext = the old head). Returns its
 * address, or 0 when the space is full. */
uint64_t pfr_fakemem_bucket(fakemem *f, uint64_t size, const uint64_t *pcs, uint32_t nstk,
                            uint64_t allocs, uint64_t frees);
void pfr_fakemem_put64(fakemem *f, uint64_t addr, uint64_t v);
uint64_t pfr_fakemem_get64(const fakemem *f, uint64_t addr);
/* Offsets of a bucket's fields */
#define FAKE_ALLNEXT 8
#define FAKE_TYP     16
#define FAKE_NSTK    40

#endif
