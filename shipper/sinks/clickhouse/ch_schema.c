#include "sinks/clickhouse/ch_schema.h"

#include <errno.h>
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

int pfr_ch_survey_query(const char *db, pfr_buf *out)
{
    pfr_buf_reset(out);
    pfr_buf_printf(out,
                   "SELECT name, engine, engine_full FROM system.tables WHERE database = '%s' "
                   "AND name IN ('profiling_stacks', 'profiling_samples', 'profiling_profiles', "
                   "'profiling_profiles_mv', 'profiling_stacks_distributed', "
                   "'profiling_samples_distributed')\n"
                   "UNION ALL SELECT '.keeper', toString(count()), '' FROM system.tables "
                   "WHERE database = 'system' AND name = 'zookeeper'\n"
                   "UNION ALL SELECT '.clusters', toString(count(DISTINCT cluster)), '' "
                   "FROM system.clusters\n"
                   "UNION ALL SELECT '.cloud', value, '' FROM system.settings "
                   "WHERE name = 'cloud_mode_engine'\n"
                   "FORMAT TabSeparated",
                   db);
    return pfr_buf_cstr(out) ? 0 : -ENOMEM;
}

/* Whether line (up to its end) starts with "name\t"; *rest gets what follows. */
static bool line_is(const char *line, const char *end, const char *name, const char **rest)
{
    size_t n = strlen(name);
    if ((size_t)(end - line) <= n || strncmp(line, name, n) || line[n] != '\t')
        return false;
    *rest = line + n + 1;
    return true;
}

void pfr_ch_layout_read(const char *ans, pfr_ch_layout *l)
{
    const struct {
        const char *name;
        bool *has;
        bool dist; /* a way to the shards: counts only with engine Distributed */
    } objs[] = {
        {"profiling_stacks", &l->stacks, false},
        {"profiling_samples", &l->samples, false},
        {"profiling_profiles", &l->profiles, false},
        {"profiling_profiles_mv", &l->profiles_mv, false},
        {"profiling_stacks_distributed", &l->stacks_dist, true},
        {"profiling_samples_distributed", &l->samples_dist, true},
    };
    memset(l, 0, sizeof(*l));
    for (const char *p = ans ? ans : ""; *p;) {
        const char *end = p + strcspn(p, "\n"), *v;
        for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
            if (!line_is(p, end, objs[i].name, &v))
                continue;
            *objs[i].has = !objs[i].dist || !strncmp(v, "Distributed\t", 12);
            if (!objs[i].dist && !strncmp(v, "Replicated", 10))
                l->replicated = true;
        }
        if (line_is(p, end, ".keeper", &v))
            l->keeper = strtol(v, NULL, 10) > 0;
        if (line_is(p, end, ".clusters", &v))
            l->clusters = strtol(v, NULL, 10);
        if (line_is(p, end, ".cloud", &v))
            l->cloud = strtol(v, NULL, 10) >= 2;
        p = *end ? end + 1 : end;
    }
}

bool pfr_ch_layout_clustered(const pfr_ch_layout *l, char *why, size_t whylen)
{
    if (l->replicated)
        snprintf(why, whylen, "its tables are Replicated");
    else if (l->stacks_dist || l->samples_dist)
        snprintf(why, whylen, "it has Distributed tables (profiling_*_distributed)");
    else if (l->keeper && l->clusters > 0 && !l->cloud)
        snprintf(why, whylen, "the server has Keeper and %ld cluster%s", l->clusters,
                 l->clusters > 1 ? "s" : "");
    else
        return false;
    return true;
}
