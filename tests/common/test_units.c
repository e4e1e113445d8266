/* pfr_units: every form the old parsers took (recorder/config.c, shipper/parse.c, pfr_time.c)
 * still means the same; the new forms; the refusals and their reasons. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pfr_time.h"
#include "pfr_units.h"

#define MS 1000000LL
#define S  1000000000LL

static int64_t dur(const char *s)
{
    int64_t v = -1;
    char err[256] = "";
    int rc = pfr_parse_duration(s, &v, err, sizeof(err));
    if (rc)
        fail_msg("'%s': %d %s", s, rc, err);
    return v;
}

static int dur_bad(const char *s, char *err, size_t errlen)
{
    int64_t v = 12345;
    int rc = pfr_parse_duration(s, &v, err, errlen);
    assert_int_equal(v, 12345); /* untouched on failure */
    return rc;
}

static void durations_old_forms(void **state)
{
    (void)state;
    /* the recorder's seconds (strtod): bare numbers, fractions, exponents, leading spaces */
    assert_true(dur("10") == 10 * S);
    assert_true(dur("0.2") == 200 * MS);
    assert_true(dur("0.5") == 500 * MS);
    assert_true(dur("3600") == 3600 * S);
    assert_true(dur("1e1") == 10 * S);
    assert_true(dur(" 10") == 10 * S);
    assert_true(dur("0") == 0);
    assert_true(dur("1.") == 1 * S);
    assert_true(dur(".5") == 500 * MS);
    /* the shipper's: one unit, a space before it allowed, sec and min */
    assert_true(dur("250ms") == 250 * MS);
    assert_true(dur("10s") == 10 * S);
    assert_true(dur("5m") == 300 * S);
    assert_true(dur("2h") == 7200 * S);
    assert_true(dur("1d") == 86400 * S);
    assert_true(dur("1.5") == 1500 * MS);
    assert_true(dur("10 s") == 10 * S);
    assert_true(dur("10sec") == 10 * S);
    assert_true(dur("5min") == 300 * S);
    assert_true(dur(" 10s ") == 10 * S);
    /* the query tool's: terms, fractions, weeks */
    assert_true(dur("90s") == 90 * S);
    assert_true(dur("1h30m") == 5400 * S);
    assert_true(dur("0.5d") == 43200 * S);
    assert_true(dur("1w") == 7 * 86400 * S);
    assert_true(dur("1.5h") == 5400 * S);
}

static void durations_new_forms(void **state)
{
    (void)state;
    assert_true(dur("1m30s") == 90 * S);
    assert_true(dur("1h 30m") == 5400 * S);
    assert_true(dur("100us") == 100000);
    assert_true(dur("5ns") == 5);
    assert_true(dur("1s500ms") == 1500 * MS);
    assert_true(dur("0s") == 0);
    assert_true(dur("2e3ms") == 2 * S);
}

static void durations_refused(void **state)
{
    (void)state;
    char err[256];
    static const char *const bad[] = {"",    "-1s",  "10x", "1s2", "s",    "1 2", "10sx", "inf",
                                      "nan", "0x10", "+5s", "1e",  "1..2", "1ss", "ms5",  "1m-1s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (dur_bad(bad[i], err, sizeof(err)) != -EINVAL)
            fail_msg("'%s' accepted", bad[i]);
    assert_int_equal(dur_bad("7x", err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "'7x' is not a duration (e.g. 250ms, 10s, 1m30s)");
    assert_int_equal(dur_bad("300y", err, sizeof(err)), -EINVAL);
    /* overflow of int64 nanoseconds (292 years) */
    assert_int_equal(dur_bad("100000000w", err, sizeof(err)), -ERANGE);
    assert_non_null(strstr(err, "too long"));
    assert_int_equal(dur_bad("1e300", err, sizeof(err)), -ERANGE);
    assert_int_equal(dur_bad(NULL, err, sizeof(err)), -EINVAL);
    int64_t v;
    assert_int_equal(pfr_parse_duration("x", &v, NULL, 0), -EINVAL); /* no reason wanted */
}

/* pfr_duration_parse keeps its contract: > 0, a unit required, -EINVAL for every refusal. */
static void duration_parse_contract(void **state)
{
    (void)state;
    int64_t v;
    char err[256];
    assert_int_equal(pfr_duration_parse("1m30s", &v, err, sizeof(err)), 0);
    assert_true(v == 90 * S);
    assert_int_equal(pfr_duration_parse("250ms", &v, err, sizeof(err)), 0);
    assert_int_equal(pfr_duration_parse("10", &v, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_duration_parse("0s", &v, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_duration_parse("100000000w", &v, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "1m30s"));
    int64_t t;
    assert_int_equal(pfr_time_parse("now-1m30s", 1000 * S, &t, err, sizeof(err)), 0);
    assert_true(t == 910 * S);
    assert_int_equal(pfr_time_parse("-15", 1000 * S, &t, err, sizeof(err)), -EINVAL);
}

static uint64_t size(const char *s)
{
    uint64_t v = 0;
    char err[256] = "";
    int rc = pfr_parse_size(s, &v, err, sizeof(err));
    if (rc)
        fail_msg("'%s': %d %s", s, rc, err);
    return v;
}

static void sizes(void **state)
{
    (void)state;
    /* the recorder's (k/m/g either case, optional iB/B) */
    assert_true(size("512M") == 512ull << 20);
    assert_true(size("1m") == 1ull << 20);
    assert_true(size("1MiB") == 1ull << 20);
    assert_true(size("1mb") == 1ull << 20);
    assert_true(size("1G") == 1ull << 30);
    assert_true(size("16M") == 16ull << 20);
    assert_true(size("0") == 0);
    /* the shipper's (T, B, a space before the unit) */
    assert_true(size("4096") == 4096);
    assert_true(size("512k") == 512ull << 10);
    assert_true(size("8M") == 8ull << 20);
    assert_true(size("1GiB") == 1ull << 30);
    assert_true(size("2KB") == 2048);
    assert_true(size("3MB") == 3ull << 20);
    assert_true(size("12B") == 12);
    assert_true(size("2T") == 2ull << 40);
    assert_true(size("1 G") == 1ull << 30);
    assert_true(size(" 64k ") == 64ull << 10);

    char err[256];
    uint64_t v = 7;
    static const char *const bad[] = {"", "3X", "-3", "k", "1kk", "1 2", "1.5M", "0x10", "1e3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (pfr_parse_size(bad[i], &v, err, sizeof(err)) != -EINVAL)
            fail_msg("'%s' accepted", bad[i]);
    assert_int_equal(v, 7);
    assert_int_equal(pfr_parse_size("1.5M", &v, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "whole numbers"));
    assert_int_equal(pfr_parse_size("3X", &v, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "'3X' is not a size (e.g. 4096, 512K, 8M, 1G)");
    assert_int_equal(pfr_parse_size("99999999999999999999", &v, err, sizeof(err)), -ERANGE);
    assert_int_equal(pfr_parse_size("20000000000T", &v, err, sizeof(err)), -ERANGE);
    assert_int_equal(pfr_parse_size("16777216T", &v, err, sizeof(err)), -ERANGE); /* 2^64 */
    assert_int_equal(pfr_parse_size("16777215T", &v, err, sizeof(err)), 0);
}

static void counts(void **state)
{
    (void)state;
    uint64_t v;
    char err[256];
    assert_int_equal(pfr_parse_count("0", 300, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 0);
    assert_int_equal(pfr_parse_count(" 300 ", 300, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 300);
    assert_int_equal(pfr_parse_count("+7", 300, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 7);
    assert_int_equal(pfr_parse_count("301", 300, &v, err, sizeof(err)), -ERANGE);
    assert_string_equal(err, "'301' is more than 300");
    assert_int_equal(pfr_parse_count("18446744073709551616", UINT64_MAX, &v, err, sizeof(err)),
                     -ERANGE);
    assert_int_equal(pfr_parse_count("18446744073709551615", UINT64_MAX, &v, err, sizeof(err)), 0);
    assert_true(v == UINT64_MAX);
    static const char *const bad[] = {"", "-1", "1.5", "x", "1k", "1 1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (pfr_parse_count(bad[i], 1000, &v, err, sizeof(err)) != -EINVAL)
            fail_msg("'%s' accepted", bad[i]);
    assert_string_equal(err, "'1 1' is not a whole number");
}

static void bools(void **state)
{
    (void)state;
    static const char *const yes[] = {"1", "true", "yes", "on", "TRUE", "Yes", "On", " true "};
    static const char *const no[] = {"0", "false", "no", "off", "FALSE", "No", "OFF"};
    bool b;
    char err[256];
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        b = false;
        assert_int_equal(pfr_parse_bool(yes[i], &b, err, sizeof(err)), 0);
        assert_true(b);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        b = true;
        assert_int_equal(pfr_parse_bool(no[i], &b, err, sizeof(err)), 0);
        assert_false(b);
    }
    assert_int_equal(pfr_parse_bool("maybe", &b, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "'maybe' is not a boolean (true/false, yes/no, on/off, 1/0)");
    assert_int_equal(pfr_parse_bool("", &b, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_parse_bool("truex", &b, err, sizeof(err)), -EINVAL);
}

static void formats(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(pfr_format_duration(0, b, sizeof(b)), "0");
    assert_string_equal(pfr_format_duration(90 * S, b, sizeof(b)), "1m30s");
    assert_string_equal(pfr_format_duration(250 * MS, b, sizeof(b)), "250ms");
    assert_string_equal(pfr_format_duration(10 * S, b, sizeof(b)), "10s");
    assert_string_equal(pfr_format_duration(3600 * S, b, sizeof(b)), "1h");
    assert_string_equal(pfr_format_duration(1500 * MS, b, sizeof(b)), "1s500ms");
    assert_string_equal(pfr_format_duration(90000 * S, b, sizeof(b)), "1d1h");
    assert_string_equal(pfr_format_duration(-5 * S, b, sizeof(b)), "-5s");
    assert_string_equal(pfr_format_duration(INT64_MIN, b, sizeof(b)),
                        "-106751d23h47m16s854ms775us808ns");
    assert_string_equal(pfr_format_size(0, b, sizeof(b)), "0");
    assert_string_equal(pfr_format_size(512ull << 20, b, sizeof(b)), "512M");
    assert_string_equal(pfr_format_size(4096, b, sizeof(b)), "4K");
    assert_string_equal(pfr_format_size(4097, b, sizeof(b)), "4097");
    assert_string_equal(pfr_format_size(1ull << 30, b, sizeof(b)), "1G");
    assert_string_equal(pfr_format_size(3ull << 40, b, sizeof(b)), "3T");
    assert_string_equal(pfr_format_size(1536, b, sizeof(b)), "1536");
    char tiny[3];
    assert_string_equal(pfr_format_duration(90 * S, tiny, sizeof(tiny)), "1m");
}

/* What is printed reads back as the same value. */
static void round_trips(void **state)
{
    (void)state;
    static const int64_t ds[] = {0, 1, 999, MS, 250 * MS, S, 90 * S, 5400 * S + 7, INT64_MAX};
    for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++) {
        char b[64];
        int64_t v;
        assert_int_equal(pfr_parse_duration(pfr_format_duration(ds[i], b, sizeof(b)), &v, NULL, 0),
                         ds[i] == INT64_MAX ? -ERANGE : 0);
        if (ds[i] != INT64_MAX)
            assert_true(v == ds[i]);
    }
    static const uint64_t ss[] = {0, 1, 1023, 1024, 4097, 1ull << 40, UINT64_MAX};
    for (size_t i = 0; i < sizeof(ss) / sizeof(ss[0]); i++) {
        char b[64];
        uint64_t v;
        assert_int_equal(pfr_parse_size(pfr_format_size(ss[i], b, sizeof(b)), &v, NULL, 0), 0);
        assert_true(v == ss[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(durations_old_forms),
        cmocka_unit_test(durations_new_forms),
        cmocka_unit_test(durations_refused),
        cmocka_unit_test(duration_parse_contract),
        cmocka_unit_test(sizes),
        cmocka_unit_test(counts),
        cmocka_unit_test(bools),
        cmocka_unit_test(formats),
        cmocka_unit_test(round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
