/*
 * sym_lines: bounded line splitting for /proc text files (maps, kallsyms). A line longer than
 * max_line, more than max_lines lines, or a NUL byte rejects the input with -E2BIG / -EINVAL and
 * a reason, so a hostile or corrupt file costs bounded memory and time.
 */
#ifndef PFR_SYM_LINES_H
#define PFR_SYM_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pfr_sym_line_limits {
    size_t max_line;  /* bytes, without the newline */
    size_t max_lines; /* lines in the whole input */
};

/* Called with each line, NUL-terminated in place (no newline); lineno counts from 1. Return 0 to
 * go on, a negative errno to abort (returned by the caller). */
typedef int (*pfr_sym_line_cb)(void *ctx, char *line, size_t len, size_t lineno);

/* Reads path by chunks; returns 0, -errno when it cannot be opened or read, or the first
 * negative value of cb / of the limits. */
int pfr_sym_lines_from_file(const char *path, const struct pfr_sym_line_limits *lim,
                            pfr_sym_line_cb cb, void *ctx, char *err, size_t errlen);
/* The same over a memory buffer (copied), for tests and fuzzing. */
int pfr_sym_lines_from_mem(const char *data, size_t len, const struct pfr_sym_line_limits *lim,
                           pfr_sym_line_cb cb, void *ctx, char *err, size_t errlen);

/* Parses 1..16 hex digits at *p (before end), advancing it past them. */
bool pfr_sym_parse_hex(const char **p, const char *end, uint64_t *out);

#endif
