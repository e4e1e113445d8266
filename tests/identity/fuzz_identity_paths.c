/* libFuzzer: the pure string functions (cgroup paths and /proc/PID/cgroup text come from the
 * processes being profiled; container ids from metadata): classification, service names, the
 * /proc pick and its v1 test, Kubernetes ids. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_identity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    pfr_identity_cgroup cg;
    pfr_identity_classify(s, &cg);
    if (strlen(cg.runtime_id) != 0 && strlen(cg.runtime_id) != PFR_IDENTITY_RUNTIME_ID_LEN)
        __builtin_trap();
    if ((cg.kind == PFR_IDENTITY_KIND_SYSTEMD || cg.kind == PFR_IDENTITY_KIND_TALOS) && !cg.id[0])
        __builtin_trap();

    char out[PFR_IDENTITY_ID_MAX];
    if (pfr_identity_service_name(s, out, sizeof(out)) == 0 && strlen(out) > strlen(s))
        __builtin_trap(); /* a service name is a prefix of its id, or the id */

    char path[4096];
    pfr_identity_cgroup_from_proc((const char *)data, size, path, sizeof(path));
    pfr_identity_proc_has_v1((const char *)data, size);

    /* split the input into namespace / pod / container at the first two NULs */
    const char *ns = s, *pod = memchr(s, '\0', size) ? s + strlen(s) + 1 : "";
    const char *c = (size_t)(pod - s) < size ? pod + strlen(pod) + 1 : "";
    if ((size_t)(c - s) > size)
        c = "";
    if (*pod)
        pfr_identity_k8s_id(ns, pod, c, 1700000000, out, sizeof(out));
    free(s);
    return 0;
}
