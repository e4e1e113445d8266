/*
 * sym_kallsyms: kernel text symbols from /proc/kallsyms, sorted by address for binary search.
 * A symbol's extent is up to the next symbol, capped (kallsyms has no sizes). When
 * kptr_restrict hides addresses (all zero) the table is empty and `restricted` is set, so every
 * kernel frame reports unresolved instead of a wrong name.
 */
#ifndef PFR_SYM_KALLSYMS_H
#define PFR_SYM_KALLSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sym_strpool.h"

#define PFR_KSYM_MAX_LINE  1024
#define PFR_KSYM_MAX_LINES (1 << 22)
#define PFR_KSYM_MAX_SPAN  (256u << 10) /* no kernel function is this large */

struct pfr_sym_ksym {
    uint64_t addr;
    uint32_t name;   /* offset in names */
    uint32_t module; /* offset of "[module]" in names, 0 for the core kernel */
};

/* Symbols per block of the index: a block is a page of them (16 bytes each). */
#define PFR_KSYM_BLOCK 256

struct pfr_sym_kallsyms {
    struct pfr_sym_ksym *v; /* owned */
    size_t n, cap;
    /* The first address of each block of v (owned): a lookup searches this (a page or two) and
     * then one block, touching 3-4 pages where a search of v touched 10. Between the intervals
     * that look kernel frames up, the table goes cold, and in a guest a cold page can cost tens
     * of µs to touch again (docs/benchmarks.md, "Cold pages"). */
    uint64_t *top;
    size_t ntop;
    struct pfr_sym_strpool names;
    bool restricted;
};

int pfr_sym_kallsyms_read(const char *path, struct pfr_sym_kallsyms *out, char *err, size_t errlen);
int pfr_sym_kallsyms_parse_mem(const char *data, size_t len, struct pfr_sym_kallsyms *out,
                               char *err, size_t errlen);
const struct pfr_sym_ksym *pfr_sym_kallsyms_find(const struct pfr_sym_kallsyms *k, uint64_t addr);
size_t pfr_sym_kallsyms_bytes(const struct pfr_sym_kallsyms *k);
void pfr_sym_kallsyms_free(struct pfr_sym_kallsyms *k);

#endif
