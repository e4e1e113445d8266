/*
 * A Kubernetes PodList (kubelet /pods or API server /api/v1/pods) -> runtime id -> (namespace,
 * pod, container), sorted for binary search. Only the container statuses carry runtime ids:
 * status.containerStatuses, initContainerStatuses and ephemeralContainerStatuses, each
 * {"name": ..., "containerID": "<runtime>://<id>"}.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "id_internal.h"

static const char *const status_lists[] = {"containerStatuses", "initContainerStatuses",
                                           "ephemeralContainerStatuses"};

/* The 64-character id of "<runtime>://<id>", or NULL. */
static const char *runtime_id(const char *cid)
{
    const char *sep = cid ? strstr(cid, "://") : NULL;
    if (!sep)
        return NULL;
    const char *id = sep + 3;
    return strlen(id) == PFR_IDENTITY_RUNTIME_ID_LEN &&
                   pfr_identity_rid_run(id) == PFR_IDENTITY_RUNTIME_ID_LEN
               ? id
               : NULL;
}

/* Two passes over the same document: count (entries, string bytes), then fill. */
struct builder {
    struct id_pod_index *ix;
    size_t n, bytes;
    char *w; /* next free byte of the arena (fill pass) */
};

static const char *put_str(struct builder *b, const char *s)
{
    size_t n = strlen(s) + 1;
    if (!b->ix->arena) {
        b->bytes += n;
        return NULL;
    }
    char *d = b->w;
    memcpy(d, s, n);
    b->w += n;
    return d;
}

static void add_status(struct builder *b, json_t *st, const char *ns, const char *pod)
{
    const char *name = pfr_identity_json_str(st, "name");
    const char *rid = runtime_id(pfr_identity_json_str(st, "containerID"));
    if (!name || !rid)
        return;
    if (!b->ix->v) {
        b->n++;
        put_str(b, ns);
        put_str(b, pod);
        put_str(b, name);
        return;
    }
    struct id_pod_entry *e = &b->ix->v[b->n++];
    memcpy(e->rid, rid, PFR_IDENTITY_RUNTIME_ID_LEN + 1);
    e->ns = put_str(b, ns);
    e->pod = put_str(b, pod);
    e->container = put_str(b, name);
}

static void walk(json_t *items, struct builder *b)
{
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        json_t *meta = json_object_get(item, "metadata");
        json_t *status = json_object_get(item, "status");
        const char *ns = pfr_identity_json_str(meta, "namespace"),
                   *pod = pfr_identity_json_str(meta, "name");
        if (!ns || !pod || !*pod)
            continue;
        for (size_t l = 0; l < sizeof(status_lists) / sizeof(status_lists[0]); l++) {
            size_t j;
            json_t *st;
            json_array_foreach(json_object_get(status, status_lists[l]), j, st)
                add_status(b, st, ns, pod);
        }
    }
}

static int by_rid(const void *a, const void *b)
{
    return strcmp(((const struct id_pod_entry *)a)->rid, ((const struct id_pod_entry *)b)->rid);
}

int pfr_identity_pods_parse(const char *json, size_t len, struct id_pod_index *out, char *err,
                            size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_t *root = pfr_identity_json_load(json, len, "pod list", err, errlen);
    if (!root)
        return -EBADMSG;
    json_t *items = json_object_get(root, "items");
    if (!json_is_array(items)) {
        snprintf(err, errlen, "not a pod list (no items array)");
        json_decref(root);
        return -EBADMSG;
    }
    struct builder b = {.ix = out};
    walk(items, &b);
    struct id_pod_index ix = {0};
    ix.v = calloc(b.n ? b.n : 1, sizeof(*ix.v));
    ix.arena = malloc(b.bytes ? b.bytes : 1);
    if (!ix.v || !ix.arena) {
        pfr_identity_pods_free(&ix);
        json_decref(root);
        snprintf(err, errlen, "out of memory for %zu pod list entries", b.n);
        return -ENOMEM;
    }
    struct builder fill = {.ix = &ix, .w = ix.arena};
    walk(items, &fill);
    json_decref(root);
    ix.n = fill.n;
    qsort(ix.v, ix.n, sizeof(*ix.v), by_rid);
    *out = ix;
    return 0;
}

const struct id_pod_entry *pfr_identity_pods_find(const struct id_pod_index *ix, const char *rid)
{
    if (!ix->n)
        return NULL;
    struct id_pod_entry key;
    if (pfr_identity_copy(key.rid, sizeof(key.rid), rid) != 0)
        return NULL;
    return bsearch(&key, ix->v, ix->n, sizeof(*ix->v), by_rid);
}

void pfr_identity_pods_free(struct id_pod_index *ix)
{
    free(ix->v);
    free(ix->arena);
    memset(ix, 0, sizeof(*ix));
}
