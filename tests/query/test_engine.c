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

#include "pfr_diff.h"
#include "pfr_query.h"
#include "pfr_render.h"
#include "pfr_testgen.h"
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
    f->w = fx_open(f->path);
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
            fx_append(f->w, pfr_testgen_service(g), NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p), 0);
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
        assert_int_equal(fx_append(f->w, "svc", NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p), 0);
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
    assert_int_equal(fx_shift_ring(f->w, "app", T0, 60), 0);
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
        pfr_profile *p = fx_profile("ebpf:cpu:nanoseconds");
        assert_int_equal(fx_sample(p, "main;a", 100, 1, "alpha"), 0);
        assert_int_equal(fx_sample(p, "main;b", 10, 2, "beta"), 0);
        assert_int_equal(
            fx_append(f->w, "api", i % 2 ? h2 : h1, 1, T0 + i * 10 * FX_S, 10 * FX_S, p), 0);
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
    pfr_profile *p = fx_profile("go:heap_alloc_space:bytes");
    assert_int_equal(fx_sample(p, "main;alloc", 1000, -1, NULL), 0);
    assert_int_equal(fx_append(f->w, "worker", NULL, 0, T0, 10 * FX_S, p), 0);
    pfr_profile_free(p);
    p = fx_profile("go:heap_alloc_objects:count");
    assert_int_equal(fx_sample(p, "main;alloc", 3, -1, NULL), 0);
    assert_int_equal(fx_append(f->w, "worker", NULL, 0, T0, 10 * FX_S, p), 0);
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
        pfr_profile *p = fx_profile("ebpf:cpu:nanoseconds");
        assert_int_equal(fx_sample(p, "main;x", 5, 1, "a"), 0);
        assert_int_equal(
            fx_append(f->w, i % 2 ? "svc-b" : "svc-a", NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p),
            0);
        pfr_profile_free(p);
        p = fx_profile("go:heap_inuse_space:bytes");
        assert_int_equal(fx_sample(p, "main;cache", 100 * (i + 1), -1, NULL), 0);
        assert_int_equal(fx_append(f->w, "heapy", NULL, 0, T0 + i * 10 * FX_S, 10 * FX_S, p), 0);
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
    assert_int_equal(fx_shift_ring(f->w, "app", T0, 60), 0);
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
        pfr_profile *p = fx_profile("ebpf:cpu:nanoseconds");
        assert_int_equal(fx_sample(p, "main", 1, 1, "a"), 0);
        assert_int_equal(fx_append(f->w, "api", lab, 2, T0 + i * 10 * FX_S, 10 * FX_S, p), 0);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
