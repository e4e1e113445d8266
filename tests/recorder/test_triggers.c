/* The triggers' pure parts: coalescing and rate limiting, PSI and memory.events texts, the
 * sustained-level tracker, POST /pin's query. */
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

#include "trig_internal.h"

#define S   1000000000LL
#define MIN (60 * S)
#define T0  (1800000000LL * S) /* a wall-clock time */

static pfr_pin_request req(const char *service, int64_t from, int64_t to, const char *reason)
{
    pfr_pin_request r;
    memset(&r, 0, sizeof(r));
    snprintf(r.service, sizeof(r.service), "%s", service);
    snprintf(r.reason, sizeof(r.reason), "%s", reason);
    r.from_ns = from;
    r.to_ns = to;
    r.kind = PFR_PIN_FATAL_SIGNAL;
    return r;
}

/* Overlapping windows of one service make one request covering them all, handed over once the
 * last window ended; another service's stays apart. */
static void coalesce_overlapping(void **state)
{
    (void)state;
    pfr_trig_coalescer *c;
    assert_int_equal(pfr_trig_coalescer_new(30 * MIN, 4, &c), 0);
    pfr_pin_request a = req("web", T0 - 10 * MIN, T0 + 2 * MIN, "crash 1");
    pfr_pin_request b = req("web", T0 - 9 * MIN, T0 + 3 * MIN, "crash 2");
    pfr_pin_request o = req("db", T0 - 10 * MIN, T0 + 2 * MIN, "oom");
    assert_int_equal(pfr_trig_coalescer_offer(c, &a, T0), PFR_TRIG_NEW);
    assert_int_equal(pfr_trig_coalescer_offer(c, &b, T0 + MIN), PFR_TRIG_EXTENDED);
    assert_int_equal(pfr_trig_coalescer_offer(c, &o, T0), PFR_TRIG_NEW);
    assert_int_equal(pfr_trig_coalescer_next_due(c), T0 + 2 * MIN);

    pfr_pin_request out;
    assert_false(pfr_trig_coalescer_take_due(c, T0 + 2 * MIN - 1, &out));
    assert_true(pfr_trig_coalescer_take_due(c, T0 + 2 * MIN, &out));
    assert_string_equal(out.service, "db");
    assert_false(pfr_trig_coalescer_take_due(c, T0 + 3 * MIN - 1, &out));
    assert_true(pfr_trig_coalescer_take_due(c, T0 + 3 * MIN, &out));
    assert_string_equal(out.service, "web");
    assert_int_equal(out.from_ns, T0 - 10 * MIN);
    assert_int_equal(out.to_ns, T0 + 3 * MIN);
    assert_int_equal(out.events, 2);
    assert_string_equal(out.reason, "crash 1 (+1 more events)");
    assert_false(pfr_trig_coalescer_take_due(c, INT64_MAX, &out));
    pfr_trig_coalescer_free(c);
}

/* Windows that do not overlap are separate requests; the free-time flush takes them all. */
static void disjoint_windows(void **state)
{
    (void)state;
    pfr_trig_coalescer *c;
    assert_int_equal(pfr_trig_coalescer_new(30 * MIN, 4, &c), 0);
    pfr_pin_request a = req("web", T0 - 10 * MIN, T0 + 2 * MIN, "first");
    assert_int_equal(pfr_trig_coalescer_offer(c, &a, T0), PFR_TRIG_NEW);
    pfr_pin_request out;
    assert_true(pfr_trig_coalescer_take_due(c, T0 + 2 * MIN, &out));
    /* the same window again after it was handed over: a new request */
    assert_int_equal(pfr_trig_coalescer_offer(c, &a, T0 + 2 * MIN), PFR_TRIG_NEW);
    pfr_pin_request b = req("web", T0 + 20 * MIN, T0 + 32 * MIN, "later");
    assert_int_equal(pfr_trig_coalescer_offer(c, &b, T0 + 2 * MIN), PFR_TRIG_NEW);
    int n = 0;
    while (pfr_trig_coalescer_take_due(c, INT64_MAX, &out))
        n++;
    assert_int_equal(n, 2);
    pfr_trig_coalescer_free(c);
}

/* A crash-looping service: events every 30 s extend one request up to max_window, then a new
 * one starts, and past max_per_hour new requests are suppressed. */
static void crash_loop_is_bounded(void **state)
{
    (void)state;
    pfr_trig_coalescer *c;
    assert_int_equal(pfr_trig_coalescer_new(15 * MIN, 2, &c), 0);
    int counts[3] = {0};
    pfr_pin_request out;
    int delivered = 0;
    for (int64_t t = T0; t < T0 + 60 * MIN; t += 30 * S) {
        pfr_pin_request r = req("loop", t - 10 * MIN, t + 2 * MIN, "SIGSEGV");
        int rc = pfr_trig_coalescer_offer(c, &r, t);
        assert_true(rc >= 0 && rc <= 2);
        counts[rc]++;
        while (pfr_trig_coalescer_take_due(c, t, &out)) {
            assert_true(out.to_ns - out.from_ns <= 15 * MIN);
            delivered++;
        }
    }
    while (pfr_trig_coalescer_take_due(c, INT64_MAX, &out))
        delivered++;
    assert_int_equal(counts[PFR_TRIG_NEW], 2);
    assert_true(counts[PFR_TRIG_SUPPRESSED] > 0);
    assert_int_equal(counts[PFR_TRIG_NEW] + counts[PFR_TRIG_EXTENDED] + counts[PFR_TRIG_SUPPRESSED],
                     120);
    assert_int_equal(delivered, 2);
    pfr_trig_coalescer_free(c);
}

/* The rate limit is per hour: an hour after the first requests, the service may pin again; and
 * another service was never limited by this one. */
static void rate_limit_window(void **state)
{
    (void)state;
    pfr_trig_coalescer *c;
    assert_int_equal(pfr_trig_coalescer_new(30 * MIN, 1, &c), 0);
    pfr_pin_request a = req("web", T0 - MIN, T0, "one");
    pfr_pin_request out;
    assert_int_equal(pfr_trig_coalescer_offer(c, &a, T0), PFR_TRIG_NEW);
    assert_true(pfr_trig_coalescer_take_due(c, T0, &out));
    pfr_pin_request b = req("web", T0 + 10 * MIN, T0 + 11 * MIN, "two");
    assert_int_equal(pfr_trig_coalescer_offer(c, &b, T0 + 10 * MIN), PFR_TRIG_SUPPRESSED);
    pfr_pin_request d = req("db", T0 + 10 * MIN, T0 + 11 * MIN, "other");
    assert_int_equal(pfr_trig_coalescer_offer(c, &d, T0 + 10 * MIN), PFR_TRIG_NEW);
    pfr_pin_request e = req("web", T0 + 61 * MIN, T0 + 62 * MIN, "three");
    assert_int_equal(pfr_trig_coalescer_offer(c, &e, T0 + 61 * MIN), PFR_TRIG_NEW);
    pfr_trig_coalescer_free(c);
}

/* A lasting condition stretches its pending request but never starts a new one. */
static void extend_only(void **state)
{
    (void)state;
    pfr_trig_coalescer *c;
    assert_int_equal(pfr_trig_coalescer_new(20 * MIN, 4, &c), 0);
    pfr_pin_request a = req("", T0 - 10 * MIN, T0 + 2 * MIN, "host CPU pressure");
    assert_int_equal(pfr_trig_coalescer_extend(c, &a), -ENOENT);
    assert_int_equal(pfr_trig_coalescer_offer(c, &a, T0), PFR_TRIG_NEW);
    pfr_pin_request b = req("", T0 - 5 * MIN, T0 + 7 * MIN, "");
    assert_int_equal(pfr_trig_coalescer_extend(c, &b), PFR_TRIG_EXTENDED);
    pfr_pin_request far = req("", T0, T0 + 12 * MIN, "");
    assert_int_equal(pfr_trig_coalescer_extend(c, &far), -ENOENT); /* 22 min: too long */
    pfr_pin_request out;
    assert_true(pfr_trig_coalescer_take_due(c, INT64_MAX, &out));
    assert_int_equal(out.to_ns, T0 + 7 * MIN);
    assert_int_equal(out.events, 1);
    assert_string_equal(out.reason, "host CPU pressure");
    pfr_trig_coalescer_free(c);
}

static void psi_texts(void **state)
{
    (void)state;
    static const char cpu[] = "some avg10=93.25 avg60=40.00 avg300=5.10 total=123456789\n"
                              "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
    pfr_psi p;
    assert_int_equal(pfr_trig_psi_parse(cpu, strlen(cpu), &p), 0);
    assert_true(p.some_avg10 > 93.24 && p.some_avg10 < 93.26);
    assert_true(p.some_avg60 > 39.99 && p.some_avg60 < 40.01);
    assert_int_equal(p.some_total, 123456789);
    static const char *const bad[] = {
        "",
        "full avg10=1.00 avg60=0.00 avg300=0.00 total=0\n",
        "some avg10=abc avg60=0.00 avg300=0.00 total=0\n",
        "some avg10=101.00 avg60=0.00 avg300=0.00 total=0\n",
        "some avg10=1.00 avg60=0.00 total=0\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(pfr_trig_psi_parse(bad[i], strlen(bad[i]), &p), -EINVAL);
    /* not NUL-terminated: the length bounds the read */
    char cut[] = {'s', 'o', 'm', 'e', ' ', 'a'};
    assert_int_equal(pfr_trig_psi_parse(cut, sizeof(cut), &p), -EINVAL);

    static const char ev[] = "low 0\nhigh 17\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n";
    uint64_t high = 0;
    assert_int_equal(pfr_trig_memory_events_high(ev, strlen(ev), &high), 0);
    assert_int_equal(high, 17);
    assert_int_equal(pfr_trig_memory_events_high("low 1\n", 6, &high), -EINVAL);
    assert_int_equal(pfr_trig_memory_events_high("high x\n", 7, &high), -EINVAL);
}

/* Fires once when the level held for the duration, holds while it lasts, re-arms below and
 * once rearm passed. */
static void sustained_level(void **state)
{
    (void)state;
    pfr_trig_sustain s = {0};
    assert_int_equal(pfr_trig_sustain_update(&s, 95, 90, 10 * S, 30 * S, 100 * S), PFR_TRIG_QUIET);
    assert_int_equal(pfr_trig_sustain_update(&s, 91, 90, 10 * S, 30 * S, 105 * S), PFR_TRIG_QUIET);
    assert_int_equal(pfr_trig_sustain_update(&s, 92, 90, 10 * S, 30 * S, 110 * S), PFR_TRIG_FIRE);
    assert_int_equal(pfr_trig_sustain_update(&s, 99, 90, 10 * S, 30 * S, 115 * S), PFR_TRIG_HOLD);
    /* a dip below restarts the count */
    assert_int_equal(pfr_trig_sustain_update(&s, 50, 90, 10 * S, 30 * S, 120 * S), PFR_TRIG_QUIET);
    assert_int_equal(pfr_trig_sustain_update(&s, 95, 90, 10 * S, 30 * S, 125 * S), PFR_TRIG_QUIET);
    assert_int_equal(pfr_trig_sustain_update(&s, 95, 90, 10 * S, 30 * S, 129 * S), PFR_TRIG_QUIET);
    /* held long enough, but within rearm (30 s) of the last fire (110 s): not yet */
    assert_int_equal(pfr_trig_sustain_update(&s, 95, 90, 10 * S, 30 * S, 135 * S), PFR_TRIG_QUIET);
    assert_int_equal(pfr_trig_sustain_update(&s, 95, 90, 10 * S, 30 * S, 140 * S), PFR_TRIG_FIRE);
}

static const pfr_triggers_config cfg = {.before_ns = 10 * MIN, .after_ns = 2 * MIN};

static int parse(const char *const *kv, size_t n, pfr_pin_request *r, char *err)
{
    pfr_pin_arg args[8];
    for (size_t i = 0; i < n; i++)
        args[i] = (pfr_pin_arg){kv[2 * i], kv[2 * i + 1]};
    return pfr_pin_query_parse(args, n, T0, &cfg, r, err, 256);
}

static void pin_query(void **state)
{
    (void)state;
    pfr_pin_request r;
    char err[256];
    const char *around[] = {"service", "web", "reason", "alert HighLatency"};
    assert_int_equal(parse(around, 2, &r, err), 0);
    assert_string_equal(r.service, "web");
    assert_string_equal(r.reason, "alert HighLatency");
    assert_int_equal(r.kind, PFR_PIN_EXTERNAL);
    assert_int_equal(r.from_ns, T0 - 10 * MIN);
    assert_int_equal(r.to_ns, T0 + 2 * MIN);

    const char *explicit[] = {"from", "-1h", "to", "-50m", "reason", "x"};
    assert_int_equal(parse(explicit, 3, &r, err), 0);
    assert_int_equal(r.from_ns, T0 - 60 * MIN);
    assert_int_equal(r.to_ns, T0 - 50 * MIN);
    assert_string_equal(r.service, "");

    const char *ba[] = {"before", "5m", "after", "0", "reason", "x"};
    assert_int_equal(parse(ba, 3, &r, err), 0);
    assert_int_equal(r.from_ns, T0 - 5 * MIN);
    assert_int_equal(r.to_ns, T0);
}

static void pin_query_errors(void **state)
{
    (void)state;
    pfr_pin_request r;
    char err[256];
    struct {
        const char *kv[8];
        size_t n;
        const char *want;
    } cases[] = {
        {{"service", "web"}, 1, "reason is required"},
        {{"reason", ""}, 1, "reason is required"},
        {{"reason", "x", "from", "yesterday-ish", "to", "now"}, 3, "from: "},
        {{"reason", "x", "from", "-1m", "to", "-2m"}, 3, "from is after to"},
        {{"reason", "x", "from", "-1m"}, 2, "from and to go together"},
        {{"reason", "x", "from", "-1m", "to", "now", "before", "1m"}, 4, "not both"},
        {{"reason", "x", "before", "ten"}, 2, "before: "},
        {{"reason", "x", "colour", "red"}, 2, "unknown parameter 'colour'"},
        {{"reason", "x", "reason", "y"}, 2, "reason is given 2 times"},
        {{"reason", "a\nb"}, 1, "control characters"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        err[0] = '\0';
        assert_int_equal(parse(cases[i].kv, cases[i].n, &r, err), -EINVAL);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].want);
    }
    /* a reason of 1 KiB is taken, one byte more is not */
    char *big = malloc(PFR_PIN_REASON_MAX + 2);
    assert_non_null(big);
    memset(big, 'r', PFR_PIN_REASON_MAX + 1);
    big[PFR_PIN_REASON_MAX] = '\0';
    const char *ok[] = {"reason", big};
    assert_int_equal(parse(ok, 1, &r, err), 0);
    assert_int_equal(strlen(r.reason), PFR_PIN_REASON_MAX);
    big[PFR_PIN_REASON_MAX] = 'r';
    big[PFR_PIN_REASON_MAX + 1] = '\0';
    assert_int_equal(parse(ok, 1, &r, err), -EINVAL);
    assert_non_null(strstr(err, "reason is 1025 bytes, more than 1024"));
    free(big);
}

static void cgroup2_mount(void **state)
{
    (void)state;
    char path[] = "/tmp/pfr-test-mountinfo-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char text[] =
        "25 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755\n"
        "26 25 0:23 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char root[256];
    assert_int_equal(pfr_trig_cgroup2_root(path, root, sizeof(root)), 0);
    assert_string_equal(root, "/sys/fs/cgroup/unified");
    unlink(path);
    assert_int_equal(pfr_trig_cgroup2_root("/nonexistent/mountinfo", root, sizeof(root)), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(coalesce_overlapping),  cmocka_unit_test(disjoint_windows),
        cmocka_unit_test(crash_loop_is_bounded), cmocka_unit_test(rate_limit_window),
        cmocka_unit_test(extend_only),           cmocka_unit_test(psi_texts),
        cmocka_unit_test(sustained_level),       cmocka_unit_test(pin_query),
        cmocka_unit_test(pin_query_errors),      cmocka_unit_test(cgroup2_mount),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
