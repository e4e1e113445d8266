/*
 * py_frames: the CPU source's side of Python frames (recorder/python/): which processes the
 * sampler walks the interpreter frames of, and the names of the frames it recorded.
 */
#ifndef PFR_RECORDER_PY_FRAMES_H
#define PFR_RECORDER_PY_FRAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_profiler.h"
#include "frame_cache.h"
#include "profile_builder.h"
#include "pfr_python.h"
#include "symbolizer.h"

/* After a snapshot of tgid's mappings: if one of its files is a CPython (by name, from the
 * snapshot: no system call for the others), find its interpreter and have the sampler walk it.
 * A process already walked is left as it is. */
void pfr_py_frames_note(pfr_py *py, pfr_cpu_profiler *cp, pfr_symbolizer *sym, uint32_t tgid);
/* A new process (or image) whose snapshot was left for later (its executable known from other
 * processes): if its executable is a CPython (by name), walk it now rather than from the
 * snapshot on. */
void pfr_py_frames_note_exe(pfr_py *py, pfr_cpu_profiler *cp, uint32_t tgid, const char *exe);
/* Whether the file (dev as stat() reports it, ino) is a CPython executable, by the path
 * snapshots gave it: false when python_frames is off. */
bool pfr_py_frames_is_python(pfr_py *py, pfr_symbolizer *sym, uint64_t dev, uint64_t ino);
/* tgid exited or called exec: stop walking it, drop its cache. */
void pfr_py_frames_drop(pfr_py *py, pfr_cpu_profiler *cp, uint32_t tgid);
/* The figures of Python frames at debug level (once an interval), when there were samples of
 * Python processes: the sampler's time per sample, native walk beside interpreter frames. */
void pfr_py_frames_log(const pfr_cpu_counters *bpf, const pfr_py_stats *py,
                       const pfr_build_stats *build);
/* pfr_py_name_fn (profile_builder.h) over a pfr_py. */
void pfr_py_frames_name(void *py, uint32_t tgid, uint64_t v, pfr_cached_frame *out);

#endif
