/*
 * Crash test: a writer process (store_writer_proc) appends realistic chunks and is killed with
 * SIGKILL at a random moment, ROUNDS times, on the same ring: one round in five 1-50 ms after it
 * starts (start-up, open, WAL recovery), the others 0-200 ms after its first commit. After every
 * kill:
 *   - the ring opens (read-only: a reader recovers the WAL the dead writer left),
 *   - pfr_store_check passes (PRAGMA integrity_check and every chunk's checksum and decoding),
 *   - every chunk the writer reported committed reads back with the content it was given.
 * At the end every chunk reported in any round is still there and still identical.
 * The writer also pins as `pfr pin` does (PFR_WRITER_PINS: a connection of its own, a pin every
 * append, one released every third pin), so kills land amid pins too: every pin reported
 * made and not released is in the ring after the kill, every one reported released is not.
 * Then as many rounds again on a 768 KiB ring that rolls chunks up (tiered retention) all the
 * time (profiles without drift, so payloads rather than dictionaries fill it; no pins; each
 * round killed 0-200 ms after its fortieth commit), amid roll-ups: the ring checks clean,
 * its counters add up (chunks + evicted + rolled up = appended), and every reported chunk reads
 * back identical unless it was rolled up or evicted (then its id is gone or holds a roll-up).
 *
 * With --full-disk (issue 31; root) the ring lives on a tmpfs of its own (8 MiB), the writer
 * has the store's default settings (512 MiB cap, reserve auto), and after the first round a
 * filler takes all the free space, topped up before every later round: every later writer is
 * killed while the disk is full, after it reported a commit on it (a writer whose append fails
 * ends by itself, which fails the test). The ring gives up its oldest chunks for the new ones
 * there, so a reported chunk may be missing only if it is older than the oldest the ring has.
 *
 *   test_store_crash WRITER_EXE [ROUNDS] [SEED] [--full-disk]
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pfr_check.h"
#include "pfr_store.h"
#include "store_test_util.h"
#include "store_writer_proc.h"
#include "writer_spawn.h"

struct got {
    int64_t id;
    int n, tier;
    uint64_t digest;
};

static int got_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct got *g = ctx;
    REQUIRE(g->n == 0, "two chunks with id %lld", (long long)m->id);
    g->id = m->id;
    g->digest = pfr_tu_digest(p);
    g->tier = m->tier;
    g->n++;
    return 0;
}

/* The digest of the chunk with this id as recorded; false if absent (or, gone_ok, a roll-up). */
static bool read_chunk(pfr_store *s, int64_t id, uint64_t *digest, bool gone_ok)
{
    pfr_store_filter f = {.after_id = id - 1, .max_id = id};
    struct got g = {0};
    pfr_scan_stats st;
    int rc = pfr_store_scan(s, &f, 0, got_cb, &g, &st);
    REQUIRE(rc == 0, "scan of chunk %lld: %d", (long long)id, rc);
    REQUIRE(st.corrupt == 0, "chunk %lld is corrupt", (long long)id);
    *digest = g.digest;
    return g.n == 1 && !(gone_ok && g.tier > 0);
}

/* The smallest chunk id the ring holds (INT64_MAX: none). */
static int oldest_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    int64_t *oldest = ctx;
    if (m->id < *oldest)
        *oldest = m->id;
    return 0;
}

static int64_t oldest_id(pfr_store *s)
{
    int64_t oldest = INT64_MAX;
    pfr_store_filter all = {0};
    REQUIRE(pfr_store_scan(s, &all, PFR_SCAN_META_ONLY, oldest_cb, &oldest, NULL) == 0, "scan");
    return oldest;
}

/* Another program takes all the free space of the file system: the filler grows until ENOSPC.
 * Returns the free bytes left. */
static uint64_t fill_disk(const char *filler)
{
    FILE *fp = fopen(filler, "ae");
    REQUIRE(fp, "open %s: %s", filler, strerror(errno));
    static const char zeros[4096];
    while (fwrite(zeros, 1, sizeof(zeros), fp) == sizeof(zeros) && fflush(fp) == 0)
        ;
    fclose(fp);
    struct statvfs v;
    REQUIRE(statvfs(filler, &v) == 0, "statvfs: %s", strerror(errno));
    return (uint64_t)v.f_bavail * v.f_frsize;
}

/* Wait up to ms for output and read it; 1 at end of file. */
static int drain(struct writer_run *w, uint64_t seed, struct committed **all, size_t *n,
                 size_t *cap, int ms)
{
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
    poll(&pfd, 1, ms);
    return pfr_writer_read(w, seed, all, n, cap);
}

static int cmp_committed(const void *a, const void *b)
{
    const struct committed *x = a, *y = b;
    if (x->seed != y->seed)
        return x->seed < y->seed ? -1 : 1;
    return x->n < y->n ? -1 : x->n > y->n;
}

/* The digests of the profiles the writers append, made once: the n-th profile of a writer
 * depends only on its generator's seed and drift (store_writer_proc.h), and every round of the
 * roll-up part makes the same ones. Each generator is kept to go on where it stopped. */
struct want_seq {
    uint64_t gseed;
    bool no_drift;
    pfr_testgen *g;
    uint64_t *d; /* d[n]: the digest of the n-th profile */
    size_t n, cap;
};

struct wants {
    struct want_seq *v;
    size_t n, cap;
};

static uint64_t want_digest(struct wants *ws, uint64_t seed, long n)
{
    uint64_t gseed = writer_proc_gen_seed(seed);
    bool no_drift = writer_proc_no_drift();
    struct want_seq *q = NULL;
    for (size_t i = 0; i < ws->n && !q; i++)
        if (ws->v[i].gseed == gseed && ws->v[i].no_drift == no_drift)
            q = &ws->v[i];
    if (!q) {
        if (ws->n == ws->cap) {
            ws->cap = ws->cap ? 2 * ws->cap : 64;
            REQUIRE((ws->v = realloc(ws->v, ws->cap * sizeof(*ws->v))), "out of memory");
        }
        q = &ws->v[ws->n++];
        *q = (struct want_seq){.gseed = gseed, .no_drift = no_drift, .g = writer_proc_gen(seed)};
        REQUIRE(q->g, "generator");
    }
    while (q->n <= (size_t)n) {
        if (q->n == q->cap) {
            q->cap = q->cap ? 2 * q->cap : 256;
            REQUIRE((q->d = realloc(q->d, q->cap * sizeof(*q->d))), "out of memory");
        }
        int64_t start = WRITER_PROC_T0 + (int64_t)q->n * WRITER_PROC_INTERVAL;
        pfr_profile *p = pfr_testgen_next(q->g, start, WRITER_PROC_INTERVAL);
        REQUIRE(p, "generate");
        q->d[q->n++] = pfr_tu_digest(p);
        pfr_profile_free(p);
    }
    return q->d[n];
}

static void wants_free(struct wants *ws)
{
    for (size_t i = 0; i < ws->n; i++) {
        pfr_testgen_free(ws->v[i].g);
        free(ws->v[i].d);
    }
    free(ws->v);
}

/* Check recs (sorted by seed and n) against the regenerated sequences; a chunk older than
 * evicted_below may be missing (given up for the disk), and with gone_ok any chunk may be (rolled
 * up or evicted). */
static size_t verify(pfr_store *s, struct wants *ws, struct committed *recs, size_t n,
                     int64_t evicted_below, bool gone_ok)
{
    size_t checked = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t want = want_digest(ws, recs[i].seed, recs[i].n), got;
        if (!read_chunk(s, recs[i].id, &got, gone_ok)) {
            REQUIRE(gone_ok || recs[i].id < evicted_below,
                    "committed chunk %lld (seed %llu, n %ld) is missing", (long long)recs[i].id,
                    (unsigned long long)recs[i].seed, recs[i].n);
            continue;
        }
        REQUIRE(got == want, "chunk %lld differs from what was appended", (long long)recs[i].id);
        checked++;
    }
    return checked;
}

static int pin_seen(const pfr_pin_info *p, void *ctx)
{
    struct committed *c = ctx;
    if (p->id == c->id)
        c->n = 1;
    return 0;
}

/* Pins of recs (WRITER_PIN, WRITER_UNPIN) are, or are no more, in the ring; they are taken out
 * of recs (the rest stays in order). Returns the number of pin records. */
static size_t verify_pins(pfr_store *s, struct committed *recs, size_t *n)
{
    size_t k = 0, npins = 0;
    for (size_t i = 0; i < *n; i++) {
        if (recs[i].n >= 0) {
            recs[k++] = recs[i];
            continue;
        }
        bool released = recs[i].n == WRITER_UNPIN, releasing = recs[i].n == WRITER_UNPINNING;
        for (size_t j = i + 1; j < *n && !released; j++) {
            released = recs[j].n == WRITER_UNPIN && recs[j].id == recs[i].id;
            releasing |= recs[j].n == WRITER_UNPINNING && recs[j].id == recs[i].id;
        }
        struct committed c = {.id = recs[i].id, .n = 0};
        REQUIRE(pfr_store_pins(s, pin_seen, &c) == 0, "list pins");
        /* a release begun but not reported may or may not have committed */
        REQUIRE(c.n == (released ? 0 : 1) || (releasing && !released),
                "pin %lld reported %s is %s the ring", (long long)recs[i].id,
                released ? "released" : "made", c.n ? "in" : "not in");
        npins++;
    }
    *n = k;
    return npins;
}

/* Kills amid roll-ups: a 768 KiB ring that is full after a few rounds and rolls up at every
 * transaction from then on. */
static void rollup_rounds(const char *exe, const char *dir, int rounds, struct wants *ws)
{
    char *db = pfr_tu_path(dir, "rollup.db");
    unsetenv("PFR_WRITER_PINS"); /* pinned chunks are never rolled up: kills amid roll-ups here */
    setenv("WRITER_PROC_DRIFT", "0", 1); /* payloads fill the ring: roll-ups make room */
    struct committed *all = NULL;
    size_t nall = 0, cap = 0, still = 0;
    for (int r = 0; r < rounds; r++) {
        struct writer_run w;
        uint64_t wseed = 5000 + (uint64_t)r;
        REQUIRE(pfr_writer_start(&w, exe, db, wseed, 0, 768ull << 10, true) == 0, "spawn");
        size_t first = nall;
        while (nall < first + 40 && !drain(&w, wseed, &all, &nall, &cap, 100))
            ;
        usleep((useconds_t)(rand() % 200000));
        kill(w.pid, SIGKILL);
        while (!drain(&w, wseed, &all, &nall, &cap, 1000))
            ;
        int status = pfr_writer_wait(&w);
        REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                "roll-up round %d: writer ended by itself (status %d)", r, status);
        pfr_store *s = NULL;
        char err[256];
        pfr_store_opts ro = {.read_only = true};
        REQUIRE(pfr_store_open(db, &ro, &s, err, sizeof(err)) == 0, "roll-up round %d: open: %s", r,
                err);
        uint64_t bad = 0;
        REQUIRE(pfr_store_check(s, &bad, err, sizeof(err)) == 0,
                "roll-up round %d: check: %s (%" PRIu64 " bad chunks)", r, err, bad);
        pfr_store_stats st;
        REQUIRE(pfr_store_stats_get(s, &st) == 0, "stats");
        REQUIRE(st.chunks + st.evicted + st.rolled_up == st.appended,
                "roll-up round %d: %" PRIu64 " chunks + %" PRIu64 " evicted + %" PRIu64
                " rolled up != %" PRIu64 " appended",
                r, st.chunks, st.evicted, st.rolled_up, st.appended);
        size_t mine = nall - first;
        verify_pins(s, all ? all + first : NULL, &mine);
        nall = first + mine;
        if (nall > first) {
            qsort(all + first, nall - first, sizeof(*all), cmp_committed);
            still += verify(s, ws, all + first, nall - first, 0, true);
        }
        if (r == rounds - 1) {
            REQUIRE(st.rolled_up > 0, "no roll-up in %d rounds", rounds);
            printf("roll-up rounds passed: %d kills, %" PRIu64 " chunks rolled up, %" PRIu64
                   " evicted, %zu reported chunks read back as recorded\n",
                   rounds, st.rolled_up, st.evicted, still);
        }
        pfr_store_close(s);
    }
    free(all);
    free(db);
}

/* The full disk's tmpfs, unmounted however the test ends (a REQUIRE exits at once): a failed
 * run left an 8 MiB tmpfs mounted under TMPDIR for every run after it. */
static char *full_disk_mount;

static void unmount_full_disk(void)
{
    if (full_disk_mount)
        umount2(full_disk_mount, MNT_DETACH);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_store_crash WRITER_EXE [ROUNDS] [SEED]\n");
        return 2;
    }
    bool full = strcmp(argv[argc - 1], "--full-disk") == 0;
    if (full)
        argc--;
    int rounds = argc > 2 ? atoi(argv[2]) : 50;
    unsigned seed = argc > 3 ? (unsigned)atoi(argv[3]) : (unsigned)time(NULL);
    srand(seed);
    if (!full)
        setenv("PFR_WRITER_PINS", "1", 1); /* the writers pin too (not on the full disk: a
                                            * pinned range is not given up for it) */
    else /* The disk's rounds check what is given up for it: a roll-up (the ring makes room by
          * those first, on a full disk too) would merge chunks under the smallest of their ids,
          * and the others would be missing above the oldest. Kills amid roll-ups: rollup_rounds. */
        setenv("WRITER_PROC_TIERS", "off", 1);
    printf("crash test: %d rounds, random seed %u%s\n", rounds, seed,
           full ? ", on a full 8 MiB tmpfs with the default cap" : "");
    char *dir = pfr_tu_tmpdir("crash");
    REQUIRE(!full || mount("tmpfs", dir, "tmpfs", 0, "size=8m,mode=0700") == 0,
            "mount a tmpfs on %s: %s (--full-disk needs root)", dir, strerror(errno));
    if (full) {
        full_disk_mount = dir;
        atexit(unmount_full_disk);
    }
    char *db = pfr_tu_path(dir, "ring.db"), *filler = pfr_tu_path(dir, "filler");
    uint64_t max_bytes = full ? 0 : 256ull << 20; /* 0: the store's default */
    int64_t evicted_below = 0;                    /* chunks below it may be given up */
    struct committed *all = NULL;
    size_t nall = 0, cap = 0, verified = 0;
    int killed_before_any = 0;
    struct wants ws = {0};
    for (int r = 0; r < rounds; r++) {
        struct writer_run w;
        uint64_t wseed = 1000 + (uint64_t)r;
        uint64_t free_left = 0;
        if (full && r > 0)
            free_left = fill_disk(filler);
        REQUIRE(pfr_writer_start(&w, argv[1], db, wseed, 0, max_bytes, true) == 0, "spawn");
        size_t first = nall;
        long delay_us;
        if (full && r == 0) {
            /* The ring records for a while before the disk fills: 200 chunks. */
            while (nall - first < 200 && !drain(&w, wseed, &all, &nall, &cap, 100))
                ;
            delay_us = 0;
        } else if (r % 5 == 0 && !full) {
            /* Early: during start-up, open, recovery or the first appends. */
            delay_us = 1000 + (long)(rand() % 50000);
        } else {
            /* Amid appends: once the first chunk is reported, anywhere in the next 200 ms. */
            while (nall == first && !drain(&w, wseed, &all, &nall, &cap, 100))
                ;
            /* on a full disk longer: enough appends for the oldest chunks to be given up */
            delay_us = (long)(rand() % (full ? 600000 : 200000));
        }
        usleep((useconds_t)delay_us);
        kill(w.pid, SIGKILL);
        while (!drain(&w, wseed, &all, &nall, &cap, 1000))
            ;
        int status = pfr_writer_wait(&w);
        REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                "round %d: writer ended by itself (status %d)", r, status);
        if (nall == first)
            killed_before_any++;

        pfr_store *s = NULL;
        char err[256];
        pfr_store_opts ro = {.read_only = true};
        int rc = pfr_store_open(db, &ro, &s, err, sizeof(err));
        if (rc && nall == 0) {
            /* Killed before the very first schema commit: nothing to check yet. */
            printf("round %d: no store yet (%s)\n", r, err);
            continue;
        }
        REQUIRE(rc == 0, "round %d: open after kill: %s", r, err);
        uint64_t bad = 0;
        rc = pfr_store_check(s, &bad, err, sizeof(err));
        REQUIRE(rc == 0, "round %d: check: %s (%" PRIu64 " bad chunks)", r, err, bad);
        size_t mine = nall - first;
        /* (all is NULL until a round reports a commit: no pointer arithmetic on it) */
        size_t npins = verify_pins(s, all ? all + first : NULL, &mine);
        nall = first + mine;
        if (full)
            evicted_below = oldest_id(s);
        if (nall > first) {
            qsort(all + first, nall - first, sizeof(*all), cmp_committed);
            verified += verify(s, &ws, all + first, nall - first, evicted_below, false);
        }
        pfr_store_stats st;
        REQUIRE(pfr_store_stats_get(s, &st) == 0, "stats");
        REQUIRE(st.dropped_disk == 0, "round %d: %llu chunks dropped for the disk", r,
                (unsigned long long)st.dropped_disk);
        pfr_store_close(s);
        printf("round %d: killed %ld ms %s, %zu chunks reported committed, all read back; %zu "
               "pins and releases checked",
               r, delay_us / 1000, r % 5 == 0 && !full ? "after start" : "after the first commit",
               nall - first, npins);
        if (full && r > 0)
            printf(" (disk full: %llu B free; %llu chunks in the ring, %llu given up for it)",
                   (unsigned long long)free_left, (unsigned long long)st.chunks,
                   (unsigned long long)st.evicted_disk);
        printf("\n");
    }
    /* Everything ever reported is still there. */
    pfr_store *s = NULL;
    char err[256];
    pfr_store_opts ro = {.read_only = true};
    REQUIRE(pfr_store_open(db, &ro, &s, err, sizeof(err)) == 0, "final open: %s", err);
    if (nall)
        qsort(all, nall, sizeof(*all), cmp_committed);
    size_t final = verify(s, &ws, all, nall, full ? oldest_id(s) : 0, false);
    pfr_store_stats st;
    REQUIRE(pfr_store_stats_get(s, &st) == 0, "stats");
    pfr_store_close(s);
    printf("crash test passed: %d kills (%d before any commit), %zu chunks verified after their "
           "round, %zu again at the end; ring has %" PRIu64 " chunks\n",
           rounds, killed_before_any, verified, final, st.chunks);
    if (!full) /* (the full disk's rounds are about the disk: the filler leaves no room here) */
        rollup_rounds(argv[1], dir, rounds, &ws);
    wants_free(&ws);
    free(all);
    unmount_full_disk();
    full_disk_mount = NULL;
    pfr_tu_rmdir(dir);
    free(dir);
    free(db);
    free(filler);
    return 0;
}
