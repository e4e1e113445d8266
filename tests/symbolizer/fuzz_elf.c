/* libFuzzer target: the ELF symbol reader over arbitrary bytes (truncated and forged files). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sym_elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t probes[] = {0, 0x100, 0x120, 0x1000, 0x401000, UINT64_MAX};
    elf_version(EV_CURRENT);
    /* libelf may convert in place: give it a private copy */
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    Elf *e = elf_memory(copy, size);
    struct pfr_sym_elf_info info;
    struct pfr_sym_elf_syms syms = {0};
    char err[128];
    if (e && pfr_sym_elf_read_info(e, &info, err, sizeof(err)) == 0 &&
        pfr_sym_elf_read_syms(e, &syms, 16u << 20, err, sizeof(err)) == 0) {
        char hex[2 * PFR_ELF_MAX_BUILDID + 1];
        pfr_sym_elf_id_hex(&info, hex, sizeof(hex));
        for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
            uint64_t va;
            if (pfr_sym_elf_off_to_vaddr(&info, probes[i], &va))
                pfr_sym_elf_find(&syms, va);
            const struct pfr_sym_elf_sym *s = pfr_sym_elf_find(&syms, probes[i]);
            if (s && strlen(pfr_sym_strpool_get(&syms.names, s->name)) == SIZE_MAX)
                abort();
        }
        for (size_t i = 0; i < syms.n; i++)
            if (pfr_sym_elf_find(&syms, syms.v[i].addr) != &syms.v[i])
                abort(); /* every kept symbol must be found at its own start */
    }
    pfr_sym_elf_syms_free(&syms);
    if (e)
        elf_end(e);
    free(copy);
    return 0;
}
