#include "state.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfr_store.h"

#define STATE_VERSION 1

struct pfr_state {
    sqlite3 *db;
    bool read_only;
    /* The sink table's columns added to files of older shippers: which this file has. */
    bool has_later[3];
};

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS sink ("
    " name TEXT PRIMARY KEY, kind TEXT NOT NULL,"
    " cursor INTEGER NOT NULL DEFAULT 0,"
    " pending_after INTEGER NOT NULL DEFAULT 0, pending_max INTEGER NOT NULL DEFAULT 0,"
    " pending_limit INTEGER NOT NULL DEFAULT 0, pending_token TEXT NOT NULL DEFAULT '',"
    " batch_limit INTEGER NOT NULL DEFAULT 0,"
    " attempts INTEGER NOT NULL DEFAULT 0, next_attempt_ns INTEGER NOT NULL DEFAULT 0,"
    " last_attempt_ns INTEGER NOT NULL DEFAULT 0, last_success_ns INTEGER NOT NULL DEFAULT 0,"
    " last_error_ns INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',"
    " delivered_chunks INTEGER NOT NULL DEFAULT 0, delivered_bytes INTEGER NOT NULL DEFAULT 0,"
    " rejected_chunks INTEGER NOT NULL DEFAULT 0, lost_chunks INTEGER NOT NULL DEFAULT 0,"
    " corrupt_chunks INTEGER NOT NULL DEFAULT 0, retries INTEGER NOT NULL DEFAULT 0,"
    " sink_failures INTEGER NOT NULL DEFAULT 0, skipped_chunks INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS rejected ("
    " sink TEXT NOT NULL, chunk_id INTEGER NOT NULL, status INTEGER NOT NULL,"
    " reason TEXT NOT NULL, at_ns INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 1,"
    " PRIMARY KEY (sink, chunk_id)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS backfill ("
    " sink TEXT NOT NULL, from_ns INTEGER NOT NULL, to_ns INTEGER NOT NULL,"
    " last_id INTEGER NOT NULL, done INTEGER NOT NULL, updated_ns INTEGER NOT NULL,"
    " PRIMARY KEY (sink, from_ns, to_ns)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    /* chunks past the cursor a sink took out of order (pinned ranges first): sent 0 = in the
     * batch in flight, 1 = delivered (skipped when the cursor gets there, then forgotten) */
    "CREATE TABLE IF NOT EXISTS ahead ("
    " sink TEXT NOT NULL, chunk_id INTEGER NOT NULL, sent INTEGER NOT NULL,"
    " PRIMARY KEY (sink, chunk_id)) WITHOUT ROWID;";

/* Files SQLite keeps beside the database; it creates them with the database file's mode. */
static const char *const side_files[] = {"", "-wal", "-shm", "-journal"};

/* Make the file and its side files 0600 (files of an older shipper may be 0644). */
static void make_private(const char *path)
{
    for (size_t i = 0; i < sizeof(side_files) / sizeof(side_files[0]); i++) {
        char p[4200];
        struct stat sb;
        if (snprintf(p, sizeof(p), "%s%s", path, side_files[i]) >= (int)sizeof(p))
            continue;
        if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
            (sb.st_mode & 077))
            chmod(p, 0600);
    }
}

/* The sink table's counters added later, in the order of has_later, and their values in a row
 * written before the column existed (or by a shipper that does not know it). ring_lost_seen's
 * is -1, "not known": that shipper counted its losses itself, from the ids missing after its
 * cursor, and the ring's count for it may hold them already (pfr_sink_state). */
static const char *const later_columns[] = {"sink_failures", "skipped_chunks", "ring_lost_seen"};
static const char *const later_defaults[] = {"0", "0", "-1"};

/* Columns added later: a file of an older shipper gets them (still readable by that shipper,
 * which names its columns); read as it is (read-only), they count 0. */
static int later_columns_add(pfr_state *st)
{
    for (size_t i = 0; i < sizeof(later_columns) / sizeof(later_columns[0]); i++) {
        char sql[128];
        sqlite3_stmt *s = NULL;
        snprintf(sql, sizeof(sql), "SELECT %s FROM sink", later_columns[i]);
        st->has_later[i] = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) == SQLITE_OK;
        sqlite3_finalize(s);
        if (st->has_later[i] || st->read_only)
            continue;
        snprintf(sql, sizeof(sql), "ALTER TABLE sink ADD COLUMN %s INTEGER NOT NULL DEFAULT %s",
                 later_columns[i], later_defaults[i]);
        int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            return rc;
        st->has_later[i] = true;
    }
    return SQLITE_OK;
}

int pfr_state_open(const char *path, bool read_only, pfr_state **out, char *err, size_t errlen)
{
    pfr_state *st = calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    st->read_only = read_only;
    int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    /* The file and the -wal/-shm that WAL mode makes are born private: the process is still
     * single-threaded here, so the umask change touches nothing else. */
    mode_t old_mask = umask(077);
    if (!read_only)
        make_private(path);
    int rc = sqlite3_open_v2(path, &st->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    const char *what = "open";
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(st->db, 5000);
    if (rc == SQLITE_OK && !read_only) {
        what = "set up";
        rc = sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL,
                          NULL);
    }
    umask(old_mask);
    if (rc == SQLITE_OK && !read_only)
        make_private(path);
    int version = 0;
    if (rc == SQLITE_OK) {
        sqlite3_stmt *s;
        what = "read";
        rc = sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL);
        if (rc == SQLITE_OK) {
            if (sqlite3_step(s) == SQLITE_ROW)
                version = sqlite3_column_int(s, 0);
            rc = sqlite3_finalize(s);
        }
    }
    if (rc == SQLITE_OK && version > STATE_VERSION) {
        snprintf(err, errlen, "state %s: version %d is newer than this shipper's (%d)", path,
                 version, STATE_VERSION);
        pfr_state_close(st);
        return -EPROTO;
    }
    if (rc == SQLITE_OK && !read_only && version < STATE_VERSION) {
        what = "create";
        rc = sqlite3_exec(st->db, schema, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(st->db, "PRAGMA user_version=1", NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK)
        rc = later_columns_add(st);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "state %s: cannot %s: %s", path, what,
                 st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
        int e = pfr_store_errno(rc);
        pfr_state_close(st);
        return e ? e : -EIO;
    }
    *out = st;
    return 0;
}

void pfr_state_close(pfr_state *st)
{
    if (!st)
        return;
    sqlite3_close_v2(st->db);
    free(st);
}

static int exec(pfr_state *st, const char *sql)
{
    return pfr_store_errno(sqlite3_exec(st->db, sql, NULL, NULL, NULL));
}

int pfr_state_begin(pfr_state *st)
{
    return exec(st, "BEGIN IMMEDIATE");
}

int pfr_state_commit(pfr_state *st)
{
    return exec(st, "COMMIT");
}

void pfr_state_rollback(pfr_state *st)
{
    exec(st, "ROLLBACK");
}

static int prep(pfr_state *st, const char *sql, sqlite3_stmt **s)
{
    return pfr_store_errno(sqlite3_prepare_v2(st->db, sql, -1, s, NULL));
}

static void copy_text(char *dst, size_t cap, const unsigned char *src)
{
    snprintf(dst, cap, "%s", src ? (const char *)src : "");
}

#define SINK_COLS                                                                                  \
    "name, kind, cursor, pending_after, pending_max, pending_limit, pending_token, batch_limit,"   \
    " attempts, next_attempt_ns, last_attempt_ns, last_success_ns, last_error_ns, last_error,"     \
    " delivered_chunks, delivered_bytes, rejected_chunks, lost_chunks, corrupt_chunks, retries"

static void row_to_state(sqlite3_stmt *s, pfr_sink_state *o)
{
    memset(o, 0, sizeof(*o));
    copy_text(o->name, sizeof(o->name), sqlite3_column_text(s, 0));
    copy_text(o->kind, sizeof(o->kind), sqlite3_column_text(s, 1));
    o->cursor = sqlite3_column_int64(s, 2);
    o->pending_after = sqlite3_column_int64(s, 3);
    o->pending_max = sqlite3_column_int64(s, 4);
    o->pending_limit = (uint64_t)sqlite3_column_int64(s, 5);
    copy_text(o->pending_token, sizeof(o->pending_token), sqlite3_column_text(s, 6));
    o->batch_limit = (uint64_t)sqlite3_column_int64(s, 7);
    o->attempts = (uint32_t)sqlite3_column_int64(s, 8);
    o->next_attempt_ns = sqlite3_column_int64(s, 9);
    o->last_attempt_ns = sqlite3_column_int64(s, 10);
    o->last_success_ns = sqlite3_column_int64(s, 11);
    o->last_error_ns = sqlite3_column_int64(s, 12);
    copy_text(o->last_error, sizeof(o->last_error), sqlite3_column_text(s, 13));
    o->delivered_chunks = (uint64_t)sqlite3_column_int64(s, 14);
    o->delivered_bytes = (uint64_t)sqlite3_column_int64(s, 15);
    o->rejected_chunks = (uint64_t)sqlite3_column_int64(s, 16);
    o->lost_chunks = (uint64_t)sqlite3_column_int64(s, 17);
    o->corrupt_chunks = (uint64_t)sqlite3_column_int64(s, 18);
    o->retries = (uint64_t)sqlite3_column_int64(s, 19);
    o->sink_failures = (uint64_t)sqlite3_column_int64(s, 20);
    o->skipped_chunks = (uint64_t)sqlite3_column_int64(s, 21);
    int64_t seen = sqlite3_column_int64(s, 22);
    o->ring_lost_seen = seen > 0 ? (uint64_t)seen : 0;
    o->ring_lost_unknown = seen < 0;
}

/* SELECT the sink columns, then tail. */
static int prep_sinks(pfr_state *st, const char *tail, sqlite3_stmt **s)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT " SINK_COLS ", %s, %s, %s FROM sink %s",
             st->has_later[0] ? later_columns[0] : "0", st->has_later[1] ? later_columns[1] : "0",
             st->has_later[2] ? later_columns[2] : later_defaults[2], tail);
    return prep(st, sql, s);
}

int pfr_state_sink_get(pfr_state *st, const char *name, const char *kind, pfr_sink_state *out)
{
    for (int pass = 0; pass < 2; pass++) {
        sqlite3_stmt *s;
        int rc = prep_sinks(st, "WHERE name = ?", &s);
        if (rc)
            return rc;
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        int step = sqlite3_step(s);
        if (step == SQLITE_ROW)
            row_to_state(s, out);
        rc = pfr_store_errno(sqlite3_finalize(s));
        if (rc)
            return rc;
        if (step == SQLITE_ROW)
            return 0;
        if (st->read_only || pass)
            return -ENOENT;
        if ((rc = prep(st, "INSERT OR IGNORE INTO sink (name, kind) VALUES (?, ?)", &s)))
            return rc;
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, kind ? kind : "", -1, SQLITE_STATIC);
        sqlite3_step(s);
        if ((rc = pfr_store_errno(sqlite3_finalize(s))))
            return rc;
    }
    return -ENOENT;
}

int pfr_state_sink_put(pfr_state *st, const pfr_sink_state *o)
{
    sqlite3_stmt *s;
    int rc = prep(st,
                  "INSERT OR REPLACE INTO sink (" SINK_COLS
                  ", sink_failures, skipped_chunks, ring_lost_seen) "
                  "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                  &s);
    if (rc)
        return rc;
    int i = 1;
    sqlite3_bind_text(s, i++, o->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, i++, o->kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, i++, o->cursor);
    sqlite3_bind_int64(s, i++, o->pending_after);
    sqlite3_bind_int64(s, i++, o->pending_max);
    sqlite3_bind_int64(s, i++, (int64_t)o->pending_limit);
    sqlite3_bind_text(s, i++, o->pending_token, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, i++, (int64_t)o->batch_limit);
    sqlite3_bind_int64(s, i++, o->attempts);
    sqlite3_bind_int64(s, i++, o->next_attempt_ns);
    sqlite3_bind_int64(s, i++, o->last_attempt_ns);
    sqlite3_bind_int64(s, i++, o->last_success_ns);
    sqlite3_bind_int64(s, i++, o->last_error_ns);
    sqlite3_bind_text(s, i++, o->last_error, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, i++, (int64_t)o->delivered_chunks);
    sqlite3_bind_int64(s, i++, (int64_t)o->delivered_bytes);
    sqlite3_bind_int64(s, i++, (int64_t)o->rejected_chunks);
    sqlite3_bind_int64(s, i++, (int64_t)o->lost_chunks);
    sqlite3_bind_int64(s, i++, (int64_t)o->corrupt_chunks);
    sqlite3_bind_int64(s, i++, (int64_t)o->retries);
    sqlite3_bind_int64(s, i++, (int64_t)o->sink_failures);
    sqlite3_bind_int64(s, i++, (int64_t)o->skipped_chunks);
    sqlite3_bind_int64(s, i++, o->ring_lost_unknown ? -1 : (int64_t)o->ring_lost_seen);
    sqlite3_step(s);
    return pfr_store_errno(sqlite3_finalize(s));
}

int pfr_state_sinks(pfr_state *st, int (*cb)(const pfr_sink_state *s, void *ctx), void *ctx)
{
    sqlite3_stmt *s;
    int rc = prep_sinks(st, "ORDER BY name", &s);
    if (rc)
        return rc;
    int r = 0;
    while (!r && sqlite3_step(s) == SQLITE_ROW) {
        pfr_sink_state o;
        row_to_state(s, &o);
        r = cb(&o, ctx);
    }
    rc = pfr_store_errno(sqlite3_finalize(s));
    return r ? r : rc;
}

int pfr_state_reject(pfr_state *st, const char *sink, const int64_t *ids, size_t n, long status,
                     const char *reason, int64_t now_ns)
{
    sqlite3_stmt *s;
    int rc = prep(st,
                  "INSERT INTO rejected (sink, chunk_id, status, reason, at_ns) VALUES (?,?,?,?,?)"
                  " ON CONFLICT (sink, chunk_id) DO UPDATE SET status = excluded.status,"
                  " reason = excluded.reason, at_ns = excluded.at_ns, attempts = attempts + 1",
                  &s);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, ids[i]);
        sqlite3_bind_int64(s, 3, status);
        sqlite3_bind_text(s, 4, reason ? reason : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, now_ns);
        rc = pfr_store_errno(sqlite3_step(s));
        sqlite3_reset(s);
    }
    int rc2 = pfr_store_errno(sqlite3_finalize(s));
    return rc ? rc : rc2;
}

int pfr_state_rejected(pfr_state *st, const char *sink, int64_t after_id, int64_t *ids, size_t cap,
                       size_t *n)
{
    sqlite3_stmt *s;
    *n = 0;
    int rc = prep(st,
                  "SELECT chunk_id FROM rejected WHERE sink = ? AND chunk_id > ?"
                  " ORDER BY chunk_id LIMIT ?",
                  &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, after_id);
    sqlite3_bind_int64(s, 3, (int64_t)cap);
    while (*n < cap && sqlite3_step(s) == SQLITE_ROW)
        ids[(*n)++] = sqlite3_column_int64(s, 0);
    return pfr_store_errno(sqlite3_finalize(s));
}

/* Run sql (parameters: sink, chunk id) once for each of ids. */
static int each_id(pfr_state *st, const char *sql, const char *sink, const int64_t *ids, size_t n)
{
    sqlite3_stmt *s;
    int rc = prep(st, sql, &s);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, ids[i]);
        rc = pfr_store_errno(sqlite3_step(s));
        sqlite3_reset(s);
    }
    int rc2 = pfr_store_errno(sqlite3_finalize(s));
    return rc ? rc : rc2;
}

int pfr_state_unreject(pfr_state *st, const char *sink, const int64_t *ids, size_t n)
{
    return each_id(st, "DELETE FROM rejected WHERE sink = ? AND chunk_id = ?", sink, ids, n);
}

int pfr_state_ahead_put(pfr_state *st, const char *sink, const int64_t *ids, size_t n)
{
    return each_id(st, "INSERT OR REPLACE INTO ahead(sink, chunk_id, sent) VALUES (?, ?, 0)", sink,
                   ids, n);
}

int pfr_state_ahead_list(pfr_state *st, const char *sink, bool sent, int64_t after_id,
                         int64_t **ids, size_t *n, size_t *cap)
{
    sqlite3_stmt *s;
    *n = 0;
    int rc = prep(st,
                  "SELECT chunk_id FROM ahead WHERE sink = ? AND sent = ? AND chunk_id > ?"
                  " ORDER BY chunk_id",
                  &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, sent);
    sqlite3_bind_int64(s, 3, after_id);
    while (!rc && sqlite3_step(s) == SQLITE_ROW) {
        if (*n == *cap) {
            size_t c = *cap ? *cap * 2 : 64;
            int64_t *v = realloc(*ids, c * sizeof(*v));
            if (!v) {
                rc = -ENOMEM;
                break;
            }
            *ids = v;
            *cap = c;
        }
        (*ids)[(*n)++] = sqlite3_column_int64(s, 0);
    }
    int rc2 = pfr_store_errno(sqlite3_finalize(s));
    return rc ? rc : rc2;
}

int pfr_state_ahead_sent(pfr_state *st, const char *sink, int64_t up_to)
{
    sqlite3_stmt *s;
    int rc =
        prep(st, "UPDATE ahead SET sent = 1 WHERE sink = ? AND sent = 0 AND chunk_id <= ?", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, up_to);
    sqlite3_step(s);
    return pfr_store_errno(sqlite3_finalize(s));
}

int pfr_state_ahead_forget(pfr_state *st, const char *sink, int64_t cursor)
{
    sqlite3_stmt *s;
    int rc = prep(st, "DELETE FROM ahead WHERE sink = ? AND (sent = 0 OR chunk_id <= ?)", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, cursor);
    sqlite3_step(s);
    return pfr_store_errno(sqlite3_finalize(s));
}

int pfr_state_rejected_count(pfr_state *st, const char *sink, uint64_t *n)
{
    sqlite3_stmt *s;
    int rc = prep(st, "SELECT count(*) FROM rejected WHERE sink = ?", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    *n = sqlite3_step(s) == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : 0;
    return pfr_store_errno(sqlite3_finalize(s));
}

int pfr_state_rejected_drop_below(pfr_state *st, const char *sink, int64_t below, uint64_t *n,
                                  int64_t *first, int64_t *last)
{
    sqlite3_stmt *s;
    *n = 0;
    *first = *last = 0;
    int rc = prep(st,
                  "SELECT count(*), coalesce(min(chunk_id), 0), coalesce(max(chunk_id), 0)"
                  " FROM rejected WHERE sink = ? AND chunk_id < ?",
                  &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, below);
    if (sqlite3_step(s) == SQLITE_ROW) {
        *n = (uint64_t)sqlite3_column_int64(s, 0);
        *first = sqlite3_column_int64(s, 1);
        *last = sqlite3_column_int64(s, 2);
    }
    if ((rc = pfr_store_errno(sqlite3_finalize(s))) || !*n)
        return rc;
    if ((rc = prep(st, "DELETE FROM rejected WHERE sink = ? AND chunk_id < ?", &s)))
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, below);
    sqlite3_step(s);
    return pfr_store_errno(sqlite3_finalize(s));
}

int pfr_state_rejected_last(pfr_state *st, const char *sink, char *reason, size_t cap,
                            int64_t *at_ns)
{
    sqlite3_stmt *s;
    int rc = prep(
        st, "SELECT reason, at_ns FROM rejected WHERE sink = ? ORDER BY at_ns DESC LIMIT 1", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW) {
        copy_text(reason, cap, sqlite3_column_text(s, 0));
        *at_ns = sqlite3_column_int64(s, 1);
    } else {
        if (cap)
            reason[0] = 0;
        *at_ns = 0;
    }
    return pfr_store_errno(sqlite3_finalize(s));
}

int pfr_state_backfill_get(pfr_state *st, const char *sink, int64_t from, int64_t to,
                           int64_t *last_id, bool *done)
{
    sqlite3_stmt *s;
    int rc = prep(
        st, "SELECT last_id, done FROM backfill WHERE sink = ? AND from_ns = ? AND to_ns = ?", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, from);
    sqlite3_bind_int64(s, 3, to);
    *last_id = 0;
    *done = false;
    if (sqlite3_step(s) == SQLITE_ROW) {
        *last_id = sqlite3_column_int64(s, 0);
        *done = sqlite3_column_int(s, 1) != 0;
    }
    return pfr_store_errno(sqlite3_finalize(s));
}

int pfr_state_backfill_put(pfr_state *st, const char *sink, int64_t from, int64_t to,
                           int64_t last_id, bool done, int64_t now_ns)
{
    sqlite3_stmt *s;
    int rc = prep(st,
                  "INSERT OR REPLACE INTO backfill (sink, from_ns, to_ns, last_id, done, "
                  "updated_ns) VALUES (?,?,?,?,?,?)",
                  &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, sink, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, from);
    sqlite3_bind_int64(s, 3, to);
    sqlite3_bind_int64(s, 4, last_id);
    sqlite3_bind_int(s, 5, done);
    sqlite3_bind_int64(s, 6, now_ns);
    sqlite3_step(s);
    return pfr_store_errno(sqlite3_finalize(s));
}

int pfr_state_meta_get(pfr_state *st, const char *key, char *value, size_t cap)
{
    sqlite3_stmt *s;
    int rc = prep(st, "SELECT value FROM meta WHERE key = ?", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    bool found = sqlite3_step(s) == SQLITE_ROW;
    if (found)
        copy_text(value, cap, sqlite3_column_text(s, 0));
    rc = pfr_store_errno(sqlite3_finalize(s));
    return rc ? rc : found ? 0 : -ENOENT;
}

int pfr_state_meta_put(pfr_state *st, const char *key, const char *value)
{
    sqlite3_stmt *s;
    int rc = prep(st, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", &s);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, value, -1, SQLITE_STATIC);
    sqlite3_step(s);
    return pfr_store_errno(sqlite3_finalize(s));
}
