/* The query engine over real rings built with the store API: folded totals, diffs, filters,
 * "no data", several services, gauges, timeline and ls. */
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
#include <jansson.h>
#include <sqlite3.h>

#include "pfr_diff.h"
#include "pfr_query.h"
#include "pfr_render.h"
#include "pfr_testgen.h"
#include "render_internal.h"
#include "ring_fixture.h"

#define T0 (1714564800LL * FX_S)

typedef struct fixture {
    char dir[64];
    char path[128];
    pfr_store *w; /* writer */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/pfr-query-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/ring.db", f->dir);
    f->w = pfr_fx_open(f->path);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    pfr_store_close(f->w);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

/* A read-only handle, as the query tool opens it. */
static pfr_store *reader(fixture *f)
{
    pfr_store *s = NULL;
    char err[256];
    pfr_store_opts o = {.read_only = true};
    assert_int_equal(pfr_store_open(f->path, &o, &s, err, sizeof(err)), 0);
    return s;
}

static pfr_query_plan *plan(pfr_store *s, const char *service, const char *type,
                            const pfr_kv *labels, size_t n)
{
    pfr_query q = {.service = service, .type = type, .labels = labels, .nlabels = n};
    pfr_query_plan *p = NULL;
    char err[512] = "";
    int rc = pfr_query_plan_new(s, &q, &p, err, sizeof(err));
    if (rc)
        fail_msg("plan: %d %s", rc, err);
    return p;
}

static double folded_sum(const pfr_tree *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pfr_render_folded(f, t, NULL), 0);
    fclose(f);
    double sum = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strrchr(line, ' ');
        assert_non_null(sp);
        sum += strtod(sp + 1, NULL);
    }
    free(buf);
    return sum;
}

static uint32_t child_named(const pfr_tree *t, uint32_t parent, const char *name)
{
    for (uint32_t c = pfr_tree_node_at(t, parent)->first_child; c != PFR_TREE_NONE;
         c = pfr_tree_node_at(t, c)->next_sibling)
        if (strcmp(pfr_tree_str(t, pfr_tree_node_at(t, c)->name), name) == 0)
            return c;
    fail_msg("no frame %s", name);
    return PFR_TREE_NONE;
}

/* folded totals equal the sum of the values of the chunks that overlap the range */
static void test_folded_totals(void **state)
{
    fixture *f = *state;
    enum { N = 30 };
    int64_t totals[N];
    pfr_testgen *g = pfr_testgen_new(7, 0, NULL);
    for (int i = 0; i < N; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + i * 10 * FX_S, 10 * FX_S);
        totals[i] = pfr_testgen_total(p);
        assert_int_equal(
            pfr_fx_append(f->w, pfr_testgen_service(g), NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p),
            0);
        pfr_profile_free(p);
    }
    pfr_store *s = reader(f);
    pfr_query_plan *p = plan(s, NULL, NULL, NULL, 0);
    assert_string_equal(p->type, "ebpf:cpu:nanoseconds");
    static const int64_t ranges[][2] = {{0, 300}, {25, 95}, {100, 110}, {-50, 5}, {295, 400}};
    for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
        int64_t from = T0 + ranges[r][0] * FX_S, to = T0 + ranges[r][1] * FX_S;
        double want = 0;
        for (int i = 0; i < N; i++)
            if (T0 + i * 10 * FX_S < to && T0 + (i + 1) * 10 * FX_S > from)
                want += (double)totals[i];
        pfr_tree *t = pfr_tree_new();
        pfr_query_stats st = {0};
        char err[512];
        assert_int_equal(pfr_query_tree(s, p, from, to, t, 0, &st, err, sizeof(err)), 0);
        assert_int_equal(pfr_tree_finish(t), 0);
        assert_true(folded_sum(t) == want);
        assert_true(pfr_tree_node_at(t, 0)->total[0] == want);
        pfr_tree_free(t);
        /* the pprof export holds the same total */
        pfr_profile *m = NULL;
        assert_int_equal(pfr_query_profile(s, p, from, to, false, &m, NULL, err, sizeof(err)), 0);
        assert_true((double)pfr_testgen_total(m) == want);
        pfr_profile_free(m);
    }
    pfr_query_plan_free(p);
    pfr_store_close(s);
    pfr_testgen_free(g);
}

static void diff_tree(pfr_store *s, const pfr_query_plan *p, int64_t bf, int64_t bt, int64_t cf,
                      int64_t ct, pfr_tree **out)
{
    char err[512];
    pfr_tree *t = pfr_tree_new();
    assert_int_equal(pfr_query_tree(s, p, bf, bt, t, 0, NULL, err, sizeof(err)), 0);
    assert_int_equal(pfr_query_tree(s, p, cf, ct, t, 1, NULL, err, sizeof(err)), 0);
    assert_int_equal(pfr_tree_finish(t), 0);
    *out = t;
}

static void test_self_diff_neutral(void **state)
{
    fixture *f = *state;
    pfr_testgen *g = pfr_testgen_new(3, 0, NULL);
    for (int i = 0; i < 12; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + i * 10 * FX_S, 10 * FX_S);
        assert_int_equal(pfr_fx_append(f->w, "svc", NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p), 0);
        pfr_profile_free(p);
    }
    pfr_store *s = reader(f);
    pfr_query_plan *p = plan(s, "svc", NULL, NULL, 0);
    pfr_tree *t;
    int64_t from = T0 + 15 * FX_S, to = T0 + 95 * FX_S;
    diff_tree(s, p, from, to, from, to, &t);
    double norm[2] = {pfr_diff_norm(from, to), pfr_diff_norm(from, to)};
    assert_true(pfr_tree_size(t) > 100);
    for (uint32_t i = 0; i < pfr_tree_size(t); i++) {
        const pfr_tree_node *n = pfr_tree_node_at(t, i);
        assert_true(n->total[0] == n->total[1]);
        assert_true(pfr_diff_change(n->total[0] * norm[0], n->total[1] * norm[1]) == 0);
    }
    pfr_render_opts o = {.diff = true, .norm = {norm[0], norm[1]}, .unit = "nanoseconds"};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_int_equal(pfr_render_top(out, t, &o), 0);
    fclose(out);
    assert_non_null(strstr(buf, "no differences"));
    free(buf);
    pfr_tree_free(t);
    pfr_query_plan_free(p);
    pfr_store_close(s);
    pfr_testgen_free(g);
}

/* the hot function changes half-way: in the second half against the first it is red */
static void test_shift_red(void **state)
{
    fixture *f = *state;
    assert_int_equal(pfr_fx_shift_ring(f->w, "app", T0, 60), 0);
    pfr_store *s = reader(f);
    pfr_query_plan *p = plan(s, "app", NULL, NULL, 0);
    int64_t cf = T0 + 300 * FX_S, ct = T0 + 600 * FX_S, bf, bt;
    pfr_diff_default_base(cf, ct, &bf, &bt);
    assert_true(bf == T0 && bt == cf);
    pfr_tree *t;
    diff_tree(s, p, bf, bt, cf, ct, &t);
    double norm[2] = {pfr_diff_norm(bf, bt), pfr_diff_norm(cf, ct)};
    uint32_t serve = child_named(t, child_named(t, 0, "main"), "serve");
    const pfr_tree_node *after = pfr_tree_node_at(t, child_named(t, serve, "hot_after"));
    const pfr_tree_node *before = pfr_tree_node_at(t, child_named(t, serve, "hot_before"));
    const pfr_tree_node *steady = pfr_tree_node_at(t, child_named(t, serve, "steady_work"));
    double ca = pfr_diff_change(after->total[0] * norm[0], after->total[1] * norm[1]);
    double cb = pfr_diff_change(before->total[0] * norm[0], before->total[1] * norm[1]);
    double cs = pfr_diff_change(steady->total[0] * norm[0], steady->total[1] * norm[1]);
    assert_true(ca > 0.8); /* 0.05 -> 0.3 cores */
    assert_true(cb < -0.8);
    assert_true(cs == 0);
    char color[8];
    unsigned r, g, b;
    pfr_diff_color(ca, color);
    sscanf(color + 1, "%2x%2x%2x", &r, &g, &b);
    assert_true(r > g + 60 && r > b + 60);
    pfr_diff_row *rows;
    size_t n;
    assert_int_equal(pfr_diff_rows(t, norm, &rows, &n), 0);
    assert_true(n >= 2);
    /* the two hot functions lead the table of changes */
    const char *first = pfr_tree_str(t, rows[0].name), *second = pfr_tree_str(t, rows[1].name);
    assert_true((strcmp(first, "hot_after") == 0 && strcmp(second, "hot_before") == 0) ||
                (strcmp(first, "hot_before") == 0 && strcmp(second, "hot_after") == 0));
    free(rows);
    pfr_tree_free(t);

    /* ranges of different lengths compare per second: a 2-minute comparison inside the second
     * half against the whole first half still shows steady work unchanged */
    diff_tree(s, p, bf, bt, cf + 60 * FX_S, cf + 180 * FX_S, &t);
    norm[1] = pfr_diff_norm(cf + 60 * FX_S, cf + 180 * FX_S);
    serve = child_named(t, child_named(t, 0, "main"), "serve");
    steady = pfr_tree_node_at(t, child_named(t, serve, "steady_work"));
    assert_true(steady->total[0] * norm[0] == steady->total[1] * norm[1]);
    pfr_tree_free(t);
    pfr_query_plan_free(p);
    pfr_store_close(s);
}

static void test_labels(void **state)
{
    fixture *f = *state;
    static const pfr_kv h1[] = {{"host.name", "h1"}}, h2[] = {{"host.name", "h2"}};
    for (int i = 0; i < 4; i++) {
        pfr_profile *p = pfr_fx_profile("ebpf:cpu:nanoseconds");
        assert_int_equal(pfr_fx_sample(p, "main;a", 100, 1, "alpha"), 0);
        assert_int_equal(pfr_fx_sample(p, "main;b", 10, 2, "beta"), 0);
        assert_int_equal(
            pfr_fx_append(f->w, "api", i % 2 ? h2 : h1, 1, T0 + i * 10 * FX_S, 10 * FX_S, p), 0);
        pfr_profile_free(p);
    }
    pfr_store *s = reader(f);
    static const struct {
        pfr_kv kv[2];
        size_t n;
        double want;
        size_t nprofile, nsample;
    } cases[] = {
        {{{"pid", "1"}}, 1, 400, 0, 1},
        {{{"comm", "beta"}}, 1, 40, 0, 1},
        {{{"host.name", "h2"}}, 1, 220, 1, 0},
        {{{"host.name", "h1"}, {"comm", "alpha"}}, 2, 200, 1, 1},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        pfr_query_plan *p = plan(s, "api", NULL, cases[c].kv, cases[c].n);
        assert_int_equal(p->nprofile_labels, cases[c].nprofile);
        assert_int_equal(p->nsample_labels, cases[c].nsample);
        pfr_tree *t = pfr_tree_new();
        char err[512];
        assert_int_equal(pfr_query_tree(s, p, T0, T0 + 40 * FX_S, t, 0, NULL, err, sizeof(err)), 0);
        assert_int_equal(pfr_tree_finish(t), 0);
        if (pfr_tree_node_at(t, 0)->total[0] != cases[c].want)
            fail_msg("case %zu: %g, want %g", c, pfr_tree_node_at(t, 0)->total[0], cases[c].want);
        pfr_tree_free(t);
        pfr_query_plan_free(p);
    }
    pfr_store_close(s);
}

static void test_no_data(void **state)
{
    fixture *f = *state;
    pfr_profile *p = pfr_fx_profile("go:heap_alloc_space:bytes");
    assert_int_equal(pfr_fx_sample(p, "main;alloc", 1000, -1, NULL), 0);
    assert_int_equal(pfr_fx_append(f->w, "worker", NULL, 0, T0, 10 * FX_S, p), 0);
    pfr_profile_free(p);
    p = pfr_fx_profile("go:heap_alloc_objects:count");
    assert_int_equal(pfr_fx_sample(p, "main;alloc", 3, -1, NULL), 0);
    assert_int_equal(pfr_fx_append(f->w, "worker", NULL, 0, T0, 10 * FX_S, p), 0);
    pfr_profile_free(p);

    pfr_store *s = reader(f);
    char err[1024] = "";
    pfr_query_plan *pl = NULL;
    pfr_query q = {.service = "nope"};
    assert_int_equal(pfr_query_plan_new(s, &q, &pl, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "no service \"nope\""));
    assert_non_null(strstr(err, "worker"));
    q.service = "worker";
    assert_int_equal(pfr_query_plan_new(s, &q, &pl, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "--type"));
    assert_non_null(strstr(err, "go:heap_alloc_objects:count"));
    q.type = "ebpf:cpu:nanoseconds";
    assert_int_equal(pfr_query_plan_new(s, &q, &pl, err, sizeof(err)), -ENOENT);
    q.type = "go:heap_alloc_space:bytes";
    assert_int_equal(pfr_query_plan_new(s, &q, &pl, err, sizeof(err)), 0);
    pfr_tree *t = pfr_tree_new();
    assert_int_equal(
        pfr_query_tree(s, pl, T0 + 3600 * FX_S, T0 + 7200 * FX_S, t, 0, NULL, err, sizeof(err)),
        -ENOENT);
    assert_non_null(strstr(err, "no data"));
    pfr_profile *m = NULL;
    assert_int_equal(
        pfr_query_profile(s, pl, T0 - 100 * FX_S, T0, false, &m, NULL, err, sizeof(err)), -ENOENT);
    pfr_timeline *tl = NULL;
    assert_int_equal(
        pfr_query_timeline(s, pl, T0 + 20 * FX_S, T0 + 80 * FX_S, 0, &tl, NULL, err, sizeof(err)),
        -ENOENT);
    /* the data there is found */
    assert_int_equal(pfr_query_tree(s, pl, T0, T0 + 10 * FX_S, t, 0, NULL, err, sizeof(err)), 0);
    assert_int_equal(pfr_tree_finish(t), 0);
    assert_true(pfr_tree_node_at(t, 0)->total[0] == 1000);
    pfr_tree_free(t);
    pfr_query_plan_free(pl);
    pfr_store_close(s);
}

static void test_services_and_gauge(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < 4; i++) {
        pfr_profile *p = pfr_fx_profile("ebpf:cpu:nanoseconds");
        assert_int_equal(pfr_fx_sample(p, "main;x", 5, 1, "a"), 0);
        assert_int_equal(pfr_fx_append(f->w, i % 2 ? "svc-b" : "svc-a", NULL, 0, T0 + i * 10 * FX_S,
                                       10 * FX_S, p),
                         0);
        pfr_profile_free(p);
        p = pfr_fx_profile("go:heap_inuse_space:bytes");
        assert_int_equal(pfr_fx_sample(p, "main;cache", 100 * (i + 1), -1, NULL), 0);
        assert_int_equal(pfr_fx_append(f->w, "heapy", NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p),
                         0);
        pfr_profile_free(p);
    }
    pfr_store *s = reader(f);
    char err[512];
    pfr_query_plan *p = plan(s, NULL, "ebpf:cpu:nanoseconds", NULL, 0);
    assert_int_equal(p->nservices, 2);
    pfr_tree *t = pfr_tree_new();
    assert_int_equal(pfr_query_tree(s, p, T0, T0 + 40 * FX_S, t, 0, NULL, err, sizeof(err)), 0);
    assert_int_equal(pfr_tree_finish(t), 0);
    /* each service is a frame of its own under the root */
    assert_true(pfr_tree_node_at(t, child_named(t, 0, "svc-a"))->total[0] == 10);
    assert_true(pfr_tree_node_at(t, child_named(t, 0, "svc-b"))->total[0] == 10);
    pfr_tree_free(t);
    pfr_query_plan_free(p);

    /* in-use heap is a level: the mean over the range's chunks, not the sum */
    p = plan(s, "heapy", NULL, NULL, 0);
    assert_true(p->gauge);
    t = pfr_tree_new();
    assert_int_equal(pfr_query_tree(s, p, T0, T0 + 40 * FX_S, t, 0, NULL, err, sizeof(err)), 0);
    assert_int_equal(pfr_tree_finish(t), 0);
    assert_true(pfr_tree_node_at(t, 0)->total[0] == 250);
    pfr_tree_free(t);
    pfr_timeline *tl = NULL;
    assert_int_equal(
        pfr_query_timeline(s, p, T0, T0 + 40 * FX_S, 20 * FX_S, &tl, NULL, err, sizeof(err)), 0);
    assert_int_equal(tl->n, 2);
    assert_true(tl->values[0] == 150 && tl->values[1] == 350);
    pfr_timeline_free(tl);
    pfr_query_plan_free(p);
    pfr_store_close(s);
}

static void test_timeline(void **state)
{
    fixture *f = *state;
    assert_int_equal(pfr_fx_shift_ring(f->w, "app", T0, 60), 0);
    pfr_store *s = reader(f);
    pfr_query_plan *p = plan(s, "app", NULL, NULL, 0);
    pfr_timeline *tl = NULL;
    char err[512];
    assert_int_equal(
        pfr_query_timeline(s, p, T0, T0 + 600 * FX_S, 60 * FX_S, &tl, NULL, err, sizeof(err)), 0);
    assert_int_equal(tl->n, 10);
    for (size_t i = 0; i < tl->n; i++) {
        assert_true(tl->values[i] == 33.0 * FX_S); /* 6 chunks of 5.5 s */
        assert_int_equal(tl->chunks[i], 6);
    }
    pfr_timeline_free(tl);
    /* an interval boundary inside a chunk splits it by overlap */
    assert_int_equal(pfr_query_timeline(s, p, T0 + 5 * FX_S, T0 + 25 * FX_S, 10 * FX_S, &tl, NULL,
                                        err, sizeof(err)),
                     0);
    assert_int_equal(tl->n, 2);
    assert_true(tl->values[0] == 5.5 * FX_S && tl->values[1] == 5.5 * FX_S);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_int_equal(pfr_timeline_render_json(out, tl, p), 0);
    fclose(out);
    json_t *doc = json_loads(buf, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_array_size(json_object_get(doc, "points")), 2);
    json_decref(doc);
    free(buf);
    pfr_timeline_free(tl);
    assert_true(pfr_timeline_auto_step(T0, T0 + 3600 * FX_S, 60) == 60 * FX_S);
    assert_true(pfr_timeline_auto_step(T0, T0 + 86400 * FX_S, 60) == 1800 * FX_S);
    pfr_query_plan_free(p);
    pfr_store_close(s);
}

static void test_ls(void **state)
{
    fixture *f = *state;
    static const pfr_kv lab[] = {{"host.name", "box"}, {"container.id", "c1"}};
    for (int i = 0; i < 30; i++) {
        if (i >= 10 && i < 20)
            continue; /* the recorder was down for 100 s */
        pfr_profile *p = pfr_fx_profile("ebpf:cpu:nanoseconds");
        assert_int_equal(pfr_fx_sample(p, "main", 1, 1, "a"), 0);
        assert_int_equal(pfr_fx_append(f->w, "api", lab, 2, T0 + i * 10 * FX_S, 10 * FX_S, p), 0);
        pfr_profile_free(p);
    }
    pfr_store *s = reader(f);
    pfr_ls *ls = NULL;
    char err[256];
    assert_int_equal(pfr_query_ls(s, &ls, err, sizeof(err)), 0);
    assert_int_equal(ls->nservices, 1);
    const pfr_ls_service *sv = &ls->services[0];
    assert_string_equal(sv->name, "api");
    assert_int_equal(sv->chunks, 20);
    assert_int_equal(sv->ntypes, 1);
    assert_string_equal(sv->types[0], "ebpf:cpu:nanoseconds");
    assert_int_equal(sv->nlabels, 2);
    assert_string_equal(sv->labels[0].key, "container.id");
    assert_string_equal(sv->labels[1].values[0], "box");
    assert_true(sv->first_ns == T0 && sv->last_ns == T0 + 300 * FX_S);
    assert_true(sv->typical_chunk_ns == 10 * FX_S);
    assert_int_equal(sv->ngaps, 1);
    assert_true(sv->gaps[0].from_ns == T0 + 100 * FX_S && sv->gaps[0].to_ns == T0 + 200 * FX_S);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_int_equal(pfr_ls_render_text(out, ls, 0), 0);
    fclose(out);
    assert_non_null(strstr(buf, "service api"));
    assert_non_null(strstr(buf, "gap "));
    assert_non_null(strstr(buf, "(1m40s)"));
    free(buf);
    pfr_ls_free(ls);
    pfr_store_close(s);
}

/* ---- the merge fast path against the generic one ---- */

static int strcmp_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A profile as sorted lines "labels | frames = values": equal for equal profiles whatever the
 * order of their tables and samples. */
static char *canonical(const pfr_profile *p)
{
    size_t n = pfr_profile_num_samples(p), nt = pfr_profile_num_sample_types(p);
    char **lines = calloc(n + 1, sizeof(*lines));
    assert_non_null(lines);
    for (size_t i = 0; i < n; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        const pfr_label *l;
        size_t nl = pfr_profile_sample_labels(p, i, &l);
        /* labels sorted by key (at most a few) */
        bool used[16] = {0};
        assert_true(nl <= 16);
        for (size_t k = 0; k < nl; k++) {
            size_t best = SIZE_MAX;
            for (size_t j = 0; j < nl; j++)
                if (!used[j] && (best == SIZE_MAX || strcmp(l[j].key, l[best].key) < 0))
                    best = j;
            used[best] = true;
            if (l[best].str)
                fprintf(f, "%s=%s,", l[best].key, l[best].str);
            else
                fprintf(f, "%s=%lld%s,", l[best].key, (long long)l[best].num,
                        l[best].unit ? l[best].unit : "");
        }
        fputs(" |", f);
        pfr_frame fr[512];
        size_t nf = pfr_profile_sample_frames(p, i, fr, 512);
        assert_true(nf <= 512);
        for (size_t k = 0; k < nf; k++)
            fprintf(f, " %s@%s:%lld:%llx:%s", fr[k].function, fr[k].file, (long long)fr[k].line,
                    (unsigned long long)fr[k].address, fr[k].module);
        fputs(" =", f);
        for (size_t t = 0; t < nt; t++)
            fprintf(f, " %lld", (long long)pfr_profile_sample_values(p, i)[t]);
        fclose(f);
        lines[i] = buf;
    }
    qsort(lines, n, sizeof(*lines), strcmp_ptr);
    char *all = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&all, &len);
    for (size_t t = 0; t < nt; t++) {
        const char *unit;
        const char *type = pfr_profile_sample_type(p, t, &unit);
        fprintf(f, "type %s %s\n", type, unit ? unit : "");
    }
    const char *pt, *pu;
    int64_t period = pfr_profile_period(p, &pt, &pu);
    fprintf(f, "period %lld %s %s time %lld %lld\n", (long long)period, pt ? pt : "", pu ? pu : "",
            (long long)pfr_profile_time_nanos(p), (long long)pfr_profile_duration_nanos(p));
    for (size_t i = 0; i < n; i++) {
        /* equal lines (same stack and labels) must not occur in a merged profile */
        if (i > 0 && strcmp(lines[i], lines[i - 1]) == 0)
            fail_msg("sample twice: %s", lines[i]);
        fprintf(f, "%s\n", lines[i]);
    }
    fclose(f);
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    return all;
}

typedef struct ref_merge {
    pfr_profile *acc;
    unsigned flags;
    uint64_t chunks;
} ref_merge;

static int ref_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)m;
    ref_merge *r = ctx;
    r->chunks++;
    if (!r->acc)
        r->acc = pfr_profile_new();
    assert_int_equal(pfr_profile_merge(r->acc, p, r->flags), 0);
    return 0;
}

static char *json_of(const pfr_tree *t, const pfr_render_opts *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(pfr_render_json(f, t, o, "{\"x\":1}"), 0);
    fclose(f);
    return buf;
}

/* What jansson writes for the document pfr_render_json_doc builds. */
static char *json_of_doc(const pfr_tree *t, const pfr_render_opts *o, double min_width,
                         size_t flags)
{
    json_t *doc;
    assert_int_equal(pfr_render_json_doc(t, o, "{\"x\":1}", min_width, &doc), 0);
    char *s = json_dumps(doc, flags);
    json_decref(doc);
    return s;
}

static int tree_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)m;
    return pfr_tree_add_profile(ctx, 0, p, 0, 1.0, NULL);
}

/* pfr_store_merge (aggregating against the streams' dictionaries) gives the profile the generic
 * path gives (every chunk decoded to a profile, merged with pfr_profile_merge): several streams,
 * dictionary chains started over, sample and profile label filters, with and without labels, a
 * corrupt chunk; and the flame tree and its JSON are those of the chunk-by-chunk tree. */
static void test_merge_fast_path(void **state)
{
    fixture *f = *state;
    static const pfr_kv h1[] = {{"host.name", "h1"}}, h2[] = {{"host.name", "h2"}};
    pfr_testgen_opts go = {.nstacks = 60, .nprocs = 3, .drift_permille = 200, .max_depth = 24};
    pfr_testgen *g0 = pfr_testgen_new(11, 0, &go), *g1 = pfr_testgen_new(12, 1, &go);
    enum { N = 24 };
    int64_t pid0 = 0, pid1 = 0;
    for (int i = 0; i < N; i++) {
        if (i == N / 2) { /* a new writer starts every stream's chain over */
            pfr_store_close(f->w);
            f->w = pfr_fx_open(f->path);
        }
        int64_t t = T0 + i * 10 * FX_S;
        pfr_profile *a = pfr_testgen_next(g0, t, 10 * FX_S),
                    *b = pfr_testgen_next(g1, t, 10 * FX_S);
        if (i == 0) {
            assert_true(pfr_profile_sample_label_num(a, 0, "pid", &pid0));
            assert_true(pfr_profile_sample_label_num(b, 0, "pid", &pid1));
        }
        assert_int_equal(pfr_fx_append(f->w, "svc-0", i % 3 ? h1 : h2, 1, t, 10 * FX_S, a), 0);
        assert_int_equal(pfr_fx_append(f->w, "svc-1", h1, 1, t, 10 * FX_S, b), 0);
        pfr_profile_free(a);
        pfr_profile_free(b);
    }
    pfr_testgen_free(g0);
    pfr_testgen_free(g1);
    /* one chunk's payload damaged: skipped and counted by both paths */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE chunk_data SET data = substr(data, 1, 20) || x'00ff' ||"
                                  " substr(data, 23) WHERE id = (SELECT id FROM chunks WHERE"
                                  " stream_id = 1 ORDER BY id LIMIT 1 OFFSET 5)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);

    pfr_store *s = reader(f);
    char p0[32], p1[32];
    snprintf(p0, sizeof(p0), "%lld", (long long)pid0);
    snprintf(p1, sizeof(p1), "%lld", (long long)pid1);
    const pfr_kv comm0[] = {{"comm", "svc-0-1"}}, pid0kv[] = {{"pid", p0}},
                 pid1kv[] = {{"pid", p1}};
    const struct {
        const char *service;
        const pfr_kv *labels;
        size_t nlabels;
        const pfr_kv *sample_labels;
        size_t nsample_labels;
        int64_t from, to;
    } cases[] = {
        {NULL, NULL, 0, NULL, 0, 0, N * 10},        {"svc-0", NULL, 0, NULL, 0, 0, N * 10},
        {"svc-0", h1, 1, NULL, 0, 35, 175},         {"svc-0", NULL, 0, comm0, 1, 0, N * 10},
        {"svc-1", NULL, 0, pid1kv, 1, 100, N * 10}, {"svc-0", h2, 1, pid0kv, 1, 0, N * 10},
    };
    uint64_t corrupt_seen = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (unsigned flags = 0; flags <= PFR_MERGE_DROP_LABELS; flags += PFR_MERGE_DROP_LABELS) {
            pfr_store_filter fl = {.from_ns = T0 + cases[c].from * FX_S,
                                   .to_ns = T0 + cases[c].to * FX_S,
                                   .service = cases[c].service,
                                   .labels = cases[c].labels,
                                   .nlabels = cases[c].nlabels,
                                   .sample_labels = cases[c].sample_labels,
                                   .nsample_labels = cases[c].nsample_labels};
            ref_merge ref = {.flags = flags};
            pfr_scan_stats rs = {0}, ms = {0};
            assert_int_equal(pfr_store_scan(s, &fl, 0, ref_cb, &ref, &rs), 0);
            pfr_profile *m = NULL;
            assert_int_equal(pfr_store_merge(s, &fl, flags, &m, &ms), 0);
            assert_non_null(ref.acc);
            assert_int_equal(ms.chunks, rs.chunks);
            assert_int_equal(ms.corrupt, rs.corrupt);
            corrupt_seen += ms.corrupt;
            char *want = canonical(ref.acc), *got = canonical(m);
            if (strcmp(want, got) != 0)
                fail_msg("case %zu flags %u: merge differs\nwant:\n%.2000s\ngot:\n%.2000s", c,
                         flags, want, got);
            assert_true(pfr_profile_num_samples(m) > 0);
            free(want);
            free(got);
            pfr_profile_free(ref.acc);
            pfr_profile_free(m);
        }
        /* the flame tree through the merge = the tree of every chunk added one by one */
        pfr_query_plan *p = plan(s, cases[c].service, NULL, NULL, 0);
        pfr_kv all[2];
        size_t na = 0;
        for (size_t k = 0; k < cases[c].nlabels; k++)
            all[na++] = cases[c].labels[k];
        for (size_t k = 0; k < cases[c].nsample_labels; k++)
            all[na++] = cases[c].sample_labels[k];
        pfr_query_plan_free(p);
        p = plan(s, cases[c].service, NULL, all, na);
        pfr_tree *fast = pfr_tree_new(), *slow = pfr_tree_new();
        char err[512];
        assert_int_equal(pfr_query_tree(s, p, T0 + cases[c].from * FX_S, T0 + cases[c].to * FX_S,
                                        fast, 0, NULL, err, sizeof(err)),
                         0);
        for (size_t k = 0; k < p->nservices; k++) {
            pfr_store_filter fl = {.from_ns = T0 + cases[c].from * FX_S,
                                   .to_ns = T0 + cases[c].to * FX_S,
                                   .service = p->services[k],
                                   .type = p->type,
                                   .labels = p->profile_labels,
                                   .nlabels = p->nprofile_labels,
                                   .sample_labels = p->sample_labels,
                                   .nsample_labels = p->nsample_labels};
            /* the service prefix only matters with several services: one at a time here */
            if (p->nservices == 1)
                assert_int_equal(pfr_store_scan(s, &fl, 0, tree_cb, slow, NULL), 0);
        }
        if (p->nservices == 1) {
            assert_int_equal(pfr_tree_finish(fast), 0);
            assert_int_equal(pfr_tree_finish(slow), 0);
            pfr_render_opts ro = {.unit = "nanoseconds"};
            char *a = json_of(fast, &ro), *b = json_of(slow, &ro);
            if (strcmp(a, b) != 0)
                fail_msg("case %zu: flame JSON differs", c);
            free(a);
            free(b);
        }
        pfr_tree_free(fast);
        pfr_tree_free(slow);
        pfr_query_plan_free(p);
    }
    assert_true(corrupt_seen > 0);
    /* a handle that read later chunks first reads earlier ones the same */
    pfr_store_filter late = {.from_ns = T0 + 150 * FX_S, .to_ns = T0 + N * 10 * FX_S};
    pfr_store_filter early = {.from_ns = T0, .to_ns = T0 + 150 * FX_S};
    pfr_profile *m1 = NULL, *m2 = NULL;
    assert_int_equal(pfr_store_merge(s, &late, 0, &m1, NULL), 0);
    assert_int_equal(pfr_store_merge(s, &early, 0, &m2, NULL), 0);
    pfr_store *s2 = reader(f);
    pfr_profile *m3 = NULL;
    assert_int_equal(pfr_store_merge(s2, &early, 0, &m3, NULL), 0);
    char *x = canonical(m2), *y = canonical(m3);
    assert_string_equal(x, y);
    free(x);
    free(y);
    pfr_profile_free(m1);
    pfr_profile_free(m2);
    pfr_profile_free(m3);
    pfr_store_close(s2);
    pfr_store_close(s);
}

/* The JSON written directly is byte for byte what jansson writes for the same document: names
 * that need escaping, non-ASCII, reals, diffs, the HTML renderer's escaped slashes; and text that
 * is not UTF-8 is repaired the same way by both. */
static void test_json_writer(void **state)
{
    (void)state;
    pfr_tree *t = pfr_tree_new();
    const char *stacks[][3] = {
        {"main", "quote\"and\\\\back", "ctl\x01\x1f\t\n\r\b\f"},
        {"main", "</script>/path", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5"},
        {"main", "runtime.mallocgc", "[libc.so.6]"},
        {"main", "a/b.c", ""},
    };
    const char *mods[] = {"/usr/bin/app", "/lib/x86_64-linux-gnu/libc.so.6", ""};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(pfr_tree_add_stack(t, 0, stacks[i], mods, 3, 1000.0 * (double)(i + 1)), 0);
        assert_int_equal(pfr_tree_add_stack(t, 1, stacks[i], mods, 3 - i % 2, 333.25 * (double)i),
                         0);
    }
    assert_int_equal(pfr_tree_finish(t), 0);
    const size_t flags[] = {JSON_COMPACT | JSON_REAL_PRECISION(10),
                            JSON_COMPACT | JSON_ESCAPE_SLASH | JSON_REAL_PRECISION(10)};
    pfr_render_opts opts[] = {
        {.title = "t\"/x", .subtitle = "s", .unit = "nanoseconds"},
        {.title = "d", .unit = "nanoseconds", .diff = true, .norm = {0.1, 1.0 / 3}},
        {.unit = "bytes", .norm = {1.0 / 7, 0}},
    };
    for (size_t o = 0; o < 3; o++) {
        for (size_t k = 0; k < 2; k++) {
            for (double mw = 0; mw < 0.5; mw += 0.3) {
                char *want = json_of_doc(t, &opts[o], mw, flags[k]), *got = NULL;
                size_t len;
                assert_int_equal(
                    pfr_render_json_text(t, &opts[o], "{\"x\":1}", mw, flags[k], &got, &len), 0);
                assert_int_equal(len, strlen(got));
                assert_string_equal(got, want);
                free(want);
                free(got);
            }
        }
        char *a = json_of(t, &opts[o]), *b = json_of_doc(t, &opts[o], 0, flags[0]);
        assert_int_equal(strlen(a), strlen(b) + 1);
        assert_memory_equal(a, b, strlen(b));
        free(a);
        free(b);
    }
    pfr_tree_free(t);
    /* not UTF-8: both writers give the name's JSON form (pfr_names.h): bad bytes as \xHH */
    t = pfr_tree_new();
    const char *bad[] = {"main", "x\xc3(\xff\xed\xa0\x80y"};
    const char *bad_mod[] = {"", "/opt/\xfe/lib.so"};
    assert_int_equal(pfr_tree_add_stack(t, 0, bad, bad_mod, 2, 1), 0);
    assert_int_equal(pfr_tree_finish(t), 0);
    char *want = json_of_doc(t, &opts[0], 0, flags[0]), *text = NULL;
    size_t len;
    assert_int_equal(pfr_render_json_text(t, &opts[0], "{\"x\":1}", 0, flags[0], &text, &len), 0);
    assert_string_equal(text, want);
    assert_non_null(strstr(text, "\"x\\\\xc3(\\\\xff\\\\xed\\\\xa0\\\\x80y\""));
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr); /* valid JSON for any parser */
    assert_non_null(doc);
    json_decref(doc);
    free(want);
    free(text);
    pfr_tree_free(t);
}

/* What a FILE* writer wrote, NUL-terminated (the caller frees it). */
static char *written(int rc_want, int (*fn)(FILE *, const void *), const void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(fn(f, arg), rc_want);
    fclose(f);
    return buf;
}

static int ls_text(FILE *f, const void *ls)
{
    return pfr_ls_render_text(f, ls, 0);
}

static int ls_json(FILE *f, const void *ls)
{
    return pfr_ls_render_json(f, ls);
}

/* No byte of text is a control character but the newlines that end its lines. */
static void assert_no_controls(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if ((*p < 0x20 && *p != '\n') || *p == 0x7f)
            fail_msg("control byte 0x%02x at %zu: %.80s", *p,
                     (size_t)(p - (const unsigned char *)text), (const char *)p);
}

/* Service names as Coroot makes them, and hostile ones: ls, plans, the metadata of the pictures
 * and the timeline keep them exact in JSON (bytes that are not UTF-8 as \xHH) and escaped in
 * text; a name matches only itself. */
static void test_names(void **state)
{
    fixture *f = *state;
    assert_int_equal(pfr_fx_names_ring(f->w, T0, 3), 0);
    pfr_store *s = reader(f);
    pfr_ls *ls = NULL;
    char err[1024];
    assert_int_equal(pfr_query_ls(s, &ls, err, sizeof(err)), 0);
    assert_int_equal(ls->nservices, pfr_fx_nnames - 1);
    char *text = written(0, ls_text, ls);
    assert_no_controls(text);
    assert_non_null(strstr(text, "\nservice /k8s/default/api\n"));
    assert_non_null(strstr(text, "\nservice /system.slice/nginx.service\n"));
    assert_non_null(strstr(text, "\nservice \"semi;colon\\nnew line\\x1b[31mred\\x1b[0m\"\n"));
    assert_non_null(strstr(text, "container.id: /k8s/default/api-7d4f9c6b8d-q9zzm/app "
                                 "/k8s/default/api-7d4f9c6b8d-x2b5k/app\n"));
    assert_non_null(strstr(text, "container.id: \"/weird/a+b %2F c?d=e&f#g:8080\"\n"));
    free(text);
    text = written(0, ls_json, ls);
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    assert_non_null(doc);
    json_t *svcs = json_object_get(doc, "services");
    assert_int_equal(json_array_size(svcs), pfr_fx_nnames - 1);
    for (size_t i = 0; i < ls->nservices; i++) {
        const char *name = json_string_value(json_object_get(json_array_get(svcs, i), "name"));
        if (strncmp(ls->services[i].name, "bytes", 5) == 0)
            assert_string_equal(name, "bytes\\xff\\xfe");
        else
            assert_string_equal(name, ls->services[i].name);
    }
    json_decref(doc);
    free(text);
    pfr_ls_free(ls);

    for (size_t k = 0; k < pfr_fx_nnames; k++) {
        const fx_named *n = &pfr_fx_names[k];
        pfr_query_plan *p = plan(s, n->service, NULL, NULL, 0);
        assert_int_equal(p->nservices, 1);
        assert_string_equal(p->services[0], n->service);
        char *meta = NULL, what[512];
        assert_int_equal(pfr_query_meta_json(p, T0, T0 + 30 * FX_S, 0, 0, &meta), 0);
        doc = json_loads(meta, 0, &jerr);
        assert_non_null(doc);
        assert_string_equal(json_string_value(json_object_get(doc, "service")),
                            strncmp(n->service, "bytes", 5) ? n->service : "bytes\\xff\\xfe");
        json_decref(doc);
        free(meta);
        pfr_query_plan_describe(p, what, sizeof(what));
        assert_no_controls(what);
        pfr_timeline *tl = NULL;
        assert_int_equal(
            pfr_query_timeline(s, p, T0, T0 + 30 * FX_S, 0, &tl, NULL, err, sizeof(err)), 0);
        char *tj = NULL;
        size_t tlen = 0;
        FILE *out = open_memstream(&tj, &tlen);
        assert_int_equal(pfr_timeline_render_json(out, tl, p), 0);
        assert_int_equal(pfr_timeline_render_text(out, tl, p, 0), 0);
        fclose(out);
        assert_no_controls(tj);
        pfr_timeline_free(tl);
        free(tj);
        pfr_query_plan_free(p);
    }
    /* the profile label of one instance selects its streams */
    pfr_kv cid = {"container.id", pfr_fx_names[3].container_id};
    pfr_query_plan *p = plan(s, "/k8s/default/api", NULL, &cid, 1);
    assert_int_equal(p->nprofile_labels, 1);
    pfr_tree *t = pfr_tree_new();
    assert_int_equal(pfr_query_tree(s, p, T0, T0 + 30 * FX_S, t, 0, NULL, err, sizeof(err)), 0);
    assert_int_equal(pfr_tree_finish(t), 0);
    assert_true(folded_sum(t) == 3.0 * (double)pfr_fx_names[3].value);
    child_named(t, child_named(t, 0, "main"), "api_q9zzm");
    pfr_tree_free(t);
    pfr_query_plan_free(p);
    /* near misses are not the service; the message shows names escaped */
    static const char *const near[] = {"/k8s/default", "k8s/default/api", "/k8s/default/api/",
                                       "/K8S/default/api", "/k8s/default/api-7d4f9c6b8d-x2b5k/app"};
    for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
        pfr_query q = {.service = near[i]};
        pfr_query_plan *np = NULL;
        assert_int_equal(pfr_query_plan_new(s, &q, &np, err, sizeof(err)), -ENOENT);
        assert_non_null(strstr(err, "no service"));
        assert_non_null(strstr(err, "\"semi;colon\\nnew line\\x1b[31mred\\x1b[0m\""));
        assert_non_null(strstr(err, "/k8s/long/xxxxxxxxxx"));
        assert_no_controls(err);
    }
    pfr_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_folded_totals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_self_diff_neutral, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shift_red, setup, teardown),
        cmocka_unit_test_setup_teardown(test_labels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_services_and_gauge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_fast_path, setup, teardown),
        cmocka_unit_test(test_json_writer),
        cmocka_unit_test_setup_teardown(test_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
