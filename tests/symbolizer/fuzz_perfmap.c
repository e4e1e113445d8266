/* libFuzzer target: the perf map reader over arbitrary text, read as a file that grows piece by
 * piece, under a byte budget. The first two bytes choose the budget and the piece size. Checks
 * that the kept entries stay disjoint, sorted, findable, within the budget, and that each one's
 * name reads back from the file without control characters. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sym_perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t budget = 64u + (size_t)data[0] * 32u, piece = 1u + (size_t)data[1] * 37u;
    const char *text = (const char *)data + 2;
    size_t len = size - 2, at = 0;
    struct pfr_sym_perfmap m;
    pfr_sym_perfmap_init(&m);
    m.fd = memfd_create("perf-map", MFD_CLOEXEC);
    if (m.fd < 0)
        abort();
    char err[256];
    while (at < len) { /* the writer appends a piece, the reader reads what is there */
        size_t n = at + piece < len ? piece : len - at;
        if (pwrite(m.fd, text + at, n, (off_t)at) != (ssize_t)n)
            abort();
        at += n;
        if (pfr_sym_perfmap_update(&m, budget, err, sizeof(err)) != 0)
            break;
        if (!m.full && at - m.off >= PFR_PERFMAP_MAX_LINE)
            abort(); /* an overlong line must not stall the reader */
    }
    if (pfr_sym_perfmap_bytes(&m) > budget)
        abort();
    for (size_t i = 0; i < m.n; i++) {
        const struct pfr_perfmap_ent *e = &m.v[i];
        if (e->start >= e->end || (i > 0 && m.v[i - 1].end > e->start))
            abort();
        if (pfr_sym_perfmap_find(&m, e->start) != e || pfr_sym_perfmap_find(&m, e->end - 1) != e)
            abort();
        const char *name = pfr_sym_perfmap_name(&m, e);
        if (!name)
            abort();
        for (const char *c = name; *c; c++)
            if ((unsigned char)*c < 0x20 && *c != '\t')
                abort();
    }
    pfr_sym_perfmap_free(&m);
    return 0;
}
