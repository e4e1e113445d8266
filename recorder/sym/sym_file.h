/*
 * sym_file: one parsed ELF file in the symbolizer's cache: its segments and symbols, its DWARF
 * once opened, and a memo of the frames computed for each address (DWARF lookups are the only
 * and .gopclntab lookups are the costly steps, so each address pays them once). Files are shared by
 * every process mapping them.
 */
#ifndef PFR_SYM_FILE_H
#define PFR_SYM_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sym_dwarf.h"
#include "sym_elf.h"
#include "sym_gopcln.h"
#include "sym_hmap.h"

#define PFR_FILE_MAX_MEMO (1u << 16) /* addresses memoized per file before the memo restarts */
#define PFR_FILE_UNNAMED  PFR_STR_NONE

/* One memoized frame; strings are offsets in the file's name pool. */
struct pfr_sym_rec {
    uint32_t fn;   /* PFR_FILE_UNNAMED: print as module+offset */
    uint32_t file; /* 0: unknown */
    int64_t line;
};

struct pfr_symfile_link {
    uint64_t dev, ino;
};

struct pfr_sym_file {
    struct pfr_sym_file *prev, *next; /* its segment's list, most recent first */
    uint64_t kh1, kh2;                /* hashes of key */
    char key[2 * PFR_ELF_MAX_BUILDID + 64];
    struct pfr_sym_elf_info info;
    struct pfr_sym_elf_syms syms; /* syms.names: the names looked up (demangled), DWARF strings */
    struct pfr_sym_hmap named;    /* symbol index -> its name in syms.names, or PFR_STR_NONE */
    struct pfr_sym_dwarf *dwarf;
    int dwarf_state;               /* 0: not tried, 1: open, -1: none */
    struct pfr_sym_gopcln *gopcln; /* Go binaries without usable DWARF */
    int fd;                        /* names are read from it (syms.lazy), and DWARF loads; or -1 */
    struct pfr_sym_hmap memo;      /* vaddr -> first << 8 | count in recs */
    struct pfr_sym_rec *recs;
    size_t nrecs, caprecs;
    struct pfr_symfile_link *links; /* dev:inode pairs that name this file */
    size_t nlinks, caplinks;
    size_t bytes;           /* as accounted in the cache, DWARF included */
    size_t dwarf_bytes;     /* of which the open DWARF (dropped before the file is) */
    uint64_t last_tick;     /* the symbolizer's tick when last used */
    int64_t dwarf_retry_ns; /* DWARF dropped for room: not read again before (monotonic) */
    uint32_t dwarf_loads;
    uint8_t dwarf_backoffs; /* times its DWARF outgrew the per-file cap or found no room (0..7) */
    uint32_t name_errors;   /* names that could not be read */
    uint8_t seg;            /* cache segment: probation (seen once) or protected (used again) */
    bool pinned;            /* in no segment (the vDSO) */
    uint64_t uid;           /* unique among the files ever cached (pfr_symbolizer_frame_key) */
};

/* The name of a symbol, read from the file (see sym_elf.h) and demangled on first use and kept
 * in syms.names: only the names of symbols actually met take memory. PFR_STR_NONE when it
 * cannot be read (the file changed on disk since it was parsed): the frame is then unnamed. */
uint32_t pfr_symfile_sym_name(struct pfr_sym_file *f, const struct pfr_sym_elf_sym *sym);
/* Demangle (when mangled) and intern a name from DWARF. PFR_STR_NONE on failure. */
uint32_t pfr_symfile_intern_name(struct pfr_sym_file *f, const char *name);

/* Memo: recs for vaddr, or NULL. */
const struct pfr_sym_rec *pfr_symfile_memo_get(const struct pfr_sym_file *f, uint64_t vaddr,
                                               size_t *n);
/* Store n recs for vaddr; returns 0 or -ENOMEM (the memo is then only incomplete). */
int pfr_symfile_memo_put(struct pfr_sym_file *f, uint64_t vaddr, const struct pfr_sym_rec *r,
                         size_t n);

size_t pfr_symfile_bytes(const struct pfr_sym_file *f);
void pfr_symfile_free(struct pfr_sym_file *f);

#endif
