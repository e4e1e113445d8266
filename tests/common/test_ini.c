/* pfr_ini: whole lines or a refusal by number; no section or key given twice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_ini.h"

struct got {
    char last[8192]; /* "section/name=value" of the last pair */
    int pairs;
    char interval[64];
};

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct got *g = user;
    snprintf(g->last, sizeof(g->last), "%s/%s=%s", section, name, value);
    g->pairs++;
    if (strcmp(name, "interval") == 0)
        snprintf(g->interval, sizeof(g->interval), "%s", value);
    return strcmp(name, "bad") != 0;
}

static int parse(const char *text, struct got *g, char *err, size_t errlen)
{
    static const char *const rep[] = {"service.rule", NULL};
    memset(g, 0, sizeof(*g));
    err[0] = '\0';
    return pfr_ini_parse_text(text, strlen(text), "t.ini", rep, handler, g, err, errlen);
}

static void long_lines(void **state)
{
    (void)state;
    struct got g;
    char err[512], text[9000];
    /* a 300-byte value arrives whole */
    char v[301];
    memset(v, 'v', 300);
    v[300] = '\0';
    snprintf(text, sizeof(text), "[recorder]\nstore = %s\n", v);
    assert_int_equal(parse(text, &g, err, sizeof(err)), 0);
    assert_int_equal(g.pairs, 1);
    assert_int_equal(strlen(g.last), strlen("recorder/store=") + 300);
    /* a long comment never sets a key, however its end reads */
    char c[400];
    memset(c, 'x', 380);
    strcpy(c + 380, "interval = 7");
    snprintf(text, sizeof(text), "[recorder]\n# %s\ninterval = 10\n", c);
    assert_int_equal(parse(text, &g, err, sizeof(err)), 0);
    assert_int_equal(g.pairs, 1);
    assert_string_equal(g.interval, "10");
    /* past the limit: refused by number */
    char *huge = malloc(PFR_INI_MAX_LINE + 100);
    memset(huge, 'h', PFR_INI_MAX_LINE + 50);
    huge[PFR_INI_MAX_LINE + 50] = '\0';
    char *t2 = malloc(PFR_INI_MAX_LINE + 200);
    snprintf(t2, PFR_INI_MAX_LINE + 200, "[a]\nk = 1\n; %s\n", huge);
    assert_int_equal(parse(t2, &g, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "t.ini:3: line is too long"));
    free(huge);
    free(t2);
}

static void duplicates(void **state)
{
    (void)state;
    struct got g;
    char err[512];
    assert_int_equal(parse("[a]\nk = 1\n\n[a]\nj = 2\n", &g, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "t.ini:4: section [a] given again (first at line 1)");
    assert_int_equal(parse("[a]\nk = 1\nk: 2\n", &g, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "t.ini:3: key 'k' in [a] given again (first at line 2)");
    assert_int_equal(g.pairs, 0); /* refused before anything was applied */
    /* the same key in two sections, a repeatable key, a multi-line value: fine */
    assert_int_equal(parse("[a]\nk = 1\n[b]\nk = 2\n[service]\nrule = x\nrule = y\n"
                           "[c]\nlong = one\n  two\n",
                           &g, err, sizeof(err)),
                     0);
    assert_int_equal(g.pairs, 6); /* libinih hands a continued value over once per line */
    /* keys before any section */
    assert_int_equal(parse("k = 1\nk = 2\n", &g, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "t.ini:2: key 'k' given again (first at line 1)");
}

static void handler_errors_and_grammar(void **state)
{
    (void)state;
    struct got g;
    char err[512];
    /* the handler's refusal: its line, the reason is the caller's to give */
    assert_int_equal(parse("[a]\nok = 1\nbad = 2\n", &g, err, sizeof(err)), 3);
    /* CRLF and a BOM are libinih's to take */
    assert_int_equal(parse("\xef\xbb\xbf[a]\r\nk = 1\r\n", &g, err, sizeof(err)), 0);
    assert_string_equal(g.last, "a/k=1");
    /* a NUL byte is refused */
    struct got g2;
    char text[] = "[a]\nk = 1\0x\n";
    memset(&g2, 0, sizeof(g2));
    assert_int_equal(
        pfr_ini_parse_text(text, sizeof(text) - 1, "t.ini", NULL, handler, &g2, err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "t.ini:2: a NUL byte"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(long_lines),
        cmocka_unit_test(duplicates),
        cmocka_unit_test(handler_errors_and_grammar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
