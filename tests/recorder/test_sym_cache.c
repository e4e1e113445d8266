/*
 * The symbolizer's file cache under pressure (issue 3): a hot file survives a stream of big
 * files seen once, files evicted and needed again are counted as re-parses, and DWARF stays
 * within its caps, is dropped before symbols, and its frames survive the drop (memo).
 *
 * Symbol tables keep 16 bytes a symbol and read names from the file on first use: the bytes
 * counted are those, and a file changed on disk after its parse gives clean misses.
 *
 * Runs over a fake /proc (maps written by the test, PID/root a link to "/") with generated ELF
 * files of chosen sizes, and one small C program compiled with -g at test time for DWARF.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>
#include <elf.h>

#include "elfgen.h"
#include "sym_dwarf.h"
#include "sym_elf.h"
#include "symbolizer.h"

#ifndef SYMC_CC
#define SYMC_CC "cc"
#endif

static char tmpdir[256], root[300];

/* ---- generated ELF files: nsyms functions of 16 bytes at TEXT, names long enough to weigh ---- */

#define TEXT 0x1000u

static void put(FILE *f, const void *p, size_t n)
{
    assert_int_equal(fwrite(p, 1, n, f), n);
}

static void pad_to(FILE *f, long off)
{
    while (ftell(f) < off)
        fputc(0, f);
}

/* Writes an ET_DYN with a unique build-id and functions "<tag>_fn_<i>_<padding>"; returns the
 * address of function i at text + 16 * i. */
static void gen_elf(const char *path, const char *tag, unsigned id, size_t nsyms)
{
    size_t text_size = nsyms * 16;
    /* string table */
    size_t strcap = 1 + nsyms * 96;
    char *strtab = calloc(1, strcap);
    assert_non_null(strtab);
    size_t strlen_ = 1;
    Elf64_Sym *syms = calloc(nsyms + 1, sizeof(*syms));
    assert_non_null(syms);
    for (size_t i = 0; i < nsyms; i++) {
        int n = snprintf(strtab + strlen_, strcap - strlen_,
                         "%s_fn_%zu_with_a_name_long_enough_to_weigh_in_the_cache", tag, i);
        syms[i + 1].st_name = (uint32_t)strlen_;
        syms[i + 1].st_value = TEXT + 16 * i;
        syms[i + 1].st_size = 16;
        syms[i + 1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
        syms[i + 1].st_shndx = 2;
        strlen_ += (size_t)n + 1;
    }
    static const char shstr[] = "\0.note.gnu.build-id\0.text\0.symtab\0.strtab\0.shstrtab";
    enum { S_NOTE = 1, S_TEXT = 20, S_SYMTAB = 26, S_STRTAB = 34, S_SHSTR = 42 };
    struct {
        Elf64_Nhdr h;
        char name[4];
        uint8_t desc[20];
    } note = {{4, 20, NT_GNU_BUILD_ID}, "GNU", {0}};
    for (int i = 0; i < 20; i++)
        note.desc[i] = (uint8_t)(id * 37u + (unsigned)i * 11u + 1u);
    memcpy(note.desc, &id, sizeof(id));

    long note_off = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
    long text_off = TEXT;
    long sym_off = (long)(TEXT + text_size + 7) & ~7L;
    long str_off = sym_off + (long)((nsyms + 1) * sizeof(Elf64_Sym));
    long shstr_off = str_off + (long)strlen_;
    long sh_off = (shstr_off + (long)sizeof(shstr) + 7) & ~7L;

    Elf64_Ehdr eh = pfr_elfgen_ehdr((uint64_t)sh_off, 1, 6, 5);
    Elf64_Phdr ph = {PT_LOAD, PF_R | PF_X, 0, 0, 0, TEXT + text_size, TEXT + text_size, 0x1000};
    Elf64_Shdr sh[6] = {{0}};
    sh[1] = (Elf64_Shdr){
        S_NOTE, SHT_NOTE, SHF_ALLOC, (uint64_t)note_off, (uint64_t)note_off, sizeof(note), 0,
        0,      4,        0};
    sh[2] = (Elf64_Shdr){S_TEXT,
                         SHT_PROGBITS,
                         SHF_ALLOC | SHF_EXECINSTR,
                         TEXT,
                         (uint64_t)text_off,
                         text_size,
                         0,
                         0,
                         16,
                         0};
    sh[3] = (Elf64_Shdr){
        S_SYMTAB, SHT_SYMTAB,       0, 0, (uint64_t)sym_off, (nsyms + 1) * sizeof(Elf64_Sym), 4, 1,
        8,        sizeof(Elf64_Sym)};
    sh[4] = (Elf64_Shdr){S_STRTAB, SHT_STRTAB, 0, 0, (uint64_t)str_off, strlen_, 0, 0, 1, 0};
    sh[5] = (Elf64_Shdr){S_SHSTR, SHT_STRTAB, 0, 0, (uint64_t)shstr_off, sizeof(shstr), 0, 0, 1, 0};

    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    put(f, &eh, sizeof(eh));
    put(f, &ph, sizeof(ph));
    put(f, &note, sizeof(note));
    pad_to(f, text_off);
    for (size_t i = 0; i < text_size; i++)
        fputc(0xc3, f);
    pad_to(f, sym_off);
    put(f, syms, (nsyms + 1) * sizeof(Elf64_Sym));
    put(f, strtab, strlen_);
    put(f, shstr, sizeof(shstr));
    pad_to(f, sh_off);
    put(f, sh, sizeof(sh));
    assert_int_equal(fclose(f), 0);
    free(strtab);
    free(syms);
}

/* ---- the fake /proc ---- */

#define MAP_START 0x7f0000000000ull

/* pid maps one file, executable, at MAP_START (file offset 0). */
static void fake_proc(int pid, const char *file)
{
    char dir[400], path[450], line[700];
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    snprintf(dir, sizeof(dir), "%s/%d", root, pid);
    mkdir(dir, 0755);
    snprintf(path, sizeof(path), "%s/root", dir);
    unlink(path);
    assert_int_equal(symlink("/", path), 0);
    snprintf(path, sizeof(path), "%s/maps", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    uint64_t len = ((uint64_t)st.st_size + 0xfff) & ~0xfffull;
    snprintf(line, sizeof(line), "%llx-%llx r-xp 00000000 %02x:%02x %llu %s\n",
             (unsigned long long)MAP_START, (unsigned long long)(MAP_START + len), major(st.st_dev),
             minor(st.st_dev), (unsigned long long)st.st_ino, file);
    fputs(line, f);
    fclose(f);
}

static pfr_symbolizer *new_sym(size_t max)
{
    pfr_symbolizer *s;
    pfr_sym_opts o = {.max_cache_bytes = max, .proc_root = root};
    assert_int_equal(pfr_symbolizer_new(&o, &s), 0);
    return s;
}

static pfr_sym_stats stats(pfr_symbolizer *s)
{
    pfr_sym_stats st;
    pfr_symbolizer_stats(s, &st);
    return st;
}

static void file_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* Symbolize function i of the file pid maps; checks the name. */
static void expect_fn(pfr_symbolizer *s, int pid, const char *tag, size_t i)
{
    pfr_sym_frame fr[4];
    char want[160];
    assert_int_equal(pfr_symbolize_user(s, pid, MAP_START + TEXT + 16 * i + 3, fr, 4), 1);
    snprintf(want, sizeof(want), "%s_fn_%zu_with_a_name_long_enough_to_weigh_in_the_cache", tag, i);
    assert_string_equal(fr[0].function, want);
}

/* A file used by several processes and samples stays while a stream of bigger files, each
 * mapped by one short-lived process and never sampled, passes through: plain LRU would have
 * evicted it after three of them. */
static void test_hot_survives_cold_stream(void **state)
{
    (void)state;
    const size_t max = 200u << 10;
    char hot[400], cold[400];
    file_path(hot, sizeof(hot), "hot.so");
    gen_elf(hot, "hot", 1, 2000); /* ~32 KB in the cache (16 bytes a symbol, names stay on disk) */
    pfr_symbolizer *s = new_sym(max);
    fake_proc(100, hot);
    fake_proc(101, hot);
    assert_int_equal(pfr_symbolizer_add_process(s, 100), 0);
    assert_int_equal(pfr_symbolizer_add_process(s, 101), 0);
    expect_fn(s, 100, "hot", 7);
    pfr_sym_stats st = stats(s);
    assert_int_equal(st.files_parsed, 1);
    assert_true(st.protected_bytes > 0); /* used again: protected */
    for (unsigned i = 0; i < 40; i++) {
        char tag[32];
        snprintf(tag, sizeof(tag), "cold%u", i);
        snprintf(cold, sizeof(cold), "%s/cold%u.so", tmpdir, i);
        gen_elf(cold, tag, 100 + i, 4000); /* ~64 KB: three fill the cache */
        fake_proc(200 + (int)i, cold);
        assert_int_equal(pfr_symbolizer_add_process(s, 200 + (int)i), 0);
        st = stats(s);
        assert_true(st.cache_bytes <= max);
        if (i % 10 == 9) /* the hot file is used now and then, much less often than the stream */
            expect_fn(s, 101, "hot", i);
        pfr_symbolizer_forget_process(s, 200 + (int)i); /* the file stays: no inode reused */
    }
    st = stats(s);
    assert_int_equal(st.files_parsed, 41); /* the hot file was never parsed again */
    assert_int_equal(st.reparses, 0);
    assert_true(st.evictions >= 35); /* the stream evicted itself */
    uint64_t misses = st.cache_misses;
    expect_fn(s, 100, "hot", 1999);
    assert_int_equal(stats(s).cache_misses, misses);
    pfr_symbolizer_free(s);
}

/* A file evicted and needed again is parsed again, and counted; the bound holds throughout. */
static void test_reparse_counted(void **state)
{
    (void)state;
    const size_t max = 100u << 10; /* one of a and b (~64 KB each) fits, not both */
    char a[400], b[400];
    file_path(a, sizeof(a), "a.so");
    file_path(b, sizeof(b), "b.so");
    gen_elf(a, "a", 11, 4000);
    gen_elf(b, "b", 12, 4000);
    fake_proc(300, a);
    fake_proc(301, b);
    pfr_symbolizer *s = new_sym(max);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(pfr_symbolizer_add_process(s, 300), 0);
        expect_fn(s, 300, "a", 5);
        assert_int_equal(pfr_symbolizer_add_process(s, 301), 0);
        expect_fn(s, 301, "b", 6);
        assert_true(stats(s).cache_bytes <= max);
    }
    pfr_sym_stats st = stats(s);
    assert_int_equal(st.files_parsed, 6);
    assert_int_equal(st.reparses, 4);
    assert_int_equal(st.evictions, 5);
    pfr_symbolizer_free(s);
}

/* The bound a recorder near its memory budget sets: files used only once go at once, files
 * used more than once (these two) when room is needed, so a new file is named within the
 * bound; the setting's bound comes back with 0. */
static void test_bound(void **state)
{
    (void)state;
    const size_t max = 300u << 10, bound = 100u << 10; /* a, b, c: ~64 KB each */
    char a[400], b[400], c[400];
    file_path(a, sizeof(a), "ba.so");
    file_path(b, sizeof(b), "bb.so");
    file_path(c, sizeof(c), "bc.so");
    gen_elf(a, "ba", 21, 4000);
    gen_elf(b, "bb", 22, 4000);
    gen_elf(c, "bc", 23, 4000);
    fake_proc(310, a);
    fake_proc(311, b);
    fake_proc(312, c);
    pfr_symbolizer *s = new_sym(max);
    assert_int_equal(stats(s).bound_bytes, max);
    assert_int_equal(pfr_symbolizer_add_process(s, 310), 0);
    expect_fn(s, 310, "ba", 1);
    assert_int_equal(pfr_symbolizer_add_process(s, 311), 0);
    expect_fn(s, 311, "bb", 2);
    pfr_sym_stats st = stats(s);
    assert_true(st.cache_bytes > bound); /* both held, both protected */
    assert_int_equal(st.protected_bytes, st.cache_bytes);
    pfr_symbolizer_set_bound(s, bound);
    assert_int_equal(stats(s).bound_bytes, bound);
    assert_int_equal(stats(s).evictions, 0);
    assert_int_equal(pfr_symbolizer_add_process(s, 312), 0);
    expect_fn(s, 312, "bc", 3); /* named within the bound */
    assert_true(stats(s).cache_bytes <= bound);
    pfr_symbolizer_set_bound(s, 0);
    assert_int_equal(stats(s).bound_bytes, max);
    pfr_symbolizer_set_bound(s, 2 * max); /* never above the setting */
    assert_int_equal(stats(s).bound_bytes, max);
    pfr_symbolizer_free(s);
}

/* Near the memory budget (a bound well below the setting) with more large tables in use than fit,
 * the large ones evict each other and the many small libraries every process maps stay: plain
 * LRU evicted the small ones, used before the large, each round. */
static void test_large_go_first(void **state)
{
    (void)state;
    enum { NSMALL = 8, NLARGE = 8, ROUNDS = 3 };
    const size_t bound = 400u << 10; /* the large files (~64 KB each) fill it 1.3 times */
    char path[400], tag[32];
    for (int i = 0; i < NSMALL + NLARGE; i++) {
        bool small = i < NSMALL;
        snprintf(tag, sizeof(tag), "%s%d", small ? "sm" : "lg", i);
        snprintf(path, sizeof(path), "%s/%s.so", tmpdir, tag);
        gen_elf(path, tag, 700 + (unsigned)i, small ? 100 : 4000); /* ~2 KB or ~64 KB */
        fake_proc(700 + i, path);
    }
    pfr_symbolizer *s = new_sym(4u << 20);
    pfr_symbolizer_set_bound(s, bound);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < NSMALL + NLARGE; i++) {
            snprintf(tag, sizeof(tag), "%s%d", i < NSMALL ? "sm" : "lg", i);
            assert_int_equal(pfr_symbolizer_add_process(s, 700 + i), 0);
            expect_fn(s, 700 + i, tag, (size_t)round);
            assert_true(stats(s).cache_bytes <= bound);
        }
    }
    pfr_sym_stats st = stats(s);
    assert_true(st.reparses >= NLARGE); /* the pressure was real: large files came back */
    /* each small file was parsed once: every parse past the first round was of a large one */
    assert_int_equal(st.files_parsed - st.reparses, NSMALL + NLARGE);
    uint64_t parsed = st.files_parsed;
    for (int i = 0; i < NSMALL; i++) {
        snprintf(tag, sizeof(tag), "sm%d", i);
        expect_fn(s, 700 + i, tag, 99);
    }
    assert_int_equal(stats(s).files_parsed, parsed);
    pfr_symbolizer_free(s);
}

/* ---- names stay in the files ---- */

/* A parsed file costs 16 bytes a symbol, plus the names looked up, no more. */
static void test_compact_accounting(void **state)
{
    (void)state;
    char path[400];
    file_path(path, sizeof(path), "compact.so");
    gen_elf(path, "compact", 31, 4000); /* ~280 KB of names in the file */
    fake_proc(600, path);
    pfr_symbolizer *s = new_sym(32u << 20);
    assert_int_equal(pfr_symbolizer_add_process(s, 600), 0);
    pfr_sym_stats st = stats(s);
    assert_int_equal(st.files_cached, 1);
    assert_int_equal(st.open_files, 1);
    assert_true(st.cache_bytes >= 4000 * 16 && st.cache_bytes < 4000 * 16 + 4096);
    uint64_t before = st.cache_bytes;
    for (size_t i = 0; i < 10; i++)
        expect_fn(s, 600, "compact", i * 397);
    st = stats(s);
    /* ten names of ~60 bytes, and the table that remembers them */
    assert_true(st.cache_bytes > before && st.cache_bytes < before + 4096);
    assert_int_equal(st.name_errors, 0);
    pfr_symbolizer_free(s);
}

/* The file is cut short on disk after it was parsed: names already looked up still come out,
 * others become module+offset (counted, with a reason), nothing reads past the end. A file
 * replaced by a rename is still read as it was (the cache holds the old inode open). */
static void test_file_changed_after_parse(void **state)
{
    (void)state;
    char path[400], repl[400], want[480];
    file_path(path, sizeof(path), "changed.so");
    file_path(repl, sizeof(repl), "changed.so.new");
    gen_elf(path, "chg", 41, 500);
    fake_proc(610, path);
    pfr_symbolizer *s = new_sym(32u << 20);
    assert_int_equal(pfr_symbolizer_add_process(s, 610), 0);
    expect_fn(s, 610, "chg", 1);
    assert_int_equal(truncate(path, 4096), 0);
    pfr_sym_frame fr[4];
    uint64_t off = TEXT + 16 * 2 + 3;
    assert_int_equal(pfr_symbolize_user(s, 610, MAP_START + off, fr, 4), 1);
    snprintf(want, sizeof(want), "changed.so+0x%" PRIx64, off);
    assert_string_equal(fr[0].function, want);
    assert_non_null(strstr(pfr_symbolizer_last_error(s), "changed on disk"));
    pfr_sym_stats st = stats(s);
    assert_int_equal(st.name_errors, 1);
    assert_true(st.unresolved_frames >= 1);
    expect_fn(s, 610, "chg", 1); /* looked up before the change: kept */
    assert_int_equal(pfr_symbolize_user(s, 610, MAP_START + off, fr, 4), 1);
    assert_string_equal(fr[0].function, want); /* the miss is remembered: no read again */
    assert_int_equal(stats(s).name_errors, 1);
    pfr_symbolizer_free(s);

    gen_elf(path, "chg", 42, 500);
    fake_proc(611, path);
    s = new_sym(32u << 20);
    assert_int_equal(pfr_symbolizer_add_process(s, 611), 0);
    gen_elf(repl, "new", 43, 500);
    assert_int_equal(rename(repl, path), 0);
    expect_fn(s, 611, "chg", 7);
    assert_int_equal(stats(s).name_errors, 0);
    pfr_symbolizer_free(s);
}

/* ---- DWARF ---- */

static char prog[400], prog2[400]; /* the same program, two build-ids */
static uint64_t prog_fn;           /* link-time address of target_fn */

static void build_prog(void)
{
    char src[400], cmd[1200];
    snprintf(src, sizeof(src), "%s/prog.c", tmpdir);
    snprintf(prog, sizeof(prog), "%s/prog", tmpdir);
    FILE *f = fopen(src, "w");
    assert_non_null(f);
    fputs("#include <stdio.h>\n"
          "struct big { int a[16]; double d; const char *s; };\n"
          "int target_fn(struct big *b, int n)\n"
          "{\n"
          "    int t = 0;\n"
          "    for (int i = 0; i < n; i++)\n"
          "        t += b->a[i % 16]; /* TARGET_LINE */\n"
          "    return t;\n"
          "}\n",
          f);
    /* types and functions enough for DWARF to outweigh the symbols several times over */
    for (int i = 0; i < 80; i++)
        fprintf(
            f,
            "struct rec%d { int a%d, b%d, c%d; double d%d; char name%d[%d]; struct rec%d *next; "
            "};\n"
            "int helper%d(struct rec%d *r) { int x = r->a%d + %d; if (r->next) x += r->next->b%d; "
            "return x * r->c%d; }\n",
            i, i, i, i, i, i, 8 + i, i, i, i, i, i, i, i);
    fputs("int main(void) { struct big b = {{0}, 0, 0}; printf(\"%d\\n\", target_fn(&b, 3));"
          " return 0; }\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s -g -O0 -fPIE -pie -o %s %s", SYMC_CC, prog, src);
    assert_int_equal(system(cmd), 0);
    snprintf(prog2, sizeof(prog2), "%s/prog2", tmpdir);
    snprintf(cmd, sizeof(cmd), "%s -g -O0 -fPIE -pie -Wl,--build-id=0x%s -o %s %s", SYMC_CC,
             "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed", prog2, src);
    assert_int_equal(system(cmd), 0);
    int fd = open(prog, O_RDONLY);
    assert_true(fd >= 0);
    assert_true(elf_version(EV_CURRENT) != EV_NONE);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    struct pfr_sym_elf_syms syms = {0};
    char err[128];
    assert_int_equal(pfr_sym_elf_read_syms(e, &syms, 1 << 20, NULL, err, sizeof(err)), 0);
    for (size_t i = 0; i < syms.n; i++)
        if (strcmp(pfr_sym_strpool_get(&syms.names, syms.v[i].name), "target_fn") == 0)
            prog_fn = syms.v[i].addr;
    pfr_sym_elf_syms_free(&syms);
    elf_end(e);
    close(fd);
    assert_true(prog_fn != 0);
}

/* Frames of target_fn + 8 through pid (the program maps at MAP_START, offset == vaddr for its
 * text in a PIE). */
static int sym_prog(pfr_symbolizer *s, int pid, pfr_sym_frame *fr)
{
    int n = pfr_symbolize_user(s, pid, MAP_START + prog_fn + 8, fr, 4);
    assert_true(n >= 1);
    assert_string_equal(fr[n - 1].function, "target_fn");
    return n;
}

static size_t prog_dwarf_size(void)
{
    int fd = open(prog, O_RDONLY);
    assert_true(fd >= 0);
    size_t n = pfr_sym_dwarf_size(fd);
    close(fd);
    assert_true(n > 0);
    return n;
}

/* The DWARF bytes of the program (mapped by pid) once target_fn's line is read with room to
 * spare, and that line. */
static size_t prog_dwarf_in_use(int pid, int64_t *line)
{
    pfr_sym_frame fr[4];
    pfr_symbolizer *s = new_sym(64u << 20);
    assert_int_equal(pfr_symbolizer_add_process(s, pid), 0);
    sym_prog(s, pid, fr);
    *line = fr[0].line;
    size_t dwarf = stats(s).dwarf_bytes;
    pfr_symbolizer_free(s);
    assert_true(*line > 0);
    return dwarf;
}

/* One file's DWARF over its cap (half the bound) is refused from its headers, nothing read;
 * under it, it is read and holds the cap. Names are the same either way. */
static void test_dwarf_cap(void **state)
{
    (void)state;
    size_t dsize = prog_dwarf_size();
    fake_proc(400, prog);
    pfr_sym_frame fr[4];

    pfr_symbolizer *s = new_sym(64u << 20);
    assert_int_equal(pfr_symbolizer_add_process(s, 400), 0);
    sym_prog(s, 400, fr);
    assert_non_null(strstr(fr[0].file, "prog.c"));
    assert_true(fr[0].line > 0);
    int64_t line = fr[0].line;
    pfr_sym_stats st = stats(s);
    assert_int_equal(st.dwarf_loads, 1);
    assert_true(st.dwarf_bytes >= dsize && st.dwarf_bytes <= (32u << 20));
    pfr_symbolizer_free(s);

    /* a bound whose half is just under the program's debug sections */
    s = new_sym(2 * dsize - 2);
    assert_int_equal(pfr_symbolizer_add_process(s, 400), 0);
    sym_prog(s, 400, fr);
    assert_string_equal(fr[0].file, "");
    assert_int_equal(fr[0].line, 0);
    st = stats(s);
    assert_int_equal(st.dwarf_loads, 0);
    assert_int_equal(st.dwarf_too_big, 1);
    assert_int_equal(st.dwarf_bytes, 0);
    assert_true(st.cache_bytes <= 2 * dsize - 2);
    pfr_symbolizer_free(s);

    /* room for it: lines again, within the caps after every call */
    size_t max = 4 * dsize + (256u << 10);
    s = new_sym(max);
    assert_int_equal(pfr_symbolizer_add_process(s, 400), 0);
    sym_prog(s, 400, fr);
    assert_int_equal(fr[0].line, line);
    st = stats(s);
    assert_int_equal(st.dwarf_loads, 1);
    assert_true(st.dwarf_bytes > 0 && st.dwarf_bytes <= max / 2);
    assert_true(st.cache_bytes <= max);
    pfr_symbolizer_free(s);
}

/* DWARF whose line tables grow past the per-file cap in use is dropped, the lines found kept,
 * and not read again at once: later each time it outgrows the cap. */
static void test_dwarf_outgrown(void **state)
{
    (void)state;
    size_t dsize = prog_dwarf_size();
    fake_proc(410, prog);
    int64_t line;
    size_t dwarf = prog_dwarf_in_use(410, &line);
    assert_true(dwarf > dsize); /* the line tables read on top of the sections */
    pfr_sym_frame fr[4];
    pfr_symbolizer *s;

    /* a cap between the sections and what the lookup makes of them */
    s = new_sym(2 * (dwarf - 1));
    assert_int_equal(pfr_symbolizer_add_process(s, 410), 0);
    for (int i = 0; i < 3; i++) {
        sym_prog(s, 410, fr);
        assert_int_equal(fr[0].line, line);
        pfr_sym_stats st = stats(s);
        assert_int_equal(st.dwarf_loads, 1);
        assert_int_equal(st.dwarf_outgrown, 1);
        assert_int_equal(st.dwarf_bytes, 0);
        assert_true(st.cache_bytes <= 2 * (dwarf - 1));
    }
    pfr_symbolizer_free(s);
}

/* A file whose DWARF fits only by dropping the DWARF of a file in use waits: the file in use
 * keeps its lines, the newcomer's frames go without file:line, and it is not tried again at
 * once (before, each read the other's debug sections again in turn). */
static void test_dwarf_no_room(void **state)
{
    (void)state;
    size_t dsize = prog_dwarf_size();
    fake_proc(600, prog);
    fake_proc(601, prog2);
    int64_t line;
    size_t dwarf = prog_dwarf_in_use(600, &line);
    pfr_sym_frame fr[4];
    pfr_symbolizer *s;

    /* DWARF room (half the bound) for one of them in use and half the other's sections */
    s = new_sym(2 * dwarf + dsize);
    assert_int_equal(pfr_symbolizer_add_process(s, 600), 0);
    sym_prog(s, 600, fr);
    sym_prog(s, 600, fr); /* used again: in use */
    assert_int_equal(fr[0].line, line);
    assert_true(stats(s).protected_bytes >= dwarf);
    assert_int_equal(pfr_symbolizer_add_process(s, 601), 0);
    for (int i = 0; i < 2; i++) {
        sym_prog(s, 601, fr);
        assert_int_equal(fr[0].line, 0);
        pfr_sym_stats st = stats(s);
        assert_int_equal(st.dwarf_no_room, 1); /* the second lookup did not try again */
        assert_int_equal(st.dwarf_loads, 1);
        assert_int_equal(st.dwarf_evictions, 0);
        assert_int_equal(st.dwarf_bytes, dwarf);
    }
    sym_prog(s, 600, fr);
    assert_int_equal(fr[0].line, line);
    assert_int_equal(stats(s).dwarf_loads, 1);
    pfr_symbolizer_free(s);
}

/* DWARF may hold half of the bound the memory budget sets, not half of the setting: lowered
 * under what a file in use holds, its DWARF goes at once, its symbols and the lines already
 * found stay; the setting's bound gives the room back. */
static void test_dwarf_follows_bound(void **state)
{
    (void)state;
    fake_proc(620, prog);
    int64_t line;
    size_t dwarf = prog_dwarf_in_use(620, &line);
    pfr_sym_frame fr[4];
    pfr_symbolizer *s = new_sym(64u << 20);
    assert_int_equal(pfr_symbolizer_add_process(s, 620), 0);
    sym_prog(s, 620, fr);
    sym_prog(s, 620, fr); /* used again: in use (protected) */
    assert_int_equal(stats(s).dwarf_bytes, dwarf);
    pfr_symbolizer_set_bound(s, dwarf + dwarf / 2); /* room for it all, not under half */
    pfr_sym_stats st = stats(s);
    assert_int_equal(st.dwarf_bytes, 0);
    assert_int_equal(st.dwarf_evictions, 1);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.files_cached, 1);
    sym_prog(s, 620, fr);
    assert_int_equal(fr[0].line, line); /* from the memo */
    assert_int_equal(stats(s).dwarf_loads, 1);
    pfr_symbolizer_set_bound(s, 0);
    assert_int_equal(stats(s).bound_bytes, 64u << 20);
    pfr_symbolizer_free(s);
}

/* A stripped file (no .symtab) whose debug file is installed, found by build-id: its functions
 * are named from the debug file's .symtab (16 bytes a symbol, no DWARF needed), its lines come
 * from the debug file's DWARF; without the debug file the same frame is module+offset. */
static void test_debug_file_symtab(void **state)
{
    (void)state;
    char stripped[400], dir[400], sub[420], dbg[520], cmd[2400];
    snprintf(stripped, sizeof(stripped), "%s/prog2.stripped", tmpdir);
    snprintf(dir, sizeof(dir), "%s/debug", tmpdir);
    snprintf(sub, sizeof(sub), "%s/5e", dir); /* prog2's build-id: 5eed 5eed ... */
    mkdir(dir, 0755);
    mkdir(sub, 0755);
    snprintf(dbg, sizeof(dbg), "%s/ed5eed5eed5eed5eed5eed5eed5eed5eed5eed.debug", sub);
    snprintf(cmd, sizeof(cmd), "objcopy --only-keep-debug %s %s && strip --strip-all -o %s %s",
             prog2, dbg, stripped, prog2);
    assert_int_equal(system(cmd), 0);
    fake_proc(630, stripped);
    pfr_sym_frame fr[4];
    char nodir[400];
    snprintf(nodir, sizeof(nodir), "%s/no-debug", tmpdir);
    for (int run = 0; run < 3; run++) { /* no debug file; its symbols alone; with its DWARF */
        pfr_symbolizer *s;
        pfr_sym_opts o = {.max_cache_bytes = 32u << 20,
                          .proc_root = root,
                          .debug_dir = run ? dir : nodir,
                          .no_dwarf = run < 2};
        assert_int_equal(pfr_symbolizer_new(&o, &s), 0);
        assert_int_equal(pfr_symbolizer_add_process(s, 630), 0);
        if (run == 0) {
            assert_int_equal(pfr_symbolize_user(s, 630, MAP_START + prog_fn + 8, fr, 4), 1);
            assert_non_null(strstr(fr[0].function, "prog2.stripped+0x"));
        } else {
            sym_prog(s, 630, fr); /* named target_fn */
            assert_true(run == 1 ? fr[0].line == 0 : fr[0].line > 0);
            assert_int_equal(stats(s).dwarf_loads, run == 2);
        }
        pfr_symbolizer_free(s);
    }
}

/* When room is needed, DWARF goes before symbols, and the frames already worked out keep their
 * lines without reading DWARF again. */
static void test_dwarf_dropped_first(void **state)
{
    (void)state;
    size_t dsize = prog_dwarf_size();
    fake_proc(500, prog);
    pfr_sym_frame fr[4];

    /* the program's footprint with its DWARF open */
    pfr_symbolizer *s = new_sym(64u << 20);
    assert_int_equal(pfr_symbolizer_add_process(s, 500), 0);
    sym_prog(s, 500, fr);
    int64_t line = fr[0].line;
    assert_true(line > 0);
    size_t foot = stats(s).cache_bytes;
    size_t dwarf = stats(s).dwarf_bytes;
    pfr_symbolizer_free(s);

    /* two big files, and what each takes alone */
    char big[2][400];
    size_t cost[2];
    for (int i = 0; i < 2; i++) {
        snprintf(big[i], sizeof(big[i]), "%s/big%d.so", tmpdir, i);
        gen_elf(big[i], i ? "bigb" : "biga", 77 + (unsigned)i, dwarf / 12);
        fake_proc(501 + i, big[i]);
        s = new_sym(64u << 20);
        assert_int_equal(pfr_symbolizer_add_process(s, 501 + i), 0);
        cost[i] = stats(s).cache_bytes;
        pfr_symbolizer_free(s);
    }

    /* a bound where the second fits only once the program's DWARF is gone */
    size_t max = foot + cost[0] + cost[1] - dwarf / 2;
    assert_true(dsize < max / 2 && dwarf < max / 2);
    s = new_sym(max);
    assert_int_equal(pfr_symbolizer_add_process(s, 500), 0);
    sym_prog(s, 500, fr);
    assert_int_equal(fr[0].line, line);
    pfr_sym_stats st = stats(s);
    assert_int_equal(st.dwarf_loads, 1);
    assert_int_equal(st.cache_bytes, foot);
    assert_int_equal(pfr_symbolizer_add_process(s, 501), 0);
    expect_fn(s, 501, "biga", 3); /* both used twice: the program and the first big file */
    assert_int_equal(pfr_symbolizer_add_process(s, 502), 0);
    st = stats(s);
    assert_true(st.cache_bytes <= max);
    assert_int_equal(st.dwarf_bytes, 0);
    assert_true(st.dwarf_evictions >= 1);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.files_parsed, 3);
    uint64_t parsed = st.files_parsed;

    /* the program's symbols stayed (no parse), its frame keeps its line (no DWARF read) */
    sym_prog(s, 500, fr);
    assert_int_equal(fr[0].line, line);
    assert_non_null(strstr(fr[0].file, "prog.c"));
    st = stats(s);
    assert_int_equal(st.files_parsed, parsed);
    assert_int_equal(st.dwarf_loads, 1);
    assert_int_equal(st.reparses, 0);
    pfr_symbolizer_free(s);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pfr-symcache-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(root, sizeof(root), "%s/proc", tmpdir);
    mkdir(root, 0755);
    build_prog();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hot_survives_cold_stream),
        cmocka_unit_test(test_reparse_counted),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_large_go_first),
        cmocka_unit_test(test_compact_accounting),
        cmocka_unit_test(test_file_changed_after_parse),
        cmocka_unit_test(test_dwarf_cap),
        cmocka_unit_test(test_dwarf_outgrown),
        cmocka_unit_test(test_dwarf_dropped_first),
        cmocka_unit_test(test_dwarf_no_room),
        cmocka_unit_test(test_dwarf_follows_bound),
        cmocka_unit_test(test_debug_file_symtab),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
