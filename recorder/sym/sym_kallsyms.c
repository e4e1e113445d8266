#include "sym_kallsyms.h"
#include "sym_lines.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct kctx {
    struct pfr_sym_kallsyms *out;
    uint8_t *rank; /* per symbol, to pick one name among aliases */
    size_t zeros;
    char *err;
    size_t errlen;
};

static int type_rank(char t)
{
    switch (t) {
    case 'T':
        return 0;
    case 't':
        return 1;
    case 'W':
        return 2;
    case 'w':
        return 3;
    default:
        return -1;
    }
}

static int push(struct kctx *c, uint64_t addr, uint32_t name, uint32_t mod, uint8_t rank)
{
    struct pfr_sym_kallsyms *k = c->out;
    if (k->n == k->cap) {
        size_t ncap = k->cap ? k->cap * 2 : 4096;
        struct pfr_sym_ksym *nv = realloc(k->v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        k->v = nv;
        uint8_t *nr = realloc(c->rank, ncap);
        if (!nr)
            return -ENOMEM;
        c->rank = nr;
        k->cap = ncap;
    }
    k->v[k->n] = (struct pfr_sym_ksym){addr, name, mod};
    c->rank[k->n] = rank;
    k->n++;
    return 0;
}

static int on_line(void *vctx, char *line, size_t len, size_t lineno)
{
    struct kctx *c = vctx;
    char *end = line + len, *p = line;
    uint64_t addr = 0;
    int digits = 0;
    for (; p < end && *p != ' '; p++, digits++) {
        int v = (*p >= '0' && *p <= '9')   ? *p - '0'
                : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10
                                           : -1;
        if (v < 0 || digits >= 16)
            break;
        addr = addr << 4 | (uint64_t)v;
    }
    if (digits == 0 || end - p < 4 || p[0] != ' ' || p[2] != ' ') {
        snprintf(c->err, c->errlen, "line %zu: malformed", lineno);
        return -EINVAL;
    }
    int rank = type_rank(p[1]);
    char *name = p + 3;
    size_t nlen = strcspn(name, " \t");
    if (nlen == 0) {
        snprintf(c->err, c->errlen, "line %zu: no name", lineno);
        return -EINVAL;
    }
    if (addr == 0)
        c->zeros++;
    if (rank < 0 || addr == 0)
        return 0; /* data and absolute symbols never hold code */
    char *mod = name + nlen;
    while (*mod == ' ' || *mod == '\t')
        mod++;
    size_t mlen = strlen(mod);
    if (mlen && (mod[0] != '[' || mod[mlen - 1] != ']')) {
        snprintf(c->err, c->errlen, "line %zu: bad module", lineno);
        return -EINVAL;
    }
    uint32_t noff = pfr_sym_strpool_add(&c->out->names, name, nlen);
    uint32_t moff = mlen ? pfr_sym_strpool_intern(&c->out->names, mod, mlen) : 0;
    if (noff == PFR_STR_NONE || moff == PFR_STR_NONE)
        return -ENOMEM;
    /* names starting with '_' are usually section markers or aliases; prefer the others */
    uint8_t r = (uint8_t)(rank * 2 + (name[0] == '_'));
    return push(c, addr, noff, moff, r);
}

static int by_addr(const void *a, const void *b)
{
    const struct pfr_sym_ksym *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return 0;
}

/* Sort by address, keeping the best-ranked alias of each address. */
struct ranked {
    struct pfr_sym_ksym s;
    uint32_t key; /* rank << 24 | original index, for a stable, deterministic choice */
};

static int by_addr_rank(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    int c = by_addr(&x->s, &y->s);
    if (c)
        return c;
    return x->key < y->key ? -1 : x->key > y->key;
}

static int sort_dedup(struct kctx *c)
{
    struct pfr_sym_kallsyms *k = c->out;
    if (k->n == 0)
        return 0;
    struct ranked *r = malloc(k->n * sizeof(*r));
    if (!r)
        return -ENOMEM;
    for (size_t i = 0; i < k->n; i++)
        r[i] = (struct ranked){k->v[i], (uint32_t)c->rank[i] << 24 | (uint32_t)(i & 0xffffff)};
    qsort(r, k->n, sizeof(*r), by_addr_rank);
    size_t w = 0;
    for (size_t i = 0; i < k->n; i++)
        if (w == 0 || k->v[w - 1].addr != r[i].s.addr)
            k->v[w++] = r[i].s;
    free(r);
    k->n = w; /* (build_index moves the table to memory of its size) */
    return 0;
}

_Static_assert(PFR_KSYM_BLOCK * sizeof(struct pfr_sym_ksym) == 4096, "a block is a page");

#define HUGE_PAGE_BYTES (2u << 20)

/* The table moved to page-aligned memory (a block is then one page, not two halves), and the
 * index of its blocks. A table of more than half a huge page (a distribution kernel's: 1.9 MiB)
 * takes a whole one, aligned and asked of the kernel as one (it gives it in its default
 * "madvise" mode): one TLB entry for every lookup, where 4 KiB pages left cold cost a walk
 * each. The heap's huge pages (heap_pages.h) miss it: glibc maps a block this size apart. */
static int build_index(struct pfr_sym_kallsyms *k)
{
    k->ntop = (k->n + PFR_KSYM_BLOCK - 1) / PFR_KSYM_BLOCK;
    if (k->ntop == 0)
        return 0;
    size_t bytes = k->n * sizeof(*k->v), align = PFR_KSYM_BLOCK * sizeof(*k->v);
    if (bytes > HUGE_PAGE_BYTES / 2) {
        bytes = (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
        align = HUGE_PAGE_BYTES;
    }
    void *aligned = NULL;
    if (posix_memalign(&aligned, align, bytes))
        return -ENOMEM;
    if (align == HUGE_PAGE_BYTES)
        (void)madvise(aligned, bytes, MADV_HUGEPAGE); /* where refused: 4 KiB pages, indexed */
    memcpy(aligned, k->v, k->n * sizeof(*k->v));
    free(k->v);
    k->v = aligned;
    k->cap = bytes / sizeof(*k->v);
    k->top = malloc(k->ntop * sizeof(*k->top));
    if (!k->top)
        return -ENOMEM;
    for (size_t b = 0; b < k->ntop; b++)
        k->top[b] = k->v[b * PFR_KSYM_BLOCK].addr;
    return 0;
}

static int finish(struct kctx *c, int rc)
{
    struct pfr_sym_kallsyms *k = c->out;
    if (!rc && k->n == 0 && c->zeros > 0)
        k->restricted = true; /* kptr_restrict: every address printed as zero */
    if (!rc)
        rc = sort_dedup(c);
    if (!rc)
        rc = build_index(k);
    free(c->rank);
    if (rc) {
        pfr_sym_kallsyms_free(k);
        return rc;
    }
    pfr_sym_strpool_forget_interned(&k->names);
    pfr_sym_strpool_shrink(&k->names);
    return 0;
}

static const struct pfr_sym_line_limits ksym_limits = {PFR_KSYM_MAX_LINE, PFR_KSYM_MAX_LINES};

int pfr_sym_kallsyms_read(const char *path, struct pfr_sym_kallsyms *out, char *err, size_t errlen)
{
    struct kctx c = {out, NULL, 0, err, errlen};
    return finish(&c, pfr_sym_lines_from_file(path, &ksym_limits, on_line, &c, err, errlen));
}

int pfr_sym_kallsyms_parse_mem(const char *data, size_t len, struct pfr_sym_kallsyms *out,
                               char *err, size_t errlen)
{
    struct kctx c = {out, NULL, 0, err, errlen};
    return finish(&c, pfr_sym_lines_from_mem(data, len, &ksym_limits, on_line, &c, err, errlen));
}

/* How many of the n keys at base (a uint64_t every stride bytes, ascending) are <= addr. */
static size_t count_le(const void *base, size_t stride, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (*(const uint64_t *)((const char *)base + mid * stride) <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const struct pfr_sym_ksym *pfr_sym_kallsyms_find(const struct pfr_sym_kallsyms *k, uint64_t addr)
{
    /* the last block whose first address is <= addr, then the last symbol there that is */
    size_t b = count_le(k->top, sizeof(*k->top), k->ntop, addr);
    if (b == 0)
        return NULL;
    size_t first = (b - 1) * PFR_KSYM_BLOCK;
    size_t len = k->n - first < PFR_KSYM_BLOCK ? k->n - first : PFR_KSYM_BLOCK;
    size_t lo = first + count_le(&k->v[first].addr, sizeof(*k->v), len, addr);
    const struct pfr_sym_ksym *s = &k->v[lo - 1];
    if (addr - s->addr >= PFR_KSYM_MAX_SPAN)
        return NULL; /* past the end of the last function of a region */
    return s;
}

size_t pfr_sym_kallsyms_bytes(const struct pfr_sym_kallsyms *k)
{
    return k->cap * sizeof(struct pfr_sym_ksym) + k->ntop * sizeof(*k->top) +
           pfr_sym_strpool_bytes(&k->names);
}

void pfr_sym_kallsyms_free(struct pfr_sym_kallsyms *k)
{
    free(k->v);
    free(k->top);
    pfr_sym_strpool_free(&k->names);
    memset(k, 0, sizeof(*k));
}
