/* Unit tests of pfr_scrape's parts: the target line, URLs and labels, the pprof conversion and
 * deltas, /proc/net/tcp parsing, the ELF check, the Kubernetes pod list, backoff. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_scrape.h"
#include "scrape_convert.h"
#include "scrape_elf.h"
#include "scrape_elfgen.h"
#include "scrape_internal.h"
#include "scrape_k8s.h"
#include "scrape_local.h"
#include "scrape_procnet.h"
#include "scrape_testutil.h"

/* ---- target line, URLs, labels ---- */

static const char *label(const pfr_kv *l, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].key, key) == 0)
            return l[i].value;
    return NULL;
}

static void test_parse_target(void **state)
{
    (void)state;
    char err[256];
    pfr_scrape_target *t;
    assert_int_equal(pfr_scrape_parse_target("  http://127.0.0.1:6060   service=api env=prod\t"
                                             "team=core ",
                                             &t, err, sizeof(err)),
                     0);
    assert_string_equal(t->url, "http://127.0.0.1:6060");
    assert_string_equal(t->service, "api");
    assert_int_equal(t->nlabels, 2);
    assert_string_equal(label(t->labels, t->nlabels, "env"), "prod");
    assert_string_equal(label(t->labels, t->nlabels, "team"), "core");
    free(t);

    static const char *const bad[] = {
        "",
        "   ",
        "http://127.0.0.1:6060",                       /* no service */
        "http://127.0.0.1:6060 service=",              /* empty service */
        "http://127.0.0.1:6060 service=a service=b",   /* twice */
        "http://127.0.0.1:6060 service=a env",         /* no = */
        "http://127.0.0.1:6060 service=a =x",          /* no key */
        "http://127.0.0.1:6060 service=a 9x=1",        /* bad key */
        "http://127.0.0.1:6060 service=a env=1 env=2", /* label twice */
        "ftp://127.0.0.1:6060 service=a",              /* scheme */
        "127.0.0.1:6060 service=a",                    /* no scheme */
        "http://127.0.0.1:6060/?x=1 service=a",        /* query */
        "http://u:p@127.0.0.1:6060 service=a",         /* user */
        "http://127.0.0.1:6060#frag service=a",        /* fragment */
        "http:// service=a",                           /* no host */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        t = (pfr_scrape_target *)1;
        int rc = pfr_scrape_parse_target(bad[i], &t, err, sizeof(err));
        if (rc != -EINVAL)
            fprintf(stderr, "accepted: '%s'\n", bad[i]);
        assert_int_equal(rc, -EINVAL);
        assert_null(t);
        assert_true(err[0] != '\0');
    }
}

static void test_want_urls(void **state)
{
    (void)state;
    static const struct {
        const char *url, *base, *instance;
    } cases[] = {
        {"http://127.0.0.1:6060", "http://127.0.0.1:6060/debug/pprof", "127.0.0.1:6060"},
        {"http://127.0.0.1:6060/", "http://127.0.0.1:6060/debug/pprof", "127.0.0.1:6060"},
        {"http://h:1/debug/pprof/", "http://h:1/debug/pprof", "h:1"},
        {"http://h:1/admin", "http://h:1/admin/debug/pprof", "h:1"},
        {"https://example.com", "https://example.com:443/debug/pprof", "example.com:443"},
        {"http://[::1]:7000", "http://[::1]:7000/debug/pprof", "[::1]:7000"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sc_want w;
        char err[256];
        assert_int_equal(pfr_scrape_want_make(&w, cases[i].url, "svc", NULL, 0, PFR_SCRAPE_STATIC,
                                              0, 0, err, sizeof(err)),
                         0);
        assert_string_equal(w.base, cases[i].base);
        assert_string_equal(label(w.labels, w.nlabels, "instance"), cases[i].instance);
        pfr_scrape_want_free(&w);
    }
    /* a configured instance wins; labels come out sorted; keys tell targets apart */
    pfr_kv l[2] = {{"zone", "a"}, {"instance", "mine"}};
    struct sc_want a, b;
    assert_int_equal(
        pfr_scrape_want_make(&a, "http://h:1", "svc", l, 2, PFR_SCRAPE_STATIC, 0, 0, NULL, 0), 0);
    assert_int_equal(a.nlabels, 2);
    assert_string_equal(a.labels[0].key, "instance");
    assert_string_equal(a.labels[0].value, "mine");
    assert_int_equal(
        pfr_scrape_want_make(&b, "http://h:1", "svc", l, 1, PFR_SCRAPE_STATIC, 0, 0, NULL, 0), 0);
    assert_string_not_equal(a.key, b.key);
    pfr_scrape_want_free(&a);
    pfr_scrape_want_free(&b);
    pfr_kv reserved = {"service.name", "x"};
    assert_int_equal(pfr_scrape_want_make(&a, "http://h:1", "svc", &reserved, 1, PFR_SCRAPE_STATIC,
                                          0, 0, NULL, 0),
                     -EINVAL);
}

static void test_endpoints_and_modes(void **state)
{
    (void)state;
    unsigned m;
    char err[128];
    assert_int_equal(pfr_scrape_parse_endpoints("cpu,heap", &m, err, sizeof(err)), 0);
    assert_int_equal(m, (1u << PFR_SCRAPE_CPU) | (1u << PFR_SCRAPE_HEAP));
    assert_int_equal(pfr_scrape_parse_endpoints("all", &m, err, sizeof(err)), 0);
    assert_int_equal(m, PFR_SCRAPE_ALL_ENDPOINTS);
    assert_int_equal(pfr_scrape_parse_endpoints("block, mutex goroutine", &m, err, sizeof(err)), 0);
    assert_int_equal(m, (1u << PFR_SCRAPE_BLOCK) | (1u << PFR_SCRAPE_MUTEX) |
                            (1u << PFR_SCRAPE_GOROUTINE));
    assert_int_equal(pfr_scrape_parse_endpoints("cpu,trace", &m, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "trace"));
    assert_int_equal(pfr_scrape_parse_endpoints("", &m, err, sizeof(err)), -EINVAL);
    enum pfr_scrape_local_mode lm;
    assert_int_equal(pfr_scrape_parse_local_mode("off", &lm), 0);
    assert_int_equal(lm, PFR_SCRAPE_LOCAL_OFF);
    assert_int_equal(pfr_scrape_parse_local_mode("AUTO", &lm), 0);
    assert_int_equal(lm, PFR_SCRAPE_LOCAL_AUTO);
    assert_int_equal(pfr_scrape_parse_local_mode("maybe", &lm), -EINVAL);
    assert_string_equal(pfr_scrape_endpoint_name(PFR_SCRAPE_MUTEX), "mutex");
    assert_null(pfr_scrape_endpoint_name(PFR_SCRAPE_NUM_ENDPOINTS));
}

static void test_backoff(void **state)
{
    (void)state;
    struct sc_backoff b = {0};
    const int64_t s = SC_NS_PER_SEC;
    assert_true(pfr_scrape_backoff_due(&b, 0, 10 * s));
    /* steps 10, 20, 40, then the 40 s cap: only growing waits are new steps */
    assert_true(pfr_scrape_backoff_fail(&b, 0, 10 * s, 40 * s));
    assert_int_equal(b.delay_ns, 10 * s);
    assert_true(pfr_scrape_backoff_fail(&b, 0, 10 * s, 40 * s));
    assert_int_equal(b.delay_ns, 20 * s);
    assert_true(pfr_scrape_backoff_fail(&b, 0, 10 * s, 40 * s));
    assert_int_equal(b.delay_ns, 40 * s);
    assert_false(pfr_scrape_backoff_fail(&b, 0, 10 * s, 40 * s));
    assert_false(pfr_scrape_backoff_fail(&b, 0, 10 * s, 40 * s));
    assert_int_equal(b.consecutive, 5);
    assert_false(pfr_scrape_backoff_due(&b, 20 * s, 10 * s));
    assert_true(
        pfr_scrape_backoff_due(&b, 38 * s, 10 * s)); /* a quarter interval early is on time */
    for (int i = 0; i < 100; i++)
        pfr_scrape_backoff_fail(&b, 0, 10 * s, 40 * s); /* no overflow */
    assert_int_equal(b.delay_ns, 40 * s);
    assert_true(pfr_scrape_backoff_ok(&b));
    assert_false(pfr_scrape_backoff_ok(&b));
    assert_true(pfr_scrape_backoff_due(&b, 0, 10 * s));
}

/* ---- conversion ---- */

/* A profile of Go's shape for endpoint ep: stacks leaf..main, values per sample. */
static pfr_profile *go_profile(int ep, const char *const *leaves, const int64_t *vals, size_t n)
{
    pfr_profile *p = pfr_profile_new();
    size_t nt = 0;
    switch (ep) {
    case PFR_SCRAPE_CPU:
        pfr_profile_add_sample_type(p, "samples", "count");
        pfr_profile_add_sample_type(p, "cpu", "nanoseconds");
        pfr_profile_set_period(p, "cpu", "nanoseconds", 10000000);
        nt = 2;
        break;
    case PFR_SCRAPE_HEAP:
        pfr_profile_add_sample_type(p, "alloc_objects", "count");
        pfr_profile_add_sample_type(p, "alloc_space", "bytes");
        pfr_profile_add_sample_type(p, "inuse_objects", "count");
        pfr_profile_add_sample_type(p, "inuse_space", "bytes");
        nt = 4;
        break;
    case PFR_SCRAPE_GOROUTINE:
        pfr_profile_add_sample_type(p, "goroutine", "count");
        nt = 1;
        break;
    default:
        pfr_profile_add_sample_type(p, "contentions", "count");
        pfr_profile_add_sample_type(p, "delay", "nanoseconds");
        nt = 2;
        break;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t locs[2];
        locs[0] = (uint32_t)pfr_profile_add_frame(p, leaves[i], "/src/x.go", 7);
        locs[1] = (uint32_t)pfr_profile_add_frame(p, "main.main", "/src/x.go", 1);
        pfr_profile_add_sample(p, locs, 2, vals + i * nt, NULL, 0);
    }
    assert_int_equal(pfr_profile_error(p), 0);
    return p;
}

static void test_convert_cpu(void **state)
{
    (void)state;
    const char *leaves[2] = {"main.a", "main.b"};
    int64_t vals[4] = {3, 30000000, 1, 10000000};
    pfr_profile *src = go_profile(PFR_SCRAPE_CPU, leaves, vals, 2);
    struct sc_series st = {0};
    struct sc_convert_result res;
    char err[128];
    assert_int_equal(
        pfr_scrape_convert(PFR_SCRAPE_CPU, src, &st, 1000, 2000, &res, err, sizeof(err)), 0);
    assert_non_null(res.profile);
    assert_int_equal(pfr_profile_num_sample_types(res.profile), 1);
    const char *unit;
    assert_string_equal(pfr_profile_sample_type(res.profile, 0, &unit), PFR_SCRAPE_TYPE_CPU);
    assert_string_equal(unit, "nanoseconds");
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.a"), 30000000);
    assert_int_equal(pfr_profile_time_nanos(res.profile), 1000);
    assert_int_equal(pfr_profile_duration_nanos(res.profile), 1000);
    const char *pt, *pu;
    assert_int_equal(pfr_profile_period(res.profile, &pt, &pu), 10000000);
    pfr_profile_free(res.profile);
    pfr_profile_free(src);
    pfr_scrape_series_free(&st);
}

static void test_convert_deltas(void **state)
{
    (void)state;
    const int ep = PFR_SCRAPE_BLOCK;
    const char *leaves[3] = {"main.a", "main.b", "main.a"};
    struct sc_series st = {0};
    struct sc_convert_result res;
    char err[128];

    /* first scrape: a baseline, nothing to write */
    int64_t v1[6] = {10, 1000, 5, 500, 1, 100}; /* main.a twice: 11 */
    pfr_profile *src = go_profile(ep, leaves, v1, 3);
    assert_int_equal(pfr_scrape_convert(ep, src, &st, 0, 10, &res, err, sizeof(err)), 0);
    assert_true(res.baseline);
    assert_false(res.reset);
    assert_null(res.profile);
    assert_int_equal(res.stacks, 2);
    pfr_profile_free(src);

    /* second: the differences, with Coroot's names; unchanged stacks are left out */
    int64_t v2[6] = {15, 1600, 5, 500, 1, 100};
    src = go_profile(ep, leaves, v2, 3);
    assert_int_equal(pfr_scrape_convert(ep, src, &st, 10, 20, &res, err, sizeof(err)), 0);
    assert_false(res.baseline);
    assert_false(res.reset);
    assert_non_null(res.profile);
    assert_string_equal(pfr_profile_sample_type(res.profile, 0, NULL),
                        PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS);
    assert_string_equal(pfr_profile_sample_type(res.profile, 1, NULL), PFR_SCRAPE_TYPE_BLOCK_DELAY);
    assert_int_equal(pfr_profile_num_samples(res.profile), 1);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.a"), 5); /* 15 + 1 - (10 + 1) */
    assert_int_equal(pfr_tu_value_of(res.profile, 1, "main.a"), 600);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.b"), 0);
    pfr_profile_free(res.profile);
    pfr_profile_free(src);

    /* a counter that went down: the program restarted; its values are all since then */
    int64_t v3[6] = {2, 200, 6, 600, 0, 0};
    src = go_profile(ep, leaves, v3, 3);
    assert_int_equal(pfr_scrape_convert(ep, src, &st, 20, 30, &res, err, sizeof(err)), 0);
    assert_true(res.reset);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.a"), 2);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.b"), 6);
    pfr_profile_free(res.profile);
    pfr_profile_free(src);

    /* then deltas again from the new baseline */
    int64_t v4[6] = {3, 300, 6, 600, 0, 0};
    src = go_profile(ep, leaves, v4, 3);
    assert_int_equal(pfr_scrape_convert(ep, src, &st, 30, 40, &res, err, sizeof(err)), 0);
    assert_false(res.reset);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.a"), 1);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.b"), 0);
    pfr_profile_free(res.profile);
    pfr_profile_free(src);

    /* a stack that vanished is a restart too, even if the others grew */
    const char *one[1] = {"main.a"};
    int64_t v5[2] = {100, 10000};
    src = go_profile(ep, one, v5, 1);
    assert_int_equal(pfr_scrape_convert(ep, src, &st, 40, 50, &res, err, sizeof(err)), 0);
    assert_true(res.reset);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.a"), 100);
    pfr_profile_free(res.profile);
    pfr_profile_free(src);
    pfr_scrape_series_free(&st);
}

/* Go writes one location per PC: two PCs on the same line are the same stack to Coroot, and
 * so to the delta. Labels (Go's heap "bytes") are dropped. */
static void test_convert_aggregates(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "contentions", "count");
    pfr_profile_add_sample_type(p, "delay", "nanoseconds");
    int64_t f = pfr_profile_add_function(p, "main.a", "main.a", "/src/x.go", 0);
    int64_t m = pfr_profile_add_function(p, "main.main", "main.main", "/src/x.go", 0);
    pfr_line la = {(uint32_t)f, 7}, lm = {(uint32_t)m, 1};
    uint32_t s1[2], s2[2];
    s1[0] = (uint32_t)pfr_profile_add_location(p, -1, 0x1000, &la, 1);
    s2[0] = (uint32_t)pfr_profile_add_location(p, -1, 0x1004, &la, 1);
    s1[1] = s2[1] = (uint32_t)pfr_profile_add_location(p, -1, 0x2000, &lm, 1);
    int64_t v1[2] = {1, 10}, v2[2] = {2, 20};
    pfr_label lab = {.key = "bytes", .num = 64};
    pfr_profile_add_sample(p, s1, 2, v1, &lab, 1);
    pfr_profile_add_sample(p, s2, 2, v2, NULL, 0);
    assert_int_equal(pfr_profile_num_samples(p), 2);
    struct sc_series st = {.have = true, .ncum = 2}; /* an empty baseline */
    struct sc_convert_result res;
    assert_int_equal(pfr_scrape_convert(PFR_SCRAPE_BLOCK, p, &st, 0, 10, &res, NULL, 0), 0);
    assert_int_equal(res.stacks, 1);
    assert_int_equal(pfr_profile_num_samples(res.profile), 1);
    assert_int_equal(pfr_profile_sample_values(res.profile, 0)[0], 3);
    assert_int_equal(pfr_profile_sample_values(res.profile, 0)[1], 30);
    const pfr_label *labels;
    assert_int_equal(pfr_profile_sample_labels(res.profile, 0, &labels), 0);
    pfr_profile_free(res.profile);
    pfr_profile_free(p);
    pfr_scrape_series_free(&st);
}

static void test_convert_heap(void **state)
{
    (void)state;
    const char *leaves[1] = {"main.alloc"};
    struct sc_series st = {0};
    struct sc_convert_result res;
    /* first scrape: in-use values at once, alloc_* zero (baseline) */
    int64_t v1[4] = {100, 6400, 4, 256};
    pfr_profile *src = go_profile(PFR_SCRAPE_HEAP, leaves, v1, 1);
    assert_int_equal(pfr_scrape_convert(PFR_SCRAPE_HEAP, src, &st, 0, 10, &res, NULL, 0), 0);
    assert_true(res.baseline);
    assert_non_null(res.profile);
    assert_int_equal(pfr_profile_num_sample_types(res.profile), 4);
    assert_string_equal(pfr_profile_sample_type(res.profile, 0, NULL),
                        PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS);
    assert_string_equal(pfr_profile_sample_type(res.profile, 3, NULL),
                        PFR_SCRAPE_TYPE_HEAP_INUSE_SPACE);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.alloc"), 0);
    assert_int_equal(pfr_tu_value_of(res.profile, 3, "main.alloc"), 256);
    pfr_profile_free(res.profile);
    pfr_profile_free(src);
    /* then alloc_* are deltas, inuse_* as they are (in-use going down is no restart) */
    int64_t v2[4] = {150, 9600, 1, 64};
    src = go_profile(PFR_SCRAPE_HEAP, leaves, v2, 1);
    assert_int_equal(pfr_scrape_convert(PFR_SCRAPE_HEAP, src, &st, 10, 20, &res, NULL, 0), 0);
    assert_false(res.reset);
    assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.alloc"), 50);
    assert_int_equal(pfr_tu_value_of(res.profile, 1, "main.alloc"), 3200);
    assert_int_equal(pfr_tu_value_of(res.profile, 2, "main.alloc"), 1);
    pfr_profile_free(res.profile);
    pfr_profile_free(src);
    pfr_scrape_series_free(&st);

    /* goroutines: a snapshot, never a delta */
    const char *g[1] = {"main.park"};
    int64_t gv[1] = {8};
    src = go_profile(PFR_SCRAPE_GOROUTINE, g, gv, 1);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pfr_scrape_convert(PFR_SCRAPE_GOROUTINE, src, &st, 0, 10, &res, NULL, 0),
                         0);
        assert_int_equal(pfr_tu_value_of(res.profile, 0, "main.park"), 8);
        assert_string_equal(pfr_profile_sample_type(res.profile, 0, NULL),
                            PFR_SCRAPE_TYPE_GOROUTINES);
        pfr_profile_free(res.profile);
    }
    pfr_profile_free(src);
    pfr_scrape_series_free(&st);
}

static void test_convert_rejects(void **state)
{
    (void)state;
    struct sc_series st = {0};
    struct sc_convert_result res;
    char err[128];
    /* a heap profile offered as a CPU profile: the type it needs is missing */
    const char *leaves[1] = {"main.x"};
    int64_t v[4] = {1, 2, 3, 4};
    pfr_profile *src = go_profile(PFR_SCRAPE_HEAP, leaves, v, 1);
    assert_int_equal(pfr_scrape_convert(PFR_SCRAPE_CPU, src, &st, 0, 10, &res, err, sizeof(err)),
                     -EBADMSG);
    assert_non_null(strstr(err, "cpu/nanoseconds"));
    assert_null(res.profile);
    pfr_profile_free(src);
    /* negative values */
    int64_t neg[2] = {-1, 5};
    src = go_profile(PFR_SCRAPE_MUTEX, leaves, neg, 1);
    assert_int_equal(pfr_scrape_convert(PFR_SCRAPE_MUTEX, src, &st, 0, 10, &res, err, sizeof(err)),
                     -EBADMSG);
    assert_false(st.have); /* the series is untouched */
    pfr_profile_free(src);
    /* an empty profile of the right kind is fine: nothing to write */
    src = go_profile(PFR_SCRAPE_GOROUTINE, NULL, NULL, 0);
    assert_int_equal(
        pfr_scrape_convert(PFR_SCRAPE_GOROUTINE, src, &st, 0, 10, &res, err, sizeof(err)), 0);
    assert_null(res.profile);
    assert_int_equal(pfr_scrape_convert(99, src, &st, 0, 10, &res, err, sizeof(err)), -EINVAL);
    assert_int_equal(
        pfr_scrape_convert(PFR_SCRAPE_GOROUTINE, src, &st, 10, 10, &res, err, sizeof(err)),
        -EINVAL); /* an empty interval */
    pfr_profile_free(src);
    pfr_scrape_series_free(&st);
}

/* ---- /proc/net/tcp ---- */

static void test_procnet(void **state)
{
    (void)state;
    static const char tcp[] =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0     "
        "   0 12345 1 0000000000000000 100 0 0 10 0\n"
        "   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0     "
        "   0 222 1 0000000000000000 100 0 0 10 0\n"
        "   2: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0     "
        "   0 333 1 0000000000000000 100 0 0 10 0\n"
        "   3: 0500000A:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0     "
        "   0 444 1\n"
        "   4: garbage line\n"
        "   5: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0     "
        "   0 0 1\n";
    struct sc_listen *v = NULL;
    size_t n = 0, bad = 0;
    assert_int_equal(pfr_scrape_procnet_parse(tcp, false, &v, &n, 100, &bad), 0);
    assert_int_equal(n, 3); /* established and inode 0 are not listeners */
    assert_int_equal(bad, 1);
    char host[64];
    assert_int_equal(v[0].port, 8080);
    assert_int_equal(v[0].inode, 12345);
    assert_true(pfr_scrape_listen_host(&v[0], host, sizeof(host)));
    assert_string_equal(host, "127.0.0.1");
    assert_true(pfr_scrape_listen_host(&v[1], host, sizeof(host)));
    assert_string_equal(host, "127.0.0.1"); /* 0.0.0.0 */
    assert_int_equal(v[1].port, 22);
    assert_true(pfr_scrape_listen_host(&v[2], host, sizeof(host)));
    assert_string_equal(host, "10.0.0.5");
    free(v);

    static const char tcp6[] =
        "  sl  local_address                         remote_address                        st\n"
        "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A "
        "00000000:00000000 00:00000000 00000000     0        0 777 1\n"
        "   1: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A "
        "00000000:00000000 00:00000000 00000000     0        0 778 1\n"
        "   2: 0000000000000000FFFF00000100007F:1F92 00000000000000000000000000000000:0000 0A "
        "00000000:00000000 00:00000000 00000000     0        0 779 1\n"
        "   3: 000080FE00000000FF005452120034FE:1F93 00000000000000000000000000000000:0000 0A "
        "00000000:00000000 00:00000000 00000000     0        0 780 1\n";
    v = NULL;
    n = 0;
    assert_int_equal(pfr_scrape_procnet_parse(tcp6, true, &v, &n, 100, NULL), 0);
    assert_int_equal(n, 4);
    assert_true(pfr_scrape_listen_host(&v[0], host, sizeof(host)));
    assert_string_equal(host, "[::1]");
    assert_true(pfr_scrape_listen_host(&v[1], host, sizeof(host)));
    assert_string_equal(host, "[::1]");
    assert_true(pfr_scrape_listen_host(&v[2], host, sizeof(host)));
    assert_string_equal(host, "127.0.0.1");
    assert_false(pfr_scrape_listen_host(&v[3], host, sizeof(host))); /* link-local */
    free(v);
    /* the bound is kept */
    v = NULL;
    n = 0;
    assert_int_equal(pfr_scrape_procnet_parse(tcp, false, &v, &n, 1, NULL), 0);
    assert_int_equal(n, 1);
    free(v);
}

/* ---- ELF ---- */

struct membuf {
    const uint8_t *data;
    size_t len;
};

static ssize_t mem_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
    const struct membuf *m = ctx;
    if (off >= m->len)
        return 0;
    size_t n = m->len - off < len ? (size_t)(m->len - off) : len;
    memcpy(buf, m->data + off, n);
    return (ssize_t)n;
}

static int inspect(const uint8_t *b, size_t len, struct sc_elf_info *info)
{
    struct membuf m = {b, len};
    struct sc_file f = {.ctx = &m, .pread = mem_pread, .size = len};
    char err[128];
    return pfr_scrape_elf_inspect(&f, info, err, sizeof(err));
}

static void check_elf(unsigned flags, size_t pad, int want_rc, bool is_go, bool pprof,
                      bool from_pclntab)
{
    uint8_t *b;
    size_t len;
    assert_int_equal(pfr_eg_go_binary(flags, SC_PPROF_SYMBOL, pad, &b, &len), 0);
    struct sc_elf_info info;
    int rc = inspect(b, len, &info);
    if (rc != want_rc || info.is_go != is_go || info.pprof != pprof)
        fprintf(stderr, "flags %#x pad %zu: rc %d go %d pprof %d\n", flags, pad, rc, info.is_go,
                info.pprof);
    assert_int_equal(rc, want_rc);
    assert_int_equal(info.is_go, is_go);
    assert_int_equal(info.pprof, pprof);
    assert_int_equal(info.from_pclntab, from_pclntab);
    free(b);
}

static void test_elf(void **state)
{
    (void)state;
    check_elf(EG_GO | EG_SYMTAB, 0, 0, true, true, false);
    check_elf(EG_SYMTAB, 0, 0, false, false, false); /* not Go */
    check_elf(EG_GO | EG_SYMTAB | EG_BAD_MAGIC, 0, 0, false, false, false);
    check_elf(EG_GO | EG_SYMTAB | EG_AS_OBJECT, 0, 0, true, false, false); /* not a function */
    check_elf(EG_GO, 0, 0, true, false, false);                            /* no tables at all */
    check_elf(EG_GO | EG_PCLNTAB, 0, 0, true, true, true);                 /* stripped */
    check_elf(EG_GO | EG_PCLNTAB | EG_NO_LEADING_NUL, 0, 0, true, false, false);
    /* a symtab name may be the tail of a longer string: st_name decides */
    check_elf(EG_GO | EG_SYMTAB | EG_NO_LEADING_NUL, 0, 0, true, true, false);
    /* the name straddles a 64 KiB block boundary of the streamed table */
    for (size_t pad = 65536 - 30; pad < 65536 + 2; pad += 3) {
        check_elf(EG_GO | EG_SYMTAB, pad, 0, true, true, false);
        check_elf(EG_GO | EG_PCLNTAB, pad, 0, true, true, true);
    }

    /* a longer name that merely starts like it does not count */
    uint8_t *b;
    size_t len;
    assert_int_equal(pfr_eg_go_binary(EG_GO | EG_PCLNTAB, SC_PPROF_SYMBOL "Extra", 0, &b, &len), 0);
    struct sc_elf_info info;
    assert_int_equal(inspect(b, len, &info), 0);
    assert_false(info.pprof);
    free(b);

    /* truncations and corruptions: an error or a clean "no", never a crash */
    assert_int_equal(pfr_eg_go_binary(EG_GO | EG_SYMTAB, SC_PPROF_SYMBOL, 0, &b, &len), 0);
    for (size_t cut = 0; cut < len; cut += 7) {
        int rc = inspect(b, cut, &info);
        assert_true(rc == 0 || rc == -ENOEXEC || rc == -EBADMSG);
    }
    Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
    eh->e_shnum = 60000;
    assert_int_equal(inspect(b, len, &info), -EBADMSG);
    eh->e_shnum = 0;
    eh->e_shoff = len - 8;
    assert_int_equal(inspect(b, len, &info), -EBADMSG);
    eh->e_ident[EI_CLASS] = ELFCLASS32;
    assert_int_equal(inspect(b, len, &info), -ENOEXEC);
    memcpy(b, "#!/bin/sh\n", 10);
    assert_int_equal(inspect(b, len, &info), -ENOEXEC);
    free(b);
}

static void test_pprof_index(void **state)
{
    (void)state;
    static const char page[] = "<html><title>/debug/pprof/</title><a href='goroutine?debug=1'>";
    assert_true(pfr_scrape_local_is_pprof_index((const unsigned char *)page, sizeof(page) - 1));
    assert_false(pfr_scrape_local_is_pprof_index((const unsigned char *)"404 page not found", 18));
    assert_false(pfr_scrape_local_is_pprof_index(NULL, 0));
}

/* ---- Kubernetes ---- */

static char *read_fixture(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", SCRAPE_FIXTURES, name);
    char *text = NULL;
    assert_int_equal(pfr_scrape_read_file(path, 1 << 20, &text, len), 0);
    return text;
}

static const struct sc_want *want_by_pod(const struct sc_wantlist *l, const char *pod)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *p = label(l->v[i].labels, l->v[i].nlabels, "pod");
        if (p && strcmp(p, pod) == 0)
            return &l->v[i];
    }
    return NULL;
}

static void test_k8s_fixture(void **state)
{
    (void)state;
    size_t len;
    char *json = read_fixture("kubelet_pods.json", &len);
    struct sc_wantlist l = {0};
    struct sc_k8s_counts c;
    char err[256];
    assert_int_equal(pfr_scrape_k8s_parse_pods(json, len, "node-1", &l, &c, err, sizeof(err)), 0);
    assert_int_equal(c.pods, 13);
    assert_int_equal(c.targets, 4);
    assert_int_equal(c.bad, 4); /* bad port, no port, port 70000, bad IP */
    assert_int_equal(l.n, 4);

    const struct sc_want *w = want_by_pod(&l, "api-7d9f8b6c5-x2kqp");
    assert_non_null(w);
    /* Coroot's identity of the container serving the port: its Deployment as the service */
    assert_string_equal(w->service, "/k8s/shop/api");
    assert_string_equal(label(w->labels, w->nlabels, "container.id"),
                        "/k8s/shop/api-7d9f8b6c5-x2kqp/api");
    assert_string_equal(w->base, "http://10.244.1.17:6060/debug/pprof");
    assert_int_equal(w->source, PFR_SCRAPE_KUBERNETES);
    assert_string_equal(label(w->labels, w->nlabels, "namespace"), "shop");
    assert_string_equal(label(w->labels, w->nlabels, "node"), "node-1");
    assert_string_equal(label(w->labels, w->nlabels, "instance"), "10.244.1.17:6060");
    assert_int_equal(w->nlabels, 5);

    w = want_by_pod(&l, "cart-0"); /* pyroscope.io annotations, IPv6; no container named */
    assert_non_null(w);
    assert_string_equal(w->service, "cart");
    assert_null(label(w->labels, w->nlabels, "container.id"));
    assert_string_equal(w->base, "http://[fd00:10:244::1a]:8080/debug/pprof");
    w = want_by_pod(&l, "worker-q8wz1"); /* the controller among several owners */
    assert_non_null(w);
    assert_string_equal(w->service, "worker");
    w = want_by_pod(&l, "lonely"); /* no owner: the pod's name */
    assert_non_null(w);
    assert_string_equal(w->service, "lonely");
    static const char *const not_targets[] = {"web-5c9d7f-abcde", "db-0",         "bad-port-1",
                                              "no-port-1",        "pending-1",    "job-done-1",
                                              "elsewhere-1",      "port-too-big", "bad-ip"};
    for (size_t i = 0; i < sizeof(not_targets) / sizeof(not_targets[0]); i++)
        assert_null(want_by_pod(&l, not_targets[i]));
    pfr_scrape_wantlist_free(&l);

    /* without a node filter, the other node's pod is a target too */
    assert_int_equal(pfr_scrape_k8s_parse_pods(json, len, NULL, &l, &c, err, sizeof(err)), 0);
    assert_int_equal(c.targets, 5);
    assert_non_null(want_by_pod(&l, "elsewhere-1"));
    pfr_scrape_wantlist_free(&l);
    free(json);

    static const char *const bad[] = {
        "", "[]", "{\"kind\":\"Status\"}", "{\"items\":{}}", "{\"items\":[", "null"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(
            pfr_scrape_k8s_parse_pods(bad[i], strlen(bad[i]), NULL, &l, &c, err, sizeof(err)),
            -EBADMSG);
        assert_int_equal(l.n, 0);
    }
    /* odd shapes inside items are skipped, not fatal */
    static const char odd[] = "{\"items\":[1,\"x\",{},{\"metadata\":[]},{\"metadata\":{"
                              "\"annotations\":{\"coroot.com/profile-scrape\":true}}}]}";
    assert_int_equal(pfr_scrape_k8s_parse_pods(odd, strlen(odd), NULL, &l, &c, err, sizeof(err)),
                     0);
    assert_int_equal(c.pods, 5);
    assert_int_equal(l.n, 0);
    pfr_scrape_wantlist_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_target),
        cmocka_unit_test(test_want_urls),
        cmocka_unit_test(test_endpoints_and_modes),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_convert_cpu),
        cmocka_unit_test(test_convert_deltas),
        cmocka_unit_test(test_convert_heap),
        cmocka_unit_test(test_convert_rejects),
        cmocka_unit_test(test_convert_aggregates),
        cmocka_unit_test(test_procnet),
        cmocka_unit_test(test_elf),
        cmocka_unit_test(test_pprof_index),
        cmocka_unit_test(test_k8s_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
