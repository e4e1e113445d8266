/*
 * pfr_store: the local ring. One SQLite database (WAL) of profile chunks: one profile per
 * (stream, interval), compressed, time-indexed, bounded in size (oldest chunks evicted first).
 *
 * A stream is (service, profile labels, sample types). One process writes (the recorder); any
 * number read at the same time (shipper, query tool), including while the writer appends.
 *
 * Errors: 0 on success or a negative errno; functions that take err/errlen also write a
 * human-readable reason there. A corrupt chunk (bad checksum, undecodable payload) never fails a
 * scan: it is skipped, counted in pfr_scan_stats.corrupt and, for a writer, in the persistent
 * stats.
 */
#ifndef PFR_STORE_H
#define PFR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfr_store pfr_store;

/* Default path of the ring (the recorder's and query tool's default). */
#define PFR_STORE_DEFAULT_PATH      "/var/lib/pfr/ring.db"
#define PFR_STORE_DEFAULT_MAX_BYTES (512ull << 20)
/* Default of pfr_store_opts.table_max_bytes. On a build host, hundreds of short-lived programs
 * each make a stream an interval: kept by count alone their tables held ~25 MiB. */
#define PFR_STORE_TABLE_MAX_BYTES (8ull << 20)

/* ---- Disk space: the ring yields to the file system it lives on (docs/store.md, "Disk
 * space"). Besides max_bytes, a writer keeps the file system's free space above a reserve: when
 * it is below, the ring stops growing and keeps what it holds, its oldest chunks given up for the
 * new ones (it may still grow to PFR_STORE_SPACE_FLOOR where the disk has room); a write that
 * still finds the disk full evicts the oldest chunks and
 * is retried, and fails (-ENOSPC) only when nothing older is left (pfr_store_stats counts
 * both). */

/* How the reserve is given. Zero-initialised = PFR_STORE_RESERVE_AUTO. */
enum pfr_store_reserve_mode {
    PFR_STORE_RESERVE_AUTO = 0, /* the larger of 5 % of the file system and 256 MiB */
    PFR_STORE_RESERVE_BYTES,    /* bytes */
    PFR_STORE_RESERVE_PERCENT,  /* a percentage of the file system's size */
    PFR_STORE_RESERVE_OFF,      /* none: only a full disk makes the ring yield */
};

typedef struct pfr_store_reserve {
    enum pfr_store_reserve_mode mode;
    uint64_t bytes; /* PFR_STORE_RESERVE_BYTES */
    double percent; /* PFR_STORE_RESERVE_PERCENT, in (0, 100] */
} pfr_store_reserve;

#define PFR_STORE_RESERVE_AUTO_BYTES   (256ull << 20)
#define PFR_STORE_RESERVE_AUTO_PERCENT 5.0
/* What the ring may grow to whatever the reserve (or its cap, when smaller), as far as the disk
 * has room for it. */
#define PFR_STORE_SPACE_FLOOR (4ull << 20)

/* Why the cap in force (pfr_store_stats.effective_max_bytes) is what it is. */
enum pfr_store_cap_reason {
    PFR_STORE_CAP_CONFIGURED = 0, /* max_bytes */
    PFR_STORE_CAP_DISK_RESERVE,   /* less: the file system's free space is short of the reserve */
};

/* "configured" or "disk free space reserve". */
const char *pfr_store_cap_reason_name(int reason);

/* The reserve in bytes on a file system of fs_bytes: AUTO, BYTES or PERCENT as given, never more
 * than half of the file system (so a small disk still records); 0 for OFF. */
uint64_t pfr_store_reserve_bytes(const pfr_store_reserve *r, uint64_t fs_bytes);

/* The cap in force for a ring whose files take files_bytes, on a file system where its user may
 * still use avail_bytes, keeping reserve_bytes free: max_bytes, or less when files + avail -
 * reserve is less, but not below files (a full disk costs no history) nor below
 * min(max_bytes, PFR_STORE_SPACE_FLOOR, files + avail): the ring
 * keeps its last minutes, whatever the reserve. *reason (may be NULL) says which. */
uint64_t pfr_store_effective_cap(uint64_t max_bytes, uint64_t files_bytes, uint64_t avail_bytes,
                                 uint64_t reserve_bytes, enum pfr_store_cap_reason *reason);

/* ---- Tiered retention (docs/store.md, "Tiers"): when the ring must make room it first rolls
 * old chunks up: the chunks of one stream whose starts fall in one step of the next tier merge
 * into one chunk covering their range (summed types add up; averaged types, in-use heap and
 * goroutines, keep their time average). Tier 0 is the chunks as recorded; only the coarsest tier
 * is deleted, oldest first. */
#define PFR_STORE_MAX_TIERS     8
#define PFR_STORE_DEFAULT_TIERS "1m,10m,1h"
/* The coarsest tier's fold (pfr_store_opts.fold_stacks; docs/store.md, "Tiers"): a roll-up into
 * it keeps at most this many distinct (stack, label set) entries, its rarer stacks folded into
 * their callers under a "[folded]" frame; every sample type's total stays exact. */
#define PFR_STORE_DEFAULT_FOLD_STACKS 250
#define PFR_STORE_FOLD_OFF            UINT32_MAX

typedef struct pfr_store_tiers {
    bool off; /* age-only eviction: no roll-ups, the oldest chunks go (as before tiers) */
    size_t n; /* tiers above tier 0; 0 = PFR_STORE_DEFAULT_TIERS */
    int64_t step_ns[PFR_STORE_MAX_TIERS]; /* tier i + 1's step, increasing */
} pfr_store_tiers;

/* "off", or steps in increasing order separated by commas ("1m,10m,1h"), each a duration
 * (pfr_parse_duration) of at least 1 s and a multiple of the step before it. 0 or -EINVAL with
 * the reason in err. */
int pfr_store_tiers_parse(const char *text, pfr_store_tiers *out, char *err, size_t errlen);
/* The steps in force (the default for n == 0); "off" when off. */
int pfr_store_tiers_format(const pfr_store_tiers *t, char *buf, size_t len);

typedef struct pfr_store_opts {
    uint64_t max_bytes;        /* size cap of the database file; 0 = PFR_STORE_DEFAULT_MAX_BYTES */
    bool read_only;            /* readers: never write the database (cursor files excepted) */
    int busy_timeout_ms;       /* 0 = 5000 */
    pfr_store_reserve reserve; /* writers: free space left on the file system (AUTO by default) */
    uint64_t cache_bytes;      /* readers: decoded dictionaries kept (0 = 128 MiB; at least one) */
    uint64_t pin_max_bytes;    /* writers: what pins may keep from eviction (0 = max_bytes / 4) */
    pfr_store_tiers tiers;     /* writers: roll-up steps (zero = PFR_STORE_DEFAULT_TIERS) */
    uint64_t table_max_bytes;  /* writers: streams' dictionary tables kept in memory between
                                  appends (0 = 8 MiB); past it a stream's next chunk writes a new
                                  base */
    uint32_t fold_stacks;      /* writers: roll-ups into the coarsest tier with more distinct
                                  (stack, label set) entries than this fold their rare stacks into
                                  their callers, totals kept (0 = PFR_STORE_DEFAULT_FOLD_STACKS,
                                  PFR_STORE_FOLD_OFF = never: exact stack for stack) */
} pfr_store_opts;

/* A label: profile labels (host.name, container.id, ...) on chunks, or filters. */
typedef struct pfr_kv {
    const char *key;
    const char *value;
} pfr_kv;

/* What a writer appends. */
typedef struct pfr_chunk_in {
    const char *service;  /* service.name; required, non-empty */
    const pfr_kv *labels; /* profile labels; order does not matter */
    size_t nlabels;
    int64_t start_ns, end_ns;   /* the interval the profile covers, unix ns, start < end */
    const pfr_profile *profile; /* sample types name the chunk's types */
} pfr_chunk_in;

/* What readers see of a chunk. Pointers are valid during the callback only. */
typedef struct pfr_chunk_meta {
    int64_t id; /* increasing in append order; cursors are chunk ids */
    int64_t stream_id;
    int64_t start_ns, end_ns;
    const char *service;
    const pfr_kv *labels;
    size_t nlabels;
    const char *const *types; /* sample type names, ntypes of them */
    const int64_t *totals;    /* sum of values per sample type (pre-filter) */
    size_t ntypes;
    size_t stored_bytes; /* bytes of the chunk's row payload on disk */
    int tier;            /* 0: as recorded; n > 0: a roll-up of tier n-1 chunks (pfr_store_tiers) */
} pfr_chunk_meta;

typedef struct pfr_store_filter {
    int64_t from_ns, to_ns; /* chunks whose [start, end) overlaps [from, to); 0,0 = all time */
    const char *service;    /* NULL = any */
    const char *type;       /* a sample type name the chunk must have; NULL = any */
    const pfr_kv *labels;   /* profile labels that must all match; */
    size_t nlabels;
    const pfr_kv *sample_labels; /* sample labels (pid, comm) that must all match; samples that do
                                    not are dropped from the profile a reader gets */
    size_t nsample_labels;
    int64_t after_id; /* only chunks with id > after_id (0 = from the first) */
    int64_t max_id;   /* only chunks with id <= max_id (0 = no bound) */
    size_t limit;     /* at most this many chunks (0 = no limit) */
} pfr_store_filter;

typedef struct pfr_scan_stats {
    uint64_t chunks;  /* chunks delivered */
    uint64_t corrupt; /* chunks skipped as corrupt */
    int64_t last_id;  /* id of the last chunk looked at (delivered or skipped) */
} pfr_scan_stats;

typedef struct pfr_store_stats {
    uint64_t max_bytes;
    uint64_t file_bytes; /* database, WAL and spare file on disk */
    uint64_t data_bytes; /* payload bytes of live chunks and their shared tables */
    uint64_t chunks;
    int64_t oldest_ns, newest_ns; /* start of the oldest, end of the newest chunk; 0 if empty */
    int64_t min_id, max_id;
    uint64_t appended;       /* chunks ever appended */
    uint64_t evicted;        /* chunks evicted by the size cap */
    uint64_t lost_unshipped; /* evicted before some registered consumer had taken them */
    uint64_t corrupt;        /* corrupt chunks seen by this handle's scans */
    uint64_t bad_counters;   /* counters of the file out of range (damage): shown as bounds */
    /* Disk space: the cap in force and why, from the writer's settings (kept in the ring) and the
     * file system now. */
    uint64_t effective_max_bytes; /* max_bytes, or less (cap_reason) */
    int cap_reason;               /* enum pfr_store_cap_reason */
    uint64_t reserve_bytes;       /* free space the writer leaves on the file system */
    uint64_t fs_bytes;            /* size of the ring's file system */
    uint64_t fs_free_bytes;       /* space the ring's user may still use there */
    uint64_t evicted_disk;        /* of evicted: given up for disk space (reserve or full disk) */
    uint64_t dropped_disk;        /* chunks not written: disk full, nothing older to give up */
    /* Pins (pfr_store_pin_add): how many there are, their budget (the writer's), and pins
     * released for it (the budget, or the ring having nothing else left to give up). */
    uint64_t pins;
    uint64_t pin_max_bytes;
    uint64_t pins_released;
    uint64_t pinned_bytes; /* chunk bytes the pins keep; pfr_store_stats_get only (a scan) */
    uint64_t rolled_up;    /* chunks merged into roll-ups (rows gone, data kept) */
} pfr_store_stats;

/* Like pfr_store_stats_get, without reading every chunk's row (tens of ms per 100,000 chunks):
 * for a daemon's gauges at every interval. chunks is appended - evicted (chunks leave the ring
 * only by eviction); oldest_ns and newest_ns are the start of the first chunk by id and the end
 * of the last (the ring evicts by id); data_bytes is 0. Time: a few b-tree descents. */
int pfr_store_stats_quick(pfr_store *s, pfr_store_stats *out);

/* Open (creating if needed, unless read_only) the ring at path. Migrates older schemas. */
int pfr_store_open(const char *path, const pfr_store_opts *opts, pfr_store **out, char *err,
                   size_t errlen);
void pfr_store_close(pfr_store *s);

/* Append one chunk; evicts oldest chunks first if the cap would be passed. *id_out may be NULL.
 * Once this returns 0 the chunk is durable (survives kill -9 and power loss). */
int pfr_store_append(pfr_store *s, const pfr_chunk_in *in, int64_t *id_out);

/* Call cb for every chunk matching f, oldest id first. The profile is decoded unless
 * PFR_SCAN_META_ONLY is given (then p is NULL). p is owned by the store and freed after cb
 * returns. A non-zero return from cb stops the scan and is returned. st may be NULL. */
enum pfr_scan_flags {
    PFR_SCAN_META_ONLY = 1u << 0,
};
typedef int (*pfr_chunk_cb)(const pfr_chunk_meta *meta, const pfr_profile *p, void *ctx);
int pfr_store_scan(pfr_store *s, const pfr_store_filter *f, unsigned flags, pfr_chunk_cb cb,
                   void *ctx, pfr_scan_stats *st);

/* A lighter read path for readers that keep their own per-stream caches (the shipper): each
 * chunk as its samples against its dictionary, without building a profile.
 *
 * A dictionary is a chain of layers identified by pfr_samples_dict(), shared by the streams of
 * one service and sample types (schema 5: they differ only in profile labels); layers only
 * append. Stack (and location) indices below the stable counts it reports are dictionary
 * entries: the same index means the same stack in every chunk reporting the same dictionary id
 * (ids are never reused within a ring file), so a reader may cache what it derives from them,
 * keyed by (dictionary id, index), and resolve an entry only on its first use. Indices at or
 * above the stable counts are the chunk's own entries: valid for this chunk only.
 *
 * cb gets the chunk's metadata and v (NULL with PFR_SCAN_META_ONLY). v, and every pointer read
 * through it (frames, labels, location lists), is owned by the store and valid during the
 * callback only. Samples failing f's sample label filter are left out. Corrupt chunks are
 * skipped and counted as in pfr_store_scan; a non-zero return from cb stops the scan and is
 * returned. */
typedef struct pfr_chunk_samples pfr_chunk_samples;
typedef int (*pfr_samples_cb)(const pfr_chunk_meta *meta, const pfr_chunk_samples *v, void *ctx);
int pfr_store_scan_samples(pfr_store *s, const pfr_store_filter *f, unsigned flags,
                           pfr_samples_cb cb, void *ctx, pfr_scan_stats *st);
/* The dictionary id; *stable_stacks / *stable_locations (each may be NULL) get the counts below
 * which indices are dictionary entries. */
int64_t pfr_samples_dict(const pfr_chunk_samples *v, uint32_t *stable_stacks,
                         uint32_t *stable_locations);
/* Samples (in stored order: by stack index, then label set). For i out of range: stack and
 * label set UINT32_MAX, values NULL. values has meta->ntypes entries. */
size_t pfr_samples_count(const pfr_chunk_samples *v);
uint32_t pfr_samples_stack(const pfr_chunk_samples *v, size_t i);
uint32_t pfr_samples_label_set(const pfr_chunk_samples *v, size_t i);
const int64_t *pfr_samples_values(const pfr_chunk_samples *v, size_t i);
/* Stacks known to the chunk (dictionary and its own). */
uint32_t pfr_samples_num_stacks(const pfr_chunk_samples *v);
/* A stack's location indices, leaf first (NULL and *n = 0 for an unknown stack). */
const uint32_t *pfr_samples_stack_locations(const pfr_chunk_samples *v, uint32_t stack, size_t *n);
/* Frames of a location or of a whole stack, leaf first, as pfr_profile_location_frames and
 * pfr_profile_sample_frames give them for the profile pfr_store_scan would build: at most cap
 * written, the total returned (0 for an unknown index). */
size_t pfr_samples_location_frames(const pfr_chunk_samples *v, uint32_t loc, pfr_frame *out,
                                   size_t cap);
size_t pfr_samples_stack_frames(const pfr_chunk_samples *v, uint32_t stack, pfr_frame *out,
                                size_t cap);
/* The labels (pid, comm, ...) of a label set: at most cap written, the count returned. */
size_t pfr_samples_labels(const pfr_chunk_samples *v, uint32_t lset, pfr_label *out, size_t cap);

/* Merge every matching chunk into one new profile (*out, owned by the caller), fast path for
 * flame graphs over long ranges. merge_flags are pfr_merge_flags. Returns -ENOENT when nothing
 * matched. */
int pfr_store_merge(pfr_store *s, const pfr_store_filter *f, unsigned merge_flags,
                    pfr_profile **out, pfr_scan_stats *st);

/* Streams: one callback per stream with its coverage. */
typedef struct pfr_stream_info {
    int64_t id;
    const char *service;
    const pfr_kv *labels;
    size_t nlabels;
    const char *const *types;
    size_t ntypes;
    uint64_t chunks;
    int64_t first_ns, last_ns; /* start of its oldest chunk, end of its newest */
} pfr_stream_info;
typedef int (*pfr_stream_cb)(const pfr_stream_info *info, void *ctx);
int pfr_store_streams(pfr_store *s, pfr_stream_cb cb, void *ctx);

/* What each tier holds: one callback per tier that has chunks, finest first. step_ns is the
 * tier's step as the writer set it (0 for tier 0: the recorder's interval, as recorded). */
typedef struct pfr_tier_info {
    int tier;
    int64_t step_ns;
    uint64_t chunks, bytes;    /* bytes: the chunks' payloads */
    int64_t first_ns, last_ns; /* start of its oldest chunk, end of its newest */
} pfr_tier_info;
typedef int (*pfr_tier_cb)(const pfr_tier_info *info, void *ctx);
int pfr_store_tiers_list(pfr_store *s, pfr_tier_cb cb, void *ctx);

/* Consumer cursors: the id of the last chunk a named consumer (e.g. "shipper.coroot") has taken.
 * They live beside the database (so a read-only consumer can keep its cursor without writing the
 * ring) and the writer reads them when it evicts, to count lost-unshipped chunks. */
int pfr_store_cursor_set(pfr_store *s, const char *consumer, int64_t chunk_id);
/* *chunk_id = 0 when the consumer is unknown. */
int pfr_store_cursor_get(pfr_store *s, const char *consumer, int64_t *chunk_id);
int pfr_store_cursor_remove(pfr_store *s, const char *consumer);
/* Whether the consumer has a cursor file: the writer counts what it gives up past a cursor
 * (pfr_store_consumer_lost) only while the file is there. */
int pfr_store_cursor_known(pfr_store *s, const char *consumer, bool *known);
/* The chunks a consumer set aside (ascending; n 0: none): it has passed them with its cursor
 * without taking them (a sink rejected them; they are sent again by hand). The writer never
 * rolls them up, so that they are sent as recorded, once, or evicted and counted by the
 * consumer. A file beside the cursors, rewritten whole. */
int pfr_store_aside_set(pfr_store *s, const char *consumer, const int64_t *ids, size_t n);
/* Chunks the ring gave up (evicted) past the consumer's cursor: what it lost, counted by the
 * writer per consumer since the consumer's cursor file was first read; chunks merged into a
 * roll-up are never in it (a roll-up keeps its inputs' data). 0 for an unknown consumer. */
int pfr_store_consumer_lost(pfr_store *s, const char *consumer, uint64_t *lost);

int pfr_store_stats_get(pfr_store *s, pfr_store_stats *st);

/* Run SQLite's integrity check plus a checksum pass over every chunk. Returns 0 if all is well,
 * -EBADMSG otherwise with the first problem in err. *bad_chunks (may be NULL) gets the count. */
int pfr_store_check(pfr_store *s, uint64_t *bad_chunks, char *err, size_t errlen);

/* An SQLite result code as 0 or a negative errno (-ENOSPC for SQLITE_FULL, -EBADMSG for a
 * corrupt file, ...): the ring's mapping, for programs that keep their own SQLite file beside
 * it (the shipper's state). */
int pfr_store_errno(int sqlite_rc);

/* A writer's memory: what it keeps between appends. Each stream's dictionary tables (so a chunk
 * needs only what is new since the last) and SQLite's cache of the ring's pages. */
typedef struct pfr_store_mem_stats {
    uint64_t table_bytes;       /* streams' dictionary tables kept in memory (at most 8 MiB) */
    uint64_t table_streams;     /* streams whose tables are kept (at most 256) */
    uint64_t tables_dropped;    /* streams' tables given up for either bound or pfr_store_trim */
    uint64_t page_cache_bytes;  /* SQLite's page cache (up to 4 MiB) */
    uint64_t chain_cache_bytes; /* dictionary chains decoded for reads (a writer's: roll-ups) */
} pfr_store_mem_stats;

void pfr_store_mem_stats_get(pfr_store *s, pfr_store_mem_stats *out);

/* Give memory back (a daemon near its memory budget): the least recently appended streams'
 * tables until at most keep_table_bytes stay, the append scratch, the decoded chains, SQLite's
 * unused cached pages.
 * Nothing is lost: a stream without tables writes a new base with its next chunk (more disk and
 * CPU for that chunk). Between appends, from the writer's thread. */
void pfr_store_trim(pfr_store *s, uint64_t keep_table_bytes);
/* As pfr_store_trim, but the tables of streams expected to append again (one period after their
 * last append, as the writer's bound judges) are kept: given back, they would be read back from
 * the ring at the stream's next chunk, so the memory returns before the next interval's peak
 * and each read back costs a chain's decode. Only the others go, coldest first. */
void pfr_store_trim_idle(pfr_store *s, uint64_t keep_table_bytes);

/* Added by the store: append n chunks in one transaction (one fsync), all or none. ids_out (may
 * be NULL) gets n ids. For writers that produce several chunks at once (the recorder's streams
 * at the end of an interval) and for bulk loads. */
int pfr_store_append_batch(pfr_store *s, const pfr_chunk_in *in, size_t n, int64_t *ids_out);

/* ---- Slices (store_slice.c): a part of a ring carried out as a standalone ring file ----
 *
 * A slice is a ring file like the recorder's (same schema, read by pfr_store_open unchanged)
 * holding the chunks of a range as they are in the ring: same ids, times, streams, payloads and
 * totals, plus only the dictionary layers those chunks reference. It is read from the ring in
 * one read transaction (one consistent snapshot, taken beside a writer), written to a temporary
 * file in the destination's folder, checked with pfr_store_check, fsync'ed and renamed into
 * place: the destination is the whole slice or nothing. It is in rollback-journal mode (no -wal
 * or -shm), so it is read from a read-only medium too. Its meta table says it is a slice
 * (pfr_store_slice_info). */
enum pfr_slice_flags {
    /* replace an existing destination that is a regular file, or a symlink to one (its target
     * is replaced, the link stays); anything else is never replaced */
    PFR_SLICE_FORCE = 1u << 0,
};

typedef struct pfr_slice_stats {
    uint64_t chunks;           /* chunks written */
    uint64_t streams;          /* stream rows written */
    uint64_t layers;           /* dictionary layer rows written */
    uint64_t corrupt;          /* chunks of the range left out: checksum, payload or layer broken */
    uint64_t bytes;            /* size of the slice file */
    int64_t min_id, max_id;    /* chunk ids written */
    int64_t first_ns, last_ns; /* start of the earliest chunk, end of the latest */
} pfr_slice_stats;

/* Write the chunks of s that match f to a new slice file at path. f selects by time range,
 * service, type and profile labels (from_ns..nlabels); its sample label filter, after_id, max_id
 * and limit must be unset (a slice keeps whole chunks). Errors: -EEXIST (path exists and no
 * PFR_SLICE_FORCE, or it is not a regular file nor a symlink to one: a device, folder, FIFO,
 * socket or dangling link, left untouched), -ENOENT (no chunk matches: nothing is written),
 * -EINVAL, -ENOTDIR (no such folder), -errno of the destination folder (-EACCES, -EROFS,
 * -ENOSPC...), others from the store; on error nothing is left at path or beside it. st may be
 * NULL. */
int pfr_store_slice_write(pfr_store *s, const pfr_store_filter *f, const char *path, unsigned flags,
                          pfr_slice_stats *st, char *err, size_t errlen);

typedef struct pfr_slice_info {
    bool is_slice;          /* false: a ring as the recorder writes it (the rest is 0) */
    int64_t from_ns, to_ns; /* the range the slice was cut to */
    uint64_t id;            /* identity of its content: hash of its streams and chunks */
    int64_t created_ns;     /* when it was written (wall clock) */
    int64_t source_max_id;  /* the ring's newest chunk id when the slice was cut */
} pfr_slice_info;

/* Whether the file open in s is a slice, and which. 0 or a negative errno. */
int pfr_store_slice_info(pfr_store *s, pfr_slice_info *out);

/* ---- Pins (store_pins.c, docs/store.md "Pins"): ranges kept from eviction ----
 *
 * A pin keeps the chunks of a time range (of one service, and of streams with some labels, or of
 * all) from eviction, while all pins together keep at most pin_max_bytes (the writer's budget, a
 * share of the cap). When a new pin would pass the budget, the oldest automatic pins (origin
 * "trigger:*") are released first; a manual pin is released only by pfr_store_pin_remove, or by
 * eviction when the pinned chunks are the last thing left in a ring that must make room. Every
 * release is counted (pfr_store_stats.pins_released).
 *
 * Pins work on any handle: on a read-only one (the query tool beside a running recorder) the
 * call opens a read-write connection of its own for one short write transaction (the range's
 * bytes are measured before it, in a read transaction, so the recorder's writer waits for at
 * most a row insert and its commit). Needs write access to the ring's files. */
#define PFR_PIN_REASON_MAX 1024 /* bytes */
#define PFR_PIN_LABELS_MAX 16
#define PFR_PIN_ORIGIN_MAX 256

typedef struct pfr_pin_in {
    int64_t from_ns, to_ns; /* unix ns, from < to */
    const char *service;    /* NULL: every service; else a service the ring has */
    const pfr_kv *labels;   /* profile labels the streams must have (keys without '=') */
    size_t nlabels;
    const char *reason; /* required, 1..PFR_PIN_REASON_MAX bytes, no NUL */
    /* who or what made it: "manual:<user> (uid N)", or "trigger:<kind>" (automatic) */
    const char *origin;
} pfr_pin_in;

typedef struct pfr_pin_info {
    int64_t id, from_ns, to_ns, created_ns;
    const char *service; /* NULL: every service */
    const pfr_kv *labels;
    size_t nlabels;
    const char *reason, *origin;
    bool automatic;
    uint64_t bytes; /* chunk bytes in the ring that this pin keeps, now */
} pfr_pin_info;

#define PFR_PIN_RELEASED_MAX 16
typedef struct pfr_pin_result {
    int64_t id;                             /* the new pin */
    uint64_t bytes;                         /* what it keeps */
    uint64_t pinned_bytes;                  /* what all pins keep, with it */
    uint64_t budget;                        /* pin_max_bytes in force */
    size_t nreleased;                       /* automatic pins released to make room */
    int64_t released[PFR_PIN_RELEASED_MAX]; /* their ids (the first PFR_PIN_RELEASED_MAX) */
    uint64_t lock_ns;        /* how long the write transaction held the ring's write lock */
    uint32_t lock_preempted; /* times the scheduler took the CPU from the caller meanwhile (a
                                loaded machine's time in lock_ns, not the pin's) */
} pfr_pin_result;

/* Add a pin. Errors (reason in err): -EINVAL (from >= to, reason empty or too long, bad origin
 * or label), -ENOENT (no such service in the ring), -ENOSPC (the pin would pass the budget
 * even with every automatic pin released: the manual pins hold it), -EACCES / -EROFS (no write
 * access to the ring), others from SQLite. out may be NULL. */
int pfr_store_pin_add(pfr_store *s, const pfr_pin_in *in, pfr_pin_result *out, char *err,
                      size_t errlen);
/* Widen pin id to cover [from_ns, to_ns) too (its range becomes the union): for triggers that
 * coalesce overlapping windows of one service into one pin. The budget as for a new pin (the
 * pin itself is never released for it). -ENOENT: no such pin. */
int pfr_store_pin_extend(pfr_store *s, int64_t id, int64_t from_ns, int64_t to_ns,
                         pfr_pin_result *out, char *err, size_t errlen);
/* Every pin, oldest first, with the bytes it keeps now. A non-zero return from cb stops. */
typedef int (*pfr_pin_cb)(const pfr_pin_info *pin, void *ctx);
int pfr_store_pins(pfr_store *s, pfr_pin_cb cb, void *ctx);
/* Release a pin: -ENOENT when there is none with that id. */
int pfr_store_pin_remove(pfr_store *s, int64_t id, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
