/*
 * Tiered retention (store_retention.h): the steps, the choice of what makes room next, and the
 * merge of a roll-up's chunks. Why this shape: docs/store.md, "Tiers".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_units.h"
#include "store_merge.h"
#include "store_retention.h"

#define PICK_ROWS  64 /* oldest chunks of a tier read at a time for a group to roll up */
#define PICK_PAGES 64 /* pages of them looked at, at most: pins and set-aside chunks passed */

struct pick_row {
    int64_t id, stream, start, end, base;
};

/* Roll-ups and evictions between two measures of the tiers' bytes (the notes miss the chains
 * a roll-up or an eviction moves from one tier's charge to another's, or frees). */
#define RET_MEASURE_STEPS 32
/* Measures between reads of the coarsest tier's oldest start while the writer's notes keep it
 * (another writer handle's deletions are not noted) */
#define RET_COARSE_MEASURES 16
/* Roll-ups run only while the chunks (payloads, and the coarser tiers' own chains) are at least
 * 1/RET_PAYLOAD_MIN of the pages in use. */
#define RET_PAYLOAD_MIN 8
/* Each tier between the finest and the coarsest may hold 1/RET_BETWEEN_DEN of the pages in use
 * (its chunks and the chains only it keeps alive). */
#define RET_BETWEEN_DEN 32

/* A piece of the coarsest (the finest tier short of its step) is made once the rolled part it
 * takes holds RET_PIECE_PAGES pages and RET_PIECE_GROW times the piece before it (~8 KB on the
 * scaled 200-service ring, whose folded pieces take ~1 KB: about six of its minutes): pieces
 * come every few minutes, not at each minute rolled up, and a piece that holds more than the
 * finer chunks it would take is left as it is. Not a share of the pages: a stream's part of a
 * ring of many streams is what matters. */
#define RET_PIECE_PAGES 2
#define RET_PIECE_GROW  8
/* Pieces are made while the finest tier reaches back less than the coarsest's step and
 * 1/RET_PIECE_NEAR_DEN of it (61.9 minutes of an hour). Only once it was short, the first piece of
 * an hour (up to ~70 KB of minutes) came a step after the least reach (59.2 minutes); from an
 * eighth (67.5 minutes) pieces were made in most hours past 10 days, each a layer of new folded
 * stacks in the coarsest's chain: its chains took 171 KB instead of 98 (56.2 minutes). */
#define RET_PIECE_NEAR_DEN 32

static const int64_t default_steps[] = {60000000000ll, 600000000000ll, 3600000000000ll};

void pfr_st_tiers_resolve(const pfr_store_tiers *t, pfr_store_tiers *out)
{
    if (t && (t->off || t->n)) {
        *out = *t;
        return;
    }
    *out = (pfr_store_tiers){.n = sizeof(default_steps) / sizeof(default_steps[0])};
    memcpy(out->step_ns, default_steps, sizeof(default_steps));
}

int pfr_store_tiers_parse(const char *text, pfr_store_tiers *out, char *err, size_t errlen)
{
    *out = (pfr_store_tiers){0};
    if (!text || !strcmp(text, "off")) {
        out->off = text != NULL;
        if (!text)
            snprintf(err, errlen, "no steps");
        return text ? 0 : -EINVAL;
    }
    char buf[256];
    if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf)) {
        snprintf(err, errlen, "too long");
        return -EINVAL;
    }
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        int64_t ns;
        char why[128];
        if (out->n == PFR_STORE_MAX_TIERS) {
            snprintf(err, errlen, "at most %d steps", PFR_STORE_MAX_TIERS);
            return -EINVAL;
        }
        if (pfr_parse_duration(tok, &ns, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "step \"%s\": %s", tok, why);
            return -EINVAL;
        }
        int64_t prev = out->n ? out->step_ns[out->n - 1] : 0;
        if (ns < 1000000000ll || (prev && (ns <= prev || ns % prev))) {
            snprintf(err, errlen,
                     "step \"%s\": at least 1s, and a larger multiple of the one before", tok);
            return -EINVAL;
        }
        out->step_ns[out->n++] = ns;
    }
    if (!out->n) {
        snprintf(err, errlen, "no steps");
        return -EINVAL;
    }
    return 0;
}

int pfr_store_tiers_format(const pfr_store_tiers *t, char *buf, size_t len)
{
    pfr_store_tiers r;
    pfr_st_tiers_resolve(t, &r);
    if (r.off)
        return snprintf(buf, len, "off") < (int)len ? 0 : -ENOSPC;
    size_t at = 0;
    for (size_t i = 0; i < r.n; i++) {
        char d[32];
        pfr_format_duration(r.step_ns[i], d, sizeof(d));
        int k = snprintf(buf + at, len - at, "%s%s", i ? "," : "", d);
        if (k < 0 || (size_t)k >= len - at)
            return -ENOSPC;
        at += (size_t)k;
    }
    return 0;
}

void pfr_st_retention_note(struct store_retention *r, int tier, int64_t delta)
{
    if (!r->measured || tier < 0 || tier > PFR_STORE_MAX_TIERS)
        return;
    uint64_t *b = &r->bytes[tier];
    *b = delta < 0 && (uint64_t)-delta > *b ? 0 : *b + (uint64_t)delta;
}

void pfr_st_retention_coarse_note(struct store_retention *r, int tier, int64_t start_ns, bool added)
{
    bool coarsest = !r->tiers.off && r->tiers.n && (size_t)tier == r->tiers.n;
    if (!added && (tier < 0 || coarsest))
        r->coarse_known = false;
    else if (added && coarsest && r->coarse_known &&
             (!r->coarse_start || start_ns < r->coarse_start))
        r->coarse_start = start_ns;
}

void pfr_st_retention_coarse_forget(struct store_retention *r)
{
    r->coarse_known = false;
}

void pfr_st_rollup_free(struct store_rollup *g)
{
    free(g->in);
    *g = (struct store_rollup){0};
}

/* The bytes each tier above the finest holds: its chunks' payloads and rows, and the dictionary
 * chains whose chunks are all of that tier or coarser ones, charged to the finest of them (only
 * its chunks moving on can free them: a 10-minute roll-up within its inputs' recorded chain keeps
 * that chain alive once the recorded chunks are gone). Chains the finest tier references count
 * with it (what the pages hold besides the other tiers). Measured from the rows once per writer
 * and every so many steps, kept up to date by the writer's notes between. */
static int measure(struct store_retention *r, struct store_db *d)
{
    memset(r->bytes, 0, sizeof(r->bytes));
    char rows[96];
    snprintf(rows, sizeof(rows),
             "SELECT tier, sum(nbytes) + count(*) * %d FROM chunks GROUP BY tier",
             STORE_ROW_OVERHEAD);
    const char *const sql[] = {
        rows,
        "SELECT c.t, sum(d.nbytes) FROM dicts d JOIN (SELECT base_id, min(tier) AS t FROM"
        " chunks GROUP BY base_id) c ON d.base_id = c.base_id WHERE c.t > 0 GROUP BY c.t",
    };
    for (size_t q = 0; q < 2 && !r->tiers.off; q++) {
        sqlite3_stmt *st = pfr_st_prepare(d, sql[q]);
        if (!st)
            return pfr_st_db_err(d);
        int step;
        while ((step = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t t = sqlite3_column_int64(st, 0);
            if (t >= 0 && t <= PFR_STORE_MAX_TIERS)
                r->bytes[t] += (uint64_t)sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
        if (step != SQLITE_DONE)
            return pfr_store_errno(step);
    }
    if (r->coarse_known && ++r->coarse_measures >= RET_COARSE_MEASURES)
        r->coarse_known = false;
    if (!r->coarse_known && !r->tiers.off && r->tiers.n) {
        char q[96];
        snprintf(q, sizeof(q), "SELECT coalesce(min(start_ns), 0) FROM chunks WHERE tier = %zu",
                 r->tiers.n);
        int rc = pfr_st_query_int(d, q, &r->coarse_start);
        if (rc)
            return rc;
        r->coarse_known = true;
        r->coarse_measures = 0;
    }
    r->measured = true;
    r->steps = 0;
    return 0;
}

/* The policy (docs/store.md, "Tiers": "Which chunks"). The coarsest tier keeps 30 days whatever
 * its bytes, up to half of the pages in use; it is deleted only past either (or when nothing
 * else may move). Each tier between keeps a thirty-second, its chunks and the chains only they
 * keep alive; past it, its oldest whole bucket goes up a tier (coarser tiers first: only the
 * coarsest's roll-up frees the chains the ones between hold). Otherwise the room comes from the
 * finest tier: its oldest whole bucket is rolled up. So the finest tier gets what the others
 * leave, and an hour worth ~1 KB is never deleted to make room for a ~144 KB base. */
void pfr_st_retention_plan(const struct store_ret_in *in, struct store_ret_plan *o)
{
    *o = (struct store_ret_plan){.trim = -1, .evict_last = in->top};
    unsigned n = in->n > PFR_STORE_MAX_TIERS ? PFR_STORE_MAX_TIERS : in->n;
    if (!n || in->top < 0)
        return;
    /* Dictionaries take nearly all the pages (short-lived programs, each a chain of its own, on
     * a churning host): merging chunks cannot make room, giving the oldest up does (their chains
     * with them), as age-only eviction would. */
    uint64_t payloads = 0;
    for (unsigned k = 0; k <= n; k++)
        payloads += in->bytes[k];
    if (payloads < in->used / RET_PAYLOAD_MIN)
        return;
    if (in->top == (int)n &&
        (in->coarse_age > STORE_RET_COARSE_HORIZON_NS ||
         in->bytes[n] > in->used / STORE_RET_COARSE_MAX_DEN * STORE_RET_COARSE_MAX_NUM))
        o->trim = (int)n;
    bool early[PFR_STORE_MAX_TIERS + 1] = {false};
    for (int k = (int)n - 1; k >= 1; k--)
        if (in->bytes[k] > in->used / RET_BETWEEN_DEN)
            o->order[o->norder++] = k;
    /* The finest tier short of the coarsest's step (issue 31: the last hour as recorded): the
     * tiers between whose roll-ups stay below the coarsest go first, within their share too, as
     * far as their buckets are settled. What they hold then is the hour before's rolled
     * minutes, which go into the coarsest with it within the hour; each minute kept cost the
     * finest tier about as much (the scaled 200-service ring at its low point: 49 minutes,
     * 59 KB, beside 52.5 minutes as recorded). Not the one below the coarsest: its roll-up takes
     * the hour's recorded chunks with it. */
    /* And before them the hour before's rolled part (its minutes and 10 minutes, ~25 KB there
     * at the low point beside its finest chunks) into the coarsest as a piece (~1 KB, folded as
     * the coarsest's chunks are), merged with the hour's rest when that goes (the group into
     * the coarsest takes the bucket's pieces). The hour's recorded chain stays with its finest
     * chunks either way. The tier below the coarsest still rolls its whole hours up after the
     * finest, as below. A little before the finest tier falls short (fine_near,
     * RET_PIECE_NEAR_DEN). */
    if ((in->fine_short || in->fine_near) && n >= 2 &&
        in->bytes[n - 1] <= in->used / RET_BETWEEN_DEN) {
        o->piece[o->norder] = true;
        o->order[o->norder++] = (int)n - 1;
    }
    for (int k = (int)n - 2; k >= 1 && in->fine_short; k--)
        if (in->bytes[k] <= in->used / RET_BETWEEN_DEN) {
            early[k] = true;
            o->settled[o->norder] = true;
            o->order[o->norder++] = k;
        }
    o->order[o->norder++] = 0;
    /* A young ring, or one whose finest chunks may not move (not taken by a consumer, pinned):
     * the tiers between roll up, coarser first, rather than delete. */
    for (int k = (int)n - 1; k >= 1; k--)
        if (in->bytes[k] <= in->used / RET_BETWEEN_DEN && !early[k])
            o->order[o->norder++] = k;
}

static int64_t floor_to(int64_t t, int64_t step)
{
    int64_t q = t / step;
    if (t % step && t < 0)
        q--;
    return q * step;
}

/* Whether a chunk must stay as it is: not yet taken by every consumer (or set aside), or pinned. */
static bool kept(const struct store_keep *keep, int64_t stream, int64_t id, int64_t start_ns,
                 int64_t end_ns)
{
    if (keep->any_cursor && id > keep->min_cursor)
        return true;
    if (keep->asides && pfr_st_cursors_aside(keep->asides, id))
        return true;
    return keep->pins && keep->pins->n &&
           pfr_st_pins_protects(keep->pins, pfr_st_stream_get(keep->dict, stream), start_ns,
                                end_ns);
}

/* The chunks of stream c's bucket [b0, b1) in tier k that may be merged; of chain base only
 * when it is not 0 (a roll-up within its inputs' chain: a bucket across two chains is rolled up
 * in a piece per chain). Into the coarsest tier, the bucket's chunks of every finer tier from
 * tier lo on, and the bucket's pieces of the coarsest made before: an hour is one chunk, not a
 * piece per tier its parts had reached (each a row, and each folded apart). A piece (lo > 0)
 * ends where the bucket's first chunk of a tier below lo starts: a roll-up covers
 * [first start, last end) and the averaged types are weighted by that span, so a piece must
 * hold no gap, nor overlap the chunks left. */
static int group_rows(struct store_db *d, const struct store_keep *keep, int k, bool all_finer,
                      int lo, int64_t stream, int64_t b0, int64_t b1, int64_t base,
                      struct store_rollup *g)
{
    sqlite3_stmt *st = pfr_st_prepare(
        d, "SELECT id, base_id, dict_id, start_ns, end_ns, crc, nbytes, tier"
           " FROM chunks WHERE stream_id = ?1 AND end_ns > ?2 AND"
           " start_ns >= ?2 AND start_ns < ?3 AND (tier = ?4 OR (?6 AND tier <= ?4 + 1))"
           " AND tier >= ?7 AND (?5 = 0 OR base_id = ?5) AND end_ns <= (SELECT"
           " coalesce(min(start_ns), 9223372036854775807) FROM chunks WHERE stream_id = ?1 AND"
           " start_ns >= ?2 AND start_ns < ?3 AND tier < ?7) ORDER BY start_ns");
    if (!st)
        return pfr_st_db_err(d);
    sqlite3_bind_int64(st, 1, stream);
    sqlite3_bind_int64(st, 2, b0);
    sqlite3_bind_int64(st, 3, b1);
    sqlite3_bind_int64(st, 4, k);
    sqlite3_bind_int64(st, 5, base);
    sqlite3_bind_int(st, 6, all_finer);
    sqlite3_bind_int(st, 7, lo);
    g->n = 0;
    g->in_bytes = g->finer_bytes = 0;
    g->piece = lo > 0;
    g->min_id = INT64_MAX;
    int step, rc = 0;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_chunk_ref c = {
            .id = sqlite3_column_int64(st, 0),
            .stream_id = stream,
            .base_id = sqlite3_column_int64(st, 1),
            .dict_id = sqlite3_column_int64(st, 2),
            .start_ns = sqlite3_column_int64(st, 3),
            .end_ns = sqlite3_column_int64(st, 4),
            .crc = (uint32_t)sqlite3_column_int64(st, 5),
        };
        if (kept(keep, stream, c.id, c.start_ns, c.end_ns))
            continue;
        if (VEC_RESERVE(g->in, g->cap, g->n + 1)) {
            rc = -ENOMEM;
            break;
        }
        g->in[g->n++] = c;
        uint64_t bytes = (uint64_t)sqlite3_column_int64(st, 6) + STORE_ROW_OVERHEAD;
        g->in_bytes += bytes;
        if (sqlite3_column_int(st, 7) <= k)
            g->finer_bytes += bytes;
        if (c.id < g->min_id)
            g->min_id = c.id;
        if (g->n == 1 || c.start_ns < g->start_ns)
            g->start_ns = c.start_ns;
        if (g->n == 1 || c.end_ns > g->end_ns)
            g->end_ns = c.end_ns;
    }
    if (!rc && step != SQLITE_DONE)
        rc = pfr_store_errno(step);
    sqlite3_finalize(st);
    g->tier = k + 1;
    g->stream_id = stream;
    return rc ? rc : g->n > 0;
}

/* One page of the oldest chunks of tier k after id after: *n rows. */
static int pick_page(struct store_db *d, int k, int64_t after, struct pick_row *rows, size_t *n)
{
    sqlite3_stmt *st =
        pfr_st_prepare(d, "SELECT id, stream_id, start_ns, end_ns, base_id FROM chunks"
                          " WHERE tier = ?1"
                          " AND id > ?2 ORDER BY id LIMIT 64");
    if (!st)
        return pfr_st_db_err(d);
    sqlite3_bind_int64(st, 1, k);
    sqlite3_bind_int64(st, 2, after);
    *n = 0;
    int step_rc = SQLITE_DONE;
    while (*n < PICK_ROWS && (step_rc = sqlite3_step(st)) == SQLITE_ROW)
        rows[(*n)++] = (struct pick_row){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                         sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
                                         sqlite3_column_int64(st, 4)};
    sqlite3_finalize(st);
    return step_rc == SQLITE_ROW || step_rc == SQLITE_DONE ? 0 : pfr_store_errno(step_rc);
}

/* Whether stream's bucket [b0, b1) holds a chunk of a tier finer than k. */
static int bucket_unsettled(struct store_db *d, int64_t stream, int64_t b0, int64_t b1, int k,
                            bool *finer)
{
    sqlite3_stmt *st = pfr_st_prepare(d, "SELECT EXISTS (SELECT 1 FROM chunks WHERE stream_id = ?1"
                                         " AND end_ns > ?2 AND start_ns >= ?2 AND start_ns < ?3"
                                         " AND tier < ?4)");
    if (!st)
        return pfr_st_db_err(d);
    sqlite3_bind_int64(st, 1, stream);
    sqlite3_bind_int64(st, 2, b0);
    sqlite3_bind_int64(st, 3, b1);
    sqlite3_bind_int(st, 4, k);
    int step = sqlite3_step(st);
    *finer = step == SQLITE_ROW && sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return step == SQLITE_ROW ? 0 : pfr_store_errno(step);
}

/* The oldest whole bucket of tier k that may be rolled up into tier k + 1: 1 with g set, 0 when
 * there is none. A bucket is whole once the ring holds a chunk that ends past it. Pages on past
 * the chunks that must stay (set aside, pinned: a sink that rejected a service for days must not
 * hold every roll-up back), up to the first chunk no consumer has taken. */
static int pick(struct store_retention *r, struct store_db *d, const struct store_keep *keep, int k,
                bool settled, int64_t newest_end, struct store_rollup *g)
{
    int64_t step = r->tiers.step_ns[k];
    struct pick_row rows[PICK_ROWS];
    size_t n;
    int64_t after = 0;
    int pages = 0;
    do {
        int rc = pick_page(d, k, after, rows, &n);
        if (rc)
            return rc;
        for (size_t i = 0; i < n; i++) {
            after = rows[i].id;
            if (keep->any_cursor && rows[i].id > keep->min_cursor)
                return 0; /* later rows have later ids: none taken by every consumer */
            int64_t b0 = floor_to(rows[i].start, step);
            if (b0 > INT64_MAX - step || b0 + step > newest_end)
                return 0; /* later rows start later: no whole bucket in this tier yet */
            if (kept(keep, rows[i].stream, rows[i].id, rows[i].start, rows[i].end))
                continue; /* its bucket's others are met through a row of their own */
            bool coarsest = k + 1 == (int)r->tiers.n, finer = false;
            if (settled &&
                (rc = bucket_unsettled(d, rows[i].stream, b0, b0 + step, k, &finer)) != 0)
                return rc;
            if (finer)
                continue;
            if ((rc = group_rows(d, keep, k, coarsest, 0, rows[i].stream, b0, b0 + step,
                                 coarsest ? 0 : rows[i].base, g)) != 0)
                return rc;
        }
    } while (n == PICK_ROWS && ++pages < PICK_PAGES);
    return 0;
}

/* Candidate buckets for a piece read at a time (the oldest first) */
#define PIECE_CANDIDATES 8

/* The oldest whole coarsest bucket whose rolled part (its chunks of the tiers between, past the
 * piece made before) is worth a piece (RET_PIECE_*), into the coarsest as a piece with that
 * piece, not with the bucket's finest chunks: 1 with g set, 0 when there is none. Without the
 * floor a piece was made again at each minute the finest tier rolled up (a merge, a fold and a
 * layer of the coarsest's chain each, and each a rounding of the averaged types). */
static int pick_piece(struct store_retention *r, struct store_db *d, const struct store_keep *keep,
                      int64_t newest_end, struct store_rollup *g)
{
    uint64_t min = (uint64_t)RET_PIECE_PAGES * d->page_size;
    int top = (int)r->tiers.n - 1;
    int64_t step = r->tiers.step_ns[top];
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT stream_id, b, first FROM (SELECT stream_id, start_ns - start_ns %% ?1 -"
             " (start_ns < 0 AND start_ns %% ?1 != 0) * ?1 AS b, min(id) AS first,"
             " sum(nbytes) + count(*) * %d AS bytes FROM chunks WHERE tier >= 1 AND tier <= ?2"
             " AND (?3 = 0 OR id <= ?4) GROUP BY stream_id, b) WHERE b <= ?5 - ?1 AND bytes >= ?6"
             " ORDER BY first LIMIT %d",
             STORE_ROW_OVERHEAD, PIECE_CANDIDATES);
    sqlite3_stmt *st = pfr_st_prepare(d, sql);
    if (!st)
        return pfr_st_db_err(d);
    sqlite3_bind_int64(st, 1, step);
    sqlite3_bind_int(st, 2, top);
    sqlite3_bind_int(st, 3, keep->any_cursor);
    sqlite3_bind_int64(st, 4, keep->min_cursor);
    sqlite3_bind_int64(st, 5, newest_end);
    sqlite3_bind_int64(st, 6, (int64_t)min);
    int step_rc, rc = 0;
    while (!rc && (step_rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t stream = sqlite3_column_int64(st, 0), b0 = sqlite3_column_int64(st, 1);
        /* what pins and set-aside chunks leave of it */
        rc = group_rows(d, keep, top, true, 1, stream, b0, b0 + step, 0, g);
        if (rc > 0 && (g->finer_bytes < min ||
                       g->finer_bytes < RET_PIECE_GROW * (g->in_bytes - g->finer_bytes)))
            rc = 0;
    }
    sqlite3_finalize(st);
    if (!rc && step_rc != SQLITE_ROW && step_rc != SQLITE_DONE)
        rc = pfr_store_errno(step_rc);
    return rc;
}

/* Whether no chunk of tier k or finer references chain base any more. */
static int chain_left(struct store_db *d, int64_t base, int k, bool *left)
{
    sqlite3_stmt *st = pfr_st_prepare(
        d, "SELECT NOT EXISTS (SELECT 1 FROM chunks WHERE base_id = ?1 AND tier <= ?2)");
    if (!st)
        return pfr_st_db_err(d);
    sqlite3_bind_int64(st, 1, base);
    sqlite3_bind_int(st, 2, k);
    int step = sqlite3_step(st);
    *left = step == SQLITE_ROW && sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return step == SQLITE_ROW ? 0 : pfr_store_errno(step);
}

/* The policy's plan on the tiers' bytes as last measured or noted. */
static void plan_now(const struct store_retention *r, uint64_t used, int64_t top,
                     int64_t newest_end, int64_t fine_start, struct store_ret_plan *plan)
{
    int64_t coarse_step = r->tiers.n ? r->tiers.step_ns[r->tiers.n - 1] : 0;
    struct store_ret_in in = {.n = r->tiers.off ? 0 : (unsigned)r->tiers.n,
                              .used = used,
                              .top = (int)top,
                              .coarse_age = r->coarse_start ? newest_end - r->coarse_start : 0,
                              .fine_short = fine_start && newest_end - fine_start < coarse_step,
                              .fine_near =
                                  fine_start && newest_end - fine_start <
                                                    coarse_step + coarse_step / RET_PIECE_NEAR_DEN};
    memcpy(in.bytes, r->bytes, sizeof(in.bytes));
    pfr_st_retention_plan(&in, plan);
}

int pfr_st_retention_next(struct store_retention *r, struct store_db *d,
                          const struct store_keep *keep, uint64_t used, struct store_rollup *g,
                          int *evict_tier)
{
    int rc;
    int64_t top, newest_end, fine_start;
    /* Measured again every so many steps, and as soon as a tier's last roll-up left its chain
     * without a chunk of that tier or finer: the chain is then charged to the tiers its
     * roll-ups reached, which move on into the coarsest and free it, instead of the finest
     * rolling up on for its room (each of its roll-ups frees ~a page, a drifting hour's chain
     * ~410 KB). The tiers between too: when the last minutes of an hour went up to the
     * 10-minute tier, the chain stayed charged to the minutes until the next measure, which
     * rolled the next hour's minutes up while the hour before held its ~410 KB chain at 10
     * minutes, and the finest tier rolled up for the room (svc200 at 12 days: three hours'
     * chains, 54 minutes as recorded). Asked of the one chain, not of the oldest chunk's: with
     * many streams the oldest chunk's chain changes at nearly every roll-up. */
    bool left = false;
    for (int k = 0; k < PFR_STORE_MAX_TIERS; k++) {
        bool gone = false;
        if (r->watch_base[k] && (rc = chain_left(d, r->watch_base[k], k, &gone)) != 0)
            return rc;
        if (gone)
            r->watch_base[k] = 0;
        left = left || gone;
    }
    if ((!r->measured || ++r->steps > RET_MEASURE_STEPS || left) && (rc = measure(r, d)) != 0)
        return rc;
    if ((rc = pfr_st_query_int(d, "SELECT coalesce(max(tier), -1) FROM chunks", &top)) != 0 ||
        (rc = pfr_st_query_int(d, "SELECT end_ns FROM chunks ORDER BY id DESC LIMIT 1",
                               &newest_end)) != 0 ||
        (rc = pfr_st_query_int(d,
                               "SELECT coalesce((SELECT start_ns FROM chunks WHERE tier = 0"
                               " ORDER BY id LIMIT 1), 0)",
                               &fine_start)) != 0)
        return rc;
    if (top < 0)
        return STORE_RET_NONE;
    struct store_ret_plan plan;
    plan_now(r, used, top, newest_end, fine_start, &plan);
    if (plan.trim >= 0 && r->steps) {
        /* the hours go only on fresh figures: the notes miss the chains that moved */
        if ((rc = measure(r, d)) != 0)
            return rc;
        plan_now(r, used, top, newest_end, fine_start, &plan);
    }
    *evict_tier = plan.trim;
    if (plan.trim >= 0)
        return STORE_RET_TRIM;
    for (unsigned i = 0; i < plan.norder; i++)
        if ((rc = plan.piece[i]
                      ? pick_piece(r, d, keep, newest_end, g)
                      : pick(r, d, keep, plan.order[i], plan.settled[i], newest_end, g)) != 0) {
            if (rc > 0 && g->tier < (int)r->tiers.n && g->tier > 0)
                r->watch_base[g->tier - 1] = g->in[0].base_id;
            /* a roll-up into the coarsest frees the chains its inputs alone kept: measured again
             * at the next call (with the freed chain still charged, its tier stayed over its
             * share and rolled the next hour up whole, its last recorded minutes with it) */
            if (rc > 0 && g->tier == (int)r->tiers.n)
                r->measured = false;
            return rc < 0 ? rc : STORE_RET_ROLLUP;
        }
    /* Nothing may be merged (chunks not yet taken by a consumer, or protected): the oldest of
     * the coarsest tier present go. */
    *evict_tier = plan.evict_last;
    return STORE_RET_EVICT;
}

int pfr_st_rollup_merge(struct store_dict *dict, const struct store_rollup *g, pfr_profile **out)
{
    *out = NULL;
    int rc = pfr_st_streams_refresh(dict);
    if (rc)
        return rc;
    const struct rstream *r = pfr_st_stream_get(dict, g->stream_id);
    if (!r || r->bad)
        return -EBADMSG;
    struct store_merger m = {0};
    struct dchunk dc = {0};
    if (!(m.p = pfr_profile_new()) || pfr_st_ktab_intern(&m.lsets, "", 0, NULL) != 0) {
        pfr_st_merger_free(&m);
        return -ENOMEM;
    }
    for (size_t t = 0; t < r->ntypes; t++)
        pfr_profile_add_sample_type(m.p, r->types[t], r->units[t]);
    m.nout = r->ntypes;
    rc = pfr_profile_error(m.p);
    if (!rc)
        rc = pfr_st_merger_gauges(&m);
    for (size_t i = 0; i < g->n && !rc; i++) {
        const struct chain *ch = NULL;
        int lr = pfr_st_chunk_load(dict, &g->in[i], r, &dc, &ch);
        if (lr == STORE_LOAD_VANISHED)
            lr = -EBADMSG; /* inside the writer's transaction: a listed row cannot vanish */
        if (lr) {
            rc = lr;
            break;
        }
        struct store_weight w = {1, 1, g->in[i].end_ns - g->in[i].start_ns};
        rc = pfr_st_merger_chunk(&m, r, ch, &dc, &w);
    }
    if (!rc)
        rc = pfr_st_merger_finish(&m);
    if (!rc) {
        *out = m.p;
        m.p = NULL;
    }
    pfr_st_merger_free(&m);
    pfr_st_dchunk_free(&dc);
    return rc;
}

/* ---- roll-ups in their inputs' chain ---- */

/* The in-chain merge's accumulators: per (stack, label set) of the chain, the summed values and,
 * for averaged types, the duration-weighted sums. */
struct inchain {
    pfr_map idx; /* stack << 32 | lset -> row */
    uint64_t *keys;
    int64_t *vals;
    double *gacc;
    size_t n, cap_keys, cap_vals, cap_gacc;
};

static void inchain_free(struct inchain *a)
{
    pfr_map_free(&a->idx);
    free(a->keys);
    free(a->vals);
    free(a->gacc);
}

static int inchain_add(struct inchain *a, const struct dchunk *c, const bool *gauge, size_t nt,
                       int64_t dur)
{
    for (size_t i = 0; i < c->nsamples; i++) {
        uint64_t key = (uint64_t)c->stack[i] << 32 | c->lset[i];
        bool found;
        uint32_t r = store_map_put(&a->idx, key, (uint32_t)a->n, &found);
        if (r == UINT32_MAX)
            return -ENOMEM;
        if (!found) {
            if (VEC_RESERVE(a->keys, a->cap_keys, a->n + 1) ||
                VEC_RESERVE(a->vals, a->cap_vals, (a->n + 1) * nt) ||
                VEC_RESERVE(a->gacc, a->cap_gacc, (a->n + 1) * nt))
                return -ENOMEM;
            a->keys[a->n] = key;
            memset(&a->vals[a->n * nt], 0, nt * sizeof(*a->vals));
            memset(&a->gacc[a->n * nt], 0, nt * sizeof(*a->gacc));
            a->n++;
        }
        const int64_t *v = &c->values[i * c->ntypes];
        for (size_t t = 0; t < nt; t++) {
            if (gauge[t])
                a->gacc[(size_t)r * nt + t] += (double)v[t] * (double)dur;
            else /* wrapping, as the writer's totals */
                a->vals[(size_t)r * nt + t] =
                    (int64_t)((uint64_t)a->vals[(size_t)r * nt + t] + (uint64_t)v[t]);
        }
    }
    return 0;
}

static int key_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* The accumulated rows as a chunk body (sorted by stack, then label set), packed into out. */
static int inchain_encode(struct inchain *a, const struct dchunk *first, const uint32_t n[T_N],
                          const bool *gauge, size_t nt, double dur_total, int64_t t0, int64_t t1,
                          pfr_st_hc *hc, struct store_rolled *out)
{
    uint64_t *order = malloc((a->n ? a->n : 1) * sizeof(*order));
    uint32_t *stack = malloc((a->n ? a->n : 1) * sizeof(*stack));
    uint32_t *lset = malloc((a->n ? a->n : 1) * sizeof(*lset));
    int64_t *vals = malloc((a->n ? a->n : 1) * (nt ? nt : 1) * sizeof(*vals));
    int64_t *tot = calloc(nt ? nt : 1, sizeof(*tot));
    struct tabs none = {0};
    pfr_buf raw = {0};
    int rc = -ENOMEM;
    if (!order || !stack || !lset || !vals || !tot)
        goto out;
    for (size_t i = 0; i < a->n; i++)
        order[i] = a->keys[i];
    qsort(order, a->n, sizeof(*order), key_cmp);
    for (size_t i = 0; i < a->n; i++) {
        uint32_t r = store_map_get(&a->idx, order[i]);
        stack[i] = (uint32_t)(order[i] >> 32);
        lset[i] = (uint32_t)order[i];
        for (size_t t = 0; t < nt; t++)
            vals[i * nt + t] =
                gauge[t] ? (dur_total > 0 ? llround(a->gacc[(size_t)r * nt + t] / dur_total) : 0)
                         : a->vals[(size_t)r * nt + t];
    }
    struct chunk_body body = {.time_nanos = t0,
                              .duration = t1 - t0,
                              .period = first->period,
                              .period_type = first->period_type,
                              .period_unit = first->period_unit,
                              .ntypes = (uint32_t)nt,
                              .nsamples = a->n,
                              .stack = stack,
                              .lset = lset,
                              .values = vals};
    pfr_st_chunk_encode(&raw, n, &none, &body);
    rc = pfr_buf_err(&raw);
    if (!rc)
        rc = pfr_st_blob_pack(raw.data, raw.len, hc, &out->blob);
    if (!rc) {
        pfr_st_sum_totals(vals, a->n, (uint32_t)nt, tot);
        out->tot.len = 0;
        pfr_st_totals_encode(&out->tot, tot, nt);
        rc = pfr_buf_err(&out->tot);
    }
out:
    pfr_buf_free(&raw);
    free(order);
    free(stack);
    free(lset);
    free(vals);
    free(tot);
    return rc;
}

int pfr_st_rollup_inchain(struct store_dict *dict, const struct store_rollup *g, pfr_st_hc *hc,
                          struct store_rolled *out)
{
    int rc = pfr_st_streams_refresh(dict);
    if (rc)
        return rc;
    const struct rstream *r = pfr_st_stream_get(dict, g->stream_id);
    if (!r || r->bad)
        return -EBADMSG;
    int64_t base = g->in[0].base_id, top = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (g->in[i].base_id != base)
            return -ENOTSUP; /* the inputs span chains */
        if (g->in[i].dict_id > top)
            top = g->in[i].dict_id;
    }
    size_t nt = r->ntypes;
    bool *gauge = calloc(nt ? nt : 1, sizeof(*gauge));
    if (!gauge)
        return -ENOMEM;
    for (size_t t = 0; t < nt; t++)
        gauge[t] = pfr_st_type_is_gauge(r->types[t]);
    struct inchain a = {0};
    struct dchunk dc = {0}, first = {0};
    double dur_total = 0;
    for (size_t i = 0; i < g->n && !rc; i++) {
        const struct chain *ch = NULL;
        rc = pfr_st_chunk_load(dict, &g->in[i], r, &dc, &ch);
        if (rc == STORE_LOAD_VANISHED)
            rc = -EBADMSG; /* inside the writer's transaction: a listed row cannot vanish */
        if (rc)
            break;
        for (int k = 0; k < T_N && !rc; k++)
            if (dc.delta.t[k].n)
                rc = -ENOTSUP; /* entries of its own (older writers): the profile path */
        if (rc)
            break;
        if (i == 0) {
            first.period = dc.period;
            first.period_type = dc.period_type;
            first.period_unit = dc.period_unit;
        }
        int64_t dur = g->in[i].end_ns - g->in[i].start_ns;
        dur_total += (double)dur;
        rc = inchain_add(&a, &dc, gauge, nt, dur);
    }
    uint32_t n[T_N];
    bool corrupt = false;
    if (!rc && !pfr_st_chain_get(dict, base, top, n, &corrupt, &rc))
        rc = rc ? rc : -EBADMSG;
    if (!rc) {
        out->base_id = base;
        out->dict_id = top;
        rc = inchain_encode(&a, &first, n, gauge, nt, dur_total, g->start_ns, g->end_ns, hc, out);
    }
    inchain_free(&a);
    pfr_st_dchunk_free(&dc);
    free(gauge);
    return rc;
}

void pfr_st_rolled_free(struct store_rolled *o)
{
    pfr_buf_free(&o->blob);
    pfr_buf_free(&o->tot);
}
