/*
 * symbolizer: turns addresses sampled in a process (or the kernel) into frames.
 *
 * Kernel addresses resolve through /proc/kallsyms. User addresses resolve through the process's
 * mappings (/proc/PID/maps, snapshotted when the process is first seen so a process that exits
 * before the drain still resolves) and the mapped ELF file, opened through /proc/PID/root so
 * containers work: .symtab, then .dynsym; PIE and shared-library load bias; file and line from
 * DWARF (libdw) where present; C++ names demangled; Go names kept as Go writes them. Parsed
 * files are cached by build-id (or dev:inode:size:mtime when there is none), shared across
 * processes and bounded in memory (16 bytes a symbol: names stay in the file, which the cache
 * keeps open, and are read when first looked up): files used again are kept over files seen
 * once, and DWARF (capped per file and in all) is dropped before symbols (see symbolizer.c). An
 * address that cannot be named yields "module+0xoffset" (or "[unknown]" without a mapping);
 * frames are never dropped.
 *
 * Strings in returned frames are owned by the symbolizer and valid until the next call on it.
 */
#ifndef PFR_SYMBOLIZER_H
#define PFR_SYMBOLIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sym_refusal.h"

typedef struct pfr_symbolizer pfr_symbolizer;
struct pfr_fsguard;
struct pfr_membudget;

typedef struct pfr_sym_opts {
    size_t max_cache_bytes; /* bound on cached symbol data; 0 = 32 MiB */
    const char *proc_root;  /* "/proc" unless testing */
    /* separate debug files by build-id (XX/YYYY.debug): their .symtab names the functions of a
     * file without one, their DWARF gives its lines; NULL: "/usr/lib/debug/.build-id" */
    const char *debug_dir;
    bool no_dwarf;           /* skip file:line lookup */
    bool no_perf_maps;       /* leave JIT code unnamed rather than read /tmp/perf-PID.map */
    int64_t parse_budget_ns; /* time budget of one file's parse (symbols, DWARF index); 0 = 2 s */
    /* Files on remote file systems (FUSE, NFS, ...) are read only through the guard's copy
     * workers, and perf maps only from local ones (pfr_fsguard.h). NULL: every file is opened
     * directly (tests, offline tools). Not owned; outlives the symbolizer. */
    struct pfr_fsguard *fsguard;
    /* Asked before a new file is parsed: over the recorder's memory budget its frames stay
     * module+offset until it is met again (pfr_membudget.h). NULL: none. Not owned. */
    struct pfr_membudget *membudget;
} pfr_sym_opts;

typedef struct pfr_sym_frame {
    const char *function; /* never NULL: a name, "module+0xoff" or "[unknown]" */
    const char *file;     /* "" when unknown */
    int64_t line;         /* 0 when unknown */
    const char *module;   /* path of the mapped file, "[kernel]", "[jit]", or "" */
    uint64_t offset;      /* file offset (user) or address (kernel, JIT code) */
    bool transient;       /* JIT code: the address may hold other code later, so the frame is
                             good for this interval's samples only */
} pfr_sym_frame;

typedef struct pfr_sym_stats {
    uint64_t files_parsed, cache_hits, cache_misses, evictions, cache_bytes;
    uint64_t bound_bytes; /* what the cache may hold now (pfr_symbolizer_set_bound) */
    uint64_t processes, unresolved_frames, errors;
    /* the cache's policy at work (see symbolizer.c): */
    uint64_t reparses;        /* files parsed again after they were evicted */
    uint64_t dwarf_loads;     /* DWARF opened (first time or again after being dropped) */
    uint64_t dwarf_evictions; /* DWARF dropped while the file's symbols stayed */
    uint64_t dwarf_too_big;   /* DWARF refused before reading: over (or too near) the per-file
                                 cap */
    uint64_t dwarf_no_room;   /* DWARF put off: room only by dropping DWARF of files in use */
    uint64_t dwarf_outgrown;  /* DWARF dropped after its line tables outgrew that cap */
    uint64_t dwarf_bytes;     /* of cache_bytes, held by open DWARF */
    uint64_t protected_bytes; /* of cache_bytes, held by files used more than once */
    uint64_t files_cached;    /* files in the cache now */
    uint64_t open_files;      /* descriptors the cache keeps (names are read from the files) */
    uint64_t name_errors;     /* symbol names unreadable: their file changed on disk after it
                                 was parsed (the frame is left as module+offset) */
    /* JIT code, named from the perf map its process writes (sym_perfmap.h): */
    uint64_t jit_frames;         /* frames named from a perf map */
    uint64_t perf_maps_opened;   /* processes whose perf map was opened */
    uint64_t perf_map_bad_lines; /* lines skipped as malformed */
    uint64_t perf_maps_full;     /* maps no longer read: their share of the cache was used up */
    uint64_t perf_map_errors;    /* maps that could not be opened (not the process's own regular
                                    file, ...) or read */
    /* files (or parts: a table, a unit's lines) refused before they were paid for, by reason
     * (enum pfr_refusal, pfr_refusal.h; [PFR_REFUSED_NONE] stays 0) */
    uint64_t files_refused[PFR_NREFUSALS];
} pfr_sym_stats;

/* Bound the cache to bytes (0, or more than max_cache_bytes: max_cache_bytes) until set again,
 * for a recorder near its memory budget: at once DWARF, then the files used only once, coldest
 * first, are dropped until it fits (files used more than once stay until room is needed); from
 * then on files are evicted for room at this bound. Per-file caps stay those of max_cache_bytes. */
void pfr_symbolizer_set_bound(pfr_symbolizer *s, size_t bytes);

int pfr_symbolizer_new(const pfr_sym_opts *opts, pfr_symbolizer **out);
void pfr_symbolizer_free(pfr_symbolizer *s);

/* Snapshot pid's mappings (call when a pid is first seen, and again after exec). Returns -ESRCH
 * if the process is gone. */
int pfr_symbolizer_add_process(pfr_symbolizer *s, pid_t pid);
/* Drop a process's snapshot (after it exited and its samples were drained). */
void pfr_symbolizer_forget_process(pfr_symbolizer *s, pid_t pid);
/* How many files pid's snapshot has executable mappings of (0 if none or no snapshot): a
 * dynamically linked process still in its loader has two at most (itself and ld.so). */
size_t pfr_symbolizer_process_files(const pfr_symbolizer *s, pid_t pid);

/* A file by device (as stat() reports it) and inode. */
typedef struct pfr_sym_file_id {
    uint64_t dev, ino;
} pfr_sym_file_id;

/* The files of pid's snapshot whose paths are known (pfr_symbolizer_known_path finds them), so
 * that mappings listed at its exit can be named: up to max into out; returns how many there are
 * (0 without a snapshot). */
size_t pfr_symbolizer_named_files(const pfr_symbolizer *s, pid_t pid, pfr_sym_file_id *out,
                                  size_t max);

/* A process's executable mapping as the kernel listed it at the process's exit. */
enum pfr_sym_exit_kind { PFR_SYM_EXIT_FILE, PFR_SYM_EXIT_VDSO, PFR_SYM_EXIT_ANON };
typedef struct pfr_sym_exit_map {
    uint64_t start, end, pgoff;
    uint64_t dev; /* as stat() reports it */
    uint64_t ino;
    enum pfr_sym_exit_kind kind;
} pfr_sym_exit_map;

/* Take the mappings the kernel listed at pid's exit (by address) as its snapshot, if they name
 * more files than the snapshot it has (none when the process exited before its maps were read,
 * or only itself and ld.so when they were read in its loader). A file is named by the path it
 * had in the snapshots of other processes (the last few thousand files seen); one never seen
 * is left out, and its frames stay unknown. Returns how many files the new snapshot names, 0 if
 * the old one was kept, or a negative errno. */
int pfr_symbolizer_set_exit_maps(pfr_symbolizer *s, pid_t pid, const pfr_sym_exit_map *v, size_t n);

/* The same for a list of only the mappings pid's samples met (by address): it cannot say the
 * snapshot lacks nothing else, so it is added to the snapshot (its mappings replacing those of
 * the snapshot they overlap) where it has a mapping the snapshot does not (a library loaded
 * after the snapshot), and taken alone where pid has none. Returns the files of the new
 * snapshot, 0 if the old one was kept, or a negative errno. */
int pfr_symbolizer_merge_exit_maps(pfr_symbolizer *s, pid_t pid, const pfr_sym_exit_map *v,
                                   size_t n);

/* Bumped each time the paths below are forgotten (they are kept for a bounded number of files):
 * what was decided from a known path may need deciding again. */
uint64_t pfr_symbolizer_paths_generation(const pfr_symbolizer *s);

/* Remember path as the path of a file (dev as stat() reports it, ino) that no snapshot may
 * have seen, as an exit's notification gave it: mappings listed at exits then name the file.
 * It is opened later only where device and inode still match. 0, -EINVAL (not an absolute
 * path) or -ENOMEM. */
int pfr_symbolizer_learn_path(pfr_symbolizer *s, uint64_t dev, uint64_t ino, const char *path);

/* The path a file (dev as stat() reports it, ino) had in the snapshots taken so far (the last
 * few thousand files seen). 0, or -ENOENT if none saw it (or out is too small). */
int pfr_symbolizer_known_path(const pfr_symbolizer *s, uint64_t dev, uint64_t ino, char *out,
                              size_t outlen);

/* The path of the file (dev as stat() reports it, ino) that pid's snapshot maps, as the maps
 * name it (without " (deleted)"): the same as readlink(/proc/PID/exe) for the executable, with no
 * path walk through /proc. 0, or -ENOENT if the snapshot maps no such file (or has none). */
int pfr_symbolizer_file_path(const pfr_symbolizer *s, pid_t pid, uint64_t dev, uint64_t ino,
                             char *out, size_t outlen);

/* Resolve one user address of pid. Writes up to cap frames (inlined calls expanded, innermost
 * first) and returns how many (>= 1), or a negative errno on misuse. */
int pfr_symbolize_user(pfr_symbolizer *s, pid_t pid, uint64_t addr, pfr_sym_frame *out, size_t cap);
/* Name one user address of pid by its mapping alone, "module+0xoffset", reading no file: for
 * frames past the symbolizing budget. Returns 1, or 0 if the snapshot has no file mapping
 * there (the mappings are not read again). */
int pfr_symbolize_user_mapping(pfr_symbolizer *s, pid_t pid, uint64_t addr, pfr_sym_frame *out);
/* Where a user address of pid lies, for a cache of frames shared by the processes that map one
 * file: when its mapping is of a file the cache holds (or the vDSO), *space names that file
 * (unique while it stays cached, and changed at each read of its DWARF or Go table), *off is the
 * file offset and *module its path in pid's snapshot (valid until the snapshot changes), and
 * pfr_symbolize_user(pid, addr) would give the frames it gives for any address of that space and
 * offset (module aside). Returns 1; 0 when there is no such file (the mappings are not read again,
 * nor any file), or -EINVAL. */
int pfr_symbolizer_frame_key(pfr_symbolizer *s, pid_t pid, uint64_t addr, uint64_t *space,
                             uint64_t *off, const char **module);
/* Resolve one kernel address (one frame). */
int pfr_symbolize_kernel(pfr_symbolizer *s, uint64_t addr, pfr_sym_frame *out);

void pfr_symbolizer_stats(const pfr_symbolizer *s, pfr_sym_stats *st);

/* Added by the symbolizer's implementation (beyond the first API): */

/* Re-read /proc/kallsyms (after modules were loaded or unloaded). 0 or a negative errno. */
int pfr_symbolizer_reload_kernel(pfr_symbolizer *s);
/* Bytes held in all: the file cache (bounded by max_cache_bytes), kernel symbols and process
 * snapshots. */
size_t pfr_symbolizer_memory(const pfr_symbolizer *s);
/* Reason of the last failure met (a file that could not be parsed, a rejected maps file), for
 * the caller's log; "" when none. Valid until the next call. */
const char *pfr_symbolizer_last_error(const pfr_symbolizer *s);
/* Why the last perf map was refused or could not be read (perf_map_errors). */
const char *pfr_symbolizer_perf_map_error(const pfr_symbolizer *s);

#endif
