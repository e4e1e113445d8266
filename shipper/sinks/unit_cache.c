/* unit_cache: systemd units' properties, read once per refresh (unit_cache.h). */
#include "sinks/unit_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_hash.h"
#include "pfr_map.h"

struct entry {
    char unit[PFR_SYSTEMD_NAME_MAX];
    pfr_systemd_props props;
    int rc;
};

struct pfr_unit_cache {
    char *root;
    int64_t ttl_ns;
    int64_t read_ns; /* when the view was opened; the entries are not older */
    bool opened;     /* a view was tried since the last refresh */
    pfr_systemd *sd; /* NULL when the root could not be opened (open_rc) */
    int open_rc;
    pfr_map index; /* hash of a unit's name -> its entry + 1 */
    struct entry *v;
    size_t n, cap;
};

int pfr_unit_cache_new(const char *root, int64_t ttl_ns, pfr_unit_cache **out)
{
    *out = NULL;
    pfr_unit_cache *c = calloc(1, sizeof(*c));
    if (!c || !(c->root = strdup(root))) {
        free(c);
        return -ENOMEM;
    }
    c->ttl_ns = ttl_ns;
    *out = c;
    return 0;
}

/* Forget every answer and the view: the next look-up reads again. */
static void drop(pfr_unit_cache *c)
{
    pfr_systemd_close(c->sd);
    c->sd = NULL;
    c->opened = false;
    c->n = 0;
    pfr_map_clear(&c->index);
}

void pfr_unit_cache_free(pfr_unit_cache *c)
{
    if (!c)
        return;
    drop(c);
    pfr_map_free(&c->index);
    free(c->v);
    free(c->root);
    free(c);
}

static uint64_t key_of(const char *unit)
{
    return pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, unit, strlen(unit));
}

/* A new entry for unit, read now. NULL when out of memory. */
static struct entry *add(pfr_unit_cache *c, const char *unit)
{
    if (c->n == PFR_UNIT_CACHE_MAX) {
        c->n = 0; /* more units than a host runs: start over rather than grow */
        pfr_map_clear(&c->index);
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 32;
        struct entry *v = realloc(c->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        c->v = v;
        c->cap = cap;
    }
    struct entry *e = &c->v[c->n];
    snprintf(e->unit, sizeof(e->unit), "%s", unit);
    e->rc = c->sd ? pfr_systemd_unit_props(c->sd, unit, &e->props) : c->open_rc;
    if (!c->sd)
        memset(&e->props, 0, sizeof(e->props));
    /* two names of one hash: the later one is not indexed, read again each time */
    uint64_t *slot = NULL;
    if (pfr_map_intern(&c->index, key_of(unit), c->n + 1, &slot) < 0)
        return NULL;
    c->n++;
    return e;
}

int pfr_unit_cache_get(pfr_unit_cache *c, const char *unit, int64_t now_ns, pfr_systemd_props *out,
                       bool *fresh)
{
    *fresh = false;
    if (c->opened && now_ns - c->read_ns >= c->ttl_ns)
        drop(c);
    if (!c->opened) {
        c->open_rc = pfr_systemd_open(c->root, &c->sd);
        c->opened = true;
        c->read_ns = now_ns;
    }
    uint64_t *i = pfr_map_get(&c->index, key_of(unit));
    struct entry *e = i ? &c->v[*i - 1] : NULL;
    if (!e || strcmp(e->unit, unit)) {
        e = add(c, unit);
        if (!e) {
            memset(out, 0, sizeof(*out));
            return -ENOMEM;
        }
        *fresh = true;
    }
    *out = e->props;
    return e->rc;
}
