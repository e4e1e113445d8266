#include "elfgen.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct blob {
    uint8_t *p;
    size_t len, cap;
} blob;

static int put(blob *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (ncap < b->len + n)
            ncap *= 2;
        uint8_t *np = realloc(b->p, ncap);
        if (!np)
            return -1;
        b->p = np;
        b->cap = ncap;
    }
    if (d)
        memcpy(b->p + b->len, d, n);
    else
        memset(b->p + b->len, 0, n);
    b->len += n;
    return 0;
}

static uint32_t add_str(blob *s, const char *str)
{
    uint32_t off = (uint32_t)s->len;
    put(s, str, strlen(str) + 1);
    return off;
}

static void add_sym(blob *sy, uint32_t name, uint64_t value)
{
    Elf64_Sym s = {.st_name = name,
                   .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT),
                   .st_shndx = 3,
                   .st_value = value,
                   .st_size = 8};
    put(sy, &s, sizeof(s));
}

int pfr_goheap_elfgen_build(const elfgen_opts *o, uint8_t **out, size_t *len)
{
    blob f = {0}, strtab = {0}, symtab = {0}, shstr = {0}, bi = {0};
    put(&f, NULL, sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr));

    /* .go.buildinfo: magic, pointer size, flags (2 = inline strings), then uvarint + version */
    uint8_t hdr[32] = "\xff Go buildinf:";
    hdr[14] = 8;
    hdr[15] = o->version ? 2 : 0;
    put(&bi, hdr, sizeof(hdr));
    if (o->version) {
        uint8_t n = (uint8_t)strlen(o->version);
        put(&bi, &n, 1);
        put(&bi, o->version, n);
    }

    put(&strtab, "", 1);
    put(&symtab, NULL, sizeof(Elf64_Sym));
    char name[64];
    for (size_t i = 0; i < o->fillers; i++) {
        snprintf(name, sizeof(name), "main.filler_symbol_%zu", i);
        add_sym(&symtab, add_str(&strtab, name), ELFGEN_DATA + 0x200 + (i % 1000) * 8);
    }
    if (o->name_at > strtab.len + 1) {
        size_t pad = o->name_at - strtab.len - 1;
        char *p = malloc(pad + 1);
        memset(p, 'x', pad);
        p[pad] = '\0';
        add_str(&strtab, p);
        free(p);
    }
    if (o->with_targets) {
        add_sym(&symtab, add_str(&strtab, "runtime.mbuckets"), ELFGEN_MBUCKETS);
        add_sym(&symtab, add_str(&strtab, "runtime.MemProfileRate"), ELFGEN_RATE);
    }

    put(&shstr, "", 1);
    uint32_t n_bi = add_str(&shstr, ".go.buildinfo");
    uint32_t n_sy = add_str(&shstr, ".symtab");
    uint32_t n_st = add_str(&shstr, ".strtab");
    uint32_t n_sh = add_str(&shstr, ".shstrtab");
    uint32_t n_tx = add_str(&shstr, ".text");
    uint32_t n_da = add_str(&shstr, ".noptrdata");

    Elf64_Shdr sh[8];
    memset(sh, 0, sizeof(sh));
    unsigned nsh = 1;
    sh[nsh++] = (Elf64_Shdr){.sh_name = n_tx,
                             .sh_type = SHT_PROGBITS,
                             .sh_addr = ELFGEN_TEXT,
                             .sh_offset = 0,
                             .sh_size = 16};
    unsigned data_idx = nsh;
    sh[nsh++] = (Elf64_Shdr){
        .sh_name = n_da, .sh_type = SHT_NOBITS, .sh_addr = ELFGEN_DATA, .sh_size = 0x10000};
    (void)data_idx;
    if (o->go) {
        sh[nsh] = (Elf64_Shdr){
            .sh_name = n_bi, .sh_type = SHT_PROGBITS, .sh_offset = f.len, .sh_size = bi.len};
        put(&f, bi.p, bi.len);
        nsh++;
    }
    if (o->symtab) {
        unsigned st_idx = nsh + 1;
        sh[nsh++] = (Elf64_Shdr){.sh_name = n_sy,
                                 .sh_type = SHT_SYMTAB,
                                 .sh_offset = f.len,
                                 .sh_size = symtab.len,
                                 .sh_link = st_idx,
                                 .sh_entsize = sizeof(Elf64_Sym)};
        put(&f, symtab.p, symtab.len);
        sh[nsh++] = (Elf64_Shdr){
            .sh_name = n_st, .sh_type = SHT_STRTAB, .sh_offset = f.len, .sh_size = strtab.len};
        put(&f, strtab.p, strtab.len);
    }
    unsigned shstr_idx = nsh;
    sh[nsh++] = (Elf64_Shdr){
        .sh_name = n_sh, .sh_type = SHT_STRTAB, .sh_offset = f.len, .sh_size = shstr.len};
    put(&f, shstr.p, shstr.len);
    while (f.len % 8)
        put(&f, NULL, 1);
    uint64_t shoff = f.len;
    put(&f, sh, nsh * sizeof(Elf64_Shdr));

    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = o->e_type ? o->e_type : ET_EXEC;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof(Elf64_Ehdr);
    eh.e_shoff = shoff;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 2;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = (uint16_t)nsh;
    eh.e_shstrndx = (uint16_t)shstr_idx;
    Elf64_Phdr ph[2] = {
        {.p_type = PT_LOAD,
         .p_flags = PF_R | PF_X,
         .p_offset = 0,
         .p_vaddr = ELFGEN_TEXT,
         .p_filesz = 0x1000,
         .p_memsz = 0x1000,
         .p_align = 0x1000},
        {.p_type = PT_LOAD,
         .p_flags = PF_R | PF_W,
         .p_offset = 0x1000,
         .p_vaddr = ELFGEN_DATA,
         .p_filesz = 0,
         .p_memsz = 0x10000,
         .p_align = 0x1000},
    };
    memcpy(f.p, &eh, sizeof(eh));
    memcpy(f.p + sizeof(eh), ph, sizeof(ph));
    free(strtab.p);
    free(symtab.p);
    free(shstr.p);
    free(bi.p);
    *out = f.p;
    *len = f.len;
    return 0;
}
