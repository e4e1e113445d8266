/*
 * py_lines: the line of an instruction from a code object's line table, read from a process
 * (so any bytes at all: a table cut short, garbage, a hostile process's).
 *
 * 3.11+ location table (CPython's Objects/locations.md): a sequence of entries, each starting
 * with a byte with bit 7 set, bits 3-6 its form, bits 0-2 the code units it covers minus one;
 * forms 0-9 (short: same line), 10-12 (one line: line + form - 10, two column bytes), 13 (no
 * columns: a signed varint line delta), 14 (long: signed line delta, then end line, column and
 * end column as varints) and 15 (no location). Varints are 6 bits a byte, bit 6 = more.
 */
#ifndef PFR_PY_LINES_H
#define PFR_PY_LINES_H

#include <stddef.h>
#include <stdint.h>

/* The line of the instruction at code unit index unit (0 = the first instruction) in a 3.11+
 * location table of len bytes, counting from firstlineno. Returns the line (>= 0), -1 when
 * the table says the instruction has no location, -2 when the table does not cover unit or is
 * malformed before reaching it. Reads no byte outside [tab, tab + len). */
int64_t pfr_py_line_311(const uint8_t *tab, size_t len, int64_t firstlineno, uint32_t unit);

#endif
