/* Tests of the profile generator: shape, determinism, drift, and the pprof file helper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pfr_testgen.h"

#define T0  1700000000000000000LL
#define TEN 10000000000LL

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted list of stack keys (function names of every frame, joined) of a profile. */
static char **stack_keys(const pfr_profile *p, size_t *n)
{
    *n = pfr_profile_num_samples(p);
    char **keys = calloc(*n, sizeof(*keys));
    assert_non_null(keys);
    pfr_frame fr[512];
    for (size_t i = 0; i < *n; i++) {
        size_t nf = pfr_profile_sample_frames(p, i, fr, 512);
        assert_true(nf <= 512);
        const char *comm = pfr_profile_sample_label_str(p, i, "comm");
        size_t len = strlen(comm) + 2;
        for (size_t j = 0; j < nf; j++)
            len += strlen(fr[j].function) + 24;
        char *k = malloc(len);
        assert_non_null(k);
        size_t off = (size_t)snprintf(k, len, "%s|", comm);
        for (size_t j = 0; j < nf; j++)
            off += (size_t)snprintf(k + off, len - off, "%s:%lld;", fr[j].function,
                                    (long long)fr[j].line);
        keys[i] = k;
    }
    qsort(keys, *n, sizeof(*keys), cmp_str);
    return keys;
}

static size_t common_keys(char **a, size_t na, char **b, size_t nb)
{
    size_t c = 0;
    for (size_t i = 0; i < na; i++)
        c += bsearch(&a[i], b, nb, sizeof(*b), cmp_str) != NULL;
    return c;
}

static void free_keys(char **k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(k[i]);
    free(k);
}

static void test_shape(void **state)
{
    (void)state;
    pfr_testgen *g = pfr_testgen_new(1, 0, NULL);
    assert_non_null(g);
    assert_string_equal(pfr_testgen_service(g), "svc-0");
    pfr_profile *p = pfr_testgen_next(g, T0, TEN);
    assert_non_null(p);
    assert_int_equal(pfr_profile_num_sample_types(p), 1);
    const char *unit;
    assert_string_equal(pfr_profile_sample_type(p, 0, &unit), "ebpf:cpu:nanoseconds");
    assert_string_equal(unit, "nanoseconds");
    const char *pt, *pu;
    assert_int_equal(pfr_profile_period(p, &pt, &pu), 10000000);
    assert_string_equal(pt, "cpu");
    assert_string_equal(pu, "nanoseconds");
    assert_int_equal(pfr_profile_time_nanos(p), T0);
    assert_int_equal(pfr_profile_duration_nanos(p), TEN);
    size_t ns = pfr_profile_num_samples(p);
    assert_true(ns >= 380 && ns <= 400);
    size_t mind = SIZE_MAX, maxd = 0;
    for (size_t i = 0; i < ns; i++) {
        size_t n;
        pfr_profile_sample_locations(p, i, &n);
        mind = n < mind ? n : mind;
        maxd = n > maxd ? n : maxd;
        int64_t pid;
        assert_true(pfr_profile_sample_label_num(p, i, "pid", &pid));
        assert_true(pid >= 1000);
        assert_non_null(pfr_profile_sample_label_str(p, i, "comm"));
        assert_true(pfr_profile_sample_values(p, i)[0] % 10000000 == 0);
        assert_true(pfr_profile_sample_values(p, i)[0] > 0);
    }
    assert_true(mind >= 10 && mind <= 15);
    assert_true(maxd >= 55 && maxd <= 60);
    size_t nstr = pfr_profile_num_strings(p);
    assert_true(nstr >= 1500 && nstr <= 10000);
    print_message("profile: %zu samples, %zu strings, %zu functions, %zu locations, depth %zu-%zu, "
                  "total %lld ns\n",
                  ns, nstr, pfr_profile_num_functions(p), pfr_profile_num_locations(p), mind, maxd,
                  (long long)pfr_testgen_total(p));
    pfr_profile_free(p);
    pfr_testgen_free(g);
}

static void test_deterministic(void **state)
{
    (void)state;
    pfr_testgen *a = pfr_testgen_new(7, 3, NULL), *b = pfr_testgen_new(7, 3, NULL);
    pfr_testgen *c = pfr_testgen_new(7, 4, NULL);
    for (int i = 0; i < 3; i++) {
        pfr_profile *pa = pfr_testgen_next(a, T0 + i * TEN, TEN);
        pfr_profile *pb = pfr_testgen_next(b, T0 + i * TEN, TEN);
        pfr_profile *pc = pfr_testgen_next(c, T0 + i * TEN, TEN);
        uint8_t *ba, *bb, *bc;
        size_t la, lb, lc;
        assert_int_equal(pfr_profile_encode(pa, false, &ba, &la), 0);
        assert_int_equal(pfr_profile_encode(pb, false, &bb, &lb), 0);
        assert_int_equal(pfr_profile_encode(pc, false, &bc, &lc), 0);
        assert_int_equal(la, lb);
        assert_memory_equal(ba, bb, la);
        assert_false(la == lc && memcmp(ba, bc, la) == 0);
        free(ba);
        free(bb);
        free(bc);
        pfr_profile_free(pa);
        pfr_profile_free(pb);
        pfr_profile_free(pc);
    }
    pfr_testgen_free(a);
    pfr_testgen_free(b);
    pfr_testgen_free(c);
}

static void test_drift(void **state)
{
    (void)state;
    pfr_testgen *g = pfr_testgen_new(11, 1, NULL);
    pfr_profile *prev = pfr_testgen_next(g, T0, TEN);
    size_t np;
    char **kp = stack_keys(prev, &np);
    size_t first_n = np;
    char **first = kp;
    for (int i = 1; i <= 10; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + i * TEN, TEN);
        size_t n;
        char **k = stack_keys(p, &n);
        size_t common = common_keys(k, n, kp, np);
        /* 3% drift: most stacks repeat, some do not */
        assert_true(common * 100 >= n * 94);
        assert_true(common < n);
        if (kp != first)
            free_keys(kp, np);
        kp = k;
        np = n;
        pfr_profile_free(p);
    }
    /* after 10 intervals, a visible part of the stacks changed */
    size_t common = common_keys(kp, np, first, first_n);
    assert_true(common * 100 <= np * 90);
    free_keys(kp, np);
    free_keys(first, first_n);
    pfr_profile_free(prev);
    pfr_testgen_free(g);

    pfr_testgen_opts o = {.no_drift = true, .nstacks = 50};
    g = pfr_testgen_new(11, 1, &o);
    pfr_profile *a = pfr_testgen_next(g, T0, TEN), *b = pfr_testgen_next(g, T0 + TEN, TEN);
    size_t na, nb;
    char **ka = stack_keys(a, &na), **kb = stack_keys(b, &nb);
    assert_true(na <= 50);
    assert_int_equal(common_keys(ka, na, kb, nb), na);
    free_keys(ka, na);
    free_keys(kb, nb);
    pfr_profile_free(a);
    pfr_profile_free(b);
    pfr_testgen_free(g);
}

static void test_write_pprof(void **state)
{
    (void)state;
    pfr_testgen *g = pfr_testgen_new(5, 2, NULL);
    pfr_profile *p = pfr_testgen_next(g, T0, TEN);
    char path[] = "/tmp/pfr-testgen-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(pfr_testgen_write_pprof(p, path), 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t buf[4 << 20];
    size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    unlink(path);
    assert_true(len > 1000 && len < sizeof(buf));
    assert_int_equal(buf[0], 0x1f);
    pfr_profile *q = NULL;
    char err[128];
    assert_int_equal(pfr_profile_decode(buf, len, 0, &q, err, sizeof(err)), 0);
    assert_int_equal(pfr_testgen_total(q), pfr_testgen_total(p));
    assert_int_equal(pfr_profile_num_samples(q), pfr_profile_num_samples(p));
    print_message("gzip'd pprof: %zu bytes\n", len);
    assert_int_equal(pfr_testgen_write_pprof(p, "/nonexistent-dir/x.pb.gz"), -ENOENT);
    pfr_profile_free(q);
    pfr_profile_free(p);
    pfr_testgen_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_drift),
        cmocka_unit_test(test_write_pprof),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
