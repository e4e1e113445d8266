/* Unit tests of pfr_metrics (registry, text format, threads) and of its HTTP exporter, fetched
 * with libcurl over a real socket. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pfr_metric_rows.h"
#include "pfr_metrics.h"

static char *render(pfr_metrics *m)
{
    char *out;
    size_t len;
    assert_int_equal(pfr_metrics_render(m, &out, &len), 0);
    assert_int_equal(strlen(out), len);
    return out;
}

/* Every line is a comment (# HELP / # TYPE) or `name{l="v",...} value`. */
static void assert_exposition_format(const char *text)
{
    regex_t sample, comment;
    assert_int_equal(
        regcomp(&sample,
                "^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\""
                "(,[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\")*\\})? "
                "(-?[0-9.e+-]+|NaN|[+-]Inf)$",
                REG_EXTENDED | REG_NOSUB),
        0);
    assert_int_equal(
        regcomp(
            &comment,
            "^# (HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge))$",
            REG_EXTENDED | REG_NOSUB),
        0);
    char *copy = strdup(text), *save, *line;
    for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (regexec(line[0] == '#' ? &comment : &sample, line, 0, NULL, 0) != 0)
            fail_msg("bad exposition line: %s", line);
    }
    assert_true(text[0] == '\0' || text[strlen(text) - 1] == '\n');
    free(copy);
    regfree(&sample);
    regfree(&comment);
}

static void test_render(void **state)
{
    (void)state;
    pfr_metrics *m;
    assert_int_equal(pfr_metrics_new(0, &m), 0);
    pfr_metric_family *taken, *bytes, *objs;
    const char *lab[] = {"source"};
    assert_int_equal(pfr_metrics_family(m, "pfr_samples_taken_total", "Samples taken",
                                        PFR_METRIC_COUNTER, lab, 1, &taken),
                     0);
    assert_int_equal(pfr_metrics_go_alloc_families(m, &bytes, &objs), 0);
    assert_int_equal(pfr_metrics_add(taken, (const char *[]){"cpu"}, 10), 0);
    assert_int_equal(pfr_metrics_add(taken, (const char *[]){"cpu"}, 5), 0);
    assert_int_equal(pfr_metrics_add(taken, (const char *[]){"cpu"}, -3), 0); /* ignored */
    const char *go[] = {"checkout", "docker://ab\"c\\d\ne", "4242", "/usr/bin/checkout"};
    assert_int_equal(pfr_metrics_set(bytes, go, 123456789012.0), 0);
    pfr_metric_family *store;
    assert_int_equal(pfr_metrics_family(m, "pfr_store_bytes", "Bytes in the\nstore \\ ring",
                                        PFR_METRIC_GAUGE, NULL, 0, &store),
                     0);
    assert_int_equal(pfr_metrics_set(store, NULL, 2.5), 0);
    char *t = render(m);
    assert_exposition_format(t);
    assert_non_null(strstr(t, "# TYPE pfr_samples_taken_total counter\n"));
    assert_non_null(strstr(t, "pfr_samples_taken_total{source=\"cpu\"} 15\n"));
    assert_non_null(strstr(t, "# TYPE container_go_alloc_bytes_total counter\n"));
    assert_non_null(strstr(t,
                           "container_go_alloc_bytes_total{service=\"checkout\",container_id="
                           "\"docker://ab\\\"c\\\\d\\ne\",pid=\"4242\",exe=\"/usr/bin/checkout\"}"
                           " 123456789012\n"));
    assert_null(strstr(t, "container_go_alloc_objects_total")); /* no series: not shown */
    assert_non_null(strstr(t, "# HELP pfr_store_bytes Bytes in the\\nstore \\\\ ring\n"));
    assert_non_null(strstr(t, "pfr_store_bytes 2.5\n"));
    free(t);
    pfr_metrics_free(m);
}

static void test_validation(void **state)
{
    (void)state;
    pfr_metrics *m;
    assert_int_equal(pfr_metrics_new(0, &m), 0);
    pfr_metric_family *f, *g;
    const char *bad_label[] = {"0pid"}, *reserved[] = {"__name"}, *ok[] = {"pid"};
    assert_int_equal(pfr_metrics_family(m, "9bad", "", PFR_METRIC_GAUGE, NULL, 0, &f), -EINVAL);
    assert_int_equal(pfr_metrics_family(m, "bad-name", "", PFR_METRIC_GAUGE, NULL, 0, &f), -EINVAL);
    assert_int_equal(pfr_metrics_family(m, "x", "", PFR_METRIC_GAUGE, bad_label, 1, &f), -EINVAL);
    assert_int_equal(pfr_metrics_family(m, "x", "", PFR_METRIC_GAUGE, reserved, 1, &f), -EINVAL);
    assert_int_equal(pfr_metrics_family(m, "a:b_c", "", PFR_METRIC_GAUGE, ok, 1, &f), 0);
    /* registering again returns the same family; a different shape is refused */
    assert_int_equal(pfr_metrics_family(m, "a:b_c", "", PFR_METRIC_GAUGE, ok, 1, &g), 0);
    assert_ptr_equal(f, g);
    assert_int_equal(pfr_metrics_family(m, "a:b_c", "", PFR_METRIC_COUNTER, ok, 1, &g), -EINVAL);
    assert_int_equal(pfr_metrics_family(m, "a:b_c", "", PFR_METRIC_GAUGE, NULL, 0, &g), -EINVAL);
    /* one name, one family: the same name described with another help is a mistake */
    assert_int_equal(pfr_metrics_family(m, "a:b_c", "other", PFR_METRIC_GAUGE, ok, 1, &g), -EINVAL);
    pfr_metric *s;
    assert_int_equal(pfr_metrics_series(f, NULL, &s), -EINVAL);
    pfr_metrics_free(m);
}

static void test_series_bound_and_remove(void **state)
{
    (void)state;
    pfr_metrics *m;
    assert_int_equal(pfr_metrics_new(100, &m), 0);
    pfr_metric_family *f;
    const char *labels[] = {"pid", "kind"};
    assert_int_equal(pfr_metrics_family(m, "per_pid", "", PFR_METRIC_GAUGE, labels, 2, &f), 0);
    char pid[16];
    for (int i = 0; i < 150; i++) {
        snprintf(pid, sizeof(pid), "%d", i);
        int rc = pfr_metrics_set(f, (const char *[]){pid, i % 2 ? "odd" : "even"}, i);
        assert_int_equal(rc, i < 100 ? 0 : -ENOSPC);
    }
    assert_int_equal(pfr_metrics_num_series(f), 100);
    char *t = render(m);
    assert_non_null(strstr(t, "pfr_metrics_series_dropped_total{family=\"per_pid\"} 50\n"));
    free(t);
    /* label sets that concatenate alike are distinct */
    pfr_metric *a, *b;
    assert_int_equal(pfr_metrics_remove(f, (const char *[]){"0", "even"}), 0);
    assert_int_equal(pfr_metrics_remove(f, (const char *[]){"1", "even"}), -ENOENT);
    assert_int_equal(pfr_metrics_remove_matching(f, "kind", "odd"), 50);
    assert_int_equal(pfr_metrics_remove_matching(f, "nope", "odd"), -EINVAL);
    assert_int_equal(pfr_metrics_series(f, (const char *[]){"ab", "c"}, &a), 0);
    assert_int_equal(pfr_metrics_series(f, (const char *[]){"a", "bc"}, &b), 0);
    assert_ptr_not_equal(a, b);
    assert_int_equal(pfr_metrics_num_series(f), 49 + 2);
    pfr_metric_set(a, 7);
    assert_true(pfr_metric_value(a) == 7);
    pfr_metrics_free(m);
}

static void test_last_error(void **state)
{
    (void)state;
    pfr_metrics *m;
    assert_int_equal(pfr_metrics_new(0, &m), 0);
    assert_int_equal(pfr_metrics_set_last_error(m, "goheap", "pid 12: loop in bucket list", 100),
                     0);
    assert_int_equal(pfr_metrics_set_last_error(m, "store", "disk full", 150), 0);
    assert_int_equal(pfr_metrics_set_last_error(m, "goheap", "pid 13: \"gone\"", 200), 0);
    char *t = render(m);
    assert_exposition_format(t);
    assert_null(strstr(t, "loop in bucket list"));
    assert_non_null(
        strstr(t, "pfr_last_error_info{source=\"goheap\",message=\"pid 13: \\\"gone\\\"\"} 1\n"));
    assert_non_null(strstr(t, "pfr_last_error_info{source=\"store\",message=\"disk full\"} 1\n"));
    assert_non_null(strstr(t, "pfr_last_error_timestamp_seconds{source=\"goheap\"} 200\n"));
    assert_non_null(strstr(t, "pfr_errors_total{source=\"goheap\"} 2\n"));
    free(t);
    pfr_metrics_free(m);
}

/* ---- threads: updates from several threads while another renders ---- */

typedef struct worker {
    pfr_metrics *m;
    pfr_metric_family *f;
    int id;
} worker;

static void *updater(void *arg)
{
    worker *w = arg;
    char id[8];
    snprintf(id, sizeof(id), "%d", w->id);
    pfr_metric *s;
    if (pfr_metrics_series(w->f, (const char *[]){id}, &s) < 0)
        return NULL;
    for (int i = 0; i < 20000; i++) {
        pfr_metric_add(s, 1);
        if (i % 1000 == 0)
            pfr_metrics_add(w->f, (const char *[]){"shared"}, 1);
    }
    return NULL;
}

static void *renderer(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 200; i++) {
        char *out;
        size_t len;
        if (pfr_metrics_render(w->m, &out, &len) == 0)
            free(out);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pfr_metrics *m;
    assert_int_equal(pfr_metrics_new(0, &m), 0);
    pfr_metric_family *f;
    const char *lab[] = {"thread"};
    assert_int_equal(pfr_metrics_family(m, "work_total", "", PFR_METRIC_COUNTER, lab, 1, &f), 0);
    pthread_t th[5];
    worker w[5];
    for (int i = 0; i < 5; i++) {
        w[i] = (worker){m, f, i};
        assert_int_equal(pthread_create(&th[i], NULL, i == 4 ? renderer : updater, &w[i]), 0);
    }
    for (int i = 0; i < 5; i++)
        pthread_join(th[i], NULL);
    char *t = render(m);
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof(want), "work_total{thread=\"%d\"} 20000\n", i);
        assert_non_null(strstr(t, want));
    }
    assert_non_null(strstr(t, "work_total{thread=\"shared\"} 80\n"));
    free(t);
    pfr_metrics_free(m);
}

/* ---- HTTP ---- */

typedef struct body {
    char *p;
    size_t len;
} body;

static size_t on_data(char *d, size_t sz, size_t n, void *ud)
{
    body *b = ud;
    char *np = realloc(b->p, b->len + sz * n + 1);
    if (!np)
        return 0;
    b->p = np;
    memcpy(b->p + b->len, d, sz * n);
    b->len += sz * n;
    b->p[b->len] = '\0';
    return sz * n;
}

static long fetch(const char *url, const char *method, body *b, char *ctype, size_t ctcap)
{
    CURL *c = curl_easy_init();
    assert_non_null(c);
    memset(b, 0, sizeof(*b));
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = curl_easy_perform(c);
    long code = -1;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ctype)
            snprintf(ctype, ctcap, "%s", ct ? ct : "");
    }
    curl_easy_cleanup(c);
    return code;
}

struct post_seen {
    char reason[64];
    bool flag_null, loopback;
};

static unsigned on_post(void *ctx, const char *const *keys, const char *const *values, size_t n,
                        bool loopback, char *reply, size_t replylen)
{
    struct post_seen *seen = ctx;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(keys[i], "reason") == 0)
            snprintf(seen->reason, sizeof(seen->reason), "%s", values[i]);
        if (strcmp(keys[i], "flag") == 0)
            seen->flag_null = values[i] == NULL;
    }
    seen->loopback = loopback;
    snprintf(reply, replylen, "got %zu", n);
    return 202;
}

static void test_http(void **state)
{
    (void)state;
    pfr_metrics *m;
    assert_int_equal(pfr_metrics_new(0, &m), 0);
    pfr_metric_family *bytes, *objs;
    assert_int_equal(pfr_metrics_go_alloc_families(m, &bytes, &objs), 0);
    const char *lv[] = {"api", "abc123", "77", "/srv/api"};
    assert_int_equal(pfr_metrics_set(objs, lv, 31337), 0);

    pfr_metrics_server *srv;
    char err[256];
    assert_int_equal(pfr_metrics_serve(m, "127.0.0.1:0", &srv, err, sizeof(err)), 0);
    uint16_t port = pfr_metrics_server_port(srv);
    assert_true(port > 0);
    char url[128], ctype[128];
    body b;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metrics", port);
    assert_int_equal(fetch(url, NULL, &b, ctype, sizeof(ctype)), 200);
    assert_string_equal(ctype, "text/plain; version=0.0.4; charset=utf-8");
    assert_non_null(strstr(b.p, "container_go_alloc_objects_total{service=\"api\",container_id="
                                "\"abc123\",pid=\"77\",exe=\"/srv/api\"} 31337\n"));
    assert_exposition_format(b.p);
    free(b.p);
    /* an update shows in the next scrape */
    assert_int_equal(pfr_metrics_set(objs, lv, 31338), 0);
    assert_int_equal(fetch(url, NULL, &b, NULL, 0), 200);
    assert_non_null(strstr(b.p, "} 31338\n"));
    free(b.p);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/nothing", port);
    assert_int_equal(fetch(url, NULL, &b, NULL, 0), 404);
    free(b.p);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metrics", port);
    assert_int_equal(fetch(url, "POST", &b, NULL, 0), 405);
    free(b.p);
    /* a POST path with its handler: the query's arguments, then taken away again */
    struct post_seen seen = {0};
    pfr_metrics_server_on_post(srv, "/pin", on_post, &seen);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/pin?reason=a%%20b&flag", port);
    assert_int_equal(fetch(url, "POST", &b, NULL, 0), 202);
    assert_string_equal(b.p, "got 2\n");
    free(b.p);
    assert_string_equal(seen.reason, "a b");
    assert_true(seen.flag_null);
    assert_true(seen.loopback);
    pfr_metrics_server_on_post(srv, "/pin", NULL, NULL);
    assert_int_equal(fetch(url, "POST", &b, NULL, 0), 404);
    free(b.p);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metrics", port);

    /* the same port again: refused with a reason */
    char listen[64];
    pfr_metrics_server *srv2;
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
    assert_true(pfr_metrics_serve(m, listen, &srv2, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "cannot listen"));
    pfr_metrics_server_stop(srv);
    assert_true(fetch(url, NULL, &b, NULL, 0) < 0); /* stopped: connection refused */
    free(b.p);

    /* IPv6 loopback, when the host has it */
    if (pfr_metrics_serve(m, "[::1]:0", &srv, err, sizeof(err)) == 0) {
        snprintf(url, sizeof(url), "http://[::1]:%u/metrics", pfr_metrics_server_port(srv));
        assert_int_equal(fetch(url, NULL, &b, NULL, 0), 200);
        free(b.p);
        pfr_metrics_server_stop(srv);
    }
    pfr_metrics_free(m);
}

static void test_listen_addresses(void **state)
{
    (void)state;
    pfr_metrics *m;
    assert_int_equal(pfr_metrics_new(0, &m), 0);
    const char *bad[] = {"",         "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "localhost:9465",
                         "::1:9465", "[::1]9465", "1.2.3:80",   "127.0.0.1:80x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pfr_metrics_server *s;
        char err[256] = "";
        assert_int_equal(pfr_metrics_serve(m, bad[i], &s, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "bad listen address"));
    }
    pfr_metrics_free(m);
}

/* ---- tables of rows ---- */

enum demo_reason { DEMO_A, DEMO_B, DEMO_C, DEMO_N };

static const char *demo_reason_name(int k)
{
    static const char *const names[DEMO_N] = {"a", "b", "c"};
    return k >= 0 && k < DEMO_N ? names[k] : "?";
}

/* A stats struct with a field of every kind PFR_METRIC_FIELD reads. */
typedef struct demo_stats {
    unsigned long long done;
    uint64_t busy_ns;
    int level;
    bool on;
    size_t hits, misses;
    int64_t offset;
    unsigned refused[DEMO_N];
    long long wide;
} demo_stats;

#define DF(f) PFR_METRIC_FIELD(demo_stats, f)

static double demo_lookups(const void *p)
{
    const demo_stats *st = p;
    return (double)(st->hits + st->misses);
}

static const pfr_metric_row demo_rows[] = {
    {"demo_done_total", PFR_METRIC_COUNTER, "jobs done", DF(done)},
    {"demo_busy_seconds_total", PFR_METRIC_COUNTER, "time busy", DF(busy_ns), .divisor = 1e9},
    {"demo_level", PFR_METRIC_GAUGE, "the level", DF(level)},
    {"demo_on", PFR_METRIC_GAUGE, "1: on", DF(on)},
    {"demo_offset", PFR_METRIC_GAUGE, "a signed figure", DF(offset)},
    {"demo_wide", PFR_METRIC_GAUGE, "a long long", DF(wide)},
    {"demo_lookups_total", PFR_METRIC_COUNTER, "lookups, by result", .labels = {"result"},
     .series = PFR_METRIC_SERIES({{"hit"}, DF(hits)}, {{"miss"}, DF(misses)})},
    {"demo_all_lookups_total", PFR_METRIC_COUNTER, "lookups", .get = demo_lookups},
    {"demo_refused_total", PFR_METRIC_COUNTER, "refused, by reason", .labels = {"reason"},
     DF(refused[0]), .name_of = demo_reason_name, .first = DEMO_B, .end = DEMO_N},
    {"demo_runs_total", PFR_METRIC_COUNTER, "runs of each instance", .labels = {"instance"},
     DF(done)},
    {"demo_own_total", PFR_METRIC_COUNTER, "published elsewhere", .labels = {"pid"},
     .flags = PFR_METRIC_OWN},
};
static const pfr_metric_table demo_table = PFR_METRIC_TABLE("Demo", demo_rows);

static void test_rows_publish(void **state)
{
    (void)state;
    pfr_metrics *m;
    assert_int_equal(pfr_metrics_new(0, &m), 0);
    demo_stats st = {.done = 7,
                     .busy_ns = 1500000000,
                     .level = 2,
                     .on = true,
                     .hits = 3,
                     .misses = 4,
                     .offset = -5,
                     .refused = {100, 11, 12},
                     .wide = 1ll << 40};
    assert_int_equal(pfr_metrics_publish(m, &demo_table, &st, "x"), 0);
    st.done = 9;
    assert_int_equal(pfr_metrics_publish(m, &demo_table, &st, "y"), 0);
    char *t = render(m);
    assert_exposition_format(t);
    static const char *const want[] = {
        "# HELP demo_done_total jobs done\n# TYPE demo_done_total counter\ndemo_done_total 9\n",
        "demo_busy_seconds_total 1.5\n",
        "# TYPE demo_level gauge\ndemo_level 2\n",
        "demo_on 1\n",
        "demo_offset -5\n",
        "demo_wide 1099511627776\n",
        "demo_lookups_total{result=\"hit\"} 3\ndemo_lookups_total{result=\"miss\"} 4\n",
        "demo_all_lookups_total 7\n",
        "demo_refused_total{reason=\"b\"} 11\ndemo_refused_total{reason=\"c\"} 12\n",
        "demo_runs_total{instance=\"x\"} 7\ndemo_runs_total{instance=\"y\"} 9\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(t, want[i]))
            fail_msg("missing:\n%s\nin:\n%s", want[i], t);
    assert_null(strstr(t, "reason=\"a\""));   /* before .first */
    assert_null(strstr(t, "demo_own_total")); /* its own code registers it */
    free(t);

    /* the table's rows check out, and the reference and the list name every row */
    const pfr_metric_table *tables[] = {&demo_table};
    char err[512];
    assert_int_equal(pfr_metric_tables_check(tables, 1, err, sizeof(err)), 0);
    char *ref = NULL, *list = NULL;
    size_t reflen, listlen;
    FILE *f = open_memstream(&ref, &reflen);
    pfr_metric_tables_write_ref(tables, 1, "demo", f);
    fclose(f);
    f = open_memstream(&list, &listlen);
    pfr_metric_tables_write_list(tables, 1, f);
    fclose(f);
    for (size_t i = 0; i < demo_table.nrows; i++) {
        char cell[128];
        snprintf(cell, sizeof(cell), "| `%s` |", demo_rows[i].name);
        assert_non_null(strstr(ref, cell));
        assert_non_null(strstr(list, demo_rows[i].name));
    }
    assert_non_null(strstr(ref, "<!-- metrics:demo:reference begin -->\n**Demo**\n"));
    assert_non_null(strstr(ref, "| `demo_refused_total` | counter | `reason`: `b`, `c` |"));
    assert_non_null(strstr(list, "demo_lookups_total counter result=hit|miss\n"));
    assert_non_null(strstr(list, "demo_runs_total counter instance=*\n"));
    free(ref);
    free(list);

    /* a row whose family clashes with one registered otherwise is skipped, and said */
    pfr_metrics_free(m);
    pfr_metric_family *clash;
    assert_int_equal(pfr_metrics_new(0, &m), 0);
    assert_int_equal(
        pfr_metrics_family(m, "demo_level", "another help", PFR_METRIC_GAUGE, NULL, 0, &clash), 0);
    assert_int_equal(pfr_metrics_publish(m, &demo_table, &st, "x"), -EINVAL);
    t = render(m);
    assert_non_null(strstr(t, "demo_done_total 9\n")); /* the other rows still are */
    free(t);
    pfr_metrics_free(m);
}

/* (at file scope: a compound literal in a function is no constant) */
static const pfr_metric_row too_few_values[] = {
    {"demo_v_total", PFR_METRIC_COUNTER, "v", .labels = {"a", "b"},
     .series = PFR_METRIC_SERIES({{"only_a"}, DF(done)})}};

/* The checks every table of the recorder passes (docs_metrics runs them on the real ones). */
static void expect_mistake(const pfr_metric_row *rows, size_t n, const char *want)
{
    pfr_metric_table t = {"Bad", rows, n};
    const pfr_metric_table *tables[] = {&t};
    char err[512];
    assert_int_equal(pfr_metric_tables_check(tables, 1, err, sizeof(err)), -EINVAL);
    if (!strstr(err, want))
        fail_msg("expected '%s' in: %s", want, err);
}

static void test_rows_check(void **state)
{
    (void)state;
    static const pfr_metric_row counter_no_total[] = {
        {"demo_done", PFR_METRIC_COUNTER, "jobs done", DF(done)}};
    expect_mistake(counter_no_total, 1, "demo_done: a counter whose name does not end in _total");
    static const pfr_metric_row gauge_total[] = {
        {"demo_level_total", PFR_METRIC_GAUGE, "the level", DF(level)}};
    expect_mistake(gauge_total, 1, "demo_level_total: not a counter, but its name ends in _total");
    static const pfr_metric_row twice[] = {
        {"demo_done_total", PFR_METRIC_COUNTER, "jobs done", DF(done)},
        {"demo_done_total", PFR_METRIC_COUNTER, "jobs finished", DF(done)}};
    expect_mistake(twice, 2, "demo_done_total: described twice");
    static const pfr_metric_row retyped[] = {{"demo_x_total", PFR_METRIC_COUNTER, "x", DF(done)},
                                             {"demo_x_total", PFR_METRIC_GAUGE, "x", DF(level)}};
    expect_mistake(retyped, 2, "demo_x_total: described twice");
    static const pfr_metric_row no_help[] = {{"demo_y_total", PFR_METRIC_COUNTER, "", DF(done)}};
    expect_mistake(no_help, 1, "demo_y_total: no help");
    static const pfr_metric_row bad_name[] = {{"demo-z", PFR_METRIC_GAUGE, "z", DF(level)}};
    expect_mistake(bad_name, 1, "'demo-z': not a metric name");
    expect_mistake(too_few_values, 1, "demo_v_total{only_a}: 1 label values for 2 labels");
    static const pfr_metric_row no_value[] = {{"demo_w_total", PFR_METRIC_COUNTER, .help = "w"}};
    expect_mistake(no_value, 1, "demo_w_total: no field or getter");
    /* across tables too */
    static const pfr_metric_row one[] = {{"demo_done_total", PFR_METRIC_COUNTER, "d", DF(done)}};
    pfr_metric_table t1 = {"One", one, 1}, t2 = {"Two", one, 1};
    const pfr_metric_table *both[] = {&t1, &t2};
    char err[256];
    assert_int_equal(pfr_metric_tables_check(both, 2, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "demo_done_total: described twice (One, Two)"));
    /* the registry's own tables pass */
    const pfr_metric_table *own[] = {&pfr_metrics_registry_table, &pfr_metrics_go_alloc_table};
    assert_int_equal(pfr_metric_tables_check(own, 2, err, sizeof(err)), 0);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_rows_publish),
        cmocka_unit_test(test_rows_check),
        cmocka_unit_test(test_series_bound_and_remove),
        cmocka_unit_test(test_last_error),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_listen_addresses),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
