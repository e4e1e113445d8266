/*
 * py_elf: the symbols a stack walk needs (_PyRuntime, the code, str and bytes types,
 * Py_Version, the interpreter loop) from the ELF file of a process's interpreter, read the way the
 * recorder reads any other process's file (recorder/fsguard/pfr_fsguard.h, issue 30): a file on a
 * local file system is opened through the process's root, else by its /proc/PID/map_files link
 * (device and inode checked against the mapping), one on a remote file system (FUSE, NFS, ...) only
 * as the copy the guard's worker makes with its deadline, never opened here. Its cost is bounded
 * before it is paid (the file's size, the symbol table's size), and the result is cached per file
 * (device and inode), so that 20 processes of one interpreter read its file once.
 *
 * Not thread-safe: one owner (pfr_py).
 */
#ifndef PFR_PY_ELF_H
#define PFR_PY_ELF_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sym_maps.h"

struct pfr_fsguard;

/* Addresses as the file links them (add the load bias); 0 when absent. eval: the interpreter
 * loop, _PyEval_EvalFrameDefault, eval_size bytes long. */
typedef struct pfr_py_elf_syms {
    uint64_t runtime, code_type, str_type, bytes_type, version;
    uint64_t eval, eval_size;
} pfr_py_elf_syms;

typedef struct pfr_py_elf_stats {
    uint64_t files_read;    /* interpreter files parsed */
    uint64_t cache_hits;    /* processes answered from a file read before */
    uint64_t remote_copies; /* of files_read, copies the guard's worker made */
    uint64_t refused;       /* files refused before reading: too big, a table too big */
} pfr_py_elf_stats;

typedef struct pfr_py_elf pfr_py_elf;

int pfr_py_elf_new(const char *proc_root, pfr_py_elf **out);
void pfr_py_elf_free(pfr_py_elf *c);

/* Files are read through guard (borrowed; NULL: opened directly, for tests and tools). Until
 * this is called no file is read at all (pfr_py_elf_symbols answers -EAGAIN): the recorder
 * never opens another process's file without its guard. */
void pfr_py_elf_set_guard(pfr_py_elf *c, struct pfr_fsguard *guard);

/* The symbols of the file mapped at m (one of pid's mappings in maps) and its load bias in pid.
 * 0; -ENOENT when the file has no _PyRuntime (a python3.X linked to a shared libpython);
 * -ENXIO when the file opens neither through pid's root nor by its map_files link;
 * -EINPROGRESS when the guard's worker is copying it (ask again later); -EAGAIN (no guard yet,
 * its file system avoided), -EFBIG (over the bounds), -ESTALE (another file at its path), or a
 * negative errno. */
int pfr_py_elf_symbols(pfr_py_elf *c, pid_t pid, const struct pfr_sym_maps *maps,
                       const struct pfr_sym_map *m, pfr_py_elf_syms *s, uint64_t *bias);

void pfr_py_elf_stats_get(const pfr_py_elf *c, pfr_py_elf_stats *out);

#endif
