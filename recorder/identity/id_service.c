/*
 * Container id -> Coroot service name (pfr_identity_service_name): Coroot's three patterns for
 * a Deployment's, a DaemonSet's and a StatefulSet's pod, tried in that order, each unanchored
 * and matched leftmost-first as Go's regexp does:
 *
 *   (/k8s/[a-z0-9-]+/[a-z0-9-]+)-[0-9a-f]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}/.+
 *   (/k8s/[a-z0-9-]+/[a-z0-9-]+)-[bcdfghjklmnpqrstvwxz2456789]{5}/.+
 *   (/k8s/[a-z0-9-]+/[a-z0-9-]+)-\d+/.+
 *
 * No character of the classes is '/', so a match starting at a "/k8s/" is forced: the first
 * class run must reach the next '/', the second run (the pod) must reach the '/' after it, the
 * pod must end with the suffix pattern and one character other than '\n' must follow. The
 * suffix itself is determined by the pod (the hash / digit run has no '-'), so the greedy group
 * is the pod minus that suffix.
 */
#include <errno.h>
#include <string.h>

#include "id_internal.h"

enum owner { DEPLOYMENT = 0, DAEMONSET, STATEFULSET, NOWNERS };

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Kubernetes' alphabet of generated name suffixes (no vowels, no 0 1 3). */
static bool is_suffix_char(char c)
{
    return c && strchr("bcdfghjklmnpqrstvwxz2456789", c) != NULL;
}

static size_t name_run(const char *s)
{
    size_t n = 0;
    while (is_name_char(s[n]))
        n++;
    return n;
}

/* "-<5 suffix chars>" ending at pod + len; true if so. */
static bool ends_generated(const char *pod, size_t len)
{
    if (len < 6 || pod[len - 6] != '-')
        return false;
    for (size_t i = len - 5; i < len; i++)
        if (!is_suffix_char(pod[i]))
            return false;
    return true;
}

/* Length of the owner's name within pod[0..len) for the given pattern, or 0 for no match. */
static size_t owner_name_len(enum owner o, const char *pod, size_t len)
{
    switch (o) {
    case DEPLOYMENT:
        if (!ends_generated(pod, len))
            return 0;
        for (size_t k = 1; k <= 10 && k + 7 <= len; k++) {
            size_t h = len - 6 - k; /* where the hash starts */
            if (!is_hex(pod[h]))
                return 0;
            if (pod[h - 1] == '-')
                return h - 1 >= 1 ? h - 1 : 0;
        }
        return 0;
    case DAEMONSET:
        return ends_generated(pod, len) && len - 6 >= 1 ? len - 6 : 0;
    case STATEFULSET: {
        size_t d = len;
        while (d > 0 && is_digit(pod[d - 1]))
            d--;
        if (d == len || d < 2 || pod[d - 1] != '-')
            return 0;
        return d - 1;
    }
    default:
        return 0;
    }
}

/* The group of pattern o matched at s (which starts with "/k8s/"): its length, or 0. */
static size_t match_at(enum owner o, const char *s)
{
    const char *ns = s + 5;
    size_t nslen = name_run(ns);
    if (nslen == 0 || ns[nslen] != '/')
        return 0;
    const char *pod = ns + nslen + 1;
    size_t podlen = name_run(pod);
    if (pod[podlen] != '/' || pod[podlen + 1] == '\0' || pod[podlen + 1] == '\n')
        return 0;
    size_t name = owner_name_len(o, pod, podlen);
    return name ? (size_t)(pod - s) + name : 0;
}

int pfr_identity_service_name(const char *container_id, char *out, size_t outlen)
{
    const char *id = container_id ? container_id : "";
    if (strncmp(id, "/k8s/", 5) == 0) {
        for (int o = 0; o < NOWNERS; o++) {
            for (const char *p = id; (p = strstr(p, "/k8s/")) != NULL; p++) {
                size_t n = match_at((enum owner)o, p);
                if (n)
                    return pfr_identity_fmt(out, outlen, "%.*s", (int)n, p);
            }
        }
    }
    return pfr_identity_copy(out, outlen, id);
}
