/* Synthetic ELF64 files for the scrape tests: a header, the given sections, a section name
 * table and the section headers, laid out in one buffer. */
#ifndef PFR_SCRAPE_ELFGEN_H
#define PFR_SCRAPE_ELFGEN_H

#include <stddef.h>
#include <stdint.h>

struct eg_section {
    const char *name;
    uint32_t type;
    const void *data;
    size_t size;
    uint32_t link; /* index among the given sections, + 1 (0 = none) */
    uint64_t entsize;
};

/* *out is malloc'ed. Section i of secs is section i + 1 of the file. */
int pfr_eg_build(const struct eg_section *secs, size_t n, uint8_t **out, size_t *len);

/* A Go-like executable: .go.buildinfo (with its magic unless bad_magic), and, per flags,
 * a .symtab/.strtab naming `symbol` (as a function unless as_object), or a .gopclntab holding
 * `symbol` among other names. pad puts that many filler bytes before the name in the table. */
enum {
    EG_GO = 1u << 0,
    EG_SYMTAB = 1u << 1,
    EG_PCLNTAB = 1u << 2,
    EG_AS_OBJECT = 1u << 3,
    EG_BAD_MAGIC = 1u << 4,
    EG_NO_LEADING_NUL = 1u << 5,
};
int pfr_eg_go_binary(unsigned flags, const char *symbol, size_t pad, uint8_t **out, size_t *len);

#endif
