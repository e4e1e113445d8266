/*
 * The unwinder over real BPF maps, without the sampler: requests name files this process maps
 * (as the sampler's would), and the test plays the sampler's part in last_used. Checks:
 *  - a table is built and loaded: its entry in unwind_files, its rows in unwind_rows equal to
 *    the table built directly;
 *  - eviction: a file whose table does not fit beside an idle one evicts it (its entry and its
 *    asked mark both go, so its next use asks again);
 *  - no room: beside a table in use, a file that does not fit gets 0 rows (counted), and after
 *    the retry time its entry goes so that it is asked for again;
 *  - the vDSO's table, built from this process's own;
 *  - a request for a mapping that is not there: counted, its asked mark kept for a while (not
 *    asked again by every new process mapping the file), then dropped;
 *  - rows in use never above the cap;
 *  - every change of unwind_files (a table in, an entry of 0 rows, an eviction, a retry's drop)
 *    counts files_gen up: the sampler's memo of mappings trusts nothing older.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "pfr_check.h"
#include "unwind_index.h"
#include "unwind_table.h"
#include "unwinder.h"

struct mapped {
    char path[512];
    struct pfr_unwind_req req;
    size_t rows;
    pfr_unwind_table table;
};

/* The first executable mapping of a file whose path contains name, as a request. */
static void find_mapped(const char *name, struct mapped *m)
{
    FILE *f = fopen("/proc/self/maps", "re");
    REQUIRE(f, "open /proc/self/maps");
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long long s, e, off, ino;
        unsigned maj, min;
        char perms[8], path[512] = "";
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %511s", &s, &e, perms, &off, &maj, &min,
                   &ino, path) < 8 ||
            perms[2] != 'x' || !strstr(path, name))
            continue;
        memset(m, 0, sizeof(*m));
        snprintf(m->path, sizeof(m->path), "%s", path);
        m->req.ev.type = PFR_EV_UNWIND;
        m->req.ev.tgid = (uint32_t)getpid();
        m->req.start = s;
        m->req.end = e;
        m->req.pgoff = off;
        m->req.ino = ino;
        m->req.dev = maj << 20 | min;
        found = true;
    }
    fclose(f);
    REQUIRE(found, "no executable mapping of %s in this process", name);
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0, "open %s", m->path);
    char err[256];
    REQUIRE(pfr_unwind_table_build(fd, 0, &m->table, err, sizeof(err)) == 0, "table of %s: %s",
            m->path, err);
    close(fd);
    m->rows = m->table.nrows;
}

static struct pfr_file_key key_of(const struct pfr_unwind_req *r)
{
    return (struct pfr_file_key){.ino = r->ino, .dev = r->dev};
}

/* The sampler's clock in last_used units (bpf_ktime_get_ns() >> 30). */
static uint32_t sampler_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)(((uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec) >> 30);
}

static bool entry(int files_fd, const struct pfr_unwind_req *r, struct pfr_unwind_file *out)
{
    struct pfr_file_key k = key_of(r);
    return bpf_map_lookup_elem(files_fd, &k, out) == 0;
}

static void set_used(int files_fd, const struct pfr_unwind_req *r, uint32_t when)
{
    struct pfr_unwind_file f;
    struct pfr_file_key k = key_of(r);
    REQUIRE(bpf_map_lookup_elem(files_fd, &k, &f) == 0, "no entry to mark used");
    f.last_used = when;
    REQUIRE(bpf_map_update_elem(files_fd, &k, &f, BPF_EXIST) == 0, "mark used");
}

/* As the sampler does before it sends a request. */
static void ask(pfr_unwinder *u, int asked_fd, const struct pfr_unwind_req *r)
{
    struct pfr_file_key k = key_of(r);
    uint8_t one = 1;
    bpf_map_update_elem(asked_fd, &k, &one, BPF_ANY);
    pfr_unwinder_request(u, r);
    pfr_unwinder_sync(u);
}

static bool asked(int asked_fd, const struct pfr_unwind_req *r)
{
    struct pfr_file_key k = key_of(r);
    uint8_t v;
    return bpf_map_lookup_elem(asked_fd, &k, &v) == 0;
}

/* The entry's index (if it has one) equals the index of the table built directly, and lies in
 * the rows map just before the rows. Returns its entries. */
static uint32_t check_index(int rows_fd, const struct mapped *m, const struct pfr_unwind_file *f)
{
    if (f->index_n == 0)
        return 0;
    pfr_unwind_index ix;
    REQUIRE(pfr_unwind_index_build(m->table.rows, m->table.nrows, &ix) == 0, "index");
    CHECK(f->index_n == ix.n && f->index_shift == ix.shift && f->index_first + ix.n == f->first,
          "%s: index of %u entries (shift %u) at %u, rows at %u; built: %u entries, shift %u",
          m->path, f->index_n, f->index_shift, f->index_first, f->first, ix.n, ix.shift);
    size_t bad = 0;
    for (uint32_t i = 0; i < f->index_n && i < ix.n; i++) {
        uint32_t k = f->index_first + i;
        struct pfr_unwind_row row;
        if (bpf_map_lookup_elem(rows_fd, &k, &row) || memcmp(&row, &ix.ent[i], sizeof(row)) != 0)
            bad++;
    }
    CHECK(bad == 0, "%s: %zu index entries differ from the index built", m->path, bad);
    pfr_unwind_index_free(&ix);
    return f->index_n;
}

/* The loaded rows of r equal the table built directly. Returns the rows map's entries it takes
 * (its rows and its index). */
static size_t check_rows(int rows_fd, int files_fd, const struct mapped *m)
{
    struct pfr_unwind_file f;
    REQUIRE(entry(files_fd, &m->req, &f), "%s has no entry", m->path);
    CHECK(f.nrows == m->rows && f.base == m->table.base && f.delta == m->table.delta,
          "%s: entry %u rows base %llx, table %zu rows base %llx", m->path, f.nrows,
          (unsigned long long)f.base, m->rows, (unsigned long long)m->table.base);
    size_t bad = 0;
    for (uint32_t i = 0; i < f.nrows && i < m->rows; i++) {
        uint32_t k = f.first + i;
        struct pfr_unwind_row row;
        if (bpf_map_lookup_elem(rows_fd, &k, &row) ||
            memcmp(&row, &m->table.rows[i], sizeof(row)) != 0)
            bad++;
    }
    CHECK(bad == 0, "%s: %zu rows differ from the table", m->path, bad);
    return f.nrows + check_index(rows_fd, m, &f);
}

int main(void)
{
    struct mapped small, big;
    find_mapped("libz.so", &small);
    find_mapped("libc.so", &big);
    printf("files: %s (%zu rows), %s (%zu rows)\n", small.path, small.rows, big.path, big.rows);
    REQUIRE(small.rows > 0 && big.rows > small.rows, "unexpected table sizes");
    /* room for the big table and half the small one: the two never fit together */
    uint32_t cap = (uint32_t)(big.rows + small.rows / 2);
    /* mmapable, as the recorder makes it: rows written by copy (unwind_unwinder_cap's map is
     * not: rows written by update syscalls) */
    LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_MMAPABLE);
    int rows_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_rows", sizeof(uint32_t),
                                 sizeof(struct pfr_unwind_row), cap, &mo);
    int files_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "unwind_files", sizeof(struct pfr_file_key),
                                  sizeof(struct pfr_unwind_file), PFR_UNWIND_FILES_MAX, NULL);
    int asked_fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "unwind_asked",
                                  sizeof(struct pfr_file_key), 1, PFR_UNWIND_FILES_MAX, NULL);
    REQUIRE(rows_fd >= 0 && files_fd >= 0 && asked_fd >= 0, "bpf_map_create: %s (root?)",
            strerror(errno));
    volatile uint32_t gen = 0, seen = 0;
    pfr_unwinder_opts o = {.max_rows = cap, .no_room_retry_ms = 500, .files_gen = &gen};
    pfr_unwinder *u = NULL;
    char err[256];
    REQUIRE(pfr_unwinder_new(&o, rows_fd, files_fd, asked_fd, &u, err, sizeof(err)) == 0, "%s",
            err);
    pfr_unwinder_stats st;

    /* loaded */
    ask(u, asked_fd, &small.req);
    size_t taken = check_rows(rows_fd, files_fd, &small);
    pfr_unwinder_stats_get(u, &st);
    CHECK(st.tables == 1 && st.rows == taken && taken > small.rows,
          "after the first: tables %llu rows %llu (the table %zu, with its index %zu)",
          (unsigned long long)st.tables, (unsigned long long)st.rows, small.rows, taken);
    CHECK(gen >= 1, "a table went in and files_gen stayed at %u", gen);
    seen = gen;

    /* eviction of an idle table */
    set_used(files_fd, &small.req, sampler_now() - 10);
    ask(u, asked_fd, &big.req);
    taken = check_rows(rows_fd, files_fd, &big);
    struct pfr_unwind_file f;
    pfr_unwinder_stats_get(u, &st);
    CHECK(st.evictions == 1, "evictions %llu", (unsigned long long)st.evictions);
    CHECK(!entry(files_fd, &small.req, &f), "the evicted file keeps its entry");
    CHECK(!asked(asked_fd, &small.req), "the evicted file stays marked asked: never asked again");
    CHECK(st.rows == taken && st.rows <= cap, "rows %llu", (unsigned long long)st.rows);
    CHECK(gen >= seen + 2, "an eviction and a table in: files_gen %u -> %u", seen, gen);
    seen = gen;

    /* no room beside a table in use; retried later */
    set_used(files_fd, &big.req, sampler_now());
    ask(u, asked_fd, &small.req);
    pfr_unwinder_stats_get(u, &st);
    CHECK(st.no_room == 1 && st.evictions == 1, "no_room %llu evictions %llu",
          (unsigned long long)st.no_room, (unsigned long long)st.evictions);
    CHECK(entry(files_fd, &small.req, &f) && f.nrows == 0,
          "a file refused for want of room must get 0 rows (walked by frame pointers)");
    CHECK(gen > seen, "an entry of 0 rows went in: files_gen stayed at %u", gen);
    seen = gen;
    check_rows(rows_fd, files_fd, &big);
    for (int i = 0; i < 40 && entry(files_fd, &small.req, &f); i++) {
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(!entry(files_fd, &small.req, &f) && !asked(asked_fd, &small.req),
          "the refused file's entry outlived its retry time");
    /* (the unwinder's thread counts up just after the delete the loop saw) */
    for (int i = 0; i < 100 && gen == seen; i++) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(gen > seen, "the refused file's entry went: files_gen stayed at %u", gen);

    /* the vDSO, by its key */
    struct pfr_unwind_req vdso = {.ev.type = PFR_EV_UNWIND,
                                  .ev.tgid = (uint32_t)getpid(),
                                  .ino = PFR_UNWIND_VDSO_INO,
                                  .dev = 0};
    ask(u, asked_fd, &vdso);
    CHECK(entry(files_fd, &vdso, &f) && f.nrows > 0, "no rows for the vDSO");
    /* its rows start right after libc's, inside a page of them: written, in order, and libc's
     * left as they were */
    uint32_t prev_pc = 0;
    size_t unordered = 0;
    for (uint32_t i = 0; i < f.nrows; i++) {
        uint32_t k = f.first + i;
        struct pfr_unwind_row row;
        if (bpf_map_lookup_elem(rows_fd, &k, &row) || (i > 0 && row.pc <= prev_pc))
            unordered++;
        prev_pc = row.pc;
    }
    CHECK(unordered == 0, "vDSO: %zu of %u rows unwritten or out of order", unordered, f.nrows);
    check_rows(rows_fd, files_fd, &big);

    /* a mapping that is not there */
    struct pfr_unwind_req gone = small.req;
    gone.start = 0x1000;
    gone.end = 0x2000;
    gone.ino = 1;
    ask(u, asked_fd, &gone);
    pfr_unwinder_stats_get(u, &st);
    CHECK(st.open_failed == 1 && asked(asked_fd, &gone) && !entry(files_fd, &gone, &f),
          "a request for no mapping: open_failed %llu; it must stay asked for a while (not "
          "asked again by every new process)",
          (unsigned long long)st.open_failed);
    for (int i = 0; i < 40 && asked(asked_fd, &gone); i++) {
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(!asked(asked_fd, &gone), "a file that failed to open is never asked for again");
    CHECK(st.rows <= cap, "rows %llu above the cap %u", (unsigned long long)st.rows, cap);

    pfr_unwinder_free(u);
    pfr_unwind_table_free(&small.table);
    pfr_unwind_table_free(&big.table);
    close(rows_fd);
    close(files_fd);
    close(asked_fd);
    if (check_failures) {
        fprintf(stderr, "%d check(s) failed\n", check_failures);
        return 1;
    }
    printf("unwinder: all checks passed\n");
    return 0;
}
