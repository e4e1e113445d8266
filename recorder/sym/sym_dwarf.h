/*
 * sym_dwarf: file:line and inlined calls from DWARF, through libdw.
 *
 * Opening reads the debug sections into memory (so no file descriptor or mapping is kept, and a
 * file truncated under us cannot fault the daemon) after checking their total size against a
 * budget. An index of compile units by address range is built at open; each unit's function
 * index and line table are built on first use. A lookup is then a few binary searches plus a
 * walk down the inline tree of one function.
 */
#ifndef PFR_SYM_DWARF_H
#define PFR_SYM_DWARF_H

#include <stddef.h>
#include <stdint.h>

#include "sym_refusal.h"

#define PFR_DWARF_MAX_INLINE 32

struct pfr_sym_dwarf;

/* One frame; strings point into libdw's data and live until pfr_sym_dwarf_close(). */
struct pfr_sym_dwarf_frame {
    const char *name; /* linkage name when there is one (mangled), else the plain name; or NULL */
    const char *file; /* or NULL */
    int64_t line;
};

/* Reads the DWARF of the ELF file open at fd (the fd stays the caller's and may be closed after).
 * -ENODATA when the file has no DWARF, -EFBIG when its debug sections exceed max_bytes (their
 * sizes as declared, compressed ones' inflated size included: nothing is inflated then), -ETIME
 * when indexing its units passes b's deadline (b may be NULL). Later, a unit's line table is
 * built only if its cost (its rows, counted first: sym_dwline.h) fits under max_bytes with
 * what is held: else that unit's frames go without file:line (pfr_sym_dwarf_take_refused). */
int pfr_sym_dwarf_open(int fd, size_t max_bytes, struct pfr_sym_budget *b,
                       struct pfr_sym_dwarf **out, char *err, size_t errlen);

/* Line tables refused for their size since the last call (then 0 again). */
uint32_t pfr_sym_dwarf_take_refused(struct pfr_sym_dwarf *d);

/* The bytes pfr_sym_dwarf_open() would read for the ELF file open at fd (its debug sections,
 * uncompressed), from the section headers alone: 0 when it has no DWARF. Lets the caller make
 * room, or refuse, before anything is inflated. */
size_t pfr_sym_dwarf_size(int fd);

/* Frames for a link-time address, innermost first: inlined calls, then the function that holds
 * them. The last frame's name is the enclosing function's. Returns the count (0 when the address
 * is not covered by any unit). */
int pfr_sym_dwarf_lookup(struct pfr_sym_dwarf *d, uint64_t vaddr, struct pfr_sym_dwarf_frame *out,
                         size_t cap);

/* Memory held: debug sections plus indexes and the line tables built so far. */
size_t pfr_sym_dwarf_bytes(const struct pfr_sym_dwarf *d);
void pfr_sym_dwarf_close(struct pfr_sym_dwarf *d);

#endif
