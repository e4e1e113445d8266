/* PSI and memory.events texts, and a level sustained above a threshold. */
#include "trig_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The line of text starting with prefix, copied NUL-terminated into line; false if none. */
static bool find_line(const char *text, size_t len, const char *prefix, char *line, size_t cap)
{
    size_t plen = strlen(prefix);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        if (n >= plen && memcmp(p, prefix, plen) == 0) {
            if (n >= cap)
                n = cap - 1;
            memcpy(line, p, n);
            line[n] = '\0';
            return true;
        }
        p = nl ? nl + 1 : end;
    }
    return false;
}

static int field(const char *line, const char *key, double *out)
{
    const char *p = strstr(line, key);
    if (!p)
        return -EINVAL;
    char *end;
    double v = strtod(p + strlen(key), &end);
    if (end == p + strlen(key) || !isfinite(v) || v < 0 || v > 100)
        return -EINVAL;
    *out = v;
    return 0;
}

int pfr_trig_psi_parse(const char *text, size_t len, pfr_psi *out)
{
    char line[256];
    if (!find_line(text, len, "some ", line, sizeof(line)))
        return -EINVAL;
    pfr_psi p = {0};
    if (field(line, " avg10=", &p.some_avg10) || field(line, " avg60=", &p.some_avg60) ||
        field(line, " avg300=", &p.some_avg300))
        return -EINVAL;
    const char *t = strstr(line, " total=");
    if (!t || sscanf(t + 7, "%" SCNu64, &p.some_total) != 1)
        return -EINVAL;
    *out = p;
    return 0;
}

int pfr_trig_memory_events_high(const char *text, size_t len, uint64_t *high)
{
    char line[128];
    if (!find_line(text, len, "high ", line, sizeof(line)))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(line + 5, &end, 10);
    if (errno || end == line + 5 || (*end && *end != ' '))
        return -EINVAL;
    *high = v;
    return 0;
}

enum pfr_trig_level pfr_trig_sustain_update(pfr_trig_sustain *s, double level, double threshold,
                                            int64_t for_ns, int64_t rearm_ns, int64_t now_ns)
{
    if (level < threshold) {
        s->above_since = 0;
        s->fired = false;
        return PFR_TRIG_QUIET;
    }
    if (!s->above_since)
        s->above_since = now_ns ? now_ns : 1;
    if (s->fired)
        return PFR_TRIG_HOLD;
    if (now_ns - s->above_since < for_ns ||
        (s->last_fire_ns && now_ns - s->last_fire_ns < rearm_ns))
        return PFR_TRIG_QUIET;
    s->fired = true;
    s->last_fire_ns = now_ns;
    return PFR_TRIG_FIRE;
}
