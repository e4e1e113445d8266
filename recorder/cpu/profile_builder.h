/*
 * profile_builder: turns one drain of CPU samples into one pprof profile per service (and
 * container): ebpf:cpu:nanoseconds, value = samples x sampling period, stacks leaf first with the
 * kernel frames (the leaf part when the sample hit the kernel) before the user frames, sample
 * labels pid and comm.
 */
#ifndef PFR_RECORDER_PROFILE_BUILDER_H
#define PFR_RECORDER_PROFILE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_profiler.h"
#include "fair_lock.h"
#include "frame_cache.h"
#include "pfr_profile.h"
#include "process_info.h"
#include "symbolizer.h"

#define PFR_CPU_PROFILE_TYPE "ebpf:cpu:nanoseconds"

typedef struct pfr_service_profile {
    char service[PFR_SERVICE_MAX];
    char container_id[PFR_CONTAINER_ID_MAX + 1];
    pfr_profile *profile; /* owned */
} pfr_service_profile;

/* Owned list of profiles; free with pfr_profile_set_free(). */
typedef struct pfr_profile_set {
    pfr_service_profile *v;
    size_t n;
} pfr_profile_set;

/* Returns the frames (leaf first) of a stack id, or NULL. */
typedef const uint64_t *(*pfr_stack_fn)(void *ctx, uint64_t id, size_t *n);

/* Names a Python interpreter frame v (pfr_py_frame_is(v), cpu_profile.h) recorded in process
 * tgid into out (strings valid until the next call). */
typedef void (*pfr_py_name_fn)(void *ctx, uint32_t tgid, uint64_t v, pfr_cached_frame *out);

typedef struct pfr_build_input {
    const pfr_cpu_sample *samples;
    size_t nsamples;
    pfr_stack_fn stack;
    void *stack_ctx;
    pfr_proc_table *procs;   /* read under lock */
    pfr_symbolizer *sym;     /* used under lock */
    pfr_fair_lock *lock;     /* may be NULL; the builder lets waiters in between samples */
    pfr_frame_cache *frames; /* symbolized frames across intervals, used under lock; may be NULL */
    int64_t period_ns;
    int64_t start_ns, end_ns;
    uint64_t gen;           /* drain generation, stamped on sampled processes */
    pfr_py_name_fn py_name; /* NULL: Python frames are dropped */
    void *py_ctx;
    int64_t deadline_ns; /* CLOCK_MONOTONIC; past it, user frames are no longer symbolized
                            (shown as their address) so the interval is written on time;
                            0 = none */
} pfr_build_input;

typedef struct pfr_build_stats {
    uint64_t samples; /* sample records */
    uint64_t user_frames, kernel_frames;
    uint64_t shared_frames; /* user frames another process of the same program had located in
                               this build (not named again) */
    uint64_t lost_stacks;   /* stacks the kernel could not store or read */
    uint64_t unknown_processes;
    uint64_t late_frames;       /* user frames left unsymbolized: deadline passed */
    uint64_t opted_out_samples; /* samples of processes refusing profiling, dropped */
    uint64_t py_stacks;         /* user stacks with Python frames */
    uint64_t py_unplaced;       /* ... some of which had no _PyEval_EvalFrameDefault to go to */
} pfr_build_stats;

int pfr_build_cpu_profiles(const pfr_build_input *in, pfr_profile_set *out, pfr_build_stats *st);
void pfr_profile_set_free(pfr_profile_set *set);

#endif
