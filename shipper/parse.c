#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *skip_ws(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return s;
}

static bool rest_blank(const char *s)
{
    return *skip_ws(s) == 0;
}

int pfr_parse_duration_ms(const char *s, int64_t *out)
{
    if (!s)
        return -EINVAL;
    s = skip_ws(s);
    if (!isdigit((unsigned char)*s) && *s != '.')
        return -EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -EINVAL;
    const char *u = skip_ws(end);
    size_t ulen = strlen(u);
    while (ulen && isspace((unsigned char)u[ulen - 1]))
        ulen--;
    double mult;
    if (ulen == 0 || (ulen == 1 && u[0] == 's') || (ulen == 3 && !strncmp(u, "sec", 3)))
        mult = 1000;
    else if (ulen == 2 && !strncmp(u, "ms", 2))
        mult = 1;
    else if ((ulen == 1 && u[0] == 'm') || (ulen == 3 && !strncmp(u, "min", 3)))
        mult = 60e3;
    else if (ulen == 1 && u[0] == 'h')
        mult = 3600e3;
    else if (ulen == 1 && u[0] == 'd')
        mult = 86400e3;
    else
        return -EINVAL;
    double ms = v * mult;
    if (ms > 9.0e15)
        return -EINVAL;
    *out = (int64_t)llround(ms);
    return 0;
}

int pfr_parse_size(const char *s, uint64_t *out)
{
    if (!s)
        return -EINVAL;
    s = skip_ws(s);
    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -ERANGE;
    const char *u = skip_ws(end);
    uint64_t mult = 1;
    if (*u) {
        switch (toupper((unsigned char)*u)) {
        case 'B':
            mult = 1, u--;
            break;
        case 'K':
            mult = 1ull << 10;
            break;
        case 'M':
            mult = 1ull << 20;
            break;
        case 'G':
            mult = 1ull << 30;
            break;
        case 'T':
            mult = 1ull << 40;
            break;
        default:
            return -EINVAL;
        }
        u++;
        if (*u == 'i' || *u == 'I')
            u++;
        if (*u == 'b' || *u == 'B')
            u++;
        if (!rest_blank(u))
            return -EINVAL;
    }
    if (v > UINT64_MAX / mult)
        return -ERANGE;
    *out = v * mult;
    return 0;
}

int pfr_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    if (!s)
        return -EINVAL;
    s = skip_ws(s);
    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || v > max)
        return -ERANGE;
    if (!rest_blank(end))
        return -EINVAL;
    *out = v;
    return 0;
}

int pfr_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = true;
            return 0;
        }
        if (!strcasecmp(s, no[i])) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

const char *pfr_fmt_duration(int64_t ms, char *out, size_t cap)
{
    if (ms < 0)
        ms = 0;
    if (ms < 1000)
        snprintf(out, cap, "%lldms", (long long)ms);
    else if (ms < 60000)
        snprintf(out, cap, "%.1fs", ms / 1000.0);
    else if (ms < 3600000)
        snprintf(out, cap, "%lldm%02llds", (long long)(ms / 60000), (long long)(ms / 1000 % 60));
    else if (ms < 86400000)
        snprintf(out, cap, "%lldh%02lldm", (long long)(ms / 3600000), (long long)(ms / 60000 % 60));
    else
        snprintf(out, cap, "%lldd%02lldh", (long long)(ms / 86400000),
                 (long long)(ms / 3600000 % 24));
    return out;
}

const char *pfr_fmt_bytes(uint64_t n, char *out, size_t cap)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (n < 1024) {
        snprintf(out, cap, "%llu B", (unsigned long long)n);
        return out;
    }
    double v = (double)n / 1024;
    size_t u = 0;
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    snprintf(out, cap, "%.1f %s", v, units[u]);
    return out;
}
