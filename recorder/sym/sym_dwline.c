#include "sym_dwline.h"

#include <string.h>

enum {
    LNS_COPY = 1,
    LNS_FIXED_ADVANCE_PC = 9,
    LNE_END_SEQUENCE = 1,
};

struct rd {
    const uint8_t *p, *end;
    bool swap, bad;
};

static uint64_t rd_uint(struct rd *r, size_t n)
{
    if ((size_t)(r->end - r->p) < n) {
        r->bad = true;
        r->p = r->end;
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[r->swap ? n - 1 - i : i] << (8 * i);
    r->p += n;
    return v;
}

static uint64_t rd_leb(struct rd *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; r->p < r->end; shift += 7) {
        uint8_t b = *r->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = true;
    return 0;
}

static void rd_skip(struct rd *r, uint64_t n)
{
    if ((uint64_t)(r->end - r->p) < n) {
        r->bad = true;
        r->p = r->end;
    } else {
        r->p += n;
    }
}

uint64_t pfr_sym_dwline_rows(const uint8_t *sec, size_t size, uint64_t off, bool swap,
                             uint64_t max_rows)
{
    if (!sec || off > size)
        return PFR_DWLINE_BAD;
    struct rd r = {sec + off, sec + size, swap, false};
    uint64_t len = rd_uint(&r, 4);
    size_t offsz = 4;
    if (len == 0xffffffffu) {
        len = rd_uint(&r, 8);
        offsz = 8;
    }
    if (r.bad || len > (uint64_t)(r.end - r.p))
        return PFR_DWLINE_BAD;
    r.end = r.p + len; /* the unit's end */
    uint64_t version = rd_uint(&r, 2);
    if (version < 2 || version > 5)
        return PFR_DWLINE_BAD;
    if (version >= 5)
        rd_skip(&r, 2); /* address_size, segment_selector_size */
    uint64_t hlen = rd_uint(&r, offsz);
    const uint8_t *prog = r.p;
    rd_skip(&r, 1 + (version >= 4) + 1 + 1 + 1); /* min_inst, max_ops, is_stmt, base, range */
    uint64_t opcode_base = rd_uint(&r, 1);
    const uint8_t *lengths = r.p;
    rd_skip(&r, opcode_base ? opcode_base - 1 : 0);
    if (r.bad || hlen > (uint64_t)(r.end - prog))
        return PFR_DWLINE_BAD;
    r.p = prog + hlen;
    uint64_t rows = 0;
    while (r.p < r.end && !r.bad && rows <= max_rows) {
        uint8_t op = *r.p++;
        if (op >= opcode_base) {
            rows++; /* a special opcode */
        } else if (op == 0) {
            uint64_t n = rd_leb(&r);
            if (n == 0 || r.p >= r.end) {
                rd_skip(&r, n);
                continue;
            }
            rows += *r.p == LNE_END_SEQUENCE;
            rd_skip(&r, n);
        } else if (op == LNS_COPY) {
            rows++;
        } else if (op == LNS_FIXED_ADVANCE_PC) {
            rd_skip(&r, 2); /* its operand is a uhalf, whatever the lengths say */
        } else {
            for (uint8_t k = lengths[op - 1]; k > 0 && !r.bad; k--)
                rd_leb(&r);
        }
    }
    return r.bad ? PFR_DWLINE_BAD : rows;
}
