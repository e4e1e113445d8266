/* The recorder's sources, one row each, in start order: the CPU profiler first (the others
 * borrow its symbolizer). */
#include "source.h"

#include "cpu_source.h"
#include "goheap_source.h"
#include "scrape_source.h"

static const pfr_source_desc *const sources[] = {
    &pfr_cpu_source_desc,
    &pfr_goheap_source_desc,
    &pfr_scrape_source_desc,
};

const pfr_source_desc *const *pfr_recorder_sources(size_t *n)
{
    *n = sizeof(sources) / sizeof(sources[0]);
    return sources;
}
