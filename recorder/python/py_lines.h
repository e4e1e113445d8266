/*
 * py_lines: the line of an instruction from a code object's line table, read from a process
 * (so any bytes at all: a table cut short, garbage, a hostile process's).
 *
 * 3.11+ location table (CPython's Objects/locations.md): a sequence of entries, each starting
 * with a byte with bit 7 set, bits 3-6 its form, bits 0-2 the code units it covers minus one;
 * forms 0-9 (short: same line), 10-12 (one line: line + form - 10, two column bytes), 13 (no
 * columns: a signed varint line delta), 14 (long: signed line delta, then end line, column and
 * end column as varints) and 15 (no location). Varints are 6 bits a byte, bit 6 = more.
 *
 * 3.10 co_linetable (PEP 626; CPython's Objects/lnotab_notes.txt): pairs of bytes, an unsigned
 * count of bytecode bytes and a signed line delta. Each pair covers the next count bytes of
 * bytecode (none when 0) and moves the line by its delta, -128 meaning "no line" (the line is
 * left as it was, for the pairs after).
 *
 * 3.8 and 3.9 co_lnotab: pairs of bytes, an unsigned bytecode increment and a signed line
 * increment; an instruction's line is the first line plus the line increments of every pair
 * whose bytecode increments, summed, do not pass the instruction's offset.
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

/* The same for 3.10's co_linetable and 3.8/3.9's co_lnotab (unit: code unit index, 2 bytes of
 * bytecode each). An odd last byte is ignored. co_lnotab covers all code (-2 never, but for a
 * NULL table). */
int64_t pfr_py_line_310(const uint8_t *tab, size_t len, int64_t firstlineno, uint32_t unit);
int64_t pfr_py_line_lnotab(const uint8_t *tab, size_t len, int64_t firstlineno, uint32_t unit);

/* By kind (enum pfr_py_lines_kind, py_layout.h); -2 for a kind not known. */
int64_t pfr_py_line(unsigned kind, const uint8_t *tab, size_t len, int64_t firstlineno,
                    uint32_t unit);

#endif
