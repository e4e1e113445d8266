/*
 * The store's dictionary layer (layer 2, internal): the stream rows and the decoded dictionary
 * chains a handle keeps, and the one chunk decoder every read goes through (scan, merge, check,
 * migration): a chunk row read, its checksum verified, decompressed and decoded against its
 * chain. Built on the floor (store_db.h) and the row formats (store_codec.h). Layers:
 * docs/store.md, "Layers".
 */
#ifndef PFR_STORE_DICT_H
#define PFR_STORE_DICT_H

#include <stdbool.h>
#include <stdint.h>

#include "pfr_store.h"
#include "store_codec.h"
#include "store_db.h"

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

/* A decoded dictionary chain in the cache: the base layer and the layers applied on top so far,
 * with the table sizes as of each layer. */
struct chain {
    int64_t base_id; /* its layers may be of several streams: those of one service and types
                        share it (schema 5, store_write.c, wstream_get) */
    struct tabs t;
    int64_t *layer_id; /* increasing */
    uint32_t (*layer_n)[T_N];
    size_t nlayers, cap_layers, cap_layer_n;
    int64_t bad_from; /* 0, or the first layer that failed: it and later ones are corrupt */
    size_t bytes;
    uint64_t stamp; /* last use, for LRU */
};

struct store_dict {
    struct store_db *sql; /* the connection the rows are read through (not owned) */

    struct rstream *streams; /* sorted by id */
    size_t nstreams, cap_streams;
    int64_t streams_max_id;

    struct chain **chains;
    size_t nchains, cap_chains, chain_bytes;
    uint64_t chain_max; /* chain_bytes kept (pfr_store_opts.cache_bytes) */
    uint64_t chain_clock;

    pfr_buf raw; /* decompressed row scratch */
};

void pfr_st_dict_free(struct store_dict *s);

/* Streams: refresh the cache with rows added since the last call. */
int pfr_st_streams_refresh(struct store_dict *s);
const struct rstream *pfr_st_stream_get(struct store_dict *s, int64_t id);
/* Canonical encodings of a stream's identity and columns. */
int pfr_st_stream_encode(const char *service, const pfr_kv *labels, size_t nlabels,
                         const pfr_profile *p, pfr_buf *key, pfr_buf *lab, pfr_buf *types);
bool pfr_st_stream_matches(const struct rstream *r, const pfr_store_filter *f);

/* The dictionary chain base_id decoded at least up to layer layer_id, from the cache or the
 * database (within the caller's read transaction); n gets the table sizes as of that layer.
 * NULL with *corrupt set when a layer is missing, fails its checksum or does not decode; NULL
 * with *err < 0 on other errors. Valid until the next call. The chain is not checked against
 * the chunk's stream: streams of one service and sample types share chains (schema 5), and a
 * chunk's checksum already covers the chain it names. */
const struct chain *pfr_st_chain_get(struct store_dict *s, int64_t base_id, int64_t layer_id,
                                     uint32_t n[T_N], bool *corrupt, int *err);
/* As pfr_st_chain_get, but the chain is the caller's (out of the cache, or never in it), for
 * pfr_st_chain_free: a writer taking a chain's tables over keeps no second copy in the cache. */
struct chain *pfr_st_chain_take(struct store_dict *s, int64_t base_id, int64_t layer_id,
                                uint32_t n[T_N], bool *corrupt, int *err);
void pfr_st_chain_free(struct chain *c);
void pfr_st_chain_cache_clear(struct store_dict *s);

/* A chunk row's key fields, as its metadata row gives them. */
struct store_chunk_ref {
    int64_t id, stream_id, base_id, dict_id, start_ns, end_ns;
    uint32_t crc;
};

enum { STORE_LOAD_OK = 0, STORE_LOAD_VANISHED = 1 };

/* The one chunk decoder (inside the caller's read transaction): the payload of chunk c of
 * stream r read, verified against c's checksum, decompressed and decoded into *dc against its
 * chain (*chain_out). STORE_LOAD_VANISHED when the row was deleted since the caller listed it,
 * -EBADMSG when it (or its stream, chain or payload) is corrupt, another negative errno on
 * other errors. */
int pfr_st_chunk_load(struct store_dict *s, const struct store_chunk_ref *c,
                      const struct rstream *r, struct dchunk *dc, const struct chain **chain_out);

#endif
