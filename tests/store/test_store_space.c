/*
 * Disk space (issue 24): the reserve and the cap in force (pure functions), and the writer on a
 * real, small tmpfs mounted by the test (root needed): a full disk makes it give the oldest
 * chunks up and retry (the newest is written), a write fails only when nothing older is left
 * (counted once per write, kept in the ring), free space short of the reserve stops the ring's
 * growth and gives space back, and the ring grows again once the disk has room.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "pfr_store.h"
#include "pfr_testgen.h"
#include "store_test_util.h"

#define T0  1700000000000000000ll
#define SEC 1000000000ll
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* ---- the reserve and the cap in force ---- */

static void test_reserve_bytes(void **state)
{
    (void)state;
    pfr_store_reserve autor = {0}, off = {.mode = PFR_STORE_RESERVE_OFF};
    pfr_store_reserve bytes = {.mode = PFR_STORE_RESERVE_BYTES, .bytes = 100 * MiB};
    pfr_store_reserve pct = {.mode = PFR_STORE_RESERVE_PERCENT, .percent = 10};
    /* auto: 5 % on a large disk, 256 MiB on a middling one, half of a small one */
    assert_int_equal(pfr_store_reserve_bytes(&autor, 1000 * GiB), 50 * GiB);
    assert_int_equal(pfr_store_reserve_bytes(NULL, 1000 * GiB), 50 * GiB);
    assert_int_equal(pfr_store_reserve_bytes(&autor, 2 * GiB), 256 * MiB);
    assert_int_equal(pfr_store_reserve_bytes(&autor, 5120 * MiB), 256 * MiB);
    assert_int_equal(pfr_store_reserve_bytes(&autor, 6 * GiB), 6 * GiB / 20);
    assert_int_equal(pfr_store_reserve_bytes(&autor, 300 * MiB), 150 * MiB);
    assert_int_equal(pfr_store_reserve_bytes(&autor, 0), 0);
    assert_int_equal(pfr_store_reserve_bytes(&off, 1000 * GiB), 0);
    assert_int_equal(pfr_store_reserve_bytes(&bytes, 1000 * GiB), 100 * MiB);
    assert_int_equal(pfr_store_reserve_bytes(&bytes, 150 * MiB), 75 * MiB);
    assert_int_equal(pfr_store_reserve_bytes(&pct, 1000 * GiB), 100 * GiB);
    pct.percent = 80; /* at most half, whatever is asked */
    assert_int_equal(pfr_store_reserve_bytes(&pct, 1000 * GiB), 500 * GiB);
    pct.percent = 0.5;
    assert_int_equal(pfr_store_reserve_bytes(&pct, 1000 * GiB), 5 * GiB);
}

static void test_effective_cap(void **state)
{
    (void)state;
    enum pfr_store_cap_reason why;
    /* room to spare: the configured cap */
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 100 * MiB, 10 * GiB, 256 * MiB, &why),
                     512 * MiB);
    assert_int_equal(why, PFR_STORE_CAP_CONFIGURED);
    /* free space past the reserve limits the growth: what it holds plus that */
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 100 * MiB, 300 * MiB, 256 * MiB, &why),
                     144 * MiB);
    assert_int_equal(why, PFR_STORE_CAP_DISK_RESERVE);
    /* below the reserve: it stops growing, and gives nothing back ... */
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 100 * MiB, 200 * MiB, 256 * MiB, &why),
                     100 * MiB);
    assert_int_equal(why, PFR_STORE_CAP_DISK_RESERVE);
    /* ... a full disk included: the ring keeps what it holds (issue 31: it used to drop to the
     * 4 MiB floor, giving up its history because another program filled the disk) */
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 100 * MiB, 0, 256 * MiB, &why), 100 * MiB);
    assert_int_equal(why, PFR_STORE_CAP_DISK_RESERVE);
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 3 * MiB, 0, 256 * MiB, &why), 3 * MiB);
    /* below the floor it may grow to the floor where the disk has room, whatever the reserve */
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 1 * MiB, 2 * MiB, 256 * MiB, &why),
                     3 * MiB);
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 1 * MiB, 9 * MiB, 256 * MiB, &why),
                     PFR_STORE_SPACE_FLOOR);
    /* a cap under the floor is the floor */
    assert_int_equal(pfr_store_effective_cap(2 * MiB, 3 * MiB, 0, 256 * MiB, &why), 2 * MiB);
    assert_int_equal(why, PFR_STORE_CAP_CONFIGURED);
    /* no reserve: only a disk too small for the cap lowers it */
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 100 * MiB, 100 * MiB, 0, NULL), 200 * MiB);
    assert_int_equal(pfr_store_effective_cap(512 * MiB, 100 * MiB, UINT64_MAX, 0, &why), 512 * MiB);
    assert_int_equal(why, PFR_STORE_CAP_CONFIGURED);
    assert_string_equal(pfr_store_cap_reason_name(PFR_STORE_CAP_DISK_RESERVE),
                        "disk free space reserve");
    assert_string_equal(pfr_store_cap_reason_name(PFR_STORE_CAP_CONFIGURED), "configured");
}

/* ---- a writer on a small tmpfs ---- */

struct fx {
    char *dir, *db, *fill;
    pfr_testgen *gen[2];
    int64_t next; /* the next interval's start */
    pfr_store *s;
};

static int mount_tmpfs(struct fx *f, const char *size)
{
    f->dir = pfr_tu_tmpdir("space");
    char opts[64];
    snprintf(opts, sizeof(opts), "size=%s,mode=0700", size);
    if (mount("tmpfs", f->dir, "tmpfs", 0, opts) != 0) {
        fprintf(stderr, "mount tmpfs on %s: %s (the test needs root)\n", f->dir, strerror(errno));
        return -1;
    }
    f->db = pfr_tu_path(f->dir, "ring.db");
    f->fill = pfr_tu_path(f->dir, "filler");
    pfr_testgen_opts go = {.nstacks = 150, .drift_permille = 300};
    for (int i = 0; i < 2; i++)
        f->gen[i] = pfr_testgen_new(24, (unsigned)i, &go);
    f->next = T0;
    return 0;
}

static int setup_small(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    *state = f;
    return mount_tmpfs(f, "8m");
}

static int setup_large(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    *state = f;
    return mount_tmpfs(f, "40m");
}

static int teardown(void **state)
{
    struct fx *f = *state;
    pfr_store_close(f->s);
    for (int i = 0; i < 2; i++)
        pfr_testgen_free(f->gen[i]);
    if (f->dir) {
        umount2(f->dir, MNT_DETACH);
        pfr_tu_rmdir(f->dir);
    }
    free(f->dir);
    free(f->db);
    free(f->fill);
    free(f);
    return 0;
}

static void open_writer(struct fx *f, uint64_t max_bytes, pfr_store_reserve r)
{
    char err[256];
    pfr_store_opts o = {.max_bytes = max_bytes, .reserve = r};
    int rc = pfr_store_open(f->db, &o, &f->s, err, sizeof(err));
    if (rc)
        fprintf(stderr, "open: %s\n", err);
    assert_int_equal(rc, 0);
}

/* One interval of both services in one transaction; the ids written go to ids. */
static int append_interval(struct fx *f, int64_t ids[2])
{
    pfr_profile *p[2];
    pfr_chunk_in in[2];
    for (int i = 0; i < 2; i++) {
        p[i] = pfr_testgen_next(f->gen[i], f->next, 10 * SEC);
        in[i] = (pfr_chunk_in){
            pfr_testgen_service(f->gen[i]), NULL, 0, f->next, f->next + 10 * SEC, p[i]};
    }
    f->next += 10 * SEC;
    int rc = pfr_store_append_batch(f->s, in, 2, ids);
    for (int i = 0; i < 2; i++)
        pfr_profile_free(p[i]);
    return rc;
}

/* The path of the ring's file beside its database ("-wal", "-spare"), in out[512]. */
static const char *side_file(const struct fx *f, const char *suffix, char out[512])
{
    snprintf(out, 512, "%s%s", f->db, suffix);
    return out;
}

static uint64_t ring_files(const struct fx *f)
{
    char wal[512], spare[512];
    return pfr_tu_file_size(f->db) + pfr_tu_file_size(side_file(f, "-wal", wal)) +
           pfr_tu_file_size(side_file(f, "-spare", spare));
}

static uint64_t wal_file(const struct fx *f)
{
    char wal[512];
    return pfr_tu_file_size(side_file(f, "-wal", wal));
}

/* Intervals appended until the ring's files hold bytes. */
static void grow_ring(struct fx *f, int64_t ids[2], uint64_t bytes)
{
    while (ring_files(f) < bytes)
        assert_int_equal(append_interval(f, ids), 0);
}

static uint64_t fs_avail(const struct fx *f)
{
    struct statvfs v;
    assert_int_equal(statvfs(f->dir, &v), 0);
    return (uint64_t)v.f_bavail * v.f_frsize;
}

static int64_t pragma_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The database as committed (its pages in the WAL included) fits its file and the free space
 * less the WAL's room: a checkpoint can always write it back, so the WAL can always be reset.
 * A commit that grew the database past that left the WAL stuck for good on a full disk. */
static void assert_checkpointable(const struct fx *f)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    uint64_t bytes =
        (uint64_t)(pragma_int(db, "PRAGMA page_count") * pragma_int(db, "PRAGMA page_size"));
    sqlite3_close(db);
    uint64_t file = pfr_tu_file_size(f->db), avail = fs_avail(f);
    if (bytes > file + avail)
        fprintf(stderr, "database %llu B, file %llu B, free %llu B\n", (unsigned long long)bytes,
                (unsigned long long)file, (unsigned long long)avail);
    assert_true(bytes <= file + avail);
}

/* Another program writes the filler until it holds bytes or the disk is full. */
static void fill(const struct fx *f, uint64_t bytes)
{
    FILE *fp = fopen(f->fill, "ae");
    assert_non_null(fp);
    static char zeros[16384];
    while (bytes > 0) {
        size_t n = bytes < sizeof(zeros) ? (size_t)bytes : sizeof(zeros);
        if (fwrite(zeros, 1, n, fp) != n || fflush(fp) != 0)
            break;
        bytes -= n;
    }
    fclose(fp);
}

static void check_ring(struct fx *f)
{
    char err[256];
    uint64_t bad = 1;
    int rc = pfr_store_check(f->s, &bad, err, sizeof(err));
    if (rc)
        fprintf(stderr, "check: %s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(bad, 0);
}

static pfr_store_stats stats(struct fx *f)
{
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(f->s, &st), 0);
    return st;
}

/* The statistics a reader of the ring (the query tool, the shipper) gets. */
static pfr_store_stats reader_stats(const struct fx *f)
{
    pfr_store *r = NULL;
    char err[256];
    pfr_store_opts ro = {.read_only = true};
    assert_int_equal(pfr_store_open(f->db, &ro, &r, err, sizeof(err)), 0);
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(r, &st), 0);
    pfr_store_close(r);
    return st;
}

/* The disk fills up completely: every later interval is still written, the oldest chunks go
 * (counted as given up for the disk) and nothing is dropped; once the disk has room again the
 * ring grows past what it held while full. */
static void test_full_disk_gives_up_oldest(void **state)
{
    struct fx *f = *state;
    open_writer(f, 6 * MiB, (pfr_store_reserve){.mode = PFR_STORE_RESERVE_OFF});
    int64_t ids[2];
    grow_ring(f, ids, 2 * MiB);
    char spare[512]; /* made while the disk had room */
    assert_true(pfr_tu_file_size(side_file(f, "-spare", spare)) > 0);
    fill(f, UINT64_MAX);
    assert_true(fs_avail(f) < 64 * 1024);
    pfr_store_stats before = stats(f);
    for (int i = 0; i < 60; i++) {
        int rc = append_interval(f, ids);
        if (rc)
            fprintf(stderr, "interval %d on the full disk: %s\n", i, strerror(-rc));
        assert_int_equal(rc, 0);
        /* the newest interval is in the ring */
        pfr_store_stats st;
        assert_int_equal(pfr_store_stats_quick(f->s, &st), 0);
        assert_int_equal(st.max_id, ids[1]);
        assert_checkpointable(f);
    }
    pfr_store_stats full = stats(f);
    assert_true(full.evicted_disk > before.evicted_disk);
    assert_true(full.evicted - before.evicted >= full.evicted_disk - before.evicted_disk);
    assert_int_equal(full.dropped_disk, 0);
    assert_int_equal(full.appended, before.appended + 120);
    assert_int_equal(full.cap_reason, PFR_STORE_CAP_DISK_RESERVE);
    assert_true(full.effective_max_bytes < full.max_bytes);
    check_ring(f);

    /* Room again: the ring grows past what it held on the full disk. */
    uint64_t full_files = ring_files(f);
    unlink(f->fill);
    for (int i = 0; i < 400 && ring_files(f) < full_files + MiB; i++)
        assert_int_equal(append_interval(f, ids), 0);
    assert_true(ring_files(f) >= full_files + MiB);
    pfr_store_stats room = stats(f);
    assert_int_equal(room.cap_reason, PFR_STORE_CAP_CONFIGURED);
    assert_int_equal(room.effective_max_bytes, 6 * MiB);
    check_ring(f);
}

/* A full disk and chunks too large for what the ring holds: the write fails only when nothing
 * older is left, each refused chunk is counted once, and the count reaches the ring (and its
 * readers) with the next write that succeeds. */
static void test_nothing_older_left(void **state)
{
    struct fx *f = *state;
    open_writer(f, 6 * MiB, (pfr_store_reserve){.mode = PFR_STORE_RESERVE_OFF});
    int64_t ids[2];
    for (int i = 0; i < 3; i++)
        assert_int_equal(append_interval(f, ids), 0);
    fill(f, UINT64_MAX);
    /* a profile of new stacks far larger than the ring's WAL room */
    pfr_testgen_opts big = {.nstacks = 6000, .nfunctions = 20000};
    pfr_testgen *g = pfr_testgen_new(7, 5, &big);
    int rc = 0;
    int tries = 0;
    for (; tries < 20 && rc == 0; tries++) {
        pfr_profile *p = pfr_testgen_next(g, f->next, 10 * SEC);
        pfr_chunk_in in = {"big", NULL, 0, f->next, f->next + 10 * SEC, p};
        f->next += 10 * SEC;
        rc = pfr_store_append(f->s, &in, NULL);
        pfr_profile_free(p);
    }
    assert_int_equal(rc, -ENOSPC);
    pfr_store_stats st = stats(f);
    /* everything older was given up first, or giving up the last chunk did not fit the full
     * disk either (the WAL holds what the refused writes left it; docs/store.md, step 3) */
    assert_true(st.chunks <= 1);
    assert_int_equal(st.dropped_disk, 1);
    assert_true(st.evicted_disk >= 6);
    /* a second refused write counts once more */
    pfr_profile *p = pfr_testgen_next(g, f->next, 10 * SEC);
    pfr_chunk_in in = {"big", NULL, 0, f->next, f->next + 10 * SEC, p};
    assert_int_equal(pfr_store_append(f->s, &in, NULL), -ENOSPC);
    pfr_profile_free(p);
    pfr_testgen_free(g);
    assert_int_equal(stats(f).dropped_disk, 2);
    check_ring(f);

    /* Room again: the write goes through and the count is in the ring for readers. */
    unlink(f->fill);
    assert_int_equal(append_interval(f, ids), 0);
    pfr_store_stats rs = reader_stats(f);
    assert_int_equal(rs.dropped_disk, 2);
    assert_int_equal(rs.max_bytes, 6 * MiB); /* the writer's cap, not the reader's default */
    assert_int_equal(rs.reserve_bytes, 0);
}

/* A writer restarted on a disk that filled while its WAL was small (checkpointed and truncated,
 * its spare file's room taken): a new hour's bases need several times the WAL it has, and only
 * giving chunks up makes room. Giving up the chunks with the chains they leave in one
 * transaction wrote more WAL than the disk had (35-54 pages for a few chunks, against 30), and
 * the ring could neither append nor give anything up (store_crash_full, 2026-12-01): the chains
 * go after the chunks, a few rows at a time, their bases first. */
static void test_full_disk_small_wal(void **state)
{
    struct fx *f = *state;
    open_writer(f, 6 * MiB, (pfr_store_reserve){.mode = PFR_STORE_RESERVE_OFF});
    int64_t ids[2];
    grow_ring(f, ids, 2 * MiB);
    pfr_store_close(f->s);
    f->s = NULL;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL), 0);
    sqlite3_close(db);
    char spare[512];
    unlink(side_file(f, "-spare", spare));
    assert_int_equal(wal_file(f), 0);
    fill(f, fs_avail(f) - 128 * 1024);
    open_writer(f, 6 * MiB, (pfr_store_reserve){.mode = PFR_STORE_RESERVE_OFF});
    pfr_store_stats before = stats(f);
    f->next = (f->next / (3600 * SEC) + 1) * 3600 * SEC; /* the next hour: new bases */
    for (int i = 0; i < 40; i++) {
        if (i == 4)
            fill(f, UINT64_MAX); /* the WAL took what was left: nothing more */
        int rc = append_interval(f, ids);
        if (rc)
            fprintf(stderr, "interval %d (WAL %llu B, free %llu B): %s\n", i,
                    (unsigned long long)wal_file(f), (unsigned long long)fs_avail(f),
                    strerror(-rc));
        assert_int_equal(rc, 0);
        if (i == 20)
            f->next = (f->next / (3600 * SEC) + 1) * 3600 * SEC; /* and again */
    }
    pfr_store_stats full = stats(f);
    assert_int_equal(full.dropped_disk, 0);
    assert_int_equal(full.appended, before.appended + 80);
    assert_true(full.evicted_disk > before.evicted_disk);
    check_ring(f);
}

/* Free space short of the reserve: the ring stops growing and keeps what it holds, its new
 * chunks in the pages its oldest leave, with no write lost; readers see the cap in force and
 * why. With room again it grows up to its cap. */
static void test_reserve(void **state)
{
    struct fx *f = *state;
    pfr_store_reserve r = {.mode = PFR_STORE_RESERVE_BYTES, .bytes = 12 * MiB};
    open_writer(f, 16 * MiB, r);
    int64_t ids[2];
    grow_ring(f, ids, 8 * MiB);
    pfr_store_stats st = stats(f);
    assert_int_equal(st.reserve_bytes, 12 * MiB);
    assert_int_equal(st.cap_reason, PFR_STORE_CAP_CONFIGURED);
    assert_int_equal(st.effective_max_bytes, 16 * MiB);

    /* leave 12.5 MiB free, half a MiB past the reserve */
    uint64_t avail = fs_avail(f);
    assert_true(avail > 14 * MiB);
    fill(f, avail - 25 * MiB / 2);
    uint64_t held = ring_files(f);
    for (int i = 0; i < 150; i++) {
        assert_int_equal(append_interval(f, ids), 0);
        assert_true(ring_files(f) <= held + MiB / 2 + 64 * 1024);
    }
    st = stats(f);
    assert_int_equal(st.cap_reason, PFR_STORE_CAP_DISK_RESERVE);
    assert_true(st.effective_max_bytes < 16 * MiB);
    assert_true(st.evicted_disk > 0);
    assert_int_equal(st.dropped_disk, 0);
    check_ring(f);

    /* 3 MiB free: 9 below the reserve. The ring keeps what it holds (issue 31: it used to give
     * its history back down to its 4 MiB floor): the new chunks take the pages the oldest
     * leave, and the files neither grow nor shrink. */
    fill(f, fs_avail(f) - 3 * MiB);
    uint64_t short_files = ring_files(f), short_wal = wal_file(f);
    pfr_store_stats before = stats(f);
    for (int i = 0; i < 60 || (i < 1000 && stats(f).evicted_disk == before.evicted_disk); i++) {
        assert_int_equal(append_interval(f, ids), 0);
        /* the database and the spare file do not grow; the WAL stays within its budget (a
         * sixteenth of the 16 MiB cap), which it may reach from wherever it was */
        assert_true(ring_files(f) - wal_file(f) <= short_files - short_wal + 64 * 1024);
        assert_true(wal_file(f) <= (short_wal > MiB ? short_wal : MiB));
    }
    assert_true(ring_files(f) + 512 * 1024 >= short_files);
    st = stats(f);
    assert_int_equal(st.cap_reason, PFR_STORE_CAP_DISK_RESERVE);
    assert_true(st.evicted_disk > before.evicted_disk);
    /* What was written, it gave up, no more: chunks given up (roll-ups merge old chunks into
     * fewer rows, keeping their data: not counted), and the time range it holds shrank by at
     * most one chunk of the coarsest tier (an hour; the oldest may be one) */
    assert_true(st.evicted - before.evicted <= st.appended - before.appended + 16);
    assert_true(st.newest_ns - st.oldest_ns + 3600 * SEC >= before.newest_ns - before.oldest_ns);
    assert_int_equal(st.dropped_disk, 0);
    assert_int_equal(st.max_id, ids[1]);
    check_ring(f);

    /* A reader sees the writer's cap and reserve, and the same cap in force. */
    pfr_store_stats rs = reader_stats(f);
    assert_int_equal(rs.max_bytes, 16 * MiB);
    assert_int_equal(rs.reserve_bytes, 12 * MiB);
    assert_int_equal(rs.cap_reason, PFR_STORE_CAP_DISK_RESERVE);
    assert_true(rs.effective_max_bytes < 16 * MiB);
    assert_int_equal(rs.evicted_disk, st.evicted_disk);

    /* Room again: up to the cap (with the WAL's and the spare file's shares). */
    unlink(f->fill);
    for (int i = 0; i < 2000 && ring_files(f) < 14 * MiB; i++)
        assert_int_equal(append_interval(f, ids), 0);
    assert_true(ring_files(f) >= 14 * MiB);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(append_interval(f, ids), 0);
        assert_true(ring_files(f) <= 16 * MiB + 64 * 1024);
    }
    st = stats(f);
    assert_int_equal(st.cap_reason, PFR_STORE_CAP_CONFIGURED);
    check_ring(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_bytes),
        cmocka_unit_test(test_effective_cap),
        cmocka_unit_test_setup_teardown(test_full_disk_gives_up_oldest, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_older_left, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_small_wal, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_reserve, setup_large, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
