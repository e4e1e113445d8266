/* The store's floor: SQL helpers and meta (store_db.h). */
#include <errno.h>
#include <stdio.h>

#include "pfr_store.h"
#include "store_db.h"

static const char *const stmt_sql[ST_N] = {
    [ST_BEGIN] = "BEGIN",
    [ST_BEGIN_IMM] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_CHUNK_DATA] = "SELECT data FROM chunk_data WHERE id = ?1",
    [ST_CHUNK_EXISTS] = "SELECT crc FROM chunks WHERE id = ?1",
    [ST_LAYERS] = ("SELECT id, stream_id, parent_id, crc, data FROM dicts"
                   " WHERE base_id = ?1 AND id > ?2 AND id <= ?3 ORDER BY id"),
    [ST_STREAMS_NEW] = "SELECT id, service, labels, types FROM streams WHERE id > ?1 ORDER BY id",
    /* the quick statistics, after every interval: by rowid, a b-tree descent each */
    [ST_FIRST_CHUNK] = "SELECT id, start_ns FROM chunks ORDER BY id LIMIT 1",
    [ST_LAST_CHUNK] = "SELECT id, end_ns FROM chunks ORDER BY id DESC LIMIT 1",
    [ST_CHUNK_SEQ] = "SELECT seq FROM sqlite_sequence WHERE name = 'chunks'",
    [ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
    [ST_PIN_COUNT] = "SELECT count(*) FROM pins",
};
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

int pfr_st_fail(struct store_db *s, int e, char *err, size_t errlen, const char *msg)
{
    if (err && errlen) {
        if (s && s->db && sqlite3_errcode(s->db) != SQLITE_OK)
            snprintf(err, errlen, "%s: %s", msg, sqlite3_errmsg(s->db));
        else
            snprintf(err, errlen, "%s", msg);
    }
    return e;
}

int pfr_st_exec(struct store_db *s, const char *sql)
{
    return pfr_store_errno(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

sqlite3_stmt *pfr_st_prepare(struct store_db *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
        return NULL;
    return st;
}

sqlite3_stmt *pfr_st_stmt(struct store_db *s, enum pfr_st_stmt which)
{
    if (!s->st[which])
        s->st[which] = pfr_st_prepare(s, stmt_sql[which]);
    if (s->st[which]) {
        sqlite3_reset(s->st[which]);
        sqlite3_clear_bindings(s->st[which]);
    }
    return s->st[which];
}

int pfr_st_begin_read(struct store_db *s)
{
    sqlite3_stmt *st = pfr_st_stmt(s, ST_BEGIN);
    return st ? pfr_st_step_done(st) : pfr_store_errno(sqlite3_errcode(s->db));
}

void pfr_st_end_read(struct store_db *s)
{
    sqlite3_stmt *st = pfr_st_stmt(s, ST_COMMIT);
    if (st)
        pfr_st_step_done(st);
}

int pfr_st_step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : pfr_store_errno(rc);
}

/* A single integer from a query (0 when no row). */
int pfr_st_query_int(struct store_db *s, const char *sql, int64_t *out)
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
/* ---- meta counters ---- */
/* Rows are created at their first use: counters added after schema version 2 (evicted_disk,
 * dropped_disk) and the writer's settings (max_bytes, reserve_bytes) need no migration. */
static int meta_upsert(struct store_db *s, const char *sql, const char *key, int64_t v)
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

int pfr_st_meta_add(struct store_db *s, const char *key, int64_t delta)
{
    return meta_upsert(s,
                       "INSERT INTO meta(key, value) VALUES (?1, ?2)"
                       " ON CONFLICT(key) DO UPDATE SET value = value + ?2",
                       key, delta);
}

int pfr_st_meta_set(struct store_db *s, const char *key, int64_t value)
{
    return meta_upsert(s,
                       "INSERT INTO meta(key, value) VALUES (?1, ?2)"
                       " ON CONFLICT(key) DO UPDATE SET value = ?2",
                       key, value);
}

int pfr_st_db_err(struct store_db *d)
{
    return pfr_store_errno(sqlite3_errcode(d->db));
}

void pfr_st_db_close(struct store_db *d)
{
    for (int i = 0; i < ST_N; i++) {
        sqlite3_finalize(d->st[i]);
        d->st[i] = NULL;
    }
    if (d->db)
        sqlite3_close_v2(d->db);
    d->db = NULL;
}
