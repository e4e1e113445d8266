/* Unit tests of the pieces of pfr-shipper's streamed batches: the batch source (chunks read
 * from the ring by id, gone and corrupt ones noted), gzip made piece by piece, ClickHouse rows
 * dropped one table at a time, the encoder's bounded memory of stacks (forgotten stacks come
 * again; what ClickHouse holds counts as written), and the LastSeen rule for rows whose chunk
 * the stored LastSeen covers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <zlib.h>

#include "sinks/clickhouse/ch_lastseen.h"
#include "sinks/clickhouse/ch_columns.h"
#include "sinks/clickhouse/ch_rows.h"
#include "chunksrc.h"
#include "sinks/coroot_conventions.h"
#include "pfr_gzip.h"
#include "pfr_testgen.h"

static const int64_t S0 = 1714557600ll * 1000000000, IV = 10ll * 1000000000;

/* ---- a ring of services x intervals in a temporary directory ---- */

struct ring {
    char dir[32], path[64];
    pfr_store *s;
};

static void ring_make(struct ring *r, unsigned services, int intervals, unsigned stacks)
{
    char err[256];
    snprintf(r->dir, sizeof(r->dir), "/tmp/pfr-stream-XXXXXX");
    assert_non_null(mkdtemp(r->dir));
    snprintf(r->path, sizeof(r->path), "%s/ring.db", r->dir);
    pfr_store_opts so = {.max_bytes = 256ull << 20};
    assert_int_equal(pfr_store_open(r->path, &so, &r->s, err, sizeof(err)), 0);
    pfr_testgen_opts go = {.nstacks = stacks, .drift_permille = 100};
    pfr_kv labels[] = {{"host.name", "h1"}};
    for (unsigned k = 0; k < services; k++) {
        pfr_testgen *g = pfr_testgen_new(5, k, &go);
        for (int i = 0; i < intervals; i++) {
            pfr_profile *p = pfr_testgen_next(g, S0 + i * IV, IV);
            pfr_chunk_in in = {pfr_testgen_service(g), labels, 1, S0 + i * IV,
                               S0 + (i + 1) * IV,      p};
            assert_int_equal(pfr_store_append(r->s, &in, NULL), 0);
            pfr_profile_free(p);
        }
        pfr_testgen_free(g);
    }
}

static void ring_free(struct ring *r)
{
    pfr_store_close(r->s);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", r->dir);
    assert_int_equal(system(cmd), 0);
}

static void ring_sql(const struct ring *r, const char *sql)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(r->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* ---- chunksrc ---- */

static int plan_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    return pfr_chunksrc_add(ctx, m);
}

struct seen {
    int64_t id;
    size_t calls;
    uint64_t total;
};

static int note(struct seen *s, const pfr_chunk_meta *m, uint64_t total)
{
    s->id = m->id;
    s->calls++;
    s->total += total;
    return 0;
}

static int samples_cb(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    uint64_t t = 0;
    for (size_t i = 0; i < pfr_samples_count(v); i++)
        t += (uint64_t)pfr_samples_values(v, i)[0];
    return note(ctx, m, t);
}

static int profile_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    uint64_t t = 0;
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++)
        t += (uint64_t)pfr_profile_sample_values(p, i)[0];
    return note(ctx, m, t);
}

static void test_chunksrc(void **st)
{
    (void)st;
    struct ring r;
    ring_make(&r, 2, 6, 30);
    pfr_chunksrc src = {.store = r.s};
    pfr_store_filter f = {.after_id = 2, .max_id = 11};
    assert_int_equal(pfr_store_scan(r.s, &f, PFR_SCAN_META_ONLY, plan_cb, &src, NULL), 0);
    assert_int_equal(src.n, 9);
    assert_int_equal(src.ids[0], 3);
    assert_true(src.stored_bytes > 0);
    /* services in ring order: 6 chunks of the first, then the second's */
    assert_string_equal(pfr_chunksrc_service(&src, 0), pfr_chunksrc_service(&src, 3));
    assert_string_not_equal(pfr_chunksrc_service(&src, 3), pfr_chunksrc_service(&src, 4));
    /* read in any order, each once; as samples and as a profile, the same totals */
    for (size_t i = src.n; i-- > 0;) {
        struct seen a = {0}, b = {0};
        assert_int_equal(pfr_chunksrc_read_samples(&src, i, samples_cb, &a), 0);
        assert_int_equal(pfr_chunksrc_read_profile(&src, i, profile_cb, &b), 0);
        assert_int_equal(a.calls, 1);
        assert_int_equal(a.id, src.ids[i]);
        assert_int_equal(a.total, b.total);
        assert_int_equal(src.state[i], PFR_CHUNK_READ);
    }
    assert_int_equal(pfr_chunksrc_count(&src, PFR_CHUNK_READ), 9);
    /* a payload that fails its checksum, a chunk the ring no longer has */
    ring_sql(&r, "UPDATE chunk_data SET data = zeroblob(length(data)) WHERE id = 5;"
                 "DELETE FROM chunk_data WHERE id = 7; DELETE FROM chunks WHERE id = 7;");
    pfr_chunksrc_rewind(&src);
    assert_int_equal(pfr_chunksrc_count(&src, PFR_CHUNK_UNREAD), 9);
    for (size_t i = 0; i < src.n; i++) {
        struct seen a = {0};
        assert_int_equal(pfr_chunksrc_read_samples(&src, i, samples_cb, &a), 0);
        assert_int_equal(a.calls, src.ids[i] == 5 || src.ids[i] == 7 ? 0 : 1);
    }
    assert_int_equal(src.state[2], PFR_CHUNK_CORRUPT); /* id 5 */
    assert_int_equal(src.state[4], PFR_CHUNK_GONE);    /* id 7 */
    assert_int_equal(pfr_chunksrc_count(&src, PFR_CHUNK_READ), 7);
    pfr_chunksrc_reset(&src);
    assert_int_equal(src.n, 0);
    assert_int_equal(src.stored_bytes, 0);
    pfr_chunksrc_free(&src);
    ring_free(&r);
}

/* ---- gzstream ---- */

static size_t gunzip(const pfr_buf *gz, uint8_t *out, size_t cap)
{
    z_stream z = {0};
    assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = gz->data;
    z.avail_in = (uInt)gz->len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
    assert_int_equal(z.avail_in, 0); /* nothing after the trailer */
    size_t n = z.total_out;
    inflateEnd(&z);
    return n;
}

static void test_gzstream(void **st)
{
    (void)st;
    size_t n = 3 << 20;
    uint8_t *in = malloc(n), *back = malloc(n + 1);
    assert_non_null(in);
    assert_non_null(back);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        in[i] = (uint8_t)(i % 7 ? 'a' + x % 4 : x); /* compressible, not trivially */
    }
    /* three pieces (one empty), the last ends the stream */
    pfr_gzip_stream g = {0};
    pfr_buf out = {0};
    assert_int_equal(pfr_gzip_stream_put(&g, 1, in, n / 3, false, &out), 0);
    assert_int_equal(pfr_gzip_stream_put(&g, 1, in, 0, false, &out), 0);
    assert_int_equal(pfr_gzip_stream_put(&g, 1, in + n / 3, n - n / 3, true, &out), 0);
    assert_null(g.z);
    assert_true(out.len < n);
    assert_int_equal(gunzip(&out, back, n + 1), n);
    assert_memory_equal(back, in, n);
    /* one piece: what pfr_gzip makes */
    pfr_buf o = {0};
    assert_int_equal(pfr_gzip(in, 1000, 6, &o), 0);
    assert_int_equal(gunzip(&o, back, n), 1000);
    assert_memory_equal(back, in, 1000);
    /* an empty body is a valid stream; a stream dropped half way frees its state */
    pfr_buf_reset(&out);
    assert_int_equal(pfr_gzip_stream_put(&g, 1, NULL, 0, true, &out), 0);
    assert_int_equal(gunzip(&out, back, n), 0);
    assert_int_equal(pfr_gzip_stream_put(&g, 1, in, 100, false, &out), 0);
    assert_non_null(g.z);
    pfr_gzip_stream_end(&g);
    assert_null(g.z);
    pfr_buf_free(&o);
    pfr_buf_free(&out);
    free(in);
    free(back);
}

/* ---- ch_columns: one table's rows at a time ---- */

static void add_stack(pfr_ch_columns *c, const char *svc, uint64_t hash)
{
    assert_int_equal(pfr_ch_columns_stack(c, svc, hash, S0), 0);
    pfr_ch_columns_stack_str(c, "main a.c:1", 10);
}

static void add_samples(pfr_ch_columns *c, const char *svc, size_t nrows)
{
    pfr_kv lab[] = {{"host.name", "h"}};
    uint32_t l = pfr_ch_columns_labels(c, lab, 1);
    uint64_t *h;
    int64_t *v;
    assert_int_equal(pfr_ch_columns_group(c, svc, "cpu", S0, S0 + IV, l, 1, nrows, &h, &v), 0);
    for (size_t i = 0; i < nrows; i++)
        h[i] = i, v[i] = 1;
}

static void test_chcols_tables(void **st)
{
    (void)st;
    pfr_ch_columns c = {0};
    pfr_buf a = {0}, b = {0};
    add_stack(&c, "s1", 7);
    add_samples(&c, "s2", 3);
    add_stack(&c, "s2", 9);
    assert_true(c.est_stacks > 0 && c.est_samples > 0);
    assert_int_equal(pfr_ch_columns_render_stacks(&c, PFR_CH_NATIVE, NULL, &a), 0);
    /* the samples go: the stacks render as before */
    pfr_ch_columns_reset_samples(&c);
    assert_int_equal(pfr_ch_columns_sample_rows(&c), 0);
    assert_int_equal(c.est_samples, 0);
    assert_int_equal(pfr_ch_columns_stack_rows(&c), 2);
    assert_int_equal(pfr_ch_columns_render_stacks(&c, PFR_CH_NATIVE, NULL, &b), 0);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    assert_int_equal(pfr_ch_columns_render_samples(&c, PFR_CH_NATIVE, &b), 0);
    assert_int_equal(b.len, 0);
    /* new samples with the stacks still there; then the stacks go, the samples stay */
    add_samples(&c, "s3", 2);
    assert_int_equal(pfr_ch_columns_render_samples(&c, PFR_CH_NATIVE, &a), 0);
    pfr_ch_columns_reset_stacks(&c);
    assert_int_equal(pfr_ch_columns_stack_rows(&c), 0);
    assert_int_equal(c.est_stacks, 0);
    assert_int_equal(pfr_ch_columns_sample_rows(&c), 2);
    assert_int_equal(pfr_ch_columns_render_samples(&c, PFR_CH_NATIVE, &b), 0);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    /* both gone: nothing left, the dictionaries too */
    pfr_ch_columns_reset_samples(&c);
    assert_int_equal(c.svcs.n, 0);
    pfr_buf_free(&a);
    pfr_buf_free(&b);
    pfr_ch_columns_free(&c);
}

/* ---- ch_rows: a bounded memory of stacks ---- */

/* A chunk of service k at interval i of generator g's profiles. */
static pfr_profile *chunk(pfr_testgen *g, int i, pfr_chunk_meta *m, const char **types)
{
    *m = (pfr_chunk_meta){.id = i + 1,
                          .service = pfr_testgen_service(g),
                          .start_ns = S0 + i * IV,
                          .end_ns = S0 + (i + 1) * IV,
                          .types = types,
                          .ntypes = 1};
    return pfr_testgen_next(g, m->start_ns, IV);
}

/* Chunks 0..5 of 1000 stacks each (most new every chunk), one batch each, then chunk 0's stacks
 * again (later) and chunk 5's: the rows each makes. */
static void memory_run(uint64_t cache_bytes, size_t *first, size_t *again0, size_t *again5)
{
    const char *types[] = {"ebpf:cpu:nanoseconds"};
    pfr_testgen_opts go = {.nstacks = 1000, .drift_permille = 1000};
    pfr_testgen *g = pfr_testgen_new(11, 0, &go);
    pfr_ch_rows_opts o = {.stack_refresh_ns = 3600ll * 1000000000, .cache_bytes = cache_bytes};
    pfr_ch_rows *e;
    assert_int_equal(pfr_ch_rows_new(&o, &e), 0);
    pfr_chunk_meta m[6];
    pfr_profile *p[6];
    for (int i = 0; i < 6; i++) {
        p[i] = chunk(g, i, &m[i], types);
        pfr_ch_rows_begin(e);
        assert_int_equal(pfr_ch_rows_add(e, &m[i], p[i]), 0);
        if (!i)
            *first = pfr_ch_rows_stack_rows(e);
        pfr_ch_rows_commit(e);
    }
    m[0].start_ns = m[5].start_ns, m[0].end_ns = m[5].end_ns;
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m[0], p[0]), 0);
    *again0 = pfr_ch_rows_stack_rows(e);
    pfr_ch_rows_commit(e);
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m[5], p[5]), 0);
    *again5 = pfr_ch_rows_stack_rows(e);
    pfr_ch_rows_commit(e);
    for (int i = 0; i < 6; i++)
        pfr_profile_free(p[i]);
    pfr_ch_rows_free(e);
    pfr_testgen_free(g);
}

static void test_chenc_memory(void **st)
{
    (void)st;
    size_t first, again0, again5;
    /* Room enough: chunk 0's stacks are known (within the hour: no rows). */
    memory_run(0, &first, &again0, &again5);
    assert_true(first > 900);
    assert_int_equal(again0, 0);
    assert_int_equal(again5, 0);
    /* The smallest memory (4096 stacks): chunk 0's were forgotten and their rows come again;
     * the last chunk's are still known. */
    memory_run(1, &first, &again0, &again5);
    assert_true(again0 > first / 2);
    assert_int_equal(again5, 0);
}

/* What ClickHouse holds of a stack left out counts as written: a chunk that ends after it makes
 * the row again, though the row left out reached further. */
static void test_chenc_stored(void **st)
{
    (void)st;
    const char *types[] = {"ebpf:cpu:nanoseconds"};
    const int64_t hour = 3600ll * 1000000000;
    pfr_testgen_opts go = {.no_drift = true, .nstacks = 20};
    pfr_testgen *g = pfr_testgen_new(4, 2, &go);
    pfr_ch_rows_opts o = {.stack_refresh_ns = hour};
    pfr_ch_rows *e;
    assert_int_equal(pfr_ch_rows_new(&o, &e), 0);
    pfr_chunk_meta m;
    pfr_profile *p = chunk(g, 0, &m, types);
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m, p), 0);
    pfr_ch_columns *c = pfr_ch_rows_cols(e);
    size_t n = pfr_ch_columns_stack_rows(c);
    assert_true(n > 1);
    /* ClickHouse holds the first stack until 10 minutes after this chunk */
    int64_t held = m.end_ns + hour / 6;
    assert_true(c->strows[0].tag > 0);
    pfr_ch_rows_stored(e, c->strows[0].tag, held);
    pfr_ch_rows_stored(e, 0, held); /* a row the encoder does not remember: nothing */
    pfr_ch_rows_commit(e);
    /* a chunk before that: no rows; a chunk after it (within the hour): that stack's row */
    m.start_ns = held - 2 * IV, m.end_ns = held - IV;
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m, p), 0);
    assert_int_equal(pfr_ch_rows_stack_rows(e), 0);
    pfr_ch_rows_commit(e);
    m.start_ns = held, m.end_ns = held + IV;
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m, p), 0);
    assert_int_equal(pfr_ch_rows_stack_rows(e), 1);
    pfr_ch_rows_commit(e);
    pfr_profile_free(p);
    pfr_ch_rows_free(e);
    pfr_testgen_free(g);
}

/* A chunk of one-frame stacks f<from> .. f<to - 1> (value 1000 + i each); *sum gets their total. */
static pfr_profile *flat_chunk(int from, int to, int64_t start, pfr_chunk_meta *m,
                               const char **types, int64_t *sum)
{
    pfr_profile *p = pfr_profile_new();
    assert_non_null(p);
    pfr_profile_add_sample_type(p, types[0], "nanoseconds");
    *sum = 0;
    for (int i = from; i < to; i++) {
        char name[16];
        snprintf(name, sizeof(name), "f%d", i);
        int64_t loc = pfr_profile_add_frame(p, name, "f.c", i + 1), v = 1000 + i;
        assert_true(loc >= 0);
        uint32_t l = (uint32_t)loc;
        assert_true(pfr_profile_add_sample(p, &l, 1, &v, NULL, 0) >= 0);
        *sum += v;
    }
    *m = (pfr_chunk_meta){.id = start,
                          .service = "svc",
                          .start_ns = start,
                          .end_ns = start + IV,
                          .types = types,
                          .ntypes = 1};
    return p;
}

/* The open batch's sample rows: their count and total. */
static int64_t rows_total(pfr_ch_rows *e, size_t *nrows)
{
    pfr_ch_columns *c = pfr_ch_rows_cols(e);
    int64_t t = 0;
    for (size_t i = 0; i < c->nrows; i++)
        t += c->values[i];
    *nrows = c->nrows;
    return t;
}

/* A chunk of few stacks after a chunk of many with the same stacks: each of its stacks is one
 * row with its whole value (the bigger chunk's aggregation table, left in place past the part
 * the small chunk clears, once sent a stack met again to the bigger chunk's slot: lost). */
static void test_chenc_small_after_big(void **st)
{
    (void)st;
    const char *types[] = {"java:heap_alloc_objects:count"};
    pfr_ch_rows_opts o = {.stack_refresh_ns = 3600ll * 1000000000};
    pfr_ch_rows *e;
    assert_int_equal(pfr_ch_rows_new(&o, &e), 0);
    pfr_chunk_meta m;
    int64_t sum;
    size_t n;
    pfr_profile *big = flat_chunk(0, 300, S0, &m, types, &sum);
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m, big), 0);
    assert_int_equal(rows_total(e, &n), sum);
    assert_int_equal(n, 300);
    pfr_ch_rows_commit(e);
    for (int k = 0; k < 10; k++) { /* stacks f1..f20, f21..f40, ... of the big chunk */
        pfr_profile *small =
            flat_chunk(1 + 20 * k, 21 + 20 * k, S0 + (k + 1) * IV, &m, types, &sum);
        pfr_ch_rows_begin(e);
        assert_int_equal(pfr_ch_rows_add(e, &m, small), 0);
        assert_int_equal(rows_total(e, &n), sum);
        assert_int_equal(n, 20);
        pfr_ch_rows_commit(e);
        pfr_profile_free(small);
    }
    pfr_profile_free(big);
    pfr_ch_rows_free(e);
}

/* ---- ch_lastseen: rows whose chunk the stored LastSeen covers ---- */

static void test_lastseen_covered(void **st)
{
    (void)st;
    pfr_ch_columns c = {0};
    /* LastSeen = chunk end + 100 */
    assert_int_equal(pfr_ch_columns_stack(&c, "a", 1, 300), 0); /* chunk end 200 */
    assert_int_equal(pfr_ch_columns_stack(&c, "a", 2, 300), 0);
    assert_int_equal(pfr_ch_columns_stack(&c, "a", 3, 300), 0);
    assert_int_equal(pfr_ch_columns_stack(&c, "a", 4, 300), 0);
    pfr_ch_lastseen *l;
    pfr_buf q = {0};
    char what[128];
    assert_int_equal(pfr_ch_lastseen_new(&c, 100, &l), 0);
    assert_int_equal(pfr_ch_lastseen_query(l, "profiling_stacks", 10, &q), 0);
    /* 1: stored 250 covers the chunk (ends 200): left out. 2: stored 199: the row goes.
     * 3: stored 400, later than ours: left out. 4: none stored. */
    assert_int_equal(
        pfr_ch_lastseen_apply(l, "1\t1\t250\n1\t2\t199\n1\t3\t400\n", what, sizeof(what)), 2);
    const uint8_t *skip = pfr_ch_lastseen_skip(l);
    const int64_t *held = pfr_ch_lastseen_stored(l);
    assert_int_equal(skip[0], 1);
    assert_int_equal(skip[1], 0);
    assert_int_equal(skip[2], 1);
    assert_int_equal(skip[3], 0);
    assert_int_equal(held[0], 250);
    assert_int_equal(held[1], 199);
    assert_int_equal(held[2], 400);
    assert_true(held[3] == INT64_MIN);
    pfr_ch_lastseen_free(l);
    /* without refresh: only what would go back is left out */
    assert_int_equal(pfr_ch_lastseen_new(&c, 0, &l), 0);
    assert_int_equal(pfr_ch_lastseen_query(l, "profiling_stacks", 10, &q), 0);
    assert_int_equal(pfr_ch_lastseen_apply(l, "1\t1\t250\n1\t3\t400\n", what, sizeof(what)), 1);
    assert_int_equal(pfr_ch_lastseen_skip(l)[0], 0);
    pfr_ch_lastseen_free(l);
    pfr_buf_free(&q);
    pfr_ch_columns_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunksrc),         cmocka_unit_test(test_gzstream),
        cmocka_unit_test(test_chcols_tables),    cmocka_unit_test(test_chenc_memory),
        cmocka_unit_test(test_chenc_stored),     cmocka_unit_test(test_chenc_small_after_big),
        cmocka_unit_test(test_lastseen_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
