/* Answers kept for repeat views (reload, back, a shared link, flipping between a flame graph and
 * a comparison): a small LRU of API bodies. An answer is reused only for the same endpoint and
 * arguments, with absolute times only, and while the ring's files are unchanged (any append or
 * eviction changes the WAL's size or time), so it is always what the engine would answer now. */
#include "pfr_serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct entry {
    char *key;
    pfr_serve_response resp;
    uint64_t used; /* LRU clock */
} entry;

struct pfr_serve_cache {
    pthread_mutex_t mu;
    entry *v;
    size_t n, max_entries, bytes, max_bytes;
    uint64_t clock;
    uint64_t hits, misses;
};

pfr_serve_cache *pfr_serve_cache_new(size_t max_bytes, size_t max_entries)
{
    pfr_serve_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (!max_entries)
        max_entries = 1;
    c->v = calloc(max_entries, sizeof(*c->v));
    if (!c->v || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c->v);
        free(c);
        return NULL;
    }
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    return c;
}

static void drop(pfr_serve_cache *c, size_t i)
{
    c->bytes -= c->v[i].resp.len;
    free(c->v[i].key);
    pfr_serve_response_free(&c->v[i].resp);
    c->v[i] = c->v[--c->n];
}

void pfr_serve_cache_free(pfr_serve_cache *c)
{
    if (!c)
        return;
    while (c->n)
        drop(c, 0);
    pthread_mutex_destroy(&c->mu);
    free(c->v);
    free(c);
}

/* "1714564800", "1714564800.25", "@1714564800": a time that does not depend on now. */
static bool absolute_time(const char *s)
{
    if (*s == '@')
        s++;
    size_t digits = strspn(s, "0123456789");
    if (!digits)
        return false;
    s += digits;
    if (*s == '.')
        s += 1 + strspn(s + 1, "0123456789");
    return *s == '\0';
}

static bool is_time_arg(const char *k)
{
    return strcmp(k, "from") == 0 || strcmp(k, "to") == 0 || strcmp(k, "base_from") == 0 ||
           strcmp(k, "base_to") == 0;
}

static void file_state(FILE *f, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        fprintf(f, "%llu:%lld:%lld.%09ld|", (unsigned long long)st.st_ino, (long long)st.st_size,
                (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    else
        fputs("-|", f);
}

int pfr_serve_cache_key(const char *store_path, const char *path, const pfr_kv *args, size_t nargs,
                        char **out)
{
    *out = NULL;
    bool from = false, to = false;
    if (strcmp(path, "/api/ls") == 0) /* carries now_ns */
        return 0;
    for (size_t i = 0; i < nargs; i++) {
        if (!is_time_arg(args[i].key))
            continue;
        if (!absolute_time(args[i].value))
            return 0;
        from |= strcmp(args[i].key, "from") == 0;
        to |= strcmp(args[i].key, "to") == 0;
    }
    if (!from || !to) /* the defaults are relative to now */
        return 0;
    char *key = NULL, wal[4200];
    size_t len = 0;
    FILE *f = open_memstream(&key, &len);
    if (!f)
        return -ENOMEM;
    file_state(f, store_path);
    snprintf(wal, sizeof(wal), "%s-wal", store_path);
    file_state(f, wal);
    fprintf(f, "%s", path);
    for (size_t i = 0; i < nargs; i++) /* NUL cannot be in an argument: a safe separator */
        fprintf(f, "%c%s%c%s", 0, args[i].key, 0, args[i].value);
    if (fclose(f) != 0) {
        free(key);
        return -ENOMEM;
    }
    /* keys hold NULs: keep the length in front so comparisons use it */
    char *k = malloc(len + sizeof(size_t));
    if (!k) {
        free(key);
        return -ENOMEM;
    }
    memcpy(k, &len, sizeof(size_t));
    memcpy(k + sizeof(size_t), key, len);
    free(key);
    *out = k;
    return 0;
}

static size_t key_size(const char *k)
{
    size_t len;
    memcpy(&len, k, sizeof(len));
    return len + sizeof(len);
}

static ssize_t find(pfr_serve_cache *c, const char *key)
{
    size_t n = key_size(key);
    for (size_t i = 0; i < c->n; i++)
        if (key_size(c->v[i].key) == n && memcmp(c->v[i].key, key, n) == 0)
            return (ssize_t)i;
    return -1;
}

static int copy_response(const pfr_serve_response *src, pfr_serve_response *dst)
{
    *dst = *src;
    dst->body = malloc(src->len + 1);
    if (!dst->body)
        return -ENOMEM;
    memcpy(dst->body, src->body, src->len);
    dst->body[src->len] = '\0';
    return 0;
}

bool pfr_serve_cache_get(pfr_serve_cache *c, const char *key, pfr_serve_response *out)
{
    if (!c || !key)
        return false;
    pthread_mutex_lock(&c->mu);
    ssize_t i = find(c, key);
    bool hit = i >= 0 && copy_response(&c->v[i].resp, out) == 0;
    if (hit)
        c->v[i].used = ++c->clock;
    hit ? c->hits++ : c->misses++;
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void pfr_serve_cache_put(pfr_serve_cache *c, const char *key, const pfr_serve_response *r)
{
    if (!c || !key || r->status != 200 || !r->body || r->len > c->max_bytes / 2)
        return;
    size_t klen = key_size(key);
    entry e = {.key = malloc(klen)};
    if (!e.key || copy_response(r, &e.resp) < 0) {
        free(e.key);
        return;
    }
    memcpy(e.key, key, klen);
    pthread_mutex_lock(&c->mu);
    ssize_t old = find(c, key);
    if (old >= 0)
        drop(c, (size_t)old);
    while (c->n && (c->n == c->max_entries || c->bytes + e.resp.len > c->max_bytes)) {
        size_t lru = 0;
        for (size_t i = 1; i < c->n; i++)
            if (c->v[i].used < c->v[lru].used)
                lru = i;
        drop(c, lru);
    }
    e.used = ++c->clock;
    c->v[c->n++] = e;
    c->bytes += e.resp.len;
    pthread_mutex_unlock(&c->mu);
}

void pfr_serve_cache_stats(pfr_serve_cache *c, uint64_t *hits, uint64_t *misses)
{
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    pthread_mutex_unlock(&c->mu);
}
