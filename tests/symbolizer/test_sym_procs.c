/* Integration tests: real processes (C PIE, non-PIE, shared library, stripped; C++; Go PIE,
 * non-PIE, stripped) built at test time, run, snapshotted and symbolized against the addresses
 * they print about themselves; processes that exit, deleted binaries, another mount namespace;
 * real kallsyms; the cache under a tight bound. Needs root for map_files and unshare. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "sym_elf.h"
#include "symbolizer.h"
#include "testutil.h"

static bool have_cxx, have_go;

static const char *bin(const char *name)
{
    static char path[8][512];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof(path[0]), "%s/%s", SYM_WORK, name);
    return p;
}

static int marker(const char *src, const char *m)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", SYM_PROGS, src);
    int line = pfr_tu_marker_line(path, m);
    assert_true(line > 0);
    return line;
}

static int build_all(void **state)
{
    (void)state;
    const char *w = SYM_WORK, *p = SYM_PROGS, *cc = SYM_GCC;
    if (pfr_tu_sh("rm -rf '%s' && mkdir -p '%s/mnt'", w, w))
        return -1;
    int rc = 0;
    rc |= pfr_tu_sh("%s -O2 -g -fPIE -pie -o %s/t_pie %s/target.c", cc, w, p);
    rc |= pfr_tu_sh("%s -O2 -g -fno-pie -no-pie -o %s/t_nopie %s/target.c", cc, w, p);
    rc |= pfr_tu_sh("%s -O2 -g -fPIC -shared -o %s/libtarget.so %s/libtarget.c", cc, w, p);
    rc |= pfr_tu_sh("%s -O2 -g -DWITH_LIB -o %s/t_lib %s/target.c -L%s -ltarget -Wl,-rpath,%s", cc,
                    w, p, w, w);
    /* objdump's address of the puts stub is the oracle for the PLT names */
    rc |= pfr_tu_sh("%s -O0 -o %s/t_plt %s/plt.c && objdump -d %s/t_plt | "
                    "sed -n 's/^0*\\([0-9a-f]*\\) <puts@plt>:$/\\1/p' > %s/t_plt.addr",
                    cc, w, p, w, w);
    /* stripped: the executable loses everything; the library keeps its .dynsym */
    rc |= pfr_tu_sh("cp %s/t_pie %s/t_strip && strip --strip-all %s/t_strip", w, w, w);
    rc |= pfr_tu_sh("%s -O2 -g -fPIC -shared -o %s/libtarget2.so %s/libtarget.c && "
                    "strip --strip-all %s/libtarget2.so",
                    cc, w, p, w);
    rc |= pfr_tu_sh("%s -O2 -g -DWITH_LIB -o %s/t_lib2 %s/target.c -L%s -ltarget2 -Wl,-rpath,%s",
                    cc, w, p, w, w);
    if (rc)
        return -1;
    have_cxx = SYM_GXX[0] && pfr_tu_sh("%s -O2 -g -o %s/t_cpp %s/target.cpp", SYM_GXX, w, p) == 0;
    if (SYM_GO[0]) {
        const char *env = "CGO_ENABLED=0 GOFLAGS= GO111MODULE=off";
        have_go =
            pfr_tu_sh(
                "cd %s && %s GOCACHE=%s/gocache GOPATH=%s/gopath HOME=%s %s build -o %s/t_go "
                "target.go && %s GOCACHE=%s/gocache GOPATH=%s/gopath HOME=%s %s build "
                "-buildmode=pie -o %s/t_gopie target.go && %s GOCACHE=%s/gocache "
                "GOPATH=%s/gopath HOME=%s %s build -ldflags='-s -w' -o %s/t_gostrip target.go",
                p, env, w, w, w, SYM_GO, w, env, w, w, w, SYM_GO, w, env, w, w, w, SYM_GO, w) == 0;
    }
    if (!have_cxx)
        fprintf(stderr, "no g++: C++ tests skipped\n");
    if (!have_go)
        fprintf(stderr, "no Go toolchain: Go tests skipped\n");
    return 0;
}

static int cleanup(void **state)
{
    (void)state;
    pfr_tu_sh("umount %s/mnt 2>/dev/null; rm -rf '%s'", SYM_WORK, SYM_WORK);
    return 0;
}

static pfr_symbolizer *new_sym(size_t max_bytes, bool no_dwarf)
{
    pfr_symbolizer *s;
    pfr_sym_opts o = {.max_cache_bytes = max_bytes, .no_dwarf = no_dwarf};
    assert_int_equal(pfr_symbolizer_new(&o, &s), 0);
    return s;
}

static void run(struct tu_child *c, const char *path)
{
    char *argv[] = {(char *)path, NULL};
    assert_int_equal(pfr_tu_start(c, argv), 0);
}

/* Start the test program name and snapshot it in a new symbolizer (the caller's). */
static pfr_symbolizer *run_snapped(struct tu_child *c, const char *name, bool no_dwarf)
{
    run(c, bin(name));
    pfr_symbolizer *s = new_sym(0, no_dwarf);
    assert_int_equal(pfr_symbolizer_add_process(s, c->pid), 0);
    return s;
}

/* Symbolize addr of pid and check the outermost frame's name, file suffix and line. */
static void expect_frame(pfr_symbolizer *s, pid_t pid, uint64_t addr, const char *fn,
                         const char *file_suffix, int line)
{
    pfr_sym_frame fr[8];
    int n = pfr_symbolize_user(s, pid, addr, fr, 8);
    assert_true(n >= 1);
    const pfr_sym_frame *f = &fr[n - 1];
    if (strcmp(f->function, fn) != 0)
        fail_msg("0x%" PRIx64 ": got %s, want %s", addr, f->function, fn);
    if (file_suffix && !pfr_tu_ends_with(f->file, file_suffix))
        fail_msg("%s: file %s, want *%s", fn, f->file, file_suffix);
    if (!file_suffix)
        assert_string_equal(f->file, "");
    assert_int_equal(f->line, line);
}

/* The probe's return address (minus one: inside the call) sits in inlined_helper's body,
 * inlined into outer_function. */
static void expect_inline(pfr_symbolizer *s, pid_t pid, uint64_t ret)
{
    pfr_sym_frame fr[8];
    int n = pfr_symbolize_user(s, pid, ret - 1, fr, 8);
    assert_int_equal(n, 2);
    assert_string_equal(fr[0].function, "inlined_helper");
    assert_true(pfr_tu_ends_with(fr[0].file, "target.c"));
    assert_int_equal(fr[0].line, marker("target.c", "INLINE_CALL_LINE"));
    assert_string_equal(fr[1].function, "outer_function");
    assert_int_equal(fr[1].line, marker("target.c", "OUTER_CALL_LINE"));
    /* with room for one frame, the enclosing function is the one kept */
    assert_int_equal(pfr_symbolize_user(s, pid, ret - 1, fr, 1), 1);
    assert_string_equal(fr[0].function, "outer_function");
}

static void check_c_target(const char *name)
{
    struct tu_child c;
    pfr_symbolizer *s = run_snapped(&c, name, false);
    uint64_t leaf = pfr_tu_addr(&c, "leaf_function");
    int line = marker("target.c", "LEAF_LINE");
    expect_frame(s, c.pid, leaf, "leaf_function", "target.c", line);
    expect_frame(s, c.pid, leaf + 3, "leaf_function", "target.c", line);
    expect_inline(s, c.pid, pfr_tu_addr(&c, "probe_ret"));
    pfr_sym_frame fr[2];
    assert_int_equal(pfr_symbolize_user(s, c.pid, leaf, fr, 2), 1);
    assert_true(pfr_tu_ends_with(fr[0].module, name));
    uint64_t start, pgoff;
    assert_true(pfr_tu_mapping(c.pid, leaf, &start, &pgoff));
    assert_true(fr[0].offset == leaf - start + pgoff);
    pfr_sym_stats st;
    pfr_symbolizer_stats(s, &st);
    assert_true(st.files_parsed >= 2); /* the program and at least libc */
    assert_true(st.cache_bytes > 0);
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

/* A PLT stub is named after the function it jumps to, as perf and objdump name it. */
static void test_plt_stub(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof(path), "%s.addr", bin("t_plt"));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    unsigned long long want = 0;
    assert_int_equal(fscanf(f, "%llx", &want), 1);
    fclose(f);
    int fd = open(bin("t_plt"), O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(e);
    struct pfr_sym_elf_syms syms = {0};
    char err[128];
    assert_int_equal(pfr_sym_elf_read_syms(e, &syms, 1 << 20, NULL, err, sizeof(err)), 0);
    const struct pfr_sym_elf_sym *stub = pfr_sym_elf_find(&syms, want + 4);
    assert_non_null(stub);
    assert_string_equal(pfr_sym_strpool_get(&syms.names, stub->name), "puts@plt");
    assert_true(stub->addr == want);
    for (size_t i = 0; i < syms.n; i++) /* a stub never takes a defined function's name */
        assert_string_not_equal(pfr_sym_strpool_get(&syms.names, syms.v[i].name), "main@plt");
    pfr_sym_elf_syms_free(&syms);
    elf_end(e);
    close(fd);
}

static void test_c_pie(void **state)
{
    (void)state;
    check_c_target("t_pie");
}

static void test_c_nopie(void **state)
{
    (void)state;
    check_c_target("t_nopie");
}

static void test_c_shared(void **state)
{
    (void)state;
    struct tu_child c;
    pfr_symbolizer *s = run_snapped(&c, "t_lib", false);
    uint64_t lib = pfr_tu_addr(&c, "lib_function");
    expect_frame(s, c.pid, lib + 1, "lib_function", "libtarget.c",
                 marker("libtarget.c", "LIB_LINE"));
    pfr_sym_frame fr[2];
    pfr_symbolize_user(s, c.pid, lib, fr, 2);
    assert_true(pfr_tu_ends_with(fr[0].module, "/libtarget.so"));
    expect_frame(s, c.pid, pfr_tu_addr(&c, "leaf_function"), "leaf_function", "target.c",
                 marker("target.c", "LEAF_LINE"));
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

/* A file the snapshot maps is found by its device and inode: the executable under the path
 * /proc/PID/exe gives, a library, and nothing for a file not mapped or a process not known. */
static void test_file_path(void **state)
{
    (void)state;
    struct tu_child c;
    pfr_symbolizer *s = run_snapped(&c, "t_lib", false);
    char proc[64], want[4096], got[4096];
    snprintf(proc, sizeof(proc), "/proc/%d/exe", (int)c.pid);
    ssize_t n = readlink(proc, want, sizeof(want) - 1);
    assert_true(n > 0);
    want[n] = '\0';
    struct stat exe, lib, other;
    assert_int_equal(stat(proc, &exe), 0);
    assert_int_equal(pfr_symbolizer_file_path(s, c.pid, exe.st_dev, exe.st_ino, got, sizeof(got)),
                     0);
    assert_string_equal(got, want);
    /* too small a buffer is no answer, not a cut path */
    assert_int_equal(pfr_symbolizer_file_path(s, c.pid, exe.st_dev, exe.st_ino, got, 4), -ENOENT);
    assert_int_equal(stat(bin("libtarget.so"), &lib), 0);
    assert_int_equal(pfr_symbolizer_file_path(s, c.pid, lib.st_dev, lib.st_ino, got, sizeof(got)),
                     0);
    assert_true(pfr_tu_ends_with(got, "/libtarget.so"));
    assert_int_equal(stat(SYM_PROGS "/target.c", &other), 0); /* not mapped */
    assert_int_equal(
        pfr_symbolizer_file_path(s, c.pid, other.st_dev, other.st_ino, got, sizeof(got)), -ENOENT);
    assert_int_equal(
        pfr_symbolizer_file_path(s, getpid(), exe.st_dev, exe.st_ino, got, sizeof(got)), -ENOENT);
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

/* pid's executable mappings as the kernel would list them at its exit (read from its maps). */
static size_t exit_maps_of(pid_t pid, pfr_sym_exit_map *v, size_t cap)
{
    char path[64], line[4096], perms[5], name[4096];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    size_t n = 0;
    while (n < cap && fgets(line, sizeof(line), f)) {
        unsigned long start, end, off, ino;
        unsigned maj, min;
        name[0] = '\0';
        if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %4095s", &start, &end, perms, &off, &maj, &min,
                   &ino, name) < 7 ||
            perms[2] != 'x')
            continue;
        v[n++] = (pfr_sym_exit_map){.start = start,
                                    .end = end,
                                    .pgoff = off,
                                    .dev = makedev(maj, min),
                                    .ino = ino,
                                    .kind = strcmp(name, "[vdso]") == 0 ? PFR_SYM_EXIT_VDSO
                                            : ino                       ? PFR_SYM_EXIT_FILE
                                                                        : PFR_SYM_EXIT_ANON};
    }
    fclose(f);
    return n;
}

/* A process that exited before its maps were read is named from the mappings listed at its exit,
 * by the paths another process's snapshot gave the same files; a file never seen is left out, a
 * fuller snapshot is kept, and a list out of order is refused. */
static void test_exit_maps(void **state)
{
    (void)state;
    struct tu_child a, b;
    pfr_symbolizer *s = run_snapped(&a, "t_lib", false);
    run(&b, bin("t_lib"));
    pfr_sym_exit_map v[64];
    size_t n = exit_maps_of(b.pid, v, 63);
    assert_true(n >= 4); /* t_lib, libtarget.so, libc, ld.so */
    pid_t pid = b.pid;
    uint64_t leaf = pfr_tu_addr(&b, "leaf_function"), lib = pfr_tu_addr(&b, "lib_function");
    assert_int_equal(pfr_tu_stop(&b), 0);
    /* a file no snapshot has seen, mapped past the others */
    v[n++] = (pfr_sym_exit_map){.start = 0x7fff00000000ull,
                                .end = 0x7fff00001000ull,
                                .dev = 1,
                                .ino = 12345,
                                .kind = PFR_SYM_EXIT_FILE};
    assert_int_equal(pfr_symbolizer_process_files(s, pid), 0);
    int files = pfr_symbolizer_set_exit_maps(s, pid, v, n);
    assert_true(files >= 4);
    assert_int_equal(pfr_symbolizer_process_files(s, pid), (size_t)files);
    expect_frame(s, pid, leaf, "leaf_function", "target.c", marker("target.c", "LEAF_LINE"));
    expect_frame(s, pid, lib + 1, "lib_function", "libtarget.c", marker("libtarget.c", "LIB_LINE"));
    pfr_sym_frame fr[2];
    assert_int_equal(pfr_symbolize_user(s, pid, lib, fr, 2), 1);
    assert_true(pfr_tu_ends_with(fr[0].module, "/libtarget.so"));
    assert_int_equal(pfr_symbolize_user(s, pid, 0x7fff00000010ull, fr, 2), 1);
    assert_string_equal(fr[0].module, "");
    /* the paths snapshots saw, by file */
    struct stat so;
    char path[4096];
    assert_int_equal(stat(bin("libtarget.so"), &so), 0);
    assert_int_equal(pfr_symbolizer_known_path(s, so.st_dev, so.st_ino, path, sizeof(path)), 0);
    assert_true(pfr_tu_ends_with(path, "/libtarget.so"));
    assert_int_equal(pfr_symbolizer_known_path(s, so.st_dev, so.st_ino, path, 4), -ENOENT);
    assert_int_equal(pfr_symbolizer_known_path(s, 1, 12345, path, sizeof(path)), -ENOENT);
    /* a snapshot naming more files stays */
    assert_int_equal(pfr_symbolizer_set_exit_maps(s, a.pid, v, 1), 0);
    expect_frame(s, a.pid, pfr_tu_addr(&a, "lib_function") + 1, "lib_function", "libtarget.c",
                 marker("libtarget.c", "LIB_LINE"));
    /* out of order */
    pfr_sym_exit_map swapped[2] = {v[1], v[0]};
    assert_int_equal(pfr_symbolizer_set_exit_maps(s, 424242, swapped, 2), -EINVAL);
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&a), 0);
}

/* A page of file late mapped below everything else a test program maps (a library loaded after
 * its snapshot): the exit's lists stay by address with it first. */
static pfr_sym_exit_map late_map(const struct stat *late)
{
    return (pfr_sym_exit_map){.start = 0x10000,
                              .end = 0x11000,
                              .dev = late->st_dev,
                              .ino = late->st_ino,
                              .kind = PFR_SYM_EXIT_FILE};
}

/* Code a process mapped after its snapshot (a dlopen) from a file no snapshot saw: its exit's
 * mappings name it once its path is learned (from the exit's notification), and then replace
 * the snapshot, which had fewer files. */
static void test_exit_learned_path(void **state)
{
    (void)state;
    struct tu_child a;
    pfr_symbolizer *s = run_snapped(&a, "t_lib", false);
    pfr_sym_exit_map v[64];
    size_t n = exit_maps_of(a.pid, v, 63);
    size_t had = pfr_symbolizer_process_files(s, a.pid);
    assert_true(had >= 4);
    struct stat late;
    assert_int_equal(stat(bin("t_pie"), &late), 0);
    /* below everything else mapped, so the list stays by address */
    memmove(v + 1, v, n * sizeof(v[0]));
    v[0] = late_map(&late);
    n++;
    assert_int_equal(pfr_symbolizer_set_exit_maps(s, a.pid, v, n), 0); /* nothing more named */
    assert_int_equal(pfr_symbolizer_learn_path(s, late.st_dev, late.st_ino, "t_pie"), -EINVAL);
    assert_int_equal(pfr_symbolizer_learn_path(s, late.st_dev, late.st_ino, bin("t_pie")), 0);
    assert_int_equal(pfr_symbolizer_set_exit_maps(s, a.pid, v, n), (int)had + 1);
    pfr_sym_frame fr[2];
    assert_int_equal(pfr_symbolize_user(s, a.pid, 0x10010, fr, 2), 1);
    assert_true(pfr_tu_ends_with(fr[0].module, "/t_pie"));
    expect_frame(s, a.pid, pfr_tu_addr(&a, "lib_function") + 1, "lib_function", "libtarget.c",
                 marker("libtarget.c", "LIB_LINE"));
    /* the files it names now, for the sampler */
    pfr_sym_file_id ids[8];
    size_t k = pfr_symbolizer_named_files(s, a.pid, ids, 8);
    assert_int_equal(k, had + 1);
    bool found = false;
    for (size_t i = 0; i < k && i < 8; i++)
        found |= ids[i].dev == late.st_dev && ids[i].ino == late.st_ino;
    assert_true(found);
    assert_int_equal(pfr_symbolizer_named_files(s, 424242, ids, 8), 0);
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&a), 0);
}

/* The list of only the mappings a process's samples met (the sampler's, at its exit): added to
 * the snapshot where it has a mapping the snapshot lacks (its own replacing what they overlap),
 * ignored where the snapshot has them all, taken alone for a process never snapshotted. */
static void test_exit_sampled_merge(void **state)
{
    (void)state;
    struct tu_child a;
    pfr_symbolizer *s = run_snapped(&a, "t_lib", false);
    pfr_sym_exit_map all[64];
    size_t n = exit_maps_of(a.pid, all, 64);
    size_t had = pfr_symbolizer_process_files(s, a.pid);
    assert_true(had >= 4 && n >= 4);
    uint64_t lib = pfr_tu_addr(&a, "lib_function");
    /* what the samples met, all in the snapshot: nothing taken */
    assert_int_equal(pfr_symbolizer_merge_exit_maps(s, a.pid, all, 2), 0);
    /* a library loaded after the snapshot, below the rest */
    struct stat late;
    assert_int_equal(stat(bin("t_pie"), &late), 0);
    assert_int_equal(pfr_symbolizer_learn_path(s, late.st_dev, late.st_ino, bin("t_pie")), 0);
    pfr_sym_exit_map v[2] = {late_map(&late), all[0]};
    assert_int_equal(pfr_symbolizer_merge_exit_maps(s, a.pid, v, 2), (int)had + 1);
    assert_int_equal(pfr_symbolizer_process_files(s, a.pid), had + 1);
    pfr_sym_frame fr[2];
    assert_int_equal(pfr_symbolize_user(s, a.pid, 0x10010, fr, 2), 1);
    assert_true(pfr_tu_ends_with(fr[0].module, "/t_pie"));
    expect_frame(s, a.pid, lib + 1, "lib_function", "libtarget.c",
                 marker("libtarget.c", "LIB_LINE"));
    assert_int_equal(pfr_symbolizer_merge_exit_maps(s, a.pid, v, 2), 0); /* had already */
    /* a mapping over one of the snapshot's: the list's, more recent, replaces it */
    const struct pfr_sym_exit_map *at_lib = NULL;
    for (size_t i = 0; i < n; i++)
        if (lib >= all[i].start && lib < all[i].end)
            at_lib = &all[i];
    assert_non_null(at_lib);
    pfr_sym_exit_map over = {.start = at_lib->start,
                             .end = at_lib->end,
                             .dev = late.st_dev,
                             .ino = late.st_ino,
                             .kind = PFR_SYM_EXIT_FILE};
    assert_true(pfr_symbolizer_merge_exit_maps(s, a.pid, &over, 1) > 0);
    assert_int_equal(pfr_symbolize_user(s, a.pid, lib + 1, fr, 2), 1);
    assert_true(pfr_tu_ends_with(fr[0].module, "/t_pie"));
    /* a process never snapshotted: the list is its snapshot */
    assert_int_equal(pfr_symbolizer_merge_exit_maps(s, 424243, v, 2), 2);
    assert_int_equal(pfr_symbolize_user(s, 424243, 0x10010, fr, 2), 1);
    assert_true(pfr_tu_ends_with(fr[0].module, "/t_pie"));
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&a), 0);
}

/* A program on overlayfs (a container's root): snapshots see the overlay's file, while the
 * kernel's walk at exit names the layer's file (another device, the same inode number) at its
 * path inside the layer. A process of it never snapshotted is still named from its exit once
 * that path is learned. */
static void test_exit_overlay(void **state)
{
    (void)state;
    char dir[] = "/tmp/pfr-sym-ovl-XXXXXX", merged[600], lower[600], prog[700];
    assert_non_null(mkdtemp(dir));
    snprintf(merged, sizeof(merged), "%s/merged", dir);
    snprintf(lower, sizeof(lower), "%s/lower/t_pie", dir);
    assert_int_equal(
        pfr_tu_sh("cd '%s' && mkdir lower upper work merged && cp '%s' lower/", dir, bin("t_pie")),
        0);
    if (pfr_tu_sh("mount -t overlay overlay -o lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work "
                  "'%s'",
                  dir, dir, dir, merged) != 0) {
        pfr_tu_sh("rm -rf '%s'", dir);
        skip(); /* no overlayfs here */
    }
    snprintf(prog, sizeof(prog), "%s/t_pie", merged);
    struct stat layer, ovl;
    assert_int_equal(stat(lower, &layer), 0);
    assert_int_equal(stat(prog, &ovl), 0);
    assert_true(layer.st_dev != ovl.st_dev);
    struct tu_child a, b;
    run(&a, prog);
    pfr_symbolizer *s = new_sym(0, false);
    assert_int_equal(pfr_symbolizer_add_process(s, a.pid), 0); /* teaches the overlay's path */
    run(&b, prog);                                             /* never snapshotted */
    pfr_sym_exit_map v[64];
    size_t n = exit_maps_of(b.pid, v, 64);
    size_t swapped = 0;
    for (size_t i = 0; i < n; i++) /* as the kernel's walk reports them */
        if (v[i].dev == ovl.st_dev && v[i].ino == ovl.st_ino) {
            v[i].dev = layer.st_dev;
            v[i].ino = layer.st_ino;
            swapped++;
        }
    assert_true(swapped > 0);
    size_t others = (size_t)pfr_symbolizer_set_exit_maps(s, b.pid, v, n); /* libc, ld.so */
    pfr_sym_frame fr[2];
    uint64_t leaf = pfr_tu_addr(&b, "leaf_function");
    assert_int_equal(pfr_symbolize_user(s, b.pid, leaf, fr, 2), 1);
    assert_string_not_equal(fr[0].function, "leaf_function");
    /* a path that is not the end of the overlay file's: not taken for it */
    assert_int_equal(pfr_symbolizer_learn_path(s, layer.st_dev, layer.st_ino, "/elsewhere/t_pie"),
                     0);
    assert_int_equal(pfr_symbolizer_set_exit_maps(s, b.pid, v, n), (int)others + 1);
    assert_int_equal(pfr_symbolize_user(s, b.pid, leaf, fr, 2), 1);
    assert_string_not_equal(fr[0].function, "leaf_function"); /* that file does not exist */
    pfr_symbolizer_free(s);
    /* the path the kernel walks: inside the layer */
    s = new_sym(0, false);
    assert_int_equal(pfr_symbolizer_add_process(s, a.pid), 0);
    pfr_symbolizer_set_exit_maps(s, b.pid, v, n);
    assert_int_equal(pfr_symbolizer_learn_path(s, layer.st_dev, layer.st_ino, "/t_pie"), 0);
    assert_int_equal(pfr_symbolizer_set_exit_maps(s, b.pid, v, n), (int)others + 1);
    expect_frame(s, b.pid, leaf, "leaf_function", "target.c", marker("target.c", "LEAF_LINE"));
    assert_int_equal(pfr_symbolize_user(s, b.pid, leaf, fr, 2), 1);
    assert_string_equal(fr[0].module, prog);
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&a), 0);
    assert_int_equal(pfr_tu_stop(&b), 0);
    /* lazily: a recorder of another test running meanwhile profiles every process, and its
     * symbol cache may keep the overlay's file open a while */
    assert_int_equal(pfr_tu_sh("umount -l '%s' && rm -rf '%s'", merged, dir), 0);
}

/* Writes pid's maps into dir/PID/maps, without the lines naming skip (if not NULL). */
static void fake_maps(const char *dir, pid_t pid, const char *skip)
{
    char src[64], dst[512], line[4096];
    snprintf(src, sizeof(src), "/proc/%d/maps", (int)pid);
    snprintf(dst, sizeof(dst), "%s/%d/maps", dir, (int)pid);
    FILE *in = fopen(src, "re"), *out = fopen(dst, "we");
    assert_non_null(in);
    assert_non_null(out);
    while (fgets(line, sizeof(line), in))
        if (!skip || !strstr(line, skip))
            fputs(line, out);
    fclose(in);
    fclose(out);
}

/* A library mapped after a live process's snapshot: an address in it leads to one re-read of the
 * maps at once, however recent the snapshot (then no more than one per REFRESH_NS). The maps are
 * a copy in a fake /proc, so the test decides what each read finds. */
static void test_refresh_after_snapshot(void **state)
{
    (void)state;
    struct tu_child c;
    run(&c, bin("t_lib"));
    char dir[] = "/tmp/pfr-sym-proc-XXXXXX", sub[512], root[600];
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof(sub), "%s/%d", dir, (int)c.pid);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(root, sizeof(root), "%s/root", sub);
    assert_int_equal(symlink("/", root), 0);
    uint64_t lib = pfr_tu_addr(&c, "lib_function") + 1;
    pfr_sym_opts o = {.proc_root = dir};
    pfr_sym_frame fr[2];
    for (int round = 0; round < 2; round++) {
        pfr_symbolizer *s;
        assert_int_equal(pfr_symbolizer_new(&o, &s), 0);
        fake_maps(dir, c.pid, "libtarget.so"); /* the snapshot: before the "dlopen" */
        assert_int_equal(pfr_symbolizer_add_process(s, c.pid), 0);
        if (round == 1) {
            /* the one early re-read used up while the library is still missing */
            assert_int_equal(pfr_symbolize_user(s, c.pid, lib, fr, 2), 1);
            assert_string_equal(fr[0].module, "");
        }
        fake_maps(dir, c.pid, NULL); /* the library is mapped now */
        assert_int_equal(pfr_symbolize_user(s, c.pid, lib, fr, 2), 1);
        if (round == 0)
            assert_string_equal(fr[0].function, "lib_function");
        else
            assert_string_equal(fr[0].module, ""); /* within REFRESH_NS of the last re-read */
        pfr_symbolizer_free(s);
    }
    pfr_tu_sh("rm -rf '%s'", dir);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

static void test_c_stripped(void **state)
{
    (void)state;
    struct tu_child c;
    pfr_symbolizer *s = run_snapped(&c, "t_strip", false);
    uint64_t leaf = pfr_tu_addr(&c, "leaf_function"), start, pgoff;
    assert_true(pfr_tu_mapping(c.pid, leaf, &start, &pgoff));
    char want[64];
    snprintf(want, sizeof(want), "t_strip+0x%" PRIx64, leaf - start + pgoff);
    pfr_sym_stats before, after;
    pfr_symbolizer_stats(s, &before);
    expect_frame(s, c.pid, leaf, want, NULL, 0);
    pfr_symbolizer_stats(s, &after);
    assert_true(after.unresolved_frames == before.unresolved_frames + 1);
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);

    /* a stripped library still names its exported functions from .dynsym */
    run(&c, bin("t_lib2"));
    s = new_sym(0, false);
    assert_int_equal(pfr_symbolizer_add_process(s, c.pid), 0);
    expect_frame(s, c.pid, pfr_tu_addr(&c, "lib_function") + 2, "lib_function", NULL, 0);
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

static void test_no_dwarf(void **state)
{
    (void)state;
    struct tu_child c;
    pfr_symbolizer *s = run_snapped(&c, "t_pie", true);
    expect_frame(s, c.pid, pfr_tu_addr(&c, "leaf_function"), "leaf_function", NULL, 0);
    pfr_sym_frame fr[8];
    assert_int_equal(pfr_symbolize_user(s, c.pid, pfr_tu_addr(&c, "probe_ret") - 1, fr, 8), 1);
    assert_string_equal(fr[0].function, "outer_function");
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

static void test_cpp(void **state)
{
    (void)state;
    if (!have_cxx)
        fail_msg("g++ missing: the C++ target was not built");
    struct tu_child c;
    pfr_symbolizer *s = run_snapped(&c, "t_cpp", false);
    expect_frame(s, c.pid, pfr_tu_addr(&c, "make"), "ns::Widget::make(int)", "target.cpp",
                 marker("target.cpp", "CPP_LINE"));
    expect_frame(s, c.pid, pfr_tu_addr(&c, "twice") + 1, "long ns::twice<long>(long)", "target.cpp",
                 marker("target.cpp", "return v + v;"));
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

static void check_go(const char *name, bool no_dwarf)
{
    if (!have_go)
        fail_msg("go missing: the Go targets were not built");
    struct tu_child c;
    pfr_symbolizer *s = run_snapped(&c, name, no_dwarf);
    uint64_t hot = pfr_tu_addr(&c, "hotFunction"), method = pfr_tu_addr(&c, "method");
    const char *file = no_dwarf ? NULL : "target.go";
    expect_frame(s, c.pid, hot, "main.hotFunction", file,
                 no_dwarf ? 0 : marker("target.go", "GO_LINE"));
    expect_frame(s, c.pid, method + 4, "main.(*T).Method", file,
                 no_dwarf ? 0 : marker("target.go", "func (t *T) Method"));
    /* a runtime function, found by walking up from main's own code is not needed: any address
     * in the binary's text between the two must name some Go function */
    pfr_sym_frame fr[8];
    int n = pfr_symbolize_user(s, c.pid, hot - 0x40, fr, 8);
    assert_true(n >= 1 && strchr(fr[n - 1].function, '.') != NULL);
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

static void test_go(void **state)
{
    (void)state;
    check_go("t_go", false);
    check_go("t_go", true);
}

static void test_go_pie(void **state)
{
    (void)state;
    check_go("t_gopie", false);
}

/* -ldflags='-s -w': no .symtab, no DWARF; names and lines come from .gopclntab */
static void test_go_stripped(void **state)
{
    (void)state;
    check_go("t_gostrip", false);
    check_go("t_gostrip", true);
}

/* Snapshot, then the process exits and is reaped: its frames still resolve, file:line too. */
static void test_exited(void **state)
{
    (void)state;
    struct tu_child c;
    pfr_symbolizer *s = run_snapped(&c, "t_lib", false);
    pid_t pid = c.pid;
    assert_int_equal(pfr_tu_stop(&c), 0);
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
    assert_int_not_equal(access(proc, F_OK), 0);
    expect_frame(s, pid, c.addrs[0], "leaf_function", "target.c", marker("target.c", "LEAF_LINE"));
    expect_inline(s, pid, pfr_tu_addr(&c, "probe_ret"));
    expect_frame(s, pid, pfr_tu_addr(&c, "lib_function"), "lib_function", "libtarget.c",
                 marker("libtarget.c", "LIB_LINE"));
    pfr_symbolizer_free(s);
}

/* The binary is deleted while it runs: reached through /proc/PID/map_files. */
static void test_deleted(void **state)
{
    (void)state;
    assert_int_equal(pfr_tu_sh("cp %s %s", bin("t_pie"), bin("t_del")), 0);
    struct tu_child c;
    run(&c, bin("t_del"));
    assert_int_equal(unlink(bin("t_del")), 0);
    pfr_symbolizer *s = new_sym(0, false);
    assert_int_equal(pfr_symbolizer_add_process(s, c.pid), 0);
    uint64_t leaf = pfr_tu_addr(&c, "leaf_function");
    expect_frame(s, c.pid, leaf, "leaf_function", "target.c", marker("target.c", "LEAF_LINE"));
    pfr_sym_frame fr[2];
    pfr_symbolize_user(s, c.pid, leaf, fr, 2);
    assert_true(pfr_tu_ends_with(fr[0].module, "/t_del")); /* without " (deleted)" */
    char proc[64], path[4096];
    struct stat st;
    snprintf(proc, sizeof(proc), "/proc/%d/exe", (int)c.pid);
    assert_int_equal(stat(proc, &st), 0);
    assert_int_equal(pfr_symbolizer_file_path(s, c.pid, st.st_dev, st.st_ino, path, sizeof(path)),
                     0);
    assert_string_equal(path, bin("t_del"));
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

/* A binary only visible in the process's own mount namespace (as in a container). */
static void test_mount_namespace(void **state)
{
    (void)state;
    char script[1024];
    snprintf(script, sizeof(script),
             "exec unshare -m --propagation private sh -c 'mount -t tmpfs none %s/mnt && "
             "cp %s %s/mnt/t_ns && exec %s/mnt/t_ns'",
             SYM_WORK, bin("t_pie"), SYM_WORK, SYM_WORK);
    if (pfr_tu_sh("unshare -m --propagation private true 2>/dev/null") != 0)
        skip();
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct tu_child c;
    assert_int_equal(pfr_tu_start(&c, argv), 0);
    char host_path[512];
    snprintf(host_path, sizeof(host_path), "%s/mnt/t_ns", SYM_WORK);
    assert_int_not_equal(access(host_path, F_OK), 0); /* not on the host */
    pfr_symbolizer *s = new_sym(0, false);
    assert_int_equal(pfr_symbolizer_add_process(s, c.pid), 0);
    expect_frame(s, c.pid, pfr_tu_addr(&c, "leaf_function"), "leaf_function", "target.c",
                 marker("target.c", "LEAF_LINE"));
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&c), 0);
}

static void test_kernel(void **state)
{
    (void)state;
    FILE *f = fopen("/proc/kallsyms", "r");
    assert_non_null(f);
    char line[512], name[256], type, mod[256] = "";
    uint64_t sched = 0, maddr = 0, a;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%" SCNx64 " %c %255s", &a, &type, name) != 3)
            continue;
        if (strcmp(name, "schedule") == 0 && (type == 'T' || type == 't'))
            sched = a;
        /* a module's function; not a BPF program's (listed as [bpf] while any is loaded:
         * another test's sampler, say), which the symbolizer names as the kernel's */
        if (!maddr && (type == 't' || type == 'T') && strchr(line, '[') &&
            strstr(line, "__builtin") == NULL && strstr(line, "[bpf]") == NULL &&
            sscanf(line, "%*s %*c %*s %255s", mod) == 1)
            maddr = a;
    }
    fclose(f);
    if (sched == 0)
        skip(); /* kptr_restrict hides addresses from us too */
    pfr_symbolizer *s = new_sym(0, false);
    pfr_sym_frame fr;
    assert_int_equal(pfr_symbolize_kernel(s, sched + 1, &fr), 1);
    assert_string_equal(fr.function, "schedule");
    assert_string_equal(fr.module, "[kernel]");
    assert_true(fr.offset == sched + 1);
    if (maddr) {
        assert_int_equal(pfr_symbolize_kernel(s, maddr, &fr), 1);
        assert_string_equal(fr.module, mod);
    }
    assert_int_equal(pfr_symbolize_kernel(s, 0x1000, &fr), 1);
    assert_string_equal(fr.function, "[unknown]");
    pfr_symbolizer_free(s);
}

/* Our own [vdso] mapping names its functions. */
static void test_vdso(void **state)
{
    (void)state;
    uint64_t base = getauxval(AT_SYSINFO_EHDR);
    if (!base)
        skip();
    pfr_symbolizer *s = new_sym(0, false);
    assert_int_equal(pfr_symbolizer_add_process(s, getpid()), 0);
    int named = 0;
    for (uint64_t a = base; a < base + 0x2000; a += 8) {
        pfr_sym_frame fr[2];
        pfr_symbolize_user(s, getpid(), a, fr, 2);
        if (strstr(fr[0].function, "clock_gettime") || strstr(fr[0].function, "gettimeofday"))
            named++;
    }
    assert_true(named > 0);
    pfr_symbolizer_free(s);
}

/* One pass over the processes: add them all, then symbolize their first address three times.
 * With a bound, the cache must stay under it after every call and names must stay right. */
static size_t cache_pass(struct tu_child *c, int n, size_t max, bool no_dwarf, uint64_t *evictions)
{
    pfr_symbolizer *s = new_sym(max ? max : 1ull << 30, no_dwarf);
    size_t peak = 0;
    pfr_sym_stats st;
    for (int i = 0; i < n; i++) {
        assert_int_equal(pfr_symbolizer_add_process(s, c[i].pid), 0);
        pfr_symbolizer_stats(s, &st);
        peak = st.cache_bytes > peak ? st.cache_bytes : peak;
        if (max)
            assert_true(st.cache_bytes <= max);
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < n; i++) {
            pfr_sym_frame fr[8];
            int k = pfr_symbolize_user(s, c[i].pid, c[i].addrs[0], fr, 8);
            assert_true(k >= 1);
            const char *fn = fr[k - 1].function;
            if (strcmp(fn, "leaf_function") != 0 && strcmp(fn, "main.hotFunction") != 0 &&
                strcmp(fn, "ns::Widget::make(int)") != 0)
                fail_msg("pid %d round %d: got %s", (int)c[i].pid, round, fn);
            pfr_symbolizer_stats(s, &st);
            peak = st.cache_bytes > peak ? st.cache_bytes : peak;
            if (max && st.cache_bytes > max)
                fail_msg("cache %" PRIu64 " bytes over its bound %zu", st.cache_bytes, max);
        }
    }
    pfr_symbolizer_stats(s, &st);
    *evictions = st.evictions;
    if (max)
        assert_true(st.cache_misses > 0 && st.cache_hits > 0);
    assert_true(pfr_symbolizer_memory(s) >= st.cache_bytes);
    pfr_symbolizer_free(s);
    return peak;
}

/* A cache smaller than what the processes need: files are evicted and read again, the bound
 * holds after every call, and names come out right. Measured first without a bound, then with
 * 60 % of that. DWARF pass on C and C++ only: Go's debug sections alone would dominate. */
static void test_cache_bound(void **state)
{
    (void)state;
    const char *names[] = {"t_pie", "t_nopie", "t_lib", "t_cpp", "t_go"};
    struct tu_child c[5];
    int n = 0;
    for (int i = 0; i < 5; i++) {
        if ((i == 3 && !have_cxx) || (i == 4 && !have_go))
            continue;
        run(&c[n++], bin(names[i]));
    }
    int n_c = have_go ? n - 1 : n;
    uint64_t ev;
    size_t peak = cache_pass(c, n, 0, true, &ev);
    assert_int_equal(ev, 0);
    cache_pass(c, n, peak * 6 / 10, true, &ev);
    assert_true(ev > 0);
    peak = cache_pass(c, n_c, 0, false, &ev);
    cache_pass(c, n_c, peak * 6 / 10, false, &ev);
    assert_true(ev > 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(pfr_tu_stop(&c[i]), 0);
}

/* Files are shared: a second process of the same program parses nothing new. */
static void test_shared_cache(void **state)
{
    (void)state;
    struct tu_child a, b;
    run(&a, bin("t_lib"));
    run(&b, bin("t_lib"));
    pfr_symbolizer *s = new_sym(0, false);
    assert_int_equal(pfr_symbolizer_add_process(s, a.pid), 0);
    pfr_sym_stats st1, st2;
    pfr_symbolizer_stats(s, &st1);
    assert_int_equal(pfr_symbolizer_add_process(s, b.pid), 0);
    pfr_symbolizer_stats(s, &st2);
    assert_true(st2.files_parsed == st1.files_parsed);
    assert_true(st2.cache_hits > st1.cache_hits);
    assert_int_equal(st2.processes, 2);
    expect_frame(s, b.pid, pfr_tu_addr(&b, "lib_function"), "lib_function", "libtarget.c",
                 marker("libtarget.c", "LIB_LINE"));
    pfr_symbolizer_free(s);
    assert_int_equal(pfr_tu_stop(&a), 0);
    assert_int_equal(pfr_tu_stop(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plt_stub), /* (a comment keeps the list one per line) */
        cmocka_unit_test(test_c_pie),
        cmocka_unit_test(test_c_nopie),
        cmocka_unit_test(test_c_shared),
        cmocka_unit_test(test_file_path),
        cmocka_unit_test(test_exit_maps),
        cmocka_unit_test(test_exit_learned_path),
        cmocka_unit_test(test_exit_sampled_merge),
        cmocka_unit_test(test_exit_overlay),
        cmocka_unit_test(test_refresh_after_snapshot),
        cmocka_unit_test(test_c_stripped),
        cmocka_unit_test(test_no_dwarf),
        cmocka_unit_test(test_cpp),
        cmocka_unit_test(test_go),
        cmocka_unit_test(test_go_pie),
        cmocka_unit_test(test_go_stripped),
        cmocka_unit_test(test_exited),
        cmocka_unit_test(test_deleted),
        cmocka_unit_test(test_mount_namespace),
        cmocka_unit_test(test_kernel),
        cmocka_unit_test(test_vdso),
        cmocka_unit_test(test_cache_bound),
        cmocka_unit_test(test_shared_cache),
    };
    return cmocka_run_group_tests(tests, build_all, cleanup);
}
