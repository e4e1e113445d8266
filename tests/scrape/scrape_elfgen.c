#include "scrape_elfgen.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pfr_eg_build(const struct eg_section *secs, size_t n, uint8_t **out, size_t *len)
{
    size_t names = 1 + strlen(".shstrtab") + 1;
    for (size_t i = 0; i < n; i++)
        names += strlen(secs[i].name) + 1;
    size_t off = sizeof(Elf64_Ehdr);
    size_t data_total = 0;
    for (size_t i = 0; i < n; i++)
        data_total += (secs[i].size + 7) & ~(size_t)7;
    size_t shoff = (off + data_total + names + 7) & ~(size_t)7;
    size_t nsec = n + 2;
    size_t total = shoff + nsec * sizeof(Elf64_Shdr);
    uint8_t *b = calloc(1, total);
    if (!b)
        return -ENOMEM;
    Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_EXEC;
    eh->e_machine = EM_X86_64;
    eh->e_version = EV_CURRENT;
    eh->e_ehsize = sizeof(Elf64_Ehdr);
    eh->e_shoff = shoff;
    eh->e_shentsize = sizeof(Elf64_Shdr);
    eh->e_shnum = (uint16_t)nsec;
    eh->e_shstrndx = (uint16_t)(n + 1);

    Elf64_Shdr sh[nsec];
    memset(sh, 0, sizeof(sh));
    char *nametab = (char *)b + off + data_total;
    size_t no = 1;
    for (size_t i = 0; i < n; i++) {
        memcpy(b + off, secs[i].data, secs[i].size);
        Elf64_Shdr *s = &sh[i + 1];
        s->sh_name = (uint32_t)no;
        strcpy(nametab + no, secs[i].name);
        no += strlen(secs[i].name) + 1;
        s->sh_type = secs[i].type;
        s->sh_offset = off;
        s->sh_size = secs[i].size;
        s->sh_link = secs[i].link;
        s->sh_entsize = secs[i].entsize;
        s->sh_addralign = 1;
        off += (secs[i].size + 7) & ~(size_t)7;
    }
    Elf64_Shdr *ss = &sh[n + 1];
    ss->sh_name = (uint32_t)no;
    strcpy(nametab + no, ".shstrtab");
    no += strlen(".shstrtab") + 1;
    ss->sh_type = SHT_STRTAB;
    ss->sh_offset = off;
    ss->sh_size = no;
    memcpy(b + shoff, sh, sizeof(sh));
    *out = b;
    *len = total;
    return 0;
}

int pfr_eg_go_binary(unsigned flags, const char *symbol, size_t pad, uint8_t **out, size_t *len)
{
    struct eg_section secs[4];
    size_t n = 0;
    static const char magic[32] = "\xff Go buildinf:\x08\x02";
    static const char bad[32] = "\xff No buildinf:\x08\x02";
    static const uint8_t text[64] = {0x90};
    secs[n++] = (struct eg_section){".text", SHT_PROGBITS, text, sizeof(text), 0, 0};
    if (flags & EG_GO)
        secs[n++] = (struct eg_section){
            ".go.buildinfo", SHT_PROGBITS, (flags & EG_BAD_MAGIC) ? bad : magic, 32, 0, 0};
    /* the name table: "\0runtime.main\0" + pad filler + symbol + "\0main.main\0" */
    size_t sl = strlen(symbol);
    size_t tl = 1 + 13 + pad + sl + 1 + 10;
    char *tab = calloc(1, tl);
    uint32_t name_off;
    size_t o = 1;
    memcpy(tab + o, "runtime.main", 12);
    o += 13;
    memset(tab + o, 'y', pad);
    if (pad && !(flags & EG_NO_LEADING_NUL))
        tab[o + pad - 1] = '\0';
    o += pad;
    if (!pad && (flags & EG_NO_LEADING_NUL))
        tab[o - 1] = 'x';
    name_off = (uint32_t)o;
    memcpy(tab + o, symbol, sl);
    o += sl + 1;
    memcpy(tab + o, "main.main", 9);
    Elf64_Sym syms[3];
    memset(syms, 0, sizeof(syms));
    syms[1].st_name = 1;
    syms[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    syms[1].st_shndx = 1;
    syms[2].st_name = name_off;
    syms[2].st_info = ELF64_ST_INFO(STB_GLOBAL, (flags & EG_AS_OBJECT) ? STT_OBJECT : STT_FUNC);
    syms[2].st_shndx = 1;
    if (flags & EG_SYMTAB) {
        secs[n] = (struct eg_section){".strtab", SHT_STRTAB, tab, tl, 0, 0};
        secs[n + 1] = (struct eg_section){".symtab",    SHT_SYMTAB,        syms,
                                          sizeof(syms), (uint32_t)(n + 1), sizeof(Elf64_Sym)};
        n += 2;
    } else if (flags & EG_PCLNTAB) {
        secs[n++] = (struct eg_section){".gopclntab", SHT_PROGBITS, tab, tl, 0, 0};
    }
    int rc = pfr_eg_build(secs, n, out, len);
    free(tab);
    return rc;
}
