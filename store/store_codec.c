/* Encoding and defensive decoding of dictionary and chunk rows (formats in store_codec.h). */
#include <errno.h>
#include <lz4.h>
/* LZ4_resetStreamHC_fast: among the "static linking only" functions, exported by liblz4 1.9 */
#define LZ4_HC_STATIC_LINKING_ONLY
#include <lz4hc.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "store_codec.h"

void pfr_st_tabs_free(struct tabs *t)
{
    for (int k = 0; k < T_N; k++)
        pfr_st_ktab_free(&t->t[k]);
}

void pfr_st_tabs_reset(struct tabs *t)
{
    for (int k = 0; k < T_N; k++)
        pfr_st_ktab_reset(&t->t[k]);
}

size_t pfr_st_tabs_bytes(const struct tabs *t)
{
    size_t n = 0;
    for (int k = 0; k < T_N; k++)
        n += ktab_bytes(&t->t[k]);
    return n;
}

/* ---- tables ---- */
static void enc_entry(pfr_buf *b, int k, const uint8_t *key, size_t len)
{
    switch (k) {
    case T_STR:
        pfr_buf_uvarint(b, len);
        pfr_buf_put(b, key, len);
        break;
    case T_FUNC: {
        struct nfunc f;
        memcpy(&f, key, sizeof(f));
        pfr_buf_uvarint(b, f.name);
        pfr_buf_uvarint(b, f.file);
        break;
    }
    case T_LOC: {
        const struct nloc *l = (const struct nloc *)key;
        const struct nline *ln = (const struct nline *)(l + 1);
        pfr_buf_uvarint(b, l->addr);
        pfr_buf_uvarint(b, l->module);
        pfr_buf_uvarint(b, l->nlines);
        for (uint32_t i = 0; i < l->nlines; i++) {
            pfr_buf_uvarint(b, ln[i].func);
            pfr_buf_svarint(b, ln[i].line);
        }
        break;
    }
    case T_STACK: {
        const uint32_t *locs = (const uint32_t *)key;
        size_t n = len / sizeof(uint32_t);
        pfr_buf_uvarint(b, n);
        for (size_t i = 0; i < n; i++)
            pfr_buf_uvarint(b, locs[i]);
        break;
    }
    case T_LSET: {
        const struct nlabel *l = (const struct nlabel *)key;
        size_t n = len / sizeof(*l);
        pfr_buf_uvarint(b, n);
        for (size_t i = 0; i < n; i++) {
            pfr_buf_uvarint(b, l[i].key);
            if (l[i].str == LABEL_NUM) {
                pfr_buf_u8(b, 1);
                pfr_buf_svarint(b, l[i].num);
                pfr_buf_uvarint(b, l[i].unit);
            } else {
                pfr_buf_u8(b, 0);
                pfr_buf_uvarint(b, l[i].str);
            }
        }
        break;
    }
    }
}

void pfr_st_enc_tabs(pfr_buf *b, const struct tabs *t, const uint32_t *from)
{
    for (int k = 0; k < T_N; k++) {
        uint32_t i0 = from ? from[k] : 0;
        pfr_buf_uvarint(b, t->t[k].n - i0);
        for (uint32_t i = i0; i < t->t[k].n; i++) {
            size_t len;
            const uint8_t *key = ktab_key(&t->t[k], i, &len);
            enc_entry(b, k, key, len);
        }
    }
}

/* An index that must be below lim. */
static uint32_t rd_idx(struct srd *r, uint64_t lim)
{
    uint64_t v = srd_uv(r);
    if (v >= lim) {
        r->bad = true;
        r->p = r->end;
        return 0;
    }
    return (uint32_t)v;
}

/* Smallest encoding of an entry of each kind, to bound counts by the bytes left. */
static const size_t min_entry[T_N] = {1, 2, 3, 1, 1};

static int dec_entry(struct srd *r, int k, const uint64_t lim[T_N], struct ktab *out, pfr_buf *s)
{
    s->len = 0;
    switch (k) {
    case T_STR: {
        uint32_t len = srd_count(r, 1);
        if (r->bad || memchr(r->p, 0, len))
            return -EBADMSG;
        int64_t x = pfr_st_ktab_add(out, r->p, len);
        r->p += len;
        return x < 0 ? (int)x : 0;
    }
    case T_FUNC: {
        struct nfunc f;
        f.name = rd_idx(r, lim[T_STR]);
        f.file = rd_idx(r, lim[T_STR]);
        pfr_buf_put(s, &f, sizeof(f));
        break;
    }
    case T_LOC: {
        struct nloc l;
        l.addr = srd_uv(r);
        l.module = rd_idx(r, lim[T_STR]);
        l.nlines = srd_count(r, 2);
        pfr_buf_put(s, &l, sizeof(l));
        for (uint32_t i = 0; i < l.nlines && !r->bad; i++) {
            struct nline ln = {0};
            ln.func = rd_idx(r, lim[T_FUNC]);
            ln.line = srd_sv(r);
            pfr_buf_put(s, &ln, sizeof(ln));
        }
        break;
    }
    case T_STACK: {
        uint32_t n = srd_count(r, 1);
        for (uint32_t i = 0; i < n && !r->bad; i++) {
            uint32_t loc = rd_idx(r, lim[T_LOC]);
            pfr_buf_put(s, &loc, sizeof(loc));
        }
        break;
    }
    case T_LSET: {
        uint32_t n = srd_count(r, 3);
        for (uint32_t i = 0; i < n && !r->bad; i++) {
            struct nlabel l = {0};
            l.key = rd_idx(r, lim[T_STR]);
            uint8_t kind = srd_u8(r);
            if (kind == 0) {
                l.str = rd_idx(r, lim[T_STR]);
            } else if (kind == 1) {
                l.str = LABEL_NUM;
                l.num = srd_sv(r);
                l.unit = rd_idx(r, lim[T_STR]);
            } else {
                return -EBADMSG;
            }
            pfr_buf_put(s, &l, sizeof(l));
        }
        break;
    }
    }
    if (r->bad)
        return -EBADMSG;
    if (pfr_buf_err(s))
        return pfr_buf_err(s);
    int64_t x = pfr_st_ktab_add(out, s->data, s->len);
    return x < 0 ? (int)x : 0;
}

int pfr_st_dec_tabs(struct srd *r, const uint32_t base[T_N], struct tabs *t, pfr_buf *scratch)
{
    uint64_t lim[T_N];
    pfr_st_tabs_reset(t);
    for (int k = 0; k < T_N; k++) {
        uint32_t n = srd_count(r, min_entry[k]);
        if (r->bad)
            return -EBADMSG;
        /* Strings come first, so later tables see every string; no table refers to its own. */
        for (int j = 0; j < T_N; j++)
            lim[j] = (uint64_t)base[j] + t->t[j].n;
        for (uint32_t i = 0; i < n; i++) {
            int rc = dec_entry(r, k, lim, &t->t[k], scratch);
            if (rc)
                return rc;
        }
        if ((uint64_t)base[k] + t->t[k].n > UINT32_MAX - 2)
            return -EBADMSG;
    }
    return 0;
}

/* ---- dictionary layers ---- */
void pfr_st_layer_encode(pfr_buf *raw, const struct tabs *t, const uint32_t from[T_N])
{
    pfr_buf_u8(raw, DICT_VERSION);
    pfr_st_enc_tabs(raw, t, from);
}

int pfr_st_layer_decode(const uint8_t *raw, size_t len, struct tabs *t, pfr_buf *scratch)
{
    if (!raw)
        return -EBADMSG;
    struct srd r = {raw, raw + len, false};
    uint32_t n0[T_N];
    uint64_t lim[T_N];
    for (int k = 0; k < T_N; k++)
        n0[k] = t->t[k].n;
    int rc = srd_u8(&r) == DICT_VERSION ? 0 : -EBADMSG;
    for (int k = 0; k < T_N && !rc; k++) {
        uint32_t n = srd_count(&r, min_entry[k]);
        if (r.bad || (uint64_t)t->t[k].n + n > UINT32_MAX - 2) {
            rc = -EBADMSG;
            break;
        }
        for (int j = 0; j < T_N; j++)
            lim[j] = t->t[j].n;
        for (uint32_t i = 0; i < n && !rc; i++)
            rc = dec_entry(&r, k, lim, &t->t[k], scratch);
    }
    if (!rc && r.p != r.end)
        rc = -EBADMSG;
    /* String 0 is "" in every dictionary (the writer interns it first). */
    if (!rc && (t->t[T_STR].n == 0 || t->t[T_STR].off[1] != 1))
        rc = -EBADMSG;
    if (rc)
        for (int k = 0; k < T_N; k++)
            pfr_st_ktab_truncate(&t->t[k], n0[k]);
    return rc;
}

/* ---- chunks ---- */
static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t mag(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

void pfr_st_chunk_encode(pfr_buf *raw, const uint32_t base[T_N], const struct tabs *delta,
                         const struct chunk_body *c)
{
    pfr_buf_u8(raw, CHUNK_VERSION);
    for (int k = 0; k < T_N; k++)
        pfr_buf_uvarint(raw, base[k]);
    pfr_buf_uvarint(raw, c->ntypes);
    pfr_st_enc_tabs(raw, delta, NULL);
    pfr_buf_svarint(raw, c->time_nanos);
    pfr_buf_svarint(raw, c->duration);
    pfr_buf_uvarint(raw, c->period_type);
    pfr_buf_uvarint(raw, c->period_unit);
    pfr_buf_svarint(raw, c->period);
    pfr_buf_uvarint(raw, c->nsamples);
    uint32_t prev = 0;
    for (size_t i = 0; i < c->nsamples; i++) {
        pfr_buf_uvarint(raw, c->stack[i] - prev);
        prev = c->stack[i];
    }
    for (size_t i = 0; i < c->nsamples; i++)
        pfr_buf_uvarint(raw, c->lset[i]);
    /* Values per type over a common divisor: CPU samples are multiples of the period, so the
     * quotients are sample counts, one byte each. */
    for (uint32_t t = 0; t < c->ntypes; t++) {
        uint64_t g = 0;
        for (size_t i = 0; i < c->nsamples && g != 1; i++) {
            int64_t v = c->values[i * c->ntypes + t];
            g = v == INT64_MIN ? 1 : gcd64(g, mag(v));
        }
        if (!g)
            g = 1;
        pfr_buf_uvarint(raw, g);
        for (size_t i = 0; i < c->nsamples; i++)
            pfr_buf_svarint(raw, c->values[i * c->ntypes + t] / (int64_t)g);
    }
}

void pfr_st_dchunk_free(struct dchunk *c)
{
    pfr_st_tabs_free(&c->delta);
    free(c->stack);
    free(c->lset);
    free(c->values);
    free(c->totals);
    pfr_buf_free(&c->scratch);
    memset(c, 0, sizeof(*c));
}

void pfr_st_sum_totals(const int64_t *values, size_t nsamples, uint32_t ntypes, int64_t *totals)
{
    for (uint32_t t = 0; t < ntypes; t++) {
        uint64_t s = 0;
        for (size_t i = 0; i < nsamples; i++)
            s += (uint64_t)values[i * ntypes + t];
        totals[t] = (int64_t)s;
    }
}

int pfr_st_chunk_decode(const uint8_t *raw, size_t len, const uint32_t dict_n[T_N], uint32_t ntypes,
                        struct dchunk *c)
{
    if (!raw)
        return -EBADMSG;
    struct srd r = {raw, raw + len, false};
    if (srd_u8(&r) != CHUNK_VERSION)
        return -EBADMSG;
    for (int k = 0; k < T_N; k++) {
        c->base[k] = (uint32_t)srd_uv(&r);
        if (c->base[k] != dict_n[k])
            return -EBADMSG;
    }
    if (srd_uv(&r) != ntypes || r.bad || ntypes == 0 || ntypes > 4096)
        return -EBADMSG;
    c->ntypes = ntypes;
    int rc = pfr_st_dec_tabs(&r, c->base, &c->delta, &c->scratch);
    if (rc)
        return rc;
    uint64_t nstr = (uint64_t)c->base[T_STR] + c->delta.t[T_STR].n;
    uint64_t nstack = (uint64_t)c->base[T_STACK] + c->delta.t[T_STACK].n;
    uint64_t nlset = (uint64_t)c->base[T_LSET] + c->delta.t[T_LSET].n;
    c->time_nanos = srd_sv(&r);
    c->duration = srd_sv(&r);
    c->period_type = rd_idx(&r, nstr);
    c->period_unit = rd_idx(&r, nstr);
    c->period = srd_sv(&r);
    /* Each sample takes at least 1 + 1 + ntypes bytes. */
    size_t n = srd_count(&r, 2 + (size_t)ntypes);
    if (r.bad)
        return -EBADMSG;
    size_t nv = n * ntypes;
    if (VEC_RESERVE(c->stack, c->cap_s, n ? n : 1) || VEC_RESERVE(c->lset, c->cap_l, n ? n : 1) ||
        VEC_RESERVE(c->values, c->cap_v, nv ? nv : 1) || VEC_RESERVE(c->totals, c->cap_t, ntypes))
        return -ENOMEM;
    c->nsamples = n;
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc += srd_uv(&r);
        if (acc >= nstack) {
            r.bad = true;
            break;
        }
        c->stack[i] = (uint32_t)acc;
    }
    for (size_t i = 0; i < n && !r.bad; i++)
        c->lset[i] = rd_idx(&r, nlset);
    for (uint32_t t = 0; t < ntypes && !r.bad; t++) {
        uint64_t g = srd_uv(&r);
        if (g == 0 || g > INT64_MAX)
            r.bad = true;
        for (size_t i = 0; i < n && !r.bad; i++) {
            int64_t v;
            if (__builtin_mul_overflow(srd_sv(&r), (int64_t)g, &v))
                r.bad = true;
            c->values[i * ntypes + t] = v;
        }
    }
    if (r.bad || r.p != r.end)
        return -EBADMSG;
    pfr_st_sum_totals(c->values, n, ntypes, c->totals);
    return 0;
}

/* ---- blobs ---- */
pfr_st_hc *pfr_st_hc_new(void)
{
    return (pfr_st_hc *)LZ4_createStreamHC();
}

void pfr_st_hc_free(pfr_st_hc *hc)
{
    LZ4_freeStreamHC((LZ4_streamHC_t *)hc);
}

/* One block that refers to no earlier one: the fast reset keeps the state's tables but moves
 * their window past what they hold (LZ4_compress_HC_extStateHC_fastReset's way). */
static int hc_compress(pfr_st_hc *hc, const uint8_t *raw, size_t len, char *dst, int cap)
{
    LZ4_streamHC_t *s = (LZ4_streamHC_t *)hc;
    LZ4_resetStreamHC_fast(s, LZ4HC_CLEVEL_DEFAULT);
    return LZ4_compress_HC_continue(s, (const char *)raw, dst, (int)len, cap);
}

int pfr_st_blob_pack(const uint8_t *raw, size_t len, pfr_st_hc *hc, pfr_buf *out)
{
    out->len = 0;
    if (len > PFR_STORE_MAX_RAW)
        return -E2BIG;
    int bound = LZ4_compressBound((int)len);
    if (pfr_buf_reserve(out, 11 + (size_t)bound))
        return -ENOMEM;
    out->data[0] = BLOB_LZ4;
    out->len = 1;
    pfr_buf_uvarint(out, len);
    char *dst = (char *)out->data + out->len;
    int n = hc ? hc_compress(hc, raw, len, dst, bound)
               : LZ4_compress_default((const char *)raw, dst, (int)len, bound);
    if (n <= 0 || (size_t)n >= len) {
        /* Incompressible (or tiny): store as is. */
        out->data[0] = BLOB_RAW;
        out->len = 1;
        pfr_buf_uvarint(out, len);
        pfr_buf_put(out, raw, len);
        return pfr_buf_err(out);
    }
    out->len += (size_t)n;
    return 0;
}

int pfr_st_blob_unpack(const uint8_t *blob, size_t len, pfr_buf *raw)
{
    if (!blob)
        return -EBADMSG;
    struct srd r = {blob, blob + len, false};
    raw->len = 0;
    uint8_t codec = srd_u8(&r);
    uint64_t rawlen = srd_uv(&r);
    if (r.bad || rawlen > PFR_STORE_MAX_RAW)
        return -EBADMSG;
    if (codec == BLOB_RAW) {
        if (srd_left(&r) != rawlen)
            return -EBADMSG;
        pfr_buf_put(raw, r.p, rawlen);
        return pfr_buf_err(raw);
    }
    if (codec != BLOB_LZ4 || srd_left(&r) == 0 || srd_left(&r) > INT32_MAX ||
        rawlen > (uint64_t)srd_left(&r) * 255 + 16)
        return -EBADMSG;
    if (pfr_buf_reserve(raw, rawlen ? rawlen : 1))
        return pfr_buf_err(raw);
    int n =
        LZ4_decompress_safe((const char *)r.p, (char *)raw->data, (int)srd_left(&r), (int)rawlen);
    if (n < 0 || (uint64_t)n != rawlen)
        return -EBADMSG;
    raw->len = rawlen;
    return 0;
}

uint32_t pfr_st_row_crc(const uint8_t *blob, size_t len, const int64_t *fields, size_t nfields)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (len > 0) {
        uInt part = len > (1u << 30) ? (1u << 30) : (uInt)len;
        c = crc32(c, blob, part);
        blob += part;
        len -= part;
    }
    for (size_t i = 0; i < nfields; i++) {
        uint8_t le[8];
        for (int b = 0; b < 8; b++)
            le[b] = (uint8_t)((uint64_t)fields[i] >> (8 * b));
        c = crc32(c, le, 8);
    }
    return (uint32_t)c;
}

int pfr_st_totals_decode(const void *blob, size_t len, size_t ntypes, int64_t *out)
{
    struct srd r = {blob, (const uint8_t *)blob + len, false};
    for (size_t i = 0; i < ntypes; i++)
        out[i] = srd_sv(&r);
    return r.bad || r.p != r.end ? -EBADMSG : 0;
}

void pfr_st_totals_encode(pfr_buf *b, const int64_t *totals, size_t ntypes)
{
    b->len = 0;
    for (size_t i = 0; i < ntypes; i++)
        pfr_buf_svarint(b, totals[i]);
}
