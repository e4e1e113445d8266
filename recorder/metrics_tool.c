/*
 * pfr-recorder-metrics: the recorder's metric tables, printed for the docs and the tests (a
 * build tool, not installed).
 *
 *   pfr-recorder-metrics check       the rows' mistakes (exit 1), or nothing
 *   pfr-recorder-metrics reference   the Markdown block of docs/operations.md
 *                                    (scripts/gen-config-docs.sh splices it)
 *   pfr-recorder-metrics list        one line per family: NAME TYPE LABEL=V1|V2...
 *
 * Every mode checks the rows first and prints nothing else when they have a mistake.
 */
#include <stdio.h>
#include <string.h>

#include "pfr_metric_rows.h"
#include "source.h"

#define MAX_TABLES 64

int main(int argc, char **argv)
{
    const char *what = argc == 2 ? argv[1] : "";
    if (strcmp(what, "check") && strcmp(what, "reference") && strcmp(what, "list")) {
        fprintf(stderr, "usage: pfr-recorder-metrics check|reference|list\n");
        return 2;
    }
    const pfr_metric_table *tables[MAX_TABLES];
    size_t n = pfr_recorder_metric_tables(tables, MAX_TABLES);
    if (n > MAX_TABLES) {
        fprintf(stderr, "pfr-recorder-metrics: %zu tables, room for %d\n", n, MAX_TABLES);
        return 1;
    }
    char err[8192];
    if (pfr_metric_tables_check(tables, n, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (!strcmp(what, "reference"))
        pfr_metric_tables_write_ref(tables, n, "pfr-recorder", stdout);
    else if (!strcmp(what, "list"))
        pfr_metric_tables_write_list(tables, n, stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
