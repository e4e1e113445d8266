/* Time expressions: relative, RFC 3339, local wall-clock, unix seconds. */
#include "pfr_time.h"

#include "pfr_clock.h"
#include "pfr_units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NS_PER_S 1000000000LL

const char pfr_time_forms[] =
    "  now                        the current time\n"
    "  -15m, now-2h, now-1h30m    relative to now (units: ms s m h d w)\n"
    "  2024-05-01T13:45:00Z       RFC 3339 (also +02:00 offsets, fractions, a space for T)\n"
    "  2024-05-01 13:45[:07]      local time (TZ of this process)\n"
    "  2024-05-01                 local midnight\n"
    "  13:45[:07]                 today, local time\n"
    "  1714571100, @1714571100    unix seconds\n";

static int fail(char *err, size_t errlen, const char *what, const char *s)
{
    if (errlen)
        snprintf(err, errlen, "%s \"%s\"; accepted forms:\n%s", what, s, pfr_time_forms);
    return -EINVAL;
}

static const char *skip_spaces(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

/* Reads exactly n digits. */
static bool read_digits(const char **pp, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*pp)[i]))
            return false;
        v = v * 10 + ((*pp)[i] - '0');
    }
    *pp += n;
    *out = v;
    return true;
}

/* Reads a non-negative decimal number with an optional fraction; returns false if none. */
static bool read_number(const char **pp, double *out)
{
    const char *p = *pp;
    double v = 0;
    bool any = false;
    while (isdigit((unsigned char)*p)) {
        v = v * 10 + (*p++ - '0');
        any = true;
    }
    if (*p == '.') {
        double scale = 0.1;
        p++;
        while (isdigit((unsigned char)*p)) {
            v += (*p++ - '0') * scale;
            scale /= 10;
            any = true;
        }
    }
    if (!any)
        return false;
    *pp = p;
    *out = v;
    return true;
}

/* A duration with its units (pfr_units' syntax): the bare number pfr_parse_duration reads as
 * seconds is ambiguous in a time ("-15") or a step, so a unit is required here. */
static bool parse_duration_units(const char *p, int64_t *out)
{
    bool unit = false;
    for (const char *c = p; *c && !unit; c++)
        unit = isalpha((unsigned char)*c) && *c != 'e' && *c != 'E';
    return unit && pfr_parse_duration(p, out, NULL, 0) == 0;
}

int pfr_duration_parse(const char *s, int64_t *out_ns, char *err, size_t errlen)
{
    int64_t v;
    if (!s || !parse_duration_units(s, &v) || v <= 0) {
        if (errlen)
            snprintf(err, errlen,
                     "bad duration \"%s\": expected e.g. 250ms, 10s, 1m30s, 2d (units ns us ms s "
                     "m h d w)",
                     s ? s : "");
        return -EINVAL;
    }
    *out_ns = v;
    return 0;
}

static bool is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : d[m - 1];
}

/* Clock time "HH:MM[:SS[.frac]]"; leaves p after it. */
static bool parse_clock(const char **pp, struct tm *tm, int64_t *frac_ns)
{
    const char *p = *pp;
    int h, mi, sec = 0;
    *frac_ns = 0;
    if (!read_digits(&p, 2, &h) || *p++ != ':' || !read_digits(&p, 2, &mi))
        return false;
    if (*p == ':') {
        p++;
        if (!read_digits(&p, 2, &sec))
            return false;
        if (*p == '.' || *p == ',') {
            p++;
            int64_t scale = NS_PER_S / 10;
            if (!isdigit((unsigned char)*p))
                return false;
            while (isdigit((unsigned char)*p)) {
                *frac_ns += (*p++ - '0') * scale;
                scale /= 10;
            }
        }
    }
    /* 60 is a leap second; it is folded into the next minute by timegm/mktime. */
    if (h > 23 || mi > 59 || sec > 60)
        return false;
    tm->tm_hour = h;
    tm->tm_min = mi;
    tm->tm_sec = sec;
    *pp = p;
    return true;
}

/* Zone "Z" or "+hh:mm" / "-hh:mm" / "+hhmm"; returns false if malformed. *has set if present. */
static bool parse_zone(const char **pp, bool *has, int *offset_s)
{
    const char *p = *pp;
    *has = false;
    *offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        *has = true;
        *pp = p + 1;
        return true;
    }
    if (*p != '+' && *p != '-')
        return true;
    int sign = *p++ == '-' ? -1 : 1, hh, mm;
    if (!read_digits(&p, 2, &hh))
        return false;
    if (*p == ':')
        p++;
    if (!read_digits(&p, 2, &mm) || hh > 23 || mm > 59)
        return false;
    *has = true;
    *offset_s = sign * (hh * 3600 + mm * 60);
    *pp = p;
    return true;
}

static bool local_to_ns(struct tm *tm, int64_t frac_ns, int64_t *out)
{
    tm->tm_isdst = -1; /* let the zone rules decide (DST) */
    errno = 0;
    time_t t = mktime(tm);
    if (t == (time_t)-1 && errno)
        return false;
    *out = (int64_t)t * NS_PER_S + frac_ns;
    return true;
}

/* Date, optionally followed by a clock time and a zone. */
static bool parse_calendar(const char *p, int64_t *out)
{
    struct tm tm = {0};
    int y, mo, d;
    int64_t frac = 0;
    if (!read_digits(&p, 4, &y) || *p++ != '-' || !read_digits(&p, 2, &mo) || *p++ != '-' ||
        !read_digits(&p, 2, &d))
        return false;
    /* int64 nanoseconds end in 2262 */
    if (y < 1970 || y > 2261 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
        return false;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    bool has_zone = false;
    int offset = 0;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!parse_clock(&p, &tm, &frac))
            return false;
        /* "13:45:07 +0200" as pfr prints local times */
        if (p[0] == ' ' && (p[1] == '+' || p[1] == '-' || p[1] == 'Z'))
            p++;
        if (!parse_zone(&p, &has_zone, &offset))
            return false;
    }
    if (*skip_spaces(p))
        return false;
    if (!has_zone)
        return local_to_ns(&tm, frac, out);
    time_t t = timegm(&tm);
    *out = ((int64_t)t - offset) * NS_PER_S + frac;
    return true;
}

/* "HH:MM[:SS]" today in local time. */
static bool parse_today(const char *p, int64_t now_ns, int64_t *out)
{
    time_t now = (time_t)(now_ns / NS_PER_S);
    struct tm tm;
    int64_t frac;
    if (!localtime_r(&now, &tm) || !parse_clock(&p, &tm, &frac) || *skip_spaces(p))
        return false;
    return local_to_ns(&tm, frac, out);
}

static bool parse_unix(const char *p, int64_t *out)
{
    if (*p == '@')
        p++;
    const char *start = p;
    double v;
    if (!read_number(&p, &v) || *skip_spaces(p) || start[0] == '.')
        return false;
    if (v > 9.0e9) /* far beyond year 2200: surely not seconds */
        return false;
    *out = (int64_t)llround(v * 1e9);
    return true;
}

/* "now", "now-2h", "-15m", "now+5m". */
static bool parse_relative(const char *p, int64_t now_ns, int64_t *out)
{
    if (strncmp(p, "now", 3) == 0) {
        p = skip_spaces(p + 3);
        if (!*p) {
            *out = now_ns;
            return true;
        }
    }
    if (*p != '-' && *p != '+')
        return false;
    int sign = *p == '-' ? -1 : 1;
    int64_t d;
    if (!parse_duration_units(p + 1, &d))
        return false;
    return !__builtin_add_overflow(now_ns, sign * d, out);
}

int pfr_time_parse(const char *s, int64_t now_ns, int64_t *out_ns, char *err, size_t errlen)
{
    if (!s)
        return fail(err, errlen, "missing time", "");
    const char *p = skip_spaces(s);
    int64_t v;
    bool ok;
    if (*p == 'n' || *p == '-' || *p == '+')
        ok = parse_relative(p, now_ns, &v);
    else if (isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1]) && p[2] == ':')
        ok = parse_today(p, now_ns, &v);
    else if (strlen(p) >= 10 && p[4] == '-' && p[7] == '-')
        ok = parse_calendar(p, &v);
    else
        ok = parse_unix(p, &v);
    if (!ok)
        return fail(err, errlen, "bad time", s);
    if (v < 0)
        return fail(err, errlen, "time before 1970", s);
    *out_ns = v;
    return 0;
}

int64_t pfr_time_now_ns(void)
{
    return pfr_clock_real_ns();
}

static time_t floor_seconds(int64_t ns)
{
    int64_t s = ns / NS_PER_S;
    if (ns % NS_PER_S < 0)
        s--;
    return (time_t)s;
}

char *pfr_time_format(int64_t ns, bool utc, char *buf, size_t len)
{
    time_t t = floor_seconds(ns);
    struct tm tm;
    if (!len)
        return buf;
    if (utc ? !gmtime_r(&t, &tm) : !localtime_r(&t, &tm)) {
        snprintf(buf, len, "%lld", (long long)t);
        return buf;
    }
    if (!strftime(buf, len, utc ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%S %z", &tm))
        buf[0] = '\0';
    return buf;
}

char *pfr_time_format_rfc3339(int64_t ns, char *buf, size_t len)
{
    time_t t = floor_seconds(ns);
    struct tm tm;
    char zone[8];
    if (!len)
        return buf;
    if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm) ||
        !strftime(zone, sizeof(zone), "%z", &tm)) {
        snprintf(buf, len, "%lld", (long long)t);
        return buf;
    }
    size_t n = strlen(buf);
    if (strcmp(zone, "+0000") == 0)
        snprintf(buf + n, len - n, "Z");
    else
        snprintf(buf + n, len - n, "%.3s:%.2s", zone, zone + 3);
    return buf;
}

char *pfr_duration_format(int64_t ns, char *buf, size_t len)
{
    static const struct {
        const char *unit;
        int64_t ns;
    } units[] = {
        {"d", 86400 * NS_PER_S}, {"h", 3600 * NS_PER_S}, {"m", 60 * NS_PER_S}, {"s", NS_PER_S}};
    if (!len)
        return buf;
    buf[0] = '\0';
    if (ns < NS_PER_S) {
        snprintf(buf, len, "%lldms", (long long)(ns / 1000000));
        return buf;
    }
    size_t used = 0;
    int parts = 0;
    for (size_t i = 0; i < 4 && parts < 2; i++) {
        int64_t q = ns / units[i].ns;
        if (!q && !parts)
            continue;
        if (q) {
            int n = snprintf(buf + used, len - used, "%lld%s", (long long)q, units[i].unit);
            if (n < 0 || (size_t)n >= len - used)
                break;
            used += (size_t)n;
        }
        parts++;
        ns -= q * units[i].ns;
    }
    return buf;
}
