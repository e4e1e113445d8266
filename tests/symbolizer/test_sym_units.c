/* Unit tests of the symbolizer's parts: hash map, string pool, bounded line reader, maps and
 * kallsyms parsers (with hostile input), demangler, ELF reader (generated and truncated files),
 * and the public API over a fake /proc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "elfgen.h"
#include "sym_demangle.h"
#include "sym_dwarf.h"
#include "sym_elf.h"
#include "sym_gopcln.h"
#include "sym_hmap.h"
#include "sym_kallsyms.h"
#include "sym_lines.h"
#include "sym_maps.h"
#include "sym_strpool.h"
#include "symbolizer.h"
#include "testutil.h"

static char tmpdir[] = "/tmp/pfr-sym-unit-XXXXXX";

/* ---- hash map ---- */

static void test_hmap_random(void **state)
{
    (void)state;
    enum { N = 5000 };
    static uint64_t ref[N];
    static bool present[N];
    struct pfr_sym_hmap m = {0};
    uint64_t x = 12345;
    for (int step = 0; step < 200000; step++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int k = (int)((x >> 33) % N);
        if ((x >> 20) & 1) {
            assert_int_equal(pfr_sym_hmap_put(&m, (uint64_t)k, 7, x), 0);
            ref[k] = x;
            present[k] = true;
        } else {
            assert_int_equal(pfr_sym_hmap_del(&m, (uint64_t)k, 7), present[k]);
            present[k] = false;
        }
    }
    size_t count = 0;
    for (int k = 0; k < N; k++) {
        uint64_t v;
        bool got = pfr_sym_hmap_get(&m, (uint64_t)k, 7, &v);
        assert_int_equal(got, present[k]);
        if (got)
            assert_true(v == ref[k]);
        assert_false(pfr_sym_hmap_get(&m, (uint64_t)k, 8, NULL));
        count += present[k];
    }
    assert_int_equal(m.n, count);
    pfr_sym_hmap_free(&m);
}

static void test_strpool(void **state)
{
    (void)state;
    struct pfr_sym_strpool p = {0};
    assert_string_equal(pfr_sym_strpool_get(&p, 0), "");
    uint32_t a = pfr_sym_strpool_add(&p, "hello", 5);
    uint32_t b = pfr_sym_strpool_intern(&p, "world!", 5);
    uint32_t c = pfr_sym_strpool_intern(&p, "world", 5);
    assert_int_equal(b, c);
    assert_string_equal(pfr_sym_strpool_get(&p, a), "hello");
    assert_string_equal(pfr_sym_strpool_get(&p, b), "world");
    assert_int_equal(pfr_sym_strpool_add(&p, "", 0), 0);
    assert_string_equal(pfr_sym_strpool_get(&p, 1u << 30), ""); /* out of range reads as empty */
    pfr_sym_strpool_free(&p);
}

/* ---- bounded lines ---- */

static int count_cb(void *ctx, char *line, size_t len, size_t lineno)
{
    (void)line;
    (void)lineno;
    size_t *c = ctx;
    c[0]++;
    c[1] += len;
    return 0;
}

static void test_lines_limits(void **state)
{
    (void)state;
    struct pfr_sym_line_limits lim = {10, 3};
    size_t c[2] = {0};
    char err[128];
    assert_int_equal(pfr_sym_lines_from_mem("a\nbb\nccc", 8, &lim, count_cb, c, err, sizeof(err)),
                     0);
    assert_int_equal(c[0], 3);
    assert_int_equal(c[1], 6);
    assert_int_equal(pfr_sym_lines_from_mem("a\nb\nc\nd\n", 8, &lim, count_cb, c, err, sizeof(err)),
                     -E2BIG);
    assert_int_equal(
        pfr_sym_lines_from_mem("01234567890\n", 12, &lim, count_cb, c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "longer"));
    assert_int_equal(pfr_sym_lines_from_mem("ab\0c\n", 5, &lim, count_cb, c, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "NUL"));
}

static void test_lines_file_chunks(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof(path), "%s/lines", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    size_t total = 0;
    for (int i = 0; i < 50000; i++) /* lines of varied length straddle the 64 KiB reads */
        total += (size_t)fprintf(f, "%0*d\n", 1 + i % 37, i) - 1;
    fprintf(f, "last-line-without-newline");
    total += 25;
    fclose(f);
    struct pfr_sym_line_limits lim = {64, 1000000};
    size_t c[2] = {0};
    char err[128];
    assert_int_equal(pfr_sym_lines_from_file(path, &lim, count_cb, c, err, sizeof(err)), 0);
    assert_int_equal(c[0], 50001);
    assert_int_equal(c[1], total);
    /* one 200 KB line: rejected without reading it whole */
    f = fopen(path, "w");
    for (int i = 0; i < 200000; i++)
        fputc('x', f);
    fclose(f);
    assert_int_equal(pfr_sym_lines_from_file(path, &lim, count_cb, c, err, sizeof(err)), -EINVAL);
    assert_int_equal(pfr_sym_lines_from_file("/nonexistent/x", &lim, count_cb, c, err, sizeof(err)),
                     -ENOENT);
}

/* ---- maps ---- */

static const char good_maps[] =
    "55d1c2a00000-55d1c2a01000 r--p 00000000 fd:01 1234                       /usr/bin/prog\n"
    "55d1c2a01000-55d1c2a05000 r-xp 00001000 fd:01 1234                       /usr/bin/prog\n"
    "55d1c2c00000-55d1c2c21000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n"
    "7f1000000000-7f1000100000 r-xp 00002000 103:05 99  /tmp/lib with space.so (deleted)\n"
    "7ffd5a5f0000-7ffd5a5f2000 r-xp 00000000 00:00 0                          [vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";

static void test_maps_good(void **state)
{
    (void)state;
    struct pfr_sym_maps m = {0};
    char err[128];
    assert_int_equal(pfr_sym_maps_parse_mem(good_maps, sizeof(good_maps) - 1, &m, err, sizeof(err)),
                     0);
    assert_int_equal(m.n, 5); /* executable ones only */
    assert_true(m.v[0].start == 0x55d1c2a01000ULL && m.v[0].pgoff == 0x1000);
    assert_true(m.v[0].dev == makedev(0xfd, 1) && m.v[0].ino == 1234);
    assert_int_equal(m.v[0].kind, PFR_MAP_FILE);
    assert_string_equal(pfr_sym_map_path(&m, &m.v[0]), "/usr/bin/prog");
    assert_int_equal(m.v[1].kind, PFR_MAP_ANON);
    assert_int_equal(m.v[2].kind, PFR_MAP_FILE);
    assert_true(m.v[2].deleted);
    assert_true(m.v[2].dev == makedev(0x103, 5));
    assert_string_equal(pfr_sym_map_path(&m, &m.v[2]), "/tmp/lib with space.so");
    assert_int_equal(m.v[3].kind, PFR_MAP_VDSO);
    assert_int_equal(m.v[4].kind, PFR_MAP_SPECIAL);
    assert_ptr_equal(pfr_sym_maps_find(&m, 0x55d1c2a01000ULL), &m.v[0]);
    assert_ptr_equal(pfr_sym_maps_find(&m, 0x55d1c2a04fffULL), &m.v[0]);
    assert_null(pfr_sym_maps_find(&m, 0x55d1c2a05000ULL));
    assert_null(pfr_sym_maps_find(&m, 0x10));
    assert_ptr_equal(pfr_sym_maps_find(&m, 0xffffffffff600010ULL), &m.v[4]);
    pfr_sym_maps_free(&m);
}

static void expect_maps_error(const char *text, int want, const char *why)
{
    struct pfr_sym_maps m = {0};
    char err[128] = "";
    int rc = pfr_sym_maps_parse_mem(text, strlen(text), &m, err, sizeof(err));
    if (rc != want)
        fail_msg("%s: rc %d, want %d (%s)", why, rc, want, err);
    assert_true(err[0] != '\0');
    assert_null(m.v);
    assert_int_equal(m.n, 0);
}

static void test_maps_hostile(void **state)
{
    (void)state;
    expect_maps_error("garbage\n", -EINVAL, "garbage");
    expect_maps_error("1000-2000 r-xp 0 fd:01 5 /x\nzzzz\n", -EINVAL, "garbage after good");
    expect_maps_error("2000-1000 r-xp 0 fd:01 5 /x\n", -EINVAL, "reversed range");
    expect_maps_error("1000-2000 rwxq 0 fd:01 5 /x\n", -EINVAL, "bad perms");
    expect_maps_error("11112222333344445-2000 r-xp 0 fd:01 5 /x\n", -EINVAL, "17 hex digits");
    expect_maps_error("1000-2000 r-xp 0 fd:01 99999999999999999999999 /x\n", -EINVAL,
                      "inode overflow");
    expect_maps_error("1000-2000 r-xp 0 fd01 5 /x\n", -EINVAL, "bad device");
    expect_maps_error("1000-2000 r-xp 0 fd:01 5x /x\n", -EINVAL, "bad inode");
    expect_maps_error("3000-4000 r-xp 0 fd:01 5 /x\n1000-2000 r-xp 0 fd:01 5 /x\n", -EINVAL,
                      "out of order");
    char *longl = malloc(20000);
    int n = snprintf(longl, 20000, "1000-2000 r-xp 0 fd:01 5 /");
    memset(longl + n, 'a', 19000);
    longl[n + 19000] = '\0';
    expect_maps_error(longl, -EINVAL, "long line");
    free(longl);
    /* more executable mappings than a process can have */
    size_t cap = (size_t)(PFR_MAPS_MAX_EXEC + 2) * 40;
    char *many = malloc(cap);
    size_t len = 0;
    for (uint64_t i = 0; i <= PFR_MAPS_MAX_EXEC; i++)
        len += (size_t)snprintf(many + len, cap - len, "%" PRIx64 "-%" PRIx64 " r-xp 0 0:0 0\n",
                                0x10000 + i * 0x1000, 0x10000 + i * 0x1000 + 0x1000);
    expect_maps_error(many, -E2BIG, "too many mappings");
    free(many);
}

/* ---- kallsyms ---- */

static const char ksyms_text[] = "ffffffff81000000 T _text\n"
                                 "ffffffff81000000 T startup_64\n"
                                 "ffffffff81000100 t helper_fn\n"
                                 "ffffffff81000200 D some_data\n"
                                 "ffffffff81000300 W weak_fn\n"
                                 "ffffffff81001000 T schedule\n"
                                 "ffffffffc0001000 t mod_fn\t[mymod]\n"
                                 "ffffffffc0001080 t mod_fn2\t[mymod]\n";

/* PROCMAP_QUERY and the maps text give the same executable mappings (but [vsyscall], which
 * the ioctl does not list) for this process, with an anonymous executable mapping and a
 * deleted file mapped executable added. */
static void test_maps_query_matches_text(void **state)
{
    (void)state;
    void *anon = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(anon != MAP_FAILED);
    char tmpl[] = "/tmp/pfr-maps-query-XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 3 * 4096), 0);
    void *file = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 4096);
    assert_true(file != MAP_FAILED);
    unlink(tmpl);
    close(fd);

    struct pfr_sym_maps q = {0}, t = {0};
    char err[256] = "";
    int rc = pfr_sym_maps_query("/proc/self/maps", &q, err, sizeof(err));
    if (rc == -ENOTTY) {
        munmap(anon, 8192);
        munmap(file, 4096);
        skip(); /* a kernel before 6.11 */
    }
    assert_int_equal(rc, 0);
    assert_int_equal(pfr_sym_maps_read("/proc/self/maps", &t, err, sizeof(err)), 0);
    size_t j = 0, seen_anon = 0, seen_deleted = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (strcmp(pfr_sym_map_path(&t, &t.v[i]), "[vsyscall]") == 0)
            continue;
        assert_true(j < q.n);
        const struct pfr_sym_map *a = &t.v[i], *b = &q.v[j++];
        assert_true(a->start == b->start && a->end == b->end && a->pgoff == b->pgoff);
        assert_true(a->dev == b->dev && a->ino == b->ino);
        assert_int_equal(a->kind, b->kind);
        assert_int_equal(a->deleted, b->deleted);
        assert_string_equal(pfr_sym_map_path(&t, a), pfr_sym_map_path(&q, b));
        seen_anon += b->start == (uint64_t)(uintptr_t)anon && b->kind == PFR_MAP_ANON;
        seen_deleted += b->start == (uint64_t)(uintptr_t)file && b->deleted && b->pgoff == 4096;
    }
    assert_int_equal(j, q.n);
    assert_int_equal(seen_anon, 1);
    assert_int_equal(seen_deleted, 1);
    pfr_sym_maps_free(&q);
    pfr_sym_maps_free(&t);

    /* a process that is gone */
    assert_int_equal(pfr_sym_maps_query("/proc/999999999/maps", &q, err, sizeof(err)), -ENOENT);
    assert_int_equal(q.n, 0);
    munmap(anon, 8192);
    munmap(file, 4096);
}

static void test_kallsyms(void **state)
{
    (void)state;
    struct pfr_sym_kallsyms k = {0};
    char err[128];
    assert_int_equal(
        pfr_sym_kallsyms_parse_mem(ksyms_text, strlen(ksyms_text), &k, err, sizeof(err)), 0);
    assert_false(k.restricted);
    const struct pfr_sym_ksym *s = pfr_sym_kallsyms_find(&k, 0xffffffff81000010ULL);
    assert_non_null(s);
    assert_string_equal(pfr_sym_strpool_get(&k.names, s->name), "startup_64");
    s = pfr_sym_kallsyms_find(&k, 0xffffffff81000250ULL); /* data symbols do not end helper_fn */
    assert_string_equal(pfr_sym_strpool_get(&k.names, s->name), "helper_fn");
    s = pfr_sym_kallsyms_find(&k, 0xffffffff81000301ULL);
    assert_string_equal(pfr_sym_strpool_get(&k.names, s->name), "weak_fn");
    s = pfr_sym_kallsyms_find(&k, 0xffffffffc0001090ULL);
    assert_string_equal(pfr_sym_strpool_get(&k.names, s->name), "mod_fn2");
    assert_string_equal(pfr_sym_strpool_get(&k.names, s->module), "[mymod]");
    assert_int_equal(
        pfr_sym_strpool_get(&k.names, pfr_sym_kallsyms_find(&k, 0xffffffff81001001ULL)->module)[0],
        '\0');
    assert_null(pfr_sym_kallsyms_find(&k, 0xffffffff80000000ULL));
    assert_null(pfr_sym_kallsyms_find(&k, 0xffffffff81001000ULL + PFR_KSYM_MAX_SPAN));
    pfr_sym_kallsyms_free(&k);

    const char *zeros = "0000000000000000 T _text\n0000000000000000 T schedule\n";
    assert_int_equal(pfr_sym_kallsyms_parse_mem(zeros, strlen(zeros), &k, err, sizeof(err)), 0);
    assert_true(k.restricted);
    assert_null(pfr_sym_kallsyms_find(&k, 0xffffffff81000010ULL));
    pfr_sym_kallsyms_free(&k);

    const char *bad[] = {"zz T x\n", "ffffffff81000000 T\n", "ffffffff81000000 T x [mod\n",
                         "ffffffff81000000Tx\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_not_equal(
            pfr_sym_kallsyms_parse_mem(bad[i], strlen(bad[i]), &k, err, sizeof(err)), 0);
        assert_null(k.v);
    }
}

/* The index (a block's first address, then the block) finds what a search of every symbol
 * finds, for tables of a block and a symbol either side of a block's size, at every symbol's
 * address, between two symbols, and below the first. */
static void test_kallsyms_index(void **state)
{
    (void)state;
    const size_t sizes[] = {
        1,    PFR_KSYM_BLOCK - 1, PFR_KSYM_BLOCK, PFR_KSYM_BLOCK + 1, 3 * PFR_KSYM_BLOCK + 7,
        70000 /* over half a huge page */};
    for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
        size_t n = sizes[t];
        char *text = malloc(n * 40);
        assert_non_null(text);
        size_t len = 0;
        for (size_t i = 0; i < n; i++) /* gaps of 16 to 79 bytes, out of order */
            len += (size_t)sprintf(text + len, "%016llx T f%zu\n",
                                   0xffffffff81000000ULL + (n - 1 - i) * 80 + ((n - 1 - i) % 64),
                                   n - 1 - i);
        struct pfr_sym_kallsyms k = {0};
        char err[128];
        assert_int_equal(pfr_sym_kallsyms_parse_mem(text, len, &k, err, sizeof(err)), 0);
        assert_int_equal(k.n, n);
        assert_int_equal(k.ntop, (n + PFR_KSYM_BLOCK - 1) / PFR_KSYM_BLOCK);
        assert_null(pfr_sym_kallsyms_find(&k, 0xffffffff81000000ULL - 1));
        for (size_t i = 0; i < n; i++) {
            char want[32];
            snprintf(want, sizeof(want), "f%zu", i);
            uint64_t at = 0xffffffff81000000ULL + i * 80 + (i % 64);
            const uint64_t probes[] = {at, at + 15};
            for (size_t j = 0; j < 2; j++) {
                const struct pfr_sym_ksym *s = pfr_sym_kallsyms_find(&k, probes[j]);
                assert_non_null(s);
                assert_string_equal(pfr_sym_strpool_get(&k.names, s->name), want);
            }
        }
        pfr_sym_kallsyms_free(&k);
        free(text);
    }
}

/* ---- demangler ---- */

static void test_demangle(void **state)
{
    (void)state;
    char *d = pfr_sym_demangle("_ZN2ns6Widget4makeEi");
    assert_string_equal(d, "ns::Widget::make(int)");
    free(d);
    d = pfr_sym_demangle("_ZN4core3fmt5write17h0123456789abcdefE"); /* Rust legacy */
    assert_string_equal(d, "core::fmt::write");
    free(d);
    assert_null(pfr_sym_demangle("main.main"));
    assert_null(pfr_sym_demangle("net/http.(*conn).serve"));
    assert_null(pfr_sym_demangle("leaf_function"));
    assert_null(pfr_sym_demangle("_Z"));
    assert_null(pfr_sym_demangle(NULL));
}

/* ---- ELF reader ---- */

static Elf *elf_of(uint8_t *buf, size_t len)
{
    elf_version(EV_CURRENT);
    return elf_memory((char *)buf, len);
}

static const char *sym_at(const struct pfr_sym_elf_syms *s, uint64_t a)
{
    const struct pfr_sym_elf_sym *x = pfr_sym_elf_find(s, a);
    return x ? pfr_sym_strpool_get(&s->names, x->name) : NULL;
}

static void check_generated(enum elfgen_variant v)
{
    uint8_t buf[ELFGEN_MAX_SIZE];
    size_t len = pfr_sym_elfgen_build(buf, v);
    Elf *e = elf_of(buf, len);
    struct pfr_sym_elf_info info;
    char err[128];
    assert_int_equal(pfr_sym_elf_read_info(e, &info, err, sizeof(err)), 0);
    assert_int_equal(info.id_kind, PFR_ELF_ID_GNU);
    assert_int_equal(info.id_len, ELFGEN_ID_LEN);
    assert_memory_equal(info.id, ELFGEN_BUILD_ID, ELFGEN_ID_LEN);
    assert_int_equal(info.has_symtab, v == ELFGEN_SYMTAB);
    assert_false(info.has_debug);
    uint64_t va;
    assert_true(pfr_sym_elf_off_to_vaddr(&info, 0x150, &va));
    assert_true(va == 0x150);
    struct pfr_sym_elf_syms syms = {0};
    assert_int_equal(pfr_sym_elf_read_syms(e, &syms, 1 << 20, NULL, err, sizeof(err)), 0);
    if (v == ELFGEN_NOSECTIONS) {
        assert_int_equal(syms.n, 0);
    } else {
        assert_int_equal(syms.n, 3);
        assert_string_equal(sym_at(&syms, 0x100), "func_a"); /* global wins over local alias */
        assert_string_equal(sym_at(&syms, 0x11f), "func_a");
        assert_string_equal(sym_at(&syms, 0x120), "func_b");
        assert_string_equal(sym_at(&syms, 0x17f), "func_b"); /* size 0: up to the next */
        assert_string_equal(sym_at(&syms, 0x1bf), "func_c");
        assert_null(sym_at(&syms, 0x1c0)); /* data_x is not a function */
        assert_null(sym_at(&syms, 0xff));
    }
    pfr_sym_elf_syms_free(&syms);
    elf_end(e);
}

static void test_elf_generated(void **state)
{
    (void)state;
    for (int v = 0; v < ELFGEN_COUNT; v++)
        check_generated((enum elfgen_variant)v);
}

static void read_all(Elf *e)
{
    struct pfr_sym_elf_info info;
    struct pfr_sym_elf_syms syms = {0};
    char err[128];
    if (pfr_sym_elf_read_info(e, &info, err, sizeof(err)) == 0 &&
        pfr_sym_elf_read_syms(e, &syms, 64 << 20, NULL, err, sizeof(err)) == 0) {
        for (size_t i = 0; i < syms.n; i += 1 + syms.n / 64)
            assert_non_null(pfr_sym_elf_find(&syms, syms.v[i].addr));
    }
    pfr_sym_elf_syms_free(&syms);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    assert_true(fd >= 0 && fstat(fd, &st) == 0);
    uint8_t *b = malloc((size_t)st.st_size);
    assert_true(read(fd, b, (size_t)st.st_size) == st.st_size);
    close(fd);
    *len = (size_t)st.st_size;
    return b;
}

/* Truncated and bit-flipped copies of a real binary (this test program, built by us). */
static void test_elf_truncated(void **state)
{
    (void)state;
    size_t len;
    uint8_t *whole = slurp("/proc/self/exe", &len);
    size_t cuts[80];
    size_t nc = 0;
    for (size_t i = 0; i < 64; i++)
        cuts[nc++] = len * i / 64;
    size_t edges[] = {1, 16, 63, 64, 65, 120, 200, 600, len - 1, len - 64};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        cuts[nc++] = edges[i] < len ? edges[i] : 0;
    for (size_t i = 0; i < nc; i++) {
        uint8_t *copy = malloc(cuts[i] ? cuts[i] : 1);
        memcpy(copy, whole, cuts[i]);
        Elf *e = elf_of(copy, cuts[i]);
        if (e)
            read_all(e);
        elf_end(e);
        free(copy);
    }
    /* flipped bytes in the headers and tables */
    uint64_t x = 99;
    uint8_t *copy = malloc(len);
    for (int round = 0; round < 200; round++) {
        memcpy(copy, whole, len);
        for (int k = 0; k < 8; k++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t at = (x >> 16) % (round % 2 ? len : 4096);
            copy[at] ^= (uint8_t)(x >> 56);
        }
        Elf *e = elf_of(copy, len);
        if (e)
            read_all(e);
        elf_end(e);
    }
    free(copy);
    /* and through the DWARF reader: truncated files on disk */
    char path[256];
    snprintf(path, sizeof(path), "%s/trunc", tmpdir);
    for (size_t i = 0; i < 64; i += 4) {
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        assert_true(write(fd, whole, cuts[i]) == (ssize_t)cuts[i]);
        struct pfr_sym_dwarf *d = NULL;
        char err[128];
        if (pfr_sym_dwarf_open(fd, 256 << 20, NULL, &d, err, sizeof(err)) == 0) {
            struct pfr_sym_dwarf_frame fr[4];
            pfr_sym_dwarf_lookup(d, (uint64_t)(uintptr_t)test_elf_truncated, fr, 4);
            pfr_sym_dwarf_close(d);
        }
        close(fd);
    }
    free(whole);
}

/* ---- names left in the file (the cache's representation) ---- */

static void write_all(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_true(write(fd, buf, len) == (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

/* Parses path through a descriptor (names stay in the file); returns the descriptor. */
static int parse_fd(const char *path, struct pfr_sym_elf_syms *syms)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(e);
    char err[128];
    memset(syms, 0, sizeof(*syms));
    assert_int_equal(pfr_sym_elf_read_syms_fd(e, fd, syms, 1 << 20, NULL, err, sizeof(err)), 0);
    elf_end(e);
    return fd;
}

static const char *name_at(struct pfr_sym_elf_syms *s, int fd, uint64_t a, char *buf, size_t cap)
{
    const struct pfr_sym_elf_sym *x = pfr_sym_elf_find(s, a);
    if (!x)
        return NULL;
    int n = pfr_sym_elf_read_name(s, fd, x, buf, cap);
    return n >= 0 ? buf : n == -ESTALE ? "<stale>" : "<error>";
}

/* 16 bytes a symbol, no name copied while parsing; the same symbols and names as a table read
 * from memory, for .symtab and .dynsym. */
static void test_elf_names_in_file(void **state)
{
    (void)state;
    assert_int_equal(sizeof(struct pfr_sym_elf_sym), 16);
    for (int v = ELFGEN_SYMTAB; v <= ELFGEN_DYNSYM; v++) {
        uint8_t buf[ELFGEN_MAX_SIZE];
        size_t len = pfr_sym_elfgen_build(buf, (enum elfgen_variant)v);
        char path[300], name[64];
        snprintf(path, sizeof(path), "%s/names%d.so", tmpdir, v);
        write_all(path, buf, len);
        struct pfr_sym_elf_syms lazy, copied = {0};
        int fd = parse_fd(path, &lazy);
        assert_true(lazy.lazy);
        assert_int_equal(lazy.n, 3);
        assert_int_equal(pfr_sym_strpool_bytes(&lazy.names), 0); /* nothing copied */
        assert_int_equal(pfr_sym_elf_syms_bytes(&lazy), 3 * 16);
        char err[128];
        Elf *e = elf_of(buf, len);
        assert_int_equal(pfr_sym_elf_read_syms(e, &copied, 1 << 20, NULL, err, sizeof(err)), 0);
        assert_int_equal(copied.n, lazy.n);
        for (size_t i = 0; i < lazy.n; i++) {
            assert_true(lazy.v[i].addr == copied.v[i].addr);
            assert_int_equal(lazy.v[i].len, copied.v[i].len);
            assert_int_equal(pfr_sym_elf_read_name(&lazy, fd, &lazy.v[i], name, sizeof(name)),
                             (int)strlen(pfr_sym_strpool_get(&copied.names, copied.v[i].name)));
            assert_string_equal(name, pfr_sym_strpool_get(&copied.names, copied.v[i].name));
        }
        assert_string_equal(name_at(&lazy, fd, 0x11f, name, sizeof(name)), "func_a");
        assert_string_equal(name_at(&lazy, fd, 0x17f, name, sizeof(name)), "func_b");
        assert_null(name_at(&lazy, fd, 0x1c0, name, sizeof(name)));
        /* a buffer too small is refused, not overrun */
        assert_int_equal(pfr_sym_elf_read_name(&lazy, fd, &lazy.v[0], name, 4), -ENAMETOOLONG);
        assert_false(lazy.stale);
        pfr_sym_elf_syms_free(&copied);
        pfr_sym_elf_syms_free(&lazy);
        elf_end(e);
        close(fd);
    }
}

/* The file changes on disk after it was parsed: cut short or rewritten in place, every later
 * name read fails (-ESTALE), none reads past the end or returns other bytes; replaced by a
 * rename, the descriptor still reads the file as parsed. */
static void test_elf_names_file_changed(void **state)
{
    (void)state;
    uint8_t buf[ELFGEN_MAX_SIZE];
    size_t len = pfr_sym_elfgen_build(buf, ELFGEN_SYMTAB);
    char path[300], other[300], name[64];
    snprintf(path, sizeof(path), "%s/changed.so", tmpdir);
    snprintf(other, sizeof(other), "%s/changed.so.new", tmpdir);

    /* truncated */
    write_all(path, buf, len);
    struct pfr_sym_elf_syms syms;
    int fd = parse_fd(path, &syms);
    assert_int_equal(truncate(path, (off_t)len / 2), 0);
    for (size_t i = 0; i < syms.n; i++)
        assert_int_equal(pfr_sym_elf_read_name(&syms, fd, &syms.v[i], name, sizeof(name)), -ESTALE);
    assert_true(syms.stale);
    assert_string_equal(name_at(&syms, fd, 0x100, name, sizeof(name)), "<stale>");
    assert_int_equal(truncate(path, 0), 0); /* even emptied */
    assert_int_equal(pfr_sym_elf_read_name(&syms, fd, &syms.v[0], name, sizeof(name)), -ESTALE);
    pfr_sym_elf_syms_free(&syms);
    close(fd);

    /* rewritten in place, same size: the names' bytes changed */
    write_all(path, buf, len);
    fd = parse_fd(path, &syms);
    int w = open(path, O_WRONLY);
    assert_true(w >= 0);
    uint8_t *p = memmem(buf, len, "func_a", 6);
    assert_non_null(p);
    assert_true(pwrite(w, "FUNC_A", 6, p - buf) == 6);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 678}}; /* a new mtime, whatever the clock */
    assert_int_equal(futimens(w, ts), 0);
    close(w);
    assert_string_equal(name_at(&syms, fd, 0x100, name, sizeof(name)), "<stale>");
    pfr_sym_elf_syms_free(&syms);
    close(fd);

    /* replaced by a rename (what package managers and linkers do): the old inode stays */
    write_all(path, buf, len);
    fd = parse_fd(path, &syms);
    uint8_t buf2[ELFGEN_MAX_SIZE];
    memcpy(buf2, buf, len);
    memcpy(buf2 + (p - buf), "FUNC_A", 6);
    write_all(other, buf2, len);
    assert_int_equal(rename(other, path), 0);
    assert_string_equal(name_at(&syms, fd, 0x100, name, sizeof(name)), "func_a");
    assert_false(syms.stale);
    pfr_sym_elf_syms_free(&syms);
    close(fd);
}

/* ---- Go .gopclntab ---- */

static void test_gopcln(void **state)
{
    (void)state;
    uint8_t buf[GOPCLNGEN_MAX_SIZE];
    size_t len = pfr_gopclngen_build(buf);
    struct pfr_sym_gopcln *g;
    char err[128];
    assert_int_equal(pfr_sym_gopcln_open_mem(buf, len, 0, &g, err, sizeof(err)), 0);
    struct pfr_sym_gopcln_frame f;
    const uint64_t t = GOPCLNGEN_TEXT;
    assert_int_equal(pfr_sym_gopcln_lookup(g, t, &f), 1);
    assert_string_equal(f.name, "main.f");
    assert_string_equal(f.file, "/src/x.go");
    assert_int_equal(f.line, 10);
    assert_int_equal(pfr_sym_gopcln_lookup(g, t + 0x1f, &f), 1);
    assert_int_equal(f.line, 11);
    assert_int_equal(pfr_sym_gopcln_lookup(g, t + 0x20, &f), 1);
    assert_string_equal(f.name, "main.g");
    assert_null(f.file); /* inside an inlined call: no line rather than the callee's */
    assert_int_equal(f.line, 0);
    assert_int_equal(pfr_sym_gopcln_lookup(g, t + 0x28, &f), 1);
    assert_int_equal(f.line, 20);
    assert_int_equal(pfr_sym_gopcln_lookup(g, t + 0x40, &f), 0);
    assert_int_equal(pfr_sym_gopcln_lookup(g, t - 1, &f), 0);
    pfr_sym_gopcln_free(g);
    /* every truncation and many corruptions: errors or fewer answers, never a bad read */
    for (size_t cut = 0; cut < len; cut++) {
        if (pfr_sym_gopcln_open_mem(buf, cut, t, &g, err, sizeof(err)) == 0) {
            for (uint64_t a = t - 4; a < t + 0x44; a++)
                pfr_sym_gopcln_lookup(g, a, &f);
            pfr_sym_gopcln_free(g);
        }
    }
    uint64_t x = 7;
    for (int round = 0; round < 2000; round++) {
        uint8_t copy[GOPCLNGEN_MAX_SIZE];
        memcpy(copy, buf, len);
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        copy[(x >> 20) % len] ^= (uint8_t)(x >> 56);
        if (pfr_sym_gopcln_open_mem(copy, len, t, &g, err, sizeof(err)) == 0) {
            for (uint64_t a = t - 4; a < t + 0x44; a += 3)
                pfr_sym_gopcln_lookup(g, a, &f);
            pfr_sym_gopcln_free(g);
        }
    }
    buf[0] = 0xfb; /* Go 1.2-1.15 */
    assert_int_equal(pfr_sym_gopcln_open_mem(buf, len, t, &g, err, sizeof(err)), -ENOTSUP);
}

/* ---- the public API over a fake /proc ---- */

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_fake_proc(void **state)
{
    (void)state;
    char root[256], pdir[300];
    snprintf(root, sizeof(root), "%s/proc", tmpdir);
    snprintf(pdir, sizeof(pdir), "%s/4242", root);
    mkdir(root, 0755);
    mkdir(pdir, 0755);
    write_file(pdir, "maps",
               "00400000-00401000 r-xp 00000000 fd:01 777 /opt/nowhere/app\n"
               "7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n");
    write_file(root, "kallsyms", ksyms_text);
    pfr_symbolizer *s;
    pfr_sym_opts o = {.proc_root = root};
    assert_int_equal(pfr_symbolizer_new(&o, &s), 0);
    assert_int_equal(pfr_symbolizer_add_process(s, 4242), 0);
    assert_int_equal(pfr_symbolizer_add_process(s, 4343), -ESRCH);
    assert_int_equal(pfr_symbolizer_add_process(s, 0), -EINVAL);
    pfr_sym_frame fr[4];
    /* the file cannot be opened (and a same-named host file would not match dev:inode) */
    assert_int_equal(pfr_symbolize_user(s, 4242, 0x400123, fr, 4), 1);
    assert_string_equal(fr[0].function, "app+0x123");
    assert_string_equal(fr[0].module, "/opt/nowhere/app");
    assert_true(fr[0].offset == 0x123);
    assert_int_equal(pfr_symbolize_user(s, 4242, 0x7f0000000010ULL, fr, 4), 1);
    assert_string_equal(fr[0].function, "[unknown]");
    assert_int_equal(pfr_symbolize_user(s, 4242, 0x10, fr, 4), 1);
    assert_string_equal(fr[0].function, "[unknown]");
    assert_int_equal(pfr_symbolize_user(s, 999, 0x400123, fr, 4), 1);
    assert_string_equal(fr[0].function, "[unknown]");
    assert_int_equal(pfr_symbolize_user(s, 4242, 0x400123, fr, 0), -EINVAL);
    /* kernel through the fake kallsyms */
    assert_int_equal(pfr_symbolize_kernel(s, 0xffffffff81001010ULL, fr), 1);
    assert_string_equal(fr[0].function, "schedule");
    assert_string_equal(fr[0].module, "[kernel]");
    assert_int_equal(pfr_symbolize_kernel(s, 0xffffffffc0001001ULL, fr), 1);
    assert_string_equal(fr[0].function, "mod_fn");
    assert_string_equal(fr[0].module, "[mymod]");
    /* kptr_restrict: reload sees only zeros, frames become unresolved */
    write_file(root, "kallsyms", "0000000000000000 T _text\n0000000000000000 T schedule\n");
    assert_int_equal(pfr_symbolizer_reload_kernel(s), 0);
    assert_int_equal(pfr_symbolize_kernel(s, 0xffffffff81001010ULL, fr), 1);
    assert_string_equal(fr[0].function, "[unknown]");
    assert_string_equal(fr[0].module, "[kernel]");
    /* hostile maps: rejected with a reason, the old snapshot stays */
    write_file(pdir, "maps", "00400000-00401000 r-xp 00000000 fd:01 777 /opt/x\n\x01\x02garbage");
    assert_int_equal(pfr_symbolizer_add_process(s, 4242), -EINVAL);
    assert_non_null(strstr(pfr_symbolizer_last_error(s), "line 2"));
    assert_int_equal(pfr_symbolize_user(s, 4242, 0x400123, fr, 4), 1);
    assert_string_equal(fr[0].function, "app+0x123");
    pfr_sym_stats st;
    pfr_symbolizer_stats(s, &st);
    assert_int_equal(st.processes, 1);
    assert_true(st.unresolved_frames >= 5);
    assert_true(st.errors >= 1);
    pfr_symbolizer_forget_process(s, 4242);
    pfr_symbolizer_stats(s, &st);
    assert_int_equal(st.processes, 0);
    assert_int_equal(pfr_symbolize_user(s, 4242, 0x400123, fr, 4), 1);
    assert_string_equal(fr[0].function, "[unknown]");
    pfr_symbolizer_free(s);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return pfr_tu_sh("rm -rf '%s'", tmpdir) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmap_random),
        cmocka_unit_test(test_strpool),
        cmocka_unit_test(test_lines_limits),
        cmocka_unit_test(test_lines_file_chunks),
        cmocka_unit_test(test_maps_good),
        cmocka_unit_test(test_maps_hostile),
        cmocka_unit_test(test_maps_query_matches_text),
        cmocka_unit_test(test_kallsyms),
        cmocka_unit_test(test_kallsyms_index),
        cmocka_unit_test(test_demangle),
        cmocka_unit_test(test_elf_generated),
        cmocka_unit_test(test_elf_truncated),
        cmocka_unit_test(test_elf_names_in_file),
        cmocka_unit_test(test_elf_names_file_changed),
        cmocka_unit_test(test_gopcln),
        cmocka_unit_test(test_fake_proc),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
