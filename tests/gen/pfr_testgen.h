/*
 * pfr_testgen: deterministic generator of realistic CPU profiles for tests and benchmarks.
 *
 * A generator stands for one stream (one service): it owns a universe of functions (Go style
 * "github.com/org/repo/pkg.(*Type).Method", C style "do_work_item", C++ style
 * "ns::Class::method", kernel frames under "[kernel.kallsyms]"), source files and call sites,
 * and a set of stacks (default 400, depth 10 to 60) built as random walks through a call graph,
 * so stacks share prefixes like real ones. Each call of pfr_testgen_next() returns the profile of
 * the next interval: every stack gets a sample count (hot stacks more), a few percent of the
 * stacks are replaced by new ones (slow drift), strings and most stacks repeat from one interval
 * to the next, as in a real recorder's output.
 *
 * Every profile has:
 *   - one sample type "ebpf:cpu:nanoseconds" (unit "nanoseconds"), value = count * period;
 *   - period type ("cpu", "nanoseconds"), period 10000000 (100 Hz);
 *   - time_nanos = interval start, duration_nanos = interval length (as passed in);
 *   - sample labels "pid" (numeric) and "comm" (string), a few processes per service;
 *   - mappings (the service's binary, libc, the kernel) and addresses, some inlined frames.
 * Typical size with the defaults: ~400 samples, ~3,000 strings, ~3,500 locations.
 *
 * Determinism: the n-th profile returned by a generator depends only on (seed, service_index,
 * opts) and n (plus the time arguments, which only set time_nanos/duration_nanos). Generators
 * with different service_index have different function names, processes and stacks.
 *
 * Ownership: the generator owns its state (free with pfr_testgen_free); each returned profile is
 * owned by the caller (pfr_profile_free). Not thread-safe: one generator per thread.
 */
#ifndef PFR_TESTGEN_H
#define PFR_TESTGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfr_testgen pfr_testgen;

/* Zero fields take the defaults shown. */
typedef struct pfr_testgen_opts {
    unsigned nstacks;        /* distinct stacks per profile (default 400) */
    unsigned min_depth;      /* default 10 */
    unsigned max_depth;      /* default 60, at most 256 */
    unsigned nfunctions;     /* function universe of the service (default 2500) */
    unsigned nprocs;         /* processes (pid/comm label pairs) (default 3) */
    unsigned drift_permille; /* stacks replaced per interval, per mille (default 30 = 3%) */
    bool no_drift;           /* keep the same stacks forever (drift_permille ignored) */
    unsigned mean_count;     /* mean samples per stack per 10 s interval (default 4) */
    const char *type;        /* the sample type's name (default "ebpf:cpu:nanoseconds"); must
                                outlive the generator */
} pfr_testgen_opts;

/* A generator for stream service_index (0, 1, ...). opts may be NULL. NULL on ENOMEM. */
pfr_testgen *pfr_testgen_new(uint64_t seed, unsigned service_index, const pfr_testgen_opts *opts);
void pfr_testgen_free(pfr_testgen *g);

/* The service name of this stream: "svc-<service_index>" (owned by g). */
const char *pfr_testgen_service(const pfr_testgen *g);

/* The profile of the next interval [interval_start_ns, interval_start_ns + interval_ns).
 * Sample counts scale with interval_ns (10 s gives mean_count per stack). NULL on ENOMEM. */
pfr_profile *pfr_testgen_next(pfr_testgen *g, int64_t interval_start_ns, int64_t interval_ns);

/* Encode p as gzip'd pprof (what Go and Coroot's agents write) into path.
 * 0 or a negative errno. */
int pfr_testgen_write_pprof(const pfr_profile *p, const char *path);

/* Sum of the values of sample type 0 of p (a convenience for checks). */
int64_t pfr_testgen_total(const pfr_profile *p);

#ifdef __cplusplus
}
#endif
#endif
