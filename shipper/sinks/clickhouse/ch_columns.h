/* ch_columns: the rows of one ClickHouse batch, kept by column, and their request bodies.
 *
 * Sample rows come in groups that share everything but StackHash and Value (one chunk, one
 * sample type): a group stores ServiceName, Type, Start, End and Labels once. Stack rows keep
 * their strings back to back. Bodies are rendered on demand, as one Native block per table
 * (ClickHouse parses columns in bulk: about a third of RowBinary's cost, measured in
 * docs/benchmarks.md) or as RowBinary rows; both give the same rows.
 */
#ifndef PFR_SHIP_CH_COLUMNS_H
#define PFR_SHIP_CH_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

#include "pfr_buf.h"
#include "pfr_store.h"

/* A ClickHouse String (RowBinary and Native): its length as a varint, then its n bytes. */
static inline void pfr_ch_string(pfr_buf *b, const char *s, size_t n)
{
    pfr_buf_uvarint(b, n);
    pfr_buf_put(b, s, n);
}

enum pfr_ch_format { PFR_CH_ROWBINARY = 0, PFR_CH_NATIVE = 1 };

/* The dictionary of a LowCardinality(String) column: key 0 is "", as ClickHouse writes it. */
struct pfr_lcdict {
    pfr_buf arena; /* keys, NUL-terminated, back to back */
    uint32_t *off; /* key i starts at arena.data + off[i] */
    uint32_t *tab; /* hash index: key index + 1, 0 = empty */
    size_t n, cap, mask;
};

struct pfr_sgroup {
    uint32_t svc, type; /* dictionary indices */
    uint32_t lab, nlab; /* its labels: lab .. lab + nlab - 1 */
    int64_t start, end;
    size_t row, nrows; /* its rows: row .. row + nrows - 1 */
};

struct pfr_strow {
    uint32_t svc;
    uint32_t nstr;
    uint64_t hash;
    int64_t last_seen;
    size_t str, str_len; /* its strings in stkstr (ClickHouse Strings back to back) */
    uint32_t tag;        /* what its maker knows it by (ch_rows: its stack's entry + 1; 0 = none) */
};

typedef struct pfr_ch_columns {
    struct pfr_lcdict svcs, types, labkeys;
    struct pfr_sgroup *groups;
    size_t ngroups, cap_groups;
    uint32_t *labkey; /* per label: key index */
    size_t *labval;   /* per label: start of its value (a ClickHouse String) in labvals */
    size_t nlabels, cap_labkey, cap_labval;
    pfr_buf labvals;
    uint64_t *hashes;
    int64_t *values;
    size_t nrows, cap_hashes, cap_values;
    struct pfr_strow *strows;
    size_t nstrows, cap_strows;
    pfr_buf stkstr;
    uint64_t est_samples, est_stacks; /* request bytes of each table, estimated as rows come */
    int err;                          /* sticky: -ENOMEM */
} pfr_ch_columns;

void pfr_ch_columns_free(pfr_ch_columns *c);
/* Forget all rows, keep the memory. */
void pfr_ch_columns_reset(pfr_ch_columns *c);
/* Forget the sample rows, or the stack rows, alone (the service names go with the last rows). */
void pfr_ch_columns_reset_samples(pfr_ch_columns *c);
void pfr_ch_columns_reset_stacks(pfr_ch_columns *c);

/* Append a chunk's labels (returns the index of the first, for its groups). */
uint32_t pfr_ch_columns_labels(pfr_ch_columns *c, const pfr_kv *labels, size_t n);
/* Append a group of nrows sample rows; their hashes and values are filled by the caller
 * (*hashes, *values: nrows slots each). 0 or -ENOMEM. */
int pfr_ch_columns_group(pfr_ch_columns *c, const char *service, const char *type, int64_t start,
                         int64_t end, uint32_t lab, uint32_t nlab, size_t nrows, uint64_t **hashes,
                         int64_t **values);
/* Append a stack row; its strings follow with pfr_ch_columns_stack_str. */
int pfr_ch_columns_stack(pfr_ch_columns *c, const char *service, uint64_t hash, int64_t last_seen);
void pfr_ch_columns_stack_str(pfr_ch_columns *c, const char *s, size_t n);

/* Or n strings at once, already ClickHouse Strings back to back (len bytes). */
void pfr_ch_columns_stack_enc(pfr_ch_columns *c, const void *enc, size_t len, size_t n);

size_t pfr_ch_columns_sample_rows(const pfr_ch_columns *c);
size_t pfr_ch_columns_stack_rows(const pfr_ch_columns *c);
/* Service name number i (a row's svc). */
const char *pfr_ch_columns_service(const pfr_ch_columns *c, uint32_t i);

/* The request bodies (out reset first). 0 or -ENOMEM. No rows: an empty body.
 * skip (NULL = none): one flag per stack row as added; a row whose flag is set is left out. */
int pfr_ch_columns_render_samples(const pfr_ch_columns *c, enum pfr_ch_format f, pfr_buf *out);
int pfr_ch_columns_render_stacks(const pfr_ch_columns *c, enum pfr_ch_format f, const uint8_t *skip,
                                 pfr_buf *out);

#endif
