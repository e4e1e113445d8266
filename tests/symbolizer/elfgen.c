#include "elfgen.h"

#include <elf.h>
#include <stdbool.h>
#include <string.h>

struct gen {
    uint8_t *buf;
    size_t len;
};

static size_t put(struct gen *g, const void *p, size_t n, size_t align)
{
    while (g->len % align)
        g->buf[g->len++] = 0;
    size_t at = g->len;
    memcpy(g->buf + at, p, n);
    g->len += n;
    return at;
}

static Elf64_Sym sym(uint32_t name, uint64_t value, uint64_t size, int bind, int type, int shndx)
{
    Elf64_Sym s = {0};
    s.st_name = name;
    s.st_value = value;
    s.st_size = size;
    s.st_info = ELF64_ST_INFO(bind, type);
    s.st_shndx = (uint16_t)shndx;
    return s;
}

Elf64_Ehdr pfr_elfgen_ehdr(uint64_t shoff, unsigned phnum, unsigned shnum, unsigned shstrndx)
{
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof(eh);
    eh.e_shoff = shoff;
    eh.e_ehsize = sizeof(eh);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = (uint16_t)phnum;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = (uint16_t)shnum;
    eh.e_shstrndx = (uint16_t)shstrndx;
    return eh;
}

size_t pfr_sym_elfgen_build(uint8_t *buf, enum elfgen_variant v)
{
    struct gen g = {buf, 0};
    memset(buf, 0, ELFGEN_MAX_SIZE);
    Elf64_Ehdr eh = {0};
    g.len = sizeof(eh) + 2 * sizeof(Elf64_Phdr);

    /* build-id note */
    struct {
        Elf64_Nhdr h;
        char name[4];
        uint8_t desc[ELFGEN_ID_LEN];
    } note = {{4, ELFGEN_ID_LEN, NT_GNU_BUILD_ID}, "GNU", {0}};
    memcpy(note.desc, ELFGEN_BUILD_ID, ELFGEN_ID_LEN);
    size_t note_off = put(&g, &note, sizeof(note), 4);

    /* .text: ret instructions */
    g.len = ELFGEN_TEXT;
    memset(buf + g.len, 0xc3, 0x100);
    g.len += 0x100;
    size_t load_end = g.len;

    static const char strtab[] = "\0func_a\0alias_a\0func_b\0func_c\0data_x";
    enum { N_A = 1, N_ALIAS = 8, N_B = 16, N_C = 23, N_X = 30 };
    Elf64_Sym syms[] = {
        sym(0, 0, 0, 0, 0, 0),
        sym(N_ALIAS, 0x100, 0x20, STB_LOCAL, STT_FUNC, 2),
        sym(N_A, 0x100, 0x20, STB_GLOBAL, STT_FUNC, 2),
        sym(N_B, 0x120, 0, STB_GLOBAL, STT_FUNC, 2),
        sym(N_C, 0x180, 0x40, STB_WEAK, STT_FUNC, 2),
        sym(N_X, 0x1c0, 8, STB_GLOBAL, STT_OBJECT, 2),
    };
    size_t sym_off = put(&g, syms, sizeof(syms), 8);
    size_t str_off = put(&g, strtab, sizeof(strtab), 1);
    static const char shstr[] = "\0.note.gnu.build-id\0.text\0.symtab\0.strtab\0.dynsym\0.dynstr";
    enum { S_NOTE = 1, S_TEXT = 20, S_SYMTAB = 26, S_STRTAB = 34, S_DYNSYM = 42, S_DYNSTR = 50 };
    size_t shstr_off = put(&g, shstr, sizeof(shstr), 1);

    bool dyn = v == ELFGEN_DYNSYM;
    Elf64_Shdr sh[6] = {{0}};
    sh[1] = (Elf64_Shdr){S_NOTE, SHT_NOTE, SHF_ALLOC, note_off, note_off, sizeof(note), 0, 0, 4, 0};
    sh[2] = (Elf64_Shdr){
        S_TEXT, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, ELFGEN_TEXT, ELFGEN_TEXT, 0x100, 0, 0, 16,
        0};
    sh[3] = (Elf64_Shdr){dyn ? S_DYNSYM : S_SYMTAB,
                         dyn ? SHT_DYNSYM : SHT_SYMTAB,
                         0,
                         0,
                         sym_off,
                         sizeof(syms),
                         4,
                         1,
                         8,
                         sizeof(Elf64_Sym)};
    sh[4] = (Elf64_Shdr){
        dyn ? S_DYNSTR : S_STRTAB, SHT_STRTAB, 0, 0, str_off, sizeof(strtab), 0, 0, 1, 0};
    sh[5] = (Elf64_Shdr){0, SHT_STRTAB, 0, 0, shstr_off, sizeof(shstr), 0, 0, 1, 0};
    size_t sh_off = 0;
    if (v != ELFGEN_NOSECTIONS)
        sh_off = put(&g, sh, sizeof(sh), 8);

    eh = pfr_elfgen_ehdr(sh_off, 2, v == ELFGEN_NOSECTIONS ? 0 : 6, v == ELFGEN_NOSECTIONS ? 0 : 5);
    memcpy(buf, &eh, sizeof(eh));
    Elf64_Phdr ph[2] = {
        {PT_LOAD, PF_R | PF_X, 0, 0, 0, load_end, load_end, 0x1000},
        {PT_NOTE, PF_R, note_off, note_off, note_off, sizeof(note), sizeof(note), 4}};
    memcpy(buf + sizeof(eh), ph, sizeof(ph));
    return g.len;
}

static void put32(uint8_t *b, size_t at, uint32_t v)
{
    memcpy(b + at, &v, 4);
}

static void put64(uint8_t *b, size_t at, uint64_t v)
{
    memcpy(b + at, &v, 8);
}

size_t pfr_gopclngen_build(uint8_t *b)
{
    memset(b, 0, GOPCLNGEN_MAX_SIZE);
    enum { NAMES = 72, CU = 88, FILES = 92, PCTAB = 104, PCLN = 128 };
    static const char names[] = "main.f\0main.g"; /* offsets 0 and 7 */
    static const char files[] = "/src/x.go";
    /* pc-value tables: (zigzag value delta, pc delta) pairs, then 0. Offset 0 means none. */
    static const uint8_t pctab[] = {
        0,                    /* 0: unused */
        22, 0x10, 2, 0x10, 0, /* 1: f's lines: 10 for 16 bytes, then 11 */
        2,  0x20, 0,          /* 6: file index 0 for 32 bytes */
        42, 0x20, 0,          /* 9: g's line 20 */
        2,  0x08, 1, 0x18, 0, /* 12: g's inline index: 0 for 8 bytes, then -1 */
    };
    put32(b, 0, 0xfffffff0);
    b[6] = 1; /* pc quantum */
    b[7] = 8; /* pointer size */
    uint64_t hdr[8] = {2, 1, GOPCLNGEN_TEXT, NAMES, CU, FILES, PCTAB, PCLN};
    for (int i = 0; i < 8; i++)
        put64(b, 8 + 8 * (size_t)i, hdr[i]);
    memcpy(b + NAMES, names, sizeof(names));
    put32(b, CU, 0);
    memcpy(b + FILES, files, sizeof(files));
    memcpy(b + PCTAB, pctab, sizeof(pctab));
    /* functab: entry offset, _func offset (relative to PCLN); then the end entry */
    uint32_t ftab[6] = {0x00, 24, 0x20, 64, 0x40, 0};
    for (int i = 0; i < 6; i++)
        put32(b, PCLN + 4 * (size_t)i, ftab[i]);
    /* _func: entryoff, nameoff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset,
     * funcID/flag/pad/nfuncdata, then pcdata[npcdata] */
    uint32_t f[10] = {0x00, 0, 0, 0, 0, 6, 1, 0, 0, 0};
    uint32_t g[13] = {0x20, 7, 0, 0, 0, 6, 9, 3, 0, 0, 0, 0, 12};
    for (int i = 0; i < 10; i++)
        put32(b, PCLN + 24 + 4 * (size_t)i, f[i]);
    for (int i = 0; i < 13; i++)
        put32(b, PCLN + 64 + 4 * (size_t)i, g[i]);
    return PCLN + 64 + sizeof(g);
}
