/* libFuzzer target: the unwind cache's file reader over arbitrary bytes (torn, altered and
 * forged table files). A file it accepts holds a table as the builder makes them (pcs rising
 * from 0, neighbours' rules different, a NONE row last), and written again it reads back the
 * same. The bytes are given as a file (a memfd), as the cache reads its directory's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unwind_cache.h"

/* rows a reader may hold here: the recorder's map holds 2M by default */
#define MAX_ROWS (1u << 21)

static void check(const pfr_unwind_table *t)
{
    if (t->nrows < 2 || t->rows[0].pc != 0 ||
        PFR_UW_RULE_KIND(t->rows[t->nrows - 1].rule) != PFR_UW_NONE)
        abort();
    for (size_t i = 1; i < t->nrows; i++)
        if (t->rows[i - 1].pc >= t->rows[i].pc || t->rows[i - 1].rule == t->rows[i].rule ||
            PFR_UW_RULE_KIND(t->rows[i].rule) >= PFR_UW_KINDS)
            abort();
}

static int file_of(const uint8_t *data, size_t size)
{
    int fd = memfd_create("uwcache", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = file_of(data, size);
    pfr_unwind_table t, back;
    pfr_unwind_cache_key key;
    int rc = pfr_unwind_cache_read_fd(fd, NULL, MAX_ROWS, &t, &key);
    close(fd);
    if (rc) {
        if (t.rows || t.nrows)
            abort();
        return 0;
    }
    check(&t);
    fd = memfd_create("uwcache2", MFD_CLOEXEC);
    if (fd < 0 || pfr_unwind_cache_write_fd(fd, &key, &t) != 0 ||
        pfr_unwind_cache_read_fd(fd, &key, MAX_ROWS, &back, NULL) != 0)
        abort();
    if (back.nrows != t.nrows || back.base != t.base || back.delta != t.delta ||
        memcmp(back.rows, t.rows, t.nrows * sizeof(*t.rows)) != 0)
        abort();
    close(fd);
    pfr_unwind_table_free(&back);
    pfr_unwind_table_free(&t);
    return 0;
}
