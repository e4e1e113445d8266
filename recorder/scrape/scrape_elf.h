/*
 * scrape_elf: does an executable look like a Go program that serves net/http/pprof?
 *
 * A Go binary has a .go.buildinfo section (starting with the "\xff Go buildinf:" magic). It links
 * net/http/pprof when a function symbol net/http/pprof.Index is in .symtab (the package's init
 * registers it, so the linker keeps it). .strtab is streamed in 64 KiB blocks to find the offset
 * of that name, then .symtab in 64 KiB blocks to find a function symbol with that name offset:
 * neither table is held whole. A stripped binary has no .symtab; its function names are still in
 * .gopclntab, which is streamed the same way for the NUL-delimited name.
 *
 * Input may be anything (a truncated or hostile file): every offset and size is checked against
 * the file size, and reads are bounded.
 */
#ifndef PFR_SCRAPE_ELF_H
#define PFR_SCRAPE_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* pread semantics: bytes read, 0 at the end, or a negative errno. */
struct sc_file {
    void *ctx;
    ssize_t (*pread)(void *ctx, void *buf, size_t len, uint64_t off);
    uint64_t size;
};
/* A file over an open descriptor (ctx is the fd). */
struct sc_file pfr_scrape_fd_file(int fd, uint64_t size);

struct sc_elf_info {
    bool is_go;        /* .go.buildinfo with its magic */
    bool has_symtab;   /* a .symtab (false: stripped) */
    bool has_pclntab;  /* a .gopclntab */
    bool pprof;        /* net/http/pprof.Index found */
    bool from_pclntab; /* ... in .gopclntab rather than .symtab */
    unsigned reads;    /* pread calls */
};

/* The symbol looked for. */
#define SC_PPROF_SYMBOL "net/http/pprof.Index"

/* Inspect f. 0 for a well-formed little-endian ELF64 (is_go false for a non-Go one), -ENOEXEC if
 * it is not one, -EBADMSG if malformed (reason in err), or the reader's negative errno. */
int pfr_scrape_elf_inspect(const struct sc_file *f, struct sc_elf_info *out, char *err,
                           size_t errlen);

#endif
