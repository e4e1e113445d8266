/* pfr_units: durations, sizes, counts and booleans, parsed and printed in one syntax. */
#include "pfr_units.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NS_PER_S 1000000000LL

static const char duration_eg[] = "e.g. 250ms, 10s, 1m30s";
static const char size_eg[] = "e.g. 4096, 512K, 8M, 1G";

/* The longest unit names first where one is a prefix of another ("ms" and "min" before "m"). */
static const struct unit {
    const char *name;
    int64_t ns;
} duration_units[] = {
    {"ns", 1},
    {"us", 1000},
    {"ms", 1000000},
    {"sec", NS_PER_S}, /* the shipper took "sec" and "min" */
    {"s", NS_PER_S},
    {"min", 60 * NS_PER_S},
    {"m", 60 * NS_PER_S},
    {"h", 3600 * NS_PER_S},
    {"d", 86400 * NS_PER_S},
    {"w", 7 * 86400 * NS_PER_S},
};

static int fail(char *err, size_t errlen, int rc, const char *s, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, "'%.80s'%s %s", s, strlen(s) > 80 ? "..." : "", what);
    return rc;
}

static const char *skip_space(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

/* Only spaces from p on. */
static bool at_end(const char *p)
{
    return !*skip_space(p);
}

/* A decimal number, fraction and exponent allowed ("1", "1.5", ".5", "2e3"); no sign, hex, inf
 * or nan, which strtod would take. Leaves *pp after it; false if there is none. */
static bool read_decimal(const char **pp, long double *out)
{
    const char *p = *pp;
    size_t digits = 0;
    while (isdigit((unsigned char)*p))
        p++, digits++;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p))
            p++, digits++;
    }
    if (!digits)
        return false;
    if ((*p == 'e' || *p == 'E') &&
        (isdigit((unsigned char)p[1]) ||
         ((p[1] == '+' || p[1] == '-') && isdigit((unsigned char)p[2])))) {
        p += 2;
        while (isdigit((unsigned char)*p))
            p++;
    }
    char *end;
    errno = 0;
    long double v = strtold(*pp, &end);
    if (end != p || !isfinite(v))
        return false;
    *pp = p;
    *out = v;
    return true;
}

static int64_t read_unit(const char **pp)
{
    for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
        size_t n = strlen(duration_units[i].name);
        if (strncmp(*pp, duration_units[i].name, n) == 0 && !isalpha((unsigned char)(*pp)[n])) {
            *pp += n;
            return duration_units[i].ns;
        }
    }
    return 0;
}

int pfr_parse_duration(const char *s, int64_t *out_ns, char *err, size_t errlen)
{
    char what[64];
    snprintf(what, sizeof(what), "is not a duration (%s)", duration_eg);
    if (!s)
        return fail(err, errlen, -EINVAL, "", what);
    const char *p = skip_space(s);
    long double total = 0, v;
    if (!read_decimal(&p, &v))
        return fail(err, errlen, -EINVAL, s, what);
    if (at_end(p)) {
        total = v * NS_PER_S; /* a bare number is seconds */
    } else {
        for (;;) {
            p = skip_space(p);
            int64_t unit = read_unit(&p);
            if (!unit)
                return fail(err, errlen, -EINVAL, s, what);
            total += v * unit;
            if (at_end(p))
                break;
            p = skip_space(p);
            if (!read_decimal(&p, &v))
                return fail(err, errlen, -EINVAL, s, what);
        }
    }
    if (total >= 9.2e18L)
        return fail(err, errlen, -ERANGE, s, "is too long a duration (at most 292 years)");
    *out_ns = (int64_t)llroundl(total);
    return 0;
}

/* Digits of an unsigned decimal integer, with an optional '+'; *pp after them. */
static int read_integer(const char **pp, uint64_t *out)
{
    const char *p = *pp;
    if (*p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    uint64_t v = 0;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *pp = p;
    *out = v;
    return 0;
}

/* "K", "KiB", "KB", "k", ... and "B": the multiplier, or 0 if p does not start with a unit. */
static uint64_t read_size_unit(const char **pp)
{
    static const char letters[] = "KMGT";
    const char *p = *pp;
    const char *l = *p ? strchr(letters, toupper((unsigned char)*p)) : NULL;
    uint64_t mult = 1;
    if (l) {
        mult = 1ull << (10 * (l - letters + 1));
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
        if (*p == 'b' || *p == 'B')
            p++;
    } else if (*p == 'b' || *p == 'B') {
        p++;
    } else {
        return 0;
    }
    *pp = p;
    return mult;
}

int pfr_parse_size(const char *s, uint64_t *out, char *err, size_t errlen)
{
    char what[64];
    snprintf(what, sizeof(what), "is not a size (%s)", size_eg);
    if (!s)
        return fail(err, errlen, -EINVAL, "", what);
    const char *p = skip_space(s);
    uint64_t v;
    int rc = read_integer(&p, &v);
    if (rc == -ERANGE)
        return fail(err, errlen, -ERANGE, s, "is too large a size");
    if (rc)
        return fail(err, errlen, -EINVAL, s, what);
    if (*p == '.')
        return fail(err, errlen, -EINVAL, s,
                    "is not a size: sizes are whole numbers of bytes or units (1536K, not 1.5M)");
    p = skip_space(p);
    uint64_t mult = 1;
    if (*p && !(mult = read_size_unit(&p)))
        return fail(err, errlen, -EINVAL, s, what);
    if (!at_end(p))
        return fail(err, errlen, -EINVAL, s, what);
    if (v > UINT64_MAX / mult)
        return fail(err, errlen, -ERANGE, s, "is too large a size");
    *out = v * mult;
    return 0;
}

int pfr_parse_count(const char *s, uint64_t max, uint64_t *out, char *err, size_t errlen)
{
    if (!s)
        return fail(err, errlen, -EINVAL, "", "is not a whole number");
    const char *p = skip_space(s);
    uint64_t v;
    int rc = read_integer(&p, &v);
    if (rc == -EINVAL || (rc == 0 && !at_end(p)))
        return fail(err, errlen, -EINVAL, s, "is not a whole number");
    if (rc == -ERANGE || v > max) {
        char what[64];
        snprintf(what, sizeof(what), "is more than %" PRIu64, max);
        return fail(err, errlen, -ERANGE, s, what);
    }
    *out = v;
    return 0;
}

int pfr_parse_bool(const char *s, bool *out, char *err, size_t errlen)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    const char *p = s ? skip_space(s) : "";
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    for (size_t i = 0; i < 4; i++) {
        if (strlen(yes[i]) == n && !strncasecmp(p, yes[i], n)) {
            *out = true;
            return 0;
        }
        if (strlen(no[i]) == n && !strncasecmp(p, no[i], n)) {
            *out = false;
            return 0;
        }
    }
    return fail(err, errlen, -EINVAL, s ? s : "",
                "is not a boolean (true/false, yes/no, on/off, 1/0)");
}

char *pfr_format_duration(int64_t ns, char *buf, size_t len)
{
    static const struct unit units[] = {
        {"d", 86400 * NS_PER_S},
        {"h", 3600 * NS_PER_S},
        {"m", 60 * NS_PER_S},
        {"s", NS_PER_S},
        {"ms", 1000000},
        {"us", 1000},
        {"ns", 1},
    };
    if (!len)
        return buf;
    if (ns == 0) {
        snprintf(buf, len, "0");
        return buf;
    }
    size_t used = 0;
    /* in unsigned arithmetic, so that INT64_MIN has a magnitude */
    uint64_t left = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0)
        used = (size_t)snprintf(buf, len, "-");
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && left && used < len; i++) {
        uint64_t q = left / (uint64_t)units[i].ns;
        if (!q)
            continue;
        int n = snprintf(buf + used, len - used, "%" PRIu64 "%s", q, units[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
        left -= q * (uint64_t)units[i].ns;
    }
    return buf;
}

char *pfr_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char letters[] = "TGMK";
    if (!len)
        return buf;
    for (int i = 0; i < 4 && bytes; i++) {
        uint64_t unit = 1ull << (10 * (4 - i));
        if (bytes % unit == 0) {
            snprintf(buf, len, "%" PRIu64 "%c", bytes / unit, letters[i]);
            return buf;
        }
    }
    snprintf(buf, len, "%" PRIu64, bytes);
    return buf;
}
