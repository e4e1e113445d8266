/* pfr_fsguard: the mount table parser, file system kinds from a mount table, paths judged by
 * their mount, local opens that never cross a mount, cached stats, and remote copies (policy,
 * size, identity). The blocked-server case (a FUSE server that stops answering) is
 * tests/recorder/it_fuse_hang.sh, with the real recorder. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "pfr_disk_keep.h"
#include "fsguard_internal.h" /* the copy shared TTL, shortened below */
#include "pfr_fsguard.h"

static void parse_lines(void **state)
{
    (void)state;
    uint64_t dev;
    char mnt[256], type[64];
    const char *l = "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw\n";
    assert_int_equal(
        pfr_fsguard_parse_mountinfo_line(l, strlen(l), &dev, mnt, sizeof(mnt), type, sizeof(type)),
        0);
    assert_int_equal(dev, makedev(98, 0));
    assert_string_equal(mnt, "/mnt2");
    assert_string_equal(type, "ext3");
    /* no optional fields, an escaped space and backslash in the mount point */
    l = "50 1 0:52 / /srv/a\\040b\\134c rw - fuse.sshfs user@h: rw";
    assert_int_equal(
        pfr_fsguard_parse_mountinfo_line(l, strlen(l), &dev, mnt, sizeof(mnt), type, sizeof(type)),
        0);
    assert_int_equal(dev, makedev(0, 52));
    assert_string_equal(mnt, "/srv/a b\\c");
    assert_string_equal(type, "fuse.sshfs");
    static const char *const bad[] = {
        "",
        "36 35 98:0 /mnt1 /mnt2 rw",          /* no separator */
        "36 35 98:0 /mnt1 /mnt2 rw -",        /* no type */
        "36 35 98x0 /mnt1 /mnt2 rw - ext4 x", /* device */
        "36 35 98:0 /mnt1 mnt2 rw - ext4 x",  /* relative mount point */
        "36 35 98:0:1 / / rw - ext4 x",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(pfr_fsguard_parse_mountinfo_line(bad[i], strlen(bad[i]), &dev, mnt,
                                                          sizeof(mnt), type, sizeof(type)),
                         -EINVAL);
    /* a mount point longer than the buffer is refused, not cut */
    char small[4];
    l = "1 1 8:1 / /long rw - ext4 x";
    assert_int_equal(pfr_fsguard_parse_mountinfo_line(l, strlen(l), &dev, small, sizeof(small),
                                                      type, sizeof(type)),
                     -EINVAL);
}

static void remote_types(void **state)
{
    (void)state;
    static const char *const remote[] = {"fuse", "fuseblk",   "fuse.sshfs", "nfs",
                                         "nfs4", "cifs",      "smb3",       "9p",
                                         "ceph", "glusterfs", "virtiofs"};
    static const char *const local[] = {"ext4", "xfs",   "btrfs",    "tmpfs",   "overlay",
                                        "proc", "sysfs", "squashfs", "fusectl", "vfat"};
    for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
        assert_true(pfr_fsguard_remote_type(remote[i]));
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
        assert_false(pfr_fsguard_remote_type(local[i]));
}

/* A fake /proc with the recorder's own mount table and pid 42's. */
static char *fake_proc(void)
{
    char tmpl[] = "/tmp/pfr-fsguard-XXXXXX";
    char *dir = strdup(mkdtemp(tmpl));
    char path[256];
    snprintf(path, sizeof(path), "%s/self", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/42", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/self/mountinfo", dir);
    FILE *f = fopen(path, "w");
    fputs("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
          "2 1 0:20 / /tmp rw - tmpfs tmpfs rw\n"
          "3 1 0:30 / /mnt/nfs rw - nfs4 srv:/x rw\n"
          "garbage line\n",
          f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/42/mountinfo", dir);
    f = fopen(path, "w");
    fputs("10 0 0:40 / / rw - overlay overlay rw\n"
          "11 10 0:41 / /data rw - fuse.s3fs s3fs rw\n"
          "12 11 0:42 / /data/cache rw - tmpfs tmpfs rw\n"
          "13 10 0:43 / /scratch rw - fuse.x x rw\n"
          "14 10 0:44 / /scratch rw - tmpfs t rw\n",
          f);
    fclose(f);
    return dir;
}

static void kinds(void **state)
{
    (void)state;
    char *proc = fake_proc();
    pfr_fsguard *g;
    assert_int_equal(pfr_fsguard_new(&(pfr_fsguard_opts){.proc_root = proc}, &g), 0);
    assert_int_equal(pfr_fsguard_kind(g, 0, makedev(8, 1)), PFR_FS_LOCAL);
    assert_int_equal(pfr_fsguard_kind(g, 0, makedev(0, 30)), PFR_FS_REMOTE);
    /* pid 42's namespace has its own mounts; the host's are looked at too */
    assert_int_equal(pfr_fsguard_kind(g, 42, makedev(0, 41)), PFR_FS_REMOTE);
    assert_int_equal(pfr_fsguard_kind(g, 42, makedev(0, 40)), PFR_FS_LOCAL);
    assert_int_equal(pfr_fsguard_kind(g, 42, makedev(0, 20)), PFR_FS_LOCAL);
    /* a device no table names is not trusted */
    assert_int_equal(pfr_fsguard_kind(g, 42, makedev(0, 99)), PFR_FS_UNKNOWN);
    assert_false(pfr_fsguard_local(g, 42, makedev(0, 99)));
    pfr_fsguard_stats st;
    pfr_fsguard_stats_get(g, &st);
    uint64_t reads = st.mountinfo_reads;
    /* cached: no table read again */
    assert_int_equal(pfr_fsguard_kind(g, 42, makedev(0, 41)), PFR_FS_REMOTE);
    assert_int_equal(pfr_fsguard_kind(g, 0, makedev(8, 1)), PFR_FS_LOCAL);
    pfr_fsguard_stats_get(g, &st);
    assert_int_equal(st.mountinfo_reads, reads);
    assert_int_equal(st.remote_lookups, 5); /* 0:30, 0:41 twice, 0:99 twice */

    uint64_t dev = 0;
    assert_int_equal(pfr_fsguard_path_kind(g, 42, "/usr/bin/x", &dev), PFR_FS_LOCAL);
    assert_int_equal(dev, makedev(0, 40));

    /* a memfd's device, which no table names: the kernel's memory, opened directly */
    int mfd = memfd_create("test-fsguard", MFD_CLOEXEC);
    assert_true(mfd >= 0);
    struct stat mst;
    assert_int_equal(fstat(mfd, &mst), 0);
    close(mfd);
    assert_int_equal(pfr_fsguard_kind(g, 42, mst.st_dev), PFR_FS_LOCAL);
    assert_true(pfr_fsguard_local(g, 0, mst.st_dev));
    pfr_fsguard_stats_get(g, &st);
    assert_int_equal(st.remote_lookups, 5);
    assert_int_equal(pfr_fsguard_path_kind(g, 42, "/data/x", &dev), PFR_FS_REMOTE);
    /* a local mount under a remote one: walking down to it asks the remote server */
    assert_int_equal(pfr_fsguard_path_kind(g, 42, "/data/cache/x", &dev), PFR_FS_REMOTE);
    assert_int_equal(dev, makedev(0, 42));
    /* prefixes are whole components */
    assert_int_equal(pfr_fsguard_path_kind(g, 42, "/database/x", &dev), PFR_FS_LOCAL);
    /* stacked at one point: the walk goes to the top one; the one below is never asked */
    assert_int_equal(pfr_fsguard_path_kind(g, 42, "/scratch/x", &dev), PFR_FS_LOCAL);
    assert_int_equal(dev, makedev(0, 44));
    assert_int_equal(pfr_fsguard_path_kind(g, 0, "relative", &dev), PFR_FS_UNKNOWN);
    pfr_fsguard_free(g);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", proc);
    assert_int_equal(system(cmd), 0);
    free(proc);
}

static void open_local_stays_on_its_mount(void **state)
{
    (void)state;
    pfr_fsguard *g;
    assert_int_equal(pfr_fsguard_new(NULL, &g), 0);
    int root = open("/proc/self/root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    pid_t me = getpid();
    int fd = pfr_fsguard_open_local(g, me, root, "/proc/self/status", O_RDONLY);
    assert_true(fd >= 0); /* proc is a local mount of its own */
    close(fd);
    /* a symbolic link on one mount that leads into another is refused, not followed */
    char dir[] = "/var/tmp/pfr-fsguard-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char link[128], file[128];
    snprintf(link, sizeof(link), "%s/status", dir);
    assert_int_equal(symlink("/proc/self/status", link), 0);
    assert_int_equal(pfr_fsguard_open_local(g, me, root, link, O_RDONLY), -EREMOTE);
    snprintf(file, sizeof(file), "%s/plain", dir);
    int w = open(file, O_CREAT | O_WRONLY, 0600);
    assert_true(w >= 0);
    close(w);
    fd = pfr_fsguard_open_local(g, me, root, file, O_RDONLY);
    assert_true(fd >= 0);
    close(fd);
    unlink(link);
    unlink(file);
    rmdir(dir);
    close(root);
    pfr_fsguard_free(g);
}

static void stat_cached_matches_stat(void **state)
{
    (void)state;
    struct stat a, b;
    assert_int_equal(stat("/proc/self/exe", &a), 0);
    assert_int_equal(pfr_fsguard_stat_cached(AT_FDCWD, "/proc/self/exe", &b), 0);
    assert_int_equal(a.st_dev, b.st_dev);
    assert_int_equal(a.st_ino, b.st_ino);
    assert_int_equal(a.st_size, b.st_size);
    assert_int_equal(a.st_mtim.tv_sec, b.st_mtim.tv_sec);
    assert_int_equal(pfr_fsguard_stat_cached(AT_FDCWD, "/nonexistent/x", &b), -ENOENT);
}

/* Copies are asynchronous: ask until the answer is not "in progress". */
static int copy_wait(pfr_fsguard *g, const char *path, uint64_t dev, uint64_t ino)
{
    int rc = pfr_fsguard_copy(g, path, dev, ino);
    for (int i = 0; rc == -EINPROGRESS && i < 500; i++) {
        usleep(10000);
        rc = pfr_fsguard_copy(g, path, dev, ino);
    }
    return rc;
}

static void copies(void **state)
{
    (void)state;
    char path[] = "/var/tmp/pfr-fsguard-copy-XXXXXX";
    int w = mkstemp(path);
    assert_true(w >= 0);
    char data[100000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 7);
    assert_int_equal(write(w, data, sizeof(data)), (ssize_t)sizeof(data));
    close(w);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);

    pfr_fsguard *g;
    assert_int_equal(pfr_fsguard_new(&(pfr_fsguard_opts){.copy_dir = "/var/tmp"}, &g), 0);
    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino), -EINPROGRESS);
    int fd = copy_wait(g, path, st.st_dev, st.st_ino);
    assert_true(fd >= 0);
    char back[sizeof(data)];
    assert_int_equal(pread(fd, back, sizeof(back), 0), (ssize_t)sizeof(back));
    assert_memory_equal(back, data, sizeof(data));
    struct stat cs;
    assert_int_equal(fstat(fd, &cs), 0);
    assert_int_not_equal(cs.st_ino, st.st_ino); /* a copy, not the file */
    assert_int_equal(write(fd, "x", 1), -1);    /* read-only */
    close(fd);
    /* not that file: another inode, another device */
    assert_int_equal(copy_wait(g, path, st.st_dev, st.st_ino + 1), -ESTALE);
    assert_int_equal(copy_wait(g, path, st.st_dev + 1, 0), -ESTALE);
    assert_int_equal(copy_wait(g, "/nonexistent/x", st.st_dev, 0), -ENOENT);
    pfr_fsguard_stats s;
    pfr_fsguard_stats_get(g, &s);
    assert_int_equal(s.copies, 1);
    assert_int_equal(s.copy_bytes, sizeof(data));
    assert_int_equal(s.copy_errors, 3);
    /* the copy made is every caller's (the symbolizer's and the unwinder's): no second worker */
    fd = pfr_fsguard_copy(g, path, st.st_dev, st.st_ino);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, back, 10, 0), 10);
    assert_memory_equal(back, data, 10);
    close(fd);
    pfr_fsguard_stats_get(g, &s);
    assert_int_equal(s.copies, 1);
    /* an avoided file system is not touched again */
    pfr_fsguard_avoid(g, st.st_dev);
    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino + 2), -EAGAIN);
    pfr_fsguard_stats_get(g, &s);
    assert_int_equal(s.refused_avoided, 1);
    pfr_fsguard_free(g);

    /* too big; policy skip; the memfd fallback */
    assert_int_equal(pfr_fsguard_new(&(pfr_fsguard_opts){.max_copy_bytes = 4096}, &g), 0);
    assert_int_equal(copy_wait(g, path, st.st_dev, st.st_ino), -EFBIG);
    pfr_fsguard_stats_get(g, &s);
    assert_int_equal(s.refused_too_big, 1);
    pfr_fsguard_free(g);
    assert_int_equal(pfr_fsguard_new(&(pfr_fsguard_opts){.remote = PFR_FSGUARD_REMOTE_SKIP}, &g),
                     0);
    assert_int_equal(copy_wait(g, path, st.st_dev, st.st_ino), -EREMOTE);
    pfr_fsguard_stats_get(g, &s);
    assert_int_equal(s.refused_skip, 1);
    pfr_fsguard_free(g);
    assert_int_equal(pfr_fsguard_new(NULL, &g), 0);
    fd = copy_wait(g, path, st.st_dev, st.st_ino);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, back, 10, 99990), 10);
    assert_memory_equal(back, data + 99990, 10);
    close(fd);
    pfr_fsguard_free(g);
    /* the copy directory on the ring's file system, whose reserve and cap take all of it: no
     * copy there (not in memory either), counted */
    struct stat ds;
    assert_int_equal(stat("/var/tmp", &ds), 0);
    pfr_disk_keep keep = {
        .ring_known = true, .ring_dev = (uint64_t)ds.st_dev, .ring_cap = UINT64_MAX / 2};
    assert_int_equal(
        pfr_fsguard_new(&(pfr_fsguard_opts){.copy_dir = "/var/tmp", .copy_keep = &keep}, &g), 0);
    assert_int_equal(copy_wait(g, path, st.st_dev, st.st_ino), -EDQUOT);
    pfr_fsguard_stats_get(g, &s);
    assert_int_equal(s.refused_no_room, 1);
    assert_int_equal(s.copies, 0);
    pfr_fsguard_free(g);
    /* another file system's ring: copied */
    keep.ring_dev++;
    assert_int_equal(
        pfr_fsguard_new(&(pfr_fsguard_opts){.copy_dir = "/var/tmp", .copy_keep = &keep}, &g), 0);
    fd = copy_wait(g, path, st.st_dev, st.st_ino);
    assert_true(fd >= 0);
    close(fd);
    pfr_fsguard_free(g);
    assert_int_equal(pfr_fsguard_new(&(pfr_fsguard_opts){.remote = 7}, &g), -EINVAL);
    unlink(path);
}

/* Ask for stats until the copies (and failures) made reach n: every worker reaped. */
static void reaped(pfr_fsguard *g, uint64_t n)
{
    pfr_fsguard_stats s = {0};
    for (int i = 0; i < 500; i++) {
        pfr_fsguard_stats_get(g, &s);
        if (s.copies + s.copy_errors >= n)
            return;
        usleep(10000);
    }
    fail_msg("workers not done: %llu of %llu", (unsigned long long)(s.copies + s.copy_errors),
             (unsigned long long)n);
}

/* A finished copy waits for its first taker, however often the statistics reap workers (a
 * caller that asks once a minute comes back long after), then stays a short while for the
 * others; the finished copies make room for a new job when every slot is taken. */
static void copies_wait_for_their_taker(void **state)
{
    (void)state;
    char path[] = "/var/tmp/pfr-fsguard-keep-XXXXXX";
    int w = mkstemp(path);
    assert_true(w >= 0);
    assert_int_equal(write(w, "0123456789", 10), 10);
    close(w);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    pfr_fsguard *g;
    assert_int_equal(
        pfr_fsguard_new(&(pfr_fsguard_opts){.keep_ns = 1500000000LL, .copy_dir = "/var/tmp"}, &g),
        0);
    g->shared_ns = 100000000LL; /* 100 ms for the callers after the first */

    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino), -EINPROGRESS);
    reaped(g, 1);
    usleep(400000); /* past the shared time: nobody has taken it yet */
    pfr_fsguard_stats_get(g, &(pfr_fsguard_stats){0});
    int fd = pfr_fsguard_copy(g, path, st.st_dev, st.st_ino);
    assert_true(fd >= 0);
    close(fd);
    fd = pfr_fsguard_copy(g, path, st.st_dev, st.st_ino); /* another caller, right after */
    assert_true(fd >= 0);
    close(fd);
    usleep(400000); /* taken: gone after the shared time, a new worker copies it again */
    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino), -EINPROGRESS);
    reaped(g, 2);
    usleep(1800000); /* never taken: gone after keep_ns */
    pfr_fsguard_stats_get(g, &(pfr_fsguard_stats){0});
    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino), -EINPROGRESS);
    reaped(g, 3);

    /* every slot holds a finished copy nobody took (failed ones: another inode): a new file
     * still gets a worker, in the slot of the one nearest its end */
    for (uint64_t i = 1; i < PFR_FSGUARD_MAX_JOBS; i++)
        assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino + i), -EINPROGRESS);
    reaped(g, 3 + PFR_FSGUARD_MAX_JOBS - 1);
    assert_int_equal(g->njobs, PFR_FSGUARD_MAX_JOBS);
    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino + PFR_FSGUARD_MAX_JOBS),
                     -EINPROGRESS);
    assert_int_equal(g->njobs, PFR_FSGUARD_MAX_JOBS);
    pfr_fsguard_stats s;
    pfr_fsguard_stats_get(g, &s);
    assert_int_equal(s.refused_avoided, 0);
    /* the copy of the real file was the oldest: it made the room */
    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino), -EINPROGRESS);
    pfr_fsguard_free(g);

    /* a copy in memory (no copy directory) is the recorder's memory: not kept past the short
     * while, taken or not */
    assert_int_equal(pfr_fsguard_new(&(pfr_fsguard_opts){.keep_ns = 1500000000LL}, &g), 0);
    g->shared_ns = 100000000LL;
    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino), -EINPROGRESS);
    reaped(g, 1);
    usleep(400000);
    pfr_fsguard_stats_get(g, &(pfr_fsguard_stats){0});
    assert_int_equal(pfr_fsguard_copy(g, path, st.st_dev, st.st_ino), -EINPROGRESS);
    pfr_fsguard_free(g);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_lines),
        cmocka_unit_test(remote_types),
        cmocka_unit_test(kinds),
        cmocka_unit_test(open_local_stays_on_its_mount),
        cmocka_unit_test(stat_cached_matches_stat),
        cmocka_unit_test(copies),
        cmocka_unit_test(copies_wait_for_their_taker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
