#include "pfr_utf8.h"


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
