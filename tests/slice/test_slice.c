/*
 * Ring slices (store/store_slice.c): what a slice holds against the ring it was cut from, what it
 * leaves out (chunks of other streams and times, dictionary layers no chunk of it needs, broken
 * rows), its refusals, and slices cut while another process appends to the ring.
 *
 *   test_slice WRITER_EXE     (tests/store's store_writer_proc, for the concurrent case)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>
#include <sqlite3.h>

#include "pfr_store.h"
#include "pfr_testgen.h"
#include "store_handle.h" /* the handle's connection, to interfere with a slice being cut */
#include "store_test_util.h"
#include "store_writer_proc.h"
#include "writer_spawn.h"

#define IV    10000000000ll /* 10 s chunks */
#define T0    1700000000000000000ll
#define NSVC  3
#define NINT  900 /* intervals per service: 2.5 h, so chains rotate (a new base per 360 chunks) */
#define SLICE "slice.db"

/* ---- fixtures ---- */

static pfr_store *open_store(const char *path, bool ro)
{
    pfr_store_opts o = {.read_only = ro, .max_bytes = 1ull << 30};
    pfr_store *s = NULL;
    char err[256];
    int rc = pfr_store_open(path, &o, &s, err, sizeof(err));
    if (rc)
        fail_msg("open %s: %s", path, err);
    return s;
}

static pfr_store *open_ro(const char *path)
{
    return open_store(path, true);
}

/* NSVC services, NINT intervals each, appended a whole interval at a time (as the recorder). */
static void make_ring(const char *path)
{
    pfr_store *s = open_store(path, false);
    pfr_testgen *g[NSVC];
    pfr_testgen_opts go = {.nstacks = 60, .drift_permille = 40};
    char pod[NSVC][16];
    pfr_kv labels[NSVC][2];
    for (int i = 0; i < NSVC; i++) {
        g[i] = pfr_testgen_new(9, (unsigned)i, &go);
        snprintf(pod[i], sizeof(pod[i]), "pod-%d", i);
        labels[i][0] = (pfr_kv){"host.name", "host-a"};
        labels[i][1] = (pfr_kv){"pod", pod[i]};
    }
    for (int t = 0; t < NINT; t++) {
        pfr_chunk_in in[NSVC];
        pfr_profile *p[NSVC];
        for (int i = 0; i < NSVC; i++) {
            int64_t st = T0 + t * IV;
            p[i] = pfr_testgen_next(g[i], st, IV);
            in[i] = (pfr_chunk_in){pfr_testgen_service(g[i]), labels[i], 2, st, st + IV, p[i]};
        }
        assert_int_equal(pfr_store_append_batch(s, in, NSVC, NULL), 0);
        for (int i = 0; i < NSVC; i++)
            pfr_profile_free(p[i]);
    }
    for (int i = 0; i < NSVC; i++)
        pfr_testgen_free(g[i]);
    pfr_store_close(s);
}

/* What a reader sees of each chunk: metadata, dictionary id, content digest. */
struct seen {
    int64_t id, start, end, dict;
    uint64_t digest, total;
    char service[32];
    char labels[96];
};

/* The digest of each dictionary stack a read met, by (dictionary id, index): the same index
 * means the same stack in every chunk reporting that dictionary (pfr_store.h; the shipper caches
 * by it too), so each is hashed once a read, not once per chunk. A chunk's own stacks (at or past
 * the stable count) are hashed every time. Each read (the ring's, the slice's) has its own. */
struct stack_memo {
    int64_t dict;
    uint32_t stack;
    bool used;
    uint64_t h;
};

struct seen_list {
    struct seen *v;
    size_t n, cap;
    struct stack_memo *memo; /* open addressing, memo_cap a power of two; freed by seen_done */
    size_t memo_n, memo_cap;
};

static void seen_done(struct seen_list *l)
{
    free(l->memo);
    l->memo = NULL;
    l->memo_n = l->memo_cap = 0;
}

static struct stack_memo *memo_slot(struct stack_memo *m, size_t cap, int64_t dict, uint32_t stack)
{
    size_t i = (size_t)(((uint64_t)dict * 0x9e3779b97f4a7c15ull) ^ stack * 0xbf58476d1ce4e5b9ull);
    for (i &= cap - 1; m[i].used && (m[i].dict != dict || m[i].stack != stack);
         i = (i + 1) & (cap - 1))
        ;
    return &m[i];
}

/* FNV-1a of the stack's function names, leaf first. */
static uint64_t stack_hash(const pfr_chunk_samples *v, uint32_t stack)
{
    uint64_t h = 1469598103934665603ull;
    pfr_frame fr[256];
    size_t nf = pfr_samples_stack_frames(v, stack, fr, 256);
    for (size_t k = 0; k < nf && k < 256; k++)
        for (const char *c = fr[k].function; *c; c++)
            h = (h ^ (uint8_t)*c) * 1099511628211ull;
    return h;
}

static uint64_t stack_digest(struct seen_list *l, const pfr_chunk_samples *v, int64_t dict,
                             uint32_t stable, uint32_t stack)
{
    if (stack >= stable)
        return stack_hash(v, stack);
    if (2 * (l->memo_n + 1) > l->memo_cap) {
        size_t cap = l->memo_cap ? 2 * l->memo_cap : 1024;
        struct stack_memo *m = calloc(cap, sizeof(*m));
        assert_non_null(m);
        for (size_t i = 0; i < l->memo_cap; i++)
            if (l->memo[i].used)
                *memo_slot(m, cap, l->memo[i].dict, l->memo[i].stack) = l->memo[i];
        free(l->memo);
        l->memo = m;
        l->memo_cap = cap;
    }
    struct stack_memo *e = memo_slot(l->memo, l->memo_cap, dict, stack);
    if (e->used)
        return e->h;
    uint64_t h = stack_hash(v, stack);
    *e = (struct stack_memo){dict, stack, true, h};
    l->memo_n++;
    return h;
}

static int seen_cb(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    struct seen_list *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = realloc(l->v, l->cap * sizeof(*l->v));
        assert_non_null(l->v);
    }
    struct seen *s = &l->v[l->n++];
    memset(s, 0, sizeof(*s));
    s->id = m->id;
    s->start = m->start_ns;
    s->end = m->end_ns;
    uint32_t stable = 0;
    s->dict = pfr_samples_dict(v, &stable, NULL);
    s->total = (uint64_t)m->totals[0];
    snprintf(s->service, sizeof(s->service), "%s", m->service);
    for (size_t i = 0; i < m->nlabels; i++)
        snprintf(s->labels + strlen(s->labels), sizeof(s->labels) - strlen(s->labels), "%s=%s;",
                 m->labels[i].key, m->labels[i].value);
    /* the samples as the shipper reads them: stacks by dictionary index, values */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < pfr_samples_count(v); i++) {
        h = (h ^ stack_digest(l, v, s->dict, stable, pfr_samples_stack(v, i))) *
            0x9e3779b97f4a7c15ull;
        h = (h ^ (uint64_t)pfr_samples_values(v, i)[0]) * 1099511628211ull;
    }
    s->digest = h;
    return 0;
}

static struct seen_list read_chunks(pfr_store *s, const pfr_store_filter *f)
{
    struct seen_list l = {0};
    pfr_scan_stats st;
    assert_int_equal(pfr_store_scan_samples(s, f, 0, seen_cb, &l, &st), 0);
    seen_done(&l);
    assert_int_equal(st.corrupt, 0);
    return l;
}

static void assert_same_chunks(const struct seen_list *a, const struct seen_list *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct seen *x = &a->v[i], *y = &b->v[i];
        if (x->id != y->id || x->start != y->start || x->end != y->end || x->dict != y->dict ||
            x->digest != y->digest || x->total != y->total || strcmp(x->service, y->service) ||
            strcmp(x->labels, y->labels))
            fail_msg("chunk %zu differs: id %lld/%lld dict %lld/%lld %s/%s", i, (long long)x->id,
                     (long long)y->id, (long long)x->dict, (long long)y->dict, x->service,
                     y->service);
    }
}

/* Cut f out of r into path (replacing it); the slice reads back as r's chunks of f. */
static pfr_slice_stats cut_and_compare(pfr_store *r, const pfr_store_filter *f, const char *path)
{
    pfr_slice_stats st;
    char err[512];
    if (pfr_store_slice_write(r, f, path, PFR_SLICE_FORCE, &st, err, sizeof(err)) != 0)
        fail_msg("slice: %s", err);
    pfr_store *sl = open_ro(path);
    struct seen_list want = read_chunks(r, f), got = read_chunks(sl, NULL);
    assert_same_chunks(&want, &got);
    assert_int_equal(st.chunks, got.n);
    assert_int_equal(st.min_id, got.v[0].id);
    assert_int_equal(st.max_id, got.v[got.n - 1].id);
    free(want.v);
    free(got.v);
    pfr_store_close(sl);
    return st;
}

/* The slice at path holds exactly the chunks of want (freed here). */
static void assert_slice_holds(const char *path, struct seen_list *want)
{
    pfr_store *sl = open_ro(path);
    struct seen_list got = read_chunks(sl, NULL);
    assert_same_chunks(want, &got);
    free(want->v);
    free(got.v);
    pfr_store_close(sl);
}

/* One integer from a query on the file at path. */
static int64_t sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *e = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &e) != SQLITE_OK)
        fail_msg("%s: %s", sql, e);
    sqlite3_close(db);
}

/* A byte of the SQLite file header. */
static int header_byte(const char *path, long off)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    int c = fgetc(f);
    fclose(f);
    return c;
}

/* A copy of the fixture's ring (in WAL mode, as rings are) to damage; malloc'ed path. */
static char *ring_copy(const char *ring, const char *path)
{
    char sql[4200];
    snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", path);
    sql_exec(ring, sql);
    sql_exec(path, "PRAGMA journal_mode = WAL");
    return strdup(path);
}

/* Names in dir other than the ring's own files. */
static size_t stray_files(const char *dir, char *first, size_t cap)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *k = e->d_name;
        if (!strcmp(k, ".") || !strcmp(k, "..") || !strncmp(k, "ring.db", 7) || !strcmp(k, SLICE))
            continue;
        if (!n)
            snprintf(first, cap, "%s", k);
        n++;
    }
    closedir(d);
    return n;
}

struct env {
    char *dir, *ring, *slice;
};

static int group_setup(void **state)
{
    struct env *e = calloc(1, sizeof(*e));
    e->dir = pfr_tu_tmpdir("slice");
    e->ring = pfr_tu_path(e->dir, "ring.db");
    e->slice = pfr_tu_path(e->dir, SLICE);
    make_ring(e->ring);
    *state = e;
    return 0;
}

static int group_teardown(void **state)
{
    struct env *e = *state;
    pfr_tu_rmdir(e->dir);
    free(e->dir);
    free(e->ring);
    free(e->slice);
    free(e);
    return 0;
}

/* ---- tests ---- */

/* An hour of one service: exactly the ring's chunks of that service overlapping the hour, each
 * with the same id, times, labels, dictionary id and samples; only the layers they need. */
static void test_slice_content(void **state)
{
    struct env *e = *state;
    unlink(e->slice);
    pfr_store *r = open_ro(e->ring);
    int64_t from = T0 + 1000 * 1000000000ll + 1, to = from + 3600 * 1000000000ll;
    pfr_store_filter f = {.from_ns = from, .to_ns = to, .service = "svc-1"};
    char err[512];
    pfr_slice_stats st = cut_and_compare(r, &f, e->slice);
    assert_int_equal(st.chunks, 361); /* 360 whole intervals, plus the one the start cuts */
    assert_int_equal(st.streams, 1);
    assert_int_equal(st.corrupt, 0);
    assert_true(st.first_ns < from && st.last_ns >= to);
    pfr_store *sl = open_ro(e->slice);

    /* a slice and its file */
    pfr_slice_info si, ri;
    assert_int_equal(pfr_store_slice_info(sl, &si), 0);
    assert_true(si.is_slice);
    assert_int_equal(si.from_ns, from);
    assert_int_equal(si.to_ns, to);
    assert_int_equal(si.source_max_id, NSVC * NINT);
    assert_true(si.id != 0);
    assert_int_equal(pfr_store_slice_info(r, &ri), 0);
    assert_false(ri.is_slice);
    char why[256];
    assert_int_equal(pfr_store_check(sl, NULL, why, sizeof(why)), 0);
    pfr_store_stats q;
    assert_int_equal(pfr_store_stats_quick(sl, &q), 0);
    assert_int_equal(q.chunks, st.chunks);
    assert_int_equal(q.max_id, st.max_id);
    pfr_store_close(sl);
    struct stat sb;
    assert_int_equal(stat(e->slice, &sb), 0);
    assert_int_equal(sb.st_size, (off_t)st.bytes);
    assert_int_equal(sb.st_mode & 0777, 0640);

    /* only the layers of the chains its chunks use, none past the newest one a chunk uses */
    assert_int_equal(sql_int(e->slice, "SELECT count(*) FROM dicts"), (int64_t)st.layers);
    assert_int_equal(sql_int(e->slice, "SELECT count(*) FROM dicts d WHERE id >"
                                       " (SELECT max(dict_id) FROM chunks c WHERE c.base_id ="
                                       " d.base_id)"),
                     0);
    assert_int_equal(sql_int(e->slice, "SELECT count(*) FROM dicts d WHERE NOT EXISTS"
                                       " (SELECT 1 FROM chunks c WHERE c.base_id = d.base_id)"),
                     0);
    assert_true(sql_int(e->slice, "SELECT count(DISTINCT base_id) FROM dicts") >= 2);
    assert_true(sql_int(e->ring, "SELECT count(*) FROM dicts") > 3 * (int64_t)st.layers);
    /* one file: no WAL beside it, rollback journal mode */
    char wal[4200];
    snprintf(wal, sizeof(wal), "%s-wal", e->slice);
    assert_int_not_equal(access(wal, F_OK), 0);
    assert_int_equal(header_byte(e->slice, 18), 1); /* 1: rollback journal, 2: WAL */
    assert_true(st.bytes * 4 < pfr_tu_file_size(e->ring));

    /* the same content cut again is the same slice (its id drives the shipper's tokens) */
    assert_int_equal(
        pfr_store_slice_write(r, &f, e->slice, PFR_SLICE_FORCE, NULL, err, sizeof(err)), 0);
    sl = open_ro(e->slice);
    pfr_slice_info si2;
    assert_int_equal(pfr_store_slice_info(sl, &si2), 0);
    assert_int_equal(si2.id, si.id);
    pfr_store_close(sl);
    pfr_store_close(r);
}

/* Profile labels and types select streams; everything when no filter. */
static void test_slice_filters(void **state)
{
    struct env *e = *state;
    pfr_store *r = open_ro(e->ring);
    pfr_kv pod2 = {"pod", "pod-2"};
    pfr_store_filter f = {.labels = &pod2, .nlabels = 1, .type = "ebpf:cpu:nanoseconds"};
    pfr_slice_stats st = cut_and_compare(r, &f, e->slice);
    assert_int_equal(st.chunks, NINT);
    assert_int_equal(st.streams, 1);

    st = cut_and_compare(r, NULL, e->slice);
    assert_int_equal(st.chunks, NSVC * NINT);
    assert_int_equal(st.streams, NSVC);
    assert_int_equal(sql_int(e->slice, "SELECT count(*) FROM dicts"),
                     sql_int(e->ring, "SELECT count(*) FROM dicts"));
    pfr_store_close(r);
}

/* Refusals leave nothing behind, and an existing file as it was. */
static void test_slice_refusals(void **state)
{
    struct env *e = *state;
    pfr_store *r = open_ro(e->ring);
    char err[512], stray[256];
    pfr_store_filter all = {0};
    assert_int_equal(
        pfr_store_slice_write(r, &all, e->slice, PFR_SLICE_FORCE, NULL, err, sizeof(err)), 0);
    uint64_t size = pfr_tu_file_size(e->slice);
    pfr_store_filter hour = {.from_ns = T0, .to_ns = T0 + 3600 * 1000000000ll};
    assert_int_equal(pfr_store_slice_write(r, &hour, e->slice, 0, NULL, err, sizeof(err)), -EEXIST);
    assert_non_null(strstr(err, "exists"));
    assert_int_equal(pfr_tu_file_size(e->slice), size);

    pfr_store_filter none = {.from_ns = T0 - 7200 * 1000000000ll, .to_ns = T0 - 3600000000000ll};
    unlink(e->slice);
    assert_int_equal(pfr_store_slice_write(r, &none, e->slice, 0, NULL, err, sizeof(err)), -ENOENT);
    assert_int_not_equal(access(e->slice, F_OK), 0);
    pfr_store_filter unknown = {.service = "no-such-service"};
    assert_int_equal(pfr_store_slice_write(r, &unknown, e->slice, 0, NULL, err, sizeof(err)),
                     -ENOENT);

    pfr_kv pid = {"pid", "1"};
    pfr_store_filter samples = {.sample_labels = &pid, .nsample_labels = 1};
    assert_int_equal(pfr_store_slice_write(r, &samples, e->slice, 0, NULL, err, sizeof(err)),
                     -EINVAL);
    pfr_store_filter backwards = {.from_ns = T0 + 10, .to_ns = T0};
    assert_int_equal(pfr_store_slice_write(r, &backwards, e->slice, 0, NULL, err, sizeof(err)),
                     -EINVAL);
    uint64_t ring_size = pfr_tu_file_size(e->ring);
    assert_int_equal(
        pfr_store_slice_write(r, &all, e->ring, PFR_SLICE_FORCE, NULL, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "the ring itself"));
    assert_int_equal(pfr_tu_file_size(e->ring), ring_size);
    char *nodir = pfr_tu_path(e->dir, "no/such/dir/x.db");
    assert_int_equal(pfr_store_slice_write(r, &all, nodir, 0, NULL, err, sizeof(err)), -ENOTDIR);
    free(nodir);
    char *dirpath = pfr_tu_path(e->dir, "sub/");
    assert_int_equal(pfr_store_slice_write(r, &all, dirpath, 0, NULL, err, sizeof(err)), -EINVAL);
    free(dirpath);
    assert_int_equal(stray_files(e->dir, stray, sizeof(stray)), 0);
    assert_int_not_equal(access(e->slice, F_OK), 0);
    pfr_store_close(r);
}

/* Broken rows in the range are left out as readers of the ring skip them: a chunk whose payload
 * fails its checksum, and the chunks after a broken layer of their chain (not those before). */
static void test_slice_corrupt(void **state)
{
    struct env *e = *state;
    char *path = pfr_tu_path(e->dir, "ring.db.broken"), *copy = ring_copy(e->ring, path);
    char sql[512];
    free(path);
    /* svc-0's first chain: a middle layer, and a payload of a chunk before that layer */
    int64_t base = sql_int(copy, "SELECT min(base_id) FROM chunks WHERE stream_id = 1");
    snprintf(sql, sizeof(sql),
             "SELECT id FROM dicts WHERE base_id = %lld ORDER BY id LIMIT 1 OFFSET 100",
             (long long)base);
    int64_t layer = sql_int(copy, sql);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM chunks WHERE base_id = %lld AND dict_id >= %lld",
             (long long)base, (long long)layer);
    int64_t spoiled = sql_int(copy, sql);
    snprintf(sql, sizeof(sql),
             "SELECT id FROM chunks WHERE base_id = %lld AND dict_id < %lld ORDER BY id"
             " LIMIT 1 OFFSET 5",
             (long long)base, (long long)layer);
    int64_t bad_chunk = sql_int(copy, sql);
    assert_true(spoiled > 10 && layer > 0);
    snprintf(sql, sizeof(sql),
             "UPDATE dicts SET crc = (crc | 1) - (crc & 1) WHERE id = %lld;"
             "UPDATE chunk_data SET data = zeroblob(length(data)) WHERE id = %lld",
             (long long)layer, (long long)bad_chunk);
    sql_exec(copy, sql);

    pfr_store *r = open_ro(copy);
    pfr_slice_stats st;
    char err[512];
    pfr_store_filter f = {.service = "svc-0"};
    unlink(e->slice);
    assert_int_equal(pfr_store_slice_write(r, &f, e->slice, 0, &st, err, sizeof(err)), 0);
    assert_int_equal(st.corrupt, (uint64_t)spoiled + 1);
    assert_int_equal(st.chunks, NINT - st.corrupt);
    pfr_store *sl = open_ro(e->slice);
    assert_int_equal(pfr_store_check(sl, NULL, err, sizeof(err)), 0);
    pfr_store_close(sl);
    /* what the ring's readers deliver is what the slice holds */
    struct seen_list want = {0};
    pfr_scan_stats ss;
    assert_int_equal(pfr_store_scan_samples(r, &f, 0, seen_cb, &want, &ss), 0);
    seen_done(&want);
    assert_int_equal(ss.corrupt, st.corrupt);
    assert_slice_holds(e->slice, &want);
    pfr_store_close(r);
    unlink(copy);
    free(copy);
}

/* A connection of its own evicts the ring's oldest chunks and their chains (as the writer's
 * eviction does) while the slice is being listed: the slice still holds them all. */
struct interference {
    const char *ring;
    int calls;
    bool done;
};

static int interfere(void *ctx)
{
    struct interference *in = ctx;
    if (in->done || ++in->calls < 50)
        return 0;
    in->done = true;
    sqlite3 *db = NULL;
    char *e = NULL;
    assert_int_equal(sqlite3_open(in->ring, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_exec(db,
                     "BEGIN IMMEDIATE; DELETE FROM chunk_data WHERE id <= 1200;"
                     "DELETE FROM chunks WHERE id <= 1200;"
                     "DELETE FROM dicts WHERE base_id NOT IN (SELECT base_id FROM chunks); COMMIT",
                     NULL, NULL, &e) != SQLITE_OK)
        fail_msg("evicting: %s", e);
    sqlite3_close(db);
    return 0;
}

static void test_slice_snapshot(void **state)
{
    struct env *e = *state;
    char *path = pfr_tu_path(e->dir, "ring.db.evicting"), *copy = ring_copy(e->ring, path);
    char err[512];
    free(path);
    pfr_store *r = open_ro(copy);
    struct seen_list want = read_chunks(r, NULL);
    struct interference in = {.ring = copy};
    sqlite3_progress_handler(r->sql.db, 10, interfere, &in);
    pfr_slice_stats st;
    unlink(e->slice);
    assert_int_equal(pfr_store_slice_write(r, NULL, e->slice, 0, &st, err, sizeof(err)), 0);
    sqlite3_progress_handler(r->sql.db, 0, NULL, NULL);
    assert_true(in.done);
    assert_int_equal(st.corrupt, 0);
    assert_int_equal(sql_int(copy, "SELECT count(*) FROM chunks"), NSVC * NINT - 1200);
    assert_slice_holds(e->slice, &want);
    pfr_store_close(r);
    unlink(copy);
    free(copy);
}

/* Slices cut while another process appends. */
struct live_case {
    const char *writer; /* store_writer_proc */
    uint64_t max_bytes; /* the ring's cap */
};

/* One slice of a ring being written, checked: whole (pfr_store_check), and one snapshot of the
 * ring: every chunk of the range up to the newest id it saw, none corrupt. With a large cap the
 * ring still holds them all to compare; with a small one the writer evicts (chunks and their
 * chains) while the slice is cut, and only the unbroken run of ids tells. */
static void check_live_slice(pfr_store *r, const char *slice, const pfr_store_filter *f,
                             const pfr_slice_stats *st, bool evicting)
{
    char err[512];
    pfr_store *sl = open_ro(slice);
    pfr_slice_info si;
    assert_int_equal(pfr_store_slice_info(sl, &si), 0);
    assert_int_equal(pfr_store_check(sl, NULL, err, sizeof(err)), 0);
    assert_int_equal(st->corrupt, 0);
    struct seen_list got = read_chunks(sl, NULL);
    assert_int_equal(got.v[got.n - 1].id, si.source_max_id);
    if (evicting) {
        /* the writer's single stream takes consecutive ids */
        assert_int_equal(got.v[got.n - 1].id - got.v[0].id + 1, (int64_t)got.n);
    } else {
        pfr_store_filter upto = *f;
        upto.max_id = si.source_max_id;
        struct seen_list want = read_chunks(r, &upto);
        assert_same_chunks(&want, &got);
        free(want.v);
    }
    free(got.v);
    pfr_store_close(sl);
}

static void test_slice_during_writes(void **state)
{
    const struct live_case *lc = *state;
    bool evicting = lc->max_bytes < (64ull << 20);
    char *dir = pfr_tu_tmpdir("slice-live");
    char *ring = pfr_tu_path(dir, "ring.db"), *slice = pfr_tu_path(dir, SLICE);
    struct writer_run w;
    assert_int_equal(pfr_writer_start(&w, lc->writer, ring, 5, 1500, lc->max_bytes, true), 0);
    struct committed *rep = NULL;
    size_t nrep = 0, cap = 0;
    int eof = 0, during = 0, rounds = 0;
    while (!eof) {
        eof = pfr_writer_read(&w, 5, &rep, &nrep, &cap);
        /* six slices cut while it appends prove the case; more only slowed the writer (each
         * reads the whole ring: minutes under a sanitizer on a loaded host) */
        if (nrep < 50 || during >= 6) {
            usleep(nrep < 50 ? 2000 : 20000);
            continue;
        }
        pfr_store *r = open_ro(ring);
        /* a range whose end the writer is still filling (and, evicting, whose start it drops) */
        pfr_store_filter f = {.from_ns = WRITER_PROC_T0 + 20 * WRITER_PROC_INTERVAL,
                              .to_ns = WRITER_PROC_T0 + 100000 * WRITER_PROC_INTERVAL};
        pfr_slice_stats st;
        char err[512];
        int rc = pfr_store_slice_write(r, &f, slice, PFR_SLICE_FORCE, &st, err, sizeof(err));
        if (rc)
            fail_msg("slice during writes: %s", err);
        eof = pfr_writer_read(&w, 5, &rep, &nrep, &cap);
        check_live_slice(r, slice, &f, &st, evicting);
        pfr_store_close(r);
        during += !eof;
        rounds++;
    }
    assert_int_equal(pfr_writer_wait(&w), 0);
    assert_int_equal(nrep, 1500);
    print_message("cap %llu: %d slices, %d of them cut while the writer appended\n",
                  (unsigned long long)lc->max_bytes, rounds, during);
    assert_true(during >= 3);
    if (evicting) {
        pfr_store *r = open_ro(ring);
        pfr_store_stats rs;
        assert_int_equal(pfr_store_stats_get(r, &rs), 0);
        assert_true(rs.evicted > 0); /* the case is what it says */
        pfr_store_close(r);
    }
    free(rep);
    free(ring);
    free(slice);
    pfr_tu_rmdir(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_slice WRITER_EXE\n");
        return 2;
    }
    const struct CMUnitTest on_ring[] = {
        cmocka_unit_test(test_slice_content),  cmocka_unit_test(test_slice_filters),
        cmocka_unit_test(test_slice_refusals), cmocka_unit_test(test_slice_corrupt),
        cmocka_unit_test(test_slice_snapshot),
    };
    /* apart: a group's state would replace the writer's path */
    struct live_case keep = {argv[1], 1ull << 30}, evict = {argv[1], 1ull << 20};
    /* age-only eviction: the evicting case counts on the writer's ids staying consecutive */
    setenv("WRITER_PROC_TIERS", "off", 1);
    const struct CMUnitTest live[] = {
        cmocka_unit_test_prestate(test_slice_during_writes, &keep),
        cmocka_unit_test_prestate(test_slice_during_writes, &evict),
    };
    int failed = cmocka_run_group_tests(on_ring, group_setup, group_teardown);
    return failed + cmocka_run_group_tests(live, NULL, NULL);
}
