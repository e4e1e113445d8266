#include "ch_answer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sample_cols[][2] = {
    {"ServiceName", "LowCardinality(String)"},
    {"Type", "LowCardinality(String)"},
    {"Start", "DateTime64(9)"},
    {"End", "DateTime64(9)"},
    {"Labels", "Map(LowCardinality(String), String)"},
    {"StackHash", "UInt64"},
    {"Value", "Int64"},
};
static const char *const stack_cols[][2] = {
    {"ServiceName", "LowCardinality(String)"},
    {"Hash", "UInt64"},
    {"LastSeen", "DateTime64(9)"},
    {"Stack", "Array(String)"},
};

bool pfr_ch_check_columns(const char *ans, char *why, size_t whylen)
{
    for (int t = 0; t < 2; t++) {
        const char *table = t ? "profiling_stacks" : "profiling_samples";
        const char *const(*cols)[2] = t ? stack_cols : sample_cols;
        size_t ncols = t ? 4 : 7;
        for (size_t i = 0; i < ncols; i++) {
            char want[160];
            int n = snprintf(want, sizeof(want), "%s\t%s\t", table, cols[i][0]);
            const char *p = ans, *found = NULL;
            while ((p = strstr(p, want))) {
                if (p == ans || p[-1] == '\n') {
                    found = p + n;
                    break;
                }
                p++;
            }
            if (!found) {
                snprintf(why, whylen, "%s.%s is missing%s", table, cols[i][0],
                         i == 0 ? " (no table? set create_tables)" : "");
                return false;
            }
            size_t tl = strcspn(found, "\n");
            if (tl != strlen(cols[i][1]) || strncmp(found, cols[i][1], tl)) {
                snprintf(why, whylen, "%s.%s is %.*s, not %s", table, cols[i][0],
                         (int)(tl > 80 ? 80 : tl), found, cols[i][1]);
                return false;
            }
        }
    }
    return true;
}

long long pfr_ch_dedup_window(const char *ans, const char *table, bool *replicated, bool *found)
{
    char want[80];
    snprintf(want, sizeof(want), "%s\t", table);
    size_t wl = strlen(want);
    const char *p = ans;
    *found = *replicated = false;
    while (p && *p) {
        const char *line_end = p + strcspn(p, "\n");
        if ((size_t)(line_end - p) >= wl && !strncmp(p, want, wl)) {
            *found = true;
            const char *eng = p + wl;
            *replicated = !strncmp(eng, "Replicated", 10) || !strncmp(eng, "Shared", 6);
            const char *key = "non_replicated_deduplication_window = ";
            for (const char *w = eng; w < line_end; w++) {
                if ((size_t)(line_end - w) > strlen(key) && !strncmp(w, key, strlen(key)))
                    return strtoll(w + strlen(key), NULL, 10);
            }
            return 0;
        }
        p = *line_end ? line_end + 1 : NULL;
    }
    return 0;
}
