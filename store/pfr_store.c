/*
 * pfr_store: opening, schema and migrations, stream and dictionary caches, stats and checks.
 * The writer is in store_write.c, scans and merges in store_read.c, cursors in store_cursor.c;
 * the row formats in store_codec.c. Design notes and measurements: docs/store.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_internal.h"

/* Decoded dictionary chains kept per handle. A realistic one is ~1-2 MB in memory. */
#define CHAIN_CACHE_BYTES (128u << 20)

static const char *const stmt_sql[ST_N] = {
    [ST_BEGIN] = "BEGIN",
    [ST_BEGIN_IMM] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_CHUNK_DATA] = "SELECT data FROM chunk_data WHERE id = ?1",
    [ST_CHUNK_EXISTS] = "SELECT 1 FROM chunks WHERE id = ?1",
    [ST_LAYERS] = ("SELECT id, stream_id, parent_id, crc, data FROM dicts"
                   " WHERE base_id = ?1 AND id > ?2 AND id <= ?3 ORDER BY id"),
    [ST_STREAMS_NEW] = "SELECT id, service, labels, types FROM streams WHERE id > ?1 ORDER BY id",
    /* the quick statistics, after every interval: by rowid, a b-tree descent each */
    [ST_FIRST_CHUNK] = "SELECT id, start_ns FROM chunks ORDER BY id LIMIT 1",
    [ST_LAST_CHUNK] = "SELECT id, end_ns FROM chunks ORDER BY id DESC LIMIT 1",
    [ST_CHUNK_SEQ] = "SELECT seq FROM sqlite_sequence WHERE name = 'chunks'",
    [ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
};

/* The current schema. Version 1 had no chunks.totals (timelines had to decode every chunk). */
static const char schema_v2[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO meta VALUES ('evicted', 0), ('lost_unshipped', 0), ('corrupt', 0);"
    "CREATE TABLE streams(id INTEGER PRIMARY KEY AUTOINCREMENT, key BLOB NOT NULL UNIQUE,"
    "  service TEXT NOT NULL, labels BLOB NOT NULL, types BLOB NOT NULL);"
    "CREATE TABLE dicts(id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL,"
    "  base_id INTEGER NOT NULL, parent_id INTEGER NOT NULL, nbytes INTEGER NOT NULL,"
    "  crc INTEGER NOT NULL, data BLOB NOT NULL);"
    "CREATE INDEX dicts_base ON dicts(base_id, id);"
    "CREATE TABLE chunks(id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL,"
    "  base_id INTEGER NOT NULL, dict_id INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
    "  end_ns INTEGER NOT NULL, nbytes INTEGER NOT NULL, crc INTEGER NOT NULL,"
    "  totals BLOB NOT NULL);"
    "CREATE INDEX chunks_stream ON chunks(stream_id, end_ns, start_ns);"
    "CREATE INDEX chunks_base ON chunks(base_id);"
    "CREATE TABLE chunk_data(id INTEGER PRIMARY KEY, data BLOB NOT NULL);";

int pfr_store_errno(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return 0;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    case SQLITE_READONLY:
        return -EROFS;
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_CANTOPEN:
        return -ENOENT;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return -EACCES;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
        return -EBADMSG;
    case SQLITE_TOOBIG:
        return -E2BIG;
    default:
        return -EIO;
    }
}

int pfr_store_fail(pfr_store *s, int e, char *err, size_t errlen, const char *msg)
{
    if (err && errlen) {
        if (s && s->db && sqlite3_errcode(s->db) != SQLITE_OK)
            snprintf(err, errlen, "%s: %s", msg, sqlite3_errmsg(s->db));
        else
            snprintf(err, errlen, "%s", msg);
    }
    return e;
}

int pfr_store_exec(pfr_store *s, const char *sql)
{
    return pfr_store_errno(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

sqlite3_stmt *pfr_store_prepare(pfr_store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
        return NULL;
    return st;
}

sqlite3_stmt *pfr_store_stmt(pfr_store *s, enum pfr_store_stmt which)
{
    if (!s->st[which])
        s->st[which] = pfr_store_prepare(s, stmt_sql[which]);
    if (s->st[which]) {
        sqlite3_reset(s->st[which]);
        sqlite3_clear_bindings(s->st[which]);
    }
    return s->st[which];
}

int pfr_store_begin_read(pfr_store *s)
{
    sqlite3_stmt *st = pfr_store_stmt(s, ST_BEGIN);
    return st ? pfr_store_step_done(st) : pfr_store_errno(sqlite3_errcode(s->db));
}

void pfr_store_end_read(pfr_store *s)
{
    sqlite3_stmt *st = pfr_store_stmt(s, ST_COMMIT);
    if (st)
        pfr_store_step_done(st);
}

int pfr_store_step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : pfr_store_errno(rc);
}

/* A single integer from a query (0 when no row). */
static int query_int(pfr_store *s, const char *sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    *out = 0;
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *out = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : pfr_store_errno(rc);
}

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

int pfr_store_stream_encode(const char *service, const pfr_kv *labels, size_t nlabels,
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

int pfr_store_streams_refresh(pfr_store *s)
{
    sqlite3_stmt *st = pfr_store_stmt(s, ST_STREAMS_NEW);
    if (!st)
        return pfr_store_errno(sqlite3_errcode(s->db));
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

const struct rstream *pfr_store_stream_get(pfr_store *s, int64_t id)
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

bool pfr_store_stream_matches(const struct rstream *r, const pfr_store_filter *f)
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
static void chain_free(struct chain *c)
{
    if (!c)
        return;
    pfr_store_tabs_free(&c->t);
    free(c->layer_id);
    free(c->layer_n);
    free(c);
}

void pfr_store_chain_cache_clear(pfr_store *s)
{
    for (size_t i = 0; i < s->nchains; i++)
        chain_free(s->chains[i]);
    s->nchains = 0;
    s->chain_bytes = 0;
}

static void chain_cache_trim(pfr_store *s, const struct chain *keep)
{
    while (s->chain_bytes > s->chain_max && s->nchains > 1) {
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < s->nchains; i++)
            if (s->chains[i] != keep &&
                (victim == SIZE_MAX || s->chains[i]->stamp < s->chains[victim]->stamp))
                victim = i;
        if (victim == SIZE_MAX)
            return;
        s->chain_bytes -= s->chains[victim]->bytes;
        chain_free(s->chains[victim]);
        s->chains[victim] = s->chains[--s->nchains];
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
static int chain_extend(pfr_store *s, struct chain *c, int64_t layer_id)
{
    sqlite3_stmt *st = pfr_store_stmt(s, ST_LAYERS);
    if (!st)
        return pfr_store_errno(sqlite3_errcode(s->db));
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
        if (linked && stream == c->stream_id && sqlite3_column_type(st, 4) == SQLITE_BLOB &&
            pfr_store_row_crc(blob, len, fields, 3) == crc) {
            lr = pfr_store_blob_unpack(blob, len, &s->raw);
            if (!lr)
                lr = pfr_store_layer_decode(s->raw.data, s->raw.len, &c->t, &scratch);
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

const struct chain *pfr_store_chain_get(pfr_store *s, int64_t base_id, int64_t layer_id,
                                        int64_t stream_id, uint32_t n[T_N], bool *corrupt, int *err)
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
        c->stream_id = stream_id;
        s->chains[s->nchains++] = c;
    }
    c->stamp = ++s->chain_clock;
    if (c->stream_id != stream_id || (c->bad_from && layer_id >= c->bad_from)) {
        *corrupt = true;
        return NULL;
    }
    ssize_t pos = layer_pos(c, layer_id);
    if (pos < 0 && (!c->nlayers || layer_id > c->layer_id[c->nlayers - 1])) {
        size_t old = c->bytes;
        *err = chain_extend(s, c, layer_id);
        c->bytes =
            sizeof(*c) + pfr_store_tabs_bytes(&c->t) + c->cap_layers * (sizeof(int64_t) + 4 * T_N);
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

/* ---- totals and rows ---- */
int pfr_store_totals_decode(const void *blob, size_t len, size_t ntypes, int64_t *out)
{
    struct srd r = {blob, (const uint8_t *)blob + len, false};
    for (size_t i = 0; i < ntypes; i++)
        out[i] = srd_sv(&r);
    return r.bad || r.p != r.end ? -EBADMSG : 0;
}

void pfr_store_totals_encode(pfr_buf *b, const int64_t *totals, size_t ntypes)
{
    b->len = 0;
    for (size_t i = 0; i < ntypes; i++)
        pfr_buf_svarint(b, totals[i]);
}

int pfr_store_chunk_row_unpack(pfr_store *s, const uint8_t *blob, size_t len, int64_t stream_id,
                               int64_t base_id, int64_t dict_id, int64_t start_ns, int64_t end_ns,
                               uint32_t crc)
{
    int64_t fields[5] = {stream_id, base_id, dict_id, start_ns, end_ns};
    if (!blob || pfr_store_row_crc(blob, len, fields, 5) != crc)
        return -EBADMSG;
    return pfr_store_blob_unpack(blob, len, &s->raw);
}

/* ---- open / close ---- */
static int set_pragmas_writer(pfr_store *s, bool fresh)
{
    char sql[256];
    int rc;
    if (fresh && (rc = pfr_store_exec(s, "PRAGMA auto_vacuum = INCREMENTAL")) != 0)
        return rc;
    /* The WAL stays within a small budget: it is checkpointed every half budget and truncated
     * to the budget after a checkpoint (docs/store.md, "Size cap"). */
    uint64_t wal = s->wal_budget;
    /* secure_delete FAST: evicted chunks' pages are not zeroed through the WAL (builds with
     * SQLITE_SECURE_DELETE do it by default): evicting then takes a few pages of WAL, not as
     * many as it frees, which a full disk could not give (docs/store.md, "Disk space"). */
    snprintf(sql, sizeof(sql),
             "PRAGMA synchronous = FULL; PRAGMA journal_size_limit = %llu;"
             "PRAGMA wal_autocheckpoint = %llu; PRAGMA cache_size = -16384;"
             "PRAGMA secure_delete = FAST;",
             (unsigned long long)wal, (unsigned long long)(wal / 2 / s->page_size + 1));
    return pfr_store_exec(s, sql);
}

static int create_or_migrate(pfr_store *s, char *err, size_t errlen)
{
    int64_t ver, ntables, app;
    int rc = pfr_store_exec(s, "BEGIN IMMEDIATE");
    if (rc)
        return pfr_store_fail(s, rc, err, errlen, "cannot lock the store");
    if ((rc = query_int(s, "PRAGMA user_version", &ver)) ||
        (rc = query_int(s, "SELECT count(*) FROM sqlite_master", &ntables)) ||
        (rc = query_int(s, "PRAGMA application_id", &app))) {
        pfr_store_fail(s, rc, err, errlen, "cannot read the store's schema");
        goto fail;
    }
    if (ntables > 0 && app != PFR_STORE_APP_ID) {
        rc = pfr_store_fail(NULL, -EBADMSG, err, errlen, "not a pfr store (other SQLite database)");
        goto fail;
    }
    if (ntables == 0) {
        char sql[128];
        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d;",
                 PFR_STORE_APP_ID, PFR_STORE_SCHEMA_VERSION);
        if ((rc = pfr_store_exec(s, schema_v2)) || (rc = pfr_store_exec(s, sql))) {
            pfr_store_fail(s, rc, err, errlen, "cannot create the schema");
            goto fail;
        }
    } else if (ver > PFR_STORE_SCHEMA_VERSION || ver < 1) {
        char msg[128];
        snprintf(msg, sizeof(msg), "store schema version %lld is not one this pfr knows (%d)",
                 (long long)ver, PFR_STORE_SCHEMA_VERSION);
        rc = pfr_store_fail(NULL, -EPROTO, err, errlen, msg);
        goto fail;
    } else if (ver < PFR_STORE_SCHEMA_VERSION) {
        if ((rc = pfr_store_migrate(s, (int)ver, err, errlen)) != 0)
            goto fail;
    }
    if ((rc = pfr_store_exec(s, "COMMIT")) != 0)
        return pfr_store_fail(s, rc, err, errlen, "cannot commit the schema");
    return 0;
fail:
    pfr_store_exec(s, "ROLLBACK");
    return rc;
}

static int check_reader_schema(pfr_store *s, char *err, size_t errlen)
{
    int64_t ver, app, ntables;
    int rc = pfr_store_exec(s, "BEGIN");
    if (!rc && !(rc = query_int(s, "SELECT count(*) FROM sqlite_master", &ntables)) &&
        !(rc = query_int(s, "PRAGMA user_version", &ver)))
        rc = query_int(s, "PRAGMA application_id", &app);
    pfr_store_exec(s, "COMMIT");
    if (rc)
        return pfr_store_fail(s, rc, err, errlen, "cannot read the store's schema");
    if (ntables == 0)
        return pfr_store_fail(NULL, -ENOENT, err, errlen,
                              "the store is empty (no writer created it)");
    if (app != PFR_STORE_APP_ID)
        return pfr_store_fail(NULL, -EBADMSG, err, errlen,
                              "not a pfr store (other SQLite database)");
    if (ver != PFR_STORE_SCHEMA_VERSION) {
        char msg[160];
        snprintf(msg, sizeof(msg), "store schema version %lld, this pfr reads %d%s", (long long)ver,
                 PFR_STORE_SCHEMA_VERSION,
                 ver < PFR_STORE_SCHEMA_VERSION ? ": open it read-write once to migrate it" : "");
        return pfr_store_fail(NULL, -EPROTO, err, errlen, msg);
    }
    return 0;
}

int pfr_store_open(const char *path, const pfr_store_opts *opts, pfr_store **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    if (!path || !path[0])
        return pfr_store_fail(NULL, -EINVAL, err, errlen, "no store path");
    pfr_store_opts o = opts ? *opts : (pfr_store_opts){0};
    if (!o.max_bytes)
        o.max_bytes = PFR_STORE_DEFAULT_MAX_BYTES;
    if (o.max_bytes < (256u << 10))
        return pfr_store_fail(NULL, -EINVAL, err, errlen, "max_bytes below the 256 KiB minimum");
    if (!o.busy_timeout_ms)
        o.busy_timeout_ms = 5000;

    pfr_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->read_only = o.read_only;
    s->max_bytes = o.max_bytes;
    s->wal_budget = pfr_store_space_wal_budget(o.max_bytes);
    s->busy_ms = o.busy_timeout_ms;
    s->chain_max = o.cache_bytes ? o.cache_bytes : CHAIN_CACHE_BYTES;
    s->path = strdup(path);
    if (s->path && asprintf(&s->cursor_dir, "%s-cursors", path) < 0)
        s->cursor_dir = NULL;
    if (!s->path || !s->cursor_dir || pfr_store_space_open(s, &o.reserve) != 0) {
        pfr_store_close(s);
        return -ENOMEM;
    }
    struct stat stt;
    bool exists = stat(path, &stt) == 0;
    if (o.read_only && !exists) {
        char msg[512];
        snprintf(msg, sizeof(msg), "no store at %s", path);
        pfr_store_close(s);
        return pfr_store_fail(NULL, -ENOENT, err, errlen, msg);
    }
    if (!o.read_only && !exists) {
        /* Create the file ourselves: SQLite would make it 0644 (less the umask), and its -wal
         * and -shm files copy the database's mode. Profiles name processes and functions, so
         * the ring is for its owner and group only. */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        if (fd >= 0)
            close(fd);
    }
    int flags = SQLITE_OPEN_NOMUTEX |
                (o.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        rc = pfr_store_fail(s, pfr_store_errno(rc), err, errlen, "cannot open the store");
        pfr_store_close(s);
        return rc;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, o.busy_timeout_ms);
    if (!o.read_only) {
        /* Keep -wal and -shm when the writer closes: a reader that may not create files in the
         * ring's folder (the shipper, in the ring's group) could not open the ring otherwise. */
        int persist = 1;
        sqlite3_file_control(s->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    }
    int64_t psize, ntables;
    if ((rc = query_int(s, "PRAGMA page_size", &psize)) != 0 ||
        (rc = query_int(s, "SELECT count(*) FROM sqlite_master", &ntables)) != 0) {
        rc = pfr_store_fail(s, rc, err, errlen, "cannot read the store (not a database?)");
        pfr_store_close(s);
        return rc;
    }
    s->page_size = (uint32_t)(psize > 0 ? psize : 4096);
    if (!o.read_only) {
        char mode[16] = "";
        sqlite3_stmt *st = NULL;
        if ((rc = set_pragmas_writer(s, ntables == 0)) == 0 &&
            sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            snprintf(mode, sizeof(mode), "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        if (rc || strcmp(mode, "wal") != 0) {
            rc = pfr_store_fail(s, rc ? rc : -EIO, err, errlen, "cannot switch the store to WAL");
            pfr_store_close(s);
            return rc;
        }
        rc = create_or_migrate(s, err, errlen);
    } else {
        rc = check_reader_schema(s, err, errlen);
    }
    if (rc) {
        pfr_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void pfr_store_close(pfr_store *s)
{
    if (!s)
        return;
    pfr_store_writer_free(s->w);
    for (int i = 0; i < ST_N; i++)
        sqlite3_finalize(s->st[i]);
    if (s->db)
        sqlite3_close_v2(s->db);
    for (size_t i = 0; i < s->nstreams; i++)
        rstream_free(&s->streams[i]);
    free(s->streams);
    pfr_store_chain_cache_clear(s);
    free(s->chains);
    pfr_buf_free(&s->raw);
    pfr_store_space_close(s);
    free(s->path);
    free(s->cursor_dir);
    free(s);
}

/* ---- meta counters ---- */
/* Rows are created at their first use: counters added after schema version 2 (evicted_disk,
 * dropped_disk) and the writer's settings (max_bytes, reserve_bytes) need no migration. */
static int meta_upsert(pfr_store *s, const char *sql, const char *key, int64_t v)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, v);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : pfr_store_errno(rc);
}

int pfr_store_meta_add(pfr_store *s, const char *key, int64_t delta)
{
    return meta_upsert(s,
                       "INSERT INTO meta(key, value) VALUES (?1, ?2)"
                       " ON CONFLICT(key) DO UPDATE SET value = value + ?2",
                       key, delta);
}

int pfr_store_meta_set(pfr_store *s, const char *key, int64_t value)
{
    return meta_upsert(s,
                       "INSERT INTO meta(key, value) VALUES (?1, ?2)"
                       " ON CONFLICT(key) DO UPDATE SET value = ?2",
                       key, value);
}

/* ---- stats ---- */
static uint64_t file_size(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* The first row of a kept statement, its key bound to ?1 if given: column 0 into a, and column
 * 1 into b if given (zeros when there is no row). */
static int kept_row(pfr_store *s, enum pfr_store_stmt which, const char *key, int64_t *a,
                    int64_t *b)
{
    *a = 0;
    if (b)
        *b = 0;
    sqlite3_stmt *st = pfr_store_stmt(s, which);
    if (!st)
        return pfr_store_errno(sqlite3_errcode(s->db));
    if (key)
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *a = sqlite3_column_int64(st, 0);
        if (b)
            *b = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st); /* ends its read of the database */
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : pfr_store_errno(rc);
}

/* The cap in force and the file system, by the writer's settings: a writer's own, a reader's
 * from the meta rows the writer keeps (max_bytes 0: none, the reader's own then). */
static void stats_space(pfr_store *s, int64_t meta_max, int64_t meta_reserve, pfr_store_stats *out)
{
    bool theirs = s->read_only && meta_max > 0;
    uint64_t max = theirs ? (uint64_t)meta_max : s->max_bytes;
    out->max_bytes = out->effective_max_bytes = max;
    struct space_now n;
    if (pfr_store_space_measure(s, max, theirs ? (uint64_t)meta_reserve : UINT64_MAX, &n) != 0)
        return;
    out->effective_max_bytes = n.cap;
    out->cap_reason = (int)n.reason;
    out->reserve_bytes = n.reserve;
    out->fs_bytes = n.fs_bytes;
    out->fs_free_bytes = n.fs_avail;
}

/* The counters kept in the database (cheap: no chunk row is read). */
static int stats_counters(pfr_store *s, pfr_store_stats *out)
{
    static const char *const keys[] = {"evicted",      "lost_unshipped", "evicted_disk",
                                       "dropped_disk", "max_bytes",      "reserve_bytes"};
    int64_t seq = 0, v[6] = {0};
    int rc = kept_row(s, ST_CHUNK_SEQ, NULL, &seq, NULL);
    for (size_t i = 0; i < 6 && !rc; i++)
        rc = kept_row(s, ST_META_GET, keys[i], &v[i], NULL);
    /* the file is outside input: a counter below 0, or of chunks past the number ever
     * appended, is damage (or tampering) and is shown as a bound, never wrapped around */
    if (seq < 0) {
        seq = 0;
        out->bad_counters++;
    }
    out->appended = (uint64_t)seq;
    for (size_t i = 0; i < 4; i++)
        if (v[i] < 0 || v[i] > seq) {
            v[i] = v[i] < 0 ? 0 : seq;
            out->bad_counters++;
        }
    for (size_t i = 4; i < 6; i++)
        if (v[i] < 0) {
            v[i] = 0;
            out->bad_counters++;
        }
    out->evicted = (uint64_t)v[0];
    out->lost_unshipped = (uint64_t)v[1];
    out->evicted_disk = (uint64_t)v[2];
    out->dropped_disk = (uint64_t)v[3] + s->space.dropped_pending;
    stats_space(s, v[4], v[5], out);
    return rc;
}

static void stats_files(pfr_store *s, pfr_store_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->max_bytes = s->max_bytes;
    out->corrupt = s->corrupt;
    char wal[4200];
    snprintf(wal, sizeof(wal), "%s-wal", s->path);
    out->file_bytes = file_size(s->path) + file_size(wal) + file_size(s->space.spare_path);
}

int pfr_store_stats_get(pfr_store *s, pfr_store_stats *out)
{
    stats_files(s, out);
    sqlite3_stmt *st = NULL;
    int rc = pfr_store_exec(s, "BEGIN");
    if (rc)
        return rc;
    rc = sqlite3_prepare_v2(s->db,
                            "SELECT count(*), min(start_ns), max(end_ns), min(id), max(id),"
                            " coalesce(sum(nbytes), 0) FROM chunks",
                            -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        out->chunks = (uint64_t)sqlite3_column_int64(st, 0);
        out->oldest_ns = sqlite3_column_int64(st, 1);
        out->newest_ns = sqlite3_column_int64(st, 2);
        out->min_id = sqlite3_column_int64(st, 3);
        out->max_id = sqlite3_column_int64(st, 4);
        out->data_bytes = (uint64_t)sqlite3_column_int64(st, 5);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK) {
        int64_t v;
        rc = query_int(s, "SELECT coalesce(sum(nbytes), 0) FROM dicts", &v);
        out->data_bytes += (uint64_t)v;
        if (!rc)
            rc = stats_counters(s, out);
    } else {
        rc = pfr_store_errno(rc);
    }
    pfr_store_exec(s, "COMMIT");
    return rc;
}

int pfr_store_stats_quick(pfr_store *s, pfr_store_stats *out)
{
    stats_files(s, out);
    int rc = pfr_store_begin_read(s);
    if (rc)
        return rc;
    rc = kept_row(s, ST_FIRST_CHUNK, NULL, &out->min_id, &out->oldest_ns);
    if (!rc)
        rc = kept_row(s, ST_LAST_CHUNK, NULL, &out->max_id, &out->newest_ns);
    if (!rc)
        rc = stats_counters(s, out);
    if (!rc)
        out->chunks = out->appended >= out->evicted ? out->appended - out->evicted : 0;
    pfr_store_end_read(s);
    return rc;
}

/* ---- streams listing ---- */
int pfr_store_streams(pfr_store *s, pfr_stream_cb cb, void *ctx)
{
    int rc = pfr_store_exec(s, "BEGIN");
    if (rc)
        return rc;
    sqlite3_stmt *st = NULL;
    struct row {
        int64_t id, first, last;
        uint64_t chunks;
    } *rows = NULL;
    size_t n = 0, cap = 0;
    rc = pfr_store_streams_refresh(s);
    if (!rc && sqlite3_prepare_v2(s->db,
                                  "SELECT stream_id, count(*), min(start_ns), max(end_ns)"
                                  " FROM chunks GROUP BY stream_id ORDER BY stream_id",
                                  -1, &st, NULL) != SQLITE_OK)
        rc = pfr_store_errno(sqlite3_errcode(s->db));
    int step;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if (VEC_RESERVE(rows, cap, n + 1)) {
            rc = -ENOMEM;
            break;
        }
        rows[n++] =
            (struct row){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 2),
                         sqlite3_column_int64(st, 3), (uint64_t)sqlite3_column_int64(st, 1)};
    }
    if (!rc && step != SQLITE_DONE)
        rc = pfr_store_errno(step);
    sqlite3_finalize(st);
    pfr_store_exec(s, "COMMIT");
    for (size_t i = 0; !rc && i < n; i++) {
        const struct rstream *r = pfr_store_stream_get(s, rows[i].id);
        if (!r || r->bad)
            continue;
        pfr_stream_info info = {
            .id = r->id,
            .service = r->service,
            .labels = r->labels,
            .nlabels = r->nlabels,
            .types = r->types,
            .ntypes = r->ntypes,
            .chunks = rows[i].chunks,
            .first_ns = rows[i].first,
            .last_ns = rows[i].last,
        };
        rc = cb(&info, ctx);
    }
    free(rows);
    return rc;
}
