/*
 * One more of the node agent's rules (pfr_identity.h): the runtime id of a gVisor sandbox from
 * its command line (containers/registry.go getOrCreateContainer). Which systemd units it skips
 * as system services is common/pfr_system_service.h (the shipper applies it too).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "id_internal.h"

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

bool pfr_identity_gvisor_rid(const char *cmdline, size_t len, char *rid)
{
    rid[0] = '\0';
    if (len > 0 && cmdline[len - 1] == '\0')
        len--; /* the agent's bytes.TrimSuffix(cmdline, "\x00") */
    const char *nul = memchr(cmdline, '\0', len);
    size_t cmdlen = nul ? (size_t)(nul - cmdline) : len;
    if (!ends_with(cmdline, cmdlen, "runsc-sandbox") && !ends_with(cmdline, cmdlen, "runsc"))
        return false;
    const char *last = cmdline;
    for (const char *p = cmdline; (p = memchr(p, '\0', len - (size_t)(p - cmdline))) != NULL;)
        last = ++p;
    size_t lastlen = len - (size_t)(last - cmdline);
    if (lastlen != PFR_IDENTITY_RUNTIME_ID_LEN)
        return false;
    for (size_t i = 0; i < lastlen; i++)
        if (!pfr_identity_is_rid_char(last[i]))
            return false;
    memcpy(rid, last, PFR_IDENTITY_RUNTIME_ID_LEN);
    rid[PFR_IDENTITY_RUNTIME_ID_LEN] = '\0';
    return true;
}
