/*
 * The byte formats of the store's rows (see docs/store.md).
 *
 A stream's dictionary holds five tables: strings, functions (name, file), locations
 * (address, module, lines), stacks (location lists, leaf first) and sample label sets. It is
 * stored as a chain of layer rows (a base, then layers that append entries). A chunk row
 * references one layer (the dictionary as of that layer) and may carry a delta (entries the
 * dictionary lacks; their indices continue after the dictionary's counts) and its samples as
 * columns: stack indices (sorted, delta-coded), label-set indices, and per sample type a common
 * divisor and the quotients. Integers are LEB128 varints (signed ones zigzag'd).
 *
 * Stored blobs are [codec byte][varint raw length][data], codec 0 = raw, 1 = LZ4 block. Every
 * decoder here takes untrusted bytes: counts are bounded by the bytes left, indices by the table
 * sizes, and any violation returns -EBADMSG.
 *
 * In memory, each table is a ktab whose keys are the native records below.
 */
#ifndef PFR_STORE_CODEC_H
#define PFR_STORE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store_util.h"

enum { T_STR, T_FUNC, T_LOC, T_STACK, T_LSET, T_N };

#define DICT_VERSION  1
#define CHUNK_VERSION 1
#define BLOB_RAW      0
#define BLOB_LZ4      1
/* Largest decompressed row we accept (a realistic chunk is ~10 KB, a dictionary ~1 MB). */
#define PFR_STORE_MAX_RAW (256u << 20)
#define LABEL_NUM         UINT32_MAX /* nlabel.str of a numeric label */

/* Native records (the keys of the tables). Locations are an nloc followed by nlines nline;
 * stacks are uint32_t location indices; label sets are nlabel arrays sorted by bytes. */
struct nfunc {
    uint32_t name, file;
};
struct nloc {
    uint64_t addr;
    uint32_t module, nlines;
};
struct nline {
    uint32_t func, pad;
    int64_t line;
};
struct nlabel {
    uint32_t key, str; /* str == LABEL_NUM: numeric */
    int64_t num;
    uint32_t unit, pad;
};

struct tabs {
    struct ktab t[T_N];
};
void pfr_st_tabs_free(struct tabs *t);
void pfr_st_tabs_reset(struct tabs *t);
size_t pfr_st_tabs_bytes(const struct tabs *t);

/* Sections of every table: entries from[k] and above (from NULL: all). */
void pfr_st_enc_tabs(pfr_buf *b, const struct tabs *t, const uint32_t *from);
/* Decode the five sections into t (reset first). References may point below base[k] (into the
 * dictionary) or to entries decoded here (base[k] + i). */
int pfr_st_dec_tabs(struct srd *r, const uint32_t base[T_N], struct tabs *t, pfr_buf *scratch);

/* A dictionary layer: version, then the entries from[k] and above of each table. A stream's
 * dictionary is a chain of layers, the base first; each layer appends to its parent's tables. */
void pfr_st_layer_encode(pfr_buf *raw, const struct tabs *t, const uint32_t from[T_N]);
/* Append a layer's entries to t (references may point to any entry before them). On error t is
 * left as it was. */
int pfr_st_layer_decode(const uint8_t *raw, size_t len, struct tabs *t, pfr_buf *scratch);

/* A chunk's samples and header, as encoded (indices in chunk space: dictionary + delta). */
struct chunk_body {
    int64_t time_nanos, duration, period;
    uint32_t period_type, period_unit; /* string indices */
    uint32_t ntypes;
    size_t nsamples;
    const uint32_t *stack, *lset; /* stack sorted ascending, then lset */
    const int64_t *values;        /* nsamples * ntypes, row-major */
};
void pfr_st_chunk_encode(pfr_buf *raw, const uint32_t base[T_N], const struct tabs *delta,
                         const struct chunk_body *body);

/* A decoded chunk; buffers are reused from one decode to the next. */
struct dchunk {
    uint32_t base[T_N];
    struct tabs delta;
    int64_t time_nanos, duration, period;
    uint32_t period_type, period_unit;
    uint32_t ntypes;
    size_t nsamples;
    uint32_t *stack, *lset;
    int64_t *values;
    int64_t *totals; /* ntypes sums of values (wrapping) */
    size_t cap_s, cap_l, cap_v, cap_t;
    pfr_buf scratch;
};
void pfr_st_dchunk_free(struct dchunk *c);
/* Decode raw chunk bytes against a dictionary of dict_n entries; ntypes must match. */
int pfr_st_chunk_decode(const uint8_t *raw, size_t len, const uint32_t dict_n[T_N], uint32_t ntypes,
                        struct dchunk *out);

/* Sum values into totals the way the writer does (wrapping). */
void pfr_st_sum_totals(const int64_t *values, size_t nsamples, uint32_t ntypes, int64_t *totals);

/* LZ4 HC's state, kept by a writer from blob to blob: LZ4_compress_HC allocates and clears its
 * ~256 KB for every call, which cost more than compressing a ~1 KB chunk (and, under ASan, made
 * a test of 5,000 small chunks time out). NULL when out of memory. */
typedef struct pfr_st_hc pfr_st_hc;
pfr_st_hc *pfr_st_hc_new(void);
void pfr_st_hc_free(pfr_st_hc *hc);

/* Stored blobs: LZ4 HC with state hc (base layers and chunks: docs/store.md, "Compact rows"), or
 * LZ4's fast mode when hc is NULL. The same LZ4 block either way to a reader. */
int pfr_st_blob_pack(const uint8_t *raw, size_t len, pfr_st_hc *hc, pfr_buf *out);
/* Decompress into raw (reset first). -EBADMSG on any inconsistency. */
int pfr_st_blob_unpack(const uint8_t *blob, size_t len, pfr_buf *raw);

/* Checksum of a stored row: CRC-32 of the blob and then of the row's key fields. */
/* Totals blob: ntypes zigzag varints. */
int pfr_st_totals_decode(const void *blob, size_t len, size_t ntypes, int64_t *out);
void pfr_st_totals_encode(pfr_buf *b, const int64_t *totals, size_t ntypes);

uint32_t pfr_st_row_crc(const uint8_t *blob, size_t len, const int64_t *fields, size_t nfields);

/* Accessors of entry i of kind k in a dictionary + delta pair (i < dict->t[k].n: dictionary). */
static inline const uint8_t *tabs2_key(const struct tabs *dict, const struct tabs *delta, int k,
                                       uint32_t i, size_t *len)
{
    if (i < dict->t[k].n)
        return ktab_key(&dict->t[k], i, len);
    return ktab_key(&delta->t[k], i - dict->t[k].n, len);
}

#endif
