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

/* A chunk found by the metadata pass. */
struct cand {
    int64_t id, stream_id, base_id, dict_id, start_ns, end_ns;
    uint32_t crc;
    uint32_t nbytes;
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

#define CAND_COLS "id, stream_id, base_id, dict_id, start_ns, end_ns, crc, nbytes, totals"

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

/* ---- merge ---- */
#define LS_FILTERED UINT32_MAX

/* Per dictionary chain: its entries' images in the output (index + 1, 0 = not mapped yet). Chains
 * of one stream map the same functions and modules again and again (each of a day's ~24 chains
 * holds most of the stream's ~5,000 locations), so functions and module strings are mapped once
 * per chain too, not once per location line. */
struct mdict {
    int64_t id;
    uint32_t *loc, *stack, *lset, *func, *map;
    size_t cap_loc, cap_stack, cap_lset, cap_func, cap_map;
};

struct merger {
    const pfr_store_filter *f;
    unsigned flags;
    pfr_profile *p;
    size_t nout;
    int *tmap; /* chunk's type index -> output type index or -1 */
    size_t cap_tmap;
    struct ktab stacks; /* output location index sequences */
    struct ktab lsets;  /* serialized label sets; 0 is the empty set */
    pfr_map acc;        /* (stack id << 32 | label set id) -> accumulator index; unused with
                                 PFR_MERGE_DROP_LABELS, where the accumulator index is the stack id */
    int64_t *vals;      /* nacc * nout */
    uint64_t *keys;
    size_t nacc, cap_vals, cap_keys;
    struct mdict *md;
    size_t nmd, cap_md;
    pfr_map md_idx;
    uint32_t *dloc, *dstack, *dlset; /* the current chunk's delta entries */
    size_t cap_dloc, cap_dstack, cap_dlset;
    pfr_line *lines;
    size_t cap_lines;
    pfr_label *labels;
    size_t cap_labels;
    pfr_buf key;
    bool have_time, have_period;
};

static void merger_free(struct merger *m)
{
    pfr_profile_free(m->p);
    free(m->tmap);
    pfr_st_ktab_free(&m->stacks);
    pfr_st_ktab_free(&m->lsets);
    pfr_map_free(&m->acc);
    free(m->vals);
    free(m->keys);
    for (size_t i = 0; i < m->nmd; i++) {
        free(m->md[i].loc);
        free(m->md[i].stack);
        free(m->md[i].lset);
        free(m->md[i].func);
        free(m->md[i].map);
    }
    free(m->md);
    pfr_map_free(&m->md_idx);
    free(m->dloc);
    free(m->dstack);
    free(m->dlset);
    free(m->lines);
    free(m->labels);
    pfr_buf_free(&m->key);
}

static int zeroed(uint32_t **v, size_t *cap, size_t n)
{
    if (VEC_RESERVE(*v, *cap, n ? n : 1))
        return -ENOMEM;
    memset(*v, 0, n * sizeof(**v));
    return 0;
}

/* Grow a map to n entries; new entries are unmapped. */
static int grown(uint32_t **v, size_t *cap, size_t n)
{
    size_t old = *cap;
    if (n <= old)
        return 0;
    if (VEC_RESERVE(*v, *cap, n))
        return -ENOMEM;
    memset(*v + old, 0, (*cap - old) * sizeof(**v));
    return 0;
}

static struct mdict *mdict_get(struct merger *m, const struct chain *ch)
{
    bool found;
    uint32_t i = store_map_put(&m->md_idx, (uint64_t)ch->base_id, (uint32_t)m->nmd, &found);
    if (i == UINT32_MAX)
        return NULL;
    struct mdict *x;
    if (found) {
        x = &m->md[i];
    } else {
        if (VEC_RESERVE(m->md, m->cap_md, m->nmd + 1))
            return NULL;
        x = &m->md[m->nmd++];
        memset(x, 0, sizeof(*x));
        x->id = ch->base_id;
    }
    /* The chain may have grown since (new layers). */
    if (grown(&x->loc, &x->cap_loc, ch->t.t[T_LOC].n) ||
        grown(&x->stack, &x->cap_stack, ch->t.t[T_STACK].n) ||
        grown(&x->lset, &x->cap_lset, ch->t.t[T_LSET].n) ||
        grown(&x->func, &x->cap_func, ch->t.t[T_FUNC].n) ||
        grown(&x->map, &x->cap_map, ch->t.t[T_STR].n))
        return NULL;
    return x;
}

/* A function of the chunk's view as an output function (cached per chain). */
static int64_t m_func(struct merger *m, struct mdict *md, const struct tabs *d,
                      const struct dchunk *c, uint32_t fn)
{
    uint32_t *slot = fn < c->base[T_FUNC] ? &md->func[fn] : NULL;
    if (slot && *slot)
        return *slot - 1;
    size_t len;
    const struct nfunc *f = (const struct nfunc *)tabs2_key(d, &c->delta, T_FUNC, fn, &len);
    const char *name = pfr_st_str_at(d, &c->delta, f->name);
    int64_t x = pfr_profile_add_function(m->p, name, name, pfr_st_str_at(d, &c->delta, f->file), 0);
    if (x >= 0 && slot)
        *slot = (uint32_t)x + 1;
    return x;
}

/* A module string of the chunk's view as an output mapping in *out, -1 for none (cached per
 * chain). 0 or a negative errno. */
static int m_map(struct merger *m, struct mdict *md, const struct tabs *d, const struct dchunk *c,
                 uint32_t str, int64_t *out)
{
    uint32_t *slot = str < c->base[T_STR] ? &md->map[str] : NULL;
    if (slot && *slot) {
        *out = (int64_t)*slot - 2;
        return 0;
    }
    const char *module = pfr_st_str_at(d, &c->delta, str);
    int64_t x = -1;
    if (module[0] && (x = pfr_profile_add_mapping(m->p, 0, 0, 0, module, "")) < 0)
        return (int)x;
    if (slot)
        *slot = (uint32_t)(x + 2);
    *out = x;
    return 0;
}

/* As add_loc (the same calls on the output profile, in the same order, less the lookups of
 * functions and mappings it already made). */
static int64_t m_add_loc(struct merger *m, struct mdict *md, const struct tabs *d,
                         const struct dchunk *c, uint32_t loc)
{
    size_t len;
    const struct nloc *l = (const struct nloc *)tabs2_key(d, &c->delta, T_LOC, loc, &len);
    const struct nline *ln = (const struct nline *)(l + 1);
    if (VEC_RESERVE(m->lines, m->cap_lines, l->nlines ? l->nlines : 1))
        return -ENOMEM;
    for (uint32_t i = 0; i < l->nlines; i++) {
        int64_t fi = m_func(m, md, d, c, ln[i].func);
        if (fi < 0)
            return fi;
        m->lines[i] = (pfr_line){(uint32_t)fi, ln[i].line};
    }
    int64_t mp = -1; /* set by m_map on success */
    int rc = m_map(m, md, d, c, l->module, &mp);
    if (rc)
        return rc;
    return pfr_profile_add_location(m->p, mp, l->addr, m->lines, l->nlines);
}

static int64_t m_loc(struct merger *m, struct mdict *md, const struct tabs *d,
                     const struct dchunk *c, uint32_t loc)
{
    uint32_t *slot = loc < c->base[T_LOC] ? &md->loc[loc] : &m->dloc[loc - c->base[T_LOC]];
    if (*slot)
        return *slot - 1;
    int64_t x = m_add_loc(m, md, d, c, loc);
    if (x >= 0)
        *slot = (uint32_t)x + 1;
    return x;
}

static int64_t m_stack(struct merger *m, struct mdict *md, const struct tabs *d,
                       const struct dchunk *c, uint32_t st)
{
    uint32_t *slot = st < c->base[T_STACK] ? &md->stack[st] : &m->dstack[st - c->base[T_STACK]];
    if (*slot)
        return *slot - 1;
    size_t len;
    const uint32_t *locs = (const uint32_t *)tabs2_key(d, &c->delta, T_STACK, st, &len);
    m->key.len = 0;
    for (size_t j = 0; j < len / 4; j++) {
        int64_t x = m_loc(m, md, d, c, locs[j]);
        if (x < 0)
            return x;
        uint32_t o = (uint32_t)x;
        pfr_buf_put(&m->key, &o, sizeof(o));
    }
    if (pfr_buf_err(&m->key))
        return pfr_buf_err(&m->key);
    int64_t id = pfr_st_ktab_intern(&m->stacks, m->key.data, m->key.len, NULL);
    if (id >= 0)
        *slot = (uint32_t)id + 1;
    return id;
}

/* Label set ls as an output id, or LS_FILTERED when the sample label filter drops it. */
static int64_t m_lset(struct merger *m, struct mdict *md, const struct tabs *d,
                      const struct dchunk *c, uint32_t ls)
{
    uint32_t *slot = ls < c->base[T_LSET] ? &md->lset[ls] : &m->dlset[ls - c->base[T_LSET]];
    if (*slot)
        return *slot == LS_FILTERED ? LS_FILTERED : *slot - 1;
    if (m->f && m->f->nsample_labels && !pfr_st_lset_matches(d, &c->delta, ls, m->f)) {
        *slot = LS_FILTERED;
        return LS_FILTERED;
    }
    int64_t id = 0;
    if (!(m->flags & PFR_MERGE_DROP_LABELS)) {
        size_t len;
        const struct nlabel *l = (const struct nlabel *)tabs2_key(d, &c->delta, T_LSET, ls, &len);
        m->key.len = 0;
        for (size_t j = 0; j < len / sizeof(*l); j++) {
            const char *k = pfr_st_str_at(d, &c->delta, l[j].key);
            pfr_buf_put(&m->key, k, strlen(k) + 1);
            if (l[j].str != LABEL_NUM) {
                const char *v = pfr_st_str_at(d, &c->delta, l[j].str);
                pfr_buf_u8(&m->key, 's');
                pfr_buf_put(&m->key, v, strlen(v) + 1);
            } else {
                const char *u = l[j].unit ? pfr_st_str_at(d, &c->delta, l[j].unit) : "";
                pfr_buf_u8(&m->key, 'n');
                pfr_buf_put(&m->key, &l[j].num, sizeof(l[j].num));
                pfr_buf_put(&m->key, u, strlen(u) + 1);
            }
        }
        if (pfr_buf_err(&m->key))
            return pfr_buf_err(&m->key);
        id = pfr_st_ktab_intern(&m->lsets, m->key.data, m->key.len, NULL);
        if (id < 0)
            return id;
    }
    *slot = (uint32_t)id + 1;
    return id;
}

static void m_header(struct merger *m, const struct tabs *d, const struct dchunk *c)
{
    const char *pt = pfr_st_str_at(d, &c->delta, c->period_type);
    const char *pu = pfr_st_str_at(d, &c->delta, c->period_unit);
    if (!m->have_period && (c->period || pt[0] || pu[0])) {
        pfr_profile_set_period(m->p, pt, pu, c->period);
        m->have_period = true;
    }
    if (!c->time_nanos && !c->duration)
        return;
    if (!m->have_time) {
        pfr_profile_set_time(m->p, c->time_nanos, c->duration);
        m->have_time = true;
        return;
    }
    int64_t t0 = pfr_profile_time_nanos(m->p), d0 = pfr_profile_duration_nanos(m->p);
    int64_t e0, e1, start = t0 < c->time_nanos ? t0 : c->time_nanos, dur;
    if (__builtin_add_overflow(t0, d0, &e0))
        e0 = d0 > 0 ? INT64_MAX : INT64_MIN;
    if (__builtin_add_overflow(c->time_nanos, c->duration, &e1))
        e1 = c->duration > 0 ? INT64_MAX : INT64_MIN;
    int64_t end = e0 > e1 ? e0 : e1;
    if (__builtin_sub_overflow(end, start, &dur))
        dur = INT64_MAX;
    pfr_profile_set_time(m->p, start, dur);
}

/* The chain's tables as of chunk c's layer: the chain may hold later layers already, and the
 * chunk's own entries are numbered from its layer's counts. */
static void chunk_view(const struct tabs *chain, const struct dchunk *c, struct tabs *out)
{
    *out = *chain;
    for (int k = 0; k < T_N; k++)
        out->t[k].n = c->base[k];
}

static int m_chunk(struct merger *m, const struct rstream *r, const struct chain *de,
                   const struct dchunk *c)
{
    struct tabs view;
    chunk_view(&de->t, c, &view);
    const struct tabs *d = &view;
    struct mdict *md = mdict_get(m, de);
    if (!md || zeroed(&m->dloc, &m->cap_dloc, c->delta.t[T_LOC].n) ||
        zeroed(&m->dstack, &m->cap_dstack, c->delta.t[T_STACK].n) ||
        zeroed(&m->dlset, &m->cap_dlset, c->delta.t[T_LSET].n) ||
        VEC_RESERVE(m->tmap, m->cap_tmap, r->ntypes))
        return -ENOMEM;
    bool any = false;
    for (size_t t = 0; t < r->ntypes; t++) {
        m->tmap[t] = -1;
        for (size_t o = 0; o < m->nout; o++) {
            const char *unit;
            if (strcmp(pfr_profile_sample_type(m->p, o, &unit), r->types[t]) == 0) {
                m->tmap[t] = (int)o;
                any = true;
                break;
            }
        }
    }
    if (!any)
        return 0;
    m_header(m, d, c);
    bool drop = m->flags & PFR_MERGE_DROP_LABELS;
    for (size_t i = 0; i < c->nsamples; i++) {
        int64_t lid = m_lset(m, md, d, c, c->lset[i]);
        if (lid == LS_FILTERED)
            continue;
        int64_t sid = m_stack(m, md, d, c, c->stack[i]);
        if (lid < 0 || sid < 0)
            return lid < 0 ? (int)lid : (int)sid;
        uint64_t key = (uint64_t)sid << 32 | (uint64_t)lid;
        uint32_t a;
        if (drop) {
            /* One label set: the stack id is the accumulator (stacks are numbered in the order
             * of their first sample, as accumulators would be). */
            a = (uint32_t)sid;
        } else {
            bool found;
            a = store_map_put(&m->acc, key, (uint32_t)m->nacc, &found);
            if (a == UINT32_MAX)
                return -ENOMEM;
        }
        if (a >= m->nacc) {
            if (VEC_RESERVE(m->vals, m->cap_vals, ((size_t)a + 1) * m->nout) ||
                VEC_RESERVE(m->keys, m->cap_keys, (size_t)a + 1))
                return -ENOMEM;
            memset(&m->vals[m->nacc * m->nout], 0,
                   ((size_t)a + 1 - m->nacc) * m->nout * sizeof(*m->vals));
            for (; m->nacc <= a; m->nacc++)
                m->keys[m->nacc] = drop ? (uint64_t)m->nacc << 32 : key;
        }
        const int64_t *v = &c->values[i * c->ntypes];
        int64_t *acc = &m->vals[(size_t)a * m->nout];
        for (size_t t = 0; t < c->ntypes; t++)
            if (m->tmap[t] >= 0)
                acc[m->tmap[t]] = (int64_t)((uint64_t)acc[m->tmap[t]] + (uint64_t)v[t]);
    }
    return 0;
}

static int parse_lset(struct merger *m, uint32_t id, size_t *n)
{
    size_t len;
    const uint8_t *p = ktab_key(&m->lsets, id, &len), *end = p + len;
    *n = 0;
    while (p < end) {
        if (VEC_RESERVE(m->labels, m->cap_labels, *n + 1))
            return -ENOMEM;
        pfr_label *l = &m->labels[(*n)++];
        l->key = (const char *)p;
        p += strlen((const char *)p) + 1;
        uint8_t kind = *p++;
        if (kind == 's') {
            l->str = (const char *)p;
            l->num = 0;
            l->unit = NULL;
            p += strlen((const char *)p) + 1;
        } else {
            l->str = NULL;
            memcpy(&l->num, p, sizeof(l->num));
            p += sizeof(l->num);
            l->unit = *p ? (const char *)p : NULL;
            p += strlen((const char *)p) + 1;
        }
    }
    return 0;
}

static int m_finish(struct merger *m)
{
    for (size_t i = 0; i < m->nacc; i++) {
        uint32_t sid = (uint32_t)(m->keys[i] >> 32), lid = (uint32_t)m->keys[i];
        size_t len, nl;
        const uint32_t *locs = (const uint32_t *)ktab_key(&m->stacks, sid, &len);
        int rc = parse_lset(m, lid, &nl);
        if (rc)
            return rc;
        int64_t x =
            pfr_profile_add_sample(m->p, locs, len / 4, &m->vals[i * m->nout], m->labels, nl);
        if (x < 0)
            return (int)x;
    }
    return pfr_profile_error(m->p);
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
static int m_types(pfr_store *s, struct merger *m, const struct cands *cs)
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

int pfr_store_merge(pfr_store *s, const pfr_store_filter *f, unsigned merge_flags,
                    pfr_profile **out, pfr_scan_stats *st)
{
    pfr_scan_stats local = {0};
    if (!st)
        st = &local;
    *st = (pfr_scan_stats){0};
    *out = NULL;
    struct merger m = {.f = f, .flags = merge_flags};
    struct cands cs = {0};
    struct dchunk dc = {0};
    m.p = pfr_profile_new();
    if (!m.p || pfr_st_ktab_intern(&m.lsets, "", 0, NULL) != 0)
        return -ENOMEM;
    int rc = pfr_st_begin_read(&s->sql);
    if (rc) {
        merger_free(&m);
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
            pfr_st_chain_get(&s->dict, c->base_id, tops[k], c->stream_id, n, &corrupt, &err);
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
        rc = m_chunk(&m, r, d, &dc);
        st->chunks++;
    }
    pfr_st_end_read(&s->sql);
    pfr_map_free(&top);
    free(tops);
    persist_corrupt(s, st->corrupt);
    if (!rc && st->chunks == 0)
        rc = -ENOENT;
    if (!rc)
        rc = m_finish(&m);
    if (!rc) {
        *out = m.p;
        m.p = NULL;
    }
    merger_free(&m);
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
