#include "sinks/service_name.h"

#include <string.h>

const char *pfr_sink_service_name(const char *prefix, const char *service, pfr_buf *scratch)
{
    if (!service || !service[0])
        return NULL;
    if (!prefix || !prefix[0])
        return service;
    pfr_buf_reset(scratch);
    pfr_buf_puts(scratch, prefix);
    pfr_buf_puts(scratch, service);
    return pfr_buf_cstr(scratch);
}

bool pfr_service_name_prefix_ok(const char *prefix)
{
    size_t n = strlen(prefix);
    if (n > PFR_SERVICE_NAME_PREFIX_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)prefix[i] < 0x20 || prefix[i] == 0x7f)
            return false;
    return true;
}
