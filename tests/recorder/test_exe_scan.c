/*
 * exe_scan: the /proc scan shared by the Go heap profiler and pprof discovery. Over a fake
 * /proc: processes with an executable are listed with its identity, the others (kernel threads,
 * names that are not pids) left out; a scan younger than the age asked for is served again,
 * an older one is made anew.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "exe_scan.h"

static char root[64];

static void fake_pid(const char *name, const char *exe)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", root, name);
    assert_int_equal(mkdir(path, 0755), 0);
    if (exe) {
        snprintf(path, sizeof(path), "%s/%s/exe", root, name);
        assert_int_equal(symlink(exe, path), 0);
    }
}

static const pfr_exe *find(const pfr_exe_list *l, pid_t pid)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].pid == pid)
            return &l->v[i];
    return NULL;
}

static void test_lists_processes_with_executables(void **state)
{
    (void)state;
    fake_pid("100", "/bin/sh");
    fake_pid("200", NULL);               /* a kernel thread: no exe */
    fake_pid("300", "/nonexistent/bin"); /* its link leads nowhere */
    fake_pid("self", "/bin/sh");
    fake_pid("12x", "/bin/sh");
    pfr_exe_scan *s;
    assert_int_equal(pfr_exe_scan_new(root, &s), 0);
    pfr_exe_list l;
    assert_int_equal(pfr_exe_scan_get(s, 0, &l), 0);
    assert_int_equal(l.n, 1);
    const pfr_exe *x = find(&l, 100);
    assert_non_null(x);
    struct stat want;
    assert_int_equal(stat("/bin/sh", &want), 0);
    assert_true(x->st.st_dev == want.st_dev && x->st.st_ino == want.st_ino);
    pfr_exe_list_free(&l);

    /* young enough: the same scan, without the process started since */
    fake_pid("400", "/bin/sh");
    assert_int_equal(pfr_exe_scan_get(s, 3600ll * 1000000000, &l), 0);
    assert_null(find(&l, 400));
    pfr_exe_list_free(&l);
    assert_int_equal(pfr_exe_scan_count(s), 1);

    /* too old: scanned again */
    usleep(2000);
    assert_int_equal(pfr_exe_scan_get(s, 1000000, &l), 0);
    assert_non_null(find(&l, 400));
    assert_int_equal(l.n, 2);
    pfr_exe_list_free(&l);
    assert_int_equal(pfr_exe_scan_count(s), 2);
    pfr_exe_scan_free(s);
}

static void test_unreadable_root(void **state)
{
    (void)state;
    pfr_exe_scan *s;
    assert_int_equal(pfr_exe_scan_new("/nonexistent-proc", &s), 0);
    pfr_exe_list l;
    assert_true(pfr_exe_scan_get(s, 0, &l) < 0);
    assert_int_equal(l.n, 0);
    assert_null(l.v);
    pfr_exe_scan_free(s);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/pfr-exescan-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_processes_with_executables),
        cmocka_unit_test(test_unreadable_root),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
