/* Builds rings for the query integration tests and benchmarks.
 *
 *   make_ring RING testgen [--chunks N] [--interval-s S] [--start UNIX_S] [--services K]
 *                          [--seed N] [--totals FILE] [--pprof-dir DIR]
 *   make_ring RING shift [--chunks N] [--start UNIX_S] [--service NAME]
 *   make_ring RING names [--chunks N] [--start UNIX_S]
 *
 * testgen: K services, N chunks each, realistic CPU profiles (tests/gen). --totals writes one line
 * per chunk "service start_ns end_ns total" (the generator's own sums, not the store's) and
 * --pprof-dir writes every chunk as a gzip'd pprof file too (for go tool pprof).
 * shift: the hot function changes half-way (hot_before, then hot_after).
 * names: Coroot-style and hostile service names (pfr_fx_names in ring_fixture.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_testgen.h"
#include "ring_fixture.h"

static long long arg_num(int argc, char **argv, const char *name, long long def)
{
    for (int i = 3; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return atoll(argv[i + 1]);
    return def;
}

static const char *arg_str(int argc, char **argv, const char *name)
{
    for (int i = 3; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return NULL;
}

static int testgen(pfr_store *s, int argc, char **argv)
{
    long long chunks = arg_num(argc, argv, "--chunks", 60);
    long long interval = arg_num(argc, argv, "--interval-s", 10) * FX_S;
    long long start = arg_num(argc, argv, "--start", 1714564800) * FX_S;
    long long nsvc = arg_num(argc, argv, "--services", 1);
    long long seed = arg_num(argc, argv, "--seed", 1);
    const char *totals_path = arg_str(argc, argv, "--totals");
    const char *pprof_dir = arg_str(argc, argv, "--pprof-dir");
    FILE *totals = totals_path ? fopen(totals_path, "w") : NULL;
    if (totals_path && !totals) {
        perror(totals_path);
        return 1;
    }
    pfr_testgen **gens = calloc((size_t)nsvc, sizeof(*gens));
    for (long long k = 0; k < nsvc; k++)
        gens[k] = pfr_testgen_new((uint64_t)seed, (unsigned)k, NULL);
    int rc = 0;
    for (long long i = 0; i < chunks && rc == 0; i++) {
        for (long long k = 0; k < nsvc && rc == 0; k++) {
            int64_t t = start + i * interval;
            pfr_profile *p = pfr_testgen_next(gens[k], t, interval);
            if (!p) {
                rc = -ENOMEM;
                break;
            }
            const char *svc = pfr_testgen_service(gens[k]);
            rc = pfr_fx_append(s, svc, NULL, 0, t, interval, p);
            if (totals)
                fprintf(totals, "%s %lld %lld %lld\n", svc, (long long)t, (long long)(t + interval),
                        (long long)pfr_testgen_total(p));
            if (rc == 0 && pprof_dir) {
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s-%06lld.pb.gz", pprof_dir, svc, i);
                rc = pfr_testgen_write_pprof(p, path);
            }
            pfr_profile_free(p);
        }
    }
    for (long long k = 0; k < nsvc; k++)
        pfr_testgen_free(gens[k]);
    free(gens);
    if (totals)
        fclose(totals);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: make_ring RING testgen|shift|names|escapes [options]\n");
        return 2;
    }
    pfr_store *s = pfr_fx_open(argv[1]);
    int rc;
    if (strcmp(argv[2], "testgen") == 0)
        rc = testgen(s, argc, argv);
    else if (strcmp(argv[2], "shift") == 0)
        rc = pfr_fx_shift_ring(
            s, arg_str(argc, argv, "--service") ? arg_str(argc, argv, "--service") : "app",
            arg_num(argc, argv, "--start", 1714564800) * FX_S,
            (int)arg_num(argc, argv, "--chunks", 60));
    else if (strcmp(argv[2], "escapes") == 0)
        rc = pfr_fx_escapes_ring(s, arg_num(argc, argv, "--start", 1714564800) * FX_S,
                                 (int)arg_num(argc, argv, "--chunks", 60));
    else if (strcmp(argv[2], "names") == 0)
        rc = pfr_fx_names_ring(s, arg_num(argc, argv, "--start", 1714564800) * FX_S,
                               (int)arg_num(argc, argv, "--chunks", 60));
    else {
        fprintf(stderr, "unknown scenario %s\n", argv[2]);
        rc = -EINVAL;
    }
    pfr_store_close(s);
    if (rc)
        fprintf(stderr, "make_ring: %s\n", strerror(-rc));
    return rc ? 1 : 0;
}
