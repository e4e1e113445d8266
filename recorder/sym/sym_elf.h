/*
 * sym_elf: what the symbolizer needs from one ELF file, read with libelf from a handle the
 * caller opened (file or memory): the PT_LOAD segments (to turn a file offset into a link-time
 * address, which covers PIE and shared-library load bias), the build-id, and the function
 * symbols of .symtab then .dynsym, sorted by address with their extents; their names stay in
 * the file until a lookup needs one.
 *
 * Input is hostile: every count, index and string is checked through libelf's bounded
 * accessors, and sizes are capped, so a truncated or forged file yields an error or fewer
 * symbols, never an out-of-bounds read.
 */
#ifndef PFR_SYM_ELF_H
#define PFR_SYM_ELF_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sym_refusal.h"
#include "sym_strpool.h"

#define PFR_ELF_MAX_SEGS    16
#define PFR_ELF_MAX_BUILDID 64

enum pfr_sym_elf_id_kind { PFR_ELF_ID_NONE, PFR_ELF_ID_GNU, PFR_ELF_ID_GO };

struct pfr_sym_elf_seg {
    uint64_t offset, vaddr, filesz;
};

struct pfr_sym_elf_info {
    struct pfr_sym_elf_seg segs[PFR_ELF_MAX_SEGS]; /* PT_LOAD, in file order */
    size_t nsegs;
    uint8_t id[PFR_ELF_MAX_BUILDID];
    size_t id_len;
    int id_kind;     /* enum pfr_sym_elf_id_kind */
    bool has_symtab; /* a non-empty .symtab: not stripped */
    bool has_debug;  /* .debug_info or .zdebug_info with contents */
    bool is_go;      /* .gopclntab, .go.buildinfo or a Go build-id note */
    int refused;     /* a part not read for its size (a huge note): enum pfr_refusal */
};

/* One function symbol: 16 bytes, what a lookup needs. The name is not copied at parse time:
 * in a table read from a file (pfr_sym_elf_read_syms_fd) it is a reference into the file's
 * string tables, read with pread when a lookup first needs it (pfr_sym_elf_read_name); in a
 * table read from memory (pfr_sym_elf_read_syms) it is an offset in names. */
struct pfr_sym_elf_sym {
    uint64_t addr;
    uint32_t len;  /* extent in bytes, at least 1 */
    uint32_t name; /* see above */
};

/* A string table of the file the names refer to: references [base, base + size) are offsets
 * [off, off + size) of the file; plt: "@plt" follows the name (PLT stubs). */
struct pfr_sym_elf_strtab {
    uint64_t off;
    uint32_t base, size;
    bool plt;
};

#define PFR_ELF_MAX_STRTABS 6

struct pfr_sym_elf_syms {
    struct pfr_sym_elf_sym *v; /* owned, sorted by addr, non-overlapping */
    size_t n;
    /* names: all names of a table read from memory; in a file's table, the names read so far
     * (the caller's, e.g. sym_file's memo of demangled names and DWARF strings) */
    struct pfr_sym_strpool names;
    /* a table read from a file: where its names are, and the file as it was when parsed (a
     * name is read only while size, mtime and inode still match) */
    bool lazy;
    bool stale; /* the file changed since: no more name reads */
    struct pfr_sym_elf_strtab tabs[PFR_ELF_MAX_STRTABS];
    size_t ntabs;
    uint64_t dev, ino, size;
    int64_t mtime_ns;
};

/* The headers of the ELF file open at fd, checked before libelf reads them (elf_begin keeps a
 * struct per section header, elf_strptr reads the section names whole): at most
 * PFR_SYM_MAX_SECTIONS sections, section names of at most PFR_SYM_MAX_SHSTRTAB bytes, tables
 * inside the file. 0, or -EFBIG / -EBADMSG with the reason in b and err; -ENOEXEC for a file
 * that is no ELF (not counted as refused). */
int pfr_sym_elf_precheck(int fd, struct pfr_sym_budget *b, char *err, size_t errlen);

/* Segments, build-id and flags. Returns 0 or -EINVAL (not an ELF we can use) with a reason. */
int pfr_sym_elf_read_info(Elf *e, struct pfr_sym_elf_info *out, char *err, size_t errlen);

/* Function symbols (STT_FUNC, STT_GNU_IFUNC) in executable sections: .symtab, and .dynsym for
 * names .symtab lacks, plus "name@plt" for PLT stubs. Fails with -EFBIG when the table would
 * take more than max_bytes. out must be zeroed; on error it is left empty.
 *
 * Limits, checked before a table is read (b, which may be NULL, gets the first refusal): a
 * table of more than PFR_ELF_MAX_ENTRIES(max_bytes) entries fails the file (-EFBIG,
 * too_many_symbols), as do more candidates than the bound holds; a string table over
 * PFR_ELF_MAX_STRTAB(max_bytes) bytes (its names are not read: too_big) or a table outside the
 * file, compressed or of broken entries (bad_file) is skipped; past b's deadline the parse stops
 * (-ETIME, time_budget).
 *
 * pfr_sym_elf_read_syms copies the names of the symbols kept into out->names (e is read from
 * memory, or the whole file is read in: for small images, the vDSO, tests).
 * pfr_sym_elf_read_syms_fd reads the tables from fd (the file e was opened from) in small
 * pieces and keeps no name: only 16 bytes per symbol stay, and names are read from fd when
 * needed (pfr_sym_elf_read_name), so fd must stay open as long as names may be asked for. */
int pfr_sym_elf_read_syms(Elf *e, struct pfr_sym_elf_syms *out, size_t max_bytes,
                          struct pfr_sym_budget *b, char *err, size_t errlen);
int pfr_sym_elf_read_syms_fd(Elf *e, int fd, struct pfr_sym_elf_syms *out, size_t max_bytes,
                             struct pfr_sym_budget *b, char *err, size_t errlen);

/* Entries of one symbol table read at most (4x the candidates max_bytes holds), and the largest
 * string table whose names are read (a bit per byte of it is kept while parsing: at most
 * max_bytes). */
#define PFR_ELF_MAX_ENTRIES(max_bytes) ((max_bytes) / 24 * 8)
#define PFR_ELF_MAX_STRTAB(max_bytes)  ((uint64_t)(max_bytes)*8)

#define PFR_ELF_MAX_NAME 65536 /* longest name read from a file, NUL included */

/* The name of sym as the file has it ("@plt" appended for PLT stubs) into buf, NUL-terminated.
 * Returns its length, or -ENAMETOOLONG (does not fit cap; at most PFR_ELF_MAX_NAME is ever
 * needed), -ESTALE (the file changed on disk since it was parsed: truncated, rewritten; every
 * later call fails too), -EIO (unreadable). For a table read from memory, the copied name. */
int pfr_sym_elf_read_name(struct pfr_sym_elf_syms *s, int fd, const struct pfr_sym_elf_sym *sym,
                          char *buf, size_t cap);

/* An upper bound of what pfr_sym_elf_read_syms_fd() keeps for e, from the section headers alone
 * (every entry of .symtab and .dynsym), to make room before. */
size_t pfr_sym_elf_syms_estimate(Elf *e);

/* The symbol whose extent holds vaddr, or NULL. O(log n). */
const struct pfr_sym_elf_sym *pfr_sym_elf_find(const struct pfr_sym_elf_syms *s, uint64_t vaddr);

/* File offset -> link-time virtual address through the PT_LOAD segment holding it. */
bool pfr_sym_elf_off_to_vaddr(const struct pfr_sym_elf_info *i, uint64_t off, uint64_t *vaddr);

size_t pfr_sym_elf_syms_bytes(const struct pfr_sym_elf_syms *s);
void pfr_sym_elf_syms_free(struct pfr_sym_elf_syms *s);

/* Hex build-id, or "" without one; buf needs 2 * PFR_ELF_MAX_BUILDID + 1 bytes. */
void pfr_sym_elf_id_hex(const struct pfr_sym_elf_info *i, char *buf, size_t len);

/* len bytes of fd at off, EINTR retried: false when the file ends first or cannot be read. */
bool pfr_sym_pread_full(int fd, void *buf, size_t len, uint64_t off);

#endif
