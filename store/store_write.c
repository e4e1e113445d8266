/*
 * The writer: turns profiles into dictionary + chunk rows and keeps the ring under its cap.
 *
 * Per stream the writer keeps in memory the tables of its dictionary chain: a base layer and the
 * layers written since, entries [0, dict_n). A chunk whose samples need entries the chain lacks
 * first writes them as a new layer (a small row: only what is new), so every string, location and
 * stack is stored once per chain, and the chunk itself holds only sample columns. A new base is
 * written when a stream starts (in this process), after DICT_MAX_AGE chunks (DICT_MAX_AGE_BARE
 * when the chain has no layer: its base would be written again as it is), or when most of a
 * chunk is new; it holds the entries used by the last DICT_WINDOW chunks, so dead stacks age out
 * and a chain's rows can be freed once its chunks are evicted. Why this shape: docs/store.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_clock.h"
#include "store_cursor.h"
#include "store_fold.h"
#include "store_handle.h"
#include "store_pins.h"
#include "store_retention.h"
#include "store_write.h"

#define DICT_WINDOW 60 /* chunks: 10 minutes of 10 s chunks */
/* ... and no older than this: a drifting service's stacks live ~5 minutes, so a base that kept
 * 10 minutes of one stream's (~1,100 stacks, ~144 KB) carried ~700 dead ones into every hour */
#define DICT_WINDOW_NS (60 * 1000000000ll)
#define DICT_MAX_AGE   360 /* chunks per dictionary at most: bounds what one bad row can spoil */
/* Chunks per dictionary at most while the chain got no layer since its base: a new base would be
 * the same rows again (docs/store.md, "Compact rows"), so only the damage bound rotates it. */
#define DICT_MAX_AGE_BARE (24 * DICT_MAX_AGE)
#define ROTATE_MIN_NEW    32 /* new stacks below this never force a new base */
/* Chunks a chain takes at least before new stacks force a new base. A stream whose stacks are
 * mostly new in every chunk (a build: each compiler process runs other code paths) rotated at every
 * chunk, and each base holds the stacks of DICT_WINDOW chunks: such streams' bases were 95 % of a
 * busy host's ring and LZ4 HC of them half of the writer's CPU. A chain of 12 layers holds at
 * most a fifth more than its base (DICT_WINDOW's chunks), for one base in 12 chunks, not 12. */
#define ROTATE_MIN_AGE 12
#define MAX_RESIDENT   256 /* streams whose tables stay in memory */
#define MAX_WSTREAMS   65536
#define ROW_OVERHEAD   STORE_ROW_OVERHEAD /* a chunk's rows and index entries besides its payload */

enum wstmt {
    W_SEL_STREAM,
    W_INS_STREAM,
    W_INS_DICT,
    W_NEXT_DICT,
    W_INS_CHUNK,
    W_INS_DATA,
    W_PAGE_COUNT,
    W_FREELIST,
    W_OLDEST,
    W_OLDEST_TIER,
    W_DEL_CHUNKS,
    W_DEL_DATA,
    W_DEL_DICT,
    W_DEL_STREAM,
    W_TOP_TIER,
    W_SET_TIER,
    W_NEWEST_BASE,
    W_CHAIN_TOP,
    W_CHAIN_UNUSED,
    W_DEL_DICT_SOME,
    W_ORPHANS,
    W_N
};

static const char *const wsql[W_N] = {
    [W_SEL_STREAM] = "SELECT id FROM streams WHERE key = ?1",
    [W_INS_STREAM] = "INSERT INTO streams(key, service, labels, types) VALUES (?1, ?2, ?3, ?4)",
    [W_INS_DICT] = ("INSERT INTO dicts(id, stream_id, base_id, parent_id, nbytes, crc, data)"
                    " VALUES (?7, ?1, ?2, ?3, ?4, ?5, ?6)"),
    /* The id the next dictionary row takes (AUTOINCREMENT: past every id ever used). */
    [W_NEXT_DICT] = ("SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'dicts'),"
                     " 0), coalesce((SELECT max(id) FROM dicts), 0)) + 1"),
    [W_INS_CHUNK] =
        ("INSERT INTO chunks(id, stream_id, base_id, dict_id, start_ns, end_ns, nbytes, crc,"
         " totals, tier) VALUES (?10, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
    [W_INS_DATA] = "INSERT INTO chunk_data(id, data) VALUES (?1, ?2)",
    [W_PAGE_COUNT] = "PRAGMA page_count",
    [W_FREELIST] = "PRAGMA freelist_count",
    [W_OLDEST] = ("SELECT id, stream_id, base_id, nbytes, start_ns, end_ns FROM chunks"
                  " WHERE id > ?1 ORDER BY id LIMIT 512"),
    [W_OLDEST_TIER] = ("SELECT id, stream_id, base_id, nbytes, start_ns, end_ns FROM chunks"
                       " WHERE tier = ?2 AND id > ?1 ORDER BY id LIMIT 512"),
    /* ?3: the tier deleted from (-1: any); the payloads follow their rows */
    [W_DEL_CHUNKS] = "DELETE FROM chunks WHERE id BETWEEN ?1 AND ?2 AND (?3 < 0 OR tier = ?3)",
    [W_DEL_DATA] = ("DELETE FROM chunk_data WHERE id BETWEEN ?1 AND ?2 AND id NOT IN"
                    " (SELECT id FROM chunks WHERE id BETWEEN ?1 AND ?2)"),
    [W_DEL_DICT] = ("DELETE FROM dicts WHERE base_id = ?1 AND NOT EXISTS"
                    " (SELECT 1 FROM chunks WHERE base_id = ?1)"),
    [W_DEL_STREAM] = ("DELETE FROM streams WHERE id = ?1 AND NOT EXISTS"
                      " (SELECT 1 FROM chunks WHERE stream_id = ?1)"),
    [W_TOP_TIER] = "SELECT coalesce(max(tier), 0) FROM chunks",
    [W_SET_TIER] = "UPDATE chunks SET tier = ?2 WHERE id = ?1",
    /* The newest chain of a tier among the streams of a service and types: each stream's newest
     * chunk through its (stream_id, end_ns) index, then the newest of those. */
    [W_NEWEST_BASE] = ("SELECT c.base_id FROM streams s JOIN chunks c ON c.id ="
                       " (SELECT id FROM chunks WHERE stream_id = s.id AND tier = ?3"
                       " ORDER BY end_ns DESC LIMIT 1)"
                       " WHERE s.service = ?1 AND s.types = ?2 ORDER BY c.end_ns DESC LIMIT 1"),
    [W_CHAIN_TOP] = ("SELECT max(id), (SELECT count(*) FROM chunks WHERE base_id = ?1) FROM dicts"
                     " WHERE base_id = ?1"),
    [W_CHAIN_UNUSED] = "SELECT NOT EXISTS (SELECT 1 FROM chunks WHERE base_id = ?1)",
    /* a chain no chunk references, a few rows at a time: its newest layers (?2 = 0), or its base
     * (?2 = 1: one row, whose overflow pages are freed without being written to the WAL) */
    [W_DEL_DICT_SOME] = ("DELETE FROM dicts WHERE id IN (SELECT id FROM dicts WHERE base_id = ?1"
                         " AND (id = base_id) = ?2 ORDER BY id DESC LIMIT 8) AND NOT EXISTS"
                         " (SELECT 1 FROM chunks WHERE base_id = ?1)"),
    [W_ORPHANS] = ("SELECT DISTINCT base_id FROM dicts WHERE NOT EXISTS"
                   " (SELECT 1 FROM chunks WHERE chunks.base_id = dicts.base_id)"),
};

struct fp {
    uint64_t a, b;
};

struct fpmap_ent {
    uint64_t a, b;
    uint32_t loc, used;
};

/* The writer's state of a dictionary chain: the chain of a service and sample types at a tier,
 * shared by every stream of them (streams differing only in profile labels: the short-lived
 * containers or pods of one program, each its own container.id), so a new stream of a known
 * program appends a layer of what its chunk lacks instead of writing a base of its own (the
 * churning host of bench_horizon: a ~17 KB base per 5 s program). */
struct wstream {
    int64_t base_id;      /* the chain's base layer, 0 = the next chunk writes a base */
    int64_t dict_id;      /* the chain's last layer */
    uint32_t dict_n[T_N]; /* entries in the chain's rows */
    struct tabs tabs;
    uint32_t *used[T_N]; /* stacks and label sets: seq of the last chunk that used them */
    size_t cap_used[T_N];
    uint32_t seq, base_seq;
    int64_t starts[DICT_WINDOW]; /* the start of the chunk of seq s at s % DICT_WINDOW */
    int64_t base_bucket;         /* the coarsest tier's step its base was written in (tier 0) */
    uint64_t lru, prev_lru;      /* writer clock at its last and the append before (0: none) */
    size_t bytes;                /* its tables' memory, as last accounted (writer.table_bytes) */
    bool resident;
    /* Fast path to a location: its 128-bit content fingerprint -> location index. */
    struct fpmap_ent *fpm;
    size_t fpm_mask, fpm_n;
};

/* Label sets met in the current chunk, by the profile's own label arrays (its strings are
 * interned, so equal sets have equal pointers). */
#define LSCACHE 16
struct lscache_ent {
    size_t n;
    pfr_label labels[4];
    uint32_t lset;
};

/* A stream's rows as they were before the transaction, put back if it is rolled back: else the
 * retry would write every stream's dictionary anew, and a disk that could not take the
 * transaction would have to take a larger one. */
struct wundo {
    struct wstream *ws;
    int64_t base_id, dict_id;
    uint32_t dict_n[T_N], base_seq;
    /* its chunks' count: a retried chunk counted twice aged the chain by one, and the hour's
     * last chunk rotated it by age (a base for one chunk), the next hour's first again */
    uint32_t seq;
    bool rotated; /* its tables were rebuilt: they no longer match its old chain */
};

/* A base of the finest tier put apart: its row is written before its chunk's transaction, which
 * then appends to it as to a chain of its own (the stream's tables are those it encodes). */
struct wbase {
    struct wstream *ws;
    uint64_t epoch;         /* writer.ws_epoch when noted */
    uint32_t n[T_N];        /* ws's table sizes the base holds */
    const pfr_chunk_in *in; /* its chunk (the caller's: the stream's row when it has none) */
    int64_t sid;            /* the stream's row (0: none yet, bases_txn inserts it) */
    int64_t id;             /* the base's row, once written (bases_txn) */
    int64_t bucket;         /* the coarsest tier's step of its chunk (ws->base_bucket) */
    pfr_buf blob;           /* the row's data, packed */
};

/* One sample of the chunk being written. */
struct csample {
    uint32_t stack, lset; /* global indices, then chunk-space indices */
    uint32_t src;         /* sample index in the profile */
};

struct writer {
    struct ktab keys; /* stream key -> index in ws */
    struct wstream **ws;
    size_t nws, cap_ws, resident;
    uint64_t clock;
    struct wstream *cur;     /* the stream being appended to */
    size_t table_bytes;      /* the resident streams' tables (sum of their bytes) */
    uint64_t tables_dropped; /* streams' tables given up for memory (pfr_store_mem_stats) */
    sqlite3_stmt *st[W_N];

    uint32_t *locmap; /* profile location -> ours + 1 (0: unused, UINT32_MAX: to map) */
    size_t cap_locmap;
    struct fp *lfp; /* fingerprints of the locations to map */
    uint32_t *lidx;
    size_t cap_lfp, cap_lidx;
    pfr_frame *frames;
    pfr_frame_hash *fhash; /* the frames' string hashes */
    size_t cap_frames, cap_fhash;
    struct nlabel *labs;
    size_t cap_labs;
    struct csample *cs;
    size_t cap_cs;
    uint32_t *cstack, *clset;
    size_t cap_col, cap_col2;
    int64_t *vals;
    size_t cap_vals;
    int64_t *totals;
    size_t cap_totals;

    uint64_t room;      /* bytes the transaction may still add before pages are measured again */
    struct wundo *undo; /* streams the transaction appends to */
    size_t nundo, cap_undo;
    bool undo_lost; /* streams were freed during it: forget every row on rollback */
    struct lscache_ent lsc[LSCACHE];
    size_t nlsc, lsc_next;

    struct tabs local;         /* the chunk's delta */
    uint32_t *pend[T_N];       /* pending global index - dict_n -> local index */
    uint32_t *pend_stamp[T_N]; /* valid when equal to stamp */
    size_t cap_pend[T_N];
    uint32_t stamp;

    pfr_buf key, lab, types, tmp, tmp2, raw, blob, dict_blob, tot;
    pfr_st_hc *hc;              /* LZ4 HC's state (writer_hc) */
    pfr_buf ikey;               /* the stream's key in keys: a roll-up tier's has the tier too */
    struct store_retention ret; /* tiers: what makes room next */
    uint64_t avg_payload;       /* bytes per chunk appended, a running mean: room to make */
    /* What a recorded chunk takes of the database's pages (its rows, index entries, its share of
     * dictionary bases and of half-full pages), a running mean measured over transactions: the
     * room make_room makes. 0: not measured yet. */
    uint64_t page_cost;
    uint64_t txn_freed; /* bytes the appends' own eviction freed in this transaction */
    uint64_t short_by;  /* an append found this much less room than make_room made (-EAGAIN) */
    /* the appends' make_room met a piece of the coarsest (-EAGAIN): made in a room transaction
     * first, once per append_txn (piece_later) */
    bool piece_apart;
    size_t txn_left;   /* appends of the transaction still to come, the current one included */
    uint64_t room_end; /* the pages make_room left in use plus the room it made (est + extra) */
    bool may_delete;   /* appends may delete chunks of a tier below the coarsest */
    /* The tiers' policy said deleting comes next (make_room): the appends delete what they
     * need, chunk by chunk, of this tier (-1: none said), not make_room ahead of them by an
     * estimate (a mean that counted a new stream's base made room for a base at every
     * transaction: a 300 KB ring held 2 chunks where it had room for 12). */
    int policy_evict_tier;
    /* Chains a roll-up left without chunks, their rows not yet deleted: make_room deletes them
     * as the ring needs room, a few rows at a time (orphans_known: the list is the database's;
     * else it is read again, after a writer's start or a rolled back transaction). */
    int64_t *orphans;
    size_t norphans, cap_orphans;
    bool orphans_known;
    /* The steps (a roll-up, a few rows of a chain without chunks, a trim) a transaction of
     * make_room alone takes at most (room_txn; 0: not set yet): halved when one wrote more than
     * three quarters of the WAL's budget, grown while they write less than half of it. SQLite
     * writes a transaction's pages to the WAL only at its commit, so they cannot be counted as
     * they are dirtied; and a transaction's WAL is not its steps' sum (~12 pages of any
     * transaction, then ~2.5 a roll-up of the finest tier's minute). */
    size_t room_steps_cap;
    size_t room_steps; /* steps make_room took in the current transaction */
    /* Bases of the finest tier put apart (base_apart): written in transactions of their own
     * before their chunks' (bases_write), the appends' transaction then starting again. */
    struct wbase *bases;
    size_t nbases, cap_bases;
    uint64_t txn_base_bytes; /* bases written in the current transaction */
    bool bases_inline; /* the retry after bases_write: every base in its chunk's transaction */
    uint64_t ws_epoch; /* bumped when wstreams are freed (a pending base's ws is then gone) */
};

static void wstream_drop_tables(struct writer *w, struct wstream *s)
{
    pfr_st_tabs_free(&s->tabs);
    free(s->fpm);
    s->fpm = NULL;
    s->fpm_mask = s->fpm_n = 0;
    for (int k = 0; k < T_N; k++) {
        free(s->used[k]);
        s->used[k] = NULL;
        s->cap_used[k] = 0;
    }
    memset(s->dict_n, 0, sizeof(s->dict_n));
    s->base_id = s->dict_id = 0;
    if (s->resident)
        w->resident--;
    s->resident = false;
    w->table_bytes -= s->bytes;
    s->bytes = 0;
}

/* What a stream's tables hold now: after each append, which may have grown or rebuilt them. */
static void wstream_account(struct writer *w, struct wstream *s)
{
    size_t b = pfr_st_tabs_bytes(&s->tabs) + (s->fpm ? (s->fpm_mask + 1) * sizeof(*s->fpm) : 0);
    for (int k = 0; k < T_N; k++)
        b += s->cap_used[k] * sizeof(uint32_t);
    w->table_bytes = w->table_bytes - s->bytes + b;
    s->bytes = b;
}

/* When a stream is expected to append next: one period (the gap between its last two appends)
 * after its last. A stream appended once, or that missed a whole period (its program is gone),
 * is not expected again: UINT64_MAX. */
static uint64_t next_use(const struct wstream *s, uint64_t now)
{
    if (!s->prev_lru)
        return UINT64_MAX;
    uint64_t period = s->lru - s->prev_lru;
    if (s->lru + 2 * period < now)
        return UINT64_MAX;
    return s->lru + period;
}

/* The stream with tables (other than keep) expected to append last, the oldest of equals; NULL
 * if none. Not the least recently appended: streams that append in turn every interval would
 * each be dropped just before their turn when their tables outgrow the bound together, and every
 * chunk would write a new base (a ring of 10 such services grew 5-fold, all of it dictionaries).
 * Dropping the one needed last keeps most of them resident, as far ahead as memory allows. */
static struct wstream *coldest_resident(const struct writer *w, const struct wstream *keep)
{
    struct wstream *victim = NULL;
    uint64_t victim_next = 0;
    for (size_t j = 0; j < w->nws; j++) {
        struct wstream *s = w->ws[j];
        if (!s->resident || s == keep)
            continue;
        uint64_t next = next_use(s, w->clock);
        if (!victim || next > victim_next || (next == victim_next && s->lru < victim->lru)) {
            victim = s;
            victim_next = next;
        }
    }
    return victim;
}

/* Drop the coldest streams' tables (not keep's) until at most max_bytes stay
 * and fewer than max_n streams have them, stopping at the first stream expected to append again
 * unless expected_too. Their next chunk writes a new base: nothing is lost. */
static void drop_cold_tables(struct writer *w, const struct wstream *keep, size_t max_bytes,
                             size_t max_n, bool expected_too)
{
    while (w->table_bytes > max_bytes || w->resident > max_n) {
        struct wstream *victim = coldest_resident(w, keep);
        if (!victim || (!expected_too && next_use(victim, w->clock) != UINT64_MAX))
            return;
        wstream_drop_tables(w, victim);
        w->tables_dropped++;
    }
}

void pfr_st_writer_free(struct writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nws; i++) {
        wstream_drop_tables(w, w->ws[i]);
        free(w->ws[i]);
    }
    free(w->ws);
    pfr_st_ktab_free(&w->keys);
    for (int i = 0; i < W_N; i++)
        sqlite3_finalize(w->st[i]);
    free(w->locmap);
    free(w->lfp);
    free(w->lidx);
    free(w->frames);
    free(w->fhash);
    free(w->labs);
    free(w->cs);
    free(w->cstack);
    free(w->clset);
    free(w->vals);
    free(w->totals);
    free(w->undo);
    free(w->orphans);
    for (size_t i = 0; i < w->cap_bases; i++)
        pfr_buf_free(&w->bases[i].blob);
    free(w->bases);
    pfr_st_tabs_free(&w->local);
    for (int k = 0; k < T_N; k++) {
        free(w->pend[k]);
        free(w->pend_stamp[k]);
    }
    pfr_st_hc_free(w->hc);
    pfr_buf *bufs[] = {&w->key, &w->lab,  &w->types,     &w->tmp, &w->tmp2,
                       &w->raw, &w->blob, &w->dict_blob, &w->tot, &w->ikey};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        pfr_buf_free(bufs[i]);
    free(w);
}

/* The state for LZ4 HC, made at first use; NULL (LZ4's fast mode) while it cannot be had.
 * Chunks are packed with LZ4 HC as base layers are: a chunk is written once and kept for hours
 * to weeks, and HC takes ~5 % off it for ~7 µs more of the writer's CPU (a ~1.2 KB chunk, with
 * the state kept). The scaled 200-service ring at its low point: 849 -> 808 KB of chunks
 * (docs/benchmarks.md, "Retention: chunks in LZ4 HC"). Other layers (a few new entries, ~600 B)
 * gain under 1 %: LZ4's fast mode. */
static pfr_st_hc *writer_hc(struct writer *w)
{
    if (!w->hc)
        w->hc = pfr_st_hc_new();
    return w->hc;
}

/* After a failed transaction nothing in memory can be trusted to match the database. */
static void writer_forget_rows(struct writer *w)
{
    for (size_t i = 0; i < w->nws; i++)
        w->ws[i]->base_id = w->ws[i]->dict_id = 0;
}

/* Note ws's rows before the transaction changes them (once per transaction). The undo entry, or
 * NULL when out of memory (then the rollback forgets every row). */
static struct wundo *undo_note(struct writer *w, struct wstream *ws)
{
    for (size_t i = 0; i < w->nundo; i++)
        if (w->undo[i].ws == ws)
            return &w->undo[i];
    if (VEC_RESERVE(w->undo, w->cap_undo, w->nundo + 1)) {
        w->undo_lost = true;
        return NULL;
    }
    struct wundo *u = &w->undo[w->nundo++];
    *u = (struct wundo){ws, ws->base_id, ws->dict_id, {0}, ws->base_seq, ws->seq, false};
    memcpy(u->dict_n, ws->dict_n, sizeof(u->dict_n));
    return u;
}

/* The transaction was rolled back: the streams it appended to get their rows back; those whose
 * tables it rebuilt (or dropped) write a new base. Other streams' rows are untouched by a
 * transaction, but for the ones its evictions forgot (zeroed: the next append looks them up). */
static void writer_undo(struct writer *w)
{
    if (w->undo_lost) {
        writer_forget_rows(w);
        return;
    }
    for (size_t i = 0; i < w->nundo; i++) {
        const struct wundo *u = &w->undo[i];
        struct wstream *ws = u->ws;
        ws->seq = u->seq;
        if (u->rotated || !ws->resident || !u->base_id) {
            ws->base_id = ws->dict_id = 0;
            continue;
        }
        ws->base_id = u->base_id;
        ws->dict_id = u->dict_id;
        ws->base_seq = u->base_seq;
        memcpy(ws->dict_n, u->dict_n, sizeof(ws->dict_n));
    }
}

static sqlite3_stmt *wst(pfr_store *s, enum wstmt which)
{
    struct writer *w = s->w;
    if (!w->st[which])
        w->st[which] = pfr_st_prepare(&s->sql, wsql[which]);
    if (w->st[which]) {
        sqlite3_reset(w->st[which]);
        sqlite3_clear_bindings(w->st[which]);
    }
    return w->st[which];
}

static int db_err(pfr_store *s)
{
    int e = pfr_st_db_err(&s->sql);
    return e ? e : -EIO;
}

/* ---- mapping a profile into the stream's tables ---- */
static int64_t intern_str(struct wstream *s, const char *str)
{
    return pfr_st_ktab_intern(&s->tabs.t[T_STR], str, strlen(str), NULL);
}

static int mark_used(struct wstream *s, int k, uint32_t g, bool *first)
{
    size_t n = s->tabs.t[k].n, cap = s->cap_used[k];
    if (n > cap) {
        if (VEC_RESERVE(s->used[k], cap, n))
            return -ENOMEM;
        /* New slots start at 0 ("never used"); seq starts at 1. */
        memset(s->used[k] + s->cap_used[k], 0, (cap - s->cap_used[k]) * sizeof(uint32_t));
        s->cap_used[k] = cap;
    }
    *first = s->used[k][g] != s->seq;
    s->used[k][g] = s->seq;
    return 0;
}

/* When entry i was last used (0 = never or unknown). */
static uint32_t last_used(const struct wstream *s, int k, uint32_t i)
{
    return i < s->cap_used[k] ? s->used[k][i] : 0;
}

/* 128-bit content fingerprints of locations: two lanes. Identical content always matches;
 * different content matches only if a string hash or both lanes collide, which we accept
 * instead of comparing strings (that comparison was the writer's main cost: cache misses in our
 * tables). */

/* A string's fingerprint from its 64-bit content hash (pfr_string_hash, which the profile keeps
 * for each string): the second lane only spreads bits, so two strings collide when their 64-bit
 * hashes do (about n^2 / 2^65 for n distinct strings of a stream). */
static struct fp fp_str(uint64_t h)
{
    return (struct fp){h, pfr_mix64(h ^ 0x243f6a8885a308d3ull)};
}

static struct fp own_str_fp(const struct wstream *s, uint32_t i)
{
    size_t len;
    const char *str = (const char *)ktab_key(&s->tabs.t[T_STR], i, &len);
    return fp_str(pfr_string_hash(str, len));
}

/* Order-dependent combination; the parts are already well-mixed hashes (fp_int mixes ints). */
static struct fp fp_add(struct fp h, struct fp v)
{
    h.a = ((h.a << 23 | h.a >> 41) ^ v.a) * 0x9e3779b97f4a7c15ull;
    h.b = ((h.b << 31 | h.b >> 33) ^ v.b) * 0xff51afd7ed558ccdull;
    return h;
}

static struct fp fp_int(uint64_t v)
{
    return (struct fp){pfr_mix64(v), pfr_mix64(~v * 0x9e3779b97f4a7c15ull)};
}

/* The finished fingerprint (a last mix so the map's key bits are well spread). */
static struct fp fp_done(struct fp h)
{
    return (struct fp){pfr_mix64(h.a), pfr_mix64(h.b)};
}

/* Fingerprint of a location's content: the same from the profile's frames and from our tables. */
static struct fp loc_fp(struct fp module, uint64_t addr, uint32_t nlines)
{
    struct fp h = {0x70667221, 0x6c6f6321};
    return fp_add(fp_add(fp_add(h, fp_int(addr)), module), fp_int(nlines));
}

static struct fp line_fp(struct fp h, struct fp name, struct fp file, int64_t line)
{
    return fp_add(fp_add(fp_add(h, name), file), fp_int((uint64_t)line));
}

/* String i's fingerprint from strs (each string's, computed once); an index past the strings
 * (no chain the decoder accepts has one) gets one no string has. */
static struct fp str_fp_of(const struct wstream *s, const struct fp *strs, uint32_t i)
{
    return i < s->tabs.t[T_STR].n ? strs[i] : fp_int(UINT64_MAX);
}

static struct fp own_loc_fp(const struct wstream *s, const struct fp *strs, uint32_t loc)
{
    size_t len;
    const struct nloc *l = (const struct nloc *)ktab_key(&s->tabs.t[T_LOC], loc, &len);
    const struct nline *ln = (const struct nline *)(l + 1);
    struct fp h = loc_fp(str_fp_of(s, strs, l->module), l->addr, l->nlines);
    for (uint32_t i = 0; i < l->nlines; i++) {
        const struct nfunc *f =
            (const struct nfunc *)ktab_key(&s->tabs.t[T_FUNC], ln[i].func, &len);
        h = line_fp(h, str_fp_of(s, strs, f->name), str_fp_of(s, strs, f->file), ln[i].line);
    }
    return fp_done(h);
}

static uint32_t fpmap_get(const struct wstream *s, struct fp h)
{
    if (!s->fpm)
        return UINT32_MAX;
    size_t j = h.a & s->fpm_mask;
    while (s->fpm[j].used) {
        if (s->fpm[j].a == h.a && s->fpm[j].b == h.b)
            return s->fpm[j].loc;
        j = (j + 1) & s->fpm_mask;
    }
    return UINT32_MAX;
}

/* Room for n entries in the fingerprint map (at most half full), rehashed once. */
static int fpmap_reserve(struct wstream *s, size_t n)
{
    size_t cap = s->fpm ? s->fpm_mask + 1 : 0;
    if (n * 2 <= cap)
        return 0;
    size_t ncap = cap ? cap : 1024;
    while (n * 2 > ncap)
        ncap *= 2;
    struct fpmap_ent *ne = calloc(ncap, sizeof(*ne));
    if (!ne)
        return -ENOMEM;
    for (size_t i = 0; s->fpm && i <= s->fpm_mask; i++) {
        if (!s->fpm[i].used)
            continue;
        size_t j = s->fpm[i].a & (ncap - 1);
        while (ne[j].used)
            j = (j + 1) & (ncap - 1);
        ne[j] = s->fpm[i];
    }
    free(s->fpm);
    s->fpm = ne;
    s->fpm_mask = ncap - 1;
    return 0;
}

static int fpmap_put(struct wstream *s, struct fp h, uint32_t loc)
{
    if (fpmap_reserve(s, s->fpm_n + 1))
        return -ENOMEM;
    size_t j = h.a & s->fpm_mask;
    while (s->fpm[j].used) {
        if (s->fpm[j].a == h.a && s->fpm[j].b == h.b)
            return 0;
        j = (j + 1) & s->fpm_mask;
    }
    s->fpm[j] = (struct fpmap_ent){h.a, h.b, loc, 1};
    s->fpm_n++;
    return 0;
}

/* The fingerprint map from the stream's locations: each string hashed once (a location's names
 * are mostly shared with others), the map sized once. */
static int locfp_rebuild(struct wstream *s)
{
    if (s->fpm)
        memset(s->fpm, 0, (s->fpm_mask + 1) * sizeof(*s->fpm));
    s->fpm_n = 0;
    uint32_t nloc = s->tabs.t[T_LOC].n, nstr = s->tabs.t[T_STR].n;
    if (fpmap_reserve(s, nloc))
        return -ENOMEM;
    if (nloc == 0)
        return 0;
    struct fp *strs = malloc(((size_t)nstr + 1) * sizeof(*strs)); /* + 1: never malloc(0) */
    if (!strs)
        return -ENOMEM;
    for (uint32_t i = 0; i < nstr; i++)
        strs[i] = own_str_fp(s, i);
    int rc = 0;
    for (uint32_t i = 0; i < nloc && rc == 0; i++)
        rc = fpmap_put(s, own_loc_fp(s, strs, i), i);
    free(strs);
    return rc;
}

/* The frames of profile location l into w->frames; their count, or a negative errno. */
static int64_t loc_frames(struct writer *w, const pfr_profile *p, uint32_t l)
{
    size_t nf = pfr_profile_location_frames(p, l, w->frames, w->cap_frames);
    if (nf > w->cap_frames) {
        if (VEC_RESERVE(w->frames, w->cap_frames, nf))
            return -ENOMEM;
        nf = pfr_profile_location_frames(p, l, w->frames, w->cap_frames);
    }
    return (int64_t)nf;
}

/* What a location is, from its frames in w->frames. */
struct loc_view {
    uint64_t addr;
    const char *module;
    uint32_t nlines;
};

static struct loc_view loc_view(const struct writer *w, size_t nf)
{
    const pfr_frame *fr = w->frames;
    struct loc_view v = {nf ? fr[0].address : 0, nf && fr[0].module ? fr[0].module : "",
                         (uint32_t)nf};
    /* An unsymbolized location reads as one empty frame: store it without lines. */
    if (nf == 1 && !fr[0].function[0] && !fr[0].file[0] && fr[0].line == 0)
        v.nlines = 0;
    return v;
}

/* Fingerprint of profile location l, whose frames are in w->frames: from the string hashes the
 * profile already holds, so no string is hashed here. */
static int frames_fp(struct writer *w, const pfr_profile *p, uint32_t l, struct loc_view v,
                     struct fp *out)
{
    uint64_t module;
    size_t nf = pfr_profile_location_hashes(p, l, w->fhash, w->cap_fhash, &module);
    if (nf > w->cap_fhash) {
        if (VEC_RESERVE(w->fhash, w->cap_fhash, nf))
            return -ENOMEM;
        nf = pfr_profile_location_hashes(p, l, w->fhash, w->cap_fhash, &module);
    }
    struct fp h = loc_fp(fp_str(module), v.addr, v.nlines);
    for (uint32_t i = 0; i < v.nlines; i++)
        h = line_fp(h, fp_str(w->fhash[i].function), fp_str(w->fhash[i].file), w->frames[i].line);
    *out = fp_done(h);
    return 0;
}

/* A location the fingerprint map does not know: intern it by content. */
static int64_t loc_slow(struct writer *w, struct wstream *s, struct loc_view v, struct fp h)
{
    const pfr_frame *fr = w->frames;
    struct nloc loc = {.addr = v.addr, .nlines = v.nlines};
    int64_t m = intern_str(s, v.module);
    if (m < 0)
        return m;
    loc.module = (uint32_t)m;
    w->tmp.len = 0;
    pfr_buf_put(&w->tmp, &loc, sizeof(loc));
    for (uint32_t i = 0; i < v.nlines; i++) {
        int64_t name = intern_str(s, fr[i].function);
        int64_t file = intern_str(s, fr[i].file);
        if (name < 0 || file < 0)
            return -ENOMEM;
        struct nfunc f = {(uint32_t)name, (uint32_t)file};
        int64_t fi = pfr_st_ktab_intern(&s->tabs.t[T_FUNC], &f, sizeof(f), NULL);
        if (fi < 0)
            return fi;
        struct nline ln = {(uint32_t)fi, 0, fr[i].line};
        pfr_buf_put(&w->tmp, &ln, sizeof(ln));
    }
    if (pfr_buf_err(&w->tmp))
        return pfr_buf_err(&w->tmp);
    int64_t x = pfr_st_ktab_intern(&s->tabs.t[T_LOC], w->tmp.data, w->tmp.len, NULL);
    if (x >= 0 && fpmap_put(s, h, (uint32_t)x))
        return -ENOMEM;
    return x;
}

/* Map every location the samples use: fingerprints first, then the lookups, prefetching the
 * map slots a few locations ahead (the lookups are cache misses; this overlaps them). */
static int map_locations(struct writer *w, struct wstream *s, const pfr_profile *p, size_t nloc)
{
    enum { AHEAD = 8 };
    size_t n = 0;
    for (size_t l = 0; l < nloc; l++)
        n += w->locmap[l] == UINT32_MAX;
    if (VEC_RESERVE(w->lfp, w->cap_lfp, n ? n : 1) || VEC_RESERVE(w->lidx, w->cap_lidx, n ? n : 1))
        return -ENOMEM;
    n = 0;
    for (uint32_t l = 0; l < nloc; l++) {
        if (w->locmap[l] != UINT32_MAX)
            continue;
        int64_t nf = loc_frames(w, p, l);
        if (nf < 0)
            return (int)nf;
        if (frames_fp(w, p, l, loc_view(w, (size_t)nf), &w->lfp[n]))
            return -ENOMEM;
        w->lidx[n++] = l;
    }
    for (size_t k = 0; k < n; k++) {
        if (k + AHEAD < n && s->fpm)
            __builtin_prefetch(&s->fpm[w->lfp[k + AHEAD].a & s->fpm_mask]);
        uint32_t known = fpmap_get(s, w->lfp[k]);
        if (known == UINT32_MAX || known >= s->tabs.t[T_LOC].n) {
            int64_t nf = loc_frames(w, p, w->lidx[k]);
            int64_t x = nf < 0 ? nf : loc_slow(w, s, loc_view(w, (size_t)nf), w->lfp[k]);
            if (x < 0)
                return (int)x;
            known = (uint32_t)x;
        }
        w->locmap[w->lidx[k]] = known + 1;
    }
    return 0;
}

static int nlabel_cmp(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(struct nlabel));
}

static bool same_labels(const pfr_label *a, const pfr_label *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].key != b[i].key || a[i].str != b[i].str || a[i].num != b[i].num ||
            a[i].unit != b[i].unit)
            return false;
    return true;
}

static int64_t map_labels(struct writer *w, struct wstream *s, const pfr_profile *p, size_t i)
{
    const pfr_label *labels;
    size_t n = pfr_profile_sample_labels(p, i, &labels);
    for (size_t j = 0; j < w->nlsc; j++)
        if (w->lsc[j].n == n && same_labels(w->lsc[j].labels, labels, n))
            return w->lsc[j].lset;
    if (VEC_RESERVE(w->labs, w->cap_labs, n ? n : 1))
        return -ENOMEM;
    for (size_t j = 0; j < n; j++) {
        struct nlabel *l = &w->labs[j];
        memset(l, 0, sizeof(*l));
        int64_t key = intern_str(s, labels[j].key ? labels[j].key : "");
        int64_t v = intern_str(s, labels[j].str    ? labels[j].str
                                  : labels[j].unit ? labels[j].unit
                                                   : "");
        if (key < 0 || v < 0)
            return -ENOMEM;
        l->key = (uint32_t)key;
        if (labels[j].str) {
            l->str = (uint32_t)v;
        } else {
            l->str = LABEL_NUM;
            l->num = labels[j].num;
            l->unit = (uint32_t)v;
        }
    }
    /* Label sets are sets: one order for all. */
    qsort(w->labs, n, sizeof(*w->labs), nlabel_cmp);
    int64_t x = pfr_st_ktab_intern(&s->tabs.t[T_LSET], w->labs, n * sizeof(*w->labs), NULL);
    if (x >= 0 && n <= 4) {
        struct lscache_ent *e = &w->lsc[w->lsc_next];
        w->lsc_next = (w->lsc_next + 1) % LSCACHE;
        if (w->nlsc < LSCACHE)
            w->nlsc++;
        e->n = n;
        if (n)
            memcpy(e->labels, labels, n * sizeof(*labels));
        e->lset = (uint32_t)x;
    }
    return x;
}

/* Map every sample into the stream's tables; fills w->cs. *nnew gets the number of the chunk's
 * distinct stacks that are not in the dictionary, *ndistinct the distinct stacks. */
static int map_profile(struct writer *w, struct wstream *s, const pfr_profile *p, size_t *nnew,
                       size_t *ndistinct)
{
    size_t nloc = pfr_profile_num_locations(p), ns = pfr_profile_num_samples(p);
    if (VEC_RESERVE(w->locmap, w->cap_locmap, nloc ? nloc : 1) ||
        VEC_RESERVE(w->cs, w->cap_cs, ns ? ns : 1))
        return -ENOMEM;
    memset(w->locmap, 0, nloc * sizeof(*w->locmap));
    w->nlsc = w->lsc_next = 0; /* label pointers are the profile's */
    *nnew = *ndistinct = 0;
    /* The locations the samples use (UINT32_MAX: to map). */
    for (size_t i = 0; i < ns; i++) {
        size_t n;
        const uint32_t *locs = pfr_profile_sample_locations(p, i, &n);
        for (size_t j = 0; j < n; j++) {
            if (locs[j] >= nloc)
                return -EINVAL;
            w->locmap[locs[j]] = UINT32_MAX;
        }
    }
    int rc = map_locations(w, s, p, nloc);
    if (rc)
        return rc;
    for (size_t i = 0; i < ns; i++) {
        size_t n;
        const uint32_t *locs = pfr_profile_sample_locations(p, i, &n);
        w->tmp2.len = 0;
        if (pfr_buf_reserve(&w->tmp2, n * sizeof(uint32_t) + 1))
            return pfr_buf_err(&w->tmp2);
        uint32_t *stack = (uint32_t *)w->tmp2.data;
        for (size_t j = 0; j < n; j++)
            stack[j] = w->locmap[locs[j]] - 1;
        int64_t st = pfr_st_ktab_intern(&s->tabs.t[T_STACK], stack, n * sizeof(uint32_t), NULL);
        if (st < 0)
            return (int)st;
        int64_t ls = map_labels(w, s, p, i);
        if (ls < 0)
            return (int)ls;
        bool first;
        if ((rc = mark_used(s, T_STACK, (uint32_t)st, &first)) != 0)
            return rc;
        if (first) {
            (*ndistinct)++;
            if ((uint32_t)st >= s->dict_n[T_STACK])
                (*nnew)++;
        }
        if ((rc = mark_used(s, T_LSET, (uint32_t)ls, &first)) != 0)
            return rc;
        w->cs[i] = (struct csample){(uint32_t)st, (uint32_t)ls, (uint32_t)i};
    }
    return 0;
}

/* ---- a new dictionary: keep what recent chunks used, renumber densely ---- */
struct compact_maps {
    uint32_t *m[T_N]; /* old index -> new index + 1, 0 = dropped */
};

static void compact_maps_free(struct compact_maps *cm)
{
    for (int k = 0; k < T_N; k++)
        free(cm->m[k]);
}

static uint32_t remap(const struct compact_maps *cm, int k, uint32_t old)
{
    return cm->m[k][old] - 1;
}

/* The chunks whose entries a new base keeps: the last DICT_WINDOW of the chain, those that started
 * within DICT_WINDOW_NS of the newest (a chain of many streams keeps its DICT_WINDOW chunks, a
 * few seconds of them; one stream's 10 s chunks keep a minute). */
static uint32_t dict_window(const struct wstream *s)
{
    int64_t now = s->starts[s->seq % DICT_WINDOW];
    uint32_t k = 1;
    while (k < DICT_WINDOW && k < s->seq &&
           s->starts[(s->seq - k) % DICT_WINDOW] > now - DICT_WINDOW_NS)
        k++;
    return k;
}

static int compact(struct wstream *s, const uint32_t *extra_strs, size_t nextra,
                   struct compact_maps *cm)
{
    struct tabs *t = &s->tabs;
    uint32_t window = dict_window(s);
    memset(cm, 0, sizeof(*cm));
    for (int k = 0; k < T_N; k++) {
        cm->m[k] = calloc(t->t[k].n + 1, sizeof(uint32_t));
        if (!cm->m[k])
            return -ENOMEM;
    }
    /* Mark: roots are recently used stacks and label sets. */
    for (uint32_t i = 0; i < t->t[T_STACK].n; i++) {
        uint32_t u = last_used(s, T_STACK, i);
        if (!u || s->seq - u >= window)
            continue;
        cm->m[T_STACK][i] = 1;
        size_t len;
        const uint32_t *locs = (const uint32_t *)ktab_key(&t->t[T_STACK], i, &len);
        for (size_t j = 0; j < len / 4; j++)
            cm->m[T_LOC][locs[j]] = 1;
    }
    for (uint32_t i = 0; i < t->t[T_LOC].n; i++) {
        if (!cm->m[T_LOC][i])
            continue;
        size_t len;
        const struct nloc *l = (const struct nloc *)ktab_key(&t->t[T_LOC], i, &len);
        const struct nline *ln = (const struct nline *)(l + 1);
        cm->m[T_STR][l->module] = 1;
        for (uint32_t j = 0; j < l->nlines; j++)
            cm->m[T_FUNC][ln[j].func] = 1;
    }
    for (uint32_t i = 0; i < t->t[T_FUNC].n; i++) {
        if (!cm->m[T_FUNC][i])
            continue;
        size_t len;
        const struct nfunc *f = (const struct nfunc *)ktab_key(&t->t[T_FUNC], i, &len);
        cm->m[T_STR][f->name] = 1;
        cm->m[T_STR][f->file] = 1;
    }
    for (uint32_t i = 0; i < t->t[T_LSET].n; i++) {
        uint32_t u = last_used(s, T_LSET, i);
        if (!u || s->seq - u >= window)
            continue;
        cm->m[T_LSET][i] = 1;
        size_t len;
        const struct nlabel *l = (const struct nlabel *)ktab_key(&t->t[T_LSET], i, &len);
        for (size_t j = 0; j < len / sizeof(*l); j++) {
            cm->m[T_STR][l[j].key] = 1;
            cm->m[T_STR][l[j].str == LABEL_NUM ? l[j].unit : l[j].str] = 1;
        }
    }
    cm->m[T_STR][0] = 1;
    for (size_t i = 0; i < nextra; i++)
        cm->m[T_STR][extra_strs[i]] = 1;

    /* Sweep in dependency order, rewriting references. */
    struct tabs nt = {0};
    pfr_buf b = {0};
    uint32_t *nused[T_N] = {0};
    size_t ncap[T_N] = {0};
    int rc = 0;
    for (int k = 0; k < T_N && !rc; k++) {
        uint32_t next = 0;
        for (uint32_t i = 0; i < t->t[k].n && !rc; i++) {
            if (!cm->m[k][i])
                continue;
            size_t len;
            const uint8_t *key = ktab_key(&t->t[k], i, &len);
            b.len = 0;
            pfr_buf_put(&b, key, len);
            if (pfr_buf_err(&b)) {
                rc = pfr_buf_err(&b);
                break;
            }
            if (k == T_FUNC) {
                struct nfunc *f = (struct nfunc *)b.data;
                f->name = remap(cm, T_STR, f->name);
                f->file = remap(cm, T_STR, f->file);
            } else if (k == T_LOC) {
                struct nloc *l = (struct nloc *)b.data;
                struct nline *ln = (struct nline *)(l + 1);
                l->module = remap(cm, T_STR, l->module);
                for (uint32_t j = 0; j < l->nlines; j++)
                    ln[j].func = remap(cm, T_FUNC, ln[j].func);
            } else if (k == T_STACK) {
                uint32_t *locs = (uint32_t *)b.data;
                for (size_t j = 0; j < len / 4; j++)
                    locs[j] = remap(cm, T_LOC, locs[j]);
            } else if (k == T_LSET) {
                struct nlabel *l = (struct nlabel *)b.data;
                for (size_t j = 0; j < len / sizeof(*l); j++) {
                    l[j].key = remap(cm, T_STR, l[j].key);
                    if (l[j].str == LABEL_NUM)
                        l[j].unit = remap(cm, T_STR, l[j].unit);
                    else
                        l[j].str = remap(cm, T_STR, l[j].str);
                }
            }
            int64_t x = pfr_st_ktab_add(&nt.t[k], b.data, b.len);
            if (x < 0) {
                rc = (int)x;
                break;
            }
            if (k == T_STACK || k == T_LSET) {
                if (VEC_RESERVE(nused[k], ncap[k], (size_t)x + 1)) {
                    rc = -ENOMEM;
                    break;
                }
                nused[k][x] = last_used(s, k, i);
            }
            cm->m[k][i] = ++next;
        }
    }
    pfr_buf_free(&b);
    if (rc) {
        pfr_st_tabs_free(&nt);
        for (int k = 0; k < T_N; k++)
            free(nused[k]);
        return rc;
    }
    pfr_st_tabs_free(&s->tabs);
    s->tabs = nt;
    if (locfp_rebuild(s)) {
        pfr_st_tabs_free(&s->tabs);
        memset(s->dict_n, 0, sizeof(s->dict_n));
        for (int k = 0; k < T_N; k++)
            free(nused[k]);
        return -ENOMEM;
    }
    for (int k = 0; k < T_N; k++) {
        if (nused[k] && ncap[k] > nt.t[k].n)
            memset(nused[k] + nt.t[k].n, 0, (ncap[k] - nt.t[k].n) * sizeof(uint32_t));
        free(s->used[k]);
        s->used[k] = nused[k];
        s->cap_used[k] = ncap[k];
        s->dict_n[k] = nt.t[k].n;
    }
    return 0;
}

/* ---- the chunk's delta: pending entries it uses, renumbered after dict_n ---- */
static int64_t need(struct writer *w, struct wstream *s, int k, uint32_t g)
{
    if (g < s->dict_n[k])
        return g;
    size_t idx = g - s->dict_n[k];
    size_t npend = s->tabs.t[k].n - s->dict_n[k];
    if (npend > w->cap_pend[k]) {
        size_t c1 = w->cap_pend[k], c2 = w->cap_pend[k];
        if (VEC_RESERVE(w->pend[k], c1, npend) || VEC_RESERVE(w->pend_stamp[k], c2, npend))
            return -ENOMEM;
        memset(w->pend_stamp[k] + w->cap_pend[k], 0, (c2 - w->cap_pend[k]) * sizeof(uint32_t));
        w->cap_pend[k] = c1 < c2 ? c1 : c2;
    }
    if (w->pend_stamp[k][idx] == w->stamp)
        return (int64_t)s->dict_n[k] + w->pend[k][idx];
    size_t len;
    const uint8_t *key = ktab_key(&s->tabs.t[k], g, &len);
    int64_t x;
    switch (k) {
    case T_STR:
        x = pfr_st_ktab_add(&w->local.t[k], key, len);
        break;
    case T_FUNC: {
        struct nfunc f;
        memcpy(&f, key, sizeof(f));
        int64_t a = need(w, s, T_STR, f.name), b = need(w, s, T_STR, f.file);
        if (a < 0 || b < 0)
            return -ENOMEM;
        f.name = (uint32_t)a;
        f.file = (uint32_t)b;
        x = pfr_st_ktab_add(&w->local.t[k], &f, sizeof(f));
        break;
    }
    case T_LOC: {
        w->tmp.len = 0;
        pfr_buf_put(&w->tmp, key, len);
        if (pfr_buf_err(&w->tmp))
            return pfr_buf_err(&w->tmp);
        struct nloc *l = (struct nloc *)w->tmp.data;
        struct nline *ln = (struct nline *)(l + 1);
        int64_t m = need(w, s, T_STR, l->module);
        if (m < 0)
            return m;
        l->module = (uint32_t)m;
        for (uint32_t j = 0; j < l->nlines; j++) {
            int64_t f = need(w, s, T_FUNC, ln[j].func);
            if (f < 0)
                return f;
            ln[j].func = (uint32_t)f;
        }
        x = pfr_st_ktab_add(&w->local.t[k], w->tmp.data, w->tmp.len);
        break;
    }
    case T_STACK: {
        w->tmp2.len = 0;
        pfr_buf_put(&w->tmp2, key, len);
        if (pfr_buf_err(&w->tmp2))
            return pfr_buf_err(&w->tmp2);
        uint32_t *locs = (uint32_t *)w->tmp2.data;
        for (size_t j = 0; j < len / 4; j++) {
            int64_t l = need(w, s, T_LOC, locs[j]);
            if (l < 0)
                return l;
            locs[j] = (uint32_t)l;
        }
        x = pfr_st_ktab_add(&w->local.t[k], w->tmp2.data, w->tmp2.len);
        break;
    }
    default: {
        w->tmp.len = 0;
        pfr_buf_put(&w->tmp, key, len);
        if (pfr_buf_err(&w->tmp))
            return pfr_buf_err(&w->tmp);
        struct nlabel *l = (struct nlabel *)w->tmp.data;
        for (size_t j = 0; j < len / sizeof(*l); j++) {
            int64_t a = need(w, s, T_STR, l[j].key);
            int64_t b = need(w, s, T_STR, l[j].str == LABEL_NUM ? l[j].unit : l[j].str);
            if (a < 0 || b < 0)
                return -ENOMEM;
            l[j].key = (uint32_t)a;
            if (l[j].str == LABEL_NUM)
                l[j].unit = (uint32_t)b;
            else
                l[j].str = (uint32_t)b;
        }
        x = pfr_st_ktab_add(&w->local.t[k], w->tmp.data, w->tmp.len);
        break;
    }
    }
    if (x < 0)
        return x;
    w->pend[k][idx] = (uint32_t)x;
    w->pend_stamp[k][idx] = w->stamp;
    return (int64_t)s->dict_n[k] + x;
}

static int cs_cmp(const void *a, const void *b)
{
    const struct csample *x = a, *y = b;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    if (x->lset != y->lset)
        return x->lset < y->lset ? -1 : 1;
    return 0;
}

/* Encode the chunk (w->raw) from w->cs; fills w->totals. */
static int encode_chunk(struct writer *w, struct wstream *s, const pfr_profile *p, size_t ns,
                        uint32_t ptype, uint32_t punit)
{
    size_t nt = pfr_profile_num_sample_types(p);
    if (++w->stamp == 0) {
        for (int k = 0; k < T_N; k++)
            if (w->pend_stamp[k])
                memset(w->pend_stamp[k], 0, w->cap_pend[k] * sizeof(uint32_t));
        w->stamp = 1;
    }
    pfr_st_tabs_reset(&w->local);
    for (size_t i = 0; i < ns; i++) {
        int64_t st = need(w, s, T_STACK, w->cs[i].stack);
        int64_t ls = need(w, s, T_LSET, w->cs[i].lset);
        if (st < 0 || ls < 0)
            return st < 0 ? (int)st : (int)ls;
        w->cs[i].stack = (uint32_t)st;
        w->cs[i].lset = (uint32_t)ls;
    }
    int64_t pt = need(w, s, T_STR, ptype), pu = need(w, s, T_STR, punit);
    if (pt < 0 || pu < 0)
        return -ENOMEM;
    qsort(w->cs, ns, sizeof(*w->cs), cs_cmp);
    if (VEC_RESERVE(w->cstack, w->cap_col, ns ? ns : 1) ||
        VEC_RESERVE(w->clset, w->cap_col2, ns ? ns : 1) ||
        VEC_RESERVE(w->vals, w->cap_vals, ns * nt + 1) || VEC_RESERVE(w->totals, w->cap_totals, nt))
        return -ENOMEM;
    /* Samples whose stacks became equal in our tables (same frames) are summed. */
    size_t n = 0;
    for (size_t i = 0; i < ns; i++) {
        const int64_t *v = pfr_profile_sample_values(p, w->cs[i].src);
        if (n && w->cstack[n - 1] == w->cs[i].stack && w->clset[n - 1] == w->cs[i].lset) {
            for (size_t t = 0; t < nt; t++)
                w->vals[(n - 1) * nt + t] =
                    (int64_t)((uint64_t)w->vals[(n - 1) * nt + t] + (uint64_t)v[t]);
            continue;
        }
        w->cstack[n] = w->cs[i].stack;
        w->clset[n] = w->cs[i].lset;
        memcpy(&w->vals[n * nt], v, nt * sizeof(int64_t));
        n++;
    }
    const char *unused;
    struct chunk_body body = {
        .time_nanos = pfr_profile_time_nanos(p),
        .duration = pfr_profile_duration_nanos(p),
        .period = pfr_profile_period(p, &unused, &unused),
        .period_type = (uint32_t)pt,
        .period_unit = (uint32_t)pu,
        .ntypes = (uint32_t)nt,
        .nsamples = n,
        .stack = w->cstack,
        .lset = w->clset,
        .values = w->vals,
    };
    pfr_st_sum_totals(w->vals, n, (uint32_t)nt, w->totals);
    w->raw.len = 0;
    pfr_st_chunk_encode(&w->raw, s->dict_n, &w->local, &body);
    return pfr_buf_err(&w->raw);
}

/* ---- eviction ---- */
static int used_bytes(pfr_store *s, uint64_t *used, uint64_t *pages, uint64_t *free_pages)
{
    sqlite3_stmt *a = wst(s, W_PAGE_COUNT), *b = wst(s, W_FREELIST);
    if (!a || !b)
        return db_err(s);
    int rc = sqlite3_step(a);
    int rc2 = sqlite3_step(b);
    if (rc != SQLITE_ROW || rc2 != SQLITE_ROW) {
        sqlite3_reset(a);
        sqlite3_reset(b);
        return db_err(s);
    }
    *pages = (uint64_t)sqlite3_column_int64(a, 0);
    *free_pages = (uint64_t)sqlite3_column_int64(b, 0);
    sqlite3_reset(a);
    sqlite3_reset(b);
    *used = (*pages - (*free_pages < *pages ? *free_pages : *pages)) * s->sql.page_size;
    return 0;
}

/* Eviction deleted these rows: the streams that relied on them start over. */
static void forget_chain(struct writer *w, int64_t base_id)
{
    for (size_t i = 0; i < w->nws; i++)
        if (w->ws[i]->base_id == base_id)
            w->ws[i]->base_id = w->ws[i]->dict_id = 0;
}

/* Is ids[i] protect, or an id ids lists before it (eviction's lists repeat ids)? */
static bool passed_over(const int64_t *ids, size_t i, int64_t protect)
{
    bool dup = ids[i] == protect;
    for (size_t j = 0; j < i && !dup; j++)
        dup = ids[j] == ids[i];
    return dup;
}

static int delete_orphans(pfr_store *s, const int64_t *ids, size_t n, enum wstmt which,
                          int64_t protect)
{
    for (size_t i = 0; i < n; i++) {
        if (passed_over(ids, i, protect))
            continue;
        sqlite3_stmt *st = wst(s, which);
        if (!st)
            return db_err(s);
        sqlite3_bind_int64(st, 1, ids[i]);
        int rc = pfr_st_step_done(st);
        if (rc)
            return rc;
        if (sqlite3_changes(s->sql.db) > 0 && which == W_DEL_DICT)
            forget_chain(s->w, ids[i]);
    }
    return 0;
}

/* What eviction knows across its batches of one transaction. */
struct evict_ctx {
    bool cursors_read;
    struct store_cursors cur; /* the consumers' cursors and set-aside chunks */
    bool for_disk;            /* count the chunks as given up for disk space */
    bool chains_apart; /* chains left without chunks: noted for orphan_step, not deleted at once */
    bool pins_read;
    struct store_pins pins; /* the pins in force (store_pins.c) */
    int64_t after;          /* chunks up to this id were looked at: pinned ones are passed */
    int after_tier;         /* of this tier (-1: any) */
};

static void evict_ctx_free(struct evict_ctx *x)
{
    pfr_st_pins_free(&x->pins);
    pfr_st_cursors_free(&x->cur);
}

/* Release pin i of x's (its row and the entry), counted in pins_released. */
static int pin_release(pfr_store *s, struct evict_ctx *x, size_t i)
{
    int rc = pfr_st_pins_delete(&s->sql, x->pins.v[i].id);
    if (rc && rc != -ENOENT)
        return rc;
    pfr_st_pins_drop(&x->pins, i);
    x->after = 0; /* what it kept may go now */
    return pfr_st_meta_add(&s->sql, "pins_released", 1);
}

/* The pins, read once per eviction: while they keep more than their budget (pins may reach into
 * the future and grow after they are made), the oldest automatic ones are released. */
static int pins_read(pfr_store *s, struct evict_ctx *x)
{
    x->pins_read = true;
    int rc = pfr_st_pins_load(&s->sql, &x->pins);
    if (rc || x->pins.n == 0)
        return rc;
    uint64_t total;
    long v;
    while ((rc = pfr_st_pins_bytes(&s->dict, &x->pins, &total)) == 0 && total > s->pin_max_bytes &&
           (v = pfr_st_pins_victim(&x->pins, false)) >= 0)
        if ((rc = pin_release(s, x, (size_t)v)) != 0)
            break;
    return rc;
}

/* The pages an append needs free past its rows' bytes, for the B-tree splits its inserts may make
 * (a leaf of the table and one of an index, each split in two). Four until the twelfth round of
 * issue 31: held free ahead of every append (as the slack below, which covers them), ~7 KB of the
 * scaled 200-service ring's history (its slack is now cap/256, 9.2 KB, not 16 KB). */
#define SPLIT_PAGES 2ull

/* Eviction frees a little more than asked (cap/256, SPLIT_PAGES pages to 4 MiB), so it runs every
 * so many appends, not at each; at least what an append needs free, so that the room made for a
 * transaction (room_estimate) holds its first append's splits. */
static uint64_t evict_slack(const pfr_store *s, uint64_t target)
{
    uint64_t slack = target / 256;
    if (slack < SPLIT_PAGES * s->sql.page_size)
        slack = SPLIT_PAGES * s->sql.page_size;
    if (slack > (4u << 20))
        slack = 4u << 20;
    return slack;
}

static int cursors(pfr_store *s, struct evict_ctx *x)
{
    if (x->cursors_read)
        return 0;
    int rc = pfr_st_cursors_read(s, &x->cur);
    x->cursors_read = rc == 0;
    return rc;
}

/* Each consumer's chunks given up past its cursor (counted by pfr_st_cursors_count_lost), into
 * its own counter, which its shipper reads (pfr_store_consumer_lost): the global lost_unshipped
 * counts a chunk once, past the smallest cursor; a consumer's own says what it never took. */
static int lost_commit(pfr_store *s, struct evict_ctx *x)
{
    int rc = 0;
    for (size_t i = 0; i < x->cur.n; i++) {
        struct store_consumer *c = &x->cur.v[i];
        char key[sizeof(STORE_LOST_KEY_PREFIX) + sizeof(c->name)];
        snprintf(key, sizeof(key), STORE_LOST_KEY_PREFIX "%s", c->name);
        if (!rc && c->lost)
            rc = pfr_st_meta_add(&s->sql, key, c->lost);
        c->lost = 0;
    }
    return rc;
}

/* The coarsest tier that has chunks: the only one eviction deletes from while finer ones may be
 * rolled up. */
static int top_tier(pfr_store *s, int *tier)
{
    sqlite3_stmt *st = wst(s, W_TOP_TIER);
    if (!st)
        return db_err(s);
    int rc = sqlite3_step(st);
    *tier = rc == SQLITE_ROW ? (int)sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return rc == SQLITE_ROW ? 0 : pfr_store_errno(rc);
}

/* The coarsest tier below the coarsest that has chunks, into *tier (left as it is when none has):
 * an append that still finds too little room after make_room's tries, or on a disk that bounds
 * the ring, deletes there (and then finer), since the coarsest tier's budget is make_room's (an
 * hour of ~1 KB deleted chunk by chunk for a ~144 KB base wiped a drifting ring's hours;
 * docs/benchmarks.md, "Retention, sixth round"; and a /dev/shm another program filled wiped
 * them again in the seventh). */
static int below_coarsest(pfr_store *s, int *tier)
{
    int64_t t = -1;
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT coalesce(max(tier), -1) FROM chunks WHERE tier < %d", *tier);
    int rc = pfr_st_query_int(&s->sql, sql, &t);
    if (!rc && t >= 0)
        *tier = (int)t;
    return rc;
}

/* The chunks a batch deletes: runs of consecutive ids of its tier (pinned chunks between them
 * stay; chunks of other tiers between them stay too, the deletes say the tier). */
struct evict_pick {
    int tier; /* -1: any */
    int64_t dicts[512], streams[512];
    int64_t run_from[512], run_to[512];
    size_t n, nruns;
    bool run_open;
    int64_t lost;
    uint64_t freed;
};

/* Pick the oldest chunks of k->tier not pinned, from x->after on, until over bytes or max_n. */
static int evict_pick(pfr_store *s, uint64_t over, size_t max_n, struct evict_ctx *x,
                      struct evict_pick *k)
{
    size_t seen;
    do {
        sqlite3_stmt *st = wst(s, k->tier < 0 ? W_OLDEST : W_OLDEST_TIER);
        if (!st)
            return db_err(s);
        sqlite3_bind_int64(st, 1, x->after);
        if (k->tier >= 0)
            sqlite3_bind_int64(st, 2, k->tier);
        int rc = SQLITE_DONE;
        seen = 0;
        while (k->freed < over && k->n < max_n && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(st, 0), stream = sqlite3_column_int64(st, 1);
            x->after = id;
            seen++;
            if (x->pins.n &&
                pfr_st_pins_protects(&x->pins, pfr_st_stream_get(&s->dict, stream),
                                     sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5))) {
                k->run_open = false;
                continue;
            }
            if (!k->run_open)
                k->run_from[k->nruns++] = id;
            k->run_open = true;
            k->run_to[k->nruns - 1] = id;
            k->streams[k->n] = stream;
            k->dicts[k->n] = sqlite3_column_int64(st, 2);
            k->freed += (uint64_t)sqlite3_column_int64(st, 3) + ROW_OVERHEAD;
            if (pfr_st_cursors_count_lost(&x->cur, id))
                k->lost++;
            k->n++;
        }
        sqlite3_reset(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return pfr_store_errno(rc);
    } while (seen > 0 && k->freed < over && k->n < max_n);
    return 0;
}

static int orphans_note(pfr_store *s, const int64_t *bases, size_t n, int64_t protect);

/* Delete the oldest chunks of a tier (-1: any) no pin keeps, at least over bytes of them in one
 * batch of at most max_n (<= 512), then the dictionary chains and streams left without chunks,
 * and count them: evicted, lost-unshipped when past a consumer's cursor, evicted_disk when for
 * the disk. When only pinned chunks are left (of any tier), the pins are the last thing left:
 * the oldest is released (automatic ones first) and eviction goes on. *n_out: chunks deleted, 0
 * when none is left. */
static int evict_batch(pfr_store *s, int tier, uint64_t over, size_t max_n, int64_t protect_base,
                       int64_t protect_stream, struct evict_ctx *x, size_t *n_out)
{
    *n_out = 0;
    int rc;
    if ((rc = cursors(s, x)) != 0)
        return rc;
    if (!x->pins_read && (rc = pins_read(s, x)) != 0)
        return rc;
    struct evict_pick *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->tier = tier;
    if (x->after_tier != tier) { /* chunks up to x->after were looked at in another tier */
        x->after = 0;
        x->after_tier = tier;
    }
    long v;
    while ((rc = evict_pick(s, over, max_n, x, k)) == 0 && k->n == 0 && tier < 0 &&
           (v = pfr_st_pins_victim(&x->pins, true)) >= 0)
        if ((rc = pin_release(s, x, (size_t)v)) != 0)
            break;
    for (size_t r = 0; !rc && r < k->nruns; r++) {
        for (int t = 0; t < 2 && !rc; t++) {
            sqlite3_stmt *d = wst(s, t ? W_DEL_DATA : W_DEL_CHUNKS);
            if (!d) {
                rc = db_err(s);
                break;
            }
            sqlite3_bind_int64(d, 1, k->run_from[r]);
            sqlite3_bind_int64(d, 2, k->run_to[r]);
            if (!t)
                sqlite3_bind_int64(d, 3, tier);
            rc = pfr_st_step_done(d);
        }
    }
    if (!rc && s->w && tier >= 0)
        pfr_st_retention_note(&s->w->ret, tier, -(int64_t)k->freed);
    else if (s->w)
        s->w->ret.measured = false; /* which tiers it took from: measured again */
    if (s->w && (rc || k->n))
        pfr_st_retention_coarse_note(&s->w->ret, tier, 0, false);
    size_t n = k->n;
    if (!rc && n > 0 &&
        ((rc = x->chains_apart ? orphans_note(s, k->dicts, n, protect_base)
                               : delete_orphans(s, k->dicts, n, W_DEL_DICT, protect_base)) != 0 ||
         (rc = delete_orphans(s, k->streams, n, W_DEL_STREAM, protect_stream)) != 0 ||
         (rc = pfr_st_meta_add(&s->sql, "evicted", (int64_t)n)) != 0 ||
         (k->lost && (rc = pfr_st_meta_add(&s->sql, "lost_unshipped", k->lost)) != 0) ||
         (rc = lost_commit(s, x)) != 0 ||
         (x->for_disk && (rc = pfr_st_meta_add(&s->sql, "evicted_disk", (int64_t)n)) != 0)))
        n = 0;
    free(k);
    *n_out = rc ? 0 : n;
    return rc;
}

/* Make room for need bytes: delete the oldest chunks (and the dictionary chains and streams left
 * without chunks) until the pages in use plus need fit the database's target: its share of the
 * cap, or less when the disk's free space is short of the reserve (pfr_st_space_plan). Deleted
 * pages go to SQLite's freelist and the next inserts reuse them, so the file stops growing. */
static int evict(pfr_store *s, uint64_t need_bytes, uint64_t est_bytes, int64_t protect_base,
                 int64_t protect_stream)
{
    struct writer *w = s->w;
    /* Within a transaction, measure pages only when the estimated room is used up (measuring
     * is a good part of a small append's cost). est_bytes over-counts a chunk's pages, but not
     * always: when the disk bounds the ring, measure at every chunk, since a batch that outran
     * the estimate would grow the file before evicting and commit_fits would refuse it. */
    if (!s->space.now.disk_bound && w->room >= need_bytes && w->room >= est_bytes) {
        w->room -= est_bytes;
        return 0;
    }
    uint64_t target = s->space.now.db_target, slack = evict_slack(s, target);
    struct evict_ctx x = {.for_disk = s->space.now.disk_bound};
    uint64_t used, pages, freep;
    int rc;
    uint64_t first = 0;
    for (;;) {
        if ((rc = used_bytes(s, &used, &pages, &freep)) != 0)
            break;
        if (!first)
            first = used;
        if (used + need_bytes <= target)
            break;
        size_t n;
        int tier;
        if ((rc = top_tier(s, &tier)) != 0)
            break;
        int top = tier;
        if (w->policy_evict_tier >= 0 && w->policy_evict_tier < tier)
            tier = w->policy_evict_tier;
        else if (w->policy_evict_tier < 0 && !s->tiers.off && tier == (int)s->tiers.n &&
                 (rc = below_coarsest(s, &tier)) != 0)
            break;
        if (!w->may_delete && !s->tiers.off && !s->space.now.disk_bound &&
            w->policy_evict_tier < 0) {
            /* The tiers' policy decides what goes (a roll-up, or the coarsest tier's oldest when
             * no tier is past its share): the transaction starts again with the room this append
             * lacked made first (roll-ups cannot run inside an append). Deleting the coarsest
             * tier here whenever a transaction took more than make_room's mean (a new base) cost
             * the scaled 50-service ring its 1 h tier in 4 days. */
            /* short by what this append takes past the room make_room was asked for (the
             * appends before it took more than the estimate too: a retry asked for only the
             * shortfall at the target found that room already free, and fell short again) */
            uint64_t want = used + need_bytes + slack;
            w->short_by =
                want > w->room_end ? want - w->room_end : used + need_bytes - target + slack;
            /* A chunk that starts a chain (its base the room it lacked): the streams rotate at
             * the clock's hour together, so the appends after it in this transaction are taken
             * to need as much (one more try each, and after three the appends delete: a gap of
             * the tier below the coarsest, shipper_ch_rollup) */
            if (!protect_base && w->txn_left > 1)
                w->short_by += (uint64_t)(w->txn_left - 1) * need_bytes;
            rc = -EAGAIN;
            break;
        }
        uint64_t over = used + need_bytes - target + slack;
        rc = evict_batch(s, tier, over, 512, protect_base, protect_stream, &x, &n);
        /* a tier below the coarsest that had only pinned chunks: the finer ones first */
        while (!rc && n == 0 && tier > 0 && tier < top && w->policy_evict_tier < 0)
            rc = evict_batch(s, --tier, over, 512, protect_base, protect_stream, &x, &n);
        if (!rc && n == 0) /* the coarsest tier is all pinned: any tier, then pins */
            rc = evict_batch(s, -1, over, 512, protect_base, protect_stream, &x, &n);
        if (rc)
            break;
        if (n == 0) { /* the chunks alone do not fit the cap, or the disk */
            rc = s->space.now.disk_bound ? -ENOSPC : -EFBIG;
            break;
        }
    }
    evict_ctx_free(&x);
    if (rc)
        return rc;
    w->txn_freed += first > used ? first - used : 0;
    w->room = used + est_bytes < target ? target - used - est_bytes : 0;
    return 0;
}

/* Give free pages past keep bytes (or all free pages: keep_used) back to the file system, in a
 * transaction of its own after the append: on a tight disk at most half the WAL's budget at a
 * time (or at_least pages: what a full disk's WAL lacks), since moving pages takes room in the
 * WAL. Best effort: the pages stay for reuse. */
static void shrink_step(pfr_store *s, bool keep_used, uint64_t at_least)
{
    uint64_t used, pages, freep;
    if (used_bytes(s, &used, &pages, &freep) != 0)
        return;
    uint64_t keep = keep_used ? used : s->space.now.db_target;
    keep += evict_slack(s, keep);
    if (pages * s->sql.page_size <= keep || freep == 0)
        return;
    uint64_t extra = pages - keep / s->sql.page_size;
    if (extra > freep)
        extra = freep;
    uint64_t step = s->space.now.wal_budget / 2 / s->sql.page_size;
    if (step < at_least)
        step = at_least;
    if (s->space.now.tight && extra > step)
        extra = step ? step : 1;
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%llu)", (unsigned long long)extra);
    pfr_st_exec(&s->sql, sql);
}

/* ---- streams ---- */
/* The writer's state of the chain of in's service and sample types at a tier (w->key gets in's
 * stream key): roll-ups write a chain of their own per tier (their stacks are the streams' over
 * hours, not their last minutes), so they neither bloat the live chain nor make it rebase. */
static struct wstream *wstream_get(pfr_store *s, const pfr_chunk_in *in, int tier, int *err)
{
    struct writer *w = s->w;
    *err = pfr_st_stream_encode(in->service, in->labels, in->nlabels, in->profile, &w->key, &w->lab,
                                &w->types);
    if (*err)
        return NULL;
    /* Length-prefixed parts, as stream keys: no service can be confused with another's types. */
    w->ikey.len = 0;
    pfr_buf_uvarint(&w->ikey, strlen(in->service));
    pfr_buf_put(&w->ikey, in->service, strlen(in->service));
    pfr_buf_uvarint(&w->ikey, w->types.len);
    pfr_buf_put(&w->ikey, w->types.data, w->types.len);
    if (tier > 0) {
        uint8_t t[2] = {0xff, (uint8_t)tier};
        pfr_buf_put(&w->ikey, t, sizeof(t));
    }
    if ((*err = pfr_buf_err(&w->ikey)) != 0)
        return NULL;
    if (w->nws >= MAX_WSTREAMS) {
        /* Very many streams over this handle's life: start over (each writes a dictionary). */
        for (size_t i = 0; i < w->nws; i++) {
            wstream_drop_tables(w, w->ws[i]);
            free(w->ws[i]);
        }
        w->nws = w->nundo = 0;
        w->undo_lost = true;
        w->ws_epoch++;
        pfr_st_ktab_reset(&w->keys);
    }
    bool added;
    int64_t i = pfr_st_ktab_intern(&w->keys, w->ikey.data, w->ikey.len, &added);
    if (i < 0) {
        *err = (int)i;
        return NULL;
    }
    if (added) {
        if (VEC_RESERVE(w->ws, w->cap_ws, w->nws + 1) ||
            !(w->ws[w->nws] = calloc(1, sizeof(struct wstream)))) {
            /* keys and ws must stay aligned: forget everything. */
            pfr_st_ktab_reset(&w->keys);
            for (size_t j = 0; j < w->nws; j++) {
                wstream_drop_tables(w, w->ws[j]);
                free(w->ws[j]);
            }
            w->nws = w->nundo = 0;
            w->undo_lost = true;
            w->ws_epoch++;
            *err = -ENOMEM;
            return NULL;
        }
        w->nws++;
    }
    struct wstream *ws = w->ws[i];
    ws->prev_lru = ws->lru;
    ws->lru = ++w->clock;
    w->cur = ws;
    /* Past the tables' bound, the tables of the streams expected to append last go. */
    drop_cold_tables(w, ws, s->table_max_bytes, ws->resident ? MAX_RESIDENT : MAX_RESIDENT - 1,
                     true);
    if (!ws->resident) {
        ws->resident = true;
        w->resident++;
        ws->base_id = ws->dict_id = 0;
    }
    return ws;
}

/* One value of a single-row statement into *a (and *b when not NULL); 0 when there is no row
 * (then they are 0). */
static int one_row(sqlite3_stmt *st, int64_t *a, int64_t *b)
{
    int rc = sqlite3_step(st);
    *a = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    if (b)
        *b = rc == SQLITE_ROW ? sqlite3_column_int64(st, 1) : 0;
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : pfr_store_errno(rc);
}

/* The step of the coarsest tier t falls in (0 when tiers are off): a recorded chain with layers
 * is rotated when its chunks reach the next (append_one). */
static int64_t coarse_bucket(const pfr_store *s, int64_t t)
{
    if (s->tiers.off || !s->tiers.n)
        return 0;
    int64_t step = s->tiers.step_ns[s->tiers.n - 1];
    return t / step - (t % step < 0);
}

/* Chunks the chain may serve before it is rotated by age. Rotation rewrites the chain's tables as
 * one base, dropping the entries the last DICT_WINDOW chunks did not use and the layers a reader
 * applies. A chain that got no layer since its base (a service whose stacks repeat) would write
 * the same base again: ~100 KB an hour per stream and tier of bench_horizon's drift-0 load, 0.71
 * of the scaled 200-service ring's 2.0 MB in 7 bases of identical rows. It rotates only after
 * DICT_MAX_AGE_BARE chunks (a day of 10 s chunks), which bounds what one damaged base spoils. */
static uint32_t chain_max_age(const struct wstream *ws)
{
    return ws->dict_id != ws->base_id ? DICT_MAX_AGE : DICT_MAX_AGE_BARE;
}

/* A chain this writer holds no tables of (a writer process starting, a service's first stream
 * since, or its tables given up for memory: pfr_store_trim, table_max_bytes) is the newest chain
 * of its tier among the streams of its service and types, taken back from the database instead
 * of writing a new base. Without this, more streams than the tables' memory
 * bound holds (50 pfr_testgen services: ~1 MiB each) wrote a base with every chunk, ~100 KB
 * where a chunk takes ~2 KB, and the ring held minutes instead of hours; and a coarse tier's
 * chain, appended to once an hour per stream, started over at every roll-up. The chain is
 * decoded (the chunk decoder's cache) and its tables copied; a chain that does not decode, or
 * whose entries are not all distinct, is left: the next chunk writes a base, as before. */
static int wstream_adopt(pfr_store *s, struct wstream *ws, const pfr_chunk_in *in, int tier)
{
    struct writer *w = s->w;
    if (ws->base_id || ws->tabs.t[T_STR].n)
        return 0;
    sqlite3_stmt *st;
    int64_t base, top, nref;
    int rc = 0;
    if (!(st = wst(s, W_NEWEST_BASE)))
        return db_err(s);
    sqlite3_bind_text(st, 1, in->service, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, w->types.data, (int)w->types.len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, tier);
    if ((rc = one_row(st, &base, NULL)) != 0 || !base)
        return rc;
    if (!(st = wst(s, W_CHAIN_TOP)))
        return db_err(s);
    sqlite3_bind_int64(st, 1, base);
    if ((rc = one_row(st, &top, &nref)) != 0 || !top)
        return rc;
    if ((rc = pfr_st_streams_refresh(&s->dict)) != 0)
        return rc;
    uint32_t n[T_N];
    bool corrupt;
    /* the decoded chain taken out of the chunk decoder's cache and its tables taken over whole:
     * one copy of them, not one in the cache and one in the stream (on a busy host, where streams
     * are given up for memory and adopted again at their next append, the cache kept a decoded
     * chain of each, and each adoption held both: 5-11 MB more at an interval's end). Taken
     * whole, not interned key by key: that was most of the writer's time on a busy host. */
    struct chain *ch = pfr_st_chain_take(&s->dict, base, top, n, &corrupt, &rc);
    if (!ch)
        return corrupt ? 0 : rc;
    for (int k = 0; k < T_N && !rc; k++)
        rc = pfr_st_ktab_move(&ws->tabs.t[k], &ch->t.t[k], n[k]);
    pfr_st_chain_free(ch);
    if (rc) {
        pfr_st_tabs_free(&ws->tabs);
        return rc == -EEXIST ? 0 : rc; /* equal keys: a corrupt chain, not adopted */
    }
    if ((rc = locfp_rebuild(ws)) != 0) {
        pfr_st_tabs_free(&ws->tabs);
        return rc;
    }
    ws->base_id = base;
    ws->dict_id = top;
    memcpy(ws->dict_n, n, sizeof(n));
    uint32_t max_age = chain_max_age(ws);
    if (nref > max_age)
        nref = max_age;
    if (ws->seq < (uint32_t)nref)
        ws->seq = (uint32_t)nref;
    ws->base_seq = ws->seq - (uint32_t)nref;
    ws->base_bucket = coarse_bucket(s, in->start_ns);
    return 0;
}

/* The row of the stream w->key names into *id, 0 when there is none. Looked up at every append:
 * the chain's streams take turns (an index lookup, nothing beside the commit). */
static int stream_find(pfr_store *s, int64_t *id)
{
    sqlite3_stmt *st = wst(s, W_SEL_STREAM);
    if (!st)
        return db_err(s);
    sqlite3_bind_blob(st, 1, s->w->key.data, (int)s->w->key.len, SQLITE_STATIC);
    return one_row(st, id, NULL);
}

/* The stream's row, inserted when stream_find found none (*id 0). */
static int stream_row(pfr_store *s, const pfr_chunk_in *in, int64_t *id)
{
    struct writer *w = s->w;
    if (*id)
        return 0;
    sqlite3_stmt *st = wst(s, W_INS_STREAM);
    if (!st)
        return db_err(s);
    sqlite3_bind_blob(st, 1, w->key.data, (int)w->key.len, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, in->service, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 3, w->lab.data ? (const void *)w->lab.data : "", (int)w->lab.len,
                      SQLITE_STATIC);
    sqlite3_bind_blob(st, 4, w->types.data, (int)w->types.len, SQLITE_STATIC);
    int rc = pfr_st_step_done(st);
    if (rc)
        return rc;
    *id = sqlite3_last_insert_rowid(s->sql.db);
    return 0;
}

/* ---- append ---- */
static int validate(const pfr_chunk_in *in)
{
    if (!in || !in->service || !in->service[0] || !in->profile || in->start_ns >= in->end_ns ||
        (in->nlabels && !in->labels))
        return -EINVAL;
    if (pfr_profile_error(in->profile) || pfr_profile_num_sample_types(in->profile) == 0 ||
        pfr_profile_num_sample_types(in->profile) > 4096)
        return -EINVAL;
    for (size_t i = 0; i < in->nlabels; i++)
        if (!in->labels[i].key || !in->labels[i].key[0] || !in->labels[i].value)
            return -EINVAL;
    return 0;
}

/* A dictionary row of stream sid holding blob, its id into *id: a layer of chain base on parent,
 * or, base 0, a new base. A base is its own chain (base_id = its id): the id is taken ahead, so
 * that the row is written once. Set by an UPDATE after the insert, the ~108 KB base of a drifting
 * hour was written twice (a record that changes size is rewritten whole, overflow pages too), and
 * the largest transaction's WAL sizes the WAL's share and the spare file, each taken from the
 * database's room. */
static int dict_insert(pfr_store *s, int64_t sid, int64_t base, int64_t parent, const pfr_buf *blob,
                       int64_t *id)
{
    sqlite3_stmt *st;
    bool new_base = base == 0;
    if (new_base) {
        if (!(st = wst(s, W_NEXT_DICT)))
            return db_err(s);
        int step = sqlite3_step(st);
        base = step == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
        sqlite3_reset(st);
        if (step != SQLITE_ROW)
            return pfr_store_errno(step);
    }
    if (!(st = wst(s, W_INS_DICT)))
        return db_err(s);
    int64_t f[3] = {sid, base, parent};
    sqlite3_bind_int64(st, 1, sid);
    sqlite3_bind_int64(st, 2, base);
    sqlite3_bind_int64(st, 3, parent);
    sqlite3_bind_int64(st, 4, (int64_t)blob->len);
    sqlite3_bind_int64(st, 5, pfr_st_row_crc(blob->data, blob->len, f, 3));
    sqlite3_bind_blob(st, 6, blob->data, (int)blob->len, SQLITE_STATIC);
    if (new_base) /* else NULL: the next id */
        sqlite3_bind_int64(st, 7, base);
    int rc = pfr_st_step_done(st);
    if (rc == 0)
        *id = sqlite3_last_insert_rowid(s->sql.db);
    return rc;
}

/* A chain this writer appends to (a stream's base): not a chain without chunks, whatever the rows
 * say (a base written apart has no chunk until its chunk's transaction commits). */
static bool chain_held(const struct writer *w, int64_t base)
{
    for (size_t i = 0; i < w->nws; i++)
        if (w->ws[i]->resident && w->ws[i]->base_id == base)
            return true;
    return false;
}

/* The new base in w->dict_blob of ws (its chunk in, the stream's row sid or 0, the chunk in the
 * coarsest tier's step bucket) is put apart when the transaction's bases would pass a quarter of
 * the WAL's budget: -EINPROGRESS, the transaction is rolled back, and bases_write writes it in a
 * transaction of its own before the appends' start again. Written in its chunk's transaction, a
 * drifting hour's ~108 KB base made that transaction the largest (46 pages of WAL against a
 * budget of 41 on the scaled 200-service ring), and the largest transaction's WAL sizes the WAL's
 * share and the spare file, both taken from the database's room for as long as the writer runs
 * (and its successors: the spare file stays). So are a batch's new services' first bases (a
 * recorder's first interval: one per service). */
static int base_apart(pfr_store *s, struct wstream *ws, const pfr_chunk_in *in, int64_t sid,
                      int64_t bucket)
{
    struct writer *w = s->w;
    uint64_t bytes = w->dict_blob.len;
    /* Not where the ring deletes for its room (no roll-up may make it: chunks a consumer has not
     * taken): the appends delete what they need, chunk by chunk, and a base written ahead of them
     * took room their chunks then lacked (shipper_evict: "File too large"). */
    if (w->bases_inline || w->policy_evict_tier >= 0 ||
        w->txn_base_bytes + bytes <= s->space.now.wal_budget / 4) {
        w->txn_base_bytes += bytes;
        return 0;
    }
    size_t i = 0;
    while (i < w->nbases && w->bases[i].ws != ws) /* a chain's second rotation: the newest */
        i++;
    if (i == w->nbases) {
        size_t cap = w->cap_bases;
        if (VEC_RESERVE(w->bases, w->cap_bases, w->nbases + 1))
            return -ENOMEM;
        memset(w->bases + cap, 0, (w->cap_bases - cap) * sizeof(*w->bases));
        w->nbases++;
    }
    struct wbase *b = &w->bases[i];
    b->ws = ws;
    b->epoch = w->ws_epoch;
    b->in = in;
    b->sid = sid;
    b->bucket = bucket;
    for (int k = 0; k < T_N; k++)
        b->n[k] = ws->tabs.t[k].n;
    b->blob.len = 0;
    pfr_buf_put(&b->blob, w->dict_blob.data, w->dict_blob.len);
    return pfr_buf_err(&b->blob) ? pfr_buf_err(&b->blob) : -EINPROGRESS;
}

/* One chunk: tier 0 as recorded (id_force 0: the next id), or a roll-up of tier > 0 with the
 * smallest id of the chunks it replaces (their rows are gone: no eviction for it). */
static int append_one(pfr_store *s, const pfr_chunk_in *in, int tier, int64_t id_force,
                      int64_t *id_out)
{
    struct writer *w = s->w;
    int rc;
    int64_t sid;
    struct wstream *ws = wstream_get(s, in, tier, &rc);
    if (!ws || (rc = wstream_adopt(s, ws, in, tier)) != 0 || (rc = stream_find(s, &sid)) != 0)
        return rc;
    struct wundo *undo = undo_note(w, ws);
    const pfr_profile *p = in->profile;
    ws->seq++;
    if (ws->seq == 0 || ws->seq > UINT32_MAX - 2) { /* never in practice: start over */
        wstream_drop_tables(w, ws);
        ws->resident = true;
        w->resident++;
        ws->seq = 1;
    }
    ws->starts[ws->seq % DICT_WINDOW] = in->start_ns;
    int64_t s0;
    if (ws->tabs.t[T_STR].n == 0 && (s0 = pfr_st_ktab_intern(&ws->tabs.t[T_STR], "", 0, NULL)) != 0)
        return s0 < 0 ? (int)s0 : -EIO;
    size_t nnew, ndistinct, ns = pfr_profile_num_samples(p);
    if ((rc = map_profile(w, ws, p, &nnew, &ndistinct)) != 0)
        return rc;
    const char *ptype = NULL, *punit = NULL;
    pfr_profile_period(p, &ptype, &punit);
    int64_t pt = intern_str(ws, ptype ? ptype : ""), pu = intern_str(ws, punit ? punit : "");
    if (pt < 0 || pu < 0)
        return -ENOMEM;

    uint32_t age = ws->seq - ws->base_seq;
    int64_t bucket = coarse_bucket(s, in->start_ns);
    /* A recorded chain with layers (stacks that drift) is rotated at the coarsest tier's steps
     * too: then an hour's chunks are one chain, which goes as a whole when the hour is rolled
     * into the coarsest tier (a chain across two hours stayed until the later hour was whole,
     * ~444 KB of a drifting service's ~2 MB, and the finest tier was rolled up for its room). */
    bool rotate = ws->base_id == 0 || age >= chain_max_age(ws) ||
                  (tier == 0 && ws->dict_id != ws->base_id && bucket != ws->base_bucket) ||
                  (nnew >= ROTATE_MIN_NEW && nnew * 2 > ndistinct && age >= ROTATE_MIN_AGE);
    if (rotate && undo)
        undo->rotated = true;
    if (rotate) {
        struct compact_maps cm;
        uint32_t extra[2] = {(uint32_t)pt, (uint32_t)pu};
        memset(ws->dict_n, 0, sizeof(ws->dict_n));
        rc = compact(ws, extra, 2, &cm);
        if (!rc) {
            for (size_t i = 0; i < ns; i++) {
                w->cs[i].stack = remap(&cm, T_STACK, w->cs[i].stack);
                w->cs[i].lset = remap(&cm, T_LSET, w->cs[i].lset);
            }
            pt = remap(&cm, T_STR, (uint32_t)pt);
            pu = remap(&cm, T_STR, (uint32_t)pu);
            memset(ws->dict_n, 0, sizeof(ws->dict_n)); /* the base holds every entry */
        }
        compact_maps_free(&cm);
        if (rc)
            return rc;
    }
    /* Entries the chain's rows lack become a layer (the whole table for a new base). */
    bool layer = false;
    uint32_t from[T_N];
    for (int k = 0; k < T_N; k++) {
        from[k] = ws->dict_n[k];
        layer = layer || ws->tabs.t[k].n > ws->dict_n[k];
    }
    if (layer) {
        w->raw.len = 0;
        pfr_st_layer_encode(&w->raw, &ws->tabs, from);
        if (pfr_buf_err(&w->raw))
            return pfr_buf_err(&w->raw);
        if ((rc = pfr_st_blob_pack(w->raw.data, w->raw.len, rotate ? writer_hc(w) : NULL,
                                   &w->dict_blob)) != 0)
            return rc;
        for (int k = 0; k < T_N; k++)
            ws->dict_n[k] = ws->tabs.t[k].n;
    }
    if ((rc = encode_chunk(w, ws, p, ns, (uint32_t)pt, (uint32_t)pu)) != 0 ||
        (rc = pfr_st_blob_pack(w->raw.data, w->raw.len, writer_hc(w), &w->blob)) != 0)
        return rc;
    size_t nt = pfr_profile_num_sample_types(p);
    pfr_st_totals_encode(&w->tot, w->totals, nt);
    if (pfr_buf_err(&w->tot))
        return pfr_buf_err(&w->tot);

    if (tier == 0 && rotate && (rc = base_apart(s, ws, in, sid, bucket)) != 0)
        return rc; /* -EINPROGRESS: written before this transaction (bases_write) */
    uint64_t payload = w->blob.len + (layer ? w->dict_blob.len : 0) + 2 * ROW_OVERHEAD;
    /* need: room to insert now (B-tree splits may take a few pages); est: what the rows may
     * take on average at worst (half-full pages). */
    uint64_t need_bytes = payload + SPLIT_PAGES * s->sql.page_size, est_bytes = 2 * payload + 256;
    /* Not rotating means the chain exists, and eviction spares it, and the stream's row if any. */
    if ((tier == 0 && (rc = evict(s, need_bytes, est_bytes, rotate ? 0 : ws->base_id, sid)) != 0) ||
        (rc = stream_row(s, in, &sid)) != 0)
        return rc;
    sqlite3_stmt *st;
    if (layer) {
        if ((rc = dict_insert(s, sid, rotate ? 0 : ws->base_id, rotate ? 0 : ws->dict_id,
                              &w->dict_blob, &ws->dict_id)) != 0)
            return rc;
        if (rotate) {
            ws->base_id = ws->dict_id;
            ws->base_seq = ws->seq;
            ws->base_bucket = bucket;
        }
    }
    int64_t f[5] = {sid, ws->base_id, ws->dict_id, in->start_ns, in->end_ns};
    st = wst(s, W_INS_CHUNK);
    if (!st)
        return db_err(s);
    sqlite3_bind_int64(st, 1, sid);
    sqlite3_bind_int64(st, 2, ws->base_id);
    sqlite3_bind_int64(st, 3, ws->dict_id);
    sqlite3_bind_int64(st, 4, in->start_ns);
    sqlite3_bind_int64(st, 5, in->end_ns);
    sqlite3_bind_int64(st, 6, (int64_t)w->blob.len);
    sqlite3_bind_int64(st, 7, pfr_st_row_crc(w->blob.data, w->blob.len, f, 5));
    sqlite3_bind_blob(st, 8, w->tot.data ? (const void *)w->tot.data : "", (int)w->tot.len,
                      SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, tier);
    if (id_force)
        sqlite3_bind_int64(st, 10, id_force);
    if ((rc = pfr_st_step_done(st)) != 0)
        return rc;
    int64_t id = sqlite3_last_insert_rowid(s->sql.db);
    /* The finest tier's bytes are its payloads (what its chains take is what the pages hold
     * besides, store_retention.c, held): counted with them, a churning host's chains made its
     * ring roll up chunks whose chains merging cannot shrink. A roll-up tier's notes count the
     * layers of its own chain too, until the next measure (which counts the coarsest tier's
     * chains only): measured, that keeps a 10 min tier whose chain would pass its share at
     * once (svc200, scaled: 22 h of history in a day's run, against 5 h when every measure
     * counts the chains and 15 h when no note does). */
    bool own_chain = layer && tier > 0;
    pfr_st_retention_coarse_note(&w->ret, tier, in->start_ns, true);
    pfr_st_retention_note(
        &w->ret, tier, (int64_t)(w->blob.len + ROW_OVERHEAD + (own_chain ? w->dict_blob.len : 0)));
    if (tier == 0)
        w->avg_payload = w->avg_payload ? (w->avg_payload * 15 + w->blob.len + ROW_OVERHEAD) / 16
                                        : w->blob.len + ROW_OVERHEAD;
    st = wst(s, W_INS_DATA);
    if (!st)
        return db_err(s);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_blob(st, 2, w->blob.data, (int)w->blob.len, SQLITE_STATIC);
    if ((rc = pfr_st_step_done(st)) != 0)
        return rc;
    if (id_out)
        *id_out = id;
    return 0;
}

/* ---- roll-ups (store_retention.c decides and merges; the rows are written here) ---- */

/* Delete one chunk's rows. */
static int delete_chunk(pfr_store *s, int64_t id)
{
    sqlite3_stmt *d1 = wst(s, W_DEL_CHUNKS);
    if (!d1)
        return db_err(s);
    sqlite3_bind_int64(d1, 1, id);
    sqlite3_bind_int64(d1, 2, id);
    sqlite3_bind_int64(d1, 3, -1);
    int rc = pfr_st_step_done(d1);
    if (rc)
        return rc;
    sqlite3_stmt *d2 = wst(s, W_DEL_DATA);
    if (!d2)
        return db_err(s);
    sqlite3_bind_int64(d2, 1, id);
    sqlite3_bind_int64(d2, 2, id);
    return pfr_st_step_done(d2);
}

/* Group g's rows replaced by the in-chain roll-up ro, with g's smallest id. */
static int rolled_write(pfr_store *s, const struct store_rollup *g, const struct store_rolled *ro)
{
    int rc = 0;
    for (size_t i = 0; i < g->n && !rc; i++)
        rc = delete_chunk(s, g->in[i].id);
    if (rc)
        return rc;
    sqlite3_stmt *st = wst(s, W_INS_CHUNK);
    if (!st)
        return db_err(s);
    int64_t f[5] = {g->stream_id, ro->base_id, ro->dict_id, g->start_ns, g->end_ns};
    for (int k = 0; k < 5; k++)
        sqlite3_bind_int64(st, k + 1, f[k]);
    sqlite3_bind_int64(st, 6, (int64_t)ro->blob.len);
    sqlite3_bind_int64(st, 7, pfr_st_row_crc(ro->blob.data, ro->blob.len, f, 5));
    sqlite3_bind_blob(st, 8, ro->tot.data ? (const void *)ro->tot.data : "", (int)ro->tot.len,
                      SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, g->tier);
    sqlite3_bind_int64(st, 10, g->min_id);
    if ((rc = pfr_st_step_done(st)) != 0)
        return rc;
    if (!(st = wst(s, W_INS_DATA)))
        return db_err(s);
    sqlite3_bind_int64(st, 1, g->min_id);
    sqlite3_bind_blob(st, 2, ro->blob.data, (int)ro->blob.len, SQLITE_STATIC);
    if ((rc = pfr_st_step_done(st)) != 0)
        return rc;
    pfr_st_retention_note(&s->w->ret, g->tier - 1, -(int64_t)g->in_bytes);
    pfr_st_retention_note(&s->w->ret, g->tier, (int64_t)(ro->blob.len + ROW_OVERHEAD));
    return pfr_st_meta_add(&s->sql, "rolled_up", (int64_t)g->n - 1);
}

/* A roll-up into the coarsest tier folded to the writer's bound (store_fold.h): *p replaced by
 * the folded profile when it had more entries than the bound, left as it is otherwise. */
static int rollup_fold(pfr_store *s, pfr_profile **p)
{
    pfr_profile *folded = NULL;
    int rc = s->fold_stacks ? pfr_st_fold(*p, s->fold_stacks, &folded, NULL) : 0;
    if (rc) {
        pfr_profile_free(*p);
        *p = NULL;
        return rc;
    }
    if (folded) {
        pfr_profile_free(*p);
        *p = folded;
    }
    return 0;
}

/* Room lacking from which a chain without chunks gives its base first (orphan_step). */
#define ORPHAN_BASE_LACK (64u << 10)

/* Chain base, if no chunk references it any more, is left for make_room to delete (orphan_step).
 * Deleted at once, a drifting hour's chain (~410 KB: a base and 359 layer rows) wrote each of its
 * ~90 leaf pages to the WAL in the roll-up's transaction (~400 KB), and the largest transaction's
 * WAL sizes the WAL's share and the spare file, both taken from the database's room (the scaled
 * 200-service ring: each an eighth of the cap, 0.67 of its 2.6 MB). */
static int orphan_note(pfr_store *s, int64_t base)
{
    struct writer *w = s->w;
    sqlite3_stmt *st = wst(s, W_CHAIN_UNUSED);
    if (!st)
        return db_err(s);
    sqlite3_bind_int64(st, 1, base);
    int step = sqlite3_step(st);
    bool unused = step == SQLITE_ROW && sqlite3_column_int(st, 0);
    sqlite3_reset(st);
    if (step != SQLITE_ROW)
        return pfr_store_errno(step);
    if (!unused)
        return 0;
    forget_chain(w, base); /* no stream appends to it again */
    if (VEC_RESERVE(w->orphans, w->cap_orphans, w->norphans + 1))
        return -ENOMEM;
    w->orphans[w->norphans++] = base;
    return 0;
}

/* The chains of bases (n of them, repeats allowed) that no chunk references any more, but
 * protect, noted for orphan_step. */
static int orphans_note(pfr_store *s, const int64_t *bases, size_t n, int64_t protect)
{
    for (size_t i = 0; i < n; i++) {
        int rc = passed_over(bases, i, protect) ? 0 : orphan_note(s, bases[i]);
        if (rc)
            return rc;
    }
    return 0;
}

/* The chains no chunk references, read from the database (a writer's start, a rolled back
 * transaction: the list in memory may miss some). */
static int orphans_read(pfr_store *s)
{
    struct writer *w = s->w;
    sqlite3_stmt *st = wst(s, W_ORPHANS);
    if (!st)
        return db_err(s);
    w->norphans = 0;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t base = sqlite3_column_int64(st, 0);
        if (chain_held(w, base)) /* a base written apart, its chunk not yet (bases_write) */
            continue;
        if (VEC_RESERVE(w->orphans, w->cap_orphans, w->norphans + 1)) {
            sqlite3_reset(st);
            return -ENOMEM;
        }
        w->orphans[w->norphans++] = base;
    }
    sqlite3_reset(st);
    if (step != SQLITE_DONE)
        return pfr_store_errno(step);
    w->orphans_known = true;
    return 0;
}

/* A few rows of a chain no chunk references deleted, for lack bytes of room: 1 when some were,
 * 0 when none is left. Its layers first, a few at a time, unless a base's worth is lacking: a
 * layer row's page is written to the WAL, a base's overflow pages are not, so the base is kept
 * for the room of the next base (the hour's rotation: ~108 KB, made of ~120 layer rows it took
 * ~150 KB of WAL). */
static int orphan_step(pfr_store *s, uint64_t lack)
{
    struct writer *w = s->w;
    int rc;
    if (!w->orphans_known && (rc = orphans_read(s)) != 0)
        return rc;
    while (w->norphans) {
        for (int pass = 0; pass < 2 && !chain_held(w, w->orphans[w->norphans - 1]); pass++) {
            sqlite3_stmt *st = wst(s, W_DEL_DICT_SOME);
            if (!st)
                return db_err(s);
            sqlite3_bind_int64(st, 1, w->orphans[w->norphans - 1]);
            sqlite3_bind_int(st, 2, (lack >= ORPHAN_BASE_LACK) != pass);
            if ((rc = pfr_st_step_done(st)) != 0)
                return rc;
            if (sqlite3_changes(s->sql.db) > 0)
                return 1;
        }
        w->norphans--; /* all gone (or referenced again: a rolled back roll-up) */
    }
    return 0;
}

/* Group g becomes one chunk of tier g->tier with g's smallest id: its inputs' rows deleted, the
 * merged profile appended through the writer's own path (a chain per stream and tier), the
 * chains left without chunks deleted. A group of one chunk only changes tier. An input that
 * does not decode (corrupt) cannot be merged exactly: the group is evicted instead. */
static int rollup_apply(pfr_store *s, const struct store_rollup *g, struct evict_ctx *x)
{
    struct writer *w = s->w;
    int rc;
    /* A group of one into the coarsest tier goes through the merge too: it would keep the chain
     * of its tier (its recorded tier's, roll-ups below the coarsest being within it) for as long
     * as the coarsest keeps it, ~144 KB a drifting hour (and the fold's bound applies). */
    if (g->n == 1 && g->tier < (int)s->tiers.n) {
        sqlite3_stmt *st = wst(s, W_SET_TIER);
        if (!st)
            return db_err(s);
        sqlite3_bind_int64(st, 1, g->in[0].id);
        sqlite3_bind_int64(st, 2, g->tier);
        if ((rc = pfr_st_step_done(st)) != 0)
            return rc;
        pfr_st_retention_note(&w->ret, g->tier - 1, -(int64_t)g->in_bytes);
        pfr_st_retention_note(&w->ret, g->tier, (int64_t)g->in_bytes);
        return 0;
    }
    if (g->tier < (int)s->tiers.n) {
        /* Every step below the coarsest: in the inputs' own chain, which their neighbours as
         * recorded keep anyway (no dictionary rows: a roll-up of a short-lived program costs
         * less than its chunks; a group is of one chain, store_retention.c). The chains such
         * roll-ups keep alive are charged to their tier, and go when it rolls into the coarsest,
         * which writes a chain of its own (folded). A 10-minute tier with a chain of its own
         * wrote a base per roll-up where stacks drift (most of its ~1,100 stacks new to it). */
        struct store_rolled ro = {0};
        rc = pfr_st_rollup_inchain(&s->dict, g, writer_hc(w), &ro);
        if (rc != -ENOTSUP) {
            if (!rc)
                rc = rolled_write(s, g, &ro);
            pfr_st_rolled_free(&ro);
            if (rc != -EBADMSG)
                return rc;
        }
    }
    pfr_profile *merged = NULL;
    rc = pfr_st_rollup_merge(&s->dict, g, &merged);
    if (!rc && g->tier == (int)s->tiers.n)
        rc = rollup_fold(s, &merged);
    if (rc && rc != -EBADMSG)
        return rc;
    for (size_t i = 0; i < g->n; i++) {
        int e = delete_chunk(s, g->in[i].id);
        if (e) {
            pfr_profile_free(merged);
            return e;
        }
    }
    pfr_st_retention_note(&w->ret, g->tier - 1, -(int64_t)g->in_bytes);
    if (!rc) {
        const struct rstream *r = pfr_st_stream_get(&s->dict, g->stream_id);
        pfr_chunk_in in = {.service = r->service,
                           .labels = r->labels,
                           .nlabels = r->nlabels,
                           .start_ns = g->start_ns,
                           .end_ns = g->end_ns,
                           .profile = merged};
        rc = append_one(s, &in, g->tier, g->min_id, NULL);
        pfr_profile_free(merged);
        if (!rc)
            rc = pfr_st_meta_add(&s->sql, "rolled_up", (int64_t)g->n - 1);
    } else {
        rc = pfr_st_meta_add(&s->sql, "evicted", (int64_t)g->n);
        int64_t lost = 0;
        for (size_t i = 0; i < g->n; i++)
            lost += pfr_st_cursors_count_lost(&x->cur, g->in[i].id);
        if (!rc && lost)
            rc = pfr_st_meta_add(&s->sql, "lost_unshipped", lost);
        if (!rc)
            rc = lost_commit(s, x);
    }
    if (rc)
        return rc;
    for (size_t i = 0; i < g->n && !rc; i++) {
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++)
            dup = g->in[j].base_id == g->in[i].base_id;
        if (!dup)
            rc = orphan_note(s, g->in[i].base_id);
    }
    return rc;
}

/* Whether a piece of the coarsest the policy picked waits for a transaction of its own
 * (pfr_st_policy_piece_when): *more for the next transaction of room, w->piece_apart for the
 * appends'. Made with them, pieces made transactions of 45-47 pages on the scaled 200-service
 * ring, past its 41-page WAL budget: the WAL's share and the spare file grew, 71 KB of the
 * database (56.3 minutes as recorded at least instead of 58.7). */
static bool piece_later(pfr_store *s, size_t max_steps, bool *more)
{
    struct writer *w = s->w;
    switch (pfr_st_policy_piece_when(max_steps == SIZE_MAX, w->piece_apart, w->room_steps)) {
    case PIECE_APART:
        w->piece_apart = true;
        return true;
    case PIECE_NEXT:
        *more = true;
        return true;
    default:
        return false;
    }
}

/* Before a transaction's chunks: room for about est bytes more, made by rolling up (and, for the
 * coarsest tier, deleting) as pfr_st_retention_next says. The appends' own eviction (evict) then
 * finds the room there, and only deletes when the estimate fell short. Roll-ups run here, not
 * inside an append, because they use the writer's append path themselves. At most max_steps
 * steps (room_txn's: what keeps its WAL within the budget); *more when the room is still
 * lacking after them. */
static int make_room(pfr_store *s, uint64_t est, size_t max_steps, uint64_t *used_out, bool *more)
{
    struct writer *w = s->w;
    uint64_t target = s->space.now.db_target, slack = evict_slack(s, target);
    struct evict_ctx x = {.for_disk = s->space.now.disk_bound};
    struct store_rollup g = {0};
    uint64_t used = 0, pages, freep;
    int rc;
    *more = false;
    w->room_steps = 0;
    for (;;) {
        if ((rc = used_bytes(s, &used, &pages, &freep)) != 0)
            break;
        /* est holds the slack once (room_estimate): made again here once started, up to the
         * estimate and two slacks were held ahead of the appends (~37 KB of the scaled
         * 200-service ring's 2.3 MB, ~3 minutes of its finest tier) */
        if (used + est <= target)
            break;
        if (w->room_steps >= max_steps) {
            *more = true; /* the rest in another transaction (room_txn) */
            break;
        }
        w->room_steps++;
        /* the rows of chains no chunk references first: they cost no history */
        if ((rc = orphan_step(s, used + est + slack - target)) != 0) {
            if (rc < 0)
                break;
            continue;
        }
        if ((rc = cursors(s, &x)) != 0)
            break;
        if (!x.pins_read && (rc = pins_read(s, &x)) != 0)
            break;
        struct store_keep keep = {x.cur.any, x.cur.min_cursor, &x.pins, &s->dict, &x.cur};
        int tier = 0;
        rc = pfr_st_retention_next(&w->ret, &s->sql, &keep, used, &g, &tier);
        if (rc <= STORE_RET_NONE)
            break;
        if (rc == STORE_RET_ROLLUP && g.piece && piece_later(s, max_steps, more)) {
            rc = max_steps == SIZE_MAX ? -EAGAIN : 0; /* the appends start again after it */
            break;
        }
        if (rc == STORE_RET_ROLLUP) {
            if ((rc = rollup_apply(s, &g, &x)) != 0)
                break;
            if (g.piece && max_steps != SIZE_MAX) {
                *more = true; /* a transaction of its own: the room, if still lacking, next */
                break;
            }
            continue;
        }
        if (rc == STORE_RET_TRIM) {
            /* the coarsest tier past its horizon or its share: a few of its oldest, then the
             * policy again (what they free may be all the room needed) */
            size_t nd = 0;
            uint64_t over = used + est + slack - target;
            if ((rc = evict_batch(s, tier, over, 8, 0, 0, &x, &nd)) != 0)
                break;
            if (nd)
                continue;
        }
        /* Roll-ups (which keep their data) made what room they could; deleting is the appends'
         * own, chunk by chunk, so that the ring gives up only what the newest intervals take
         * (deleting ahead, by an estimate, on a full 12 MiB file system gave up 449 chunks for
         * 213 written in 8 s: store_disk_full; and a 300 KB ring kept 2 chunks of 12) */
        w->policy_evict_tier = tier;
        rc = 0;
        break;
    }
    pfr_st_rollup_free(&g);
    evict_ctx_free(&x);
    *used_out = used;
    return rc;
}

/* Checkpoint the WAL, waiting at most wait_ms for readers (they hold snapshots only briefly).
 * TRUNCATE gives its blocks back to the file system; RESTART keeps them for the next
 * transactions, which then write from the WAL's start: on a tight disk they are the room those
 * need. Returns SQLITE_OK when the next transaction writes the WAL from its start, SQLITE_BUSY
 * when a reader's snapshot still holds it. */
static int wal_checkpoint_wait(pfr_store *s, bool give_back, int wait_ms)
{
    /* A truncated WAL gives its blocks to the file system, and on a disk someone else fills they
     * are gone: without the spare file they were the ring's only room, and a ring with neither
     * could not commit even the eviction that would make room (store_crash_full: "append: -28"
     * after the WAL was truncated and the writer killed). Then it only restarts: the
     * journal_size_limit in force trims it at the next write, or keeps it while starved. */
    give_back = give_back && pfr_st_space_spare_held(&s->space);
    sqlite3_busy_timeout(s->sql.db, wait_ms);
    int rc = sqlite3_wal_checkpoint_v2(
        s->sql.db, NULL, give_back ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_RESTART, NULL,
        NULL);
    sqlite3_busy_timeout(s->sql.db, s->sql.busy_ms);
    return rc;
}

static int wal_checkpoint(pfr_store *s, bool give_back)
{
    return wal_checkpoint_wait(s, give_back, 50);
}

/* A transaction that freed or wrote many pages (a new base, an eviction batch) leaves the WAL
 * larger than its share (pfr_st_space_wal_limit) until the next transaction resets it. Checkpoint
 * and truncate it now so the ring's files stay within the cap; on a disk with hardly any room
 * left it keeps its blocks, which the disk may not give again (whoever fills it would take
 * them). */
static void wal_trim(pfr_store *s)
{
    if (pfr_st_space_wal_file(&s->space) <= pfr_st_space_wal_limit(&s->space))
        return;
    wal_checkpoint(s, !s->space.now.starved);
}

/* The tiers' steps, for readers (pfr ls): tier_step_<k> in ns, and tiers = how many (0: off). */
static int tiers_meta(pfr_store *s)
{
    const pfr_store_tiers *t = &s->tiers;
    int rc = pfr_st_meta_set(&s->sql, "tiers", t->off ? 0 : (int64_t)t->n);
    for (size_t k = 0; !rc && !t->off && k < t->n; k++) {
        char key[32];
        snprintf(key, sizeof(key), "tier_step_%zu", k + 1);
        rc = pfr_st_meta_set(&s->sql, key, t->step_ns[k]);
    }
    return rc;
}

/* The WAL frames this connection has written so far (pages of every transaction, spilled or
 * committed): the difference across a transaction is its WAL. */
static uint64_t wal_frames_written(pfr_store *s)
{
    int cur = 0, hi = 0;
    sqlite3_db_status(s->sql.db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 0);
    return (uint64_t)(unsigned)cur;
}

/* The counters and settings the transaction carries to the meta table: chunks refused for space
 * since the last commit, and the writer's cap and reserve (readers size the ring by them). */
static int txn_meta(pfr_store *s)
{
    struct store_space *sp = &s->space;
    int rc = 0;
    if (sp->dropped_pending)
        rc = pfr_st_meta_add(&s->sql, "dropped_disk", (int64_t)sp->dropped_pending);
    if (!rc && sp->meta_reserve != sp->reserve_bytes + 1 &&
        !(rc = pfr_st_meta_set(&s->sql, "max_bytes", (int64_t)s->max_bytes)) &&
        !(rc = pfr_st_meta_set(&s->sql, "pin_max_bytes", (int64_t)s->pin_max_bytes)) &&
        !(rc = pfr_st_meta_set(&s->sql, "reserve_bytes", (int64_t)sp->reserve_bytes)))
        rc = tiers_meta(s);
    return rc;
}

/* Before a commit: a transaction whose pages the disk could not take at the checkpoint fails
 * (-ENOSPC, rolled back) instead, like one the WAL could not take. Eviction's measure is an
 * estimate (B-tree splits, a batch that runs out of free pages before it evicts): this is the
 * exact check. */
static int commit_fits(pfr_store *s)
{
    uint64_t used, pages, freep;
    int rc = used_bytes(s, &used, &pages, &freep);
    if (rc)
        return rc;
    uint64_t psz = s->sql.page_size, file = pfr_st_space_db_file(&s->space) / psz;
    bool fits = pfr_st_space_growth_fits(&s->space, pages * psz);
    if (pages > file && freep > 0 && (!fits || s->space.now.disk_bound)) {
        /* The file grew while pages this transaction freed were left free (eviction made room
         * after the inserts took it: its measure is an estimate). Move the pages past the
         * file's end into them, in the transaction: the disk need not give them. */
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%llu)",
                 (unsigned long long)(pages - file < freep ? pages - file : freep));
        if ((rc = pfr_st_exec(&s->sql, sql)) != 0 || (rc = used_bytes(s, &used, &pages, &freep)))
            return rc;
        fits = pfr_st_space_growth_fits(&s->space, pages * psz);
    }
    return fits ? 0 : -ENOSPC;
}

/* Steps of make_room in a transaction of its own before the first measure (room_steps_cap). */
#define ROOM_STEPS_FIRST 8

/* A transaction of make_room alone (room_txn) wrote frames WAL frames in steps steps, and more
 * room was lacking after them (more): the steps the next one may take. The largest transaction's
 * WAL sizes both the WAL's share and the spare file, each taken from the database's room, for as
 * long as the writer runs: the room for a drifting hour's ~108 KB base, made by ~20 roll-ups of
 * the finest tier's minutes in one transaction, wrote up to 55 pages of WAL against a 41-page
 * budget (bench_horizon svc200 --scale 200, 30 days: 112 KB of the database's 2.35 MB target). */
static void room_steps_note(pfr_store *s, uint64_t frames, size_t steps, bool more)
{
    struct writer *w = s->w;
    uint64_t budget = s->space.now.wal_budget / (s->sql.page_size + 24);
    w->room_steps_cap = pfr_st_policy_room_steps(w->room_steps_cap, steps, frames, budget, more);
}

/* The room a transaction of n chunks is made before its appends: what n chunks took of the pages
 * on average (measured, page_cost), plus the eviction slack, so roll-ups run every so many
 * appends. Tight on purpose: what make_room frees past what the appends take is history the ring
 * does not hold (twice the payloads, as before the measure, held half of a 2 MiB ring whose
 * transactions are 5,000 chunks; a margin of twice the measures' spread cost a churning host's
 * 6 MiB ring 8 % of its history). Until measured: twice the payloads. A transaction that takes
 * more than the mean evicts the coarsest tier from its appends, or starts again with the room it
 * lacked (append_txn), within the slack first. */
static uint64_t room_estimate(const pfr_store *s, size_t n)
{
    const struct writer *w = s->w;
    uint64_t slack = evict_slack(s, s->space.now.db_target);
    if (w->page_cost)
        return w->page_cost * n + slack;
    uint64_t avg = w->avg_payload ? w->avg_payload : 4096;
    return 2 * avg * n + slack;
}

/* After a transaction's appends: what its chunks took of the pages (grown from make_room's
 * measure, plus what the appends' eviction freed), into page_cost. */
static void page_cost_note(pfr_store *s, uint64_t used0, size_t n)
{
    struct writer *w = s->w;
    uint64_t used, pages, freep;
    if (n == 0 || used_bytes(s, &used, &pages, &freep) != 0)
        return;
    used += w->txn_freed;
    if (used <= used0)
        return; /* pages freed by the B-tree's rebalancing: no measure */
    uint64_t per = (used - used0) / n;
    /* weighted by the transaction's chunks: a transaction of one interval moves the mean less
     * than one of thousands */
    uint64_t wgt = n < 16 ? n : 16;
    w->page_cost = w->page_cost ? (w->page_cost * (32 - wgt) + per * wgt) / 32 : per;
}

/* A write transaction begun (BEGIN IMMEDIATE), the writer's per-transaction state reset; *frames:
 * the WAL frames written so far, for txn_end. */
static int txn_begin(pfr_store *s, uint64_t *frames)
{
    sqlite3_stmt *begin = pfr_st_stmt(&s->sql, ST_BEGIN_IMM);
    if (!begin)
        return db_err(s);
    int rc = pfr_st_step_done(begin);
    if (rc)
        return rc;
    *frames = wal_frames_written(s);
    s->w->room = 0; /* another writer may have added pages since our last transaction */
    s->w->nundo = 0;
    s->w->undo_lost = false;
    s->w->txn_freed = 0;
    s->w->policy_evict_tier = -1;
    return 0;
}

/* The end of a write transaction begun with frames WAL frames written so far: committed if rc is
 * 0 and the disk can take it (commit_fits), else rolled back with the writer's state undone. The
 * transaction's WAL, committed or not (a commit that found the disk full counts the frames it
 * tried to write), is noted: its frames, a page and a 24-byte header each, and the header. */
static int txn_end(pfr_store *s, int rc, uint64_t frames)
{
    if (!rc)
        rc = commit_fits(s);
    if (!rc) {
        sqlite3_stmt *commit = pfr_st_stmt(&s->sql, ST_COMMIT);
        rc = commit ? pfr_st_step_done(commit) : db_err(s);
    }
    uint64_t wrote = wal_frames_written(s) - frames;
    if (rc == 0 || rc == -ENOSPC)
        pfr_st_space_note_wal(&s->space, wrote * (s->sql.page_size + 24) + 32);
    if (rc) {
        if (!sqlite3_get_autocommit(s->sql.db)) {
            sqlite3_stmt *rb = pfr_st_stmt(&s->sql, ST_ROLLBACK);
            if (rb)
                pfr_st_step_done(rb);
        }
        writer_undo(s->w);
        /* The chains the transaction read may hold layers it wrote (a piece of the coarsest,
         * read again as the next piece's input): their ids are taken again, by other rows. */
        pfr_st_chain_cache_clear(&s->dict);
        s->w->ret.measured = false; /* the tiers' bytes are the database's again */
        pfr_st_retention_coarse_forget(&s->w->ret);
        s->w->orphans_known = false; /* and its chains without chunks */
    }
    return rc;
}

/* One write transaction: the chunks (evicting as pfr_st_space_plan said), committed; or rolled
 * back, and the streams it appended to put back as they were (writer_undo). */
static int txn_once(pfr_store *s, const pfr_chunk_in *in, size_t n, int64_t *ids_out,
                    uint64_t extra)
{
    uint64_t frames;
    int rc = txn_begin(s, &frames);
    if (rc)
        return rc;
    uint64_t used0 = 0;
    uint64_t est = room_estimate(s, n) + extra;
    bool more; /* stays false: no step limit, the appends' room is made whole (a few steps) */
    rc = make_room(s, est, SIZE_MAX, &used0, &more);
    s->w->room_end = used0 + est;
    s->w->nbases = 0;
    s->w->txn_base_bytes = 0;
    bool apart = false; /* bases put apart: the appends go on to find all of them */
    for (size_t i = 0; i < n && !rc; i++) {
        s->w->cur = NULL;
        s->w->txn_left = n - i;
        rc = append_one(s, &in[i], 0, 0, ids_out ? &ids_out[i] : NULL);
        if (rc == -EINPROGRESS) {
            apart = true;
            rc = 0;
        }
        if (s->w->cur)
            wstream_account(s->w, s->w->cur);
    }
    if (!rc && apart)
        rc = -EINPROGRESS;
    if (!rc)
        page_cost_note(s, used0, n);
    if (!rc)
        rc = txn_meta(s);
    if ((rc = txn_end(s, rc, frames)) != 0)
        return rc;
    s->space.dropped_pending = 0;
    s->space.meta_reserve = s->space.reserve_bytes + 1;
    return 0;
}

/* Transactions of make_room alone, for est bytes: the room an append lacked (a new dictionary
 * base) made before the appends' own transaction, not in it. Made in the appends' transaction,
 * the room for a drifting hour's ~108 KB base (~15 roll-ups or ~120 rows of a chain without
 * chunks) and the base took ~250 KB of WAL, past the WAL's budget; the largest transaction's WAL
 * sizes the WAL's share and the spare file, both taken from the database's room. Made in one
 * transaction of its own, the room still took up to 55 pages of WAL (~20 roll-ups), so it is
 * made in as many transactions as keep each within the budget (room_steps_note: the steps are
 * halved after one that wrote more than three quarters of it; 36 pages at most on that ring). */
static int room_txn(pfr_store *s, uint64_t est)
{
    struct writer *w = s->w;
    for (bool more = true; more;) {
        uint64_t frames, used0;
        int rc = txn_begin(s, &frames);
        if (rc)
            return rc;
        if (!w->room_steps_cap)
            w->room_steps_cap = ROOM_STEPS_FIRST;
        rc = make_room(s, est, w->room_steps_cap, &used0, &more);
        /* deleting is the appends' own (their transaction's make_room) */
        w->policy_evict_tier = -1;
        size_t steps = w->room_steps;
        if ((rc = txn_end(s, rc, frames)) != 0)
            return rc;
        room_steps_note(s, wal_frames_written(s) - frames, steps, more);
    }
    return 0;
}

/* The row of in's stream into *sid, inserted if there is none (a new stream's base put apart). */
static int base_stream_row(pfr_store *s, const pfr_chunk_in *in, int64_t *sid)
{
    struct writer *w = s->w;
    int rc = pfr_st_stream_encode(in->service, in->labels, in->nlabels, in->profile, &w->key,
                                  &w->lab, &w->types);
    if (rc || (rc = stream_find(s, sid)) != 0)
        return rc;
    return stream_row(s, in, sid);
}

/* Bases b[0..n) (base_apart), bytes in all, written in one transaction when the pages have room
 * for them (room_txn made it), else left to their chunks' transaction. Their streams then append
 * to them as to their chains; until their chunks commit they are chains no chunk references,
 * which make_room leaves alone (chain_held), and which a writer that starts after a crash deletes
 * as such. */
static int bases_txn(pfr_store *s, struct wbase *b, size_t n, uint64_t bytes)
{
    struct writer *w = s->w;
    uint64_t frames, used, pages, freep;
    int rc = txn_begin(s, &frames);
    if (rc)
        return rc;
    rc = used_bytes(s, &used, &pages, &freep);
    bool fits = used + bytes <= s->space.now.db_target;
    for (size_t i = 0; i < n && !rc && fits; i++) {
        struct wstream *ws = b[i].ws;
        bool same = b[i].epoch == w->ws_epoch && ws->resident && !ws->base_id;
        for (int k = 0; k < T_N && same; k++)
            same = ws->tabs.t[k].n == b[i].n[k];
        if (!same) { /* its tables moved on: its chunk writes a base of its own */
            b[i].ws = NULL;
            continue;
        }
        if (!b[i].sid && (rc = base_stream_row(s, b[i].in, &b[i].sid)) != 0)
            break;
        rc = dict_insert(s, b[i].sid, 0, 0, &b[i].blob, &b[i].id);
    }
    if ((rc = txn_end(s, rc ? rc : fits ? 0 : -EAGAIN, frames)) != 0)
        return rc == -EAGAIN ? 0 : rc;
    for (size_t i = 0; i < n; i++) {
        struct wstream *ws = b[i].ws;
        if (!ws)
            continue;
        ws->base_id = ws->dict_id = b[i].id;
        ws->base_seq = ws->seq + 1; /* its chunk's (writer_undo gave the count back) */
        ws->base_bucket = b[i].bucket;
        memcpy(ws->dict_n, b[i].n, sizeof(ws->dict_n));
    }
    return 0;
}

/* The bases the appends put apart (base_apart), in transactions of at most half the WAL's budget
 * of them (one base at least), each after the room for it (room_txn). */
static int bases_write(pfr_store *s)
{
    struct writer *w = s->w;
    uint64_t half = s->space.now.wal_budget / 2, psz = s->sql.page_size;
    int rc = 0;
    for (size_t i = 0, j; i < w->nbases && !rc; i = j) {
        uint64_t bytes = 0;
        for (j = i; j < w->nbases; j++) {
            uint64_t one = w->bases[j].blob.len + psz; /* its overflow pages' last, its leaf */
            if (j > i && bytes + one > half)
                break;
            bytes += one;
        }
        if (!(rc = room_txn(s, bytes)))
            rc = bases_txn(s, w->bases + i, j - i, bytes);
    }
    w->nbases = 0;
    return rc;
}

/* A transaction whose appends found too little room (a new dictionary base is larger than
 * make_room's estimate) starts again with that room made by roll-ups first, in a transaction of
 * its own (room_txn); after three tries (chunks nobody may merge) the appends delete what they
 * need. One that put bases apart (base_apart) starts again after they are written (bases_write),
 * once: any base its retry writes is written in it. */
static int append_txn(pfr_store *s, const pfr_chunk_in *in, size_t n, int64_t *ids_out)
{
    uint64_t extra = 0;
    s->w->bases_inline = false;
    s->w->piece_apart = false;
    for (int k = 0;;) {
        s->w->short_by = 0;
        s->w->may_delete = k >= 3;
        bool apart = s->w->piece_apart;
        int rc = txn_once(s, in, n, ids_out, extra);
        if (rc == -EINPROGRESS || (rc == -EAGAIN && s->w->nbases)) {
            int e = bases_write(s);
            if (e)
                return e;
            s->w->bases_inline = true;
            if (rc == -EINPROGRESS)
                continue;
        }
        if (rc != -EAGAIN)
            return rc;
        if (s->w->piece_apart && !apart) { /* a piece first, in a transaction of its own */
            if ((rc = room_txn(s, room_estimate(s, n) + extra)) != 0)
                return rc;
            continue;
        }
        k++;
        extra += s->w->short_by;
        if ((rc = room_txn(s, room_estimate(s, n) + extra)) != 0)
            return rc;
    }
}

/* The end of a transaction of the full-disk path begun with BEGIN IMMEDIATE: committed if rc is 0
 * and the disk can take it (commit_fits), else rolled back. */
static int full_txn_end(pfr_store *s, int rc)
{
    if (!rc)
        rc = commit_fits(s);
    if (!rc)
        rc = pfr_st_exec(&s->sql, "COMMIT");
    if (rc && !sqlite3_get_autocommit(s->sql.db))
        pfr_st_exec(&s->sql, "ROLLBACK");
    return rc;
}

/* The disk was full: give up the oldest chunks, at least bytes of them but at most max_n (a
 * transaction the WAL can take), in a transaction of their own. The chains they leave without
 * chunks are noted (orphans_give deletes them): deleted with them, a chain's layer rows wrote
 * 35-54 pages of WAL for a few chunks, more than the WAL of a full disk held (30), and the ring
 * could give nothing up (store_crash_full). *n_out: chunks given up (0: none is left). */
static int evict_for_space(pfr_store *s, uint64_t bytes, size_t max_n, size_t *n_out)
{
    *n_out = 0;
    int rc = pfr_st_exec(&s->sql, "BEGIN IMMEDIATE");
    if (rc)
        return rc;
    struct evict_ctx x = {.for_disk = true, .chains_apart = true};
    int tier;
    rc = top_tier(s, &tier);
    if (!rc)
        rc = evict_batch(s, tier, bytes, max_n, 0, 0, &x, n_out);
    if (!rc && *n_out == 0)
        rc = evict_batch(s, -1, bytes, max_n, 0, 0, &x, n_out);
    evict_ctx_free(&x);
    if ((rc = full_txn_end(s, rc)) != 0)
        *n_out = 0;
    return rc;
}

/* On a full disk: the chains without chunks deleted, a few rows at a time (orphan_step: bases
 * first, their overflow pages freed without being written to the WAL, the most room for the
 * fewest frames), in transactions of at most steps steps, halved when one does not fit the WAL.
 * Best effort: what it cannot delete stays for make_room. */
static void orphans_give(pfr_store *s)
{
    size_t steps = 8;
    for (;;) {
        if (pfr_st_exec(&s->sql, "BEGIN IMMEDIATE") != 0)
            return;
        size_t done = 0;
        int r = 1;
        while (done < steps && (r = orphan_step(s, UINT64_MAX)) == 1)
            done++;
        int rc = full_txn_end(s, r < 0 ? r : 0);
        if (rc) {
            s->w->orphans_known = false; /* rows it deleted are back */
            if (rc == -ENOSPC && steps > 1) {
                steps /= 2;
                continue;
            }
            return;
        }
        if (done < steps)
            return; /* none left */
    }
}

/* How long a write on a full disk waits, in all, for readers whose snapshots hold the WAL: while
 * one does, every transaction needs new blocks for the WAL, and giving chunks up gives it none
 * (their pages go back to the file system only at a checkpoint). A reader holding it longer
 * costs the write (counted in dropped_disk), not the history. */
#define FULL_READER_WAIT_MS 3000

/* Checkpoint for the next transaction to write the WAL from its start: RESTART, or TRUNCATE when
 * the WAL holds more than twice the room a full disk leaves it (a reader's snapshot held it while
 * it grew: the rest is the database's, and the disk is full, so whoever filled it is done). Waits
 * for readers up to what is left of FULL_READER_WAIT_MS (*waited_ms: the time spent so far).
 * SQLITE_BUSY: a reader still holds the WAL. */
static int wal_restart_waiting(pfr_store *s, int64_t *waited_ms)
{
    struct store_space *sp = &s->space;
    bool give_back = sp->now.starved && pfr_st_space_wal_file(sp) > 2 * sp->now.wal_keep;
    int rc = wal_checkpoint(s, give_back);
    if (rc != SQLITE_BUSY || *waited_ms >= FULL_READER_WAIT_MS)
        return rc;
    int64_t t0 = pfr_clock_mono_ns();
    rc = wal_checkpoint_wait(s, give_back, (int)(FULL_READER_WAIT_MS - *waited_ms));
    *waited_ms += (pfr_clock_mono_ns() - t0) / 1000000 + 1;
    return rc;
}

/* A write found the disk full (-ENOSPC). First the spare file's room and a WAL written from its
 * start (waiting for readers that hold it); then, round by round, the oldest chunks given up
 * (twice as many bytes each round) and their pages given back, until the write fits. It fails
 * only when nothing older is left, when not even giving up fits, or when a reader holds the WAL
 * past the wait. */
static int append_full(pfr_store *s, const pfr_chunk_in *in, size_t n, int64_t *ids_out)
{
    int64_t waited = 0;
    pfr_st_space_spare_drop(&s->space);
    pfr_st_space_plan(&s->space, &s->sql);
    int ck = wal_restart_waiting(s, &waited);
    pfr_st_space_plan(&s->space, &s->sql);
    int rc = append_txn(s, in, n, ids_out);
    uint64_t bytes = s->space.now.wal_budget;
    size_t max_n = 16;
    while (rc == -ENOSPC && ck != SQLITE_BUSY) {
        size_t given = 0;
        uint64_t lack = pfr_st_space_wal_deficit(&s->space);
        int e = evict_for_space(s, bytes > lack ? bytes : lack, max_n, &given);
        if (e == -ENOSPC && max_n > 1) {
            max_n = 1; /* a smaller transaction may fit where that one did not */
            continue;
        }
        if (e != 0 || given == 0)
            break;
        orphans_give(s);
        /* The WAL needs room on the disk too, as much as the largest recent transaction's (the
         * one that failed is counted): the pages freed go back to the file system for it, as
         * far as the WAL can take the move (about a frame per page). */
        ck = wal_restart_waiting(s, &waited);
        pfr_st_space_plan(&s->space, &s->sql);
        if ((lack = pfr_st_space_wal_deficit(&s->space)) > 0) {
            shrink_step(s, true, lack / s->sql.page_size + 1);
            ck = wal_restart_waiting(s, &waited);
            pfr_st_space_plan(&s->space, &s->sql);
        }
        rc = append_txn(s, in, n, ids_out);
        bytes = bytes > UINT64_MAX / 2 ? UINT64_MAX : bytes * 2;
        max_n = max_n < 256 ? max_n * 2 : 512;
    }
    return rc;
}

/* Grow the database file toward the policy's pad (store_policy.h, db_pad) by free pages: a
 * transaction writes a row of zeros and deletes it, so its pages go to the freelist and stay in
 * the file. A step writes as much to the WAL (checkpointed and truncated after it, wal_trim), so
 * it is at most half the room the cap in force leaves the files. Best effort. */
static void pad_step(pfr_store *s)
{
    const struct store_policy_out *now = &s->space.now;
    uint64_t file = pfr_st_space_db_file(&s->space), files = pfr_st_space_files(&s->space);
    if (now->db_pad <= file + evict_slack(s, now->db_pad) || files >= now->cap)
        return;
    uint64_t step = now->db_pad - file;
    if (step > (now->cap - files) / 2)
        step = (now->cap - files) / 2;
    char sql[200];
    snprintf(sql, sizeof(sql),
             "BEGIN IMMEDIATE; INSERT INTO meta(key, value) VALUES('pad', zeroblob(%llu));"
             "DELETE FROM meta WHERE key = 'pad'; COMMIT",
             (unsigned long long)step);
    if (pfr_st_exec(&s->sql, sql) != 0 && !sqlite3_get_autocommit(s->sql.db))
        pfr_st_exec(&s->sql, "ROLLBACK");
}

int pfr_store_append_batch(pfr_store *s, const pfr_chunk_in *in, size_t n, int64_t *ids_out)
{
    if (!s || s->read_only)
        return s ? -EROFS : -EINVAL;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int rc = validate(&in[i]);
        if (rc)
            return rc;
    }
    if (!s->w) {
        if (!(s->w = calloc(1, sizeof(*s->w))))
            return -ENOMEM;
        s->w->ret.tiers = s->tiers;
        s->w->policy_evict_tier = -1;
    }
    pfr_st_space_plan(&s->space, &s->sql);
    int rc = append_txn(s, in, n, ids_out);
    if (rc == -ENOSPC)
        rc = append_full(s, in, n, ids_out);
    if (rc == -ENOSPC) {
        s->space.dropped_pending += n;
        return rc;
    }
    if (rc == 0) {
        /* on a full disk: what the WAL lacks for the next transaction, before it fails */
        shrink_step(s, false, pfr_st_space_wal_deficit(&s->space) / s->sql.page_size);
        pad_step(s);
        wal_trim(s);
        pfr_st_space_spare_make(&s->space);
    }
    return rc;
}

int pfr_store_append(pfr_store *s, const pfr_chunk_in *in, int64_t *id_out)
{
    return pfr_store_append_batch(s, in, 1, id_out);
}

/* ---- memory ---- */
void pfr_store_mem_stats_get(pfr_store *s, pfr_store_mem_stats *out)
{
    *out = (pfr_store_mem_stats){0};
    if (!s)
        return;
    if (s->w) {
        out->table_bytes = s->w->table_bytes;
        out->table_streams = s->w->resident;
        out->tables_dropped = s->w->tables_dropped;
    }
    out->chain_cache_bytes = s->dict.chain_bytes;
    int cur = 0, hi = 0;
    if (s->sql.db && sqlite3_db_status(s->sql.db, SQLITE_DBSTATUS_CACHE_USED, &cur, &hi, 0) == 0)
        out->page_cache_bytes = (uint64_t)(cur > 0 ? cur : 0);
}

/* The per-append scratch is sized by the largest profile met; it grows back at the next one. */
static void writer_free_scratch(struct writer *w)
{
    free(w->locmap);
    w->locmap = NULL;
    w->cap_locmap = 0;
    free(w->lfp);
    free(w->lidx);
    w->lfp = NULL;
    w->lidx = NULL;
    w->cap_lfp = w->cap_lidx = 0;
    free(w->frames);
    free(w->fhash);
    w->frames = NULL;
    w->fhash = NULL;
    w->cap_frames = w->cap_fhash = 0;
    free(w->cs);
    w->cs = NULL;
    w->cap_cs = 0;
}

static void trim(pfr_store *s, uint64_t keep_table_bytes, bool expected_too)
{
    if (!s)
        return;
    if (s->w && sqlite3_get_autocommit(s->sql.db)) {
        drop_cold_tables(s->w, NULL, keep_table_bytes, MAX_RESIDENT, expected_too);
        writer_free_scratch(s->w);
        /* decoded chains the roll-ups read: decoded again when next needed */
        pfr_st_chain_cache_clear(&s->dict);
    }
    if (s->sql.db)
        sqlite3_db_release_memory(s->sql.db);
}

void pfr_store_trim(pfr_store *s, uint64_t keep_table_bytes)
{
    trim(s, keep_table_bytes, true);
}

void pfr_store_trim_idle(pfr_store *s, uint64_t keep_table_bytes)
{
    trim(s, keep_table_bytes, false);
}
