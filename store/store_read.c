/*
 * Readers: range scans (a decoded profile per chunk), the merge fast path, the full check and
 * the schema migrations that re-read chunks.
 *
 * A read first lists the matching chunks' metadata in one short read transaction, then reads
 * payloads. Scans read each chunk in its own short transaction and call back outside it, so a
 * slow consumer never pins an old WAL snapshot (which would stop checkpoints and let the WAL
 * grow past the cap). A merge has no callbacks and reads everything in one transaction.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_build.h"
#include "store_handle.h"
#include "store_merge.h"

/* A chunk found by the metadata pass. */
struct cand {
    int64_t id, stream_id, base_id, dict_id, start_ns, end_ns;
    uint32_t crc;
    uint32_t nbytes;
    int tier;                  /* 0: as recorded; > 0: a roll-up (store_retention.c) */
    uint32_t tot_off, tot_len; /* totals blob in cands.tot */
    bool no_totals;            /* schema 1 rows (migration) */
};

struct cands {
    struct cand *v;
    size_t n, cap;
    pfr_buf tot;
};

static void cands_free(struct cands *c)
{
    free(c->v);
    pfr_buf_free(&c->tot);
}

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

#define CAND_COLS "id, stream_id, base_id, dict_id, start_ns, end_ns, crc, nbytes, totals, tier"

static int cands_push(struct cands *c, sqlite3_stmt *st, bool with_totals)
{
    if (VEC_RESERVE(c->v, c->cap, c->n + 1))
        return -ENOMEM;
    struct cand *x = &c->v[c->n];
    x->id = sqlite3_column_int64(st, 0);
    x->stream_id = sqlite3_column_int64(st, 1);
    x->base_id = sqlite3_column_int64(st, 2);
    x->dict_id = sqlite3_column_int64(st, 3);
    x->start_ns = sqlite3_column_int64(st, 4);
    x->end_ns = sqlite3_column_int64(st, 5);
    x->crc = (uint32_t)sqlite3_column_int64(st, 6);
    x->nbytes = (uint32_t)sqlite3_column_int64(st, 7);
    x->no_totals = !with_totals;
    x->tier = (int)sqlite3_column_int64(st, 9);
    x->tot_off = (uint32_t)c->tot.len;
    x->tot_len = 0;
    if (with_totals) {
        const void *b = sqlite3_column_blob(st, 8);
        int n = sqlite3_column_bytes(st, 8);
        if (b && n > 0) {
            pfr_buf_put(&c->tot, b, (size_t)n);
            x->tot_len = (uint32_t)n;
        }
        if (pfr_buf_err(&c->tot))
            return pfr_buf_err(&c->tot);
    }
    c->n++;
    return 0;
}

/* A listed chunk through the one decoder (store_dict.h). */
static int load_chunk(pfr_store *s, const struct cand *c, const struct rstream *r,
                      struct dchunk *dc, const struct chain **chain_out)
{
    struct store_chunk_ref ref = {c->id,       c->stream_id, c->base_id, c->dict_id,
                                  c->start_ns, c->end_ns,    c->crc};
    return pfr_st_chunk_load(&s->dict, &ref, r, dc, chain_out);
}

static void time_bounds(const pfr_store_filter *f, int64_t *from, int64_t *to)
{
    *from = f && f->from_ns ? f->from_ns : INT64_MIN;
    *to = f && f->to_ns ? f->to_ns : INT64_MAX;
}

static bool restricts_streams(const pfr_store_filter *f)
{
    return f && (f->service || f->type || f->nlabels);
}

/* Metadata pass, inside the caller's read transaction. */
static int collect(pfr_store *s, const pfr_store_filter *f, struct cands *out)
{
    int rc = pfr_st_streams_refresh(&s->dict);
    if (rc)
        return rc;
    int64_t from, to;
    time_bounds(f, &from, &to);
    int64_t after = f ? f->after_id : 0;
    int64_t max_id = f && f->max_id ? f->max_id : INT64_MAX;
    size_t limit = f && f->limit ? f->limit : SIZE_MAX;

    /* Few matching streams among many: walk each stream's (stream_id, end_ns) index. */
    size_t nmatch = 0;
    for (size_t i = 0; i < s->dict.nstreams; i++)
        nmatch += pfr_st_stream_matches(&s->dict.streams[i], f);
    bool per_stream = restricts_streams(f) && nmatch <= 64 && nmatch < s->dict.nstreams / 2;

    const char *sql = per_stream ? "SELECT " CAND_COLS " FROM chunks WHERE stream_id = ?5 AND"
                                   " end_ns > ?3 AND start_ns < ?4 AND id > ?1 AND id <= ?2"
                                 : "SELECT " CAND_COLS " FROM chunks WHERE id > ?1 AND id <= ?2 AND"
                                   " end_ns > ?3 AND start_ns < ?4 ORDER BY id";
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->sql.db, sql, -1, &st, NULL) != SQLITE_OK)
        return pfr_st_db_err(&s->sql);
    sqlite3_bind_int64(st, 1, after);
    sqlite3_bind_int64(st, 2, max_id);
    sqlite3_bind_int64(st, 3, from);
    sqlite3_bind_int64(st, 4, to);
    int step = SQLITE_DONE;
    if (per_stream) {
        for (size_t i = 0; i < s->dict.nstreams && !rc; i++) {
            if (!pfr_st_stream_matches(&s->dict.streams[i], f))
                continue;
            sqlite3_reset(st);
            sqlite3_bind_int64(st, 5, s->dict.streams[i].id);
            while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW)
                rc = cands_push(out, st, true);
            if (!rc && step != SQLITE_DONE)
                rc = pfr_store_errno(step);
        }
        if (!rc) {
            if (out->n > 1)
                qsort(out->v, out->n, sizeof(*out->v), cand_cmp);
            if (out->n > limit)
                out->n = limit;
        }
    } else {
        bool narrowed = restricts_streams(f);
        while (!rc && out->n < limit && (step = sqlite3_step(st)) == SQLITE_ROW) {
            const struct rstream *r = pfr_st_stream_get(&s->dict, sqlite3_column_int64(st, 1));
            /* A chunk of an unknown stream is corrupt: report it unless a filter rules it
             * out for sure. */
            if (r ? !pfr_st_stream_matches(r, f) : narrowed)
                continue;
            rc = cands_push(out, st, true);
        }
        if (!rc && step != SQLITE_DONE && step != SQLITE_ROW)
            rc = pfr_store_errno(step);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Totals from the metadata row must equal the decoded samples' sums. */
static int check_totals(const struct cands *cs, const struct cand *c, const struct dchunk *dc)
{
    if (c->no_totals)
        return 0;
    int64_t t[64], *tp = t;
    if (dc->ntypes > 64 && !(tp = malloc(dc->ntypes * sizeof(*tp))))
        return -ENOMEM;
    int rc = pfr_st_totals_decode(cs->tot.data + c->tot_off, c->tot_len, dc->ntypes, tp);
    if (!rc && memcmp(tp, dc->totals, dc->ntypes * sizeof(*tp)) != 0)
        rc = -EBADMSG;
    if (tp != t)
        free(tp);
    return rc;
}

static void persist_corrupt(pfr_store *s, uint64_t n)
{
    s->corrupt += n;
    if (s->read_only || !n)
        return;
    /* Best effort: the count is a diagnostic, the scan's result does not depend on it. */
    if (pfr_st_exec(&s->sql, "BEGIN IMMEDIATE") == 0) {
        if (pfr_st_meta_add(&s->sql, "corrupt", (int64_t)n) == 0)
            pfr_st_exec(&s->sql, "COMMIT");
        else
            pfr_st_exec(&s->sql, "ROLLBACK");
    }
}

static void fill_meta(pfr_chunk_meta *m, const struct cand *c, const struct rstream *r,
                      const int64_t *totals)
{
    *m = (pfr_chunk_meta){
        .id = c->id,
        .stream_id = c->stream_id,
        .start_ns = c->start_ns,
        .end_ns = c->end_ns,
        .service = r->service,
        .labels = r->labels,
        .nlabels = r->nlabels,
        .types = r->types,
        .totals = totals,
        .ntypes = r->ntypes,
        .stored_bytes = c->nbytes,
        .tier = c->tier,
    };
}

static int deliver(const struct rstream *r, const struct chain *d, const struct dchunk *dc,
                   const pfr_store_filter *f, struct build_scratch *b, const pfr_chunk_meta *m,
                   pfr_chunk_cb pcb, pfr_samples_cb scb, void *ctx)
{
    int rc;
    if (scb)
        return pfr_st_samples_call(&d->t, d->base_id, dc, f, b, m, scb, ctx);
    pfr_profile *p;
    if ((rc = pfr_st_build_profile(r, &d->t, dc, f, b, &p)) != 0)
        return rc;
    rc = pcb(m, p, ctx);
    pfr_profile_free(p);
    return rc;
}

static int scan_run(pfr_store *s, const pfr_store_filter *f, unsigned flags, pfr_chunk_cb pcb,
                    pfr_samples_cb scb, void *ctx, pfr_scan_stats *st)
{
    pfr_scan_stats local = {0};
    if (!st)
        st = &local;
    *st = (pfr_scan_stats){0};
    struct cands cs = {0};
    int rc = pfr_st_begin_read(&s->sql);
    if (rc)
        return rc;
    rc = collect(s, f, &cs);
    pfr_st_end_read(&s->sql);
    struct dchunk dc = {0};
    struct build_scratch b = {0};
    int64_t *totals = NULL;
    size_t cap_totals = 0;
    for (size_t i = 0; i < cs.n && !rc; i++) {
        const struct cand *c = &cs.v[i];
        const struct rstream *r = pfr_st_stream_get(&s->dict, c->stream_id);
        st->last_id = c->id;
        if (!r || r->bad) {
            st->corrupt++;
            continue;
        }
        if (VEC_RESERVE(totals, cap_totals, r->ntypes)) {
            rc = -ENOMEM;
            break;
        }
        pfr_chunk_meta m;
        if (flags & PFR_SCAN_META_ONLY) {
            if (pfr_st_totals_decode(cs.tot.data + c->tot_off, c->tot_len, r->ntypes, totals)) {
                st->corrupt++;
                continue;
            }
            fill_meta(&m, c, r, totals);
            st->chunks++;
            rc = pcb ? pcb(&m, NULL, ctx) : scb(&m, NULL, ctx);
            continue;
        }
        const struct chain *d = NULL;
        if ((rc = pfr_st_begin_read(&s->sql)) != 0)
            break;
        int lr = load_chunk(s, c, r, &dc, &d);
        if (lr == STORE_LOAD_OK)
            lr = check_totals(&cs, c, &dc);
        pfr_st_end_read(&s->sql);
        if (lr == STORE_LOAD_VANISHED)
            continue;
        if (lr == -EBADMSG) {
            st->corrupt++;
            continue;
        }
        if (lr) {
            rc = lr;
            break;
        }
        memcpy(totals, dc.totals, r->ntypes * sizeof(*totals));
        fill_meta(&m, c, r, totals);
        st->chunks++;
        rc = deliver(r, d, &dc, f, &b, &m, pcb, scb, ctx);
    }
    persist_corrupt(s, st->corrupt);
    free(totals);
    pfr_st_build_scratch_free(&b);
    pfr_st_dchunk_free(&dc);
    cands_free(&cs);
    return rc;
}

int pfr_store_scan(pfr_store *s, const pfr_store_filter *f, unsigned flags, pfr_chunk_cb cb,
                   void *ctx, pfr_scan_stats *st)
{
    return scan_run(s, f, flags, cb, NULL, ctx, st);
}

int pfr_store_scan_samples(pfr_store *s, const pfr_store_filter *f, unsigned flags,
                           pfr_samples_cb cb, void *ctx, pfr_scan_stats *st)
{
    return scan_run(s, f, flags, NULL, cb, ctx, st);
}

static bool same_types(const struct rstream *a, const struct rstream *b)
{
    if (a->ntypes != b->ntypes)
        return false;
    for (size_t i = 0; i < a->ntypes; i++)
        if (strcmp(a->types[i], b->types[i]) || strcmp(a->units[i], b->units[i]))
            return false;
    return true;
}

/* Output sample types: the chunks' own when all agree, else only the filter's type. */
static int m_types(pfr_store *s, struct store_merger *m, const struct cands *cs)
{
    const struct rstream *ref = NULL;
    bool uniform = true;
    for (size_t i = 0; i < cs->n; i++) {
        const struct rstream *r = pfr_st_stream_get(&s->dict, cs->v[i].stream_id);
        if (!r || r->bad)
            continue;
        if (!ref)
            ref = r;
        else if (!same_types(ref, r))
            uniform = false;
    }
    if (!ref)
        return 0;
    if (uniform) {
        for (size_t i = 0; i < ref->ntypes; i++)
            pfr_profile_add_sample_type(m->p, ref->types[i], ref->units[i]);
        m->nout = ref->ntypes;
        return pfr_profile_error(m->p);
    }
    if (!m->f || !m->f->type)
        return -EINVAL;
    for (size_t i = 0; i < cs->n; i++) {
        const struct rstream *r = pfr_st_stream_get(&s->dict, cs->v[i].stream_id);
        for (size_t t = 0; r && !r->bad && t < r->ntypes; t++) {
            if (strcmp(r->types[t], m->f->type) == 0) {
                pfr_profile_add_sample_type(m->p, r->types[t], r->units[t]);
                m->nout = 1;
                return pfr_profile_error(m->p);
            }
        }
    }
    return -EINVAL;
}

/* A rolled-up chunk the range covers in part counts for the part it covers (a user reading a
 * range expects totals of that range). A chunk as recorded (tier 0: one interval) counts whole,
 * as it always did: it is the finest the ring knows. */
static struct store_weight prorate(const pfr_store_filter *f, const struct cand *c)
{
    struct store_weight w = {1, 1, 0};
    int64_t from, to;
    time_bounds(f, &from, &to);
    if (c->tier == 0 || c->end_ns <= c->start_ns || (from <= c->start_ns && to >= c->end_ns))
        return w;
    int64_t a = from > c->start_ns ? from : c->start_ns, e = to < c->end_ns ? to : c->end_ns;
    w.num = e > a ? e - a : 0;
    w.den = c->end_ns - c->start_ns;
    return w;
}

int pfr_store_merge(pfr_store *s, const pfr_store_filter *f, unsigned merge_flags,
                    pfr_profile **out, pfr_scan_stats *st)
{
    pfr_scan_stats local = {0};
    if (!st)
        st = &local;
    *st = (pfr_scan_stats){0};
    *out = NULL;
    struct store_merger m = {.f = f, .flags = merge_flags};
    struct cands cs = {0};
    struct dchunk dc = {0};
    m.p = pfr_profile_new();
    if (!m.p || pfr_st_ktab_intern(&m.lsets, "", 0, NULL) != 0)
        return -ENOMEM;
    int rc = pfr_st_begin_read(&s->sql);
    if (rc) {
        pfr_st_merger_free(&m);
        return rc;
    }
    rc = collect(s, f, &cs);
    if (!rc)
        rc = m_types(s, &m, &cs);
    pfr_map top = {0};    /* chain base id -> index in tops */
    int64_t *tops = NULL; /* per chain: the last layer a matched chunk names, or 0 once read */
    size_t ntops = 0, cap_tops = 0;
    for (size_t i = 0; i < cs.n && !rc; i++) {
        bool found;
        uint32_t k = store_map_put(&top, (uint64_t)cs.v[i].base_id, (uint32_t)ntops, &found);
        if (k == UINT32_MAX || (!found && VEC_RESERVE(tops, cap_tops, ntops + 1)))
            rc = -ENOMEM;
        else if (!found)
            tops[ntops++] = cs.v[i].dict_id;
        else if (cs.v[i].dict_id > tops[k])
            tops[k] = cs.v[i].dict_id;
    }
    for (size_t i = 0; i < cs.n && !rc; i++) {
        const struct cand *c = &cs.v[i];
        const struct rstream *r = pfr_st_stream_get(&s->dict, c->stream_id);
        const struct chain *d = NULL;
        st->last_id = c->id;
        uint32_t k = store_map_get(&top, (uint64_t)c->base_id);
        if (r && !r->bad && k != UINT32_MAX && tops[k]) {
            /* Read the chain's layers up to the last one the range needs in one statement, not
             * one layer per chunk. Whatever this finds (a broken layer, an error) the chunk's
             * own pfr_st_chain_get below finds again. */
            uint32_t n[T_N];
            bool corrupt;
            int err;
            pfr_st_chain_get(&s->dict, c->base_id, tops[k], n, &corrupt, &err);
            tops[k] = 0;
        }
        int lr = load_chunk(s, c, r, &dc, &d);
        if (lr == STORE_LOAD_OK)
            lr = check_totals(&cs, c, &dc);
        if (lr == STORE_LOAD_VANISHED)
            continue;
        if (lr == -EBADMSG) {
            st->corrupt++;
            continue;
        }
        if (lr) {
            rc = lr;
            break;
        }
        struct store_weight w = prorate(f, c);
        rc = pfr_st_merger_chunk(&m, r, d, &dc, &w);
        st->chunks++;
    }
    pfr_st_end_read(&s->sql);
    pfr_map_free(&top);
    free(tops);
    persist_corrupt(s, st->corrupt);
    if (!rc && st->chunks == 0)
        rc = -ENOENT;
    if (!rc)
        rc = pfr_st_merger_finish(&m);
    if (!rc) {
        *out = m.p;
        m.p = NULL;
    }
    pfr_st_merger_free(&m);
    pfr_st_dchunk_free(&dc);
    cands_free(&cs);
    return rc;
}

/* ---- check ---- */
int pfr_store_check(pfr_store *s, uint64_t *bad_chunks, char *err, size_t errlen)
{
    uint64_t bad = 0;
    bool problem = false;
    if (err && errlen)
        err[0] = 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->sql.db, "PRAGMA integrity_check(20)", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *msg = (const char *)sqlite3_column_text(st, 0);
        if (!msg || strcmp(msg, "ok") != 0) {
            problem = true;
            if (err && errlen)
                snprintf(err, errlen, "integrity_check: %s", msg ? msg : "(null)");
        }
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        int e = pfr_store_errno(rc);
        if (e != -EBADMSG)
            return pfr_st_fail(&s->sql, e, err, errlen, "integrity_check failed to run");
        problem = true;
        pfr_st_fail(&s->sql, e, err, errlen, "integrity_check");
    }
    pfr_st_chain_cache_clear(&s->dict);
    struct cands cs = {0};
    struct dchunk dc = {0};
    rc = pfr_st_begin_read(&s->sql);
    if (!rc)
        rc = collect(s, NULL, &cs);
    if (rc == -EBADMSG) {
        /* Not even the chunk list reads back: every chunk is suspect. */
        problem = true;
        if (err && errlen && !err[0])
            snprintf(err, errlen, "the chunk index does not read back");
        rc = 0;
    }
    for (size_t i = 0; i < cs.n && !rc; i++) {
        const struct cand *c = &cs.v[i];
        const struct chain *d;
        int lr = load_chunk(s, c, pfr_st_stream_get(&s->dict, c->stream_id), &dc, &d);
        if (lr == STORE_LOAD_OK)
            lr = check_totals(&cs, c, &dc);
        if (lr == STORE_LOAD_VANISHED)
            continue;
        if (lr == -EBADMSG) {
            if (!bad && err && errlen && !err[0])
                snprintf(err, errlen, "chunk %lld is corrupt (checksum or encoding)",
                         (long long)c->id);
            bad++;
            continue;
        }
        rc = lr;
    }
    pfr_st_end_read(&s->sql);
    pfr_st_dchunk_free(&dc);
    cands_free(&cs);
    if (bad_chunks)
        *bad_chunks = bad;
    if (rc)
        return pfr_st_fail(&s->sql, rc, err, errlen, "check failed");
    return problem || bad ? -EBADMSG : 0;
}

/* ---- migrations ---- */
