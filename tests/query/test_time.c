/* Time expressions: every accepted form, and errors that list the forms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pfr_time.h"

#define S 1000000000LL
/* 2024-05-01T12:00:00Z */
static const int64_t NOW = 1714564800LL * S;

static int64_t parse_ok(const char *s)
{
    int64_t v = -1;
    char err[1024] = "";
    int rc = pfr_time_parse(s, NOW, &v, err, sizeof(err));
    if (rc != 0)
        fail_msg("\"%s\" rejected: %s", s, err);
    return v;
}

static void parse_bad(const char *s)
{
    int64_t v = 0;
    char err[1024] = "";
    assert_int_equal(pfr_time_parse(s, NOW, &v, err, sizeof(err)), -22);
    /* the message names the input and shows the accepted forms */
    assert_non_null(strstr(err, s));
    assert_non_null(strstr(err, "RFC 3339"));
    assert_non_null(strstr(err, "unix seconds"));
}

static void test_relative(void **state)
{
    (void)state;
    assert_true(parse_ok("now") == NOW);
    assert_true(parse_ok(" now ") == NOW);
    assert_true(parse_ok("-15m") == NOW - 15 * 60 * S);
    assert_true(parse_ok("now-2h") == NOW - 2 * 3600 * S);
    assert_true(parse_ok("now - 1h30m") == NOW - 5400 * S);
    assert_true(parse_ok("now+5m") == NOW + 300 * S);
    assert_true(parse_ok("-1.5h") == NOW - 5400 * S);
    assert_true(parse_ok("-250ms") == NOW - 250000000LL);
    assert_true(parse_ok("-2d") == NOW - 2 * 86400 * S);
    assert_true(parse_ok("-1w") == NOW - 7 * 86400 * S);
    assert_true(parse_ok("-1m30s") == NOW - 90 * S); /* the syntax of pfr_units.h */
    assert_true(parse_ok("now-10us") == NOW - 10000);
    parse_bad("-15");
    parse_bad("-15x");
    parse_bad("now-");
    parse_bad("nowish");
    parse_bad("-");
}

static void test_rfc3339(void **state)
{
    (void)state;
    assert_true(parse_ok("2024-05-01T12:00:00Z") == NOW);
    assert_true(parse_ok("2024-05-01t12:00:00z") == NOW);
    assert_true(parse_ok("2024-05-01 12:00:00Z") == NOW);
    assert_true(parse_ok("2024-05-01T14:00:00+02:00") == NOW);
    assert_true(parse_ok("2024-05-01T07:30:00-04:30") == NOW);
    assert_true(parse_ok("2024-05-01T12:00:00.25Z") == NOW + S / 4);
    assert_true(parse_ok("2024-02-29T00:00:00Z") == 1709164800LL * S);
    parse_bad("2024-02-30T00:00:00Z");
    parse_bad("2023-02-29T00:00:00Z");
    parse_bad("2024-13-01T00:00:00Z");
    parse_bad("2024-05-01T24:00:00Z");
    parse_bad("2024-05-01T12:00:00+25:00");
    parse_bad("2024-05-01T12:00:00Zjunk");
    parse_bad("2024-05-01T12");
}

static void test_local(void **state)
{
    (void)state;
    /* Fixed zones so the test does not depend on the machine's. */
    setenv("TZ", "UTC", 1);
    tzset();
    assert_true(parse_ok("2024-05-01 12:00") == NOW);
    assert_true(parse_ok("2024-05-01 12:00:07") == NOW + 7 * S);
    assert_true(parse_ok("2024-05-01") == NOW - 12 * 3600 * S);
    assert_true(parse_ok("12:00") == NOW);
    assert_true(parse_ok("11:59:30") == NOW - 30 * S);
    setenv("TZ", "Europe/Berlin", 1); /* CEST in May: UTC+2 */
    tzset();
    assert_true(parse_ok("2024-05-01 14:00") == NOW);
    assert_true(parse_ok("14:00") == NOW);
    /* an explicit zone wins over TZ */
    assert_true(parse_ok("2024-05-01T12:00:00Z") == NOW);
    setenv("TZ", "UTC", 1);
    tzset();
    parse_bad("2024-05-01 25:00");
    parse_bad("12:60");
    parse_bad("1:00");
}

static void test_unix(void **state)
{
    (void)state;
    assert_true(parse_ok("1714564800") == NOW);
    assert_true(parse_ok("@1714564800") == NOW);
    assert_true(parse_ok("1714564800.5") == NOW + S / 2);
    assert_true(parse_ok("0") == 0);
    parse_bad("");
    parse_bad("abc");
    parse_bad("17145648001714564800"); /* not seconds */
    parse_bad("1714564800 junk");
}

static void test_duration(void **state)
{
    (void)state;
    int64_t v;
    char err[256];
    assert_int_equal(pfr_duration_parse("90s", &v, err, sizeof(err)), 0);
    assert_true(v == 90 * S);
    assert_int_equal(pfr_duration_parse("1h30m", &v, err, sizeof(err)), 0);
    assert_true(v == 5400 * S);
    assert_int_equal(pfr_duration_parse("0s", &v, err, sizeof(err)), -22);
    assert_int_equal(pfr_duration_parse("10", &v, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "1m30s"));
    /* the one syntax of pfr_units.h: every unit, fractions, terms in any size order */
    assert_int_equal(pfr_duration_parse("250ms", &v, err, sizeof(err)), 0);
    assert_true(v == S / 4);
    assert_int_equal(pfr_duration_parse("1m30s", &v, err, sizeof(err)), 0);
    assert_true(v == 90 * S);
    assert_int_equal(pfr_duration_parse("0.5d", &v, err, sizeof(err)), 0);
    assert_true(v == 43200 * S);
    assert_int_equal(pfr_duration_parse("1w", &v, err, sizeof(err)), 0);
    assert_true(v == 7 * 86400 * S);
    assert_int_equal(pfr_duration_parse("10us", &v, err, sizeof(err)), 0);
    assert_true(v == 10000);
    assert_int_equal(pfr_duration_parse("100000000w", &v, err, sizeof(err)), -22);
}

static void test_format(void **state)
{
    (void)state;
    char buf[64];
    setenv("TZ", "UTC", 1);
    tzset();
    assert_string_equal(pfr_time_format(NOW, true, buf, sizeof(buf)), "2024-05-01T12:00:00Z");
    assert_string_equal(pfr_time_format(NOW, false, buf, sizeof(buf)), "2024-05-01 12:00:00 +0000");
    assert_string_equal(pfr_time_format_rfc3339(NOW, buf, sizeof(buf)), "2024-05-01T12:00:00Z");
    setenv("TZ", "Europe/Berlin", 1);
    tzset();
    assert_string_equal(pfr_time_format_rfc3339(NOW, buf, sizeof(buf)),
                        "2024-05-01T14:00:00+02:00");
    /* what we print, we parse back */
    assert_true(parse_ok(pfr_time_format_rfc3339(NOW, buf, sizeof(buf))) == NOW);
    assert_true(parse_ok(pfr_time_format(NOW, false, buf, sizeof(buf))) == NOW);
    setenv("TZ", "UTC", 1);
    tzset();
    assert_string_equal(pfr_duration_format(5400 * S, buf, sizeof(buf)), "1h30m");
    assert_string_equal(pfr_duration_format(10 * S, buf, sizeof(buf)), "10s");
    assert_string_equal(pfr_duration_format(86400 * S + 5, buf, sizeof(buf)), "1d");
    assert_string_equal(pfr_duration_format(S / 4, buf, sizeof(buf)), "250ms");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relative), cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_local),    cmocka_unit_test(test_unix),
        cmocka_unit_test(test_duration), cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
