/*
 * Small files never wait behind a large one (issue 30), over real BPF maps. While the unwinder
 * builds a large table (a file of LARGE_FDES FDEs, seconds at its CPU share), the tables of the
 * small files asked meanwhile (ld.so and libc, as this process maps them) are in unwind_files
 * within a quarter of the large build's time, and before the large table (asked once the
 * builder has run 30 ms of it). With opts.one_lane
 * (the single lane before) they come only after it: the test checks that too, so that it tells
 * the two orders apart, and prints both. A small mapping of a file whose .eh_frame is past the
 * small limits (DEFER_FDES FDEs) is deferred: built whole after the large table. Stopped in the
 * large build with small files queued, the unwinder stops within half the large build's time.
 *
 * unwinder_lanes_test [LARGE]: LARGE (mapped whole) instead of the generated file, for the
 * benchmark in docs/benchmarks.md (libLLVM, chromium); then the deferred file is left out.
 * UNWIND_MAKE_MANY makes the files.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pfr_check.h"
#include "unwinder.h"
#include "unwinder_maps.h"

#define LARGE_FDES 600000u    /* 1.2M rows, ~0.35 s of CPU (gcc tree), twice that at the share */
#define DEFER_FDES 100000u    /* 2.4 MB of .eh_frame in a 3.2 MB file: a small mapping */
#define MAX_ROWS   (5u << 19) /* 2.6M rows: the large table, the deferred one and the small */
#define WAIT_S     240        /* for every table, at most */
#define SMALL_LIBS 2
#define BUSY_NS    (30 * 1000000ull) /* of the builder's CPU before the small files are asked */

/* Every file of a run: [0] the large one, then the small ones, then the deferred one. */
#define LARGE     0
#define NFILES    (1 + SMALL_LIBS + 1)
#define DEFERRED_ (1 + SMALL_LIBS)

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000};
    nanosleep(&ts, NULL);
}

/* The executable mapping of the library whose path ends in name, as the sampler asks for it. */
static struct pfr_unwind_req self_mapping(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "re");
    REQUIRE(f, "/proc/self/maps: %s", strerror(errno));
    char line[1024];
    struct pfr_unwind_req r = {0};
    while (fgets(line, sizeof(line), f)) {
        unsigned long long s, e, off, ino;
        unsigned maj, min;
        char perms[8], path[600] = "";
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %599s", &s, &e, perms, &off, &maj, &min,
                   &ino, path) < 8 ||
            strcmp(perms, "r-xp") != 0)
            continue;
        size_t n = strlen(path), k = strlen(name);
        if (n < k || strcmp(path + n - k, name) != 0)
            continue;
        r = (struct pfr_unwind_req){.ev.type = PFR_EV_UNWIND,
                                    .ev.tgid = (uint32_t)getpid(),
                                    .start = s,
                                    .end = e,
                                    .ino = ino,
                                    .dev = (uint64_t)maj << 20 | min};
        break;
    }
    fclose(f);
    REQUIRE(r.end, "no executable mapping of %s in this process", name);
    return r;
}

struct run {
    double ms[NFILES];     /* from the file's request to its entry in unwind_files */
    int64_t at[NFILES];    /* when its entry was seen */
    uint32_t rows[NFILES]; /* its entry's */
    pfr_unwinder_stats st;
};

/* An unwinder asked for the large file, then (once its build is under way) for the others. */
struct lane {
    struct maps m;
    pfr_unwinder *u;
    int64_t asked[NFILES];
};

/* n: files of the run (the deferred one left out: NFILES - 1); busy_ns: of the builder's CPU
 * on req[0] before the others are asked. */
static void start(bool one_lane, const struct pfr_unwind_req *req, size_t n, int64_t busy_ns,
                  struct lane *l)
{
    l->m = maps_new(MAX_ROWS);
    pfr_unwinder_opts o = {.max_rows = MAX_ROWS, .one_lane = one_lane};
    char err[256];
    REQUIRE(pfr_unwinder_new(&o, l->m.rows, l->m.files, l->m.asked, &l->u, err, sizeof(err)) == 0,
            "%s", err);
    l->asked[LARGE] = now_ns();
    request(l->u, &l->m, &req[LARGE]);
    /* its build under way: the builder has run BUSY_NS (a loaded host may not run it at once,
     * and the small files asked before it starts are built first in either order) */
    struct pfr_unwind_file f;
    struct pfr_file_key k = {.ino = req[LARGE].ino, .dev = req[LARGE].dev};
    for (int64_t end = now_ns() + WAIT_S * 1000000000ll;
         thread_cpu_ns("pfr-unwind") < (uint64_t)busy_ns; sleep_ms(1)) {
        REQUIRE(bpf_map_lookup_elem(l->m.files, &k, &f) != 0,
                "the first table was in before the builder ran %d ms: too small a file to keep "
                "it busy",
                (int)(busy_ns / 1000000));
        REQUIRE(now_ns() < end, "the builder did not run %d ms in %d s", (int)(busy_ns / 1000000),
                WAIT_S);
    }
    for (size_t i = 1; i < n; i++) {
        l->asked[i] = now_ns();
        request(l->u, &l->m, &req[i]);
    }
}

/* A run: every entry waited for. */
static struct run run(bool one_lane, const struct pfr_unwind_req *req, size_t n, int64_t busy_ns)
{
    struct lane l;
    start(one_lane, req, n, busy_ns, &l);
    struct run out = {0};
    struct pfr_unwind_file f;
    struct pfr_file_key k;
    size_t left = n;
    for (int64_t end = now_ns() + WAIT_S * 1000000000ll; left && now_ns() < end; sleep_ms(1))
        for (size_t i = 0; i < n; i++) {
            k = (struct pfr_file_key){.ino = req[i].ino, .dev = req[i].dev};
            if (out.at[i] || bpf_map_lookup_elem(l.m.files, &k, &f) != 0)
                continue;
            out.at[i] = now_ns();
            out.ms[i] = (double)(out.at[i] - l.asked[i]) / 1e6;
            out.rows[i] = f.nrows;
            left--;
        }
    REQUIRE(left == 0, "%zu tables not in after %d s", left, WAIT_S);
    pfr_unwinder_sync(l.u);
    pfr_unwinder_stats_get(l.u, &out.st);
    pfr_unwinder_free(l.u);
    maps_close(&l.m);
    return out;
}

/* The unwinder stopped (as the recorder does on SIGTERM) in the large build, small files
 * queued: how long pfr_unwinder_free() takes, in ms. */
static double stop_ms(const struct pfr_unwind_req *req, size_t n)
{
    struct lane l;
    start(false, req, n, BUSY_NS, &l);
    int64_t t0 = now_ns();
    pfr_unwinder_free(l.u);
    double ms = (double)(now_ns() - t0) / 1e6;
    maps_close(&l.m);
    return ms;
}

static void print_run(const char *what, const struct run *r, const char *const *names, size_t n)
{
    printf("%s: large table %.0f ms after its request (build %.0f ms)", what, r->ms[LARGE],
           r->st.build_max_ns / 1e6);
    for (size_t i = 1; i < n; i++)
        printf(", %s %.0f ms", names[i], r->ms[i]);
    printf("; small files' wait %.0f ms at most, %" PRIu64 " interleaved, %" PRIu64 " deferred\n",
           r->st.small_wait_max_ns / 1e6, r->st.interleaved, r->st.deferred);
}

/* A small mapping's build (the deferred file's: a tenth of a second, more under load, as
 * libstdc++'s) pauses for a tiny file asked meanwhile (ld.so, under an eighth of its mapping):
 * a new program's own table waited behind such a build and its first stacks were walked by
 * frame pointers (recorder_unwind failed in CI on a frameless leaf's skipped caller). */
static void small_behind_small(const struct pfr_unwind_req *small,
                               const struct pfr_unwind_req *tiny)
{
    struct pfr_unwind_req req[2] = {*small, *tiny};
    REQUIRE((tiny->end - tiny->start) * 8 <= small->end - small->start,
            "ld.so's mapping is not an eighth of the small file's");
    struct run one = run(true, req, 2, BUSY_NS / 3), two = run(false, req, 2, BUSY_NS / 3);
    printf("a small build (%.0f ms) and ld.so asked %d ms into it: one lane ld.so in %.0f ms, "
           "interleaved %.0f ms\n",
           two.st.build_max_ns / 1e6, (int)(BUSY_NS / 3 / 1000000), one.ms[1], two.ms[1]);
    CHECK(one.at[1] > one.at[0], "one lane: ld.so came before the small file's table");
    CHECK(two.at[1] < two.at[0] && two.st.interleaved == 1 && two.rows[1] == one.rows[1],
          "interleaved: ld.so in %.0f ms, the small file's table in %.0f ms, %" PRIu64
          " interleaved",
          two.ms[1], two.ms[0], two.st.interleaved);
}

static struct pfr_unwind_req make_and_map(const char *name, unsigned fdes, int *fd, void **at,
                                          size_t *len)
{
    char path[600], cmd[2048];
    snprintf(path, sizeof(path), "%s/%s", UNWIND_WORK, name);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && sh '%s' '%s' %u '%s'", UNWIND_WORK,
             UNWIND_MAKE_MANY, UNWIND_GCC, fdes, path);
    REQUIRE(system(cmd) == 0, "%s", cmd);
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    REQUIRE(*fd >= 0, "open %s: %s", path, strerror(errno));
    return map_it(*fd, 0, at, len);
}

int main(int argc, char **argv)
{
    const char *names[NFILES] = {argc > 1 ? argv[1] : "uw_lanes_large", "ld.so", "libc",
                                 "uw_lanes_defer"};
    struct pfr_unwind_req req[NFILES];
    int fds[NFILES] = {-1, -1, -1, -1};
    void *at[NFILES] = {0};
    size_t len[NFILES] = {0}, n = NFILES;
    if (argc > 1) {
        fds[LARGE] = open(argv[1], O_RDONLY | O_CLOEXEC);
        REQUIRE(fds[LARGE] >= 0, "open %s: %s", argv[1], strerror(errno));
        req[LARGE] = map_it(fds[LARGE], 0, &at[LARGE], &len[LARGE]);
        n = NFILES - 1;
    } else {
        req[LARGE] = make_and_map(names[LARGE], LARGE_FDES, &fds[LARGE], &at[LARGE], &len[LARGE]);
        req[DEFERRED_] = make_and_map(names[DEFERRED_], DEFER_FDES, &fds[DEFERRED_], &at[DEFERRED_],
                                      &len[DEFERRED_]);
        REQUIRE(req[DEFERRED_].end - req[DEFERRED_].start <= PFR_UNWINDER_SMALL_MAP,
                "the deferred file's mapping must be small");
    }
    req[1] = self_mapping("/ld-linux-x86-64.so.2");
    req[2] = self_mapping("/libc.so.6");

    struct run one = run(true, req, n, BUSY_NS), two = run(false, req, n, BUSY_NS);
    print_run("one lane (before)", &one, names, n);
    print_run("interleaved (now)", &two, names, n);
    double stopped = stop_ms(req, n);
    printf("stopped in %.0f ms during the large build, small files queued\n", stopped);
    CHECK(stopped < one.ms[LARGE] / 2, "stopping took %.0f ms (the large build %.0f ms)", stopped,
          one.ms[LARGE]);

    /* the old order, so that this test tells the two apart: every small file after the large */
    for (size_t i = 1; i < 1 + SMALL_LIBS; i++)
        CHECK(one.at[i] > one.at[LARGE], "one lane: %s came before the large table", names[i]);
    /* now: every small file well within the large build's time, and before its table */
    double bound = one.ms[LARGE] / 4;
    for (size_t i = 1; i < 1 + SMALL_LIBS; i++) {
        CHECK(two.at[i] < two.at[LARGE] && two.ms[i] < bound,
              "%s: in %.0f ms (the bound %.0f ms), the large table in %.0f ms", names[i], two.ms[i],
              bound, two.ms[LARGE]);
        CHECK(two.rows[i] > 0 && two.rows[i] == one.rows[i], "%s: %u rows, one lane %u", names[i],
              two.rows[i], one.rows[i]);
    }
    CHECK(two.st.interleaved >= SMALL_LIBS, "interleaved %" PRIu64, two.st.interleaved);
    CHECK(two.rows[LARGE] > 0 && two.rows[LARGE] == one.rows[LARGE], "large: %u rows, one lane %u",
          two.rows[LARGE], one.rows[LARGE]);
    if (n == NFILES) {
        /* a small mapping past the small limits: left for after the large build, then whole */
        CHECK(two.st.deferred == 1 && two.at[DEFERRED_] > two.at[LARGE] &&
                  two.rows[DEFERRED_] == 2 * DEFER_FDES + 2,
              "deferred %" PRIu64 ", its table %u rows, %.0f ms after the large one",
              two.st.deferred, two.rows[DEFERRED_],
              (double)(two.at[DEFERRED_] - two.at[LARGE]) / 1e6);
        CHECK(one.st.deferred == 0 && two.st.tables == NFILES && two.st.small_files == NFILES - 1,
              "one lane deferred %" PRIu64 "; tables %" PRIu64 ", small files %" PRIu64,
              one.st.deferred, two.st.tables, two.st.small_files);
    }
    if (n == NFILES)
        small_behind_small(&req[DEFERRED_], &req[1]);
    for (size_t i = 0; i < NFILES; i++)
        if (at[i]) {
            munmap(at[i], len[i]);
            close(fds[i]);
        }
    if (check_failures) {
        fprintf(stderr, "%d check(s) failed\n", check_failures);
        return 1;
    }
    printf("unwinder lanes: all checks passed\n");
    return 0;
}
