#include "sym_vdso.h"

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#define VDSO_MAX (1u << 20)

void *pfr_sym_vdso_copy(size_t *size)
{
    const unsigned char *base = (const unsigned char *)getauxval(AT_SYSINFO_EHDR);
    if (!base || memcmp(base, ELFMAG, SELFMAG) != 0 || base[EI_CLASS] != ELFCLASS64)
        return NULL;
    Elf64_Ehdr eh;
    memcpy(&eh, base, sizeof(eh));
    /* the image ends with its section headers, or its last loaded byte */
    uint64_t end = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
    if (eh.e_phoff > VDSO_MAX || eh.e_phnum > 64 || eh.e_phentsize != sizeof(Elf64_Phdr))
        return NULL;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, base + eh.e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > end)
            end = ph.p_offset + ph.p_filesz;
    }
    if (end == 0 || end > VDSO_MAX)
        return NULL;
    void *copy = malloc(end);
    if (!copy)
        return NULL;
    memcpy(copy, base, end);
    *size = end;
    return copy;
}
