/* Unit tests of pfr-shipper's modules: value parsing, backoff and Retry-After, batching and the
 * bandwidth pacer, RowBinary primitives, Coroot's stack hash and pprof re-timing, the ClickHouse
 * row encoder (RowBinary and Native bodies, profile and ring-samples paths), ClickHouse answers
 * and error codes, secrets kept out of messages, configuration layers, and the state file. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "batch.h"
#include "pfr_buf.h"
#include "sinks/clickhouse/ch_schema.h"
#include "sinks/clickhouse/ch_lastseen.h"
#include "sinks/clickhouse/ch_error_codes.h"
#include "sinks/clickhouse/ch_rows.h"
#include "config.h"
#include "sinks/coroot_conventions.h"
#include "http.h"
#include "fmt.h"
#include "pfr_units.h"
#include "pfr_time.h"
#include "pfr_testgen.h"
#include "redact.h"
#include "retry.h"
#include "sink.h"
#include "sinks/clickhouse/clickhouse_sink.h"
#include "sinks/coroot/coroot_sink.h"
#include "state.h"
#include "sinks/service_name.h"

/* ---- parse ---- */

/* The shipper's settings take common/pfr_units.h's syntaxes: every form it took before. */
static void test_durations(void **st)
{
    (void)st;
    static const struct {
        const char *in;
        int64_t ms;
    } ok[] = {{"250ms", 250},  {"10s", 10000},   {"1.5", 1500},    {"5m", 300000},
              {"2h", 7200000}, {"1d", 86400000}, {"1m30s", 90000}, {"0", 0}};
    char err[256];
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t ns = -1;
        if (pfr_parse_duration(ok[i].in, &ns, err, sizeof(err)) || ns != ok[i].ms * 1000000)
            fail_msg("%s: %lld (%s)", ok[i].in, (long long)ns, err);
    }
    static const char *const bad[] = {"-1s", "10 parsecs", "", "s", "1e300h"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ns;
        if (pfr_parse_duration(bad[i], &ns, err, sizeof(err)) >= 0)
            fail_msg("accepted: '%s'", bad[i]);
    }
}

static void test_sizes(void **st)
{
    (void)st;
    static const struct {
        const char *in;
        uint64_t v;
    } ok[] = {{"4096", 4096},     {"512k", 512 * 1024}, {"8M", 8u << 20},
              {"1GiB", 1u << 30}, {"2KB", 2048},        {"12B", 12}};
    char err[256];
    uint64_t v;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (pfr_parse_size(ok[i].in, &v, err, sizeof(err)) || v != ok[i].v)
            fail_msg("%s: %llu (%s)", ok[i].in, (unsigned long long)v, err);
    assert_int_equal(pfr_parse_size("3X", &v, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_parse_size("-3", &v, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_parse_size("99999999999999999999", &v, err, sizeof(err)), -ERANGE);
    assert_int_equal(pfr_parse_size("20000000000T", &v, err, sizeof(err)), -ERANGE);
    bool b;
    assert_int_equal(pfr_parse_bool("Yes", &b, err, sizeof(err)), 0);
    assert_true(b);
    assert_int_equal(pfr_parse_bool("off", &b, err, sizeof(err)), 0);
    assert_false(b);
    assert_int_equal(pfr_parse_bool("maybe", &b, err, sizeof(err)), -EINVAL);
    uint64_t u;
    assert_int_equal(pfr_parse_count("12", 100, &u, err, sizeof(err)), 0);
    assert_int_equal(u, 12);
    assert_int_equal(pfr_parse_count("101", 100, &u, err, sizeof(err)), -ERANGE);
    assert_int_equal(pfr_parse_count("1x", 100, &u, err, sizeof(err)), -EINVAL);
}

static void test_times(void **st)
{
    (void)st;
    /* the backfill range is parsed by the query tool's parser (common/pfr_time.c, tested in
     * tests/query/test_time.c); here: the forms docs/shipper.md shows, in UTC */
    setenv("TZ", "UTC", 1);
    tzset();
    const int64_t now = 1714557600ll * 1000000000; /* 2024-05-01T10:00:00Z */
    static const struct {
        const char *in;
        int64_t want;
    } ok[] = {
        {"now", now},
        {"-2h", now - 7200ll * 1000000000},
        {"@1714557600", now},
        {"2024-05-01T10:00:00Z", now},
        {"2024-05-01 10:00:00", now}, /* local time, TZ=UTC here */
        {"2024-05-01T12:00:00+02:00", now},
        {"2024-05-01T10:00:00.5Z", now + 500000000},
        {"2024-05-01", now - 36000ll * 1000000000},
        {"2000-02-29T00:00:00Z", 951782400ll * 1000000000},
    };
    char err[1024];
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t t = 0;
        if (pfr_time_parse(ok[i].in, now, &t, err, sizeof(err)) != 0 || t != ok[i].want)
            fail_msg("%s: %lld (%s)", ok[i].in, (long long)t, err);
    }
    int64_t t;
    assert_int_equal(pfr_time_parse("2024-13-01", now, &t, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_time_parse("yesterday", now, &t, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "now")); /* the error lists the accepted forms */
    assert_int_equal(pfr_time_parse("2024-05-01T10:00:00Zjunk", now, &t, err, sizeof(err)),
                     -EINVAL);
    char b[64];
    assert_string_equal(pfr_time_format(now, true, b, sizeof(b)), "2024-05-01T10:00:00Z");
    assert_string_equal(pfr_fmt_duration(271000, b, sizeof(b)), "4m31s");
    assert_string_equal(pfr_fmt_duration(250, b, sizeof(b)), "250ms");
    assert_string_equal(pfr_fmt_bytes(812, b, sizeof(b)), "812 B");
    assert_string_equal(pfr_fmt_bytes(3 << 20, b, sizeof(b)), "3.0 MiB");
}

/* ---- retry ---- */

static void test_outcomes(void **st)
{
    (void)st;
    assert_int_equal(pfr_outcome_of_status(200), PFR_OUT_OK);
    assert_int_equal(pfr_outcome_of_status(204), PFR_OUT_OK);
    assert_int_equal(pfr_outcome_of_status(400), PFR_OUT_REJECT);
    assert_int_equal(pfr_outcome_of_status(413), PFR_OUT_REJECT);
    assert_int_equal(pfr_outcome_of_status(422), PFR_OUT_REJECT);
    /* About the sink (key, URL, proxy), not the chunk: nothing is set aside. */
    assert_int_equal(pfr_outcome_of_status(401), PFR_OUT_SINK);
    assert_int_equal(pfr_outcome_of_status(403), PFR_OUT_SINK);
    assert_int_equal(pfr_outcome_of_status(404), PFR_OUT_SINK);
    assert_int_equal(pfr_outcome_of_status(405), PFR_OUT_SINK);
    assert_int_equal(pfr_outcome_of_status(407), PFR_OUT_SINK);
    assert_int_equal(pfr_outcome_of_status(301), PFR_OUT_SINK);
    assert_int_equal(pfr_outcome_of_status(100), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(0), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(408), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(425), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(429), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(500), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(503), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(599), PFR_OUT_RETRY);
    assert_string_equal(pfr_outcome_name(PFR_OUT_SINK), "refused by the sink");
}

/* An answer's outcome from pfr_sink_result_from_http: status, Content-Type, body. */
static enum pfr_outcome answer_outcome(long status, const char *ctype, const char *body, char *msg,
                                       size_t cap)
{
    pfr_http_resp resp = {.status = status, .retry_after_ms = -1};
    snprintf(resp.content_type, sizeof(resp.content_type), "%s", ctype);
    resp.body = (char *)body;
    resp.body_len = strlen(body);
    pfr_http_snippet(body, strlen(body), resp.quote, sizeof(resp.quote));
    pfr_sink_result r;
    pfr_sink_result_reset(&r);
    pfr_sink_result_from_http(&r, PFR_OUT_OK, &resp);
    snprintf(msg, cap, "%s", r.message);
    return r.outcome;
}

/* A 4xx page says nothing about the content: the sink's failure, not the chunk's (but 413 and
 * 414, the request's size). Plain words stay the content's. */
static void test_page_answers(void **st)
{
    (void)st;
    char m[512];
    const char *nginx = "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS "
                        "port</title></head>\r\n<body>...</body>\r\n</html>\r\n";
    assert_int_equal(answer_outcome(400, "text/html", nginx, m, sizeof(m)), PFR_OUT_SINK);
    assert_non_null(strstr(m, "HTTP 400: 400 The plain HTTP request was sent to HTTPS port (an "
                              "HTML page"));
    assert_int_equal(answer_outcome(400, "", "  \n<!DOCTYPE html><p>no", m, sizeof(m)),
                     PFR_OUT_SINK);
    assert_int_equal(answer_outcome(422, "text/html; charset=utf-8", "oops", m, sizeof(m)),
                     PFR_OUT_SINK);
    assert_int_equal(answer_outcome(413, "text/html", nginx, m, sizeof(m)), PFR_OUT_REJECT);
    assert_int_equal(answer_outcome(414, "text/html", nginx, m, sizeof(m)), PFR_OUT_REJECT);
    assert_int_equal(
        answer_outcome(400, "text/plain", "decoding profile: unexpected EOF\n", m, sizeof(m)),
        PFR_OUT_REJECT);
    assert_string_equal(m, "HTTP 400: decoding profile: unexpected EOF");
    assert_int_equal(answer_outcome(500, "text/html", nginx, m, sizeof(m)), PFR_OUT_RETRY);
    assert_int_equal(answer_outcome(200, "text/html", nginx, m, sizeof(m)), PFR_OUT_OK);
}

static void test_backoff(void **st)
{
    (void)st;
    pfr_backoff b = {.initial_ms = 1000, .max_ms = 300000};
    uint64_t rng = 12345;
    for (unsigned a = 1; a <= 30; a++) {
        int64_t full = 1000;
        for (unsigned i = 1; i < a; i++)
            full = full * 2 > 300000 ? 300000 : full * 2;
        for (int k = 0; k < 50; k++) {
            int64_t d = pfr_backoff_delay_ms(&b, a, -1, &rng);
            assert_true(d >= full - full / 2);
            assert_true(d <= full);
        }
    }
    /* jitter: not always the same */
    int64_t d1 = pfr_backoff_delay_ms(&b, 8, -1, &rng), same = 0;
    for (int k = 0; k < 20; k++)
        same += pfr_backoff_delay_ms(&b, 8, -1, &rng) == d1;
    assert_true(same < 20);
    /* Retry-After raises the delay, within the cap */
    assert_true(pfr_backoff_delay_ms(&b, 1, 30000, &rng) == 30000);
    assert_true(pfr_backoff_delay_ms(&b, 1, 3600000, &rng) == 300000);
    assert_true(pfr_backoff_delay_ms(&b, 12, 0, &rng) >= 150000);
    /* defaults when unset */
    pfr_backoff z = {0};
    assert_true(pfr_backoff_delay_ms(&z, 100, -1, &rng) <= PFR_BACKOFF_MAX_MS);
    assert_true(pfr_backoff_delay_ms(&z, 1, -1, &rng) >= PFR_BACKOFF_INITIAL_MS / 2);
}

static void test_retry_after(void **st)
{
    (void)st;
    assert_int_equal(pfr_retry_after_ms("120", 0), 120000);
    assert_int_equal(pfr_retry_after_ms(" 0 ", 0), 0);
    assert_int_equal(pfr_retry_after_ms(NULL, 0), -1);
    assert_int_equal(pfr_retry_after_ms("soon", 0), -1);
    assert_int_equal(pfr_retry_after_ms("12abc", 0), -1);
    /* Wed, 01 May 2024 10:00:00 GMT is 1714557600 */
    assert_int_equal(pfr_retry_after_ms("Wed, 01 May 2024 10:00:00 GMT", 1714557540), 60000);
    assert_int_equal(pfr_retry_after_ms("Wed, 01 May 2024 10:00:00 GMT", 1714557660), 0);
    assert_true(pfr_retry_after_ms("99999999999999", 0) <= 30ll * 86400 * 1000);
}

/* ---- batching ---- */

static void test_batch_wait(void **st)
{
    (void)st;
    pfr_batch_limits l = {.max_chunks = 10, .max_bytes = 1000, .max_age_ms = 5000};
    int64_t now = 100ll * 1000000000;
    pfr_backlog b = {0};
    assert_true(pfr_batch_wait_ms(&l, &b, now, false) == INT64_MAX);
    b = (pfr_backlog){.chunks = 2, .bytes = 100, .oldest_end = now - 1000000000};
    assert_int_equal(pfr_batch_wait_ms(&l, &b, now, false), 4000);
    assert_int_equal(pfr_batch_wait_ms(&l, &b, now, true), 0);
    b.oldest_end = now - 6ll * 1000000000;
    assert_int_equal(pfr_batch_wait_ms(&l, &b, now, false), 0);
    b.oldest_end = now;
    b.chunks = 10;
    assert_int_equal(pfr_batch_wait_ms(&l, &b, now, false), 0);
    b.chunks = 1;
    b.bytes = 1000;
    assert_int_equal(pfr_batch_wait_ms(&l, &b, now, false), 0);
}

static void test_pacer(void **st)
{
    (void)st;
    pfr_pacer p = {.rate = 1000}; /* bytes/s */
    assert_int_equal(pfr_pacer_wait_ns(&p, 0), 0);
    pfr_pacer_sent(&p, 500, 0);
    assert_int_equal(pfr_pacer_wait_ns(&p, 0), 500000000);
    assert_int_equal(pfr_pacer_wait_ns(&p, 400000000), 100000000);
    pfr_pacer_sent(&p, 1000, 200000000); /* queued behind the first */
    assert_int_equal(pfr_pacer_wait_ns(&p, 500000000), 1000000000);
    pfr_pacer u = {0};
    pfr_pacer_sent(&u, 1 << 30, 0);
    assert_int_equal(pfr_pacer_wait_ns(&u, 0), 0);
}

/* ---- buf ---- */

static void test_buf(void **st)
{
    (void)st;
    pfr_buf b = {0};
    pfr_buf_uvarint(&b, 0);
    pfr_buf_uvarint(&b, 127);
    pfr_buf_uvarint(&b, 128);
    pfr_buf_uvarint(&b, 300);
    pfr_buf_uvarint(&b, UINT64_MAX);
    const uint8_t want[] = {0x00, 0x7f, 0x80, 0x01, 0xac, 0x02, 0xff, 0xff,
                            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    pfr_buf_reset(&b);
    pfr_ch_string(&b, "abc", 3);
    pfr_buf_u64le(&b, 0x0102030405060708ull);
    const uint8_t w2[] = {3, 'a', 'b', 'c', 8, 7, 6, 5, 4, 3, 2, 1};
    assert_memory_equal(b.data, w2, sizeof(w2));
    pfr_buf_reset(&b);
    pfr_buf_printf(&b, "%s-%d", "x", 42);
    assert_string_equal(pfr_buf_cstr(&b), "x-42");
    pfr_buf_free(&b);
}

/* ---- Coroot's conventions ---- */

static void test_fnv(void **st)
{
    (void)st;
    /* FNV-1a 64 reference values */
    assert_true(pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, "", 0) == 0xcbf29ce484222325ull);
    assert_true(pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, "a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, "foobar", 6) == 0x85944171f73967e8ull);
    /* the strings concatenated with no separator: piecewise equals whole */
    uint64_t h = pfr_hash_fnv1a(PFR_HASH_FNV_OFFSET, "foo", 3);
    assert_true(pfr_hash_fnv1a(h, "bar", 3) == 0x85944171f73967e8ull);
    pfr_buf b = {0};
    pfr_frame f = {.function = "main.work", .file = "/src/main.go", .line = 42};
    pfr_coroot_frame(&b, &f);
    assert_string_equal(pfr_buf_cstr(&b), "main.work /src/main.go:42");
    pfr_buf_free(&b);
    pfr_frame none = {.function = "", .file = "", .line = 0};
    assert_false(pfr_coroot_keeps(&none));
    assert_true(pfr_coroot_keeps(&f));
}

static void test_retime(void **st)
{
    (void)st;
    pfr_testgen *g = pfr_testgen_new(7, 0, NULL);
    pfr_profile *p = pfr_testgen_next(g, 1000ll * 1000000000, 10ll * 1000000000);
    uint8_t *raw, *out;
    size_t rawlen, outlen;
    assert_int_equal(pfr_profile_encode(p, false, &raw, &rawlen), 0);
    for (int gz = 0; gz < 2; gz++) {
        assert_int_equal(pfr_pprof_retime(raw, rawlen, 1010ll * 1000000000, 10ll * 1000000000, gz,
                                          6, &out, &outlen),
                         0);
        if (gz)
            assert_true(out[0] == 0x1f && out[1] == 0x8b);
        pfr_profile *q;
        char err[128];
        assert_int_equal(pfr_profile_decode(out, outlen, 0, &q, err, sizeof(err)), 0);
        assert_int_equal(pfr_profile_time_nanos(q), 1010ll * 1000000000);
        assert_int_equal(pfr_profile_duration_nanos(q), 10ll * 1000000000);
        assert_int_equal(pfr_profile_num_samples(q), pfr_profile_num_samples(p));
        assert_int_equal(pfr_testgen_total(q), pfr_testgen_total(p));
        pfr_profile_free(q);
        free(out);
    }
    /* not a protobuf message */
    const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x7f};
    assert_int_equal(pfr_pprof_retime(junk, sizeof(junk), 1, 1, false, 6, &out, &outlen), -EBADMSG);
    const uint8_t zero_field[] = {0x00, 0x01};
    assert_int_equal(pfr_pprof_retime(zero_field, 2, 1, 1, false, 6, &out, &outlen), -EBADMSG);
    free(raw);
    pfr_profile_free(p);
    pfr_testgen_free(g);
}

/* ---- the ClickHouse encoder: decode its RowBinary back ---- */

struct rd {
    const uint8_t *p, *end;
};

static uint64_t rd_varint(struct rd *r)
{
    uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
        assert_true(r->p < r->end);
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80))
            return v;
    }
    fail();
    return 0;
}

static char *rd_str(struct rd *r)
{
    uint64_t n = rd_varint(r);
    assert_true(n <= (uint64_t)(r->end - r->p));
    char *s = malloc(n + 1);
    memcpy(s, r->p, n);
    s[n] = 0;
    r->p += n;
    return s;
}

static uint64_t rd_u64(struct rd *r)
{
    assert_true(r->end - r->p >= 8);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += 8;
    return v;
}

/* Coroot's hash of sample i's stack, computed here from the model's frames. */
static uint64_t expect_hash(const pfr_profile *p, size_t i)
{
    pfr_frame fr[512];
    size_t n = pfr_profile_sample_frames(p, i, fr, 512);
    assert_true(n <= 512);
    uint64_t h = PFR_HASH_FNV_OFFSET;
    for (size_t k = 0; k < n; k++) {
        char s[2048];
        int len =
            snprintf(s, sizeof(s), "%s %s:%lld", fr[k].function, fr[k].file, (long long)fr[k].line);
        h = pfr_hash_fnv1a(h, s, (size_t)len);
    }
    return h;
}

struct decoded {
    size_t rows;
    int64_t sum;
    uint64_t hashes[8192];
    int64_t values[8192];
};

static void decode_samples(const pfr_buf *b, const pfr_chunk_meta *m, struct decoded *d)
{
    struct rd r = {b->data, b->data + b->len};
    d->rows = 0;
    d->sum = 0;
    while (r.p < r.end) {
        char *svc = rd_str(&r), *type = rd_str(&r);
        assert_string_equal(svc, m->service);
        assert_string_equal(type, "ebpf:cpu:nanoseconds");
        assert_int_equal((int64_t)rd_u64(&r), m->start_ns);
        assert_int_equal((int64_t)rd_u64(&r), m->end_ns);
        uint64_t nl = rd_varint(&r);
        assert_int_equal(nl, m->nlabels);
        for (uint64_t i = 0; i < nl; i++) {
            char *k = rd_str(&r), *v = rd_str(&r);
            assert_string_equal(k, m->labels[i].key);
            assert_string_equal(v, m->labels[i].value);
            free(k);
            free(v);
        }
        assert_true(d->rows < 8192);
        d->hashes[d->rows] = rd_u64(&r);
        d->values[d->rows] = (int64_t)rd_u64(&r);
        d->sum += d->values[d->rows];
        d->rows++;
        free(svc);
        free(type);
    }
}

static size_t decode_stacks(const pfr_buf *b, const char *svc, int64_t last_seen)
{
    struct rd r = {b->data, b->data + b->len};
    size_t rows = 0;
    while (r.p < r.end) {
        char *s = rd_str(&r);
        assert_string_equal(s, svc);
        free(s);
        uint64_t hash = rd_u64(&r);
        assert_int_equal((int64_t)rd_u64(&r), last_seen);
        uint64_t n = rd_varint(&r), h = PFR_HASH_FNV_OFFSET;
        for (uint64_t i = 0; i < n; i++) {
            char *f = rd_str(&r);
            assert_non_null(strchr(f, ':'));
            h = pfr_hash_fnv1a(h, f, strlen(f));
            free(f);
        }
        assert_true(h == hash);
        rows++;
    }
    return rows;
}

static void test_chenc(void **st)
{
    (void)st;
    const int64_t s0 = 1714557600ll * 1000000000, iv = 10ll * 1000000000,
                  hour = 3600ll * 1000000000;
    pfr_testgen_opts go = {.no_drift = true, .nstacks = 200};
    pfr_testgen *g = pfr_testgen_new(3, 1, &go);
    pfr_profile *p1 = pfr_testgen_next(g, s0, iv), *p2 = pfr_testgen_next(g, s0 + iv, iv);
    pfr_kv labels[] = {{"host.name", "h1"}, {"container.id", "/c/1"}};
    const char *types[] = {"ebpf:cpu:nanoseconds"};
    pfr_chunk_meta m = {.id = 1,
                        .service = pfr_testgen_service(g),
                        .labels = labels,
                        .nlabels = 2,
                        .start_ns = s0,
                        .end_ns = s0 + iv,
                        .types = types,
                        .ntypes = 1};
    pfr_ch_rows *e;
    pfr_ch_rows_opts o = {.stack_refresh_ns = hour};
    assert_int_equal(pfr_ch_rows_new(&o, &e), 0);
    static struct decoded d;

    /* first chunk: one row per distinct stack, sums equal, hashes are Coroot's */
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m, p1), 0);
    decode_samples(pfr_ch_rows_samples(e), &m, &d);
    assert_int_equal(d.sum, pfr_testgen_total(p1));
    assert_int_equal(pfr_ch_rows_sample_rows(e), d.rows);
    size_t distinct = 0;
    for (size_t i = 0; i < pfr_profile_num_samples(p1); i++) {
        uint64_t h = expect_hash(p1, i);
        bool found = false, seen_before = false;
        for (size_t k = 0; k < d.rows && !found; k++)
            found = d.hashes[k] == h;
        for (size_t j = 0; j < i && !seen_before; j++)
            seen_before = expect_hash(p1, j) == h;
        assert_true(found);
        distinct += !seen_before;
    }
    assert_int_equal(d.rows, distinct);
    size_t nst = decode_stacks(pfr_ch_rows_stacks(e), m.service, m.end_ns + hour);
    assert_int_equal(nst, distinct);
    assert_int_equal(pfr_ch_rows_stack_rows(e), nst);

    /* a batch that is discarded leaves the stacks unwritten: they come again */
    pfr_ch_rows_discard(e);
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m, p1), 0);
    assert_int_equal(pfr_ch_rows_stack_rows(e), distinct);
    pfr_ch_rows_commit(e);

    /* the next chunk (same stacks, within the refresh): samples only */
    pfr_chunk_meta m2 = m;
    m2.id = 2;
    m2.start_ns += iv;
    m2.end_ns += iv;
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m2, p2), 0);
    decode_samples(pfr_ch_rows_samples(e), &m2, &d);
    assert_int_equal(d.sum, pfr_testgen_total(p2));
    assert_int_equal(pfr_ch_rows_stack_rows(e), 0);
    pfr_ch_rows_commit(e);

    /* a chunk past the refresh writes its stacks again, with the new LastSeen */
    pfr_chunk_meta m3 = m;
    m3.id = 3;
    m3.start_ns += 2 * hour;
    m3.end_ns += 2 * hour;
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m3, p2), 0);
    assert_true(pfr_ch_rows_stack_rows(e) > 0);
    decode_stacks(pfr_ch_rows_stacks(e), m.service, m3.end_ns + hour);
    pfr_ch_rows_commit(e);

    /* another service with the same stacks: its own stack rows */
    pfr_chunk_meta m4 = m3;
    m4.id = 4;
    m4.service = "other";
    pfr_ch_rows_begin(e);
    assert_int_equal(pfr_ch_rows_add(e, &m4, p2), 0);
    assert_true(pfr_ch_rows_stack_rows(e) > 0);
    pfr_ch_rows_commit(e);

    pfr_chunk_meta bad = m;
    bad.service = "";
    assert_int_equal(pfr_ch_rows_add(e, &bad, p1), -EINVAL);
    pfr_ch_rows_free(e);
    pfr_profile_free(p1);
    pfr_profile_free(p2);
    pfr_testgen_free(g);
}

/* ---- ClickHouse answers ---- */

/* ---- the ClickHouse encoder: Native bodies say what RowBinary says ---- */

/* Rows as text, one line per row, from either format. */
struct rows {
    char **line;
    size_t n, cap;
};

static void rows_add(struct rows *r, char *line)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 1024;
        r->line = realloc(r->line, r->cap * sizeof(*r->line));
        assert_non_null(r->line);
    }
    r->line[r->n++] = line;
}

static void rows_free(struct rows *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->line[i]);
    free(r->line);
    *r = (struct rows){0};
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *out = NULL;
    assert_true(vasprintf(&out, f, ap) >= 0);
    va_end(ap);
    return out;
}

/* Append to *acc (a malloc'ed string) and free piece. */
static void cat(char **acc, char *piece)
{
    char *n = fmt("%s%s", *acc ? *acc : "", piece);
    free(*acc);
    free(piece);
    *acc = n;
}

static void rb_samples(const pfr_buf *b, struct rows *out)
{
    struct rd r = {b->data, b->data + b->len};
    while (r.p < r.end) {
        char *svc = rd_str(&r), *type = rd_str(&r);
        int64_t s = (int64_t)rd_u64(&r), e = (int64_t)rd_u64(&r);
        char *line = fmt("%s|%s|%lld|%lld|", svc, type, (long long)s, (long long)e);
        uint64_t nl = rd_varint(&r);
        for (uint64_t i = 0; i < nl; i++) {
            char *k = rd_str(&r), *v = rd_str(&r);
            cat(&line, fmt("%s=%s,", k, v));
            free(k);
            free(v);
        }
        uint64_t h = rd_u64(&r);
        int64_t v = (int64_t)rd_u64(&r);
        cat(&line, fmt("|%llx|%lld", (unsigned long long)h, (long long)v));
        rows_add(out, line);
        free(svc);
        free(type);
    }
}

static void rb_stacks(const pfr_buf *b, struct rows *out)
{
    struct rd r = {b->data, b->data + b->len};
    while (r.p < r.end) {
        char *svc = rd_str(&r);
        uint64_t h = rd_u64(&r);
        int64_t ls = (int64_t)rd_u64(&r);
        char *line = fmt("%s|%llx|%lld|", svc, (unsigned long long)h, (long long)ls);
        uint64_t n = rd_varint(&r);
        for (uint64_t i = 0; i < n; i++) {
            char *f = rd_str(&r);
            cat(&line, fmt("%s;", f));
            free(f);
        }
        rows_add(out, line);
        free(svc);
    }
}

/* A column head: its name and type must be these. */
static void nat_head(struct rd *r, const char *name, const char *type)
{
    char *n = rd_str(r), *t = rd_str(r);
    assert_string_equal(n, name);
    assert_string_equal(t, type);
    free(n);
    free(t);
}

/* A LowCardinality(String) granule after its version word: the values of its rows. */
static char **nat_lc(struct rd *r, size_t rows)
{
    uint64_t flags = rd_u64(r);
    assert_int_equal(flags & ~3ull, 0x600);
    unsigned width = 1u << (flags & 3);
    uint64_t nkeys = rd_u64(r);
    char **keys = calloc(nkeys ? nkeys : 1, sizeof(*keys));
    for (uint64_t i = 0; i < nkeys; i++)
        keys[i] = rd_str(r);
    assert_string_equal(keys[0], ""); /* ClickHouse's own layout: the default first */
    assert_int_equal(rd_u64(r), rows);
    char **vals = calloc(rows ? rows : 1, sizeof(*vals));
    for (size_t i = 0; i < rows; i++) {
        uint64_t k = 0;
        assert_true((size_t)(r->end - r->p) >= width);
        for (unsigned j = 0; j < width; j++)
            k |= (uint64_t)r->p[j] << (8 * j);
        r->p += width;
        assert_true(k < nkeys);
        vals[i] = strdup(keys[k]);
    }
    for (uint64_t i = 0; i < nkeys; i++)
        free(keys[i]);
    free(keys);
    return vals;
}

static int64_t *nat_u64s(struct rd *r, size_t n)
{
    int64_t *v = calloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = (int64_t)rd_u64(r);
    return v;
}

static void free_strs(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void nat_samples(const pfr_buf *b, struct rows *out)
{
    if (!b->len)
        return;
    struct rd r = {b->data, b->data + b->len};
    assert_int_equal(rd_varint(&r), 7);
    size_t n = rd_varint(&r);
    nat_head(&r, "ServiceName", "LowCardinality(String)");
    assert_int_equal(rd_u64(&r), 1);
    char **svc = nat_lc(&r, n);
    nat_head(&r, "Type", "LowCardinality(String)");
    assert_int_equal(rd_u64(&r), 1);
    char **type = nat_lc(&r, n);
    nat_head(&r, "Start", "DateTime64(9)");
    int64_t *start = nat_u64s(&r, n);
    nat_head(&r, "End", "DateTime64(9)");
    int64_t *end = nat_u64s(&r, n);
    nat_head(&r, "Labels", "Map(LowCardinality(String), String)");
    assert_int_equal(rd_u64(&r), 1);
    int64_t *off = nat_u64s(&r, n);
    size_t nent = n ? (size_t)off[n - 1] : 0;
    char **keys = nent ? nat_lc(&r, nent) : NULL;
    char **vals = calloc(nent ? nent : 1, sizeof(*vals));
    for (size_t i = 0; i < nent; i++)
        vals[i] = rd_str(&r);
    nat_head(&r, "StackHash", "UInt64");
    int64_t *hash = nat_u64s(&r, n);
    nat_head(&r, "Value", "Int64");
    int64_t *value = nat_u64s(&r, n);
    assert_true(r.p == r.end);
    for (size_t i = 0; i < n; i++) {
        char *line =
            fmt("%s|%s|%lld|%lld|", svc[i], type[i], (long long)start[i], (long long)end[i]);
        for (size_t k = i ? (size_t)off[i - 1] : 0; k < (size_t)off[i]; k++)
            cat(&line, fmt("%s=%s,", keys[k], vals[k]));
        cat(&line, fmt("|%llx|%lld", (unsigned long long)hash[i], (long long)value[i]));
        rows_add(out, line);
    }
    free_strs(svc, n);
    free_strs(type, n);
    free_strs(keys, keys ? nent : 0);
    free_strs(vals, nent);
    free(start);
    free(end);
    free(off);
    free(hash);
    free(value);
}

static void nat_stacks(const pfr_buf *b, struct rows *out)
{
    if (!b->len)
        return;
    struct rd r = {b->data, b->data + b->len};
    assert_int_equal(rd_varint(&r), 4);
    size_t n = rd_varint(&r);
    nat_head(&r, "ServiceName", "LowCardinality(String)");
    assert_int_equal(rd_u64(&r), 1);
    char **svc = nat_lc(&r, n);
    nat_head(&r, "Hash", "UInt64");
    int64_t *hash = nat_u64s(&r, n);
    nat_head(&r, "LastSeen", "DateTime64(9)");
    int64_t *ls = nat_u64s(&r, n);
    nat_head(&r, "Stack", "Array(String)");
    int64_t *off = nat_u64s(&r, n);
    for (size_t i = 0; i < n; i++) {
        char *line = fmt("%s|%llx|%lld|", svc[i], (unsigned long long)hash[i], (long long)ls[i]);
        for (size_t k = i ? (size_t)off[i - 1] : 0; k < (size_t)off[i]; k++) {
            char *f = rd_str(&r);
            cat(&line, fmt("%s;", f));
            free(f);
        }
        rows_add(out, line);
    }
    assert_true(r.p == r.end);
    free_strs(svc, n);
    free(hash);
    free(ls);
    free(off);
}

static void assert_rows_equal(const struct rows *a, const struct rows *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++)
        assert_string_equal(a->line[i], b->line[i]);
}

/* Both encoders got the same chunks: the same rows in the same order. */
static void assert_same_bodies(pfr_ch_rows *rb, pfr_ch_rows *nat)
{
    struct rows a = {0}, b = {0};
    rb_samples(pfr_ch_rows_samples(rb), &a);
    nat_samples(pfr_ch_rows_samples(nat), &b);
    assert_int_equal(a.n, pfr_ch_rows_sample_rows(nat));
    assert_rows_equal(&a, &b);
    rows_free(&a);
    rows_free(&b);
    rb_stacks(pfr_ch_rows_stacks(rb), &a);
    nat_stacks(pfr_ch_rows_stacks(nat), &b);
    assert_int_equal(a.n, pfr_ch_rows_stack_rows(nat));
    assert_rows_equal(&a, &b);
    rows_free(&a);
    rows_free(&b);
}

static void test_chenc_native(void **st)
{
    (void)st;
    const int64_t s0 = 1714557600ll * 1000000000, iv = 10ll * 1000000000;
    pfr_testgen_opts go = {.nstacks = 30, .max_depth = 20};
    pfr_testgen *g = pfr_testgen_new(5, 2, &go);
    pfr_ch_rows *rb, *nat;
    pfr_ch_rows_opts o = {.format = PFR_CH_ROWBINARY};
    assert_int_equal(pfr_ch_rows_new(&o, &rb), 0);
    o.format = PFR_CH_NATIVE;
    assert_int_equal(pfr_ch_rows_new(&o, &nat), 0);
    const char *types[] = {"ebpf:cpu:nanoseconds"};
    pfr_kv labels[] = {{"host.name", "h1"}, {"container.id", "/c/1"}, {"pod", ""}};
    /* An empty batch: empty bodies. */
    pfr_ch_rows_begin(rb);
    pfr_ch_rows_begin(nat);
    assert_int_equal(pfr_ch_rows_samples(nat)->len, 0);
    assert_int_equal(pfr_ch_rows_stacks(nat)->len, 0);
    assert_int_equal(pfr_ch_rows_bytes(nat), 0);
    /* 300 services (two-byte dictionary indices), label sets of 0..3 entries. */
    for (int i = 0; i < 300; i++) {
        pfr_profile *p = pfr_testgen_next(g, s0 + i * iv, iv);
        char svc[32];
        snprintf(svc, sizeof(svc), "svc-%d", i % 150 ? i : 0);
        pfr_chunk_meta m = {.id = i + 1,
                            .service = svc,
                            .labels = labels,
                            .nlabels = (size_t)i % 4,
                            .start_ns = s0 + i * iv,
                            .end_ns = s0 + (i + 1) * iv,
                            .types = types,
                            .ntypes = 1};
        assert_int_equal(pfr_ch_rows_add(rb, &m, p), 0);
        assert_int_equal(pfr_ch_rows_add(nat, &m, p), 0);
        pfr_profile_free(p);
        if (i == 0) /* one chunk, no labels: a map with no entries at all */
            assert_same_bodies(rb, nat);
    }
    assert_same_bodies(rb, nat);
    uint64_t est = pfr_ch_rows_bytes(nat),
             real = pfr_ch_rows_samples(nat)->len + pfr_ch_rows_stacks(nat)->len;
    assert_true(est > real / 2 && est < real * 2);
    /* Rendering again after more rows. */
    pfr_ch_rows_commit(rb);
    pfr_ch_rows_commit(nat);
    pfr_ch_rows_free(rb);
    pfr_ch_rows_free(nat);
    pfr_testgen_free(g);
}

/* ---- the ClickHouse encoder: blocks in the tables' ORDER BY, one stack row per key ---- */

/* Field i (0-based) of a decoded row "a|b|c|...", as a malloc'ed string. */
static char *field(const char *line, int i)
{
    while (i-- > 0) {
        line = strchr(line, '|');
        assert_non_null(line);
        line++;
    }
    return strndup(line, strcspn(line, "|"));
}

static uint64_t field_hex(const char *line, int i)
{
    char *f = field(line, i);
    uint64_t v = strtoull(f, NULL, 16);
    free(f);
    return v;
}

static int64_t field_num(const char *line, int i)
{
    char *f = field(line, i);
    int64_t v = strtoll(f, NULL, 10);
    free(f);
    return v;
}

static void test_chenc_order(void **st)
{
    (void)st;
    const int64_t s0 = 1714557600ll * 1000000000, iv = 10ll * 1000000000;
    pfr_testgen_opts go = {.nstacks = 40, .max_depth = 12};
    pfr_testgen *g = pfr_testgen_new(3, 1, &go);
    pfr_ch_rows *e;
    /* A refresh of one interval: a stack used in chunks two intervals apart gets a second row
     * in the same batch, which the body must not carry twice. */
    pfr_ch_rows_opts o = {.stack_refresh_ns = iv};
    assert_int_equal(pfr_ch_rows_new(&o, &e), 0);
    const char *types[] = {"ebpf:cpu:nanoseconds"};
    const char *svcs[] = {"svc-c", "svc-a", "svc-b", "svc-a2"};
    pfr_kv labels[] = {{"host.name", "h1"}};
    pfr_ch_rows_begin(e);
    for (int i = 0; i < 12; i++)
        for (int k = 0; k < 4; k++) {
            pfr_profile *p = pfr_testgen_next(g, s0 + i * iv, iv);
            /* svc-a2 runs half an interval late: its Start second sorts between the others' */
            int64_t off = k == 3 ? iv / 2 : 0;
            pfr_chunk_meta m = {.id = i * 4 + k + 1,
                                .service = svcs[k],
                                .labels = labels,
                                .nlabels = 1,
                                .start_ns = s0 + i * iv + off,
                                .end_ns = s0 + (i + 1) * iv + off,
                                .types = types,
                                .ntypes = 1};
            assert_int_equal(pfr_ch_rows_add(e, &m, p), 0);
            pfr_profile_free(p);
        }
    struct rows sa = {0}, stk = {0};
    rb_samples(pfr_ch_rows_samples(e), &sa);
    rb_stacks(pfr_ch_rows_stacks(e), &stk);
    assert_int_equal(sa.n, pfr_ch_rows_sample_rows(e));
    assert_true(stk.n < pfr_ch_rows_stack_rows(e)); /* some keys came twice */
    /* samples: by ServiceName, Type, Start, End (whole seconds) */
    for (size_t i = 1; i < sa.n; i++) {
        char *a = field(sa.line[i - 1], 0), *b = field(sa.line[i], 0);
        int c = strcmp(a, b);
        free(a);
        free(b);
        assert_true(c <= 0);
        if (c == 0) {
            int64_t s1 = field_num(sa.line[i - 1], 2) / 1000000000,
                    s2 = field_num(sa.line[i], 2) / 1000000000;
            assert_true(s1 <= s2);
        }
    }
    /* stacks: by ServiceName, Hash, each key once, and its LastSeen covers every sample row
     * that points at it (the last row added for a key is the one kept) */
    for (size_t i = 0; i < stk.n; i++) {
        char *sv = field(stk.line[i], 0);
        uint64_t h = field_hex(stk.line[i], 1);
        int64_t last = field_num(stk.line[i], 2);
        if (i) {
            char *pv = field(stk.line[i - 1], 0);
            int c = strcmp(pv, sv);
            assert_true(c < 0 || (c == 0 && field_hex(stk.line[i - 1], 1) < h));
            free(pv);
        }
        for (size_t j = 0; j < sa.n; j++) {
            char *ss = field(sa.line[j], 0);
            if (!strcmp(ss, sv) && field_hex(sa.line[j], 5) == h)
                assert_true(last >= field_num(sa.line[j], 3));
            free(ss);
        }
        free(sv);
    }
    /* every sample's stack has a row */
    for (size_t j = 0; j < sa.n; j++) {
        char *ss = field(sa.line[j], 0);
        uint64_t h = field_hex(sa.line[j], 5);
        bool found = false;
        for (size_t i = 0; i < stk.n && !found; i++) {
            char *sv = field(stk.line[i], 0);
            found = !strcmp(sv, ss) && field_hex(stk.line[i], 1) == h;
            free(sv);
        }
        assert_true(found);
        free(ss);
    }
    rows_free(&sa);
    rows_free(&stk);
    pfr_ch_rows_free(e);
    pfr_testgen_free(g);
}

/* ---- the ClickHouse encoder: the ring's samples path gives the profile path's rows ---- */

struct both {
    pfr_ch_rows *a, *b; /* profile path, samples path */
    int64_t ids[64];
    size_t n, nb;
};

static int profile_add(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct both *x = ctx;
    assert_true(x->n < 64);
    x->ids[x->n++] = m->id;
    return pfr_ch_rows_add(x->a, m, p);
}

static int samples_add(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    struct both *x = ctx;
    assert_true(x->nb < x->n && x->ids[x->nb] == m->id);
    x->nb++;
    return pfr_ch_rows_add_samples(x->b, m, v);
}

static void assert_same_rb(pfr_ch_rows *a, pfr_ch_rows *b)
{
    const pfr_buf *x = pfr_ch_rows_samples(a), *y = pfr_ch_rows_samples(b);
    assert_int_equal(x->len, y->len);
    assert_memory_equal(x->data, y->data, x->len);
    x = pfr_ch_rows_stacks(a);
    y = pfr_ch_rows_stacks(b);
    assert_int_equal(x->len, y->len);
    if (x->len)
        assert_memory_equal(x->data, y->data, x->len);
}

static void test_chenc_samples(void **st)
{
    (void)st;
    char dir[] = "/tmp/pfr-chenc-XXXXXX", path[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/ring.db", dir);
    pfr_store *s;
    pfr_store_opts so = {.max_bytes = 64ull << 20};
    assert_int_equal(pfr_store_open(path, &so, &s, err, sizeof(err)), 0);
    const int64_t s0 = 1714557600ll * 1000000000, iv = 10ll * 1000000000;
    pfr_testgen_opts go = {.nstacks = 60, .drift_permille = 100};
    pfr_testgen *g[3];
    pfr_kv labels[] = {{"host.name", "h1"}, {"container.id", "/c/1"}};
    for (unsigned k = 0; k < 3; k++)
        g[k] = pfr_testgen_new(9, k, &go);
    for (int i = 0; i < 40; i++)
        for (unsigned k = 0; k < 3; k++) {
            pfr_profile *p = pfr_testgen_next(g[k], s0 + i * iv, iv);
            pfr_chunk_in in = {pfr_testgen_service(g[k]), labels, k, s0 + i * iv,
                               s0 + (i + 1) * iv,         p};
            assert_int_equal(pfr_store_append(s, &in, NULL), 0);
            pfr_profile_free(p);
        }
    /* A short refresh: stack rows come again every few batches. */
    pfr_ch_rows_opts o = {.stack_refresh_ns = 60 * iv / 10};
    struct both x = {0};
    assert_int_equal(pfr_ch_rows_new(&o, &x.a), 0);
    assert_int_equal(pfr_ch_rows_new(&o, &x.b), 0);
    int64_t after = 0;
    for (int batch = 0; after < 120; batch++) {
        pfr_store_filter f = {.after_id = after, .limit = 7};
        x.n = x.nb = 0;
        pfr_ch_rows_begin(x.a);
        pfr_ch_rows_begin(x.b);
        assert_int_equal(pfr_store_scan(s, &f, 0, profile_add, &x, NULL), 0);
        assert_int_equal(pfr_store_scan_samples(s, &f, 0, samples_add, &x, NULL), 0);
        assert_int_equal(x.nb, x.n);
        assert_same_rb(x.a, x.b);
        if (batch % 5 == 2) {
            /* A batch that did not arrive: the same rows next time. */
            pfr_ch_rows_discard(x.a);
            pfr_ch_rows_discard(x.b);
            continue;
        }
        pfr_ch_rows_commit(x.a);
        pfr_ch_rows_commit(x.b);
        after = x.ids[x.n - 1];
    }
    pfr_chunk_meta bad = {.service = ""};
    assert_int_equal(pfr_ch_rows_add_samples(x.b, &bad, NULL), -EINVAL);
    pfr_ch_rows_free(x.a);
    pfr_ch_rows_free(x.b);
    for (unsigned k = 0; k < 3; k++)
        pfr_testgen_free(g[k]);
    pfr_store_close(s);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_ch_answers(void **st)
{
    (void)st;
    const char *good = "profiling_samples\tEnd\tDateTime64(9)\n"
                       "profiling_samples\tLabels\tMap(LowCardinality(String), String)\n"
                       "profiling_samples\tServiceName\tLowCardinality(String)\n"
                       "profiling_samples\tStackHash\tUInt64\n"
                       "profiling_samples\tStart\tDateTime64(9)\n"
                       "profiling_samples\tType\tLowCardinality(String)\n"
                       "profiling_samples\tValue\tInt64\n"
                       "profiling_stacks\tHash\tUInt64\n"
                       "profiling_stacks\tLastSeen\tDateTime64(9)\n"
                       "profiling_stacks\tServiceName\tLowCardinality(String)\n"
                       "profiling_stacks\tStack\tArray(String)\n";
    char why[256];
    assert_true(pfr_ch_check_columns(good, why, sizeof(why)));
    assert_false(pfr_ch_check_columns("", why, sizeof(why)));
    assert_non_null(strstr(why, "missing"));
    assert_false(pfr_ch_check_columns("<html>hello</html>", why, sizeof(why)));
    char *wrong = strdup(good);
    char *v = strstr(wrong, "\tInt64");
    memcpy(v, "\tInt32", 6);
    assert_false(pfr_ch_check_columns(wrong, why, sizeof(why)));
    assert_non_null(strstr(why, "Value is Int32"));
    free(wrong);

    bool rep, found;
    const char *tables =
        "profiling_samples\tMergeTree\tMergeTree PARTITION BY toDate(Start) ORDER BY x SETTINGS "
        "index_granularity = 8192, non_replicated_deduplication_window = 10000\n"
        "profiling_stacks\tReplicatedReplacingMergeTree\tReplicatedReplacingMergeTree('/x')\n";
    assert_int_equal(pfr_ch_dedup_window(tables, "profiling_samples", &rep, &found), 10000);
    assert_true(found);
    assert_false(rep);
    assert_int_equal(pfr_ch_dedup_window(tables, "profiling_stacks", &rep, &found), 0);
    assert_true(rep);
    assert_int_equal(pfr_ch_dedup_window(tables, "profiling_profiles", &rep, &found), 0);
    assert_false(found);
    assert_int_equal(pfr_ch_dedup_window("profiling_samples\tMergeTree\tMergeTree ORDER BY x\n"
                                         "z\tnon_replicated_deduplication_window = 5",
                                         "profiling_samples", &rep, &found),
                     0);
}

/* ---- ClickHouse error answers ---- */

static void test_ch_verdicts(void **st)
{
    (void)st;
    static const struct {
        long status, code;
        enum pfr_ch_verdict want;
    } cases[] = {
        /* credentials and rights, with the statuses ClickHouse gives them */
        {403, 516, PFR_CH_SINK}, /* AUTHENTICATION_FAILED */
        {403, 192, PFR_CH_SINK}, /* UNKNOWN_USER */
        {403, 193, PFR_CH_SINK}, /* WRONG_PASSWORD */
        {401, 194, PFR_CH_SINK}, /* REQUIRED_PASSWORD */
        {403, 497, PFR_CH_SINK}, /* ACCESS_DENIED */
        {500, 164, PFR_CH_SINK}, /* READONLY */
        {500, 201, PFR_CH_SINK}, /* QUOTA_EXCEEDED */
        {429, 201, PFR_CH_SINK},
        {500, 291, PFR_CH_SINK}, /* DATABASE_ACCESS_DENIED */
        {400, 62, PFR_CH_SINK},  /* SYNTAX_ERROR: our statement */
        {404, 115, PFR_CH_SINK}, /* UNKNOWN_SETTING */
        /* where the rows go */
        {404, 81, PFR_CH_SCHEMA}, /* UNKNOWN_DATABASE */
        {404, 60, PFR_CH_SCHEMA}, /* UNKNOWN_TABLE */
        {404, 16, PFR_CH_SCHEMA},
        {404, 47, PFR_CH_SCHEMA},
        /* the rows themselves */
        {400, 27, PFR_CH_DATA}, /* CANNOT_PARSE_INPUT_ASSERTION_FAILED */
        {400, 53, PFR_CH_DATA},
        {400, 0, PFR_CH_DATA},   /* any other 4xx, as before */
        {400, 354, PFR_CH_DATA}, /* an unknown code: the status decides */
        {500, 27, PFR_CH_RETRY}, /* a server failure never blames the rows */
        /* transient */
        {503, 202, PFR_CH_RETRY},
        {500, 252, PFR_CH_RETRY}, /* TOO_MANY_PARTS */
        {408, 159, PFR_CH_RETRY}, /* TIMEOUT_EXCEEDED */
        {500, 0, PFR_CH_RETRY},
        {500, 1001, PFR_CH_RETRY},
        {429, 0, PFR_CH_RETRY},
        /* no code: a proxy in front */
        {401, 0, PFR_CH_SINK},
        {403, 0, PFR_CH_SINK},
        {404, 0, PFR_CH_SINK},
        {302, 0, PFR_CH_SINK},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum pfr_ch_verdict v = pfr_ch_verdict_of(cases[i].status, cases[i].code);
        if (v != cases[i].want)
            fail_msg("status %ld code %ld: verdict %d, want %d", cases[i].status, cases[i].code, v,
                     cases[i].want);
    }
    /* The code: the header first, else the body's "Code: NNN." */
    assert_int_equal(pfr_ch_exception_code("516", "Code: 81. x"), 516);
    assert_int_equal(pfr_ch_exception_code("", "Code: 81. DB::Exception: Database x does not "
                                               "exist. (UNKNOWN_DATABASE)"),
                     81);
    assert_int_equal(pfr_ch_exception_code(NULL, "oops\nCode: 27. DB::Exception"), 27);
    assert_int_equal(pfr_ch_exception_code(NULL, NULL), 0);
    assert_int_equal(pfr_ch_exception_code(NULL, "Code: x"), 0);
    assert_int_equal(pfr_ch_exception_code("-5", NULL), 0);
    assert_int_equal(pfr_ch_exception_code("99999999999999999999", NULL), 0);
    assert_string_equal(pfr_ch_code_name(516), "AUTHENTICATION_FAILED");
    assert_null(pfr_ch_code_name(123456));
}

/* ---- secrets and quoted answers ---- */

static void test_redact(void **st)
{
    (void)st;
    pfr_secrets k = {0};
    assert_int_equal(pfr_secrets_add(&k, "s3cr3t-key"), 0);
    assert_int_equal(pfr_secrets_add(&k, "s3cr3t-key"), 0); /* once */
    assert_int_equal(pfr_secrets_add(&k, NULL), 0);
    assert_int_equal(pfr_secrets_add(&k, ""), 0);
    assert_int_equal(k.n, 1);
    /* RFC 7617's example pair */
    assert_int_equal(pfr_secrets_add_basic(&k, "Aladdin", "open sesame"), 0);
    assert_string_equal(k.v[1], "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    assert_int_equal(pfr_secrets_add_basic(&k, "pfr", "chpw"), 0);
    assert_string_equal(k.v[2], "cGZyOmNocHc=");
    assert_int_equal(pfr_secrets_add_basic(&k, "u", NULL), 0);
    assert_int_equal(k.n, 3);

    char b[256];
    snprintf(b, sizeof(b),
             "X-API-Key: s3cr3t-key\nAuthorization: Basic cGZyOmNocHc=\n"
             "again s3cr3t-keys3cr3t-key end");
    size_t n = pfr_redact(b, strlen(b), &k);
    assert_int_equal(n, strlen(b));
    assert_string_equal(b, "X-API-Key: ***\nAuthorization: Basic ***\nagain ****** end");
    /* nothing to find */
    snprintf(b, sizeof(b), "project not found");
    assert_int_equal(pfr_redact(b, strlen(b), &k), 17);
    assert_string_equal(b, "project not found");
    assert_int_equal(pfr_redact(b, strlen(b), NULL), 17);
    /* a secret cut off at the end of a kept text */
    const char *cut = "... key=s3cr3t-k";
    assert_int_equal(pfr_redact_cut(cut, strlen(cut), &k), strlen("... key="));
    assert_int_equal(pfr_redact_cut("no tail", 7, &k), 7);
    pfr_secrets_free(&k);
    assert_int_equal(k.n, 0);

    /* Short secrets: as many stars; the longest match wins. */
    assert_int_equal(pfr_secrets_add(&k, "ab"), 0);
    assert_int_equal(pfr_secrets_add(&k, "abcd"), 0);
    snprintf(b, sizeof(b), "xabcdyab");
    n = pfr_redact(b, strlen(b), &k);
    assert_string_equal(b, "x***y**");
    assert_int_equal(n, 7);
    pfr_secrets_free(&k);

    /* bytes that would forge log lines or colour a terminal */
    snprintf(b, sizeof(b), "a\nb\x1b[31mc\x7f\xff");
    pfr_text_printable(b);
    assert_string_equal(b, "a?b?[31mc??");
}

static void test_quote(void **st)
{
    (void)st;
    /* The sanitiser: printable ASCII, blanks collapsed, bounded with "..." */
    char b[64];
    const char *hostile = "\r\n  HTTP/1.1 200 OK\r\n\x1b]0;pwned\x07\xc3\xa9t\xc3\xa9 \t end";
    pfr_http_snippet(hostile, strlen(hostile), b, sizeof(b));
    assert_string_equal(b, "HTTP/1.1 200 OK ?]0;pwned???t?? end");
    char big[2000];
    memset(big, 'x', sizeof(big));
    pfr_http_snippet(big, sizeof(big), b, sizeof(b));
    assert_true(strlen(b) < sizeof(b));
    assert_string_equal(b + strlen(b) - 3, "...");
    pfr_http_snippet("", 0, b, sizeof(b));
    assert_string_equal(b, "");

    /* A sink's message: its secrets redacted, whatever wrote it. */
    pfr_sink_conf conf;
    char err[128];
    assert_int_equal(pfr_sink_conf_init(&conf, &pfr_sink_clickhouse, err, sizeof(err)), 0);
    assert_int_equal(
        pfr_sink_conf_set(&conf, "url", "http://ops:urlpass@127.0.0.1:1", err, sizeof(err)), 0);
    assert_int_equal(pfr_sink_conf_set(&conf, "user", "pfr", err, sizeof(err)), 0);
    conf.name = strdup("ch");
    conf.api_key = strdup("chpw");
    pfr_http_opts ho = {0};
    pfr_sink *s;
    assert_int_equal(pfr_sink_new(&conf, &ho, &s, err, sizeof(err)), 0);
    char m[256];
    snprintf(m, sizeof(m),
             "HTTP 403: X-ClickHouse-Key: chpw; Authorization: Basic cGZyOmNocHc= "
             "b3BzOnVybHBhc3M= urlpass\x1b");
    pfr_sink_scrub(s, m);
    assert_string_equal(m, "HTTP 403: X-ClickHouse-Key: ***; Authorization: Basic *** *** ***?");
    pfr_sink_free(s);
    pfr_sink_conf_release(&conf);
}

/* ---- http helpers ---- */

/* A server of one answer: accepts one connection, reads the request's head, sends answer. */
struct one_answer {
    int fd;
    const char *answer;
};

static void *serve_one(void *arg)
{
    struct one_answer *o = arg;
    int c = accept(o->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    char req[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(req) - 1 && (r = read(c, req + n, sizeof(req) - 1 - n)) > 0) {
        n += (size_t)r;
        req[n] = 0;
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    assert_true(write(c, o->answer, strlen(o->answer)) == (ssize_t)strlen(o->answer));
    close(c);
    return NULL;
}

/* http.h keeps the answer headers a request names (a sink's server's own), printable and with
 * the client's secrets redacted, and knows none itself. */
static void test_http_kept_headers(void **st)
{
    (void)st;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    struct one_answer o = {.fd = fd,
                           .answer = "HTTP/1.1 200 OK\r\nx-clickhouse-exception-code: 62\r\n"
                                     "X-Echo: key s3cret\x01\r\nX-ClickHouse-Summary: {}\r\n"
                                     "Content-Length: 2\r\nConnection: close\r\n\r\nok"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve_one, &o), 0);
    pfr_secrets k = {0};
    assert_int_equal(pfr_secrets_add(&k, "s3cret"), 0);
    pfr_http_opts ho = {.secrets = &k};
    pfr_http *h;
    assert_int_equal(pfr_http_new(&ho, &h), 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", ntohs(a.sin_port));
    static const char *const keep[] = {"X-Echo", "X-ClickHouse-Exception-Code", "X-Absent"};
    pfr_http_req req = {.url = url, .keep_headers = keep, .nkeep_headers = 3};
    pfr_http_resp resp;
    assert_int_equal(pfr_http_do(h, &req, &resp), PFR_OUT_OK);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.kept[0], "key ***?");
    assert_string_equal(resp.kept[1], "62");
    assert_string_equal(resp.kept[2], "");
    assert_string_equal(resp.kept[3], ""); /* not asked for */
    pfr_http_resp_free(&resp);
    pfr_http_free(h);
    pfr_secrets_free(&k);
    pthread_join(t, NULL);
    close(fd);
}

static void test_http_helpers(void **st)
{
    (void)st;
    char *e = pfr_url_escape("svc a/b&c=d~_.-");
    assert_string_equal(e, "svc%20a%2Fb%26c%3Dd~_.-");
    free(e);
    char b[128];
    assert_string_equal(pfr_url_redact("https://u:secret@ch.example:8443/x?y", b, sizeof(b)),
                        "https://***@ch.example:8443/x?y");
    assert_string_equal(pfr_url_redact("http://host/a@b", b, sizeof(b)), "http://host/a@b");
    const char *raw = "  Code: 60.\n\tDB::Exception \x01 x";
    pfr_http_snippet(raw, strlen(raw), b, sizeof(b));
    assert_string_equal(b, "Code: 60. DB::Exception ? x");
    char small[12];
    pfr_http_snippet("abcdefghijklmnopqrstuvwxyz", 26, small, sizeof(small));
    assert_true(strlen(small) < sizeof(small));
    assert_non_null(strstr(small, "..."));
}

/* ---- state ---- */

/* A state file of a shipper from before sink_failures: read as it is (status, read-only) the
 * count is 0; opened to write, it gains the column, keeps its rows and counts. Its ring count
 * seen is not known (that shipper counted its losses itself) until one is put. */
static void test_state_old_file(void **st)
{
    (void)st;
    char dir[] = "/tmp/pfr-shipper-state-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], cmd[2048];
    snprintf(path, sizeof(path), "%s/s.db", dir);
    snprintf(cmd, sizeof(cmd),
             "sqlite3 %s \"CREATE TABLE sink (name TEXT PRIMARY KEY, kind TEXT NOT NULL, cursor "
             "INTEGER NOT NULL DEFAULT 0, pending_after INTEGER NOT NULL DEFAULT 0, pending_max "
             "INTEGER NOT NULL DEFAULT 0, pending_limit INTEGER NOT NULL DEFAULT 0, pending_token "
             "TEXT NOT NULL DEFAULT '', batch_limit INTEGER NOT NULL DEFAULT 0, attempts INTEGER "
             "NOT NULL DEFAULT 0, next_attempt_ns INTEGER NOT NULL DEFAULT 0, last_attempt_ns "
             "INTEGER NOT NULL DEFAULT 0, last_success_ns INTEGER NOT NULL DEFAULT 0, "
             "last_error_ns INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '', "
             "delivered_chunks INTEGER NOT NULL DEFAULT 0, delivered_bytes INTEGER NOT NULL "
             "DEFAULT 0, rejected_chunks INTEGER NOT NULL DEFAULT 0, lost_chunks INTEGER NOT NULL "
             "DEFAULT 0, corrupt_chunks INTEGER NOT NULL DEFAULT 0, retries INTEGER NOT NULL "
             "DEFAULT 0); INSERT INTO sink (name, kind, cursor, retries) VALUES ('co', 'coroot', "
             "17, 5); PRAGMA user_version=1;\"",
             path);
    assert_int_equal(system(cmd), 0);
    pfr_state *s;
    char err[256];
    pfr_sink_state a;
    assert_int_equal(pfr_state_open(path, true, &s, err, sizeof(err)), 0);
    assert_int_equal(pfr_state_sink_get(s, "co", NULL, &a), 0);
    assert_int_equal(a.cursor, 17);
    assert_int_equal(a.retries, 5);
    assert_int_equal(a.sink_failures, 0);
    assert_int_equal(a.skipped_chunks, 0);
    assert_true(a.ring_lost_unknown);
    pfr_state_close(s);
    assert_int_equal(pfr_state_open(path, false, &s, err, sizeof(err)), 0);
    assert_int_equal(pfr_state_sink_get(s, "co", "coroot", &a), 0);
    assert_int_equal(a.cursor, 17);
    assert_true(a.ring_lost_unknown);
    assert_int_equal(a.ring_lost_seen, 0);
    a.sink_failures = 3;
    a.skipped_chunks = 9;
    assert_int_equal(pfr_state_sink_put(s, &a), 0); /* still not known */
    assert_int_equal(pfr_state_sink_get(s, "co", "coroot", &a), 0);
    assert_true(a.ring_lost_unknown);
    a.ring_lost_unknown = false;
    a.ring_lost_seen = 4;
    assert_int_equal(pfr_state_sink_put(s, &a), 0);
    pfr_state_close(s);
    assert_int_equal(pfr_state_open(path, true, &s, err, sizeof(err)), 0);
    assert_int_equal(pfr_state_sink_get(s, "co", NULL, &a), 0);
    assert_int_equal(a.retries, 5);
    assert_int_equal(a.sink_failures, 3);
    assert_int_equal(a.skipped_chunks, 9);
    assert_false(a.ring_lost_unknown);
    assert_int_equal(a.ring_lost_seen, 4);
    pfr_state_close(s);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ship = agent: the chunks Coroot's node agent would send (a Coroot container id, not a systemd
 * system service); ship = all: every one. */
static void test_ship_policy(void **st)
{
    (void)st;
    pfr_sink_conf c = {.ship = PFR_SHIP_AGENT, .skip_system_services = true};
    struct {
        const char *cid; /* NULL: no container.id label */
        bool agent, all_units, any_filter;
    } cases[] = {
        {"/k8s/ns/pod-7d4f9c8b6-x2b5k/app", true, true, true},
        {"/docker/web", true, true, true},
        {"/system.slice/nginx.service", true, true, false},
        {"/system.slice/systemd-journald.service", false, true, true},
        {"/system.slice/dbus.service", false, true, true},
        {"/system.slice/system-getty.slice", false, true, true},
        {"/runtime.slice/snapd.service", false, true, true},
        {"/k8s/ns/systemd-x/app", true, true, true}, /* not a unit: never a system service */
        {"/system.slice/x/systemd-y.service", true, true, true}, /* not an id the agent makes */
        {"", false, false, false},
        {NULL, false, false, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pfr_kv labels[2] = {{"host.name", "h"}, {"container.id", cases[i].cid}};
        pfr_chunk_meta m = {
            .id = 1, .service = "s", .labels = labels, .nlabels = cases[i].cid ? 2 : 1};
        c.ship = PFR_SHIP_AGENT;
        c.skip_system_services = true;
        c.system_service_prefixes = NULL;
        if (pfr_coroot_ships(&c, NULL, &m) != cases[i].agent)
            fail_msg("%s: agent", cases[i].cid ? cases[i].cid : "(none)");
        c.skip_system_services = false;
        if (pfr_coroot_ships(&c, NULL, &m) != cases[i].all_units)
            fail_msg("%s: skip_system_services off", cases[i].cid ? cases[i].cid : "(none)");
        c.skip_system_services = true;
        c.system_service_prefixes = "nginx";
        if (pfr_coroot_ships(&c, NULL, &m) != cases[i].any_filter)
            fail_msg("%s: prefixes nginx", cases[i].cid ? cases[i].cid : "(none)");
        c.ship = PFR_SHIP_ALL;
        assert_true(pfr_coroot_ships(&c, NULL, &m));
    }
}

/* Write text to root/rel, making its directories. */
static void put_file(const char *root, const char *rel, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        (void)mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ship = agent with the unit files: a oneshot unit, a dbus one and one a timer starts are
 * system services; a plain one and one without files are not; the cache keeps its answers
 * until its ttl, then reads again. */
static void test_ship_policy_units(void **st)
{
    (void)st;
    char root[] = "/tmp/pfr-ship-units-XXXXXX", cmd[64];
    assert_non_null(mkdtemp(root));
    put_file(root, "lib/systemd/system/apt-daily.service", "[Service]\nType=oneshot\n");
    put_file(root, "lib/systemd/system/bus.service", "[Service]\nBusName=a.b\nExecStart=/x\n");
    put_file(root, "lib/systemd/system/job.service", "[Service]\nExecStart=/x\n");
    put_file(root, "lib/systemd/system/job.timer", "[Timer]\nOnCalendar=daily\n");
    put_file(root, "etc/systemd/system/timers.target.wants/job.timer",
             "[Timer]\nOnCalendar=daily\n");
    put_file(root, "lib/systemd/system/web.service", "[Service]\nExecStart=/x\n");
    pfr_sink_conf c = {
        .name = "co", .ship = PFR_SHIP_AGENT, .skip_system_services = true, .systemd_root = root};
    pfr_unit_cache *units;
    assert_int_equal(pfr_coroot_units_new(&c, &units), 0);
    assert_non_null(units);
    struct {
        const char *cid;
        bool ships;
    } cases[] = {
        {"/system.slice/apt-daily.service", false}, {"/system.slice/bus.service", false},
        {"/system.slice/job.service", false},       {"/system.slice/web.service", true},
        {"/system.slice/absent.service", true},     {"/system.slice/dbus.service", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pfr_kv labels[1] = {{"container.id", cases[i].cid}};
        pfr_chunk_meta m = {.id = 1, .service = "s", .labels = labels, .nlabels = 1};
        if (pfr_coroot_ships(&c, units, &m) != cases[i].ships)
            fail_msg("%s: ships should be %d", cases[i].cid, cases[i].ships);
        if (!pfr_coroot_ships(&c, NULL, &m) && strcmp(cases[i].cid, "/system.slice/dbus.service"))
            fail_msg("%s: by name only, it ships", cases[i].cid);
    }
    pfr_unit_cache_free(units);
    /* no cache where nothing is looked at */
    c.ship = PFR_SHIP_ALL;
    assert_int_equal(pfr_coroot_units_new(&c, &units), 0);
    assert_null(units);
    c.ship = PFR_SHIP_AGENT, c.skip_system_services = false;
    assert_int_equal(pfr_coroot_units_new(&c, &units), 0);
    assert_null(units);

    /* the cache: the same answer until the ttl, the file's new one after */
    assert_int_equal(pfr_unit_cache_new(root, 1000, &units), 0);
    pfr_systemd_props p;
    bool fresh;
    assert_int_equal(pfr_unit_cache_get(units, "web.service", 0, &p, &fresh), 0);
    assert_true(fresh);
    assert_string_equal(p.type, "simple");
    put_file(root, "lib/systemd/system/web.service", "[Service]\nType=oneshot\n");
    assert_int_equal(pfr_unit_cache_get(units, "web.service", 999, &p, &fresh), 0);
    assert_false(fresh);
    assert_string_equal(p.type, "simple");
    assert_int_equal(pfr_unit_cache_get(units, "web.service", 1000, &p, &fresh), 0);
    assert_true(fresh);
    assert_string_equal(p.type, "oneshot");
    /* an error is an answer too; a root that is not there answers its errno */
    assert_int_equal(pfr_unit_cache_get(units, "../x.service", 1000, &p, &fresh), -EINVAL);
    pfr_unit_cache_free(units);
    assert_int_equal(pfr_unit_cache_new("/nonexistent-pfr-root", 1000, &units), 0);
    assert_int_equal(pfr_unit_cache_get(units, "web.service", 0, &p, &fresh), -ENOENT);
    assert_int_equal(p.load, PFR_SYSTEMD_NOT_FOUND);
    pfr_unit_cache_free(units);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

/* Only chunks of a type Coroot averages move their Start: by [1 ns, 1 s), under half the chunk,
 * the same for one instance (container.id, namespace, pod), another for another. */
static void test_start_shift(void **st)
{
    (void)st;
    const char *cpu[] = {"ebpf:cpu:nanoseconds"};
    const char *heap[] = {"go_runtime:heap_alloc_space:bytes", "go_runtime:heap_inuse_space:bytes"};
    pfr_kv a[] = {{"container.id", "/k8s/ns/api-1/app"}, {"pod", "api-1"}, {"host.name", "h1"}};
    pfr_kv a2[] = {{"container.id", "/k8s/ns/api-1/app"}, {"pod", "api-1"}, {"host.name", "h2"}};
    pfr_kv b[] = {{"container.id", "/k8s/ns/api-2/app"}, {"pod", "api-2"}};
    int64_t s = 1000000000000000000, e = s + 10000000000;
    pfr_chunk_meta m = {
        .start_ns = s, .end_ns = e, .labels = a, .nlabels = 3, .types = cpu, .ntypes = 1};
    assert_int_equal(pfr_coroot_start_shift(&m), 0);
    m.types = heap;
    m.ntypes = 2;
    int64_t x = pfr_coroot_start_shift(&m);
    assert_true(x >= 1 && x < 1000000000);
    m.labels = a2; /* the host is not part of Coroot's instance key */
    assert_int_equal(pfr_coroot_start_shift(&m), x);
    m.labels = b;
    m.nlabels = 2;
    assert_true(pfr_coroot_start_shift(&m) != x);
    m.end_ns = s + 1000; /* a short chunk: under half of it */
    x = pfr_coroot_start_shift(&m);
    assert_true(x >= 1 && x < 500);
    assert_true(pfr_coroot_averaged("go:goroutine_goroutine:count"));
    assert_false(pfr_coroot_averaged("go:heap_alloc_space:bytes"));
}

static void test_state(void **st)
{
    (void)st;
    char dir[] = "/tmp/pfr-shipper-state-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/s.db", dir);
    pfr_state *s;
    char err[256];
    assert_int_equal(pfr_state_open(path, false, &s, err, sizeof(err)), 0);
    pfr_sink_state a;
    assert_int_equal(pfr_state_sink_get(s, "coroot", "coroot", &a), 0);
    assert_int_equal(a.cursor, 0);
    a.cursor = 42;
    a.pending_after = 42;
    a.pending_max = 50;
    a.pending_limit = 8;
    snprintf(a.pending_token, sizeof(a.pending_token), "tok");
    snprintf(a.last_error, sizeof(a.last_error), "HTTP 503: busy");
    a.delivered_chunks = 7;
    assert_int_equal(pfr_state_begin(s), 0);
    assert_int_equal(pfr_state_sink_put(s, &a), 0);
    assert_int_equal(pfr_state_commit(s), 0);
    int64_t ids[] = {3, 9, 5};
    assert_int_equal(pfr_state_reject(s, "coroot", ids, 3, 400, "bad", 1), 0);
    assert_int_equal(pfr_state_reject(s, "coroot", ids, 1, 404, "worse", 2), 0);
    uint64_t n;
    assert_int_equal(pfr_state_rejected_count(s, "coroot", &n), 0);
    assert_int_equal(n, 3);
    int64_t got[8];
    size_t ng;
    assert_int_equal(pfr_state_rejected(s, "coroot", 3, got, 8, &ng), 0);
    assert_int_equal(ng, 2);
    assert_int_equal(got[0], 5);
    assert_int_equal(got[1], 9);
    char why[64];
    int64_t at;
    assert_int_equal(pfr_state_rejected_last(s, "coroot", why, sizeof(why), &at), 0);
    assert_string_equal(why, "worse");
    assert_int_equal(pfr_state_unreject(s, "coroot", ids, 2), 0);
    assert_int_equal(pfr_state_rejected_count(s, "coroot", &n), 0);
    assert_int_equal(n, 1);
    /* Set-aside chunks the ring evicted: dropped and counted, by id. */
    int64_t more[] = {11, 12, 20};
    assert_int_equal(pfr_state_reject(s, "coroot", more, 3, 400, "bad", 3), 0);
    assert_int_equal(pfr_state_reject(s, "other", more, 1, 400, "bad", 3), 0);
    int64_t lo, hi;
    assert_int_equal(pfr_state_rejected_drop_below(s, "coroot", 5, &n, &lo, &hi), 0);
    assert_int_equal(n, 0);
    assert_int_equal(pfr_state_rejected_drop_below(s, "coroot", 13, &n, &lo, &hi), 0);
    assert_int_equal(n, 3); /* 5, 11, 12 */
    assert_int_equal(lo, 5);
    assert_int_equal(hi, 12);
    assert_int_equal(pfr_state_rejected_count(s, "coroot", &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(pfr_state_rejected_drop_below(s, "coroot", INT64_MAX, &n, &lo, &hi), 0);
    assert_int_equal(n, 1);
    assert_int_equal(lo, 20);
    assert_int_equal(pfr_state_rejected_count(s, "other", &n), 0);
    assert_int_equal(n, 1); /* another sink's are its own */
    assert_int_equal(pfr_state_backfill_put(s, "coroot", 10, 20, 77, false, 3), 0);
    int64_t last;
    bool done;
    assert_int_equal(pfr_state_backfill_get(s, "coroot", 10, 20, &last, &done), 0);
    assert_int_equal(last, 77);
    assert_false(done);
    assert_int_equal(pfr_state_backfill_get(s, "coroot", 10, 21, &last, &done), 0);
    assert_int_equal(last, 0);
    assert_int_equal(pfr_state_meta_put(s, "instance", "abc"), 0);
    char v[16];
    assert_int_equal(pfr_state_meta_get(s, "instance", v, sizeof(v)), 0);
    assert_string_equal(v, "abc");
    assert_int_equal(pfr_state_meta_get(s, "nope", v, sizeof(v)), -ENOENT);
    pfr_state_close(s);

    /* read back, read-only */
    assert_int_equal(pfr_state_open(path, true, &s, err, sizeof(err)), 0);
    pfr_sink_state b;
    assert_int_equal(pfr_state_sink_get(s, "coroot", NULL, &b), 0);
    assert_int_equal(b.cursor, 42);
    assert_int_equal(b.pending_max, 50);
    assert_string_equal(b.pending_token, "tok");
    assert_string_equal(b.last_error, "HTTP 503: busy");
    assert_int_equal(b.delivered_chunks, 7);
    assert_int_equal(pfr_state_sink_get(s, "other", NULL, &b), -ENOENT);
    pfr_state_close(s);
    /* Private, whatever the umask: the file quotes the servers. */
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- service_prefix, Coroot's database names, the cluster survey ---- */

static void test_svcname(void **st)
{
    (void)st;
    pfr_buf b = {0};
    assert_string_equal(pfr_sink_service_name(NULL, "/k8s/ns/app", &b), "/k8s/ns/app");
    assert_string_equal(pfr_sink_service_name("", "/k8s/ns/app", &b), "/k8s/ns/app");
    assert_string_equal(pfr_sink_service_name("site1-", "/k8s/ns/app", &b), "site1-/k8s/ns/app");
    assert_string_equal(pfr_sink_service_name("site1-", "nginx.service", &b),
                        "site1-nginx.service");
    assert_null(pfr_sink_service_name("site1-", "", &b)); /* no service stays none */
    assert_null(pfr_sink_service_name("site1-", NULL, &b));
    pfr_buf_free(&b);
    assert_true(pfr_service_name_prefix_ok("site1-"));
    assert_true(pfr_service_name_prefix_ok(""));
    assert_false(pfr_service_name_prefix_ok("a\tb"));
    char big[PFR_SERVICE_NAME_PREFIX_MAX + 2];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    assert_false(pfr_service_name_prefix_ok(big));
}

static void test_ch_layout(void **st)
{
    (void)st;
    pfr_buf q = {0};
    assert_int_equal(pfr_ch_survey_query("coroot_x1", &q), 0);
    assert_non_null(strstr((const char *)q.data, "database = 'coroot_x1'"));
    pfr_buf_free(&q);

    pfr_ch_layout l;
    char why[128];
    pfr_ch_layout_read("profiling_stacks\tReplacingMergeTree\tReplacingMergeTree ...\n"
                       "profiling_samples\tMergeTree\tMergeTree ...\n"
                       ".keeper\t0\t\n.clusters\t1\t\n",
                       &l);
    assert_true(l.stacks && l.samples);
    assert_false(l.profiles || l.profiles_mv || l.stacks_dist || l.replicated || l.keeper);
    assert_int_equal(l.clusters, 1);
    /* a cluster in the config alone (ClickHouse's default config has one): not Coroot's */
    assert_false(pfr_ch_layout_clustered(&l, why, sizeof(why)));
    pfr_ch_layout_read(".keeper\t1\t\n.clusters\t2\t\n", &l);
    assert_true(pfr_ch_layout_clustered(&l, why, sizeof(why)));
    assert_non_null(strstr(why, "Keeper and 2 clusters"));
    pfr_ch_layout_read(".keeper\t1\t\n.clusters\t1\t\n.cloud\t2\t\n", &l); /* ClickHouse Cloud */
    assert_true(l.cloud);
    assert_false(pfr_ch_layout_clustered(&l, why, sizeof(why)));
    pfr_ch_layout_read("profiling_samples\tReplicatedMergeTree\tReplicatedMergeTree('/t', "
                       "'{replica}')\n",
                       &l);
    assert_true(pfr_ch_layout_clustered(&l, why, sizeof(why)));
    assert_non_null(strstr(why, "Replicated"));
    pfr_ch_layout_read("profiling_stacks_distributed\tDistributed\tDistributed('c', 'db', "
                       "'profiling_stacks', Hash)\nprofiling_samples_distributed\tView\t\n"
                       "profiling_profiles\tReplacingMergeTree\t\n"
                       "profiling_profiles_mv\tMaterializedView\t\n",
                       &l);
    assert_true(l.stacks_dist && l.profiles && l.profiles_mv);
    assert_false(l.samples_dist); /* not a Distributed table */
    assert_true(pfr_ch_layout_clustered(&l, why, sizeof(why)));
    pfr_ch_layout_read("<html>not ClickHouse</html>", &l);
    assert_false(l.stacks || l.keeper || pfr_ch_layout_clustered(&l, why, sizeof(why)));
    pfr_ch_layout_read(NULL, &l);
    assert_false(l.stacks);
}

/* A stack row of one frame: "f<n> file.go:<n>". */
static void one_stack(pfr_ch_columns *c, const char *svc, uint64_t hash, int64_t last_seen)
{
    char s[32];
    int n = snprintf(s, sizeof(s), "f%llu file.go:1", (unsigned long long)hash);
    assert_int_equal(pfr_ch_columns_stack(c, svc, hash, last_seen), 0);
    pfr_ch_columns_stack_str(c, s, (size_t)n);
}

static void test_ch_lastseen(void **st)
{
    (void)st;
    pfr_ch_columns c = {0}, kept = {0};
    /* a:1 twice (the later row counts), a:2, a:3, b'x:1 (same hash, other service), b'x:4 */
    one_stack(&c, "a", 1, 100);
    one_stack(&c, "a", 2, 200);
    one_stack(&c, "b'x", 1, 300);
    one_stack(&c, "a", 3, 300);
    one_stack(&c, "b'x", 4, 400);
    one_stack(&c, "a", 1, 150);
    pfr_ch_lastseen *l;
    assert_int_equal(pfr_ch_lastseen_new(&c, 0, &l), 0);
    pfr_buf q = {0};
    char what[128];
    /* two keys a query: a:1 a:2 | a:3 b'x:1 | b'x:4 */
    assert_int_equal(pfr_ch_lastseen_query(l, "profiling_stacks", 2, &q), 0);
    const char *t = pfr_buf_cstr(&q);
    assert_non_null(strstr(t, "SELECT indexOf(['a'], ServiceName) AS s, Hash, "
                              "toUnixTimestamp64Nano(max(LastSeen)) FROM profiling_stacks "
                              "WHERE ServiceName IN ('a') AND Hash IN (1,2) "
                              "AND (s, Hash) IN ((1,1),(1,2)) GROUP BY s, Hash"));
    /* stored: a:1 at 150 (= ours: not forward), a:2 at 199 (ours is newer) */
    assert_int_equal(pfr_ch_lastseen_apply(l, "1\t1\t150\n1\t2\t199\n", what, sizeof(what)), 2);
    assert_int_equal(pfr_ch_lastseen_query(l, "profiling_stacks_distributed", 2, &q), 0);
    t = pfr_buf_cstr(&q);
    assert_non_null(strstr(t, "indexOf(['a', 'b\\'x'], ServiceName)"));
    assert_non_null(strstr(t, "FROM profiling_stacks_distributed"));
    assert_non_null(strstr(t, "AND (s, Hash) IN ((1,3),(2,1))"));
    /* a cut answer, a line not of numbers, a service not asked about: refused */
    assert_true(pfr_ch_lastseen_apply(l, "2\t1\t300", what, sizeof(what)) < 0);
    assert_true(pfr_ch_lastseen_apply(l, "2\t1\tsoon\n", what, sizeof(what)) < 0);
    assert_true(pfr_ch_lastseen_apply(l, "3\t1\t300\n", what, sizeof(what)) < 0);
    assert_non_null(strstr(what, "line 1"));
    /* b'x:1 stored later than ours; a:3 unknown there: stays */
    assert_int_equal(pfr_ch_lastseen_apply(l, "2\t1\t301\n0\t3\t999\n", what, sizeof(what)), 1);
    assert_int_equal(pfr_ch_lastseen_query(l, "profiling_stacks", 2, &q), 0);
    assert_non_null(strstr((const char *)q.data, "IN ((1,4))"));
    assert_int_equal(pfr_ch_lastseen_apply(l, "", what, sizeof(what)), 0);
    assert_int_equal(pfr_ch_lastseen_query(l, "profiling_stacks", 2, &q), 0);
    assert_int_equal(q.len, 0); /* every key asked */
    /* The body: the rows of a table holding only a:2, a:3, b'x:4. */
    pfr_buf got = {0}, want = {0};
    assert_int_equal(
        pfr_ch_columns_render_stacks(&c, PFR_CH_ROWBINARY, pfr_ch_lastseen_skip(l), &got), 0);
    one_stack(&kept, "a", 2, 200);
    one_stack(&kept, "b'x", 4, 400);
    one_stack(&kept, "a", 3, 300);
    assert_int_equal(pfr_ch_columns_render_stacks(&kept, PFR_CH_ROWBINARY, NULL, &want), 0);
    struct rows a = {0}, b = {0};
    rb_stacks(&got, &a);
    rb_stacks(&want, &b);
    assert_rows_equal(&a, &b);
    rows_free(&a);
    rows_free(&b);
    pfr_ch_lastseen_free(l);
    /* Every row left out: no body. */
    uint8_t all[6] = {1, 1, 1, 1, 1, 1};
    assert_int_equal(pfr_ch_columns_render_stacks(&c, PFR_CH_NATIVE, all, &got), 0);
    assert_int_equal(got.len, 0);
    pfr_buf_free(&got);
    pfr_buf_free(&want);
    pfr_buf_free(&q);
    pfr_ch_columns_free(&kept);
    pfr_ch_columns_free(&c);

    /* Many keys: queries of at most PFR_CH_LASTSEEN_KEYS keys, each within 192 KiB. */
    for (uint64_t h = 0; h < 5000; h++)
        one_stack(&c, h % 3 ? "svc-with-a-long-name/k8s/namespace/deployment" : "s", h * 7919, 5);
    assert_int_equal(pfr_ch_lastseen_new(&c, 0, &l), 0);
    size_t nq = 0;
    for (;;) {
        assert_int_equal(pfr_ch_lastseen_query(l, "profiling_stacks", PFR_CH_LASTSEEN_KEYS, &q), 0);
        if (!q.len)
            break;
        assert_true(q.len < 192 * 1024);
        nq++;
    }
    assert_int_equal(nq, (5000 + PFR_CH_LASTSEEN_KEYS - 1) / PFR_CH_LASTSEEN_KEYS);
    pfr_ch_lastseen_free(l);
    pfr_buf_free(&q);
    pfr_ch_columns_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_outcomes),
        cmocka_unit_test(test_page_answers),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_batch_wait),
        cmocka_unit_test(test_pacer),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_fnv),
        cmocka_unit_test(test_retime),
        cmocka_unit_test(test_chenc),
        cmocka_unit_test(test_chenc_native),
        cmocka_unit_test(test_chenc_samples),
        cmocka_unit_test(test_chenc_order),
        cmocka_unit_test(test_ch_answers),
        cmocka_unit_test(test_http_helpers),
        cmocka_unit_test(test_http_kept_headers),
        cmocka_unit_test(test_state),
        cmocka_unit_test(test_state_old_file),
        cmocka_unit_test(test_ship_policy),
        cmocka_unit_test(test_ship_policy_units),
        cmocka_unit_test(test_start_shift),
        cmocka_unit_test(test_ch_verdicts),
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_quote),
        cmocka_unit_test(test_svcname),
        cmocka_unit_test(test_ch_layout),
        cmocka_unit_test(test_ch_lastseen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
