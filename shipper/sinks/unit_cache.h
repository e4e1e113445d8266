/*
 * unit_cache: systemd units' Type and TriggeredBy (pfr_systemd_unit.h) for the sinks' ship =
 * agent filter, read from the unit files once per unit and kept. Units change rarely (a
 * package installed, a unit edited, a timer enabled): once the cache is older than its ttl,
 * the next look-up drops every answer and the view of enabled timers, and reads again. A
 * root that cannot be opened answers every unit with that error until the next refresh.
 * One per sink; not thread-safe (the engine is single-threaded).
 */
#ifndef PFR_SHIP_UNIT_CACHE_H
#define PFR_SHIP_UNIT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "pfr_systemd_unit.h"

#define PFR_UNIT_CACHE_TTL_NS (5 * 60 * INT64_C(1000000000)) /* 5 minutes */
#define PFR_UNIT_CACHE_MAX    4096 /* units kept; one more empties the cache */

typedef struct pfr_unit_cache pfr_unit_cache;

/* A cache of the units under root ("/" on the host), nothing read yet. 0 or -ENOMEM. */
int pfr_unit_cache_new(const char *root, int64_t ttl_ns, pfr_unit_cache **out);
void pfr_unit_cache_free(pfr_unit_cache *c);

/* unit's properties as of now_ns (monotonic). @return 0, or the negative errno that reading it
 * (or opening the root) gave, the same until the next refresh (out zeroed: NOT_FOUND). *fresh:
 * whether this call read them (so a caller tells each answer once per refresh). */
int pfr_unit_cache_get(pfr_unit_cache *c, const char *unit, int64_t now_ns, pfr_systemd_props *out,
                       bool *fresh);

#endif
