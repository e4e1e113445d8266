/*
 * goheap_elf: what the Go heap reader needs to know about an executable, read with bounded
 * memory from a file that may be anything (a truncated or hostile ELF).
 *
 * A Go binary is recognised by its .go.buildinfo section (whose header also carries the Go
 * version since Go 1.18). runtime.mbuckets and runtime.MemProfileRate are found by streaming:
 * one pass over .strtab in 64 KiB blocks finds the offsets of the two names, one pass over
 * .symtab in 64 KiB blocks finds the symbols with those name offsets. Neither table is ever
 * held whole in memory.
 */
#ifndef PFR_GOHEAP_ELF_H
#define PFR_GOHEAP_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pfr_refusal.h"

/* A file to read: pread semantics (bytes read, 0 at end, negative errno). */
typedef struct pfr_goheap_file {
    void *ctx;
    ssize_t (*pread)(void *ctx, void *buf, size_t len, uint64_t off);
    uint64_t size;
    int64_t deadline_ns; /* monotonic: the inspection is abandoned past it (-ETIME); 0: none */
} pfr_goheap_file;

typedef struct pfr_goheap_elfinfo {
    bool is_go;           /* has a .go.buildinfo section */
    bool has_symtab;      /* has a .symtab (false: stripped) */
    char go_version[48];  /* "go1.21.13", or "" when the build info does not say */
    uint16_t e_type;      /* ET_EXEC or ET_DYN (PIE) */
    uint64_t load_vaddr;  /* the first PT_LOAD's p_vaddr and p_offset: load bias = */
    uint64_t load_offset; /* mapping start - mapping offset - (load_vaddr - load_offset) */
    uint64_t text_vaddr, text_memsz, text_offset; /* the executable PT_LOAD */
    uint64_t mbuckets;         /* link-time address of runtime.mbuckets, 0 if not found */
    uint64_t mem_profile_rate; /* link-time address of runtime.MemProfileRate, 0 if not found */
    uint32_t reads;            /* pread calls made */
    int refused;               /* why the file was refused (enum pfr_refusal), or 0 */
} pfr_goheap_elfinfo;

/* The largest .symtab (too_many_symbols) and .strtab (too_big) scanned: Go's own are a few
 * MiB (kubectl: 4 MiB of .symtab); a bigger one is refused before a byte of it is read, so
 * a file no bigger than its declared tables (sparse) costs no time. */
#define PFR_GOHEAP_MAX_TABLE (256ull << 20)

/* Inspect f. Returns 0 for a well-formed 64-bit little-endian x86-64 ELF (is_go false for a
 * non-Go one), -ENOEXEC if f is not such an ELF, -EBADMSG if it is malformed (bad_file),
 * -EFBIG if a table it would scan is over PFR_GOHEAP_MAX_TABLE (too_big, too_many_symbols),
 * -ETIME past f's deadline (time_budget), with the reason in err and out->refused; or the
 * reader's negative errno. */
int pfr_goheap_elf_inspect(const pfr_goheap_file *f, pfr_goheap_elfinfo *out, char *err,
                           size_t errlen);

/* A pfr_goheap_file over an open descriptor (ctx is the fd cast through intptr_t). */
pfr_goheap_file pfr_goheap_fd_file(int fd, uint64_t size);

#endif
