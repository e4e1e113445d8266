#include "sinks/coroot_conventions.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_clock.h"
#include "pfr_gzip.h"
#include "pfr_log.h"
#include "pfr_system_service.h"

/* ":<line>" in decimal into num (at least 22 bytes); returns the length. */
static size_t line_suffix(char *num, int64_t line)
{
    char rev[20];
    uint64_t v = line < 0 ? 0 - (uint64_t)line : (uint64_t)line;
    size_t n = 0, k = 0;
    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    num[k++] = ':';
    if (line < 0)
        num[k++] = '-';
    while (n)
        num[k++] = rev[--n];
    return k;
}

bool pfr_coroot_averaged(const char *type)
{
    static const char *const avg[] = {
        "go:heap_inuse_objects:count",       "go:heap_inuse_space:bytes",
        "go:goroutine_goroutine:count",      "go_runtime:heap_inuse_objects:count",
        "go_runtime:heap_inuse_space:bytes",
    };
    for (size_t i = 0; type && i < sizeof(avg) / sizeof(avg[0]); i++)
        if (!strcmp(type, avg[i]))
            return true;
    return false;
}

/* The label key's value in m, "" when it has none. */
static const char *label_of(const pfr_chunk_meta *m, const char *key)
{
    for (size_t i = 0; i < m->nlabels; i++)
        if (!strcmp(m->labels[i].key, key))
            return m->labels[i].value ? m->labels[i].value : "";
    return "";
}

int64_t pfr_coroot_start_shift(const pfr_chunk_meta *m)
{
    bool avg = false;
    for (size_t i = 0; i < m->ntypes && !avg; i++)
        avg = pfr_coroot_averaged(m->types[i]);
    int64_t span = (m->end_ns - m->start_ns) / 2;
    if (span > 1000000000)
        span = 1000000000;
    if (!avg || span < 2)
        return 0;
    /* Coroot's instance key: count(distinct Labels['container.id'], Labels['namespace'],
     * Labels['pod']) */
    static const char *const keys[] = {"container.id", "namespace", "pod"};
    uint64_t h = PFR_HASH_FNV_OFFSET;
    for (size_t i = 0; i < 3; i++) {
        const char *v = label_of(m, keys[i]);
        h = pfr_hash_fnv1a(h, v, strlen(v) + 1); /* with its NUL: ("ab", "") != ("a", "b") */
    }
    return 1 + (int64_t)(h % (uint64_t)(span - 1));
}

int pfr_coroot_units_new(const pfr_sink_conf *conf, pfr_unit_cache **out)
{
    *out = NULL;
    if (conf->ship == PFR_SHIP_ALL || !conf->skip_system_services)
        return 0;
    return pfr_unit_cache_new(conf->systemd_root ? conf->systemd_root : "/", PFR_UNIT_CACHE_TTL_NS,
                              out);
}

/* Whether the agent skips unit as a system service: its name, and what its files say. */
static bool system_service(const pfr_sink_conf *conf, pfr_unit_cache *units, const char *unit)
{
    pfr_systemd_props p = {0};
    bool fresh = false;
    int rc = units ? pfr_unit_cache_get(units, unit, pfr_clock_mono_ns(), &p, &fresh) : 0;
    bool sys = pfr_system_service_is(unit, p.type[0] ? p.type : NULL,
                                     p.triggered_by[0] ? p.triggered_by : NULL,
                                     conf->system_service_prefixes);
    if (fresh && rc < 0)
        pfr_warn("%s: cannot read systemd unit %s under %s (%s): judged by its name: %s",
                 conf->name, unit, conf->systemd_root, strerror(-rc),
                 sys ? "a system service, passed over" : "shipped");
    else if (fresh)
        pfr_debug("%s: systemd unit %s: %s, Type=%s, TriggeredBy=%s: %s", conf->name, unit,
                  p.load == PFR_SYSTEMD_LOADED   ? "loaded"
                  : p.load == PFR_SYSTEMD_MASKED ? "masked"
                                                 : "not found",
                  p.type[0] ? p.type : "-", p.triggered_by[0] ? p.triggered_by : "-",
                  sys ? "a system service, passed over (ship = agent)" : "shipped");
    return sys;
}

bool pfr_coroot_ships(const pfr_sink_conf *conf, pfr_unit_cache *units, const pfr_chunk_meta *m)
{
    if (conf->ship == PFR_SHIP_ALL)
        return true;
    const char *id = label_of(m, "container.id");
    if (!id[0])
        return false; /* the agent profiles only processes of containers it tracks */
    char unit[PFR_SYSTEMD_NAME_MAX];
    if (conf->skip_system_services && pfr_system_service_id_unit(id, unit, sizeof(unit)) &&
        system_service(conf, units, unit))
        return false;
    return true;
}

void pfr_coroot_frame(pfr_buf *b, const pfr_frame *f)
{
    char num[24];
    size_t n = line_suffix(num, f->line);
    pfr_buf_puts(b, f->function);
    pfr_buf_putc(b, ' ');
    pfr_buf_puts(b, f->file);
    pfr_buf_put(b, num, n);
}

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -EBADMSG;
        uint8_t c = *(*p)++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -EBADMSG;
}

/* Skip one field's payload of wire type wt. */
static int skip_field(const uint8_t **p, const uint8_t *end, unsigned wt)
{
    uint64_t v;
    switch (wt) {
    case 0:
        return read_varint(p, end, &v);
    case 1:
        if (end - *p < 8)
            return -EBADMSG;
        *p += 8;
        return 0;
    case 2:
        if (read_varint(p, end, &v) || v > (uint64_t)(end - *p))
            return -EBADMSG;
        *p += v;
        return 0;
    case 5:
        if (end - *p < 4)
            return -EBADMSG;
        *p += 4;
        return 0;
    default:
        return -EBADMSG;
    }
}

int pfr_pprof_retime(const uint8_t *raw, size_t len, int64_t time_ns, int64_t dur_ns, bool gzip,
                     int level, uint8_t **out, size_t *out_len)
{
    pfr_buf b = {0};
    if (pfr_buf_reserve(&b, len + 24) < 0)
        return -ENOMEM;
    const uint8_t *p = raw, *end = raw + len;
    while (p < end) {
        const uint8_t *start = p;
        uint64_t key;
        if (read_varint(&p, end, &key) || (key >> 3) == 0 || skip_field(&p, end, key & 7)) {
            pfr_buf_free(&b);
            return -EBADMSG;
        }
        uint64_t field = key >> 3;
        if (field == 9 || field == 10) /* time_nanos, duration_nanos */
            continue;
        pfr_buf_put(&b, start, (size_t)(p - start));
    }
    pfr_buf_uvarint(&b, 9 << 3);
    pfr_buf_uvarint(&b, (uint64_t)time_ns);
    pfr_buf_uvarint(&b, 10 << 3);
    pfr_buf_uvarint(&b, (uint64_t)dur_ns);
    if (b.oom) {
        pfr_buf_free(&b);
        return -ENOMEM;
    }
    if (!gzip) {
        *out = b.data;
        *out_len = b.len;
        return 0;
    }
    pfr_buf gz = {0};
    int rc = pfr_gzip(b.data, b.len, level, &gz);
    pfr_buf_free(&b);
    if (rc) {
        pfr_buf_free(&gz);
        return rc;
    }
    *out = pfr_buf_steal(&gz, out_len);
    return 0;
}
