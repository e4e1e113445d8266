/*
 * pfr_store: the handle, on top of the store's layers: open (schema in store_migrate.c), close,
 * statistics and the streams listing. The writer is in store_write.c, scans and merges in
 * store_read.c, cursors in store_cursor.c. Layers, design notes and measurements: docs/store.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_cursor.h"
#include "store_handle.h"
#include "store_migrate.h"
#include "store_pins.h"
#include "store_retention.h"
#include "store_write.h"

/* Decoded dictionary chains kept per handle. A realistic one is ~1-2 MB in memory. */
#define CHAIN_CACHE_BYTES (128u << 20)

/* ---- open / close ---- */
static int set_pragmas_writer(pfr_store *s, bool fresh)
{
    char sql[256];
    int rc;
    if (fresh && (rc = pfr_st_exec(&s->sql, "PRAGMA auto_vacuum = INCREMENTAL")) != 0)
        return rc;
    /* The WAL stays within a small budget: it is checkpointed every half budget and truncated
     * to the budget after a checkpoint (docs/store.md, "Size cap"). */
    uint64_t wal = pfr_st_policy_wal_budget(s->max_bytes);
    /* secure_delete FAST: evicted chunks' pages are not zeroed through the WAL (builds with
     * SQLITE_SECURE_DELETE do it by default): evicting then takes a few pages of WAL, not as
     * many as it frees, which a full disk could not give (docs/store.md, "Disk space").
     * A 4 MiB page cache: it holds a transaction's dirty pages until the commit, and an
     * interval's transaction on a build host (a base for each of ~100 streams) filled 16 MiB,
     * a quarter of the recorder's memory budget; pages read again come from the OS's cache. */
    snprintf(sql, sizeof(sql),
             "PRAGMA synchronous = FULL; PRAGMA journal_size_limit = %llu;"
             "PRAGMA wal_autocheckpoint = %llu; PRAGMA cache_size = -4096;"
             "PRAGMA secure_delete = FAST;",
             (unsigned long long)wal, (unsigned long long)(wal / 2 / s->sql.page_size + 1));
    return pfr_st_exec(&s->sql, sql);
}

int pfr_store_open(const char *path, const pfr_store_opts *opts, pfr_store **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    if (!path || !path[0])
        return pfr_st_fail(NULL, -EINVAL, err, errlen, "no store path");
    pfr_store_opts o = opts ? *opts : (pfr_store_opts){0};
    if (!o.max_bytes)
        o.max_bytes = PFR_STORE_DEFAULT_MAX_BYTES;
    if (o.max_bytes < (256u << 10))
        return pfr_st_fail(NULL, -EINVAL, err, errlen, "max_bytes below the 256 KiB minimum");
    if (!o.busy_timeout_ms)
        o.busy_timeout_ms = 5000;

    pfr_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->read_only = o.read_only;
    s->max_bytes = o.max_bytes;
    s->pin_max_bytes = o.pin_max_bytes ? o.pin_max_bytes : o.max_bytes / 4;
    pfr_st_tiers_resolve(&o.tiers, &s->tiers);
    s->fold_stacks = o.fold_stacks == PFR_STORE_FOLD_OFF ? 0
                     : o.fold_stacks                     ? o.fold_stacks
                                                         : PFR_STORE_DEFAULT_FOLD_STACKS;
    s->table_max_bytes = o.table_max_bytes ? o.table_max_bytes : PFR_STORE_TABLE_MAX_BYTES;
    s->sql.busy_ms = o.busy_timeout_ms;
    s->dict.sql = &s->sql;
    s->dict.chain_max = o.cache_bytes ? o.cache_bytes : CHAIN_CACHE_BYTES;
    s->path = strdup(path);
    if (s->path && asprintf(&s->cursor_dir, "%s-cursors", path) < 0)
        s->cursor_dir = NULL;
    if (!s->path || !s->cursor_dir ||
        pfr_st_space_open(&s->space, path, o.max_bytes, o.read_only, &o.reserve) != 0) {
        pfr_store_close(s);
        return -ENOMEM;
    }
    struct stat stt;
    bool exists = stat(path, &stt) == 0;
    if (o.read_only && !exists) {
        char msg[512];
        snprintf(msg, sizeof(msg), "no store at %s", path);
        pfr_store_close(s);
        return pfr_st_fail(NULL, -ENOENT, err, errlen, msg);
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
    int rc = sqlite3_open_v2(path, &s->sql.db, flags, NULL);
    if (rc != SQLITE_OK) {
        rc = pfr_st_fail(&s->sql, pfr_store_errno(rc), err, errlen, "cannot open the store");
        pfr_store_close(s);
        return rc;
    }
    sqlite3_extended_result_codes(s->sql.db, 1);
    sqlite3_busy_timeout(s->sql.db, o.busy_timeout_ms);
    if (!o.read_only) {
        /* Keep -wal and -shm when the writer closes: a reader that may not create files in the
         * ring's folder (the shipper, in the ring's group) could not open the ring otherwise. */
        int persist = 1;
        sqlite3_file_control(s->sql.db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    }
    int64_t psize, ntables;
    if ((rc = pfr_st_query_int(&s->sql, "PRAGMA page_size", &psize)) != 0 ||
        (rc = pfr_st_query_int(&s->sql, "SELECT count(*) FROM sqlite_master", &ntables)) != 0) {
        rc = pfr_st_fail(&s->sql, rc, err, errlen, "cannot read the store (not a database?)");
        pfr_store_close(s);
        return rc;
    }
    s->sql.page_size = (uint32_t)(psize > 0 ? psize : 4096);
    if (!o.read_only) {
        char mode[16] = "";
        sqlite3_stmt *st = NULL;
        if ((rc = set_pragmas_writer(s, ntables == 0)) == 0 &&
            sqlite3_prepare_v2(s->sql.db, "PRAGMA journal_mode = WAL", -1, &st, NULL) ==
                SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            snprintf(mode, sizeof(mode), "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        if (rc || strcmp(mode, "wal") != 0) {
            rc =
                pfr_st_fail(&s->sql, rc ? rc : -EIO, err, errlen, "cannot switch the store to WAL");
            pfr_store_close(s);
            return rc;
        }
        rc = pfr_st_schema_write(&s->sql, &s->dict, err, errlen);
    } else {
        rc = pfr_st_schema_check(&s->sql, err, errlen);
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
    pfr_st_writer_free(s->w);
    pfr_st_db_close(&s->sql);
    pfr_st_dict_free(&s->dict);
    pfr_st_space_close(&s->space);
    free(s->path);
    free(s->cursor_dir);
    free(s);
}

/* ---- stats ---- */
/* The first row of a kept statement, its key bound to ?1 if given: column 0 into a, and column
 * 1 into b if given (zeros when there is no row). */
static int kept_row(pfr_store *s, enum pfr_st_stmt which, const char *key, int64_t *a, int64_t *b)
{
    *a = 0;
    if (b)
        *b = 0;
    sqlite3_stmt *st = pfr_st_stmt(&s->sql, which);
    if (!st)
        return pfr_st_db_err(&s->sql);
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
    struct store_policy_out d;
    if (pfr_st_space_measure(&s->space, max, theirs ? (uint64_t)meta_reserve : UINT64_MAX, &n,
                             &d) != 0)
        return;
    out->effective_max_bytes = n.cap;
    out->cap_reason = (int)n.reason;
    out->reserve_bytes = n.reserve;
    out->fs_bytes = n.fs_bytes;
    out->fs_free_bytes = n.fs_avail;
}

/* Pins: their number, the budget (the writer's, kept in meta; a quarter of its cap before it
 * kept one) and those released. */
static int stats_pins(pfr_store *s, int64_t meta_max, pfr_store_stats *out)
{
    int64_t n = 0, budget = 0, released = 0;
    int rc = kept_row(s, ST_PIN_COUNT, NULL, &n, NULL);
    if (!rc)
        rc = kept_row(s, ST_META_GET, "pin_max_bytes", &budget, NULL);
    if (!rc)
        rc = kept_row(s, ST_META_GET, "pins_released", &released, NULL);
    if (n < 0 || budget < 0 || released < 0)
        out->bad_counters++;
    out->pins = n > 0 ? (uint64_t)n : 0;
    out->pins_released = released > 0 ? (uint64_t)released : 0;
    if (!s->read_only)
        out->pin_max_bytes = s->pin_max_bytes;
    else if (budget > 0)
        out->pin_max_bytes = (uint64_t)budget;
    else
        out->pin_max_bytes = (meta_max > 0 ? (uint64_t)meta_max : s->max_bytes) / 4;
    return rc;
}

int pfr_store_consumer_lost(pfr_store *s, const char *consumer, uint64_t *lost)
{
    char key[160];
    *lost = 0;
    if (!consumer ||
        snprintf(key, sizeof(key), STORE_LOST_KEY_PREFIX "%s", consumer) >= (int)sizeof(key))
        return -EINVAL;
    int64_t v;
    int rc = kept_row(s, ST_META_GET, key, &v, NULL);
    *lost = !rc && v > 0 ? (uint64_t)v : 0; /* the file is outside input: never below 0 */
    return rc;
}

/* The counters kept in the database (cheap: no chunk row is read). */
static int stats_counters(pfr_store *s, pfr_store_stats *out)
{
    static const char *const keys[] = {"evicted",      "lost_unshipped", "evicted_disk",
                                       "dropped_disk", "max_bytes",      "reserve_bytes",
                                       "rolled_up"};
    int64_t seq = 0, v[7] = {0};
    int rc = kept_row(s, ST_CHUNK_SEQ, NULL, &seq, NULL);
    for (size_t i = 0; i < 7 && !rc; i++)
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
    if (v[6] < 0 || v[6] > seq) {
        v[6] = v[6] < 0 ? 0 : seq;
        out->bad_counters++;
    }
    out->rolled_up = (uint64_t)v[6];
    out->evicted = (uint64_t)v[0];
    out->lost_unshipped = (uint64_t)v[1];
    out->evicted_disk = (uint64_t)v[2];
    out->dropped_disk = (uint64_t)v[3] + s->space.dropped_pending;
    stats_space(s, v[4], v[5], out);
    if (!rc)
        rc = stats_pins(s, v[4], out);
    return rc;
}

static void stats_files(pfr_store *s, pfr_store_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->max_bytes = s->max_bytes;
    out->corrupt = s->corrupt;
    out->file_bytes = pfr_st_space_files(&s->space);
}

int pfr_store_stats_get(pfr_store *s, pfr_store_stats *out)
{
    stats_files(s, out);
    sqlite3_stmt *st = NULL;
    int rc = pfr_st_exec(&s->sql, "BEGIN");
    if (rc)
        return rc;
    rc = sqlite3_prepare_v2(s->sql.db,
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
        rc = pfr_st_query_int(&s->sql, "SELECT coalesce(sum(nbytes), 0) FROM dicts", &v);
        out->data_bytes += (uint64_t)v;
        if (!rc)
            rc = stats_counters(s, out);
        struct store_pins pins;
        if (!rc && out->pins && (rc = pfr_st_pins_load(&s->sql, &pins)) == 0) {
            rc = pfr_st_pins_bytes(&s->dict, &pins, &out->pinned_bytes);
            pfr_st_pins_free(&pins);
        }
    } else {
        rc = pfr_store_errno(rc);
    }
    pfr_st_exec(&s->sql, "COMMIT");
    return rc;
}

int pfr_store_stats_quick(pfr_store *s, pfr_store_stats *out)
{
    stats_files(s, out);
    int rc = pfr_st_begin_read(&s->sql);
    if (rc)
        return rc;
    rc = kept_row(s, ST_FIRST_CHUNK, NULL, &out->min_id, &out->oldest_ns);
    if (!rc)
        rc = kept_row(s, ST_LAST_CHUNK, NULL, &out->max_id, &out->newest_ns);
    if (!rc)
        rc = stats_counters(s, out);
    if (!rc)
        out->chunks = out->appended >= out->evicted + out->rolled_up
                          ? out->appended - out->evicted - out->rolled_up
                          : 0;
    pfr_st_end_read(&s->sql);
    return rc;
}

/* ---- streams listing ---- */
int pfr_store_streams(pfr_store *s, pfr_stream_cb cb, void *ctx)
{
    int rc = pfr_st_exec(&s->sql, "BEGIN");
    if (rc)
        return rc;
    sqlite3_stmt *st = NULL;
    struct row {
        int64_t id, first, last;
        uint64_t chunks;
    } *rows = NULL;
    size_t n = 0, cap = 0;
    rc = pfr_st_streams_refresh(&s->dict);
    if (!rc && sqlite3_prepare_v2(s->sql.db,
                                  "SELECT stream_id, count(*), min(start_ns), max(end_ns)"
                                  " FROM chunks GROUP BY stream_id ORDER BY stream_id",
                                  -1, &st, NULL) != SQLITE_OK)
        rc = pfr_st_db_err(&s->sql);
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
    pfr_st_exec(&s->sql, "COMMIT");
    for (size_t i = 0; !rc && i < n; i++) {
        const struct rstream *r = pfr_st_stream_get(&s->dict, rows[i].id);
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

/* ---- tiers listing ---- */
int pfr_store_tiers_list(pfr_store *s, pfr_tier_cb cb, void *ctx)
{
    int rc = pfr_st_exec(&s->sql, "BEGIN");
    if (rc)
        return rc;
    pfr_tier_info rows[PFR_STORE_MAX_TIERS + 1];
    size_t n = 0;
    sqlite3_stmt *st = pfr_st_prepare(&s->sql, "SELECT tier, count(*), coalesce(sum(nbytes), 0),"
                                               " min(start_ns), max(end_ns) FROM chunks"
                                               " GROUP BY tier ORDER BY tier");
    int step = SQLITE_DONE;
    if (!st)
        rc = pfr_st_db_err(&s->sql);
    while (!rc && n <= PFR_STORE_MAX_TIERS && (step = sqlite3_step(st)) == SQLITE_ROW)
        rows[n++] = (pfr_tier_info){.tier = (int)sqlite3_column_int64(st, 0),
                                    .chunks = (uint64_t)sqlite3_column_int64(st, 1),
                                    .bytes = (uint64_t)sqlite3_column_int64(st, 2),
                                    .first_ns = sqlite3_column_int64(st, 3),
                                    .last_ns = sqlite3_column_int64(st, 4)};
    if (!rc && step != SQLITE_DONE && step != SQLITE_ROW)
        rc = pfr_store_errno(step);
    sqlite3_finalize(st);
    /* The steps as the writer set them (a reader's own settings may differ). */
    for (size_t i = 0; !rc && i < n; i++) {
        int t = rows[i].tier;
        if (t <= 0 || t > PFR_STORE_MAX_TIERS)
            continue;
        char key[32];
        snprintf(key, sizeof(key), "tier_step_%d", t);
        int64_t v = 0;
        rc = kept_row(s, ST_META_GET, key, &v, NULL);
        rows[i].step_ns = v > 0 ? v : (size_t)t <= s->tiers.n ? s->tiers.step_ns[t - 1] : 0;
    }
    pfr_st_exec(&s->sql, "COMMIT");
    for (size_t i = 0; !rc && i < n; i++)
        rc = cb(&rows[i], ctx);
    return rc;
}
