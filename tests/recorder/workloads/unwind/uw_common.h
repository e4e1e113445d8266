/* Shared by the unwinding ground-truth programs of tests/recorder/unwind_itest.py. Each program
 * includes it once (it defines the hot leaf).
 *
 * Every program spends nearly all of its time in hot_leaf(), called from a few known callers. The
 * leaf does a fixed amount of work per iteration and the programs count the iterations each caller
 * asks for, so a caller's share of the leaf's CPU time is its share of the iterations, whatever
 * the scheduler does. Each program prints that count at exit, as
 *     truth CALLER=ITERATIONS CALLER=ITERATIONS ...
 * which the test compares with the profilers' shares.
 *
 * Built twice by tests/recorder/CMakeLists.txt: -O2 -fomit-frame-pointer (no frame pointers
 * at all) and -O2 -fno-omit-frame-pointer -momit-leaf-frame-pointer (frame pointers but a
 * frameless leaf: a frame-pointer walk from the leaf skips its caller). */
#ifndef UW_COMMON_H
#define UW_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* noinline keeps each named function a frame of its own; noclone (GCC) keeps it under its own
 * name (no .constprop/.isra copies). */
#if defined(__clang__)
#define UW_NOINLINE __attribute__((noinline))
#else
#define UW_NOINLINE __attribute__((noinline, noclone))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Results are added here after each call: no call is dead code, and none is a tail call (a tail
 * call would legitimately drop its caller from the stack). */
volatile unsigned long uw_sink;

/* The hot leaf: n dependent multiply-adds, in registers. No call and no stack use, so -O2 gives
 * it no frame in either flavour. The empty asm keeps the loop from being folded. */
UW_NOINLINE unsigned long hot_leaf(unsigned long n)
{
    unsigned long x = n;
    for (unsigned long i = 0; i < n; i++) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static inline double uw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A run's end: seconds of this process's CPU time, so that a loaded machine (where the workload
 * gets a part of a core) still gives the profilers as many samples; and, whatever the load, at
 * most four times that in wall time. */
typedef struct uw_deadline {
    double cpu_end, wall_end;
} uw_deadline;

static inline double uw_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline uw_deadline uw_deadline_in(double seconds)
{
    return (uw_deadline){uw_cpu_now() + seconds, uw_now() + 4 * seconds};
}

static inline int uw_before(const uw_deadline *d)
{
    return uw_cpu_now() < d->cpu_end && uw_now() < d->wall_end;
}

/* The run time from argv[1] in seconds (default 5). */
static inline double uw_seconds(int argc, char **argv)
{
    return argc > 1 ? atof(argv[1]) : 5.0;
}

/* A work unit drawn in [base/2, 3*base/2): rounds of varying length cannot beat against the
 * profilers' fixed sampling period and bias a split (each round still keeps its exact ratio). */
static inline unsigned long uw_unit(unsigned long long *seed, unsigned long base)
{
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    return base / 2 + (unsigned long)(*seed >> 33) % base;
}

static inline unsigned long long uw_seed(void)
{
    return (unsigned long long)(uw_now() * 1e9);
}

#ifdef __cplusplus
}
#endif

#endif
