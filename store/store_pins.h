/*
 * Pins (layer 4, internal; the public calls are in pfr_store.h): ranges of the ring kept from
 * eviction (and from roll-ups), within their own budget. Built on the floor (store_db.h) and the
 * dictionary layer's stream rows (store_dict.h), not on the handle, so the writer's eviction and
 * retention can both ask pfr_st_pins_protects. Layers and design: docs/store.md, "Pins".
 */
#ifndef PFR_STORE_PINS_H
#define PFR_STORE_PINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_store.h"
#include "store_db.h"
#include "store_dict.h"

/* A pin row. */
struct store_pin {
    int64_t id, from_ns, to_ns, created_ns;
    char *service; /* NULL: every service */
    pfr_kv *labels;
    size_t nlabels;
    char *reason, *origin;
    bool automatic; /* origin "trigger:*": the budget releases it before any manual pin */
    uint64_t bytes; /* filled by pfr_st_pins_bytes */
    char *mem;      /* owns the strings and labels above */
};

struct store_pins {
    struct store_pin *v; /* by id (oldest first) */
    size_t n, cap;
};

/* The pins table (within the caller's transaction), oldest first. */
int pfr_st_pins_load(struct store_db *d, struct store_pins *out);
void pfr_st_pins_free(struct store_pins *p);
/* Drop entry i (freeing it); the order of the others is kept. */
void pfr_st_pins_drop(struct store_pins *p, size_t i);

/* Whether a pin of p keeps the range [start_ns, end_ns) of stream r: a pin's range overlaps it
 * and r matches the pin's selection (its service, its labels all among r's). */
bool pfr_st_pins_protects(const struct store_pins *p, const struct rstream *r, int64_t start_ns,
                          int64_t end_ns);

/* The bytes of the chunks each pin keeps (p->v[i].bytes) and that all keep together (*total,
 * a chunk counted once), within the caller's read transaction. */
int pfr_st_pins_bytes(struct store_dict *dict, struct store_pins *p, uint64_t *total);

/* The pin the budget gives up first: the oldest automatic one, or with manual_too, the oldest
 * of any kind. -1 when there is none. */
long pfr_st_pins_victim(const struct store_pins *p, bool manual_too);

/* Check what a pin asks for (range, reason, origin, selection's syntax): 0 or -EINVAL with the
 * reason in err. */
int pfr_st_pins_validate(const pfr_pin_in *in, char *err, size_t errlen);

/* Rows, within the caller's write transaction. */
int pfr_st_pins_insert(struct store_db *d, const pfr_pin_in *in, int64_t created_ns, uint64_t bytes,
                       int64_t *id_out);
/* -ENOENT when there is no such pin. */
int pfr_st_pins_delete(struct store_db *d, int64_t id);
int pfr_st_pins_set_range(struct store_db *d, int64_t id, int64_t from_ns, int64_t to_ns,
                          uint64_t bytes);

#endif
