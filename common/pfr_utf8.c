#include "pfr_utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t pfr_utf8_seq(const unsigned char *s, size_t n, int32_t *cp)
{
    unsigned char u = s[0];
    size_t len;
    int32_t v;
    if (u < 0x80) {
        *cp = u;
        return 1;
    }
    if (u < 0xC2 || u > 0xF4)
        return 0;
    if (u < 0xE0) {
        len = 2;
        v = u & 0x1F;
    } else if (u < 0xF0) {
        len = 3;
        v = u & 0x0F;
    } else {
        len = 4;
        v = u & 0x07;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (len == 3 && v < 0x800) ||
        (len == 4 && v < 0x10000))
        return 0;
    *cp = v;
    return len;
}

char *pfr_utf8_lossy(const char *str, int *err)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), i = 0, bad = 0;
    int32_t cp;
    *err = 0;
    while (i < n) {
        size_t len = s[i] < 0x80 ? 1 : pfr_utf8_seq(s + i, n - i, &cp);
        bad += len == 0;
        i += len ? len : 1;
    }
    if (!bad)
        return NULL;
    char *out = malloc(n + bad * 2 + 1); /* each bad byte grows to 3 */
    if (!out) {
        *err = -ENOMEM;
        return NULL;
    }
    size_t o = 0;
    for (i = 0; i < n;) {
        size_t len = s[i] < 0x80 ? 1 : pfr_utf8_seq(s + i, n - i, &cp);
        if (len) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(out + o, PFR_UTF8_REPLACEMENT, 3);
            o += 3;
            i++;
        }
    }
    out[o] = 0;
    return out;
}
