/* make_hostile: writes the ELF files issue 30 found costing the recorder memory and time, for the
 * tests of the builder's limits and to measure them (nothing this large is committed):
 *   make_hostile bomb SIZE OUT    a .debug_frame (no .eh_frame) compressed with zlib whose header
 *                                 declares SIZE bytes, and whose stream inflates to SIZE zeros
 *                                 (1 GiB: a 1 MB file)
 *   make_hostile fdes N [hdr] OUT .eh_frame of one CIE and N FDEs of 20 bytes, one a function of
 *                                 4 bytes from 0x401000 on (each with the CIE's rule only), and
 *                                 with hdr an .eh_frame_hdr that counts them
 * x86-64, ET_EXEC, one executable PT_LOAD covering the code (no bytes of it in the file). */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define VADDR     0x400000ull
#define CODE      0x401000ull
#define DATA_OFF  0x1000ull /* the section's bytes */
#define CIE_SIZE  24u
#define FDE_SIZE  20u
#define ZCHUNK    (1u << 20)
#define ELFCOMP_Z 1u /* ELFCOMPRESS_ZLIB */

static int die(const char *what)
{
    fprintf(stderr, "make_hostile: %s: %s\n", what, errno ? strerror(errno) : "failed");
    return 1;
}

static void le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static const char names[] = "\0.shstrtab\0.eh_frame\0.eh_frame_hdr\0.debug_frame";
enum { N_SHSTRTAB = 1, N_EH = 11, N_HDR = 21, N_DEBUG = 35 };

/* The headers: ELF header, one PT_LOAD of code_len bytes at CODE, the section headers (sh[1..])
 * after the names, at the end of the file's first page. */
static int write_headers(FILE *f, uint64_t code_len, const Elf64_Shdr *sh, unsigned nsh)
{
    uint8_t page[DATA_OFF] = {0};
    Elf64_Ehdr eh = {.e_type = ET_EXEC,
                     .e_machine = EM_X86_64,
                     .e_version = EV_CURRENT,
                     .e_entry = CODE,
                     .e_phoff = sizeof(Elf64_Ehdr),
                     .e_shoff = 512,
                     .e_ehsize = sizeof(Elf64_Ehdr),
                     .e_phentsize = sizeof(Elf64_Phdr),
                     .e_phnum = 1,
                     .e_shentsize = sizeof(Elf64_Shdr),
                     .e_shnum = (uint16_t)(nsh + 2),
                     .e_shstrndx = 1};
    static const uint8_t ident[EI_NIDENT] = {ELFMAG0,    ELFMAG1,     ELFMAG2,   ELFMAG3,
                                             ELFCLASS64, ELFDATA2LSB, EV_CURRENT};
    memcpy(eh.e_ident, ident, EI_NIDENT);
    Elf64_Phdr ph = {.p_type = PT_LOAD,
                     .p_flags = PF_R | PF_X,
                     .p_offset = 0,
                     .p_vaddr = VADDR,
                     .p_paddr = VADDR,
                     .p_filesz = DATA_OFF,
                     .p_memsz = CODE - VADDR + code_len,
                     .p_align = 0x1000};
    Elf64_Shdr names_sh = {
        .sh_name = N_SHSTRTAB, .sh_type = SHT_STRTAB, .sh_offset = 256, .sh_size = sizeof(names)};
    memcpy(page, &eh, sizeof(eh));
    memcpy(page + eh.e_phoff, &ph, sizeof(ph));
    memcpy(page + 256, names, sizeof(names));
    memcpy(page + 512 + sizeof(Elf64_Shdr), &names_sh, sizeof(names_sh));
    memcpy(page + 512 + 2 * sizeof(Elf64_Shdr), sh, nsh * sizeof(*sh));
    return fwrite(page, 1, sizeof(page), f) == sizeof(page) ? 0 : -1;
}

/* One CIE (zR, pcrel sdata4; CFA = rsp + 8, return address at CFA - 8), then n FDEs. */
static int make_fdes(uint64_t n, int hdr, const char *out)
{
    uint64_t eh_size = CIE_SIZE + n * FDE_SIZE + 4, eh_addr = VADDR + DATA_OFF;
    Elf64_Shdr sh[2] = {
        {.sh_name = N_EH,
         .sh_type = SHT_PROGBITS,
         .sh_flags = SHF_ALLOC,
         .sh_addr = eh_addr,
         .sh_offset = DATA_OFF,
         .sh_size = eh_size,
         .sh_addralign = 8},
        {.sh_name = N_HDR,
         .sh_type = SHT_PROGBITS,
         .sh_flags = SHF_ALLOC,
         .sh_addr = eh_addr + eh_size,
         .sh_offset = DATA_OFF + eh_size,
         .sh_size = 12,
         .sh_addralign = 4},
    };
    FILE *f = fopen(out, "wb");
    if (!f || write_headers(f, 4 * n, sh, hdr ? 2 : 1))
        return die(out);
    static const uint8_t cie[CIE_SIZE] = {20, 0,    0,  0, 0,    0,    0, 0, 1,    'z', 'R', 0,
                                          1,  0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1,   0,   0};
    int ok = fwrite(cie, 1, sizeof(cie), f) == sizeof(cie);
    for (uint64_t i = 0; ok && i < n; i++) {
        uint8_t fde[FDE_SIZE] = {0};
        uint64_t at = CIE_SIZE + i * FDE_SIZE; /* section offset */
        le(fde, FDE_SIZE - 4, 4);
        le(fde + 4, at + 4, 4); /* back to the CIE, from this field */
        le(fde + 8, (CODE + 4 * i) - (eh_addr + at + 8), 4);
        le(fde + 12, 4, 4);
        ok = fwrite(fde, 1, sizeof(fde), f) == sizeof(fde);
    }
    uint8_t tail[4 + 12] = {0}; /* the terminator, and .eh_frame_hdr: version, encodings, count */
    uint8_t *h = tail + 4;
    h[0] = 1;
    h[1] = 0x1b; /* pcrel sdata4 */
    h[2] = 0x03; /* udata4 */
    h[3] = 0x3b;
    le(h + 4, (uint64_t)(eh_addr - (eh_addr + eh_size + 4)), 4);
    le(h + 8, n, 4);
    ok = ok && fwrite(tail, 1, hdr ? sizeof(tail) : 4, f) == (hdr ? sizeof(tail) : 4u);
    if (fclose(f) != 0 || !ok)
        return die(out);
    return 0;
}

/* A zlib stream of size zeros (a multiple of ZCHUNK): once the window holds only zeros, each
 * chunk deflates to the same bytes, so two are deflated and the second repeated; the trailer is
 * the Adler-32 of size zeros. */
static int make_bomb(uint64_t size, const char *out)
{
    if (size < 3 * ZCHUNK || size % ZCHUNK)
        return errno = EINVAL, die("the size: a multiple of 1 MiB, 3 MiB or more");
    uint8_t *zeros = calloc(1, ZCHUNK), *a = malloc(2 * ZCHUNK), *b = malloc(2 * ZCHUNK);
    uint8_t *end = malloc(2 * ZCHUNK);
    z_stream z = {0};
    if (!zeros || !a || !b || !end || deflateInit(&z, 9) != Z_OK)
        return die("memory");
    size_t len[3];
    uint8_t *outs[3] = {a, b, end};
    for (int i = 0; i < 3; i++) {
        z.next_in = zeros;
        z.avail_in = ZCHUNK;
        z.next_out = outs[i];
        z.avail_out = 2 * ZCHUNK;
        if (deflate(&z, i < 2 ? Z_SYNC_FLUSH : Z_FINISH) != (i < 2 ? Z_OK : Z_STREAM_END))
            return die("deflate");
        len[i] = 2 * ZCHUNK - z.avail_out;
    }
    deflateEnd(&z);
    uint32_t adler = (uint32_t)((size % 65521) << 16 | 1); /* of size zero bytes */
    for (int i = 0; i < 4; i++)
        end[len[2] - 4 + i] = (uint8_t)(adler >> (24 - 8 * i));
    uint64_t repeat = size / ZCHUNK - 2;
    uint64_t zsize = sizeof(Elf64_Chdr) + len[0] + repeat * len[1] + len[2];
    Elf64_Shdr sh = {.sh_name = N_DEBUG,
                     .sh_type = SHT_PROGBITS,
                     .sh_flags = SHF_COMPRESSED,
                     .sh_offset = DATA_OFF,
                     .sh_size = zsize,
                     .sh_addralign = 8};
    Elf64_Chdr ch = {.ch_type = ELFCOMP_Z, .ch_size = size, .ch_addralign = 8};
    FILE *f = fopen(out, "wb");
    if (!f || write_headers(f, 4096, &sh, 1))
        return die(out);
    int ok = fwrite(&ch, 1, sizeof(ch), f) == sizeof(ch) && fwrite(a, 1, len[0], f) == len[0];
    for (uint64_t i = 0; ok && i < repeat; i++)
        ok = fwrite(b, 1, len[1], f) == len[1];
    ok = ok && fwrite(end, 1, len[2], f) == len[2];
    if (fclose(f) != 0 || !ok)
        return die(out);
    free(zeros);
    free(a);
    free(b);
    free(end);
    return 0;
}

int main(int argc, char **argv)
{
    char *e = NULL;
    if (argc == 4 && strcmp(argv[1], "bomb") == 0) {
        uint64_t size = strtoull(argv[2], &e, 0);
        if (!*e)
            return make_bomb(size, argv[3]);
    } else if ((argc == 4 || (argc == 5 && strcmp(argv[3], "hdr") == 0)) &&
               strcmp(argv[1], "fdes") == 0) {
        uint64_t n = strtoull(argv[2], &e, 0);
        if (!*e && n > 0 && n < (1ull << 28))
            return make_fdes(n, argc == 5, argv[argc - 1]);
    }
    fprintf(stderr, "usage: make_hostile bomb SIZE OUT | make_hostile fdes N [hdr] OUT\n");
    return 2;
}
