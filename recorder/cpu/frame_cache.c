/* Cross-interval cache of symbolized frames. */
#include "frame_cache.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_hash.h"

/* An interned string: a chain of them per hash value, with its length and hash for the
 * profiles (pfr_frame_cache_str). */
typedef struct istr {
    struct istr *next;
    uint64_t hash;
    size_t len;
    char s[];
} istr;

/* An entry: n consecutive frames starting at first. Stored in the per-pid map as
 * first << 8 | n. */
#define MAX_RUN 255

void pfr_frame_cache_init(pfr_frame_cache *c, size_t max_bytes)
{
    memset(c, 0, sizeof(*c));
    c->max_bytes = max_bytes;
}

static void drop_pids(pfr_frame_cache *c)
{
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&c->by_pid, &pos, &k, &v)) {
        pfr_map *m = (pfr_map *)(uintptr_t)v;
        pfr_map_free(m);
        free(m);
    }
    pfr_map_free(&c->by_pid);
}

static void drop_strings(pfr_frame_cache *c)
{
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&c->strings, &pos, &k, &v)) {
        istr *s = (istr *)(uintptr_t)v;
        while (s) {
            istr *n = s->next;
            free(s);
            s = n;
        }
    }
    pfr_map_free(&c->strings);
}

void pfr_frame_cache_clear(pfr_frame_cache *c)
{
    drop_pids(c);
    drop_strings(c);
    c->nframes = 0;
    c->bytes = 0;
    c->resets++;
}

void pfr_frame_cache_free(pfr_frame_cache *c)
{
    pfr_frame_cache_clear(c);
    free(c->frames);
    memset(c, 0, sizeof(*c));
}

static const char *intern(pfr_frame_cache *c, const char *s)
{
    if (!s || !s[0])
        return ""; /* not interned: never empty */
    size_t len = strlen(s);
    uint64_t h = pfr_hash_bytes(s, len);
    uint64_t *v = pfr_map_get(&c->strings, h);
    istr *head = v ? (istr *)(uintptr_t)*v : NULL;
    for (istr *i = head; i; i = i->next)
        if (i->len == len && !memcmp(i->s, s, len))
            return i->s;
    istr *n = malloc(sizeof(*n) + len + 1);
    if (!n)
        return NULL;
    memcpy(n->s, s, len + 1);
    n->hash = h;
    n->len = len;
    n->next = head;
    if (pfr_map_put(&c->strings, h, (uint64_t)(uintptr_t)n)) {
        free(n);
        return NULL;
    }
    c->bytes += sizeof(*n) + len + 1 + 24;
    return n->s;
}

size_t pfr_frame_cache_get(pfr_frame_cache *c, uint64_t space, uint64_t addr,
                           const pfr_cached_frame **frames)
{
    uint64_t *pm = pfr_map_get(&c->by_pid, space);
    uint64_t *e = pm ? pfr_map_get((pfr_map *)(uintptr_t)*pm, addr) : NULL;
    if (!e) {
        c->misses++;
        return 0;
    }
    c->hits++;
    *frames = c->frames + (*e >> 8);
    return (size_t)(*e & 0xff);
}

int pfr_frame_cache_put(pfr_frame_cache *c, uint64_t space, uint64_t addr,
                        const pfr_cached_frame *frames, size_t n)
{
    if (n == 0 || n > MAX_RUN)
        return 0;
    if (c->max_bytes && c->bytes > c->max_bytes)
        pfr_frame_cache_clear(c);
    if (c->nframes + n > c->cap) {
        size_t cap = c->cap ? c->cap : 1024;
        while (cap < c->nframes + n)
            cap *= 2;
        pfr_cached_frame *f = realloc(c->frames, cap * sizeof(*f));
        if (!f)
            return -ENOMEM;
        c->bytes += (cap - c->cap) * sizeof(*f);
        c->frames = f;
        c->cap = cap;
    }
    uint64_t *pm = pfr_map_get(&c->by_pid, space);
    pfr_map *m;
    if (pm) {
        m = (pfr_map *)(uintptr_t)*pm;
    } else {
        m = calloc(1, sizeof(*m));
        if (!m || pfr_map_put(&c->by_pid, space, (uint64_t)(uintptr_t)m)) {
            free(m);
            return -ENOMEM;
        }
    }
    size_t first = c->nframes;
    for (size_t i = 0; i < n; i++) {
        pfr_cached_frame f = {
            .function = intern(c, frames[i].function),
            .file = intern(c, frames[i].file),
            .module = intern(c, frames[i].module),
            .line = frames[i].line,
        };
        if (!f.function || !f.file || !f.module)
            return -ENOMEM;
        c->frames[first + i] = f;
    }
    size_t before = m->cap;
    if (pfr_map_put(m, addr, ((uint64_t)first << 8) | n))
        return -ENOMEM;
    c->nframes += n;
    c->bytes += (m->cap - before) * 17;
    return 0;
}

void pfr_frame_cache_str(const char *s, size_t *len, uint64_t *hash)
{
    if (!s[0]) {
        *len = 0;
        *hash = pfr_hash_bytes("", 0);
        return;
    }
    const istr *i = (const istr *)(const void *)(s - offsetof(istr, s));
    *len = i->len;
    *hash = i->hash;
}

void pfr_frame_cache_forget(pfr_frame_cache *c, uint32_t tgid)
{
    /* the frames array is append-only: their slots are reclaimed at the next clear */
    uint64_t *pm = pfr_map_get(&c->by_pid, tgid);
    if (!pm)
        return;
    pfr_map *m = (pfr_map *)(uintptr_t)*pm;
    c->bytes -= m->cap * 17 < c->bytes ? m->cap * 17 : 0;
    pfr_map_free(m);
    free(m);
    pfr_map_del(&c->by_pid, tgid);
}
