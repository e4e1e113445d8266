/*
 * sym_dwline: how many rows a DWARF line program makes, counted without building them. libdw
 * builds a unit's whole line table at its first lookup, ~110 bytes a row at its peak, and a
 * program of one-byte special opcodes makes a row per byte: 12 MiB of .debug_line (12 KiB
 * compressed) made 1.3 GB. Counting first lets the caller refuse a table before it is built.
 */
#ifndef PFR_SYM_DWLINE_H
#define PFR_SYM_DWLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PFR_DWLINE_BAD UINT64_MAX

/* Rows of the line program at offset off of .debug_line (sec, size bytes, in the file's byte
 * order: swap when it is not the host's), counting stops past max_rows (max_rows + 1 is
 * returned). PFR_DWLINE_BAD when the program is malformed or runs past the section. Reads
 * only the header fields it needs (the directory and file tables are skipped by
 * header_length); versions 2 to 5. */
uint64_t pfr_sym_dwline_rows(const uint8_t *sec, size_t size, uint64_t off, bool swap,
                             uint64_t max_rows);

#endif
