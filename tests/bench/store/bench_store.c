/*
 * Store benchmark: each figure beside its peer, measured in the same run, medians over runs.
 *
 *   bench_store WORKDIR [GO] [--chunks N] [--runs N] [--go-runs N]
 *
 * 1. Bytes on disk per chunk: a day (N = 8,640) of 10 s CPU profiles of one service (pfr_testgen)
 *    in the ring, against the same profiles as individual gzip'd pprof files.
 * 2. Range read: merge the N chunks of the service (decompress + decode + merge) with
 *    pfr_store_merge, against `go tool pprof -proto` merging the N .pb.gz files.
 * 3. Append rate of realistic chunks: single appends (one fsync each, synchronous=FULL),
 *    batches of 10 and 100 (one fsync per batch), against writing each profile as a gzip'd pprof
 *    file with an fsync (what a file-per-profile recorder does).
 * Use a release build. Prints a table; exit 0 unless something failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pfr_store.h"
#include "pfr_testgen.h"

#define T0       1700000000000000000ll
#define INTERVAL 10000000000ll

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this process: on a shared machine it moves less than wall time with the load. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), dcmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t fsize(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_store: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
    exit(1);
}

static void rm_ring(const char *db)
{
    char p[4300];
    unlink(db);
    snprintf(p, sizeof(p), "%s-wal", db);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", db);
    unlink(p);
}

/* ---- 1 + setup: the day of profiles, as a ring and as .pb.gz files ---- */
static void build_day(const char *work, const char *db, int nchunks, uint64_t *gz_bytes,
                      int64_t *total_value)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/pprof", work);
    mkdir(dir, 0755);
    rm_ring(db);
    pfr_store *s;
    char err[256];
    pfr_store_opts o = {.max_bytes = 4ull << 30};
    int rc = pfr_store_open(db, &o, &s, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "%s\n", err);
        die("open", rc);
    }
    pfr_testgen *g = pfr_testgen_new(42, 0, NULL);
    pfr_kv labels[2] = {{"host.name", "bench-host"}, {"container.id", "c0ffee"}};
    enum { BATCH = 36 };
    pfr_profile *ps[BATCH];
    pfr_chunk_in in[BATCH];
    *gz_bytes = 0;
    *total_value = 0;
    for (int i = 0; i < nchunks; i += BATCH) {
        int n = nchunks - i < BATCH ? nchunks - i : BATCH;
        for (int j = 0; j < n; j++) {
            int64_t start = T0 + (int64_t)(i + j) * INTERVAL;
            ps[j] = pfr_testgen_next(g, start, INTERVAL);
            if (!ps[j])
                die("testgen", -ENOMEM);
            char path[4300];
            snprintf(path, sizeof(path), "%s/%05d.pb.gz", dir, i + j);
            if ((rc = pfr_testgen_write_pprof(ps[j], path)) != 0)
                die("write pprof", rc);
            *gz_bytes += fsize(path);
            *total_value += pfr_testgen_total(ps[j]);
            in[j] =
                (pfr_chunk_in){pfr_testgen_service(g), labels, 2, start, start + INTERVAL, ps[j]};
        }
        if ((rc = pfr_store_append_batch(s, in, (size_t)n, NULL)) != 0)
            die("append", rc);
        for (int j = 0; j < n; j++)
            pfr_profile_free(ps[j]);
    }
    pfr_testgen_free(g);
    pfr_store_close(s); /* checkpoints and removes the WAL: the file is the ring */
}

/* ---- 2: range read ---- */
static double store_merge_once(const char *db, int nchunks, int64_t *value, size_t *samples)
{
    pfr_store *s;
    char err[256];
    pfr_store_opts o = {.read_only = true};
    int rc = pfr_store_open(db, &o, &s, err, sizeof(err));
    if (rc)
        die("open ro", rc);
    pfr_store_filter f = {
        .service = "svc-0",
        .type = "ebpf:cpu:nanoseconds",
        .from_ns = T0,
        .to_ns = T0 + (int64_t)nchunks * INTERVAL,
    };
    pfr_profile *p = NULL;
    pfr_scan_stats st;
    double t = now();
    rc = pfr_store_merge(s, &f, 0, &p, &st);
    t = now() - t;
    if (rc)
        die("merge", rc);
    if ((int)st.chunks != nchunks || st.corrupt) {
        fprintf(stderr, "merge saw %" PRIu64 " chunks, %" PRIu64 " corrupt\n", st.chunks,
                st.corrupt);
        exit(1);
    }
    *value = pfr_testgen_total(p);
    *samples = pfr_profile_num_samples(p);
    pfr_profile_free(p);
    pfr_store_close(s);
    return t;
}

/* go tool pprof -proto over every file (relative names keep the command line short). */
static double go_merge_once(const char *go, const char *work, int nchunks, int64_t *value)
{
    char dir[4200], out[4300];
    snprintf(dir, sizeof(dir), "%s/pprof", work);
    snprintf(out, sizeof(out), "%s/go-merged.pb.gz", work);
    char **argv = calloc((size_t)nchunks + 8, sizeof(*argv));
    int a = 0;
    argv[a++] = (char *)go;
    argv[a++] = "tool";
    argv[a++] = "pprof";
    argv[a++] = "-proto";
    for (int i = 0; i < nchunks; i++) {
        if (asprintf(&argv[a++], "%05d.pb.gz", i) < 0)
            die("asprintf", -ENOMEM);
    }
    argv[a] = NULL;
    double t = now();
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(126);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int devnull = open("/dev/null", O_WRONLY);
        if (fd < 0 || devnull < 0)
            _exit(126);
        dup2(fd, 1);
        dup2(devnull, 2);
        execv(go, argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    t = now() - t;
    for (int i = 4; i < a; i++)
        free(argv[i]);
    free(argv);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "go tool pprof failed (status %d)\n", status);
        return -1;
    }
    /* Same total as ours: both merged the same samples. */
    FILE *f = fopen(out, "rb");
    uint8_t *buf = NULL;
    size_t len = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = malloc(len ? len : 1);
        if (fread(buf, 1, len, f) != len)
            len = 0;
        fclose(f);
    }
    pfr_profile *p = NULL;
    char err[128];
    *value = -1;
    if (buf && pfr_profile_decode(buf, len, 0, &p, err, sizeof(err)) == 0) {
        *value = pfr_testgen_total(p);
        pfr_profile_free(p);
    }
    free(buf);
    return t;
}

/* ---- 3: append rate ---- */
enum { NPROFILES = 120 };

/* Chunks per second of wall time; *cpu_us gets the CPU microseconds per chunk. */
static double append_rate_once(const char *db, pfr_profile **ps, int n, int batch, double *cpu_us)
{
    rm_ring(db);
    pfr_store *s;
    char err[256];
    pfr_store_opts o = {.max_bytes = 1ull << 30};
    int rc = pfr_store_open(db, &o, &s, err, sizeof(err));
    if (rc)
        die("open", rc);
    pfr_chunk_in in[100];
    double t = now(), c = cpu_now();
    for (int i = 0; i < n; i += batch) {
        int m = n - i < batch ? n - i : batch;
        for (int j = 0; j < m; j++) {
            int64_t start = T0 + (int64_t)(i + j) * INTERVAL;
            in[j] =
                (pfr_chunk_in){"svc-0", NULL, 0, start, start + INTERVAL, ps[(i + j) % NPROFILES]};
        }
        if ((rc = pfr_store_append_batch(s, in, (size_t)m, NULL)) != 0)
            die("append", rc);
    }
    t = now() - t;
    *cpu_us = (cpu_now() - c) * 1e6 / n;
    pfr_store_close(s);
    return n / t;
}

static double pprof_files_rate_once(const char *work, pfr_profile **ps, int n)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/files", work);
    mkdir(dir, 0755);
    double t = now();
    for (int i = 0; i < n; i++) {
        char path[4300];
        snprintf(path, sizeof(path), "%s/%05d.pb.gz", dir, i);
        uint8_t *buf;
        size_t len;
        int rc = pfr_profile_encode(ps[i % NPROFILES], true, &buf, &len);
        if (rc)
            die("encode", rc);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, buf, len) != (ssize_t)len || fsync(fd) != 0)
            die("write", -errno);
        close(fd);
        free(buf);
    }
    t = now() - t;
    for (int i = 0; i < n; i++) {
        char path[4300];
        snprintf(path, sizeof(path), "%s/%05d.pb.gz", dir, i);
        unlink(path);
    }
    return n / t;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_store WORKDIR [GO] [--chunks N] [--runs N] [--go-runs N]\n");
        return 2;
    }
    const char *work = argv[1];
    const char *go = NULL;
    int nchunks = 8640, runs = 5, go_runs = 1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--chunks") && i + 1 < argc)
            nchunks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--go-runs") && i + 1 < argc)
            go_runs = atoi(argv[++i]);
        else
            go = argv[i][0] ? argv[i] : NULL;
    }
    if (nchunks < 1 || runs < 1 || runs > 99 || go_runs > 99) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    mkdir(work, 0755);
    /* The peer runs in WORKDIR/pprof and writes WORKDIR/go-merged.pb.gz: the path must be
     * absolute. */
    char *abs_work = realpath(work, NULL);
    if (!abs_work)
        die("realpath WORKDIR", -errno);
    work = abs_work;
    char db[4200];
    snprintf(db, sizeof(db), "%s/day.db", work);

    printf("store benchmark: %d chunks of 10 s (pfr_testgen defaults: ~400 stacks, depth 10-60,"
           " 1 service), %d runs\n\n",
           nchunks, runs);
    double t = now();
    uint64_t gz_bytes;
    int64_t total;
    build_day(work, db, nchunks, &gz_bytes, &total);
    uint64_t ring_bytes = fsize(db);
    printf("setup: generated and stored %d profiles in %.1f s\n\n", nchunks, now() - t);

    printf("1. bytes on disk per chunk\n");
    printf("   %-44s %10.0f B\n", "pfr ring (database file / chunks)",
           (double)ring_bytes / nchunks);
    printf("   %-44s %10.0f B\n", "gzip'd pprof files (mean size)", (double)gz_bytes / nchunks);
    printf("   %-44s %10.3f   (target <= 0.6)\n\n", "ratio ring / gzip'd pprof",
           (double)ring_bytes / (double)gz_bytes);

    printf("2. range read: merge %d chunks of one service (flame graph of 24 h)\n", nchunks);
    double *v = calloc((size_t)runs + (size_t)go_runs + 1, sizeof(double));
    int64_t value = 0;
    size_t samples = 0;
    for (int r = 0; r < runs; r++)
        v[r] = store_merge_once(db, nchunks, &value, &samples);
    double ours = median(v, runs);
    printf("   %-44s %10.3f s   (median of %d; target < 1 s; %zu samples, total %" PRId64 "%s)\n",
           "pfr_store_merge", ours, runs, samples, value,
           value == total ? ", = input" : " != input!");
    if (go && go_runs > 0) {
        int64_t gv = 0;
        int ok = 0;
        for (int r = 0; r < go_runs; r++) {
            double x = go_merge_once(go, work, nchunks, &gv);
            if (x >= 0)
                v[ok++] = x;
        }
        if (ok) {
            double theirs = median(v, ok);
            printf("   %-44s %10.3f s   (median of %d; total %" PRId64 "%s)\n",
                   "go tool pprof -proto (gzip'd files)", theirs, ok, gv,
                   gv == total ? ", = input" : " != input!");
            printf("   %-44s %10.1fx\n", "speed-up", theirs / ours);
        }
    } else {
        printf("   (go tool pprof not given: peer skipped)\n");
    }
    printf("\n");

    printf("3. append rate of realistic chunks (%d distinct profiles cycled)\n", NPROFILES);
    pfr_profile *ps[NPROFILES];
    pfr_testgen *g = pfr_testgen_new(43, 0, NULL);
    for (int i = 0; i < NPROFILES; i++)
        ps[i] = pfr_testgen_next(g, T0 + i * INTERVAL, INTERVAL);
    pfr_testgen_free(g);
    char adb[4200];
    snprintf(adb, sizeof(adb), "%s/append.db", work);
    struct {
        const char *name;
        int n, batch;
    } modes[] = {
        {"pfr_store_append (1 fsync per chunk)", 300, 1},
        {"pfr_store_append_batch, 10 per commit", 2000, 10},
        {"pfr_store_append_batch, 100 per commit", 4000, 100},
    };
    double peer;
    for (int r = 0; r < runs; r++)
        v[r] = pprof_files_rate_once(work, ps, 300);
    peer = median(v, runs);
    double *cpu = calloc((size_t)runs, sizeof(*cpu));
    if (!cpu)
        die("calloc", -ENOMEM);
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        for (int r = 0; r < runs; r++)
            v[r] = append_rate_once(adb, ps, modes[m].n, modes[m].batch, &cpu[r]);
        double x = median(v, runs), us = median(cpu, runs);
        printf(
            "   %-44s %10.0f chunks/s  (%.2fx the peer; %.0f us CPU per chunk = %.0f/s per core)\n",
            modes[m].name, x, x / peer, us, 1e6 / us);
    }
    free(cpu);
    printf("   %-44s %10.0f chunks/s  (peer: encode + gzip + write + fsync)\n",
           "gzip'd pprof file per chunk", peer);
    printf("   target: >= 2000 chunks/s\n");
    rm_ring(adb);
    for (int i = 0; i < NPROFILES; i++)
        pfr_profile_free(ps[i]);
    free(v);
    free(abs_work);
    return 0;
}
