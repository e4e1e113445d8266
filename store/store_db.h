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

enum pfr_st_stmt {
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
void pfr_st_db_close(struct store_db *d);

/* Fill err with msg and, when d has one, SQLite's message; returns e. d may be NULL. */
int pfr_st_fail(struct store_db *d, int e, char *err, size_t errlen, const char *msg);
/* The errno of the connection's last error. */
int pfr_st_db_err(struct store_db *d);
int pfr_st_exec(struct store_db *d, const char *sql);
/* A cached prepared statement, reset and with bindings cleared. */
sqlite3_stmt *pfr_st_stmt(struct store_db *d, enum pfr_st_stmt which);
sqlite3_stmt *pfr_st_prepare(struct store_db *d, const char *sql);
int pfr_st_step_done(sqlite3_stmt *st);
/* A single integer from a query (0 when no row). */
int pfr_st_query_int(struct store_db *d, const char *sql, int64_t *out);
/* A read transaction by the kept BEGIN and COMMIT statements (no parse each time). */
int pfr_st_begin_read(struct store_db *d);
void pfr_st_end_read(struct store_db *d);

/* Meta rows (created at their first use): add to a counter, set a value. */
int pfr_st_meta_add(struct store_db *d, const char *key, int64_t delta);
int pfr_st_meta_set(struct store_db *d, const char *key, int64_t value);

#endif
