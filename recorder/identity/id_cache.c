/*
 * The resolver's cache: cgroup path -> entry, a chained hash table plus a recency list. When
 * full, the least recently used entries go first, except those queued for (or being worked on
 * by) the resolver's thread, which holds pointers to them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "id_internal.h"
#include "pfr_hash.h"

static uint64_t hash_str(const char *s)
{
    uint64_t h = pfr_hash_fnv1a_str(PFR_HASH_FNV_OFFSET, s);
    return h ^ (h >> 29);
}

int pfr_identity_cache_init(struct id_cache *c, size_t max)
{
    memset(c, 0, sizeof(*c));
    size_t nb = 64;
    while (nb < max * 2 && nb < ((size_t)1 << 30))
        nb *= 2;
    c->buckets = calloc(nb, sizeof(*c->buckets));
    if (!c->buckets)
        return -ENOMEM;
    c->nbuckets = nb;
    c->max = max;
    return 0;
}

static void entry_free(struct id_entry *e)
{
    free(e->key);
    free(e->container_id);
    free(e->service);
    free(e);
}

void pfr_identity_cache_free(struct id_cache *c)
{
    struct id_entry *e = c->head;
    while (e) {
        struct id_entry *next = e->next;
        entry_free(e);
        e = next;
    }
    free(c->buckets);
    memset(c, 0, sizeof(*c));
}

static void list_unlink(struct id_cache *c, struct id_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void list_push_front(struct id_cache *c, struct id_entry *e)
{
    e->next = c->head;
    e->prev = NULL;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

struct id_entry *pfr_identity_cache_get(struct id_cache *c, const char *key)
{
    uint64_t h = hash_str(key);
    for (struct id_entry *e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext) {
        if (e->hash == h && strcmp(e->key, key) == 0) {
            if (c->head != e) {
                list_unlink(c, e);
                list_push_front(c, e);
            }
            return e;
        }
    }
    return NULL;
}

static void remove_entry(struct id_cache *c, struct id_entry *e)
{
    struct id_entry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    list_unlink(c, e);
    c->n--;
    entry_free(e);
}

struct id_entry *pfr_identity_cache_add(struct id_cache *c, const char *key, uint64_t *evicted)
{
    /* from the least recently used end; queued entries stay (the cache may then run over) */
    for (struct id_entry *e = c->tail; e && c->n >= c->max;) {
        struct id_entry *prev = e->prev;
        if (!e->queued) {
            remove_entry(c, e);
            (*evicted)++;
        }
        e = prev;
    }
    struct id_entry *e = calloc(1, sizeof(*e));
    if (!e || !(e->key = strdup(key))) {
        free(e);
        return NULL;
    }
    e->hash = hash_str(key);
    struct id_entry **b = &c->buckets[e->hash & (c->nbuckets - 1)];
    e->hnext = *b;
    *b = e;
    list_push_front(c, e);
    c->n++;
    return e;
}

int pfr_identity_entry_set_ids(struct id_entry *e, const char *container_id, const char *service)
{
    free(e->container_id);
    free(e->service);
    e->container_id = e->service = NULL;
    if (!container_id)
        return 0;
    e->container_id = strdup(container_id);
    e->service = strdup(service);
    if (!e->container_id || !e->service) {
        free(e->container_id);
        free(e->service);
        e->container_id = e->service = NULL;
        return -ENOMEM;
    }
    return 0;
}
