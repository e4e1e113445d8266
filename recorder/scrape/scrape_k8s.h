/*
 * scrape_k8s: targets from a Kubernetes pod list (the kubelet's /pods or the API server's
 * /api/v1/pods, both a PodList).
 *
 * A pod is a target when it is Running, has a pod IP, and is annotated
 *   coroot.com/profile-scrape: "true" with coroot.com/profile-port: "<port>", or
 *   pyroscope.io/scrape: "true" with pyroscope.io/port: "<port>".
 * Its target is http://<podIP>:<port>/debug/pprof with the labels namespace, pod and node (and
 * instance = podIP:port, and container.id). The container is the one declaring the port (else
 * the pod's only one); its container.id and service are Coroot's (pfr_identity.h):
 * /k8s/<namespace>/<pod>/<container>, and the pod's Deployment, StatefulSet or DaemonSet as
 * /k8s/<namespace>/<name> by Coroot's naming rules. A pod whose container cannot be told gets
 * no container.id and its controller's name: a ReplicaSet's name without its pod-template-hash
 * suffix (the Deployment), a StatefulSet, DaemonSet or Job name, or the pod's own name.
 */
#ifndef PFR_SCRAPE_K8S_H
#define PFR_SCRAPE_K8S_H

#include <stddef.h>
#include <stdint.h>

#include "scrape_internal.h"

#define SC_K8S_MAX_BODY (64u << 20)

struct sc_k8s_counts {
    size_t pods;      /* items in the list */
    size_t annotated; /* asking to be scraped */
    size_t targets;   /* of which became targets */
    size_t bad;       /* annotated but unusable: bad or missing port, no IP, bad name */
};

/* Parse a PodList. node (may be NULL) keeps only pods scheduled on it. Targets are appended to
 * out. -EBADMSG with a reason if the text is not a pod list. */
int pfr_scrape_k8s_parse_pods(const char *json, size_t len, const char *node,
                              struct sc_wantlist *out, struct sc_k8s_counts *counts, char *err,
                              size_t errlen);

#endif
