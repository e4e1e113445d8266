/*
 * The OCI runtime config (config.json) a CRI runtime writes for each container -> the pod,
 * namespace and container name of its annotations, for when the pod list does not have the
 * container (yet). containerd's CRI plugin writes io.kubernetes.cri.{container-type,
 * container-name,sandbox-name,sandbox-namespace}; CRI-O writes io.kubernetes.cri-o.ContainerType
 * and the container's labels as a JSON string in io.kubernetes.cri-o.Labels.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "id_internal.h"

/* CRI-O's labels: a JSON object of strings inside a string. */
static void crio_labels(const char *text, struct id_meta *m)
{
    json_error_t je;
    json_t *labels = json_loads(text, 0, &je);
    const char *key;
    json_t *v;
    json_object_foreach(labels, key, v)
    {
        if (json_is_string(v))
            pfr_identity_meta_label(m, key, json_string_value(v));
    }
    json_decref(labels);
}

int pfr_identity_oci_parse(const char *json, size_t len, struct id_meta *m, char *err,
                           size_t errlen)
{
    memset(m, 0, sizeof(*m));
    json_t *root = pfr_identity_json_load(json, len, "OCI config", err, errlen);
    if (!root)
        return -EBADMSG;
    json_t *annotations = json_object_get(root, "annotations");
    if (!json_is_object(root) || (annotations && !json_is_object(annotations))) {
        snprintf(err, errlen, "OCI config: not an object with an annotations object");
        json_decref(root);
        return -EBADMSG;
    }
    const char *v;
    if ((v = pfr_identity_json_str(annotations, "io.kubernetes.cri-o.Labels")))
        crio_labels(v, m);
    if ((v = pfr_identity_json_str(annotations, "io.kubernetes.cri.sandbox-name")))
        pfr_identity_meta_label(m, "io.kubernetes.pod.name", v);
    if ((v = pfr_identity_json_str(annotations, "io.kubernetes.cri.sandbox-namespace")))
        pfr_identity_meta_label(m, "io.kubernetes.pod.namespace", v);
    if ((v = pfr_identity_json_str(annotations, "io.kubernetes.cri.container-name")))
        pfr_identity_meta_label(m, "io.kubernetes.container.name", v);
    const char *type = pfr_identity_json_str(annotations, "io.kubernetes.cri.container-type");
    if (!type)
        type = pfr_identity_json_str(annotations, "io.kubernetes.cri-o.ContainerType");
    if (type && strcmp(type, "sandbox") == 0)
        m->container[0] = '\0'; /* the pause container: no id */
    json_decref(root);
    return m->pod[0] ? 1 : 0;
}
