/* buf: a growable byte buffer with a sticky allocation error, for request bodies. */
#ifndef PFR_SHIP_BUF_H
#define PFR_SHIP_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pfr_buf {
    uint8_t *data; /* owned; NUL-terminated when len < cap (pfr_buf_cstr) */
    size_t len, cap;
    bool oom; /* an allocation failed: every later append is dropped */
} pfr_buf;

/* Make room for extra more bytes; 0 or -ENOMEM (and sets oom). */
int pfr_buf_reserve(pfr_buf *b, size_t extra);
void pfr_buf_put(pfr_buf *b, const void *p, size_t n);
void pfr_buf_putc(pfr_buf *b, char c);
void pfr_buf_puts(pfr_buf *b, const char *s);
void pfr_buf_printf(pfr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pfr_buf_u64le(pfr_buf *b, uint64_t v);
/* LEB128 unsigned varint (ClickHouse's string and array lengths, protobuf's varints). */
void pfr_buf_uvarint(pfr_buf *b, uint64_t v);
/* ClickHouse RowBinary String: varint length, then the bytes. */
void pfr_buf_chstr(pfr_buf *b, const char *s, size_t n);
/* The content as a C string (appends a NUL that len does not count); NULL after oom. */
const char *pfr_buf_cstr(pfr_buf *b);
void pfr_buf_reset(pfr_buf *b);
void pfr_buf_free(pfr_buf *b);

#endif
