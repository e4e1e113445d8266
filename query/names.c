/* Names as pfr prints them and reads them back (pfr_names.h). */
#include "pfr_names.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_utf8.h"

/* The value of the digits hex digits at s (n bytes there), or -1. */
static long hex_value(const char *s, size_t n, size_t digits)
{
    char buf[5];
    if (n < digits || digits >= sizeof(buf))
        return -1;
    for (size_t i = 0; i < digits; i++)
        if (!isxdigit((unsigned char)s[i]))
            return -1;
    memcpy(buf, s, digits);
    buf[digits] = '\0';
    return strtol(buf, NULL, 16);
}

/* UTF-8 of cp (below U+10000) into out; its length. */
static size_t put_utf8(long cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

size_t pfr_name_escape_at(const char *s, size_t n, pfr_name_form f, char out[4], size_t *outlen)
{
    *outlen = 1;
    if (n < 2)
        return 0;
    long v;
    switch (s[1]) {
    case '\\':
        out[0] = '\\';
        return 2;
    case 'x':
        v = hex_value(s + 2, n - 2, 2);
        if (v < 0 || (f == PFR_NAME_JSON && v < 0x80))
            return 0;
        out[0] = (char)v;
        return 4;
    }
    if (f != PFR_NAME_FOLDED)
        return 0;
    switch (s[1]) {
    case 'n':
        out[0] = '\n';
        return 2;
    case 't':
        out[0] = '\t';
        return 2;
    case 'r':
        out[0] = '\r';
        return 2;
    case 'u':
        v = hex_value(s + 2, n - 2, 4);
        if (v < 0 || (v >= 0xD800 && v <= 0xDFFF))
            return 0;
        *outlen = put_utf8(v, out);
        return 6;
    }
    return 0;
}

/* The buffer's text, handed to the caller, or NULL with *err = -ENOMEM. */
static char *take_string(pfr_buf *b, int *err)
{
    if (!pfr_buf_cstr(b)) {
        pfr_buf_free(b);
        *err = -ENOMEM;
        return NULL;
    }
    return (char *)pfr_buf_steal(b, NULL);
}

/* Plain in JSON form: UTF-8, and no backslash that reads as an escape. */
static bool json_plain(const unsigned char *s, size_t n)
{
    char dec[4];
    size_t declen;
    int32_t cp;
    for (size_t i = 0, len; i < n; i += len) {
        len = s[i] < 0x80 ? 1 : pfr_utf8_seq(s + i, n - i, &cp);
        if (!len || (s[i] == '\\' &&
                     pfr_name_escape_at((const char *)s + i, n - i, PFR_NAME_JSON, dec, &declen)))
            return false;
    }
    return true;
}

char *pfr_name_json(const char *name, int *err)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t n = strlen(name);
    *err = 0;
    if (json_plain(s, n))
        return NULL;
    pfr_buf b = {0};
    int32_t cp;
    for (size_t i = 0, len; i < n; i += len ? len : 1) {
        len = s[i] < 0x80 ? 1 : pfr_utf8_seq(s + i, n - i, &cp);
        if (!len)
            pfr_buf_printf(&b, "\\x%02x", s[i]);
        else if (s[i] == '\\')
            pfr_buf_put(&b, "\\\\", 2);
        else
            pfr_buf_put(&b, name + i, len);
    }
    return take_string(&b, err);
}

int pfr_name_read(const char *s, size_t n, pfr_name_form f, pfr_buf *out)
{
    char dec[4];
    size_t declen;
    for (size_t i = 0; i < n;) {
        const char *bs = memchr(s + i, '\\', n - i);
        size_t run = bs ? (size_t)(bs - s) - i : n - i;
        pfr_buf_put(out, s + i, run);
        i += run;
        if (i == n)
            break;
        size_t len = pfr_name_escape_at(s + i, n - i, f, dec, &declen);
        pfr_buf_put(out, len ? dec : "\\", len ? declen : 1);
        i += len ? len : 1;
    }
    return pfr_buf_err(out);
}

char *pfr_name_parse(const char *s, pfr_name_form f, int *err)
{
    *err = 0;
    size_t n = strlen(s);
    char dec[4];
    size_t declen;
    const char *bs = memchr(s, '\\', n);
    while (bs && !pfr_name_escape_at(bs, n - (size_t)(bs - s), f, dec, &declen))
        bs = memchr(bs + 1, '\\', n - (size_t)(bs + 1 - s));
    if (!bs)
        return NULL;
    pfr_buf b = {0};
    pfr_name_read(s, n, f, &b);
    return take_string(&b, err);
}
