/* Unit tests of pfr_store: the API on real SQLite files in a temporary folder. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "pfr_store.h"
#include "pfr_testgen.h"
#include "store_test_util.h"

#define T0  1700000000000000000ll
#define SEC 1000000000ll

struct fx {
    char *dir, *db;
    pfr_store *s;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = pfr_tu_tmpdir("store");
    f->db = pfr_tu_path(f->dir, "ring.db");
    char err[256];
    pfr_store_opts o = {.max_bytes = 64ull << 20};
    int rc = pfr_store_open(f->db, &o, &f->s, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "open: %s\n", err);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    pfr_store_close(f->s);
    pfr_tu_rmdir(f->dir);
    free(f->dir);
    free(f->db);
    free(f);
    return 0;
}

static pfr_store *open_ro(const char *db)
{
    pfr_store *r = NULL;
    char err[256];
    pfr_store_opts o = {.read_only = true};
    int rc = pfr_store_open(db, &o, &r, err, sizeof(err));
    if (rc)
        fprintf(stderr, "open ro: %s\n", err);
    assert_int_equal(rc, 0);
    return r;
}

/* Collects what a scan delivers. */
struct seen {
    size_t n;
    int64_t ids[20000];
    int64_t starts[20000];
    char *canon[20000];
    int64_t totals[20000];
    char service[20000][16];
};

static void seen_free(struct seen *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->canon[i]);
    s->n = 0;
}

static int collect_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct seen *s = ctx;
    assert_true(s->n < 20000);
    if (s->n)
        assert_true(m->id > s->ids[s->n - 1]);
    s->ids[s->n] = m->id;
    s->starts[s->n] = m->start_ns;
    s->canon[s->n] = p ? pfr_tu_canon(p) : NULL;
    s->totals[s->n] = m->ntypes ? m->totals[0] : 0;
    snprintf(s->service[s->n], sizeof(s->service[0]), "%s", m->service);
    if (p) {
        /* totals are the sums of the values, before any sample filter */
        assert_true(m->ntypes == pfr_profile_num_sample_types(p));
    }
    s->n++;
    return 0;
}

static struct seen *scan_all(pfr_store *s, const pfr_store_filter *f, unsigned flags,
                             pfr_scan_stats *st)
{
    struct seen *out = calloc(1, sizeof(*out));
    int rc = pfr_store_scan(s, f, flags, collect_cb, out, st);
    assert_int_equal(rc, 0);
    return out;
}

static int64_t append_profile(pfr_store *s, const char *svc, const pfr_kv *labels, size_t nl,
                              int64_t start, pfr_profile *p)
{
    pfr_chunk_in in = {svc, labels, nl, start, start + 10 * SEC, p};
    int64_t id = -1;
    assert_int_equal(pfr_store_append(s, &in, &id), 0);
    assert_true(id > 0);
    return id;
}

/* ---- round trip of realistic profiles ---- */
static void test_roundtrip_realistic(void **state)
{
    struct fx *f = *state;
    pfr_testgen *g[2] = {pfr_testgen_new(7, 0, NULL), pfr_testgen_new(7, 1, NULL)};
    enum { N = 40 };
    char *canon[2 * N];
    int64_t ids[2 * N];
    pfr_kv labels[2][2] = {{{"host.name", "h1"}, {"container.id", "c0"}},
                           {{"container.id", "c1"}, {"host.name", "h1"}}};
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 2; k++) {
            int64_t start = T0 + i * 10 * SEC;
            pfr_profile *p = pfr_testgen_next(g[k], start, 10 * SEC);
            canon[2 * i + k] = pfr_tu_canon(p);
            ids[2 * i + k] =
                append_profile(f->s, pfr_testgen_service(g[k]), labels[k], 2, start, p);
            pfr_profile_free(p);
        }
    }
    pfr_scan_stats st;
    struct seen *s = scan_all(f->s, NULL, 0, &st);
    assert_int_equal(s->n, 2 * N);
    assert_int_equal(st.corrupt, 0);
    assert_int_equal(st.last_id, ids[2 * N - 1]);
    for (int i = 0; i < 2 * N; i++) {
        assert_int_equal(s->ids[i], ids[i]);
        if (strcmp(s->canon[i], canon[i]) != 0) {
            fprintf(stderr, "chunk %d differs\n", i);
            fail();
        }
    }
    seen_free(s);
    free(s);

    /* The same from a read-only handle of another connection. */
    pfr_store *r = open_ro(f->db);
    s = scan_all(r, NULL, 0, &st);
    assert_int_equal(s->n, 2 * N);
    for (int i = 0; i < 2 * N; i++)
        assert_string_equal(s->canon[i], canon[i]);
    seen_free(s);
    free(s);
    pfr_chunk_in in = {"x", NULL, 0, 1, 2, NULL};
    assert_int_equal(pfr_store_append(r, &in, NULL), -EROFS);
    pfr_store_close(r);

    /* Dictionary chains: one base per stream, layers for the drift, no row without chunks. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT (SELECT count(*) FROM dicts WHERE id = base_id),"
                                        " (SELECT count(*) FROM dicts),"
                                        " (SELECT count(*) FROM dicts WHERE base_id NOT IN"
                                        "  (SELECT base_id FROM chunks))",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 2);
    assert_true(sqlite3_column_int(q, 1) > N);
    assert_int_equal(sqlite3_column_int(q, 2), 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    for (int i = 0; i < 2 * N; i++)
        free(canon[i]);
    pfr_testgen_free(g[0]);
    pfr_testgen_free(g[1]);
}

/* Bases in the ring (dictionaries written whole). */
static int count_bases(const char *path)
{
    return (int)pfr_tu_sql_int(path, "SELECT count(*) FROM dicts WHERE id = base_id");
}

/* The writer gives its streams' tables back (a daemon near its memory budget): every chunk
 * still reads back as appended, the dropped streams write new bases. */
static void test_trim_keeps_data(void **state)
{
    struct fx *f = *state;
    pfr_testgen *g[2] = {pfr_testgen_new(11, 0, NULL), pfr_testgen_new(11, 1, NULL)};
    enum { N = 30 };
    char *canon[2 * N];
    pfr_store_mem_stats m;
    uint64_t dropped = 0;
    int trims = 0;
    for (int i = 0; i < N; i++) {
        bool after_trim = i % 7 == 4;
        for (int k = 0; k < 2; k++) {
            int64_t start = T0 + i * 10 * SEC;
            pfr_profile *p = pfr_testgen_next(g[k], start, 10 * SEC);
            canon[2 * i + k] = pfr_tu_canon(p);
            append_profile(f->s, pfr_testgen_service(g[k]), NULL, 0, start, p);
            pfr_profile_free(p);
        }
        pfr_store_mem_stats_get(f->s, &m);
        assert_int_equal(m.table_streams, 2);
        assert_true(m.table_bytes > 0);
        /* the chains adopted were taken out of the chunk decoder's cache: one copy of them */
        if (after_trim)
            assert_int_equal(m.chain_cache_bytes, 0);
        if (i % 7 == 3) {
            pfr_store_trim(f->s, 0);
            trims++;
            pfr_store_mem_stats_get(f->s, &m);
            assert_int_equal(m.table_streams, 0);
            assert_int_equal(m.table_bytes, 0);
            assert_int_equal(m.tables_dropped, dropped + 2);
            dropped = m.tables_dropped;
        }
    }
    pfr_scan_stats st;
    struct seen *s = scan_all(f->s, NULL, 0, &st);
    assert_int_equal(s->n, 2 * N);
    assert_int_equal(st.corrupt, 0);
    for (int i = 0; i < 2 * N; i++)
        assert_string_equal(s->canon[i], canon[i]);
    seen_free(s);
    free(s);
    char err[256];
    assert_int_equal(pfr_store_check(f->s, NULL, err, sizeof(err)), 0);
    /* one base per stream: after a trim the stream takes its chain back from the ring rather
     * than writing a new base (wstream_adopt) */
    assert_true(trims > 0);
    assert_int_equal(count_bases(f->db), 2);
    for (int i = 0; i < 2 * N; i++)
        free(canon[i]);
    pfr_testgen_free(g[0]);
    pfr_testgen_free(g[1]);
}

/* The recorder's trim near its memory budget (pfr_store_trim_idle): a stream appended once (a
 * program gone) gives its tables back; the streams appending in turn keep theirs, since they
 * would read them back from the ring at their next chunk. */
static void test_trim_idle_keeps_expected(void **state)
{
    struct fx *f = *state;
    pfr_testgen *g[3] = {pfr_testgen_new(12, 0, NULL), pfr_testgen_new(12, 1, NULL),
                         pfr_testgen_new(12, 2, NULL)};
    pfr_store_mem_stats m;
    for (int i = 0; i < 6; i++) {
        for (int k = 0; k < 3; k++) {
            if (k == 2 && i > 0)
                continue; /* the third program ran once */
            int64_t start = T0 + i * 10 * SEC;
            pfr_profile *p = pfr_testgen_next(g[k], start, 10 * SEC);
            append_profile(f->s, pfr_testgen_service(g[k]), NULL, 0, start, p);
            pfr_profile_free(p);
        }
    }
    pfr_store_mem_stats_get(f->s, &m);
    assert_int_equal(m.table_streams, 3);
    uint64_t dropped = m.tables_dropped;
    pfr_store_trim_idle(f->s, 0);
    pfr_store_mem_stats_get(f->s, &m);
    assert_int_equal(m.table_streams, 2);
    assert_int_equal(m.tables_dropped, dropped + 1);
    assert_true(m.table_bytes > 0);
    pfr_store_trim_idle(f->s, 0); /* nothing more to give back */
    pfr_store_mem_stats_get(f->s, &m);
    assert_int_equal(m.table_streams, 2);
    pfr_store_trim(f->s, 0); /* everything */
    pfr_store_mem_stats_get(f->s, &m);
    assert_int_equal(m.table_streams, 0);
    for (int k = 0; k < 3; k++)
        pfr_testgen_free(g[k]);
}

/* Streams that append in turn every interval, whose tables together outgrow the writer's bound
 * (table_max_bytes): the writer keeps as many of them as fit and gives up the ones needed last,
 * not the least recently appended (which are needed next: every chunk would write a base). */
static void test_tables_bound_streams_in_turn(void **state)
{
    struct fx *f = *state;
    enum { NS = 8, ROUNDS = 6 };
    pfr_testgen_opts go = {.nstacks = 80};
    pfr_testgen *g[NS];
    for (int k = 0; k < NS; k++)
        g[k] = pfr_testgen_new(21, k, &go);
    /* The first round into the fixture's store measures one round's tables. */
    for (int k = 0; k < NS; k++) {
        pfr_profile *p = pfr_testgen_next(g[k], T0, 10 * SEC);
        append_profile(f->s, pfr_testgen_service(g[k]), NULL, 0, T0, p);
        pfr_profile_free(p);
    }
    pfr_store_mem_stats m;
    pfr_store_mem_stats_get(f->s, &m);
    assert_int_equal(m.table_streams, NS);

    /* A second ring whose bound holds five of the eight streams' tables. */
    char *db = pfr_tu_path(f->dir, "bound.db");
    char err[256];
    pfr_store_opts o = {.max_bytes = 64ull << 20, .table_max_bytes = m.table_bytes * 5 / NS};
    pfr_store *s;
    assert_int_equal(pfr_store_open(db, &o, &s, err, sizeof(err)), 0);
    char *canon[NS * ROUNDS];
    int bases_before = 0;
    for (int i = 0; i < ROUNDS; i++) {
        /* The first rounds teach the writer the streams' turns: count the bases after them. */
        if (i == ROUNDS - 3)
            bases_before = count_bases(db);
        for (int k = 0; k < NS; k++) {
            int64_t start = T0 + (i + 1) * 10 * SEC;
            pfr_profile *p = pfr_testgen_next(g[k], start, 10 * SEC);
            canon[i * NS + k] = pfr_tu_canon(p);
            append_profile(s, pfr_testgen_service(g[k]), NULL, 0, start, p);
            pfr_profile_free(p);
        }
    }
    pfr_store_mem_stats_get(s, &m);
    assert_true(m.table_bytes <= o.table_max_bytes + o.table_max_bytes / 2);
    assert_true(m.table_streams >= 3);
    pfr_scan_stats st;
    struct seen *seen = scan_all(s, NULL, 0, &st);
    assert_int_equal(seen->n, NS * ROUNDS);
    assert_int_equal(st.corrupt, 0);
    for (int i = 0; i < NS * ROUNDS; i++) {
        assert_string_equal(seen->canon[i], canon[i]);
        free(canon[i]);
    }
    seen_free(seen);
    free(seen);
    pfr_store_close(s);
    /* In the last three rounds only the streams that did not fit write bases: at most 4 of 8 a
     * round (dropping the least recently appended wrote all 8 every round). */
    int bases = count_bases(db) - bases_before;
    print_message("bases: %d in the last 3 rounds of %d streams in turn\n", bases, NS);
    assert_true(bases <= 3 * (NS / 2));
    free(db);
    for (int k = 0; k < NS; k++)
        pfr_testgen_free(g[k]);
}

static void sql(const char *db, const char *q);

/* Scans what a filter selects and compares each chunk with canon (in id order). */
static void reads_back(pfr_store *s, const pfr_store_filter *f, char **canon, size_t n)
{
    pfr_scan_stats st;
    struct seen *seen = scan_all(s, f, 0, &st);
    assert_int_equal(seen->n, n);
    assert_int_equal(st.corrupt, 0);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(seen->canon[i], canon[i]);
    seen_free(seen);
    free(seen);
}

/* A drifting service's chain rotates at the coarsest tier's hour; its new base (~100 KB) is
 * written in a transaction of its own before its chunk's, so no transaction's WAL passes the
 * WAL's budget (cap/16) and the spare file, as large as the largest, stays at it (written with
 * its chunk, the base made a transaction of 46 pages against 41: bench_horizon svc200 --scale
 * 200). The chunks after the rotations read back as appended; the ring checks clean. */
static void test_base_apart(void **state)
{
    struct fx *f = *state;
    pfr_store_close(f->s);
    uint64_t cap = 2000000; /* a WAL budget of 30 pages: the base alone takes ~26 */
    pfr_store_opts o = {.max_bytes = cap, .reserve = {.mode = PFR_STORE_RESERVE_OFF}};
    char err[256];
    assert_int_equal(pfr_store_open(f->db, &o, &f->s, err, sizeof(err)), 0);
    enum { N = 900, KEEP = 6 }; /* 2.5 hours from 13:20 past one: two rotations */
    pfr_testgen_opts go = {.nstacks = 200};
    pfr_testgen *g = pfr_testgen_new(1, 0, &go);
    char *canon[KEEP];
    for (int i = 0; i < N; i++) {
        int64_t start = T0 + i * 10 * SEC;
        pfr_profile *p = pfr_testgen_next(g, start, 10 * SEC);
        if (i >= N - KEEP)
            canon[i - (N - KEEP)] = pfr_tu_canon(p);
        append_profile(f->s, pfr_testgen_service(g), NULL, 0, start, p);
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    assert_true(count_bases(f->db) >= 3);
    char *spare = pfr_tu_path(f->dir, "ring.db-spare");
    struct stat st;
    assert_int_equal(stat(spare, &st), 0);
    print_message("spare %lld of %llu\n", (long long)st.st_size, (unsigned long long)(cap / 16));
    assert_true((uint64_t)st.st_size <= cap / 16);
    free(spare);
    pfr_store_filter last = {.from_ns = T0 + (N - KEEP) * 10 * SEC, .to_ns = T0 + N * 10 * SEC};
    reads_back(f->s, &last, canon, KEEP);
    pfr_store *r = open_ro(f->db);
    reads_back(r, &last, canon, KEEP);
    assert_int_equal(pfr_store_check(r, NULL, err, sizeof(err)), 0);
    pfr_store_close(r);
    for (int i = 0; i < KEEP; i++)
        free(canon[i]);
}

/* Streams of one service and sample types that differ in profile labels (the short-lived
 * containers of one program) share a dictionary chain: one base for the service however many
 * streams, taken back by a new writer too; every chunk reads back as appended, through the
 * ring, a reader and a slice of one stream (whose chain holds layers of the others). Another
 * service, or other sample types, has a chain of its own. */
static void test_shared_chain(void **state)
{
    struct fx *f = *state;
    enum { RUNS = 4, EACH = 3 };
    /* a short program of bench_horizon churn */
    pfr_testgen_opts go = {.nstacks = 40, .nfunctions = 400};
    pfr_testgen *other = pfr_testgen_new(31, 9, &go);
    char *canon[RUNS * EACH], *canon_b[EACH];
    pfr_kv lab[RUNS][1];
    char cid[RUNS][16];
    size_t nb = 0;
    for (int r = 0; r < RUNS; r++) {
        /* each run of the program starts its stacks anew, a stream of its own */
        pfr_testgen *g = pfr_testgen_new(31, 3, &go);
        snprintf(cid[r], sizeof(cid[r]), "/run/%d", r);
        lab[r][0] = (pfr_kv){"container.id", cid[r]};
        if (r == RUNS - 1) { /* the last run by a new writer: it takes the chain back */
            pfr_store_close(f->s);
            char err[256];
            pfr_store_opts o = {.max_bytes = 64ull << 20};
            assert_int_equal(pfr_store_open(f->db, &o, &f->s, err, sizeof(err)), 0);
        }
        for (int i = 0; i < EACH; i++) {
            int64_t start = T0 + (r * EACH + i) * 10 * SEC;
            pfr_profile *p = pfr_testgen_next(g, start, 10 * SEC);
            canon[r * EACH + i] = pfr_tu_canon(p);
            if (r == 1)
                canon_b[nb++] = canon[r * EACH + i];
            append_profile(f->s, pfr_testgen_service(g), lab[r], 1, start, p);
            pfr_profile_free(p);
        }
        pfr_testgen_free(g);
        assert_int_equal(count_bases(f->db), 1);
    }
    pfr_profile *p = pfr_testgen_next(other, T0, 10 * SEC);
    append_profile(f->s, pfr_testgen_service(other), lab[0], 1, T0, p);
    pfr_profile_free(p);
    p = pfr_tu_small_profile(1, 5, "go:goroutine_goroutine:count");
    append_profile(f->s, "svc-3", lab[0], 1, T0, p);
    pfr_profile_free(p);
    assert_int_equal(count_bases(f->db), 3);
    /* the later runs' chunks name layers the first run wrote (they added nothing new) */
    assert_int_equal(pfr_tu_sql_int(f->db,
                                    "SELECT count(*) FROM chunks c JOIN dicts d ON d.id = c.dict_id"
                                    " WHERE d.stream_id != c.stream_id"),
                     (RUNS - 1) * EACH);

    pfr_store_filter svc3 = {.service = "svc-3", .type = "ebpf:cpu:nanoseconds"};
    reads_back(f->s, &svc3, canon, RUNS * EACH);
    pfr_store *r = open_ro(f->db);
    reads_back(r, &svc3, canon, RUNS * EACH);
    char err[256];
    assert_int_equal(pfr_store_check(r, NULL, err, sizeof(err)), 0);
    /* one stream's slice: its chain's layers written by the other streams come along */
    char *slice = pfr_tu_path(f->dir, "b.slice");
    pfr_store_filter fb = {.service = "svc-3", .labels = lab[1], .nlabels = 1};
    pfr_slice_stats sst;
    assert_int_equal(pfr_store_slice_write(r, &fb, slice, 0, &sst, err, sizeof(err)), 0);
    assert_int_equal(sst.chunks, EACH);
    assert_int_equal(sst.corrupt, 0);
    pfr_store_close(r);
    r = open_ro(slice);
    reads_back(r, NULL, canon_b, EACH);
    assert_int_equal(pfr_store_check(r, NULL, err, sizeof(err)), 0);
    pfr_store_close(r);
    free(slice);
    for (int i = 0; i < RUNS * EACH; i++)
        free(canon[i]);
    pfr_testgen_free(other);
}

/* Unsymbolized locations, numeric labels with units, several sample types, no period. */
static void test_roundtrip_edge_profiles(void **state)
{
    struct fx *f = *state;
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "go:heap_alloc_objects:count", "count");
    pfr_profile_add_sample_type(p, "go:heap_alloc_space:bytes", "bytes");
    int64_t m = pfr_profile_add_mapping(p, 0x1000, 0x2000, 0, "/bin/x", "id");
    uint32_t locs[3];
    locs[0] = (uint32_t)pfr_profile_add_location(p, m, 0x1234, NULL, 0); /* no lines */
    pfr_line inl[2];
    inl[0].function = (uint32_t)pfr_profile_add_function(p, "inner", "inner", "a.c", 1);
    inl[0].line = 5;
    inl[1].function = (uint32_t)pfr_profile_add_function(p, "outer", "outer", "a.c", 1);
    inl[1].line = -7;
    locs[1] = (uint32_t)pfr_profile_add_location(p, -1, 0, inl, 2);
    locs[2] = (uint32_t)pfr_profile_add_frame(p, "main", "", 0);
    pfr_label l1[3] = {{"bytes", NULL, 4096, "bytes"}, {"neg", NULL, -5, NULL}, {"s", "", 0, NULL}};
    int64_t v1[2] = {3, -300};
    pfr_profile_add_sample(p, locs, 3, v1, l1, 3);
    int64_t v2[2] = {INT64_MAX, INT64_MIN};
    pfr_profile_add_sample(p, locs + 1, 2, v2, NULL, 0);
    int64_t v3[2] = {0, 0};
    pfr_profile_add_sample(p, NULL, 0, v3, NULL, 0);
    append_profile(f->s, "svc", NULL, 0, T0, p);
    struct seen *s = scan_all(f->s, NULL, 0, NULL);
    assert_int_equal(s->n, 1);
    char *want = pfr_tu_canon(p);
    assert_string_equal(s->canon[0], want);
    free(want);
    seen_free(s);
    free(s);
    pfr_profile_free(p);

    /* An empty profile (no samples) is a valid chunk. */
    p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "ebpf:cpu:nanoseconds", "nanoseconds");
    append_profile(f->s, "svc", NULL, 0, T0 + 10 * SEC, p);
    pfr_profile_free(p);
    s = scan_all(f->s, NULL, 0, NULL);
    assert_int_equal(s->n, 2);
    seen_free(s);
    free(s);
}

static void test_bad_input(void **state)
{
    struct fx *f = *state;
    pfr_profile *p = pfr_tu_small_profile(0, 5, "ebpf:cpu:nanoseconds");
    pfr_chunk_in in = {"svc", NULL, 0, T0, T0, p}; /* empty interval */
    assert_int_equal(pfr_store_append(f->s, &in, NULL), -EINVAL);
    in.end_ns = T0 + 1;
    in.service = "";
    assert_int_equal(pfr_store_append(f->s, &in, NULL), -EINVAL);
    in.service = "svc";
    pfr_kv bad = {"", "x"};
    in.labels = &bad;
    in.nlabels = 1;
    assert_int_equal(pfr_store_append(f->s, &in, NULL), -EINVAL);
    /* A batch with one bad chunk appends nothing. */
    pfr_chunk_in batch[2] = {{"svc", NULL, 0, T0, T0 + SEC, p}, {"svc", NULL, 0, T0, T0, p}};
    int64_t ids[2];
    assert_int_equal(pfr_store_append_batch(f->s, batch, 2, ids), -EINVAL);
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(f->s, &st), 0);
    assert_int_equal(st.chunks, 0);
    batch[1].end_ns = T0 + SEC;
    assert_int_equal(pfr_store_append_batch(f->s, batch, 2, ids), 0);
    assert_true(ids[1] == ids[0] + 1);
    pfr_profile_free(p);

    char err[256];
    pfr_store *r = NULL;
    pfr_store_opts ro = {.read_only = true};
    char *missing = pfr_tu_path(f->dir, "nope.db");
    assert_int_equal(pfr_store_open(missing, &ro, &r, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "no store"));
    free(missing);
    /* A file that is not a database. */
    char *junk = pfr_tu_path(f->dir, "junk.db");
    FILE *j = fopen(junk, "w");
    for (int i = 0; i < 3000; i++)
        fputs("not a database at all ", j);
    fclose(j);
    assert_int_equal(pfr_store_open(junk, NULL, &r, err, sizeof(err)), -EBADMSG);
    assert_int_equal(pfr_store_open(junk, &ro, &r, err, sizeof(err)), -EBADMSG);
    assert_true(strlen(err) > 0);
    free(junk);
    /* Another program's SQLite database. */
    char *other = pfr_tu_path(f->dir, "other.db");
    sqlite3 *db;
    sqlite3_open(other, &db);
    sqlite3_exec(db, "CREATE TABLE t(x)", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_int_equal(pfr_store_open(other, NULL, &r, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "not a pfr store"));
    free(other);
    pfr_store_opts tiny = {.max_bytes = 1000};
    char *t = pfr_tu_path(f->dir, "tiny.db");
    assert_int_equal(pfr_store_open(t, &tiny, &r, err, sizeof(err)), -EINVAL);
    free(t);
}

/* ---- filters ---- */
static void fill_small(pfr_store *s)
{
    /* svc-a: types cpu, labels host=h1; svc-b: host=h2; svc-a other type on host h1. One
     * transaction (the single-append path is exercised elsewhere). */
    static pfr_kv h1 = {"host.name", "h1"}, h2 = {"host.name", "h2"};
    pfr_chunk_in in[50];
    pfr_profile *ps[50];
    size_t n = 0;
    for (int i = 0; i < 20; i++) {
        int64_t start = T0 + i * 10 * SEC;
        ps[n] = pfr_tu_small_profile((unsigned)i, 12, "ebpf:cpu:nanoseconds");
        in[n] = (pfr_chunk_in){"svc-a", &h1, 1, start, start + 10 * SEC, ps[n]};
        n++;
        ps[n] = pfr_tu_small_profile((unsigned)i + 100, 9, "ebpf:cpu:nanoseconds");
        in[n] = (pfr_chunk_in){"svc-b", &h2, 1, start, start + 10 * SEC, ps[n]};
        n++;
        if (i % 2 == 0) {
            ps[n] = pfr_tu_small_profile((unsigned)i, 4, "go:goroutine_goroutine:count");
            in[n] = (pfr_chunk_in){"svc-a", &h1, 1, start, start + 10 * SEC, ps[n]};
            n++;
        }
    }
    int64_t ids[50];
    assert_int_equal(pfr_store_append_batch(s, in, n, ids), 0);
    for (size_t i = 0; i < n; i++) {
        assert_true(i == 0 || ids[i] == ids[i - 1] + 1);
        pfr_profile_free(ps[i]);
    }
}

static size_t count(pfr_store *s, const pfr_store_filter *f)
{
    struct seen *x = scan_all(s, f, PFR_SCAN_META_ONLY, NULL);
    size_t n = x->n;
    free(x);
    return n;
}

static void test_filters(void **state)
{
    struct fx *f = *state;
    fill_small(f->s);
    assert_int_equal(count(f->s, NULL), 50);
    pfr_store_filter flt = {.service = "svc-a"};
    assert_int_equal(count(f->s, &flt), 30);
    flt.type = "ebpf:cpu:nanoseconds";
    assert_int_equal(count(f->s, &flt), 20);
    flt = (pfr_store_filter){.type = "go:goroutine_goroutine:count"};
    assert_int_equal(count(f->s, &flt), 10);
    pfr_kv h2 = {"host.name", "h2"}, nope = {"host.name", "h3"};
    flt = (pfr_store_filter){.labels = &h2, .nlabels = 1};
    assert_int_equal(count(f->s, &flt), 20);
    flt.labels = &nope;
    assert_int_equal(count(f->s, &flt), 0);
    flt = (pfr_store_filter){.service = "none"};
    assert_int_equal(count(f->s, &flt), 0);
    /* Time: chunks overlapping [T0 + 25 s, T0 + 50 s) are those starting at 20, 30, 40 s. */
    flt = (pfr_store_filter){.from_ns = T0 + 25 * SEC, .to_ns = T0 + 50 * SEC, .service = "svc-b"};
    assert_int_equal(count(f->s, &flt), 3);
    flt.service = NULL;
    assert_int_equal(count(f->s, &flt), 3 + 3 + 2);
    /* Boundaries: [start, end) overlaps [from, to) only if end > from and start < to. */
    flt = (pfr_store_filter){.from_ns = T0 + 10 * SEC, .to_ns = T0 + 20 * SEC, .service = "svc-b"};
    assert_int_equal(count(f->s, &flt), 1);
    /* ids, limit */
    struct seen *all = scan_all(f->s, NULL, PFR_SCAN_META_ONLY, NULL);
    flt = (pfr_store_filter){.after_id = all->ids[9], .max_id = all->ids[19]};
    assert_int_equal(count(f->s, &flt), 10);
    flt.limit = 4;
    pfr_scan_stats st;
    struct seen *x = scan_all(f->s, &flt, PFR_SCAN_META_ONLY, &st);
    assert_int_equal(x->n, 4);
    assert_int_equal(x->ids[0], all->ids[10]);
    assert_int_equal(st.last_id, all->ids[13]);
    free(x);
    /* limit with a narrowing filter (the per-stream index path) */
    flt = (pfr_store_filter){.service = "svc-b", .limit = 5, .after_id = all->ids[3]};
    x = scan_all(f->s, &flt, PFR_SCAN_META_ONLY, NULL);
    assert_int_equal(x->n, 5);
    for (size_t i = 0; i < x->n; i++) {
        assert_string_equal(x->service[i], "svc-b");
        assert_true(x->ids[i] > all->ids[3]);
    }
    free(x);
    free(all);

    /* Sample labels: only comm=app1 samples, totals still of the whole chunk. */
    pfr_kv comm = {"comm", "app1"};
    flt = (pfr_store_filter){.service = "svc-b", .sample_labels = &comm, .nsample_labels = 1};
    x = scan_all(f->s, &flt, 0, NULL);
    assert_int_equal(x->n, 20);
    for (size_t i = 0; i < x->n; i++) {
        assert_null(strstr(x->canon[i], "comm=s:app0"));
        assert_null(strstr(x->canon[i], "comm=s:app2"));
        assert_non_null(strstr(x->canon[i], "comm=s:app1"));
    }
    seen_free(x);
    free(x);
    pfr_kv pid = {"pid", "102"};
    flt.sample_labels = &pid;
    x = scan_all(f->s, &flt, 0, NULL);
    assert_int_equal(x->n, 20);
    for (size_t i = 0; i < x->n; i++) {
        assert_null(strstr(x->canon[i], "pid=n:100"));
        assert_non_null(strstr(x->canon[i], "pid=n:102"));
    }
    seen_free(x);
    free(x);
}

/* Totals in metadata equal the decoded values' sums. */
static void test_meta_totals(void **state)
{
    struct fx *f = *state;
    fill_small(f->s);
    struct seen *m = scan_all(f->s, NULL, PFR_SCAN_META_ONLY, NULL);
    struct seen *d = scan_all(f->s, NULL, 0, NULL);
    assert_int_equal(m->n, d->n);
    for (size_t i = 0; i < m->n; i++) {
        assert_int_equal(m->ids[i], d->ids[i]);
        assert_int_equal(m->totals[i], d->totals[i]);
        assert_true(m->totals[i] > 0);
    }
    seen_free(d);
    free(m);
    free(d);
}

static int stop_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)m;
    (void)p;
    return ++*(int *)ctx == 3 ? 42 : 0;
}

static void test_scan_stop(void **state)
{
    struct fx *f = *state;
    fill_small(f->s);
    int n = 0;
    assert_int_equal(pfr_store_scan(f->s, NULL, 0, stop_cb, &n, NULL), 42);
    assert_int_equal(n, 3);
}

/* ---- merge ---- */
struct merge_ref {
    pfr_profile *m;
    unsigned flags;
};

static int merge_cb(const pfr_chunk_meta *meta, const pfr_profile *p, void *ctx)
{
    (void)meta;
    struct merge_ref *r = ctx;
    assert_int_equal(pfr_profile_merge(r->m, p, r->flags), 0);
    return 0;
}

static void check_merge(pfr_store *s, const pfr_store_filter *f, unsigned flags)
{
    struct merge_ref ref = {pfr_profile_new(), flags};
    assert_int_equal(pfr_store_scan(s, f, 0, merge_cb, &ref, NULL), 0);
    pfr_profile *got = NULL;
    pfr_scan_stats st;
    assert_int_equal(pfr_store_merge(s, f, flags, &got, &st), 0);
    assert_int_equal(st.corrupt, 0);
    char why[512];
    if (!pfr_tu_profiles_equal(got, ref.m, why, sizeof(why))) {
        fprintf(stderr, "merge differs: %s\n", why);
        fail();
    }
    pfr_profile_free(got);
    pfr_profile_free(ref.m);
}

struct digests {
    const uint64_t *want;
    size_t n;
};

static int digest_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)m;
    struct digests *d = ctx;
    assert_true(pfr_tu_digest(p) == d->want[d->n]);
    d->n++;
    return 0;
}

static void test_merge_equals_profile_merge(void **state)
{
    struct fx *f = *state;
    pfr_testgen *g = pfr_testgen_new(3, 0, NULL);
    for (int i = 0; i < 60; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + i * 10 * SEC, 10 * SEC);
        append_profile(f->s, pfr_testgen_service(g), NULL, 0, T0 + i * 10 * SEC, p);
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    /* A long stream: more than one dictionary chain (a new base every 360 chunks). */
    pfr_testgen_opts small = {.nstacks = 20, .max_depth = 20};
    g = pfr_testgen_new(4, 1, &small);
    uint64_t digests[800];
    for (int i = 0; i < 800; i += 50) {
        pfr_profile *ps[50];
        pfr_chunk_in in[50];
        for (int j = 0; j < 50; j++) {
            int64_t start = T0 + (i + j) * 10 * SEC;
            ps[j] = pfr_testgen_next(g, start, 10 * SEC);
            digests[i + j] = pfr_tu_digest(ps[j]);
            in[j] = (pfr_chunk_in){"svc-1", NULL, 0, start, start + 10 * SEC, ps[j]};
        }
        assert_int_equal(pfr_store_append_batch(f->s, in, 50, NULL), 0);
        for (int j = 0; j < 50; j++)
            pfr_profile_free(ps[j]);
    }
    pfr_testgen_free(g);
    fill_small(f->s);
    pfr_store_filter flt = {.service = "svc-1"};
    check_merge(f->s, &flt, 0);
    struct digests dg = {digests, 0};
    assert_int_equal(pfr_store_scan(f->s, &flt, 0, digest_cb, &dg, NULL), 0);
    assert_int_equal(dg.n, 800);
    sqlite3 *db;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM dicts WHERE id = base_id AND "
                                        "stream_id = (SELECT id FROM streams WHERE service = "
                                        "'svc-1')",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_true(sqlite3_column_int(q, 0) >= 3);
    sqlite3_finalize(q);
    sqlite3_close(db);
    flt.service = "svc-0";
    check_merge(f->s, &flt, 0);
    check_merge(f->s, &flt, PFR_MERGE_DROP_LABELS);
    flt.from_ns = T0 + 100 * SEC;
    flt.to_ns = T0 + 300 * SEC;
    check_merge(f->s, &flt, 0);
    pfr_kv comm = {"comm", "app1"};
    flt = (pfr_store_filter){.service = "svc-b", .sample_labels = &comm, .nsample_labels = 1};
    check_merge(f->s, &flt, 0);
    check_merge(f->s, &flt, PFR_MERGE_DROP_LABELS);
    flt = (pfr_store_filter){.type = "ebpf:cpu:nanoseconds"};
    check_merge(f->s, &flt, PFR_MERGE_DROP_LABELS);

    /* Mixed sample types: an error without a type, the type's values with one. */
    pfr_profile *out = NULL;
    flt = (pfr_store_filter){.service = "svc-a"};
    assert_int_equal(pfr_store_merge(f->s, &flt, 0, &out, NULL), -EINVAL);
    flt.type = "go:goroutine_goroutine:count";
    assert_int_equal(pfr_store_merge(f->s, &flt, 0, &out, NULL), 0);
    assert_int_equal(pfr_profile_num_sample_types(out), 1);
    pfr_profile_free(out);
    flt = (pfr_store_filter){.service = "nobody"};
    assert_int_equal(pfr_store_merge(f->s, &flt, 0, &out, NULL), -ENOENT);
    assert_null(out);
}

/* ---- streams, stats, cursors ---- */
static int stream_cb(const pfr_stream_info *i, void *ctx)
{
    int *n = ctx;
    (*n)++;
    assert_true(i->chunks > 0);
    assert_true(i->first_ns < i->last_ns);
    assert_true(i->ntypes == 1);
    if (strcmp(i->service, "svc-b") == 0) {
        assert_int_equal(i->chunks, 20);
        assert_int_equal(i->first_ns, T0);
        assert_int_equal(i->last_ns, T0 + 200 * SEC);
        assert_int_equal(i->nlabels, 1);
        assert_string_equal(i->labels[0].value, "h2");
    }
    return 0;
}

static void test_streams_stats(void **state)
{
    struct fx *f = *state;
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(f->s, &st), 0);
    assert_int_equal(st.chunks, 0);
    assert_int_equal(st.oldest_ns, 0);
    assert_int_equal(pfr_store_stats_quick(f->s, &st), 0);
    assert_int_equal(st.chunks, 0);
    assert_int_equal(st.oldest_ns, 0);
    assert_int_equal(st.max_id, 0);
    fill_small(f->s);
    int n = 0;
    assert_int_equal(pfr_store_streams(f->s, stream_cb, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(pfr_store_stats_get(f->s, &st), 0);
    assert_int_equal(st.chunks, 50);
    assert_int_equal(st.appended, 50);
    assert_int_equal(st.min_id, 1);
    assert_int_equal(st.max_id, 50);
    assert_int_equal(st.oldest_ns, T0);
    assert_int_equal(st.newest_ns, T0 + 200 * SEC);
    assert_int_equal(st.evicted, 0);
    assert_true(st.data_bytes > 0);
    assert_true(st.file_bytes >= st.data_bytes);
    assert_int_equal(st.max_bytes, 64ull << 20);
    uint64_t bad = 99;
    char err[256];
    assert_int_equal(pfr_store_check(f->s, &bad, err, sizeof(err)), 0);
    assert_int_equal(bad, 0);
}

static void test_cursors(void **state)
{
    struct fx *f = *state;
    int64_t id = -1;
    assert_int_equal(pfr_store_cursor_get(f->s, "shipper.coroot", &id), 0);
    assert_int_equal(id, 0);
    assert_int_equal(pfr_store_cursor_set(f->s, "shipper.coroot", 42), 0);
    assert_int_equal(pfr_store_cursor_set(f->s, "shipper.coroot", 43), 0);
    pfr_store *r = open_ro(f->db);
    assert_int_equal(pfr_store_cursor_get(r, "shipper.coroot", &id), 0);
    assert_int_equal(id, 43);
    assert_int_equal(pfr_store_cursor_set(r, "query_tool-1", 7), 0); /* read-only handles too */
    assert_int_equal(pfr_store_cursor_get(f->s, "query_tool-1", &id), 0);
    assert_int_equal(id, 7);
    assert_int_equal(pfr_store_cursor_remove(r, "query_tool-1"), 0);
    assert_int_equal(pfr_store_cursor_get(f->s, "query_tool-1", &id), 0);
    assert_int_equal(id, 0);
    assert_int_equal(pfr_store_cursor_remove(r, "query_tool-1"), 0);
    pfr_store_close(r);
    const char *bad[] = {"", "../x", "a/b", ".hidden", "sp ace", "x\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(pfr_store_cursor_set(f->s, bad[i], 1), -EINVAL);
        assert_int_equal(pfr_store_cursor_get(f->s, bad[i], &id), -EINVAL);
    }
    assert_int_equal(pfr_store_cursor_set(f->s, "neg", -1), -EINVAL);
    /* A corrupt cursor file reads as an error, not as a value. */
    char *path = pfr_tu_path(f->dir, "ring.db-cursors/junk");
    FILE *j = fopen(path, "w");
    fputs("12abc", j);
    fclose(j);
    assert_int_equal(pfr_store_cursor_get(f->s, "junk", &id), -EBADMSG);
    free(path);
}

/* ---- eviction ---- */
static void test_eviction_and_lost(void **state)
{
    struct fx *f = *state;
    char *db = pfr_tu_path(f->dir, "small.db");
    pfr_store *s = NULL;
    char err[256];
    /* Age-only eviction (tiers off): ids go in order. Roll-ups: test_store_retention. */
    pfr_store_opts o = {.max_bytes = 384u << 10, .tiers = {.off = true}};
    assert_int_equal(pfr_store_open(db, &o, &s, err, sizeof(err)), 0);
    pfr_testgen_opts go = {.nstacks = 60};
    pfr_testgen *g = pfr_testgen_new(11, 0, &go);
    int64_t cursor = 0, last = 0;
    enum { TOTAL = 1500, B = 10 };
    for (int i = 0; i < TOTAL; i += B) {
        pfr_profile *ps[B];
        pfr_chunk_in in[B];
        int64_t ids[B];
        for (int j = 0; j < B; j++) {
            int64_t start = T0 + (i + j) * 10 * SEC;
            ps[j] = pfr_testgen_next(g, start, 10 * SEC);
            in[j] = (pfr_chunk_in){"svc", NULL, 0, start, start + 10 * SEC, ps[j]};
        }
        assert_int_equal(pfr_store_append_batch(s, in, B, ids), 0);
        for (int j = 0; j < B; j++)
            pfr_profile_free(ps[j]);
        last = ids[B - 1];
        if (i == 50) {
            cursor = last;
            assert_int_equal(pfr_store_cursor_set(s, "shipper", cursor), 0);
        }
        /* The database and its WAL stay within the cap (plus a chunk and SQLite's pages). */
        char wal[512];
        snprintf(wal, sizeof(wal), "%s-wal", db);
        if (pfr_tu_file_size(db) + pfr_tu_file_size(wal) > (384u << 10) + (32u << 10))
            fprintf(stderr, "at %d: db %llu wal %llu\n", i,
                    (unsigned long long)pfr_tu_file_size(db),
                    (unsigned long long)pfr_tu_file_size(wal));
        assert_true(pfr_tu_file_size(db) + pfr_tu_file_size(wal) <= (384u << 10) + (32u << 10));
    }
    pfr_testgen_free(g);
    pfr_store_stats st, quick;
    assert_int_equal(pfr_store_stats_get(s, &st), 0);
    assert_true(st.evicted > 0);
    assert_int_equal(st.chunks + st.evicted, TOTAL);
    /* the quick statistics agree on a ring appended in time order */
    assert_int_equal(pfr_store_stats_quick(s, &quick), 0);
    assert_int_equal(quick.chunks, st.chunks);
    assert_int_equal(quick.oldest_ns, st.oldest_ns);
    assert_int_equal(quick.newest_ns, st.newest_ns);
    assert_int_equal(quick.min_id, st.min_id);
    assert_int_equal(quick.max_id, st.max_id);
    assert_int_equal(quick.appended, st.appended);
    assert_int_equal(quick.evicted, st.evicted);
    assert_int_equal(quick.lost_unshipped, st.lost_unshipped);
    assert_int_equal(quick.data_bytes, 0);
    assert_int_equal(st.appended, TOTAL);
    assert_int_equal(st.max_id, last);
    assert_int_equal(st.min_id, (int64_t)st.evicted + 1);
    /* Evicted ids are 1..evicted; those above the cursor were never taken. */
    int64_t want_lost = (int64_t)st.evicted > cursor ? (int64_t)st.evicted - cursor : 0;
    assert_int_equal(st.lost_unshipped, want_lost);
    /* Whatever is left reads back, and no dictionary or stream is orphaned. */
    pfr_scan_stats ss;
    struct seen *x = scan_all(s, NULL, 0, &ss);
    assert_int_equal(x->n, st.chunks);
    assert_int_equal(ss.corrupt, 0);
    seen_free(x);
    free(x);
    sqlite3 *raw;
    sqlite3_open(db, &raw);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(raw,
                       "SELECT (SELECT count(*) FROM dicts WHERE base_id NOT IN (SELECT base_id "
                       "FROM chunks)), (SELECT count(*) FROM chunk_data WHERE id NOT IN (SELECT id "
                       "FROM chunks))",
                       -1, &q, NULL);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 0);
    assert_int_equal(sqlite3_column_int(q, 1), 0);
    sqlite3_finalize(q);
    sqlite3_close(raw);
    assert_int_equal(pfr_store_check(s, NULL, err, sizeof(err)), 0);
    /* A chunk larger than the whole cap is refused, and the ring is untouched. */
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "ebpf:cpu:nanoseconds", "nanoseconds");
    uint64_t rx = 88172645463325252ull;
    for (int i = 0; i < 100000; i++) {
        char name[64];
        rx ^= rx << 13;
        rx ^= rx >> 7;
        rx ^= rx << 17;
        snprintf(name, sizeof(name), "f%016llx%016llx", (unsigned long long)rx,
                 (unsigned long long)(rx * 31));
        uint32_t loc = (uint32_t)pfr_profile_add_frame(p, name, "", 0);
        int64_t v = 1;
        pfr_profile_add_sample(p, &loc, 1, &v, NULL, 0);
    }
    pfr_chunk_in in = {"huge", NULL, 0, T0, T0 + SEC, p};
    assert_int_equal(pfr_store_append(s, &in, NULL), -EFBIG);
    pfr_store_stats st2;
    assert_int_equal(pfr_store_stats_get(s, &st2), 0);
    assert_int_equal(st2.chunks, st.chunks);
    pfr_profile_free(p);
    pfr_store_close(s);

    /* Reopening with a lower cap shrinks the file at the next append. */
    o.max_bytes = 256u << 10;
    assert_int_equal(pfr_store_open(db, &o, &s, err, sizeof(err)), 0);
    g = pfr_testgen_new(12, 0, &go);
    for (int i = 0; i < 5; i++) {
        p = pfr_testgen_next(g, T0, 10 * SEC);
        append_profile(s, "svc", NULL, 0, T0 + (700 + i) * 10 * SEC, p);
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    pfr_store_close(s);
    assert_true(pfr_tu_file_size(db) <= (256u << 10) + (32u << 10));
    free(db);
}

/* ---- migration ---- */

/* A ring of an older schema (a small ring, then sql over it):
 * a reader is told to migrate, a writer migrates it and it reads back the same. Leaves f->s
 * open on it. */
static void migrated_reads_back(struct fx *f, const char *sql)
{
    fill_small(f->s);
    struct seen *before = scan_all(f->s, NULL, PFR_SCAN_META_ONLY, NULL);
    pfr_store_close(f->s);
    f->s = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    char err[256];
    pfr_store *r = NULL;
    pfr_store_opts ro = {.read_only = true};
    assert_int_equal(pfr_store_open(f->db, &ro, &r, err, sizeof(err)), -EPROTO);
    assert_non_null(strstr(err, "migrate"));
    pfr_store_opts o = {.max_bytes = 64ull << 20};
    assert_int_equal(pfr_store_open(f->db, &o, &f->s, err, sizeof(err)), 0);
    struct seen *after = scan_all(f->s, NULL, PFR_SCAN_META_ONLY, NULL);
    assert_int_equal(after->n, before->n);
    for (size_t i = 0; i < after->n; i++) {
        assert_int_equal(after->ids[i], before->ids[i]);
        assert_int_equal(after->totals[i], before->totals[i]);
    }
    assert_int_equal(pfr_store_check(f->s, NULL, err, sizeof(err)), 0);
    /* the writer made the indexes the tiers' measure reads alone, and dropped the narrower */
    assert_int_equal(pfr_tu_sql_int(f->db, "SELECT count(*) FROM sqlite_master WHERE name IN"
                                           " ('chunks_tier_id', 'chunks_base_tier',"
                                           " 'dicts_base_nbytes')"),
                     3);
    assert_int_equal(pfr_tu_sql_int(f->db, "SELECT count(*) FROM sqlite_master WHERE name IN"
                                           " ('chunks_tier', 'chunks_base', 'dicts_base')"),
                     0);
    free(before);
    free(after);
}

/* A file's indexes as builds before the covering ones made them (the tier column free to drop). */
#define OLD_INDEXES                                                                                \
    "DROP INDEX chunks_tier_id; DROP INDEX chunks_base_tier; DROP INDEX dicts_base_nbytes;"        \
    " CREATE INDEX chunks_base ON chunks(base_id); CREATE INDEX dicts_base ON dicts(base_id, "     \
    "id); "

static void test_migrate_v1(void **state)
{
    struct fx *f = *state;
    /* Turn the file into a schema 1 store: no totals column (and no pins table). */
    migrated_reads_back(f,
                        OLD_INDEXES "DROP TABLE pins; DROP INDEX chunks_stream; ALTER "
                                    "TABLE chunks DROP COLUMN tier; ALTER TABLE chunks DROP COLUMN "
                                    "totals; CREATE INDEX chunks_stream ON chunks(stream_id, "
                                    "end_ns, start_ns); PRAGMA user_version = 1;");
    /* A newer schema than ours is refused. */
    pfr_store_close(f->s);
    f->s = NULL;
    sqlite3 *db;
    char err[256];
    pfr_store_opts o = {.max_bytes = 64ull << 20};
    sqlite3_open(f->db, &db);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_int_equal(pfr_store_open(f->db, &o, &f->s, err, sizeof(err)), -EPROTO);
    assert_null(f->s);
}

/* A ring of schema 2 (before pins and tiers) opens: a reader is told to migrate, a writer
 * migrates it through schema 3 (pins) to 4 (every chunk tier 0, as recorded) and it reads back
 * the same. */
static void test_migrate_v2(void **state)
{
    struct fx *f = *state;
    migrated_reads_back(f, OLD_INDEXES "DROP TABLE pins; ALTER TABLE chunks"
                                       " DROP COLUMN tier; PRAGMA user_version = 2;");
}

/* A ring of schema 4 (chains of one stream each) is read as it is, and a writer migrates it to
 * 5; it reads back the same, and its streams' chains are shared from then on. */
static void test_migrate_v4(void **state)
{
    struct fx *f = *state;
    fill_small(f->s);
    struct seen *before = scan_all(f->s, NULL, 0, NULL);
    pfr_store_close(f->s);
    f->s = NULL;
    sql(f->db, "PRAGMA user_version = 4");
    pfr_store *r = open_ro(f->db);
    struct seen *ro = scan_all(r, NULL, 0, NULL);
    pfr_store_close(r);
    char err[256];
    pfr_store_opts o = {.max_bytes = 64ull << 20};
    assert_int_equal(pfr_store_open(f->db, &o, &f->s, err, sizeof(err)), 0);
    assert_int_equal(pfr_tu_sql_int(f->db, "PRAGMA user_version"), 5);
    struct seen *after = scan_all(f->s, NULL, 0, NULL);
    assert_int_equal(ro->n, before->n);
    assert_int_equal(after->n, before->n);
    for (size_t i = 0; i < before->n; i++) {
        assert_int_equal(after->ids[i], before->ids[i]);
        assert_string_equal(ro->canon[i], before->canon[i]);
        assert_string_equal(after->canon[i], before->canon[i]);
    }
    int bases = count_bases(f->db);
    static pfr_kv h3 = {"host.name", "h3"};
    pfr_profile *p = pfr_tu_small_profile(7, 12, "ebpf:cpu:nanoseconds");
    append_profile(f->s, "svc-a", &h3, 1, T0 + 300 * SEC, p);
    pfr_profile_free(p);
    assert_int_equal(count_bases(f->db), bases);
    assert_int_equal(pfr_store_check(f->s, NULL, err, sizeof(err)), 0);
    seen_free(before);
    seen_free(ro);
    seen_free(after);
    free(before);
    free(ro);
    free(after);
}

/* ---- corrupt rows and truncated files ---- */
static void copy_file(const char *from, const char *to, off_t len)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[65536];
    size_t n;
    off_t done = 0;
    while ((len < 0 || done < len) && (n = fread(buf, 1, sizeof(buf), a)) > 0) {
        if (len >= 0 && done + (off_t)n > len)
            n = (size_t)(len - done);
        assert_int_equal(fwrite(buf, 1, n, b), n);
        done += (off_t)n;
    }
    fclose(a);
    fclose(b);
}

static void reset_db(const char *pristine, const char *db, off_t len)
{
    char p[600];
    snprintf(p, sizeof(p), "%s-wal", db);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", db);
    unlink(p);
    copy_file(pristine, db, len);
}

static void sql(const char *db, const char *q)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(h, q, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", q, msg);
        fail();
    }
    sqlite3_close(h);
}

/* Flip one byte in the middle of a blob column of a row. */
static void flip(const char *db, const char *table, const char *col, int64_t id)
{
    sqlite3 *h;
    sqlite3_blob *b;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_blob_open(h, "main", table, col, id, 1, &b), SQLITE_OK);
    int len = sqlite3_blob_bytes(b);
    uint8_t x;
    assert_int_equal(sqlite3_blob_read(b, &x, 1, len / 2), SQLITE_OK);
    x ^= 0x5a;
    assert_int_equal(sqlite3_blob_write(b, &x, 1, len / 2), SQLITE_OK);
    sqlite3_blob_close(b);
    sqlite3_close(h);
}

struct ro_result {
    size_t chunks, meta_chunks;
    uint64_t corrupt, meta_corrupt, merge_corrupt, check_bad;
    int merge_rc, check_rc;
};

static struct ro_result read_all(const char *db)
{
    struct ro_result r = {0};
    pfr_store *s = open_ro(db);
    pfr_scan_stats st;
    struct seen *x = scan_all(s, NULL, 0, &st);
    r.chunks = x->n;
    r.corrupt = st.corrupt;
    seen_free(x);
    free(x);
    x = scan_all(s, NULL, PFR_SCAN_META_ONLY, &st);
    r.meta_chunks = x->n;
    r.meta_corrupt = st.corrupt;
    free(x);
    pfr_profile *m = NULL;
    pfr_store_filter f = {.type = "ebpf:cpu:nanoseconds"};
    r.merge_rc = pfr_store_merge(s, &f, PFR_MERGE_DROP_LABELS, &m, &st);
    r.merge_corrupt = st.corrupt;
    pfr_profile_free(m);
    char err[256];
    r.check_rc = pfr_store_check(s, &r.check_bad, err, sizeof(err));
    pfr_store_stats ss;
    assert_int_equal(pfr_store_stats_get(s, &ss), 0);
    assert_int_equal(ss.corrupt, r.corrupt + r.meta_corrupt + r.merge_corrupt);
    pfr_store_close(s);
    return r;
}

static void test_corrupt_rows(void **state)
{
    struct fx *f = *state;
    pfr_testgen *g = pfr_testgen_new(5, 0, NULL);
    for (int i = 0; i < 30; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + i * 10 * SEC, 10 * SEC);
        append_profile(f->s, pfr_testgen_service(g), NULL, 0, T0 + i * 10 * SEC, p);
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    fill_small(f->s);
    pfr_store_close(f->s);
    f->s = NULL;
    char *pristine = pfr_tu_path(f->dir, "pristine.db");
    copy_file(f->db, pristine, -1);
    const size_t total = 80;
    struct ro_result r = read_all(f->db);
    assert_int_equal(r.chunks, total);
    assert_int_equal(r.corrupt + r.merge_corrupt + r.check_bad, 0);
    assert_int_equal(r.check_rc, 0);

    /* A chunk payload. */
    flip(f->db, "chunk_data", "data", 12);
    r = read_all(f->db);
    assert_int_equal(r.chunks, total - 1);
    assert_int_equal(r.corrupt, 1);
    assert_int_equal(r.meta_chunks, total); /* metadata alone cannot tell */
    assert_int_equal(r.merge_rc, 0);
    assert_int_equal(r.merge_corrupt, 1);
    assert_int_equal(r.check_rc, -EBADMSG);
    assert_int_equal(r.check_bad, 1);

    /* A layer in the middle of svc-0's chain: the chunks that need it go, the earlier stay. */
    reset_db(pristine, f->db, -1);
    int64_t base = pfr_tu_sql_int(f->db, "SELECT base_id FROM chunks WHERE id = 1");
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT min(id) FROM dicts WHERE base_id = %lld AND id > %lld AND id >"
             " (SELECT dict_id FROM chunks WHERE id = 10)",
             (long long)base, (long long)base);
    int64_t layer = pfr_tu_sql_int(f->db, q);
    snprintf(q, sizeof(q), "SELECT count(*) FROM chunks WHERE base_id = %lld AND dict_id >= %lld",
             (long long)base, (long long)layer);
    int64_t hit = pfr_tu_sql_int(f->db, q);
    assert_true(hit > 0 && hit < 30);
    flip(f->db, "dicts", "data", layer);
    r = read_all(f->db);
    assert_int_equal(r.corrupt, hit);
    assert_int_equal(r.chunks, total - (size_t)hit);
    assert_int_equal(r.check_bad, hit);

    /* The chain's base: all its chunks. */
    reset_db(pristine, f->db, -1);
    flip(f->db, "dicts", "data", base);
    snprintf(q, sizeof(q), "SELECT count(*) FROM chunks WHERE base_id = %lld", (long long)base);
    hit = pfr_tu_sql_int(f->db, q);
    r = read_all(f->db);
    assert_int_equal(r.corrupt, hit);
    assert_int_equal(r.chunks, total - (size_t)hit);

    /* Metadata: totals, times, a missing payload, a missing layer, a broken stream row. */
    reset_db(pristine, f->db, -1);
    sql(f->db, "UPDATE chunks SET totals = x'02' WHERE id = 3;"
               "UPDATE chunks SET start_ns = start_ns - 1 WHERE id = 4;"
               "DELETE FROM chunk_data WHERE id = 5;");
    r = read_all(f->db);
    assert_int_equal(r.corrupt, 3);
    assert_int_equal(r.chunks, total - 3);
    assert_int_equal(r.check_bad, 3);
    reset_db(pristine, f->db, -1);
    snprintf(q, sizeof(q), "DELETE FROM dicts WHERE id = %lld", (long long)layer);
    sql(f->db, q);
    r = read_all(f->db);
    assert_true(r.corrupt > 0 && r.corrupt < 30);
    reset_db(pristine, f->db, -1);
    sql(f->db, "UPDATE streams SET labels = x'41' WHERE service = 'svc-b'");
    r = read_all(f->db);
    assert_int_equal(r.corrupt, 20);
    assert_int_equal(r.chunks, total - 20);
    assert_int_equal(r.meta_corrupt, 20);
    /* A reader asking for svc-a only is not bothered. */
    pfr_store *s = open_ro(f->db);
    pfr_store_filter flt = {.service = "svc-a"};
    pfr_scan_stats st;
    struct seen *x = scan_all(s, &flt, 0, &st);
    assert_int_equal(x->n, 30);
    assert_int_equal(st.corrupt, 0);
    seen_free(x);
    free(x);
    pfr_store_close(s);

    /* A writer's scans count corrupt chunks persistently. */
    reset_db(pristine, f->db, -1);
    flip(f->db, "chunk_data", "data", 7);
    char err[256];
    pfr_store_opts o = {.max_bytes = 64ull << 20};
    assert_int_equal(pfr_store_open(f->db, &o, &f->s, err, sizeof(err)), 0);
    x = scan_all(f->s, NULL, 0, &st);
    assert_int_equal(st.corrupt, 1);
    seen_free(x);
    free(x);
    assert_int_equal(pfr_tu_sql_int(f->db, "SELECT value FROM meta WHERE key = 'corrupt'"), 1);
    /* and keeps appending to a stream whose old rows are damaged */
    pfr_profile *p = pfr_tu_small_profile(1, 5, "ebpf:cpu:nanoseconds");
    append_profile(f->s, "svc-0", NULL, 0, T0 + 1000 * SEC, p);
    pfr_profile_free(p);
    free(pristine);
}

static void test_truncated_file(void **state)
{
    struct fx *f = *state;
    fill_small(f->s);
    pfr_testgen *g = pfr_testgen_new(9, 0, NULL);
    for (int i = 0; i < 10; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + i * 10 * SEC, 10 * SEC);
        append_profile(f->s, pfr_testgen_service(g), NULL, 0, T0 + i * 10 * SEC, p);
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    pfr_store_close(f->s);
    f->s = NULL;
    char *pristine = pfr_tu_path(f->dir, "pristine.db");
    copy_file(f->db, pristine, -1);
    off_t size = (off_t)pfr_tu_file_size(pristine);
    off_t cuts[] = {0, 1, 100, 4096, 4097, 8192, size / 3, size / 2, size - 4096, size - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        reset_db(pristine, f->db, cuts[i]);
        pfr_store *s = NULL;
        char err[256] = "";
        pfr_store_opts ro = {.read_only = true};
        int rc = pfr_store_open(f->db, &ro, &s, err, sizeof(err));
        bool detected = rc != 0;
        if (rc) {
            assert_true(strlen(err) > 0); /* a reason, not just a code */
        } else {
            /* Readers either skip what they cannot read or fail the call: never crash. */
            pfr_scan_stats st;
            struct seen *x = calloc(1, sizeof(*x));
            int src = pfr_store_scan(s, NULL, 0, collect_cb, x, &st);
            seen_free(x);
            free(x);
            pfr_profile *m = NULL;
            pfr_store_merge(s, NULL, PFR_MERGE_DROP_LABELS, &m, &st);
            pfr_profile_free(m);
            pfr_store_stats ss;
            pfr_store_stats_get(s, &ss);
            uint64_t bad = 0;
            int crc = pfr_store_check(s, &bad, err, sizeof(err));
            detected = src != 0 || crc != 0 || st.corrupt > 0;
            pfr_store_close(s);
        }
        /* Losing pages that hold data is always noticed. */
        if (cuts[i] > 0 && cuts[i] <= size - 4096)
            assert_true(detected);
        /* A writer on the damaged file: an error or a working ring, never a crash. */
        reset_db(pristine, f->db, cuts[i]);
        pfr_store_opts o = {.max_bytes = 64ull << 20};
        if (pfr_store_open(f->db, &o, &s, err, sizeof(err)) == 0) {
            pfr_profile *p = pfr_tu_small_profile(3, 4, "ebpf:cpu:nanoseconds");
            pfr_chunk_in in = {"svc-t", NULL, 0, T0, T0 + SEC, p};
            pfr_store_append(s, &in, NULL);
            pfr_profile_free(p);
            pfr_store_close(s);
        }
    }
    free(pristine);
}

/* N chunks of one generated stream, in batches; *want gets their digests. */
static void append_run(pfr_store *s, const char *svc, const pfr_testgen_opts *o, uint64_t *want,
                       int n)
{
    pfr_testgen *g = pfr_testgen_new(5, 0, o);
    for (int i = 0; i < n; i += 100) {
        pfr_profile *ps[100];
        pfr_chunk_in in[100];
        for (int j = 0; j < 100; j++) {
            int64_t start = T0 + (i + j) * 10 * SEC;
            ps[j] = pfr_testgen_next(g, start, 10 * SEC);
            want[i + j] = pfr_tu_digest(ps[j]);
            in[j] = (pfr_chunk_in){svc, NULL, 0, start, start + 10 * SEC, ps[j]};
        }
        assert_int_equal(pfr_store_append_batch(s, in, 100, NULL), 0);
        for (int j = 0; j < 100; j++)
            pfr_profile_free(ps[j]);
    }
    pfr_testgen_free(g);
    pfr_store_filter flt = {.service = svc};
    struct digests dg = {want, 0};
    assert_int_equal(pfr_store_scan(s, &flt, 0, digest_cb, &dg, NULL), 0);
    assert_int_equal(dg.n, n);
}

/* A chain that got no layer since its base is not rotated after 360 chunks (its new base would be
 * the same rows; one that got layers still is: test_merge_equals_profile_merge). Every chunk
 * reads back as appended. */
static void test_bare_chain_kept(void **state)
{
    struct fx *f = *state;
    uint64_t want[400];
    pfr_testgen_opts same = {.nstacks = 4, .max_depth = 8, .no_drift = true};
    append_run(f->s, "svc-same", &same, want, 400);
    assert_int_equal(count_bases(f->db), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_realistic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trim_keeps_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trim_idle_keeps_expected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tables_bound_streams_in_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_base_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_edge_profiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_totals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_equals_profile_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streams_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cursors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_and_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v4, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bare_chain_kept, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
