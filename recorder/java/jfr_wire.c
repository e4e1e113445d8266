/* jfr_wire: bytes, strings and values of a JFR chunk (jfr_internal.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jfr_internal.h"
#include "pfr_utf8.h"
#include "pfr_vec.h"

int pfr_jfr_fail(jp *P, int rc, const char *fmt, ...)
{
    if (P->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(P->err, P->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- reading ---- */

int pfr_jfr_rd_varint(jp *P, rd *r, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 9; i++) {
        if (r->p >= r->end)
            return TRUNC(P);
        uint8_t b = *r->p++;
        if (i == 8) {
            x |= (uint64_t)b << 56;
            break;
        }
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (b < 0x80)
            break;
    }
    *v = x;
    return 0;
}

int pfr_jfr_rd_u8(jp *P, rd *r, uint8_t *v)
{
    if (r->p >= r->end)
        return TRUNC(P);
    *v = *r->p++;
    return 0;
}

int pfr_jfr_rd_skip(jp *P, rd *r, size_t n)
{
    if (jfr_rd_left(r) < n)
        return TRUNC(P);
    r->p += n;
    return 0;
}

/* A count of items that each take at least min_bytes: more than the data holds is malformed,
 * found before anything is allocated or looped for it. */
int pfr_jfr_rd_count(jp *P, rd *r, size_t min_bytes, const char *what, uint64_t *n)
{
    int rc = pfr_jfr_rd_varint(P, r, n);
    if (rc < 0)
        return rc;
    if (*n > jfr_rd_left(r) / (min_bytes ? min_bytes : 1))
        return pfr_jfr_fail(P, -EINVAL, "%s: count %llu is more than the %zu bytes left hold", what,
                            (unsigned long long)*n, jfr_rd_left(r));
    return 0;
}

/* ---- the string arena ---- */

int pfr_jfr_arena_reserve(jp *P, jfr_chunk *c, size_t more)
{
    if (more > UINT32_MAX - c->alen)
        return pfr_jfr_fail(P, -E2BIG, "strings of a chunk past 4 GiB");
    if (PFR_VEC_RESERVE(c->arena, c->acap, c->alen + more) < 0)
        return pfr_jfr_fail(P, -ENOMEM, "out of memory for strings");
    return 0;
}

void pfr_jfr_arena_putc(jfr_chunk *c, char ch)
{
    c->arena[c->alen++] = ch;
}

/* Appends code point cp as UTF-8; NUL and what is not a character become '?'. */
static void arena_put_cp(jfr_chunk *c, uint32_t cp)
{
    if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        pfr_jfr_arena_putc(c, '?');
    } else if (cp < 0x80) {
        pfr_jfr_arena_putc(c, (char)cp);
    } else if (cp < 0x800) {
        pfr_jfr_arena_putc(c, (char)(0xc0 | cp >> 6));
        pfr_jfr_arena_putc(c, (char)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        pfr_jfr_arena_putc(c, (char)(0xe0 | cp >> 12));
        pfr_jfr_arena_putc(c, (char)(0x80 | ((cp >> 6) & 0x3f)));
        pfr_jfr_arena_putc(c, (char)(0x80 | (cp & 0x3f)));
    } else {
        pfr_jfr_arena_putc(c, (char)(0xf0 | cp >> 18));
        pfr_jfr_arena_putc(c, (char)(0x80 | ((cp >> 12) & 0x3f)));
        pfr_jfr_arena_putc(c, (char)(0x80 | ((cp >> 6) & 0x3f)));
        pfr_jfr_arena_putc(c, (char)(0x80 | (cp & 0x3f)));
    }
}

static int read_utf8(jp *P, jfr_chunk *c, rd *r, size_t n)
{
    int rc = pfr_jfr_arena_reserve(P, c, n + 1);
    if (rc < 0)
        return rc;
    const unsigned char *s = r->p;
    r->p += n;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t k = pfr_utf8_seq(s + i, n - i, &cp);
        if (k == 0 || cp == 0) {
            pfr_jfr_arena_putc(c, '?');
            i++;
            continue;
        }
        memcpy(c->arena + c->alen, s + i, k);
        c->alen += k;
        i += k;
    }
    return 0;
}

static int read_utf16(jp *P, jfr_chunk *c, rd *r, size_t n)
{
    /* each unit is at least a byte (checked by rd_count) and at most 3 bytes of UTF-8 */
    int rc = pfr_jfr_arena_reserve(P, c, 3 * n + 1);
    uint32_t hi = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint64_t u;
        rc = pfr_jfr_rd_varint(P, r, &u);
        if (rc < 0)
            continue;
        u &= 0xffff; /* a Java char */
        if (hi) {
            if (u >= 0xdc00 && u <= 0xdfff) {
                arena_put_cp(c, 0x10000 + ((hi - 0xd800) << 10) + (uint32_t)(u - 0xdc00));
                hi = 0;
                continue;
            }
            pfr_jfr_arena_putc(c, '?');
            hi = 0;
        }
        if (u >= 0xd800 && u <= 0xdbff)
            hi = (uint32_t)u;
        else
            arena_put_cp(c, (uint32_t)u);
    }
    if (rc == 0 && hi)
        pfr_jfr_arena_putc(c, '?');
    return rc;
}

static int read_latin1(jp *P, jfr_chunk *c, rd *r, size_t n)
{
    int rc = pfr_jfr_arena_reserve(P, c, 2 * n + 1);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        arena_put_cp(c, r->p[i]);
    r->p += n;
    return 0;
}

int pfr_jfr_skip_string(jp *P, rd *r)
{
    uint8_t enc = 0;
    uint64_t n, u;
    int rc = pfr_jfr_rd_u8(P, r, &enc);
    if (rc < 0 || enc <= 1)
        return rc;
    if (enc == 2)
        return pfr_jfr_rd_varint(P, r, &u);
    if (enc > 5)
        return pfr_jfr_fail(P, -EINVAL, "unknown string encoding %u", enc);
    if ((rc = pfr_jfr_rd_count(P, r, 1, "string length", &n)) < 0)
        return rc;
    if (enc != 4)
        return pfr_jfr_rd_skip(P, r, (size_t)n);
    for (uint64_t i = 0; i < n && rc == 0; i++)
        rc = pfr_jfr_rd_varint(P, r, &u);
    return rc;
}

/* Reads a string and keeps it (in the arena, or as a pool key). */
int pfr_jfr_read_string(jp *P, jfr_chunk *c, rd *r, sref *out)
{
    uint8_t enc = 0;
    uint64_t n;
    int rc = pfr_jfr_rd_u8(P, r, &enc);
    if (rc < 0)
        return rc;
    *out = (sref){S_NONE, 0};
    switch (enc) {
    case 0:
        return 0;
    case 1:
        *out = (sref){S_ARENA, 0};
        return 0;
    case 2:
        rc = pfr_jfr_rd_varint(P, r, &n);
        if (rc == 0)
            *out = (sref){S_POOLREF, n};
        return rc;
    case 3:
    case 4:
    case 5:
        break;
    default:
        return pfr_jfr_fail(P, -EINVAL, "unknown string encoding %u", enc);
    }
    if ((rc = pfr_jfr_rd_count(P, r, 1, "string length", &n)) < 0)
        return rc;
    size_t start = c->alen;
    if (enc == 3)
        rc = read_utf8(P, c, r, (size_t)n);
    else if (enc == 4)
        rc = read_utf16(P, c, r, (size_t)n);
    else
        rc = read_latin1(P, c, r, (size_t)n);
    if (rc < 0)
        return rc;
    pfr_jfr_arena_putc(c, '\0');
    *out = (sref){S_ARENA, start};
    return 0;
}
/* ---- values ---- */

bool pfr_jfr_integral(const jfr_chunk *c, const field_def *f)
{
    if (f->array)
        return false;
    if (f->cpool)
        return true;
    uint8_t p = c->classes[f->cls].prim;
    return p >= P_BOOLEAN && p <= P_LONG;
}

int pfr_jfr_read_int(jp *P, const jfr_chunk *c, rd *r, const field_def *f, int64_t *out)
{
    uint64_t v = 0;
    uint8_t b = 0;
    int rc;
    if (f->cpool) {
        rc = pfr_jfr_rd_varint(P, r, &v);
        *out = (int64_t)v;
        return rc;
    }
    switch (c->classes[f->cls].prim) {
    case P_BOOLEAN:
        rc = pfr_jfr_rd_u8(P, r, &b);
        *out = b != 0;
        return rc;
    case P_BYTE:
        rc = pfr_jfr_rd_u8(P, r, &b);
        *out = (int8_t)b;
        return rc;
    default:
        break;
    }
    rc = pfr_jfr_rd_varint(P, r, &v);
    switch (c->classes[f->cls].prim) {
    case P_CHAR:
        *out = (uint16_t)v;
        break;
    case P_SHORT:
        *out = (int16_t)v;
        break;
    case P_INT:
        *out = (int32_t)v;
        break;
    default:
        *out = (int64_t)v;
        break;
    }
    return rc;
}

int pfr_jfr_skip_field(jp *P, const jfr_chunk *c, rd *r, const field_def *f, int depth);

/* Skips one value of class cls (not an array, not a pool key). */
int pfr_jfr_skip_value(jp *P, const jfr_chunk *c, rd *r, uint32_t cls, int depth)
{
    const class_def *cd = &c->classes[cls];
    switch (cd->prim) {
    case P_BOOLEAN:
    case P_BYTE:
        return pfr_jfr_rd_skip(P, r, 1);
    case P_CHAR:
    case P_SHORT:
    case P_INT:
    case P_LONG: {
        uint64_t v = 0;
        return pfr_jfr_rd_varint(P, r, &v);
    }
    case P_FLOAT:
        return pfr_jfr_rd_skip(P, r, 4);
    case P_DOUBLE:
        return pfr_jfr_rd_skip(P, r, 8);
    case P_STRING:
        return pfr_jfr_skip_string(P, r);
    default:
        break;
    }
    if (depth > JFR_MAX_VALUE_DEPTH)
        return pfr_jfr_fail(P, -EINVAL, "values nested deeper than %d (class %s)",
                            JFR_MAX_VALUE_DEPTH, c->arena + cd->name);
    for (uint32_t i = 0; i < cd->nlive; i++) {
        int rc = pfr_jfr_skip_field(P, c, r, &c->fields[c->live[cd->live0 + i]], depth + 1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int pfr_jfr_skip_field(jp *P, const jfr_chunk *c, rd *r, const field_def *f, int depth)
{
    uint64_t n = 1, key;
    int rc;
    if (f->array) {
        if ((rc = pfr_jfr_rd_count(P, r, 0, "array", &n)) < 0)
            return rc;
        /* elements with no bytes on the wire: nothing to walk (and no loop that reads nothing) */
        if (!f->cpool && !c->classes[f->cls].has_data)
            return 0;
    }
    for (uint64_t i = 0; i < n; i++) {
        rc = f->cpool ? pfr_jfr_rd_varint(P, r, &key) : pfr_jfr_skip_value(P, c, r, f->cls, depth);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Reads one struct value of class cls, its integer fields at live positions want[0..n) into
 * vals (bit i of *found set for each read); skips the others. */
int pfr_jfr_read_struct(jp *P, const jfr_chunk *c, rd *r, uint32_t cls, const int *want, size_t n,
                        int64_t *vals, uint32_t *found, int depth)
{
    const class_def *cd = &c->classes[cls];
    if (cd->prim != P_STRUCT)
        return pfr_jfr_skip_value(P, c, r, cls, depth);
    for (uint32_t i = 0; i < cd->nlive; i++) {
        const field_def *f = &c->fields[c->live[cd->live0 + i]];
        size_t j = 0;
        while (j < n && want[j] != (int)i)
            j++;
        int rc;
        if (j < n && pfr_jfr_integral(c, f)) {
            rc = pfr_jfr_read_int(P, c, r, f, &vals[j]);
            *found |= 1u << j;
        } else {
            rc = pfr_jfr_skip_field(P, c, r, f, depth + 1);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}
