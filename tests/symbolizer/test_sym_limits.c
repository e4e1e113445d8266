/* The symbolizer's limits on hostile files (issue 30): every size or count a mapped file declares
 * is checked before it is paid for. Each hostile file is written here (sparse where it is big),
 * mapped and symbolized in a child whose peak memory is measured; then each limit at its
 * boundary, through the library's parts. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "elfgen.h"
#include "sym_dwarf.h"
#include "sym_dwline.h"
#include "sym_elf.h"
#include "sym_gopcln.h"
#include "sym_perfmap.h"
#include "symbolizer.h"

#include "hostile.h"

#define GIB         (1ull << 30)
#define PEAK_MAX_KB (48 * 1024) /* a parse's rise in peak RSS: the cache is 32 MiB */
/* The perf map's share is 8 MiB: a read chunk and a batch over it in the release build (what
 * scripts/test.sh checks after the sanitized run); ASan's redzones and shadow add ~70%. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifdef SANITIZED
#define PERFMAP_PEAK_KB (20 * 1024)
#else
#define PERFMAP_PEAK_KB (12 * 1024)
#endif
#define NADDR 8

static char work[512];
static void *bomb_z; /* a zlib stream of 1 GiB of zeros */
static size_t bomb_zlen;

static const char *wpath(const char *name)
{
    static char p[640];
    snprintf(p, sizeof(p), "%s/%s", work, name);
    return p;
}

/* .symtab (section 2) naming fn_ok over all of .text, and its .strtab (section 3). */
static const char STRTAB[] = "\0fn_ok";
static Elf64_Sym SYMS[2] = {{0},
                            {.st_name = 1,
                             .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
                             .st_shndx = 1,
                             .st_value = HG_TEXT,
                             .st_size = HG_TEXT_SIZE}};
#define SYMTAB_SEC                                                                                 \
    {                                                                                              \
        .name = ".symtab", .type = SHT_SYMTAB, .entsize = sizeof(Elf64_Sym), .link = 3, .info = 1, \
        .data = SYMS, .len = sizeof(SYMS)                                                          \
    }
#define STRTAB_SEC                                                                                 \
    {                                                                                              \
        .name = ".strtab", .type = SHT_STRTAB, .data = STRTAB, .len = sizeof(STRTAB)               \
    }

/* Symbolizes the file in a child: it must not crash, and its peak stays bounded. */
static struct hg_file_result symbolize(const char *path, const pfr_sym_opts *opts)
{
    struct hg_file_result r;
    assert_int_equal(pfr_hg_measure_file(path, opts, NADDR, 60, &r), 0);
    print_message("%s: peak +%ld KiB, %.1f ms, %u/%u named\n", path, r.peak_kb, (double)r.ns / 1e6,
                  r.named, NADDR);
    assert_true(r.peak_kb < PEAK_MAX_KB);
    return r;
}

static void write_file(const char *name, const struct hg_sec *secs, size_t n,
                       const struct hg_opts *o)
{
    assert_int_equal(pfr_hg_write(wpath(name), secs, n, o), 0);
}

/* Writes the file and symbolizes it in a child: refused once for reason, with named frames. */
static void expect_refused(const char *name, const struct hg_sec *secs, size_t n,
                           const struct hg_opts *o, int reason, unsigned named)
{
    write_file(name, secs, n, o);
    struct hg_file_result r = symbolize(wpath(name), NULL);
    assert_int_equal(r.st.files_refused[reason], 1);
    assert_int_equal(r.named, named);
}

/* fn_ok's symbols, a compile unit over .text (its .debug_abbrev, and its .debug_info unless
 * info is given) and the sections given after them. */
static void write_dwarf_file(const char *name, const struct hg_sec *info, const struct hg_sec *more)
{
    const void *ab, *in;
    size_t alen, ilen;
    pfr_hg_dwarf_unit(HG_TEXT, HG_TEXT + HG_TEXT_SIZE, &ab, &alen, &in, &ilen);
    struct hg_sec secs[5] = {
        SYMTAB_SEC,
        STRTAB_SEC,
        {.name = ".debug_abbrev", .type = SHT_PROGBITS, .data = ab, .len = alen},
        {.name = ".debug_info", .type = SHT_PROGBITS, .data = in, .len = ilen}};
    if (info)
        secs[3] = *info;
    if (more)
        secs[4] = *more;
    write_file(name, secs, more ? 5 : 4, NULL);
}

static int setup(void **state)
{
    (void)state;
    snprintf(work, sizeof(work), "%s", SYM_LIMITS_WORK);
    mkdir(work, 0755);
    bomb_z = pfr_hg_zeros_z(GIB, &bomb_zlen);
    return bomb_z ? 0 : -1;
}

/* The files are sparse (their holes take no disk), but a copy of the tree would fill them in:
 * they go, unless SYM_LIMITS_KEEP is set (to measure them again with sym_peak). */
static int teardown(void **state)
{
    (void)state;
    free(bomb_z);
    if (!getenv("SYM_LIMITS_KEEP"))
        pfr_hg_rm_dir(work);
    return 0;
}

static void test_normal_file(void **state)
{
    (void)state;
    struct hg_sec secs[] = {SYMTAB_SEC, STRTAB_SEC};
    write_file("normal.so", secs, 2, NULL);
    struct hg_file_result r = symbolize(wpath("normal.so"), NULL);
    assert_int_equal(r.named, NADDR);
    for (int k = 0; k < PFR_NREFUSALS; k++)
        assert_int_equal(r.st.files_refused[k], 0);
}

/* .debug_info compressed (SHF_COMPRESSED), declaring and really inflating to 1 GiB. */
static void test_chdr_bomb(void **state)
{
    (void)state;
    size_t len;
    void *sec = pfr_hg_chdr(GIB, bomb_z, bomb_zlen, &len);
    struct hg_sec info = {.name = ".debug_info",
                          .type = SHT_PROGBITS,
                          .flags = SHF_COMPRESSED,
                          .data = sec,
                          .len = len};
    write_dwarf_file("chdr_bomb.so", &info, NULL);
    free(sec);
    struct hg_file_result r = symbolize(wpath("chdr_bomb.so"), NULL);
    assert_int_equal(r.named, NADDR); /* the symbols are still read */
    assert_true(r.st.files_refused[PFR_REFUSED_TOO_BIG] >= 1);
}

/* .zdebug_info (GNU's older compression: "ZLIB", the size, the stream) of 1 GiB. */
static void test_zdebug_bomb(void **state)
{
    (void)state;
    unsigned char *sec = malloc(12 + bomb_zlen);
    assert_non_null(sec);
    memcpy(sec, "ZLIB", 4);
    for (int i = 0; i < 8; i++)
        sec[4 + i] = (unsigned char)(GIB >> (56 - 8 * i));
    memcpy(sec + 12, bomb_z, bomb_zlen);
    struct hg_sec info = {
        .name = ".zdebug_info", .type = SHT_PROGBITS, .data = sec, .len = 12 + bomb_zlen};
    write_dwarf_file("zdebug_bomb.so", &info, NULL);
    free(sec);
    struct hg_file_result r = symbolize(wpath("zdebug_bomb.so"), NULL);
    assert_int_equal(r.named, NADDR);
    assert_true(r.st.files_refused[PFR_REFUSED_TOO_BIG] >= 1);
}

/* A line program of 12 M one-byte rows: 12 MiB of debug sections, under the per-file cap, yet
 * a line table libdw would build at ~100 bytes a row. */
static void write_line_bomb(const char *name, uint64_t rows)
{
    size_t plen, zlen, len;
    unsigned char *prog = pfr_hg_line_program(HG_TEXT, rows, &plen);
    assert_non_null(prog);
    uLongf zcap = compressBound(plen);
    unsigned char *z = malloc(zcap);
    assert_non_null(z);
    assert_int_equal(compress2(z, &zcap, prog, plen, 9), Z_OK);
    zlen = zcap;
    void *sec = pfr_hg_chdr(plen, z, zlen, &len);
    struct hg_sec line = {.name = ".debug_line",
                          .type = SHT_PROGBITS,
                          .flags = SHF_COMPRESSED,
                          .data = sec,
                          .len = len};
    write_dwarf_file(name, NULL, &line);
    free(sec);
    free(z);
    free(prog);
}

static void test_line_bomb(void **state)
{
    (void)state;
    write_line_bomb("line_bomb.so", 12u << 20);
    struct hg_file_result r = symbolize(wpath("line_bomb.so"), NULL);
    assert_int_equal(r.named, NADDR); /* names stay; file:line goes */
    assert_true(r.st.files_refused[PFR_REFUSED_TOO_BIG] >= 1);
    assert_int_equal(r.st.dwarf_loads, 1);
}

/* A .symtab declaring 50 M entries in a file of a few KiB. */
static void test_symtab_lies(void **state)
{
    (void)state;
    struct hg_sec secs[] = {{.name = ".symtab",
                             .type = SHT_SYMTAB,
                             .entsize = sizeof(Elf64_Sym),
                             .link = 3,
                             .data = SYMS,
                             .len = sizeof(SYMS),
                             .size = 50000000ull * sizeof(Elf64_Sym),
                             .lie = true},
                            STRTAB_SEC};
    write_file("symtab_lies.so", secs, 2, NULL);
    struct stat st;
    assert_int_equal(stat(wpath("symtab_lies.so"), &st), 0);
    assert_true(st.st_size < (1 << 20));
    struct hg_file_result r = symbolize(wpath("symtab_lies.so"), NULL);
    assert_true(r.st.files_refused[PFR_REFUSED_BAD_FILE] >= 1);
}

/* A .symtab really holding one entry more than the limit (a hole of zero entries). */
static void test_symtab_many(void **state)
{
    (void)state;
    uint64_t n = PFR_ELF_MAX_ENTRIES((size_t)32 << 20) + 1;
    struct hg_sec secs[] = {{.name = ".symtab",
                             .type = SHT_SYMTAB,
                             .entsize = sizeof(Elf64_Sym),
                             .link = 3,
                             .data = SYMS,
                             .len = sizeof(SYMS),
                             .size = n * sizeof(Elf64_Sym)},
                            STRTAB_SEC};
    expect_refused("symtab_many.so", secs, 2, NULL, PFR_REFUSED_TOO_MANY_SYMBOLS, 0);
}

/* A 1 GiB string table (a hole past the name): a bit per byte of it would be 128 MiB. */
static void test_strtab_huge(void **state)
{
    (void)state;
    struct hg_sec secs[] = {SYMTAB_SEC,
                            {.name = ".strtab",
                             .type = SHT_STRTAB,
                             .data = STRTAB,
                             .len = sizeof(STRTAB),
                             .size = GIB}};
    expect_refused("strtab_huge.so", secs, 2, NULL, PFR_REFUSED_TOO_BIG, 0);
}

/* 10 M section headers (extended numbering; the table a hole): libelf keeps a struct each. */
static void test_sections_bomb(void **state)
{
    (void)state;
    struct hg_sec secs[] = {SYMTAB_SEC, STRTAB_SEC};
    struct hg_opts o = {.shnum_ext = 10000000};
    expect_refused("sections_bomb.so", secs, 2, &o, PFR_REFUSED_TOO_BIG, 0);
}

/* A 1 GiB note section (a hole): libelf would read it whole for the build-id. */
static void test_note_bomb(void **state)
{
    (void)state;
    struct hg_sec secs[] = {
        SYMTAB_SEC,
        STRTAB_SEC,
        {.name = ".note.big", .type = SHT_NOTE, .data = "x", .len = 1, .size = GIB}};
    expect_refused("note_bomb.so", secs, 3, NULL, PFR_REFUSED_TOO_BIG, NADDR);
}

/* Go, stripped: a .gopclntab whose header declares 2^40 functions. */
static void test_gopclntab_lies(void **state)
{
    (void)state;
    uint8_t pcln[GOPCLNGEN_MAX_SIZE];
    size_t len = pfr_gopclngen_build(pcln);
    uint64_t nfunc = 1ull << 40;
    memcpy(pcln + 8, &nfunc, 8);
    struct hg_sec secs[] = {
        {.name = ".gopclntab", .type = SHT_PROGBITS, .flags = SHF_ALLOC, .data = pcln, .len = len},
        {.name = ".go.buildinfo", .type = SHT_PROGBITS, .data = "\xff Go buildinf:", .len = 14}};
    expect_refused("pcln_lies", secs, 2, NULL, PFR_REFUSED_BAD_FILE, 0);
}

/* Go, stripped: a 64 MiB .gopclntab (a hole past its header) of 8M functions: its function
 * table alone is over the cache. */
static void test_gopclntab_big(void **state)
{
    (void)state;
    uint8_t pcln[GOPCLNGEN_MAX_SIZE];
    size_t len = pfr_gopclngen_build(pcln);
    uint64_t nfunc = (64u << 20) / 8 - 64;
    memcpy(pcln + 8, &nfunc, 8);
    struct hg_sec secs[] = {
        {.name = ".gopclntab",
         .type = SHT_PROGBITS,
         .flags = SHF_ALLOC,
         .data = pcln,
         .len = len,
         .size = 64u << 20},
        {.name = ".go.buildinfo", .type = SHT_PROGBITS, .data = "\xff Go buildinf:", .len = 14}};
    expect_refused("pcln_big", secs, 2, NULL, PFR_REFUSED_TOO_BIG, 0);
}

/* A parse past its time budget is abandoned (and counted); a file within it is read. */
static void test_time_budget(void **state)
{
    (void)state;
    struct hg_sec secs[] = {{.name = ".symtab",
                             .type = SHT_SYMTAB,
                             .entsize = sizeof(Elf64_Sym),
                             .link = 3,
                             .data = SYMS,
                             .len = sizeof(SYMS),
                             .size = 4096 * sizeof(Elf64_Sym)},
                            STRTAB_SEC};
    write_file("slow.so", secs, 2, NULL);
    pfr_sym_opts o = {.parse_budget_ns = 1};
    struct hg_file_result r = symbolize(wpath("slow.so"), &o);
    /* every file of the process is parsed when it is added: each runs out of time */
    assert_true(r.st.files_refused[PFR_REFUSED_TIME_BUDGET] >= 1);
    assert_int_equal(r.named, 0);
    o.parse_budget_ns = 10000000000LL;
    r = symbolize(wpath("slow.so"), &o);
    assert_int_equal(r.st.files_refused[PFR_REFUSED_TIME_BUDGET], 0);
    assert_int_equal(r.named, NADDR);
}

/* A perf map of 2 M lines read under an 8 MiB share: taken until the share is full, with a
 * peak near the share (entries are merged in place, not copied). */
static int read_perfmap(void *arg, void *out, size_t outlen)
{
    struct pfr_sym_perfmap *m = out;
    (void)outlen;
    pfr_sym_perfmap_init(m);
    m->fd = open(arg, O_RDONLY);
    char err[256];
    uint64_t before = UINT64_MAX;
    while (!m->full && m->off != before) {
        before = m->off;
        if (pfr_sym_perfmap_update(m, 8u << 20, err, sizeof(err)) != 0)
            return -1;
    }
    close(m->fd);
    m->fd = -1;
    return 0;
}

static void test_perfmap_lines(void **state)
{
    (void)state;
    char path[640];
    snprintf(path, sizeof(path), "%s", wpath("perf-1.map"));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (unsigned i = 0; i < 2000000; i++)
        fprintf(f, "%x 10 f%u\n", 0x10000000u + i * 16, i);
    fclose(f);
    struct pfr_sym_perfmap m;
    int ret;
    long peak;
    int64_t ns;
    assert_int_equal(pfr_hg_measure(read_perfmap, path, &m, sizeof(m), 60, &ret, &peak, &ns), 0);
    print_message("perf map: peak +%ld KiB, %.1f ms, %u lines taken\n", peak, (double)ns / 1e6,
                  m.lines);
    assert_int_equal(ret, 0);
    assert_true(m.full);
    assert_true(m.lines > 200000);
    assert_true(peak < PERFMAP_PEAK_KB);
}

/* ---- each limit at its boundary ---- */

static int precheck(const char *name, const struct hg_opts *o, struct pfr_sym_budget *b)
{
    struct hg_sec secs[] = {SYMTAB_SEC, STRTAB_SEC};
    write_file(name, secs, 2, o);
    int fd = open(wpath(name), O_RDONLY);
    assert_true(fd >= 0);
    char err[256];
    *b = (struct pfr_sym_budget){0};
    int rc = pfr_sym_elf_precheck(fd, b, err, sizeof(err));
    close(fd);
    return rc;
}

static void test_limit_sections(void **state)
{
    (void)state;
    struct pfr_sym_budget b;
    struct hg_opts o = {.shnum_ext = PFR_SYM_MAX_SECTIONS};
    assert_int_equal(precheck("sections_at.so", &o, &b), 0);
    assert_int_equal(b.refused, PFR_REFUSED_NONE);
    o.shnum_ext++;
    assert_int_equal(precheck("sections_over.so", &o, &b), -EFBIG);
    assert_int_equal(b.refused, PFR_REFUSED_TOO_BIG);
    o = (struct hg_opts){.shstrtab_size = PFR_SYM_MAX_SHSTRTAB};
    assert_int_equal(precheck("shstrtab_at.so", &o, &b), 0);
    o.shstrtab_size++;
    assert_int_equal(precheck("shstrtab_over.so", &o, &b), -EFBIG);
    assert_int_equal(b.refused, PFR_REFUSED_TOO_BIG);
}

/* Symbols of the file through the library: rc, and the refusal in *why. */
static int read_syms(const char *name, size_t max_bytes, size_t *n, int *why)
{
    int fd = open(wpath(name), O_RDONLY);
    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(e);
    struct pfr_sym_elf_syms syms = {0};
    struct pfr_sym_budget b = {0};
    char err[256];
    int rc = pfr_sym_elf_read_syms_fd(e, fd, &syms, max_bytes, &b, err, sizeof(err));
    *n = syms.n;
    *why = b.refused;
    pfr_sym_elf_syms_free(&syms);
    elf_end(e);
    close(fd);
    return rc;
}

#define SMALL_CACHE ((size_t)24 * 1024) /* 8192 entries, a 48 KiB string table */

static void test_limit_entries(void **state)
{
    (void)state;
    size_t n;
    int why;
    uint64_t limit = PFR_ELF_MAX_ENTRIES(SMALL_CACHE);
    struct hg_sec secs[] = {{.name = ".symtab",
                             .type = SHT_SYMTAB,
                             .entsize = sizeof(Elf64_Sym),
                             .link = 3,
                             .data = SYMS,
                             .len = sizeof(SYMS),
                             .size = limit * sizeof(Elf64_Sym)},
                            STRTAB_SEC};
    write_file("entries_at.so", secs, 2, NULL);
    assert_int_equal(read_syms("entries_at.so", SMALL_CACHE, &n, &why), 0);
    assert_int_equal(n, 1);
    assert_int_equal(why, PFR_REFUSED_NONE);
    secs[0].size += sizeof(Elf64_Sym);
    write_file("entries_over.so", secs, 2, NULL);
    assert_int_equal(read_syms("entries_over.so", SMALL_CACHE, &n, &why), -EFBIG);
    assert_int_equal(why, PFR_REFUSED_TOO_MANY_SYMBOLS);
    /* a count beyond the file is no table: refused, the file still read */
    secs[0].lie = true;
    secs[0].size = (1ull << 20) * sizeof(Elf64_Sym);
    write_file("entries_lie.so", secs, 2, NULL);
    assert_int_equal(read_syms("entries_lie.so", SMALL_CACHE, &n, &why), 0);
    assert_int_equal(n, 0);
    assert_int_equal(why, PFR_REFUSED_BAD_FILE);
}

static void test_limit_strtab(void **state)
{
    (void)state;
    size_t n;
    int why;
    struct hg_sec secs[] = {SYMTAB_SEC,
                            {.name = ".strtab",
                             .type = SHT_STRTAB,
                             .data = STRTAB,
                             .len = sizeof(STRTAB),
                             .size = PFR_ELF_MAX_STRTAB(SMALL_CACHE)}};
    write_file("strtab_at.so", secs, 2, NULL);
    assert_int_equal(read_syms("strtab_at.so", SMALL_CACHE, &n, &why), 0);
    assert_int_equal(n, 1);
    assert_int_equal(why, PFR_REFUSED_NONE);
    secs[1].size++;
    write_file("strtab_over.so", secs, 2, NULL);
    assert_int_equal(read_syms("strtab_over.so", SMALL_CACHE, &n, &why), 0);
    assert_int_equal(n, 0);
    assert_int_equal(why, PFR_REFUSED_TOO_BIG);
}

static int read_info(const char *name, struct pfr_sym_elf_info *info)
{
    int fd = open(wpath(name), O_RDONLY);
    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    char err[256];
    int rc = pfr_sym_elf_read_info(e, info, err, sizeof(err));
    elf_end(e);
    close(fd);
    return rc;
}

static void test_limit_note(void **state)
{
    (void)state;
    struct pfr_sym_elf_info info;
    struct hg_sec secs[] = {
        SYMTAB_SEC,
        STRTAB_SEC,
        {.name = ".note.big", .type = SHT_NOTE, .data = "", .len = 1, .size = PFR_SYM_MAX_NOTE}};
    write_file("note_at.so", secs, 3, NULL);
    assert_int_equal(read_info("note_at.so", &info), 0);
    assert_int_equal(info.refused, PFR_REFUSED_NONE);
    secs[2].size++;
    write_file("note_over.so", secs, 3, NULL);
    assert_int_equal(read_info("note_over.so", &info), 0);
    assert_int_equal(info.refused, PFR_REFUSED_TOO_BIG);
}

/* Opens the table of file name within max_bytes; *kept: what it holds (0 when refused). */
static int open_pcln(const char *name, size_t max_bytes, int *why, size_t *kept)
{
    int fd = open(wpath(name), O_RDONLY);
    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    struct pfr_sym_gopcln *g = NULL;
    struct pfr_sym_budget b = {0};
    char err[256];
    int rc = pfr_sym_gopcln_open(e, fd, max_bytes, &b, &g, err, sizeof(err));
    *why = b.refused;
    if (kept)
        *kept = pfr_sym_gopcln_bytes(g);
    pfr_sym_gopcln_free(g);
    elf_end(e);
    close(fd);
    return rc;
}

/* Opened on a file, the table answers as in memory, reading what it needs through the file;
 * the file truncated after the open (its owner may do that): no answer, never a bad read. */
static void test_gopclntab_through_fd(void **state)
{
    (void)state;
    uint8_t pcln[GOPCLNGEN_MAX_SIZE];
    size_t len = pfr_gopclngen_build(pcln);
    struct hg_sec secs[] = {
        {.name = ".gopclntab", .type = SHT_PROGBITS, .flags = SHF_ALLOC, .data = pcln, .len = len}};
    write_file("pcln_fd", secs, 1, NULL);
    int fd = open(wpath("pcln_fd"), O_RDWR);
    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    struct pfr_sym_gopcln *g = NULL, *m = NULL;
    char err[256];
    assert_int_equal(pfr_sym_gopcln_open(e, fd, 1 << 20, NULL, &g, err, sizeof(err)), 0);
    elf_end(e);
    assert_int_equal(pfr_sym_gopcln_open_mem(pcln, len, GOPCLNGEN_TEXT, &m, err, sizeof(err)), 0);
    struct pfr_sym_gopcln_frame a, b;
    int answered = 0;
    for (uint64_t pc = GOPCLNGEN_TEXT - 4; pc < GOPCLNGEN_TEXT + 0x44; pc++) {
        int ra = pfr_sym_gopcln_lookup(g, pc, &a), rb = pfr_sym_gopcln_lookup(m, pc, &b);
        assert_int_equal(ra, rb);
        if (!ra)
            continue;
        answered++;
        assert_string_equal(a.name, b.name);
        assert_true((a.file == NULL) == (b.file == NULL));
        if (a.file)
            assert_string_equal(a.file, b.file);
        assert_int_equal(a.line, b.line);
    }
    assert_int_equal(answered, 0x40);
    assert_true(pfr_sym_gopcln_bytes(g) < pfr_sym_gopcln_bytes(m) + 4096 * 2 + 256);
    assert_int_equal(ftruncate(fd, 64), 0);
    for (uint64_t pc = GOPCLNGEN_TEXT; pc < GOPCLNGEN_TEXT + 0x40; pc++)
        assert_int_equal(pfr_sym_gopcln_lookup(g, pc, &a), 0);
    pfr_sym_gopcln_free(g);
    pfr_sym_gopcln_free(m);
    close(fd);
}

static void test_limit_gopclntab(void **state)
{
    (void)state;
    uint8_t pcln[GOPCLNGEN_MAX_SIZE];
    size_t len = pfr_gopclngen_build(pcln);
    int why;
    struct hg_sec secs[] = {{.name = ".gopclntab",
                             .type = SHT_PROGBITS,
                             .flags = SHF_ALLOC,
                             .data = pcln,
                             .len = len,
                             .size = 65536}};
    /* 6,000 functions: what is kept (the function table, 8 bytes a function, read before the
     * rest is looked at) is what the limit bounds, at the byte, not the 64 KiB section, which
     * stays in the file */
    uint64_t nfunc = 6000;
    memcpy(pcln + 8, &nfunc, 8);
    write_file("pcln_at", secs, 1, NULL);
    size_t kept;
    assert_int_equal(open_pcln("pcln_at", 65536, &why, &kept), 0);
    assert_int_equal(why, PFR_REFUSED_NONE);
    assert_true(kept >= (nfunc + 1) * 8 && kept <= (nfunc + 1) * 8 + 16384 && kept < 65536);
    assert_int_equal(open_pcln("pcln_at", kept, &why, NULL), 0);
    /* a byte less: the file tables are left in the file; the function table alone, at the
     * byte, then refused */
    size_t least;
    assert_int_equal(open_pcln("pcln_at", kept - 1, &why, &least), 0);
    assert_true(least < kept && least >= (nfunc + 1) * 8);
    assert_int_equal(open_pcln("pcln_at", least, &why, NULL), 0);
    assert_int_equal(open_pcln("pcln_at", least - 1, &why, NULL), -EFBIG);
    assert_int_equal(why, PFR_REFUSED_TOO_BIG);
    /* counts beyond the section */
    nfunc = 65536 / 8 + 1;
    memcpy(pcln + 8, &nfunc, 8);
    write_file("pcln_count", secs, 1, NULL);
    assert_int_equal(open_pcln("pcln_count", 65536, &why, NULL), -EINVAL);
    assert_int_equal(why, PFR_REFUSED_BAD_FILE);
}

/* A unit's line table is built only when its cost (112 bytes a row: rows + 1 with the end of
 * its sequence) fits under the cap with what is held: a cap just under, then just over, the
 * debug sections plus that cost (the unit index, ~6 KiB, is the slack between the two). */
static void test_limit_lines(void **state)
{
    (void)state;
    const uint64_t rows = 20000;
    write_line_bomb("lines_at.so", rows);
    int fd = open(wpath("lines_at.so"), O_RDONLY);
    assert_true(fd >= 0);
    size_t size = pfr_sym_dwarf_size(fd), peak = (rows + 1) * 112;
    struct pfr_sym_dwarf_frame fr[4];
    char err[256];
    for (int over = 0; over < 2; over++) {
        struct pfr_sym_dwarf *d;
        size_t cap = over ? size + peak - 1 : size + peak + 16384;
        assert_int_equal(pfr_sym_dwarf_open(fd, cap, NULL, &d, err, sizeof(err)), 0);
        assert_int_equal(pfr_sym_dwarf_lookup(d, HG_TEXT + 10, fr, 4), 1);
        assert_int_equal(fr[0].line, over ? 0 : 1);
        assert_int_equal(pfr_sym_dwarf_take_refused(d), over ? 1 : 0);
        assert_int_equal(pfr_sym_dwarf_take_refused(d), 0);
        pfr_sym_dwarf_close(d);
    }
    close(fd);
}

/* Rows of a line program, counted without building them. */
static void test_dwline_rows(void **state)
{
    (void)state;
    size_t len;
    uint8_t *p = pfr_hg_line_program(HG_TEXT, 1000, &len);
    assert_non_null(p);
    assert_int_equal(pfr_sym_dwline_rows(p, len, 0, false, UINT64_MAX), 1001);
    assert_int_equal(pfr_sym_dwline_rows(p, len, 0, false, 10), 11); /* stops past max */
    assert_int_equal(pfr_sym_dwline_rows(p, len - 1, 0, false, UINT64_MAX), PFR_DWLINE_BAD);
    assert_int_equal(pfr_sym_dwline_rows(p, len, len, false, UINT64_MAX), PFR_DWLINE_BAD);
    /* big-endian: the same program with its lengths swapped */
    uint8_t *be = malloc(len);
    memcpy(be, p, len);
    uint32_t ul, hl;
    memcpy(&ul, p, 4);
    memcpy(&hl, p + 6, 4);
    ul = __builtin_bswap32(ul);
    hl = __builtin_bswap32(hl);
    memcpy(be, &ul, 4);
    uint16_t v = __builtin_bswap16(4);
    memcpy(be + 4, &v, 2);
    memcpy(be + 6, &hl, 4);
    assert_int_equal(pfr_sym_dwline_rows(be, len, 0, true, UINT64_MAX), 1001);
    /* standard opcodes: copy (a row), fixed_advance_pc (a uhalf), advance_pc (a LEB) */
    size_t body = len - 3 - 1000; /* header and set_address */
    memcpy(be, p, body);
    size_t w = body;
    const uint8_t ops[] = {1, 9, 0x80, 0x80, 2, 0x80, 0x01, 1, 0, 1, 1};
    memcpy(be + w, ops, sizeof(ops));
    w += sizeof(ops);
    uint32_t nl = (uint32_t)(w - 4);
    memcpy(be, &nl, 4);
    assert_int_equal(pfr_sym_dwline_rows(be, w, 0, false, UINT64_MAX), 3);
    free(be);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normal_file),     cmocka_unit_test(test_chdr_bomb),
        cmocka_unit_test(test_zdebug_bomb),     cmocka_unit_test(test_line_bomb),
        cmocka_unit_test(test_symtab_lies),     cmocka_unit_test(test_symtab_many),
        cmocka_unit_test(test_strtab_huge),     cmocka_unit_test(test_sections_bomb),
        cmocka_unit_test(test_note_bomb),       cmocka_unit_test(test_gopclntab_lies),
        cmocka_unit_test(test_gopclntab_big),   cmocka_unit_test(test_time_budget),
        cmocka_unit_test(test_limit_sections),  cmocka_unit_test(test_limit_entries),
        cmocka_unit_test(test_limit_strtab),    cmocka_unit_test(test_limit_note),
        cmocka_unit_test(test_limit_gopclntab), cmocka_unit_test(test_gopclntab_through_fd),
        cmocka_unit_test(test_limit_lines),     cmocka_unit_test(test_dwline_rows),
        cmocka_unit_test(test_perfmap_lines),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
