/* Kubernetes pod annotations -> targets (see scrape_k8s.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "pfr_identity.h"
#include "scrape_k8s.h"

static const char *str_at(json_t *obj, const char *key)
{
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A port annotation: decimal 1..65535, nothing else. */
static int parse_port(const char *s)
{
    if (!s || !*s || strlen(s) > 5)
        return -1;
    int v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v >= 1 && v <= 65535 ? v : -1;
}

/* The port the pod asks to be scraped on: > 0, 0 if it does not ask, -1 if it asks badly. */
static int scrape_port(json_t *annotations)
{
    static const char *const pairs[2][2] = {
        {"coroot.com/profile-scrape", "coroot.com/profile-port"},
        {"pyroscope.io/scrape", "pyroscope.io/port"},
    };
    for (int i = 0; i < 2; i++) {
        const char *on = str_at(annotations, pairs[i][0]);
        if (!on || strcasecmp(on, "true") != 0)
            continue;
        int port = parse_port(str_at(annotations, pairs[i][1]));
        return port > 0 ? port : -1;
    }
    return 0;
}

/* The service of a pod: its controller's name (a Deployment's for a ReplicaSet's pods). */
static void pod_service(json_t *meta, const char *pod, char *buf, size_t len)
{
    json_t *owners = json_object_get(meta, "ownerReferences");
    json_t *owner = NULL;
    size_t i;
    json_t *o;
    json_array_foreach(owners, i, o)
    {
        if (json_is_true(json_object_get(o, "controller")) || !owner)
            owner = o;
    }
    const char *kind = str_at(owner, "kind"), *name = str_at(owner, "name");
    if (!name || !*name) {
        snprintf(buf, len, "%s", pod);
        return;
    }
    snprintf(buf, len, "%s", name);
    const char *hash = str_at(json_object_get(meta, "labels"), "pod-template-hash");
    if (kind && strcmp(kind, "ReplicaSet") == 0 && hash && *hash) {
        size_t n = strlen(buf), h = strlen(hash);
        if (n > h + 1 && buf[n - h - 1] == '-' && strcmp(buf + n - h, hash) == 0)
            buf[n - h - 1] = '\0';
    }
}

/* The container serving the scrape port: the one declaring it, else the pod's only one (or the
 * first of its statuses, for a spec without containers). NULL if none is named. */
static const char *scrape_container(json_t *spec, json_t *status, int port)
{
    json_t *ctrs = json_object_get(spec, "containers");
    size_t i, j;
    json_t *c, *p;
    json_array_foreach(ctrs, i, c)
    {
        json_array_foreach(json_object_get(c, "ports"), j, p)
        {
            if (json_integer_value(json_object_get(p, "containerPort")) == port)
                return str_at(c, "name");
        }
    }
    if (json_array_size(ctrs) == 1)
        return str_at(json_array_get(ctrs, 0), "name");
    json_t *st = json_object_get(status, "containerStatuses");
    return json_array_size(ctrs) == 0 && json_array_size(st) >= 1
               ? str_at(json_array_get(st, 0), "name")
               : NULL;
}

/* The target's service and container id as Coroot's: the container's id, and the service name
 * Coroot derives from it (the Deployment, StatefulSet, DaemonSet of the pod). Without a
 * container (cid ""), the pod's controller. */
static void pod_identity(json_t *meta, json_t *spec, json_t *status, const char *ns,
                         const char *pod, int port, char *service, size_t slen, char *cid,
                         size_t clen)
{
    const char *ctr = scrape_container(spec, status, port);
    cid[0] = '\0';
    if (ctr && *ctr && pfr_identity_k8s_id(ns, pod, ctr, (int64_t)time(NULL), cid, clen) == 0 &&
        cid[0] && pfr_identity_service_name(cid, service, slen) == 0)
        return;
    cid[0] = '\0';
    pod_service(meta, pod, service, slen);
}

/* One pod: 1 = a target appended, 0 = not asking, -1 = asking but unusable, <-1 = errno. */
static int pod_target(json_t *item, const char *node_filter, struct sc_wantlist *out)
{
    json_t *meta = json_object_get(item, "metadata");
    json_t *spec = json_object_get(item, "spec");
    json_t *status = json_object_get(item, "status");
    int port = scrape_port(json_object_get(meta, "annotations"));
    if (port == 0)
        return 0;
    const char *name = str_at(meta, "name"), *ns = str_at(meta, "namespace");
    const char *node = str_at(spec, "nodeName");
    const char *phase = str_at(status, "phase"), *ip = str_at(status, "podIP");
    if (node_filter && (!node || strcmp(node, node_filter) != 0))
        return 0; /* another node's pod */
    if (!phase || strcmp(phase, "Running") != 0)
        return 0; /* not running (yet, or any more): not an error */
    if (port < 0 || !name || !ns || !ip)
        return -1;
    unsigned char addr[16];
    bool v6 = strchr(ip, ':') != NULL;
    if (inet_pton(v6 ? AF_INET6 : AF_INET, ip, addr) != 1)
        return -1;
    char url[128], service[SC_MAX_LABEL + 1], cid[SC_MAX_LABEL + 1];
    snprintf(url, sizeof(url), v6 ? "http://[%s]:%d" : "http://%s:%d", ip, port);
    pod_identity(meta, spec, status, ns, name, port, service, sizeof(service), cid, sizeof(cid));
    pfr_kv labels[4] = {{"namespace", ns}, {"pod", name}};
    size_t nlabels = 2;
    const char *on = node ? node : node_filter;
    if (on && *on)
        labels[nlabels++] = (pfr_kv){"node", on};
    if (cid[0])
        labels[nlabels++] = (pfr_kv){"container.id", cid};
    struct sc_want w;
    int rc = pfr_scrape_want_make(&w, url, service, labels, nlabels, PFR_SCRAPE_KUBERNETES, 0, 0,
                                  NULL, 0);
    if (rc == -ENOMEM)
        return rc;
    if (rc)
        return -1;
    rc = pfr_scrape_wantlist_push(out, &w);
    return rc ? rc : 1;
}

int pfr_scrape_k8s_parse_pods(const char *json, size_t len, const char *node,
                              struct sc_wantlist *out, struct sc_k8s_counts *counts, char *err,
                              size_t errlen)
{
    memset(counts, 0, sizeof(*counts));
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        pfr_scrape_errf(err, errlen, "pod list is not JSON: %s (line %d)", je.text, je.line);
        return -EBADMSG;
    }
    json_t *items = json_object_get(root, "items");
    if (!json_is_array(items)) {
        const char *kind = str_at(root, "kind");
        pfr_scrape_errf(err, errlen, "not a pod list (kind %s, no items array)",
                        kind ? kind : "missing");
        json_decref(root);
        return -EBADMSG;
    }
    int rc = 0;
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        counts->pods++;
        if (!json_is_object(item))
            continue;
        int r = pod_target(item, node, out);
        if (r < -1) {
            rc = r;
            break;
        }
        if (r != 0)
            counts->annotated++;
        if (r == 1)
            counts->targets++;
        else if (r == -1)
            counts->bad++;
    }
    json_decref(root);
    return rc;
}
