/* libFuzzer: the streaming ELF check of local discovery (any executable on the host). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "scrape_elf.h"

struct mem {
    const uint8_t *data;
    size_t size;
};

static ssize_t mem_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
    const struct mem *m = ctx;
    if (off >= m->size)
        return 0;
    size_t n = m->size - off < len ? (size_t)(m->size - off) : len;
    memcpy(buf, m->data + off, n);
    return (ssize_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mem m = {data, size};
    struct sc_file f = {.ctx = &m, .pread = mem_pread, .size = size};
    struct sc_elf_info info;
    char err[128];
    int rc = pfr_scrape_elf_inspect(&f, &info, err, sizeof(err));
    if (rc != 0 && rc != -ENOEXEC && rc != -EBADMSG && rc != -ENOMEM)
        __builtin_trap();
    if (info.pprof && !info.is_go)
        __builtin_trap();
    return 0;
}
