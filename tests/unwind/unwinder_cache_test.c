/*
 * Tables evicted from the sampler's map come back from the cache on disk, over real BPF maps
 * (root). Two files of 80k rows each (make_many_fdes.sh) and a map of 120k rows: they never fit
 * together. The unwinder is asked for A, B, A, B in turn (no sampler: every table is idle, so the
 * one before is evicted each time): A and B are built and written once, then read back, and the
 * rows in the map are the rows a build gives, every time. The rows' map is made mmapable, as the
 * recorder makes it (rows written by copy).
 *
 * unwinder_cache_test LIB1 LIB2 [ROUNDS]: the benchmark of docs/benchmarks.md: LIB1 and LIB2
 * (libLLVM, libclang-cpp: mapped whole) asked in turn ROUNDS times (default 5) in a map 1.2x the
 * larger table, without then with the cache (a fresh directory), side by side: the CPU time of
 * the unwinder's thread and the time each table took to be in place.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "pfr_check.h"
#include "unwinder.h"
#include "unwinder_maps.h"

#define TEST_FDES 40000u /* 80k rows */
#define TEST_ROWS 120000u

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct file {
    const char *path;
    struct pfr_unwind_req req;
    pfr_unwind_table t; /* as a build gives it */
};

static void open_file(struct file *f, const char *path)
{
    f->path = path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0, "%s: %s", path, strerror(errno));
    void *at;
    size_t len;
    f->req = map_it(fd, 0, &at, &len);
    char err[256];
    REQUIRE(pfr_unwind_table_build(fd, 0, &f->t, err, sizeof(err)) == 0, "%s: %s", path, err);
    close(fd);
}

/* Ask for f's table and wait for it; its entry's rows checked against the build's. The time
 * from the ask to the entry, in ms. */
static double ask(pfr_unwinder *u, const struct maps *m, const struct file *f, bool check_rows)
{
    int64_t t0 = now_ns();
    request(u, m, &f->req);
    pfr_unwinder_sync(u);
    double ms = (double)(now_ns() - t0) / 1e6;
    struct pfr_file_key k = {.ino = f->req.ino, .dev = f->req.dev};
    struct pfr_unwind_file e;
    REQUIRE(bpf_map_lookup_elem(m->files, &k, &e) == 0, "%s: no entry", f->path);
    REQUIRE(e.nrows == f->t.nrows && e.base == f->t.base && e.delta == f->t.delta,
            "%s: %u rows, base %llx in the map; the build gives %zu, %llx", f->path, e.nrows,
            (unsigned long long)e.base, f->t.nrows, (unsigned long long)f->t.base);
    for (uint32_t i = 0; check_rows && i < e.nrows; i++) {
        uint32_t key = e.first + i;
        struct pfr_unwind_row r;
        REQUIRE(bpf_map_lookup_elem(m->rows, &key, &r) == 0 && r.pc == f->t.rows[i].pc &&
                    r.rule == f->t.rows[i].rule,
                "%s: row %u differs from the build's", f->path, i);
    }
    return ms;
}

struct result {
    double cpu_s, wall_s;
    double ms[2][64]; /* per file, per round */
    pfr_unwinder_stats st;
};

static struct result alternate(struct file *f, uint32_t max_rows, const char *cache, int rounds,
                               bool check_rows)
{
    struct maps m = maps_new_flags(max_rows, BPF_F_MMAPABLE); /* as the recorder's */
    pfr_unwinder_opts o = {.max_rows = max_rows, .cache_dir = cache, .cache_bytes = 256u << 20};
    pfr_unwinder *u;
    char err[256];
    REQUIRE(pfr_unwinder_new(&o, m.rows, m.files, m.asked, &u, err, sizeof(err)) == 0, "%s", err);
    struct result r = {0};
    int64_t t0 = now_ns();
    uint64_t cpu0 = thread_cpu_ns("pfr-unwind");
    for (int i = 0; i < rounds; i++)
        for (int j = 0; j < 2; j++)
            r.ms[j][i] = ask(u, &m, &f[j], check_rows);
    r.cpu_s = (double)(thread_cpu_ns("pfr-unwind") - cpu0) / 1e9;
    r.wall_s = (double)(now_ns() - t0) / 1e9;
    pfr_unwinder_stats_get(u, &r.st);
    pfr_unwinder_free(u);
    maps_close(&m);
    return r;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[64];
    memcpy(s, v, (size_t)n * sizeof(*s));
    qsort(s, (size_t)n, sizeof(*s), cmp_d);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void print(const char *what, const struct result *r, const struct file *f, int rounds)
{
    printf("%-9s pfr-unwind CPU %.3f s, wall %.2f s; evictions %llu, tables %llu; cache: hits "
           "%llu, misses %llu, writes %llu, %llu bytes\n",
           what, r->cpu_s, r->wall_s, (unsigned long long)r->st.evictions,
           (unsigned long long)r->st.tables, (unsigned long long)r->st.cache.hits,
           (unsigned long long)r->st.cache.misses, (unsigned long long)r->st.cache.writes,
           (unsigned long long)r->st.cache.bytes);
    for (int j = 0; j < 2; j++)
        printf("          %s (%zu rows): first %.1f ms, median of the others %.1f ms\n", f[j].path,
               f[j].t.nrows, r->ms[j][0], rounds > 1 ? median(r->ms[j] + 1, rounds - 1) : 0);
}

static void fresh_dir(char *dir, size_t len)
{
    snprintf(dir, len, "%s/cache-XXXXXX", UNWIND_WORK);
    REQUIRE(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

int main(int argc, char **argv)
{
    char cmd[1024], paths[2][512], dir[600];
    struct file f[2];
    int rounds = 4;
    if (argc >= 3) {
        rounds = argc > 3 ? atoi(argv[3]) : 5;
        REQUIRE(rounds >= 1 && rounds <= 64, "ROUNDS: 1 to 64");
        mkdir(UNWIND_WORK, 0755);
        open_file(&f[0], argv[1]);
        open_file(&f[1], argv[2]);
        size_t big = f[0].t.nrows > f[1].t.nrows ? f[0].t.nrows : f[1].t.nrows;
        uint32_t rows = (uint32_t)(big * 12 / 10);
        printf("map of %u rows; %d rounds of %s then %s\n", rows, rounds, argv[1], argv[2]);
        struct result off = alternate(f, rows, NULL, rounds, false);
        print("no cache", &off, f, rounds);
        fresh_dir(dir, sizeof(dir));
        struct result on = alternate(f, rows, dir, rounds, false);
        print("cache", &on, f, rounds);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        for (int j = 0; j < 2; j++)
            pfr_unwind_table_free(&f[j].t);
        return system(cmd) == 0 ? 0 : 1;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", UNWIND_WORK, UNWIND_WORK);
    REQUIRE(system(cmd) == 0, "%s", cmd);
    for (int j = 0; j < 2; j++) {
        snprintf(paths[j], sizeof(paths[j]), "%s/many%d", UNWIND_WORK, j);
        snprintf(cmd, sizeof(cmd), "sh %s %s %u %s", UNWIND_MAKE_MANY, UNWIND_GCC,
                 TEST_FDES + (unsigned)j, paths[j]);
        REQUIRE(system(cmd) == 0, "%s", cmd);
        open_file(&f[j], paths[j]);
    }
    fresh_dir(dir, sizeof(dir));
    struct result r = alternate(f, TEST_ROWS, dir, rounds, true);
    print("cache", &r, f, rounds);
    REQUIRE(r.st.cache_enabled, "the cache was not opened");
    REQUIRE(r.st.evictions >= (uint64_t)(2 * rounds - 1), "%llu evictions, want %d",
            (unsigned long long)r.st.evictions, 2 * rounds - 1);
    REQUIRE(r.st.cache.writes == 2, "%llu tables written, want 2 (each once)",
            (unsigned long long)r.st.cache.writes);
    REQUIRE(r.st.cache.hits == (uint64_t)(2 * rounds - 2), "%llu hits, want %d",
            (unsigned long long)r.st.cache.hits, 2 * rounds - 2);
    REQUIRE(r.st.cache.bad_files == 0 && r.st.cache.write_errors == 0, "bad files or errors");
    /* without the cache every ask is a build */
    struct result off = alternate(f, TEST_ROWS, NULL, 2, false);
    REQUIRE(!off.st.cache_enabled && off.st.cache.hits == 0, "a cache without a directory");
    for (int j = 0; j < 2; j++)
        pfr_unwind_table_free(&f[j].t);
    printf("ok\n");
    return 0;
}
