/*
 * ring_check: test helper. Opens a ring read-only (recovering a dead writer's WAL), runs
 * pfr_store_check and prints the ring's statistics as key=value lines, then with --spans the
 * (start_ns, end_ns) of every chunk, one "span START END" line each. With --stats the check is
 * left out: a test that polls the ring does not hold a snapshot for a whole check (a reader's
 * snapshot keeps the writer's WAL from starting again, docs/store.md "Bounded size").
 *
 *   ring_check RING [--spans | --stats]
 *
 * Exit status: 0 the ring checks clean, 1 it does not (the reason on stderr), 2 usage or open
 * failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pfr_store.h"

static int span_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    (void)ctx;
    printf("span %" PRId64 " %" PRId64 "\n", m->start_ns, m->end_ns);
    return 0;
}

static void print_stats(const pfr_store_stats *st)
{
    printf("chunks=%llu\nappended=%llu\nevicted=%llu\nevicted_disk=%llu\ndropped_disk=%llu\n"
           "lost_unshipped=%llu\nmax_id=%" PRId64 "\nnewest_ns=%" PRId64 "\nfile_bytes=%llu\n"
           "max_bytes=%llu\neffective_max_bytes=%llu\ncap_reason=%s\nreserve_bytes=%llu\n"
           "fs_free_bytes=%llu\ndata_bytes=%llu\n",
           (unsigned long long)st->chunks, (unsigned long long)st->appended,
           (unsigned long long)st->evicted, (unsigned long long)st->evicted_disk,
           (unsigned long long)st->dropped_disk, (unsigned long long)st->lost_unshipped, st->max_id,
           st->newest_ns, (unsigned long long)st->file_bytes, (unsigned long long)st->max_bytes,
           (unsigned long long)st->effective_max_bytes,
           st->cap_reason == PFR_STORE_CAP_DISK_RESERVE ? "disk_reserve" : "configured",
           (unsigned long long)st->reserve_bytes, (unsigned long long)st->fs_free_bytes,
           (unsigned long long)st->data_bytes);
}

int main(int argc, char **argv)
{
    bool spans = argc > 2 && strcmp(argv[2], "--spans") == 0;
    bool stats_only = argc > 2 && strcmp(argv[2], "--stats") == 0;
    if (argc < 2 || argc > 3 || (argc > 2 && !spans && !stats_only)) {
        fprintf(stderr, "usage: ring_check RING [--spans | --stats]\n");
        return 2;
    }
    pfr_store *s = NULL;
    char err[512];
    pfr_store_opts o = {.read_only = true};
    if (pfr_store_open(argv[1], &o, &s, err, sizeof(err)) != 0) {
        fprintf(stderr, "ring_check: %s: %s\n", argv[1], err);
        return 2;
    }
    uint64_t bad = 0;
    int rc = stats_only ? 0 : pfr_store_check(s, &bad, err, sizeof(err));
    pfr_store_stats st;
    if (rc == 0 && (rc = pfr_store_stats_get(s, &st)) != 0)
        snprintf(err, sizeof(err), "statistics: %s", strerror(-rc));
    if (rc == 0) {
        print_stats(&st);
        pfr_store_filter all = {0};
        if (spans && (rc = pfr_store_scan(s, &all, PFR_SCAN_META_ONLY, span_cb, NULL, NULL)))
            snprintf(err, sizeof(err), "scan: %s", strerror(rc < 0 ? -rc : EIO));
    }
    pfr_store_close(s);
    if (rc) {
        fprintf(stderr, "ring_check: %s: %s (%llu bad chunks)\n", argv[1], err,
                (unsigned long long)bad);
        return 1;
    }
    return 0;
}
