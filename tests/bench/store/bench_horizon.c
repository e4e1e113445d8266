/*
 * bench_horizon: how far back the ring reaches, with tiered retention and with age-only
 * eviction, on the same generated load through the recorder's append path (one transaction per
 * interval, pfr_testgen profiles), timestamps simulated (no waiting).
 *
 *   bench_horizon WORKDIR LOAD [--days D] [--scale K] [--cap BYTES] [--drift PERMILLE]
 *                 [--fold N] [--tiers STEPS] [--every D] [--mode tiers|age|both]
 *     LOAD: svc50   50 services, 10 s intervals, D days (default 30)
 *           svc200  200 services, likewise
 *           churn   a 6 MiB ring, 1 s intervals, 3 steady services and 2 short programs started
 *                   every second (each lives 5 s, a stream of its own: its own container.id), 3
 *                   minutes; the programs are runs of 12 binaries (a build's cc1, as, sh, ...:
 *                   docs/coroot.md counted 14 in a minute of build), each binary a service of
 *                   its own functions, a run starting a few intervals into its binary's stacks
 *           churn-unique  the same, but every program a binary never seen before (its own
 *                   service and functions): what no dictionary shared by a binary's runs helps
 *     --scale K: K times fewer services and a K times smaller cap (the same bytes per stream:
 *                horizons are the same, the run K times shorter); 1 = as stated.
 *     --drift P: stacks of each profile replaced by new random ones per interval, per mille
 *                (pfr_testgen's default 30; 0 = the same stacks every interval).
 *     --fold N: the coarsest tier's fold bound (pfr_store_opts.fold_stacks; 0 = never fold,
 *                default the store's).
 *     --tiers STEPS: the tiers ring's steps (pfr_store_tiers_parse; default the store's).
 *     --every D: print the tiers every D simulated days while it runs (default 1; 0 = never),
 *                into the mode's WORKDIR/horizon-LOAD-MODE.out (tail it).
 *     --probe N: read tier 0's reach every N intervals (default 1: after every append), for
 *                its least per 10 simulated days (printed at the end and with --every); a read
 *                counts once the ring has given something of tier 0 up (rolled up or evicted).
 *     --copy-low PREFIX: when a band's least falls under an hour, copy the ring's database and
 *                WAL to PREFIX-<band>.db(-wal) (what the ring held at its low point, for sqlite3
 *                and dbstat; the writer is between transactions, so the copy opens clean).
 *
 * Both modes run at once, each in a process of its own (two cores: the run takes as long as the
 * slower), and print in order when both are done.
 * Prints, per mode (tiers default, off), each tier's step, chunks, bytes and reach (how far
 * before the newest interval its oldest chunk starts). Put WORKDIR on tmpfs (/dev/shm): the
 * store syncs every commit and this measures bytes, not the disk.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pfr_store.h"
#include "pfr_testgen.h"

#define NS (1000000000ll)

struct load {
    const char *name;
    unsigned services;
    int drift; /* per mille; -1: the generator's default */
    int64_t interval_ns, duration_ns;
    uint64_t cap;
    bool churn, unique;
    uint32_t fold;        /* pfr_store_opts.fold_stacks */
    const char *tiers;    /* the tiers ring's steps (NULL: the default) */
    double every_days;    /* progress every so many simulated days (0: none) */
    int64_t probe;        /* read tier 0's reach every so many intervals (0: never) */
    const char *copy_low; /* copy the ring here when a band's least falls (NULL: never) */
};

#define CHURN_BINARIES 12

struct tiers_out {
    pfr_tier_info t[PFR_STORE_MAX_TIERS + 1];
    size_t n;
};

static int tier_cb(const pfr_tier_info *t, void *ctx)
{
    struct tiers_out *o = ctx;
    if (o->n <= PFR_STORE_MAX_TIERS)
        o->t[o->n++] = *t;
    return 0;
}

static void human(int64_t ns, char *buf, size_t len)
{
    double s = (double)ns / 1e9;
    if (s >= 86400 * 2)
        snprintf(buf, len, "%.1f d", s / 86400);
    else if (s >= 7200)
        snprintf(buf, len, "%.1f h", s / 3600);
    else if (s >= 120)
        snprintf(buf, len, "%.1f min", s / 60);
    else
        snprintf(buf, len, "%.0f s", s);
}

static void print_tiers(pfr_store *s, const struct load *l, int64_t newest)
{
    struct tiers_out to = {0};
    if (pfr_store_tiers_list(s, tier_cb, &to) != 0)
        return;
    for (size_t i = 0; i < to.n; i++) {
        char step[32], reach[32];
        if (to.t[i].tier == 0)
            human(l->interval_ns, step, sizeof(step));
        else
            human(to.t[i].step_ns, step, sizeof(step));
        human(newest - to.t[i].first_ns, reach, sizeof(reach));
        printf("        tier %d  %-7s %8llu chunks %8.1f MiB  reaches back %s\n", to.t[i].tier,
               step, (unsigned long long)to.t[i].chunks, (double)to.t[i].bytes / 1048576.0, reach);
    }
}

/* What the coarsest tier's fold moved: the value under "[folded]" leaves of its chunks. */
struct folded_share {
    int tier;
    double folded, total;
    uint64_t chunks, samples;
};

static int folded_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct folded_share *f = ctx;
    if (m->tier != f->tier || !p)
        return 0;
    f->chunks++;
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        pfr_frame fr;
        size_t nf = pfr_profile_sample_frames(p, i, &fr, 1);
        double v = (double)pfr_profile_sample_values(p, i)[0];
        f->samples++;
        f->total += v;
        if (nf && !strcmp(fr.function, "[folded]"))
            f->folded += v;
    }
    return 0;
}

static void print_folded(pfr_store *s, int tier)
{
    struct folded_share f = {.tier = tier};
    if (tier <= 0 || pfr_store_scan(s, NULL, 0, folded_cb, &f, NULL) != 0 || !f.chunks)
        return;
    printf("        tier %d: %llu chunks, %.0f samples a chunk, %.1f %% of the value under "
           "[folded] frames\n",
           tier, (unsigned long long)f.chunks, (double)f.samples / (double)f.chunks,
           f.total > 0 ? 100.0 * f.folded / f.total : 0.0);
}

/* Tier 0's reach (newest end less its oldest start), its least per band of 10 simulated days,
 * read after the appends by the bench itself: the floor of the saw-tooth as the probe's step
 * sees it, not a sample of it taken by a poller. */
#define BAND_NS (10 * 86400 * NS)
#define BANDS   64
struct bands {
    int64_t least[BANDS];    /* ns; -1: no read counted in the band */
    int64_t least_at[BANDS]; /* simulated time since t0 of the least */
    int64_t under_ns[BANDS]; /* simulated time read under an hour */
    int n;
    int64_t last; /* the last read's reach (-1: none) */
};

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = a && b ? 0 : -1;
    while (!rc && (n = fread(buf, 1, sizeof(buf), a)) > 0)
        rc = fwrite(buf, 1, n, b) == n ? 0 : -1;
    if (a)
        fclose(a);
    if (b && fclose(b) != 0)
        rc = -1;
    return rc;
}

/* The ring's database and WAL copied to prefix-<band>.db: the ring at its band's low point. */
static void copy_low(const char *path, const char *prefix, int band)
{
    char from[4200], to[4200];
    snprintf(to, sizeof(to), "%s-%d.db-wal", prefix, band);
    unlink(to);
    snprintf(to, sizeof(to), "%s-%d.db", prefix, band);
    if (copy_file(path, to) != 0)
        fprintf(stderr, "bench_horizon: copy to %s failed\n", to);
    snprintf(from, sizeof(from), "%s-wal", path);
    snprintf(to, sizeof(to), "%s-%d.db-wal", prefix, band);
    if (access(from, F_OK) == 0 && copy_file(from, to) != 0)
        fprintf(stderr, "bench_horizon: copy to %s failed\n", to);
}

static void probe_tier0(pfr_store *s, struct bands *bd, int64_t t0, int64_t newest, int64_t step,
                        const char *path, const char *copy_prefix)
{
    struct tiers_out to = {0};
    if (pfr_store_tiers_list(s, tier_cb, &to) != 0 || !to.n)
        return;
    pfr_tier_info *z = to.t[0].tier == 0 ? &to.t[0] : NULL;
    /* counted once the ring gave up some of tier 0: a coarser tier, or tier 0 not from t0 */
    if (to.n < 2 && (!z || z->first_ns <= t0))
        return;
    int64_t reach = z ? newest - z->first_ns : 0;
    int b = (int)((newest - t0 - 1) / BAND_NS);
    if (b < 0 || b >= BANDS)
        return;
    for (; bd->n <= b; bd->n++)
        bd->least[bd->n] = -1;
    if (bd->least[b] < 0 || reach < bd->least[b]) {
        bd->least[b] = reach;
        bd->least_at[b] = newest - t0;
        if (copy_prefix && reach < 3600 * NS)
            copy_low(path, copy_prefix, b);
    }
    if (reach < 3600 * NS)
        bd->under_ns[b] += step;
    bd->last = reach;
}

static void print_bands(const struct bands *bd)
{
    if (!bd->n)
        return;
    printf("        tier 0 at least, per 10 days:");
    for (int i = 0; i < bd->n; i++)
        if (bd->least[i] < 0)
            printf("%s -", i ? " /" : "");
        else
            printf("%s %.1f min", i ? " /" : "", (double)bd->least[i] / 60e9);
    printf(" (at");
    for (int i = 0; i < bd->n; i++)
        printf("%s %.2f d", i ? "," : "", (double)bd->least_at[i] / 864e11);
    printf("; under 60 min for");
    for (int i = 0; i < bd->n; i++)
        printf("%s %.1f h", i ? "," : "", (double)bd->under_ns[i] / 36e11);
    printf(" of simulated time); last %.1f min\n", (double)bd->last / 60e9);
}

static int run(const char *dir, const struct load *l, bool tiers_off, int64_t t0)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/horizon-%s-%s.db", dir, l->name, tiers_off ? "age" : "tiers");
    unlink(path);
    char side[4200];
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-spare", path);
    unlink(side);
    pfr_store_opts o = {.max_bytes = l->cap,
                        .reserve = {.mode = PFR_STORE_RESERVE_OFF},
                        .tiers = {.off = tiers_off},
                        .fold_stacks = l->fold};
    char err[256];
    if (!tiers_off && l->tiers && pfr_store_tiers_parse(l->tiers, &o.tiers, err, sizeof(err))) {
        fprintf(stderr, "bench_horizon: --tiers %s: %s\n", l->tiers, err);
        return -EINVAL;
    }
    pfr_store *s = NULL;
    int rc = pfr_store_open(path, &o, &s, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "bench_horizon: %s: %s\n", path, err);
        return rc;
    }
    unsigned steady = l->churn ? 3 : l->services;
    unsigned cap_streams = steady + (l->churn ? 10 : 0);
    pfr_testgen **g = calloc(cap_streams, sizeof(*g));
    pfr_chunk_in *in = calloc(cap_streams, sizeof(*in));
    pfr_kv *kv = calloc(cap_streams, sizeof(*kv));
    pfr_profile **ps = calloc(cap_streams, sizeof(*ps));
    int64_t *born = calloc(cap_streams, sizeof(*born));
    char(*cid)[32] = calloc(cap_streams, sizeof(*cid)); /* a run's container.id */
    pfr_testgen_opts small = {.nstacks = 40, .nfunctions = 400};
    pfr_testgen_opts svc = {.drift_permille = l->drift > 0 ? (unsigned)l->drift : 0,
                            .no_drift = l->drift == 0};
    for (unsigned i = 0; i < steady; i++)
        g[i] = pfr_testgen_new(1, i, &svc);
    unsigned next_prog = 1000;
    struct bands bd = {.last = -1};
    int64_t nint = l->duration_ns / l->interval_ns;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int64_t k = 0; k < nint && !rc; k++) {
        int64_t st = t0 + k * l->interval_ns;
        if (l->churn) {
            /* programs that ended leave, two new ones start */
            for (unsigned i = steady; i < cap_streams; i++)
                if (g[i] && st - born[i] >= 5 * NS) {
                    pfr_testgen_free(g[i]);
                    g[i] = NULL;
                }
            for (unsigned n = 0, i = steady; n < 2 && i < cap_streams; i++)
                if (!g[i]) {
                    unsigned run = next_prog++;
                    unsigned bin = l->unique ? run : 1000 + (run * 7) % CHURN_BINARIES;
                    g[i] = pfr_testgen_new(1, bin, &small);
                    for (unsigned skip = l->unique ? 0 : run % 5; g[i] && skip; skip--)
                        pfr_profile_free(pfr_testgen_next(g[i], st, l->interval_ns));
                    snprintf(cid[i], sizeof(cid[i]), "/run/%u", run);
                    born[i] = st;
                    n++;
                }
        }
        size_t n = 0;
        for (unsigned i = 0; i < cap_streams; i++) {
            if (!g[i])
                continue;
            ps[n] = pfr_testgen_next(g[i], st, l->interval_ns);
            kv[n] = (pfr_kv){"container.id", cid[i]};
            in[n] = (pfr_chunk_in){.service = pfr_testgen_service(g[i]),
                                   .labels = kv + n,
                                   .nlabels = i >= steady && !l->unique,
                                   .start_ns = st,
                                   .end_ns = st + l->interval_ns,
                                   .profile = ps[n]};
            n++;
        }
        rc = pfr_store_append_batch(s, in, n, NULL);
        for (size_t i = 0; i < n; i++)
            pfr_profile_free(ps[i]);
        if (rc)
            fprintf(stderr, "bench_horizon: append: %s\n", strerror(-rc));
        if (!rc && !tiers_off && l->probe > 0 && (k + 1) % l->probe == 0)
            probe_tier0(s, &bd, t0, st + l->interval_ns, l->probe * l->interval_ns, path,
                        l->copy_low);
        int64_t every = (int64_t)(l->every_days * 86400) * NS / l->interval_ns;
        if (!rc && every > 0 && (k + 1) % every == 0 && k + 1 < nint) {
            clock_gettime(CLOCK_MONOTONIC, &b);
            printf("  after %.1f d (%.0f s):\n", (double)(k + 1) * (double)l->interval_ns / 864e11,
                   (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
            print_tiers(s, l, st + l->interval_ns);
            print_bands(&bd);
            fflush(stdout);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    int64_t newest = t0 + nint * l->interval_ns;
    struct tiers_out to = {0};
    pfr_store_stats stt;
    if (!rc)
        rc = pfr_store_tiers_list(s, tier_cb, &to);
    if (!rc)
        rc = pfr_store_stats_get(s, &stt);
    if (!rc) {
        printf("%-7s %-6s cap %6.1f MiB, file %6.1f MiB (rows %6.1f MiB), %llu chunks appended, "
               "%llu rolled up, %llu evicted, %.0f s\n",
               l->name, tiers_off ? "age" : "tiers", (double)l->cap / 1048576.0,
               (double)stt.file_bytes / 1048576.0, (double)stt.data_bytes / 1048576.0,
               (unsigned long long)stt.appended, (unsigned long long)stt.rolled_up,
               (unsigned long long)stt.evicted,
               (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
        print_tiers(s, l, newest);
        print_bands(&bd);
        if (!tiers_off)
            print_folded(s, to.n ? to.t[to.n - 1].tier : 0);
    }
    for (unsigned i = 0; i < cap_streams; i++)
        pfr_testgen_free(g[i]);
    free(g);
    free(in);
    free(ps);
    free(born);
    free(cid);
    free(kv);
    pfr_store_close(s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(
            stderr,
            "usage: bench_horizon WORKDIR svc50|svc200|churn|churn-unique [--days D] [--scale K] "
            "[--cap BYTES] [--drift PERMILLE] [--fold N] [--tiers STEPS] [--every D] [--probe N] "
            "[--copy-low PREFIX] [--mode tiers|age|both]\n");
        return 2;
    }
    double days = 30;
    unsigned scale = 1;
    uint64_t cap = 0;
    const char *mode = "both";
    int drift = -1;
    uint32_t fold = 0;
    double every = 1;
    int64_t probe = 1;
    const char *tiers = NULL, *copy_low_to = NULL;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--days"))
            days = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--scale"))
            scale = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cap"))
            cap = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--mode"))
            mode = argv[i + 1];
        else if (!strcmp(argv[i], "--drift"))
            drift = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--fold"))
            fold = atoi(argv[i + 1]) > 0 ? (uint32_t)atoi(argv[i + 1]) : PFR_STORE_FOLD_OFF;
        else if (!strcmp(argv[i], "--tiers"))
            tiers = argv[i + 1];
        else if (!strcmp(argv[i], "--every"))
            every = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--probe"))
            probe = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--copy-low"))
            copy_low_to = argv[i + 1];
    }
    if (scale < 1)
        scale = 1;
    struct load l = {.name = argv[2],
                     .drift = drift,
                     .fold = fold,
                     .every_days = every,
                     .tiers = tiers,
                     .probe = probe,
                     .copy_low = copy_low_to};
    if (!strcmp(argv[2], "svc50") || !strcmp(argv[2], "svc200")) {
        unsigned n = argv[2][3] == '5' ? 50 : 200;
        l.services = n / scale ? n / scale : 1;
        l.interval_ns = 10 * NS;
        l.duration_ns = (int64_t)(days * 86400) * NS;
        l.cap = cap ? cap : PFR_STORE_DEFAULT_MAX_BYTES / scale;
    } else if (!strcmp(argv[2], "churn") || !strcmp(argv[2], "churn-unique")) {
        l.churn = true;
        l.unique = argv[2][5] != 0;
        l.interval_ns = NS;
        l.duration_ns = 180 * NS;
        l.cap = cap ? cap : 6ull << 20;
    } else {
        fprintf(stderr, "bench_horizon: unknown load %s\n", argv[2]);
        return 2;
    }
    /* 13:20 past an hour (1,700,000,000 s is not a multiple of 3,600): the first hour is partial,
     * and a run of whole days ends 13:20 into an hour (tier 0's reach at the end is its hour and
     * 13.3 minutes where it holds the hour before whole) */
    int64_t t0 = 1700000000ll * NS;
    bool modes[2] = {strcmp(mode, "age") != 0, strcmp(mode, "tiers") != 0}; /* tiers, age-only */
    char out[2][4200];
    pid_t pid[2] = {0, 0};
    for (int m = 0; m < 2; m++) {
        if (!modes[m])
            continue;
        snprintf(out[m], sizeof(out[m]), "%s/horizon-%s-%s.out", argv[1], l.name,
                 m ? "age" : "tiers");
        fflush(stdout);
        pid[m] = fork();
        if (pid[m] < 0) {
            perror("bench_horizon: fork");
            return 1;
        }
        if (pid[m] == 0) {
            if (!freopen(out[m], "w", stdout)) {
                fprintf(stderr, "bench_horizon: %s: %s (WORKDIR must exist)\n", out[m],
                        strerror(errno));
                _exit(1);
            }
            int crc = run(argv[1], &l, m == 1, t0);
            fflush(stdout);
            _exit(crc ? 1 : 0);
        }
    }
    int rc = 0;
    for (int m = 0; m < 2; m++) {
        if (!modes[m])
            continue;
        int st;
        if (waitpid(pid[m], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
            rc = 1;
        FILE *f = fopen(out[m], "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f))
            fputs(line, stdout);
        if (f)
            fclose(f);
    }
    return rc ? 1 : 0;
}
