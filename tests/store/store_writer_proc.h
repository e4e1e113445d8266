/* What store_writer_proc writes, so the tests that read its output can regenerate it. */
#ifndef STORE_WRITER_PROC_H
#define STORE_WRITER_PROC_H

#include "pfr_testgen.h"

#define WRITER_PROC_T0       1700000000000000000ll
#define WRITER_PROC_INTERVAL 10000000000ll
#define WRITER_PROC_SERVICE  "svc-0"

static inline pfr_testgen *writer_proc_gen(uint64_t seed)
{
    pfr_testgen_opts go = {.nstacks = 100, .drift_permille = 50};
    return pfr_testgen_new(seed, 0, &go);
}

#endif
