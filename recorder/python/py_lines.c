/* Line tables of CPython code objects (py_lines.h). */
#include "py_lines.h"

#include <stdbool.h>

#include "py_layout.h"

/* Varints longer than this are refused: 6 bytes hold 36 bits, more than any line or column. */
#define VARINT_MAX_BYTES 6

typedef struct cursor {
    const uint8_t *p, *end;
} cursor;

/* A varint continuing the entry: its bytes never have bit 7 set (that starts an entry). */
static bool read_varint(cursor *c, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < VARINT_MAX_BYTES; i++) {
        if (c->p >= c->end || (*c->p & 0x80))
            return false;
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x3f) << (6 * i);
        if (!(b & 0x40)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static bool read_svarint(cursor *c, int64_t *out)
{
    uint64_t v;
    if (!read_varint(c, &v))
        return false;
    *out = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
    return true;
}

static bool skip_bytes(cursor *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (c->p >= c->end || (*c->p & 0x80))
            return false;
        c->p++;
    }
    return true;
}

/* Decode one entry's line delta, leaving c at the next entry. */
static bool entry_delta(cursor *c, unsigned form, int64_t *delta)
{
    uint64_t skip;
    *delta = 0;
    if (form == 15)
        return true; /* no location */
    if (form == 14) {
        return read_svarint(c, delta) && read_varint(c, &skip) && read_varint(c, &skip) &&
               read_varint(c, &skip);
    }
    if (form == 13)
        return read_svarint(c, delta);
    if (form >= 10) {
        *delta = (int64_t)form - 10;
        return skip_bytes(c, 2);
    }
    return skip_bytes(c, 1); /* short form: the column byte */
}

int64_t pfr_py_line_311(const uint8_t *tab, size_t len, int64_t firstlineno, uint32_t unit)
{
    if (!tab)
        return -2;
    cursor c = {tab, tab + len};
    int64_t line = firstlineno;
    uint64_t addr = 0;
    while (c.p < c.end) {
        uint8_t head = *c.p++;
        if (!(head & 0x80))
            return -2;
        unsigned form = (head >> 3) & 15;
        uint64_t units = (uint64_t)(head & 7) + 1;
        int64_t delta;
        if (!entry_delta(&c, form, &delta))
            return -2;
        /* lines stay in a sane range whatever the deltas say */
        if ((delta > 0 && line > INT32_MAX - delta) || (delta < 0 && line < INT32_MIN - delta))
            return -2;
        line += delta;
        if (unit < addr + units)
            return form == 15 || line < 0 ? -1 : line;
        addr += units;
    }
    return -2;
}

int64_t pfr_py_line_310(const uint8_t *tab, size_t len, int64_t firstlineno, uint32_t unit)
{
    if (!tab)
        return -2;
    const uint64_t at = (uint64_t)unit * 2; /* the instruction's byte offset */
    uint64_t end = 0;
    int64_t line = firstlineno;
    for (size_t i = 0; i + 1 < len; i += 2) {
        end += tab[i];
        int8_t delta = (int8_t)tab[i + 1];
        bool none = delta == -128;
        if (!none)
            line += delta; /* at most 127 a pair: no overflow within 64 KiB of pairs */
        if (at < end)
            return none || line < 0 ? -1 : line;
    }
    return -2;
}

int64_t pfr_py_line_lnotab(const uint8_t *tab, size_t len, int64_t firstlineno, uint32_t unit)
{
    if (!tab)
        return -2;
    const uint64_t at = (uint64_t)unit * 2;
    uint64_t addr = 0;
    int64_t line = firstlineno;
    for (size_t i = 0; i + 1 < len; i += 2) {
        addr += tab[i];
        if (addr > at)
            break;
        line += (int8_t)tab[i + 1];
    }
    return line < 0 ? -1 : line;
}

int64_t pfr_py_line(unsigned kind, const uint8_t *tab, size_t len, int64_t firstlineno,
                    uint32_t unit)
{
    switch (kind) {
    case PFR_PY_LINES_311:
        return pfr_py_line_311(tab, len, firstlineno, unit);
    case PFR_PY_LINES_310:
        return pfr_py_line_310(tab, len, firstlineno, unit);
    case PFR_PY_LINES_LNOTAB:
        return pfr_py_line_lnotab(tab, len, firstlineno, unit);
    default:
        return -2;
    }
}
