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
 * "LastSeen > from" keeps finding the stack for every chunk until then.
 *
 * A batch is begin → add... → commit (the insert was stored) or discard (it was not). Encoding
 * the same chunks again after discard gives the same rows. A chunk comes as a decoded profile
 * (pfr_chenc_add) or as the ring's samples against its dictionary (pfr_chenc_add_samples, the
 * fast path: per dictionary, each stack's key and each location's strings are computed once).
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
    size_t max_stacks;         /* remembered stacks before the memory is cleared (default 1M) */
    enum pfr_ch_format format; /* of the request bodies: RowBinary (default) or Native */
} pfr_chenc_opts;

#define PFR_CHENC_SAMPLES_COLUMNS "ServiceName, Type, Start, End, Labels, StackHash, Value"
#define PFR_CHENC_STACKS_COLUMNS  "ServiceName, Hash, LastSeen, Stack"

int pfr_chenc_new(const pfr_chenc_opts *o, pfr_chenc **out);
void pfr_chenc_free(pfr_chenc *e);

/* Start a batch (the previous one must have been committed or discarded). */
void pfr_chenc_begin(pfr_chenc *e);
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
void pfr_chenc_commit(pfr_chenc *e);
/* Hand the open batch over, to send it while the next batch is built: its samples' request body
 * moves into *samples (whose old content is freed) and its stack rows into *stacks (rendered
 * when sent, pfr_chcols_render_stacks: the sink may leave rows out), the batch's stacks count as
 * written (as after pfr_chenc_commit) and the encoder is ready for begin. If the batch does not
 * arrive after all, call pfr_chenc_forget. 0 or -ENOMEM (nothing changed). */
int pfr_chenc_seal(pfr_chenc *e, pfr_buf *samples, pfr_chcols *stacks);
/* Forget which stacks were written: later batches write their stack rows again. */
void pfr_chenc_forget(pfr_chenc *e);
void pfr_chenc_discard(pfr_chenc *e);

#endif
