/* pfr_buf: a growable byte buffer with a sticky allocation error (see pfr_buf.h). */
#include "pfr_buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pfr_buf_reserve(pfr_buf *b, size_t extra)
{
    if (b->oom)
        return -ENOMEM;
    if (extra <= b->cap - b->len)
        return 0;
    size_t need = b->len + extra;
    if (need < b->len) {
        b->oom = true;
        return -ENOMEM;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return -ENOMEM;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void pfr_buf_put(pfr_buf *b, const void *p, size_t n)
{
    if (n == 0 || pfr_buf_reserve(b, n) < 0)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void pfr_buf_putc(pfr_buf *b, char c)
{
    pfr_buf_put(b, &c, 1);
}

void pfr_buf_puts(pfr_buf *b, const char *s)
{
    pfr_buf_put(b, s, strlen(s));
}

void pfr_buf_printf(pfr_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || pfr_buf_reserve(b, (size_t)n + 1) < 0)
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void pfr_buf_u64le(pfr_buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    pfr_buf_put(b, x, 8);
}

void pfr_buf_uvarint(pfr_buf *b, uint64_t v)
{
    uint8_t x[10];
    size_t n = 0;
    while (v >= 0x80) {
        x[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    x[n++] = (uint8_t)v;
    pfr_buf_put(b, x, n);
}

const char *pfr_buf_cstr(pfr_buf *b)
{
    if (pfr_buf_reserve(b, 1) < 0)
        return NULL;
    b->data[b->len] = 0;
    return (const char *)b->data;
}

void pfr_buf_reset(pfr_buf *b)
{
    b->len = 0;
    b->oom = false;
}

void pfr_buf_free(pfr_buf *b)
{
    free(b->data);
    *b = (pfr_buf){0};
}
