/*
 * The dictionary layer (store_dict.h): stream rows, the decoded chain cache, and the one chunk
 * decoder.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "store_dict.h"

/* ---- streams ---- */
static void put_str0(pfr_buf *b, const char *s)
{
    pfr_buf_put(b, s, strlen(s) + 1);
}

static int kv_cmp(const void *a, const void *b)
{
    const pfr_kv *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

int pfr_st_stream_encode(const char *service, const pfr_kv *labels, size_t nlabels,
                         const pfr_profile *p, pfr_buf *key, pfr_buf *lab, pfr_buf *types)
{
    key->len = lab->len = types->len = 0;
    pfr_kv small[16], *sorted = small;
    if (nlabels > 16) {
        sorted = malloc(nlabels * sizeof(*sorted));
        if (!sorted)
            return -ENOMEM;
    }
    for (size_t i = 0; i < nlabels; i++) {
        if (!labels[i].key || !labels[i].value || !labels[i].key[0]) {
            if (sorted != small)
                free(sorted);
            return -EINVAL;
        }
        sorted[i] = labels[i];
    }
    qsort(sorted, nlabels, sizeof(*sorted), kv_cmp);
    for (size_t i = 0; i < nlabels; i++) {
        put_str0(lab, sorted[i].key);
        put_str0(lab, sorted[i].value);
    }
    if (sorted != small)
        free(sorted);
    size_t nt = pfr_profile_num_sample_types(p);
    for (size_t i = 0; i < nt; i++) {
        const char *unit = NULL;
        const char *type = pfr_profile_sample_type(p, i, &unit);
        put_str0(types, type ? type : "");
        put_str0(types, unit ? unit : "");
    }
    /* Length-prefixed parts: no separator can be confused with content. */
    pfr_buf_uvarint(key, strlen(service));
    pfr_buf_put(key, service, strlen(service));
    pfr_buf_uvarint(key, lab->len);
    pfr_buf_put(key, lab->data, lab->len);
    pfr_buf_uvarint(key, types->len);
    pfr_buf_put(key, types->data, types->len);
    return key->oom || lab->oom || types->oom ? -ENOMEM : 0;
}

/* NUL-terminated strings in blob; -1 if it does not end with NUL. */
static long count_strs(const uint8_t *blob, size_t len)
{
    if (len == 0)
        return 0;
    if (blob[len - 1] != 0)
        return -1;
    long n = 0;
    for (size_t i = 0; i < len; i++)
        n += blob[i] == 0;
    return n;
}

static void rstream_free(struct rstream *r)
{
    free(r->mem);
    free(r->labels);
    free(r->types);
    free(r->units);
}

static int rstream_parse(struct rstream *r, const char *service, const uint8_t *lab, size_t llen,
                         const uint8_t *typ, size_t tlen)
{
    long nl = count_strs(lab, llen), nt = count_strs(typ, tlen);
    if (!service || nl < 0 || nt < 0 || nl % 2 || nt % 2 || nt == 0) {
        r->bad = true;
        return 0;
    }
    size_t slen = strlen(service) + 1;
    r->mem = malloc(slen + llen + tlen + 1);
    r->labels = calloc((size_t)nl / 2 + 1, sizeof(*r->labels));
    r->types = calloc((size_t)nt / 2 + 1, sizeof(*r->types));
    r->units = calloc((size_t)nt / 2 + 1, sizeof(*r->units));
    if (!r->mem || !r->labels || !r->types || !r->units)
        return -ENOMEM;
    memcpy(r->mem, service, slen);
    r->service = r->mem;
    char *p = r->mem + slen;
    if (llen)
        memcpy(p, lab, llen);
    for (long i = 0; i < nl / 2; i++) {
        r->labels[i].key = p;
        p += strlen(p) + 1;
        r->labels[i].value = p;
        p += strlen(p) + 1;
    }
    r->nlabels = (size_t)nl / 2;
    memcpy(p, typ, tlen);
    for (long i = 0; i < nt / 2; i++) {
        r->types[i] = p;
        p += strlen(p) + 1;
        r->units[i] = p;
        p += strlen(p) + 1;
    }
    r->ntypes = (size_t)nt / 2;
    return 0;
}

int pfr_st_streams_refresh(struct store_dict *s)
{
    sqlite3_stmt *st = pfr_st_stmt(s->sql, ST_STREAMS_NEW);
    if (!st)
        return pfr_st_db_err(s->sql);
    sqlite3_bind_int64(st, 1, s->streams_max_id);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (VEC_RESERVE(s->streams, s->cap_streams, s->nstreams + 1)) {
            sqlite3_reset(st);
            return -ENOMEM;
        }
        struct rstream *r = &s->streams[s->nstreams];
        memset(r, 0, sizeof(*r));
        r->id = sqlite3_column_int64(st, 0);
        const char *service = (const char *)sqlite3_column_text(st, 1);
        const uint8_t *lab = sqlite3_column_blob(st, 2);
        size_t llen = (size_t)sqlite3_column_bytes(st, 2);
        const uint8_t *typ = sqlite3_column_blob(st, 3);
        size_t tlen = (size_t)sqlite3_column_bytes(st, 3);
        if (rstream_parse(r, service, lab, llen, typ, tlen)) {
            rstream_free(r);
            sqlite3_reset(st);
            return -ENOMEM;
        }
        s->nstreams++;
        s->streams_max_id = r->id;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : pfr_store_errno(rc);
}

const struct rstream *pfr_st_stream_get(struct store_dict *s, int64_t id)
{
    size_t lo = 0, hi = s->nstreams;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->streams[mid].id == id)
            return &s->streams[mid];
        if (s->streams[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool pfr_st_stream_matches(const struct rstream *r, const pfr_store_filter *f)
{
    if (!f)
        return true;
    if (r->bad)
        return !f->service && !f->type && !f->nlabels; /* reported as corrupt when read */
    if (f->service && strcmp(f->service, r->service) != 0)
        return false;
    if (f->type) {
        bool found = false;
        for (size_t i = 0; i < r->ntypes && !found; i++)
            found = strcmp(r->types[i], f->type) == 0;
        if (!found)
            return false;
    }
    for (size_t i = 0; i < f->nlabels; i++) {
        bool found = false;
        for (size_t j = 0; j < r->nlabels && !found; j++)
            found = strcmp(f->labels[i].key, r->labels[j].key) == 0 &&
                    strcmp(f->labels[i].value, r->labels[j].value) == 0;
        if (!found)
            return false;
    }
    return true;
}

/* ---- dictionary chain cache ---- */
void pfr_st_chain_free(struct chain *c)
{
    if (!c)
        return;
    pfr_st_tabs_free(&c->t);
    free(c->layer_id);
    free(c->layer_n);
    free(c);
}

void pfr_st_chain_cache_clear(struct store_dict *s)
{
    for (size_t i = 0; i < s->nchains; i++)
        pfr_st_chain_free(s->chains[i]);
    s->nchains = 0;
    s->chain_bytes = 0;
}

/* The cache's i-th chain, out of the cache: the caller's now. */
static struct chain *chain_unlink(struct store_dict *s, size_t i)
{
    struct chain *c = s->chains[i];
    s->chain_bytes -= c->bytes;
    s->chains[i] = s->chains[--s->nchains];
    return c;
}

static void chain_cache_trim(struct store_dict *s, const struct chain *keep)
{
    while (s->chain_bytes > s->chain_max && s->nchains > 1) {
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < s->nchains; i++)
            if (s->chains[i] != keep &&
                (victim == SIZE_MAX || s->chains[i]->stamp < s->chains[victim]->stamp))
                victim = i;
        if (victim == SIZE_MAX)
            return;
        pfr_st_chain_free(chain_unlink(s, victim));
    }
}

static ssize_t layer_pos(const struct chain *c, int64_t id)
{
    size_t lo = 0, hi = c->nlayers;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->layer_id[mid] == id)
            return (ssize_t)mid;
        if (c->layer_id[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Apply layer rows (base_id, after top, up to layer_id) onto c. 0, or a negative errno for
 * errors other than corruption (which sets c->bad_from). */
static int chain_extend(struct store_dict *s, struct chain *c, int64_t layer_id)
{
    sqlite3_stmt *st = pfr_st_stmt(s->sql, ST_LAYERS);
    if (!st)
        return pfr_st_db_err(s->sql);
    int64_t top = c->nlayers ? c->layer_id[c->nlayers - 1] : 0;
    sqlite3_bind_int64(st, 1, c->base_id);
    sqlite3_bind_int64(st, 2, top);
    sqlite3_bind_int64(st, 3, layer_id);
    pfr_buf scratch = {0};
    int rc = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        int64_t stream = sqlite3_column_int64(st, 1);
        int64_t parent = sqlite3_column_int64(st, 2);
        uint32_t crc = (uint32_t)sqlite3_column_int64(st, 3);
        const uint8_t *blob = sqlite3_column_blob(st, 4);
        size_t len = (size_t)sqlite3_column_bytes(st, 4);
        int64_t fields[3] = {stream, c->base_id, parent};
        /* The chain is linear: the base (its own id, no parent), then each layer on the last. */
        bool linked =
            c->nlayers ? parent == c->layer_id[c->nlayers - 1] : parent == 0 && id == c->base_id;
        int lr = -EBADMSG;
        if (linked && sqlite3_column_type(st, 4) == SQLITE_BLOB &&
            pfr_st_row_crc(blob, len, fields, 3) == crc) {
            lr = pfr_st_blob_unpack(blob, len, &s->raw);
            if (!lr)
                lr = pfr_st_layer_decode(s->raw.data, s->raw.len, &c->t, &scratch);
        }
        if (lr == -EBADMSG) {
            c->bad_from = id;
            break;
        }
        if (lr) {
            rc = lr;
            break;
        }
        size_t cap_n = c->cap_layer_n;
        if (VEC_RESERVE(c->layer_id, c->cap_layers, c->nlayers + 1) ||
            VEC_RESERVE(c->layer_n, cap_n, c->nlayers + 1)) {
            rc = -ENOMEM;
            break;
        }
        c->cap_layer_n = cap_n;
        c->layer_id[c->nlayers] = id;
        for (int k = 0; k < T_N; k++)
            c->layer_n[c->nlayers][k] = c->t.t[k].n;
        c->nlayers++;
    }
    if (!rc && step != SQLITE_ROW && step != SQLITE_DONE) {
        rc = pfr_store_errno(step);
        if (rc == -EBADMSG) { /* a corrupt page under the layers */
            c->bad_from = top + 1;
            rc = 0;
        }
    }
    sqlite3_reset(st);
    pfr_buf_free(&scratch);
    return rc;
}

const struct chain *pfr_st_chain_get(struct store_dict *s, int64_t base_id, int64_t layer_id,
                                     uint32_t n[T_N], bool *corrupt, int *err)
{
    *corrupt = false;
    *err = 0;
    struct chain *c = NULL;
    for (size_t i = 0; i < s->nchains && !c; i++)
        if (s->chains[i]->base_id == base_id)
            c = s->chains[i];
    if (!c) {
        if (VEC_RESERVE(s->chains, s->cap_chains, s->nchains + 1) || !(c = calloc(1, sizeof(*c)))) {
            *err = -ENOMEM;
            return NULL;
        }
        c->base_id = base_id;
        s->chains[s->nchains++] = c;
    }
    c->stamp = ++s->chain_clock;
    if (c->bad_from && layer_id >= c->bad_from) {
        *corrupt = true;
        return NULL;
    }
    ssize_t pos = layer_pos(c, layer_id);
    if (pos < 0 && (!c->nlayers || layer_id > c->layer_id[c->nlayers - 1])) {
        size_t old = c->bytes;
        *err = chain_extend(s, c, layer_id);
        c->bytes =
            sizeof(*c) + pfr_st_tabs_bytes(&c->t) + c->cap_layers * (sizeof(int64_t) + 4 * T_N);
        s->chain_bytes = s->chain_bytes - old + c->bytes;
        if (*err)
            return NULL;
        pos = layer_pos(c, layer_id);
    }
    if (pos < 0 || (c->bad_from && layer_id >= c->bad_from)) {
        *corrupt = true; /* a layer the chunk needs is missing or broken */
        return NULL;
    }
    memcpy(n, c->layer_n[pos], sizeof(c->layer_n[pos]));
    chain_cache_trim(s, c);
    return c;
}

struct chain *pfr_st_chain_take(struct store_dict *s, int64_t base_id, int64_t layer_id,
                                uint32_t n[T_N], bool *corrupt, int *err)
{
    const struct chain *c = pfr_st_chain_get(s, base_id, layer_id, n, corrupt, err);
    for (size_t i = 0; c && i < s->nchains; i++)
        if (s->chains[i] == c)
            return chain_unlink(s, i);
    return NULL;
}

/* ---- totals and rows ---- */
static int chunk_row_unpack(struct store_dict *s, const uint8_t *blob, size_t len,
                            int64_t stream_id, int64_t base_id, int64_t dict_id, int64_t start_ns,
                            int64_t end_ns, uint32_t crc)
{
    int64_t fields[5] = {stream_id, base_id, dict_id, start_ns, end_ns};
    if (!blob || pfr_st_row_crc(blob, len, fields, 5) != crc)
        return -EBADMSG;
    return pfr_st_blob_unpack(blob, len, &s->raw);
}
/* ---- the chunk decoder ---- */

/* A roll-up keeps the smallest id of the chunks it merged (store_retention.c): a row listed
 * before it may read back as the roll-up's, whose checksum differs. That row is gone, not
 * corrupt. */
static bool replaced(struct store_dict *s, const struct store_chunk_ref *c)
{
    sqlite3_stmt *ex = pfr_st_stmt(s->sql, ST_CHUNK_EXISTS);
    if (!ex)
        return false;
    sqlite3_bind_int64(ex, 1, c->id);
    bool gone = false;
    int e = sqlite3_step(ex);
    if (e == SQLITE_DONE)
        gone = true;
    else if (e == SQLITE_ROW)
        gone = (uint32_t)sqlite3_column_int64(ex, 0) != c->crc;
    sqlite3_reset(ex);
    return gone;
}

int pfr_st_chunk_load(struct store_dict *s, const struct store_chunk_ref *c,
                      const struct rstream *r, struct dchunk *dc, const struct chain **chain_out)
{
    if (!r || r->bad)
        return -EBADMSG;
    sqlite3_stmt *st = pfr_st_stmt(s->sql, ST_CHUNK_DATA);
    if (!st)
        return pfr_st_db_err(s->sql);
    sqlite3_bind_int64(st, 1, c->id);
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
        sqlite3_reset(st);
        /* Evicted since the metadata pass, or a missing payload (corrupt)? */
        sqlite3_stmt *ex = pfr_st_stmt(s->sql, ST_CHUNK_EXISTS);
        if (!ex)
            return pfr_st_db_err(s->sql);
        sqlite3_bind_int64(ex, 1, c->id);
        int e = sqlite3_step(ex);
        sqlite3_reset(ex);
        if (e == SQLITE_DONE)
            return STORE_LOAD_VANISHED;
        return e == SQLITE_ROW ? -EBADMSG : pfr_store_errno(e);
    }
    if (step != SQLITE_ROW) {
        sqlite3_reset(st);
        int e = pfr_store_errno(step);
        return e ? e : -EIO;
    }
    bool corrupt;
    int err;
    uint32_t dict_n[T_N];
    const struct chain *ch = pfr_st_chain_get(s, c->base_id, c->dict_id, dict_n, &corrupt, &err);
    if (!ch) {
        sqlite3_reset(st);
        return corrupt ? -EBADMSG : err;
    }
    const uint8_t *blob = sqlite3_column_blob(st, 0);
    size_t len = (size_t)sqlite3_column_bytes(st, 0);
    int rc = sqlite3_column_type(st, 0) == SQLITE_BLOB
                 ? chunk_row_unpack(s, blob, len, c->stream_id, c->base_id, c->dict_id, c->start_ns,
                                    c->end_ns, c->crc)
                 : -EBADMSG;
    sqlite3_reset(st);
    if (rc == -EBADMSG && replaced(s, c))
        return STORE_LOAD_VANISHED;
    if (rc)
        return rc;
    rc = pfr_st_chunk_decode(s->raw.data, s->raw.len, dict_n, (uint32_t)r->ntypes, dc);
    if (rc)
        return rc;
    *chain_out = ch;
    return STORE_LOAD_OK;
}

void pfr_st_dict_free(struct store_dict *s)
{
    for (size_t i = 0; i < s->nstreams; i++)
        rstream_free(&s->streams[i]);
    free(s->streams);
    s->streams = NULL;
    s->nstreams = s->cap_streams = 0;
    pfr_st_chain_cache_clear(s);
    free(s->chains);
    s->chains = NULL;
    s->cap_chains = 0;
    pfr_buf_free(&s->raw);
}
