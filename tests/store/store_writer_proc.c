/*
 * A writer process for the crash and concurrency tests:
 *
 *   store_writer_proc DB SEED COUNT MAX_BYTES
 *
 * Appends the profiles of pfr_testgen(SEED, service 0, 100 stacks), the n-th covering
 * [T0 + n * 10 s, +10 s), COUNT of them (0 = until killed). Every third append is a batch of
 * three; WRITER_PROC_TIERS in the environment sets the ring's tiers (off: age-only eviction).
 * After each append returns 0 it writes "ID N\n" to stdout with one write(2): a line the
 * parent reads means the chunk was committed.
 *
 * With PFR_WRITER_PINS=1 in the environment it also pins, as `pfr pin` does beside a running
 * recorder: through a read-only handle of its own (so a connection of its own), a pin of the
 * last chunk's range after every append ("pin ID\n" once it returned), and every third
 * pin the oldest one released ("unpin ID\n").
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pfr_store.h"
#include "pfr_testgen.h"
#include "store_writer_proc.h"

static int say(const char *what, int64_t id)
{
    char line[64];
    int len = snprintf(line, sizeof(line), "%s %lld\n", what, (long long)id);
    return write(1, line, (size_t)len) == len ? 0 : -EIO;
}

/* One pin of the newest chunk's range through a read-only handle (its own connection), and
 * every third pin the oldest kept one released. */
static int pin_step(const char *db, pfr_store **pinner, int64_t *pinned, size_t *npinned,
                    size_t *npins)
{
    char err[256];
    pfr_store_opts ro = {.read_only = true};
    int rc = *pinner ? 0 : pfr_store_open(db, &ro, pinner, err, sizeof(err));
    pfr_store_stats st;
    if (!rc)
        rc = pfr_store_stats_quick(*pinner, &st);
    if (rc) {
        fprintf(stderr, "store_writer_proc: pinner: %d %s\n", rc, err);
        return rc;
    }
    pfr_pin_in in = {.from_ns = st.newest_ns - WRITER_PROC_INTERVAL,
                     .to_ns = st.newest_ns,
                     .service = WRITER_PROC_SERVICE,
                     .reason = "crash test",
                     .origin = "manual:crash-test"};
    pfr_pin_result r;
    if ((rc = pfr_store_pin_add(*pinner, &in, &r, err, sizeof(err))) != 0) {
        fprintf(stderr, "store_writer_proc: pin: %s\n", err);
        return rc;
    }
    if ((rc = say("pin", r.id)) != 0)
        return rc;
    if (*npinned < 64)
        pinned[(*npinned)++] = r.id;
    if (++*npins % 3 == 0 && *npinned) {
        /* said first: a kill between the release's commit and "unpin" leaves either state */
        if ((rc = say("unpinning", pinned[0])) != 0)
            return rc;
        if ((rc = pfr_store_pin_remove(*pinner, pinned[0], err, sizeof(err))) != 0) {
            fprintf(stderr, "store_writer_proc: unpin: %s\n", err);
            return rc;
        }
        rc = say("unpin", pinned[0]);
        memmove(pinned, pinned + 1, --*npinned * sizeof(*pinned));
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: store_writer_proc DB SEED COUNT MAX_BYTES\n");
        return 2;
    }
    uint64_t seed = strtoull(argv[2], NULL, 10);
    long count = atol(argv[3]);
    pfr_store_opts o = {.max_bytes = strtoull(argv[4], NULL, 10)};
    /* WRITER_PROC_TIERS: the ring's roll-up steps (off: age-only eviction), default the store's */
    const char *tiers = getenv("WRITER_PROC_TIERS");
    char why[128];
    if (tiers && pfr_store_tiers_parse(tiers, &o.tiers, why, sizeof(why)) != 0) {
        fprintf(stderr, "store_writer_proc: WRITER_PROC_TIERS: %s\n", why);
        return 2;
    }
    pfr_store *s;
    char err[256];
    int rc = pfr_store_open(argv[1], &o, &s, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "store_writer_proc: %s\n", err);
        return 1;
    }
    pfr_testgen *g = writer_proc_gen(seed);
    pfr_kv labels[1] = {{"host.name", "crash-host"}};
    const char *pins_env = getenv("PFR_WRITER_PINS");
    bool pins = pins_env && strcmp(pins_env, "1") == 0;
    pfr_store *pinner = NULL;
    int64_t pinned[64];
    size_t npinned = 0, npins = 0;
    for (long n = 0; count == 0 || n < count;) {
        int batch = n % 4 == 3 ? 3 : 1;
        if (count && n + batch > count)
            batch = 1;
        pfr_profile *ps[3];
        pfr_chunk_in in[3];
        int64_t ids[3];
        for (int j = 0; j < batch; j++) {
            int64_t start = WRITER_PROC_T0 + (n + j) * WRITER_PROC_INTERVAL;
            ps[j] = pfr_testgen_next(g, start, WRITER_PROC_INTERVAL);
            in[j] = (pfr_chunk_in){WRITER_PROC_SERVICE,          labels, 1, start,
                                   start + WRITER_PROC_INTERVAL, ps[j]};
        }
        rc = pfr_store_append_batch(s, in, (size_t)batch, ids);
        for (int j = 0; j < batch; j++)
            pfr_profile_free(ps[j]);
        if (rc) {
            fprintf(stderr, "store_writer_proc: append: %d\n", rc);
            return 1;
        }
        for (int j = 0; j < batch; j++) {
            char line[64];
            int len = snprintf(line, sizeof(line), "%lld %ld\n", (long long)ids[j], n + j);
            if (write(1, line, (size_t)len) != len)
                return 1;
        }
        n += batch;
        if (pins && (rc = pin_step(argv[1], &pinner, pinned, &npinned, &npins)) != 0)
            return 1;
    }
    pfr_store_close(pinner);
    pfr_testgen_free(g);
    pfr_store_close(s);
    return 0;
}
