/* The recorder's sources, one row each, in start order: the CPU profiler first (the daemon
 * cannot run without it, so it fails before the others start); and every metric table, the
 * daemon's and the sources'. */
#include "source.h"

#include "cpu_source.h"
#include "goheap_source.h"
#include "java_source.h"
#include "scrape_source.h"

static const pfr_source_desc *const sources[] = {
    &pfr_cpu_source_desc,
    &pfr_goheap_source_desc,
    &pfr_scrape_source_desc,
    &pfr_java_source_desc,
};

const pfr_source_desc *const *pfr_recorder_sources(size_t *n)
{
    *n = sizeof(sources) / sizeof(sources[0]);
    return sources;
}

size_t pfr_recorder_metric_tables(const pfr_metric_table **out, size_t max)
{
    size_t n = 0;
    for (const pfr_metric_table *const *t = pfr_daemon_metric_tables; *t; t++, n++)
        if (n < max)
            out[n] = *t;
    for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++)
        for (const pfr_metric_table *const *t = sources[i]->metrics; t && *t; t++, n++)
            if (n < max)
                out[n] = *t;
    return n;
}
