/*
 * Tiered retention (docs/store.md, "Tiers"): roll-ups are exact. The same chunks go into a ring
 * large enough never to make room (tiers off) and into a small one that rolls up; every rolled
 * up chunk of the small ring, read as a flame graph of its own range, has per stack the sums of
 * the chunks it replaced for the summed types, and their time average for the averaged types
 * (in-use heap, goroutines). Also: the cursor rule, prorating, the schema migration 2 -> 3,
 * and the tiers' policy as a pure function of measurements (test_plan_*).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pfr_store.h"
#include "store_retention.h"
#include "store_test_util.h"

#define NS     1000000000ll
#define T0     (1700000000ll * NS) /* a multiple of an hour */
#define STEP   (10 * NS)
#define NTYPES 4

static const char *const types[NTYPES] = {"go:profile_cpu:nanoseconds", "go:heap_alloc_space:bytes",
                                          "go:heap_inuse_space:bytes",
                                          "go:goroutine_goroutine:count"};
static const bool gauge[NTYPES] = {false, false, true, true};

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Interval i of stream svc: 40 stacks of 3 frames, two processes, values that vary. drift: each
 * stack's middle frame is replaced every 30 intervals (staggered), so a roll-up holds more
 * distinct stacks than an interval. */
static pfr_profile *make_profile_d(unsigned svc, unsigned i, bool drift)
{
    pfr_profile *p = pfr_profile_new();
    for (size_t t = 0; t < NTYPES; t++)
        pfr_profile_add_sample_type(p, types[t],
                                    t == 3   ? "count"
                                    : t == 0 ? "nanoseconds"
                                             : "bytes");
    pfr_profile_set_time(p, T0 + (int64_t)i * STEP, STEP);
    uint64_t s = 0x9e3779b97f4a7c15ull ^ (svc * 1000003ull + i);
    for (unsigned k = 0; k < 40; k++) {
        if (rng(&s) % 5 == 0)
            continue; /* stacks come and go */
        char f[3][32];
        uint32_t locs[3];
        for (int j = 0; j < 3; j++) {
            snprintf(f[j], sizeof(f[j]), "s%u_f%u_%d_g%u", svc, (k * 7 + (unsigned)j * 3) % 50, j,
                     drift && j == 1 ? (i + k * 13) / 30 : 0);
            locs[j] = (uint32_t)pfr_profile_add_frame(p, f[j], "x.go", 10 + j);
        }
        int64_t v[NTYPES] = {(int64_t)(rng(&s) % 50 + 1) * 10000000ll, (int64_t)(rng(&s) % 100000),
                             (int64_t)(rng(&s) % 10000000), (int64_t)(rng(&s) % 300)};
        pfr_label l = {.key = "pid", .num = 100 + k % 2};
        pfr_profile_add_sample(p, locs, 3, v, &l, 1);
    }
    assert_int_equal(pfr_profile_error(p), 0);
    return p;
}

/* Intervals [from, from + n) of nsvc streams, 30 intervals to a transaction (one sync each). */
static void append_d(pfr_store *s, unsigned nsvc, unsigned n, unsigned from, bool drift)
{
    enum { BATCH = 30 };
    static const char *const names[4] = {"svc0", "svc1", "svc2", "svc3"};
    for (unsigned i0 = from; i0 < from + n; i0 += BATCH) {
        pfr_chunk_in in[BATCH * 4];
        pfr_profile *p[BATCH * 4];
        size_t k = 0;
        for (unsigned i = i0; i < i0 + BATCH && i < from + n; i++)
            for (unsigned v = 0; v < nsvc; v++, k++) {
                p[k] = make_profile_d(v, i, drift);
                in[k] = (pfr_chunk_in){.service = names[v],
                                       .start_ns = T0 + (int64_t)i * STEP,
                                       .end_ns = T0 + (int64_t)(i + 1) * STEP,
                                       .profile = p[k]};
            }
        assert_int_equal(pfr_store_append_batch(s, in, k, NULL), 0);
        for (size_t j = 0; j < k; j++)
            pfr_profile_free(p[j]);
    }
}

static void append_all(pfr_store *s, unsigned nsvc, unsigned n, unsigned from)
{
    append_d(s, nsvc, n, from, false);
}

/* Per (stack, labels): values, from a profile. */
struct entry {
    char key[200];
    int64_t v[NTYPES];
};

static struct entry *entries(const pfr_profile *p, size_t *n)
{
    size_t ns = pfr_profile_num_samples(p);
    struct entry *e = calloc(ns ? ns : 1, sizeof(*e));
    int tix[NTYPES];
    for (size_t t = 0; t < NTYPES; t++)
        tix[t] = pfr_profile_find_sample_type(p, types[t]);
    for (size_t i = 0; i < ns; i++) {
        pfr_frame fr[8];
        size_t nf = pfr_profile_sample_frames(p, i, fr, 8);
        int64_t pid = 0;
        pfr_profile_sample_label_num(p, i, "pid", &pid);
        int at = snprintf(e[i].key, sizeof(e[i].key), "%lld", (long long)pid);
        for (size_t j = 0; j < nf && j < 8; j++)
            at += snprintf(e[i].key + at, sizeof(e[i].key) - (size_t)at, ";%s", fr[j].function);
        for (size_t t = 0; t < NTYPES; t++)
            e[i].v[t] = tix[t] >= 0 ? pfr_profile_sample_values(p, i)[tix[t]] : 0;
    }
    *n = ns;
    return e;
}

static const struct entry *find(const struct entry *e, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].key, key))
            return &e[i];
    return NULL;
}

struct rolled {
    int64_t start, end, id;
    int tier;
    char service[16];
};

struct rolled_list {
    struct rolled v[4096];
    size_t n;
    int max_tier;
};

static int rolled_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    struct rolled_list *l = ctx;
    if (m->tier > l->max_tier)
        l->max_tier = m->tier;
    if (m->tier > 0 && l->n < 4096) {
        l->v[l->n] = (struct rolled){m->start_ns, m->end_ns, m->id, m->tier, ""};
        snprintf(l->v[l->n].service, sizeof(l->v[l->n].service), "%s", m->service);
        l->n++;
    }
    return 0;
}

/* The rolled-up chunk r of the small ring (*a, one chunk) and the same range of the reference
 * ring (*b, the chunks it was made of, all of them): returns their count. */
static int64_t merge_both(pfr_store *small, pfr_store *ref, const struct rolled *r, pfr_profile **a,
                          pfr_profile **b)
{
    pfr_store_filter f = {.from_ns = r->start, .to_ns = r->end, .service = r->service};
    pfr_scan_stats sa, sb;
    assert_int_equal(pfr_store_merge(small, &f, 0, a, &sa), 0);
    assert_int_equal(pfr_store_merge(ref, &f, 0, b, &sb), 0);
    assert_int_equal(sa.chunks, 1);
    int64_t nin = (int64_t)sb.chunks;
    assert_int_equal(nin * STEP, r->end - r->start);
    return nin;
}

/* The flame graph of every rolled-up chunk's range in the small ring against the same range in
 * the reference ring: summed types equal per stack, averaged types their mean per stack (the
 * chunks are contiguous 10 s intervals, so the time average is the mean), to rounding: once per
 * tier, and extra times more (a coarsest chunk made of a piece: the piece rounded, then the
 * hour). */
static void check_exact_r(pfr_store *small, pfr_store *ref, const struct rolled_list *l, int extra)
{
    for (size_t i = 0; i < l->n; i++) {
        const struct rolled *r = &l->v[i];
        pfr_profile *a = NULL, *b = NULL;
        int64_t nin = merge_both(small, ref, r, &a, &b);
        size_t na, nb;
        struct entry *ea = entries(a, &na), *eb = entries(b, &nb);
        assert_int_equal(na, nb);
        int64_t ta[NTYPES] = {0}, tb[NTYPES] = {0};
        for (size_t k = 0; k < nb; k++) {
            const struct entry *x = find(ea, na, eb[k].key);
            assert_non_null(x);
            for (size_t t = 0; t < NTYPES; t++) {
                ta[t] += x->v[t];
                tb[t] += eb[k].v[t];
                if (!gauge[t]) {
                    assert_int_equal(x->v[t], eb[k].v[t]);
                } else {
                    double mean = (double)eb[k].v[t] / (double)nin;
                    /* rounded once per tier it went through */
                    assert_true(fabs((double)x->v[t] - mean) <= 0.5 * (r->tier + extra) + 1e-9);
                }
            }
        }
        for (size_t t = 0; t < NTYPES; t++)
            if (!gauge[t])
                assert_int_equal(ta[t], tb[t]); /* the flame graph's totals */
        free(ea);
        free(eb);
        pfr_profile_free(a);
        pfr_profile_free(b);
    }
}

static void check_exact(pfr_store *small, pfr_store *ref, const struct rolled_list *l)
{
    check_exact_r(small, ref, l, 0);
}

static pfr_store *open_ring_fold(const char *path, uint64_t cap, const char *tiers, uint32_t fold)
{
    pfr_store_opts o = {
        .max_bytes = cap, .reserve = {.mode = PFR_STORE_RESERVE_OFF}, .fold_stacks = fold};
    char err[256];
    assert_int_equal(pfr_store_tiers_parse(tiers, &o.tiers, err, sizeof(err)), 0);
    pfr_store *s = NULL;
    assert_int_equal(pfr_store_open(path, &o, &s, err, sizeof(err)), 0);
    return s;
}

static pfr_store *open_ring(const char *path, uint64_t cap, const char *tiers)
{
    return open_ring_fold(path, cap, tiers, 0);
}

/* The small ring checks clean; both rings and their folder go. */
static void close_pair(pfr_store *small, pfr_store *ref, char *dir, char *ps, char *pr)
{
    char err[256];
    assert_int_equal(pfr_store_check(small, NULL, err, sizeof(err)), 0);
    pfr_store_close(small);
    pfr_store_close(ref);
    pfr_tu_rmdir(dir);
    free(ps);
    free(pr);
    free(dir);
}

static void test_rollup_exact(void **state)
{
    (void)state;
    char *dir = pfr_tu_tmpdir("retention");
    char *ps = pfr_tu_path(dir, "small.db"), *pr = pfr_tu_path(dir, "ref.db");
    pfr_store *small = open_ring(ps, 1536u << 10, "1m,10m,1h");
    pfr_store *ref = open_ring(pr, 256u << 20, "off");
    /* 2 streams, 12 hours of 10 s intervals */
    append_all(small, 2, 4320, 0);
    append_all(ref, 2, 4320, 0);
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(small, &st), 0);
    assert_true(st.rolled_up > 0);
    assert_int_equal(st.chunks + st.evicted + st.rolled_up, st.appended);
    pfr_store_stats q;
    assert_int_equal(pfr_store_stats_quick(small, &q), 0);
    assert_int_equal(q.chunks, st.chunks);
    struct rolled_list *l = calloc(1, sizeof(*l));
    assert_int_equal(pfr_store_scan(small, NULL, PFR_SCAN_META_ONLY, rolled_cb, l, NULL), 0);
    assert_true(l->n > 0);
    assert_true(l->max_tier >= 2); /* roll-ups of roll-ups */
    check_exact(small, ref, l);
    /* The newest interval is still as recorded. */
    pfr_store_filter f = {.from_ns = T0 + 4319 * STEP, .to_ns = T0 + 4320 * STEP};
    struct rolled_list *last = calloc(1, sizeof(*last));
    assert_int_equal(pfr_store_scan(small, &f, PFR_SCAN_META_ONLY, rolled_cb, last, NULL), 0);
    assert_int_equal(last->max_tier, 0);
    free(last);
    free(l);
    close_pair(small, ref, dir, ps, pr);
}

static int64_t cpu_total(const pfr_profile *p)
{
    int t = pfr_profile_find_sample_type(p, types[0]);
    int64_t sum = 0;
    for (size_t i = 0; t >= 0 && i < pfr_profile_num_samples(p); i++)
        sum += pfr_profile_sample_values(p, i)[t];
    return sum;
}

/* A range that covers part of a rolled-up chunk counts that part of it (summed types). */
static void test_prorate(void **state)
{
    (void)state;
    char *dir = pfr_tu_tmpdir("retention");
    char *ps = pfr_tu_path(dir, "small.db");
    pfr_store *small = open_ring(ps, 1536u << 10, "1m,10m,1h");
    append_all(small, 2, 4320, 0);
    struct rolled_list *l = calloc(1, sizeof(*l));
    assert_int_equal(pfr_store_scan(small, NULL, PFR_SCAN_META_ONLY, rolled_cb, l, NULL), 0);
    assert_true(l->n > 0);
    const struct rolled *r = &l->v[0];
    pfr_store_filter whole = {.from_ns = r->start, .to_ns = r->end, .service = r->service};
    pfr_store_filter half = whole;
    half.to_ns = r->start + (r->end - r->start) / 2;
    pfr_profile *a = NULL, *b = NULL;
    assert_int_equal(pfr_store_merge(small, &whole, PFR_MERGE_DROP_LABELS, &a, NULL), 0);
    assert_int_equal(pfr_store_merge(small, &half, PFR_MERGE_DROP_LABELS, &b, NULL), 0);
    int64_t ta = cpu_total(a), tb = cpu_total(b);
    assert_true(ta > 0);
    /* half of it, to a unit's rounding per stack */
    assert_true(llabs(tb - ta / 2) <= (int64_t)pfr_profile_num_samples(b) + 1);
    free(l);
    pfr_profile_free(a);
    pfr_profile_free(b);
    pfr_store_close(small);
    pfr_tu_rmdir(dir);
    free(ps);
    free(dir);
}

/* With a consumer's cursor, only chunks it has taken are rolled up, and a roll-up keeps the
 * smallest id of its inputs: behind the cursor too. */
static void test_cursor_rule(void **state)
{
    (void)state;
    char *dir = pfr_tu_tmpdir("retention");
    char *ps = pfr_tu_path(dir, "small.db");
    pfr_store *small = open_ring(ps, 1536u << 10, "1m,10m,1h");
    /* A consumer that lags 100 chunks behind the writer. */
    int64_t cursor = 0;
    for (unsigned i = 0; i < 4320; i += 60) {
        append_all(small, 2, 60, i);
        pfr_store_stats st;
        assert_int_equal(pfr_store_stats_quick(small, &st), 0);
        cursor = st.max_id > 100 ? st.max_id - 100 : 0;
        assert_int_equal(pfr_store_cursor_set(small, "shipper.test", cursor), 0);
    }
    struct rolled_list *l = calloc(1, sizeof(*l));
    assert_int_equal(pfr_store_scan(small, NULL, PFR_SCAN_META_ONLY, rolled_cb, l, NULL), 0);
    assert_true(l->n > 0);
    for (size_t i = 0; i < l->n; i++)
        assert_true(l->v[i].id <= cursor);
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(small, &st), 0);
    assert_int_equal(st.lost_unshipped, 0);
    free(l);
    pfr_store_close(small);
    pfr_tu_rmdir(dir);
    free(ps);
    free(dir);
}

/* Tier of chunk id (-1: not in the ring). */
struct find_tier {
    int64_t id;
    int tier;
};
static int find_tier_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    struct find_tier *f = ctx;
    if (m->id == f->id)
        f->tier = m->tier;
    return 0;
}
static int tier_of(pfr_store *s, int64_t id)
{
    struct find_tier f = {id, -1};
    assert_int_equal(pfr_store_scan(s, NULL, PFR_SCAN_META_ONLY, find_tier_cb, &f, NULL), 0);
    return f.tier;
}

/* Chunks a consumer set aside (below its cursor, not taken) are never rolled up; what the ring
 * evicts is counted per consumer, past each one's own cursor, and roll-ups are not counted. */
static void test_aside_and_consumer_lost(void **state)
{
    (void)state;
    char *dir = pfr_tu_tmpdir("retention");
    char *ps = pfr_tu_path(dir, "small.db");
    pfr_store *s = open_ring(ps, 1536u << 10, "1m,10m,1h");
    append_all(s, 2, 60, 0); /* 10 min, 120 chunks */
    int64_t aside[] = {3, 4, 50};
    /* "ahead" takes everything but three chunks, as it is written */
    assert_int_equal(pfr_store_aside_set(s, "ahead", aside, 3), 0);
    unsigned at = 60;
    pfr_store_stats st;
    do { /* until chunk 1 is rolled up: the set-aside ones beside it are not */
        assert_int_equal(pfr_store_stats_quick(s, &st), 0);
        assert_int_equal(pfr_store_cursor_set(s, "ahead", st.max_id), 0);
        append_all(s, 2, 60, at);
        at += 60;
    } while (tier_of(s, 1) == 0 && at < 3000);
    assert_true(tier_of(s, 1) > 0);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(tier_of(s, aside[i]), 0);
    /* "behind" took what there is now; "ahead" stops too, 100 chunks later */
    assert_int_equal(pfr_store_stats_quick(s, &st), 0);
    assert_int_equal(pfr_store_cursor_set(s, "behind", st.max_id), 0);
    assert_int_equal(pfr_store_cursor_set(s, "ahead", st.max_id + 100), 0);
    append_all(s, 2, 3000, at); /* until the ring evicts chunks no one took */
    assert_int_equal(pfr_store_stats_get(s, &st), 0);
    uint64_t ahead, behind, none;
    assert_int_equal(pfr_store_consumer_lost(s, "ahead", &ahead), 0);
    assert_int_equal(pfr_store_consumer_lost(s, "behind", &behind), 0);
    assert_int_equal(pfr_store_consumer_lost(s, "nobody", &none), 0);
    assert_true(st.evicted > 0);
    assert_int_equal(none, 0);
    /* "behind" lost every chunk evicted past 20; "ahead" those past 120; the global count is
     * the smallest cursor's */
    assert_int_equal(behind, st.lost_unshipped);
    assert_true(ahead < behind);
    assert_true(behind <= st.evicted);
    /* a list emptied holds nothing back any more */
    assert_int_equal(pfr_store_aside_set(s, "ahead", NULL, 0), 0);
    pfr_store_close(s);
    pfr_tu_rmdir(dir);
    free(ps);
    free(dir);
}

/* Per type and per pid (100, 101): the sum of a profile's values; its "[folded]" leaves. */
static void sums(const pfr_profile *p, int64_t out[2][NTYPES], size_t *folded)
{
    memset(out, 0, sizeof(int64_t) * 2 * NTYPES);
    *folded = 0;
    int tix[NTYPES];
    for (size_t t = 0; t < NTYPES; t++)
        tix[t] = pfr_profile_find_sample_type(p, types[t]);
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        int64_t pid = 0;
        pfr_frame f;
        assert_true(pfr_profile_sample_label_num(p, i, "pid", &pid));
        assert_true(pid == 100 || pid == 101);
        if (pfr_profile_sample_frames(p, i, &f, 1) && !strcmp(f.function, "[folded]"))
            (*folded)++;
        for (size_t t = 0; t < NTYPES; t++)
            out[pid - 100][t] += pfr_profile_sample_values(p, i)[tix[t]];
    }
}

struct coarse {
    int tier;
    size_t max_samples, chunks;
};
static int coarse_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct coarse *c = ctx;
    if (m->tier == c->tier) {
        c->chunks++;
        if (pfr_profile_num_samples(p) > c->max_samples)
            c->max_samples = pfr_profile_num_samples(p);
    }
    return 0;
}

/* The coarsest tier's fold in the ring: a drifting stream rolled up into it with a small bound.
 * Each coarsest chunk keeps at most the bound's entries, its range's totals per type and per
 * process are the reference ring's (summed types exactly; averaged types their time average, to
 * rounding), the finer tier's roll-ups are exact stack for stack, and the ring checks clean. */
static void test_fold_coarsest(void **state)
{
    (void)state;
    enum { BOUND = 24 };
    char *dir = pfr_tu_tmpdir("retention");
    char *ps = pfr_tu_path(dir, "small.db"), *pr = pfr_tu_path(dir, "ref.db");
    pfr_store *small = open_ring_fold(ps, 1536u << 10, "1m,10m", BOUND);
    pfr_store *ref = open_ring(pr, 256u << 20, "off");
    append_d(small, 2, 4320, 0, true);
    append_d(ref, 2, 4320, 0, true);
    struct coarse c = {.tier = 2};
    assert_int_equal(pfr_store_scan(small, NULL, 0, coarse_cb, &c, NULL), 0);
    assert_true(c.chunks > 10);
    assert_true(c.max_samples <= BOUND);
    struct rolled_list *l = calloc(1, sizeof(*l)), *fine = calloc(1, sizeof(*fine));
    assert_int_equal(pfr_store_scan(small, NULL, PFR_SCAN_META_ONLY, rolled_cb, l, NULL), 0);
    size_t nfolded = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct rolled *r = &l->v[i];
        if (r->tier != 2) {
            fine->v[fine->n++] = *r;
            continue;
        }
        pfr_profile *a = NULL, *b = NULL;
        int64_t nin = merge_both(small, ref, r, &a, &b);
        int64_t ta[2][NTYPES], tb[2][NTYPES];
        size_t fa, fb;
        sums(a, ta, &fa);
        sums(b, tb, &fb);
        assert_int_equal(fb, 0);
        nfolded += fa;
        /* the stacks rounded once per tier before the fold summed them */
        double slack = 0.5 * 2 * (double)pfr_profile_num_samples(b) + 1e-9;
        for (int pid = 0; pid < 2; pid++)
            for (size_t t = 0; t < NTYPES; t++) {
                if (!gauge[t])
                    assert_int_equal(ta[pid][t], tb[pid][t]);
                else
                    assert_true(fabs((double)ta[pid][t] - (double)tb[pid][t] / (double)nin) <=
                                slack);
            }
        pfr_profile_free(a);
        pfr_profile_free(b);
    }
    assert_true(nfolded > 0);
    assert_true(fine->n > 0);
    check_exact(small, ref, fine); /* finer tiers: stack for stack */
    free(l);
    free(fine);
    close_pair(small, ref, dir, ps, pr);
}

/* Coarsest chunks (tier 3 of 1m,10m,1h) shorter than an hour beside chunks as recorded of their
 * hour: pieces, the rolled part of an hour whose finest chunks are still there. */
#define PIECES_SQL                                                                                 \
    "SELECT count(*) FROM chunks c WHERE tier = 3 AND end_ns - start_ns < 3600000000000 AND"       \
    " EXISTS (SELECT 1 FROM chunks f WHERE f.stream_id = c.stream_id AND f.tier = 0 AND"           \
    " f.start_ns >= c.start_ns - c.start_ns % 3600000000000 AND"                                   \
    " f.start_ns < c.start_ns - c.start_ns % 3600000000000 + 3600000000000)"

/* Pieces an hour of test_piece's ring makes at most (5 to 8 in its run): each rounds the averaged
 * types of the part it holds once more. */
#define PIECES_AN_HOUR 12

/* The finest tier short of an hour: the hour before's minutes and 10 minutes go into the
 * coarsest as a piece while its chunks as recorded stay, and the piece goes into that hour's
 * chunk with the rest. Every rolled-up chunk, pieces and the hours made of them, has per stack
 * the sums of the chunks it replaced (the fold off; the coarsest tier past half of the pages
 * deletes its oldest hours: counted), and the ring checks clean (a piece read back in the
 * transaction that wrote it, rolled back, left its layer in the writer's chain cache: "corrupt"
 * chunks, evicted). */
static void test_piece(void **state)
{
    (void)state;
    char *dir = pfr_tu_tmpdir("retention");
    char *ps = pfr_tu_path(dir, "small.db"), *pr = pfr_tu_path(dir, "ref.db");
    pfr_store *small = open_ring_fold(ps, 768u << 10, "1m,10m,1h", PFR_STORE_FOLD_OFF);
    pfr_store *ref = open_ring(pr, 256u << 20, "off");
    int64_t pieces = 0;
    for (unsigned i = 0; i < 4320; i += 30) {
        append_d(small, 2, 30, i, true);
        append_d(ref, 2, 30, i, true);
        pieces += pfr_tu_sql_int(ps, PIECES_SQL);
    }
    assert_true(pieces > 0);
    struct rolled_list *l = calloc(1, sizeof(*l));
    assert_int_equal(pfr_store_scan(small, NULL, PFR_SCAN_META_ONLY, rolled_cb, l, NULL), 0);
    assert_int_equal(l->max_tier, 3);
    check_exact_r(small, ref, l, PIECES_AN_HOUR);
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(small, &st), 0);
    assert_int_equal(st.appended, st.chunks + st.evicted + st.rolled_up);
    free(l);
    close_pair(small, ref, dir, ps, pr);
}

/* Rows of chains no chunk references in the ring file. */
#define ORPHANS_WHERE " FROM dicts WHERE base_id NOT IN (SELECT base_id FROM chunks)"

/* The chains a roll-up into the coarsest leaves without chunks are deleted as the ring needs
 * room, before any roll-up, a few rows at a time (in the roll-up's transaction a drifting hour's
 * took ~400 KB of WAL); a writer that starts finds those left in the file (here a chain of 40
 * rows written while it was closed). The ring checks clean and every chunk is counted. */
static void test_chains_without_chunks(void **state)
{
    (void)state;
    char *dir = pfr_tu_tmpdir("retention");
    char *ps = pfr_tu_path(dir, "ring.db");
    pfr_store *s = open_ring_fold(ps, 1536u << 10, "1m,10m", 24);
    append_d(s, 2, 1440, 0, true);
    pfr_store_close(s);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(ps, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 39)"
                     " INSERT INTO dicts(id, stream_id, base_id, parent_id, nbytes, crc, data)"
                     " SELECT 1000000 + i, 1, 1000000, CASE i WHEN 0 THEN 0 ELSE 999999 + i END,"
                     " 4000, 0, zeroblob(4000) FROM k",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    assert_true(pfr_tu_sql_int(ps, "SELECT count(*)" ORPHANS_WHERE) >= 40);
    s = open_ring_fold(ps, 1536u << 10, "1m,10m", 24);
    append_d(s, 2, 720, 1440, true);
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(s, &st), 0);
    assert_int_equal(st.appended, st.chunks + st.evicted + st.rolled_up);
    char err[256];
    assert_int_equal(pfr_store_check(s, NULL, err, sizeof(err)), 0);
    pfr_store_close(s);
    /* the chain left in the file went, and what roll-ups leave stays a small part of the ring */
    assert_int_equal(pfr_tu_sql_int(ps, "SELECT count(*) FROM dicts WHERE base_id = 1000000"), 0);
    assert_true(pfr_tu_sql_int(ps, "SELECT coalesce(sum(nbytes), 0)" ORPHANS_WHERE) <
                (int64_t)(1536u << 10) / 4);
    pfr_tu_rmdir(dir);
    free(ps);
    free(dir);
}

/* ---- the policy: figures in, plan out (pfr_st_retention_plan) ---- */

#define DAY_NS (86400 * NS)

/* A full 2 MB ring of the default steps (1m, 10m, 1h): the finest's payloads, the tiers
 * between, the hours (chunks and the chains only they keep). */
static struct store_ret_plan plan_of(uint64_t t0, uint64_t t1, uint64_t t2, uint64_t t3,
                                     int64_t coarse_age)
{
    struct store_ret_in in = {.n = 3,
                              .bytes = {t0, t1, t2, t3},
                              .used = 2000000,
                              .top = t3   ? 3
                                     : t2 ? 2
                                     : t1 ? 1
                                          : 0,
                              .coarse_age = coarse_age};
    struct store_ret_plan p;
    pfr_st_retention_plan(&in, &p);
    return p;
}

/* Hours within 30 days and their share are never what makes room: the finest tier rolls up,
 * whatever its chains take (the drifting ring whose ~1 KB hours were deleted for ~144 KB bases),
 * and the tiers between after it (a young ring). */
static void test_plan_hours_kept(void **state)
{
    (void)state;
    struct store_ret_plan p = plan_of(500000, 20000, 40000, 700000, 29 * DAY_NS);
    assert_int_equal(p.trim, -1);
    assert_int_equal(p.norder, 3);
    assert_int_equal(p.order[0], 0);
    assert_int_equal(p.order[1], 2);
    assert_int_equal(p.order[2], 1);
    assert_int_equal(p.evict_last, 3); /* nothing may move (consumers, pins): the oldest go */
}

/* A tier between past its thirty-second (its chunks and the recorded chains only they keep
 * alive) rolls up first, coarser first, then the finest. */
static void test_plan_between_first(void **state)
{
    (void)state;
    struct store_ret_plan p = plan_of(500000, 70000, 300000, 100000, DAY_NS);
    assert_int_equal(p.trim, -1);
    assert_int_equal(p.norder, 3);
    assert_int_equal(p.order[0], 2);
    assert_int_equal(p.order[1], 1);
    assert_int_equal(p.order[2], 0);
}

/* The coarsest tier is trimmed past 30 days, or past half of the pages in use. */
static void test_plan_coarse_trimmed(void **state)
{
    (void)state;
    assert_int_equal(plan_of(500000, 0, 0, 100000, 31 * DAY_NS).trim, 3);
    assert_int_equal(plan_of(500000, 0, 0, 1000001, 2 * DAY_NS).trim, 3);
    assert_int_equal(plan_of(500000, 0, 0, 1000000, 30 * DAY_NS).trim, -1);
    /* no coarsest chunk yet: nothing to trim, roll up */
    struct store_ret_plan p = plan_of(500000, 30000, 0, 0, 0);
    assert_int_equal(p.trim, -1);
    assert_int_equal(p.order[0], 0);
}

/* Dictionaries are the ring (chunks under an eighth of the pages: a churning host's programs)
 * or tiers are off: no roll-up, the oldest of the coarsest tier present go as the appends need. */
static void test_plan_evict_only(void **state)
{
    (void)state;
    struct store_ret_plan p = plan_of(200000, 10000, 10000, 10000, DAY_NS);
    assert_int_equal(p.trim, -1);
    assert_int_equal(p.norder, 0);
    assert_int_equal(p.evict_last, 3);
    struct store_ret_in off = {.n = 0, .bytes = {1000000}, .used = 2000000, .top = 0};
    pfr_st_retention_plan(&off, &p);
    assert_int_equal(p.norder, 0);
    assert_int_equal(p.evict_last, 0);
    struct store_ret_in empty = {.n = 3, .used = 8192, .top = -1};
    pfr_st_retention_plan(&empty, &p);
    assert_int_equal(p.norder, 0);
    assert_int_equal(p.trim, -1);
}

/* The finest tier short of an hour (the coarsest's step): the hour before's rolled part goes
 * into the coarsest first as a piece (its recorded chunks left), then the minutes up to 10
 * minutes, their settled buckets only, within their share too; not the 10 minutes whole (their
 * roll-up into the hours would take the hour's recorded chunks). Over its share, a tier goes
 * first anyway. */
static void test_plan_fine_short(void **state)
{
    (void)state;
    struct store_ret_in in = {.n = 3,
                              .bytes = {500000, 20000, 40000, 700000},
                              .used = 2000000,
                              .top = 3,
                              .coarse_age = DAY_NS,
                              .fine_short = true,
                              .fine_near = true};
    struct store_ret_plan p;
    pfr_st_retention_plan(&in, &p);
    assert_int_equal(p.trim, -1);
    assert_int_equal(p.norder, 4);
    assert_int_equal(p.order[0], 2);
    assert_true(p.piece[0]);
    assert_false(p.settled[0]);
    assert_int_equal(p.order[1], 1);
    assert_true(p.settled[1]);
    assert_false(p.piece[1]);
    assert_int_equal(p.order[2], 0);
    assert_false(p.settled[2]);
    assert_false(p.piece[2]);
    assert_int_equal(p.order[3], 2); /* whole hours, when the finest may not move */
    assert_false(p.piece[3]);
    in.bytes[1] = 70000; /* past its thirty-second: first as before, not only where settled */
    pfr_st_retention_plan(&in, &p);
    assert_int_equal(p.norder, 4);
    assert_int_equal(p.order[0], 1);
    assert_false(p.settled[0]);
    assert_false(p.piece[0]);
    assert_int_equal(p.order[1], 2);
    assert_true(p.piece[1]);
    assert_int_equal(p.order[2], 0);
    assert_int_equal(p.order[3], 2);
    assert_false(p.piece[3]);
    in.bytes[1] = 20000;
    in.bytes[2] = 70000; /* the 10 minutes past theirs: the whole hour, no piece */
    pfr_st_retention_plan(&in, &p);
    assert_int_equal(p.order[0], 2);
    assert_false(p.piece[0]);
    assert_int_equal(p.order[1], 1);
    assert_true(p.settled[1]);
    assert_int_equal(p.order[2], 0);
    in.fine_short = false; /* within an eighth of an hour of short: the piece only */
    in.bytes[2] = 40000;
    pfr_st_retention_plan(&in, &p);
    assert_int_equal(p.norder, 4);
    assert_int_equal(p.order[0], 2);
    assert_true(p.piece[0]);
    assert_int_equal(p.order[1], 0);
    assert_int_equal(p.order[2], 2);
    assert_false(p.piece[2]);
    assert_int_equal(p.order[3], 1);
    assert_false(p.settled[3]);
    in.fine_near = false; /* farther: as before */
    pfr_st_retention_plan(&in, &p);
    assert_int_equal(p.order[0], 0);
    assert_int_equal(p.order[1], 2);
    assert_int_equal(p.order[2], 1);
    assert_false(p.settled[2]);
    for (unsigned i = 0; i < p.norder; i++)
        assert_false(p.piece[i]);
}

/* The coarsest tier's oldest start as the writer's notes keep it between reads: an older chunk
 * of that tier lowers it, a newer one or a finer tier's leaves it, a deletion from that tier (or
 * from any: tier < 0) or a rollback has it read again; unknown, the notes leave it alone. */
static void test_coarse_notes(void **state)
{
    (void)state;
    struct store_retention r = {.coarse_start = 5000, .coarse_known = true};
    char err[128];
    assert_int_equal(pfr_store_tiers_parse("1m,10m,1h", &r.tiers, err, sizeof(err)), 0);
    pfr_st_retention_coarse_note(&r, 3, 7000, true);
    assert_int_equal(r.coarse_start, 5000);
    pfr_st_retention_coarse_note(&r, 2, 1000, true);
    assert_int_equal(r.coarse_start, 5000);
    pfr_st_retention_coarse_note(&r, 3, 4000, true);
    assert_int_equal(r.coarse_start, 4000);
    assert_true(r.coarse_known);
    pfr_st_retention_coarse_note(&r, 1, 0, false); /* a finer tier's deletion */
    assert_true(r.coarse_known);
    pfr_st_retention_coarse_note(&r, 3, 0, false);
    assert_false(r.coarse_known);
    pfr_st_retention_coarse_note(&r, 3, 100, true); /* unknown: read at the next measure */
    assert_int_equal(r.coarse_start, 4000);
    r.coarse_known = true;
    pfr_st_retention_coarse_note(&r, -1, 0, false);
    assert_false(r.coarse_known);
    r = (struct store_retention){.tiers = r.tiers, .coarse_known = true}; /* no coarsest chunk */
    pfr_st_retention_coarse_note(&r, 3, 9000, true);
    assert_int_equal(r.coarse_start, 9000);
    pfr_st_retention_coarse_forget(&r);
    assert_false(r.coarse_known);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rollup_exact),
        cmocka_unit_test(test_prorate),
        cmocka_unit_test(test_cursor_rule),
        cmocka_unit_test(test_aside_and_consumer_lost),
        cmocka_unit_test(test_fold_coarsest),
        cmocka_unit_test(test_plan_hours_kept),
        cmocka_unit_test(test_plan_between_first),
        cmocka_unit_test(test_plan_coarse_trimmed),
        cmocka_unit_test(test_plan_evict_only),
        cmocka_unit_test(test_chains_without_chunks),
        cmocka_unit_test(test_coarse_notes),
        cmocka_unit_test(test_plan_fine_short),
        cmocka_unit_test(test_piece),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
