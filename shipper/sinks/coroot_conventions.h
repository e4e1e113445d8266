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
 * unit is a system service (pfr_system_service.h). ship = all: every chunk. */
bool pfr_coroot_ships(const pfr_sink_conf *conf, const pfr_chunk_meta *m);

/* Rewrite a raw (not gzip'd) pprof body so time_nanos = time_ns and duration_nanos = dur_ns:
 * every other top-level field is copied as is. The result is gzip'd when gzip is set.
 * *out is malloc'ed (caller frees). -EBADMSG if raw is not a protobuf message, -ENOMEM. */
int pfr_pprof_retime(const uint8_t *raw, size_t len, int64_t time_ns, int64_t dur_ns, bool gzip,
                     int level, uint8_t **out, size_t *out_len);

#endif
