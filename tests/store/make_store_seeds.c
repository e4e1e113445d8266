/*
 * Writes the seed corpus of fuzz_store_rows from real rows: a small store is written, then each
 * chunk's base layer and payload are paired into seed files. Run by hand when the row formats
 * change:  make_store_seeds tests/store/corpus
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "pfr_store.h"
#include "pfr_testgen.h"
#include "store_test_util.h"

static void put(const char *dir, int i, uint8_t flags, const void *layer, int llen,
                const void *chunk, int clen)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/seed-%02d", dir, i);
    FILE *f = fopen(path, "wb");
    uint8_t hdr[4] = {flags, 0, (uint8_t)llen, (uint8_t)(llen >> 8)};
    fwrite(hdr, 1, 4, f);
    fwrite(layer, 1, (size_t)llen, f);
    fwrite(chunk, 1, (size_t)clen, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_store_seeds DIR\n");
        return 2;
    }
    char *tmp = pfr_tu_tmpdir("seeds");
    char *db = pfr_tu_path(tmp, "ring.db");
    pfr_store *s;
    char err[256];
    if (pfr_store_open(db, NULL, &s, err, sizeof(err)))
        return 1;
    pfr_testgen_opts go = {.nstacks = 6, .nfunctions = 20, .min_depth = 3, .max_depth = 6};
    pfr_testgen *g = pfr_testgen_new(1, 0, &go);
    for (int i = 0; i < 3; i++) {
        pfr_profile *p =
            pfr_testgen_next(g, 1700000000000000000ll + i * 10000000000ll, 10000000000ll);
        pfr_chunk_in in = {"svc", NULL, 0, 1, 2, p};
        pfr_store_append(s, &in, NULL);
        pfr_profile_free(p);
    }
    pfr_testgen_free(g);
    pfr_profile *p = pfr_tu_small_profile(1, 4, "go:heap_alloc_space:bytes");
    pfr_chunk_in in = {"svc2", NULL, 0, 1, 2, p};
    pfr_store_append(s, &in, NULL);
    pfr_profile_free(p);
    pfr_store_close(s);

    sqlite3 *h;
    sqlite3_stmt *st;
    sqlite3_open(db, &h);
    sqlite3_prepare_v2(h,
                       "SELECT d.data, c.data FROM chunks k JOIN dicts d ON d.id = k.base_id"
                       " JOIN chunk_data c ON c.id = k.id ORDER BY k.id",
                       -1, &st, NULL);
    int i = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        put(argv[1], i, (uint8_t)(i % 2 ? 2 : 0), sqlite3_column_blob(st, 0),
            sqlite3_column_bytes(st, 0), sqlite3_column_blob(st, 1), sqlite3_column_bytes(st, 1));
        i++;
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    pfr_tu_rmdir(tmp);
    free(tmp);
    free(db);
    printf("wrote %d seeds\n", i);
    return 0;
}
