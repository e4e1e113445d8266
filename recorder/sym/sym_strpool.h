/*
 * sym_strpool: strings packed in one growing buffer and named by 32-bit offsets, so tables of
 * symbols stay small and a whole file's names are freed at once. Offset 0 is always "".
 * Pointers from pfr_sym_strpool_get() are invalidated by the next add; keep offsets, not pointers.
 */
#ifndef PFR_SYM_STRPOOL_H
#define PFR_SYM_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "sym_hmap.h"

#define PFR_STR_NONE UINT32_MAX

struct pfr_sym_strpool {
    char *buf;
    size_t len, cap;
    struct pfr_sym_hmap intern; /* hash of string -> offset, for pfr_sym_strpool_intern() */
};

/* Append a copy of s[0..n) and a NUL. Returns its offset, or PFR_STR_NONE when out of memory or
 * past 4 GiB. */
uint32_t pfr_sym_strpool_add(struct pfr_sym_strpool *p, const char *s, size_t n);
/* Like add, but returns the offset of an equal string added through intern before. */
uint32_t pfr_sym_strpool_intern(struct pfr_sym_strpool *p, const char *s, size_t n);
/* Drop the intern table (the strings stay). */
void pfr_sym_strpool_forget_interned(struct pfr_sym_strpool *p);
/* Give back unused capacity once a pool is complete. */
void pfr_sym_strpool_shrink(struct pfr_sym_strpool *p);
size_t pfr_sym_strpool_bytes(const struct pfr_sym_strpool *p);
void pfr_sym_strpool_free(struct pfr_sym_strpool *p);

static inline const char *pfr_sym_strpool_get(const struct pfr_sym_strpool *p, uint32_t off)
{
    return p->buf && off < p->len ? p->buf + off : "";
}

#endif
