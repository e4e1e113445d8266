#include "goheap_memo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_hash.h"

int pfr_goheap_memo_get(const pfr_goheap_memo *m, uint64_t key, const pfr_goheap_mframe **fr,
                        size_t *n)
{
    const uint64_t *v = pfr_map_get(&m->index, key);
    if (!v)
        return 0;
    *fr = m->frames + (*v >> 8);
    *n = (size_t)(*v & 0xff);
    return 1;
}

static uint64_t str_hash(const char *s)
{
    return pfr_hash_fnv1a_str(PFR_HASH_FNV_OFFSET, s);
}

/* Offset of s in the pool, adding it if new; -ENOMEM. */
static int64_t intern(pfr_goheap_memo *m, const char *s)
{
    uint64_t h = str_hash(s);
    uint64_t *v = pfr_map_get(&m->strings, h);
    if (v && strcmp(m->pool + (*v - 1), s) == 0)
        return (int64_t)(*v - 1);
    size_t len = strlen(s) + 1;
    if (m->pool_len + len > UINT32_MAX)
        return -ENOMEM;
    if (m->pool_len + len > m->pool_cap) {
        size_t ncap = m->pool_cap ? m->pool_cap : 4096;
        while (ncap < m->pool_len + len)
            ncap *= 2;
        char *np = realloc(m->pool, ncap);
        if (!np)
            return -ENOMEM;
        m->pool = np;
        m->pool_cap = ncap;
    }
    size_t off = m->pool_len;
    memcpy(m->pool + off, s, len);
    m->pool_len += len;
    /* a hash collision keeps the first string indexed; the second is just stored */
    if (!v && pfr_map_put(&m->strings, h, off + 1) < 0)
        return -ENOMEM;
    return (int64_t)off;
}

int pfr_goheap_memo_put(pfr_goheap_memo *m, uint64_t key, const pfr_goheap_frame *fr, size_t n)
{
    if (n > PFR_GOHEAP_MEMO_MAX_INLINE)
        n = PFR_GOHEAP_MEMO_MAX_INLINE;
    if (m->nframes + n > (SIZE_MAX >> 9))
        return -ENOMEM;
    if (m->nframes + n > m->cap_frames) {
        size_t ncap = m->cap_frames ? m->cap_frames * 2 : 1024;
        while (ncap < m->nframes + n)
            ncap *= 2;
        pfr_goheap_mframe *nf = realloc(m->frames, ncap * sizeof(*nf));
        if (!nf)
            return -ENOMEM;
        m->frames = nf;
        m->cap_frames = ncap;
    }
    size_t first = m->nframes;
    for (size_t i = 0; i < n; i++) {
        int64_t fo = intern(m, fr[i].function ? fr[i].function : "");
        int64_t fi = intern(m, fr[i].file ? fr[i].file : "");
        if (fo < 0 || fi < 0)
            return -ENOMEM;
        m->frames[first + i] = (pfr_goheap_mframe){(uint32_t)fo, (uint32_t)fi, fr[i].line};
    }
    if (pfr_map_put(&m->index, key, ((uint64_t)first << 8) | n) < 0)
        return -ENOMEM;
    m->nframes += n;
    return 0;
}

size_t pfr_goheap_memo_entries(const pfr_goheap_memo *m)
{
    return m->index.n;
}

void pfr_goheap_memo_clear(pfr_goheap_memo *m)
{
    pfr_map_clear(&m->index);
    pfr_map_clear(&m->strings);
    m->nframes = 0;
    m->pool_len = 0;
}

void pfr_goheap_memo_free(pfr_goheap_memo *m)
{
    pfr_map_free(&m->index);
    pfr_map_free(&m->strings);
    free(m->frames);
    free(m->pool);
    memset(m, 0, sizeof(*m));
}
