/* The identity tests' temporary folder (id_testdir.h). */
#include "id_testdir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[64];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

int id_testdir_setup(const char *tag)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pfr-%s-XXXXXX", tag);
    return mkdtemp(tmpdir) ? 0 : -1;
}

int id_testdir_teardown(void)
{
    return nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *id_testdir_path(const char *rel)
{
    static char buf[8][512];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, 512, "%s/%s", tmpdir, rel);
    return b;
}

void id_testdir_put(const char *rel, const char *content, size_t len)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
    for (char *s = strchr(p + strlen(tmpdir) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    char tmp[520];
    snprintf(tmp, sizeof(tmp), "%s.tmp", p);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(content, 1, len, f), len);
    fclose(f);
    assert_int_equal(rename(tmp, p), 0);
}
