/* libFuzzer target: the Go executable reader (ELF headers, .go.buildinfo, streamed .symtab and
 * .strtab) over fuzzed file bytes. */
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "goheap_elf.h"

typedef struct memfile {
    const uint8_t *p;
    size_t len;
} memfile;

static ssize_t mf_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
    memfile *m = ctx;
    if (off >= m->len)
        return 0;
    size_t n = m->len - off < len ? m->len - off : len;
    memcpy(buf, m->p + off, n);
    return (ssize_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memfile m = {data, size};
    pfr_goheap_file f = {&m, mf_pread, size, 0};
    pfr_goheap_elfinfo in;
    char err[128];
    pfr_goheap_elf_inspect(&f, &in, err, sizeof(err));
    return 0;
}
