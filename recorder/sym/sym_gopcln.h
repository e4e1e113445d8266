/*
 * sym_gopcln: function names and file:line from a Go binary's .gopclntab, the table the Go
 * runtime itself uses for tracebacks. It survives `-ldflags='-s -w'` and strip (it is loaded
 * data), so stripped Go binaries, common in containers, still get Go names and lines.
 *
 * Formats: Go 1.16-1.17, 1.18-1.19 and 1.20+ (header magics 0xfffffffa, 0xfffffff0,
 * 0xfffffff1). Opened on a file, only its function table is copied (and bounded by a budget);
 * a lookup reads the rest of what it needs from the file. Every offset read is checked, so a
 * forged or truncated table yields "not found", never an out-of-bounds read.
 * Inlined calls are not expanded: inside an inlined body the enclosing function is named and
 * the line left out, rather than pairing its name with the callee's line.
 */
#ifndef PFR_SYM_GOPCLN_H
#define PFR_SYM_GOPCLN_H

#include <gelf.h>

#include "sym_refusal.h"
#include <stddef.h>
#include <stdint.h>

struct pfr_sym_gopcln;

struct pfr_sym_gopcln_frame {
    const char *name; /* as Go writes it: "main.main", "net/http.(*conn).serve" */
    const char *file; /* or NULL */
    int64_t line;     /* 0 when unknown */
};

/* The .gopclntab of e, from fd (the file e was opened from, not owned: it must stay open while
 * the table is used, for lookups read through it; with fd < 0 the whole section is copied
 * through libelf). What is kept is checked before it is read: -EFBIG over max_bytes (too_big in
 * b, which may be NULL). -ENODATA without a .gopclntab, -ENOTSUP for an unknown format, -EINVAL
 * for a header whose counts or offsets do not fit the section (bad_file). */
int pfr_sym_gopcln_open(Elf *e, int fd, size_t max_bytes, struct pfr_sym_budget *b,
                        struct pfr_sym_gopcln **out, char *err, size_t errlen);
/* Parse a table already in memory (copied), for tests and fuzzing; text_start is the address
 * of .text, used when the header leaves it to a relocation. */
int pfr_sym_gopcln_open_mem(const uint8_t *data, size_t size, uint64_t text_start,
                            struct pfr_sym_gopcln **out, char *err, size_t errlen);
/* 1 and the frame for a link-time address, or 0 when no function holds it (or the file can no
 * longer be read). The frame's strings are valid until the next lookup on g. */
int pfr_sym_gopcln_lookup(struct pfr_sym_gopcln *g, uint64_t vaddr,
                          struct pfr_sym_gopcln_frame *out);
size_t pfr_sym_gopcln_bytes(const struct pfr_sym_gopcln *g);
void pfr_sym_gopcln_free(struct pfr_sym_gopcln *g);

#endif
