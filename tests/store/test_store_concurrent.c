/*
 * Reading while a writer appends: store_writer_proc appends COUNT chunks in another process while
 * this one, on its own read-only handle, repeatedly scans for new chunks (decoding every one) and
 * merges the whole ring. No read may fail or see a corrupt chunk; ids come in order, each chunk
 * once; every chunk whose profile we know (the writer reported it) has the appended content; and
 * at the end every reported chunk was seen.
 *
 *   test_store_concurrent WRITER_EXE [COUNT]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pfr_check.h"
#include "pfr_store.h"
#include "store_test_util.h"
#include "store_writer_proc.h"
#include "writer_spawn.h"

#define SEED 77

struct seen {
    int64_t last_id;
    size_t n, cap;
    int64_t *ids;
    uint64_t *hash; /* of the canonical content */
};

static int seen_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct seen *s = ctx;
    REQUIRE(m->id > s->last_id, "id %lld after %lld", (long long)m->id, (long long)s->last_id);
    REQUIRE(p && pfr_profile_num_samples(p) > 0, "chunk %lld has no samples", (long long)m->id);
    REQUIRE(m->ntypes == 1 && m->totals[0] > 0, "chunk %lld totals", (long long)m->id);
    s->last_id = m->id;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->ids = realloc(s->ids, s->cap * sizeof(*s->ids));
        s->hash = realloc(s->hash, s->cap * sizeof(*s->hash));
    }
    s->ids[s->n] = m->id;
    s->hash[s->n] = pfr_tu_digest(p);
    s->n++;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_store_concurrent WRITER_EXE [COUNT]\n");
        return 2;
    }
    long count = argc > 2 ? atol(argv[2]) : 300;
    char *dir = pfr_tu_tmpdir("concurrent");
    char *db = pfr_tu_path(dir, "ring.db");
    struct writer_run w;
    REQUIRE(pfr_writer_start(&w, argv[1], db, SEED, count, 256ull << 20, true) == 0, "spawn");
    struct committed *rep = NULL;
    size_t nrep = 0, cap = 0;
    struct seen seen = {0};
    pfr_store *s = NULL;
    int scans = 0, merges = 0, eof = 0;
    while (!eof || !s) {
        eof = pfr_writer_read(&w, SEED, &rep, &nrep, &cap);
        if (!s) {
            char err[256];
            pfr_store_opts ro = {.read_only = true};
            if (pfr_store_open(db, &ro, &s, err, sizeof(err)) != 0) {
                REQUIRE(!eof, "the writer ended and the store does not open: %s", err);
                usleep(2000);
                continue; /* not created yet */
            }
        }
        pfr_store_filter f = {.after_id = seen.last_id};
        pfr_scan_stats st;
        int rc = pfr_store_scan(s, &f, 0, seen_cb, &seen, &st);
        REQUIRE(rc == 0 && st.corrupt == 0, "scan: rc %d, %" PRIu64 " corrupt", rc, st.corrupt);
        scans++;
        if (scans % 5 == 0) {
            pfr_profile *m = NULL;
            rc = pfr_store_merge(s, NULL, PFR_MERGE_DROP_LABELS, &m, &st);
            REQUIRE(rc == 0 || rc == -ENOENT, "merge: %d", rc);
            REQUIRE(st.corrupt == 0, "merge saw corrupt chunks");
            pfr_profile_free(m);
            merges++;
        }
    }
    int status = pfr_writer_wait(&w);
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer failed (status %d)", status);
    /* Last pass after the writer is done. */
    pfr_store_filter f = {.after_id = seen.last_id};
    REQUIRE(pfr_store_scan(s, &f, 0, seen_cb, &seen, NULL) == 0, "final scan");
    REQUIRE((long)nrep == count, "writer reported %zu of %ld", nrep, count);
    REQUIRE(seen.n == nrep, "saw %zu chunks, writer committed %zu", seen.n, nrep);

    /* Content: regenerate in order (the writer appends n = 0, 1, ... in id order). */
    pfr_testgen *g = writer_proc_gen(SEED);
    for (size_t i = 0; i < nrep; i++) {
        REQUIRE(rep[i].n == (long)i && rep[i].id == seen.ids[i], "order of chunk %zu", i);
        pfr_profile *p = pfr_testgen_next(g, WRITER_PROC_T0 + (int64_t)i * WRITER_PROC_INTERVAL,
                                          WRITER_PROC_INTERVAL);
        REQUIRE(pfr_tu_digest(p) == seen.hash[i], "chunk %lld read while writing differs",
                (long long)rep[i].id);
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    pfr_store_close(s);
    printf("concurrent test passed: %zu chunks appended by another process, %d scans and %d "
           "merges meanwhile, every chunk seen once with its content\n",
           nrep, scans, merges);
    free(rep);
    free(seen.ids);
    free(seen.hash);
    pfr_tu_rmdir(dir);
    free(dir);
    free(db);
    return 0;
}
