/* Unit tests of pfr-shipper's modules: value parsing, backoff and Retry-After, batching and the
 * bandwidth pacer, RowBinary primitives, Coroot's stack hash and pprof re-timing, the ClickHouse
 * row encoder, ClickHouse answers, configuration layers, and the state file. */
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

#include "batch.h"
#include "buf.h"
#include "ch_answer.h"
#include "chenc.h"
#include "config.h"
#include "coroot_fmt.h"
#include "http.h"
#include "parse.h"
#include "pfr_testgen.h"
#include "retry.h"
#include "state.h"

/* ---- parse ---- */

static void test_durations(void **st)
{
    (void)st;
    int64_t ms;
    assert_int_equal(pfr_parse_duration_ms("250ms", &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(pfr_parse_duration_ms("10s", &ms), 0);
    assert_int_equal(ms, 10000);
    assert_int_equal(pfr_parse_duration_ms("1.5", &ms), 0);
    assert_int_equal(ms, 1500);
    assert_int_equal(pfr_parse_duration_ms("5m", &ms), 0);
    assert_int_equal(ms, 300000);
    assert_int_equal(pfr_parse_duration_ms("2h", &ms), 0);
    assert_int_equal(ms, 7200000);
    assert_int_equal(pfr_parse_duration_ms(" 1d ", &ms), 0);
    assert_int_equal(ms, 86400000);
    assert_int_equal(pfr_parse_duration_ms("-1s", &ms), -EINVAL);
    assert_int_equal(pfr_parse_duration_ms("10 parsecs", &ms), -EINVAL);
    assert_int_equal(pfr_parse_duration_ms("", &ms), -EINVAL);
    assert_int_equal(pfr_parse_duration_ms("s", &ms), -EINVAL);
    assert_int_equal(pfr_parse_duration_ms("1e300h", &ms), -EINVAL);
}

static void test_sizes(void **st)
{
    (void)st;
    uint64_t v;
    assert_int_equal(pfr_parse_size("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(pfr_parse_size("512k", &v), 0);
    assert_int_equal(v, 512 * 1024);
    assert_int_equal(pfr_parse_size("8M", &v), 0);
    assert_int_equal(v, 8u << 20);
    assert_int_equal(pfr_parse_size("1GiB", &v), 0);
    assert_int_equal(v, 1u << 30);
    assert_int_equal(pfr_parse_size("2KB", &v), 0);
    assert_int_equal(v, 2048);
    assert_int_equal(pfr_parse_size("12B", &v), 0);
    assert_int_equal(v, 12);
    assert_int_equal(pfr_parse_size("3X", &v), -EINVAL);
    assert_int_equal(pfr_parse_size("-3", &v), -EINVAL);
    assert_int_equal(pfr_parse_size("99999999999999999999", &v), -ERANGE);
    assert_int_equal(pfr_parse_size("20000000000T", &v), -ERANGE);
    bool b;
    assert_int_equal(pfr_parse_bool("Yes", &b), 0);
    assert_true(b);
    assert_int_equal(pfr_parse_bool("off", &b), 0);
    assert_false(b);
    assert_int_equal(pfr_parse_bool("maybe", &b), -EINVAL);
    uint64_t u;
    assert_int_equal(pfr_parse_uint("12", 100, &u), 0);
    assert_int_equal(u, 12);
    assert_int_equal(pfr_parse_uint("101", 100, &u), -ERANGE);
    assert_int_equal(pfr_parse_uint("1x", 100, &u), -EINVAL);
}

static void test_times(void **st)
{
    (void)st;
    const int64_t now = 1714557600ll * 1000000000; /* 2024-05-01T10:00:00Z */
    int64_t t;
    assert_int_equal(pfr_parse_time_ns("now", now, &t), 0);
    assert_int_equal(t, now);
    assert_int_equal(pfr_parse_time_ns("-2h", now, &t), 0);
    assert_int_equal(t, now - 7200ll * 1000000000);
    assert_int_equal(pfr_parse_time_ns("@1714557600", now, &t), 0);
    assert_int_equal(t, now);
    assert_int_equal(pfr_parse_time_ns("2024-05-01T10:00:00Z", 0, &t), 0);
    assert_int_equal(t, now);
    assert_int_equal(pfr_parse_time_ns("2024-05-01 10:00:00", 0, &t), 0);
    assert_int_equal(t, now);
    assert_int_equal(pfr_parse_time_ns("2024-05-01T12:00:00+02:00", 0, &t), 0);
    assert_int_equal(t, now);
    assert_int_equal(pfr_parse_time_ns("2024-05-01T10:00:00.5Z", 0, &t), 0);
    assert_int_equal(t, now + 500000000);
    assert_int_equal(pfr_parse_time_ns("2024-05-01", 0, &t), 0);
    assert_int_equal(t, now - 36000ll * 1000000000);
    assert_int_equal(pfr_parse_time_ns("2000-02-29T00:00:00Z", 0, &t), 0);
    assert_int_equal(t, 951782400ll * 1000000000);
    assert_int_equal(pfr_parse_time_ns("2024-13-01", 0, &t), -EINVAL);
    assert_int_equal(pfr_parse_time_ns("yesterday", 0, &t), -EINVAL);
    assert_int_equal(pfr_parse_time_ns("2024-05-01T10:00:00Zjunk", 0, &t), -EINVAL);
    char b[64];
    assert_string_equal(pfr_fmt_time(now, b, sizeof(b)), "2024-05-01T10:00:00Z");
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
    assert_int_equal(pfr_outcome_of_status(404), PFR_OUT_REJECT);
    assert_int_equal(pfr_outcome_of_status(413), PFR_OUT_REJECT);
    assert_int_equal(pfr_outcome_of_status(408), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(425), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(429), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(500), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(503), PFR_OUT_RETRY);
    assert_int_equal(pfr_outcome_of_status(302), PFR_OUT_RETRY);
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
    pfr_buf_chstr(&b, "abc", 3);
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
    assert_true(pfr_fnv1a64(PFR_FNV64_OFFSET, "", 0) == 0xcbf29ce484222325ull);
    assert_true(pfr_fnv1a64(PFR_FNV64_OFFSET, "a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(pfr_fnv1a64(PFR_FNV64_OFFSET, "foobar", 6) == 0x85944171f73967e8ull);
    /* the strings concatenated with no separator: piecewise equals whole */
    uint64_t h = pfr_fnv1a64(PFR_FNV64_OFFSET, "foo", 3);
    assert_true(pfr_fnv1a64(h, "bar", 3) == 0x85944171f73967e8ull);
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
    uint64_t h = PFR_FNV64_OFFSET;
    for (size_t k = 0; k < n; k++) {
        char s[2048];
        int len =
            snprintf(s, sizeof(s), "%s %s:%lld", fr[k].function, fr[k].file, (long long)fr[k].line);
        h = pfr_fnv1a64(h, s, (size_t)len);
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
        uint64_t n = rd_varint(&r), h = PFR_FNV64_OFFSET;
        for (uint64_t i = 0; i < n; i++) {
            char *f = rd_str(&r);
            assert_non_null(strchr(f, ':'));
            h = pfr_fnv1a64(h, f, strlen(f));
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
    pfr_chenc *e;
    pfr_chenc_opts o = {.stack_refresh_ns = hour};
    assert_int_equal(pfr_chenc_new(&o, &e), 0);
    static struct decoded d;

    /* first chunk: one row per distinct stack, sums equal, hashes are Coroot's */
    pfr_chenc_begin(e);
    assert_int_equal(pfr_chenc_add(e, &m, p1), 0);
    decode_samples(pfr_chenc_samples(e), &m, &d);
    assert_int_equal(d.sum, pfr_testgen_total(p1));
    assert_int_equal(pfr_chenc_sample_rows(e), d.rows);
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
    size_t nst = decode_stacks(pfr_chenc_stacks(e), m.service, m.end_ns + hour);
    assert_int_equal(nst, distinct);
    assert_int_equal(pfr_chenc_stack_rows(e), nst);

    /* a batch that is discarded leaves the stacks unwritten: they come again */
    pfr_chenc_discard(e);
    pfr_chenc_begin(e);
    assert_int_equal(pfr_chenc_add(e, &m, p1), 0);
    assert_int_equal(pfr_chenc_stack_rows(e), distinct);
    pfr_chenc_commit(e);

    /* the next chunk (same stacks, within the refresh): samples only */
    pfr_chunk_meta m2 = m;
    m2.id = 2;
    m2.start_ns += iv;
    m2.end_ns += iv;
    pfr_chenc_begin(e);
    assert_int_equal(pfr_chenc_add(e, &m2, p2), 0);
    decode_samples(pfr_chenc_samples(e), &m2, &d);
    assert_int_equal(d.sum, pfr_testgen_total(p2));
    assert_int_equal(pfr_chenc_stack_rows(e), 0);
    pfr_chenc_commit(e);

    /* a chunk past the refresh writes its stacks again, with the new LastSeen */
    pfr_chunk_meta m3 = m;
    m3.id = 3;
    m3.start_ns += 2 * hour;
    m3.end_ns += 2 * hour;
    pfr_chenc_begin(e);
    assert_int_equal(pfr_chenc_add(e, &m3, p2), 0);
    assert_true(pfr_chenc_stack_rows(e) > 0);
    decode_stacks(pfr_chenc_stacks(e), m.service, m3.end_ns + hour);
    pfr_chenc_commit(e);

    /* another service with the same stacks: its own stack rows */
    pfr_chunk_meta m4 = m3;
    m4.id = 4;
    m4.service = "other";
    pfr_chenc_begin(e);
    assert_int_equal(pfr_chenc_add(e, &m4, p2), 0);
    assert_true(pfr_chenc_stack_rows(e) > 0);
    pfr_chenc_commit(e);

    pfr_chunk_meta bad = m;
    bad.service = "";
    assert_int_equal(pfr_chenc_add(e, &bad, p1), -EINVAL);
    pfr_chenc_free(e);
    pfr_profile_free(p1);
    pfr_profile_free(p2);
    pfr_testgen_free(g);
}

/* ---- ClickHouse answers ---- */

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

/* ---- http helpers ---- */

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

/* ---- configuration ---- */

static void test_config_ini(void **st)
{
    (void)st;
    pfr_shipper_conf c = {0};
    char err[512];
    const char *ini = "[shipper]\n"
                      "store = /tmp/r.db\n"
                      "batch_age = 3s\n"
                      "[sink coroot]\n"
                      "type = coroot\n"
                      "url = https://coroot.example\n"
                      "api_key_env = MY_KEY\n"
                      "[sink:ch]\n"
                      "type = clickhouse\n"
                      "url = http://ch:8123\n"
                      "database = coroot\n"
                      "create_tables = yes\n"
                      "batch_chunks = 500\n"
                      "bandwidth = 256k\n";
    assert_int_equal(pfr_shipper_conf_parse_ini(&c, ini, err, sizeof(err)), 0);
    assert_string_equal(c.store_path, "/tmp/r.db");
    assert_int_equal(c.nsinks, 2);
    pfr_sink_conf *s = pfr_shipper_conf_sink(&c, "coroot");
    assert_non_null(s);
    assert_int_equal(s->kind, PFR_SINK_COROOT);
    assert_int_equal(s->batch.max_age_ms, 3000);
    assert_int_equal(s->batch.max_chunks, 100);
    assert_string_equal(s->api_key_env, "MY_KEY");
    s = pfr_shipper_conf_sink(&c, "ch");
    assert_non_null(s);
    assert_int_equal(s->kind, PFR_SINK_CLICKHOUSE);
    assert_string_equal(s->database, "coroot");
    assert_string_equal(s->user, "default");
    assert_true(s->create_tables);
    assert_int_equal(s->batch.max_chunks, 500);
    assert_int_equal(s->bandwidth, 256 * 1024);
    pfr_shipper_conf_free(&c);

    const char *bad[] = {
        "[sink x]\ntype = coroot\nurl = http://a\napi_key = hunter2\n",  /* inline secret */
        "[sink x]\ntype = kafka\nurl = http://a\n",                      /* unknown type */
        "[sink x]\nurl = http://a\n",                                    /* no type */
        "[sink x]\ntype = coroot\n",                                     /* no url */
        "[sink x]\ntype = coroot\nurl = ftp://a\n",                      /* bad url */
        "[sink x]\ntype = coroot\nurl = http://a\nbatch_age = soon\n",   /* bad value */
        "[sink x]\ntype = coroot\nurl = http://a\nfrobnicate = 1\n",     /* unknown key */
        "[sink b@d]\ntype = coroot\nurl = http://a\n",                   /* bad name */
        "[elsewhere]\nx = 1\n",                                          /* unknown section */
        "[shipper]\nlog_level = loud\n",                                 /* bad level */
        "[sink x]\ntype = clickhouse\nurl = http://a\ndatabase = a;b\n", /* bad database */
        "[sink x\ntype = coroot\n",                                      /* syntax */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&c, 0, sizeof(c));
        err[0] = 0;
        int rc = pfr_shipper_conf_parse_ini(&c, bad[i], err, sizeof(err));
        if (rc == 0)
            fail_msg("accepted: %s", bad[i]);
        assert_true(err[0] != 0);
        assert_null(strstr(err, "hunter2"));
        pfr_shipper_conf_free(&c);
    }
}

static int load(pfr_shipper_conf *c, char *err, size_t errlen, ...)
{
    char *argv[32] = {"pfr-shipper"};
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 31)
        argv[argc++] = (char *)a;
    va_end(ap);
    FILE *devnull = fopen("/dev/null", "w");
    int rc = pfr_shipper_conf_load(c, argc, argv, 1714557600ll * 1000000000, devnull, err, errlen);
    fclose(devnull);
    return rc;
}

static void test_config_flags(void **st)
{
    (void)st;
    pfr_shipper_conf c;
    char err[512];
    unsetenv("PFR_SHIPPER_CONFIG");
    setenv("PFR_SHIPPER_API_KEY", "k-from-env", 1);
    assert_int_equal(load(&c, err, sizeof(err), "--store", "/tmp/r.db", "--state", "/tmp/s.db",
                          "--sink", "coroot", "--url", "http://c:8080", "--once", "--backoff-max",
                          "2s", "--batch-chunks", "7", NULL),
                     0);
    assert_true(c.once);
    assert_int_equal(c.nsinks, 1);
    assert_string_equal(c.sinks[0].name, "coroot");
    assert_string_equal(c.sinks[0].api_key, "k-from-env");
    assert_int_equal(c.sinks[0].backoff.max_ms, 2000);
    assert_int_equal(c.sinks[0].batch.max_chunks, 7);
    assert_int_equal(c.deadline_ms, 600000);
    pfr_shipper_conf_free(&c);
    unsetenv("PFR_SHIPPER_API_KEY");

    /* a key file: first line, trimmed */
    char keyfile[] = "/tmp/pfr-shipper-key-XXXXXX";
    int fd = mkstemp(keyfile);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "  s3cret \nsecond line\n", 22), 22);
    close(fd);
    assert_int_equal(load(&c, err, sizeof(err), "--sink", "clickhouse", "--url", "http://h:8123",
                          "--api-key-file", keyfile, "--user", "bob", "--database", "coroot",
                          "--create-tables", NULL),
                     0);
    assert_string_equal(c.sinks[0].api_key, "s3cret");
    assert_string_equal(c.sinks[0].user, "bob");
    assert_true(c.sinks[0].create_tables);
    assert_int_equal(c.deadline_ms, 0); /* daemon: no deadline */
    pfr_shipper_conf_free(&c);
    unlink(keyfile);

    /* secrets never on the command line */
    assert_true(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c", "--api-key",
                     "hunter2", NULL) < 0);
    assert_null(strstr(err, "hunter2"));
    pfr_shipper_conf_free(&c);
    /* Coroot without a key */
    assert_true(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c", NULL) < 0);
    pfr_shipper_conf_free(&c);
    /* no sink */
    assert_true(load(&c, err, sizeof(err), "--once", NULL) < 0);
    pfr_shipper_conf_free(&c);
    /* backfill needs a range and a sink that exists */
    setenv("PFR_SHIPPER_API_KEY", "k", 1);
    assert_true(
        load(&c, err, sizeof(err), "backfill", "--sink", "coroot", "--url", "http://c", NULL) < 0);
    pfr_shipper_conf_free(&c);
    assert_int_equal(load(&c, err, sizeof(err), "backfill", "--sink", "coroot", "--url", "http://c",
                          "--from", "-2h", "--to", "now", NULL),
                     0);
    assert_int_equal(c.cmd, PFR_CMD_BACKFILL);
    assert_int_equal(c.to_ns - c.from_ns, 7200ll * 1000000000);
    pfr_shipper_conf_free(&c);
    assert_true(load(&c, err, sizeof(err), "backfill", "--sink", "nosuch", "--from", "-2h", "--to",
                     "now", NULL) < 0);
    pfr_shipper_conf_free(&c);
    assert_true(load(&c, err, sizeof(err), "status", "--from", "-2h", NULL) < 0);
    pfr_shipper_conf_free(&c);
    assert_true(load(&c, err, sizeof(err), "frobnicate", NULL) < 0);
    pfr_shipper_conf_free(&c);
    assert_true(load(&c, err, sizeof(err), "--sink", "coroot", "--url", "http://c", "--user", "x",
                     NULL) < 0);
    pfr_shipper_conf_free(&c);
    unsetenv("PFR_SHIPPER_API_KEY");
    assert_int_equal(load(&c, err, sizeof(err), "--help", NULL), PFR_CONF_EXIT);
    pfr_shipper_conf_free(&c);
    assert_int_equal(load(&c, err, sizeof(err), "status", NULL), 0);
    pfr_shipper_conf_free(&c);
}

/* ---- state ---- */

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
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),  cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_times),      cmocka_unit_test(test_outcomes),
        cmocka_unit_test(test_backoff),    cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_batch_wait), cmocka_unit_test(test_pacer),
        cmocka_unit_test(test_buf),        cmocka_unit_test(test_fnv),
        cmocka_unit_test(test_retime),     cmocka_unit_test(test_chenc),
        cmocka_unit_test(test_ch_answers), cmocka_unit_test(test_http_helpers),
        cmocka_unit_test(test_config_ini), cmocka_unit_test(test_config_flags),
        cmocka_unit_test(test_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
