/* The per-version layouts (py_layout.h). Offsets for x86-64, from each version's headers; the
 * rows are checked against the installed headers by tests/python/test_py_layout.c. 3.13's comes
 * from the process (_Py_DebugOffsets). */
#include "py_layout.h"

#include "cpu_profile.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* 3.8-3.10: Include/internal/pycore_pystate.h (3.8: _PyRuntimeState's interpreters.head after
 * the init flags and finalizing; PyInterpreterState: next, then tstate_head; 3.9 and 3.10 moved
 * both into pycore_runtime.h and pycore_interp.h, same offsets), cpython/pystate.h (prev, next,
 * interp, frame; thread_id, pthread_self(), there being no native_thread_id before 3.11),
 * frameobject.h (3.10: cpython/frameobject.h; PyFrameObject: PyObject_VAR_HEAD, f_back, f_code,
 * ..., f_lasti: 3.10 dropped f_stacktop for an int f_stackdepth, so f_lasti is 8 bytes earlier),
 * cpython/code.h (PyCodeObject: no co_qualname, co_name instead; co_code a bytes object;
 * co_lnotab, in 3.10 co_linetable, at the same place), unicodeobject.h (wstr: PyASCIIObject is
 * 48 bytes, PyCompactUnicodeObject 72). Checked against pyenv's headers by python_layout where
 * they are installed. */
#define PFR_PY_OLD_ROW(mn, lasti, shift, linekind)                                                 \
    {                                                                                              \
        .major = 3, .minor = (mn), .rt_interp_head = 32, .is_threads_head = 8, .ts_next = 8,       \
        .ts_tid = 176, .tid_kind = PFR_PY_TID_PTHREAD, .ts_frame = 24, .cf_frame = PFR_PY_NONE,    \
        .frame_kind = PFR_PY_FRAMES_OBJECT, .f_code = 32, .f_previous = 24,                        \
        .f_instr = PFR_PY_NONE, .f_owner = PFR_PY_NONE, .f_lasti = (lasti),                        \
        .lasti_shift = (shift), .f_is_entry = PFR_PY_NONE, .owner_cstack = 0xff,                   \
        .co_filename = 104, .co_name = 112, .co_qualname = 112, .co_firstlineno = 40,              \
        .co_linetable = 120, .co_code = PFR_PY_NONE, .co_code_obj = 48, .co_header = 128,          \
        .lines = (linekind), .bytes_size = 16, .bytes_data = 32, .str_length = 16,                 \
        .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72, .ob_type = 8,               \
    }

static const pfr_py_layout layouts[] = {
    PFR_PY_OLD_ROW(8, 104, 1, PFR_PY_LINES_LNOTAB),
    PFR_PY_OLD_ROW(9, 104, 1, PFR_PY_LINES_LNOTAB),
    PFR_PY_OLD_ROW(10, 96, 0, PFR_PY_LINES_310),
    /* 3.11: Include/internal/pycore_runtime.h (interpreters.head after _finalizing and the
     * main-thread fields), pycore_interp.h (threads.head after next and id), cpython/pystate.h
     * (next, interp, ..., cframe; thread_id, native_thread_id), pycore_frame.h
     * (_PyInterpreterFrame: func, globals, builtins, locals, f_code, frame_obj, previous,
     * prev_instr, stacktop, is_entry, owner), cpython/code.h (_PyCode_DEF). */
    {
        .major = 3,
        .minor = 11,
        .rt_interp_head = 40,
        .is_threads_head = 16,
        .ts_next = 8,
        .ts_tid = 160,
        .tid_kind = PFR_PY_TID_NATIVE,
        .ts_frame = 56,
        .cf_frame = 8,
        .frame_kind = PFR_PY_FRAMES_INTERP,
        .f_code = 32,
        .f_previous = 48,
        .f_instr = 56,
        .f_owner = 69,
        .f_lasti = PFR_PY_NONE,
        .f_is_entry = 68,
        .owner_cstack = 0xff,
        .co_filename = 112,
        .co_name = 120,
        .co_qualname = 128,
        .co_firstlineno = 72,
        .co_linetable = 136,
        .co_code = 184,
        .co_code_obj = PFR_PY_NONE,
        .co_header = 184,
        .lines = PFR_PY_LINES_311,
        .bytes_size = 16,
        .bytes_data = 32,
        .str_length = 16,
        .str_state = 32,
        .str_ascii_data = 48,
        .str_compact_data = 72,
        .ob_type = 8,
    },
    /* 3.12: pycore_runtime.h (as 3.11 up to interpreters.head), pycore_interp.h (threads.head
     * after the interpreter's _gil and ceval fields), cpython/pystate.h (cframe; native_thread_id
     * moved up: the recursion counters changed), pycore_frame.h (_PyInterpreterFrame starts
     * with f_code and previous; no is_entry: each activation of the interpreter pushes a frame
     * owned by FRAME_OWNED_BY_CSTACK = 3 under its first Python frame), cpython/code.h
     * (co_firstlineno moved up, co_code_adaptive after the monitoring fields), unicodeobject.h
     * (no wstr: PyASCIIObject is 40 bytes, PyCompactUnicodeObject 56). Checked against pyenv's
     * 3.12 headers when present (python_layout). */
    {
        .major = 3,
        .minor = 12,
        .rt_interp_head = 40,
        .is_threads_head = 72,
        .ts_next = 8,
        .ts_tid = 144,
        .tid_kind = PFR_PY_TID_NATIVE,
        .ts_frame = 56,
        .cf_frame = 0,
        .frame_kind = PFR_PY_FRAMES_INTERP,
        .f_code = 0,
        .f_previous = 8,
        .f_instr = 56,
        .f_owner = 70,
        .f_lasti = PFR_PY_NONE,
        .f_is_entry = PFR_PY_NONE,
        .owner_cstack = 3,
        .co_filename = 112,
        .co_name = 120,
        .co_qualname = 128,
        .co_firstlineno = 68,
        .co_linetable = 136,
        .co_code = 192,
        .co_code_obj = PFR_PY_NONE,
        .co_header = 192,
        .lines = PFR_PY_LINES_311,
        .bytes_size = 16,
        .bytes_data = 32,
        .str_length = 16,
        .str_state = 32,
        .str_ascii_data = 40,
        .str_compact_data = 56,
        .ob_type = 8,
    },
};

const pfr_py_layout *pfr_py_layout_find(unsigned major, unsigned minor)
{
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
        if (layouts[i].major == major && layouts[i].minor == minor)
            return &layouts[i];
    return NULL;
}

/* _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h), as 64-bit words from its start:
 * where each field pfr uses is. The struct changes between minor versions (3.14 reorders it):
 * only 3.13's is read. */
enum {
    DO_VERSION = 1,
    DO_FREE_THREADED = 2,
    DO_RT_INTERP_HEAD = 5,
    DO_IS_THREADS_HEAD = 9,
    DO_TS_NEXT = 21,
    DO_TS_CURRENT_FRAME = 23,
    DO_TS_NATIVE_THREAD_ID = 25,
    DO_F_PREVIOUS = 29,
    DO_F_EXECUTABLE = 30,
    DO_F_INSTR_PTR = 31,
    DO_F_OWNER = 33,
    DO_CO_FILENAME = 35,
    DO_CO_NAME = 36,
    DO_CO_QUALNAME = 37,
    DO_CO_LINETABLE = 38,
    DO_CO_FIRSTLINENO = 39,
    DO_CO_CODE = 43,
    DO_OB_TYPE = 45,
    DO_BYTES_SIZE = 65,
    DO_BYTES_DATA = 66,
    DO_STR_STATE = 68,
    DO_STR_LENGTH = 69,
    DO_STR_ASCII_SIZE = 70,
    DO_WORDS = 73,
};

static uint64_t word(const uint8_t *b, unsigned i)
{
    uint64_t v;
    memcpy(&v, b + (size_t)i * 8, sizeof(v));
    return v;
}

/* Whether a field of width bytes at v lies within room bytes. */
static bool fits(uint64_t v, uint64_t room, uint64_t width)
{
    return v < room && v + width <= room;
}

int pfr_py_layout_from_debug(const uint8_t *b, size_t len, pfr_py_layout *out)
{
    if (len < PFR_PY_DEBUG_OFFSETS_SIZE || memcmp(b, "xdebugpy", 8) != 0)
        return -EINVAL;
    uint64_t version = word(b, DO_VERSION);
    if ((version >> 24) != 3 || ((version >> 16) & 0xff) != 13)
        return -ENOTSUP;
    if (word(b, DO_FREE_THREADED))
        return -ENOTSUP; /* another object header: not walked */
    /* every offset within what its reader copies: a frame's fields within the sampler's frame
     * read (80 bytes), a code object's, str's and bytes' header fields within the header the
     * reader copies (up to the first instruction, the characters, the bytes: at most 256, 128
     * and 64), the runtime's and thread state's within 16 bits */
    const uint64_t frame = 80, wide = 0xfff0, code = word(b, DO_CO_CODE);
    const uint64_t ascii = word(b, DO_STR_ASCII_SIZE), bytes = word(b, DO_BYTES_DATA);
    /* (no sums of read values: an ascii size of 2^64 - 8 plus 16 wrapped past the bound) */
    if (code > 256 || ascii < 8 || ascii > 128 - 16 || bytes > 64 || bytes < 8)
        return -ERANGE;
    static const struct {
        unsigned word;
        uint8_t width;
        uint8_t room; /* 0: wide, 1: frame, 2: code, 3: str (ascii), 4: bytes */
    } fields[] = {
        {DO_RT_INTERP_HEAD, 8, 0},
        {DO_IS_THREADS_HEAD, 8, 0},
        {DO_TS_NEXT, 8, 0},
        {DO_TS_CURRENT_FRAME, 8, 0},
        {DO_TS_NATIVE_THREAD_ID, 8, 0},
        {DO_F_PREVIOUS, 8, 1},
        {DO_F_EXECUTABLE, 8, 1},
        {DO_F_INSTR_PTR, 8, 1},
        {DO_F_OWNER, 1, 1},
        {DO_CO_FILENAME, 8, 2},
        {DO_CO_NAME, 8, 2},
        {DO_CO_QUALNAME, 8, 2},
        {DO_CO_LINETABLE, 8, 2},
        {DO_CO_FIRSTLINENO, 4, 2},
        {DO_OB_TYPE, 8, 4},
        {DO_OB_TYPE, 8, 2},
        {DO_OB_TYPE, 8, 3},
        {DO_STR_STATE, 4, 3},
        {DO_STR_LENGTH, 8, 3},
        {DO_BYTES_SIZE, 8, 4},
        {DO_BYTES_SIZE, 8, 2},
    };
    const uint64_t rooms[] = {wide, frame, code, ascii, bytes};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (!fits(word(b, fields[i].word), rooms[fields[i].room], fields[i].width))
            return -ERANGE;
    *out = (pfr_py_layout){
        .major = 3,
        .minor = 13,
        .rt_interp_head = (uint16_t)word(b, DO_RT_INTERP_HEAD),
        .is_threads_head = (uint16_t)word(b, DO_IS_THREADS_HEAD),
        .ts_next = (uint16_t)word(b, DO_TS_NEXT),
        .ts_tid = (uint16_t)word(b, DO_TS_NATIVE_THREAD_ID),
        .tid_kind = PFR_PY_TID_NATIVE,
        .ts_frame = (uint16_t)word(b, DO_TS_CURRENT_FRAME),
        .cf_frame = PFR_PY_NONE,
        .frame_kind = PFR_PY_FRAMES_INTERP,
        .f_code = (uint16_t)word(b, DO_F_EXECUTABLE),
        .f_previous = (uint16_t)word(b, DO_F_PREVIOUS),
        .f_instr = (uint16_t)word(b, DO_F_INSTR_PTR),
        .f_owner = (uint16_t)word(b, DO_F_OWNER),
        .f_lasti = PFR_PY_NONE,
        .f_is_entry = PFR_PY_NONE,
        .owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK (pycore_frame.h): not in the offsets */
        .co_filename = (uint16_t)word(b, DO_CO_FILENAME),
        .co_name = (uint16_t)word(b, DO_CO_NAME),
        .co_qualname = (uint16_t)word(b, DO_CO_QUALNAME),
        .co_firstlineno = (uint16_t)word(b, DO_CO_FIRSTLINENO),
        .co_linetable = (uint16_t)word(b, DO_CO_LINETABLE),
        .co_code = (uint16_t)word(b, DO_CO_CODE),
        .co_code_obj = PFR_PY_NONE,
        .co_header = (uint16_t)word(b, DO_CO_CODE),
        .lines = PFR_PY_LINES_311,
        .bytes_size = (uint16_t)word(b, DO_BYTES_SIZE),
        .bytes_data = (uint16_t)word(b, DO_BYTES_DATA),
        .str_length = (uint16_t)word(b, DO_STR_LENGTH),
        .str_state = (uint16_t)word(b, DO_STR_STATE),
        .str_ascii_data = (uint16_t)word(b, DO_STR_ASCII_SIZE),
        /* PyCompactUnicodeObject: PyASCIIObject, then utf8_length and utf8 */
        .str_compact_data = (uint16_t)(word(b, DO_STR_ASCII_SIZE) + 16),
        .ob_type = (uint16_t)word(b, DO_OB_TYPE),
    };
    return 0;
}
