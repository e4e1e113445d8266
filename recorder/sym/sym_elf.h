/*
 * sym_elf: what the symbolizer needs from one ELF file, read with libelf from a handle the
 * caller opened (file or memory): the PT_LOAD segments (to turn a file offset into a link-time
 * address, which covers PIE and shared-library load bias), the build-id, and the function
 * symbols of .symtab then .dynsym, sorted by address with their extents.
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
};

struct pfr_sym_elf_sym {
    uint64_t addr;
    uint32_t len;       /* extent in bytes, at least 1 */
    uint32_t name;      /* offset in pfr_sym_elf_syms.names */
    uint32_t demangled; /* 0: not tried yet; PFR_STR_NONE: not mangled; else offset */
};

struct pfr_sym_elf_syms {
    struct pfr_sym_elf_sym *v; /* owned, sorted by addr, non-overlapping */
    size_t n;
    struct pfr_sym_strpool names;
};

/* Segments, build-id and flags. Returns 0 or -EINVAL (not an ELF we can use) with a reason. */
int pfr_sym_elf_read_info(Elf *e, struct pfr_sym_elf_info *out, char *err, size_t errlen);

/* Function symbols (STT_FUNC, STT_GNU_IFUNC) in executable sections: .symtab, and .dynsym for
 * names .symtab lacks. Fails with -EFBIG when the table would take more than max_bytes.
 * out must be zeroed; on error it is left empty. */
int pfr_sym_elf_read_syms(Elf *e, struct pfr_sym_elf_syms *out, size_t max_bytes, char *err,
                          size_t errlen);

/* An upper bound of what pfr_sym_elf_read_syms() keeps for e, from the section headers alone
 * (every entry of .symtab and .dynsym and their whole string tables), to make room before. */
size_t pfr_sym_elf_syms_estimate(Elf *e);

/* The symbol whose extent holds vaddr, or NULL. O(log n). */
const struct pfr_sym_elf_sym *pfr_sym_elf_find(const struct pfr_sym_elf_syms *s, uint64_t vaddr);

/* File offset -> link-time virtual address through the PT_LOAD segment holding it. */
bool pfr_sym_elf_off_to_vaddr(const struct pfr_sym_elf_info *i, uint64_t off, uint64_t *vaddr);

size_t pfr_sym_elf_syms_bytes(const struct pfr_sym_elf_syms *s);
void pfr_sym_elf_syms_free(struct pfr_sym_elf_syms *s);

/* Hex build-id, or "" without one; buf needs 2 * PFR_ELF_MAX_BUILDID + 1 bytes. */
void pfr_sym_elf_id_hex(const struct pfr_sym_elf_info *i, char *buf, size_t len);

#endif
