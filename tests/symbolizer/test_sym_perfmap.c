/* Units of the perf map reader (sym_perfmap): lines, overlaps, lines split across reads, the
 * byte budget, and how the file is opened (the process's own, inside its root). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "sym_perfmap.h"
#include "symbolizer.h"

#define BIG (1u << 20)

/* A map read from an in-memory file the test appends to. */
static void mem_map(struct pfr_sym_perfmap *m)
{
    pfr_sym_perfmap_init(m);
    m->fd = memfd_create("perf-map", MFD_CLOEXEC);
    assert_true(m->fd >= 0);
}

static void append(struct pfr_sym_perfmap *m, const char *text, size_t len, size_t budget)
{
    assert_int_equal(lseek(m->fd, 0, SEEK_END) >= 0, 1);
    assert_int_equal(write(m->fd, text, len), (ssize_t)len);
    char err[256];
    assert_int_equal(pfr_sym_perfmap_update(m, budget, err, sizeof(err)), 0);
}

static void add(struct pfr_sym_perfmap *m, const char *text)
{
    append(m, text, strlen(text), BIG);
}

static const char *name_at(struct pfr_sym_perfmap *m, uint64_t addr)
{
    const struct pfr_perfmap_ent *e = pfr_sym_perfmap_find(m, addr);
    return e ? pfr_sym_perfmap_name(m, e) : NULL;
}

static void test_lines(void **state)
{
    (void)state;
    struct pfr_sym_perfmap m;
    mem_map(&m);
    add(&m, "1000 100 LazyCompile:*leafHeavy /srv/app.js:1\n"
            "0x2000 0x10 JS:~work /srv/app.js:3:14\r\n"
            "3000 20 Interpreter.main(java.lang.String[]) with spaces\n"
            "zz 10 not hex\n"
            "4000 0 zero size\n"
            "5000 10\n"
            "ffffffffffffffff 2 wraps around\n"
            "12345678901234567 1 seventeen digits\n"
            "6000 10 control\x01char\n"
            "7000 10 tab\tis fine\n");
    assert_int_equal(m.lines, 10);
    assert_int_equal(m.bad_lines, 6);
    assert_int_equal(m.n, 4);
    assert_string_equal(name_at(&m, 0x1000), "LazyCompile:*leafHeavy /srv/app.js:1");
    assert_string_equal(name_at(&m, 0x10ff), "LazyCompile:*leafHeavy /srv/app.js:1");
    assert_null(name_at(&m, 0x1100));
    assert_null(name_at(&m, 0xfff));
    assert_string_equal(name_at(&m, 0x200f), "JS:~work /srv/app.js:3:14"); /* no '\r' */
    assert_string_equal(name_at(&m, 0x3000), "Interpreter.main(java.lang.String[]) with spaces");
    assert_string_equal(name_at(&m, 0x7000), "tab\tis fine");
    assert_null(name_at(&m, 0x6000));
    /* the file rewritten in place under the same size: no name rather than a wrong one */
    assert_int_equal(pwrite(m.fd, "2000", 4, 0), 4);
    assert_null(name_at(&m, 0x1000));
    pfr_sym_perfmap_free(&m);
}

/* Code freed and its addresses reused: the line read last wins, in one read or across reads. */
static void test_newest_wins(void **state)
{
    (void)state;
    struct pfr_sym_perfmap m;
    mem_map(&m);
    add(&m, "1000 100 old\n"
            "2000 100 keeps\n"
            "1080 100 straddles\n"); /* overlaps old's end: old is gone */
    assert_null(name_at(&m, 0x1000));
    assert_string_equal(name_at(&m, 0x1100), "straddles");
    assert_string_equal(name_at(&m, 0x2000), "keeps");
    add(&m, "1000 80 first again\n"
            "1000 80 second\n"   /* same start, later line */
            "1fff 2 bridges\n"); /* overlaps keeps' first byte: keeps is gone */
    assert_string_equal(name_at(&m, 0x1000), "second");
    assert_string_equal(name_at(&m, 0x1080), "straddles");
    assert_string_equal(name_at(&m, 0x1fff), "bridges");
    assert_null(name_at(&m, 0x2002));
    for (size_t i = 1; i < m.n; i++) /* disjoint and sorted */
        assert_true(m.v[i - 1].end <= m.v[i].start);
    /* within one read too: a later line inside an earlier one's range ends that one */
    add(&m, "9000 1000 big, older\n"
            "9100 10 small later\n");
    assert_string_equal(name_at(&m, 0x9100), "small later");
    assert_null(name_at(&m, 0x9000));
    pfr_sym_perfmap_free(&m);
}

/* A line cut by a read is taken once its end comes; an endless line is skipped to its end. */
static void test_split_lines(void **state)
{
    (void)state;
    struct pfr_sym_perfmap m;
    mem_map(&m);
    add(&m, "1000 10 one\n2000 10 tw");
    assert_int_equal(m.off, 12);
    assert_int_equal(m.lines, 1);
    assert_null(name_at(&m, 0x2000));
    add(&m, "o\n");
    assert_string_equal(name_at(&m, 0x2000), "two");
    assert_string_equal(name_at(&m, 0x1000), "one");

    char *long_line = malloc(PFR_PERFMAP_MAX_LINE + 16);
    assert_non_null(long_line);
    memset(long_line, 'x', PFR_PERFMAP_MAX_LINE + 16);
    memcpy(long_line, "3000 10 ", 8);
    append(&m, long_line, PFR_PERFMAP_MAX_LINE + 16, BIG);
    assert_int_equal(m.off, 12 + 12 + PFR_PERFMAP_MAX_LINE + 16); /* skipped, not kept waiting */
    assert_int_equal(m.bad_lines, 1);
    add(&m, "xxxx\n4000 10 four\n");
    assert_int_equal(m.bad_lines, 1); /* the rest of the long line is not a second bad line */
    assert_null(name_at(&m, 0x3000));
    assert_string_equal(name_at(&m, 0x4000), "four");
    free(long_line);
    pfr_sym_perfmap_free(&m);
}

/* Past its budget a map takes no more lines; overwritten code does not count. */
static void test_budget(void **state)
{
    (void)state;
    struct pfr_sym_perfmap m;
    mem_map(&m);
    char line[128];
    const size_t budget = 64u << 10;
    /* the same 64 bytes of addresses rewritten with new names: few live entries */
    for (int i = 0; i < 4000 && !m.full; i++) {
        int n = snprintf(line, sizeof(line), "1000 40 rewritten-%06d-padding-padding\n", i);
        append(&m, line, (size_t)n, budget);
    }
    assert_false(m.full);
    assert_int_equal(m.n, 1);
    assert_string_equal(name_at(&m, 0x1000), "rewritten-003999-padding-padding");
    assert_true(pfr_sym_perfmap_bytes(&m) <= budget);
    /* distinct code: the budget ends it */
    for (int i = 0; i < 4000 && !m.full; i++) {
        int n = snprintf(line, sizeof(line), "%x 10 distinct-%06d\n", 0x100000 + i * 16, i);
        append(&m, line, (size_t)n, budget);
    }
    assert_true(m.full);
    assert_true(pfr_sym_perfmap_bytes(&m) <= budget);
    assert_int_equal(m.n, budget / sizeof(struct pfr_perfmap_ent));
    uint32_t lines = m.lines;
    uint64_t off = m.off;
    add(&m, "2000 10 late\n");
    assert_int_equal(m.off, off);
    assert_int_equal(m.lines, lines);
    assert_string_equal(name_at(&m, 0x100000), "distinct-000000"); /* what it holds, it names */
    pfr_sym_perfmap_free(&m);
}

/* ---- opening: a fake /proc whose process root is a directory of the test ---- */

struct fake {
    char dir[64], proc[128], tmp[192];
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void fake_process(struct fake *fk, const char *status)
{
    strcpy(fk->dir, "/tmp/pfr-perfmap-XXXXXX");
    assert_non_null(mkdtemp(fk->dir));
    snprintf(fk->proc, sizeof(fk->proc), "%s/77", fk->dir);
    assert_int_equal(mkdir(fk->proc, 0755), 0);
    char path[256];
    snprintf(path, sizeof(path), "%s/status", fk->proc);
    write_file(path, status);
    snprintf(path, sizeof(path), "%s/root", fk->proc);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(fk->tmp, sizeof(fk->tmp), "%s/root/tmp", fk->proc);
    assert_int_equal(mkdir(fk->tmp, 01777), 0);
}

static void fake_free(struct fake *fk)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", fk->dir);
    assert_int_equal(system(cmd), 0);
}

static const char status_in_ns[] = "Name:\tnode\nUid:\t1000\t1000\t1000\t1000\n"
                                   "NSpid:\t77\t7\n";

static void test_open_namespace_pid(void **state)
{
    (void)state;
    struct fake fk;
    fake_process(&fk, status_in_ns);
    char path[256], err[256] = "";
    snprintf(path, sizeof(path), "%s/perf-7.map", fk.tmp); /* its pid inside its namespace */
    write_file(path, "1000 10 inside\n2000 10 half");
    assert_int_equal(chown(path, 1000, 1000), 0);
    struct pfr_sym_perfmap m;
    pfr_sym_perfmap_init(&m);
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)), 0);
    assert_int_equal(pfr_sym_perfmap_update(&m, BIG, err, sizeof(err)), 0);
    assert_string_equal(name_at(&m, 0x1000), "inside");
    assert_null(name_at(&m, 0x2000));
    /* appended: read from where the last read stopped */
    FILE *f = fopen(path, "a");
    fputs(" done\n3000 10 three\n", f);
    fclose(f);
    assert_int_equal(pfr_sym_perfmap_update(&m, BIG, err, sizeof(err)), 0);
    assert_string_equal(name_at(&m, 0x2000), "half done");
    assert_string_equal(name_at(&m, 0x3000), "three");
    assert_int_equal(m.lines, 3);
    /* written again from the start (a new program with the pid): read again */
    write_file(path, "4000 10 anew\n");
    assert_int_equal(pfr_sym_perfmap_update(&m, BIG, err, sizeof(err)), 0);
    assert_null(name_at(&m, 0x1000));
    assert_string_equal(name_at(&m, 0x4000), "anew");
    pfr_sym_perfmap_free(&m);
    /* gone, or never written */
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 78, err, sizeof(err)), -ESRCH);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)), -ENOENT);
    fake_free(&fk);
}

/* The file is the process's to make: it cannot lead the root daemon to other files. */
static void test_open_hostile(void **state)
{
    (void)state;
    struct fake fk;
    fake_process(&fk, status_in_ns);
    char path[256], secret[256], err[256] = "";
    snprintf(path, sizeof(path), "%s/perf-7.map", fk.tmp);
    snprintf(secret, sizeof(secret), "%s/secret", fk.dir); /* outside the process's root */
    write_file(secret, "1000 10 secret\n");
    assert_int_equal(chown(secret, 1000, 1000), 0);
    struct pfr_sym_perfmap m;
    pfr_sym_perfmap_init(&m);

    assert_int_equal(symlink(secret, path), 0); /* a symlink, absolute or not: refused */
    assert_true(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)) < 0);
    assert_int_equal(m.fd, -1);
    assert_int_equal(unlink(path), 0);

    /* a directory symlinked to the host's files: resolved inside the root, where they are not */
    char outside[] = "/var/tmp/pfr-perfmap-out-XXXXXX", escaped[256];
    assert_non_null(mkdtemp(outside));
    snprintf(escaped, sizeof(escaped), "%s/perf-7.map", outside);
    write_file(escaped, "1000 10 escaped\n");
    assert_int_equal(chown(escaped, 1000, 1000), 0);
    assert_int_equal(rmdir(fk.tmp), 0);
    assert_int_equal(symlink(outside, fk.tmp), 0);
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)), -ENOENT);
    assert_int_equal(m.fd, -1);
    assert_int_equal(unlink(fk.tmp), 0);
    assert_int_equal(mkdir(fk.tmp, 01777), 0);
    assert_int_equal(unlink(escaped), 0);
    assert_int_equal(rmdir(outside), 0);

    write_file(path, "1000 10 someone else's\n"); /* owned by another user */
    assert_int_equal(chown(path, 1001, 1001), 0);
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)), -EPERM);
    assert_non_null(strstr(err, "owned by root or uid 1000"));
    assert_int_equal(unlink(path), 0);

    assert_int_equal(mkfifo(path, 0644), 0); /* not a regular file; must not block */
    assert_int_equal(chown(path, 1000, 1000), 0);
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)), -EPERM);
    assert_int_equal(unlink(path), 0);

    write_file(path, "1000 10 root's is fine\n"); /* root's: as perf accepts */
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)), 0);
    assert_int_equal(pfr_sym_perfmap_update(&m, BIG, err, sizeof(err)), 0);
    assert_string_equal(name_at(&m, 0x1000), "root's is fine");
    pfr_sym_perfmap_free(&m);
    fake_free(&fk);
}

static void test_open_bad_status(void **state)
{
    (void)state;
    struct fake fk;
    fake_process(&fk, "Name:\tx\nNSpid:\t77\t7\n"); /* no Uid */
    struct pfr_sym_perfmap m;
    pfr_sym_perfmap_init(&m);
    char err[256] = "";
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "no Uid line"));
    fake_free(&fk);
    fake_process(&fk, "Uid:\t0\t0\t0\t0\nNSpid:\tgarbage\n");
    assert_int_equal(pfr_sym_perfmap_open(&m, fk.dir, 77, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "bad NSpid"));
    fake_free(&fk);
}

/* The symbolizer names an address in anonymous executable memory from the process's perf map:
 * read when first needed and then at most once a second, kept open after the process is gone,
 * and its frames marked transient (not to be kept across intervals). */
static void test_symbolizer_jit(void **state)
{
    (void)state;
    struct fake fk;
    fake_process(&fk, "Name:\tnode\nUid:\t0\t0\t0\t0\nNSpid:\t77\n");
    char path[256], map[256];
    snprintf(path, sizeof(path), "%s/maps", fk.proc);
    write_file(path, "7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n");
    snprintf(map, sizeof(map), "%s/perf-77.map", fk.tmp);
    for (int on = 0; on < 2; on++) {
        pfr_sym_opts o = {.proc_root = fk.dir, .no_perf_maps = !on};
        pfr_symbolizer *s;
        assert_int_equal(pfr_symbolizer_new(&o, &s), 0);
        assert_int_equal(pfr_symbolizer_add_process(s, 77), 0);
        pfr_sym_frame fr[2];
        const uint64_t hot = 0x7f0000000100, later = 0x7f0000002000;
        assert_int_equal(pfr_symbolize_user(s, 77, hot, fr, 2), 1); /* no map yet */
        assert_string_equal(fr[0].function, "[unknown]");
        write_file(map, "7f0000000000 200 JS:*hot /srv/app.js:1:1\n");
        assert_int_equal(pfr_symbolize_user(s, 77, hot, fr, 2), 1);
        assert_string_equal(fr[0].function, "[unknown]"); /* tried less than a second ago */
        usleep(1100 * 1000);
        assert_int_equal(pfr_symbolize_user(s, 77, hot, fr, 2), 1);
        pfr_sym_stats st;
        pfr_symbolizer_stats(s, &st);
        if (!on) {
            assert_string_equal(fr[0].function, "[unknown]");
            assert_int_equal(st.perf_maps_opened, 0);
            pfr_symbolizer_free(s);
            assert_int_equal(unlink(map), 0);
            continue;
        }
        assert_string_equal(fr[0].function, "JS:*hot /srv/app.js:1:1");
        assert_string_equal(fr[0].module, "[jit]");
        assert_true(fr[0].transient);
        assert_int_equal(st.jit_frames, 1);
        assert_int_equal(st.perf_maps_opened, 1);
        /* the process exits; code it made just before is still named from the open file */
        snprintf(path, sizeof(path), "%s/status", fk.proc);
        assert_int_equal(unlink(path), 0);
        FILE *f = fopen(map, "a");
        assert_non_null(f);
        fputs("7f0000002000 100 JS:*later /srv/app.js:9:1\n", f);
        fclose(f);
        usleep(1100 * 1000);
        assert_int_equal(pfr_symbolize_user(s, 77, later, fr, 2), 1);
        assert_string_equal(fr[0].function, "JS:*later /srv/app.js:9:1");
        assert_true(pfr_symbolizer_memory(s) > 0);
        pfr_symbolizer_free(s);
        write_file(path, "Name:\tnode\nUid:\t0\t0\t0\t0\nNSpid:\t77\n");
        assert_int_equal(unlink(map), 0);
    }
    fake_free(&fk);
}

/* A map the process may not hand the daemon is counted once, with its reason, and not tried
 * again for that process. */
static void test_symbolizer_jit_refused(void **state)
{
    (void)state;
    struct fake fk;
    fake_process(&fk, status_in_ns); /* uid 1000 */
    char path[256], map[256];
    snprintf(path, sizeof(path), "%s/maps", fk.proc);
    write_file(path, "7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n");
    snprintf(map, sizeof(map), "%s/perf-7.map", fk.tmp);
    write_file(map, "7f0000000000 200 planted\n");
    assert_int_equal(chown(map, 1001, 1001), 0);
    pfr_sym_opts o = {.proc_root = fk.dir};
    pfr_symbolizer *s;
    assert_int_equal(pfr_symbolizer_new(&o, &s), 0);
    assert_int_equal(pfr_symbolizer_add_process(s, 77), 0);
    pfr_sym_frame fr[2];
    pfr_sym_stats st;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pfr_symbolize_user(s, 77, 0x7f0000000010, fr, 2), 1);
        assert_string_equal(fr[0].function, "[unknown]");
        pfr_symbolizer_stats(s, &st);
        assert_int_equal(st.perf_map_errors, 1);
        assert_non_null(strstr(pfr_symbolizer_perf_map_error(s), "owned by root or uid 1000"));
        if (i == 0)
            usleep(1100 * 1000);
    }
    assert_int_equal(st.perf_maps_opened, 0);
    pfr_symbolizer_free(s);
    fake_free(&fk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_newest_wins),
        cmocka_unit_test(test_split_lines),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_open_namespace_pid),
        cmocka_unit_test(test_open_hostile),
        cmocka_unit_test(test_open_bad_status),
        cmocka_unit_test(test_symbolizer_jit),
        cmocka_unit_test(test_symbolizer_jit_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
