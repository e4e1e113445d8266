/*
 * pfr_buf: a growable byte buffer with a sticky allocation error, the one buffer of pfr's
 * encoders (request bodies, the store's records, JSON and text output).
 *
 * A zeroed struct is an empty buffer; pfr_buf_free releases it. Appends never fail loudly: the
 * first failed allocation sets oom and every later append is dropped, so a writer checks oom
 * once at the end. data is malloc'ed: pfr_buf_steal hands it to the caller (who free()s it).
 */
#ifndef PFR_BUF_H
#define PFR_BUF_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pfr_buf {
    uint8_t *data; /* owned; NUL-terminated after pfr_buf_cstr */
    size_t len;    /* bytes written */
    size_t cap;    /* bytes allocated */
    bool oom;      /* an allocation failed: every later append is dropped */
} pfr_buf;

/* Make room for extra more bytes. @return 0, or -ENOMEM (and sets oom). */
int pfr_buf_reserve(pfr_buf *b, size_t extra);
/* Append n bytes. */
void pfr_buf_put(pfr_buf *b, const void *p, size_t n);
void pfr_buf_putc(pfr_buf *b, char c);
void pfr_buf_puts(pfr_buf *b, const char *s);
void pfr_buf_printf(pfr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Little-endian 8 bytes. */
void pfr_buf_u64le(pfr_buf *b, uint64_t v);
/* LEB128 unsigned varint (protobuf's and ClickHouse's varints, the store's records). */
void pfr_buf_uvarint(pfr_buf *b, uint64_t v);
/* @return the content as a C string (a NUL that len does not count), or NULL after oom. */
const char *pfr_buf_cstr(pfr_buf *b);
/* Empty the buffer (and forget oom), keeping the memory. */
void pfr_buf_reset(pfr_buf *b);
void pfr_buf_free(pfr_buf *b);

/* @return 0, or -ENOMEM once an append has failed: for writers that return an errno. */
static inline int pfr_buf_err(const pfr_buf *b)
{
    return b->oom ? -ENOMEM : 0;
}

static inline void pfr_buf_u8(pfr_buf *b, uint8_t v)
{
    pfr_buf_put(b, &v, 1);
}

/* Zigzag then varint: small negative numbers stay short (protobuf's sint64). */
static inline void pfr_buf_svarint(pfr_buf *b, int64_t v)
{
    pfr_buf_uvarint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* Hand the bytes to the caller: @return data (the caller free()s it; NULL if empty or after
 * oom), *len its length; the buffer is left empty. */
static inline uint8_t *pfr_buf_steal(pfr_buf *b, size_t *len)
{
    uint8_t *d = b->oom ? NULL : b->data;
    if (len)
        *len = b->oom ? 0 : b->len;
    if (b->oom)
        pfr_buf_free(b);
    *b = (pfr_buf){0};
    return d;
}

#endif
