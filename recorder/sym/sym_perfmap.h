/*
 * sym_perfmap: names of JIT-compiled code, from the map file a JIT writes for perf.
 *
 * Node (--perf-basic-prof), the JVM (with an agent or jcmd Compiler.perfmap), Python 3.12+
 * (-X perf), .NET (DOTNET_PerfMapEnabled) and others append one line per code object they make
 * to /tmp/perf-PID.map, PID being the process's own (namespace) pid:
 *
 *     START SIZE NAME        START and SIZE in hex ("0x" optional), NAME the rest of the line
 *
 * Code is freed and its addresses reused, so where entries overlap the line read last wins:
 * older entries it overlaps are dropped. The file is read from where the last read stopped,
 * whole lines only (a line being written is read next time). Names stay in the file (an entry
 * is 32 bytes: range, line offset and length, line number) and are read back when a frame
 * needs one; the line is parsed again then, so a file rewritten since yields no name rather
 * than a wrong one. The file is the process's to write, so it is outside input: it is opened
 * only as a regular file inside the process's root (no symlink may lead out of it) owned by
 * root or by the process's user, every line is validated, and what is kept is bounded by the
 * caller's byte budget.
 */
#ifndef PFR_SYM_PERFMAP_H
#define PFR_SYM_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PFR_PERFMAP_MAX_LINE 4096 /* longer lines are skipped (and counted as bad) */

struct pfr_perfmap_ent {
    uint64_t start, end;
    uint64_t line; /* offset of its line in the file */
    uint32_t len;  /* of the line, without '\n' */
    uint32_t seq;  /* line number: the larger wins an overlap */
};

struct pfr_sym_perfmap {
    struct pfr_perfmap_ent *v; /* disjoint, sorted by start; owned */
    size_t n, cap;
    uint32_t lines;     /* lines taken so far */
    uint64_t bad_lines; /* malformed or too long */
    bool full;          /* the byte budget was reached: later lines are not taken */
    bool skipping;      /* inside a line longer than PFR_PERFMAP_MAX_LINE */
    int fd;             /* the open file, -1 when none */
    uint64_t off;       /* bytes of the file taken (whole lines) */
    char name[PFR_PERFMAP_MAX_LINE + 1]; /* the last name read back */
};

void pfr_sym_perfmap_init(struct pfr_sym_perfmap *m);
void pfr_sym_perfmap_free(struct pfr_sym_perfmap *m);

/* Take the complete lines of data[0..len), the file's bytes from offset at, as the lines that
 * follow those taken before, and set *used to the bytes they span: an unfinished last line is
 * left for the next call, which must start with it (unless it is already too long, then it is
 * skipped to its end). Memory held stays within max_bytes (then full is set and nothing more is
 * taken). 0 or -ENOMEM. pfr_sym_perfmap_update() reads the file and calls this. */
int pfr_sym_perfmap_feed(struct pfr_sym_perfmap *m, const char *data, size_t len, uint64_t at,
                         size_t max_bytes, size_t *used);

/* Open pid's map file (see above) through proc_root ("/proc"). 0, -ENOENT when the process has
 * none, -ESRCH when it is gone, or another negative errno with a reason in err. */
int pfr_sym_perfmap_open(struct pfr_sym_perfmap *m, const char *proc_root, pid_t pid, char *err,
                         size_t errlen);
struct pfr_fsguard;
/* The same, opening the map only on a local file system of the process, without crossing a
 * mount from its mount point (pfr_fsguard_open_local): -EREMOTE otherwise. guard NULL: as
 * pfr_sym_perfmap_open. */
int pfr_sym_perfmap_open_guarded(struct pfr_sym_perfmap *m, const char *proc_root, pid_t pid,
                                 struct pfr_fsguard *guard, char *err, size_t errlen);
/* Read what was appended to the open file since the last read. 0 or a negative errno. */
int pfr_sym_perfmap_update(struct pfr_sym_perfmap *m, size_t max_bytes, char *err, size_t errlen);

/* The entry holding addr, or NULL. */
const struct pfr_perfmap_ent *pfr_sym_perfmap_find(const struct pfr_sym_perfmap *m, uint64_t addr);
/* e's name, read back from the open file (valid until the next call on m), or NULL when the
 * file no longer holds e's line there. */
const char *pfr_sym_perfmap_name(struct pfr_sym_perfmap *m, const struct pfr_perfmap_ent *e);
size_t pfr_sym_perfmap_bytes(const struct pfr_sym_perfmap *m);

#endif
