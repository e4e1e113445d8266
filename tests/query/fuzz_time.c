/* libFuzzer target: time and duration expressions never crash, and accepted times parse the same
 * after being printed back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_time.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[256], err[1024];
    if (size >= sizeof(s))
        size = sizeof(s) - 1;
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t ns, d;
    const int64_t now = 1714564800LL * 1000000000LL;
    if (pfr_time_parse(s, now, &ns, err, sizeof(err)) == 0) {
        char buf[64];
        int64_t again;
        pfr_time_format_rfc3339(ns, buf, sizeof(buf));
        if (pfr_time_parse(buf, now, &again, err, sizeof(err)) != 0 ||
            again / 1000000000LL != ns / 1000000000LL)
            abort();
    }
    pfr_duration_parse(s, &d, err, sizeof(err));
    return 0;
}
