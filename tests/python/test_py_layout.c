/* A row of the layout table (py_layout.c) against CPython's own headers: every offset the
 * sampler and the reader use, by offsetof. Built against Debian's libpython3.11-dev always, and
 * against other versions' headers when the build finds them (tests/python/CMakeLists.txt:
 * pyenv's 3.8, 3.9, 3.10, 3.12, 3.13). For 3.13, whose layout is read from the process, the
 * _Py_DebugOffsets a 3.13 interpreter publishes is made here from its headers, field by field, and
 * read back with pfr_py_layout_from_debug. */
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_MINOR_VERSION >= 11
#include <internal/pycore_frame.h>
#else
#include <frameobject.h>
#endif
#if PY_MINOR_VERSION >= 9
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#else
#include <internal/pycore_pystate.h>
#endif
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cpu_profile.h"
#include "py_layout.h"

static int bad;

static void check(const char *what, unsigned table, size_t header)
{
    if (table != header) {
        fprintf(stderr, "%d.%d %s: table says %u, the headers %zu\n", PY_MAJOR_VERSION,
                PY_MINOR_VERSION, what, table, header);
        bad++;
    }
}

#define CHECK(field, expr) check(#field, l->field, (expr))

#if PY_MINOR_VERSION == 13
/* What a 3.13 interpreter writes at the start of _PyRuntime, from the headers. */
static const pfr_py_layout *from_debug(pfr_py_layout *own)
{
    _Py_DebugOffsets d;
    memset(&d, 0, sizeof(d));
    memcpy(d.cookie, "xdebugpy", 8);
    d.version = PY_VERSION_HEX;
    d.runtime_state.interpreters_head = offsetof(_PyRuntimeState, interpreters.head);
    d.interpreter_state.threads_head = offsetof(PyInterpreterState, threads.head);
    d.thread_state.next = offsetof(PyThreadState, next);
    d.thread_state.current_frame = offsetof(PyThreadState, current_frame);
    d.thread_state.native_thread_id = offsetof(PyThreadState, native_thread_id);
    d.interpreter_frame.previous = offsetof(_PyInterpreterFrame, previous);
    d.interpreter_frame.executable = offsetof(_PyInterpreterFrame, f_executable);
    d.interpreter_frame.instr_ptr = offsetof(_PyInterpreterFrame, instr_ptr);
    d.interpreter_frame.owner = offsetof(_PyInterpreterFrame, owner);
    d.code_object.filename = offsetof(PyCodeObject, co_filename);
    d.code_object.name = offsetof(PyCodeObject, co_name);
    d.code_object.qualname = offsetof(PyCodeObject, co_qualname);
    d.code_object.linetable = offsetof(PyCodeObject, co_linetable);
    d.code_object.firstlineno = offsetof(PyCodeObject, co_firstlineno);
    d.code_object.co_code_adaptive = offsetof(PyCodeObject, co_code_adaptive);
    d.pyobject.ob_type = offsetof(PyObject, ob_type);
    d.bytes_object.ob_size = offsetof(PyVarObject, ob_size);
    d.bytes_object.ob_sval = offsetof(PyBytesObject, ob_sval);
    d.unicode_object.state = offsetof(PyASCIIObject, state);
    d.unicode_object.length = offsetof(PyASCIIObject, length);
    d.unicode_object.asciiobject_size = sizeof(PyASCIIObject);
    if (sizeof(d) != PFR_PY_DEBUG_OFFSETS_SIZE) {
        fprintf(stderr, "_Py_DebugOffsets is %zu bytes, pfr reads %d\n", sizeof(d),
                PFR_PY_DEBUG_OFFSETS_SIZE);
        return NULL;
    }
    int rc = pfr_py_layout_from_debug((const uint8_t *)&d, sizeof(d), own);
    if (rc) {
        fprintf(stderr, "pfr_py_layout_from_debug refused the headers' offsets: %d\n", rc);
        return NULL;
    }
    return own;
}
#endif

#if PY_MINOR_VERSION <= 10
/* 3.8-3.10: PyFrameObjects linked by f_back, the thread named by thread_id, the code's own
 * co_code, co_name for a qualified name. */
static void check_objects(const pfr_py_layout *l)
{
    CHECK(is_threads_head, offsetof(PyInterpreterState, tstate_head));
    CHECK(ts_tid, offsetof(PyThreadState, thread_id));
    CHECK(tid_kind, PFR_PY_TID_PTHREAD);
    CHECK(ts_frame, offsetof(PyThreadState, frame));
    CHECK(cf_frame, PFR_PY_NONE);
    CHECK(frame_kind, PFR_PY_FRAMES_OBJECT);
    CHECK(f_code, offsetof(PyFrameObject, f_code));
    CHECK(f_previous, offsetof(PyFrameObject, f_back));
    CHECK(f_lasti, offsetof(PyFrameObject, f_lasti));
    CHECK(lasti_shift, PY_MINOR_VERSION == 10 ? 0 : 1);
    CHECK(co_qualname, offsetof(PyCodeObject, co_name));
    CHECK(co_code_obj, offsetof(PyCodeObject, co_code));
    CHECK(co_code, PFR_PY_NONE);
#if PY_MINOR_VERSION == 10
    CHECK(co_linetable, offsetof(PyCodeObject, co_linetable));
    CHECK(lines, PFR_PY_LINES_310);
#else
    CHECK(co_linetable, offsetof(PyCodeObject, co_lnotab));
    CHECK(lines, PFR_PY_LINES_LNOTAB);
#endif
    /* the code header read covers every field read from it, within the object */
    if (l->co_header < offsetof(PyCodeObject, co_name) + 8 || l->co_header < l->co_linetable + 8 ||
        l->co_header > sizeof(PyCodeObject)) {
        fprintf(stderr, "code header read of %u bytes: not its fields\n", l->co_header);
        bad++;
    }
    /* the sampler reads a frame's fields from one copy of PFR_PY_OBJ_READ bytes */
    if (offsetof(PyFrameObject, f_lasti) + 4 > PFR_PY_OBJ_READ ||
        sizeof(PyFrameObject) < PFR_PY_OBJ_READ) {
        fprintf(stderr, "frame fields past the sampler's read, or the read past the frame\n");
        bad++;
    }
}
#else
static void check_interp_frames(const pfr_py_layout *l)
{
    CHECK(is_threads_head, offsetof(PyInterpreterState, threads.head));
    CHECK(ts_tid, offsetof(PyThreadState, native_thread_id));
    CHECK(frame_kind, PFR_PY_FRAMES_INTERP);
#if PY_MINOR_VERSION <= 12
    CHECK(ts_frame, offsetof(PyThreadState, cframe));
    CHECK(cf_frame, offsetof(_PyCFrame, current_frame));
    CHECK(f_code, offsetof(_PyInterpreterFrame, f_code));
    CHECK(f_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
    CHECK(ts_frame, offsetof(PyThreadState, current_frame));
    CHECK(cf_frame, PFR_PY_NONE);
    CHECK(f_code, offsetof(_PyInterpreterFrame, f_executable));
    CHECK(f_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
    CHECK(f_previous, offsetof(_PyInterpreterFrame, previous));
    CHECK(f_owner, offsetof(_PyInterpreterFrame, owner));
#if PY_MINOR_VERSION == 11
    CHECK(f_is_entry, offsetof(_PyInterpreterFrame, is_entry));
    CHECK(owner_cstack, 0xff);
#else
    CHECK(f_is_entry, PFR_PY_NONE);
    CHECK(owner_cstack, FRAME_OWNED_BY_CSTACK);
#endif
    CHECK(co_qualname, offsetof(PyCodeObject, co_qualname));
    CHECK(co_linetable, offsetof(PyCodeObject, co_linetable));
    CHECK(co_code, offsetof(PyCodeObject, co_code_adaptive));
    CHECK(co_code_obj, PFR_PY_NONE);
    CHECK(co_header, offsetof(PyCodeObject, co_code_adaptive));
    CHECK(lines, PFR_PY_LINES_311);
    /* the sampler reads a frame's fields from one copy of PFR_PY_FRAME_READ bytes */
    if (offsetof(_PyInterpreterFrame, owner) >= PFR_PY_FRAME_READ) {
        fprintf(stderr, "frame fields past the sampler's read\n");
        bad++;
    }
}
#endif

int main(void)
{
#if PY_MINOR_VERSION == 13
    pfr_py_layout own;
    const pfr_py_layout *l = from_debug(&own);
    if (!l)
        return 1;
#else
    const pfr_py_layout *l = pfr_py_layout_find(PY_MAJOR_VERSION, PY_MINOR_VERSION);
    if (!l) {
        fprintf(stderr, "no row for CPython %d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
        return 1;
    }
#endif
    CHECK(rt_interp_head, offsetof(_PyRuntimeState, interpreters.head));
    CHECK(ts_next, offsetof(PyThreadState, next));
#if PY_MINOR_VERSION <= 10
    check_objects(l);
#else
    check_interp_frames(l);
#endif
    CHECK(co_filename, offsetof(PyCodeObject, co_filename));
    CHECK(co_name, offsetof(PyCodeObject, co_name));
    CHECK(co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
    CHECK(bytes_size, offsetof(PyVarObject, ob_size));
    CHECK(bytes_data, offsetof(PyBytesObject, ob_sval));
    CHECK(str_length, offsetof(PyASCIIObject, length));
    CHECK(str_state, offsetof(PyASCIIObject, state));
    CHECK(str_ascii_data, sizeof(PyASCIIObject));
    CHECK(str_compact_data, sizeof(PyCompactUnicodeObject));
    CHECK(ob_type, offsetof(PyObject, ob_type));
    printf("%d.%d layout: %s\n", PY_MAJOR_VERSION, PY_MINOR_VERSION,
           bad ? "WRONG" : "matches the headers");
    return bad ? 1 : 0;
}
