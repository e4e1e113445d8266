/*
 * Slices: the chunks of a range, with the streams and the dictionary layers they reference,
 * copied into a standalone ring file (pfr_store_slice_write), and telling a slice from a ring
 * (pfr_store_slice_info).
 *
 * Rows are copied as stored, column for column (no decode, no re-encode), into tables made by
 * the ring's own CREATE statements: a reader of the slice sees what a reader of the ring saw,
 * ids included, so a shipper derives the same rows from it. Every row is read in one read
 * transaction of the ring; checksums are verified on the way (a broken chunk or layer is left
 * out, as readers of the ring skip it) and the finished file must pass pfr_store_check before
 * it is renamed into place.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pfr_clock.h"
#include "store_handle.h"
#include "store_migrate.h"

/* Keys of the slice's meta rows (the ring's counters are rows of the same table). */
#define META_SLICE_ID      "slice_id"
#define META_SLICE_FROM    "slice_from_ns"
#define META_SLICE_TO      "slice_to_ns"
#define META_SLICE_CREATED "slice_created_ns"
#define META_SLICE_SRC_MAX "slice_source_max_id"

/* A chunk of the range, from the metadata pass. */
struct scand {
    int64_t id, stream_id, base_id, dict_id;
};

/* A dictionary chain the range's chunks reference (its layers may be of several streams). */
struct sbase {
    int64_t base_id;
    int64_t need; /* highest layer a chunk references */
};

struct slicer {
    pfr_store *s;
    const pfr_store_filter *f;
    sqlite3 *out;
    char tmp[PATH_MAX];  /* the file being written (a template until made) */
    bool made;           /* tmp exists and is ours to remove */
    char dir[PATH_MAX];  /* the destination's folder */
    char dest[PATH_MAX]; /* the file renamed over: the path, or a symlink's target */
    struct scand *c;
    size_t nc, capc;
    struct sbase *b;
    size_t nb, capb;
    pfr_map base_ix;   /* base_id -> index in b */
    pfr_map layer_ok;  /* ids of the layers copied (each with all layers below it) -> their
                          chain's index in b + 1 */
    pfr_map stream_ix; /* stream id -> index in streams */
    int64_t *streams;  /* stream ids with a chunk written, in order of first chunk */
    size_t ns, caps;
    pfr_buf ident; /* bytes whose hash is the slice's id */
    int64_t source_max_id;
    pfr_slice_stats st;
    char *err;
    size_t errlen;
};

static int fail(struct slicer *x, int e, sqlite3 *db, const char *fmt, ...)
{
    if (x->err && x->errlen) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(x->err, x->errlen, fmt, ap);
        va_end(ap);
        if (db && sqlite3_errcode(db) != SQLITE_OK && n >= 0 && (size_t)n < x->errlen)
            snprintf(x->err + n, x->errlen - (size_t)n, ": %s", sqlite3_errmsg(db));
    }
    return e;
}

static int col_index(sqlite3_stmt *st, const char *name)
{
    for (int i = 0; i < sqlite3_column_count(st); i++)
        if (strcmp(sqlite3_column_name(st, i), name) == 0)
            return i;
    return -1;
}

/* ---- the metadata pass ---- */

static int add_base(struct slicer *x, const struct scand *c)
{
    bool found;
    uint32_t i = store_map_put(&x->base_ix, (uint64_t)c->base_id, (uint32_t)x->nb, &found);
    if (i == UINT32_MAX)
        return -ENOMEM;
    if (!found) {
        if (VEC_RESERVE(x->b, x->capb, x->nb + 1))
            return -ENOMEM;
        x->b[x->nb++] = (struct sbase){c->base_id, c->dict_id};
    } else if (x->b[i].need < c->dict_id) {
        x->b[i].need = c->dict_id;
    }
    return 0;
}

/* The chunks of the range whose stream matches the filter, oldest id first. */
static int collect(struct slicer *x)
{
    pfr_store *s = x->s;
    int rc = pfr_st_streams_refresh(&s->dict);
    if (rc)
        return fail(x, rc, s->sql.db, "cannot read the ring's streams");
    int64_t from = x->f->from_ns ? x->f->from_ns : INT64_MIN;
    int64_t to = x->f->to_ns ? x->f->to_ns : INT64_MAX;
    sqlite3_stmt *st = pfr_st_prepare(&s->sql, "SELECT id, stream_id, base_id, dict_id FROM chunks"
                                               " WHERE end_ns > ?1 AND start_ns < ?2 ORDER BY id");
    if (!st)
        return fail(x, pfr_st_db_err(&s->sql), s->sql.db, "cannot list the chunks");
    sqlite3_bind_int64(st, 1, from);
    sqlite3_bind_int64(st, 2, to);
    /* A chunk of a missing or broken stream is corrupt, as readers of the ring count it (unless
     * the filter rules it out for sure). */
    bool narrowed = x->f->service || x->f->type || x->f->nlabels;
    int step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
        struct scand c = {sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                          sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3)};
        const struct rstream *r = pfr_st_stream_get(&s->dict, c.stream_id);
        if (r ? !pfr_st_stream_matches(r, x->f) : narrowed)
            continue;
        if (!r || r->bad) {
            x->st.corrupt++;
            continue;
        }
        if (VEC_RESERVE(x->c, x->capc, x->nc + 1) || add_base(x, &c))
            rc = -ENOMEM;
        else
            x->c[x->nc++] = c;
    }
    if (!rc && step != SQLITE_DONE)
        rc = fail(x, pfr_store_errno(step), s->sql.db, "cannot list the chunks");
    sqlite3_finalize(st);
    if (rc)
        return rc;
    st = pfr_st_prepare(&s->sql, "SELECT max(id) FROM chunks");
    if (!st)
        return fail(x, pfr_st_db_err(&s->sql), s->sql.db, "cannot read the ring");
    if (sqlite3_step(st) == SQLITE_ROW)
        x->source_max_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

/* ---- the destination ---- */

static int split_path(struct slicer *x, const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base)
        return fail(x, -EINVAL, NULL, "%s names a folder, not a file", path);
    int dn = slash ? snprintf(x->dir, sizeof(x->dir), "%.*s", (int)(slash - path + 1), path)
                   : snprintf(x->dir, sizeof(x->dir), ".");
    int tn = snprintf(x->tmp, sizeof(x->tmp), "%.*s.%s.tmp-XXXXXX",
                      slash ? (int)(slash - path + 1) : 0, path, base);
    if (dn < 0 || tn < 0 || (size_t)dn >= sizeof(x->dir) || (size_t)tn >= sizeof(x->tmp))
        return fail(x, -ENAMETOOLONG, NULL, "%s: path too long", path);
    return 0;
}

static void remove_tmp(struct slicer *x)
{
    if (!x->made)
        return;
    char j[PATH_MAX + 16];
    snprintf(j, sizeof(j), "%s-journal", x->tmp);
    unlink(x->tmp);
    unlink(j);
    x->made = false;
}

/* The temporary file beside the destination (same file system: the rename is atomic), mode
 * 0640 as the ring's: profiles name processes and functions. */
static int create_tmp(struct slicer *x)
{
    int fd = mkstemp(x->tmp);
    if (fd < 0) {
        int e = errno == ENOENT ? -ENOTDIR : -errno;
        return fail(x, e, NULL, "cannot create a file in %s: %s", x->dir, strerror(-e));
    }
    x->made = true;
    int rc = fchmod(fd, 0640) ? -errno : 0;
    close(fd);
    if (rc)
        return fail(x, rc, NULL, "%s: %s", x->tmp, strerror(-rc));
    return 0;
}

static int out_exec(struct slicer *x, const char *sql)
{
    int rc = sqlite3_exec(x->out, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : fail(x, pfr_store_errno(rc), x->out, "writing %s", x->tmp);
}

/* An empty database with the ring's identity, page settings and CREATE statements. No journal
 * and no syncs while it is written: until the rename it is nobody's, and it is fsync'ed once. */
static int open_out(struct slicer *x)
{
    pfr_store *s = x->s;
    int rc = sqlite3_open_v2(x->tmp, &x->out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK)
        return fail(x, pfr_store_errno(rc), x->out, "cannot open %s", x->tmp);
    sqlite3_extended_result_codes(x->out, 1);
    int64_t vac = 0;
    sqlite3_stmt *st = pfr_st_prepare(&s->sql, "PRAGMA auto_vacuum");
    if (st && sqlite3_step(st) == SQLITE_ROW)
        vac = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA auto_vacuum = %lld;"
             "PRAGMA application_id = %d; PRAGMA user_version = %d;",
             (long long)vac, PFR_STORE_APP_ID, PFR_STORE_SCHEMA_VERSION);
    if ((rc = out_exec(x, sql)) || (rc = out_exec(x, "BEGIN")))
        return rc;
    /* Tables first, then their indices; SQLite's own tables (sqlite_sequence) come by
     * themselves. */
    st = pfr_st_prepare(&s->sql, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND"
                                 " name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                                 " ORDER BY type <> 'table', rowid");
    if (!st)
        return fail(x, pfr_st_db_err(&s->sql), s->sql.db, "cannot read the ring's schema");
    int step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW)
        rc = out_exec(x, (const char *)sqlite3_column_text(st, 0));
    if (!rc && step != SQLITE_DONE)
        rc = fail(x, pfr_store_errno(step), s->sql.db, "cannot read the ring's schema");
    sqlite3_finalize(st);
    return rc;
}

/* "INSERT INTO table VALUES (?, ...)" with as many parameters as sel has columns. */
static sqlite3_stmt *insert_like(struct slicer *x, const char *table, sqlite3_stmt *sel)
{
    char sql[512];
    int n = snprintf(sql, sizeof(sql), "INSERT INTO %s VALUES (", table);
    for (int i = 0; i < sqlite3_column_count(sel) && n > 0 && (size_t)n < sizeof(sql) - 4; i++)
        n += snprintf(sql + n, sizeof(sql) - (size_t)n, i ? ", ?" : "?");
    if (n <= 0 || (size_t)n >= sizeof(sql) - 4)
        return NULL;
    snprintf(sql + n, sizeof(sql) - (size_t)n, ")");
    sqlite3_stmt *ins = NULL;
    sqlite3_prepare_v2(x->out, sql, -1, &ins, NULL);
    return ins;
}

/* Insert the row sel is on, column for column. */
static int copy_row(struct slicer *x, sqlite3_stmt *sel, sqlite3_stmt *ins)
{
    sqlite3_reset(ins);
    for (int i = 0; i < sqlite3_column_count(sel); i++)
        if (sqlite3_bind_value(ins, i + 1, sqlite3_column_value(sel, i)) != SQLITE_OK)
            return fail(x, -ENOMEM, x->out, "writing %s", x->tmp);
    int rc = sqlite3_step(ins);
    return rc == SQLITE_DONE ? 0 : fail(x, pfr_store_errno(rc), x->out, "writing %s", x->tmp);
}

/* A statement on the ring and its twin inserting into the slice's table of the same name. */
struct copier {
    sqlite3_stmt *sel, *ins;
};

static int copier_open(struct slicer *x, struct copier *cp, const char *table, const char *where)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT * FROM %s WHERE %s", table, where);
    cp->sel = pfr_st_prepare(&x->s->sql, sql);
    cp->ins = cp->sel ? insert_like(x, table, cp->sel) : NULL;
    if (!cp->sel)
        return fail(x, pfr_store_errno(sqlite3_errcode(x->s->sql.db)), x->s->sql.db, "reading %s",
                    table);
    if (!cp->ins)
        return fail(x, pfr_store_errno(sqlite3_errcode(x->out)), x->out, "writing %s", table);
    return 0;
}

static void copier_close(struct copier *cp)
{
    sqlite3_finalize(cp->sel);
    sqlite3_finalize(cp->ins);
}

/* ---- copying ---- */

/* The layers of chain b up to the highest one its chunks need, checked as readers check them
 * (checksum, one linear chain). The first that fails ends the copy: the chunks
 * that need it or a later layer are left out (readers of the ring skip them too). */
static int copy_layers(struct slicer *x, struct copier *cp, const struct sbase *b)
{
    sqlite3_reset(cp->sel);
    sqlite3_bind_int64(cp->sel, 1, b->base_id);
    sqlite3_bind_int64(cp->sel, 2, b->need);
    int ci = col_index(cp->sel, "id"), cs = col_index(cp->sel, "stream_id"),
        cpa = col_index(cp->sel, "parent_id"), cc = col_index(cp->sel, "crc"),
        cd = col_index(cp->sel, "data");
    if (ci < 0 || cs < 0 || cpa < 0 || cc < 0 || cd < 0)
        return fail(x, -EPROTO, NULL, "the ring's dicts table lacks a column this pfr reads");
    int64_t prev = 0;
    int rc = 0, step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(cp->sel)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(cp->sel, ci);
        int64_t stream = sqlite3_column_int64(cp->sel, cs);
        int64_t parent = sqlite3_column_int64(cp->sel, cpa);
        const uint8_t *blob = sqlite3_column_blob(cp->sel, cd);
        size_t len = (size_t)sqlite3_column_bytes(cp->sel, cd);
        int64_t fields[3] = {stream, b->base_id, parent};
        bool linked = prev ? parent == prev : parent == 0 && id == b->base_id;
        if (!linked || sqlite3_column_type(cp->sel, cd) != SQLITE_BLOB ||
            pfr_st_row_crc(blob, len, fields, 3) != (uint32_t)sqlite3_column_int64(cp->sel, cc))
            break;
        bool found;
        if ((rc = copy_row(x, cp->sel, cp->ins)) != 0)
            break;
        if (store_map_put(&x->layer_ok, (uint64_t)id, (uint32_t)(b - x->b) + 1, &found) ==
            UINT32_MAX)
            rc = -ENOMEM;
        x->st.layers++;
        prev = id;
    }
    if (!rc && step != SQLITE_ROW && step != SQLITE_DONE && pfr_store_errno(step) != -EBADMSG)
        rc = fail(x, pfr_store_errno(step), x->s->sql.db, "reading dictionary layers");
    sqlite3_reset(cp->sel);
    return rc;
}

static int note_stream(struct slicer *x, int64_t id)
{
    bool found;
    if (store_map_put(&x->stream_ix, (uint64_t)id, (uint32_t)x->ns, &found) == UINT32_MAX)
        return -ENOMEM;
    if (found)
        return 0;
    if (VEC_RESERVE(x->streams, x->caps, x->ns + 1))
        return -ENOMEM;
    x->streams[x->ns++] = id;
    return 0;
}

/* One chunk row and its payload, if the payload passes its checksum. *copied tells. */
static int copy_chunk(struct slicer *x, struct copier *chunk, struct copier *data,
                      const struct scand *c, bool *copied)
{
    *copied = false;
    sqlite3_reset(chunk->sel);
    sqlite3_reset(data->sel);
    sqlite3_bind_int64(chunk->sel, 1, c->id);
    sqlite3_bind_int64(data->sel, 1, c->id);
    int a = sqlite3_step(chunk->sel), b = sqlite3_step(data->sel);
    int rc = 0;
    if (a == SQLITE_ROW && b == SQLITE_ROW) {
        sqlite3_stmt *m = chunk->sel;
        int cs = col_index(m, "start_ns"), ce = col_index(m, "end_ns"), cc = col_index(m, "crc");
        int cd = col_index(data->sel, "data");
        if (cs < 0 || ce < 0 || cc < 0 || cd < 0) {
            rc = fail(x, -EPROTO, NULL, "the ring's chunk tables lack a column this pfr reads");
            goto out;
        }
        int64_t start = sqlite3_column_int64(m, cs), end = sqlite3_column_int64(m, ce);
        int64_t fields[5] = {c->stream_id, c->base_id, c->dict_id, start, end};
        const uint8_t *blob = sqlite3_column_blob(data->sel, cd);
        size_t len = (size_t)sqlite3_column_bytes(data->sel, cd);
        uint32_t crc = (uint32_t)sqlite3_column_int64(m, cc);
        if (!blob || pfr_st_row_crc(blob, len, fields, 5) != crc)
            goto out; /* corrupt: left out */
        if ((rc = copy_row(x, chunk->sel, chunk->ins)) || (rc = copy_row(x, data->sel, data->ins)))
            goto out;
        uint8_t idb[12];
        memcpy(idb, &c->id, 8);
        memcpy(idb + 8, &crc, 4);
        pfr_buf_put(&x->ident, idb, sizeof(idb));
        if (!x->st.chunks || start < x->st.first_ns)
            x->st.first_ns = start;
        if (!x->st.chunks || end > x->st.last_ns)
            x->st.last_ns = end;
        if (!x->st.chunks)
            x->st.min_id = c->id;
        x->st.max_id = c->id;
        x->st.chunks++;
        *copied = true;
        rc = note_stream(x, c->stream_id);
    } else if ((a != SQLITE_ROW && a != SQLITE_DONE) || (b != SQLITE_ROW && b != SQLITE_DONE)) {
        int e = pfr_store_errno(a != SQLITE_ROW && a != SQLITE_DONE ? a : b);
        if (e != -EBADMSG) /* a corrupt page: the chunk is left out */
            rc = fail(x, e, x->s->sql.db, "reading chunk %lld", (long long)c->id);
    }
out:
    sqlite3_reset(chunk->sel);
    sqlite3_reset(data->sel);
    return rc;
}

static int copy_chunks(struct slicer *x)
{
    struct copier chunk = {0}, data = {0};
    int rc = copier_open(x, &chunk, "chunks", "id = ?1");
    if (!rc)
        rc = copier_open(x, &data, "chunk_data", "id = ?1");
    for (size_t i = 0; i < x->nc && !rc; i++) {
        const struct scand *c = &x->c[i];
        uint32_t b = store_map_get(&x->base_ix, (uint64_t)c->base_id);
        bool copied = false;
        /* its dictionary, as of its layer, is in the slice (a layer of the chain it names) */
        if (store_map_get(&x->layer_ok, (uint64_t)c->dict_id) == b + 1)
            rc = copy_chunk(x, &chunk, &data, c, &copied);
        if (!rc && !copied)
            x->st.corrupt++;
    }
    copier_close(&chunk);
    copier_close(&data);
    return rc;
}

static int copy_streams(struct slicer *x)
{
    struct copier cp = {0};
    int rc = copier_open(x, &cp, "streams", "id = ?1");
    int ck = rc ? -1 : col_index(cp.sel, "key");
    for (size_t i = 0; i < x->ns && !rc; i++) {
        sqlite3_reset(cp.sel);
        sqlite3_bind_int64(cp.sel, 1, x->streams[i]);
        int step = sqlite3_step(cp.sel);
        if (step != SQLITE_ROW) {
            rc = fail(x, step == SQLITE_DONE ? -EBADMSG : pfr_store_errno(step), x->s->sql.db,
                      "reading stream %lld", (long long)x->streams[i]);
            break;
        }
        if (ck >= 0)
            pfr_buf_put(&x->ident, sqlite3_column_blob(cp.sel, ck),
                        (size_t)sqlite3_column_bytes(cp.sel, ck));
        if (!(rc = copy_row(x, cp.sel, cp.ins)))
            x->st.streams++;
    }
    copier_close(&cp);
    return rc;
}

static int put_meta(struct slicer *x, const char *key, int64_t value)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(x->out, "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, value);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(x, pfr_store_errno(rc), x->out, "writing %s", x->tmp);
}

/* The ring's meta rows (settings a writer keeps there), then its counters as a ring holding just
 * these chunks would have them (appended counts up to the newest id: the chunks below it the
 * slice lacks count as evicted), and the slice's own rows. */
static int write_meta(struct slicer *x)
{
    if (pfr_buf_err(&x->ident))
        return -ENOMEM;
    struct copier cp = {0};
    int rc = copier_open(x, &cp, "meta", "1"), step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(cp.sel)) == SQLITE_ROW)
        rc = copy_row(x, cp.sel, cp.ins);
    if (!rc && step != SQLITE_DONE)
        rc = fail(x, pfr_store_errno(step), x->s->sql.db, "reading the ring's meta table");
    copier_close(&cp);
    const struct {
        const char *key;
        int64_t value;
    } rows[] = {
        {"evicted", x->st.max_id - (int64_t)x->st.chunks},
        {"lost_unshipped", 0},
        {"corrupt", 0},
        {META_SLICE_ID, (int64_t)pfr_hash_bytes(x->ident.data, x->ident.len)},
        {META_SLICE_FROM, x->f->from_ns},
        {META_SLICE_TO, x->f->to_ns},
        {META_SLICE_CREATED, pfr_clock_real_ns()},
        {META_SLICE_SRC_MAX, x->source_max_id},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]) && !rc; i++)
        rc = put_meta(x, rows[i].key, rows[i].value);
    return rc;
}

/* The pins over the slice's range, as they are: a range carried out with its pin (pfr export
 * --pin) is still pinned, with its reason, where it is read. */
static int copy_pins(struct slicer *x)
{
    struct copier cp = {0};
    int rc = copier_open(x, &cp, "pins", "to_ns > ?1 AND from_ns < ?2 ORDER BY id");
    int step = SQLITE_DONE;
    if (!rc) {
        bool all = !x->f->from_ns && !x->f->to_ns;
        sqlite3_bind_int64(cp.sel, 1, all ? INT64_MIN : x->f->from_ns);
        sqlite3_bind_int64(cp.sel, 2, all ? INT64_MAX : x->f->to_ns);
    }
    while (!rc && (step = sqlite3_step(cp.sel)) == SQLITE_ROW)
        rc = copy_row(x, cp.sel, cp.ins);
    if (!rc && step != SQLITE_DONE)
        rc = fail(x, pfr_store_errno(step), x->s->sql.db, "reading the ring's pins");
    copier_close(&cp);
    return rc;
}

/* Everything, inside the ring's read transaction. */
static int copy_all(struct slicer *x)
{
    struct copier layers = {0};
    int rc = copier_open(x, &layers, "dicts", "base_id = ?1 AND id <= ?2 ORDER BY id");
    for (size_t i = 0; i < x->nb && !rc; i++)
        rc = copy_layers(x, &layers, &x->b[i]);
    copier_close(&layers);
    if (!rc)
        rc = copy_chunks(x);
    if (!rc)
        rc = copy_streams(x);
    if (!rc && x->st.chunks)
        rc = write_meta(x);
    if (!rc && x->st.chunks)
        rc = copy_pins(x);
    return rc;
}

/* ---- finishing ---- */

static const char *file_kind(mode_t m)
{
    switch (m & S_IFMT) {
    case S_IFDIR:
        return "a folder";
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    case S_IFIFO:
        return "a FIFO";
    case S_IFSOCK:
        return "a socket";
    case S_IFLNK:
        return "a symlink";
    default:
        return "not a regular file";
    }
}

static int fsync_path(const char *path, bool dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    if (dir && rc == -EINVAL)
        rc = 0; /* a file system that cannot sync a folder (its renames are what they are) */
    return rc;
}

/* The written file reads back as a ring and every chunk in it decodes. */
static int verify(struct slicer *x)
{
    pfr_store_opts o = {.read_only = true};
    pfr_store *v = NULL;
    char why[256] = "";
    int rc = pfr_store_open(x->tmp, &o, &v, why, sizeof(why));
    if (!rc)
        rc = pfr_store_check(v, NULL, why, sizeof(why));
    pfr_store_close(v);
    return rc ? fail(x, rc, NULL, "the slice does not check: %s", why) : 0;
}

/* Rename into place; without force, never over a file that appeared meanwhile. */
static int publish(struct slicer *x, const char *path, bool force)
{
    int rc = 0;
    struct stat sb;
    if (force && lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* it changed since check_args looked: still never over anything but a regular file */
        rc = -EEXIST;
        return fail(x, rc, NULL, "%s is %s now, not a regular file: not replaced", path,
                    file_kind(sb.st_mode));
    }
    if (force) {
        rc = rename(x->tmp, path) ? -errno : 0;
    } else if (renameat2(AT_FDCWD, x->tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
        rc = -errno;
        if (rc == -EINVAL || rc == -ENOSYS) { /* a file system without RENAME_NOREPLACE */
            rc = lstat(path, &sb) == 0 ? -EEXIST : rename(x->tmp, path) ? -errno : 0;
        }
    }
    if (rc == -EEXIST)
        return fail(x, rc, NULL, "%s exists (give --force to replace it)", path);
    if (rc)
        return fail(x, rc, NULL, "cannot rename the slice to %s: %s", path, strerror(-rc));
    x->made = false;
    if ((rc = fsync_path(x->dir, true)))
        return fail(x, rc, NULL, "fsync %s: %s", x->dir, strerror(-rc));
    return 0;
}

static void slicer_free(struct slicer *x)
{
    if (x->out)
        sqlite3_close_v2(x->out);
    x->out = NULL;
    remove_tmp(x);
    free(x->c);
    free(x->b);
    free(x->streams);
    pfr_map_free(&x->base_ix);
    pfr_map_free(&x->layer_ok);
    pfr_map_free(&x->stream_ix);
    pfr_buf_free(&x->ident);
}

/* What the slice is renamed over (x->dest). A rename replaces whatever the name holds, so an
 * existing destination is replaced only with force and only when it is a regular file, or a
 * symlink to one: then its target is written and the link stays as it was (as `cp` and a
 * shell's `>` do). A device (/dev/full), folder, FIFO, socket or a link to nothing is refused
 * and left untouched. */
static int destination(struct slicer *x, const char *path, bool force)
{
    struct stat ls, sb;
    int n = snprintf(x->dest, sizeof(x->dest), "%s", path);
    if (n < 0 || (size_t)n >= sizeof(x->dest))
        return fail(x, -ENAMETOOLONG, NULL, "%s: path too long", path);
    if (lstat(path, &ls) != 0)
        return 0; /* a new file (or a folder that is not there: split_path's caller says so) */
    if (stat(path, &sb) != 0)
        return fail(x, -EEXIST, NULL,
                    "%s is a symlink to nothing that can be read (%s): not "
                    "replaced",
                    path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return fail(x, -EEXIST, NULL, "%s is %s%s, not a regular file: not replaced", path,
                    S_ISLNK(ls.st_mode) ? "a symlink to " : "", file_kind(sb.st_mode));
    if (!force)
        return fail(x, -EEXIST, NULL, "%s exists (give --force to replace it)", path);
    if (S_ISLNK(ls.st_mode)) {
        char *target = realpath(path, NULL);
        if (!target)
            return fail(x, -errno, NULL, "%s: %s", path, strerror(errno));
        n = snprintf(x->dest, sizeof(x->dest), "%s", target);
        free(target);
        if (n < 0 || (size_t)n >= sizeof(x->dest))
            return fail(x, -ENAMETOOLONG, NULL, "%s: path too long", path);
    }
    return 0;
}

static int check_args(struct slicer *x, const pfr_store_filter *f, const char *path, unsigned flags)
{
    if (!path || !*path)
        return fail(x, -EINVAL, NULL, "no destination file");
    if (f && (f->nsample_labels || f->after_id || f->max_id || f->limit))
        return fail(x, -EINVAL, NULL,
                    "a slice keeps whole chunks: it selects by time, service, type and profile "
                    "labels only");
    if (f && f->from_ns && f->to_ns && f->to_ns <= f->from_ns)
        return fail(x, -EINVAL, NULL, "empty range: the end is not after the start");
    struct stat sb, ring;
    if (stat(path, &sb) == 0 && stat(x->s->path, &ring) == 0 && sb.st_dev == ring.st_dev &&
        sb.st_ino == ring.st_ino)
        return fail(x, -EINVAL, NULL, "%s is the ring itself", path);
    int rc = destination(x, path, flags & PFR_SLICE_FORCE);
    if (!rc)
        rc = split_path(x, x->dest);
    if (rc)
        return rc;
    /* -ENOTDIR, not -ENOENT: that one says "no data" */
    if (stat(x->dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fail(x, -ENOTDIR, NULL, "no folder %s", x->dir);
    return 0;
}

int pfr_store_slice_write(pfr_store *s, const pfr_store_filter *f, const char *path, unsigned flags,
                          pfr_slice_stats *st, char *err, size_t errlen)
{
    static const pfr_store_filter all = {0};
    struct slicer x = {.s = s, .f = f ? f : &all, .err = err, .errlen = errlen};
    if (err && errlen)
        err[0] = 0;
    int rc = check_args(&x, f, path, flags);
    if (rc)
        return rc;
    if ((rc = pfr_st_begin_read(&s->sql)) != 0)
        return fail(&x, rc, s->sql.db, "cannot read the ring");
    rc = collect(&x);
    if (!rc && !x.nc)
        rc = fail(&x, -ENOENT, NULL, "no chunk of the ring matches");
    if (!rc && !(rc = create_tmp(&x)) && !(rc = open_out(&x)) && !(rc = copy_all(&x)))
        rc = out_exec(&x, "COMMIT");
    pfr_st_end_read(&s->sql);
    if (!rc && !x.st.chunks)
        rc = fail(&x, -ENOENT, NULL, "every chunk of the range is corrupt");
    if (x.out && sqlite3_close(x.out) != SQLITE_OK && !rc)
        rc = fail(&x, -EIO, x.out, "closing %s", x.tmp);
    x.out = NULL;
    if (!rc && (rc = fsync_path(x.tmp, false)))
        fail(&x, rc, NULL, "fsync %s: %s", x.tmp, strerror(-rc));
    if (!rc)
        rc = verify(&x);
    struct stat sb;
    if (!rc && stat(x.tmp, &sb) == 0)
        x.st.bytes = (uint64_t)sb.st_size;
    if (!rc)
        rc = publish(&x, x.dest, flags & PFR_SLICE_FORCE);
    if (st)
        *st = x.st;
    slicer_free(&x);
    return rc;
}

int pfr_store_slice_info(pfr_store *s, pfr_slice_info *out)
{
    memset(out, 0, sizeof(*out));
    int rc = pfr_st_begin_read(&s->sql);
    if (rc)
        return rc;
    sqlite3_stmt *st =
        pfr_st_prepare(&s->sql, "SELECT key, value FROM meta WHERE key LIKE 'slice\\_%'"
                                " ESCAPE '\\'");
    if (!st) {
        rc = pfr_st_db_err(&s->sql);
        pfr_st_end_read(&s->sql);
        return rc;
    }
    int step = SQLITE_DONE;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        int64_t v = sqlite3_column_int64(st, 1);
        if (!k)
            continue;
        if (!strcmp(k, META_SLICE_ID)) {
            out->is_slice = true;
            out->id = (uint64_t)v;
        } else if (!strcmp(k, META_SLICE_FROM)) {
            out->from_ns = v;
        } else if (!strcmp(k, META_SLICE_TO)) {
            out->to_ns = v;
        } else if (!strcmp(k, META_SLICE_CREATED)) {
            out->created_ns = v;
        } else if (!strcmp(k, META_SLICE_SRC_MAX)) {
            out->source_max_id = v;
        }
    }
    rc = step == SQLITE_DONE ? 0 : pfr_store_errno(step);
    sqlite3_finalize(st);
    pfr_st_end_read(&s->sql);
    if (!out->is_slice)
        memset(out, 0, sizeof(*out));
    return rc;
}
