/* elfgen: small synthetic x86-64 ELF executables shaped like Go binaries, for the ELF reader's
 * unit tests and fuzz seeds. */
#ifndef PFR_TEST_ELFGEN_H
#define PFR_TEST_ELFGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct elfgen_opts {
    bool go;             /* a .go.buildinfo section */
    const char *version; /* inline Go version ("go1.21.13"), NULL for none */
    bool symtab;         /* .symtab + .strtab */
    bool with_targets;   /* runtime.mbuckets and runtime.MemProfileRate among the symbols */
    size_t fillers;      /* other symbols before them */
    size_t name_at;      /* if non-zero: runtime.mbuckets's name starts at this strtab offset */
    uint16_t e_type;     /* 0 = ET_EXEC */
} elfgen_opts;

#define ELFGEN_TEXT     0x400000ull
#define ELFGEN_DATA     0x500000ull
#define ELFGEN_MBUCKETS (ELFGEN_DATA + 0x100)
#define ELFGEN_RATE     (ELFGEN_DATA + 0x108)

/* A malloc'ed file image in *out. 0 or -1. */
int pfr_goheap_elfgen_build(const elfgen_opts *o, uint8_t **out, size_t *len);

#endif
