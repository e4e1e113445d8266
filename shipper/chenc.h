/* chenc: turns ring chunks into rows of Coroot's ClickHouse tables (request bodies in
 * RowBinary or Native, see chcols.h):
 *   profiling_samples (ServiceName, Type, Start, End, Labels, StackHash, Value)
 *   profiling_stacks  (ServiceName, Hash, LastSeen, Stack)
 * One sample row per (chunk, sample type, distinct stack): samples of a chunk that differ only
 * by their labels (pid, comm) are summed, which Coroot's reader (sum by StackHash) cannot tell
 * apart. Stack strings are "<function> <file>:<line>", leaf first, one per pprof Line;
 * StackHash is FNV-1a 64 over the strings concatenated.
 *
 * Stacks repeat from chunk to chunk, so an encoder remembers (per service) the stacks it has
 * written and their LastSeen: a stack row is written again only when a chunk ends after the
 * LastSeen already stored. A row's LastSeen is the chunk's end plus stack_refresh, so Coroot's
 * "LastSeen > from" keeps finding the stack for every chunk until then. What it remembers, and
 * its per-dictionary caches, fit in cache_bytes: stacks not met for a while are forgotten (their
 * rows are written again if they come back).
 *
 * A batch is begin → add... → commit (the insert was stored) or discard (it was not). Encoding
 * the same chunks again after discard gives the same rows. A chunk comes as a decoded profile
 * (pfr_chenc_add) or as the ring's samples against its dictionary (pfr_chenc_add_samples, the
 * fast path: per dictionary, each stack's key and each location's strings are computed once).
 *
 * Streamed, a batch's rows go in blocks: the sink takes each table's rows from pfr_chenc_cols
 * when they make a block and drops them (pfr_chcols_reset_samples / _stacks), so only a block of
 * each is held at a time; staged stacks stay staged until commit or discard.
 */
#ifndef PFR_SHIP_CHENC_H
#define PFR_SHIP_CHENC_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "chcols.h"
#include "pfr_profile.h"
#include "pfr_store.h"

typedef struct pfr_chenc pfr_chenc;

typedef struct pfr_chenc_opts {
    int64_t stack_refresh_ns;  /* default 1 h */
    uint64_t cache_bytes;      /* remembered stacks and dictionary caches (default 64M) */
    enum pfr_ch_format format; /* of the request bodies: RowBinary (default) or Native */
} pfr_chenc_opts;

#define PFR_CHENC_SAMPLES_COLUMNS "ServiceName, Type, Start, End, Labels, StackHash, Value"
#define PFR_CHENC_STACKS_COLUMNS  "ServiceName, Hash, LastSeen, Stack"

int pfr_chenc_new(const pfr_chenc_opts *o, pfr_chenc **out);
void pfr_chenc_free(pfr_chenc *e);

/* Start a batch (the previous one must have been committed or discarded). */
void pfr_chenc_begin(pfr_chenc *e);
/* The open batch's rows not taken away yet (owned by the encoder). */
pfr_chcols *pfr_chenc_cols(pfr_chenc *e);
/* Append the rows of one chunk. 0, -ENOMEM, or -EINVAL (no service). */
int pfr_chenc_add(pfr_chenc *e, const pfr_chunk_meta *m, const pfr_profile *p);
/* The same rows from a chunk's samples as pfr_store_scan_samples hands them (v valid during the
 * call only). The encoder keeps, per dictionary, each stack's content key, so a stack's frames
 * are read once per dictionary, not once per chunk. Mixing both add functions on one encoder is
 * fine: both key stacks alike. */
int pfr_chenc_add_samples(pfr_chenc *e, const pfr_chunk_meta *m, const pfr_chunk_samples *v);
/* The open batch's request bodies (rendered on first call after an add; oom set on -ENOMEM). */
const pfr_buf *pfr_chenc_samples(pfr_chenc *e);
const pfr_buf *pfr_chenc_stacks(pfr_chenc *e);
/* Request bytes of the open batch, estimated (cheap: for batch limits). */
uint64_t pfr_chenc_bytes(const pfr_chenc *e);
uint64_t pfr_chenc_sample_rows(const pfr_chenc *e);
uint64_t pfr_chenc_stack_rows(const pfr_chenc *e);
/* The stack row tagged tag (pfr_strow.tag) is left out: ClickHouse holds the stack with
 * last_seen, which is what counts as written for it at commit (when earlier than the row's). */
void pfr_chenc_stored(pfr_chenc *e, uint32_t tag, int64_t last_seen);
/* The batch's stack rows were stored: they count as written. */
void pfr_chenc_commit(pfr_chenc *e);
/* They were not: the rows are forgotten (and made again if the chunks are added again). */
void pfr_chenc_discard(pfr_chenc *e);

#endif
