/*
 * pfr_unwind_cache: tables kept on disk. A table read back is the table written (the system's
 * libc's, built for the test); a file replaced or touched no longer finds its old table; a torn,
 * truncated or altered file is a counted miss and is removed; the directory stays within its
 * bound, least recently used first; a directory that cannot be written (or is not the
 * recorder's own) never fails a lookup; the memory budget is asked before a table is read.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pfr_disk_keep.h"
#include "pfr_membudget.h"
#include "unwind_cache.h"

static char work[] = "/tmp/pfr-test-uwcache-XXXXXX";

static int setup(void **state)
{
    (void)state;
    return mkdtemp(work) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", work);
    return system(cmd);
}

/* A fresh cache directory of the test's, and its path. */
static pfr_unwind_cache *open_dir(const char *name, uint64_t bound, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", work, name);
    pfr_unwind_cache *c = NULL;
    char err[256];
    int rc = pfr_unwind_cache_open(path, bound, NULL, NULL, &c, err, sizeof(err));
    if (rc)
        fail_msg("%s", err);
    return c;
}

/* A table as the builder makes them: pcs rising from 0, neighbours' rules different, a NONE row
 * last. seed varies the rows (random enough that LZ4 cannot shrink them much). */
static pfr_unwind_table synth(size_t n, uint32_t seed)
{
    pfr_unwind_table t = {.base = 0x1000 + seed, .delta = 0x200, .nrows = n};
    t.rows = calloc(n, sizeof(*t.rows));
    uint32_t pc = 0, x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        pc += i ? 1 + (x >> 24) : 0;
        uint32_t rule = (x & 0xfffffff0u) | 1u; /* PFR_UW_RULE_KIND 1 */
        if (i == n - 1)
            rule = PFR_UW_NONE;
        else if (i && rule == t.rows[i - 1].rule)
            rule ^= 0x100;
        t.rows[i] = (struct pfr_unwind_row){.pc = pc, .rule = rule};
    }
    return t;
}

static pfr_unwind_cache_key key_n(uint64_t n)
{
    return (pfr_unwind_cache_key){.dev = 1, .ino = n, .size = 4096, .mtime_ns = 7};
}

static void assert_same(const pfr_unwind_table *a, const pfr_unwind_table *b)
{
    assert_int_equal(a->nrows, b->nrows);
    assert_int_equal(a->base, b->base);
    assert_int_equal(a->delta, b->delta);
    assert_memory_equal(a->rows, b->rows, a->nrows * sizeof(*a->rows));
}

static void copy_file(const char *from, const char *to)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cp %s %s", from, to);
    assert_int_equal(system(cmd), 0);
}

/* The system's libc: its table built, kept, read back identical (its key by build-id). */
static void test_round_trip(void **state)
{
    (void)state;
    char dir[256];
    pfr_unwind_cache *c = open_dir("rt", 128u << 20, dir, sizeof(dir));
    int fd = open("/lib/x86_64-linux-gnu/libc.so.6", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    pfr_unwind_table t, back;
    char err[256];
    assert_int_equal(pfr_unwind_table_build(fd, 0, &t, err, sizeof(err)), 0);
    pfr_unwind_cache_key k;
    assert_int_equal(pfr_unwind_cache_key_fd(fd, 0, &k), 0);
    assert_true(k.id_len > 0); /* Debian's libc has a build-id */
    assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), -ENOENT);
    assert_int_equal(pfr_unwind_cache_put(c, &k, &t), 0);
    assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), 0);
    assert_same(&t, &back);
    pfr_unwind_table_free(&back);
    /* more rows than the caller can load: a miss */
    assert_int_equal(pfr_unwind_cache_get(c, &k, t.nrows - 1, &back), -ENOENT);
    /* another builder's flags: another table */
    pfr_unwind_cache_key go;
    assert_int_equal(pfr_unwind_cache_key_fd(fd, PFR_UNWIND_BUILD_GO, &go), 0);
    assert_int_equal(pfr_unwind_cache_get(c, &go, SIZE_MAX, &back), -ENOENT);
    /* read back after a restart: a new handle lists the directory */
    pfr_unwind_cache_close(c);
    c = open_dir("rt", 128u << 20, dir, sizeof(dir));
    pfr_unwind_cache_stats st;
    pfr_unwind_cache_stats_get(c, &st);
    assert_int_equal(st.files, 1);
    assert_true(st.bytes > 0 && st.bytes < t.nrows * sizeof(*t.rows));
    assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), 0);
    assert_same(&t, &back);
    pfr_unwind_table_free(&back);
    pfr_unwind_cache_stats_get(c, &st);
    assert_int_equal(st.hits, 1);
    pfr_unwind_table_free(&t);
    close(fd);
    pfr_unwind_cache_close(c);
}

/* A file rewritten or touched in place (same build-id or none, same inode) has a new key. */
static void test_key_follows_file(void **state)
{
    (void)state;
    char dir[256], path[300];
    pfr_unwind_cache *c = open_dir("key", 128u << 20, dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/lib.so", work);
    copy_file("/lib/x86_64-linux-gnu/libc.so.6", path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    pfr_unwind_cache_key k1, k2, k3;
    assert_int_equal(pfr_unwind_cache_key_fd(fd, 0, &k1), 0);
    pfr_unwind_table t = synth(1000, 1), back;
    assert_int_equal(pfr_unwind_cache_put(c, &k1, &t), 0);
    /* touched: its mtime moves */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 678}};
    assert_int_equal(futimens(fd, ts), 0);
    assert_int_equal(pfr_unwind_cache_key_fd(fd, 0, &k2), 0);
    assert_memory_equal(k1.id, k2.id, k1.id_len);
    assert_int_equal(pfr_unwind_cache_get(c, &k2, SIZE_MAX, &back), -ENOENT);
    /* grown by a byte, its mtime set back: its size differs */
    assert_int_equal(pwrite(fd, "", 1, (off_t)k1.size), 1);
    struct timespec old[2] = {{0, UTIME_OMIT},
                              {k1.mtime_ns / 1000000000, k1.mtime_ns % 1000000000}};
    assert_int_equal(futimens(fd, old), 0);
    assert_int_equal(pfr_unwind_cache_key_fd(fd, 0, &k3), 0);
    assert_int_equal(k3.mtime_ns, k1.mtime_ns);
    assert_int_equal(pfr_unwind_cache_get(c, &k3, SIZE_MAX, &back), -ENOENT);
    /* a file with no build-id: keyed by its inode too */
    int plain = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(plain >= 0);
    pfr_unwind_cache_key kd;
    assert_int_equal(pfr_unwind_cache_key_fd(plain, 0, &kd), -ENOEXEC);
    close(plain);
    snprintf(path, sizeof(path), "%s/noid", work);
    FILE *f = fopen(path, "w");
    fputs("not an ELF file", f);
    fclose(f);
    plain = open(path, O_RDONLY);
    assert_int_equal(pfr_unwind_cache_key_fd(plain, 0, &kd), 0);
    struct stat st;
    fstat(plain, &st);
    assert_int_equal(kd.id_len, 0);
    assert_int_equal(kd.ino, st.st_ino);
    close(plain);
    pfr_unwind_cache_stats cs;
    pfr_unwind_cache_stats_get(c, &cs);
    assert_int_equal(cs.misses, 2);
    assert_int_equal(cs.hits, 0);
    pfr_unwind_table_free(&t);
    close(fd);
    pfr_unwind_cache_close(c);
}

/* The only table file of dir (its path into out). */
static void the_file(const char *dir, char *out, size_t len)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ls %s/*.uwt", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(fgets(out, (int)len, p));
    out[strcspn(out, "\n")] = '\0';
    pclose(p);
}

/* Torn (truncated), altered or emptied files: a miss counted in bad_files, the file removed,
 * and the next put works. */
static void test_bad_files(void **state)
{
    (void)state;
    char dir[256], file[512];
    pfr_unwind_cache *c = open_dir("bad", 128u << 20, dir, sizeof(dir));
    pfr_unwind_table t = synth(200000, 2), back;
    pfr_unwind_cache_key k = key_n(1);
    for (int how = 0; how < 4; how++) {
        assert_int_equal(pfr_unwind_cache_put(c, &k, &t), 0);
        the_file(dir, file, sizeof(file));
        struct stat st;
        assert_int_equal(stat(file, &st), 0);
        int fd = open(file, O_RDWR);
        if (how == 0) /* torn in the middle */
            assert_int_equal(ftruncate(fd, st.st_size / 2), 0);
        else if (how == 1) /* a byte of the rows altered */
            assert_int_equal(pwrite(fd, "\xff\xfe", 2, st.st_size - 1000), 2);
        else if (how == 2) /* a byte of the header */
            assert_int_equal(pwrite(fd, "\x01", 1, 150), 1);
        else /* nothing but the header */
            assert_int_equal(ftruncate(fd, 168), 0);
        close(fd);
        assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), -EBADMSG);
        assert_null(back.rows);
        assert_int_equal(access(file, F_OK), -1);
    }
    pfr_unwind_cache_stats st;
    pfr_unwind_cache_stats_get(c, &st);
    assert_int_equal(st.bad_files, 4);
    assert_int_equal(st.files, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(pfr_unwind_cache_put(c, &k, &t), 0);
    assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), 0);
    assert_same(&t, &back);
    pfr_unwind_table_free(&back);
    pfr_unwind_table_free(&t);
    pfr_unwind_cache_close(c);
}

/* 1 MiB of files at most: tables of ~300 KB each, the least recently used go first (a read
 * counts as a use); a bound lowered across a restart is applied at open. */
static void test_bound(void **state)
{
    (void)state;
    char dir[256];
    pfr_unwind_cache *c = open_dir("bound", 1u << 20, dir, sizeof(dir));
    pfr_unwind_table t[6], back;
    for (int i = 0; i < 6; i++) {
        t[i] = synth(64000, (uint32_t)i + 10);
        pfr_unwind_cache_key k = key_n((uint64_t)i);
        assert_int_equal(pfr_unwind_cache_put(c, &k, &t[i]), 0);
        if (i >= 1) { /* table 0 used after each put: never the least recent */
            k = key_n(0);
            assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), 0);
            pfr_unwind_table_free(&back);
        }
        pfr_unwind_cache_stats st;
        pfr_unwind_cache_stats_get(c, &st);
        assert_true(st.bytes <= 1u << 20);
    }
    pfr_unwind_cache_stats st;
    pfr_unwind_cache_stats_get(c, &st);
    assert_true(st.evictions >= 2);
    assert_true(st.files >= 2 && st.files <= 4);
    pfr_unwind_cache_key k0 = key_n(0), k1 = key_n(1), k5 = key_n(5);
    assert_int_equal(pfr_unwind_cache_get(c, &k0, SIZE_MAX, &back), 0);
    pfr_unwind_table_free(&back);
    assert_int_equal(pfr_unwind_cache_get(c, &k5, SIZE_MAX, &back), 0);
    pfr_unwind_table_free(&back);
    assert_int_equal(pfr_unwind_cache_get(c, &k1, SIZE_MAX, &back), -ENOENT);
    /* du agrees with the index */
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "test $(cat %s/*.uwt | wc -c) -le 1048576", dir);
    assert_int_equal(system(cmd), 0);
    pfr_unwind_cache_close(c);
    /* a table larger than the whole bound is not kept (and not counted as an error) */
    c = open_dir("bound", 1u << 20, dir, sizeof(dir));
    pfr_unwind_table huge = synth(400000, 99);
    pfr_unwind_cache_key kh = key_n(77);
    assert_int_equal(pfr_unwind_cache_put(c, &kh, &huge), -EFBIG);
    pfr_unwind_cache_stats_get(c, &st);
    assert_int_equal(st.write_errors, 0);
    assert_true(st.bytes <= 1u << 20 && st.files >= 2);
    pfr_unwind_table_free(&huge);
    for (int i = 0; i < 6; i++)
        pfr_unwind_table_free(&t[i]);
    pfr_unwind_cache_close(c);
}

/* Run fn in a child as user nobody; its exit status. */
static int as_nobody(void (*fn)(const char *), const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
            _exit(90);
        fn(dir);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

#define CHILD_CHECK(cond, code)                                                                    \
    do {                                                                                           \
        if (!(cond))                                                                               \
            _exit(code);                                                                           \
    } while (0)

/* In a directory of its own that it may not write (0500): lookups miss, writes fail and are
 * counted, with a sentence; nothing else breaks. */
static void unwritable_child(const char *dir)
{
    pfr_unwind_cache *c = NULL;
    char err[256];
    CHILD_CHECK(pfr_unwind_cache_open(dir, 1u << 20, NULL, NULL, &c, err, sizeof(err)) == 0, 10);
    pfr_unwind_table t = synth(1000, 3), back;
    pfr_unwind_cache_key k = key_n(3);
    CHILD_CHECK(pfr_unwind_cache_put(c, &k, &t) == -EACCES, 11);
    CHILD_CHECK(pfr_unwind_cache_put(c, &k, &t) == -EACCES, 12);
    CHILD_CHECK(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back) == -ENOENT, 13);
    pfr_unwind_cache_stats st;
    pfr_unwind_cache_stats_get(c, &st);
    CHILD_CHECK(st.write_errors == 2 && st.misses == 1 && st.writes == 0, 14);
    CHILD_CHECK(strstr(pfr_unwind_cache_last_error(c), "Permission denied") != NULL, 15);
    pfr_unwind_table_free(&t);
    pfr_unwind_cache_close(c);
}

static void test_unwritable(void **state)
{
    (void)state;
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/ro", work);
    assert_int_equal(mkdir(dir, 0500), 0);
    assert_int_equal(chmod(work, 0755), 0);
    assert_int_equal(chown(dir, 65534, 65534), 0);
    assert_int_equal(as_nobody(unwritable_child, dir), 0);
    /* another user's directory, or one others may write: refused at open */
    pfr_unwind_cache *c = NULL;
    char err[256];
    assert_int_equal(pfr_unwind_cache_open(dir, 1u << 20, NULL, NULL, &c, err, sizeof(err)),
                     -EPERM);
    assert_non_null(strstr(err, "not the recorder's own"));
    snprintf(dir, sizeof(dir), "%s/open", work);
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(pfr_unwind_cache_open(dir, 1u << 20, NULL, NULL, &c, err, sizeof(err)),
                     -EPERM);
    /* a path through a file: cannot be made */
    snprintf(dir, sizeof(dir), "%s/noid/sub", work);
    assert_int_not_equal(pfr_unwind_cache_open(dir, 1u << 20, NULL, NULL, &c, err, sizeof(err)), 0);
    assert_null(c);
    /* a full disk */
    int full = open("/dev/full", O_WRONLY);
    assert_true(full >= 0);
    pfr_unwind_table t = synth(1000, 4);
    pfr_unwind_cache_key k = key_n(4);
    assert_int_equal(pfr_unwind_cache_write_fd(full, &k, &t), -ENOSPC);
    close(full);
    /* the directory removed under a live cache: writes fail, lookups miss */
    c = open_dir("gone", 1u << 20, dir, sizeof(dir));
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(pfr_unwind_cache_put(c, &k, &t), -ENOENT);
    pfr_unwind_table back;
    assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), -ENOENT);
    pfr_unwind_table_free(&t);
    pfr_unwind_cache_close(c);
}

/* A statm for a budget to measure: `resident` bytes resident. */
static void write_statm(const char *path, long resident)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "100000 %ld 0 0 0 0 0\n", resident / sysconf(_SC_PAGESIZE));
    fclose(f);
}

/* A budget near its end refuses the rows of a large table before they are read. */
static void test_memory_budget(void **state)
{
    (void)state;
    char statm[300], dir[256];
    snprintf(statm, sizeof(statm), "%s/statm", work);
    /* 60 MiB resident of a 64 MiB budget: past 7/8, only small costs */
    write_statm(statm, 60l << 20);
    pfr_membudget *b;
    assert_int_equal(pfr_membudget_new(64u << 20, statm, &b), 0);
    pfr_membudget_update(b);
    snprintf(dir, sizeof(dir), "%s/mem", work);
    pfr_unwind_cache *c = NULL;
    char err[256];
    assert_int_equal(pfr_unwind_cache_open(dir, 128u << 20, b, NULL, &c, err, sizeof(err)), 0);
    pfr_unwind_table t = synth(500000, 5), back;
    pfr_unwind_cache_key k = key_n(5);
    assert_int_equal(pfr_unwind_cache_put(c, &k, &t), 0);
    assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), -ENOBUFS);
    pfr_unwind_cache_stats st;
    pfr_unwind_cache_stats_get(c, &st);
    assert_int_equal(st.no_memory, 1);
    pfr_membudget_stats ms;
    pfr_membudget_stats_get(b, &ms);
    assert_int_equal(ms.refused[PFR_MEM_UNWIND], 1);
    pfr_unwind_table_free(&t);
    pfr_unwind_cache_close(c);
    pfr_membudget_free(b);
}

/* Near the budget (56.2 MiB of 64: TIGHT, as a release recorder on a host of ~700 processes was
 * for the rest of its run), a kept table of libpython3.9's 58,717 rows is read back (1.4 MB while
 * read, handed to the kernel and freed): refused as a large cost, the library's table, once
 * evicted, never came back and every 3.9 process's stacks stopped after their first frame. With
 * less room left below 15/16 of the budget it is refused still. */
static void test_memory_budget_brief(void **state)
{
    (void)state;
    char statm[300], dir[256];
    snprintf(statm, sizeof(statm), "%s/statm-brief", work);
    write_statm(statm, (562l << 20) / 10);
    pfr_membudget *b;
    assert_int_equal(pfr_membudget_new(64u << 20, statm, &b), 0);
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_TIGHT);
    snprintf(dir, sizeof(dir), "%s/mem-brief", work);
    pfr_unwind_cache *c = NULL;
    char err[256];
    assert_int_equal(pfr_unwind_cache_open(dir, 128u << 20, b, NULL, &c, err, sizeof(err)), 0);
    pfr_unwind_table t = synth(58717, 6), back;
    pfr_unwind_cache_key k = key_n(6);
    assert_int_equal(pfr_unwind_cache_put(c, &k, &t), 0);
    assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), 0);
    assert_int_equal(back.nrows, 58717);
    pfr_unwind_table_free(&back);
    write_statm(statm, 59l << 20); /* 59 MiB: 1.4 MB more would pass 15/16 of the budget */
    assert_int_equal(pfr_membudget_update(b), PFR_MEM_TIGHT);
    assert_int_equal(pfr_unwind_cache_get(c, &k, SIZE_MAX, &back), -ENOBUFS);
    pfr_unwind_table_free(&t);
    pfr_unwind_cache_close(c);
    pfr_membudget_free(b);
}

/* The disk's room is the ring's first: on the ring's file system (its device) a table is written
 * only if the free space stays above the ring's reserve and cap; if not, the cache removes its own
 * files first and then does not write (no_room), and lookups go on. Another file system's keeps
 * only the floor. (The ring's cap here is the whole file system's size: its room is never the
 * cache's, whatever else the host writes meanwhile.) */
static void test_disk_room(void **state)
{
    (void)state;
    char dir[256];
    pfr_unwind_cache *c = open_dir("room", 128u << 20, dir, sizeof(dir));
    pfr_unwind_table t1 = synth(40000, 1), t2 = synth(40000, 2), back;
    pfr_unwind_cache_key k1 = key_n(1), k2 = key_n(2);
    assert_int_equal(pfr_unwind_cache_put(c, &k1, &t1), 0); /* written without a ring's keep */
    pfr_unwind_cache_close(c);

    struct stat st;
    struct statvfs v;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(statvfs(dir, &v), 0);
    uint64_t fs = (uint64_t)v.f_blocks * v.f_frsize;
    /* the ring's file, not made yet, in the same folder: found by its folder's device */
    char ring[300];
    snprintf(ring, sizeof(ring), "%s/no-such-folder/ring.db", dir);
    pfr_disk_keep keep = {0};
    uint64_t fs_found = 0;
    assert_true(pfr_disk_keep_find_ring(&keep, ring, &fs_found));
    assert_true(keep.ring_known);
    assert_int_equal(keep.ring_dev, (uint64_t)st.st_dev);
    assert_int_equal(fs_found, fs);
    keep.ring_reserve = 8u << 20;
    keep.ring_cap = fs;

    char err[256];
    assert_int_equal(pfr_unwind_cache_open(dir, 128u << 20, NULL, &keep, &c, err, sizeof(err)), 0);
    assert_int_equal(pfr_unwind_cache_put(c, &k2, &t2), -EDQUOT);
    pfr_unwind_cache_stats cs;
    pfr_unwind_cache_stats_get(c, &cs);
    assert_int_equal(cs.no_room, 1);
    assert_int_equal(cs.write_errors, 0);
    assert_int_equal(cs.writes, 0);
    assert_int_equal(cs.room_evictions, 1); /* its own file went first */
    assert_int_equal(cs.evictions, 1);
    assert_int_equal(cs.files, 0);
    assert_int_equal(cs.bytes, 0);
    assert_non_null(strstr(pfr_unwind_cache_last_error(c), "left to the ring"));
    assert_int_equal(pfr_unwind_cache_get(c, &k2, SIZE_MAX, &back), -ENOENT);
    pfr_unwind_cache_close(c);
    /* nothing on the disk: not even the temporary file */
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s)\"", dir);
    assert_int_equal(system(cmd), 0);

    /* the same cache on another file system than the ring's: the floor only */
    keep.ring_dev = (uint64_t)st.st_dev + 1;
    assert_int_equal(pfr_unwind_cache_open(dir, 128u << 20, NULL, &keep, &c, err, sizeof(err)), 0);
    assert_int_equal(pfr_unwind_cache_put(c, &k2, &t2), 0);
    assert_int_equal(pfr_unwind_cache_get(c, &k2, SIZE_MAX, &back), 0);
    assert_same(&t2, &back);
    pfr_unwind_table_free(&back);
    pfr_unwind_cache_close(c);
    pfr_unwind_table_free(&t1);
    pfr_unwind_table_free(&t2);
}

/* The floor and the ring's keep, as numbers: bytes past the free space, by how much. */
static void test_disk_keep_fits(void **state)
{
    (void)state;
    int fd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    struct statvfs v;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(fstatvfs(fd, &v), 0);
    uint64_t fs = (uint64_t)v.f_blocks * v.f_frsize, short_by = 0;
    /* nothing fits past the whole file system */
    assert_int_equal(pfr_disk_keep_fits(NULL, fd, fs, &short_by), -EDQUOT);
    assert_true(short_by > fs / 20); /* the floor, 5 %, and more */
    pfr_disk_keep keep = {.ring_known = true, .ring_dev = (uint64_t)st.st_dev, .ring_cap = fs};
    assert_int_equal(pfr_disk_keep_fits(&keep, fd, 1, &short_by), -EDQUOT);
    assert_true(short_by > 0);
    keep.ring_dev++; /* another file system's ring: 1 byte fits above the floor */
    assert_int_equal(pfr_disk_keep_fits(&keep, fd, 1, &short_by), 0);
    assert_int_equal(short_by, 0);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),          cmocka_unit_test(test_key_follows_file),
        cmocka_unit_test(test_bad_files),           cmocka_unit_test(test_bound),
        cmocka_unit_test(test_unwritable),          cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_memory_budget_brief), cmocka_unit_test(test_disk_room),
        cmocka_unit_test(test_disk_keep_fits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
