/* Python frames, the CPU source's side (py_frames.h). */
#include "py_frames.h"

#include <limits.h>
#include <string.h>

#include "pfr_log.h"

#define MAX_FILES 512 /* files of a snapshot looked at by name */

/* Whether tgid's snapshot maps a file named as CPython's (python3.X, libpython3.X.so). */
static bool maps_python(pfr_symbolizer *sym, uint32_t tgid)
{
    pfr_sym_file_id ids[MAX_FILES];
    size_t n = pfr_symbolizer_named_files(sym, (pid_t)tgid, ids, MAX_FILES);
    if (n > MAX_FILES)
        n = MAX_FILES;
    char path[PATH_MAX];
    unsigned major, minor;
    for (size_t i = 0; i < n; i++)
        if (pfr_symbolizer_file_path(sym, (pid_t)tgid, ids[i].dev, ids[i].ino, path,
                                     sizeof(path)) == 0 &&
            pfr_py_version_from_name(path, &major, &minor) == 0)
            return true;
    return false;
}

static void walk(pfr_py *py, pfr_cpu_profiler *cp, uint32_t tgid)
{
    struct pfr_py_proc rec;
    char why[PATH_MAX + 64];
    int rc = pfr_py_inspect(py, (pid_t)tgid, &rec, why, sizeof(why));
    if (rc == 1) {
        rc = pfr_cpu_profiler_py_set(cp, tgid, &rec);
        if (rc) {
            pfr_py_forget(py, (pid_t)tgid);
            pfr_debug("python: process %u not walked: %s", tgid, strerror(-rc));
            return;
        }
        pfr_debug("python: walking process %u (%s)", tgid, why);
    } else if (rc < 0) {
        pfr_debug("python: process %u walked natively: %s", tgid, why);
    }
}

void pfr_py_frames_note(pfr_py *py, pfr_cpu_profiler *cp, pfr_symbolizer *sym, uint32_t tgid)
{
    if (!py)
        return;
    /* processes whose interpreter's file the guard was copying: taken at the next snapshot of
     * any process (a copy is started at one look and taken at a later one) */
    pid_t pending[8];
    size_t n = pfr_py_take_pending(py, pending, 8);
    for (size_t i = 0; i < n; i++)
        if ((uint32_t)pending[i] != tgid && !pfr_py_known(py, pending[i]))
            walk(py, cp, (uint32_t)pending[i]);
    if (!pfr_py_known(py, (pid_t)tgid) && maps_python(sym, tgid))
        walk(py, cp, tgid);
}

void pfr_py_frames_note_exe(pfr_py *py, pfr_cpu_profiler *cp, uint32_t tgid, const char *exe)
{
    unsigned major, minor;
    if (py && exe && !pfr_py_known(py, (pid_t)tgid) &&
        pfr_py_version_from_name(exe, &major, &minor) == 0)
        walk(py, cp, tgid);
}

bool pfr_py_frames_is_python(pfr_py *py, pfr_symbolizer *sym, uint64_t dev, uint64_t ino)
{
    char path[PATH_MAX];
    unsigned major, minor;
    return py && pfr_symbolizer_known_path(sym, dev, ino, path, sizeof(path)) == 0 &&
           pfr_py_version_from_name(path, &major, &minor) == 0 && !strstr(path, "/libpython");
}

void pfr_py_frames_drop(pfr_py *py, pfr_cpu_profiler *cp, uint32_t tgid)
{
    if (!py || !pfr_py_known(py, (pid_t)tgid))
        return;
    pfr_cpu_profiler_py_del(cp, tgid);
    pfr_py_forget(py, (pid_t)tgid);
}

void pfr_py_frames_log(const pfr_cpu_counters *b, const pfr_py_stats *py,
                       const pfr_build_stats *build)
{
    if (!b->py_samples)
        return;
    double n = (double)b->py_samples;
    pfr_debug("python: samples=%llu walked=%llu no_thread=%llu frames=%llu cut{read=%llu "
              "depth=%llu} bpf_ns_per_sample{native=%.0f python=%.0f} processes=%llu "
              "unknown_versions=%llu code_reads=%llu read_failures=%llu cache{hits=%llu "
              "bytes=%llu resets=%llu} files{read=%llu hits=%llu copies=%llu refused=%llu} "
              "stacks=%llu unplaced=%llu",
              (unsigned long long)b->py_samples, (unsigned long long)b->py_stacks,
              (unsigned long long)b->py_no_thread, (unsigned long long)b->py_frames,
              (unsigned long long)b->py_cut_read, (unsigned long long)b->py_cut_depth,
              (double)b->py_native_ns / n, (double)b->py_walk_ns / n,
              (unsigned long long)py->processes, (unsigned long long)py->unknown_versions,
              (unsigned long long)py->frames_read, (unsigned long long)py->read_failures,
              (unsigned long long)py->cache_hits, (unsigned long long)py->cache_bytes,
              (unsigned long long)py->cache_resets, (unsigned long long)py->files_read,
              (unsigned long long)py->file_cache_hits, (unsigned long long)py->file_copies,
              (unsigned long long)py->files_refused, (unsigned long long)build->py_stacks,
              (unsigned long long)build->py_unplaced);
}

void pfr_py_frames_name(void *ctx, uint32_t tgid, uint64_t v, pfr_cached_frame *out)
{
    pfr_py_frame f;
    pfr_py_name(ctx, (pid_t)tgid, v, &f);
    out->function = f.function;
    out->file = f.file;
    out->line = f.line;
}
