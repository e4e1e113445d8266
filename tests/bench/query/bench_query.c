/* Query benchmark: a flame graph of one service over 24 h of 10 s chunks (8,640 realistic chunks
 * from tests/gen in a real ring) with `pfr`, beside `go tool pprof -proto` merging the same
 * profiles as gzip'd files; and a diff of two 12 h ranges. Medians of several runs, ratios, in
 * one run on one machine.
 *
 *   bench_query PFR WORKDIR [GO]     env: PFR_BENCH_RUNS (default 5), PFR_BENCH_GO_RUNS (3),
 *                                         PFR_BENCH_CHUNKS (8640)
 * The ring and the pprof files are made once in WORKDIR and reused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pfr_query.h"
#include "pfr_testgen.h"
#include "ring_fixture.h"

#define T0 (1714564800LL * FX_S)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int env_int(const char *name, int def)
{
    const char *s = getenv(name);
    return s && atoi(s) > 0 ? atoi(s) : def;
}

/* Run argv with stdout to /dev/null; returns the wall time or -1 if it failed; *cpu gets the
 * child's user + system time (less sensitive to other load on a shared machine). */
static double run_cpu(char **argv, double *cpu)
{
    double t = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        return -1;
    *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    return now_s() - t;
}

static int make_data(const char *ring, const char *pprof_dir, int chunks)
{
    char marker[4200];
    snprintf(marker, sizeof(marker), "%s.done-%d", ring, chunks);
    if (access(marker, F_OK) == 0)
        return 0;
    unlink(ring);
    mkdir(pprof_dir, 0755);
    fprintf(stderr, "making %d chunks of 10 s (ring and pprof files)...\n", chunks);
    pfr_store *s = pfr_fx_open(ring);
    pfr_testgen *g = pfr_testgen_new(42, 0, NULL);
    int rc = 0;
    for (int i = 0; i < chunks && rc == 0; i++) {
        pfr_profile *p = pfr_testgen_next(g, T0 + (int64_t)i * 10 * FX_S, 10 * FX_S);
        char path[4200];
        snprintf(path, sizeof(path), "%s/c%05d.pb.gz", pprof_dir, i);
        rc = p ? pfr_fx_append(s, pfr_testgen_service(g), NULL, 0, T0 + (int64_t)i * 10 * FX_S,
                               10 * FX_S, p)
               : -ENOMEM;
        if (rc == 0)
            rc = pfr_testgen_write_pprof(p, path);
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    pfr_store_close(s);
    if (rc == 0) {
        FILE *f = fopen(marker, "w");
        if (f)
            fclose(f);
    }
    return rc;
}

/* In-process breakdown: the store's merge alone, then the tree. */
static void breakdown(const char *ring, int64_t to, int runs, double *merge_s, double *tree_s)
{
    double m[32], t[32];
    pfr_store *s;
    char err[256];
    pfr_store_opts o = {.read_only = true};
    if (pfr_store_open(ring, &o, &s, err, sizeof(err)) < 0) {
        fprintf(stderr, "open: %s\n", err);
        exit(1);
    }
    for (int r = 0; r < runs; r++) {
        pfr_store_filter f = {
            .from_ns = T0, .to_ns = to, .service = "svc-0", .type = "ebpf:cpu:nanoseconds"};
        pfr_profile *p = NULL;
        double a = now_s();
        if (pfr_store_merge(s, &f, PFR_MERGE_DROP_LABELS, &p, NULL) < 0)
            exit(1);
        double b = now_s();
        pfr_tree *tr = pfr_tree_new();
        pfr_tree_add_profile(tr, 0, p, 0, 1, NULL);
        pfr_tree_finish(tr);
        double c = now_s();
        m[r] = b - a;
        t[r] = c - b;
        pfr_tree_free(tr);
        pfr_profile_free(p);
    }
    pfr_store_close(s);
    *merge_s = median(m, runs);
    *tree_s = median(t, runs);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_query PFR WORKDIR [GO]\n");
        return 2;
    }
    const char *pfr = argv[1], *dir = argv[2];
    const char *go = argc > 3 ? argv[3] : "/usr/lib/go-1.19/bin/go";
    int runs = env_int("PFR_BENCH_RUNS", 5), go_runs = env_int("PFR_BENCH_GO_RUNS", 3);
    int chunks = env_int("PFR_BENCH_CHUNKS", 8640);
    if (runs > 31)
        runs = 31;
    if (go_runs > 31)
        go_runs = 31;
    char ring[4096], pdir[4096];
    mkdir(dir, 0755);
    snprintf(ring, sizeof(ring), "%s/ring.db", dir);
    snprintf(pdir, sizeof(pdir), "%s/pprof", dir);
    if (make_data(ring, pdir, chunks) < 0) {
        fprintf(stderr, "could not make the data\n");
        return 1;
    }
    int64_t to = T0 + (int64_t)chunks * 10 * FX_S, mid = T0 + (to - T0) / 2;
    char from_s[32], to_s[32], mid_s[32];
    snprintf(from_s, sizeof(from_s), "%lld", (long long)(T0 / FX_S));
    snprintf(to_s, sizeof(to_s), "%lld", (long long)(to / FX_S));
    snprintf(mid_s, sizeof(mid_s), "%lld", (long long)(mid / FX_S));

    char *flame[] = {(char *)pfr, "--store", ring, "flame",    "--service", "svc-0", "--from",
                     from_s,      "--to",    to_s, "--format", "folded",    NULL};
    char *html[] = {(char *)pfr, "--store", ring, "flame",    "--service", "svc-0", "--from",
                    from_s,      "--to",    to_s, "--format", "html",      NULL};
    char *export[] = {(char *)pfr, "--store", ring, "export", "--service",   "svc-0", "--from",
                      from_s,      "--to",    to_s, "-o",     "/dev/stdout", NULL};
    char *diff[] = {(char *)pfr, "--store", ring, "diff",     "--service", "svc-0", "--from",
                    mid_s,       "--to",    to_s, "--format", "top",       NULL};
    double tf[32], th[32], te[32], td[32], tg[32];
    double cf[32], ch[32], ce[32], cd[32], cg[32];
    for (int r = 0; r < runs; r++) {
        if ((tf[r] = run_cpu(flame, &cf[r])) < 0 || (th[r] = run_cpu(html, &ch[r])) < 0 ||
            (te[r] = run_cpu(export, &ce[r])) < 0 || (td[r] = run_cpu(diff, &cd[r])) < 0) {
            fprintf(stderr, "a pfr run failed\n");
            return 1;
        }
    }
    /* go tool pprof -proto f1 f2 ... merges every file into one profile */
    char **gargv = calloc((size_t)chunks + 8, sizeof(char *));
    int ga = 0;
    gargv[ga++] = (char *)go;
    gargv[ga++] = "tool";
    gargv[ga++] = "pprof";
    gargv[ga++] = "-proto";
    for (int i = 0; i < chunks; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/c%05d.pb.gz", pdir, i);
        gargv[ga++] = strdup(path);
    }
    gargv[ga] = NULL;
    for (int r = 0; r < go_runs; r++)
        if ((tg[r] = run_cpu(gargv, &cg[r])) < 0) {
            fprintf(stderr, "go tool pprof failed\n");
            return 1;
        }
    double merge_s, tree_s;
    breakdown(ring, to, runs, &merge_s, &tree_s);

    double mf = median(tf, runs), mh = median(th, runs), me = median(te, runs);
    double md = median(td, runs), mg = median(tg, go_runs);
    double xf = median(cf, runs), xh = median(ch, runs), xe = median(ce, runs);
    double xd = median(cd, runs), xg = median(cg, go_runs);
    double la[3] = {0};
    getloadavg(la, 3);
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d", localtime(&now));
    printf("pfr query benchmark, %s: one service, %d chunks of 10 s (%.1f h), %d runs "
           "(go: %d), medians; load average %.1f\n",
           date, chunks, chunks * 10 / 3600.0, runs, go_runs, la[0]);
    printf("%-46s %9s %9s %8s | %9s %9s %8s\n", "", "pfr wall", "peer", "ratio", "pfr cpu",
           "peer cpu", "ratio");
    printf("%-46s %8.3fs %8.1fs %7.0fx | %8.3fs %8.1fs %7.0fx\n", "flame 24 h, folded (end to end)",
           mf, mg, mg / mf, xf, xg, xg / xf);
    printf("%-46s %8.3fs %8.1fs %7.0fx | %8.3fs %8.1fs %7.0fx\n", "flame 24 h, html (end to end)",
           mh, mg, mg / mh, xh, xg, xg / xh);
    printf("%-46s %8.3fs %8.1fs %7.0fx | %8.3fs %8.1fs %7.0fx\n",
           "export 24 h, pprof with labels (end to end)", me, mg, mg / me, xe, xg, xg / xe);
    printf("%-46s %8.3fs %9s %8s | %8.3fs\n", "diff 12 h vs 12 h, top (end to end)", md, "", "",
           xd);
    printf("peer: go tool pprof -proto with the %d chunks as gzip'd pprof files\n", chunks);
    printf("in process, 24 h: pfr_store_merge (store) %.3fs, full tree from it (query) %.3fs\n",
           merge_s, tree_s);
    printf("targets: flame < 1 s: %s; >= 10x go: %s; diff < 1.5 s: %s\n", mf < 1 ? "yes" : "NO",
           mg / mf >= 10 ? "yes" : "NO", md < 1.5 ? "yes" : "NO");
    for (int i = 4; i < ga; i++)
        free(gargv[i]);
    free(gargv);
    return 0;
}
