/*
 * Units of the JFR conversion (recorder/java) over chunks written by jfrgen: what a valid
 * recording becomes, and hostile ones: cut short, bad offsets, keys missing from the pools,
 * metadata nested too deep, counts the data cannot hold, values that contain themselves.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "jfr_parse.h"
#include "jfrgen.h"
#include "pfr_jfr.h"

static char err[256];

static int convert(const jg *g, const pfr_jfr_opts *o, pfr_jfr_profiles *out)
{
    return pfr_jfr_to_profiles(g->b, g->n, o, out, err, sizeof(err));
}

/* The function names of sample i, leaf first, joined by ';' with their lines. */
static const char *stack_of(const pfr_profile *p, size_t i)
{
    static char buf[1024];
    pfr_frame fr[16];
    size_t n = pfr_profile_sample_frames(p, i, fr, 16), o = 0;
    buf[0] = '\0';
    for (size_t f = 0; f < n && f < 16; f++)
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s@%s:%lld", f ? ";" : "",
                              fr[f].function, fr[f].file, (long long)fr[f].line);
    return buf;
}

static int64_t value_of(const pfr_profile *p, const char *stack, size_t type)
{
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++)
        if (strcmp(stack_of(p, i), stack) == 0)
            return pfr_profile_sample_values(p, i)[type];
    return -1;
}

#define STACK1 "Main.work@Main:10;java/lang/Thread.run@java/lang/Thread:20"
#define STACK2                                                                                     \
    "Foo$$Lambda_.run@Foo$$Lambda_:0;Main.work@Main:11;"                                           \
    "java/lang/Thread.run@java/lang/Thread:20"

static void std_recording(void **state)
{
    (void)state;
    jg g = {0};
    pfr_jg_std_chunk(&g);
    pfr_jfr_profiles out;
    assert_int_equal(convert(&g, NULL, &out), 0);
    assert_non_null(out.cpu);
    assert_non_null(out.alloc);
    assert_non_null(out.lock);
    assert_int_equal(out.counts.chunks, 1);
    assert_int_equal(out.counts.events, 8);
    assert_int_equal(out.counts.cpu_samples, 4);
    assert_int_equal(out.counts.alloc_samples, 1);
    assert_int_equal(out.counts.lock_samples, 1);     /* the park is not one */
    assert_int_equal(out.counts.truncated_stacks, 2); /* stack 2 says it was cut */
    assert_int_equal(pfr_profile_num_samples(out.cpu), 2);
    assert_int_equal(value_of(out.cpu, STACK1, 0), 30000000);
    assert_int_equal(value_of(out.cpu, STACK2, 0), 10000000);
    const char *unit;
    assert_string_equal(pfr_profile_sample_type(out.cpu, 0, &unit), PFR_JAVA_TYPE_CPU);
    assert_string_equal(unit, "nanoseconds");
    assert_string_equal(pfr_profile_sample_type(out.alloc, 1, &unit), PFR_JAVA_TYPE_ALLOC_SPACE);
    assert_int_equal(value_of(out.alloc, STACK1, 0), 1);
    assert_int_equal(value_of(out.alloc, STACK1, 1), 4096);
    assert_string_equal(pfr_profile_sample_type(out.lock, 1, &unit), PFR_JAVA_TYPE_LOCK_DELAY);
    assert_int_equal(value_of(out.lock, STACK2, 0), 1);
    assert_int_equal(value_of(out.lock, STACK2, 1), 5000000);
    assert_int_equal(pfr_profile_time_nanos(out.cpu), 1000000000000000000);
    assert_int_equal(pfr_profile_duration_nanos(out.cpu), 1000000000);
    pfr_jfr_profiles_free(&out);
    pfr_jg_free(&g);
}

static void limits_and_window(void **state)
{
    (void)state;
    jg g = {0};
    pfr_jg_std_chunk(&g);
    pfr_jfr_profiles out;
    /* leaf side kept */
    pfr_jfr_opts o = {.max_depth = 1, .cpu_period_ns = 7};
    assert_int_equal(convert(&g, &o, &out), 0);
    assert_int_equal(value_of(out.cpu, "Main.work@Main:10", 0), 21);
    assert_int_equal(out.counts.truncated_stacks, 6);
    pfr_jfr_profiles_free(&out);
    /* events 1000..1007 ns after the start: [start+1001, start+1003) holds two samples */
    o = (pfr_jfr_opts){.from_ns = 1000000000000001001, .to_ns = 1000000000000001003};
    assert_int_equal(convert(&g, &o, &out), 0);
    assert_int_equal(out.counts.cpu_samples, 2);
    assert_null(out.lock);
    assert_int_equal(pfr_profile_time_nanos(out.cpu), o.from_ns);
    assert_int_equal(pfr_profile_duration_nanos(out.cpu), 2);
    pfr_jfr_profiles_free(&out);
    /* an event is in the window of its end: the monitor enter (from 1005, 5 ms) ends at
     * 5,001,005 */
    o = (pfr_jfr_opts){.from_ns = 1000000000000001000, .to_ns = 1000000000000001006};
    assert_int_equal(convert(&g, &o, &out), 0);
    assert_int_equal(out.counts.cpu_samples, 4);
    assert_int_equal(out.counts.alloc_samples, 1);
    assert_null(out.lock);
    pfr_jfr_profiles_free(&out);
    o = (pfr_jfr_opts){.from_ns = 1000000000000001006, .to_ns = 1000000000005001006};
    assert_int_equal(convert(&g, &o, &out), 0);
    assert_null(out.cpu);
    assert_int_equal(out.counts.lock_samples, 1);
    pfr_jfr_profiles_free(&out);
    /* the limits: bytes, records, pool entries */
    o = (pfr_jfr_opts){.max_bytes = g.n - 1};
    assert_int_equal(convert(&g, &o, &out), -E2BIG);
    assert_null(out.cpu);
    o = (pfr_jfr_opts){.max_events = 5};
    assert_int_equal(convert(&g, &o, &out), -E2BIG);
    assert_non_null(strstr(err, "records"));
    o = (pfr_jfr_opts){.max_pool_entries = 5};
    assert_int_equal(convert(&g, &o, &out), -E2BIG);
    assert_non_null(strstr(err, "jdk.types.Symbol"));
    pfr_jg_free(&g);
}

/* A thread's first allocation sample of a recording weighs what it allocated before: with
 * alloc_seen it marks the thread and is left out; the thread's later samples count. */
static void first_alloc_sample(void **state)
{
    (void)state;
    jg g = {0};
    pfr_jg_std_chunk(&g);
    pfr_jfr_threads seen = {0};
    pfr_jfr_profiles out;
    /* outside the window (the allocation is the 5th event, at start + 1004 ns): not marked */
    pfr_jfr_opts o = {
        .from_ns = 1000000000000001001, .to_ns = 1000000000000001003, .alloc_seen = &seen};
    assert_int_equal(convert(&g, &o, &out), 0);
    assert_int_equal(seen.n, 0);
    pfr_jfr_profiles_free(&out);
    o = (pfr_jfr_opts){.alloc_seen = &seen};
    assert_int_equal(convert(&g, &o, &out), 0);
    assert_int_equal(out.counts.first_alloc_samples, 1);
    assert_int_equal(out.counts.alloc_samples, 0);
    assert_null(out.alloc);
    assert_non_null(out.cpu);
    assert_int_equal(seen.n, 1);
    pfr_jfr_profiles_free(&out);
    /* the next dump of the same recording: the thread is known, its sample counts */
    assert_int_equal(convert(&g, &o, &out), 0);
    assert_int_equal(out.counts.first_alloc_samples, 0);
    assert_int_equal(value_of(out.alloc, STACK1, 1), 4096);
    pfr_jfr_profiles_free(&out);
    /* a full set marks no more: new threads' first samples count */
    pfr_jfr_threads_free(&seen);
    seen.keys = calloc(PFR_JFR_MAX_THREADS, sizeof(*seen.keys));
    assert_non_null(seen.keys);
    seen.n = seen.cap = PFR_JFR_MAX_THREADS;
    for (size_t i = 0; i < seen.n; i++)
        seen.keys[i] = 1000 + i;
    assert_int_equal(convert(&g, &o, &out), 0);
    assert_int_equal(out.counts.first_alloc_samples, 0);
    assert_int_equal(out.counts.alloc_samples, 1);
    pfr_jfr_profiles_free(&out);
    pfr_jfr_threads_free(&seen);
    pfr_jg_free(&g);
}

static void truncated(void **state)
{
    (void)state;
    jg one = {0}, two = {0};
    pfr_jg_std_chunk(&one);
    pfr_jg_bytes(&two, one.b, one.n);
    pfr_jg_bytes(&two, one.b, one.n);
    pfr_jfr_profiles out;
    /* every cut of the second chunk: the first converts */
    for (size_t cut = one.n; cut < two.n; cut += 7) {
        jg g = {two.b, cut, cut};
        assert_int_equal(convert(&g, NULL, &out), 0);
        assert_int_equal(out.counts.chunks, 1);
        assert_int_equal(out.counts.cut_chunks, cut > one.n);
        assert_int_equal(out.counts.cpu_samples, 4);
        pfr_jfr_profiles_free(&out);
    }
    jg g = {two.b, two.n, two.n};
    assert_int_equal(convert(&g, NULL, &out), 0);
    assert_int_equal(out.counts.chunks, 2);
    assert_int_equal(out.counts.cut_chunks, 0);
    assert_int_equal(value_of(out.cpu, STACK1, 0), 60000000);
    pfr_jfr_profiles_free(&out);
    /* a single chunk cut anywhere: none was whole */
    for (size_t cut = 1; cut < one.n; cut += 5) {
        jg c = {one.b, cut, cut};
        assert_int_equal(convert(&c, NULL, &out), -EINVAL);
        assert_null(out.cpu);
    }
    /* a chunk still being written counts as cut short */
    one.b[64] = 1;
    assert_int_equal(convert(&one, NULL, &out), -EINVAL);
    pfr_jg_free(&one);
    pfr_jg_free(&two);
}

static void patch_be64(jg *g, size_t at, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        g->b[at + (size_t)i] = (uint8_t)(v >> (56 - 8 * i));
}

static void bad_offsets(void **state)
{
    (void)state;
    jg g = {0};
    pfr_jg_std_chunk(&g);
    pfr_jfr_profiles out;
    uint64_t size = g.n;
    const struct {
        size_t at;
        uint64_t v;
        const char *why;
    } cases[] = {
        {16, 0, "checkpoint offset"},
        {16, size, "checkpoint offset"},
        {16, 68, "type"},
        {16, UINT64_MAX, "checkpoint offset"},
        {24, 0, "metadata offset"},
        {24, size + 100, "metadata offset"},
        {24, 68, "type"},
        {8, 12, "size"},
        {56, 0, "ticks per second"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        jg c = {0};
        pfr_jg_bytes(&c, g.b, g.n);
        patch_be64(&c, cases[i].at, cases[i].v);
        assert_int_equal(convert(&c, NULL, &out), -EINVAL);
        assert_non_null(strstr(err, cases[i].why));
        pfr_jg_free(&c);
    }
    /* not JFR, another version */
    jg c = {0};
    pfr_jg_bytes(&c, g.b, g.n);
    c.b[0] = 'X';
    assert_int_equal(convert(&c, NULL, &out), -EINVAL);
    c.b[0] = 'F';
    c.b[5] = 1;
    assert_int_equal(convert(&c, NULL, &out), -EINVAL);
    assert_non_null(strstr(err, "version"));
    pfr_jg_free(&c);
    pfr_jg_free(&g);
}

/* A chunk of the standard events and metadata, with pools and checkpoints of the caller's. */
static void chunk_with(jg *g, const jg *ev, const jg *md, const jg *cps, size_t last_cp_off)
{
    jg_header h = {
        .size = 68 + ev->n + md->n + cps->n,
        .md_off = 68 + ev->n,
        .cp_off = 68 + ev->n + md->n + last_cp_off,
        .start_ns = 1,
        .tps = 1000000000,
    };
    pfr_jg_chunk_header(g, &h);
    pfr_jg_bytes(g, ev->b, ev->n);
    pfr_jg_bytes(g, md->b, md->n);
    pfr_jg_bytes(g, cps->b, cps->n);
}

static void checkpoint_chain(void **state)
{
    (void)state;
    jg ev = {0}, md = {0}, pools = {0}, cps = {0}, g = {0};
    uint64_t npools;
    pfr_jfr_profiles out;
    pfr_jg_std_events(&ev);
    pfr_jg_metadata(&md, pfr_jg_std_classes, pfr_jg_std_nclasses, 0);
    pfr_jg_std_pools(&pools, &npools);
    /* two checkpoints, the second pointing back at the first */
    pfr_jg_checkpoint(&cps, 0, npools, &pools);
    size_t second = cps.n;
    pfr_jg_checkpoint(&cps, -(int64_t)second, 0, &(jg){0});
    chunk_with(&g, &ev, &md, &cps, second);
    assert_int_equal(convert(&g, NULL, &out), 0);
    assert_int_equal(out.counts.cpu_samples, 4);
    pfr_jfr_profiles_free(&out);
    /* deltas that point forward, at themselves, or before the chunk */
    int64_t deltas[] = {5, -(int64_t)second - 68 - (int64_t)(ev.n + md.n), 1, -1};
    for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
        jg c = {0}, ch = {0};
        pfr_jg_checkpoint(&c, 0, npools, &pools);
        pfr_jg_checkpoint(&c, deltas[i], 0, &(jg){0});
        chunk_with(&ch, &ev, &md, &c, second);
        assert_int_equal(convert(&ch, NULL, &out), -EINVAL);
        pfr_jg_free(&c);
        pfr_jg_free(&ch);
    }
    pfr_jg_free(&ev);
    pfr_jg_free(&md);
    pfr_jg_free(&pools);
    pfr_jg_free(&cps);
    pfr_jg_free(&g);
}

static void pool_keys_missing(void **state)
{
    (void)state;
    jg ev = {0}, md = {0}, cps = {0}, g = {0}, pools = {0};
    pfr_jfr_profiles out;
    pfr_jg_std_events(&ev);
    pfr_jg_metadata(&md, pfr_jg_std_classes, pfr_jg_std_nclasses, 0);
    /* only a stack whose method is missing, and one whose key no event uses */
    pfr_jg_var(&pools, JG_STACK);
    pfr_jg_var(&pools, 1);
    pfr_jg_var(&pools, 1);
    pfr_jg_u8(&pools, 0);
    pfr_jg_var(&pools, 1);
    pfr_jg_var(&pools, 99), pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 0);
    pfr_jg_checkpoint(&cps, 0, 1, &pools);
    chunk_with(&g, &ev, &md, &cps, 0);
    assert_int_equal(convert(&g, NULL, &out), 0);
    /* stack 1 has no method left, stack 2 is not in the pool: every event skipped */
    assert_int_equal(out.counts.skipped_events, 6);
    assert_null(out.cpu);
    assert_null(out.alloc);
    pfr_jfr_profiles_free(&out);
    /* a pool of a type the metadata does not declare */
    pfr_jg_free(&cps);
    pfr_jg_free(&g);
    jg bad = {0};
    pfr_jg_var(&bad, 4242);
    pfr_jg_var(&bad, 1);
    pfr_jg_var(&bad, 1);
    pfr_jg_checkpoint(&cps, 0, 1, &bad);
    chunk_with(&g, &ev, &md, &cps, 0);
    assert_int_equal(convert(&g, NULL, &out), -EINVAL);
    assert_non_null(strstr(err, "undeclared"));
    pfr_jg_free(&bad);
    pfr_jg_free(&ev);
    pfr_jg_free(&md);
    pfr_jg_free(&cps);
    pfr_jg_free(&g);
    pfr_jg_free(&pools);
}

/* The JVM captures a monitor enter's stack when the wait begins and writes the event when it
 * ends: a wait across a chunk rotation leaves an event whose stack key only the previous chunk's
 * pools hold (the oracle's recordings have such events; docs/java.md). Its stack is looked up
 * in the earlier chunks, whose pools are kept while the next chunks are read (bounded: up to
 * JFR_CARRY_CHUNKS, max_carry_bytes together; a chunk larger alone is not kept, and counted).
 * With chunks_alone the event is skipped, as the JDK's reader leaves it without a stack (and
 * not given that chunk's last stack, which is what the JDK's reader prints when the previous
 * chunk's last event of the type had the same key: its per-field cache outlives the chunk). */
static void stack_of_an_earlier_chunk(void **state)
{
    (void)state;
    jg first = {0}, ev = {0}, md = {0}, pools = {0}, cps = {0}, second = {0}, g = {0};
    uint64_t npools;
    pfr_jfr_profiles out;
    pfr_jg_std_chunk(&first); /* its last monitor enter is on stack 2 */
    pfr_jg_std_events(&ev);   /* and so is the second chunk's first one */
    pfr_jg_metadata(&md, pfr_jg_std_classes, pfr_jg_std_nclasses, 0);
    pfr_jg_std_pools_with(&pools, &npools, false);
    pfr_jg_checkpoint(&cps, 0, npools, &pools);
    chunk_with(&second, &ev, &md, &cps, 0);
    pfr_jg_bytes(&g, first.b, first.n);
    pfr_jg_bytes(&g, second.b, second.n);
    /* the monitor enter and the lambda's sample of the second chunk take the first's stack 2 */
    assert_int_equal(convert(&g, NULL, &out), 0);
    assert_int_equal(out.counts.chunks, 2);
    assert_int_equal(out.counts.events, 16);
    assert_int_equal(out.counts.lock_samples, 2);
    assert_int_equal(out.counts.cpu_samples, 8);
    assert_int_equal(out.counts.skipped_events, 0);
    assert_int_equal(out.counts.carried_stacks, 2);
    assert_int_equal(out.counts.uncarried_chunks, 0);
    assert_int_equal(pfr_profile_num_samples(out.lock), 1);
    assert_int_equal(value_of(out.lock, STACK2, 0), 2);
    assert_int_equal(value_of(out.lock, STACK2, 1), 10000000);
    assert_int_equal(value_of(out.cpu, STACK2, 0), 20000000);
    assert_int_equal(value_of(out.cpu, STACK1, 0), 60000000);
    pfr_jfr_profiles_free(&out);
    /* chunks read alone, or a first chunk too large to keep: skipped */
    pfr_jfr_opts alone = {.chunks_alone = true}, small = {.max_carry_bytes = 1024};
    const pfr_jfr_opts *opts[] = {&alone, &small};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(convert(&g, opts[i], &out), 0);
        assert_int_equal(out.counts.lock_samples, 1);
        assert_int_equal(out.counts.cpu_samples, 7);
        assert_int_equal(out.counts.skipped_events, 2); /* the monitor enter, the lambda's sample */
        assert_int_equal(out.counts.carried_stacks, 0);
        assert_int_equal(out.counts.uncarried_chunks, opts[i] == &small ? 2 : 0);
        assert_int_equal(value_of(out.lock, STACK2, 0), 1);
        assert_int_equal(value_of(out.lock, STACK2, 1), 5000000);
        assert_int_equal(value_of(out.cpu, STACK2, 0), 10000000);
        assert_int_equal(value_of(out.cpu, STACK1, 0), 60000000);
        pfr_jfr_profiles_free(&out);
    }
    /* chunks 3 to 6 name stack 2 too: JFR_CARRY_CHUNKS back, the first chunk's is found */
    for (int i = 3; i <= 6; i++)
        pfr_jg_bytes(&g, second.b, second.n);
    assert_int_equal(convert(&g, NULL, &out), 0);
    assert_int_equal(out.counts.chunks, 6);
    assert_int_equal(out.counts.carried_stacks, 2 * JFR_CARRY_CHUNKS);
    assert_int_equal(out.counts.skipped_events, 2); /* the sixth chunk's */
    assert_int_equal(value_of(out.lock, STACK2, 0), 1 + JFR_CARRY_CHUNKS);
    pfr_jfr_profiles_free(&out);
    pfr_jg_free(&first);
    pfr_jg_free(&second);
    pfr_jg_free(&ev);
    pfr_jg_free(&md);
    pfr_jg_free(&pools);
    pfr_jg_free(&cps);
    pfr_jg_free(&g);
}

/* A monitor enter (stack 2) as the JVM writes it: startTime and duration in ticks. */
static void monitor_enter(jg *g, uint64_t start, uint64_t duration)
{
    jg body = {0};
    pfr_jg_var(&body, start);
    pfr_jg_var(&body, duration);
    pfr_jg_var(&body, 1); /* thread */
    pfr_jg_var(&body, 2); /* stack */
    pfr_jg_var(&body, 1); /* class */
    pfr_jg_var(&body, 0x1234);
    pfr_jg_record(g, JG_MONITOR, &body);
    pfr_jg_free(&body);
}

/* A wait across a dump, as the source sees it (docs/java.md, "Recording"): dump 1 at T takes
 * [T0, T), chunk A; the JFR.dump rotates the chunk, and a thread that waited since before T
 * gets the monitor in chunk B, which writes the event then, with its start in A's time and its
 * stack key in A's pools. Dump 2 (from T on) holds A again (it ends after T) and B; its window
 * [T, T2) keeps the event by its end, with A's stack: each wait is in one dump's profile. */
static void wait_across_a_dump(void **state)
{
    (void)state;
    const int64_t T0 = 1000000000000000000, S = 1000000000;
    jg a = {0}, ev = {0}, md = {0}, pools = {0}, cps = {0}, g = {0};
    uint64_t npools;
    pfr_jfr_profiles out;
    pfr_jg_std_chunk(&a); /* [T0, T0 + 1 s), ticks = ns from 0; a monitor enter of 5 ms */
    monitor_enter(&ev, (uint64_t)S / 2, 7 * (uint64_t)S / 10); /* 0.5 s to 1.2 s */
    pfr_jg_metadata(&md, pfr_jg_std_classes, pfr_jg_std_nclasses, 0);
    pfr_jg_std_pools_with(&pools, &npools, false); /* B's pools: stack 1 only */
    pfr_jg_checkpoint(&cps, 0, npools, &pools);
    jg_header h = {
        .size = 68 + ev.n + md.n + cps.n,
        .md_off = 68 + ev.n,
        .cp_off = 68 + ev.n + md.n,
        .start_ns = T0 + S,
        .duration_ns = S,
        .start_ticks = S,
        .tps = 1000000000,
    };
    /* dump 1: chunk A, window [T0, T0 + 1 s): A's own monitor enter */
    pfr_jfr_opts w1 = {.from_ns = T0, .to_ns = T0 + S};
    assert_int_equal(convert(&a, &w1, &out), 0);
    assert_int_equal(out.counts.lock_samples, 1);
    assert_int_equal(value_of(out.lock, STACK2, 1), 5000000);
    pfr_jfr_profiles_free(&out);
    /* dump 2: chunks A and B, window [T0 + 1 s, T0 + 2 s): B's, 0.7 s on A's stack 2 */
    pfr_jg_bytes(&g, a.b, a.n);
    pfr_jg_chunk_header(&g, &h);
    pfr_jg_bytes(&g, ev.b, ev.n);
    pfr_jg_bytes(&g, md.b, md.n);
    pfr_jg_bytes(&g, cps.b, cps.n);
    pfr_jfr_opts w2 = {.from_ns = T0 + S, .to_ns = T0 + 2 * S};
    assert_int_equal(convert(&g, &w2, &out), 0);
    assert_int_equal(out.counts.chunks, 2);
    assert_null(out.cpu);
    assert_int_equal(out.counts.lock_samples, 1);
    assert_int_equal(out.counts.carried_stacks, 1);
    assert_int_equal(value_of(out.lock, STACK2, 0), 1);
    assert_int_equal(value_of(out.lock, STACK2, 1), 7 * S / 10);
    assert_int_equal(pfr_profile_time_nanos(out.lock), T0 + S);
    pfr_jfr_profiles_free(&out);
    pfr_jg_free(&a);
    pfr_jg_free(&ev);
    pfr_jg_free(&md);
    pfr_jg_free(&pools);
    pfr_jg_free(&cps);
    pfr_jg_free(&g);
}

static void std_chunk_md(jg *g, const jg_class *classes, size_t n, int depth)
{
    jg ev = {0}, md = {0}, pools = {0}, cps = {0};
    uint64_t npools;
    pfr_jg_std_events(&ev);
    pfr_jg_metadata(&md, classes, n, depth);
    pfr_jg_std_pools(&pools, &npools);
    pfr_jg_checkpoint(&cps, 0, npools, &pools);
    chunk_with(g, &ev, &md, &cps, 0);
    pfr_jg_free(&ev);
    pfr_jg_free(&md);
    pfr_jg_free(&pools);
    pfr_jg_free(&cps);
}

static void metadata_depth(void **state)
{
    (void)state;
    pfr_jfr_profiles out;
    jg g = {0};
    std_chunk_md(&g, pfr_jg_std_classes, pfr_jg_std_nclasses, 20); /* nested, still in bounds */
    assert_int_equal(convert(&g, NULL, &out), -EINVAL);            /* classes outside "metadata" */
    assert_non_null(strstr(err, "undeclared"));
    pfr_jg_free(&g);
    std_chunk_md(&g, pfr_jg_std_classes, pfr_jg_std_nclasses, 10000);
    clock_t t0 = clock();
    assert_int_equal(convert(&g, NULL, &out), -EINVAL);
    assert_true(clock() - t0 < CLOCKS_PER_SEC);
    assert_non_null(strstr(err, "nested deeper"));
    pfr_jg_free(&g);
}

/* Overwrites the varint at g->b[at] (one byte in g) with a huge 9-byte one: the chunk grows,
 * and its header follows. */
static void huge_count_at(jg *out, const jg *g, size_t at)
{
    pfr_jg_bytes(out, g->b, at);
    pfr_jg_var(out, UINT64_MAX >> 2);
    pfr_jg_bytes(out, g->b + at + 1, g->n - at - 1);
}

static void huge_counts(void **state)
{
    (void)state;
    pfr_jfr_profiles out;
    jg g = {0};
    pfr_jg_std_chunk(&g);
    /* the metadata's string count: after size (4 bytes), type 0, three zero varints */
    uint64_t md_off = 0, cp_off = 0;
    for (int i = 0; i < 8; i++) {
        md_off = md_off << 8 | g.b[24 + i];
        cp_off = cp_off << 8 | g.b[16 + i];
    }
    size_t at = (size_t)md_off + 4 + 1 + 3;
    jg h = {0};
    huge_count_at(&h, &g, at);
    clock_t t0 = clock();
    assert_int_equal(convert(&h, NULL, &out), -EINVAL);
    assert_true(clock() - t0 < CLOCKS_PER_SEC);
    assert_non_null(strstr(err, "count"));
    pfr_jg_free(&h);
    /* the checkpoint's pool count: size, type 1, start, duration, delta, flags */
    at = (size_t)cp_off + 4 + 1 + 3 + 1;
    huge_count_at(&h, &g, at);
    assert_int_equal(convert(&h, NULL, &out), -EINVAL);
    assert_non_null(strstr(err, "count"));
    pfr_jg_free(&h);
    /* the symbol pool's entry count: its type id (one byte) follows the pool count */
    at = (size_t)cp_off + 4 + 1 + 3 + 1 + 1 + 1;
    huge_count_at(&h, &g, at);
    assert_int_equal(convert(&h, NULL, &out), -EINVAL);
    assert_non_null(strstr(err, "count"));
    pfr_jg_free(&h);
    pfr_jg_free(&g);
}

static void values_containing_themselves(void **state)
{
    (void)state;
    pfr_jfr_profiles out;
    jg g = {0};
    jg_class cls[32];
    memcpy(cls, pfr_jg_std_classes, pfr_jg_std_nclasses * sizeof(cls[0]));
    size_t n = pfr_jg_std_nclasses;
    /* a struct that holds a value of itself and an int: every value has another inside */
    cls[n++] = (jg_class){900, "Loop", {{"x", JG_INT, false, false}, {"self", 900, false, false}}};
    /* two structs that hold each other and nothing else: no bytes, nothing to walk */
    cls[n++] = (jg_class){901, "A", {{"b", 902, false, false}}};
    cls[n++] = (jg_class){902, "B", {{"a", 901, false, false}}};
    /* the CPU load event carries them, so that its pool-free records stay readable */
    jg ev = {0}, md = {0}, cps = {0}, pools = {0};
    uint64_t npools;
    pfr_jg_std_events(&ev);
    pfr_jg_metadata(&md, cls, n, 0);
    pfr_jg_std_pools(&pools, &npools);
    pfr_jg_var(&pools, 900); /* a pool of Loop: one entry, values 1, 2, 3, ... */
    pfr_jg_var(&pools, 1);
    pfr_jg_var(&pools, 1);
    for (int i = 0; i < 100; i++)
        pfr_jg_var(&pools, 1);
    pfr_jg_var(&pools, 901); /* a pool of A: entries with no bytes but their keys */
    pfr_jg_var(&pools, 3);
    pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 2), pfr_jg_var(&pools, 3);
    pfr_jg_checkpoint(&cps, 0, npools + 2, &pools);
    chunk_with(&g, &ev, &md, &cps, 0);
    assert_int_equal(convert(&g, NULL, &out), -EINVAL);
    assert_non_null(strstr(err, "nested deeper"));
    pfr_jg_free(&g);
    pfr_jg_free(&ev);
    pfr_jg_free(&md);
    pfr_jg_free(&cps);
    pfr_jg_free(&pools);
}

static void strings(void **state)
{
    (void)state;
    /* UTF-16 with a surrogate pair, a lone surrogate and a NUL; Latin-1; invalid UTF-8 */
    jg ev = {0}, md = {0}, cps = {0}, pools = {0}, g = {0};
    pfr_jfr_profiles out;
    pfr_jg_std_events(&ev);
    pfr_jg_metadata(&md, pfr_jg_std_classes, pfr_jg_std_nclasses, 0);
    pfr_jg_var(&pools, JG_SYMBOL);
    pfr_jg_var(&pools, 3);
    pfr_jg_var(&pools, 1); /* class name: "a😀b?\0" as UTF-16 */
    pfr_jg_u8(&pools, 4);
    pfr_jg_var(&pools, 6);
    const uint16_t u[] = {'a', 0xd83d, 0xde00, 'b', 0xd800, 0};
    for (int i = 0; i < 6; i++)
        pfr_jg_var(&pools, u[i]);
    pfr_jg_var(&pools, 2); /* method name: Latin-1 "caf\xe9" */
    pfr_jg_u8(&pools, 5);
    pfr_jg_var(&pools, 4);
    pfr_jg_bytes(&pools, "caf\xe9", 4);
    pfr_jg_var(&pools, 3); /* unused: bad UTF-8 */
    pfr_jg_u8(&pools, 3);
    pfr_jg_var(&pools, 2);
    pfr_jg_bytes(&pools, "\xff\xfe", 2);
    pfr_jg_var(&pools, JG_CLASS);
    pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 0);
    pfr_jg_var(&pools, JG_METHOD);
    pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 2),
        pfr_jg_var(&pools, 0);
    pfr_jg_var(&pools, JG_STACK);
    pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 1), pfr_jg_u8(&pools, 0), pfr_jg_var(&pools, 1);
    pfr_jg_var(&pools, 1), pfr_jg_var(&pools, 5), pfr_jg_var(&pools, 0);
    pfr_jg_checkpoint(&cps, 0, 4, &pools);
    chunk_with(&g, &ev, &md, &cps, 0);
    assert_int_equal(convert(&g, NULL, &out), 0);
    assert_int_equal(value_of(out.cpu,
                              "a\xf0\x9f\x98\x80"
                              "b??.caf\xc3\xa9@a\xf0\x9f\x98\x80"
                              "b??:5",
                              0),
                     30000000);
    pfr_jfr_profiles_free(&out);
    /* an unknown string encoding */
    pfr_jg_free(&pools);
    pfr_jg_free(&cps);
    pfr_jg_free(&g);
    pfr_jg_var(&pools, JG_SYMBOL);
    pfr_jg_var(&pools, 1);
    pfr_jg_var(&pools, 1);
    pfr_jg_u8(&pools, 9);
    pfr_jg_checkpoint(&cps, 0, 1, &pools);
    chunk_with(&g, &ev, &md, &cps, 0);
    assert_int_equal(convert(&g, NULL, &out), -EINVAL);
    assert_non_null(strstr(err, "encoding"));
    pfr_jg_free(&ev);
    pfr_jg_free(&md);
    pfr_jg_free(&cps);
    pfr_jg_free(&pools);
    pfr_jg_free(&g);
}

static int count_kinds(void *ctx, const jfr_chunk *c, const jfr_record *rec)
{
    (void)c;
    ((int *)ctx)[rec->kind]++;
    return 0;
}

static void record_kinds(void **state)
{
    (void)state;
    jg g = {0};
    pfr_jg_std_chunk(&g);
    int kinds[4] = {0};
    jfr_limits lim = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, 0};
    jfr_visitor v = {.ctx = kinds, .record = count_kinds};
    jfr_parse_stats st;
    assert_int_equal(pfr_jfr_parse(g.b, g.n, &lim, &v, &st, err, sizeof(err)), 0);
    assert_int_equal(kinds[JFR_REC_METADATA], 1);
    assert_int_equal(kinds[JFR_REC_CHECKPOINT], 1);
    assert_int_equal(kinds[JFR_REC_EVENT], 8);
    assert_int_equal(kinds[JFR_REC_UNKNOWN], 0);
    assert_int_equal(st.records, 10);
    pfr_jg_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(std_recording),
        cmocka_unit_test(limits_and_window),
        cmocka_unit_test(first_alloc_sample),
        cmocka_unit_test(truncated),
        cmocka_unit_test(bad_offsets),
        cmocka_unit_test(checkpoint_chain),
        cmocka_unit_test(pool_keys_missing),
        cmocka_unit_test(stack_of_an_earlier_chunk),
        cmocka_unit_test(wait_across_a_dump),
        cmocka_unit_test(metadata_depth),
        cmocka_unit_test(huge_counts),
        cmocka_unit_test(values_containing_themselves),
        cmocka_unit_test(strings),
        cmocka_unit_test(record_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
