/* Unit tests of pfr_goheap over fake process memory, synthetic ELF files and a fake /proc. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <elf.h>

#include "elfgen.h"
#include "fakemem.h"
#include "goheap_delta.h"
#include "goheap_elf.h"
#include "goheap_proc.h"
#include "goheap_walk.h"
#include "pfr_goheap.h"

/* A list of n buckets of 3 PCs each, bucket i allocating i+1 objects of 64 bytes. */
static void make_list(fakemem *f, size_t n)
{
    assert_int_equal(pfr_fakemem_init(f, 0x7f0000010000ull, 64 + n * 256 + 4096), 0);
    for (size_t i = 0; i < n; i++) {
        uint64_t pcs[3] = {0x401000 + i, 0x402000, 0x403000};
        assert_true(pfr_fakemem_bucket(f, 64, pcs, 3, i + 1, 0) != 0);
    }
}

/* Walks with a generous deadline unless the test sets one: a loaded machine under ASan is slow. */
static int walk(fakemem *f, pfr_goheap_walk *w, const pfr_goheap_walk_limits *lim)
{
    pfr_goheap_walk_limits l = lim ? *lim : (pfr_goheap_walk_limits){0};
    if (!l.max_ns)
        l.max_ns = 30ll * 1000000000;
    return pfr_goheap_walk_run(w, &f->mem, f->mbuckets, &l);
}

/* ---- walker ---- */

static void test_walk_basic(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 3);
    pfr_goheap_walk w = {0};
    assert_int_equal(walk(&f, &w, NULL), 0);
    assert_int_equal(w.nbuckets, 3);
    /* newest first: the last appended (i = 2) leads */
    assert_int_equal(w.buckets[0].allocs, 3);
    assert_int_equal(w.buckets[2].allocs, 1);
    assert_int_equal(w.buckets[0].alloc_bytes, 3 * 64);
    assert_int_equal(w.buckets[0].size, 64);
    assert_int_equal(w.buckets[0].nstk, 3);
    assert_int_equal(w.pcs[w.buckets[0].stk], 0x401002);
    assert_int_equal(w.pcs[w.buckets[2].stk + 2], 0x403000);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

static void test_walk_empty(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 0);
    pfr_goheap_walk w = {0};
    assert_int_equal(walk(&f, &w, NULL), 0);
    assert_int_equal(w.nbuckets, 0);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

static void test_walk_loop(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 5);
    /* the oldest bucket points back at the head */
    uint64_t a = pfr_fakemem_get64(&f, f.mbuckets), last = a;
    while (pfr_fakemem_get64(&f, last + FAKE_ALLNEXT))
        last = pfr_fakemem_get64(&f, last + FAKE_ALLNEXT);
    pfr_fakemem_put64(&f, last + FAKE_ALLNEXT, a);
    pfr_goheap_walk w = {0};
    assert_int_equal(walk(&f, &w, NULL), -ELOOP);
    assert_int_equal(w.nbuckets, 5);
    assert_non_null(strstr(w.err, "loop"));
    /* a bucket pointing to itself */
    pfr_fakemem_put64(&f, a + FAKE_ALLNEXT, a);
    assert_int_equal(walk(&f, &w, NULL), -ELOOP);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

static void test_walk_absurd_nstk(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 4);
    uint64_t a = pfr_fakemem_get64(&f, f.mbuckets);
    uint64_t second = pfr_fakemem_get64(&f, a + FAKE_ALLNEXT);
    pfr_fakemem_put64(&f, second + FAKE_NSTK, 1ull << 40);
    pfr_goheap_walk w = {0};
    time_t t0 = time(NULL);
    assert_int_equal(walk(&f, &w, NULL), -EBADMSG);
    assert_true(time(NULL) - t0 < 2);
    assert_int_equal(w.nbuckets, 1);
    assert_non_null(strstr(w.err, "stack depth"));
    /* deeper than the configured bound, though plausible */
    pfr_fakemem_put64(&f, second + FAKE_NSTK, 3);
    pfr_goheap_walk_limits lim = {.max_nstk = 2};
    assert_int_equal(walk(&f, &w, &lim), -EBADMSG);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

static void test_walk_garbage_pointers(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 3);
    uint64_t a = pfr_fakemem_get64(&f, f.mbuckets);
    pfr_goheap_walk w = {0};
    static const struct {
        uint64_t ptr;
        int err;
    } cases[] = {
        {0x00007e0000000000ull, -EFAULT},  /* unmapped */
        {0x7f0000010003ull, -EBADMSG},     /* misaligned */
        {0xffff888000000000ull, -EBADMSG}, /* kernel space */
        {0x7f0000010000ull + 8, -EBADMSG}, /* mapped but the rate variable: typ is 0 */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pfr_fakemem_put64(&f, a + FAKE_ALLNEXT, cases[i].ptr);
        assert_int_equal(walk(&f, &w, NULL), cases[i].err);
        assert_int_equal(w.nbuckets, 1);
    }
    /* the head pointer itself is garbage */
    pfr_fakemem_put64(&f, f.mbuckets, 0x1000);
    assert_int_equal(walk(&f, &w, NULL), -EFAULT);
    /* a bucket running off the end of the mapping */
    pfr_fakemem_put64(&f, f.mbuckets, f.base + f.cap - 24);
    assert_int_equal(walk(&f, &w, NULL), -EFAULT);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

static void test_walk_wrong_type(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 2);
    uint64_t a = pfr_fakemem_get64(&f, f.mbuckets);
    pfr_fakemem_put64(&f, a + FAKE_TYP, 2); /* a block-profile bucket is not ours */
    pfr_goheap_walk w = {0};
    assert_int_equal(walk(&f, &w, NULL), -EBADMSG);
    assert_int_equal(w.nbuckets, 0);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

static void test_walk_bounds(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 200);
    pfr_goheap_walk w = {0};
    pfr_goheap_walk_limits lim = {.max_buckets = 100};
    assert_int_equal(walk(&f, &w, &lim), -E2BIG);
    assert_int_equal(w.nbuckets, 100);
    lim = (pfr_goheap_walk_limits){.max_pcs = 30};
    assert_int_equal(walk(&f, &w, &lim), -E2BIG);
    assert_int_equal(w.nbuckets, 10);
    lim = (pfr_goheap_walk_limits){.max_ns = -1}; /* deadline already passed */
    assert_int_equal(walk(&f, &w, &lim), -ETIMEDOUT);
    assert_true(w.nbuckets <= 64);
    assert_int_equal(walk(&f, &w, NULL), 0);
    assert_int_equal(w.nbuckets, 200);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

static void test_walk_few_reads(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 10000);
    pfr_goheap_walk w = {0};
    f.bm.reads = 0;
    assert_int_equal(walk(&f, &w, NULL), 0);
    assert_int_equal(w.nbuckets, 10000);
    /* ~2.1 MB of buckets in 64 KiB blocks: tens of reads, not thousands */
    size_t blocks = f.len / PFR_GOHEAP_WALK_BLOCK + 1;
    assert_true(f.bm.reads <= blocks + 4);
    assert_int_equal(w.reads, f.bm.reads);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

static void test_walk_mapping_mid_block(void **state)
{
    (void)state;
    /* the mapping starts 12 KiB into a 64 KiB block: the block's start is unreadable */
    fakemem f;
    assert_int_equal(pfr_fakemem_init(&f, 0x7f0000013000ull, 8192), 0);
    uint64_t pcs[2] = {1, 2};
    for (int i = 0; i < 10; i++)
        pfr_fakemem_bucket(&f, 32, pcs, 2, 1, 0);
    pfr_goheap_walk w = {0};
    assert_int_equal(walk(&f, &w, NULL), 0);
    assert_int_equal(w.nbuckets, 10);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

/* A reader that fails with ESRCH from the nth call on: the process exited mid-walk. */
typedef struct dying {
    pfr_goheap_mem inner;
    int calls, die_at;
} dying;

static ssize_t dying_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    dying *d = ctx;
    if (++d->calls >= d->die_at)
        return -ESRCH;
    return d->inner.read(d->inner.ctx, addr, buf, len);
}

static void test_walk_process_exits(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 2000); /* ~500 KB: several blocks */
    dying d = {f.mem, 0, 3};
    pfr_goheap_mem m = {&d, dying_read, NULL};
    pfr_goheap_walk w = {0};
    pfr_goheap_walk_limits lim = {.max_ns = 30ll * 1000000000};
    assert_int_equal(pfr_goheap_walk_run(&w, &m, f.mbuckets, &lim), -ESRCH);
    assert_true(w.nbuckets > 0 && w.nbuckets < 2000);
    assert_non_null(strstr(w.err, "gone"));
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

/* ---- deltas and scaling ---- */

static void test_scale(void **state)
{
    (void)state;
    int64_t c, b;
    pfr_goheap_scale(10, 640, 524288, &c, &b);
    double s = 1 / (1 - exp(-64.0 / 524288));
    assert_int_equal(c, (int64_t)(10 * s));
    assert_int_equal(b, (int64_t)(640 * s));
    assert_true(c > 80000 && c < 83000); /* ~8192 objects of 64 B per sample */
    /* big objects are sampled (almost) always: scale ~1 */
    pfr_goheap_scale(3, 3 * 8388608, 524288, &c, &b);
    assert_int_equal(c, 3);
    pfr_goheap_scale(10, 640, 1, &c, &b);
    assert_int_equal(c, 10);
    assert_int_equal(b, 640);
    pfr_goheap_scale(10, 640, 0, &c, &b);
    assert_int_equal(c, 10);
    pfr_goheap_scale(0, 640, 524288, &c, &b);
    assert_int_equal(c, 0);
    assert_int_equal(b, 0);
    pfr_goheap_scale(UINT64_MAX, UINT64_MAX, 524288, &c, &b); /* garbage must not trap */
    assert_true(c > 0 && b > 0);
}

static void test_delta(void **state)
{
    (void)state;
    fakemem f;
    make_list(&f, 3);
    pfr_goheap_walk w = {0};
    pfr_goheap_delta d = {0};
    pfr_goheap_values v[8];
    pfr_goheap_totals t;
    assert_int_equal(walk(&f, &w, NULL), 0);
    /* first look at an old process: no allocations attributed, in-use known */
    assert_int_equal(pfr_goheap_delta_update(&d, &w, 1, false, v, &t), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(v[i].alloc_objects, 0);
        assert_int_equal(v[i].inuse_objects, (int64_t)w.buckets[i].allocs);
    }
    assert_int_equal(t.alloc_objects, 1 + 2 + 3);
    assert_int_equal(t.delta_objects, 0);

    /* 10 more allocations in the oldest bucket, one new bucket */
    uint64_t oldest = w.buckets[2].addr;
    uint64_t rec = oldest + PFR_GOHEAP_BUCKET_HDR + 3 * 8;
    pfr_fakemem_put64(&f, rec, 11);
    pfr_fakemem_put64(&f, rec + 16, 11 * 64);
    uint64_t pcs[1] = {0x405000};
    pfr_fakemem_bucket(&f, 128, pcs, 1, 4, 1);
    assert_int_equal(walk(&f, &w, NULL), 0);
    assert_int_equal(pfr_goheap_delta_update(&d, &w, 1, false, v, &t), 0);
    assert_int_equal(w.nbuckets, 4);
    assert_int_equal(v[0].alloc_objects, 4); /* new bucket: all of it */
    assert_int_equal(v[0].alloc_bytes, 4 * 128);
    assert_int_equal(v[0].inuse_objects, 3);
    assert_int_equal(v[1].alloc_objects, 0);
    assert_int_equal(v[3].alloc_objects, 10);
    assert_int_equal(t.new_buckets, 1);
    assert_int_equal(t.delta_objects, 14);

    /* counters going backwards: another incarnation at that address, counted from zero */
    pfr_fakemem_put64(&f, rec, 2);
    pfr_fakemem_put64(&f, rec + 16, 2 * 64);
    /* a torn read: more frees than allocs */
    pfr_fakemem_put64(&f, rec + 8, 5);
    pfr_fakemem_put64(&f, rec + 24, 5 * 64);
    assert_int_equal(walk(&f, &w, NULL), 0);
    assert_int_equal(pfr_goheap_delta_update(&d, &w, 1, false, v, &t), 0);
    assert_int_equal(v[3].alloc_objects, 2);
    assert_int_equal(v[3].inuse_objects, 0);
    assert_int_equal(t.reset_buckets, 1);

    /* a process that started during the interval: everything is the interval's */
    pfr_goheap_delta_reset(&d);
    assert_int_equal(pfr_goheap_delta_update(&d, &w, 1, true, v, &t), 0);
    assert_int_equal(v[0].alloc_objects, 4);
    assert_int_equal(t.delta_objects, t.alloc_objects);
    pfr_goheap_delta_free(&d);
    pfr_goheap_walk_free(&w);
    pfr_fakemem_free(&f);
}

/* ---- ELF ---- */

/* A file of vlen bytes (len when 0): the image, then zeros (a sparse file's hole). */
typedef struct memfile {
    const uint8_t *p;
    size_t len;
    uint64_t vlen;
} memfile;

static ssize_t mf_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
    memfile *m = ctx;
    uint64_t size = m->vlen ? m->vlen : m->len;
    if (off >= size)
        return 0;
    size_t n = size - off < len ? (size_t)(size - off) : len;
    size_t real = off < m->len ? (m->len - off < n ? m->len - off : n) : 0;
    memcpy(buf, m->p + off, real);
    memset((uint8_t *)buf + real, 0, n - real);
    return (ssize_t)n;
}

static int inspect(const uint8_t *p, size_t len, pfr_goheap_elfinfo *in, char *err, size_t el)
{
    memfile m = {p, len, 0};
    pfr_goheap_file f = {&m, mf_pread, len, 0};
    return pfr_goheap_elf_inspect(&f, in, err, el);
}

static void test_elf_go(void **state)
{
    (void)state;
    uint8_t *img;
    size_t len;
    elfgen_opts o = {
        .go = true, .version = "go1.21.13", .symtab = true, .with_targets = true, .fillers = 10};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    pfr_goheap_elfinfo in;
    char err[128];
    assert_int_equal(inspect(img, len, &in, err, sizeof(err)), 0);
    assert_true(in.is_go);
    assert_true(in.has_symtab);
    assert_string_equal(in.go_version, "go1.21.13");
    assert_int_equal(in.mbuckets, ELFGEN_MBUCKETS);
    assert_int_equal(in.mem_profile_rate, ELFGEN_RATE);
    assert_int_equal(in.e_type, 2 /* ET_EXEC */);
    assert_int_equal(in.text_vaddr, ELFGEN_TEXT);
    free(img);
}

static void test_elf_stripped_and_plain(void **state)
{
    (void)state;
    uint8_t *img;
    size_t len;
    pfr_goheap_elfinfo in;
    char err[128];
    elfgen_opts o = {.go = true, .version = "go1.19.8"};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    assert_int_equal(inspect(img, len, &in, err, sizeof(err)), 0);
    assert_true(in.is_go);
    assert_false(in.has_symtab);
    assert_int_equal(in.mbuckets, 0);
    free(img);
    /* symbols present but not the two we need */
    o = (elfgen_opts){.go = true, .symtab = true, .fillers = 5};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    assert_int_equal(inspect(img, len, &in, err, sizeof(err)), 0);
    assert_true(in.has_symtab);
    assert_int_equal(in.mbuckets, 0);
    assert_string_equal(in.go_version, "");
    free(img);
    /* not Go: the symbol table is not even read */
    o = (elfgen_opts){.symtab = true, .with_targets = true, .fillers = 50000};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    assert_int_equal(inspect(img, len, &in, err, sizeof(err)), 0);
    assert_false(in.is_go);
    assert_int_equal(in.mbuckets, 0);
    assert_true(in.reads < 8);
    free(img);
    const char *text = "#!/bin/sh\necho not an elf\n";
    assert_int_equal(inspect((const uint8_t *)text, strlen(text), &in, err, sizeof(err)), -ENOEXEC);
}

static void test_elf_streaming(void **state)
{
    (void)state;
    uint8_t *img;
    size_t len;
    pfr_goheap_elfinfo in;
    char err[128];
    /* ~700 KB of names and ~480 KB of symbols before ours: read in 64 KiB blocks */
    elfgen_opts o = {.go = true, .symtab = true, .with_targets = true, .fillers = 20000};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    assert_int_equal(inspect(img, len, &in, err, sizeof(err)), 0);
    assert_int_equal(in.mbuckets, ELFGEN_MBUCKETS);
    assert_int_equal(in.mem_profile_rate, ELFGEN_RATE);
    assert_true(in.reads > 10 && in.reads < 40);
    free(img);
    /* the name straddles a block boundary, at every alignment around it */
    for (size_t at = 65536 - 30; at <= 65536 + 2; at++) {
        o = (elfgen_opts){.go = true, .symtab = true, .with_targets = true, .name_at = at};
        assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
        assert_int_equal(inspect(img, len, &in, err, sizeof(err)), 0);
        assert_int_equal(in.mbuckets, ELFGEN_MBUCKETS);
        assert_int_equal(in.mem_profile_rate, ELFGEN_RATE);
        free(img);
    }
}

static void test_elf_truncated(void **state)
{
    (void)state;
    uint8_t *img;
    size_t len;
    elfgen_opts o = {
        .go = true, .version = "go1.22.1", .symtab = true, .with_targets = true, .fillers = 100};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    int bad = 0;
    for (size_t cut = 0; cut < len; cut += 37) {
        pfr_goheap_elfinfo in;
        char err[128] = "";
        int rc = inspect(img, cut, &in, err, sizeof(err));
        assert_true(rc == 0 || rc == -ENOEXEC || rc == -EBADMSG);
        if (rc == -EBADMSG) {
            assert_true(err[0] != '\0');
            bad++;
        }
    }
    assert_true(bad > 0);
    /* a section table claiming sections far beyond the file */
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    eh->e_shoff = (uint64_t)1 << 60;
    pfr_goheap_elfinfo in;
    char err[128];
    assert_int_equal(inspect(img, len, &in, err, sizeof(err)), -EBADMSG);
    free(img);
}

/* ---- ELF: limits (issue 30) ---- */

/* The section header of the given type in an elfgen image. */
static Elf64_Shdr *shdr_of(uint8_t *img, uint32_t type)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    Elf64_Shdr *sh = (Elf64_Shdr *)(img + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++)
        if (sh[i].sh_type == type)
            return &sh[i];
    return NULL;
}

/* A Go image whose .symtab (or its .strtab) is declared size bytes, moved to the end of a
 * file that is a hole past the image; inspected with the deadline given. */
static int inspect_table(uint32_t type, uint64_t size, int64_t deadline, pfr_goheap_elfinfo *in)
{
    uint8_t *img;
    size_t len;
    elfgen_opts o = {.go = true, .symtab = true, .with_targets = true, .fillers = 10};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    Elf64_Shdr *sh = shdr_of(img, SHT_SYMTAB);
    assert_non_null(sh);
    if (type == SHT_STRTAB)
        sh = &((Elf64_Shdr *)(img + ((Elf64_Ehdr *)img)->e_shoff))[sh->sh_link];
    uint64_t keep = sh->sh_size;
    sh->sh_size = size > keep ? size : keep;
    memfile v = {img, len, sh->sh_offset + sh->sh_size};
    if (v.vlen < len)
        v.vlen = len;
    pfr_goheap_file f = {&v, mf_pread, v.vlen, deadline};
    char err[128];
    int rc = pfr_goheap_elf_inspect(&f, in, err, sizeof(err));
    free(img);
    return rc;
}

static void test_elf_limits(void **state)
{
    (void)state;
    pfr_goheap_elfinfo in;
    /* at the limit: read (the symbols are found in its first block) */
    assert_int_equal(inspect_table(SHT_SYMTAB, PFR_GOHEAP_MAX_TABLE, 0, &in), 0);
    assert_int_equal(in.refused, PFR_REFUSED_NONE);
    assert_int_equal(in.mbuckets, ELFGEN_MBUCKETS);
    /* one entry over: refused before a byte of it is read */
    assert_int_equal(inspect_table(SHT_SYMTAB, PFR_GOHEAP_MAX_TABLE + sizeof(Elf64_Sym), 0, &in),
                     -EFBIG);
    assert_int_equal(in.refused, PFR_REFUSED_TOO_MANY_SYMBOLS);
    assert_string_equal(pfr_refusal_name(in.refused), "too_many_symbols");
    assert_true(in.reads < 8);
    assert_int_equal(inspect_table(SHT_STRTAB, PFR_GOHEAP_MAX_TABLE, 0, &in), 0);
    assert_int_equal(inspect_table(SHT_STRTAB, PFR_GOHEAP_MAX_TABLE + 1, 0, &in), -EFBIG);
    assert_int_equal(in.refused, PFR_REFUSED_TOO_BIG);
    /* a deadline already passed: abandoned at the first block */
    assert_int_equal(inspect_table(SHT_SYMTAB, 0, 1, &in), -ETIME);
    assert_int_equal(in.refused, PFR_REFUSED_TIME_BUDGET);
    assert_string_equal(pfr_refusal_name(in.refused), "time_budget");
}

static void test_elf_lying_count(void **state)
{
    (void)state;
    uint8_t *img;
    size_t len;
    elfgen_opts o = {.go = true, .symtab = true, .with_targets = true, .fillers = 10};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    shdr_of(img, SHT_SYMTAB)->sh_size = 50000000ull * sizeof(Elf64_Sym); /* past the end */
    pfr_goheap_elfinfo in;
    char err[128];
    assert_int_equal(inspect(img, len, &in, err, sizeof(err)), -EBADMSG);
    assert_int_equal(in.refused, PFR_REFUSED_BAD_FILE);
    free(img);
}

/* ---- /proc ---- */

static void test_parse_stat(void **state)
{
    (void)state;
    char line[1024] = "4242 (we (ird) na me) S";
    for (int field = 4; field <= 52; field++) {
        char num[32];
        snprintf(num, sizeof(num), " %d", field == 22 ? 987654 : field == 28 ? 140720000 : field);
        strcat(line, num);
    }
    strcat(line, "\n");
    uint64_t st, ss;
    assert_int_equal(pfr_goheap_parse_stat(line, strlen(line), &st, &ss), 0);
    assert_int_equal(st, 987654);
    assert_int_equal(ss, 140720000);
    assert_int_equal(pfr_goheap_parse_stat("12 (x) S 1 2", 12, &st, &ss), -EBADMSG);
    assert_int_equal(pfr_goheap_parse_stat("no paren", 8, &st, &ss), -EBADMSG);
}

/* ---- the collector over a fake /proc and fake memory ---- */

typedef struct fake_env {
    char root[256];
    char bin[300];
    fakemem f, f2; /* pid 4242, and pid 4243 when a test adds it */
    int profiles, events[16];
    pfr_profile *last;
    pfr_goheap_proc info, info_by_pid[2]; /* 4242, 4243 */
} fake_env;

static fake_env env;

static void write_stat(uint64_t starttime, uint64_t startstack)
{
    char path[400], line[1024] = "4242 (fakego) S";
    for (int field = 4; field <= 52; field++) {
        char num[32];
        snprintf(num, sizeof(num), " %llu",
                 (unsigned long long)(field == 22   ? starttime
                                      : field == 28 ? startstack
                                                    : 1));
        strcat(line, num);
    }
    strcat(line, "\n");
    snprintf(path, sizeof(path), "%s/4242/stat", env.root);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(line, fp);
    fclose(fp);
}

static void fake_hook(void *ctx, pid_t pid, pfr_goheap_mem *mem)
{
    (void)ctx;
    assert_true(pid == 4242 || pid == 4243);
    *mem = pid == 4242 ? env.f.mem : env.f2.mem;
}

/* A second process of the same executable: same addresses, its own memory. */
static void add_second_process(void)
{
    char path[400], target[400];
    snprintf(path, sizeof(path), "%s/4243", env.root);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/4243/exe", env.root);
    assert_int_equal(symlink(env.bin, path), 0);
    snprintf(path, sizeof(path), "%s/4242/stat", env.root);
    snprintf(target, sizeof(target), "%s/4243/stat", env.root);
    char cmd[900];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, target);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(pfr_fakemem_init(&env.f2, ELFGEN_MBUCKETS, 1 << 16), 0);
}

/* PCs: 0x401xxx are runtime.mallocgc, 0x409000 runtime.goexit, others main.fN */
static int fake_resolve(void *ctx, pid_t pid, uint64_t addr, pfr_goheap_frame *out, size_t cap)
{
    (void)ctx;
    (void)pid;
    static char name[64];
    assert_true(cap >= 1);
    if ((addr >> 12) == 0x401)
        snprintf(name, sizeof(name), "runtime.mallocgc");
    else if ((addr >> 12) == 0x409)
        snprintf(name, sizeof(name), "runtime.goexit.abi0");
    else
        snprintf(name, sizeof(name), "main.f%llx", (unsigned long long)(addr >> 12));
    out[0] = (pfr_goheap_frame){name, "main.go", (int64_t)(addr & 0xfff)};
    return 1;
}

static void on_profile(void *ctx, const pfr_goheap_proc *in, pfr_profile *p)
{
    (void)ctx;
    env.profiles++;
    pfr_profile_free(env.last);
    env.last = p;
    env.info = *in;
    if (in->pid == 4242 || in->pid == 4243)
        env.info_by_pid[in->pid - 4242] = *in;
}

static void on_event(void *ctx, const pfr_goheap_event *ev)
{
    (void)ctx;
    env.events[ev->kind]++;
}

static int setup_env(void **state)
{
    (void)state;
    memset(&env, 0, sizeof(env));
    snprintf(env.root, sizeof(env.root), "/tmp/pfr-goheap-unit-XXXXXX");
    assert_non_null(mkdtemp(env.root));
    char path[400];
    snprintf(path, sizeof(path), "%s/4242", env.root);
    mkdir(path, 0755);
    snprintf(env.bin, sizeof(env.bin), "%s/gobin", env.root);
    uint8_t *img;
    size_t len;
    elfgen_opts o = {.go = true, .version = "go1.22.12", .symtab = true, .with_targets = true};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    FILE *fp = fopen(env.bin, "wb");
    fwrite(img, 1, len, fp);
    fclose(fp);
    free(img);
    snprintf(path, sizeof(path), "%s/4242/exe", env.root);
    assert_int_equal(symlink(env.bin, path), 0);
    write_stat(1, 7000);
    /* the runtime's two variables sit where the ELF says; buckets follow them */
    assert_int_equal(pfr_fakemem_init(&env.f, ELFGEN_MBUCKETS, 1 << 20), 0);
    return 0;
}

static int teardown_env(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", env.root);
    assert_int_equal(system(cmd), 0);
    pfr_fakemem_free(&env.f);
    if (env.f2.buf)
        pfr_fakemem_free(&env.f2);
    pfr_profile_free(env.last);
    return 0;
}

static pfr_goheap *fake_collector(enum pfr_goheap_mode mode)
{
    pfr_goheap_opts o = {.mode = mode,
                         .max_walk_ns = 30ll * 1000000000,
                         .proc_root = env.root,
                         .resolver = {.resolve = fake_resolve},
                         .mem_hook = fake_hook};
    pfr_goheap *c;
    assert_int_equal(pfr_goheap_new(&o, &c), 0);
    return c;
}

static void collect_fake(pfr_goheap *c, int64_t now)
{
    pfr_goheap_sink sink = {NULL, on_profile, on_event};
    assert_int_equal(pfr_goheap_collect(c, now, NULL, 0, &sink), 0);
}

static void test_collector(void **state)
{
    (void)state;
    /* leaf first: mallocgc, main.f402, main.f403, goexit */
    uint64_t pcs_a[4] = {0x401010, 0x402020, 0x403030, 0x409010};
    uint64_t pcs_b[2] = {0x404040, 0x409010};
    uint64_t a = pfr_fakemem_bucket(&env.f, 64, pcs_a, 4, 100, 40);
    pfr_fakemem_bucket(&env.f, 1 << 20, pcs_b, 2, 5, 0);
    pfr_goheap *c = fake_collector(PFR_GOHEAP_ENABLED);

    collect_fake(c, 1000000000000);
    assert_int_equal(env.profiles, 1);
    assert_true(env.info.baseline);
    assert_string_equal(env.info.go_version, "go1.22.12");
    assert_int_equal(env.info.buckets, 2);
    pfr_profile *p = env.last;
    assert_int_equal(pfr_profile_num_samples(p), 2);
    for (size_t i = 0; i < 2; i++) {
        pfr_frame fr[8];
        size_t n = pfr_profile_sample_frames(p, i, fr, 8);
        const int64_t *v = pfr_profile_sample_values(p, i);
        assert_int_equal(v[0], 0); /* baseline */
        if (strcmp(fr[0].function, "main.f402") == 0) {
            /* mallocgc hidden, goexit dropped */
            assert_int_equal(n, 2);
            assert_string_equal(fr[1].function, "main.f403");
            int64_t io, ib;
            pfr_goheap_scale(60, 60 * 64, 524288, &io, &ib);
            assert_int_equal(v[2], io);
            assert_int_equal(v[3], ib);
        } else {
            assert_string_equal(fr[0].function, "main.f404");
            assert_int_equal(n, 1);
        }
    }
    assert_int_equal(pfr_profile_duration_nanos(p), 60ll * 1000000000);

    /* 1000 more objects in bucket a */
    uint64_t rec = a + PFR_GOHEAP_BUCKET_HDR + 4 * 8;
    pfr_fakemem_put64(&env.f, rec, 1100);
    pfr_fakemem_put64(&env.f, rec + 16, 1100 * 64);
    collect_fake(c, 1030000000000);
    assert_int_equal(env.profiles, 2);
    assert_false(env.info.baseline);
    int64_t eo, eb;
    pfr_goheap_scale(1000, 64000, 524288, &eo, &eb);
    assert_int_equal(env.info.interval_alloc_objects, eo);
    assert_int_equal(env.info.interval_alloc_bytes, eb);
    assert_int_equal(pfr_profile_duration_nanos(env.last), 30ll * 1000000000);
    assert_int_equal(pfr_profile_time_nanos(env.last), 1000000000000);

    /* same pid, a new process (another start time): reset, not diffed */
    write_stat(2, 7000);
    collect_fake(c, 1060000000000);
    assert_int_equal(env.events[PFR_GOHEAP_EV_RESTARTED], 1);
    assert_int_equal(env.profiles, 3);

    /* a loop in its memory: an event, no profile, and recovery once it is gone */
    uint64_t head = pfr_fakemem_get64(&env.f, env.f.mbuckets);
    uint64_t second = pfr_fakemem_get64(&env.f, head + FAKE_ALLNEXT);
    pfr_fakemem_put64(&env.f, second + FAKE_ALLNEXT, head);
    collect_fake(c, 1090000000000);
    assert_int_equal(env.profiles, 3);
    assert_int_equal(env.events[PFR_GOHEAP_EV_WALK_ERROR], 1);
    pfr_fakemem_put64(&env.f, second + FAKE_ALLNEXT, 0);
    collect_fake(c, 1120000000000);
    assert_int_equal(env.profiles, 4);

    pfr_goheap_stats st;
    pfr_goheap_get_stats(c, &st);
    assert_int_equal(st.loop_errors, 1);
    assert_int_equal(st.walk_errors, 1);
    assert_int_equal(st.restarts, 1);
    assert_int_equal(st.binaries_parsed, 1);
    pfr_goheap_free(c);
}

static void test_collector_modes(void **state)
{
    (void)state;
    uint64_t pcs[2] = {0x402000, 0x403000};
    pfr_fakemem_put64(&env.f, env.f.rate, 0);
    pfr_goheap *c = fake_collector(PFR_GOHEAP_ENABLED);
    collect_fake(c, 1000000000000);
    assert_int_equal(env.profiles, 0);
    pfr_goheap_stats st;
    pfr_goheap_get_stats(c, &st);
    assert_int_equal(st.not_sampling, 1);
    assert_int_equal(pfr_fakemem_get64(&env.f, env.f.rate), 0);
    pfr_goheap_free(c);

    /* two processes of one executable, both at 0: each read is its own, each gets the write */
    add_second_process();
    pfr_fakemem_put64(&env.f2, env.f2.rate, 0);
    c = fake_collector(PFR_GOHEAP_FORCE);
    collect_fake(c, 1000000000000);
    assert_int_equal(pfr_fakemem_get64(&env.f, env.f.rate), 524288);
    assert_int_equal(pfr_fakemem_get64(&env.f2, env.f2.rate), 524288);
    assert_int_equal(env.events[PFR_GOHEAP_EV_RATE_FORCED], 2);
    assert_int_equal(env.profiles, 0);
    pfr_goheap_free(c);
    c = fake_collector(PFR_GOHEAP_FORCE);
    pfr_fakemem_put64(&env.f2, env.f2.rate, 0);
    pfr_fakemem_put64(&env.f, env.f.rate, 0);
    /* sampling began with our write: the first counts are all the interval's */
    collect_fake(c, 1000000000000);
    assert_int_equal(env.events[PFR_GOHEAP_EV_RATE_FORCED], 4);
    pfr_fakemem_bucket(&env.f, 4096, pcs, 2, 7, 0);
    collect_fake(c, 1060000000000);
    assert_int_equal(env.profiles, 2); /* 4242 with its bucket, 4243 with an empty list */
    assert_int_equal(env.info_by_pid[0].buckets, 1);
    assert_false(env.info_by_pid[0].baseline); /* sampling began with our write */
    assert_true(env.info_by_pid[0].interval_alloc_objects >= 7);
    assert_int_equal(env.info_by_pid[1].pid, 4243);
    assert_int_equal(env.info_by_pid[1].buckets, 0);
    pfr_goheap_free(c);

    c = fake_collector(PFR_GOHEAP_DISABLED);
    collect_fake(c, 1000000000000);
    assert_int_equal(env.profiles, 2);
    pfr_goheap_free(c);
    enum pfr_goheap_mode m;
    assert_int_equal(pfr_goheap_parse_mode("force", &m), 0);
    assert_int_equal(m, PFR_GOHEAP_FORCE);
    assert_int_equal(pfr_goheap_parse_mode("Enabled", &m), 0);
    assert_int_equal(m, PFR_GOHEAP_ENABLED);
    assert_int_equal(pfr_goheap_parse_mode("sometimes", &m), -EINVAL);
}

static void test_collector_stripped(void **state)
{
    (void)state;
    uint8_t *img;
    size_t len;
    elfgen_opts o = {.go = true, .version = "go1.22.12"};
    assert_int_equal(pfr_goheap_elfgen_build(&o, &img, &len), 0);
    FILE *fp = fopen(env.bin, "wb");
    fwrite(img, 1, len, fp);
    fclose(fp);
    free(img);
    pfr_goheap *c = fake_collector(PFR_GOHEAP_FORCE);
    collect_fake(c, 1000000000000);
    collect_fake(c, 1060000000000);
    pfr_goheap_stats st;
    pfr_goheap_get_stats(c, &st);
    assert_int_equal(env.profiles, 0);
    assert_int_equal(st.stripped_binaries, 1);
    assert_int_equal(env.events[PFR_GOHEAP_EV_STRIPPED], 1);
    pfr_goheap_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_basic),
        cmocka_unit_test(test_walk_empty),
        cmocka_unit_test(test_walk_loop),
        cmocka_unit_test(test_walk_absurd_nstk),
        cmocka_unit_test(test_walk_garbage_pointers),
        cmocka_unit_test(test_walk_wrong_type),
        cmocka_unit_test(test_walk_bounds),
        cmocka_unit_test(test_walk_few_reads),
        cmocka_unit_test(test_walk_mapping_mid_block),
        cmocka_unit_test(test_walk_process_exits),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_delta),
        cmocka_unit_test(test_elf_go),
        cmocka_unit_test(test_elf_stripped_and_plain),
        cmocka_unit_test(test_elf_streaming),
        cmocka_unit_test(test_elf_truncated),
        cmocka_unit_test(test_elf_limits),
        cmocka_unit_test(test_elf_lying_count),
        cmocka_unit_test(test_parse_stat),
        cmocka_unit_test_setup_teardown(test_collector, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_collector_modes, setup_env, teardown_env),
        cmocka_unit_test_setup_teardown(test_collector_stripped, setup_env, teardown_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
