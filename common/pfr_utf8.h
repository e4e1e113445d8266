/* UTF-8 checks for text that comes from outside (symbol names, scraped profiles, labels) and
 * goes into formats that require valid UTF-8 (JSON, SVG/HTML). */
#ifndef PFR_UTF8_H
#define PFR_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the well-formed UTF-8 sequence at s (at most n bytes, n > 0) and its code point in
 * *cp; 0 if the byte at s does not start one (overlong forms, surrogates and values past
 * U+10FFFF are not well-formed). */
size_t pfr_utf8_seq(const unsigned char *s, size_t n, int32_t *cp);

#endif
