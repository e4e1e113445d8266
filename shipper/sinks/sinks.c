/* sinks: the table of sink kinds. A new kind is its folder and one row below. */
#include "sinks/sinks.h"

#include <stdio.h>
#include <string.h>

#include "sinks/clickhouse/clickhouse_sink.h"
#include "sinks/coroot/coroot_sink.h"

const pfr_sink_kind *const pfr_sink_kinds[] = {
    &pfr_sink_coroot,
    &pfr_sink_clickhouse,
};
const size_t pfr_sink_nkinds = sizeof(pfr_sink_kinds) / sizeof(pfr_sink_kinds[0]);

const pfr_sink_kind *pfr_sink_kind_find(const char *name)
{
    for (size_t i = 0; name && i < pfr_sink_nkinds; i++)
        if (!strcmp(pfr_sink_kinds[i]->name, name))
            return pfr_sink_kinds[i];
    return NULL;
}

const char *pfr_sink_kind_names(const char *sep, const char *last_sep, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < pfr_sink_nkinds && o < len; i++) {
        const char *s = i == 0 ? "" : i + 1 == pfr_sink_nkinds ? last_sep : sep;
        int n = snprintf(buf + o, len - o, "%s%s", s, pfr_sink_kinds[i]->name);
        if (n < 0)
            break;
        o += (size_t)n;
    }
    return buf;
}
