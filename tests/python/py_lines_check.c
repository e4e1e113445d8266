/* Holds pfr's decoders of line tables (py_lines.h) to CPython's own answer: reads the lines
 * lines_oracle.py prints (HEX_TABLE FIRSTLINENO LINE,LINE,... per code object) on stdin and
 * checks the line of every code unit. Exit 0 when all match and there were at least 1000 code
 * objects.
 *
 * Usage: py_lines_check [311|310|lnotab]  -- the table's format (default 311: 3.11+) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "py_layout.h"
#include "py_lines.h"

#define MAX_LINE (4 << 20)

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int kind_of(const char *arg)
{
    if (!arg || !strcmp(arg, "311"))
        return PFR_PY_LINES_311;
    if (!strcmp(arg, "310"))
        return PFR_PY_LINES_310;
    if (!strcmp(arg, "lnotab"))
        return PFR_PY_LINES_LNOTAB;
    return -1;
}

int main(int argc, char **argv)
{
    int kind = kind_of(argc > 1 ? argv[1] : NULL);
    if (kind < 0) {
        fprintf(stderr, "usage: py_lines_check [311|310|lnotab]\n");
        return 2;
    }
    char *line = malloc(MAX_LINE);
    uint8_t *tab = malloc(MAX_LINE / 2);
    if (!line || !tab)
        return 2;
    long objects = 0, units = 0, bad = 0;
    while (fgets(line, MAX_LINE, stdin)) {
        char *save = NULL, *hex = strtok_r(line, " \n", &save);
        char *first = strtok_r(NULL, " \n", &save), *want = strtok_r(NULL, " \n", &save);
        if (!hex || !first || !want)
            continue;
        size_t n = 0;
        for (const char *h = hex; h[0] && h[1] && strcmp(hex, "-"); h += 2)
            tab[n++] = (uint8_t)(hexval(h[0]) << 4 | hexval(h[1]));
        int64_t fl = strtoll(first, NULL, 10);
        uint32_t unit = 0;
        for (char *w = strtok_r(want, ",", &save); w; w = strtok_r(NULL, ",", &save), unit++) {
            int64_t exp = strtoll(w, NULL, 10), got = pfr_py_line((unsigned)kind, tab, n, fl, unit);
            units++;
            if (got != exp && bad++ < 10)
                fprintf(stderr,
                        "code object %ld (first line %lld), unit %u: line %lld, CPython "
                        "says %lld\n",
                        objects, (long long)fl, unit, (long long)got, (long long)exp);
        }
        objects++;
    }
    printf("%ld code objects, %ld code units, %ld lines wrong\n", objects, units, bad);
    free(line);
    free(tab);
    return bad == 0 && objects >= 1000 ? 0 : 1;
}
