/*
 * pfr_unwind_table over real code: small C programs compiled at test time (with the project's
 * compiler and with gcc, whose realigning prologue only gcc emits) and the system's libc.
 * Rules are checked at the addresses of known functions, found in each program's symbol table;
 * broken files (truncated, forged headers, moved FDEs) must give an error or a sane table.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dwarf.h>
#include <gelf.h>
#include <libelf.h>

#include "under_asan.h"
#include "unwind_image.h"
#include "unwind_table.h"

#ifndef UNWIND_CC
#define UNWIND_CC "cc"
#endif
#ifndef UNWIND_GCC
#define UNWIND_GCC "gcc"
#endif
#ifndef UNWIND_PROGS
#define UNWIND_PROGS "progs"
#endif
#ifndef UNWIND_WORK
#define UNWIND_WORK "unwind-work"
#endif
#ifndef UNWIND_GO
#define UNWIND_GO ""
#endif
#ifndef UNWIND_MAKE_MANY
#define UNWIND_MAKE_MANY "make_many_fdes.sh"
#endif
#ifndef UNWIND_MAKE_HOSTILE
#define UNWIND_MAKE_HOSTILE "make_hostile"
#endif

/* the programs, built once by setup(): [0] with UNWIND_CC, [1] with gcc */
#define NCC 2
static const char *const ccs[NCC] = {UNWIND_CC, UNWIND_GCC};
static char mainprog[NCC][512]; /* uw_main.c + uw_fp.c, PIE, lazy PLT */
static char nostd[512];         /* uw_nostd.c, static, no libc (gcc) */
static char realign[512];       /* uw_realign.c (gcc) */
static char many[512];          /* make_many_fdes.sh: MANY functions of an FDE each */
#define MANY 150000u

#define NOSTD_FLAGS                                                                                \
    "-O2 -fomit-frame-pointer -nostdlib -static -no-pie -Wl,--build-id=none "                      \
    "-Wl,-z,noseparate-code"

__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(cmd));
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("command failed (%d): %s", rc, cmd);
}

static int setup(void **state)
{
    (void)state;
    sh("mkdir -p '%s'", UNWIND_WORK);
    for (int i = 0; i < NCC; i++) {
        snprintf(mainprog[i], sizeof(mainprog[i]), "%s/uw_main.%d", UNWIND_WORK, i);
        sh("'%s' -O2 -fomit-frame-pointer -c -o '%s.o' '%s/uw_main.c' && "
           "'%s' -O2 -fno-omit-frame-pointer -c -o '%s-fp.o' '%s/uw_fp.c' && "
           "'%s' -Wl,-z,lazy -o '%s' '%s.o' '%s-fp.o'",
           ccs[i], mainprog[i], UNWIND_PROGS, ccs[i], mainprog[i], UNWIND_PROGS, ccs[i],
           mainprog[i], mainprog[i], mainprog[i]);
    }
    snprintf(nostd, sizeof(nostd), "%s/uw_nostd", UNWIND_WORK);
    sh("'%s' " NOSTD_FLAGS " -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, nostd, UNWIND_PROGS);
    snprintf(realign, sizeof(realign), "%s/uw_realign", UNWIND_WORK);
    sh("'%s' -O2 -fomit-frame-pointer -o '%s' '%s/uw_realign.c'", UNWIND_GCC, realign,
       UNWIND_PROGS);
    snprintf(many, sizeof(many), "%s/uw_many", UNWIND_WORK);
    sh("sh '%s' '%s' %u '%s'", UNWIND_MAKE_MANY, UNWIND_GCC, MANY, many);
    return 0;
}

/* ---- helpers ---- */

static void *slurp(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    *size = (size_t)st.st_size;
    return buf;
}

static void check_rows(const pfr_unwind_table *t)
{
    assert_true(t->nrows >= 2);
    assert_int_equal(t->rows[0].pc, 0);
    for (size_t i = 0; i < t->nrows; i++) {
        assert_true(PFR_UW_RULE_KIND(t->rows[i].rule) < PFR_UW_KINDS);
        if (i > 0) {
            assert_true(t->rows[i - 1].pc < t->rows[i].pc);      /* sorted, strictly */
            assert_true(t->rows[i - 1].rule != t->rows[i].rule); /* merged */
        }
        assert_ptr_equal(pfr_unwind_table_find(t, t->base + t->rows[i].pc), &t->rows[i]);
    }
    /* the end of the last FDE */
    assert_int_equal(PFR_UW_RULE_KIND(t->rows[t->nrows - 1].rule), PFR_UW_NONE);
    assert_true(t->stats.rows_in > 0 && t->stats.fdes > 0);
}

static int build_path(const char *path, unsigned flags, pfr_unwind_table *t)
{
    char err[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    off_t pos = lseek(fd, 0, SEEK_CUR);
    int rc = pfr_unwind_table_build(fd, flags, t, err, sizeof(err));
    assert_int_equal(lseek(fd, 0, SEEK_CUR), pos); /* pread only */
    close(fd);
    if (rc == 0)
        check_rows(t);
    else
        assert_true(err[0] != '\0');
    return rc;
}

static void build_ok(const char *path, pfr_unwind_table *t)
{
    int rc = build_path(path, 0, t);
    if (rc != 0)
        fail_msg("%s: %s", path, strerror(-rc));
}

static int build_buf(const void *buf, size_t size, unsigned flags, pfr_unwind_table *t)
{
    char err[256];
    int rc = pfr_unwind_table_build_mem(buf, size, flags, t, err, sizeof(err));
    if (rc == 0)
        check_rows(t);
    else
        assert_true(err[0] != '\0');
    return rc;
}

/* Address and size of a symbol (.symtab, else .dynsym), or of a section when name starts with
 * a dot. Fails the test when absent. */
/* The ELF file at path read by libelf (its descriptor in *fd), and its section names' index. */
static Elf *elf_at(const char *path, int *fd, size_t *shstrndx)
{
    elf_version(EV_CURRENT);
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(*fd >= 0);
    Elf *e = elf_begin(*fd, ELF_C_READ, NULL);
    assert_non_null(e);
    assert_int_equal(elf_getshdrstrndx(e, shstrndx), 0);
    return e;
}

static void lookup(const char *path, const char *name, uint64_t *addr, uint64_t *size)
{
    int fd;
    size_t shstrndx;
    Elf *e = elf_at(path, &fd, &shstrndx);
    bool found = false;
    for (Elf_Scn *scn = NULL; !found && (scn = elf_nextscn(e, scn)) != NULL;) {
        GElf_Shdr sh;
        assert_non_null(gelf_getshdr(scn, &sh));
        const char *sname = elf_strptr(e, shstrndx, sh.sh_name);
        if (name[0] == '.') {
            if (sname && strcmp(sname, name) == 0) {
                *addr = sh.sh_addr;
                *size = sh.sh_size;
                found = true;
            }
            continue;
        }
        if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        assert_non_null(d);
        for (size_t i = 0; sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            assert_non_null(gelf_getsym(d, (int)i, &sym));
            const char *s = elf_strptr(e, sh.sh_link, sym.st_name);
            if (s && strcmp(s, name) == 0 && sym.st_value) {
                *addr = sym.st_value;
                *size = sym.st_size;
                found = true;
                break;
            }
        }
    }
    elf_end(e);
    close(fd);
    if (!found)
        fail_msg("%s: no %s", path, name);
}

static unsigned kind_at(const pfr_unwind_table *t, uint64_t vaddr)
{
    const struct pfr_unwind_row *r = pfr_unwind_table_find(t, vaddr);
    assert_non_null(r);
    return PFR_UW_RULE_KIND(r->rule);
}

static uint32_t rule_at(const pfr_unwind_table *t, uint64_t vaddr)
{
    const struct pfr_unwind_row *r = pfr_unwind_table_find(t, vaddr);
    assert_non_null(r);
    return r->rule;
}

/* ---- rules of known code ---- */

/* A leaf that pushes nothing: CFA = rsp + 8 over its whole body, in one row. */
static void test_leaf(void **state)
{
    (void)state;
    for (int c = 0; c < NCC; c++) {
        pfr_unwind_table t;
        build_ok(mainprog[c], &t);
        uint64_t a, n;
        lookup(mainprog[c], "uw_leaf", &a, &n);
        assert_true(n > 0);
        const struct pfr_unwind_row *first = pfr_unwind_table_find(&t, a);
        assert_int_equal(first->rule, PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8));
        for (uint64_t pc = a; pc < a + n; pc++)
            assert_ptr_equal(pfr_unwind_table_find(&t, pc), first); /* no row inside */
        pfr_unwind_table_free(&t);
        assert_null(t.rows);
    }
}

/* push rbp; mov rbp, rsp: rsp + 8 at entry, rsp + 16 with rbp at CFA - 16 after the push,
 * rbp + 16 once rbp is set, and rsp + 8 at the ret. */
static void test_frame_pointer(void **state)
{
    (void)state;
    for (int c = 0; c < NCC; c++) {
        pfr_unwind_table t;
        build_ok(mainprog[c], &t);
        uint64_t a, n;
        lookup(mainprog[c], "uw_fp", &a, &n);
        assert_int_equal(rule_at(&t, a), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8));
        bool pushed = false, framed = false;
        for (uint64_t pc = a; pc < a + n; pc++) {
            uint32_t r = rule_at(&t, pc);
            pushed |= r == PFR_UW_RULE(PFR_UW_CFA_RSP, -2, 16);
            framed |= r == PFR_UW_RULE(PFR_UW_CFA_RBP, -2, 16);
            if (PFR_UW_RULE_KIND(r) == PFR_UW_CFA_RBP)
                assert_true(pushed); /* in that order */
        }
        assert_true(pushed && framed);
        uint32_t last = rule_at(&t, a + n - 1);
        assert_int_equal(PFR_UW_RULE_KIND(last), PFR_UW_CFA_RSP);
        assert_int_equal(PFR_UW_RULE_OFF(last), 8);
        pfr_unwind_table_free(&t);
    }
}

/* The lazy PLT: its first 16 bytes push and jump (rsp + 16, + 24), then the entries'
 * expression: CFA = rsp + 8, + 8 more from byte 11 of each entry on. */
static void test_plt(void **state)
{
    (void)state;
    for (int c = 0; c < NCC; c++) {
        pfr_unwind_table t;
        build_ok(mainprog[c], &t);
        uint64_t a, n;
        lookup(mainprog[c], ".plt", &a, &n);
        assert_true(n >= 32);
        assert_int_equal(rule_at(&t, a), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 16));
        assert_int_equal(rule_at(&t, a + 6), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 24));
        for (uint64_t pc = a + 16; pc < a + n; pc++)
            assert_int_equal(rule_at(&t, pc), PFR_UW_RULE(PFR_UW_PLT, 11, 8));
        pfr_unwind_table_free(&t);
    }
}

/* crt1's _start marks the return address undefined: the outermost frame. */
static void test_start_is_end(void **state)
{
    (void)state;
    for (int c = 0; c < NCC; c++) {
        pfr_unwind_table t;
        build_ok(mainprog[c], &t);
        uint64_t a, n;
        lookup(mainprog[c], "_start", &a, &n);
        assert_int_equal(kind_at(&t, a), PFR_UW_END);
        assert_int_equal(kind_at(&t, a + 4), PFR_UW_END);
        pfr_unwind_table_free(&t);
    }
}

/* gcc's DRAP prologue: CFA = *(rbp - 8), the caller's rbp at [rbp]. The row keeps off signed
 * (two's complement in the 20 bits) and arg as the saved rbp's slot from rbp. */
static void test_realign_deref(void **state)
{
    (void)state;
    const char *progs[2] = {realign, nostd};
    char drap[600];
    snprintf(drap, sizeof(drap), "%s-drap", nostd);
    sh("'%s' " NOSTD_FLAGS " -DUW_DRAP -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, drap, UNWIND_PROGS);
    progs[1] = drap;
    const char *fn[2] = {"main", "uw_realign"};
    for (int p = 0; p < 2; p++) {
        pfr_unwind_table t;
        build_ok(progs[p], &t);
        uint64_t a, n;
        lookup(progs[p], fn[p], &a, &n);
        size_t deref = 0;
        for (uint64_t pc = a; pc < a + n; pc++) {
            uint32_t r = rule_at(&t, pc);
            if (PFR_UW_RULE_KIND(r) != PFR_UW_CFA_DEREF_RBP)
                continue;
            deref++;
            assert_int_equal((int32_t)r >> 12, -8);
            assert_int_equal(PFR_UW_RULE_ARG(r), 0);
        }
        assert_true(deref > n / 2); /* the body, between prologue and epilogue */
        assert_int_equal(rule_at(&t, a), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8));
        /* before rbp is set up, CFA = r10: no rule the sampler can follow, and counted */
        assert_int_equal(kind_at(&t, a + 8), PFR_UW_NONE);
        assert_true(t.stats.unsupported > 0);
        pfr_unwind_table_free(&t);
    }
}

/* Rules the sampler cannot follow make NONE rows, counted: rbp kept in another register, a CFA
 * from another register, rbp saved out of the arg range, a CFA offset past PFR_UW_OFF_MAX. */
static void test_unsupported_rules(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof(path), "%s-odd", nostd);
    sh("'%s' " NOSTD_FLAGS " -DUW_ODD -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, path, UNWIND_PROGS);
    pfr_unwind_table t;
    build_ok(path, &t);
    uint64_t a, n;
    lookup(path, "uw_odd", &a, &n);
    assert_int_equal(rule_at(&t, a), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8));
    for (uint64_t i = 1; i <= 4; i++)
        assert_int_equal(rule_at(&t, a + i), PFR_UW_RULE(PFR_UW_NONE, 0, 0));
    assert_int_equal(rule_at(&t, a + 5), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8)); /* the ret */
    /* one row for the four: merged */
    assert_ptr_equal(pfr_unwind_table_find(&t, a + 1), pfr_unwind_table_find(&t, a + 4));
    assert_int_equal(t.stats.unsupported, 4);
    pfr_unwind_table_free(&t);
}

/* A function of 10000 rows: libdw replays an FDE for each row, so the builder stops at 4096
 * rows an FDE; the rest of the function is one NONE row, counted once. */
static void test_row_cap(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof(path), "%s-long", nostd);
    sh("'%s' " NOSTD_FLAGS " -DUW_LONG -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, path, UNWIND_PROGS);
    pfr_unwind_table t;
    build_ok(path, &t);
    uint64_t a, n;
    lookup(path, "uw_long", &a, &n);
    for (uint64_t i = 0; i < 4096; i++)
        assert_int_equal(rule_at(&t, a + i), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, i % 2 ? 16 : 8));
    const struct pfr_unwind_row *rest = pfr_unwind_table_find(&t, a + 4096);
    assert_int_equal(rest->rule, PFR_UW_RULE(PFR_UW_NONE, 0, 0));
    assert_int_equal(t.base + rest->pc, a + 4096);
    assert_ptr_equal(pfr_unwind_table_find(&t, a + 10000), rest);
    assert_int_equal(t.stats.unsupported, 1);
    pfr_unwind_table_free(&t);
}

/* glibc's __restore_rt, the signal trampoline ('S' augmentation). libc is stripped, so it is
 * found the way the kernel knows it: the sa_restorer glibc installs with a handler. */
struct kernel_sigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
};

struct in_object {
    uintptr_t addr;
    char path[4096];
    uintptr_t bias;
};

static int object_of(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct in_object *o = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && o->addr >= lo && o->addr < lo + ph->p_memsz) {
            snprintf(o->path, sizeof(o->path), "%s", info->dlpi_name);
            o->bias = info->dlpi_addr;
            return 1;
        }
    }
    return 0;
}

static void on_usr2(int sig)
{
    (void)sig;
}

static void test_signal_trampoline(void **state)
{
    (void)state;
    struct sigaction sa = {.sa_handler = on_usr2};
    assert_int_equal(sigaction(SIGUSR2, &sa, NULL), 0);
    struct kernel_sigaction k;
    assert_int_equal(syscall(SYS_rt_sigaction, SIGUSR2, NULL, &k, 8), 0);
    assert_non_null(k.restorer);
    struct in_object o = {.addr = (uintptr_t)k.restorer};
    assert_int_equal(dl_iterate_phdr(object_of, &o), 1);
    assert_non_null(strstr(o.path, "libc.so"));

    pfr_unwind_table t;
    build_ok(o.path, &t);
    uint64_t va = o.addr - o.bias;
    assert_int_equal(rule_at(&t, va), PFR_UW_RULE(PFR_UW_SIGNAL, 0, 0));
    /* glibc starts the FDE a byte early, for unwinders that look up return address - 1 */
    assert_int_equal(kind_at(&t, va - 1), PFR_UW_SIGNAL);
    size_t signals = 0;
    for (size_t i = 0; i < t.nrows; i++)
        signals += PFR_UW_RULE_KIND(t.rows[i].rule) == PFR_UW_SIGNAL;
    assert_int_equal(signals, 1);
    assert_false(t.stats.debug_frame);
    assert_true(t.delta == 0); /* libc's text: p_vaddr == p_offset */
    pfr_unwind_table_free(&t);
    signal(SIGUSR2, SIG_DFL);
}

/* ---- the whole table ---- */

/* From memory and from a descriptor: the same table. */
static void test_mem_same_as_fd(void **state)
{
    (void)state;
    const char *paths[] = {mainprog[0], mainprog[1], nostd, realign};
    for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
        pfr_unwind_table a, b;
        build_ok(paths[p], &a);
        size_t size;
        void *buf = slurp(paths[p], &size);
        assert_int_equal(build_buf(buf, size, 0, &b), 0);
        assert_int_equal(a.base, b.base);
        assert_int_equal(a.delta, b.delta);
        assert_int_equal(a.nrows, b.nrows);
        assert_memory_equal(a.rows, b.rows, a.nrows * sizeof(a.rows[0]));
        a.stats.cpu_ns = b.stats.cpu_ns = 0; /* the builds' own time, not the table */
        assert_memory_equal(&a.stats, &b.stats, sizeof(a.stats));
        pfr_unwind_table_free(&a);
        pfr_unwind_table_free(&b);
        free(buf);
    }
}

/* Gaps between FDEs are NONE rows, the table starts at the first FDE, and lookups below it
 * find nothing. */
static void test_find_and_gaps(void **state)
{
    (void)state;
    pfr_unwind_table t;
    build_ok(nostd, &t);
    const char *names[] = {"uw_inc", "uw_leaf", "uw_twice", "_start"};
    uint64_t a[4], n[4];
    for (size_t i = 0; i < 4; i++)
        lookup(nostd, names[i], &a[i], &n[i]);
    /* by address */
    for (size_t i = 0; i < 4; i++)
        for (size_t j = i + 1; j < 4; j++)
            if (a[j] < a[i]) {
                uint64_t x = a[i], y = n[i];
                a[i] = a[j], n[i] = n[j];
                a[j] = x, n[j] = y;
            }
    assert_int_equal(t.base, a[0]); /* the lowest function */
    assert_null(pfr_unwind_table_find(&t, t.base - 1));
    assert_null(pfr_unwind_table_find(&t, 0));
    size_t gaps = 0;
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(rule_at(&t, a[i]), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8));
        /* the padding after a function, up to the next one, has no FDE */
        if (i < 3 && a[i] + n[i] < a[i + 1]) {
            assert_int_equal(kind_at(&t, a[i] + n[i]), PFR_UW_NONE);
            assert_int_equal(kind_at(&t, a[i + 1] - 1), PFR_UW_NONE);
            gaps++;
        }
    }
    assert_true(gaps > 0);
    /* past the last FDE: the last row, NONE, whatever the address */
    assert_int_equal(kind_at(&t, a[3] + n[3]), PFR_UW_NONE);
    assert_ptr_equal(pfr_unwind_table_find(&t, UINT64_MAX), &t.rows[t.nrows - 1]);
    assert_ptr_equal(pfr_unwind_table_find(&t, t.base + (1ull << 33)), &t.rows[t.nrows - 1]);
    assert_int_equal(t.delta, 0x400000);
    /* at most a gap row before each FDE and the end row beside libdw's rows */
    assert_true(t.nrows <= t.stats.rows_in + t.stats.fdes + 1);
    pfr_unwind_table_free(&t);
    assert_null(pfr_unwind_table_find(&t, 0x401000));
}

/* No .eh_frame: the rows come from .debug_frame (plain and compressed), and are the same. */
static void test_debug_frame(void **state)
{
    (void)state;
    char eh[600], plain[600], packed[600], none[600];
    snprintf(eh, sizeof(eh), "%s-eh", nostd);
    snprintf(plain, sizeof(plain), "%s-dbg", nostd);
    snprintf(packed, sizeof(packed), "%s-dbgz", nostd);
    snprintf(none, sizeof(none), "%s-nocfi", nostd);
    /* -Ttext keeps the code where it is whatever the debug sections' size */
    const char *flags = NOSTD_FLAGS " -Wl,-Ttext=0x401000";
    sh("'%s' %s -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, flags, eh, UNWIND_PROGS);
    sh("'%s' %s -g -fno-asynchronous-unwind-tables -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, flags,
       plain, UNWIND_PROGS);
    sh("'%s' %s -g -gz=zlib -fno-asynchronous-unwind-tables -o '%s' '%s/uw_nostd.c'", UNWIND_GCC,
       flags, packed, UNWIND_PROGS);
    sh("'%s' %s -fno-asynchronous-unwind-tables -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, flags, none,
       UNWIND_PROGS);
    pfr_unwind_table a, b, z;
    build_ok(eh, &a);
    build_ok(plain, &b);
    build_ok(packed, &z);
    assert_false(a.stats.debug_frame);
    assert_true(b.stats.debug_frame && z.stats.debug_frame);
    assert_int_equal(a.base, b.base);
    assert_int_equal(a.nrows, b.nrows);
    assert_int_equal(b.nrows, z.nrows);
    /* same rules; only the last function's length may differ (no CFI directives in asm) */
    assert_memory_equal(a.rows, b.rows, (a.nrows - 1) * sizeof(a.rows[0]));
    assert_memory_equal(b.rows, z.rows, b.nrows * sizeof(b.rows[0]));
    pfr_unwind_table_free(&a);
    pfr_unwind_table_free(&b);
    pfr_unwind_table_free(&z);
    pfr_unwind_table t;
    assert_int_equal(build_path(none, 0, &t), -ENOENT);
    assert_null(t.rows);
    assert_int_equal(t.nrows, 0);
}

/* ---- files that are not what the builder wants ---- */

static void test_not_x86_64_elf(void **state)
{
    (void)state;
    pfr_unwind_table t;
    char err[128];
    assert_int_equal(build_buf("#!/bin/sh\necho hi\n", 18, 0, &t), -ENOEXEC);
    assert_int_equal(pfr_unwind_table_build_mem("", 0, 0, &t, err, sizeof(err)), -ENOEXEC);
    assert_int_equal(pfr_unwind_table_build(-1, 0, &t, err, sizeof(err)), -EBADF);
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0); /* not a regular file */
    assert_int_equal(pfr_unwind_table_build(pipefd[0], 0, &t, err, sizeof(err)), -ENOEXEC);
    close(pipefd[0]);
    close(pipefd[1]);
    /* errlen 0: no message, no write */
    assert_int_equal(pfr_unwind_table_build_mem("x", 1, 0, &t, NULL, 0), -ENOEXEC);

    size_t size;
    uint8_t *buf = slurp(nostd, &size);
    uint8_t *bad = malloc(size);
    assert_non_null(bad);
    /* 32-bit class, big-endian data, another machine, a relocatable object */
    const struct {
        size_t off;
        uint8_t val;
    } pokes[] = {
        {EI_CLASS, ELFCLASS32},
        {EI_DATA, ELFDATA2MSB},
        {offsetof(Elf64_Ehdr, e_machine), EM_AARCH64},
        {offsetof(Elf64_Ehdr, e_type), ET_REL},
        {offsetof(Elf64_Ehdr, e_type), ET_CORE},
        {0, 0x7e},
    };
    for (size_t i = 0; i < sizeof(pokes) / sizeof(pokes[0]); i++) {
        memcpy(bad, buf, size);
        bad[pokes[i].off] = pokes[i].val;
        assert_int_equal(build_buf(bad, size, 0, &t), -ENOEXEC);
    }
    /* an object file, as the compiler leaves it */
    char obj[600];
    snprintf(obj, sizeof(obj), "%s.o", mainprog[1]);
    assert_int_equal(build_path(obj, 0, &t), -ENOEXEC);
    free(bad);
    free(buf);
}

/* Cut anywhere, the file gives an error (its section headers are at the end), from memory and
 * from a descriptor; never a crash. */
static void test_truncated(void **state)
{
    (void)state;
    const char *paths[] = {nostd, mainprog[1]};
    for (size_t p = 0; p < 2; p++) {
        size_t size;
        uint8_t *buf = slurp(paths[p], &size);
        int fd = memfd_create("uw-cut", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, buf, size), (ssize_t)size);
        size_t step = size < 4096 ? 1 : 13;
        for (size_t cut = size; cut-- > 0;) {
            if (cut % step != 0 && cut > 256 && size - cut > 256)
                continue;
            pfr_unwind_table t;
            char err[256];
            int rc = build_buf(buf, cut, 0, &t);
            if (rc >= 0)
                fail_msg("%s cut at %zu: built", paths[p], cut);
            assert_int_equal(ftruncate(fd, (off_t)cut), 0);
            rc = pfr_unwind_table_build(fd, 0, &t, err, sizeof(err));
            if (rc >= 0)
                fail_msg("%s cut at %zu (fd): built", paths[p], cut);
            assert_true(rc == -ENOEXEC || rc == -ENOENT);
        }
        close(fd);
        free(buf);
    }
}

/* A Go program's own code keeps frame pointers: by default only its .eh_frame (the C code of
 * a cgo program) is read, never its .debug_frame (Go's code). */
static void test_go(void **state)
{
    (void)state;
    const char *marks[] = {"-DUW_GO_SECTION", "-DUW_GO_NOTE"};
    for (size_t i = 0; i < 2; i++) {
        char path[600], dbg[620];
        uint64_t a, n;
        pfr_unwind_table t;
        /* with .eh_frame: its rows, flag or not */
        snprintf(path, sizeof(path), "%s-go%zu", nostd, i);
        sh("'%s' " NOSTD_FLAGS " %s -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, marks[i], path,
           UNWIND_PROGS);
        lookup(path, "uw_leaf", &a, &n);
        for (unsigned flags = 0; flags <= PFR_UNWIND_BUILD_GO; flags += PFR_UNWIND_BUILD_GO) {
            assert_int_equal(build_path(path, flags, &t), 0);
            assert_int_equal(t.stats.debug_frame, 0);
            assert_int_equal(rule_at(&t, a), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8));
            pfr_unwind_table_free(&t);
        }
        /* with .debug_frame only: no table unless asked for */
        snprintf(dbg, sizeof(dbg), "%s-go%zu-dbg", nostd, i);
        sh("'%s' " NOSTD_FLAGS " -fno-asynchronous-unwind-tables -fno-unwind-tables -g %s -o "
           "'%s' '%s/uw_nostd.c'",
           UNWIND_GCC, marks[i], dbg, UNWIND_PROGS);
        lookup(dbg, "uw_leaf", &a, &n);
        assert_int_equal(build_path(dbg, 0, &t), -ENOTSUP);
        assert_int_equal(build_path(dbg, PFR_UNWIND_BUILD_GO, &t), 0);
        assert_int_equal(t.stats.debug_frame, 1);
        assert_int_equal(rule_at(&t, a), PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8));
        pfr_unwind_table_free(&t);
    }
    /* a real one when the toolchain is installed: the go command (stripped, no CFI at all) */
    if (UNWIND_GO[0]) {
        pfr_unwind_table t;
        assert_int_equal(build_path(UNWIND_GO, 0, &t), -ENOTSUP);
        assert_int_equal(build_path(UNWIND_GO, PFR_UNWIND_BUILD_GO, &t), -ENOENT);
    }
}

/* ---- forged files: segments and FDEs moved ---- */

static Elf64_Phdr *phdr(uint8_t *buf, size_t i)
{
    Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
    return (Elf64_Phdr *)(buf + eh->e_phoff) + i;
}

/* Two executable segments whose p_vaddr - p_offset differ: not one delta for the sampler. */
static void test_two_deltas(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = slurp(mainprog[1], &size);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
    uint64_t xdelta = 0;
    Elf64_Phdr *rw = NULL;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr *ph = phdr(buf, i);
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
            xdelta = ph->p_vaddr - ph->p_offset;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W))
            rw = ph;
    }
    assert_non_null(rw);
    assert_true(rw->p_vaddr - rw->p_offset != xdelta);
    rw->p_flags |= PF_X;
    pfr_unwind_table t;
    assert_int_equal(build_buf(buf, size, 0, &t), -ENOTSUP);
    /* and with no executable segment at all: nothing to unwind */
    for (size_t i = 0; i < eh->e_phnum; i++)
        phdr(buf, i)->p_flags &= ~(uint32_t)PF_X;
    assert_int_equal(build_buf(buf, size, 0, &t), -ENOEXEC);
    free(buf);
}

/* The file offsets of the initial-location fields of the FDEs of .eh_frame (gcc's "zR" CIEs,
 * pcrel sdata4, checked), with the field's own virtual address. */
struct fde_field {
    size_t off;
    uint64_t vaddr;
};

static size_t fde_fields(const char *path, const uint8_t *buf, struct fde_field *out, size_t max)
{
    uint64_t addr, size;
    lookup(path, ".eh_frame", &addr, &size);
    /* the section's file offset: the executable segment maps it with the text */
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    size_t off = 0;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(buf + eh->e_phoff) + i;
        if (ph->p_type == PT_LOAD && addr >= ph->p_vaddr && addr < ph->p_vaddr + ph->p_filesz)
            off = ph->p_offset + (addr - ph->p_vaddr);
    }
    assert_true(off != 0);
    size_t n = 0;
    for (size_t p = off; p + 8 <= off + size && n < max;) {
        uint32_t len, id;
        memcpy(&len, buf + p, 4);
        if (len == 0)
            break;
        memcpy(&id, buf + p + 4, 4);
        if (id == 0) {
            assert_string_equal((const char *)buf + p + 9, "zR");
            assert_int_equal(buf[p + 9 + 3 + 4], 0x1b); /* after "zR\0", caf, daf, ra, size */
        } else {
            out[n].off = p + 8;
            out[n].vaddr = addr + (p + 8 - off);
            n++;
        }
        p += 4 + len;
    }
    return n;
}

static void set_fde_start(uint8_t *buf, const struct fde_field *f, uint64_t start)
{
    int32_t rel = (int32_t)(start - f->vaddr);
    memcpy(buf + f->off, &rel, 4);
}

static uint64_t fde_start(const uint8_t *buf, const struct fde_field *f)
{
    int32_t rel;
    memcpy(&rel, buf + f->off, 4);
    return f->vaddr + (uint64_t)(int64_t)rel;
}

/* FDEs that overlap: a table still sorted and merged, the first FDE winning. */
static void test_overlapping_fdes(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = slurp(nostd, &size);
    struct fde_field f[16];
    size_t n = fde_fields(nostd, buf, f, 16);
    assert_true(n >= 3);
    uint64_t s0 = fde_start(buf, &f[0]);
    set_fde_start(buf, &f[1], s0 + 1); /* inside the first */
    set_fde_start(buf, &f[2], s0);     /* the same start */
    pfr_unwind_table t;
    assert_int_equal(build_buf(buf, size, 0, &t), 0);
    assert_int_equal(t.base, s0);
    pfr_unwind_table_free(&t);
    /* every FDE at one address */
    for (size_t i = 0; i < n; i++)
        set_fde_start(buf, &f[i], s0);
    assert_int_equal(build_buf(buf, size, 0, &t), 0);
    pfr_unwind_table_free(&t);
    /* FDEs outside the code are dropped; none left: no table */
    for (size_t i = 0; i < n; i++)
        set_fde_start(buf, &f[i], 0x100);
    assert_int_equal(build_buf(buf, size, 0, &t), -ENOENT);
    free(buf);
}

/* The file offset of a section that a PT_LOAD maps. */
static size_t mapped_offset(const char *path, const uint8_t *buf, const char *section,
                            uint64_t *size)
{
    uint64_t addr;
    lookup(path, section, &addr, size);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(buf + eh->e_phoff) + i;
        if (ph->p_type == PT_LOAD && addr >= ph->p_vaddr && addr < ph->p_vaddr + ph->p_filesz)
            return ph->p_offset + (addr - ph->p_vaddr);
    }
    fail_msg("%s: %s not mapped", path, section);
    return 0;
}

/* A forged .eh_frame_hdr table, every entry pointing at the table itself, changes nothing:
 * libdw is made to find FDEs by reading .eh_frame, whose every FDE was checked. */
static void test_forged_search_table(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = slurp(mainprog[1], &size);
    pfr_unwind_table a, b;
    assert_int_equal(build_buf(buf, size, 0, &a), 0);
    uint64_t hsize;
    size_t off = mapped_offset(mainprog[1], buf, ".eh_frame_hdr", &hsize);
    /* version 1, eh_frame_ptr sdata4 pcrel, count udata4, table sdata4 datarel */
    assert_int_equal(buf[off], 1);
    assert_int_equal(buf[off + 3], 0x3b);
    uint32_t count;
    memcpy(&count, buf + off + 8, 4);
    assert_true(count >= 4 && 12 + 8 * (uint64_t)count <= hsize);
    for (uint32_t i = 0; i < count; i++) {
        int32_t self = 0; /* datarel: the table's own start */
        memcpy(buf + off + 12 + 8 * i + 4, &self, 4);
    }
    assert_int_equal(build_buf(buf, size, 0, &b), 0);
    assert_int_equal(a.nrows, b.nrows);
    assert_memory_equal(a.rows, b.rows, a.nrows * sizeof(a.rows[0]));
    pfr_unwind_table_free(&a);
    pfr_unwind_table_free(&b);
    free(buf);
}

/* A register number past what a frame needs makes libdw allocate (and zero) 16 bytes for every
 * number up to it, and each remembered state copies the frame: such files are refused before
 * libdw runs their instructions. */
static void test_forged_registers(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof(path), "%s-long", nostd);
    sh("'%s' " NOSTD_FLAGS " -DUW_LONG -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, path, UNWIND_PROGS);
    size_t size;
    uint8_t *buf = slurp(path, &size);
    struct fde_field f[16];
    size_t n = fde_fields(path, buf, f, 16);
    /* uw_long's FDE, the longest: its instructions follow pc, range and the augmentation
     * length (0) */
    uint8_t *ins = NULL, *end = NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t len;
        memcpy(&len, buf + f[i].off - 8, 4);
        if (!ins || buf + f[i].off - 4 + len - (buf + f[i].off + 9) > end - ins) {
            ins = buf + f[i].off + 9;
            end = buf + f[i].off - 4 + len;
        }
    }
    assert_true(end - ins > 1000);
    pfr_unwind_table t;
    static const uint8_t reg255[] = {DW_CFA_undefined, 0xff, 0x01};
    memcpy(ins, reg255, sizeof(reg255)); /* fine */
    assert_int_equal(build_buf(buf, size, 0, &t), 0);
    pfr_unwind_table_free(&t);
    static const uint8_t reg2p27[] = {DW_CFA_undefined, 0x80, 0x80, 0x80, 0x40};
    memcpy(ins, reg2p27, sizeof(reg2p27));
    assert_int_equal(build_buf(buf, size, 0, &t), -ENOEXEC);
    static const uint8_t reg256[] = {DW_CFA_offset_extended, 0x80, 0x02, 0x01};
    memcpy(ins, reg256, sizeof(reg256));
    assert_int_equal(build_buf(buf, size, 0, &t), -ENOEXEC);
    /* 64 remembered states are fine, 65 are not */
    memset(ins, DW_CFA_remember_state, 64);
    memset(ins + 64, DW_CFA_nop, 8);
    assert_int_equal(build_buf(buf, size, 0, &t), 0);
    pfr_unwind_table_free(&t);
    ins[64] = DW_CFA_remember_state;
    assert_int_equal(build_buf(buf, size, 0, &t), -ENOEXEC);
    ins[10] = DW_CFA_restore_state; /* 64 deep at most again */
    assert_int_equal(build_buf(buf, size, 0, &t), 0);
    pfr_unwind_table_free(&t);
    free(buf);
}

/* Code over 4 GiB does not fit the rows' 32-bit pc. The program is linked at 4 GiB so that two
 * pcrel FDEs can reach 2 GiB below and above it; its segment is stretched to cover both. */
static void test_code_over_4gib(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof(path), "%s-high", nostd);
    sh("'%s' " NOSTD_FLAGS " -Wl,-Ttext-segment=0x100000000 -o '%s' '%s/uw_nostd.c'", UNWIND_GCC,
       path, UNWIND_PROGS);
    size_t size;
    uint8_t *buf = slurp(path, &size);
    pfr_unwind_table t;
    assert_int_equal(build_buf(buf, size, 0, &t), 0);
    assert_true(t.base >= 0x100000000ull);
    pfr_unwind_table_free(&t);

    struct fde_field f[16];
    size_t n = fde_fields(path, buf, f, 16);
    assert_true(n >= 2);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr *ph = phdr(buf, i);
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            ph->p_vaddr = 0;
            ph->p_memsz = 1ull << 40;
        }
    }
    set_fde_start(buf, &f[0], f[0].vaddr - 0x80000000ull);
    set_fde_start(buf, &f[n - 1], f[n - 1].vaddr + 0x7fffffffull);
    assert_int_equal(build_buf(buf, size, 0, &t), -EFBIG);
    /* just under 4 GiB is fine */
    set_fde_start(buf, &f[0], f[n - 1].vaddr + 0x7fffffffull - 0xfff00000ull);
    assert_int_equal(build_buf(buf, size, 0, &t), 0);
    assert_true(t.rows[t.nrows - 1].pc > 0xfff00000u);
    pfr_unwind_table_free(&t);
    free(buf);
}

/* ---- large tables: libdw's caches dropped chunk by chunk, .eh_frame read a window at a time,
 * the cap of rows ---- */

/* Every function of the file of MANY FDEs has its three rules where they belong: rows walked
 * over thousands of Dwarf_CFIs and .eh_frame windows are the rows of the whole, from a descriptor
 * (the window) and from memory (all of it there) alike. */
static void test_many_fdes(void **state)
{
    (void)state;
    pfr_unwind_table t, m;
    build_ok(many, &t);
    uint64_t first, last, n;
    lookup(many, "uw_many_first", &first, &n);
    lookup(many, "uw_many_last", &last, &n);
    assert_int_equal(last, first + 4 * (MANY - 1));
    assert_int_equal(t.base, first);
    assert_int_equal(t.nrows, 2 * MANY + 2);
    assert_int_equal(t.stats.fdes, MANY);
    assert_int_equal(t.stats.rows_in, 3 * MANY);
    assert_int_equal(t.stats.unsupported, 0);
    const uint32_t entry = PFR_UW_RULE(PFR_UW_CFA_RSP, 0, 8);
    const uint32_t pushed = PFR_UW_RULE(PFR_UW_CFA_RSP, -2, 16);
    for (uint64_t a = first; a <= last; a += 4) {
        if (rule_at(&t, a) != entry || rule_at(&t, a + 1) != pushed ||
            rule_at(&t, a + 2) != pushed || rule_at(&t, a + 3) != entry)
            fail_msg("function %llu: wrong rules", (unsigned long long)((a - first) / 4));
    }
    assert_int_equal(kind_at(&t, last + 4), PFR_UW_NONE);
    size_t size;
    void *buf = slurp(many, &size);
    assert_int_equal(build_buf(buf, size, 0, &m), 0);
    assert_int_equal(m.nrows, t.nrows);
    assert_memory_equal(m.rows, t.rows, t.nrows * sizeof(t.rows[0]));
    free(buf);
    pfr_unwind_table_free(&m);
    pfr_unwind_table_free(&t);
}

static int build_capped(const char *path, size_t max_rows, pfr_unwind_table *t, char *err,
                        size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    int rc = pfr_unwind_table_build_capped(fd, 0, max_rows, t, err, errlen);
    close(fd);
    return rc;
}

/* A table past the cap is refused (-E2BIG, no table, a reason), and as soon as it passes it;
 * at the cap or under it, the table is the same as with no cap. */
static void test_table_cap(void **state)
{
    (void)state;
    pfr_unwind_table all, t;
    char err[256];
    build_ok(many, &all);
    assert_int_equal(build_capped(many, all.nrows, &t, err, sizeof(err)), 0);
    assert_int_equal(t.nrows, all.nrows);
    assert_memory_equal(t.rows, all.rows, all.nrows * sizeof(all.rows[0]));
    pfr_unwind_table_free(&t);
    /* one row over: counted first (so many FDEs), then refused */
    assert_int_equal(build_capped(many, all.nrows - 1, &t, err, sizeof(err)), -E2BIG);
    assert_null(t.rows);
    assert_int_equal(t.nrows, 0);
    assert_non_null(strstr(err, "more than"));
    /* a small cap: refused where the rows pass it, near the start of the code */
    unsigned long long at = 0;
    assert_int_equal(build_capped(many, 1000, &t, err, sizeof(err)), -E2BIG);
    const char *p = strstr(err, " at 0x");
    assert_non_null(p);
    assert_int_equal(sscanf(p, " at %llx", &at), 1);
    assert_true(at > all.base && at < all.base + 4 * 1000); /* the 1001st row, of function 500 */
    pfr_unwind_table_free(&all);
    /* few FDEs, many rows: kept as they come (not counted first), refused all the same */
    char path[600];
    snprintf(path, sizeof(path), "%s-long", nostd);
    sh("'%s' " NOSTD_FLAGS " -DUW_LONG -o '%s' '%s/uw_nostd.c'", UNWIND_GCC, path, UNWIND_PROGS);
    build_ok(path, &all);
    assert_true(all.stats.fdes < 100 / 4 && all.nrows > 100);
    assert_int_equal(build_capped(path, 100, &t, err, sizeof(err)), -E2BIG);
    assert_null(t.rows);
    assert_int_equal(build_capped(path, all.nrows, &t, NULL, 0), 0); /* errlen 0: no message */
    assert_memory_equal(t.rows, all.rows, all.nrows * sizeof(all.rows[0]));
    pfr_unwind_table_free(&t);
    pfr_unwind_table_free(&all);
}

/* Peak RSS growth, in KiB, of a build of path within lim (NULL: the defaults), in a child
 * process; *rc its result. */
static long build_rss_kib_lim(const char *path, const pfr_unwind_limits *lim, int *rc)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        pfr_unwind_table t;
        char err[256];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        long res[2] = {pfr_unwind_table_build_limited(fd, 0, lim, &t, err, sizeof(err)), 0};
        getrusage(RUSAGE_SELF, &r1);
        res[1] = r1.ru_maxrss - r0.ru_maxrss;
        _exit(write(p[1], res, sizeof(res)) == sizeof(res) ? 0 : 1);
    }
    close(p[1]);
    long res[2];
    assert_int_equal(read(p[0], res, sizeof(res)), sizeof(res));
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    *rc = (int)res[0];
    return res[1];
}

/* The same, capped at max_rows (0: no cap). */
static long build_rss_kib(const char *path, size_t max_rows, int *rc)
{
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.max_rows = max_rows;
    return build_rss_kib_lim(path, &lim, rc);
}

/* What a build holds at its peak: its FDEs (16 bytes each), its rows (8 bytes each), and about
 * a MiB besides (a window of .eh_frame, a chunk of libdw's FDEs), not the 4 MiB .eh_frame nor
 * libdw's 80 bytes an FDE. Refused past the cap, it never holds the rows. */
static void test_build_memory(void **state)
{
    (void)state;
    int rc;
    long all = build_rss_kib(many, 0, &rc);
    assert_int_equal(rc, 0);
    long capped = build_rss_kib(many, MANY / 2, &rc);
    assert_int_equal(rc, -E2BIG);
    long fdes_kib = 16 * MANY / 1024, rows_kib = 8 * (2 * MANY + 2) / 1024;
    print_message("peak RSS growth: %ld KiB, %ld KiB capped (FDEs %ld KiB, rows %ld KiB)\n", all,
                  capped, fdes_kib, rows_kib);
    if (!UNDER_ASAN) {
        assert_true(all < fdes_kib + rows_kib + 2 * 1024);
        assert_true(capped < fdes_kib + 2 * 1024);
    }
}

/* max_bytes (the room a memory budget gives a build): a table whose FDE list and rows fit it is
 * the same as without it; one byte short of them it is refused (-ENOBUFS, not a refusal of the
 * file), and a table whose rows would pass it is counted first: its rows are never paid. */
static void test_limit_bytes(void **state)
{
    (void)state;
    pfr_unwind_table all, t;
    char err[256];
    build_ok(many, &all);
    uint64_t fdes = 16ull * MANY, rows = 8ull * all.nrows;
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.max_bytes = fdes + rows + 4096; /* (and a few CIEs) */
    int fd = open(many, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pfr_unwind_table_build_limited(fd, 0, &lim, &t, err, sizeof(err)), 0);
    assert_int_equal(t.nrows, all.nrows);
    assert_memory_equal(t.rows, all.rows, rows);
    pfr_unwind_table_free(&t);
    lim.max_bytes = fdes + rows - 1;
    assert_int_equal(pfr_unwind_table_build_limited(fd, 0, &lim, &t, err, sizeof(err)), -ENOBUFS);
    assert_null(t.rows);
    assert_non_null(strstr(err, "the memory budget leaves the build"));
    assert_int_equal(pfr_unwind_refusal(-ENOBUFS), -1);
    /* short of the FDE list itself: refused while they are read */
    lim.max_bytes = fdes / 2;
    assert_int_equal(pfr_unwind_table_build_limited(fd, 0, &lim, &t, err, sizeof(err)), -ENOBUFS);
    assert_non_null(strstr(err, " 0 rows pass"));
    close(fd);
    pfr_unwind_table_free(&all);
    /* room for half the rows: counted, refused, the rows never held */
    lim.max_bytes = fdes + rows / 2;
    int rc;
    long kib = build_rss_kib_lim(many, &lim, &rc);
    assert_int_equal(rc, -ENOBUFS);
    print_message("peak RSS growth refused for room: %ld KiB (FDEs %llu KiB, rows %llu KiB)\n", kib,
                  (unsigned long long)fdes / 1024, (unsigned long long)rows / 1024);
    if (!UNDER_ASAN)
        assert_true(kib < (long)(fdes / 1024) + 2 * 1024);
}

/* The .eh_frame window: copied only when needed, given back when dropped, and a page that
 * reads differently the second time (the file changed) is an error, never bytes unchecked. */
static void test_image_window(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = slurp(many, &size);
    uint64_t len;
    size_t off = mapped_offset(many, buf, ".eh_frame", &len);
    int fd = memfd_create("uw-window", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, size), (ssize_t)size);
    pfr_uw_image im;
    assert_int_equal(pfr_uw_image_load(&im, fd, size, 1 << 20, size), 0);
    assert_int_equal(im.win_lo, off);
    assert_true(im.win_hi >= off + len && im.drop_lo < im.drop_hi);
    assert_memory_equal(im.p, buf, 64);       /* the headers are there at once */
    uint64_t page = im.drop_lo + 4 * im.page; /* a page of FDEs */
    static const uint8_t zero[64];
    assert_memory_equal(im.p + page, zero, sizeof(zero)); /* not yet */
    assert_int_equal(pfr_uw_image_need(&im, im.p + page + 100, 8), 0);
    assert_memory_equal(im.p + page, buf + page, im.page);
    assert_int_equal(pfr_uw_image_held(&im), 1);
    pfr_uw_image_drop(&im);
    assert_int_equal(pfr_uw_image_held(&im), 0);
    assert_memory_equal(im.p + page, zero, sizeof(zero)); /* given back */
    assert_int_equal(pfr_uw_image_need(&im, im.p + page, 1), 0);
    assert_memory_equal(im.p + page, buf + page, im.page); /* the same again */
    pfr_uw_image_drop(&im);
    uint8_t changed = buf[page + 7] ^ 0xff;
    assert_int_equal(pwrite(fd, &changed, 1, (off_t)(page + 7)), 1);
    assert_int_equal(pfr_uw_image_need(&im, im.p + page, 1), -ESTALE);
    /* a page never copied before is just read */
    assert_int_equal(pwrite(fd, &changed, 1, (off_t)(page + 2 * im.page)), 1);
    assert_int_equal(pfr_uw_image_need(&im, im.p + page + 2 * im.page, 1), 0);
    /* the whole window, kept: dropping gives nothing back any more */
    assert_int_equal(pfr_uw_image_need_all(&im), -ESTALE); /* the changed page again */
    pfr_uw_image_free(&im);
    close(fd);
    free(buf);
}

/* ---- the limits of a build (issue 30): each refused just past it, not at it ---- */

/* Build path from its descriptor and from memory within lim; both give rc (returned). */
static int build_both_lim(const char *path, const pfr_unwind_limits *lim, char *err, size_t errlen)
{
    pfr_unwind_table t, m;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    int rc = pfr_unwind_table_build_limited(fd, 0, lim, &t, err, errlen);
    close(fd);
    size_t size;
    void *buf = slurp(path, &size);
    char merr[256];
    int rm = pfr_unwind_table_build_mem_limited(buf, size, 0, lim, &m, merr, sizeof(merr));
    free(buf);
    if (rc != rm)
        fail_msg("%s: %d from the file (%s), %d from memory (%s)", path, rc, err, rm, merr);
    if (rc == 0) {
        check_rows(&t);
        assert_int_equal(t.nrows, m.nrows);
    } else {
        assert_null(t.rows);
        assert_true(err[0] != '\0');
    }
    pfr_unwind_table_free(&t);
    pfr_unwind_table_free(&m);
    return rc;
}

static void hostile(const char *args, char *path, size_t pathlen, const char *name)
{
    snprintf(path, pathlen, "%s/%s", UNWIND_WORK, name);
    sh("'%s' %s '%s'", UNWIND_MAKE_HOSTILE, args, path);
}

static void test_refusal_names(void **state)
{
    (void)state;
    assert_int_equal(pfr_unwind_refusal(-EFBIG), PFR_UW_REFUSED_TOO_BIG);
    assert_int_equal(pfr_unwind_refusal(-EOVERFLOW), PFR_UW_REFUSED_TOO_MANY_FDES);
    assert_int_equal(pfr_unwind_refusal(-E2BIG), PFR_UW_REFUSED_TOO_MANY_ROWS);
    assert_int_equal(pfr_unwind_refusal(-ETIME), PFR_UW_REFUSED_TIME_BUDGET);
    assert_int_equal(pfr_unwind_refusal(-ENOEXEC), PFR_UW_REFUSED_BAD_FILE);
    assert_int_equal(pfr_unwind_refusal(0), -1);
    assert_int_equal(pfr_unwind_refusal(-ENOENT), -1);
    assert_string_equal(pfr_unwind_refusal_name(PFR_UW_REFUSED_TOO_BIG), "too_big");
    assert_string_equal(pfr_unwind_refusal_name(PFR_UW_REFUSED_TOO_MANY_FDES), "too_many_fdes");
    assert_string_equal(pfr_unwind_refusal_name(PFR_UW_REFUSED_TIME_BUDGET), "time_budget");
    assert_string_equal(pfr_unwind_refusal_name(PFR_UW_REFUSALS), "");
}

/* max_fdes: N FDEs pass a limit of N, not of N - 1; with an .eh_frame_hdr that counts them, the
 * file is refused before they are read. */
static void test_limit_fdes(void **state)
{
    (void)state;
    char plain[600], hdr[600], err[256];
    hostile("fdes 1000", plain, sizeof(plain), "fdes-1000");
    hostile("fdes 1000 hdr", hdr, sizeof(hdr), "fdes-1000-hdr");
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.max_fdes = 1000;
    assert_int_equal(build_both_lim(plain, &lim, err, sizeof(err)), 0);
    assert_int_equal(build_both_lim(hdr, &lim, err, sizeof(err)), 0);
    lim.max_fdes = 999;
    assert_int_equal(build_both_lim(plain, &lim, err, sizeof(err)), -EOVERFLOW);
    assert_non_null(strstr(err, "more than 999 FDEs"));
    assert_int_equal(build_both_lim(hdr, &lim, err, sizeof(err)), -EOVERFLOW);
    assert_non_null(strstr(err, ".eh_frame_hdr counts 1000 FDEs"));
}

/* max_eh_frame_bytes: the section's size, at the limit or over it. */
static void test_limit_eh_frame(void **state)
{
    (void)state;
    char path[600], err[256];
    hostile("fdes 1000", path, sizeof(path), "fdes-1000");
    uint64_t addr, size;
    lookup(path, ".eh_frame", &addr, &size);
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.max_eh_frame_bytes = size;
    assert_int_equal(build_both_lim(path, &lim, err, sizeof(err)), 0);
    lim.max_eh_frame_bytes = size - 1;
    assert_int_equal(build_both_lim(path, &lim, err, sizeof(err)), -EFBIG);
}

/* What .debug_frame's path would hold: the section and what libdw would inflate of every
 * compressed section (their declared sizes), from the headers alone. */
static uint64_t debug_held(const char *path)
{
    int fd;
    size_t shstrndx;
    Elf *e = elf_at(path, &fd, &shstrndx);
    uint64_t held = 0;
    unsigned compressed = 0;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn)) != NULL;) {
        GElf_Shdr sh;
        assert_non_null(gelf_getshdr(scn, &sh));
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (name && strcmp(name, ".debug_frame") == 0)
            held += sh.sh_size;
        GElf_Chdr ch;
        if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch)) {
            held += ch.ch_size;
            compressed++;
        }
    }
    elf_end(e);
    close(fd);
    assert_true(compressed > 1); /* .debug_frame and the others */
    return held;
}

/* max_held_bytes, on .debug_frame's path: a program compressed with -gz passes at what it would
 * hold, not a byte under; from a descriptor, the copies of the headers and sections count too. */
static void test_limit_held(void **state)
{
    (void)state;
    char packed[600], err[256];
    snprintf(packed, sizeof(packed), "%s-held", nostd);
    sh("'%s' " NOSTD_FLAGS " -g -gz=zlib -fno-asynchronous-unwind-tables -o '%s' "
       "'%s/uw_nostd.c'",
       UNWIND_GCC, packed, UNWIND_PROGS);
    uint64_t held = debug_held(packed);
    size_t size;
    void *buf = slurp(packed, &size);
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    pfr_unwind_table t;
    lim.max_held_bytes = held;
    assert_int_equal(pfr_unwind_table_build_mem_limited(buf, size, 0, &lim, &t, err, sizeof(err)),
                     0);
    assert_true(t.stats.debug_frame);
    pfr_unwind_table_free(&t);
    lim.max_held_bytes = held - 1;
    assert_int_equal(pfr_unwind_table_build_mem_limited(buf, size, 0, &lim, &t, err, sizeof(err)),
                     -EFBIG);
    assert_non_null(strstr(err, "more to inflate"));
    free(buf);
    lim.max_held_bytes = 256; /* not even the headers */
    assert_int_equal(build_both_lim(packed, &lim, err, sizeof(err)), -EFBIG);
    lim.max_held_bytes = 1 << 20;
    assert_int_equal(build_both_lim(packed, &lim, err, sizeof(err)), 0);
}

/* max_fdes on .debug_frame's path: a quarter of it (libdw keeps each FDE it reads there). */
static void test_limit_debug_fdes(void **state)
{
    (void)state;
    char plain[600], err[256];
    snprintf(plain, sizeof(plain), "%s-dbgfdes", nostd);
    sh("'%s' " NOSTD_FLAGS " -g -fno-asynchronous-unwind-tables -o '%s' '%s/uw_nostd.c'",
       UNWIND_GCC, plain, UNWIND_PROGS);
    pfr_unwind_table t;
    build_ok(plain, &t);
    assert_true(t.stats.debug_frame);
    uint64_t n = t.stats.fdes;
    pfr_unwind_table_free(&t);
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.max_fdes = 4 * n;
    assert_int_equal(build_both_lim(plain, &lim, err, sizeof(err)), 0);
    lim.max_fdes = 4 * n - 1;
    assert_int_equal(build_both_lim(plain, &lim, err, sizeof(err)), -EOVERFLOW);
    assert_non_null(strstr(err, "in .debug_frame"));
}

/* max_cpu_ns: a build past its CPU time is refused; within it, the same table. */
static void test_limit_cpu(void **state)
{
    (void)state;
    char err[256];
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.max_cpu_ns = 1;
    assert_int_equal(build_both_lim(many, &lim, err, sizeof(err)), -ETIME);
    assert_non_null(strstr(err, "CPU time budget"));
    lim.max_cpu_ns = 120ull * 1000000000;
    assert_int_equal(build_both_lim(many, &lim, err, sizeof(err)), 0);
    /* cancelled (by a stopping recorder): no table */
    atomic_bool cancel = true;
    lim.cancel = &cancel;
    assert_int_equal(build_both_lim(many, &lim, err, sizeof(err)), -ECANCELED);
    assert_int_equal(pfr_unwind_refusal(-ECANCELED), -1);
}

/* cpu_share: a build at 25 % of a core sleeps three times as long as it runs. */
static void test_cpu_share(void **state)
{
    (void)state;
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.cpu_share = 25;
    pfr_unwind_table t;
    char err[256];
    int fd = open(many, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct timespec c0, c1, w0, w1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_MONOTONIC, &w0);
    assert_int_equal(pfr_unwind_table_build_limited(fd, 0, &lim, &t, err, sizeof(err)), 0);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    close(fd);
    check_rows(&t);
    pfr_unwind_table_free(&t);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
    double wall = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9;
    print_message("cpu %.3f s, wall %.3f s at a share of 25 %%\n", cpu, wall);
    assert_true(cpu > 0.05); /* several slices */
    /* It sleeps 3 times what it ran, but for the last slice (10 ms) and the work after the
     * last tick (the rows sorted and merged: ~3 % of the CPU in a sanitized build, on a busy
     * host more), so at least 0.9 of the 4x; a build that ignored its share would take 1x. */
    assert_true(wall >= 0.9 * 4 * cpu - 4 * 0.010);
}

/* What the yield hook of test_yield did. */
struct yielded {
    unsigned calls, burns;
    long burn_ns;
};

static long thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000l + t.tv_nsec;
}

/* A caller's other work between the build's steps: the first six calls each burn burn_ns of the
 * thread's CPU (more than the build's whole budget, all told). */
static bool burn_cpu(void *ctx)
{
    struct yielded *y = ctx;
    y->calls++;
    if (y->burns == 6)
        return false;
    y->burns++;
    for (long t0 = thread_cpu_ns(); thread_cpu_ns() - t0 < y->burn_ns;)
        ;
    return true;
}

/* lim.yield: called between the build's steps (the unwinder builds small files there); the CPU
 * it takes counts neither in the build's budget nor in its share, and the table is the same. */
static void test_yield(void **state)
{
    (void)state;
    pfr_unwind_table want, t;
    long c0 = thread_cpu_ns();
    build_ok(many, &want);
    long budget = 3 * (thread_cpu_ns() - c0) + 50 * 1000000l;
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    struct yielded y = {.burn_ns = budget / 4}; /* 1.5 times the budget in all */
    lim.yield = burn_cpu;
    lim.yield_ctx = &y;
    lim.max_cpu_ns = (uint64_t)budget;
    lim.cpu_share = 50;
    char err[256];
    int fd = open(many, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    int rc = pfr_unwind_table_build_limited(fd, 0, &lim, &t, err, sizeof(err));
    close(fd);
    print_message("yield: %u calls, %u burnt %.0f ms each (the budget %.0f ms): %d %s\n", y.calls,
                  y.burns, y.burn_ns / 1e6, budget / 1e6, rc, err);
    assert_int_equal(rc, 0);
    assert_int_equal(y.burns, 6);
    assert_true(y.calls > 6); /* every few hundred microseconds of the build */
    assert_int_equal(t.nrows, want.nrows);
    assert_memory_equal(t.rows, want.rows, want.nrows * sizeof(*t.rows));
    pfr_unwind_table_free(&t);
    pfr_unwind_table_free(&want);
}

/* Issue 30's first file: a 1 MB .debug_frame that inflates to 1 GiB (the recorder went from 72
 * to 1,091 MB). Refused before anything is inflated. */
static void test_hostile_bomb(void **state)
{
    (void)state;
    char path[600];
    hostile("bomb 1073741824", path, sizeof(path), "bomb");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size < 2 << 20);
    int rc;
    long kib = build_rss_kib_lim(path, NULL, &rc);
    print_message("1 GiB bomb: refused (%d), peak RSS growth %ld KiB\n", rc, kib);
    assert_int_equal(rc, -EFBIG);
    assert_int_equal(pfr_unwind_refusal(rc), PFR_UW_REFUSED_TOO_BIG);
    assert_true(kib < (UNDER_ASAN ? 64 : 8) * 1024);
    /* what the limit stops: the same file, allowed 2 GiB, is inflated (a 16 MiB one, to keep
     * the test small) */
    hostile("bomb 16777216", path, sizeof(path), "bomb-16m");
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    lim.max_held_bytes = 2ull << 30;
    kib = build_rss_kib_lim(path, &lim, &rc);
    assert_int_equal(rc, -ENOENT); /* zeros: no CFI */
    assert_true(kib >= 16 * 1024);
}

/* Issue 30's second file: .eh_frame of more small FDEs than the limit (15 million took 240 MB
 * and 14 s). Refused once past it, holding no more than its FDEs; at once when .eh_frame_hdr
 * says so. */
static void test_hostile_fdes(void **state)
{
    (void)state;
    char plain[600], hdr[600], args[64];
    snprintf(args, sizeof(args), "fdes %u", PFR_UNWIND_MAX_FDES_DEFAULT + 1);
    hostile(args, plain, sizeof(plain), "fdes-over");
    snprintf(args, sizeof(args), "fdes %u hdr", PFR_UNWIND_MAX_FDES_DEFAULT + 1);
    hostile(args, hdr, sizeof(hdr), "fdes-over-hdr");
    int rc;
    long kib = build_rss_kib_lim(plain, NULL, &rc);
    long fdes_kib = 16l * PFR_UNWIND_MAX_FDES_DEFAULT / 1024;
    print_message("%u FDEs: refused (%d), peak RSS growth %ld KiB (the FDEs: %ld KiB)\n",
                  PFR_UNWIND_MAX_FDES_DEFAULT + 1, rc, kib, fdes_kib);
    assert_int_equal(rc, -EOVERFLOW);
    assert_int_equal(pfr_unwind_refusal(rc), PFR_UW_REFUSED_TOO_MANY_FDES);
    if (!UNDER_ASAN)
        assert_true(kib < fdes_kib + 4 * 1024);
    kib = build_rss_kib_lim(hdr, NULL, &rc);
    print_message("the same, counted by .eh_frame_hdr: refused (%d), %ld KiB\n", rc, kib);
    assert_int_equal(rc, -EOVERFLOW);
    assert_true(kib < (UNDER_ASAN ? 16 : 2) * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leaf),
        cmocka_unit_test(test_frame_pointer),
        cmocka_unit_test(test_plt),
        cmocka_unit_test(test_start_is_end),
        cmocka_unit_test(test_realign_deref),
        cmocka_unit_test(test_unsupported_rules),
        cmocka_unit_test(test_row_cap),
        cmocka_unit_test(test_signal_trampoline),
        cmocka_unit_test(test_mem_same_as_fd),
        cmocka_unit_test(test_find_and_gaps),
        cmocka_unit_test(test_debug_frame),
        cmocka_unit_test(test_not_x86_64_elf),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_go),
        cmocka_unit_test(test_two_deltas),
        cmocka_unit_test(test_overlapping_fdes),
        cmocka_unit_test(test_code_over_4gib),
        cmocka_unit_test(test_forged_search_table),
        cmocka_unit_test(test_forged_registers),
        cmocka_unit_test(test_many_fdes),
        cmocka_unit_test(test_table_cap),
        cmocka_unit_test(test_build_memory),
        cmocka_unit_test(test_limit_bytes),
        cmocka_unit_test(test_image_window),
        cmocka_unit_test(test_refusal_names),
        cmocka_unit_test(test_limit_fdes),
        cmocka_unit_test(test_limit_eh_frame),
        cmocka_unit_test(test_limit_held),
        cmocka_unit_test(test_limit_debug_fdes),
        cmocka_unit_test(test_limit_cpu),
        cmocka_unit_test(test_cpu_share),
        cmocka_unit_test(test_yield),
        cmocka_unit_test(test_hostile_bomb),
        cmocka_unit_test(test_hostile_fdes),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
