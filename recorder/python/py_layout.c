/* The per-version layouts (py_layout.h). Offsets for x86-64, from each version's headers; the
 * 3.11 row is checked against the installed headers by tests/python/test_py_layout.c. */
#include "py_layout.h"

#include <stddef.h>

static const pfr_py_layout layouts[] = {
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
        .f_code = 32,
        .f_previous = 48,
        .f_instr = 56,
        .f_owner = 69,
        .f_is_entry = 68,
        .owner_cstack = 0xff,
        .co_filename = 112,
        .co_name = 120,
        .co_qualname = 128,
        .co_firstlineno = 72,
        .co_linetable = 136,
        .co_code = 184,
        .lines = PFR_PY_LINES_311,
        .bytes_size = 16,
        .bytes_data = 32,
        .str_length = 16,
        .str_state = 32,
        .str_ascii_data = 48,
        .str_compact_data = 72,
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
