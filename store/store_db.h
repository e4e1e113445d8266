/*
 * The store's floor (layer 1, internal): one SQLite connection with its kept statements, the
 * mapping of SQLite's codes to errno values, and the meta table's counters and settings. Knows
 * no stream, dictionary or chunk. Layers: docs/store.md, "Layers".
 */
#ifndef PFR_STORE_DB_H
#define PFR_STORE_DB_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

enum store_stmt {
    ST_BEGIN,
    ST_BEGIN_IMM,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_CHUNK_DATA,
    ST_CHUNK_EXISTS,
    ST_LAYERS,
    ST_STREAMS_NEW,
    ST_FIRST_CHUNK,
    ST_LAST_CHUNK,
    ST_CHUNK_SEQ,
    ST_META_GET,
    ST_PIN_COUNT,
    ST_N
};

struct store_db {
    sqlite3 *db;
    sqlite3_stmt *st[ST_N];
    uint32_t page_size;
    int busy_ms;
};

/* Finalize the statements and close the connection (the struct may be partly set up). */
void store_db_close(struct store_db *d);

/* Fill err with msg and, when d has one, SQLite's message; returns e. d may be NULL. */
int store_fail(struct store_db *d, int e, char *err, size_t errlen, const char *msg);
/* The errno of the connection's last error. */
int store_db_err(struct store_db *d);
int store_exec(struct store_db *d, const char *sql);
/* A cached prepared statement, reset and with bindings cleared. */
sqlite3_stmt *store_stmt(struct store_db *d, enum store_stmt which);
sqlite3_stmt *store_prepare(struct store_db *d, const char *sql);
int store_step_done(sqlite3_stmt *st);
/* A single integer from a query (0 when no row). */
int store_query_int(struct store_db *d, const char *sql, int64_t *out);
/* A read transaction by the kept BEGIN and COMMIT statements (no parse each time). */
int store_begin_read(struct store_db *d);
void store_end_read(struct store_db *d);

/* Meta rows (created at their first use): add to a counter, set a value. */
int store_meta_add(struct store_db *d, const char *key, int64_t delta);
int store_meta_set(struct store_db *d, const char *key, int64_t value);

#endif
