/*
 * Schema and migrations (store_migrate.h): the current schema, one function per step from an
 * older version, and the reader's check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "store_migrate.h"

/* The current schema. Version 1 had no chunks.totals (timelines had to decode every chunk);
 * version 2 no chunks.tier (every chunk was as recorded: no roll-ups). */
static const char schema_v3[] =
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
    "  totals BLOB NOT NULL, tier INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX chunks_stream ON chunks(stream_id, end_ns, start_ns);"
    "CREATE INDEX chunks_base ON chunks(base_id);"
    "CREATE INDEX chunks_tier ON chunks(tier, start_ns);"
    "CREATE TABLE chunk_data(id INTEGER PRIMARY KEY, data BLOB NOT NULL);";
/* 1 -> 2: chunks get their per-type totals, so timelines need not decode payloads. */
static int migrate_1_2(struct store_db *s, struct store_dict *dict)
{
    int rc = store_exec(s, "ALTER TABLE chunks ADD COLUMN totals BLOB NOT NULL DEFAULT x''");
    if (rc || (rc = store_streams_refresh(dict)) != 0)
        return rc;
    struct store_chunk_ref *refs = NULL;
    size_t n = 0, cap = 0;
    struct dchunk dc = {0};
    pfr_buf tot = {0};
    sqlite3_stmt *sel = NULL, *upd = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, stream_id, base_id, dict_id, start_ns, end_ns, crc"
                           " FROM chunks ORDER BY id",
                           -1, &sel, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db, "UPDATE chunks SET totals = ?2 WHERE id = ?1", -1, &upd, NULL) !=
            SQLITE_OK)
        rc = store_db_err(s);
    int step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(sel)) == SQLITE_ROW) {
        if (VEC_RESERVE(refs, cap, n + 1)) {
            rc = -ENOMEM;
            break;
        }
        refs[n++] = (struct store_chunk_ref){
            sqlite3_column_int64(sel, 0),          sqlite3_column_int64(sel, 1),
            sqlite3_column_int64(sel, 2),          sqlite3_column_int64(sel, 3),
            sqlite3_column_int64(sel, 4),          sqlite3_column_int64(sel, 5),
            (uint32_t)sqlite3_column_int64(sel, 6)};
    }
    if (!rc && step != SQLITE_DONE)
        rc = pfr_store_errno(step);
    for (size_t i = 0; i < n && !rc; i++) {
        const struct chain *d;
        int lr =
            store_chunk_load(dict, &refs[i], store_stream_get(dict, refs[i].stream_id), &dc, &d);
        if (lr)
            continue; /* corrupt: left with no totals, readers will count it */
        store_totals_encode(&tot, dc.totals, dc.ntypes);
        if (pfr_buf_err(&tot)) {
            rc = pfr_buf_err(&tot);
            break;
        }
        sqlite3_reset(upd);
        sqlite3_bind_int64(upd, 1, refs[i].id);
        sqlite3_bind_blob(upd, 2, tot.data, (int)tot.len, SQLITE_STATIC);
        rc = store_step_done(upd);
    }
    sqlite3_finalize(sel);
    sqlite3_finalize(upd);
    pfr_buf_free(&tot);
    store_dchunk_free(&dc);
    free(refs);
    return rc ? rc : store_exec(s, "PRAGMA user_version = 2");
}

/* 2 -> 3: chunks get their tier (retention's roll-ups, store_retention.c); every chunk of an
 * older file is as recorded, tier 0. */
static int migrate_2_3(struct store_db *s, struct store_dict *dict)
{
    (void)dict;
    int rc = store_exec(s, "ALTER TABLE chunks ADD COLUMN tier INTEGER NOT NULL DEFAULT 0");
    if (!rc)
        rc = store_exec(s, "CREATE INDEX chunks_tier ON chunks(tier, start_ns)");
    return rc ? rc : store_exec(s, "PRAGMA user_version = 3");
}

static int migrate(struct store_db *s, struct store_dict *dict, int from, char *err, size_t errlen)
{
    static int (*const steps[])(struct store_db *, struct store_dict *) = {
        [1] = migrate_1_2,
        [2] = migrate_2_3,
    };
    for (int v = from; v < PFR_STORE_SCHEMA_VERSION; v++) {
        int rc = steps[v](s, dict);
        if (rc) {
            char msg[96];
            snprintf(msg, sizeof(msg), "migrating the store from schema %d to %d", v, v + 1);
            return store_fail(s, rc, err, errlen, msg);
        }
    }
    return 0;
}

int store_schema_write(struct store_db *s, struct store_dict *dict, char *err, size_t errlen)
{
    int64_t ver, ntables, app;
    int rc = store_exec(s, "BEGIN IMMEDIATE");
    if (rc)
        return store_fail(s, rc, err, errlen, "cannot lock the store");
    if ((rc = store_query_int(s, "PRAGMA user_version", &ver)) ||
        (rc = store_query_int(s, "SELECT count(*) FROM sqlite_master", &ntables)) ||
        (rc = store_query_int(s, "PRAGMA application_id", &app))) {
        store_fail(s, rc, err, errlen, "cannot read the store's schema");
        goto fail;
    }
    if (ntables > 0 && app != PFR_STORE_APP_ID) {
        rc = store_fail(NULL, -EBADMSG, err, errlen, "not a pfr store (other SQLite database)");
        goto fail;
    }
    if (ntables == 0) {
        char sql[128];
        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d;",
                 PFR_STORE_APP_ID, PFR_STORE_SCHEMA_VERSION);
        if ((rc = store_exec(s, schema_v3)) || (rc = store_exec(s, sql))) {
            store_fail(s, rc, err, errlen, "cannot create the schema");
            goto fail;
        }
    } else if (ver > PFR_STORE_SCHEMA_VERSION || ver < 1) {
        char msg[128];
        snprintf(msg, sizeof(msg), "store schema version %lld is not one this pfr knows (%d)",
                 (long long)ver, PFR_STORE_SCHEMA_VERSION);
        rc = store_fail(NULL, -EPROTO, err, errlen, msg);
        goto fail;
    } else if (ver < PFR_STORE_SCHEMA_VERSION) {
        if ((rc = migrate(s, dict, (int)ver, err, errlen)) != 0)
            goto fail;
    }
    if ((rc = store_exec(s, "COMMIT")) != 0)
        return store_fail(s, rc, err, errlen, "cannot commit the schema");
    return 0;
fail:
    store_exec(s, "ROLLBACK");
    return rc;
}

int store_schema_check(struct store_db *s, char *err, size_t errlen)
{
    int64_t ver, app, ntables;
    int rc = store_exec(s, "BEGIN");
    if (!rc && !(rc = store_query_int(s, "SELECT count(*) FROM sqlite_master", &ntables)) &&
        !(rc = store_query_int(s, "PRAGMA user_version", &ver)))
        rc = store_query_int(s, "PRAGMA application_id", &app);
    store_exec(s, "COMMIT");
    if (rc)
        return store_fail(s, rc, err, errlen, "cannot read the store's schema");
    if (ntables == 0)
        return store_fail(NULL, -ENOENT, err, errlen, "the store is empty (no writer created it)");
    if (app != PFR_STORE_APP_ID)
        return store_fail(NULL, -EBADMSG, err, errlen, "not a pfr store (other SQLite database)");
    if (ver != PFR_STORE_SCHEMA_VERSION) {
        char msg[160];
        snprintf(msg, sizeof(msg), "store schema version %lld, this pfr reads %d%s", (long long)ver,
                 PFR_STORE_SCHEMA_VERSION,
                 ver < PFR_STORE_SCHEMA_VERSION ? ": open it read-write once to migrate it" : "");
        return store_fail(NULL, -EPROTO, err, errlen, msg);
    }
    return 0;
}
