/* libFuzzer target: what a JVM (or its user, who owns its /tmp and may answer on its socket)
 * sends back, and the /proc texts the attach client parses. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hotspot_attach.h"
#include "jfr_session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    int status;
    size_t body;
    if (pfr_hotspot_parse_reply(s, size, &status, &body) == 0 && body > size)
        __builtin_trap();
    pfr_jvm j;
    memset(&j, 0, sizeof(j));
    if (pfr_hotspot_parse_status(s, size, &j) == 0 && j.nspid <= 0)
        __builtin_trap();
    (void)pfr_hotspot_maps_have_libjvm(s, size);
    (void)pfr_hotspot_cmdline_flag(s, size, "DisableAttachMechanism");
    unsigned n;
    bool has;
    pfr_jfr_check_parse(s, size, PFR_JFR_RECORDING, &n, &has);
    if (has && n == 0)
        __builtin_trap();
    return 0;
}
