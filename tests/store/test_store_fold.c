/*
 * The coarsest tier's fold (store/store_fold.h) as a pure function: profiles in, folded profile
 * out, no database. Every type's total stays exact (per label set too), the bound holds, labels
 * stay apart, a profile within the bound is left alone, and the degenerate shapes (every sample
 * a root of its own) still fold. docs/store.md, "Tiers".
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store_fold.h"

#define NTYPES 4
static const char *const types[NTYPES] = {"go:profile_cpu:nanoseconds", "go:heap_alloc_space:bytes",
                                          "go:heap_inuse_space:bytes",
                                          "go:goroutine_goroutine:count"};

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static pfr_profile *empty_profile(size_t nt)
{
    pfr_profile *p = pfr_profile_new();
    for (size_t t = 0; t < nt; t++)
        pfr_profile_add_sample_type(p, types[t], t == 0 ? "nanoseconds" : "bytes");
    pfr_profile_set_period(p, "cpu", "nanoseconds", 10000000);
    pfr_profile_set_time(p, 1700000000000000000ll, 3600000000000ll);
    return p;
}

/* A sample of the frames named by path (root first, depth n) with labels pid and comm. */
static void add(pfr_profile *p, const unsigned *path, size_t n, const int64_t *v, int64_t pid)
{
    uint32_t locs[64];
    for (size_t j = 0; j < n; j++) {
        char name[32];
        snprintf(name, sizeof(name), "f%u", path[j]);
        locs[n - 1 - j] = (uint32_t)pfr_profile_add_frame(p, name, "x.go", (int64_t)path[j]);
    }
    pfr_label l[2] = {{.key = "pid", .num = pid}, {.key = "comm", .str = pid == 1 ? "a" : "b"}};
    assert_true(pfr_profile_add_sample(p, locs, n, v, l, 2) >= 0);
}

/* Random walks over a small call graph from 4 roots, heavy-tailed weights, 3 processes: a few
 * thousand distinct stacks sharing prefixes, like an hour of a drifting service. */
static pfr_profile *walks(uint64_t seed, size_t nstacks, size_t nt)
{
    pfr_profile *p = empty_profile(nt);
    uint64_t s = seed;
    for (size_t i = 0; i < nstacks; i++) {
        unsigned path[24];
        size_t depth = 4 + rng(&s) % 20;
        path[0] = (unsigned)(rng(&s) % 4);
        for (size_t j = 1; j < depth; j++)
            path[j] = path[j - 1] * 3 + 1 + (unsigned)(rng(&s) % 3) % 1000;
        double u = (double)(rng(&s) % 1000) / 1000.0;
        int64_t w = 1 + (int64_t)(500 * u * u * u * u);
        int64_t v[NTYPES] = {w * 10000000, (int64_t)(rng(&s) % 100000), (int64_t)(rng(&s) % 1000),
                             (int64_t)(rng(&s) % 5)};
        add(p, path, depth, v, 1 + (int64_t)(rng(&s) % 3));
    }
    assert_int_equal(pfr_profile_error(p), 0);
    return p;
}

/* Per type, per pid (0..3), the sum of the values. */
static void totals(const pfr_profile *p, int64_t out[4][NTYPES])
{
    memset(out, 0, sizeof(int64_t) * 4 * NTYPES);
    size_t nt = pfr_profile_num_sample_types(p);
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        int64_t pid = 0;
        pfr_profile_sample_label_num(p, i, "pid", &pid);
        assert_true(pid >= 0 && pid < 4);
        for (size_t t = 0; t < nt; t++)
            out[pid][t] += pfr_profile_sample_values(p, i)[t];
    }
}

/* Sample i's frames root first as "name:line;name:line;...;" into buf; how many frames. The
 * "[folded]" leaf is left out (*folded says whether there was one). */
static size_t path_of(const pfr_profile *p, size_t i, char *buf, size_t len, bool *folded)
{
    pfr_frame f[64];
    size_t n = pfr_profile_sample_frames(p, i, f, 64);
    assert_true(n <= 64);
    *folded = n > 0 && !strcmp(f[0].function, STORE_FOLD_FRAME);
    size_t at = 0;
    buf[0] = 0;
    for (size_t j = n; j-- > (*folded ? 1u : 0u);) {
        int k = snprintf(buf + at, len - at, "%s:%lld;", f[j].function, (long long)f[j].line);
        assert_true(k > 0 && (size_t)k < len - at);
        at += (size_t)k;
    }
    return n;
}

/* Every stack of q is a stack of p, or a root-first prefix of a longer one plus a "[folded]" leaf
 * (or "[folded]" alone: folded at the root). */
static void stacks_from(const pfr_profile *q, const pfr_profile *p)
{
    size_t np = pfr_profile_num_samples(p);
    char(*paths)[1024] = calloc(np, sizeof(*paths));
    for (size_t k = 0; k < np; k++) {
        bool f;
        path_of(p, k, paths[k], sizeof(paths[k]), &f);
        assert_false(f);
    }
    for (size_t i = 0; i < pfr_profile_num_samples(q); i++) {
        char a[1024];
        bool folded;
        path_of(q, i, a, sizeof(a), &folded);
        size_t la = strlen(a);
        bool found = false;
        for (size_t k = 0; k < np && !found; k++)
            found =
                folded ? strlen(paths[k]) > la && !strncmp(paths[k], a, la) : !strcmp(paths[k], a);
        assert_true(found);
    }
    free(paths);
}

static void test_totals_and_bound(void **state)
{
    (void)state;
    pfr_profile *p = walks(0x1234567, 3000, NTYPES);
    size_t in = pfr_profile_num_samples(p);
    assert_true(in > 2500);
    static const size_t bounds[] = {2000, 500, 100, 20};
    for (size_t b = 0; b < sizeof(bounds) / sizeof(bounds[0]); b++) {
        pfr_profile *q = NULL;
        struct store_fold_stats st;
        assert_int_equal(pfr_st_fold(p, bounds[b], &q, &st), 0);
        assert_non_null(q);
        assert_true(pfr_profile_num_samples(q) <= bounds[b]);
        assert_int_equal(st.out_entries, pfr_profile_num_samples(q));
        assert_int_equal(st.in_entries, in);
        assert_true(st.moved > 0 && st.moved <= 1);
        /* a larger bound keeps more than a smaller would: not all folded away */
        if (bounds[b] >= 500)
            assert_true(pfr_profile_num_samples(q) > bounds[b] / 2);
        int64_t ta[4][NTYPES], tb[4][NTYPES];
        totals(p, ta);
        totals(q, tb);
        assert_memory_equal(ta, tb, sizeof(ta)); /* per type and per label set */
        for (size_t t = 0; t < NTYPES; t++) {
            const char *u1 = NULL, *u2 = NULL;
            assert_string_equal(pfr_profile_sample_type(p, t, &u1),
                                pfr_profile_sample_type(q, t, &u2));
            assert_string_equal(u1, u2);
        }
        const char *pt, *pu;
        assert_int_equal(pfr_profile_period(q, &pt, &pu), 10000000);
        assert_string_equal(pt, "cpu");
        assert_int_equal(pfr_profile_time_nanos(q), pfr_profile_time_nanos(p));
        assert_int_equal(pfr_profile_duration_nanos(q), pfr_profile_duration_nanos(p));
        stacks_from(q, p);
        pfr_profile_free(q);
    }
    pfr_profile_free(p);
}

/* Within the bound (or with none), nothing is made: the caller keeps the profile as it is. */
static void test_under_bound_untouched(void **state)
{
    (void)state;
    pfr_profile *p = walks(42, 300, NTYPES);
    size_t n = pfr_profile_num_samples(p);
    uint8_t *before, *after;
    size_t lb, la;
    assert_int_equal(pfr_profile_encode(p, false, &before, &lb), 0);
    pfr_profile *q = (pfr_profile *)1;
    struct store_fold_stats st;
    assert_int_equal(pfr_st_fold(p, n, &q, &st), 0);
    assert_null(q);
    assert_int_equal(st.out_entries, n);
    q = (pfr_profile *)1;
    assert_int_equal(pfr_st_fold(p, 0, &q, NULL), 0); /* 0: never fold */
    assert_null(q);
    assert_int_equal(pfr_profile_encode(p, false, &after, &la), 0);
    assert_int_equal(la, lb);
    assert_memory_equal(before, after, lb);
    free(before);
    free(after);
    pfr_profile_free(p);
}

/* The same rare stack in two processes stays two entries, each with its own values. */
static void test_labels_apart(void **state)
{
    (void)state;
    pfr_profile *p = empty_profile(1);
    unsigned hot[3] = {0, 1, 2};
    int64_t big = 1000000;
    add(p, hot, 3, &big, 1);
    for (unsigned i = 0; i < 50; i++) {
        unsigned rare[3] = {0, 100 + i, 200 + i};
        int64_t v1 = 3, v2 = 5;
        add(p, rare, 3, &v1, 1);
        add(p, rare, 3, &v2, 2);
    }
    pfr_profile *q = NULL;
    assert_int_equal(pfr_st_fold(p, 3, &q, NULL), 0);
    assert_non_null(q);
    assert_int_equal(pfr_profile_num_samples(q), 3);
    int64_t folded[4] = {0};
    for (size_t i = 0; i < 3; i++) {
        pfr_frame f[4];
        size_t nf = pfr_profile_sample_frames(q, i, f, 4);
        int64_t pid = 0;
        assert_true(pfr_profile_sample_label_num(q, i, "pid", &pid));
        if (!strcmp(f[0].function, STORE_FOLD_FRAME)) {
            /* folded under the root both share, f0 */
            assert_int_equal(nf, 2);
            assert_string_equal(f[1].function, "f0");
            folded[pid] += pfr_profile_sample_values(q, i)[0];
        } else {
            assert_int_equal(nf, 3); /* the hot stack whole */
            assert_int_equal(pfr_profile_sample_values(q, i)[0], big);
        }
    }
    assert_int_equal(folded[1], 150);
    assert_int_equal(folded[2], 250);
    pfr_profile_free(q);
    pfr_profile_free(p);
}

/* A stack heavy in one type only (a leak's in-use bytes, little CPU) is kept: a node weighs its
 * largest share over the types. */
static void test_weight_over_types(void **state)
{
    (void)state;
    pfr_profile *p = empty_profile(3);
    for (unsigned i = 0; i < 200; i++) {
        unsigned path[2] = {0, 1 + i};
        int64_t v[3] = {100, 10, 0};
        add(p, path, 2, v, 1);
    }
    unsigned leak[3] = {0, 999, 1000};
    int64_t v[3] = {1, 1, 1000000};
    add(p, leak, 3, v, 1);
    pfr_profile *q = NULL;
    assert_int_equal(pfr_st_fold(p, 10, &q, NULL), 0);
    assert_non_null(q);
    assert_true(pfr_profile_num_samples(q) <= 10);
    bool kept = false;
    for (size_t i = 0; i < pfr_profile_num_samples(q); i++) {
        pfr_frame f[4];
        size_t nf = pfr_profile_sample_frames(q, i, f, 4);
        if (nf == 3 && !strcmp(f[0].function, "f1000"))
            kept = pfr_profile_sample_values(q, i)[2] == 1000000;
    }
    assert_true(kept);
    pfr_profile_free(q);
    pfr_profile_free(p);
}

/* Every sample a root of its own (no shared caller): all fold into one "[folded]" stack per label
 * set, which is what the bound allows. */
static void test_every_sample_a_root(void **state)
{
    (void)state;
    pfr_profile *p = empty_profile(2);
    int64_t sum[4][2] = {{0}};
    for (unsigned i = 0; i < 500; i++) {
        unsigned path[1] = {i};
        int64_t v[2] = {1 + i, 7};
        int64_t pid = 1 + i % 2;
        add(p, path, 1, v, pid);
        sum[pid][0] += v[0];
        sum[pid][1] += v[1];
    }
    pfr_profile *q = NULL;
    struct store_fold_stats st;
    assert_int_equal(pfr_st_fold(p, 10, &q, &st), 0);
    assert_non_null(q);
    assert_true(pfr_profile_num_samples(q) <= 10);
    int64_t got[4][2] = {{0}};
    for (size_t i = 0; i < pfr_profile_num_samples(q); i++) {
        pfr_frame f[2];
        size_t nf = pfr_profile_sample_frames(q, i, f, 2);
        int64_t pid = 0;
        pfr_profile_sample_label_num(q, i, "pid", &pid);
        for (size_t t = 0; t < 2; t++)
            got[pid][t] += pfr_profile_sample_values(q, i)[t];
        assert_true(nf == 1);
    }
    assert_memory_equal(got, sum, sizeof(sum));
    /* a bound below the label sets: still one entry per label set, totals kept */
    pfr_profile *r = NULL;
    assert_int_equal(pfr_st_fold(p, 1, &r, &st), 0);
    assert_non_null(r);
    assert_int_equal(pfr_profile_num_samples(r), 2);
    for (size_t i = 0; i < 2; i++) {
        pfr_frame f[2];
        assert_int_equal(pfr_profile_sample_frames(r, i, f, 2), 1);
        assert_string_equal(f[0].function, STORE_FOLD_FRAME);
    }
    assert_true(st.moved == 1.0);
    pfr_profile_free(r);
    pfr_profile_free(q);
    pfr_profile_free(p);
}

/* Unsymbolized locations (an address, no line) and modules come out as the store keeps them. */
static void test_frames_kept(void **state)
{
    (void)state;
    pfr_profile *p = empty_profile(1);
    int64_t m = pfr_profile_add_mapping(p, 0x1000, 0x2000, 0, "/usr/bin/x", "");
    for (unsigned i = 0; i < 20; i++) {
        uint32_t locs[2];
        locs[1] = (uint32_t)pfr_profile_add_location(p, m, 0x1000, NULL, 0); /* the caller */
        int64_t f = pfr_profile_add_function(p, "leaf", "leaf", "x.c", 0);
        pfr_line l = {(uint32_t)f, 10 + i};
        locs[0] = (uint32_t)pfr_profile_add_location(p, m, 0x1800, &l, 1);
        int64_t v = i == 0 ? 1000 : 1;
        assert_true(pfr_profile_add_sample(p, locs, 2, &v, NULL, 0) >= 0);
    }
    pfr_profile *q = NULL;
    assert_int_equal(pfr_st_fold(p, 2, &q, NULL), 0);
    assert_non_null(q);
    assert_int_equal(pfr_profile_num_samples(q), 2);
    bool whole = false;
    for (size_t i = 0; i < 2; i++) {
        pfr_frame f[2];
        size_t nf = pfr_profile_sample_frames(q, i, f, 2);
        assert_int_equal(nf, 2);
        if (!strcmp(f[0].function, STORE_FOLD_FRAME)) {
            assert_string_equal(f[0].module, "");
            assert_string_equal(f[0].file, "");
            assert_string_equal(f[1].function, ""); /* the caller of the rare stacks */
            continue;
        }
        whole = true;
        assert_string_equal(f[0].function, "leaf");
        assert_int_equal(f[0].line, 10);
        assert_string_equal(f[0].module, "/usr/bin/x");
        assert_int_equal(f[1].address, 0x1000);
        assert_string_equal(f[1].function, "");
    }
    assert_true(whole);
    pfr_profile_free(q);
    pfr_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_totals_and_bound),    cmocka_unit_test(test_under_bound_untouched),
        cmocka_unit_test(test_labels_apart),        cmocka_unit_test(test_weight_over_types),
        cmocka_unit_test(test_every_sample_a_root), cmocka_unit_test(test_frames_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
