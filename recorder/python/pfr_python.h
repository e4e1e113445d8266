/*
 * pfr_python: CPython processes as the CPU sampler sees them. Finds a process's interpreter
 * (python3.X or libpython3.X mapped executable, _PyRuntime and the types from its ELF symbols,
 * the version from Py_Version or the file's name), gives the sampler where to walk
 * (struct pfr_py_proc), and names the frames it recorded: a code object's qualified name, file
 * and the line of the instruction, read from the process through bounded, checked reads (every
 * object's type is checked against the interpreter's own; sizes are capped) and cached per
 * process, within a bound for all processes.
 *
 * Not thread-safe: one owner (the CPU source, under its lock).
 */
#ifndef PFR_PYTHON_H
#define PFR_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpu_profile.h"

typedef struct pfr_py pfr_py;

typedef struct pfr_py_stats {
    uint64_t processes;        /* Python processes being walked now */
    uint64_t found;            /* Python processes found since start */
    uint64_t unknown_versions; /* processes of a CPython version with no layout here */
    uint64_t frames_read;      /* code objects read from processes */
    uint64_t read_failures;    /* frames that could not be read ([python: unreadable]) */
    uint64_t cache_hits;       /* frames named from the cache */
    uint64_t cache_bytes;      /* what the cache holds now */
    uint64_t cache_resets;     /* a process's cache emptied at its bound */
    uint64_t files_read;       /* interpreter files parsed (once per file, not per process) */
    uint64_t file_cache_hits;  /* processes whose interpreter file was parsed before */
    uint64_t file_copies;      /* of files_read, copies of remote files (pfr_fsguard) */
    uint64_t files_refused;    /* interpreter files refused before reading: over the bounds */
} pfr_py_stats;

/* A named frame; the strings stay valid until the next call on the same pfr_py. */
typedef struct pfr_py_frame {
    const char *function, *file;
    int64_t line; /* 0 when unknown */
} pfr_py_frame;

/* proc_root: "/proc" unless testing. max_bytes bounds what the code object caches hold. */
int pfr_py_new(const char *proc_root, size_t max_bytes, pfr_py **out);
void pfr_py_free(pfr_py *py);

struct pfr_fsguard;
/* The interpreters' files are read through guard (pfr_fsguard.h; borrowed; NULL: opened
 * directly, for tests). Until this is called no interpreter file is read (pfr_py_inspect
 * answers -EAGAIN). */
void pfr_py_set_fsguard(pfr_py *py, struct pfr_fsguard *guard);

/* Processes pfr_py_inspect answered -EINPROGRESS for (their interpreter's file, on a remote
 * file system, is being copied by the guard's worker), to inspect again: up to max into out,
 * taken off the list. */
size_t pfr_py_take_pending(pfr_py *py, pid_t *out, size_t max);

/* Look at process pid once: 1 when it runs a CPython pfr can walk (rec filled for the
 * sampler), 0 when it does not run CPython, -ENOTSUP for a CPython version with no layout
 * (counted), -EINPROGRESS when its interpreter's file is being copied (pfr_py_take_pending), or
 * a negative errno (gone, unreadable). why says what was found or refused. */
int pfr_py_inspect(pfr_py *py, pid_t pid, struct pfr_py_proc *rec, char *why, size_t whylen);

/* Whether pid is a Python process being walked. */
bool pfr_py_known(const pfr_py *py, pid_t pid);

/* Forget what is kept of pid (its exit, exec, or the setting turned off). */
void pfr_py_forget(pfr_py *py, pid_t pid);

/* Name the frame v (pfr_py_frame_is(v)) recorded in process pid: 0, or -ENOENT when it could
 * not be read (then out names it "[python: unreadable]"). */
int pfr_py_name(pfr_py *py, pid_t pid, uint64_t v, pfr_py_frame *out);

void pfr_py_stats_get(const pfr_py *py, pfr_py_stats *out);

/* The parsing parts, for tests and fuzzing. */
/* The CPython version a mapped file's name says: libpython3.11.so.1.0, python3.11 -> 3, 11.
 * 0, or -ENOENT for a name that is not CPython's. */
int pfr_py_version_from_name(const char *path, unsigned *major, unsigned *minor);

#endif
