/* Profile building from drained samples, with a fake symbolizer whose names encode the address
 * it was asked about: stack order (kernel frames first, leaf first), return-address adjustment,
 * inlined frames, grouping by service, values, labels, lost and missing stacks; frames of one
 * file shared by the processes that map it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_builder.h"

/* ---- fake symbolizer ---- */
static char names[4][64];
static int user_calls, kernel_calls;

/* Processes from 300 on map the file /bin/y at 0x10000 + (pid - 300) * 0x100000 (the file offset
 * is the address less that): one program, each process laid out elsewhere. */
#define Y_PID         300
#define Y_BASE(pid)   (0x10000ull + (uint64_t)((pid)-Y_PID) * 0x100000)
#define Y_SPACE       7
#define Y_LOCS_LEAF   0x100
#define Y_LOCS_CALLER 0x200

int pfr_symbolizer_frame_key(pfr_symbolizer *s, pid_t pid, uint64_t addr, uint64_t *space,
                             uint64_t *off, const char **module)
{
    (void)s;
    if (pid < Y_PID || addr < Y_BASE(pid) || addr >= Y_BASE(pid) + 0x1000)
        return 0;
    *space = Y_SPACE;
    *off = addr - Y_BASE(pid);
    *module = "/bin/y";
    return 1;
}

int pfr_symbolize_user(pfr_symbolizer *s, pid_t pid, uint64_t addr, pfr_sym_frame *out, size_t cap)
{
    (void)s;
    user_calls++;
    uint64_t space, off;
    const char *module;
    if (pfr_symbolizer_frame_key(s, pid, addr, &space, &off, &module) == 1) {
        snprintf(names[0], sizeof(names[0]), "y_%llx", (unsigned long long)off);
        out[0] = (pfr_sym_frame){.function = names[0], .file = "", .module = module, .offset = off};
        return 1;
    }
    if (addr == 0x5000 && cap >= 2) { /* an inlined call: innermost first */
        snprintf(names[0], sizeof(names[0]), "inner");
        snprintf(names[1], sizeof(names[1]), "outer");
        out[0] =
            (pfr_sym_frame){.function = names[0], .file = "f.c", .line = 7, .module = "/bin/x"};
        out[1] =
            (pfr_sym_frame){.function = names[1], .file = "f.c", .line = 3, .module = "/bin/x"};
        return 2;
    }
    snprintf(names[0], sizeof(names[0]), "u%d_%llx", (int)pid, (unsigned long long)addr);
    out[0] = (pfr_sym_frame){.function = names[0], .file = "", .module = "/bin/x"};
    return 1;
}

/* the mapping alone: /bin/x holds the addresses below 0x2000 (file offset = address) */
int pfr_symbolize_user_mapping(pfr_symbolizer *s, pid_t pid, uint64_t addr, pfr_sym_frame *out)
{
    (void)s;
    (void)pid;
    if (addr >= 0x2000)
        return 0;
    snprintf(names[3], sizeof(names[3]), "x+0x%llx", (unsigned long long)addr);
    *out = (pfr_sym_frame){.function = names[3], .file = "", .module = "/bin/x", .offset = addr};
    return 1;
}

int pfr_symbolize_kernel(pfr_symbolizer *s, uint64_t addr, pfr_sym_frame *out)
{
    (void)s;
    kernel_calls++;
    snprintf(names[2], sizeof(names[2]), "k_%llx", (unsigned long long)addr);
    *out = (pfr_sym_frame){.function = names[2], .file = "", .module = "[kernel]"};
    return 1;
}

/* ---- stacks ---- */
static const uint64_t K1[] = {0xffffffff81000010ull, 0xffffffff81000020ull};
static const uint64_t U1[] = {0x1000, 0x2000, 0x3000};
static const uint64_t U2[] = {0x5000};
/* the same code in two processes of /bin/y: the leaf, and a call's return address */
static const uint64_t Y0[] = {Y_BASE(Y_PID) + Y_LOCS_LEAF, Y_BASE(Y_PID) + Y_LOCS_CALLER + 1};
static const uint64_t Y1[] = {Y_BASE(Y_PID + 1) + Y_LOCS_LEAF,
                              Y_BASE(Y_PID + 1) + Y_LOCS_CALLER + 1};

static const uint64_t *stack_of(void *ctx, uint64_t id, size_t *n)
{
    (void)ctx;
    switch (id) {
    case 10:
        *n = 2;
        return K1;
    case 20:
        *n = 3;
        return U1;
    case 30:
        *n = 1;
        return U2;
    case 40:
        *n = 2;
        return Y0;
    case 41:
        *n = 2;
        return Y1;
    }
    *n = 0;
    return NULL;
}

static const pfr_service_profile *find(const pfr_profile_set *set, const char *service)
{
    for (size_t i = 0; i < set->n; i++)
        if (!strcmp(set->v[i].service, service))
            return &set->v[i];
    return NULL;
}

/* index of the sample of p with label pid and first frame named leaf; -1 if none */
static long find_sample(const pfr_profile *p, int64_t pid, const char *leaf)
{
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        int64_t v;
        pfr_frame f[1];
        if (!pfr_profile_sample_label_num(p, i, "pid", &v) || v != pid)
            continue;
        if (pfr_profile_sample_frames(p, i, f, 1) >= 1 && !strcmp(f[0].function, leaf))
            return (long)i;
    }
    return -1;
}

static void expect_frames(const pfr_profile *p, long i, const char *const *want, size_t n)
{
    assert_true(i >= 0);
    pfr_frame f[16];
    size_t got = pfr_profile_sample_frames(p, (size_t)i, f, 16);
    assert_int_equal(got, n);
    for (size_t k = 0; k < n; k++)
        assert_string_equal(f[k].function, want[k]);
}

static void builds_profiles(void **state)
{
    (void)state;
    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, "/nonexistent-proc"), 0);
    pfr_service_rules rules = {0};
    char err[128];
    assert_int_equal(pfr_service_rules_add(&rules, "comm beta* shared", err, sizeof(err)), 0);
    assert_non_null(pfr_proc_table_learn(&t, 100, 1, "alpha", false, &rules));
    assert_non_null(pfr_proc_table_learn(&t, 200, 1, "beta1", false, &rules));
    assert_non_null(pfr_proc_table_learn(&t, 201, 1, "beta2", false, &rules));

    const pfr_cpu_sample samples[] = {
        {.tgid = 100, .kstack = 10, .ustack = 20, .count = 3},
        {.tgid = 100, .kstack = 0, .ustack = 20, .count = 2},
        {.tgid = 200, .kstack = PFR_STACK_ERROR, .ustack = 30, .count = 1},
        {.tgid = 201, .kstack = 0, .ustack = 30, .count = 4},
        {.tgid = 201, .kstack = 0, .ustack = 30, .count = 1}, /* same stack: summed */
        {.tgid = 999, .kstack = 0, .ustack = 0, .count = 1},
        {.tgid = 100, .kstack = 0, .ustack = 77, .count = 1}, /* id not in the drain */
    };
    pfr_build_input in = {
        .samples = samples,
        .nsamples = sizeof(samples) / sizeof(samples[0]),
        .stack = stack_of,
        .procs = &t,
        .period_ns = 10000000,
        .start_ns = 1700000000000000000ll,
        .end_ns = 1700000010000000000ll,
        .gen = 5,
    };
    pfr_profile_set set;
    pfr_build_stats st = {0};
    assert_int_equal(pfr_build_cpu_profiles(&in, &set, &st), 0);
    assert_int_equal(set.n, 3);
    assert_int_equal(st.samples, 7);
    assert_int_equal(st.lost_stacks, 2);
    assert_int_equal(st.unknown_processes, 1);
    assert_int_equal(pfr_proc_table_get(&t, 100)->sampled_gen, 5);

    const pfr_service_profile *a = find(&set, "alpha");
    assert_non_null(a);
    const pfr_profile *p = a->profile;
    const char *unit = NULL;
    assert_string_equal(pfr_profile_sample_type(p, 0, &unit), "ebpf:cpu:nanoseconds");
    assert_string_equal(unit, "nanoseconds");
    const char *pt = NULL, *pu = NULL;
    assert_int_equal(pfr_profile_period(p, &pt, &pu), 10000000);
    assert_string_equal(pt, "cpu");
    assert_string_equal(pu, "nanoseconds");
    assert_int_equal(pfr_profile_time_nanos(p), in.start_ns);
    assert_int_equal(pfr_profile_duration_nanos(p), 10000000000ll);

    /* kernel frames first (leaf exact, callers at return address - 1), then user frames */
    static const char *const s1[] = {"k_ffffffff81000010", "k_ffffffff8100001f", "u100_1000",
                                     "u100_1fff", "u100_2fff"};
    long i1 = find_sample(p, 100, "k_ffffffff81000010");
    expect_frames(p, i1, s1, 5);
    assert_int_equal(pfr_profile_sample_values(p, (size_t)i1)[0], 3 * 10000000);
    assert_string_equal(pfr_profile_sample_label_str(p, (size_t)i1, "comm"), "alpha");
    static const char *const s2[] = {"u100_1000", "u100_1fff", "u100_2fff"};
    long i2 = find_sample(p, 100, "u100_1000");
    expect_frames(p, i2, s2, 3);
    assert_int_equal(pfr_profile_sample_values(p, (size_t)i2)[0], 2 * 10000000);
    static const char *const s3[] = {"[stack missing]"};
    expect_frames(p, find_sample(p, 100, "[stack missing]"), s3, 1);

    const pfr_service_profile *b = find(&set, "shared");
    assert_non_null(b);
    p = b->profile;
    static const char *const s4[] = {"[kernel stack lost]", "inner", "outer"};
    expect_frames(p, find_sample(p, 200, "[kernel stack lost]"), s4, 3);
    long i5 = find_sample(p, 201, "inner");
    static const char *const s5[] = {"inner", "outer"};
    expect_frames(p, i5, s5, 2);
    assert_int_equal(pfr_profile_sample_values(p, (size_t)i5)[0], 5 * 10000000);
    pfr_frame fr[2];
    pfr_profile_sample_frames(p, (size_t)i5, fr, 2);
    assert_string_equal(fr[0].file, "f.c");
    assert_int_equal(fr[0].line, 7);
    assert_string_equal(fr[1].module, "/bin/x");

    const pfr_service_profile *u = find(&set, "unknown");
    assert_non_null(u);
    static const char *const s6[] = {"[no stack]"};
    long i6 = find_sample(u->profile, 999, "[no stack]");
    expect_frames(u->profile, i6, s6, 1);
    assert_string_equal(pfr_profile_sample_label_str(u->profile, (size_t)i6, "comm"), "?");

    /* the profile survives a pprof round trip */
    uint8_t *buf;
    size_t len;
    assert_int_equal(pfr_profile_encode(a->profile, true, &buf, &len), 0);
    pfr_profile *back;
    char derr[128];
    assert_int_equal(pfr_profile_decode(buf, len, 0, &back, derr, sizeof(derr)), 0);
    assert_int_equal(pfr_profile_num_samples(back), pfr_profile_num_samples(a->profile));
    pfr_profile_free(back);
    free(buf);

    pfr_profile_set_free(&set);
    pfr_proc_table_free(&t);
    pfr_service_rules_free(&rules);
}

/* The input of one interval of samples with a frame cache, period 1 ns over [0, 1). */
static pfr_build_input cached_input(const pfr_cpu_sample *samples, size_t n, pfr_proc_table *t,
                                    pfr_frame_cache *fc)
{
    return (pfr_build_input){.samples = samples,
                             .nsamples = n,
                             .stack = stack_of,
                             .procs = t,
                             .frames = fc,
                             .period_ns = 1,
                             .start_ns = 0,
                             .end_ns = 1};
}

/* With the cross-interval cache, a second interval of the same stacks asks the symbolizer
 * nothing and yields the same frames. */
static void cached_across_intervals(void **state)
{
    (void)state;
    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, "/nonexistent-proc"), 0);
    assert_non_null(pfr_proc_table_learn(&t, 100, 1, "alpha", false, NULL));
    const pfr_cpu_sample samples[] = {
        {.tgid = 100, .kstack = 10, .ustack = 20, .count = 3},
        {.tgid = 100, .kstack = 0, .ustack = 30, .count = 1},
    };
    pfr_frame_cache fc;
    pfr_frame_cache_init(&fc, 1 << 20);
    pfr_build_input in = cached_input(samples, 2, &t, &fc);
    pfr_profile_set a, b;
    pfr_build_stats st = {0};
    user_calls = kernel_calls = 0;
    assert_int_equal(pfr_build_cpu_profiles(&in, &a, &st), 0);
    assert_int_equal(user_calls, 4);
    assert_int_equal(kernel_calls, 2);
    assert_int_equal(pfr_build_cpu_profiles(&in, &b, &st), 0);
    assert_int_equal(user_calls, 4);
    assert_int_equal(kernel_calls, 2);
    static const char *const s1[] = {"k_ffffffff81000010", "k_ffffffff8100001f", "u100_1000",
                                     "u100_1fff", "u100_2fff"};
    expect_frames(b.v[0].profile, find_sample(b.v[0].profile, 100, "k_ffffffff81000010"), s1, 5);
    static const char *const s2[] = {"inner", "outer"};
    expect_frames(b.v[0].profile, find_sample(b.v[0].profile, 100, "inner"), s2, 2);
    pfr_profile_set_free(&a);
    pfr_profile_set_free(&b);
    pfr_frame_cache_free(&fc);
    pfr_proc_table_free(&t);
}

/* A file's frames are symbolized once for all the processes that map it, wherever each maps it,
 * and its locations are its file offsets: the same in every process, so shared by them. */
static void shared_by_file(void **state)
{
    (void)state;
    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, "/nonexistent-proc"), 0);
    assert_non_null(pfr_proc_table_learn(&t, Y_PID, 1, "y", false, NULL));
    assert_non_null(pfr_proc_table_learn(&t, Y_PID + 1, 1, "y", false, NULL));
    const pfr_cpu_sample first[] = {{.tgid = Y_PID, .ustack = 40, .count = 1}};
    const pfr_cpu_sample both[] = {{.tgid = Y_PID, .ustack = 40, .count = 1},
                                   {.tgid = Y_PID + 1, .ustack = 41, .count = 2}};
    pfr_frame_cache fc;
    pfr_frame_cache_init(&fc, 1 << 20);
    pfr_build_input in = cached_input(first, 1, &t, &fc);
    pfr_profile_set a, b;
    pfr_build_stats st = {0};
    user_calls = 0;
    assert_int_equal(pfr_build_cpu_profiles(&in, &a, &st), 0);
    assert_int_equal(user_calls, 2);
    in.samples = both;
    in.nsamples = 2;
    st = (pfr_build_stats){0};
    assert_int_equal(pfr_build_cpu_profiles(&in, &b, &st), 0);
    assert_int_equal(user_calls, 2); /* the second process: all from the cache */
    /* and its locations are the first's of this build, not looked up in the cache again */
    assert_int_equal(st.shared_frames, 2);
    const pfr_profile *p = b.v[0].profile;
    static const char *const want[] = {"y_100", "y_200"};
    for (int pid = Y_PID; pid <= Y_PID + 1; pid++) {
        long i = find_sample(p, pid, "y_100");
        expect_frames(p, i, want, 2);
        pfr_frame f[2];
        assert_int_equal(pfr_profile_sample_frames(p, (size_t)i, f, 2), 2);
        assert_int_equal(f[0].address, Y_LOCS_LEAF);
        assert_int_equal(f[1].address, Y_LOCS_CALLER + 1); /* the return address's offset */
        assert_string_equal(f[0].module, "/bin/y");
    }
    assert_int_equal(pfr_profile_num_locations(p), 2);
    pfr_profile_set_free(&a);
    pfr_profile_set_free(&b);
    pfr_frame_cache_free(&fc);
    pfr_proc_table_free(&t);
}

/* Past the deadline, new user frames are named by their mapping alone (module+0xoffset), or
 * written as addresses outside every mapping; known ones keep their names. */
static void deadline(void **state)
{
    (void)state;
    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, "/nonexistent-proc"), 0);
    assert_non_null(pfr_proc_table_learn(&t, 100, 1, "alpha", false, NULL));
    const pfr_cpu_sample samples[] = {{.tgid = 100, .ustack = 20, .count = 1}};
    pfr_frame_cache fc;
    pfr_frame_cache_init(&fc, 1 << 20);
    pfr_build_input in = cached_input(samples, 1, &t, &fc);
    in.deadline_ns = 1; /* long past */
    pfr_profile_set a;
    pfr_build_stats st = {0};
    user_calls = 0;
    assert_int_equal(pfr_build_cpu_profiles(&in, &a, &st), 0);
    assert_int_equal(user_calls, 0);
    assert_int_equal(st.late_frames, 3);
    /* return addresses are looked up one byte back, as when symbolizing */
    static const char *const s1[] = {"x+0x1000", "x+0x1fff", "0x3000"};
    expect_frames(a.v[0].profile, find_sample(a.v[0].profile, 100, "x+0x1000"), s1, 3);
    pfr_profile_set_free(&a);
    pfr_frame_cache_free(&fc);
    pfr_proc_table_free(&t);
}

static void empty_drain(void **state)
{
    (void)state;
    pfr_proc_table t;
    assert_int_equal(pfr_proc_table_init(&t, "/nonexistent-proc"), 0);
    pfr_build_input in = {
        .stack = stack_of, .procs = &t, .period_ns = 1, .start_ns = 0, .end_ns = 1};
    pfr_profile_set set;
    pfr_build_stats st = {0};
    assert_int_equal(pfr_build_cpu_profiles(&in, &set, &st), 0);
    assert_int_equal(set.n, 0);
    pfr_profile_set_free(&set);
    pfr_proc_table_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(builds_profiles), cmocka_unit_test(cached_across_intervals),
        cmocka_unit_test(shared_by_file),  cmocka_unit_test(deadline),
        cmocka_unit_test(empty_drain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
