/* pfr -o PATH: a failed write never destroys what PATH named (a file, a symlink, a device). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "out_file.h"

static char dir[] = "/tmp/pfr-out-test-XXXXXX";

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_string_equal(buf, text);
}

/* No temporary file left in dir. */
static void expect_no_temp(const char *d)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s' | grep '^\\.pfr-out-')\"", d);
    assert_int_equal(system(cmd), 0);
}

static int write_text(const char *path, const char *text, bool ok)
{
    pfr_out_file o;
    char err[256] = "";
    int rc = pfr_out_file_open(path, &o, err, sizeof(err));
    if (rc < 0)
        return rc;
    fputs(text, o.f);
    return pfr_out_file_close(&o, ok, err, sizeof(err));
}

static void new_and_existing_files(void **state)
{
    (void)state;
    char p[256];
    snprintf(p, sizeof(p), "%s/new.svg", dir);
    assert_int_equal(write_text(p, "one", true), 0);
    expect(p, "one");
    chmod(p, 0640);
    /* a failed render: the old content stays */
    assert_int_equal(write_text(p, "two", false), 0);
    expect(p, "one");
    /* a good one replaces it, keeping its mode */
    assert_int_equal(write_text(p, "three", true), 0);
    expect(p, "three");
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    expect_no_temp(dir);
}

static void symlinks_stay_symlinks(void **state)
{
    (void)state;
    char target[256], link[256];
    snprintf(target, sizeof(target), "%s/target.html", dir);
    snprintf(link, sizeof(link), "%s/link.html", dir);
    put(target, "old");
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(write_text(link, "bad", false), 0);
    expect(target, "old");
    assert_int_equal(write_text(link, "new", true), 0);
    struct stat ls;
    assert_int_equal(lstat(link, &ls), 0);
    assert_true(S_ISLNK(ls.st_mode)); /* still a link, its target updated */
    expect(target, "new");
    expect_no_temp(dir);
}

static void devices_are_written_in_place(void **state)
{
    (void)state;
    /* a node like /dev/full: every write fails with ENOSPC */
    char full[256], link[256];
    snprintf(full, sizeof(full), "%s/full", dir);
    snprintf(link, sizeof(link), "%s/to-full", dir);
    assert_int_equal(mknod(full, S_IFCHR | 0666, makedev(1, 7)), 0);
    assert_int_equal(symlink(full, link), 0);
    char big[70000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(write_text(full, big, true), -ENOSPC);
    assert_int_equal(write_text(link, big, true), -ENOSPC);
    struct stat st;
    assert_int_equal(stat(full, &st), 0);
    assert_true(S_ISCHR(st.st_mode)); /* both survive */
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    /* /dev/null takes it all */
    assert_int_equal(write_text("/dev/null", "x", true), 0);
}

static void full_disk_keeps_the_old_file(void **state)
{
    (void)state;
    char mnt[256], p[300];
    snprintf(mnt, sizeof(mnt), "%s/small", dir);
    assert_int_equal(mkdir(mnt, 0755), 0);
    assert_int_equal(mount("tmpfs", mnt, "tmpfs", 0, "size=64k"), 0);
    snprintf(p, sizeof(p), "%s/flame.svg", mnt);
    put(p, "the old flame graph");
    static char big[1 << 20];
    memset(big, 'y', sizeof(big) - 1);
    int rc = write_text(p, big, true);
    assert_true(rc == -ENOSPC || rc == -EIO);
    expect(p, "the old flame graph");
    expect_no_temp(mnt);
    assert_int_equal(umount(mnt), 0);
}

static void errors_are_clear(void **state)
{
    (void)state;
    pfr_out_file o;
    char err[256] = "";
    assert_int_equal(pfr_out_file_open("/nonexistent-dir/x.svg", &o, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent-dir/x.svg"));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(new_and_existing_files),
        cmocka_unit_test(symlinks_stay_symlinks),
        cmocka_unit_test(devices_are_written_in_place),
        cmocka_unit_test(full_disk_keeps_the_old_file),
        cmocka_unit_test(errors_are_clear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
