/* libFuzzer: one line of /proc/PID/mountinfo (a mount namespace's owner writes its mount
 * points: hostile text) through pfr_fsguard_parse_mountinfo_line. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pfr_fsguard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t dev;
    char mnt[64], type[16];
    int rc = pfr_fsguard_parse_mountinfo_line((const char *)data, size, &dev, mnt, sizeof(mnt),
                                              type, sizeof(type));
    if (rc == 0 && (mnt[0] != '/' || strlen(mnt) >= sizeof(mnt) || type[0] == '\0'))
        __builtin_trap();
    return 0;
}
