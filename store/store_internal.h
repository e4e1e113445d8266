/* Internals shared by the store's files (not a public API). */
#ifndef PFR_STORE_INTERNAL_H
#define PFR_STORE_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "pfr_store.h"
#include "store_codec.h"
#include "store_space.h"

#define PFR_STORE_SCHEMA_VERSION 2
#define PFR_STORE_APP_ID         0x70667221 /* "pfr!" in the SQLite header: our files, not others' */

/* A stream row as readers see it. */
struct rstream {
    int64_t id;
    const char *service;
    pfr_kv *labels;
    size_t nlabels;
    const char **types, **units;
    size_t ntypes;
    bool bad; /* the row did not parse: its chunks are corrupt */
    char *mem;
};

/* A decoded dictionary chain in the handle's cache: the base layer and the layers applied on top
 * so far, with the table sizes as of each layer. */
struct chain {
    int64_t base_id, stream_id;
    struct tabs t;
    int64_t *layer_id; /* increasing */
    uint32_t (*layer_n)[T_N];
    size_t nlayers, cap_layers, cap_layer_n;
    int64_t bad_from; /* 0, or the first layer that failed: it and later ones are corrupt */
    size_t bytes;
    uint64_t stamp; /* last use, for LRU */
};

struct writer;

enum pfr_store_stmt {
    ST_BEGIN,
    ST_BEGIN_IMM,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_CHUNK_DATA,
    ST_CHUNK_EXISTS,
    ST_LAYERS,
    ST_STREAMS_NEW,
    ST_FIRST_CHUNK,
    ST_LAST_CHUNK,
    ST_CHUNK_SEQ,
    ST_META_GET,
    ST_N
};

struct pfr_store {
    sqlite3 *db;
    char *path, *cursor_dir;
    bool read_only;
    uint64_t max_bytes;
    uint64_t wal_budget; /* bytes of the cap left to the WAL */
    int busy_ms;
    uint32_t page_size;
    uint64_t corrupt; /* corrupt chunks seen by this handle's scans */
    sqlite3_stmt *st[ST_N];

    struct rstream *streams; /* sorted by id */
    size_t nstreams, cap_streams;
    int64_t streams_max_id;

    struct chain **chains;
    size_t nchains, cap_chains, chain_bytes;
    uint64_t chain_max; /* chain_bytes kept (pfr_store_opts.cache_bytes) */
    uint64_t chain_clock;

    pfr_buf raw; /* decompressed row scratch */
    struct writer *w;
    struct store_space space; /* disk space: the reserve, the spare file (store_space.c) */
};

/* Fill err with msg and SQLite's message; returns e. */
int pfr_store_fail(pfr_store *s, int e, char *err, size_t errlen, const char *msg);
int pfr_store_exec(pfr_store *s, const char *sql);
/* A cached prepared statement, reset and with bindings cleared. */
sqlite3_stmt *pfr_store_stmt(pfr_store *s, enum pfr_store_stmt which);
sqlite3_stmt *pfr_store_prepare(pfr_store *s, const char *sql);
int pfr_store_step_done(sqlite3_stmt *st);
/* A read transaction by the kept BEGIN and COMMIT statements (no parse each time). */
int pfr_store_begin_read(pfr_store *s);
void pfr_store_end_read(pfr_store *s);

/* Streams: refresh the cache with rows added since the last call. */
int pfr_store_streams_refresh(pfr_store *s);
const struct rstream *pfr_store_stream_get(pfr_store *s, int64_t id);
/* Canonical encodings of a stream's identity and columns. */
int pfr_store_stream_encode(const char *service, const pfr_kv *labels, size_t nlabels,
                            const pfr_profile *p, pfr_buf *key, pfr_buf *lab, pfr_buf *types);
bool pfr_store_stream_matches(const struct rstream *r, const pfr_store_filter *f);

/* The dictionary chain base_id decoded at least up to layer layer_id, from the cache or the
 * database (within the caller's read transaction); n gets the table sizes as of that layer.
 * NULL with *corrupt set when a layer is missing, fails its checksum or does not decode; NULL
 * with *err < 0 on other errors. Valid until the next call. */
const struct chain *pfr_store_chain_get(pfr_store *s, int64_t base_id, int64_t layer_id,
                                        int64_t stream_id, uint32_t n[T_N], bool *corrupt,
                                        int *err);
void pfr_store_chain_cache_clear(pfr_store *s);

/* Totals blob: ntypes zigzag varints. */
int pfr_store_totals_decode(const void *blob, size_t len, size_t ntypes, int64_t *out);
void pfr_store_totals_encode(pfr_buf *b, const int64_t *totals, size_t ntypes);

/* Verify and decompress a chunk row into s->raw. */
int pfr_store_chunk_row_unpack(pfr_store *s, const uint8_t *blob, size_t len, int64_t stream_id,
                               int64_t base_id, int64_t dict_id, int64_t start_ns, int64_t end_ns,
                               uint32_t crc);

/* A decoded chunk (against dictionary tables d) as a pfr_profile with the stream's sample types;
 * samples whose labels fail f's sample label filter are dropped. *out is the caller's. */
struct build_scratch {
    uint32_t *locmap; /* chunk-space location -> profile location + 1 */
    uint8_t *lsok;    /* label set: 0 unknown, 1 keep, 2 drop */
    size_t cap_loc, cap_ls;
    uint32_t *stack;
    size_t cap_stack;
    pfr_line *lines;
    size_t cap_lines;
    pfr_label *labels;
    size_t cap_labels;
};
int pfr_store_build_profile(const struct rstream *r, const struct tabs *d, const struct dchunk *c,
                            const pfr_store_filter *f, struct build_scratch *b, pfr_profile **out);
void pfr_store_build_scratch_free(struct build_scratch *b);
/* Call cb with a decoded chunk (against dictionary tables d of chain dict) as samples
 * (pfr_store_scan_samples); samples whose labels fail f's filter are left out. */
int pfr_store_samples_call(const struct tabs *d, int64_t dict, const struct dchunk *c,
                           const pfr_store_filter *f, struct build_scratch *b,
                           const pfr_chunk_meta *m, pfr_samples_cb cb, void *ctx);

/* Writer side. */
void pfr_store_writer_free(struct writer *w);
int pfr_store_meta_add(pfr_store *s, const char *key, int64_t delta);
/* Set a meta row (created if missing). */
int pfr_store_meta_set(pfr_store *s, const char *key, int64_t value);

/* Cursors. */
int pfr_store_cursors_min(pfr_store *s, int64_t *min_cursor, bool *any);

/* Migrations: one function per step, from version v to v + 1. */
int pfr_store_migrate(pfr_store *s, int from, char *err, size_t errlen);

#endif
