/* coroot_conventions: Coroot's conventions, shared by both sinks: the stack string of a frame, the
 * StackHash, and a pprof body whose time_nanos is the interval's end (Coroot reads End =
 * time_nanos, Start = End - duration_nanos, while pfr stores time_nanos = start). */
#ifndef PFR_SHIP_COROOT_CONVENTIONS_H
#define PFR_SHIP_COROOT_CONVENTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pfr_buf.h"
#include "pfr_hash.h" /* StackHash: pfr_hash_fnv1a from PFR_HASH_FNV_OFFSET */
#include "pfr_profile.h"
#include "pfr_store.h"
#include "sinks/unit_cache.h"

/* Whether Coroot keeps a frame: it drops lines without a function; pfr's model shows those as
 * a frame with neither function name nor file. */
static inline bool pfr_coroot_keeps(const pfr_frame *f)
{
    return f->function[0] || f->file[0];
}

/* Append "<function> <file>:<line>" (Coroot's stack string) to b. */
void pfr_coroot_frame(pfr_buf *b, const pfr_frame *f);

/* Whether a sink of conf sends chunk m (both kinds' ops.ships): with ship = agent, what Coroot's
 * node agent would send: a chunk with a Coroot container id (its container.id label; the
 * recorder sets it only then) and, with skip_system_services, not of a systemd service whose
 * unit is a system service (pfr_system_service.h): by its name's prefix, or by the Type and
 * TriggeredBy units reads from its unit files (units NULL: by name only). Each unit's answer
 * is logged once per refresh of units (debug; a unit that cannot be read: a warning, and it is
 * judged by its name). ship = all: every chunk. */
bool pfr_coroot_ships(const pfr_sink_conf *conf, pfr_unit_cache *units, const pfr_chunk_meta *m);

/* The unit cache a sink of conf needs for pfr_coroot_ships (its systemd_root, read again every
 * PFR_UNIT_CACHE_TTL_NS): NULL when it looks at no unit (ship = all, skip_system_services
 * off). 0 or -ENOMEM. */
int pfr_coroot_units_new(const pfr_sink_conf *conf, pfr_unit_cache **out);

/* Whether Coroot averages a profile type when it shows it (model/profile.go,
 * ProfileAggregationAvg: the in-use heap types and goroutines) instead of summing it. */
bool pfr_coroot_averaged(const char *type);

/* How far after the chunk's start its profile's Start goes, in ns (0 for a chunk with no averaged
 * type). Coroot divides an averaged type's sum over a range by count(distinct Start) /
 * count(distinct (container.id, namespace, pod)) of its rows (clickhouse/queries.go
 * qProfiles): the number of profiles per instance only when every instance's profiles have
 * Start times of their own. The agent stamps each process at its own moment; pfr cuts every
 * process's chunk at the same boundary, so N instances would count as 1/N profiles each and
 * show N times their memory. The shift, a hash of exactly that instance key, gives each
 * instance Start times of its own while End stays the interval's: in [1 ns, 1 s), below half
 * the chunk's length. Both kinds use it (Coroot: duration_nanos = End - Start). */
int64_t pfr_coroot_start_shift(const pfr_chunk_meta *m);

/* Rewrite a raw (not gzip'd) pprof body so time_nanos = time_ns and duration_nanos = dur_ns:
 * every other top-level field is copied as is. The result is gzip'd when gzip is set.
 * *out is malloc'ed (caller frees). -EBADMSG if raw is not a protobuf message, -ENOMEM. */
int pfr_pprof_retime(const uint8_t *raw, size_t len, int64_t time_ns, int64_t dur_ns, bool gzip,
                     int level, uint8_t **out, size_t *out_len);

#endif
