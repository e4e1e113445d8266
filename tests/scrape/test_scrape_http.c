/* The scraper against an in-process HTTP server (scrape_testutil.h): faulty targets beside a good
 * one, backoff and its events, the per-target bound, redirects, TLS verification, the queue,
 * the thread, configuration reloads and Kubernetes discovery over HTTP with a bearer token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pfr_identity.h"
#include "pfr_k8s_pods.h"
#include "pfr_scrape.h"
#include "scrape_testutil.h"

#define S_NS 1000000000ll

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * S_NS + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
    int64_t now = mono_ns();
    if (t > now)
        usleep((useconds_t)((t - now) / 1000));
}

/* ---- recorded events ---- */

#define MAX_EVENTS 512
struct events {
    pthread_mutex_t mu;
    size_t n;
    struct {
        enum pfr_scrape_event_kind kind;
        char url[256];
        int endpoint;
        char msg[256];
    } v[MAX_EVENTS];
};

static void on_event(void *ctx, const pfr_scrape_event *ev)
{
    struct events *e = ctx;
    pthread_mutex_lock(&e->mu);
    if (e->n < MAX_EVENTS) {
        e->v[e->n].kind = ev->kind;
        snprintf(e->v[e->n].url, sizeof(e->v[e->n].url), "%s", ev->url);
        e->v[e->n].endpoint = ev->endpoint;
        snprintf(e->v[e->n].msg, sizeof(e->v[e->n].msg), "%s", ev->msg);
        e->n++;
    }
    pthread_mutex_unlock(&e->mu);
}

static size_t count_events(struct events *e, enum pfr_scrape_event_kind kind, const char *url_part,
                           int endpoint)
{
    size_t n = 0;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->n; i++)
        if (e->v[i].kind == kind && strstr(e->v[i].url, url_part) &&
            (endpoint == -2 || e->v[i].endpoint == endpoint))
            n++;
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* ---- collected chunks ---- */

#define MAX_CHUNKS 1024
struct chunk {
    char service[64];
    char type0[64];
    char instance[64];
    char pod[64];
    int64_t start, end;
    pfr_profile *p;
};
struct chunks {
    size_t n;
    struct chunk v[MAX_CHUNKS];
    int fail_at; /* emit returns -EIO when n reaches this (0 = never) */
};

static const char *kv(const pfr_kv *l, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].key, key) == 0)
            return l[i].value;
    return "";
}

static int on_chunk(const pfr_chunk_in *c, void *ctx)
{
    struct chunks *cs = ctx;
    if (cs->fail_at && (int)cs->n + 1 == cs->fail_at) {
        cs->fail_at = 0;
        return -EIO;
    }
    assert_true(cs->n < MAX_CHUNKS);
    struct chunk *k = &cs->v[cs->n++];
    snprintf(k->service, sizeof(k->service), "%s", c->service);
    snprintf(k->type0, sizeof(k->type0), "%s", pfr_profile_sample_type(c->profile, 0, NULL));
    snprintf(k->instance, sizeof(k->instance), "%s", kv(c->labels, c->nlabels, "instance"));
    snprintf(k->pod, sizeof(k->pod), "%s", kv(c->labels, c->nlabels, "pod"));
    k->start = c->start_ns;
    k->end = c->end_ns;
    /* keep a copy: the chunk's profile is the queue's */
    k->p = pfr_profile_new();
    assert_int_equal(pfr_profile_merge(k->p, c->profile, 0), 0);
    return 0;
}

static void chunks_free(struct chunks *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        pfr_profile_free(cs->v[i].p);
    cs->n = 0;
}

static size_t count_chunks(const struct chunks *cs, const char *service, const char *type0)
{
    size_t n = 0;
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i].service, service) == 0 && (!type0 || !strcmp(cs->v[i].type0, type0)))
            n++;
    return n;
}

/* ---- target info ---- */

struct tinfo {
    char url_part[64];
    bool found;
    pfr_scrape_target_info t;
    char last_error[256];
    char labels[512];
};

static int find_target(const pfr_scrape_target_info *t, void *ctx)
{
    struct tinfo *ti = ctx;
    if (!strstr(t->url, ti->url_part))
        return 0;
    ti->found = true;
    ti->t = *t;
    snprintf(ti->last_error, sizeof(ti->last_error), "%s", t->last_error);
    ti->labels[0] = '\0';
    for (size_t i = 0; i < t->nlabels; i++) {
        size_t o = strlen(ti->labels);
        snprintf(ti->labels + o, sizeof(ti->labels) - o, "%s=%s;", t->labels[i].key,
                 t->labels[i].value);
    }
    ti->t.url = ti->t.service = ti->t.last_error = NULL;
    ti->t.labels = NULL;
    return 1;
}

static struct tinfo target_info(pfr_scrape *s, const char *url_part)
{
    struct tinfo ti = {.found = false};
    snprintf(ti.url_part, sizeof(ti.url_part), "%s", url_part);
    pfr_scrape_targets(s, find_target, &ti);
    return ti;
}

static unsigned closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    socklen_t l = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static void add(pfr_scrape *s, unsigned port, const char *mode, const char *service)
{
    char line[256], err[256];
    snprintf(line, sizeof(line), "http://127.0.0.1:%u/%s service=%s env=test", port, mode, service);
    int rc = pfr_scrape_add_target_line(s, line, err, sizeof(err));
    if (rc)
        fprintf(stderr, "%s: %s\n", line, err);
    assert_int_equal(rc, 0);
}

/* Steps a run of c consecutive failures goes through with waits 1, 2, 4 (cap) intervals. */
static size_t steps(unsigned c)
{
    return c < 3 ? c : 3;
}

static void test_faults(void **state)
{
    (void)state;
    tu_server *srv;
    assert_int_equal(pfr_tu_server_start(&srv, NULL, NULL), 0);
    unsigned port = pfr_tu_server_port(srv);
    pfr_tu_server_set_flaky(srv, 2);
    struct events ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
    const int64_t interval = S_NS;
    pfr_scrape_opts o = {
        .interval_ns = interval,
        .cpu_seconds = 1,
        .connect_timeout_ms = 1000,
        .timeout_ms = 600,
        .max_body_bytes = 1 << 20,
        .backoff_max_ns = 4 * interval,
        .local = PFR_SCRAPE_LOCAL_OFF,
        .event = on_event,
        .event_ctx = &ev,
    };
    pfr_scrape *s;
    char err[256];
    assert_int_equal(pfr_scrape_new(&o, &s, err, sizeof(err)), 0);
    add(s, port, "good", "good");
    add(s, port, "garbage", "garbage");
    add(s, port, "huge", "huge");
    add(s, port, "hugechunked", "hugechunked");
    add(s, port, "slow", "slow");
    add(s, port, "e500", "e500");
    add(s, port, "redirect", "redirect");
    add(s, port, "flaky", "flaky");
    char refused[128];
    snprintf(refused, sizeof(refused), "http://127.0.0.1:%u service=refused", closed_port());
    assert_int_equal(pfr_scrape_add_target_line(s, refused, err, sizeof(err)), 0);
    assert_int_equal(pfr_scrape_add_target_line(s, refused, err, sizeof(err)), -EEXIST);

    const int rounds = 7;
    int64_t t0 = mono_ns();
    for (int r = 0; r < rounds; r++) {
        assert_int_equal(pfr_scrape_run_once(s), 0);
        sleep_until(t0 + (r + 1) * interval);
    }
    struct chunks *cs = calloc(1, sizeof(*cs));
    assert_int_equal(pfr_scrape_collect(s, on_chunk, cs), 0);

    /* nothing from the faulty targets, all of the good one's */
    for (size_t i = 0; i < cs->n; i++)
        assert_true(strcmp(cs->v[i].service, "good") == 0 ||
                    strcmp(cs->v[i].service, "flaky") == 0);
    assert_int_equal(count_chunks(cs, "good", PFR_SCRAPE_TYPE_CPU), rounds);
    assert_int_equal(count_chunks(cs, "good", PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS), rounds);
    assert_int_equal(count_chunks(cs, "good", PFR_SCRAPE_TYPE_GOROUTINES), rounds);
    assert_int_equal(count_chunks(cs, "good", PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS), rounds - 1);
    assert_int_equal(count_chunks(cs, "good", PFR_SCRAPE_TYPE_MUTEX_CONTENTIONS), rounds - 1);
    /* deltas: the server's counters grow by 3 (block, mutex) and 10 (heap objects) a request */
    int64_t prev_end[PFR_SCRAPE_NUM_ENDPOINTS] = {0};
    int heap_seen = 0;
    char instance[64];
    snprintf(instance, sizeof(instance), "127.0.0.1:%u", port);
    for (size_t i = 0; i < cs->n; i++) {
        struct chunk *k = &cs->v[i];
        if (strcmp(k->service, "good") != 0)
            continue;
        assert_string_equal(k->instance, instance);
        assert_true(k->start < k->end);
        if (!strcmp(k->type0, PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS)) {
            assert_int_equal(pfr_tu_value_of(k->p, 0, "main.goodBlock"), 3);
            assert_int_equal(pfr_tu_value_of(k->p, 1, "main.goodBlock"), 3000);
            if (prev_end[PFR_SCRAPE_BLOCK]) /* consecutive deltas tile time */
                assert_int_equal(k->start, prev_end[PFR_SCRAPE_BLOCK]);
            prev_end[PFR_SCRAPE_BLOCK] = k->end;
        } else if (!strcmp(k->type0, PFR_SCRAPE_TYPE_MUTEX_CONTENTIONS)) {
            assert_int_equal(pfr_tu_value_of(k->p, 0, "main.goodMutex"), 3);
        } else if (!strcmp(k->type0, PFR_SCRAPE_TYPE_HEAP_ALLOC_OBJECTS)) {
            assert_int_equal(pfr_tu_value_of(k->p, 0, "main.goodAlloc"), heap_seen ? 10 : 0);
            assert_int_equal(pfr_tu_value_of(k->p, 3, "main.goodAlloc"), 5120);
            heap_seen++;
        } else if (!strcmp(k->type0, PFR_SCRAPE_TYPE_CPU)) {
            assert_int_equal(pfr_tu_value_of(k->p, 0, "main.goodCPU"), 100000000);
            assert_int_equal(pfr_profile_num_sample_types(k->p), 1); /* "samples" dropped */
            assert_int_equal(k->end - k->start, S_NS); /* the profile's own duration */
        }
    }

    /* each fault is named and counted */
    static const struct {
        const char *mode, *error;
    } faults[] = {
        {"/garbage", "not a pprof profile"},   {"/huge", "body larger than"},
        {"/hugechunked", "body larger than"},  {"/slow", "timed out"},
        {"/e500", "HTTP 500: internal error"}, {"/redirect", "HTTP 302"},
    };
    for (size_t f = 0; f < sizeof(faults) / sizeof(faults[0]); f++) {
        char part[64];
        snprintf(part, sizeof(part), "%s/debug", faults[f].mode);
        struct tinfo ti = target_info(s, part);
        assert_true(ti.found);
        if (!strstr(ti.last_error, faults[f].error))
            fprintf(stderr, "%s: %s\n", faults[f].mode, ti.last_error);
        assert_non_null(strstr(ti.last_error, faults[f].error));
        assert_int_equal(ti.t.last_success_ns, 0);
        assert_true(ti.t.failures >= PFR_SCRAPE_NUM_ENDPOINTS);
        for (int e = 0; e < PFR_SCRAPE_NUM_ENDPOINTS; e++) {
            const pfr_scrape_endpoint_info *ei = &ti.t.endpoints[e];
            /* failures in rounds 1, 2, 4 (waits of 1, 2, 4 intervals), more if slow rounds
             * stretched the intervals */
            if (ei->consecutive_failures < 3 || ei->consecutive_failures > 5)
                fprintf(stderr, "%s %d: %u failures\n", part, e, ei->consecutive_failures);
            assert_true(ei->consecutive_failures >= 3 && ei->consecutive_failures <= 5);
            assert_int_equal(ei->failures, ei->consecutive_failures);
            assert_int_equal(ei->scrapes, 0);
            assert_true(ei->next_attempt_ns > 0);
            /* logged once per backoff step, not once per failure */
            assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_FAILED, part, e),
                             steps(ei->consecutive_failures));
        }
    }
    /* the refused target is backed off as a whole, with one event per step */
    char refused_url[64];
    snprintf(refused_url, sizeof(refused_url), ":%u/debug",
             pfr_tu_port_of(strtok(refused + 7, " ")));
    struct tinfo ti = target_info(s, refused_url);
    assert_true(ti.found);
    assert_true(ti.t.consecutive_failures >= 3 && ti.t.consecutive_failures <= 5);
    assert_non_null(strstr(ti.last_error, "cannot connect"));
    for (int e = 0; e < PFR_SCRAPE_NUM_ENDPOINTS; e++)
        assert_int_equal(ti.t.endpoints[e].consecutive_failures, 0);
    assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_FAILED, refused_url, -1),
                     steps(ti.t.consecutive_failures));
    assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_FAILED, refused_url, -2),
                     steps(ti.t.consecutive_failures));

    /* the flaky target failed twice per endpoint, then recovered, then its data came */
    ti = target_info(s, "/flaky");
    for (int e = 0; e < PFR_SCRAPE_NUM_ENDPOINTS; e++) {
        assert_int_equal(ti.t.endpoints[e].failures, 2);
        assert_int_equal(ti.t.endpoints[e].consecutive_failures, 0);
        assert_true(ti.t.endpoints[e].scrapes >= 1);
        assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_FAILED, "/flaky", e), 2);
        assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_RECOVERED, "/flaky", e), 1);
    }
    assert_true(count_chunks(cs, "flaky", PFR_SCRAPE_TYPE_CPU) >= 1);

    /* redirects are not followed: the good endpoint saw only the good target's requests */
    struct tinfo good = target_info(s, "/good");
    uint64_t good_scrapes = 0;
    for (int e = 0; e < PFR_SCRAPE_NUM_ENDPOINTS; e++)
        good_scrapes += good.t.endpoints[e].scrapes;
    assert_int_equal(good_scrapes, (uint64_t)rounds * PFR_SCRAPE_NUM_ENDPOINTS);
    assert_int_equal(pfr_tu_server_requests(srv, "good"), good_scrapes);
    assert_int_equal(good.t.failures, 0);
    assert_non_null(strstr(good.labels, "env=test;"));
    assert_non_null(strstr(good.labels, "instance=127.0.0.1:"));
    /* at most per_target_parallel (2) requests to one target at a time */
    assert_true(pfr_tu_server_max_inflight(srv, "good") <= 2);
    assert_true(pfr_tu_server_max_inflight(srv, "good") >= 1);

    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.rounds, rounds);
    assert_true(st.skipped_backoff > 0);
    assert_true(st.invalid >= 3);
    assert_true(st.too_large >= 6);
    assert_true(st.timeouts >= 3);
    assert_true(st.http_errors >= 6);
    assert_true(st.connect_errors >= 3);
    assert_int_equal(st.emitted, cs->n);
    assert_int_equal(st.profiles, cs->n);
    assert_int_equal(st.targets, 9);
    fprintf(stderr, "faults: %llu requests, %llu failures, %zu profiles, %zu events\n",
            (unsigned long long)st.requests, (unsigned long long)st.failures, cs->n, ev.n);
    chunks_free(cs);
    free(cs);
    pfr_scrape_free(s);
    pfr_tu_server_stop(srv);
}

/* The queue is bounded (oldest dropped, told once) and a failing emit loses nothing. */
static void test_queue(void **state)
{
    (void)state;
    tu_server *srv;
    assert_int_equal(pfr_tu_server_start(&srv, NULL, NULL), 0);
    struct events ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pfr_scrape_opts o = {.interval_ns = S_NS,
                         .cpu_seconds = 1,
                         .max_queued = 4,
                         .local = PFR_SCRAPE_LOCAL_OFF,
                         .event = on_event,
                         .event_ctx = &ev};
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
    add(s, pfr_tu_server_port(srv), "good", "good");
    assert_int_equal(pfr_scrape_run_once(s), 0); /* 3 profiles (block, mutex: baseline) */
    assert_int_equal(pfr_scrape_run_once(s), 0); /* 5 more: 4 fit */
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.profiles, 8);
    assert_int_equal(st.dropped, 4);
    assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_QUEUE_FULL, "", -2), 1);

    struct chunks *cs = calloc(1, sizeof(*cs));
    cs->fail_at = 3;
    assert_int_equal(pfr_scrape_collect(s, on_chunk, cs), -EIO);
    assert_int_equal(cs->n, 2);
    assert_int_equal(pfr_scrape_collect(s, on_chunk, cs), 0);
    assert_int_equal(cs->n, 4);
    assert_int_equal(count_chunks(cs, "good", NULL), 4);
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.emitted, 4);
    chunks_free(cs);
    free(cs);
    pfr_scrape_free(s);
    pfr_tu_server_stop(srv);
}

struct scan_result {
    size_t chunks, bad;
};

static int scan_block(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct scan_result *r = ctx;
    r->chunks++;
    if (pfr_tu_value_of(p, 0, "main.goodBlock") != 3 || m->ntypes != 2 ||
        strcmp(kv(m->labels, m->nlabels, "zone"), "a") != 0 ||
        strcmp(kv(m->labels, m->nlabels, "env"), "") != 0 || m->start_ns >= m->end_ns)
        r->bad++;
    return 0;
}

/* pfr_scrape_store writes the queue to a real ring in one batch; the thread runs rounds and stops
 * promptly even in the middle of a slow request; a reload keeps the state of targets that stay. */
static void test_thread_store_reload(void **state)
{
    (void)state;
    tu_server *srv;
    assert_int_equal(pfr_tu_server_start(&srv, NULL, NULL), 0);
    unsigned port = pfr_tu_server_port(srv);
    pfr_scrape_opts o = {.interval_ns = S_NS / 2,
                         .cpu_seconds = 1, /* longer than the interval: refused */
                         .timeout_ms = 30000,
                         .local = PFR_SCRAPE_LOCAL_OFF};
    char err[256];
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&o, &s, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "CPU profile"));
    o.endpoints = PFR_SCRAPE_ALL_ENDPOINTS & ~(1u << PFR_SCRAPE_CPU);
    assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/good", port);
    pfr_kv lab = {"zone", "a"};
    pfr_scrape_target good = {.url = url, .service = "good", .labels = &lab, .nlabels = 1};
    assert_int_equal(pfr_scrape_set_targets(s, &good, 1, NULL, 0), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0);

    /* reloads: bad lists are refused whole */
    char slow[128];
    snprintf(slow, sizeof(slow), "http://127.0.0.1:%u/slow", port);
    pfr_scrape_target two[2] = {good, {.url = slow, .service = "slow"}};
    pfr_scrape_target dup[2] = {good, good};
    assert_int_equal(pfr_scrape_set_targets(s, dup, 2, err, sizeof(err)), -EEXIST);
    pfr_scrape_target badt = {.url = "gopher://x", .service = "x"};
    assert_int_equal(pfr_scrape_set_targets(s, &badt, 1, err, sizeof(err)), -EINVAL);

    /* the thread: rounds every interval */
    assert_int_equal(pfr_scrape_start(s), 0);
    assert_int_equal(pfr_scrape_start(s), -EALREADY);
    usleep(1600 * 1000);
    assert_int_equal(pfr_scrape_run_once(s), -EBUSY);
    pfr_scrape_stats sst;
    pfr_scrape_get_stats(s, &sst);
    assert_true(sst.rounds >= 2 + 3);

    /* a reload while it runs: the good target keeps its series (no new baseline); the slow
     * target holds a request open for 20 s, and stop must not wait for it */
    assert_int_equal(pfr_scrape_set_targets(s, two, 2, err, sizeof(err)), 0);
    usleep(800 * 1000);
    int64_t t0 = mono_ns();
    pfr_scrape_stop(s);
    int64_t stop_ms = (mono_ns() - t0) / 1000000;
    fprintf(stderr, "stop took %lld ms\n", (long long)stop_ms);
    assert_true(stop_ms < 1000);
    pfr_scrape_stop(s); /* idempotent */
    pfr_scrape_get_stats(s, &sst);
    assert_int_equal(sst.targets, 2);

    char dir[PATH_MAX];
    pfr_store *st;
    assert_int_equal(pfr_tu_store_open(dir, &st), 0);
    size_t written = 0;
    assert_int_equal(pfr_scrape_store(s, st, &written), 0);
    assert_true(written >= 8);
    assert_int_equal(pfr_scrape_store(s, st, &written), 0);
    assert_int_equal(written, 0);

    /* read it back: every block chunk is a delta of 3 (no new baseline after the reload) */
    pfr_store_filter f = {.type = PFR_SCRAPE_TYPE_BLOCK_CONTENTIONS, .service = "good"};
    struct scan_result r = {0};
    pfr_scan_stats ss;
    assert_int_equal(pfr_store_scan(st, &f, 0, scan_block, &r, &ss), 0);
    assert_true(r.chunks >= 1 + 3);
    assert_int_equal(r.bad, 0);
    assert_int_equal(ss.corrupt, 0);
    pfr_store_close(st);
    pfr_tu_store_remove(dir);
    pfr_scrape_free(s);
    pfr_tu_server_stop(srv);
}

/* https: the certificate is verified unless told otherwise. */
static void test_tls(void **state)
{
    (void)state;
    char dir[] = "/tmp/pfr-scrape-tls-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[1024], cert[256], key[256];
    snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 2 "
             "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             key, cert);
    if (system(cmd) != 0) {
        pfr_tu_store_remove(dir);
        fail_msg(
            "openssl could not make a certificate (scripts/install-deps.sh --test installs it)");
    }
    tu_server *srv;
    assert_int_equal(pfr_tu_server_start(&srv, cert, key), 0);
    char line[256];
    snprintf(line, sizeof(line), "https://127.0.0.1:%u/good service=tls", pfr_tu_server_port(srv));
    for (int mode = 0; mode < 3; mode++) {
        pfr_scrape_opts o = {.interval_ns = S_NS,
                             .endpoints = 1u << PFR_SCRAPE_GOROUTINE,
                             .local = PFR_SCRAPE_LOCAL_OFF,
                             .ca_file = mode == 1 ? cert : NULL,
                             .insecure = mode == 2};
        pfr_scrape *s;
        assert_int_equal(pfr_scrape_new(&o, &s, NULL, 0), 0);
        assert_int_equal(pfr_scrape_add_target_line(s, line, NULL, 0), 0);
        assert_int_equal(pfr_scrape_run_once(s), 0);
        struct chunks *cs = calloc(1, sizeof(*cs));
        assert_int_equal(pfr_scrape_collect(s, on_chunk, cs), 0);
        struct tinfo ti = target_info(s, "/good");
        if (mode == 0) {
            assert_int_equal(cs->n, 0);
            assert_non_null(strstr(ti.last_error, "cannot connect"));
            assert_int_equal(ti.t.consecutive_failures, 1);
        } else {
            assert_int_equal(cs->n, 1);
            assert_int_equal(ti.t.failures, 0);
        }
        chunks_free(cs);
        free(cs);
        pfr_scrape_free(s);
    }
    pfr_tu_server_stop(srv);
    pfr_tu_store_remove(dir);
}

/* A kubelet pod list: api (coroot.com annotations), cart (pyroscope.io, when with_cart) and a
 * pod without annotations, all at 127.0.0.1 so that the test server answers for them. */
static char *pods_json(unsigned port, bool with_cart)
{
    char api[512], cart[512] = "", *j = NULL;
    snprintf(api, sizeof(api),
             "{\"metadata\":{\"name\":\"api-5d4c-x1\",\"namespace\":\"shop\","
             "\"labels\":{\"pod-template-hash\":\"5d4c\"},"
             "\"annotations\":{\"coroot.com/profile-scrape\":\"true\","
             "\"coroot.com/profile-port\":\"%u\"},"
             "\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"api-5d4c\","
             "\"controller\":true}]},"
             "\"spec\":{\"nodeName\":\"node-1\"},"
             "\"status\":{\"phase\":\"Running\",\"podIP\":\"127.0.0.1\"}},",
             port);
    if (with_cart)
        snprintf(cart, sizeof(cart),
                 "{\"metadata\":{\"name\":\"cart-0\",\"namespace\":\"shop\","
                 "\"annotations\":{\"pyroscope.io/scrape\":\"true\",\"pyroscope.io/port\":\"%u\"},"
                 "\"ownerReferences\":[{\"kind\":\"StatefulSet\",\"name\":\"cart\","
                 "\"controller\":true}]},"
                 "\"spec\":{\"nodeName\":\"node-1\"},"
                 "\"status\":{\"phase\":\"Running\",\"podIP\":\"127.0.0.1\"}},",
                 port);
    assert_true(asprintf(&j,
                         "{\"kind\":\"PodList\",\"items\":[%s%s"
                         "{\"metadata\":{\"name\":\"plain\",\"namespace\":\"shop\"},"
                         "\"spec\":{\"nodeName\":\"node-1\"},"
                         "\"status\":{\"phase\":\"Running\",\"podIP\":\"127.0.0.1\"}}]}",
                         api, cart) > 0);
    return j;
}

/* A kubelet-like server, and a folder with its token file "secret-token\n". */
struct k8s_env {
    tu_server *srv;
    unsigned port;
    char dir[32], token[256], kubelet[64];
};

static void k8s_env_start(struct k8s_env *e)
{
    assert_int_equal(pfr_tu_server_start(&e->srv, NULL, NULL), 0);
    e->port = pfr_tu_server_port(e->srv);
    snprintf(e->dir, sizeof(e->dir), "/tmp/pfr-scrape-k8s-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    snprintf(e->token, sizeof(e->token), "%s/token", e->dir);
    assert_int_equal(pfr_tu_write_file(e->token, "secret-token\n", 13), 0);
    snprintf(e->kubelet, sizeof(e->kubelet), "http://127.0.0.1:%u/", e->port);
}

static void k8s_env_stop(struct k8s_env *e)
{
    pfr_tu_server_stop(e->srv);
    pfr_tu_store_remove(e->dir);
}

/* Kubernetes discovery over HTTP with a bearer token: labels, a failing kubelet (last list kept,
 * one event per step), recovery, a pod that goes away. */
static void test_k8s_http(void **state)
{
    (void)state;
    struct k8s_env ke;
    k8s_env_start(&ke);
    tu_server *srv = ke.srv;
    unsigned port = ke.port;
    const char *token = ke.token, *kubelet = ke.kubelet;
    char *json = pods_json(port, true);
    pfr_tu_server_set_pods(srv, json, "secret-token");

    struct events ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
    const int64_t interval = S_NS / 2;
    pfr_scrape_opts o = {
        .interval_ns = interval,
        .endpoints = (1u << PFR_SCRAPE_HEAP) | (1u << PFR_SCRAPE_GOROUTINE),
        .k8s = {.list = {.kubelet_url = kubelet, .token_file = token}, .node_name = "node-1"},
        .event = on_event,
        .event_ctx = &ev};
    pfr_scrape *s;
    char err[256];
    assert_int_equal(pfr_scrape_new(&o, &s, err, sizeof(err)), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.targets, 2);
    assert_int_equal(st.k8s_pods, 3);
    assert_int_equal(st.local_probes, 0); /* Kubernetes configured: no local discovery */
    assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_TARGET_ADDED, "127.0.0.1", -1), 2);
    struct chunks *cs = calloc(1, sizeof(*cs));
    assert_int_equal(pfr_scrape_collect(s, on_chunk, cs), 0);
    assert_int_equal(cs->n, 4);
    assert_int_equal(count_chunks(cs, "api", NULL), 2);
    assert_int_equal(count_chunks(cs, "cart", NULL), 2);
    for (size_t i = 0; i < cs->n; i++)
        assert_string_equal(cs->v[i].pod,
                            !strcmp(cs->v[i].service, "api") ? "api-5d4c-x1" : "cart-0");
    chunks_free(cs);
    struct tinfo ti = target_info(s, "/debug/pprof");
    assert_true(ti.found);
    assert_int_equal(ti.t.source, PFR_SCRAPE_KUBERNETES);
    assert_non_null(strstr(ti.labels, "namespace=shop;"));
    assert_non_null(strstr(ti.labels, "node=node-1;"));

    /* the kubelet fails (500, then a wrong token): targets stay, one event per step */
    pfr_tu_server_set_pods(srv, NULL, NULL);
    int64_t t0 = mono_ns();
    assert_int_equal(pfr_scrape_run_once(s), 0);
    pfr_tu_server_set_pods(srv, json, "another-token");
    for (int i = 1; i <= 4; i++) {
        sleep_until(t0 + i * interval);
        assert_int_equal(pfr_scrape_run_once(s), 0);
    }
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.targets, 2);
    assert_true(st.discovery_errors >= 3);
    size_t derr = count_events(&ev, PFR_SCRAPE_EV_DISCOVERY_ERROR, "", -1);
    assert_true(derr >= 2 && derr < st.discovery_errors + 0u + 1u);
    assert_true(derr <= 3);
    assert_int_equal(pfr_scrape_collect(s, on_chunk, cs), 0);
    assert_true(cs->n >= 4 * 2); /* scraped all along */
    chunks_free(cs);

    /* back, without the cart pod */
    free(json);
    json = pods_json(port, false);
    pfr_tu_server_set_pods(srv, json, "secret-token");
    t0 = mono_ns();
    for (int i = 0; i < 8 && count_events(&ev, PFR_SCRAPE_EV_TARGET_REMOVED, "", -1) == 0; i++) {
        sleep_until(t0 + i * interval);
        assert_int_equal(pfr_scrape_run_once(s), 0);
    }
    assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_TARGET_REMOVED, "127.0.0.1", -1), 1);
    assert_int_equal(count_events(&ev, PFR_SCRAPE_EV_RECOVERED, "", -1), 1);
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.targets, 1);
    free(cs);
    free(json);
    pfr_scrape_free(s);
    k8s_env_stop(&ke);
}

/* One pod list client lent to the identities' resolver and the scraper, as the recorder does:
 * both get what they need from one fetch; a token with a control character inside is refused
 * before any request (the stricter of the two checks the consumers had). */
#define SHARED_RID "a0000000000000000000000000000000000000000000000000000000000000aa"
static void test_k8s_shared(void **state)
{
    (void)state;
    struct k8s_env ke;
    k8s_env_start(&ke);
    char *json;
    assert_true(asprintf(&json,
                         "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":"
                         "\"api-5d4c-x1\",\"namespace\":\"shop\",\"annotations\":{"
                         "\"coroot.com/profile-scrape\":\"true\",\"coroot.com/profile-port\":"
                         "\"%u\"}},\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{"
                         "\"name\":\"api\"}]},\"status\":{\"phase\":\"Running\",\"podIP\":"
                         "\"127.0.0.1\",\"containerStatuses\":[{\"name\":\"api\","
                         "\"containerID\":\"containerd://" SHARED_RID "\"}]}}]}",
                         ke.port) > 0);
    pfr_tu_server_set_pods(ke.srv, json, "secret-token");

    pfr_k8s_pods_opts ko = {.kubelet_url = ke.kubelet, .token_file = ke.token};
    pfr_k8s_pods *pods;
    char err[256];
    assert_int_equal(pfr_k8s_pods_new(&ko, &pods, err, sizeof(err)), 0);
    pfr_identity_opts io = {.docker_socket = "",
                            .docker_root = "",
                            .containerd_root = "",
                            .crio_root = "",
                            .pods = pods};
    pfr_identity *id;
    assert_int_equal(pfr_identity_new(&io, &id, err, sizeof(err)), 0);
    assert_int_equal(pfr_k8s_pods_start(pods), 0);
    pfr_identity *late;
    assert_int_equal(pfr_identity_new(&io, &late, err, sizeof(err)), -EBUSY); /* started */

    pfr_scrape_opts so = {.interval_ns = S_NS,
                          .endpoints = 1u << PFR_SCRAPE_HEAP,
                          .k8s = {.pods = pods, .node_name = "node-1"}};
    pfr_scrape *s;
    assert_int_equal(pfr_scrape_new(&so, &s, err, sizeof(err)), 0);
    assert_int_equal(pfr_scrape_run_once(s), 0);
    pfr_scrape_stats st;
    pfr_scrape_get_stats(s, &st);
    assert_int_equal(st.targets, 1);
    assert_int_equal(st.k8s_pods, 1);

    const char *cg = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2942c55e_"
                     "c9cb_428a_93f4_eaf89c1f3ce0.slice/cri-containerd-" SHARED_RID ".scope";
    pfr_identity_result r;
    int64_t end = mono_ns() + 5 * S_NS;
    do {
        pfr_identity_lookup(id, cg, 0, &r);
        if (r.state == PFR_IDENTITY_PENDING)
            sleep_until(mono_ns() + S_NS / 100);
    } while (r.state == PFR_IDENTITY_PENDING && mono_ns() < end);
    assert_int_equal(r.state, PFR_IDENTITY_RESOLVED);
    assert_string_equal(r.container_id, "/k8s/shop/api-5d4c-x1/api");
    assert_int_equal(pfr_tu_server_requests(ke.srv, "pods"), 1); /* one fetch served both */
    pfr_identity_stats is;
    pfr_identity_get_stats(id, &is);
    assert_int_equal(is.k8s_fetches, 1);
    assert_int_equal(is.k8s_containers, 1);

    /* a tab inside the token: refused, nothing sent */
    assert_int_equal(pfr_tu_write_file(ke.token, "secret\ttoken\n", 13), 0);
    pfr_k8s_pods_opts bad = {
        .kubelet_url = ke.kubelet, .token_file = ke.token, .min_refresh_ms = -1};
    pfr_k8s_pods *p2;
    assert_int_equal(pfr_k8s_pods_new(&bad, &p2, err, sizeof(err)), 0);
    assert_int_equal(pfr_k8s_pods_start(p2), 0);
    int rc = 0;
    pfr_k8s_podlist *l = pfr_k8s_pods_get(p2, 0, NULL, &rc, err, sizeof(err));
    assert_null(l);
    assert_int_equal(rc, -EINVAL);
    assert_non_null(strstr(err, "token"));
    assert_int_equal(pfr_tu_server_requests(ke.srv, "pods"), 1);
    pfr_k8s_pods_free(p2);

    pfr_scrape_free(s);
    pfr_identity_free(id);
    pfr_k8s_pods_free(pods);
    free(json);
    k8s_env_stop(&ke);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_faults),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_thread_store_reload),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_k8s_http),
        cmocka_unit_test(test_k8s_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
