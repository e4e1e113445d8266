/* Unit tests of pfr_store_scan_samples: each chunk's samples against its stream's dictionary
 * must say exactly what the profile pfr_store_scan builds says (frames, labels, values), the
 * dictionary's entries must be stable across the chunks that share it, and corrupt chunks are
 * skipped and counted the same way. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "pfr_store.h"
#include "pfr_testgen.h"
#include "store_test_util.h"

#define T0  1700000000000000000ll
#define SEC 1000000000ll

enum { MAXCHUNKS = 200 };

struct fx {
    char *dir, *db;
    pfr_store *s;
    size_t nchunks;
};

static int64_t append(pfr_store *s, const char *svc, const pfr_kv *labels, size_t nl, int64_t start,
                      pfr_profile *p)
{
    pfr_chunk_in in = {svc, labels, nl, start, start + 10 * SEC, p};
    int64_t id = -1;
    assert_int_equal(pfr_store_append(s, &in, &id), 0);
    return id;
}

/* Two testgen streams (layers and per-chunk deltas) and a small one with labels pid/comm. */
static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = pfr_tu_tmpdir("store-samples");
    f->db = pfr_tu_path(f->dir, "ring.db");
    char err[256];
    pfr_store_opts o = {.max_bytes = 64ull << 20};
    if (pfr_store_open(f->db, &o, &f->s, err, sizeof(err)))
        return -1;
    pfr_testgen *g[2] = {pfr_testgen_new(11, 0, NULL), pfr_testgen_new(11, 1, NULL)};
    pfr_kv labels[2] = {{"host.name", "h1"}, {"container.id", "c0"}};
    for (int i = 0; i < 40; i++) {
        int64_t start = T0 + i * 10 * SEC;
        for (int k = 0; k < 2; k++) {
            pfr_profile *p = pfr_testgen_next(g[k], start, 10 * SEC);
            append(f->s, pfr_testgen_service(g[k]), labels, 2, start, p);
            pfr_profile_free(p);
        }
        pfr_profile *p = pfr_tu_small_profile((unsigned)i, 12, "ebpf:cpu:nanoseconds");
        append(f->s, "svc-small", labels, 1, start, p);
        pfr_profile_free(p);
        f->nchunks += 3;
    }
    pfr_testgen_free(g[0]);
    pfr_testgen_free(g[1]);
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

/* ---- canonical text of a chunk's samples, from either read path ---- */

struct text {
    char *p;
    size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    if (!t->p) {
        t->cap = 256;
        t->p = malloc(t->cap);
        assert_non_null(t->p);
    }
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
}

static void put_frames(struct text *t, const pfr_frame *fr, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put(t, "%s|%s|%lld|%llx|%s;", fr[i].function, fr[i].file, (long long)fr[i].line,
            (unsigned long long)fr[i].address, fr[i].module);
}

static void put_labels(struct text *t, const pfr_label *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (l[i].str)
            put(t, "#%s=%s", l[i].key, l[i].str);
        else
            put(t, "#%s=%lld %s", l[i].key, (long long)l[i].num, l[i].unit ? l[i].unit : "");
    }
}

static void put_values(struct text *t, const int64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put(t, " %lld", (long long)v[i]);
    put(t, "\n");
}

static pfr_frame frames[4096];

/* One chunk as text: its id, service, times, then one line per sample in delivery order. */
struct chunks {
    size_t n;
    int64_t ids[MAXCHUNKS];
    char *text[MAXCHUNKS];
};

static void put_meta(struct text *t, const pfr_chunk_meta *m)
{
    put(t, "%lld %s %lld %lld %zu\n", (long long)m->id, m->service, (long long)m->start_ns,
        (long long)m->end_ns, m->ntypes);
}

static int profile_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct chunks *c = ctx;
    struct text t = {0};
    put_meta(&t, m);
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        size_t n = pfr_profile_sample_frames(p, i, frames, 4096);
        assert_true(n <= 4096);
        put_frames(&t, frames, n);
        const pfr_label *l = NULL;
        size_t nl = pfr_profile_sample_labels(p, i, &l);
        put_labels(&t, l, nl);
        put_values(&t, pfr_profile_sample_values(p, i), m->ntypes);
    }
    assert_true(c->n < MAXCHUNKS);
    c->ids[c->n] = m->id;
    c->text[c->n++] = t.p;
    return 0;
}

static int samples_cb(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    struct chunks *c = ctx;
    struct text t = {0};
    put_meta(&t, m);
    pfr_label labels[64];
    for (size_t i = 0; i < pfr_samples_count(v); i++) {
        size_t n = pfr_samples_stack_frames(v, pfr_samples_stack(v, i), frames, 4096);
        assert_true(n <= 4096);
        put_frames(&t, frames, n);
        size_t nl = pfr_samples_labels(v, pfr_samples_label_set(v, i), labels, 64);
        assert_true(nl <= 64);
        put_labels(&t, labels, nl);
        put_values(&t, pfr_samples_values(v, i), m->ntypes);
    }
    assert_true(c->n < MAXCHUNKS);
    c->ids[c->n] = m->id;
    c->text[c->n++] = t.p;
    return 0;
}

static void chunks_free(struct chunks *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->text[i]);
    c->n = 0;
}

static void assert_same(struct chunks *a, struct chunks *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_int_equal(a->ids[i], b->ids[i]);
        if (strcmp(a->text[i], b->text[i])) {
            fprintf(stderr, "chunk %lld differs:\n%.300s\n--\n%.300s\n", (long long)a->ids[i],
                    a->text[i], b->text[i]);
            fail();
        }
    }
}

/* Both read paths over f give the same chunks and samples. */
static void compare(pfr_store *s, const pfr_store_filter *f, size_t want)
{
    struct chunks *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    pfr_scan_stats sa, sb;
    assert_int_equal(pfr_store_scan(s, f, 0, profile_cb, a, &sa), 0);
    assert_int_equal(pfr_store_scan_samples(s, f, 0, samples_cb, b, &sb), 0);
    assert_int_equal(a->n, want);
    assert_same(a, b);
    assert_int_equal(sa.chunks, sb.chunks);
    assert_int_equal(sa.corrupt, sb.corrupt);
    assert_int_equal(sa.last_id, sb.last_id);
    chunks_free(a);
    chunks_free(b);
    free(a);
    free(b);
}

static void test_same_as_profiles(void **state)
{
    struct fx *f = *state;
    compare(f->s, NULL, f->nchunks);
    /* Again on the same handle: the dictionary chains are cached and decoded past the layers
     * of the first chunks now; a chunk's own entries must still be its own. */
    compare(f->s, NULL, f->nchunks);
    pfr_store_filter later = {.after_id = 30, .max_id = 90, .service = "svc-small"};
    compare(f->s, &later, 20);
    /* Sample label filters drop the same samples. */
    pfr_kv pid = {"comm", "app1"};
    pfr_store_filter byl = {.sample_labels = &pid, .nsample_labels = 1};
    compare(f->s, &byl, f->nchunks);
    /* A read-only handle of another connection. */
    pfr_store *r;
    char err[256];
    pfr_store_opts o = {.read_only = true};
    assert_int_equal(pfr_store_open(f->db, &o, &r, err, sizeof(err)), 0);
    pfr_store_filter limited = {.limit = 7};
    compare(r, &limited, 7);
    pfr_store_close(r);
}

/* ---- dictionary entries are stable within a dictionary ---- */

struct stable {
    int64_t dict[8];
    char **text[8]; /* per dictionary: text of each stable stack seen */
    size_t cap[8], ndicts, hits, own;
};

static char *stack_text(const pfr_chunk_samples *v, uint32_t stack)
{
    struct text t = {0};
    size_t n = pfr_samples_stack_frames(v, stack, frames, 4096);
    put(&t, "%zu:", n);
    put_frames(&t, frames, n);
    return t.p;
}

static int stable_cb(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    (void)m;
    struct stable *s = ctx;
    uint32_t stacks, locs;
    int64_t dict = pfr_samples_dict(v, &stacks, &locs);
    assert_true(dict > 0);
    assert_true(stacks <= pfr_samples_num_stacks(v));
    size_t d = 0;
    while (d < s->ndicts && s->dict[d] != dict)
        d++;
    if (d == s->ndicts) {
        assert_true(d < 8);
        s->dict[s->ndicts++] = dict;
    }
    if (s->cap[d] < stacks) {
        s->text[d] = realloc(s->text[d], stacks * sizeof(char *));
        memset(s->text[d] + s->cap[d], 0, (stacks - s->cap[d]) * sizeof(char *));
        s->cap[d] = stacks;
    }
    for (size_t i = 0; i < pfr_samples_count(v); i++) {
        uint32_t st = pfr_samples_stack(v, i);
        if (st >= stacks) {
            s->own++;
            continue;
        }
        char *t = stack_text(v, st);
        if (s->text[d][st]) {
            assert_string_equal(s->text[d][st], t);
            s->hits++;
            free(t);
        } else {
            s->text[d][st] = t;
        }
    }
    return 0;
}

static void test_dictionary_stable(void **state)
{
    struct fx *f = *state;
    struct stable s = {0};
    pfr_scan_stats st;
    assert_int_equal(pfr_store_scan_samples(f->s, NULL, 0, stable_cb, &s, &st), 0);
    assert_int_equal(st.chunks, f->nchunks);
    assert_int_equal(s.ndicts, 3); /* one chain per stream here */
    assert_true(s.hits > 1000);    /* stacks recur from chunk to chunk */
    for (size_t d = 0; d < s.ndicts; d++) {
        for (size_t i = 0; i < s.cap[d]; i++)
            free(s.text[d][i]);
        free(s.text[d]);
    }
}

/* ---- accessors out of range, metadata only ---- */

static int edges_cb(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    (void)m;
    size_t *n = ctx;
    size_t len = 99;
    size_t count = pfr_samples_count(v);
    assert_int_equal(pfr_samples_stack(v, count), UINT32_MAX);
    assert_int_equal(pfr_samples_label_set(v, count), UINT32_MAX);
    assert_null(pfr_samples_values(v, count));
    uint32_t bad = pfr_samples_num_stacks(v);
    assert_null(pfr_samples_stack_locations(v, bad, &len));
    assert_int_equal(len, 0);
    assert_int_equal(pfr_samples_stack_frames(v, bad, frames, 4096), 0);
    assert_int_equal(pfr_samples_location_frames(v, UINT32_MAX, frames, 4096), 0);
    pfr_label l[4];
    assert_int_equal(pfr_samples_labels(v, UINT32_MAX, l, 4), 0);
    /* Frames and labels with no room: the count, nothing written. */
    if (count) {
        uint32_t st = pfr_samples_stack(v, 0);
        assert_true(pfr_samples_stack_frames(v, st, NULL, 0) > 0);
    }
    (*n)++;
    return 0;
}

static int meta_cb(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    assert_null(v);
    assert_non_null(m->service);
    (*(size_t *)ctx)++;
    return m->id == 10 ? 42 : 0; /* stops the scan, returned as is */
}

static void test_edges(void **state)
{
    struct fx *f = *state;
    size_t n = 0;
    assert_int_equal(pfr_store_scan_samples(f->s, NULL, 0, edges_cb, &n, NULL), 0);
    assert_int_equal(n, f->nchunks);
    n = 0;
    assert_int_equal(pfr_store_scan_samples(f->s, NULL, PFR_SCAN_META_ONLY, meta_cb, &n, NULL), 42);
    assert_int_equal(n, 10);
}

/* ---- corrupt chunks: skipped and counted, never delivered ---- */

static void flip(const char *db, const char *table, int64_t id)
{
    sqlite3 *h;
    sqlite3_blob *b;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_blob_open(h, "main", table, "data", id, 1, &b), SQLITE_OK);
    int len = sqlite3_blob_bytes(b);
    uint8_t x;
    assert_int_equal(sqlite3_blob_read(b, &x, 1, len / 2), SQLITE_OK);
    x ^= 0x5a;
    assert_int_equal(sqlite3_blob_write(b, &x, 1, len / 2), SQLITE_OK);
    sqlite3_blob_close(b);
    sqlite3_close(h);
}

static int count_cb(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    (void)m;
    assert_non_null(v);
    (*(size_t *)ctx)++;
    return 0;
}

static void test_corrupt(void **state)
{
    struct fx *f = *state;
    pfr_store_close(f->s);
    f->s = NULL;
    flip(f->db, "chunk_data", 12);
    /* A layer of the first stream's chain that later chunks need. */
    int64_t base = pfr_tu_sql_int(f->db, "SELECT base_id FROM chunks WHERE id = 1");
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT min(id) FROM dicts WHERE base_id = %lld AND id > %lld AND id >"
             " (SELECT dict_id FROM chunks WHERE id = 40)",
             (long long)base, (long long)base);
    int64_t layer = pfr_tu_sql_int(f->db, q);
    snprintf(q, sizeof(q), "SELECT count(*) FROM chunks WHERE base_id = %lld AND dict_id >= %lld",
             (long long)base, (long long)layer);
    int64_t hit = pfr_tu_sql_int(f->db, q);
    assert_true(hit > 0);
    flip(f->db, "dicts", layer);

    pfr_store *r;
    char err[256];
    pfr_store_opts o = {.read_only = true};
    assert_int_equal(pfr_store_open(f->db, &o, &r, err, sizeof(err)), 0);
    size_t n = 0;
    pfr_scan_stats st;
    assert_int_equal(pfr_store_scan_samples(r, NULL, 0, count_cb, &n, &st), 0);
    assert_int_equal(st.corrupt, (uint64_t)hit + 1);
    assert_int_equal(n, f->nchunks - (size_t)hit - 1);
    assert_int_equal(st.last_id, (int64_t)f->nchunks);
    /* The survivors read the same through both paths. */
    compare(r, NULL, n);
    pfr_store_stats ss;
    assert_int_equal(pfr_store_stats_get(r, &ss), 0);
    assert_true(ss.corrupt >= st.corrupt);
    pfr_store_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_same_as_profiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dictionary_stable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
