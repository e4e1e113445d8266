/*
 * bench_fold: what the coarsest tier's fold (store/store_fold.h) keeps and costs, hour by hour,
 * on pfr_testgen's load: each hour of one service's 10 s profiles is merged (as a roll-up into
 * the 1 h tier would), folded at each bound, and appended through the writer's path into a ring
 * of its own per bound (one chain, as the coarsest tier's), so the bytes an hour costs at steady
 * state (its chunk and what its chain grows by) are measured without a month-long run.
 *
 *   bench_fold WORKDIR [--hours H] [--drift PERMILLE] [--bounds N,N,...]
 *     --hours H: hours generated (default 48); the last half are the steady state reported
 *     --drift P: pfr_testgen's stacks replaced per interval, per mille (default 30; 0 = none)
 *     --bounds: fold bounds compared (default 250,500,1000,2000,0; 0 = never fold)
 *
 * Prints per bound: distinct entries an hour (before, after), the share of the value moved under
 * "[folded]" frames, the share of its stacks' frames the value keeps (store_fold_stats), and over
 * the last half of the hours the chunk and dictionary bytes an hour (what 30 days of hours take:
 * 720 times that). Put WORKDIR on tmpfs (/dev/shm).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pfr_store.h"
#include "pfr_testgen.h"
#include "store_fold.h"

#define NS       (1000000000ll)
#define HOUR     (3600 * NS)
#define INTERVAL (10 * NS)
#define MAXB     16

struct ring {
    size_t bound;
    pfr_store *s;
    double entries_in, entries_out, moved, depth_kept;
    uint64_t chunk_bytes0, data_bytes0; /* at the half */
};

static int tier_cb(const pfr_tier_info *t, void *ctx)
{
    *(uint64_t *)ctx += t->bytes;
    return 0;
}

static int measure(pfr_store *s, uint64_t *chunk_bytes, uint64_t *data_bytes)
{
    pfr_store_stats st;
    *chunk_bytes = 0;
    int rc = pfr_store_tiers_list(s, tier_cb, chunk_bytes);
    if (!rc)
        rc = pfr_store_stats_get(s, &st);
    *data_bytes = rc ? 0 : st.data_bytes;
    return rc;
}

static int open_ring(const char *dir, size_t bound, pfr_store **s)
{
    char path[4096], side[4200];
    snprintf(path, sizeof(path), "%s/fold-%zu.db", dir, bound);
    static const char *const ext[] = {"", "-wal", "-shm", "-spare"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(side, sizeof(side), "%s%s", path, ext[i]);
        unlink(side);
    }
    pfr_store_opts o = {.max_bytes = 1ull << 30,
                        .reserve = {.mode = PFR_STORE_RESERVE_OFF},
                        .tiers = {.off = true}};
    char err[256];
    int rc = pfr_store_open(path, &o, s, err, sizeof(err));
    if (rc)
        fprintf(stderr, "bench_fold: %s: %s\n", path, err);
    return rc;
}

/* One hour of 10 s profiles of generator g merged into one profile. */
static pfr_profile *hour_of(pfr_testgen *g, int64_t t)
{
    pfr_profile *h = pfr_profile_new();
    for (int64_t k = 0; h && k < HOUR / INTERVAL; k++) {
        pfr_profile *p = pfr_testgen_next(g, t + k * INTERVAL, INTERVAL);
        if (!p || pfr_profile_merge(h, p, 0) != 0) {
            pfr_profile_free(p);
            pfr_profile_free(h);
            return NULL;
        }
        pfr_profile_free(p);
    }
    return h;
}

static int fold_into(struct ring *r, const pfr_profile *h, int64_t t, int hour, int half)
{
    pfr_profile *f = NULL;
    struct store_fold_stats st;
    int rc = pfr_st_fold(h, r->bound, &f, &st);
    if (rc)
        return rc;
    if (hour >= half) {
        r->entries_in += (double)st.in_entries;
        r->entries_out += (double)st.out_entries;
        r->moved += f ? st.moved : 0;
        r->depth_kept += st.depth_kept;
    }
    pfr_chunk_in in = {.service = "svc-0", .start_ns = t, .end_ns = t + HOUR, .profile = f ? f : h};
    rc = pfr_store_append(r->s, &in, NULL);
    pfr_profile_free(f);
    if (!rc && hour + 1 == half)
        rc = measure(r->s, &r->chunk_bytes0, &r->data_bytes0);
    return rc;
}

static void report(const struct ring *r, int hours, int half)
{
    uint64_t cb, db;
    if (measure(r->s, &cb, &db) != 0)
        return;
    double n = hours - half;
    double chunk = (double)(cb - r->chunk_bytes0) / n;
    double dict = ((double)(db - cb) - (double)(r->data_bytes0 - r->chunk_bytes0)) / n;
    char b[32];
    if (r->bound)
        snprintf(b, sizeof(b), "%zu", r->bound);
    else
        snprintf(b, sizeof(b), "never");
    printf("  fold %-6s entries %6.0f -> %6.0f, moved %5.1f %%, frames kept %5.1f %%, an hour: "
           "chunk %7.0f B, dictionary %7.0f B, 30 days %6.2f MB (chains now %.2f MB)\n",
           b, r->entries_in / n, r->entries_out / n, 100.0 * r->moved / n,
           100.0 * r->depth_kept / n, chunk, dict, 720.0 * (chunk + dict + 96) / 1e6,
           (double)(db - cb) / 1e6);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_fold WORKDIR [--hours H] [--drift P] [--bounds N,...]\n");
        return 2;
    }
    int hours = 48, drift = 30;
    char bounds_arg[256] = "250,500,1000,2000,0";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--hours"))
            hours = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--drift"))
            drift = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bounds"))
            snprintf(bounds_arg, sizeof(bounds_arg), "%s", argv[i + 1]);
    }
    if (hours < 2)
        hours = 2;
    struct ring r[MAXB];
    size_t nr = 0;
    int rc = 0;
    char *save = NULL;
    for (char *t = strtok_r(bounds_arg, ",", &save); t && nr < MAXB && !rc;
         t = strtok_r(NULL, ",", &save)) {
        r[nr] = (struct ring){.bound = (size_t)atol(t)};
        rc = open_ring(argv[1], r[nr].bound, &r[nr].s);
        nr += !rc;
    }
    pfr_testgen_opts o = {.drift_permille = drift > 0 ? (unsigned)drift : 0, .no_drift = !drift};
    pfr_testgen *g = pfr_testgen_new(1, 0, &o);
    int64_t t0 = 1700000000ll * NS;
    int half = hours / 2;
    for (int hour = 0; hour < hours && g && !rc; hour++) {
        int64_t t = t0 + hour * HOUR;
        pfr_profile *h = hour_of(g, t);
        if (!h) {
            rc = -ENOMEM;
            break;
        }
        for (size_t i = 0; i < nr && !rc; i++)
            rc = fold_into(&r[i], h, t, hour, half);
        pfr_profile_free(h);
    }
    if (rc)
        fprintf(stderr, "bench_fold: %s\n", strerror(-rc));
    printf("drift %d, %d hours (steady state: the last %d)\n", drift, hours, hours - half);
    for (size_t i = 0; i < nr; i++) {
        if (!rc)
            report(&r[i], hours, half);
        pfr_store_close(r[i].s);
    }
    pfr_testgen_free(g);
    return rc ? 1 : 0;
}
