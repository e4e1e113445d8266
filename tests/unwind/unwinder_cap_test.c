/*
 * The unwinder and a file whose table is larger than its whole map, over real BPF maps: the
 * build is given up as soon as the rows pass the cap (never built whole), the file gets an
 * entry of 0 rows (walked by frame pointers, not asked again) counted in no_table, and the
 * refused build's peak RSS growth stays under its FDEs plus 3 MiB (builds without ASan). The
 * same file under a map it fits is loaded, row for row the table built directly. Refusals are
 * counted by reason and told to on_refused once per file: past the cap (too_many_rows), and a
 * 1 MB .debug_frame that inflates to 1 GiB (too_big, before anything is inflated). Under a memory
 * budget that leaves the build less room than the table takes, the file is refused for room
 * (no_room, counted by the budget), not as too large, and not built again until the room is
 * there: with the room it is loaded.
 *
 * unwinder_cap_test: generates its file of many FDEs with make_many_fdes.sh (UNWIND_MAKE_MANY),
 * the other with make_hostile (UNWIND_MAKE_HOSTILE).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "pfr_check.h"
#include "pfr_membudget.h"
#include "under_asan.h"
#include "unwind_table.h"
#include "unwinder.h"
#include "unwinder_maps.h"

#define MANY 150000u /* functions, an FDE and 2 rows each */

/* Ask for the file's table as the sampler would, and wait until it is handled. */
static void ask(pfr_unwinder *u, const struct maps *m, const struct pfr_unwind_req *r)
{
    request(u, m, r);
    pfr_unwinder_sync(u);
}

/* What on_refused was told. */
struct told {
    int calls, reason;
    char path[600], why[256];
};

static void on_refused(void *ctx, const pfr_unwind_refused *r)
{
    struct told *t = ctx;
    t->calls++;
    t->reason = r->reason;
    snprintf(t->path, sizeof(t->path), "%s", r->path);
    snprintf(t->why, sizeof(t->why), "%s", r->why);
}

/* A statm file for a memory budget to read: a resident set of rss_mib. */
static bool write_statm(const char *path, unsigned rss_mib)
{
    char line[64];
    long page = sysconf(_SC_PAGESIZE);
    int n = snprintf(line, sizeof(line), "%ld %ld\n", 2 * (long)(rss_mib << 20) / page,
                     (long)(rss_mib << 20) / page);
    FILE *f = fopen(path, "w");
    bool ok = f && fwrite(line, 1, (size_t)n, f) == (size_t)n;
    return f && fclose(f) == 0 && ok;
}

/* req's file (fit rows) under a 64 MiB memory budget: at a resident set of 57 MiB its build has
 * less room than its FDEs and rows (4.6 MiB) though more than the estimate asked of it (an
 * eighth of the file), so it is refused for room as it is read, counted by the budget, never
 * loaded; asked again, it is refused without a build (the room it needs is remembered); at 40
 * MiB it is loaded. */
static void short_of_room(const struct pfr_unwind_req *req, uint32_t fit)
{
    char statm[] = "/tmp/pfr-uwcap-statm-XXXXXX", err[256];
    int fd = mkstemp(statm);
    REQUIRE(fd >= 0 && close(fd) == 0 && write_statm(statm, 57), "%s", statm);
    pfr_membudget *b = NULL;
    REQUIRE(pfr_membudget_new(64u << 20, statm, &b) == 0, "a budget");
    struct maps m = maps_new(fit);
    pfr_unwinder_opts o = {.max_rows = fit, .membudget = b};
    pfr_unwinder *u = NULL;
    REQUIRE(pfr_unwinder_new(&o, m.rows, m.files, m.asked, &u, err, sizeof(err)) == 0, "%s", err);
    pfr_unwinder_stats s;
    pfr_membudget_stats bs;
    ask(u, &m, req);
    pfr_unwinder_stats_get(u, &s);
    pfr_membudget_stats_get(b, &bs);
    uint64_t first_ns = s.build_ns;
    CHECK(s.no_room == 1 && s.tables == 0 && s.no_table == 0 && s.rows == 0 &&
              s.refused[PFR_UW_REFUSED_TOO_MANY_ROWS] == 0 && bs.refused[PFR_MEM_UNWIND] == 1,
          "no room: no_room %llu tables %llu no_table %llu rows %llu, budget refused %llu",
          (unsigned long long)s.no_room, (unsigned long long)s.tables,
          (unsigned long long)s.no_table, (unsigned long long)s.rows,
          (unsigned long long)bs.refused[PFR_MEM_UNWIND]);
    ask(u, &m, req);
    pfr_unwinder_stats_get(u, &s);
    pfr_membudget_stats_get(b, &bs);
    printf("short of room: the build refused in %.2f ms, asked again %.3f ms\n", first_ns / 1e6,
           (s.build_ns - first_ns) / 1e6);
    CHECK(s.no_room == 2 && s.tables == 0 && bs.refused[PFR_MEM_UNWIND] == 2,
          "asked again: no_room %llu tables %llu", (unsigned long long)s.no_room,
          (unsigned long long)s.tables);
    CHECK(s.build_ns - first_ns < first_ns / 4, "asked again, built again: %.2f ms, first %.2f ms",
          (s.build_ns - first_ns) / 1e6, first_ns / 1e6);
    REQUIRE(write_statm(statm, 40), "%s", statm);
    ask(u, &m, req);
    pfr_unwinder_stats_get(u, &s);
    CHECK(s.tables == 1 && s.no_room == 2 && s.rows == fit,
          "room: tables %llu no_room %llu rows %llu", (unsigned long long)s.tables,
          (unsigned long long)s.no_room, (unsigned long long)s.rows);
    pfr_unwinder_free(u);
    maps_close(&m);
    pfr_membudget_free(b);
    unlink(statm);
}

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(void)
{
    char path[600], cmd[2048];
    snprintf(path, sizeof(path), "%s/uw_many", UNWIND_WORK);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && sh '%s' '%s' %u '%s'", UNWIND_WORK,
             UNWIND_MAKE_MANY, UNWIND_GCC, MANY, path);
    REQUIRE(system(cmd) == 0, "%s", cmd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0, "open %s", path);
    char err[256];

    /* the file mapped executable by this process, as the request names it */
    void *at;
    size_t len;
    struct pfr_unwind_req req = map_it(fd, 0, &at, &len);
    struct pfr_file_key key = {.ino = req.ino, .dev = req.dev};
    struct pfr_unwind_file f;
    pfr_unwinder_stats s;

    /* a map of half the rows: refused as soon as they pass it (first, before any other build
     * raises the peak RSS this measures) */
    uint32_t cap = MANY + 1;
    struct maps small = maps_new(cap);
    struct told told = {0};
    pfr_unwinder_opts o = {.max_rows = cap, .on_refused = on_refused, .ctx = &told};
    pfr_unwinder *u = NULL;
    REQUIRE(pfr_unwinder_new(&o, small.rows, small.files, small.asked, &u, err, sizeof(err)) == 0,
            "%s", err);
    long before = maxrss_kib();
    ask(u, &small, &req);
    long grew = maxrss_kib() - before, fdes_kib = 16 * MANY / 1024;
    pfr_unwinder_stats_get(u, &s);
    printf("refused: no_table %llu, build %.1f ms, peak RSS growth %ld KiB (FDEs %ld KiB)\n",
           (unsigned long long)s.no_table, s.build_max_ns / 1e6, grew, fdes_kib);
    CHECK(s.no_table == 1 && s.tables == 0 && s.no_room == 0 && s.bad_files == 0,
          "too large: no_table %llu tables %llu no_room %llu bad %llu",
          (unsigned long long)s.no_table, (unsigned long long)s.tables,
          (unsigned long long)s.no_room, (unsigned long long)s.bad_files);
    CHECK(s.rows == 0 && s.files == 1, "rows %llu files %llu", (unsigned long long)s.rows,
          (unsigned long long)s.files);
    CHECK(bpf_map_lookup_elem(small.files, &key, &f) == 0 && f.nrows == 0,
          "a file too large for the map must get an entry of 0 rows");
    uint8_t v;
    CHECK(bpf_map_lookup_elem(small.asked, &key, &v) == 0,
          "a file too large for the map must stay asked: never built again");
    if (!UNDER_ASAN)
        CHECK(grew < fdes_kib + 3072, "the refused build grew RSS by %ld KiB", grew);
    CHECK(s.refused[PFR_UW_REFUSED_TOO_MANY_ROWS] == 1, "refused too_many_rows: %llu",
          (unsigned long long)s.refused[PFR_UW_REFUSED_TOO_MANY_ROWS]);
    CHECK(told.calls == 1 && told.reason == PFR_UW_REFUSED_TOO_MANY_ROWS &&
              strcmp(told.path, path) == 0 && strstr(told.why, "more than"),
          "on_refused: %d calls, reason %d, %s: %s", told.calls, told.reason, told.path, told.why);

    /* a 1 MB .debug_frame that inflates to 1 GiB: refused as it is, nothing inflated */
    char bomb[600];
    snprintf(bomb, sizeof(bomb), "%s/bomb", UNWIND_WORK);
    snprintf(cmd, sizeof(cmd), "'%s' bomb %llu '%s'", UNWIND_MAKE_HOSTILE, 1ull << 30, bomb);
    REQUIRE(system(cmd) == 0, "%s", cmd);
    int bfd = open(bomb, O_RDONLY | O_CLOEXEC);
    REQUIRE(bfd >= 0, "open %s", bomb);
    void *bat;
    size_t blen;
    struct pfr_unwind_req breq = map_it(bfd, 0, &bat, &blen);
    before = maxrss_kib();
    ask(u, &small, &breq);
    grew = maxrss_kib() - before;
    pfr_unwinder_stats_get(u, &s);
    printf("bomb: refused too_big %llu, peak RSS growth %ld KiB: %s\n",
           (unsigned long long)s.refused[PFR_UW_REFUSED_TOO_BIG], grew, told.why);
    CHECK(s.refused[PFR_UW_REFUSED_TOO_BIG] == 1 && s.no_table == 2 &&
              bpf_map_lookup_elem(
                  small.files, &(struct pfr_file_key){.ino = breq.ino, .dev = breq.dev}, &f) == 0 &&
              f.nrows == 0,
          "bomb: refused too_big %llu, no_table %llu (and an entry of 0 rows)",
          (unsigned long long)s.refused[PFR_UW_REFUSED_TOO_BIG], (unsigned long long)s.no_table);
    CHECK(told.calls == 2 && told.reason == PFR_UW_REFUSED_TOO_BIG && strcmp(told.path, bomb) == 0,
          "on_refused: %d calls, %s", told.calls,
          told.path); /* (its entry of 0 rows keeps the sampler from asking again) */
    CHECK(grew < (UNDER_ASAN ? 64 : 8) * 1024, "the bomb grew RSS by %ld KiB", grew);
    munmap(bat, blen);
    close(bfd);
    pfr_unwinder_free(u);
    maps_close(&small);

    short_of_room(&req, 2 * MANY + 2);

    /* a map it fits: loaded whole */
    pfr_unwind_table want;
    REQUIRE(pfr_unwind_table_build(fd, 0, &want, err, sizeof(err)) == 0, "%s: %s", path, err);
    REQUIRE(want.nrows == 2 * MANY + 2, "%zu rows", want.nrows);
    struct maps big = maps_new((uint32_t)want.nrows);
    o.max_rows = (uint32_t)want.nrows;
    REQUIRE(pfr_unwinder_new(&o, big.rows, big.files, big.asked, &u, err, sizeof(err)) == 0, "%s",
            err);
    ask(u, &big, &req);
    pfr_unwinder_stats_get(u, &s);
    CHECK(s.tables == 1 && s.no_table == 0 && s.rows == want.nrows, "fits: tables %llu rows %llu",
          (unsigned long long)s.tables, (unsigned long long)s.rows);
    REQUIRE(bpf_map_lookup_elem(big.files, &key, &f) == 0, "no entry for the loaded file");
    CHECK(f.nrows == want.nrows && f.base == want.base, "entry: %u rows base %llx", f.nrows,
          (unsigned long long)f.base);
    size_t bad = 0;
    for (uint32_t i = 0; i < f.nrows && i < want.nrows; i++) {
        uint32_t k = f.first + i;
        struct pfr_unwind_row row;
        bad += bpf_map_lookup_elem(big.rows, &k, &row) != 0 ||
               memcmp(&row, &want.rows[i], sizeof(row)) != 0;
    }
    CHECK(bad == 0, "%zu loaded rows differ from the table built directly", bad);
    pfr_unwinder_free(u);
    maps_close(&big);

    munmap(at, len);
    close(fd);
    pfr_unwind_table_free(&want);
    if (check_failures) {
        fprintf(stderr, "%d check(s) failed\n", check_failures);
        return 1;
    }
    printf("unwinder cap: all checks passed\n");
    return 0;
}
