/* libFuzzer target: the unwind table builder over arbitrary bytes (forged and truncated ELF
 * files), from memory and from a descriptor. Either both fail or both give the same table, and a
 * table is always sorted, merged, searchable and ends with a NONE row. The builder's limits are
 * the defaults (the .eh_frame_hdr count and compressed sections' declared sizes are read before
 * the rest), but for the CPU time, which would differ between the two builds. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unwind_table.h"

static void check(const pfr_unwind_table *t)
{
    if (t->nrows < 2 || t->rows[0].pc != 0 ||
        PFR_UW_RULE_KIND(t->rows[t->nrows - 1].rule) != PFR_UW_NONE)
        abort();
    for (size_t i = 0; i < t->nrows; i++) {
        if (PFR_UW_RULE_KIND(t->rows[i].rule) >= PFR_UW_KINDS)
            abort();
        if (i > 0 && (t->rows[i - 1].pc >= t->rows[i].pc || t->rows[i - 1].rule == t->rows[i].rule))
            abort();
        if (pfr_unwind_table_find(t, t->base + t->rows[i].pc) != &t->rows[i])
            abort();
    }
    if (t->base && pfr_unwind_table_find(t, t->base - 1) != NULL)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfr_unwind_table m, f;
    char err[256];
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.max_cpu_ns = 0;
    int rm = pfr_unwind_table_build_mem_limited(data, size, PFR_UNWIND_BUILD_GO, &lim, &m, err,
                                                sizeof(err));
    if (rm == 0)
        check(&m);
    else if (m.rows || m.nrows || !err[0])
        abort(); /* an error leaves no table and says why */

    int fd = memfd_create("fuzz-unwind", MFD_CLOEXEC);
    if (fd >= 0 && (size == 0 || write(fd, data, size) == (ssize_t)size)) {
        int rf =
            pfr_unwind_table_build_limited(fd, PFR_UNWIND_BUILD_GO, &lim, &f, err, sizeof(err));
        if ((rf == 0) != (rm == 0))
            abort();
        if (rf == 0) {
            if (f.nrows != m.nrows || f.base != m.base || f.delta != m.delta ||
                memcmp(f.rows, m.rows, f.nrows * sizeof(f.rows[0])) != 0)
                abort();
            pfr_unwind_table_free(&f);
        }
    }
    if (fd >= 0)
        close(fd);
    pfr_unwind_table_free(&m);
    return 0;
}
