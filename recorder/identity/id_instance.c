/*
 * Container id -> Coroot instance (pfr_identity_coroot_instance), as Coroot's constructor builds
 * it for a container outside Kubernetes (coroot constructor/containers.go,
 * getInstanceAndContainer; the namespace "" becomes "_" in model.NewApplicationId). The id is
 * split at every '/' as Go's strings.Split does, so the part counts below are Coroot's.
 */
#include <errno.h>
#include <string.h>

#include "id_internal.h"

#define MAX_PARTS 8 /* Coroot looks at ids of 5 and 7 parts; more only matter as "more" */

struct part {
    const char *s;
    size_t n;
};

/* The parts of id (at most MAX_PARTS kept; the count goes on). */
static size_t split_id(const char *id, struct part *parts)
{
    struct id_split sp = {id, id + strlen(id), false};
    const char *p;
    size_t n, count = 0;
    while (pfr_identity_split_next(&sp, '/', &p, &n)) {
        if (count < MAX_PARTS)
            parts[count] = (struct part){p, n};
        count++;
    }
    return count;
}

static bool part_is(const struct part *p, const char *s)
{
    return p->n == strlen(s) && memcmp(p->s, s, p->n) == 0;
}

/* A part without a suffix, when it ends with it. */
static struct part trim_suffix(struct part p, const char *suffix)
{
    size_t k = strlen(suffix);
    if (p.n >= k && memcmp(p.s + p.n - k, suffix, k) == 0)
        p.n -= k;
    return p;
}

static int put_ns(char *ns, size_t nslen, const struct part *p)
{
    if (p->n == 0)
        return pfr_identity_copy(ns, nslen, "_");
    return pfr_identity_fmt(ns, nslen, "%.*s", (int)p->n, p->s);
}

int pfr_identity_coroot_instance(const char *container_id, const char *node, char *ns, size_t nslen,
                                 char *pod, size_t podlen)
{
    if (nslen)
        ns[0] = '\0';
    if (podlen)
        pod[0] = '\0';
    if (!container_id || container_id[0] != '/')
        return 0; /* Coroot drops such ids */
    struct part pt[MAX_PARTS];
    size_t n = split_id(container_id, pt);
    bool has_node = node && node[0];
    struct part app_ns = {"", 0}; /* the application's namespace: "_" unless the id names one */
    int rc;
    if (n == 5 && part_is(&pt[1], "k8s")) {
        return 0; /* a pod: Coroot's instance is the pod itself */
    } else if (n == 5 && part_is(&pt[1], "k8s-cronjob")) {
        if (!has_node)
            return 0;
        app_ns = pt[2];
        rc = pfr_identity_fmt(pod, podlen, "%.*s@%s", (int)pt[3].n, pt[3].s, node);
    } else if (n == 7 && part_is(&pt[1], "nomad")) {
        app_ns = pt[2];
        rc = pfr_identity_fmt(pod, podlen, "%.*s-%.*s", (int)pt[4].n, pt[4].s, (int)pt[5].n,
                              pt[5].s);
    } else if (n == 5 && part_is(&pt[1], "swarm")) {
        app_ns = pt[2];
        rc = pfr_identity_fmt(pod, podlen, "%.*s.%.*s", (int)pt[3].n, pt[3].s, (int)pt[4].n,
                              pt[4].s);
    } else {
        if (!has_node)
            return 0;
        /* the last element (found again: only MAX_PARTS parts are kept) */
        const char *slash = strrchr(container_id, '/');
        struct part last = {slash + 1, strlen(slash + 1)};
        last = trim_suffix(trim_suffix(last, ".service"), ".slice");
        rc = pfr_identity_fmt(pod, podlen, "%.*s@%s", (int)last.n, last.s, node);
    }
    if (rc == 0)
        rc = put_ns(ns, nslen, &app_ns);
    if (rc) {
        if (nslen)
            ns[0] = '\0';
        if (podlen)
            pod[0] = '\0';
        return rc;
    }
    return 1;
}
