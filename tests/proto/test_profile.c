/* Unit tests of the profile model: building, de-duplication, encode/decode round trips, merge,
 * and the decoder's answers to malformed input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "pfr_hash.h"
#include "pfr_profile.h"
#include "profile.pb-c.h"

/* ---- helpers ---- */

static int64_t total(const pfr_profile *p, size_t type)
{
    int64_t t = 0;
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++)
        t += pfr_profile_sample_values(p, i)[type];
    return t;
}

/* A stack as one string "f1 file:line;f2 ..." leaf first, for comparisons across profiles. */
static void stack_str(const pfr_profile *p, size_t i, char *buf, size_t len)
{
    pfr_frame fr[128];
    size_t n = pfr_profile_sample_frames(p, i, fr, 128);
    assert_true(n <= 128);
    size_t off = 0;
    buf[0] = '\0';
    for (size_t j = 0; j < n; j++)
        off += (size_t)snprintf(buf + off, len - off, "%s %s:%lld @%llx [%s];", fr[j].function,
                                fr[j].file, (long long)fr[j].line,
                                (unsigned long long)fr[j].address, fr[j].module);
    const pfr_label *l;
    size_t nl = pfr_profile_sample_labels(p, i, &l);
    for (size_t j = 0; j < nl; j++) {
        if (l[j].str)
            off += (size_t)snprintf(buf + off, len - off, "|%s=%s", l[j].key, l[j].str);
        else
            off += (size_t)snprintf(buf + off, len - off, "|%s=%lld%s", l[j].key,
                                    (long long)l[j].num, l[j].unit ? l[j].unit : "");
    }
}

/* Find the sample of q whose stack_str equals want; -1 if none. */
static long find_sample(const pfr_profile *q, const char *want)
{
    char buf[8192];
    for (size_t i = 0; i < pfr_profile_num_samples(q); i++) {
        stack_str(q, i, buf, sizeof(buf));
        if (strcmp(buf, want) == 0)
            return (long)i;
    }
    return -1;
}

/* Same sample types, header and samples (stack, labels, values), in any order. */
static void assert_same_profile(const pfr_profile *a, const pfr_profile *b)
{
    assert_int_equal(pfr_profile_num_sample_types(a), pfr_profile_num_sample_types(b));
    size_t nt = pfr_profile_num_sample_types(a);
    for (size_t i = 0; i < nt; i++) {
        const char *ua, *ub;
        assert_string_equal(pfr_profile_sample_type(a, i, &ua), pfr_profile_sample_type(b, i, &ub));
        assert_string_equal(ua, ub);
    }
    const char *pta, *pua, *ptb, *pub;
    assert_int_equal(pfr_profile_period(a, &pta, &pua), pfr_profile_period(b, &ptb, &pub));
    assert_string_equal(pta, ptb);
    assert_string_equal(pua, pub);
    assert_int_equal(pfr_profile_time_nanos(a), pfr_profile_time_nanos(b));
    assert_int_equal(pfr_profile_duration_nanos(a), pfr_profile_duration_nanos(b));
    assert_int_equal(pfr_profile_num_samples(a), pfr_profile_num_samples(b));
    char buf[8192];
    for (size_t i = 0; i < pfr_profile_num_samples(a); i++) {
        stack_str(a, i, buf, sizeof(buf));
        long j = find_sample(b, buf);
        assert_true(j >= 0);
        assert_memory_equal(pfr_profile_sample_values(a, i),
                            pfr_profile_sample_values(b, (size_t)j), nt * sizeof(int64_t));
    }
}

/* A small CPU-like profile: two types, a mapping, inlined frames, labels. */
static pfr_profile *make_profile(int variant)
{
    pfr_profile *p = pfr_profile_new();
    assert_non_null(p);
    assert_int_equal(pfr_profile_add_sample_type(p, "samples", "count"), 0);
    assert_int_equal(pfr_profile_add_sample_type(p, "cpu", "nanoseconds"), 1);
    pfr_profile_set_period(p, "cpu", "nanoseconds", 10000000);
    pfr_profile_set_time(p, 1700000000000000000 + variant * 10000000000LL, 10000000000LL);
    int64_t m = pfr_profile_add_mapping(p, 0x400000, 0x800000, 0, "/usr/bin/app", "abc123");
    assert_true(m >= 0);
    int64_t f_main = pfr_profile_add_function(p, "main.main", "main.main", "/src/main.go", 10);
    int64_t f_work = pfr_profile_add_function(p, "main.work", "main.work", "/src/main.go", 20);
    int64_t f_inl = pfr_profile_add_function(p, "strings.Index", "strings.Index",
                                             "/go/src/strings/strings.go", 100);
    assert_true(f_main >= 0 && f_work >= 0 && f_inl >= 0);
    pfr_line l_main = {(uint32_t)f_main, 12};
    pfr_line l_work[2] = {{(uint32_t)f_inl, 105}, {(uint32_t)f_work, 25}};
    int64_t loc_main = pfr_profile_add_location(p, m, 0x401000, &l_main, 1);
    int64_t loc_work = pfr_profile_add_location(p, m, 0x402000, l_work, 2);
    int64_t loc_c = pfr_profile_add_frame(p, "do_syscall_64", "arch/x86/entry/common.c", 50);
    assert_true(loc_main >= 0 && loc_work >= 0 && loc_c >= 0);
    uint32_t s1[] = {(uint32_t)loc_work, (uint32_t)loc_main};
    uint32_t s2[] = {(uint32_t)loc_c, (uint32_t)loc_work, (uint32_t)loc_main};
    pfr_label lab1[] = {{"pid", NULL, 42, NULL}, {"comm", "app", 0, NULL}};
    pfr_label lab2[] = {
        {"pid", NULL, 43, NULL}, {"comm", "app", 0, NULL}, {"bytes", NULL, 4096, "bytes"}};
    int64_t v1[] = {3, 30000000}, v2[] = {1 + variant, (1 + variant) * 10000000LL};
    assert_true(pfr_profile_add_sample(p, s1, 2, v1, lab1, 2) >= 0);
    assert_true(pfr_profile_add_sample(p, s2, 3, v2, lab2, 3) >= 0);
    assert_true(pfr_profile_add_sample(p, s2, 3, v2, lab1, 2) >= 0);
    assert_true(pfr_profile_add_sample(p, NULL, 0, v1, NULL, 0) >= 0); /* empty stack */
    assert_int_equal(pfr_profile_error(p), 0);
    return p;
}

static pfr_profile *roundtrip(const pfr_profile *p, bool gz)
{
    uint8_t *buf;
    size_t len;
    assert_int_equal(pfr_profile_encode(p, gz, &buf, &len), 0);
    if (gz) {
        assert_true(len > 2);
        assert_int_equal(buf[0], 0x1f);
        assert_int_equal(buf[1], 0x8b);
    }
    pfr_profile *q = NULL;
    char err[256];
    int rc = pfr_profile_decode(buf, len, 0, &q, err, sizeof(err));
    if (rc)
        fail_msg("decode: %d %s", rc, err);
    free(buf);
    return q;
}

/* Pack a hand-made message (for malformed-input tests). */
static uint8_t *pack(const Perftools__Profiles__Profile *m, size_t *len)
{
    *len = perftools__profiles__profile__get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(perftools__profiles__profile__pack(m, buf), *len);
    return buf;
}

static int decode_msg(const Perftools__Profiles__Profile *m, char *err, size_t errlen,
                      pfr_profile **out)
{
    size_t len;
    uint8_t *buf = pack(m, &len);
    pfr_profile *p = NULL;
    int rc = pfr_profile_decode(buf, len, 0, &p, err, errlen);
    free(buf);
    if (out)
        *out = p;
    else
        pfr_profile_free(p);
    return rc;
}

/* ---- building ---- */

static void test_intern_dedup(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    assert_int_equal(pfr_profile_num_strings(p), 1);
    assert_string_equal(pfr_profile_string(p, 0), "");
    assert_int_equal(pfr_profile_intern(p, ""), 0);
    assert_int_equal(pfr_profile_intern(p, NULL), 0);
    int64_t a = pfr_profile_intern(p, "alpha");
    int64_t b = pfr_profile_intern(p, "beta");
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(pfr_profile_intern(p, "alpha"), a);
    /* Many strings: the table grows and every one stays findable and stable. */
    char name[32];
    const char *first = pfr_profile_string(p, (size_t)a);
    for (int i = 0; i < 20000; i++) {
        snprintf(name, sizeof(name), "s%d", i);
        assert_int_equal(pfr_profile_intern(p, name), 3 + i);
    }
    for (int i = 0; i < 20000; i += 997) {
        snprintf(name, sizeof(name), "s%d", i);
        assert_int_equal(pfr_profile_intern(p, name), 3 + i);
        assert_string_equal(pfr_profile_string(p, 3 + (size_t)i), name);
    }
    assert_ptr_equal(pfr_profile_string(p, (size_t)a), first);
    /* Interning a string taken from the profile itself is safe. */
    assert_int_equal(pfr_profile_intern(p, pfr_profile_string(p, 5)), 5);
    pfr_profile_free(p);
}

static void test_function_location_dedup(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    int64_t f1 = pfr_profile_add_function(p, "f", "f", "a.c", 1);
    int64_t f2 = pfr_profile_add_function(p, "f", "f", "a.c", 1);
    int64_t f3 = pfr_profile_add_function(p, "f", "f", "b.c", 1);
    assert_int_equal(f1, f2);
    assert_int_not_equal(f1, f3);
    assert_int_equal(pfr_profile_num_functions(p), 2);
    int64_t m1 = pfr_profile_add_mapping(p, 1, 2, 0, "x", "");
    assert_int_equal(pfr_profile_add_mapping(p, 1, 2, 0, "x", ""), m1);
    assert_int_not_equal(pfr_profile_add_mapping(p, 1, 3, 0, "x", ""), m1);
    pfr_line l[2] = {{(uint32_t)f1, 5}, {(uint32_t)f3, 7}};
    int64_t a = pfr_profile_add_location(p, m1, 0x10, l, 2);
    assert_int_equal(pfr_profile_add_location(p, m1, 0x10, l, 2), a);
    assert_int_not_equal(pfr_profile_add_location(p, m1, 0x10, l, 1), a);
    assert_int_not_equal(pfr_profile_add_location(p, -1, 0x10, l, 2), a);
    assert_int_equal(pfr_profile_add_frame(p, "g", "g.c", 3),
                     pfr_profile_add_frame(p, "g", "g.c", 3));
    assert_int_not_equal(pfr_profile_add_frame(p, "g", "g.c", 3),
                         pfr_profile_add_frame(p, "g", "g.c", 4));
    assert_int_equal(pfr_profile_num_locations(p), 5);
    assert_int_equal(pfr_profile_error(p), 0);
    pfr_profile_free(p);
}

/* Strings handed in with their length and hash, functions and mappings by string index: the
 * same entries as by text; an index past the strings is refused (and sticks). */
static void test_hashed_and_ids(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    int64_t f1 = pfr_profile_add_function(p, "f", "f", "a.c", 1);
    int64_t m1 = pfr_profile_add_mapping(p, 0, 0, 0, "/bin/x", "");
    pfr_hstr f = {"f", 1, pfr_hash_bytes("f", 1)}, a = {"a.c", 3, pfr_hash_bytes("a.c", 3)};
    pfr_hstr x = {"/bin/x", 6, pfr_hash_bytes("/bin/x", 6)}, e = {NULL, 0, pfr_hash_bytes("", 0)};
    int64_t fs = pfr_profile_intern_hstr(p, &f), as = pfr_profile_intern_hstr(p, &a);
    assert_int_equal(fs, pfr_profile_intern(p, "f"));
    assert_int_equal(as, pfr_profile_intern(p, "a.c"));
    assert_int_equal(pfr_profile_intern_hstr(p, &e), 0);
    size_t nstrs = pfr_profile_num_strings(p);
    assert_int_equal(pfr_profile_add_function_ids(p, (uint32_t)fs, (uint32_t)fs, (uint32_t)as, 1),
                     f1);
    int64_t xs = pfr_profile_intern_hstr(p, &x);
    assert_int_equal(pfr_profile_add_mapping_ids(p, 0, 0, 0, (uint32_t)xs, 0), m1);
    assert_int_equal(pfr_profile_num_strings(p), nstrs);
    assert_int_equal(pfr_profile_num_functions(p), 1);
    assert_int_equal(pfr_profile_add_function_ids(p, 0, 0, (uint32_t)nstrs, 1), -EINVAL);
    assert_int_equal(pfr_profile_error(p), -EINVAL);
    pfr_profile_free(p);
}

static void test_add_sample_sums(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "ebpf:cpu:nanoseconds", "nanoseconds");
    uint32_t a = (uint32_t)pfr_profile_add_frame(p, "a", "a.c", 1);
    uint32_t b = (uint32_t)pfr_profile_add_frame(p, "b", "b.c", 2);
    uint32_t s[] = {a, b}, rev[] = {b, a};
    int64_t v = 10;
    pfr_label l1[] = {{"pid", NULL, 1, NULL}, {"comm", "x", 0, NULL}};
    pfr_label l1r[] = {{"comm", "x", 0, NULL}, {"pid", NULL, 1, NULL}};
    pfr_label l2[] = {{"pid", NULL, 2, NULL}, {"comm", "x", 0, NULL}};
    int64_t i0 = pfr_profile_add_sample(p, s, 2, &v, l1, 2);
    assert_int_equal(pfr_profile_add_sample(p, s, 2, &v, l1, 2), i0);
    assert_int_equal(pfr_profile_add_sample(p, s, 2, &v, l1r, 2), i0); /* label order ignored */
    assert_int_not_equal(pfr_profile_add_sample(p, s, 2, &v, l2, 2), i0);
    assert_int_not_equal(pfr_profile_add_sample(p, rev, 2, &v, l1, 2), i0);
    assert_int_not_equal(pfr_profile_add_sample(p, s, 2, &v, NULL, 0), i0);
    assert_int_not_equal(pfr_profile_add_sample(p, s, 1, &v, l1, 2), i0);
    assert_int_equal(pfr_profile_num_samples(p), 5);
    assert_int_equal(pfr_profile_sample_values(p, (size_t)i0)[0], 30);
    assert_int_equal(total(p, 0), 70);
    pfr_profile_free(p);
}

static void test_labels(void **state)
{
    (void)state;
    pfr_profile *p = make_profile(0);
    /* sample 1 has labels pid=43, comm=app, bytes=4096 bytes */
    int64_t num;
    bool found = false;
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        if (!pfr_profile_sample_label_num(p, i, "pid", &num) || num != 43)
            continue;
        found = true;
        assert_string_equal(pfr_profile_sample_label_str(p, i, "comm"), "app");
        assert_null(pfr_profile_sample_label_str(p, i, "pid"));
        assert_null(pfr_profile_sample_label_str(p, i, "nope"));
        assert_false(pfr_profile_sample_label_num(p, i, "comm", &num));
        assert_true(pfr_profile_sample_label_num(p, i, "bytes", &num));
        assert_int_equal(num, 4096);
        const pfr_label *l;
        assert_int_equal(pfr_profile_sample_labels(p, i, &l), 3);
        assert_string_equal(l[2].unit, "bytes");
        assert_null(l[0].unit);
    }
    assert_true(found);
    pfr_profile_free(p);
}

static void test_frames_inline(void **state)
{
    (void)state;
    pfr_profile *p = make_profile(0);
    /* Sample with stack {loc_c, loc_work(2 lines), loc_main}: 4 frames leaf first. */
    size_t idx = SIZE_MAX;
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        size_t n;
        pfr_profile_sample_locations(p, i, &n);
        if (n == 3)
            idx = i;
    }
    assert_true(idx != SIZE_MAX);
    pfr_frame fr[8];
    assert_int_equal(pfr_profile_sample_frames(p, idx, fr, 8), 4);
    assert_string_equal(fr[0].function, "do_syscall_64");
    assert_string_equal(fr[0].module, "");
    assert_int_equal(fr[0].line, 50);
    assert_string_equal(fr[1].function, "strings.Index");
    assert_int_equal(fr[1].line, 105);
    assert_int_equal(fr[1].address, 0x402000);
    assert_string_equal(fr[1].module, "/usr/bin/app");
    assert_string_equal(fr[2].function, "main.work");
    assert_int_equal(fr[2].address, 0x402000);
    assert_string_equal(fr[3].function, "main.main");
    assert_string_equal(fr[3].file, "/src/main.go");
    /* A short buffer still reports the total and fills what fits. */
    pfr_frame two[2];
    assert_int_equal(pfr_profile_sample_frames(p, idx, two, 2), 4);
    assert_string_equal(two[1].function, "strings.Index");
    assert_int_equal(pfr_profile_sample_frames(p, idx, NULL, 0), 4);
    /* An address-only location is one frame with an empty function. */
    int64_t bare = pfr_profile_add_location(p, 0, 0x401234, NULL, 0);
    assert_int_equal(pfr_profile_location_frames(p, (uint32_t)bare, fr, 8), 1);
    assert_string_equal(fr[0].function, "");
    assert_int_equal(fr[0].address, 0x401234);
    pfr_profile_free(p);
}

static void test_misuse_sticky(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "t", "u");
    pfr_line bad = {7, 1};
    assert_int_equal(pfr_profile_add_location(p, -1, 0, &bad, 1), -EINVAL);
    assert_int_equal(pfr_profile_error(p), -EINVAL);
    assert_true(pfr_profile_intern(p, "later") < 0);
    uint8_t *buf;
    size_t len;
    assert_int_equal(pfr_profile_encode(p, false, &buf, &len), -EINVAL);
    pfr_profile_free(p);

    p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "t", "u");
    uint32_t loc = 3;
    int64_t v = 1;
    assert_int_equal(pfr_profile_add_sample(p, &loc, 1, &v, NULL, 0), -EINVAL);
    pfr_profile_free(p);

    p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "t", "u");
    assert_true(pfr_profile_add_sample(p, NULL, 0, &v, NULL, 0) >= 0);
    assert_int_equal(pfr_profile_add_sample_type(p, "t2", "u"), -EINVAL);
    pfr_profile_free(p);
}

/* ---- encode / decode ---- */

static void test_roundtrip(void **state)
{
    (void)state;
    pfr_profile *p = make_profile(1);
    for (int gz = 0; gz < 2; gz++) {
        pfr_profile *q = roundtrip(p, gz);
        assert_same_profile(p, q);
        assert_same_profile(q, p);
        assert_int_equal(pfr_profile_num_functions(q), pfr_profile_num_functions(p));
        assert_int_equal(pfr_profile_num_locations(q), pfr_profile_num_locations(p));
        assert_int_equal(pfr_profile_num_mappings(q), pfr_profile_num_mappings(p));
        assert_int_equal(total(q, 1), total(p, 1));
        /* Encoding is deterministic: the decoded profile encodes to the same bytes. */
        uint8_t *b1, *b2;
        size_t l1, l2;
        assert_int_equal(pfr_profile_encode(p, false, &b1, &l1), 0);
        assert_int_equal(pfr_profile_encode(q, false, &b2, &l2), 0);
        assert_int_equal(l1, l2);
        assert_memory_equal(b1, b2, l1);
        free(b1);
        free(b2);
        pfr_profile_free(q);
    }
    /* An empty profile round-trips too. */
    pfr_profile *e = pfr_profile_new();
    pfr_profile *q = roundtrip(e, false);
    assert_int_equal(pfr_profile_num_samples(q), 0);
    assert_int_equal(pfr_profile_num_sample_types(q), 0);
    pfr_profile_free(q);
    pfr_profile_free(e);
    pfr_profile_free(p);
}

static void test_decode_remaps_ids(void **state)
{
    (void)state;
    /* Hand-made message with sparse, unordered ids and duplicated strings. */
    char *strs[] = {"", "cpu", "nanoseconds", "f", "file.c", "f", "pid"};
    Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    vt.type = 1;
    vt.unit = 2;
    Perftools__Profiles__ValueType *vts[] = {&vt};
    Perftools__Profiles__Function fa = PERFTOOLS__PROFILES__FUNCTION__INIT, fb = fa;
    fa.id = 0xffffffffffffull;
    fa.name = 3;
    fa.filename = 4;
    fb.id = 9;
    fb.name = 5; /* same content through another string index: same function */
    fb.filename = 4;
    Perftools__Profiles__Function *fns[] = {&fa, &fb};
    Perftools__Profiles__Line la = PERFTOOLS__PROFILES__LINE__INIT, lb = la;
    la.function_id = 0xffffffffffffull;
    la.line = 3;
    lb.function_id = 9;
    lb.line = 4;
    Perftools__Profiles__Line *lpa[] = {&la}, *lpb[] = {&lb};
    Perftools__Profiles__Location loca = PERFTOOLS__PROFILES__LOCATION__INIT, locb = loca;
    loca.id = 1000;
    loca.n_line = 1;
    loca.line = lpa;
    locb.id = 7;
    locb.n_line = 1;
    locb.line = lpb;
    Perftools__Profiles__Location *locs[] = {&loca, &locb};
    uint64_t stack[] = {7, 1000, 7};
    int64_t val = 5;
    Perftools__Profiles__Label lab = PERFTOOLS__PROFILES__LABEL__INIT;
    lab.key = 6;
    lab.num = 77;
    Perftools__Profiles__Label *labs[] = {&lab};
    Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
    s.n_location_id = 3;
    s.location_id = stack;
    s.n_value = 1;
    s.value = &val;
    s.n_label = 1;
    s.label = labs;
    Perftools__Profiles__Sample *ss[] = {&s, &s};
    Perftools__Profiles__Profile m = PERFTOOLS__PROFILES__PROFILE__INIT;
    m.n_string_table = 7;
    m.string_table = strs;
    m.n_sample_type = 1;
    m.sample_type = vts;
    m.n_function = 2;
    m.function = fns;
    m.n_location = 2;
    m.location = locs;
    m.n_sample = 2;
    m.sample = ss;
    char err[256];
    pfr_profile *p = NULL;
    assert_int_equal(decode_msg(&m, err, sizeof(err), &p), 0);
    assert_int_equal(pfr_profile_num_functions(p), 1);
    assert_int_equal(pfr_profile_num_locations(p), 2);
    assert_int_equal(pfr_profile_num_samples(p), 1); /* the duplicate sample was summed */
    assert_int_equal(pfr_profile_sample_values(p, 0)[0], 10);
    pfr_frame fr[4];
    assert_int_equal(pfr_profile_sample_frames(p, 0, fr, 4), 3);
    assert_int_equal(fr[0].line, 4);
    assert_int_equal(fr[1].line, 3);
    assert_string_equal(fr[1].function, "f");
    int64_t num;
    assert_true(pfr_profile_sample_label_num(p, 0, "pid", &num));
    assert_int_equal(num, 77);
    pfr_profile_free(p);

    /* Each way of breaking it is rejected with a reason. */
    fa.name = 99; /* string index out of range */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    assert_non_null(strstr(err, "out of range"));
    fa.name = -1;
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    fa.name = 3;
    fb.id = 0; /* zero id */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    assert_non_null(strstr(err, "id 0"));
    fb.id = 0xffffffffffffull; /* duplicate id */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    assert_non_null(strstr(err, "duplicate"));
    fb.id = 9;
    lb.function_id = 10; /* unknown function */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    assert_non_null(strstr(err, "unknown function"));
    lb.function_id = 9;
    stack[1] = 1001; /* unknown location */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    assert_non_null(strstr(err, "unknown location"));
    stack[1] = 1000;
    locb.mapping_id = 3; /* unknown mapping */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    assert_non_null(strstr(err, "unknown mapping"));
    locb.mapping_id = 0;
    s.n_value = 0; /* values count != sample types */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    assert_non_null(strstr(err, "values"));
    s.n_value = 1;
    lab.num_unit = 7;
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    lab.num_unit = 0;
    vt.unit = 8;
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    vt.unit = 2;
    m.drop_frames = 100;
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    m.drop_frames = 0;
    strs[0] = "x"; /* string_table[0] must be "" */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    strs[0] = "";
    m.n_string_table = 0;
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), -EBADMSG);
    m.n_string_table = 7;
    /* And it is whole again. */
    assert_int_equal(decode_msg(&m, err, sizeof(err), NULL), 0);
}

/* ---- a tiny protobuf writer, for wire forms our encoder never produces ---- */

struct wbuf {
    uint8_t b[4096];
    size_t n;
};

static void w_varint(struct wbuf *w, uint64_t v)
{
    do {
        uint8_t x = v & 0x7f;
        v >>= 7;
        w->b[w->n++] = x | (v ? 0x80 : 0);
    } while (v);
}

static void w_tag(struct wbuf *w, uint32_t field, uint32_t wt)
{
    w_varint(w, (uint64_t)field << 3 | wt);
}

static void w_field(struct wbuf *w, uint32_t field, uint64_t v)
{
    w_tag(w, field, 0);
    w_varint(w, v);
}

static void w_bytes(struct wbuf *w, uint32_t field, const void *data, size_t len)
{
    w_tag(w, field, 2);
    w_varint(w, len);
    memcpy(w->b + w->n, data, len);
    w->n += len;
}

static void w_msg(struct wbuf *w, uint32_t field, const struct wbuf *m)
{
    w_bytes(w, field, m->b, m->n);
}

static void test_decode_wire_forms(void **state)
{
    (void)state;
    struct wbuf m = {0}, x;
    /* A sample before the locations it names, ids unpacked, values packed. */
    x = (struct wbuf){0};
    w_field(&x, 1, 5);
    w_field(&x, 1, 7);
    uint8_t packed[] = {3};
    w_bytes(&x, 2, packed, 1);
    w_msg(&m, 2, &x);
    /* Location 5 with a Line before its id; location 7 with is_folded sent length-delimited
     * (protobuf-c accepts any wire type for a bool). */
    struct wbuf line = {0};
    w_field(&line, 1, 9);
    w_field(&line, 2, 3);
    x = (struct wbuf){0};
    w_msg(&x, 4, &line);
    w_field(&x, 1, 5);
    w_msg(&m, 4, &x);
    x = (struct wbuf){0};
    w_field(&x, 1, 7);
    uint8_t one[] = {1};
    w_bytes(&x, 5, one, 1);
    w_msg(&m, 4, &x);
    x = (struct wbuf){0};
    w_field(&x, 1, 9);
    w_field(&x, 2, 1);
    w_msg(&m, 5, &x);
    /* Unknown fields of every wire type are skipped. */
    w_field(&m, 100, 12345);
    w_tag(&m, 101, 1);
    memset(m.b + m.n, 0xaa, 8);
    m.n += 8;
    w_tag(&m, 102, 5);
    memset(m.b + m.n, 0xbb, 4);
    m.n += 4;
    w_bytes(&m, 103, "junk", 4);
    /* period_type twice: the occurrences merge. */
    x = (struct wbuf){0};
    w_field(&x, 1, 1);
    w_msg(&m, 11, &x);
    x = (struct wbuf){0};
    w_field(&x, 2, 2);
    w_msg(&m, 11, &x);
    /* The strings last. */
    w_bytes(&m, 6, "", 0);
    w_bytes(&m, 6, "f", 1);
    w_bytes(&m, 6, "ns", 2);
    x = (struct wbuf){0};
    w_field(&x, 1, 1);
    w_field(&x, 2, 2);
    w_msg(&m, 1, &x);

    pfr_profile *p = NULL;
    char err[128];
    assert_int_equal(pfr_profile_decode(m.b, m.n, 0, &p, err, sizeof(err)), 0);
    assert_int_equal(pfr_profile_num_samples(p), 1);
    assert_int_equal(pfr_profile_sample_values(p, 0)[0], 3);
    pfr_frame fr[4];
    assert_int_equal(pfr_profile_sample_frames(p, 0, fr, 4), 2);
    assert_string_equal(fr[0].function, "f");
    assert_int_equal(fr[0].line, 3);
    assert_string_equal(fr[1].function, ""); /* location 7 has no line */
    const char *pt, *pu;
    pfr_profile_period(p, &pt, &pu);
    assert_string_equal(pt, "f");
    assert_string_equal(pu, "ns");
    pfr_profile_free(p);

    /* The same message protobuf-c reads: both agree it is well-formed. */
    Perftools__Profiles__Profile *pm = perftools__profiles__profile__unpack(NULL, m.n, m.b);
    assert_non_null(pm);
    perftools__profiles__profile__free_unpacked(pm, NULL);

    /* A group (wire type 3), a 6-byte tag, a length past the end: malformed. */
    struct wbuf g = m;
    w_tag(&g, 200, 3);
    assert_int_equal(pfr_profile_decode(g.b, g.n, 0, &p, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "malformed"));
    g = m;
    uint8_t long_tag[] = {0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01};
    memcpy(g.b + g.n, long_tag, sizeof(long_tag));
    g.n += sizeof(long_tag);
    assert_int_equal(pfr_profile_decode(g.b, g.n, 0, &p, err, sizeof(err)), -EBADMSG);
    g = m;
    w_tag(&g, 6, 2);
    w_varint(&g, 100);
    assert_int_equal(pfr_profile_decode(g.b, g.n, 0, &p, err, sizeof(err)), -EBADMSG);
    /* A known scalar field in the wrong wire type. */
    g = m;
    w_tag(&g, 9, 2);
    w_varint(&g, 0);
    assert_int_equal(pfr_profile_decode(g.b, g.n, 0, &p, err, sizeof(err)), -EBADMSG);
}

static void test_decode_truncated(void **state)
{
    (void)state;
    pfr_profile *p = make_profile(2);
    for (int gz = 0; gz < 2; gz++) {
        uint8_t *buf;
        size_t len;
        assert_int_equal(pfr_profile_encode(p, gz, &buf, &len), 0);
        /* Every proper prefix is either a (smaller) valid profile or -EBADMSG; gzip prefixes
         * are always truncated streams. */
        for (size_t n = 0; n < len; n++) {
            pfr_profile *q = NULL;
            char err[128];
            int rc = pfr_profile_decode(buf, n, 0, &q, err, sizeof(err));
            assert_true(rc == 0 || rc == -EBADMSG);
            if (rc == 0) {
                assert_false(gz && n > 2);
                assert_true(pfr_profile_num_samples(q) <= pfr_profile_num_samples(p));
            } else {
                assert_true(err[0] != '\0');
                assert_null(q);
            }
            pfr_profile_free(q);
        }
        /* Flipping bytes never crashes either. */
        for (size_t n = 0; n < len; n++) {
            uint8_t save = buf[n];
            buf[n] ^= 0x5a;
            pfr_profile *q = NULL;
            int rc = pfr_profile_decode(buf, len, 0, &q, NULL, 0);
            assert_true(rc == 0 || rc == -EBADMSG);
            pfr_profile_free(q);
            buf[n] = save;
        }
        free(buf);
    }
    pfr_profile_free(p);
}

static void test_decode_garbage(void **state)
{
    (void)state;
    char err[128];
    pfr_profile *q = NULL;
    /* Empty input: no string table. */
    assert_int_equal(pfr_profile_decode(NULL, 0, 0, &q, err, sizeof(err)), -EBADMSG);
    /* A field claiming an enormous length. */
    const uint8_t huge_len[] = {0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    assert_int_equal(pfr_profile_decode(huge_len, sizeof(huge_len), 0, &q, err, sizeof(err)),
                     -EBADMSG);
    /* A packed repeated field claiming billions of ids in a few bytes. */
    const uint8_t huge_count[] = {0x12, 0x06, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
    assert_int_equal(pfr_profile_decode(huge_count, sizeof(huge_count), 0, &q, err, sizeof(err)),
                     -EBADMSG);
    const uint8_t junk[] = "this is not a profile at all";
    assert_int_equal(pfr_profile_decode(junk, sizeof(junk), 0, &q, err, sizeof(err)), -EBADMSG);
    /* Gzip magic followed by junk. */
    const uint8_t badgz[] = {0x1f, 0x8b, 0x08, 0x00, 0x01, 0x02, 0x03};
    assert_int_equal(pfr_profile_decode(badgz, sizeof(badgz), 0, &q, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "gzip"));
    /* Larger than max_bytes uncompressed. */
    pfr_profile *p = make_profile(0);
    uint8_t *buf;
    size_t len;
    assert_int_equal(pfr_profile_encode(p, false, &buf, &len), 0);
    assert_int_equal(pfr_profile_decode(buf, len, len - 1, &q, err, sizeof(err)), -EBADMSG);
    assert_int_equal(pfr_profile_decode(buf, len, len, &q, err, sizeof(err)), 0);
    pfr_profile_free(q);
    free(buf);
    /* Two gzip members back to back decode as their concatenation; junk after one fails. */
    assert_int_equal(pfr_profile_encode(p, true, &buf, &len), 0);
    uint8_t *two = malloc(len * 2 + 1);
    memcpy(two, buf, len);
    memcpy(two + len, buf, len);
    /* The second member is read: concatenated protobuf messages append their repeated fields,
     * so the ids of the second copy collide with the first. */
    assert_int_equal(pfr_profile_decode(two, 2 * len, 0, &q, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "duplicate"));
    two[len] = 'x';
    assert_int_equal(pfr_profile_decode(two, len + 1, 0, &q, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "trailing"));
    free(two);
    free(buf);
    pfr_profile_free(p);
}

static void test_gzip_bomb_bounded(void **state)
{
    (void)state;
    /* 64 MiB of zeros gzips to ~64 KiB; with a 1 MiB limit the decoder stops early. */
    size_t big = 64u << 20;
    uint8_t *zeros = calloc(1, big);
    assert_non_null(zeros);
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&zs, big);
    uint8_t *gz = malloc(cap);
    zs.next_in = zeros;
    zs.avail_in = (uInt)big;
    zs.next_out = gz;
    zs.avail_out = (uInt)cap;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    size_t gzlen = cap - zs.avail_out;
    deflateEnd(&zs);
    free(zeros);
    char err[128];
    pfr_profile *q = NULL;
    assert_int_equal(pfr_profile_decode(gz, gzlen, 1u << 20, &q, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "exceeds"));
    assert_null(q);
    free(gz);
}

static void test_value_overflow_wraps(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "t", "u");
    int64_t v = INT64_MAX;
    assert_int_equal(pfr_profile_add_sample(p, NULL, 0, &v, NULL, 0), 0);
    assert_int_equal(pfr_profile_add_sample(p, NULL, 0, &v, NULL, 0), 0);
    assert_int_equal(pfr_profile_sample_values(p, 0)[0], -2);
    pfr_profile_free(p);
}

/* ---- merge ---- */

static void test_merge(void **state)
{
    (void)state;
    pfr_profile *a = make_profile(0), *b = make_profile(3);
    /* A third profile interning strings in another order so indices differ. */
    pfr_profile *c = pfr_profile_new();
    pfr_profile_intern(c, "zzz");
    pfr_profile_intern(c, "main.main");
    pfr_profile_add_sample_type(c, "samples", "count");
    pfr_profile_add_sample_type(c, "cpu", "nanoseconds");
    pfr_profile_set_time(c, 1600000000000000000, 1);
    uint32_t loc = (uint32_t)pfr_profile_add_frame(c, "other", "o.c", 9);
    int64_t v[] = {7, 70};
    pfr_label lab[] = {{"comm", "app", 0, NULL}, {"pid", NULL, 42, NULL}};
    pfr_profile_add_sample(c, &loc, 1, v, lab, 2);

    pfr_profile *dst = pfr_profile_new();
    assert_int_equal(pfr_profile_merge(dst, a, 0), 0); /* dst takes a's types */
    assert_same_profile(dst, a);
    assert_int_equal(pfr_profile_merge(dst, b, 0), 0);
    assert_int_equal(pfr_profile_merge(dst, c, 0), 0);
    assert_int_equal(pfr_profile_num_sample_types(dst), 2);
    for (size_t t = 0; t < 2; t++)
        assert_int_equal(total(dst, t), total(a, t) + total(b, t) + total(c, t));
    /* a and b have the same stacks and labels: dst has a's samples plus c's one. */
    assert_int_equal(pfr_profile_num_samples(dst), pfr_profile_num_samples(a) + 1);
    assert_int_equal(pfr_profile_num_functions(dst), pfr_profile_num_functions(a) + 1);
    /* Time range covers all three. */
    assert_int_equal(pfr_profile_time_nanos(dst), 1600000000000000000);
    assert_int_equal(pfr_profile_time_nanos(dst) + pfr_profile_duration_nanos(dst),
                     pfr_profile_time_nanos(b) + pfr_profile_duration_nanos(b));
    const char *pt;
    assert_int_equal(pfr_profile_period(dst, &pt, NULL), 10000000);
    assert_string_equal(pt, "cpu");
    /* Each sample of b is found in dst with the summed value. */
    char buf[8192];
    for (size_t i = 0; i < pfr_profile_num_samples(b); i++) {
        stack_str(b, i, buf, sizeof(buf));
        long j = find_sample(dst, buf);
        long k = find_sample(a, buf);
        assert_true(j >= 0 && k >= 0);
        assert_int_equal(pfr_profile_sample_values(dst, (size_t)j)[1],
                         pfr_profile_sample_values(a, (size_t)k)[1] +
                             pfr_profile_sample_values(b, i)[1]);
    }
    /* The merged profile survives a round trip. */
    pfr_profile *q = roundtrip(dst, true);
    assert_same_profile(dst, q);
    pfr_profile_free(q);

    /* DROP_LABELS: samples differing only by labels merge into one. */
    pfr_profile *nolab = pfr_profile_new();
    assert_int_equal(pfr_profile_merge(nolab, a, PFR_MERGE_DROP_LABELS), 0);
    assert_int_equal(pfr_profile_merge(nolab, b, PFR_MERGE_DROP_LABELS), 0);
    /* a has 4 samples: two share the stack s2 with different labels. */
    assert_int_equal(pfr_profile_num_samples(nolab), 3);
    for (size_t i = 0; i < pfr_profile_num_samples(nolab); i++) {
        const pfr_label *l;
        assert_int_equal(pfr_profile_sample_labels(nolab, i, &l), 0);
    }
    assert_int_equal(total(nolab, 1), total(a, 1) + total(b, 1));
    pfr_profile_free(nolab);

    pfr_profile_free(dst);
    pfr_profile_free(a);
    pfr_profile_free(b);
    pfr_profile_free(c);
}

static void test_merge_mismatch(void **state)
{
    (void)state;
    pfr_profile *a = make_profile(0);
    pfr_profile *b = pfr_profile_new();
    pfr_profile_add_sample_type(b, "samples", "count");
    pfr_profile_add_sample_type(b, "cpu", "microseconds"); /* unit differs */
    pfr_profile *c = pfr_profile_new();
    pfr_profile_add_sample_type(c, "samples", "count");
    pfr_profile *dst = pfr_profile_new();
    assert_int_equal(pfr_profile_merge(dst, a, 0), 0);
    size_t n = pfr_profile_num_samples(dst);
    assert_int_equal(pfr_profile_merge(dst, b, 0), -EINVAL);
    assert_int_equal(pfr_profile_merge(dst, c, 0), -EINVAL);
    assert_int_equal(pfr_profile_merge(dst, dst, 0), -EINVAL);
    /* A refused merge leaves dst usable and unchanged. */
    assert_int_equal(pfr_profile_error(dst), 0);
    assert_int_equal(pfr_profile_num_samples(dst), n);
    assert_int_equal(pfr_profile_merge(dst, a, 0), 0);
    assert_int_equal(total(dst, 1), 2 * total(a, 1));
    pfr_profile_free(dst);
    pfr_profile_free(a);
    pfr_profile_free(b);
    pfr_profile_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intern_dedup),
        cmocka_unit_test(test_function_location_dedup),
        cmocka_unit_test(test_hashed_and_ids),
        cmocka_unit_test(test_add_sample_sums),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_frames_inline),
        cmocka_unit_test(test_misuse_sticky),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_decode_remaps_ids),
        cmocka_unit_test(test_decode_wire_forms),
        cmocka_unit_test(test_decode_truncated),
        cmocka_unit_test(test_decode_garbage),
        cmocka_unit_test(test_gzip_bomb_bounded),
        cmocka_unit_test(test_value_overflow_wraps),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
