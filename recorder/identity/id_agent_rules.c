/*
 * Two more of the node agent's rules (pfr_identity.h): the runtime id of a gVisor sandbox from
 * its command line (containers/registry.go getOrCreateContainer), and which systemd units it
 * skips as system services (containers/systemd.go IsSystemService, getSystemdProperties).
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

int pfr_identity_systemd_unit(const char *cgroup, char *out, size_t outlen)
{
    /* strings.Split(id, "/"): the first piece ending ".service", else the last piece */
    const char *last = cgroup;
    for (const char *p = cgroup;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        size_t n = (size_t)(p - last);
        if (ends_with(last, n, ".service"))
            return pfr_identity_fmt(out, outlen, "%.*s", (int)n, last);
        if (*p == '\0')
            return pfr_identity_fmt(out, outlen, "%.*s", (int)n, last);
        last = p + 1;
    }
}

bool pfr_identity_is_system_service(const char *unit, const char *type, const char *triggered_by,
                                    const char *prefixes)
{
    if (type && (strcmp(type, "oneshot") == 0 || strcmp(type, "dbus") == 0))
        return true;
    if (triggered_by && ends_with(triggered_by, strlen(triggered_by), ".timer"))
        return true;
    if (!unit)
        return false;
    const char *p = prefixes ? prefixes : PFR_IDENTITY_SYSTEM_SERVICE_PREFIXES;
    struct id_split sp = {p, p + strlen(p), false};
    const char *piece;
    size_t n;
    while (pfr_identity_split_next(&sp, ',', &piece, &n))
        if (n && strncmp(unit, piece, n) == 0)
            return true;
    return false;
}

static bool unit_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr(":_.@-\\", c) != NULL;
}

int pfr_identity_prefixes_check(const char *prefixes, char *err, size_t errlen)
{
    const char *p = prefixes ? prefixes : "";
    struct id_split sp = {p, p + strlen(p), false};
    const char *piece;
    size_t n;
    while (pfr_identity_split_next(&sp, ',', &piece, &n)) {
        if (n == 0) {
            snprintf(err, errlen, "'%s' has an empty prefix (a comma too many?)", p);
            return -EINVAL;
        }
        for (size_t i = 0; i < n; i++) {
            if (!unit_char(piece[i])) {
                snprintf(err, errlen, "'%.*s' is not a unit name prefix", (int)n, piece);
                return -EINVAL;
            }
        }
    }
    return 0;
}
