/* pfr_system_service: the node agent's system-service rule (pfr_system_service.h). */
#include "pfr_system_service.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int put(char *out, size_t outlen, const char *s, size_t n)
{
    if (n >= outlen) {
        if (outlen)
            out[0] = '\0';
        return -ENAMETOOLONG;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

int pfr_system_service_unit(const char *cgroup, char *out, size_t outlen)
{
    /* strings.Split(id, "/"): the first piece ending ".service", else the last piece */
    const char *last = cgroup;
    for (const char *p = cgroup;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        size_t n = (size_t)(p - last);
        if (ends_with(last, n, ".service") || *p == '\0')
            return put(out, outlen, last, n);
        last = p + 1;
    }
}

/* The next comma-separated piece of *p (advanced past it): false at the end. */
static bool next_piece(const char **p, const char **piece, size_t *n)
{
    if (!*p)
        return false;
    const char *comma = strchr(*p, ',');
    *piece = *p;
    *n = comma ? (size_t)(comma - *p) : strlen(*p);
    *p = comma ? comma + 1 : NULL;
    return true;
}

bool pfr_system_service_is(const char *unit, const char *type, const char *triggered_by,
                           const char *prefixes)
{
    if (type && (strcmp(type, "oneshot") == 0 || strcmp(type, "dbus") == 0))
        return true;
    if (triggered_by && ends_with(triggered_by, strlen(triggered_by), ".timer"))
        return true;
    if (!unit)
        return false;
    const char *p = prefixes ? prefixes : PFR_SYSTEM_SERVICE_PREFIXES;
    const char *piece;
    size_t n;
    while (next_piece(&p, &piece, &n))
        if (n && strncmp(unit, piece, n) == 0)
            return true;
    return false;
}

static bool unit_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr(":_.@-\\", c) != NULL);
}

int pfr_system_service_prefixes_check(const char *prefixes, char *err, size_t errlen)
{
    const char *p = prefixes ? prefixes : "";
    const char *all = p, *piece;
    size_t n;
    while (next_piece(&p, &piece, &n)) {
        if (n == 0) {
            snprintf(err, errlen, "'%s' has an empty prefix (a comma too many?)", all);
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

bool pfr_system_service_id_unit(const char *container_id, char *unit, size_t unitlen)
{
    static const char *const slices[] = {"system", "runtime", "reserved",
                                         "kube",   "azure",   "podruntime"};
    if (unitlen)
        unit[0] = '\0';
    if (!container_id || container_id[0] != '/')
        return false;
    for (size_t i = 0; i < sizeof(slices) / sizeof(slices[0]); i++) {
        size_t n = strlen(slices[i]);
        const char *rest = container_id + 1 + n;
        if (strncmp(container_id + 1, slices[i], n) || strncmp(rest, ".slice/", 7))
            continue;
        rest += 7;
        if (!*rest || strchr(rest, '/'))
            return false;
        return put(unit, unitlen, rest, strlen(rest)) == 0;
    }
    return false;
}
