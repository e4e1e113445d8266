/* fmt: durations and byte counts as the shipper's logs and `status` show them. */
#include "fmt.h"

#include <stdio.h>

const char *pfr_fmt_duration(int64_t ms, char *out, size_t cap)
{
    if (ms < 0)
        ms = 0;
    if (ms < 1000)
        snprintf(out, cap, "%lldms", (long long)ms);
    else if (ms < 60000)
        snprintf(out, cap, "%.1fs", ms / 1000.0);
    else if (ms < 3600000)
        snprintf(out, cap, "%lldm%02llds", (long long)(ms / 60000), (long long)(ms / 1000 % 60));
    else if (ms < 86400000)
        snprintf(out, cap, "%lldh%02lldm", (long long)(ms / 3600000), (long long)(ms / 60000 % 60));
    else
        snprintf(out, cap, "%lldd%02lldh", (long long)(ms / 86400000),
                 (long long)(ms / 3600000 % 24));
    return out;
}

const char *pfr_fmt_bytes(uint64_t n, char *out, size_t cap)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (n < 1024) {
        snprintf(out, cap, "%llu B", (unsigned long long)n);
        return out;
    }
    double v = (double)n / 1024;
    size_t u = 0;
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    snprintf(out, cap, "%.1f %s", v, units[u]);
    return out;
}
