/*
 * Tiered retention (store_retention.h): the steps, the choice of what makes room next, and the
 * merge of a roll-up's chunks. Why this shape: docs/store.md, "Tiers".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_units.h"
#include "store_merge.h"
#include "store_retention.h"

#define PICK_ROWS                                                                                  \
    64 /* oldest chunks of a tier looked at for a group to roll up (in pick's SQL)                 \
        */

struct pick_row {
    int64_t id, stream, start;
};

static const int64_t default_steps[] = {60000000000ll, 600000000000ll, 3600000000000ll};

void store_tiers_resolve(const pfr_store_tiers *t, pfr_store_tiers *out)
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
    store_tiers_resolve(t, &r);
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

bool store_retention_protected(struct store_db *d, int64_t stream_id, int64_t start_ns,
                               int64_t end_ns)
{
    /* Pins (issue 31, section 3) plug in here: a pinned range is never rolled up nor evicted. */
    (void)d;
    (void)stream_id;
    (void)start_ns;
    (void)end_ns;
    return false;
}

void store_retention_note(struct store_retention *r, int tier, int64_t delta)
{
    if (!r->measured || tier < 0 || tier > PFR_STORE_MAX_TIERS)
        return;
    uint64_t *b = &r->bytes[tier];
    *b = delta < 0 && (uint64_t)-delta > *b ? 0 : *b + (uint64_t)delta;
}

void store_rollup_free(struct store_rollup *g)
{
    free(g->in);
    *g = (struct store_rollup){0};
}

/* The bytes each tier holds, from the chunk rows (once per writer, then kept by notes). */
static int measure(struct store_retention *r, struct store_db *d)
{
    memset(r->bytes, 0, sizeof(r->bytes));
    sqlite3_stmt *st = store_prepare(d, "SELECT tier, sum(nbytes), count(*) FROM chunks"
                                        " GROUP BY tier");
    if (!st)
        return store_db_err(d);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t t = sqlite3_column_int64(st, 0);
        if (t >= 0 && t <= PFR_STORE_MAX_TIERS)
            r->bytes[t] = (uint64_t)sqlite3_column_int64(st, 1) +
                          (uint64_t)sqlite3_column_int64(st, 2) * STORE_ROW_OVERHEAD;
    }
    sqlite3_finalize(st);
    if (step != SQLITE_DONE)
        return pfr_store_errno(step);
    r->measured = true;
    return 0;
}

/* What a tier below the coarsest may hold before its oldest chunks are rolled up, as a share of
 * the chunks' bytes (not of the cap: dictionaries take the rest, and a busy host's take most):
 * the finest (as recorded) five eighths, each tier between a sixteenth shared among them; the
 * coarsest holds the rest. Rolling up the finest tier first keeps it whole longest. */
static uint64_t share(const struct store_retention *r, int k)
{
    uint64_t all = 0;
    for (size_t i = 0; i <= r->tiers.n && i <= PFR_STORE_MAX_TIERS; i++)
        all += r->bytes[i];
    if (k == 0)
        return all / 8 * 5;
    return all / 16 / (uint64_t)(r->tiers.n > 1 ? r->tiers.n - 1 : 1);
}

static int64_t floor_to(int64_t t, int64_t step)
{
    int64_t q = t / step;
    if (t % step && t < 0)
        q--;
    return q * step;
}

/* The chunks of stream c's bucket [b0, b1) in tier k that may be merged. */
static int group_rows(struct store_db *d, int k, int64_t stream, int64_t b0, int64_t b1,
                      bool any_cursor, int64_t min_cursor, struct store_rollup *g)
{
    sqlite3_stmt *st = store_prepare(d, "SELECT id, base_id, dict_id, start_ns, end_ns, crc, nbytes"
                                        " FROM chunks WHERE stream_id = ?1 AND end_ns > ?2 AND"
                                        " start_ns >= ?2 AND start_ns < ?3 AND tier = ?4"
                                        " ORDER BY start_ns");
    if (!st)
        return store_db_err(d);
    sqlite3_bind_int64(st, 1, stream);
    sqlite3_bind_int64(st, 2, b0);
    sqlite3_bind_int64(st, 3, b1);
    sqlite3_bind_int64(st, 4, k);
    g->n = 0;
    g->in_bytes = 0;
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
        if ((any_cursor && c.id > min_cursor) ||
            store_retention_protected(d, stream, c.start_ns, c.end_ns))
            continue;
        if (VEC_RESERVE(g->in, g->cap, g->n + 1)) {
            rc = -ENOMEM;
            break;
        }
        g->in[g->n++] = c;
        g->in_bytes += (uint64_t)sqlite3_column_int64(st, 6) + STORE_ROW_OVERHEAD;
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

/* The oldest whole bucket of tier k that may be rolled up into tier k + 1: 1 with g set, 0 when
 * there is none. A bucket is whole once the ring holds a chunk that ends past it. */
static int pick(struct store_retention *r, struct store_db *d, int k, int64_t newest_end,
                bool any_cursor, int64_t min_cursor, struct store_rollup *g)
{
    int64_t step = r->tiers.step_ns[k];
    sqlite3_stmt *st = store_prepare(d, "SELECT id, stream_id, start_ns FROM chunks WHERE tier = ?1"
                                        " ORDER BY start_ns LIMIT 64");
    if (!st)
        return store_db_err(d);
    sqlite3_bind_int64(st, 1, k);
    struct pick_row rows[PICK_ROWS];
    size_t n = 0;
    int step_rc;
    while (n < PICK_ROWS && (step_rc = sqlite3_step(st)) == SQLITE_ROW)
        rows[n++] = (struct pick_row){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                      sqlite3_column_int64(st, 2)};
    if (n < PICK_ROWS && step_rc != SQLITE_DONE) {
        sqlite3_finalize(st);
        return pfr_store_errno(step_rc);
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < n; i++) {
        if (any_cursor && rows[i].id > min_cursor)
            continue;
        int64_t b0 = floor_to(rows[i].start, step);
        if (b0 > INT64_MAX - step || b0 + step > newest_end)
            return 0; /* later rows start later: no whole bucket in this tier yet */
        int rc = group_rows(d, k, rows[i].stream, b0, b0 + step, any_cursor, min_cursor, g);
        if (rc)
            return rc;
    }
    return 0;
}

int store_retention_next(struct store_retention *r, struct store_db *d, bool any_cursor,
                         int64_t min_cursor, struct store_rollup *g, int *evict_tier)
{
    int rc;
    int64_t top, newest_end;
    if (!r->measured && (rc = measure(r, d)) != 0)
        return rc;
    if ((rc = store_query_int(d, "SELECT coalesce(max(tier), -1) FROM chunks", &top)) != 0 ||
        (rc = store_query_int(d, "SELECT end_ns FROM chunks ORDER BY id DESC LIMIT 1",
                              &newest_end)) != 0)
        return rc;
    if (top < 0)
        return STORE_RET_NONE;
    *evict_tier = (int)top;
    if (r->tiers.off)
        return STORE_RET_EVICT;
    int n = (int)r->tiers.n;
    /* A tier past its share: its oldest whole bucket goes up a tier. */
    for (int k = 0; k < n; k++)
        if (r->bytes[k] > share(r, k) &&
            (rc = pick(r, d, k, newest_end, any_cursor, min_cursor, g)) != 0)
            return rc < 0 ? rc : STORE_RET_ROLLUP;
    if (top == n)
        return STORE_RET_EVICT;
    /* No coarsest chunk to delete yet (a young ring): roll up, coarser tiers first, rather than
     * delete. */
    for (int k = n - 1; k >= 0; k--)
        if ((rc = pick(r, d, k, newest_end, any_cursor, min_cursor, g)) != 0)
            return rc < 0 ? rc : STORE_RET_ROLLUP;
    /* Nothing may be merged (chunks not yet taken by a consumer, or protected): the oldest of
     * the coarsest tier present go. */
    return STORE_RET_EVICT;
}

int store_rollup_merge(struct store_dict *dict, const struct store_rollup *g, pfr_profile **out)
{
    *out = NULL;
    int rc = store_streams_refresh(dict);
    if (rc)
        return rc;
    const struct rstream *r = store_stream_get(dict, g->stream_id);
    if (!r || r->bad)
        return -EBADMSG;
    struct store_merger m = {0};
    struct dchunk dc = {0};
    if (!(m.p = pfr_profile_new()) || store_ktab_intern(&m.lsets, "", 0, NULL) != 0) {
        store_merger_free(&m);
        return -ENOMEM;
    }
    for (size_t t = 0; t < r->ntypes; t++)
        pfr_profile_add_sample_type(m.p, r->types[t], r->units[t]);
    m.nout = r->ntypes;
    rc = pfr_profile_error(m.p);
    if (!rc)
        rc = store_merger_gauges(&m);
    for (size_t i = 0; i < g->n && !rc; i++) {
        const struct chain *ch = NULL;
        int lr = store_chunk_load(dict, &g->in[i], r, &dc, &ch);
        if (lr == STORE_LOAD_VANISHED)
            lr = -EBADMSG; /* inside the writer's transaction: a listed row cannot vanish */
        if (lr) {
            rc = lr;
            break;
        }
        struct store_weight w = {1, 1, g->in[i].end_ns - g->in[i].start_ns};
        rc = store_merger_chunk(&m, r, ch, &dc, &w);
    }
    if (!rc)
        rc = store_merger_finish(&m);
    if (!rc) {
        *out = m.p;
        m.p = NULL;
    }
    store_merger_free(&m);
    store_dchunk_free(&dc);
    return rc;
}
