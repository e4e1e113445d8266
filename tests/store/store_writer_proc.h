/* What store_writer_proc writes, so the tests that read its output can regenerate it. */
#ifndef STORE_WRITER_PROC_H
#define STORE_WRITER_PROC_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_testgen.h"

#define WRITER_PROC_T0       1700000000000000000ll
#define WRITER_PROC_INTERVAL 10000000000ll
#define WRITER_PROC_SERVICE  "svc-0"

/* WRITER_PROC_DRIFT=0 in the environment (the writer's and the reader's): the same stacks every
 * interval and for every seed (the seed still names the run), so chunk payloads rather than
 * dictionaries fill the ring and roll-ups make room. */
static inline bool writer_proc_no_drift(void)
{
    const char *d = getenv("WRITER_PROC_DRIFT");
    return d && !strcmp(d, "0");
}

/* The seed the generator of a run with this seed gets: runs without drift all make the same
 * profiles (readers that keep what they regenerated key it by this). */
static inline uint64_t writer_proc_gen_seed(uint64_t seed)
{
    return writer_proc_no_drift() ? 1 : seed;
}

static inline pfr_testgen *writer_proc_gen(uint64_t seed)
{
    pfr_testgen_opts go = {
        .nstacks = 100, .drift_permille = 50, .no_drift = writer_proc_no_drift()};
    return pfr_testgen_new(writer_proc_gen_seed(seed), 0, &go);
}

#endif
