/* Benchmark of the profile model on generated CPU profiles (tests/gen):
 *   1. one profile: encoded size raw and gzip'd, encode and decode times (medians);
 *   2. merge throughput over N consecutive 10 s profiles of one stream (default 8,640 = 24 h):
 *      merge only, and decode (gzip) + merge;
 *   3. side by side with the peer, `go tool pprof -proto` merging the same gzip'd files
 *      (a subset of PEER_N profiles, since the peer is run as one process over files).
 * Usage: bench_proto [N] [PEER_N] [go binary]   (PEER_N 0 skips the peer) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pfr_profile.h"
#include "pfr_testgen.h"

#define T0  1700000000000000000LL
#define TEN 10000000000LL

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The machine is shared: in-process figures are CPU time of this thread; the side-by-side
 * comparison with a child process uses wall time and the children's CPU time. */
static double now(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static double wall(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static double children_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return v[n / 2];
}

static void die(const char *what)
{
    fprintf(stderr, "bench_proto: %s failed\n", what);
    exit(1);
}

static void single_profile(void)
{
    pfr_testgen *g = pfr_testgen_new(42, 0, NULL);
    pfr_profile *p = pfr_testgen_next(g, T0, TEN);
    enum { RUNS = 41 };
    double enc_raw[RUNS], enc_gz[RUNS], dec_raw[RUNS], dec_gz[RUNS];
    size_t raw_len = 0, gz_len = 0;
    for (int i = 0; i < RUNS; i++) {
        uint8_t *raw, *gz;
        double t = now();
        if (pfr_profile_encode(p, false, &raw, &raw_len))
            die("encode");
        enc_raw[i] = now() - t;
        t = now();
        if (pfr_profile_encode(p, true, &gz, &gz_len))
            die("encode gzip");
        enc_gz[i] = now() - t;
        pfr_profile *q;
        t = now();
        if (pfr_profile_decode(raw, raw_len, 0, &q, NULL, 0))
            die("decode");
        dec_raw[i] = now() - t;
        pfr_profile_free(q);
        t = now();
        if (pfr_profile_decode(gz, gz_len, 0, &q, NULL, 0))
            die("decode gzip");
        dec_gz[i] = now() - t;
        pfr_profile_free(q);
        free(raw);
        free(gz);
    }
    printf("one generated profile: %zu samples, %zu strings, %zu functions, %zu locations\n",
           pfr_profile_num_samples(p), pfr_profile_num_strings(p), pfr_profile_num_functions(p),
           pfr_profile_num_locations(p));
    printf("  size: raw %zu bytes, gzip %zu bytes\n", raw_len, gz_len);
    printf("  encode: raw %.3f ms, gzip %.3f ms (cpu, median of %d)\n", median(enc_raw, RUNS) * 1e3,
           median(enc_gz, RUNS) * 1e3, RUNS);
    printf("  decode: raw %.3f ms, gzip %.3f ms (cpu, median of %d)\n", median(dec_raw, RUNS) * 1e3,
           median(dec_gz, RUNS) * 1e3, RUNS);
    pfr_profile_free(p);
    pfr_testgen_free(g);
}

/* Merge n consecutive profiles; times merge alone and decode + merge (of the gzip'd bytes). */
static void merge_throughput(int n)
{
    pfr_testgen *g = pfr_testgen_new(42, 0, NULL);
    pfr_profile *m1 = pfr_profile_new(), *m2 = pfr_profile_new();
    double t_merge = 0, t_decmerge = 0, t_gen = 0;
    for (int i = 0; i < n; i++) {
        double t = now();
        pfr_profile *p = pfr_testgen_next(g, T0 + i * TEN, TEN);
        uint8_t *gz = NULL;
        size_t len = 0;
        if (!p || pfr_profile_encode(p, true, &gz, &len))
            die("generate");
        t_gen += now() - t;
        t = now();
        if (pfr_profile_merge(m1, p, 0))
            die("merge");
        t_merge += now() - t;
        t = now();
        pfr_profile *q;
        if (pfr_profile_decode(gz, len, 0, &q, NULL, 0) || pfr_profile_merge(m2, q, 0))
            die("decode+merge");
        pfr_profile_free(q);
        t_decmerge += now() - t;
        free(gz);
        pfr_profile_free(p);
    }
    printf("merging %d consecutive profiles of one stream (cpu; generation %.1f s not counted):\n",
           n, t_gen);
    printf("  merge only:            %.2f s, %.0f profiles/s\n", t_merge, n / t_merge);
    printf("  decode(gzip) + merge:  %.2f s, %.0f profiles/s\n", t_decmerge, n / t_decmerge);
    printf("  result: %zu samples, %zu locations, %zu functions, %zu strings\n",
           pfr_profile_num_samples(m1), pfr_profile_num_locations(m1),
           pfr_profile_num_functions(m1), pfr_profile_num_strings(m1));
    pfr_profile_free(m1);
    pfr_profile_free(m2);
    pfr_testgen_free(g);
}

/* Both merge the same gzip'd files into one gzip'd pprof: pfr (read, decode, merge, encode) and
 * go tool pprof -proto. */
static void peer(int n, const char *go)
{
    char dir[] = "/tmp/pfr-bench-proto-XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp");
    pfr_testgen *g = pfr_testgen_new(42, 0, NULL);
    size_t cmdlen = (size_t)n * 64 + 512;
    char *cmd = malloc(cmdlen);
    size_t off = (size_t)snprintf(cmd, cmdlen, "HOME=%s '%s' tool pprof -proto", dir, go);
    char path[256];
    for (int i = 0; i < n; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + i * TEN, TEN);
        snprintf(path, sizeof(path), "%s/%05d.pb.gz", dir, i);
        if (pfr_testgen_write_pprof(p, path))
            die("write");
        off += (size_t)snprintf(cmd + off, cmdlen - off, " %s", path);
        pfr_profile_free(p);
    }
    snprintf(cmd + off, cmdlen - off, " > %s/merged-go.pb.gz 2>/dev/null", dir);
    pfr_testgen_free(g);

    double t = now(), tw = wall();
    pfr_profile *m = pfr_profile_new();
    static uint8_t buf[16 << 20];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%05d.pb.gz", dir, i);
        FILE *f = fopen(path, "rb");
        size_t len = f ? fread(buf, 1, sizeof(buf), f) : 0;
        if (f)
            fclose(f);
        pfr_profile *q;
        if (pfr_profile_decode(buf, len, 0, &q, NULL, 0) || pfr_profile_merge(m, q, 0))
            die("peer-side decode+merge");
        pfr_profile_free(q);
    }
    uint8_t *out;
    size_t out_len;
    if (pfr_profile_encode(m, true, &out, &out_len))
        die("encode merged");
    snprintf(path, sizeof(path), "%s/merged-pfr.pb.gz", dir);
    FILE *f = fopen(path, "wb");
    fwrite(out, 1, out_len, f);
    fclose(f);
    double t_pfr = now() - t, w_pfr = wall() - tw;
    free(out);
    pfr_profile_free(m);

    double c0 = children_cpu();
    tw = wall();
    int rc = system(cmd);
    double w_go = wall() - tw, t_go = children_cpu() - c0;
    printf("merging %d gzip'd pprof files into one (read + decode + merge + encode):\n", n);
    printf("  pfr:                  wall %.2f s, cpu %.2f s, %.0f profiles/s (cpu)\n", w_pfr, t_pfr,
           n / t_pfr);
    if (rc != 0)
        printf("  go tool pprof -proto: failed (exit %d)\n", rc);
    else
        printf("  go tool pprof -proto: wall %.2f s, cpu %.2f s, %.0f profiles/s (cpu)\n"
               "  ratio: pfr is %.1fx faster (wall), %.1fx less cpu\n",
               w_go, t_go, n / t_go, w_go / w_pfr, t_go / t_pfr);
    snprintf(cmd, cmdlen, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(cmd);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8640;
    int peer_n = argc > 2 ? atoi(argv[2]) : 864;
    const char *go = argc > 3 ? argv[3] : "/usr/lib/go-1.19/bin/go";
    single_profile();
    merge_throughput(n);
    if (peer_n > 0 && access(go, X_OK) == 0)
        peer(peer_n, go);
    return 0;
}
