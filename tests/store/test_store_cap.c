/*
 * Cap test: APPENDS (default 1,000,000) small chunks of 4 streams into a ring capped at CAP
 * bytes (default 2 MiB), in transactions of 5000. After every transaction the database file and
 * its WAL are measured; the database file must never exceed CAP + the largest chunk + SLACK,
 * and the database plus WAL never CAP + the largest chunk + SLACK either (the WAL's budget is
 * carved out of the cap), and the file reaches two thirds of the cap (room made ahead of a
 * transaction is about what its chunks take: twice that held half the ring). At the end: the
 * counters add up (appended = live + evicted + rolled up), chunks evicted past a consumer's
 * cursor are counted as lost-unshipped, and the ring checks clean.
 *
 *   test_store_cap [APPENDS] [CAP]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfr_check.h"
#include "pfr_store.h"
#include "store_test_util.h"

/* SQLite's own pages beyond the payload: the schema page, B-tree interior pages and the
 * pointer-map pages of incremental vacuum. Stated in docs/store.md. */
#define SLACK     (64u << 10)
#define BATCH     5000
#define NVARIANTS 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct maxsize {
    uint64_t chunk;
};

static int max_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    struct maxsize *x = ctx;
    if (m->stored_bytes > x->chunk)
        x->chunk = m->stored_bytes;
    return 0;
}

int main(int argc, char **argv)
{
    long appends = argc > 1 ? atol(argv[1]) : 1000000;
    uint64_t cap = argc > 2 ? strtoull(argv[2], NULL, 10) : 2u << 20;
    char *dir = pfr_tu_tmpdir("cap");
    char *db = pfr_tu_path(dir, "ring.db");
    char *wal = pfr_tu_path(dir, "ring.db-wal");
    pfr_store *s;
    char err[256];
    pfr_store_opts o = {.max_bytes = cap};
    REQUIRE(pfr_store_open(db, &o, &s, err, sizeof(err)) == 0, "open: %s", err);

    /* Small chunks: one or two samples of two frames (what an idle process's 10 s looks like). */
    pfr_profile *variants[NVARIANTS];
    for (int i = 0; i < NVARIANTS; i++) {
        pfr_profile *p = pfr_profile_new();
        pfr_profile_add_sample_type(p, "ebpf:cpu:nanoseconds", "nanoseconds");
        pfr_profile_set_period(p, "cpu", "nanoseconds", 10000000);
        for (int k = 0; k <= i % 2; k++) {
            char leaf[32], root[32];
            snprintf(leaf, sizeof(leaf), "work_%d", (i + k) % 16);
            snprintf(root, sizeof(root), "main_%d", k);
            uint32_t locs[2] = {(uint32_t)pfr_profile_add_frame(p, leaf, "app.c", 10 + i % 7),
                                (uint32_t)pfr_profile_add_frame(p, root, "app.c", 3)};
            int64_t v = (int64_t)(1 + i % 5) * 10000000;
            pfr_profile_add_sample(p, locs, 2, &v, NULL, 0);
        }
        variants[i] = p;
    }
    const char *services[4] = {"svc-a", "svc-b", "svc-c", "svc-d"};
    pfr_chunk_in in[BATCH];
    int64_t ids[BATCH];
    uint64_t max_db = 0, max_wal = 0, max_sum = 0, max_chunk = 0;
    int64_t cursor = 0;
    double t0 = now();
    for (long i = 0; i < appends; i += BATCH) {
        int n = appends - i < BATCH ? (int)(appends - i) : BATCH;
        for (int j = 0; j < n; j++) {
            long k = i + j;
            int64_t start = 1700000000000000000ll + (k / 4) * 10000000000ll;
            in[j] = (pfr_chunk_in){services[k % 4],
                                   NULL,
                                   0,
                                   start,
                                   start + 10000000000ll,
                                   variants[(k / 4 + k % 4 * 7) % NVARIANTS]};
        }
        int rc = pfr_store_append_batch(s, in, (size_t)n, ids);
        REQUIRE(rc == 0, "append at %ld: %d", i, rc);
        if (i == (appends / 10) / BATCH * BATCH) {
            cursor = ids[0];
            REQUIRE(pfr_store_cursor_set(s, "shipper", cursor) == 0, "cursor");
        }
        uint64_t d = pfr_tu_file_size(db), w = pfr_tu_file_size(wal);
        max_db = d > max_db ? d : max_db;
        max_wal = w > max_wal ? w : max_wal;
        max_sum = d + w > max_sum ? d + w : max_sum;
        if (i % 100000 == 0) {
            /* The largest chunk so far (they are all alike; look now and then). */
            struct maxsize m = {0};
            pfr_store_filter f = {.after_id = ids[n - 1] - 64};
            REQUIRE(pfr_store_scan(s, &f, PFR_SCAN_META_ONLY, max_cb, &m, NULL) == 0, "scan");
            max_chunk = m.chunk > max_chunk ? m.chunk : max_chunk;
        }
    }
    double secs = now() - t0;
    pfr_store_stats st;
    REQUIRE(pfr_store_stats_get(s, &st) == 0, "stats");
    printf("cap test: %ld appends in %.1f s (%.0f/s), cap %" PRIu64 " B\n", appends, secs,
           appends / secs, cap);
    printf("  max database file %" PRIu64 " B, max WAL %" PRIu64 " B, max database + WAL %" PRIu64
           " B, largest chunk %" PRIu64 " B\n",
           max_db, max_wal, max_sum, max_chunk);
    printf("  live chunks %" PRIu64 ", evicted %" PRIu64 ", rolled up %" PRIu64
           ", lost-unshipped %" PRIu64 ", data bytes %" PRIu64 "\n",
           st.chunks, st.evicted, st.rolled_up, st.lost_unshipped, st.data_bytes);
    REQUIRE(max_db <= cap + max_chunk + SLACK, "database file %" PRIu64 " past cap + chunk + slack",
            max_db);
    REQUIRE(max_sum <= cap + max_chunk + SLACK, "database + WAL %" PRIu64 " past the bound",
            max_sum);
    REQUIRE(max_db >= cap / 3 * 2, "database file at most %" PRIu64 " B: the ring holds too little",
            max_db);
    REQUIRE(st.appended == (uint64_t)appends, "appended %" PRIu64, st.appended);
    /* a roll-up of k chunks leaves one: k - 1 counted as rolled up */
    REQUIRE(st.chunks + st.evicted + st.rolled_up == (uint64_t)appends,
            "live + evicted + rolled up != appended");
    REQUIRE(st.evicted > (uint64_t)appends / 2, "the ring should have wrapped many times");
    /* Chunk ids are 1..appends and a roll-up keeps its inputs' smallest: the chunks gone, evicted
     * or merged away, are the oldest ids, and only those the consumer had taken (ids up to its
     * cursor) are rolled up. So the lost are what is gone past the cursor. */
    uint64_t gone = st.evicted + st.rolled_up;
    uint64_t want_lost = gone > (uint64_t)cursor ? gone - (uint64_t)cursor : 0;
    REQUIRE(st.lost_unshipped == want_lost, "lost-unshipped %" PRIu64 ", expected %" PRIu64,
            st.lost_unshipped, want_lost);
    /* The ring stays useful: most of the cap holds live data. */
    REQUIRE(st.data_bytes > cap / 8, "only %" PRIu64 " B of live data", st.data_bytes);
    uint64_t bad;
    REQUIRE(pfr_store_check(s, &bad, err, sizeof(err)) == 0, "check: %s", err);
    pfr_store_close(s);
    for (int i = 0; i < NVARIANTS; i++)
        pfr_profile_free(variants[i]);
    pfr_tu_rmdir(dir);
    free(dir);
    free(db);
    free(wal);
    printf("cap test passed\n");
    return 0;
}
