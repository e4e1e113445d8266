/* Units of pfr_python: versions from file names, the line-table decoders (3.11+, 3.10, 3.8/3.9)
 * on hand-made tables (CPython's own tables are checked by py_lines_check), the layout table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pfr_python.h"
#include "py_layout.h"
#include "py_lines.h"

static void versions_from_names(void **state)
{
    (void)state;
    unsigned ma = 0, mi = 0;
    assert_int_equal(pfr_py_version_from_name("/usr/bin/python3.11", &ma, &mi), 0);
    assert_int_equal(ma, 3);
    assert_int_equal(mi, 11);
    assert_int_equal(pfr_py_version_from_name("/opt/lib/libpython3.8.so.1.0", &ma, &mi), 0);
    assert_int_equal(mi, 8);
    assert_int_equal(pfr_py_version_from_name("libpython3.13t.so", &ma, &mi), 0);
    assert_int_equal(mi, 13);
    assert_int_equal(pfr_py_version_from_name("/usr/bin/python3.11d", &ma, &mi), 0);
    assert_int_equal(pfr_py_version_from_name("/usr/bin/python3", &ma, &mi), -ENOENT);
    assert_int_equal(pfr_py_version_from_name("/usr/bin/python3.11-config", &ma, &mi), -ENOENT);
    assert_int_equal(pfr_py_version_from_name("/usr/bin/python2.7", &ma, &mi), -ENOENT);
    assert_int_equal(pfr_py_version_from_name("/x/libpython3.11.a", &ma, &mi), -ENOENT);
    assert_int_equal(pfr_py_version_from_name("/usr/bin/python3.99999999", &ma, &mi), -ENOENT);
    assert_int_equal(pfr_py_version_from_name("", &ma, &mi), -ENOENT);
}

/* Entry heads: 0x80 | form << 3 | (units - 1). */
#define HEAD(form, units) (uint8_t)(0x80 | (form) << 3 | ((units)-1))

static void lines_forms(void **state)
{
    (void)state;
    const uint8_t tab[] = {
        HEAD(13, 2), 0x02,                          /* no columns: +1 -> 11, units 0-1 */
        HEAD(0, 3),  0x05,                          /* short form: same line, units 2-4 */
        HEAD(12, 1), 4,           9,                /* one-line form: +2 -> 13, unit 5 */
        HEAD(15, 2),                                /* no location, units 6-7 */
        HEAD(14, 1), 0x03,        0x00, 0x01, 0x05, /* long form: -1 -> 12, unit 8 */
        HEAD(13, 8), 0x40 | 0x08, 0x01,             /* two-byte varint: +(8 | 1 << 6) / 2 = +36 */
    };
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 0), 11);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 1), 11);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 4), 11);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 5), 13);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 6), -1);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 7), -1);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 8), 12);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 9), 48);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 16), 48);
    assert_int_equal(pfr_py_line_311(tab, sizeof(tab), 10, 17), -2); /* past the table */
}

static void lines_malformed(void **state)
{
    (void)state;
    const uint8_t cut[] = {HEAD(13, 1)}; /* its varint missing */
    const uint8_t not_head[] = {0x05};   /* an entry without bit 7 */
    const uint8_t long_varint[] = {HEAD(13, 1), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
    const uint8_t into_next[] = {HEAD(12, 1), 4, HEAD(0, 1), 0}; /* a column byte is a head */
    assert_int_equal(pfr_py_line_311(cut, sizeof(cut), 1, 0), -2);
    assert_int_equal(pfr_py_line_311(not_head, sizeof(not_head), 1, 0), -2);
    assert_int_equal(pfr_py_line_311(long_varint, sizeof(long_varint), 1, 0), -2);
    assert_int_equal(pfr_py_line_311(into_next, sizeof(into_next), 1, 0), -2);
    assert_int_equal(pfr_py_line_311(NULL, 0, 1, 0), -2);
    /* a line driven out of range by its deltas */
    const uint8_t far[] = {HEAD(14, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x3f, 0, 0, 0};
    assert_int_equal(pfr_py_line_311(far, sizeof(far), INT32_MAX - 1, 0), -2);
}

/* 3.10's co_linetable: (bytecode bytes, line delta) pairs; -128: no line. */
static void lines_310(void **state)
{
    (void)state;
    const uint8_t tab[] = {
        0,   2,    /* an empty range: the line moves to 12, no code */
        6,   0,    /* bytes 0-5 (units 0-2): 12 */
        4,   0x80, /* bytes 6-9 (units 3-4): no line (the line stays 12) */
        2,   0xff, /* bytes 10-11 (unit 5): -1 -> 11 */
        254, 0,    /* bytes 12-265 (units 6-132): 11, a range over two pairs */
        4,   0,    /*   bytes 266-269 (units 133-134) */
        0,   127,  /* a line jump over two pairs: +127 */
        2,   3,    /*   bytes 270-271 (unit 135): +3 -> 141 */
        1,         /* an odd last byte: ignored */
    };
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 0), 12);
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 2), 12);
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 3), -1);
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 4), -1);
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 5), 11);
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 6), 11);
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 134), 11);
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 135), 141);
    assert_int_equal(pfr_py_line_310(tab, sizeof(tab), 10, 136), -2); /* past the table */
    assert_int_equal(pfr_py_line_310(tab, 1, 10, 0), -2);             /* no whole pair */
    assert_int_equal(pfr_py_line_310(NULL, 0, 10, 0), -2);
    const uint8_t below[] = {2, 0xf6}; /* -10 from 5: a negative line is none */
    assert_int_equal(pfr_py_line_310(below, sizeof(below), 5, 0), -1);
    assert_int_equal(pfr_py_line(PFR_PY_LINES_310, tab, sizeof(tab), 10, 5), 11);
}

/* 3.8/3.9's co_lnotab: (bytecode increment, line increment) pairs, the increments applying to
 * the instructions at and past the summed offset. */
static void lines_lnotab(void **state)
{
    (void)state;
    const uint8_t tab[] = {
        0,   1,    /* from byte 0: 21 */
        6,   2,    /* from byte 6 (unit 3): 23 */
        4,   0xfd, /* from byte 10 (unit 5): -3 -> 20 */
        255, 0,    /* an offset over two pairs: byte 265 + 5 ... */
        5,   7,    /* ... from byte 270 (unit 135): 27 */
    };
    assert_int_equal(pfr_py_line_lnotab(tab, sizeof(tab), 20, 0), 21);
    assert_int_equal(pfr_py_line_lnotab(tab, sizeof(tab), 20, 2), 21);
    assert_int_equal(pfr_py_line_lnotab(tab, sizeof(tab), 20, 3), 23);
    assert_int_equal(pfr_py_line_lnotab(tab, sizeof(tab), 20, 5), 20);
    assert_int_equal(pfr_py_line_lnotab(tab, sizeof(tab), 20, 134), 20);
    assert_int_equal(pfr_py_line_lnotab(tab, sizeof(tab), 20, 135), 27);
    assert_int_equal(pfr_py_line_lnotab(tab, sizeof(tab), 20, 60000), 27); /* to the end */
    assert_int_equal(pfr_py_line_lnotab(tab, 0, 20, 4), 20); /* no pairs: the first line */
    assert_int_equal(pfr_py_line_lnotab(NULL, 0, 20, 0), -2);
    assert_int_equal(pfr_py_line(PFR_PY_LINES_LNOTAB, tab, sizeof(tab), 20, 3), 23);
    assert_int_equal(pfr_py_line(99, tab, sizeof(tab), 20, 3), -2);
}

static void layouts(void **state)
{
    (void)state;
    const pfr_py_layout *l = pfr_py_layout_find(3, 11);
    assert_non_null(l);
    assert_int_equal(l->lines, PFR_PY_LINES_311);
    assert_non_null(pfr_py_layout_find(3, 12));
    assert_int_equal(pfr_py_layout_find(3, 12)->owner_cstack, 3);
    assert_null(pfr_py_layout_find(3, 13)); /* read from the process */
    for (unsigned minor = 8; minor <= 10; minor++) {
        const pfr_py_layout *o = pfr_py_layout_find(3, minor);
        assert_non_null(o);
        assert_int_equal(o->frame_kind, PFR_PY_FRAMES_OBJECT);
        assert_int_equal(o->tid_kind, PFR_PY_TID_PTHREAD);
        assert_int_equal(o->lines, minor == 10 ? PFR_PY_LINES_310 : PFR_PY_LINES_LNOTAB);
        assert_int_equal(o->lasti_shift, minor == 10 ? 0 : 1);
        assert_true(o->f_lasti + 4 <= PFR_PY_OBJ_READ && o->f_code + 8 <= PFR_PY_OBJ_READ);
        assert_int_equal(o->co_qualname, o->co_name); /* no co_qualname before 3.11 */
    }
    assert_int_equal(l->frame_kind, PFR_PY_FRAMES_INTERP);
    assert_null(pfr_py_layout_find(3, 7));
    assert_null(pfr_py_layout_find(3, 99));
    assert_null(pfr_py_layout_find(2, 7));
}

/* A 3.13 _Py_DebugOffsets as CPython 3.13.0 on x86-64 writes it (the fields pfr reads; the
 * words by their place in the struct, Include/internal/pycore_runtime.h). */
static void debug_offsets_313(uint64_t w[73])
{
    memset(w, 0, 73 * 8);
    memcpy(&w[0], "xdebugpy", 8);
    w[1] = 0x030d00f0;
    w[5] = 632;  /* interpreters_head */
    w[9] = 7344; /* threads_head */
    w[21] = 8;   /* thread next */
    w[23] = 72;  /* current_frame */
    w[25] = 160; /* native_thread_id */
    w[29] = 8;   /* previous */
    w[30] = 0;   /* executable */
    w[31] = 56;  /* instr_ptr */
    w[33] = 70;  /* owner */
    w[35] = 112, w[36] = 120, w[37] = 128, w[38] = 136, w[39] = 68, w[43] = 200;
    w[45] = 8;                          /* ob_type */
    w[65] = 16, w[66] = 32;             /* bytes */
    w[68] = 32, w[69] = 16, w[70] = 40; /* str state, length, PyASCIIObject's size */
}

static void layout_from_debug(void **state)
{
    (void)state;
    uint64_t w[73];
    pfr_py_layout l;
    debug_offsets_313(w);
    assert_int_equal(pfr_py_layout_from_debug((uint8_t *)w, sizeof(w), &l), 0);
    assert_int_equal(l.minor, 13);
    assert_int_equal(l.is_threads_head, 7344);
    assert_int_equal(l.ts_frame, 72);
    assert_int_equal(l.cf_frame, PFR_PY_NONE);
    assert_int_equal(l.f_instr, 56);
    assert_int_equal(l.co_code, 200);
    assert_int_equal(l.str_compact_data, 56);
    /* refused, never trusted */
    assert_int_equal(pfr_py_layout_from_debug((uint8_t *)w, sizeof(w) - 1, &l), -EINVAL);
    w[0] ^= 1;
    assert_int_equal(pfr_py_layout_from_debug((uint8_t *)w, sizeof(w), &l), -EINVAL);
    debug_offsets_313(w);
    w[1] = 0x030e00f0; /* 3.14 moved the fields */
    assert_int_equal(pfr_py_layout_from_debug((uint8_t *)w, sizeof(w), &l), -ENOTSUP);
    debug_offsets_313(w);
    w[2] = 1; /* free-threaded */
    assert_int_equal(pfr_py_layout_from_debug((uint8_t *)w, sizeof(w), &l), -ENOTSUP);
    static const struct {
        unsigned word;
        uint64_t value;
    } bad[] = {
        {33, 80},       /* the owner past the sampler's frame read */
        {31, 76},       /* instr_ptr across its end */
        {43, 257},      /* the first instruction past the code header read */
        {37, 196},      /* qualname past the first instruction */
        {9, 1u << 16},  /* beyond 16 bits */
        {5, ~0ull - 3}, /* wrapping */
        {70, 120},      /* str header past 128 */
        {66, 4},        /* bytes data before the header's end */
        {45, 60},       /* ob_type past the bytes header */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        debug_offsets_313(w);
        w[bad[i].word] = bad[i].value;
        assert_int_equal(pfr_py_layout_from_debug((uint8_t *)w, sizeof(w), &l), -ERANGE);
    }
}

static void frame_encoding(void **state)
{
    (void)state;
    uint64_t v = pfr_py_frame_make(0x7f12345678f8ull, 77, 1);
    assert_true(pfr_py_frame_is(v));
    assert_int_equal(pfr_py_frame_code(v), 0x7f12345678f8ull);
    assert_int_equal(pfr_py_frame_unit1(v), 77);
    assert_true(pfr_py_frame_entry(v));
    assert_false(pfr_py_frame_entry(pfr_py_frame_make(0x1000, 1, 0)));
    assert_int_equal(pfr_py_frame_unit1(pfr_py_frame_make(0x1000, 1u << 20, 0)), 0xffff);
    /* no user address (below 2^56) nor kernel address reads as a frame */
    assert_false(pfr_py_frame_is(0x00ffffffffffffffull));
    assert_false(pfr_py_frame_is(0xffffffff81000000ull));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(versions_from_names), cmocka_unit_test(lines_forms),
        cmocka_unit_test(lines_malformed),     cmocka_unit_test(lines_310),
        cmocka_unit_test(lines_lnotab),        cmocka_unit_test(layouts),
        cmocka_unit_test(frame_encoding),      cmocka_unit_test(layout_from_debug),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
