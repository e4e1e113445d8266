/*
 * Go heap reader benchmark.
 *
 *   bench_goheap GO_SRC_DIR WORK_DIR [GO_VERSION=1.19] [NPROCS=50] [BUCKETS=10000]
 *
 * A: one collection of a process with BUCKETS memory-profile buckets (target < 20 ms), cold
 *    (executable parsed, every address symbolized) and warm (the steady state every interval),
 *    next to the runtime's own cost of producing the same profile: the process's
 *    /debug/pprof/heap, timed over HTTP.
 * B: NPROCS Go processes without pprof in FORCE mode: the recorder's CPU per collection, and the
 *    target processes' CPU before and after their sampling was switched on. FORCE is given the
 *    benchmark's own pids (it must not switch on sampling in other Go programs on a shared
 *    host); the cost of a scan of all of /proc is measured apart, in ENABLED mode.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gohelp.h"
#include "pfr_goheap.h"
#include "pfr_goheap_sym.h"

#define ROUNDS 15

static double now_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static size_t last_buckets;
static void on_profile(void *ctx, const pfr_goheap_proc *in, pfr_profile *p)
{
    (void)ctx;
    last_buckets = in->buckets;
    pfr_profile_free(p);
}

static double collect_ms(pfr_goheap *c, const pid_t *pids, size_t n)
{
    pfr_goheap_sink sink = {NULL, on_profile, NULL};
    double t0 = now_s(CLOCK_MONOTONIC);
    pfr_goheap_collect(c, (int64_t)(now_s(CLOCK_REALTIME) * 1e9), pids, n, &sink);
    return (now_s(CLOCK_MONOTONIC) - t0) * 1e3;
}

static size_t discard(char *d, size_t sz, size_t n, void *ud)
{
    (void)d;
    *(size_t *)ud += sz * n;
    return sz * n;
}

static double pprof_ms(int port, size_t *bytes)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/debug/pprof/heap", port);
    CURL *c = curl_easy_init();
    *bytes = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, bytes);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    double t0 = now_s(CLOCK_MONOTONIC);
    CURLcode rc = curl_easy_perform(c);
    double ms = (now_s(CLOCK_MONOTONIC) - t0) * 1e3;
    curl_easy_cleanup(c);
    return rc == CURLE_OK ? ms : -1;
}

static void part_a(const char *go, const char *src, const char *work, int nbuckets,
                   pfr_symbolizer *sym)
{
    char bin[1024], pkg[1024], line[256], arg[32];
    snprintf(pkg, sizeof(pkg), "%s/many", src);
    snprintf(bin, sizeof(bin), "%s/many-pprof", work);
    if (pfr_gohelp_build(go, pkg, "-tags withpprof", bin, work) < 0)
        exit(1);
    snprintf(arg, sizeof(arg), "%d", nbuckets);
    char *argv[] = {bin, arg, NULL};
    gohelp_proc p;
    int port = 0;
    if (pfr_gohelp_start(&p, argv) < 0 ||
        pfr_gohelp_expect(&p, "port", line, sizeof(line), 10000) < 0 ||
        sscanf(line, "port %d", &port) != 1 ||
        pfr_gohelp_expect(&p, "ready", line, sizeof(line), 60000) < 0) {
        fprintf(stderr, "many did not start\n");
        exit(1);
    }
    pfr_goheap_opts o = {.mode = PFR_GOHEAP_ENABLED, .resolver = pfr_goheap_sym_resolver(sym)};
    pfr_goheap *c, *raw;
    pfr_goheap_new(&o, &c);
    o.resolver = (pfr_goheap_resolver){0};
    pfr_goheap_new(&o, &raw);

    double cold = collect_ms(c, &p.pid, 1);
    size_t buckets = last_buckets;
    double warm[ROUNDS], unsym[ROUNDS], peer[ROUNDS];
    size_t peer_bytes = 0;
    pfr_goheap_stats s0, s1;
    pfr_goheap_get_stats(c, &s0);
    for (int i = 0; i < ROUNDS; i++) {
        warm[i] = collect_ms(c, &p.pid, 1);
        unsym[i] = collect_ms(raw, &p.pid, 1);
        peer[i] = pprof_ms(port, &peer_bytes);
    }
    pfr_goheap_get_stats(c, &s1);
    double reads = (double)(s1.mem_reads - s0.mem_reads) / ROUNDS;
    double mb = (double)(s1.mem_bytes - s0.mem_bytes) / ROUNDS / 1e6;
    double w = median(warm, ROUNDS), u = median(unsym, ROUNDS), g = median(peer, ROUNDS);
    printf("A. one collection, %zu buckets (Go %s, MemProfileRate=1), median of %d\n", buckets, go,
           ROUNDS);
    printf("  pfr warm (steady state)          %8.2f ms   target < 20 ms: %s\n", w,
           w < 20 ? "met" : "MISSED");
    printf("  pfr without symbolization        %8.2f ms\n", u);
    printf("  pfr cold (parse + symbolize all) %8.2f ms   (first collection only)\n", cold);
    printf("  process memory reads             %8.1f syscalls, %.2f MB per collection\n", reads,
           mb);
    printf("  peer: Go's own /debug/pprof/heap %8.2f ms   (%zu bytes; ratio pfr/peer %.2f)\n", g,
           peer_bytes, w / g);
    pfr_goheap_free(c);
    pfr_goheap_free(raw);
    pfr_gohelp_kill(&p);
}

/* utime + stime of pid, in seconds */
static double proc_cpu(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double targets_cpu(gohelp_proc *ps, int n)
{
    double t = 0;
    for (int i = 0; i < n; i++)
        t += proc_cpu(ps[i].pid);
    return t;
}

static void part_b(const char *go, const char *src, const char *work, int nprocs,
                   pfr_symbolizer *sym)
{
    char bin[1024], pkg[1024], line[256];
    snprintf(pkg, sizeof(pkg), "%s/alloc", src);
    snprintf(bin, sizeof(bin), "%s/alloc-plain", work);
    if (pfr_gohelp_build(go, pkg, "", bin, work) < 0)
        exit(1);
    gohelp_proc *ps = calloc((size_t)nprocs, sizeof(*ps));
    char *argv[] = {bin, NULL};
    for (int i = 0; i < nprocs; i++) {
        if (pfr_gohelp_start(&ps[i], argv) < 0 ||
            pfr_gohelp_expect(&ps[i], "ready", line, sizeof(line), 10000) < 0 ||
            pfr_gohelp_send(&ps[i], "trickle") < 0 ||
            pfr_gohelp_expect(&ps[i], "trickling", line, sizeof(line), 10000) < 0) {
            fprintf(stderr, "alloc %d did not start\n", i);
            exit(1);
        }
    }
    const double window = 3.0;
    sleep(1);
    double c0 = targets_cpu(ps, nprocs);
    usleep((useconds_t)(window * 1e6));
    double before = targets_cpu(ps, nprocs) - c0;

    pid_t *pids = calloc((size_t)nprocs, sizeof(*pids));
    for (int i = 0; i < nprocs; i++)
        pids[i] = ps[i].pid;
    pfr_goheap_opts o = {.mode = PFR_GOHEAP_FORCE, .resolver = pfr_goheap_sym_resolver(sym)};
    pfr_goheap *c;
    pfr_goheap_new(&o, &c);
    double t0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    double wall0 = collect_ms(c, pids, (size_t)nprocs); /* round 0: writes the rates */
    double first_cpu = (now_s(CLOCK_THREAD_CPUTIME_ID) - t0) * 1e3;
    pfr_goheap_stats st;
    pfr_goheap_get_stats(c, &st);
    uint64_t forced = st.rates_forced;

    sleep(1);
    c0 = targets_cpu(ps, nprocs);
    usleep((useconds_t)(window * 1e6));
    double after = targets_cpu(ps, nprocs) - c0;

    const int rounds = 7;
    double cpu[7], wall[7], scan[7];
    collect_ms(c, pids, (size_t)nprocs); /* round 1: first walks and symbolization */
    o.mode = PFR_GOHEAP_ENABLED;
    pfr_goheap *all;
    pfr_goheap_new(&o, &all);
    collect_ms(all, NULL, 0);
    for (int i = 0; i < rounds; i++) {
        usleep(300000);
        double t = now_s(CLOCK_THREAD_CPUTIME_ID);
        wall[i] = collect_ms(c, pids, (size_t)nprocs);
        cpu[i] = (now_s(CLOCK_THREAD_CPUTIME_ID) - t) * 1e3;
        t = now_s(CLOCK_THREAD_CPUTIME_ID);
        collect_ms(all, NULL, 0);
        scan[i] = (now_s(CLOCK_THREAD_CPUTIME_ID) - t) * 1e3;
    }
    pfr_goheap_get_stats(c, &st);
    pfr_goheap_stats sa;
    pfr_goheap_get_stats(all, &sa);
    double mc = median(cpu, rounds), mw = median(wall, rounds), ms = median(scan, rounds);
    printf("B. %d Go processes without pprof, FORCE mode (%" PRIu64 " rates forced, %" PRIu64
           " profiles, %" PRIu64 " errors)\n",
           nprocs, forced, st.profiles, st.walk_errors);
    printf("  pfr CPU per collection            %8.2f ms (wall %.2f ms), %.3f ms per process\n", mc,
           mw, mc / nprocs);
    printf("  pfr CPU share at a 60 s interval  %8.4f %% of one core\n", mc / 600.0);
    printf("  pfr first collection (forcing)    %8.2f ms CPU (wall %.2f ms)\n", first_cpu, wall0);
    printf("  pfr full /proc scan, ENABLED      %8.2f ms CPU (%" PRIu64 " processes visited per "
           "scan, %" PRIu64 " Go)\n",
           ms, sa.processes_checked / sa.collections, sa.go_processes / sa.collections);
    printf("  peer: the targets' own CPU        %8.3f s per %.0f s before forcing, %.3f s after "
           "(%+.1f %%: the cost of sampling at 512 KiB)\n",
           before, window, after, before > 0 ? (after - before) / before * 100 : 0.0);
    pfr_goheap_free(c);
    pfr_goheap_free(all);
    for (int i = 0; i < nprocs; i++)
        pfr_gohelp_kill(&ps[i]);
    free(ps);
    free(pids);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s GO_SRC_DIR WORK_DIR [GO_VERSION] [NPROCS] [BUCKETS]\n", argv[0]);
        return 2;
    }
    const char *ver = argc > 3 ? argv[3] : "1.19";
    int nprocs = argc > 4 ? atoi(argv[4]) : 50, nbuckets = argc > 5 ? atoi(argv[5]) : 10000;
    char go[256];
    if (!pfr_gohelp_toolchain(ver, go, sizeof(go))) {
        printf("SKIP: Go %s not installed\n", ver);
        return GOHELP_SKIP;
    }
    mkdir(argv[2], 0755);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pfr_symbolizer *sym;
    if (pfr_symbolizer_new(&(pfr_sym_opts){0}, &sym) < 0)
        return 1;
    time_t now = time(NULL);
    printf("bench_goheap %s", ctime(&now));
    part_a(go, argv[1], argv[2], nbuckets, sym);
    part_b(go, argv[1], argv[2], nprocs, sym);
    pfr_symbolizer_free(sym);
    curl_global_cleanup();
    return 0;
}
