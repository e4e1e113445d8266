/*
 * Schema and migrations (store_migrate.h): the current schema, one function per step from an
 * older version, and the reader's check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "store_migrate.h"

/* Pins (version 3): ranges kept from eviction (store_pins.c). labels: "k=v" lines; bytes: what
 * the pin kept when it was made (listings measure it again). */
#define PINS_TABLE                                                                                 \
    "CREATE TABLE pins(id INTEGER PRIMARY KEY AUTOINCREMENT, from_ns INTEGER NOT NULL,"            \
    "  to_ns INTEGER NOT NULL, service TEXT, labels TEXT NOT NULL DEFAULT '',"                     \
    "  reason TEXT NOT NULL, origin TEXT NOT NULL, created_ns INTEGER NOT NULL,"                   \
    "  bytes INTEGER NOT NULL DEFAULT 0);"

/* The current schema. Version 1 had no chunks.totals (timelines had to decode every chunk),
 * version 2 no pins, version 3 no chunks.tier (every chunk was as recorded: no roll-ups);
 * version 4 has these tables, but each dictionary chain was of one stream: since 5 the streams
 * of one service and sample types share chains (a layer's stream_id is the stream that wrote
 * it), which readers of 4 would count as corrupt. The indexes the tiers' measure reads are
 * covering_indexes (below), made after it. */
static const char schema_v5[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO meta VALUES ('evicted', 0), ('lost_unshipped', 0), ('corrupt', 0);"
    "CREATE TABLE streams(id INTEGER PRIMARY KEY AUTOINCREMENT, key BLOB NOT NULL UNIQUE,"
    "  service TEXT NOT NULL, labels BLOB NOT NULL, types BLOB NOT NULL);"
    "CREATE TABLE dicts(id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL,"
    "  base_id INTEGER NOT NULL, parent_id INTEGER NOT NULL, nbytes INTEGER NOT NULL,"
    "  crc INTEGER NOT NULL, data BLOB NOT NULL);"
    "CREATE TABLE chunks(id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL,"
    "  base_id INTEGER NOT NULL, dict_id INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
    "  end_ns INTEGER NOT NULL, nbytes INTEGER NOT NULL, crc INTEGER NOT NULL,"
    "  totals BLOB NOT NULL, tier INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX chunks_stream ON chunks(stream_id, end_ns, start_ns);"
    "CREATE TABLE chunk_data(id INTEGER PRIMARY KEY, data BLOB NOT NULL);" PINS_TABLE;
/* Indexes that hold what the tiers' measure reads (store_retention.c, measure(): the bytes of
 * every chunk and dictionary row by tier and chain), so that it reads no row (200 streams in a
 * full ring measure some 750 times an hour); (tier, id) still gives the roll-ups' picks a tier's
 * chunks in id order. Made at every writer's open (no schema version: builds before them read
 * and write such a file, and SQLite keeps every index up to date); the narrower ones go. A new
 * file gets them the same way, after schema_v5. */
static const char covering_indexes[] =
    "CREATE INDEX IF NOT EXISTS dicts_base_nbytes ON dicts(base_id, id, nbytes);"
    "CREATE INDEX IF NOT EXISTS chunks_base_tier ON chunks(base_id, tier);"
    "CREATE INDEX IF NOT EXISTS chunks_tier_id ON chunks(tier, id, nbytes);"
    "DROP INDEX IF EXISTS dicts_base; DROP INDEX IF EXISTS chunks_base;"
    "DROP INDEX IF EXISTS chunks_tier;";

/* 1 -> 2: chunks get their per-type totals, so timelines need not decode payloads. */
static int migrate_1_2(struct store_db *s, struct store_dict *dict)
{
    int rc = pfr_st_exec(s, "ALTER TABLE chunks ADD COLUMN totals BLOB NOT NULL DEFAULT x''");
    if (rc || (rc = pfr_st_streams_refresh(dict)) != 0)
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
        rc = pfr_st_db_err(s);
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
            pfr_st_chunk_load(dict, &refs[i], pfr_st_stream_get(dict, refs[i].stream_id), &dc, &d);
        if (lr)
            continue; /* corrupt: left with no totals, readers will count it */
        pfr_st_totals_encode(&tot, dc.totals, dc.ntypes);
        if (pfr_buf_err(&tot)) {
            rc = pfr_buf_err(&tot);
            break;
        }
        sqlite3_reset(upd);
        sqlite3_bind_int64(upd, 1, refs[i].id);
        sqlite3_bind_blob(upd, 2, tot.data, (int)tot.len, SQLITE_STATIC);
        rc = pfr_st_step_done(upd);
    }
    sqlite3_finalize(sel);
    sqlite3_finalize(upd);
    pfr_buf_free(&tot);
    pfr_st_dchunk_free(&dc);
    free(refs);
    return rc ? rc : pfr_st_exec(s, "PRAGMA user_version = 2");
}

/* 2 -> 3: the pins table (empty: nothing was pinned before). */
static int migrate_2_3(struct store_db *s, struct store_dict *dict)
{
    (void)dict;
    int rc = pfr_st_exec(s, PINS_TABLE);
    return rc ? rc : pfr_st_exec(s, "PRAGMA user_version = 3");
}

/* 3 -> 4: chunks get their tier (retention's roll-ups, store_retention.c); every chunk of an
 * older file is as recorded, tier 0. */
static int migrate_3_4(struct store_db *s, struct store_dict *dict)
{
    (void)dict;
    int rc = pfr_st_exec(s, "ALTER TABLE chunks ADD COLUMN tier INTEGER NOT NULL DEFAULT 0");
    if (!rc)
        rc = pfr_st_exec(s, "CREATE INDEX chunks_tier ON chunks(tier)");
    return rc ? rc : pfr_st_exec(s, "PRAGMA user_version = 4");
}

/* 4 -> 5: chains shared by the streams of one service and sample types. The rows need nothing:
 * a chain of one stream is a shared chain with one stream; the version tells pfr builds before
 * this that they cannot read the file (they would count chunks of a shared chain corrupt). */
static int migrate_4_5(struct store_db *s, struct store_dict *dict)
{
    (void)dict;
    return pfr_st_exec(s, "PRAGMA user_version = 5");
}

static int migrate(struct store_db *s, struct store_dict *dict, int from, char *err, size_t errlen)
{
    static int (*const steps[])(struct store_db *, struct store_dict *) = {
        [1] = migrate_1_2,
        [2] = migrate_2_3,
        [3] = migrate_3_4,
        [4] = migrate_4_5,
    };
    for (int v = from; v < PFR_STORE_SCHEMA_VERSION; v++) {
        int rc = steps[v](s, dict);
        if (rc) {
            char msg[96];
            snprintf(msg, sizeof(msg), "migrating the store from schema %d to %d", v, v + 1);
            return pfr_st_fail(s, rc, err, errlen, msg);
        }
    }
    return 0;
}

int pfr_st_schema_write(struct store_db *s, struct store_dict *dict, char *err, size_t errlen)
{
    int64_t ver, ntables, app;
    int rc = pfr_st_exec(s, "BEGIN IMMEDIATE");
    if (rc)
        return pfr_st_fail(s, rc, err, errlen, "cannot lock the store");
    if ((rc = pfr_st_query_int(s, "PRAGMA user_version", &ver)) ||
        (rc = pfr_st_query_int(s, "SELECT count(*) FROM sqlite_master", &ntables)) ||
        (rc = pfr_st_query_int(s, "PRAGMA application_id", &app))) {
        pfr_st_fail(s, rc, err, errlen, "cannot read the store's schema");
        goto fail;
    }
    if (ntables > 0 && app != PFR_STORE_APP_ID) {
        rc = pfr_st_fail(NULL, -EBADMSG, err, errlen, "not a pfr store (other SQLite database)");
        goto fail;
    }
    if (ntables == 0) {
        char sql[128];
        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d;",
                 PFR_STORE_APP_ID, PFR_STORE_SCHEMA_VERSION);
        if ((rc = pfr_st_exec(s, schema_v5)) || (rc = pfr_st_exec(s, sql))) {
            pfr_st_fail(s, rc, err, errlen, "cannot create the schema");
            goto fail;
        }
    } else if (ver > PFR_STORE_SCHEMA_VERSION || ver < 1) {
        char msg[128];
        snprintf(msg, sizeof(msg), "store schema version %lld is not one this pfr knows (%d)",
                 (long long)ver, PFR_STORE_SCHEMA_VERSION);
        rc = pfr_st_fail(NULL, -EPROTO, err, errlen, msg);
        goto fail;
    } else if (ver < PFR_STORE_SCHEMA_VERSION) {
        if ((rc = migrate(s, dict, (int)ver, err, errlen)) != 0)
            goto fail;
    }
    if ((rc = pfr_st_exec(s, covering_indexes)) != 0) {
        pfr_st_fail(s, rc, err, errlen, "cannot make the store's indexes");
        goto fail;
    }
    if ((rc = pfr_st_exec(s, "COMMIT")) != 0)
        return pfr_st_fail(s, rc, err, errlen, "cannot commit the schema");
    return 0;
fail:
    pfr_st_exec(s, "ROLLBACK");
    return rc;
}

int pfr_st_schema_check(struct store_db *s, char *err, size_t errlen)
{
    int64_t ver, app, ntables;
    int rc = pfr_st_exec(s, "BEGIN");
    if (!rc && !(rc = pfr_st_query_int(s, "SELECT count(*) FROM sqlite_master", &ntables)) &&
        !(rc = pfr_st_query_int(s, "PRAGMA user_version", &ver)))
        rc = pfr_st_query_int(s, "PRAGMA application_id", &app);
    pfr_st_exec(s, "COMMIT");
    if (rc)
        return pfr_st_fail(s, rc, err, errlen, "cannot read the store's schema");
    if (ntables == 0)
        return pfr_st_fail(NULL, -ENOENT, err, errlen, "the store is empty (no writer created it)");
    if (app != PFR_STORE_APP_ID)
        return pfr_st_fail(NULL, -EBADMSG, err, errlen, "not a pfr store (other SQLite database)");
    if (ver < PFR_STORE_SCHEMA_READ_MIN || ver > PFR_STORE_SCHEMA_VERSION) {
        char msg[160];
        snprintf(msg, sizeof(msg), "store schema version %lld, this pfr reads %d%s", (long long)ver,
                 PFR_STORE_SCHEMA_VERSION,
                 ver < PFR_STORE_SCHEMA_VERSION ? ": open it read-write once to migrate it" : "");
        return pfr_st_fail(NULL, -EPROTO, err, errlen, msg);
    }
    return 0;
}
