/* ch_rows: turns ring chunks into rows of Coroot's ClickHouse tables (request bodies in
 * RowBinary or Native, see ch_columns.h):
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
 * (pfr_ch_rows_add) or as the ring's samples against its dictionary (pfr_ch_rows_add_samples, the
 * fast path: per dictionary, each stack's key and each location's strings are computed once).
 *
 * Streamed, a batch's rows go in blocks: the sink takes each table's rows from pfr_ch_rows_cols
 * when they make a block and drops them (pfr_ch_columns_reset_samples / _stacks), so only a block
 * of each is held at a time; staged stacks stay staged until commit or discard.
 */
#ifndef PFR_SHIP_CH_ROWS_H
#define PFR_SHIP_CH_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "pfr_buf.h"
#include "sinks/clickhouse/ch_columns.h"
#include "pfr_profile.h"
#include "pfr_store.h"

typedef struct pfr_ch_rows pfr_ch_rows;

typedef struct pfr_ch_rows_opts {
    int64_t stack_refresh_ns;  /* default 1 h */
    uint64_t cache_bytes;      /* remembered stacks and dictionary caches (default 64M) */
    enum pfr_ch_format format; /* of the request bodies: RowBinary (default) or Native */
} pfr_ch_rows_opts;

#define PFR_CHENC_SAMPLES_COLUMNS "ServiceName, Type, Start, End, Labels, StackHash, Value"
#define PFR_CHENC_STACKS_COLUMNS  "ServiceName, Hash, LastSeen, Stack"

int pfr_ch_rows_new(const pfr_ch_rows_opts *o, pfr_ch_rows **out);
void pfr_ch_rows_free(pfr_ch_rows *e);

/* Start a batch (the previous one must have been committed or discarded). */
void pfr_ch_rows_begin(pfr_ch_rows *e);
/* The open batch's rows not taken away yet (owned by the encoder). */
pfr_ch_columns *pfr_ch_rows_cols(pfr_ch_rows *e);
/* Append the rows of one chunk. 0, -ENOMEM, or -EINVAL (no service). */
int pfr_ch_rows_add(pfr_ch_rows *e, const pfr_chunk_meta *m, const pfr_profile *p);
/* The same rows from a chunk's samples as pfr_store_scan_samples hands them (v valid during the
 * call only). The encoder keeps, per dictionary, each stack's content key, so a stack's frames
 * are read once per dictionary, not once per chunk. Mixing both add functions on one encoder is
 * fine: both key stacks alike. */
int pfr_ch_rows_add_samples(pfr_ch_rows *e, const pfr_chunk_meta *m, const pfr_chunk_samples *v);
/* The open batch's request bodies (rendered on first call after an add; oom set on -ENOMEM). */
const pfr_buf *pfr_ch_rows_samples(pfr_ch_rows *e);
const pfr_buf *pfr_ch_rows_stacks(pfr_ch_rows *e);
/* Request bytes of the open batch, estimated (cheap: for batch limits). */
uint64_t pfr_ch_rows_bytes(const pfr_ch_rows *e);
uint64_t pfr_ch_rows_sample_rows(const pfr_ch_rows *e);
uint64_t pfr_ch_rows_stack_rows(const pfr_ch_rows *e);
/* The stack row tagged tag (pfr_strow.tag) is left out: ClickHouse holds the stack with
 * last_seen, which is what counts as written for it at commit (when earlier than the row's). */
void pfr_ch_rows_stored(pfr_ch_rows *e, uint32_t tag, int64_t last_seen);
/* The batch's stack rows were stored: they count as written. */
void pfr_ch_rows_commit(pfr_ch_rows *e);
/* They were not: the rows are forgotten (and made again if the chunks are added again). */
void pfr_ch_rows_discard(pfr_ch_rows *e);

#endif
