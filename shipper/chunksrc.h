/* chunksrc: the chunks of one batch, as a sink reads them: again from the ring at every attempt,
 * one at a time, so that no sink holds a batch's rows or request bodies, only what it is
 * sending. The engine fills it from a metadata-only look at the ring (ids, service names, stored
 * sizes); a sink reads chunk i as ring samples or as a decoded profile, in any order. A chunk
 * that is gone when read (evicted since) or cannot be read (corrupt) is skipped and noted.
 *
 * Errors: 0 or a negative errno. The source owns its arrays; the store is not owned.
 */
#ifndef PFR_SHIP_CHUNKSRC_H
#define PFR_SHIP_CHUNKSRC_H

#include <stddef.h>
#include <stdint.h>

#include "pfr_buf.h"
#include "pfr_store.h"

/* What the last read of a chunk found. */
enum pfr_chunk_state {
    PFR_CHUNK_UNREAD = 0,
    PFR_CHUNK_READ,    /* the callback got it */
    PFR_CHUNK_CORRUPT, /* the ring skipped it as corrupt */
    PFR_CHUNK_GONE,    /* no longer in the ring */
};

typedef struct pfr_chunksrc {
    pfr_store *store;      /* not owned */
    int64_t *ids;          /* ascending */
    uint32_t *svc;         /* chunk i's service name: names.data + svc[i] */
    uint8_t *state;        /* enum pfr_chunk_state per chunk */
    size_t n, cap;         /* chunks, room */
    pfr_buf names;         /* service names, NUL-terminated */
    uint64_t stored_bytes; /* the chunks' stored size in the ring */
} pfr_chunksrc;

/* Append a chunk (ids ascending) from its metadata. 0 or -ENOMEM. */
int pfr_chunksrc_add(pfr_chunksrc *s, const pfr_chunk_meta *m);
/* Forget the chunks, keep the memory. */
void pfr_chunksrc_reset(pfr_chunksrc *s);
void pfr_chunksrc_free(pfr_chunksrc *s);

/* Chunk i's service name as the ring holds it ("" if none). */
const char *pfr_chunksrc_service(const pfr_chunksrc *s, size_t i);

/* Read chunk i: cb gets it once, unless it is gone or corrupt (its state says which). Returns 0,
 * cb's non-zero return, or a negative errno (the ring failed). */
int pfr_chunksrc_read_samples(pfr_chunksrc *s, size_t i, pfr_samples_cb cb, void *ctx);
int pfr_chunksrc_read_profile(pfr_chunksrc *s, size_t i, pfr_chunk_cb cb, void *ctx);

/* Chunks whose last read found st. */
size_t pfr_chunksrc_count(const pfr_chunksrc *s, enum pfr_chunk_state st);
/* Mark every chunk unread (before an attempt). */
void pfr_chunksrc_rewind(pfr_chunksrc *s);

#endif
