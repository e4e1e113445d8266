/*
 * py_layout: where CPython keeps what a stack walk needs, per minor version: the offsets from
 * _PyRuntime to its interpreters and their threads, from a thread state to its innermost
 * interpreter frame, from a frame to its code object, caller and instruction, and from a code
 * object to its names, first line and line table. Written from each version's headers
 * (Include/internal/pycore_{runtime,interp,frame}.h, Include/cpython/{pystate,code}.h; 3.8-3.10:
 * Include/internal/pycore_pystate.h, Include/{cpython/,}frameobject.h) for x86-64; a version not
 * in the table is not walked (counted as unknown).
 */
#ifndef PFR_PY_LAYOUT_H
#define PFR_PY_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define PFR_PY_NONE 0xffffu /* an offset a version does not have */

/* How a thread state names its thread. */
enum pfr_py_tid_kind {
    PFR_PY_TID_NATIVE = 0, /* native_thread_id: gettid() in the process's pid namespace */
    PFR_PY_TID_PTHREAD,    /* thread_id: pthread_self(), the thread's fs base on x86-64 glibc */
};

/* How the line of an instruction is found in co_linetable. */
enum pfr_py_lines_kind {
    PFR_PY_LINES_311 = 1, /* the location table of 3.11+ (Objects/locations.md) */
    PFR_PY_LINES_310,     /* 3.10's co_linetable (PEP 626: byte ranges, line deltas) */
    PFR_PY_LINES_LNOTAB,  /* 3.8 and 3.9's co_lnotab (address and line increments) */
};

typedef struct pfr_py_layout {
    uint8_t major, minor;
    /* _PyRuntimeState */
    uint16_t rt_interp_head; /* interpreters.head */
    /* PyInterpreterState */
    uint16_t is_threads_head; /* threads.head */
    /* PyThreadState */
    uint16_t ts_next;
    uint16_t ts_tid;    /* the field matched against the sampled thread */
    uint8_t tid_kind;   /* enum pfr_py_tid_kind */
    uint16_t ts_frame;  /* cframe (3.11, 3.12), current_frame (3.13) or frame (3.8-3.10) */
    uint16_t cf_frame;  /* _PyCFrame.current_frame; PFR_PY_NONE when ts_frame is the frame */
    uint8_t frame_kind; /* PFR_PY_FRAMES_INTERP (3.11+) or PFR_PY_FRAMES_OBJECT (cpu_profile.h) */
    /* _PyInterpreterFrame; 3.8-3.10: PyFrameObject, f_previous is f_back and f_instr unused */
    uint16_t f_code, f_previous, f_instr, f_owner;
    uint16_t f_lasti;     /* 3.8-3.10: the int f_lasti; PFR_PY_NONE after */
    uint8_t lasti_shift;  /* 3.8, 3.9: f_lasti counts bytes (>> 1: code units); 3.10: units */
    uint16_t f_is_entry;  /* 3.11; PFR_PY_NONE after */
    uint8_t owner_cstack; /* owner value of a C entry shim frame (3.12+); 0xff: none */
    /* PyCodeObject */
    uint16_t co_filename, co_name, co_qualname, co_firstlineno, co_linetable;
    uint16_t co_code;     /* first instruction (co_code_adaptive); 3.8-3.10: PFR_PY_NONE */
    uint16_t co_code_obj; /* 3.8-3.10: the co_code bytes object; PFR_PY_NONE after */
    uint16_t co_header;   /* bytes of a code object read: up to co_code, or past its fields */
    uint8_t lines;        /* enum pfr_py_lines_kind */
    /* PyBytesObject, PyASCIIObject / PyCompactUnicodeObject */
    uint16_t bytes_size, bytes_data;
    uint16_t str_length, str_state, str_ascii_data, str_compact_data;
    /* object header: ob_type (the code object's type checks every code object read) */
    uint16_t ob_type;
} pfr_py_layout;

/* The layout of CPython major.minor, or NULL when not known. */
const pfr_py_layout *pfr_py_layout_find(unsigned major, unsigned minor);

/* 3.13 publishes its layout: _Py_DebugOffsets at the start of _PyRuntime. The bytes read there
 * (at least PFR_PY_DEBUG_OFFSETS_SIZE) into out: 0, -EINVAL (no "xdebugpy" cookie), -ENOTSUP
 * (not 3.13, or a free-threaded build), -ERANGE (an offset past what the readers copy: refused,
 * never trusted). */
#define PFR_PY_DEBUG_OFFSETS_SIZE (73 * 8)
int pfr_py_layout_from_debug(const uint8_t *buf, size_t len, pfr_py_layout *out);

#endif
