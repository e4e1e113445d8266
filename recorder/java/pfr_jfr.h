/*
 * pfr_jfr: a JDK Flight Recorder recording (the bytes of a .jfr file: one or more chunks) turned
 * into pprof profiles with the five Java types Coroot takes (docs/java.md):
 *
 *   cpu    java:cpu:nanoseconds                                  jdk.ExecutionSample, one period
 * each alloc  java:heap_alloc_objects:count, java:heap_alloc_space:bytes jdk.ObjectAllocationSample
 * (weight), jdk.ObjectAllocationInNewTLAB (tlabSize), jdk.ObjectAllocationOutsideTLAB
 * (allocationSize) lock   java:lock_contentions:count, java:lock_delay:nanoseconds
 *                                   jdk.JavaMonitorEnter (duration)
 *
 * jdk.ThreadPark is not a lock sample: Coroot's agent maps jdk.JavaMonitorEnter alone, and with
 * the JDK's recorder a park is as often an idle pool thread waiting for work as contention.
 *
 * Frames are named as Coroot's agent names them: "<class>.<method>" with the class name as the
 * JVM stores it (java/util/HashMap), the file set to the class name, the JFR line number; leaf
 * first; generated classes merged (Foo$$Lambda$14/0x... -> Foo$$Lambda_). No sample labels.
 * The recording is outside input (the JVM's user writes it): every size, count, index and
 * depth is checked against the limits before it is used, and a recording that breaks them is
 * an error with a reason, never a crash or an unbounded allocation.
 */
#ifndef PFR_RECORDER_JAVA_JFR_H
#define PFR_RECORDER_JAVA_JFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_profile.h"

#define PFR_JAVA_TYPE_CPU              "java:cpu:nanoseconds"
#define PFR_JAVA_TYPE_ALLOC_OBJECTS    "java:heap_alloc_objects:count"
#define PFR_JAVA_TYPE_ALLOC_SPACE      "java:heap_alloc_space:bytes"
#define PFR_JAVA_TYPE_LOCK_CONTENTIONS "java:lock_contentions:count"
#define PFR_JAVA_TYPE_LOCK_DELAY       "java:lock_delay:nanoseconds"

/* The threads (JFR thread keys, sorted) that had a jdk.ObjectAllocationSample in a recording
 * already; the caller owns it and carries it from one dump of a recording to the next. A
 * thread's first allocation sample in a recording weighs what the thread allocated since its
 * last sample committed before the recording began, which may be its whole life: with
 * pfr_jfr_opts.alloc_seen set, that sample only marks the thread and is left out
 * (counts.first_alloc_samples). At PFR_JFR_MAX_THREADS keys new threads are no longer
 * marked, so their first samples count. */
typedef struct pfr_jfr_threads {
    uint64_t *keys;
    size_t n, cap;
} pfr_jfr_threads;

#define PFR_JFR_MAX_THREADS (1u << 16)

void pfr_jfr_threads_free(pfr_jfr_threads *t);

typedef struct pfr_jfr_opts {
    /* What one jdk.ExecutionSample stands for (the recording's period); 0: 10 ms. */
    int64_t cpu_period_ns;
    /* Events outside [from_ns, to_ns) (unix ns, by their end time: start plus duration, when
     * they have one) are left out, and the profiles' time is [from_ns, to_ns); 0,0 = all, the
     * profiles spanning the chunks. The JVM writes an event when it ends, so a dump from
     * from_ns on holds every event that ended in the window, a wait that began before it too. */
    int64_t from_ns, to_ns;
    /* Bounds; 0 takes the default of each. Breaking one is -E2BIG. */
    size_t max_bytes;        /* of the recording (64 MiB) */
    size_t max_events;       /* records of all kinds, per recording (4 Mi) */
    size_t max_pool_entries; /* per constant pool type, per chunk (1 Mi) */
    size_t max_depth;        /* frames kept per stack, deeper ones cut at the root side (1024) */
    /* An event whose stack key its chunk's pools lack is looked up in the earlier chunks'
     * (the JVM takes a monitor enter's stack when the wait begins and writes the event when it
     * ends, in a later chunk when a rotation came between): the last JFR_CARRY_CHUNKS chunks'
     * parsed pools are kept while the next are read, as many as hold at most this many bytes
     * together (16 MiB; a chunk larger alone is counted in counts.uncarried_chunks).
     * chunks_alone: no lookup in earlier chunks, each chunk read alone as the JDK's reader
     * reads it (the oracle's comparison). */
    size_t max_carry_bytes;
    bool chunks_alone;
    /* NULL: every allocation sample counts (a whole recording, as `jfr print` reads it). */
    pfr_jfr_threads *alloc_seen;
} pfr_jfr_opts;

/* What a conversion counted (cumulative across calls when the caller adds them up). */
typedef struct pfr_jfr_counts {
    uint64_t chunks;     /* whole chunks converted */
    uint64_t cut_chunks; /* a last chunk cut short (or still being written), left out */
    uint64_t events;     /* event records read, of every type (not metadata, checkpoints) */
    uint64_t cpu_samples, alloc_samples, lock_samples; /* events turned into samples */
    uint64_t skipped_events;   /* of a kind above but unusable (no stack, out of range, bad ref) */
    uint64_t truncated_stacks; /* samples whose stack was cut, by the JVM or by max_depth */
    uint64_t first_alloc_samples; /* a thread's first allocation sample, left out (alloc_seen) */
    /* samples whose stack only an earlier chunk held (max_carry_bytes) */
    uint64_t carried_stacks;
    /* chunks not kept for later lookups: alone past max_carry_bytes */
    uint64_t uncarried_chunks;
} pfr_jfr_counts;

typedef struct pfr_jfr_profiles {
    pfr_profile *cpu; /* NULL when the recording had no such event, or none usable */
    pfr_profile *alloc;
    pfr_profile *lock;
    pfr_jfr_counts counts;
} pfr_jfr_profiles;

/* Converts buf[0..len) into out (zeroed by the caller). Returns 0, or a negative errno with a
 * reason in err: -EINVAL (not JFR or malformed), -E2BIG (a limit), -ENOMEM. On error out holds
 * nothing the caller must free. A recording whose last chunk is cut short (a JVM that exited
 * mid-dump) converts the whole chunks before it and reports -EINVAL only when none was whole. */
int pfr_jfr_to_profiles(const uint8_t *buf, size_t len, const pfr_jfr_opts *opts,
                        pfr_jfr_profiles *out, char *err, size_t errlen);

void pfr_jfr_profiles_free(pfr_jfr_profiles *p);

#endif
