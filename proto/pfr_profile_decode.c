/*
 * Defensive pprof decoding, straight from the wire into the model.
 *
 * Why not protobuf-c's unpack: it builds a tree of one allocation per message (every Location,
 * Line, Sample, Label, string) that is thrown away right after; on a 220 KB CPU profile that is
 * ~1.7 MB of short-lived memory and most of the decode time. This reader walks the buffer
 * instead (wire format per https://protobuf.dev/programming-guides/encoding/, the same
 * semantics as protobuf-c: packed or unpacked repeated scalars, unknown fields skipped, a
 * repeated sub-message's occurrences merged for singular fields) and keeps only (pointer,
 * length) spans. The fuzz target checks it against protobuf-c's unpack of the same bytes.
 *
 * Two passes: the first records the spans of the top-level repeated messages, the second
 * resolves them in dependency order (strings, mappings, functions, locations, samples), since a
 * writer may emit them in any order.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_gzip.h"
#include "pfr_profile_internal.h"

#define DEFAULT_MAX_BYTES     (256u << 20)
#define MAX_LABELS_PER_SAMPLE 1024 /* label sets are compared pairwise: keep that cheap */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EBADMSG;
}

/* ---- wire format ---- */

struct wire {
    const uint8_t *p, *end;
};

struct span {
    const uint8_t *p;
    size_t n;
};

static bool rd_varint(struct wire *w, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 70 && w->p < w->end; shift += 7) {
        uint8_t b = *w->p++;
        if (shift < 64)
            r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false; /* truncated, or more than 10 bytes */
}

/* Next field of a message: false at the end; *ok false if malformed. Tags and lengths are read
 * as protobuf-c reads them (at most 5 bytes, field number 0 refused by its first byte), so both
 * accept the same messages. A longer tag can still spell field 0 (0x85 0x00): protobuf-c keeps
 * it as an unknown field, so callers skip it as one. */
static bool rd_tag(struct wire *w, uint32_t *field, uint32_t *wt, bool *ok)
{
    if (w->p >= w->end)
        return false;
    uint8_t b = *w->p++;
    if ((b & 0xf8) == 0) {
        *ok = false;
        return false;
    }
    *wt = b & 7;
    uint32_t f = (b & 0x7f) >> 3;
    for (unsigned i = 1, shift = 4; b & 0x80; i++, shift += 7) {
        if (i == 5 || w->p >= w->end) {
            *ok = false;
            return false;
        }
        b = *w->p++;
        f |= (uint32_t)(b & 0x7f) << shift;
    }
    *field = f;
    return true;
}

static bool rd_len(struct wire *w, struct span *s)
{
    uint64_t n = 0;
    uint8_t b = 0x80;
    for (unsigned i = 0; b & 0x80; i++) {
        if (i == 5 || w->p >= w->end)
            return false;
        b = *w->p++;
        n |= (uint64_t)(b & 0x7f) << (7 * i);
    }
    if (n > (uint64_t)(w->end - w->p))
        return false;
    s->p = w->p;
    s->n = (size_t)n;
    w->p += n;
    return true;
}

static bool skip_field(struct wire *w, uint32_t wt)
{
    uint64_t v;
    struct span s;
    switch (wt) {
    case WT_VARINT:
        return rd_varint(w, &v);
    case WT_I64:
        if (w->end - w->p < 8)
            return false;
        w->p += 8;
        return true;
    case WT_LEN:
        return rd_len(w, &s);
    case WT_I32:
        if (w->end - w->p < 4)
            return false;
        w->p += 4;
        return true;
    default: /* groups and reserved wire types */
        return false;
    }
}

/* A singular varint field (int64, uint64, bool). */
static bool rd_scalar(struct wire *w, uint32_t wt, uint64_t *v)
{
    return wt == WT_VARINT && rd_varint(w, v);
}

/* A repeated varint field, packed or not: calls add for each value. */
typedef bool (*add_fn)(void *ctx, uint64_t v);

static bool rd_repeated(struct wire *w, uint32_t wt, add_fn add, void *ctx)
{
    uint64_t v;
    if (wt == WT_VARINT)
        return rd_varint(w, &v) && add(ctx, v);
    if (wt != WT_LEN)
        return false;
    struct span s;
    if (!rd_len(w, &s))
        return false;
    struct wire in = {s.p, s.p + s.n};
    while (in.p < in.end)
        if (!rd_varint(&in, &v) || !add(ctx, v))
            return false;
    return true;
}

/* ---- decoded pieces ---- */

struct spans {
    struct span *v;
    size_t n, cap;
};

static bool spans_add(struct spans *s, struct span x)
{
    if (PFR_RESERVE(s->v, s->cap, s->n + 1))
        return false;
    s->v[s->n++] = x;
    return true;
}

struct u64s {
    uint64_t *v;
    size_t n, cap;
    bool nomem;
};

static bool u64s_add(void *ctx, uint64_t x)
{
    struct u64s *s = ctx;
    if (PFR_RESERVE(s->v, s->cap, s->n + 1)) {
        s->nomem = true;
        return false;
    }
    s->v[s->n++] = x;
    return true;
}

/* Pprof ids are arbitrary non-zero uint64: map an id to its position in the message. */
struct idmap {
    uint64_t *keys;
    uint32_t *pos;
    size_t mask, n;
    bool dense; /* ids are exactly 1..n in order: position = id - 1 */
};

static void idmap_free(struct idmap *m)
{
    free(m->keys);
    free(m->pos);
}

static int64_t idmap_get(const struct idmap *m, uint64_t id)
{
    if (m->dense)
        return id >= 1 && id <= m->n ? (int64_t)(id - 1) : -1;
    if (id == 0)
        return -1;
    size_t s = (size_t)pfr_hash_mix(id) & m->mask;
    while (m->keys[s]) {
        if (m->keys[s] == id)
            return m->pos[s];
        s = (s + 1) & m->mask;
    }
    return -1;
}

struct decoder {
    pfr_profile *p;
    char *err;
    size_t errlen;
    /* first pass */
    struct spans strs, types, samples, maps, locs, funcs, period_type;
    struct u64s comments;
    int64_t drop_frames, keep_frames, time_nanos, duration_nanos, period, default_type;
    /* second pass */
    uint32_t *smap; /* message string index -> profile string index */
    struct idmap map_ids, fn_ids, loc_ids;
    uint32_t *map_index, *fn_index, *loc_index; /* message position -> profile index */
    /* per-item scratch */
    struct u64s ids, vals;
    pfr_line *lines;
    size_t cap_lines;
    uint32_t *stack;
    size_t cap_stack;
};

static int nomem(void)
{
    return -ENOMEM;
}

#define MALFORMED(d, what) bad((d)->err, (d)->errlen, "malformed %s", (what))

/* Build the id index of n messages whose ids are ids[i]. */
static int idmap_build(struct decoder *d, struct idmap *m, const uint64_t *ids, size_t n,
                       const char *what)
{
    memset(m, 0, sizeof(*m));
    m->n = n;
    m->dense = true;
    for (size_t i = 0; i < n && m->dense; i++)
        m->dense = ids[i] == (uint64_t)i + 1;
    if (m->dense)
        return 0;
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    m->keys = calloc(cap, sizeof(*m->keys));
    m->pos = malloc(cap * sizeof(*m->pos));
    if (!m->keys || !m->pos)
        return nomem();
    m->mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = ids[i];
        if (id == 0)
            return bad(d->err, d->errlen, "%s %zu has id 0", what, i);
        size_t s = (size_t)pfr_hash_mix(id) & m->mask;
        while (m->keys[s]) {
            if (m->keys[s] == id)
                return bad(d->err, d->errlen, "duplicate %s id %llu", what, (unsigned long long)id);
            s = (s + 1) & m->mask;
        }
        m->keys[s] = id;
        m->pos[s] = (uint32_t)i;
    }
    return 0;
}

/* Map a string index of the message; -1 if out of range. */
static int64_t dstr(const struct decoder *d, int64_t i)
{
    if (i < 0 || (uint64_t)i >= d->strs.n)
        return -1;
    return d->smap[i];
}

#define DSTR(d, var, idx, what)                                                                    \
    int64_t var = dstr((d), (idx));                                                                \
    if (var < 0)                                                                                   \
        return bad((d)->err, (d)->errlen, "%s: string index %lld out of range", (what),            \
                   (long long)(idx));

/* ---- first pass: the Profile message ---- */

static int scan_profile(struct decoder *d, const uint8_t *buf, size_t len)
{
    struct wire w = {buf, buf + len};
    uint32_t f, wt;
    bool ok = true;
    while (rd_tag(&w, &f, &wt, &ok)) {
        struct span s;
        uint64_t v = 0;
        bool good;
        struct spans *list = NULL;
        int64_t *scalar = NULL;
        switch (f) {
        case 1:
            list = &d->types;
            break;
        case 2:
            list = &d->samples;
            break;
        case 3:
            list = &d->maps;
            break;
        case 4:
            list = &d->locs;
            break;
        case 5:
            list = &d->funcs;
            break;
        case 6:
            list = &d->strs;
            break;
        case 7:
            scalar = &d->drop_frames;
            break;
        case 8:
            scalar = &d->keep_frames;
            break;
        case 9:
            scalar = &d->time_nanos;
            break;
        case 10:
            scalar = &d->duration_nanos;
            break;
        case 11:
            list = &d->period_type;
            break;
        case 12:
            scalar = &d->period;
            break;
        case 14:
            scalar = &d->default_type;
            break;
        }
        if (list) {
            if (wt != WT_LEN || !rd_len(&w, &s))
                return MALFORMED(d, "profile field");
            if (!spans_add(list, s))
                return nomem();
            continue;
        }
        if (scalar) {
            good = rd_scalar(&w, wt, &v);
            *scalar = (int64_t)v;
        } else if (f == 13) {
            good = rd_repeated(&w, wt, u64s_add, &d->comments);
            if (d->comments.nomem)
                return nomem();
        } else {
            good = skip_field(&w, wt);
        }
        if (!good)
            return MALFORMED(d, "profile field");
    }
    return ok ? 0 : MALFORMED(d, "profile field tag");
}

/* ---- second pass ---- */

static int decode_strings(struct decoder *d)
{
    if (d->strs.n == 0)
        return bad(d->err, d->errlen, "string table is empty");
    if (d->strs.v[0].n != 0 && d->strs.v[0].p[0] != '\0')
        return bad(d->err, d->errlen, "string_table[0] is not empty");
    if (d->strs.n > PFR_MAX_ITEMS)
        return bad(d->err, d->errlen, "too many strings");
    d->smap = malloc(d->strs.n * sizeof(*d->smap));
    if (!d->smap)
        return nomem();
    for (size_t i = 0; i < d->strs.n; i++) {
        const struct span *s = &d->strs.v[i];
        /* The model holds C strings: a NUL ends the string, as with protobuf-c. */
        const uint8_t *nul = s->n ? memchr(s->p, 0, s->n) : NULL;
        size_t len = nul ? (size_t)(nul - s->p) : s->n;
        int64_t r = pfr_intern_hashed(d->p, (const char *)s->p, len, pfr_hash_bytes(s->p, len));
        if (r < 0)
            return (int)r;
        d->smap[i] = (uint32_t)r;
    }
    return 0;
}

/* ValueType occurrences merge (a later field wins), as for any singular sub-message. */
static int read_value_type(struct decoder *d, const struct span *s, int64_t *type, int64_t *unit)
{
    struct wire w = {s->p, s->p + s->n};
    uint32_t f, wt;
    bool ok = true;
    while (rd_tag(&w, &f, &wt, &ok)) {
        uint64_t v;
        if ((f == 1 || f == 2) ? !rd_scalar(&w, wt, &v) : !skip_field(&w, wt))
            return MALFORMED(d, "value type");
        if (f == 1)
            *type = (int64_t)v;
        else if (f == 2)
            *unit = (int64_t)v;
    }
    return ok ? 0 : MALFORMED(d, "value type");
}

static int decode_header(struct decoder *d)
{
    pfr_profile *p = d->p;
    if (PFR_RESERVE(p->types, p->cap_types, d->types.n))
        return pfr_fail(p, -ENOMEM);
    for (size_t i = 0; i < d->types.n; i++) {
        int64_t ti = 0, ui = 0;
        int rc = read_value_type(d, &d->types.v[i], &ti, &ui);
        if (rc)
            return rc;
        DSTR(d, t, ti, "sample_type");
        DSTR(d, u, ui, "sample_type unit");
        p->types[p->ntypes].type = (uint32_t)t;
        p->types[p->ntypes].unit = (uint32_t)u;
        p->ntypes++;
    }
    int64_t pti = 0, pui = 0;
    for (size_t i = 0; i < d->period_type.n; i++) {
        int rc = read_value_type(d, &d->period_type.v[i], &pti, &pui);
        if (rc)
            return rc;
    }
    DSTR(d, pt, pti, "period_type");
    DSTR(d, pu, pui, "period_type unit");
    p->period_type.type = (uint32_t)pt;
    p->period_type.unit = (uint32_t)pu;
    p->period = d->period;
    p->time_nanos = d->time_nanos;
    p->duration_nanos = d->duration_nanos;
    /* Not kept in the model, but a reference out of range still means a corrupt profile. */
    DSTR(d, df, d->drop_frames, "drop_frames");
    DSTR(d, kf, d->keep_frames, "keep_frames");
    DSTR(d, ds, d->default_type, "default_sample_type");
    (void)df, (void)kf, (void)ds;
    for (size_t i = 0; i < d->comments.n; i++) {
        DSTR(d, c, (int64_t)d->comments.v[i], "comment");
        (void)c;
    }
    return 0;
}

/* The id (field 1) of a Mapping, Function or Location message. */
static int read_id(struct decoder *d, const struct span *s, uint64_t *id, const char *what)
{
    struct wire w = {s->p, s->p + s->n};
    uint32_t f, wt;
    bool ok = true;
    *id = 0;
    while (rd_tag(&w, &f, &wt, &ok))
        if (f == 1 ? !rd_scalar(&w, wt, id) : !skip_field(&w, wt))
            return MALFORMED(d, what);
    return ok ? 0 : MALFORMED(d, what);
}

static int index_ids(struct decoder *d, const struct spans *list, struct idmap *m, uint32_t **index,
                     const char *what)
{
    uint64_t *ids = malloc((list->n ? list->n : 1) * sizeof(*ids));
    *index = malloc((list->n ? list->n : 1) * sizeof(**index));
    if (!ids || !*index) {
        free(ids);
        return nomem();
    }
    int rc = 0;
    for (size_t i = 0; i < list->n && !rc; i++)
        rc = read_id(d, &list->v[i], &ids[i], what);
    if (!rc)
        rc = idmap_build(d, m, ids, list->n, what);
    free(ids);
    return rc;
}

static int decode_mappings(struct decoder *d)
{
    int rc = index_ids(d, &d->maps, &d->map_ids, &d->map_index, "mapping");
    for (size_t i = 0; i < d->maps.n && !rc; i++) {
        struct wire w = {d->maps.v[i].p, d->maps.v[i].p + d->maps.v[i].n};
        uint64_t v[7] = {0}; /* by field number */
        uint32_t f, wt;
        bool ok = true;
        while (rd_tag(&w, &f, &wt, &ok)) {
            uint64_t x;
            /* 7-10 are bools, which protobuf-c takes in any wire type; they are not kept */
            if (f >= 1 && f <= 6 ? !rd_scalar(&w, wt, &x) : !skip_field(&w, wt))
                return MALFORMED(d, "mapping");
            if (f >= 1 && f <= 6)
                v[f] = x;
        }
        if (!ok)
            return MALFORMED(d, "mapping");
        DSTR(d, file, (int64_t)v[5], "mapping filename");
        DSTR(d, bid, (int64_t)v[6], "mapping build_id");
        struct pfr_mapping_rec r = {.start = v[2],
                                    .limit = v[3],
                                    .offset = v[4],
                                    .file = (uint32_t)file,
                                    .build_id = (uint32_t)bid};
        r.hash = pfr_mapping_hash(d->p, &r);
        int64_t idx = pfr_mapping_put(d->p, &r);
        if (idx < 0)
            return (int)idx;
        d->map_index[i] = (uint32_t)idx;
    }
    return rc;
}

static int decode_functions(struct decoder *d)
{
    int rc = index_ids(d, &d->funcs, &d->fn_ids, &d->fn_index, "function");
    for (size_t i = 0; i < d->funcs.n && !rc; i++) {
        struct wire w = {d->funcs.v[i].p, d->funcs.v[i].p + d->funcs.v[i].n};
        uint64_t v[6] = {0};
        uint32_t f, wt;
        bool ok = true;
        while (rd_tag(&w, &f, &wt, &ok)) {
            uint64_t x;
            if (f >= 1 && f <= 5 ? !rd_scalar(&w, wt, &x) : !skip_field(&w, wt))
                return MALFORMED(d, "function");
            if (f >= 1 && f <= 5)
                v[f] = x;
        }
        if (!ok)
            return MALFORMED(d, "function");
        DSTR(d, name, (int64_t)v[2], "function name");
        DSTR(d, sys, (int64_t)v[3], "function system_name");
        DSTR(d, file, (int64_t)v[4], "function filename");
        struct pfr_function_rec r = {.start_line = (int64_t)v[5],
                                     .name = (uint32_t)name,
                                     .system_name = (uint32_t)sys,
                                     .file = (uint32_t)file};
        r.hash = pfr_function_hash(d->p, &r);
        int64_t idx = pfr_function_put(d->p, &r);
        if (idx < 0)
            return (int)idx;
        d->fn_index[i] = (uint32_t)idx;
    }
    return rc;
}

/* One Line message into *out. */
static int read_line(struct decoder *d, const struct span *s, uint64_t loc_id, pfr_line *out,
                     int64_t *no_function)
{
    struct wire w = {s->p, s->p + s->n};
    uint64_t v[3] = {0};
    uint32_t f, wt;
    bool ok = true;
    while (rd_tag(&w, &f, &wt, &ok)) {
        uint64_t x;
        if (f >= 1 && f <= 2 ? !rd_scalar(&w, wt, &x) : !skip_field(&w, wt))
            return MALFORMED(d, "line");
        if (f >= 1 && f <= 2)
            v[f] = x;
    }
    if (!ok)
        return MALFORMED(d, "line");
    out->line = (int64_t)v[2];
    if (v[1] == 0) { /* a line without a function gets an empty one */
        if (*no_function < 0)
            *no_function = pfr_profile_add_function(d->p, "", "", "", 0);
        if (*no_function < 0)
            return (int)*no_function;
        out->function = (uint32_t)*no_function;
        return 0;
    }
    int64_t pos = idmap_get(&d->fn_ids, v[1]);
    if (pos < 0)
        return bad(d->err, d->errlen, "location %llu: unknown function id %llu",
                   (unsigned long long)loc_id, (unsigned long long)v[1]);
    out->function = d->fn_index[pos];
    return 0;
}

static int decode_location(struct decoder *d, size_t i, int64_t *no_function)
{
    const struct span *s = &d->locs.v[i];
    struct wire w = {s->p, s->p + s->n};
    uint64_t id = 0, mapping_id = 0, address = 0;
    size_t nlines = 0;
    uint32_t f, wt;
    bool ok = true;
    /* First the scalars: a Line may come before the id it reports. */
    while (rd_tag(&w, &f, &wt, &ok)) {
        bool good;
        struct span ls = {0};
        switch (f) {
        case 1:
            good = rd_scalar(&w, wt, &id);
            break;
        case 2:
            good = rd_scalar(&w, wt, &mapping_id);
            break;
        case 3:
            good = rd_scalar(&w, wt, &address);
            break;
        case 4:
            good = wt == WT_LEN && rd_len(&w, &ls);
            nlines++;
            break;
        case 5: /* is_folded, a bool: any wire type (as protobuf-c), not kept */
            good = skip_field(&w, wt);
            break;
        default:
            good = skip_field(&w, wt);
        }
        if (!good)
            return MALFORMED(d, "location");
    }
    if (!ok)
        return MALFORMED(d, "location");
    uint32_t m1 = 0;
    if (mapping_id) {
        int64_t pos = idmap_get(&d->map_ids, mapping_id);
        if (pos < 0)
            return bad(d->err, d->errlen, "location %llu: unknown mapping id %llu",
                       (unsigned long long)id, (unsigned long long)mapping_id);
        m1 = d->map_index[pos] + 1;
    }
    if (nlines > PFR_MAX_ITEMS || PFR_RESERVE(d->lines, d->cap_lines, nlines))
        return nomem();
    w = (struct wire){s->p, s->p + s->n};
    size_t n = 0;
    while (rd_tag(&w, &f, &wt, &ok)) {
        struct span ls = {0};
        if (f != 4) {
            skip_field(&w, wt); /* checked above */
            continue;
        }
        rd_len(&w, &ls);
        int rc = read_line(d, &ls, id, &d->lines[n++], no_function);
        if (rc)
            return rc;
    }
    uint64_t h = pfr_location_hash(d->p, m1, address, d->lines, n);
    int64_t idx = pfr_location_put(d->p, m1, address, d->lines, (uint32_t)n, h);
    if (idx < 0)
        return (int)idx;
    d->loc_index[i] = (uint32_t)idx;
    return 0;
}

static int decode_locations(struct decoder *d)
{
    int rc = index_ids(d, &d->locs, &d->loc_ids, &d->loc_index, "location");
    int64_t no_function = -1;
    for (size_t i = 0; i < d->locs.n && !rc; i++)
        rc = decode_location(d, i, &no_function);
    return rc;
}

static int read_label(struct decoder *d, const struct span *s, struct pfr_label_rec *out)
{
    struct wire w = {s->p, s->p + s->n};
    uint64_t v[5] = {0};
    uint32_t f, wt;
    bool ok = true;
    while (rd_tag(&w, &f, &wt, &ok)) {
        uint64_t x;
        if (f >= 1 && f <= 4 ? !rd_scalar(&w, wt, &x) : !skip_field(&w, wt))
            return MALFORMED(d, "label");
        if (f >= 1 && f <= 4)
            v[f] = x;
    }
    if (!ok)
        return MALFORMED(d, "label");
    DSTR(d, key, (int64_t)v[1], "label key");
    DSTR(d, str, (int64_t)v[2], "label str");
    DSTR(d, unit, (int64_t)v[4], "label num_unit");
    /* A non-empty str makes a string label; an empty one (index 0, or a later "" entry) reads
     * as the number it also encodes as. */
    if (str != 0)
        *out = (struct pfr_label_rec){.key = (uint32_t)key, .str = (uint32_t)str};
    else
        *out = (struct pfr_label_rec){.num = (int64_t)v[3],
                                      .key = (uint32_t)key,
                                      .str = PFR_LABEL_NUM,
                                      .unit = (uint32_t)unit};
    return 0;
}

static int decode_sample(struct decoder *d, size_t i, struct pfr_label_rec *labels)
{
    const struct span *s = &d->samples.v[i];
    struct wire w = {s->p, s->p + s->n};
    uint32_t f, wt;
    bool ok = true;
    size_t nlab = 0;
    d->ids.n = d->vals.n = 0;
    while (rd_tag(&w, &f, &wt, &ok)) {
        bool good;
        struct span ls = {0};
        if (f == 1) {
            good = rd_repeated(&w, wt, u64s_add, &d->ids);
        } else if (f == 2) {
            good = rd_repeated(&w, wt, u64s_add, &d->vals);
        } else if (f == 3) {
            good = wt == WT_LEN && rd_len(&w, &ls);
            if (good && nlab == MAX_LABELS_PER_SAMPLE)
                return bad(d->err, d->errlen, "sample %zu has more than %d labels", i,
                           MAX_LABELS_PER_SAMPLE);
            if (good) {
                int rc = read_label(d, &ls, &labels[nlab++]);
                if (rc)
                    return rc;
            }
        } else {
            good = skip_field(&w, wt);
        }
        if (d->ids.nomem || d->vals.nomem)
            return nomem();
        if (!good)
            return MALFORMED(d, "sample");
    }
    if (!ok)
        return MALFORMED(d, "sample");
    pfr_profile *p = d->p;
    if (d->vals.n != p->ntypes)
        return bad(d->err, d->errlen, "sample %zu has %zu values for %zu sample types", i,
                   d->vals.n, p->ntypes);
    if (d->ids.n > PFR_MAX_ITEMS || PFR_RESERVE(d->stack, d->cap_stack, d->ids.n))
        return nomem();
    for (size_t j = 0; j < d->ids.n; j++) {
        int64_t pos = idmap_get(&d->loc_ids, d->ids.v[j]);
        if (pos < 0)
            return bad(d->err, d->errlen, "sample %zu: unknown location id %llu", i,
                       (unsigned long long)d->ids.v[j]);
        d->stack[j] = d->loc_index[pos];
    }
    uint32_t nl = (uint32_t)d->ids.n;
    int64_t r =
        pfr_sample_put(p, d->stack, nl, pfr_stack_hash(p, d->stack, nl), (const int64_t *)d->vals.v,
                       labels, (uint32_t)nlab, pfr_labels_hash(p, labels, nlab));
    return r < 0 ? (int)r : 0;
}

static int decode_samples(struct decoder *d)
{
    struct pfr_label_rec *labels = malloc(MAX_LABELS_PER_SAMPLE * sizeof(*labels));
    if (!labels)
        return nomem();
    int rc = 0;
    for (size_t i = 0; i < d->samples.n && !rc; i++)
        rc = decode_sample(d, i, labels);
    free(labels);
    return rc;
}

static void decoder_free(struct decoder *d)
{
    free(d->strs.v);
    free(d->types.v);
    free(d->samples.v);
    free(d->maps.v);
    free(d->locs.v);
    free(d->funcs.v);
    free(d->period_type.v);
    free(d->comments.v);
    free(d->smap);
    idmap_free(&d->map_ids);
    idmap_free(&d->fn_ids);
    idmap_free(&d->loc_ids);
    free(d->map_index);
    free(d->fn_index);
    free(d->loc_index);
    free(d->ids.v);
    free(d->vals.v);
    free(d->lines);
    free(d->stack);
}

static int decode(struct decoder *d, const uint8_t *buf, size_t len)
{
    int rc = scan_profile(d, buf, len);
    if (rc)
        return rc;
    /* Size the tables once; stacks are estimated from the samples' bytes. */
    size_t sample_bytes = 0;
    for (size_t i = 0; i < d->samples.n; i++)
        sample_bytes += d->samples.v[i].n;
    struct pfr_sizes z = {.strs = d->strs.n,
                          .maps = d->maps.n,
                          .funcs = d->funcs.n + 1,
                          .locs = d->locs.n,
                          .lines = d->locs.n,
                          .samples = d->samples.n,
                          .stack = sample_bytes / 2,
                          .types = d->types.n};
    if ((rc = pfr_profile_reserve(d->p, &z)) != 0 || (rc = decode_strings(d)) != 0 ||
        (rc = decode_header(d)) != 0 || (rc = decode_mappings(d)) != 0 ||
        (rc = decode_functions(d)) != 0 || (rc = decode_locations(d)) != 0 ||
        (rc = decode_samples(d)) != 0)
        return rc;
    return d->p->err;
}

int pfr_profile_decode(const uint8_t *buf, size_t len, size_t max_bytes, pfr_profile **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!buf && len)
        return -EINVAL;
    if (max_bytes == 0)
        max_bytes = DEFAULT_MAX_BYTES;
    uint8_t *plain = NULL;
    if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
        pfr_buf z = {0};
        int rc = pfr_gunzip(buf, len, max_bytes, &z, err, errlen);
        if (rc) {
            pfr_buf_free(&z);
            return rc;
        }
        buf = plain = pfr_buf_steal(&z, &len);
    } else if (len > max_bytes) {
        return bad(err, errlen, "profile of %zu bytes exceeds the %zu byte limit", len, max_bytes);
    }
    struct decoder d = {.err = err, .errlen = errlen};
    int rc = -ENOMEM;
    d.p = pfr_profile_new();
    if (d.p)
        rc = decode(&d, buf ? buf : (const uint8_t *)"", len);
    decoder_free(&d);
    free(plain);
    if (rc) {
        pfr_profile_free(d.p);
        if (rc == -ENOMEM && err && errlen && !err[0])
            snprintf(err, errlen, "out of memory");
        return rc;
    }
    *out = d.p;
    return 0;
}
