#include "sym_strpool.h"

#include <stdlib.h>
#include <string.h>

static int reserve(struct pfr_sym_strpool *p, size_t extra)
{
    if (p->len + extra <= p->cap)
        return 0;
    size_t ncap = p->cap ? p->cap : 256;
    while (ncap < p->len + extra)
        ncap *= 2;
    char *nb = realloc(p->buf, ncap);
    if (!nb)
        return -1;
    p->buf = nb;
    p->cap = ncap;
    return 0;
}

uint32_t pfr_sym_strpool_add(struct pfr_sym_strpool *p, const char *s, size_t n)
{
    if (!p->buf) {
        if (reserve(p, 1))
            return PFR_STR_NONE;
        p->buf[0] = '\0';
        p->len = 1;
    }
    if (n == 0)
        return 0;
    if (p->len + n + 1 >= PFR_STR_NONE || reserve(p, n + 1))
        return PFR_STR_NONE;
    uint32_t off = (uint32_t)p->len;
    memcpy(p->buf + off, s, n);
    p->buf[off + n] = '\0';
    p->len += n + 1;
    return off;
}

uint32_t pfr_sym_strpool_intern(struct pfr_sym_strpool *p, const char *s, size_t n)
{
    uint64_t h1 = pfr_sym_hash(s, n, 0), h2 = n;
    uint64_t off;
    if (pfr_sym_hmap_get(&p->intern, h1, h2, &off)) {
        /* a 64-bit collision between different strings is possible in theory; check */
        const char *have = pfr_sym_strpool_get(p, (uint32_t)off);
        if (memcmp(have, s, n) == 0 && have[n] == '\0')
            return (uint32_t)off;
        return pfr_sym_strpool_add(p, s, n);
    }
    uint32_t o = pfr_sym_strpool_add(p, s, n);
    if (o != PFR_STR_NONE && pfr_sym_hmap_put(&p->intern, h1, h2, o) != 0)
        return o; /* still a valid string, just not shared */
    return o;
}

void pfr_sym_strpool_forget_interned(struct pfr_sym_strpool *p)
{
    pfr_sym_hmap_free(&p->intern);
}

void pfr_sym_strpool_shrink(struct pfr_sym_strpool *p)
{
    if (!p->buf || p->len == p->cap)
        return;
    char *nb = realloc(p->buf, p->len);
    if (nb) {
        p->buf = nb;
        p->cap = p->len;
    }
}

size_t pfr_sym_strpool_bytes(const struct pfr_sym_strpool *p)
{
    return p->cap + pfr_sym_hmap_bytes(&p->intern);
}

void pfr_sym_strpool_free(struct pfr_sym_strpool *p)
{
    free(p->buf);
    pfr_sym_hmap_free(&p->intern);
    memset(p, 0, sizeof(*p));
}
