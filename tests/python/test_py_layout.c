/* The 3.11 row of the layout table (py_layout.c) against CPython 3.11's own headers (Debian's
 * libpython3.11-dev): every offset the sampler and the reader use, by offsetof. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>
#include <stdio.h>

#include "py_layout.h"

static int bad;

static void check(const char *what, unsigned table, size_t header)
{
    if (table != header) {
        fprintf(stderr, "3.11 %s: table says %u, the headers %zu\n", what, table, header);
        bad++;
    }
}

#define CHECK(field, expr) check(#field, l->field, (expr))

int main(void)
{
    const pfr_py_layout *l = pfr_py_layout_find(PY_MAJOR_VERSION, PY_MINOR_VERSION);
    if (!l || PY_MINOR_VERSION != 11) {
        fprintf(stderr, "these headers are CPython %d.%d, not 3.11\n", PY_MAJOR_VERSION,
                PY_MINOR_VERSION);
        return 1;
    }
    CHECK(rt_interp_head, offsetof(_PyRuntimeState, interpreters.head));
    CHECK(is_threads_head, offsetof(PyInterpreterState, threads.head));
    CHECK(ts_next, offsetof(PyThreadState, next));
    CHECK(ts_tid, offsetof(PyThreadState, native_thread_id));
    CHECK(ts_frame, offsetof(PyThreadState, cframe));
    CHECK(cf_frame, offsetof(_PyCFrame, current_frame));
    CHECK(f_code, offsetof(_PyInterpreterFrame, f_code));
    CHECK(f_previous, offsetof(_PyInterpreterFrame, previous));
    CHECK(f_instr, offsetof(_PyInterpreterFrame, prev_instr));
    CHECK(f_owner, offsetof(_PyInterpreterFrame, owner));
    CHECK(f_is_entry, offsetof(_PyInterpreterFrame, is_entry));
    CHECK(co_filename, offsetof(PyCodeObject, co_filename));
    CHECK(co_name, offsetof(PyCodeObject, co_name));
    CHECK(co_qualname, offsetof(PyCodeObject, co_qualname));
    CHECK(co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
    CHECK(co_linetable, offsetof(PyCodeObject, co_linetable));
    CHECK(co_code, offsetof(PyCodeObject, co_code_adaptive));
    CHECK(bytes_size, offsetof(PyVarObject, ob_size));
    CHECK(bytes_data, offsetof(PyBytesObject, ob_sval));
    CHECK(str_length, offsetof(PyASCIIObject, length));
    CHECK(str_state, offsetof(PyASCIIObject, state));
    CHECK(str_ascii_data, sizeof(PyASCIIObject));
    CHECK(str_compact_data, sizeof(PyCompactUnicodeObject));
    CHECK(ob_type, offsetof(PyObject, ob_type));
    /* the sampler reads a frame's fields from one copy of PFR_PY_FRAME_READ bytes */
    if (offsetof(_PyInterpreterFrame, owner) >= 80) {
        fprintf(stderr, "3.11 frame fields past the sampler's read\n");
        bad++;
    }
    printf("3.11 layout: %s\n", bad ? "WRONG" : "matches the headers");
    return bad ? 1 : 0;
}
