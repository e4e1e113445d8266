/* pfr_jfr_parse: the chunks of a recording, their constant pools and records (jfr_parse.h; the
 * format is described in jfr_internal.h). */
#include "jfr_parse.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "jfr_internal.h"
#include "pfr_vec.h"

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}
/* ---- constant pools ---- */

static int store_key(jp *P, pfr_map *m, uint64_t key, size_t idx, bool *dup)
{
    uint64_t *slot;
    int rc = pfr_map_intern(m, key, idx, &slot);
    if (rc < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for a constant pool");
    *dup = rc == 1; /* the first of two entries with one key wins */
    return 0;
}

static int read_stack(jp *P, jfr_chunk *c, rd *r, uint64_t key)
{
    const class_def *cd = &c->classes[c->k_stack];
    size_t frame0 = c->nframes;
    bool trunc = false;
    for (uint32_t i = 0; i < cd->nlive; i++) {
        const field_def *f = &c->fields[c->live[cd->live0 + i]];
        int rc;
        if ((int)i == c->f_trunc) {
            int64_t t;
            rc = pfr_jfr_read_int(P, c, r, f, &t);
            trunc = t != 0;
        } else if ((int)i == c->f_frames && c->classes[f->cls].has_data) {
            uint64_t n;
            rc = pfr_jfr_rd_count(P, r, 1, "stack frames", &n);
            for (uint64_t k = 0; rc == 0 && k < n; k++) {
                int want[2] = {c->f_fmethod, c->f_fline};
                int64_t vals[2] = {0, 0};
                uint32_t found = 0;
                rc = pfr_jfr_read_struct(P, c, r, (uint32_t)c->k_frame, want, 2, vals, &found, 1);
                if (rc < 0)
                    break;
                if (c->nframes >= P->lim->max_frames)
                    return pfr_jfr_fail(P, -E2BIG, "more than %zu stack frames in a chunk",
                                        P->lim->max_frames);
                if (PFR_VEC_RESERVE(c->frames, c->framecap, c->nframes + 1) < 0)
                    return pfr_jfr_fail(P, -ENOMEM, "out of memory for stack frames");
                c->frames[c->nframes++] = (jfr_frame){
                    .method = (uint64_t)vals[0],
                    .line = (int32_t)vals[1],
                    .has_method = (found & 1) != 0,
                };
            }
        } else {
            rc = pfr_jfr_skip_field(P, c, r, f, 1);
        }
        if (rc < 0)
            return rc;
    }
    bool dup = false;
    int rc = store_key(P, &c->m_stack, key, c->nsents, &dup);
    if (rc < 0)
        return rc;
    if (dup) {
        c->nframes = frame0;
        return 0;
    }
    if (PFR_VEC_RESERVE(c->sents, c->sentcap, c->nsents + 1) < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for stack traces");
    c->sents[c->nsents++] = (stack_ent){(uint32_t)frame0, (uint32_t)(c->nframes - frame0), trunc};
    return 0;
}

static int read_method(jp *P, jfr_chunk *c, rd *r, uint64_t key)
{
    int want[2] = {c->f_mtype, c->f_mname};
    int64_t vals[2] = {0, 0};
    uint32_t found = 0;
    bool dup = false;
    int rc = pfr_jfr_read_struct(P, c, r, (uint32_t)c->k_method, want, 2, vals, &found, 0);
    if (rc < 0 || (rc = store_key(P, &c->m_meth, key, c->nments, &dup)) < 0 || dup)
        return rc;
    if (PFR_VEC_RESERVE(c->ments, c->mentcap, c->nments + 1) < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for methods");
    c->ments[c->nments++] =
        (method_ent){(uint64_t)vals[0], (uint64_t)vals[1], (found & 1) != 0, (found & 2) != 0};
    return 0;
}

static int read_class(jp *P, jfr_chunk *c, rd *r, uint64_t key)
{
    int want[1] = {c->f_cname};
    int64_t val = 0;
    uint32_t found = 0;
    bool dup = false;
    int rc = pfr_jfr_read_struct(P, c, r, (uint32_t)c->k_class, want, 1, &val, &found, 0);
    if (rc < 0 || (rc = store_key(P, &c->m_cls, key, c->ncents, &dup)) < 0 || dup)
        return rc;
    if (PFR_VEC_RESERVE(c->cents, c->centcap, c->ncents + 1) < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for classes");
    c->cents[c->ncents++] = (class_ent){(uint64_t)val, found != 0};
    return 0;
}

static int keep_sref(jp *P, pfr_map *m, sref **arr, size_t *n, size_t *cap, uint64_t key, sref s)
{
    bool dup = false;
    int rc = store_key(P, m, key, *n, &dup);
    if (rc < 0 || dup)
        return rc;
    if (PFR_VEC_RESERVE(*arr, *cap, *n + 1) < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for symbols");
    (*arr)[(*n)++] = s;
    return 0;
}

static int read_symbol(jp *P, jfr_chunk *c, rd *r, uint64_t key)
{
    const class_def *cd = &c->classes[c->k_symbol];
    sref s = {S_NONE, 0};
    for (uint32_t i = 0; i < cd->nlive; i++) {
        const field_def *f = &c->fields[c->live[cd->live0 + i]];
        int rc;
        if ((int)i == c->f_sstring && f->cpool) {
            rc = pfr_jfr_rd_varint(P, r, &s.v);
            s.kind = S_POOLREF;
        } else if ((int)i == c->f_sstring) {
            rc = pfr_jfr_read_string(P, c, r, &s);
        } else {
            rc = pfr_jfr_skip_field(P, c, r, f, 1);
        }
        if (rc < 0)
            return rc;
    }
    return keep_sref(P, &c->m_sym, &c->syms, &c->nsyms, &c->symcap, key, s);
}

static int read_pool_value(jp *P, jfr_chunk *c, rd *r, uint32_t cls, uint64_t key)
{
    int64_t k = cls;
    if (k == c->k_stack && c->classes[cls].prim == P_STRUCT)
        return read_stack(P, c, r, key);
    if (k == c->k_method && c->classes[cls].prim == P_STRUCT)
        return read_method(P, c, r, key);
    if (k == c->k_class && c->classes[cls].prim == P_STRUCT)
        return read_class(P, c, r, key);
    if (k == c->k_symbol && c->classes[cls].prim == P_STRUCT)
        return read_symbol(P, c, r, key);
    if (k == c->k_string) {
        sref s;
        int rc = pfr_jfr_read_string(P, c, r, &s);
        if (rc < 0)
            return rc;
        if (s.kind == S_POOLREF) /* a string pool entry that points into itself: none */
            s.kind = S_NONE;
        return keep_sref(P, &c->m_str, &c->strs, &c->nstrs, &c->strcap, key, s);
    }
    return pfr_jfr_skip_value(P, c, r, cls, 0);
}

static int parse_pool(jp *P, jfr_chunk *c, rd *r)
{
    uint64_t type_id, count, key;
    int rc = pfr_jfr_rd_varint(P, r, &type_id);
    if (rc < 0)
        return rc;
    uint64_t *ci = pfr_map_get(&c->class_by_id, type_id);
    if (!ci)
        return pfr_jfr_fail(P, -EINVAL, "constant pool of undeclared type %llu",
                            (unsigned long long)type_id);
    uint32_t cls = (uint32_t)*ci;
    if ((rc = pfr_jfr_rd_count(P, r, 1, "constant pool entries", &count)) < 0)
        return rc;
    if (count > P->lim->max_pool_entries - c->pool_n[cls])
        return pfr_jfr_fail(P, -E2BIG, "constant pool %s: more than %zu entries",
                            c->arena + c->classes[cls].name, P->lim->max_pool_entries);
    c->pool_n[cls] += (size_t)count;
    for (uint64_t i = 0; i < count && rc == 0; i++) {
        rc = pfr_jfr_rd_varint(P, r, &key);
        if (rc == 0)
            rc = read_pool_value(P, c, r, cls, key);
    }
    return rc;
}

/* The checkpoints, from the header's (the last) back along their deltas to the first. */
static int parse_pools(jp *P, jfr_chunk *c)
{
    uint64_t off = c->cp_off;
    for (;;) {
        if (off < JFR_HEADER_SIZE || off >= c->size)
            return pfr_jfr_fail(P, -EINVAL, "checkpoint offset %llu outside the chunk of %zu bytes",
                                (unsigned long long)off, c->size);
        rd r = {c->base + off, c->base + c->size};
        uint64_t size, type, v, delta, npools;
        uint8_t flags = 0;
        int rc = pfr_jfr_rd_varint(P, &r, &size);
        if (rc < 0 || (rc = pfr_jfr_rd_varint(P, &r, &type)) < 0)
            return rc;
        if (type != 1)
            return pfr_jfr_fail(P, -EINVAL,
                                "checkpoint offset %llu points at a record of type %llu",
                                (unsigned long long)off, (unsigned long long)type);
        if (size < (uint64_t)(r.p - (c->base + off)) || size > c->size - off)
            return pfr_jfr_fail(P, -EINVAL, "checkpoint record of size %llu outside the chunk",
                                (unsigned long long)size);
        r.end = c->base + off + size;
        for (int i = 0; i < 2 && rc == 0; i++) /* start, duration */
            rc = pfr_jfr_rd_varint(P, &r, &v);
        if (rc < 0 || (rc = pfr_jfr_rd_varint(P, &r, &delta)) < 0 ||
            (rc = pfr_jfr_rd_u8(P, &r, &flags)) < 0 ||
            (rc = pfr_jfr_rd_count(P, &r, 2, "constant pools", &npools)) < 0)
            return rc;
        for (uint64_t i = 0; i < npools && rc == 0; i++)
            rc = parse_pool(P, c, &r);
        if (rc < 0)
            return rc;
        if (r.p != r.end)
            return pfr_jfr_fail(P, -EINVAL,
                                "checkpoint at %llu: its size does not match its content",
                                (unsigned long long)off);
        int64_t d = (int64_t)delta;
        if (d == 0)
            return 0;
        /* each checkpoint points back at an earlier one: the chain ends */
        if (d > 0 || (uint64_t)(-(d + 1)) >= off)
            return pfr_jfr_fail(P, -EINVAL, "checkpoint at %llu: delta %lld does not point back",
                                (unsigned long long)off, (long long)d);
        off = (uint64_t)((int64_t)off + d);
    }
}
/* ---- records ---- */

static int visit_records(jp *P, jfr_chunk *c, const jfr_visitor *v, jfr_parse_stats *st)
{
    size_t pos = JFR_HEADER_SIZE;
    while (pos < c->size) {
        rd r = {c->base + pos, c->base + c->size};
        uint64_t size, type;
        int rc = pfr_jfr_rd_varint(P, &r, &size);
        if (rc < 0 || (rc = pfr_jfr_rd_varint(P, &r, &type)) < 0)
            return rc;
        size_t head = (size_t)(r.p - (c->base + pos));
        if (size < head || size > c->size - pos)
            return pfr_jfr_fail(P, -EINVAL, "record at %zu: size %llu outside the chunk", pos,
                                (unsigned long long)size);
        if (P->records >= P->lim->max_events)
            return pfr_jfr_fail(P, -E2BIG, "more than %zu records", P->lim->max_events);
        P->records++;
        jfr_record rec = {
            .type_id = type,
            .body = r.p,
            .len = (size_t)size - head,
        };
        uint64_t *ci;
        if (type == 0) {
            rec.kind = JFR_REC_METADATA;
        } else if (type == 1) {
            rec.kind = JFR_REC_CHECKPOINT;
        } else if ((ci = pfr_map_get(&c->class_by_id, type)) != NULL) {
            rec.kind = JFR_REC_EVENT;
            rec.cls = (uint32_t)*ci;
            st->events++;
        } else {
            rec.kind = JFR_REC_UNKNOWN;
        }
        st->records++;
        if (v->record && (rc = v->record(v->ctx, c, &rec)) < 0)
            return rc;
        pos += (size_t)size;
    }
    return 0;
}

static void chunk_free(jfr_chunk *c)
{
    free(c->arena);
    free(c->classes);
    free(c->fields);
    free(c->live);
    free(c->pool_n);
    pfr_map_free(&c->class_by_id);
    pfr_map_free(&c->m_sym);
    pfr_map_free(&c->m_str);
    pfr_map_free(&c->m_cls);
    pfr_map_free(&c->m_meth);
    pfr_map_free(&c->m_stack);
    free(c->syms);
    free(c->strs);
    free(c->cents);
    free(c->ments);
    free(c->sents);
    free(c->frames);
    memset(c, 0, sizeof(*c));
}

static int parse_chunk(jp *P, jfr_chunk *c, const jfr_visitor *v, jfr_parse_stats *st)
{
    int rc = pfr_jfr_arena_reserve(P, c, 1); /* offset 0: "" */
    if (rc < 0)
        return rc;
    pfr_jfr_arena_putc(c, '\0');
    if ((rc = pfr_jfr_parse_metadata(P, c)) < 0 || (rc = parse_pools(P, c)) < 0)
        return rc;
    if (v->chunk_begin && (rc = v->chunk_begin(v->ctx, c)) < 0)
        return rc;
    if ((rc = visit_records(P, c, v, st)) < 0)
        return rc;
    if (v->chunk_end && (rc = v->chunk_end(v->ctx, c)) < 0)
        return rc;
    st->chunks++;
    return 0;
}

static const uint8_t MAGIC[4] = {'F', 'L', 'R', 0};

/* 1: a whole chunk at buf (its header in c); 0: one cut short or still being written; <0. */
static int read_header(jp *P, const uint8_t *buf, size_t left, size_t at, jfr_chunk *c)
{
    size_t m = left < 4 ? left : 4;
    if (memcmp(buf, MAGIC, m) != 0)
        return pfr_jfr_fail(P, -EINVAL, "no JFR chunk at offset %zu", at);
    if (left < JFR_HEADER_SIZE)
        return 0;
    unsigned major = (unsigned)buf[4] << 8 | buf[5];
    if (major != 2)
        return pfr_jfr_fail(P, -EINVAL, "JFR version %u.%u (2.x is read)", major,
                            (unsigned)buf[6] << 8 | buf[7]);
    uint64_t size = be64(buf + 8);
    if (size < JFR_HEADER_SIZE)
        return pfr_jfr_fail(P, -EINVAL, "chunk at %zu: size %llu", at, (unsigned long long)size);
    if (buf[64] != 0 || size > left)
        return 0;
    c->base = buf;
    c->size = (size_t)size;
    c->cp_off = be64(buf + 16);
    c->md_off = be64(buf + 24);
    c->start_ns = (int64_t)be64(buf + 32);
    c->duration_ns = (int64_t)be64(buf + 40);
    c->start_ticks = (int64_t)be64(buf + 48);
    c->tps = (int64_t)be64(buf + 56);
    if (c->tps <= 0)
        return pfr_jfr_fail(P, -EINVAL, "chunk at %zu: %lld ticks per second", at,
                            (long long)c->tps);
    return 1;
}

/* Heap bytes a chunk's parsed state holds (what keeping it as the previous one costs). */
static size_t chunk_bytes(const jfr_chunk *c)
{
    return c->acap + c->ccap * sizeof(*c->classes) + c->fcap * sizeof(*c->fields) +
           c->lcap * sizeof(*c->live) + c->nclasses * sizeof(*c->pool_n) +
           pfr_map_bytes(&c->class_by_id) + pfr_map_bytes(&c->m_sym) + pfr_map_bytes(&c->m_str) +
           pfr_map_bytes(&c->m_cls) + pfr_map_bytes(&c->m_meth) + pfr_map_bytes(&c->m_stack) +
           (c->symcap + c->strcap) * sizeof(sref) + c->centcap * sizeof(*c->cents) +
           c->mentcap * sizeof(*c->ments) + c->sentcap * sizeof(*c->sents) +
           c->framecap * sizeof(*c->frames);
}

/* The chunks kept for lookups (newest first through ->prev), in slots that do not move. */
typedef struct carry {
    jfr_chunk slot[JFR_CARRY_CHUNKS];
    bool used[JFR_CARRY_CHUNKS];
    jfr_chunk *newest;
    size_t bytes[JFR_CARRY_CHUNKS], total;
} carry;

static void carry_drop_oldest(carry *k)
{
    jfr_chunk **pp = &k->newest;
    while (*pp && (*pp)->prev)
        pp = &(*pp)->prev;
    if (!*pp)
        return;
    size_t i = (size_t)(*pp - k->slot);
    k->total -= k->bytes[i];
    chunk_free(*pp);
    k->used[i] = false;
    *pp = NULL;
}

/* Keep c (its state moved into the carry) if it fits max bytes with room made by dropping the
 * oldest; false (c left to the caller) when c alone is larger. */
static bool carry_keep(carry *k, jfr_chunk *c, size_t max)
{
    size_t b = chunk_bytes(c);
    if (b > max)
        return false;
    size_t n = 0;
    for (size_t i = 0; i < JFR_CARRY_CHUNKS; i++)
        n += k->used[i];
    while (k->newest && (n == JFR_CARRY_CHUNKS || k->total + b > max)) {
        carry_drop_oldest(k);
        n--;
    }
    size_t i = 0;
    while (k->used[i])
        i++;
    k->slot[i] = *c;
    k->slot[i].prev = k->newest;
    k->used[i] = true;
    k->bytes[i] = b;
    k->total += b;
    k->newest = &k->slot[i];
    return true;
}

int pfr_jfr_parse(const uint8_t *buf, size_t len, const jfr_limits *lim, const jfr_visitor *v,
                  jfr_parse_stats *st, char *err, size_t errlen)
{
    jp P = {.lim = lim, .err = err, .errlen = errlen};
    memset(st, 0, sizeof(*st));
    if (errlen > 0)
        err[0] = '\0';
    if (len == 0)
        return pfr_jfr_fail(&P, -EINVAL, "empty recording");
    if (len > lim->max_bytes)
        return pfr_jfr_fail(&P, -E2BIG, "recording of %zu bytes, more than %zu", len,
                            lim->max_bytes);
    /* the chunks before, kept for the stacks their pools hold and a later chunk's events name */
    carry *k = NULL;
    if (lim->max_carry_bytes > 0 && !(k = calloc(1, sizeof(*k))))
        return pfr_jfr_fail(&P, -ENOMEM, "out of memory");
    int rc = 0;
    size_t pos = 0;
    while (pos < len && rc >= 0) {
        jfr_chunk c;
        memset(&c, 0, sizeof(c));
        rc = read_header(&P, buf + pos, len - pos, pos, &c);
        if (rc == 0) {
            st->truncated = true;
            break;
        }
        if (rc < 0)
            break;
        c.prev = k ? k->newest : NULL;
        rc = parse_chunk(&P, &c, v, st);
        pos += c.size;
        if (rc >= 0 && k) {
            if (carry_keep(k, &c, lim->max_carry_bytes))
                continue;
            st->uncarried++;
        }
        chunk_free(&c);
    }
    while (k && k->newest)
        carry_drop_oldest(k);
    free(k);
    if (rc < 0)
        return rc;
    if (st->chunks == 0)
        return pfr_jfr_fail(&P, -EINVAL, "no whole chunk: the recording was cut short");
    return 0;
}

/* ---- accessors ---- */

int64_t pfr_jfr_chunk_start_ns(const jfr_chunk *c)
{
    return c->start_ns;
}

int64_t pfr_jfr_chunk_duration_ns(const jfr_chunk *c)
{
    return c->duration_ns;
}

static int64_t sat64(__int128 v)
{
    if (v > INT64_MAX)
        return INT64_MAX;
    if (v < INT64_MIN)
        return INT64_MIN;
    return (int64_t)v;
}

int64_t pfr_jfr_ticks_to_ns(const jfr_chunk *c, int64_t ticks)
{
    return sat64((__int128)ticks * 1000000000 / c->tps);
}

int64_t pfr_jfr_ticks_to_unix_ns(const jfr_chunk *c, int64_t ticks)
{
    __int128 d = ((__int128)ticks - c->start_ticks) * 1000000000 / c->tps;
    return sat64((__int128)c->start_ns + d);
}

size_t pfr_jfr_num_classes(const jfr_chunk *c)
{
    return c->nclasses;
}

const char *pfr_jfr_class_name(const jfr_chunk *c, uint32_t cls)
{
    return cls < c->nclasses ? c->arena + c->classes[cls].name : "";
}

int64_t pfr_jfr_class_find(const jfr_chunk *c, const char *name)
{
    for (size_t i = 0; i < c->nclasses; i++)
        if (strcmp(c->arena + c->classes[i].name, name) == 0)
            return (int64_t)i;
    return -1;
}

int pfr_jfr_field_find(const jfr_chunk *c, uint32_t cls, const char *name)
{
    if (cls >= c->nclasses)
        return -1;
    int pos = pfr_jfr_live_pos(c, cls, name);
    return pos >= 0 && pfr_jfr_integral(c, pfr_jfr_live_field(c, cls, pos)) ? pos : -1;
}

int pfr_jfr_event_read(const jfr_chunk *c, const jfr_record *rec, const int *pos, size_t n,
                       int64_t *vals, uint32_t *found)
{
    char err[8];
    jp P = {.err = err, .errlen = 0};
    rd r = {rec->body, rec->body + rec->len};
    *found = 0;
    if (rec->kind != JFR_REC_EVENT || n > JFR_MAX_FIELDS_READ)
        return -EINVAL;
    /* the last wanted position: the fields after it need not be walked */
    int last = -1;
    for (size_t i = 0; i < n; i++)
        last = pos[i] > last ? pos[i] : last;
    const class_def *cd = &c->classes[rec->cls];
    if (cd->prim != P_STRUCT)
        return 0;
    for (uint32_t i = 0; i < cd->nlive && (int)i <= last; i++) {
        const field_def *f = &c->fields[c->live[cd->live0 + i]];
        size_t j = 0;
        while (j < n && pos[j] != (int)i)
            j++;
        int rc;
        if (j < n && pfr_jfr_integral(c, f)) {
            rc = pfr_jfr_read_int(&P, c, &r, f, &vals[j]);
            *found |= 1u << j;
        } else {
            rc = pfr_jfr_skip_field(&P, c, &r, f, 1);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

size_t pfr_jfr_num_stacks(const jfr_chunk *c)
{
    return c->nsents;
}

const jfr_chunk *pfr_jfr_chunk_prev(const jfr_chunk *c)
{
    return c->prev;
}

int pfr_jfr_stack_get(const jfr_chunk *c, uint64_t key, jfr_stack *out)
{
    uint64_t *i = pfr_map_get(&c->m_stack, key);
    if (!i)
        return -ENOENT;
    const stack_ent *s = &c->sents[*i];
    *out = (jfr_stack){
        .index = (size_t)*i,
        .frames = s->n ? c->frames + s->frame0 : NULL, /* none stored yet: NULL */
        .n = s->n,
        .truncated = s->truncated,
    };
    return 0;
}

static const char *sref_str(const jfr_chunk *c, sref s)
{
    if (s.kind == S_POOLREF) {
        uint64_t *i = pfr_map_get(&c->m_str, s.v);
        if (!i)
            return "";
        s = c->strs[*i];
    }
    return s.kind == S_ARENA ? c->arena + s.v : "";
}

static const char *symbol_str(const jfr_chunk *c, uint64_t key)
{
    uint64_t *i = pfr_map_get(&c->m_sym, key);
    return i ? sref_str(c, c->syms[*i]) : "";
}

int pfr_jfr_method_get(const jfr_chunk *c, uint64_t key, const char **cls, const char **name)
{
    uint64_t *i = pfr_map_get(&c->m_meth, key);
    if (!i)
        return -ENOENT;
    const method_ent *m = &c->ments[*i];
    *name = m->has_name ? symbol_str(c, m->name) : "";
    *cls = "";
    uint64_t *k = m->has_cls ? pfr_map_get(&c->m_cls, m->cls) : NULL;
    if (k && c->cents[*k].has_name)
        *cls = symbol_str(c, c->cents[*k].name);
    return 0;
}
