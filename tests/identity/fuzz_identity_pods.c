/* libFuzzer: the Kubernetes pod list parser (any bytes from a kubelet, an API server or a
 * file), and lookups in the index it builds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "id_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct id_pod_index ix;
    char err[256];
    if (pfr_identity_pods_parse((const char *)data, size, &ix, err, sizeof(err)) != 0) {
        if (ix.n || ix.v || ix.arena)
            __builtin_trap();
        return 0;
    }
    for (size_t i = 0; i < ix.n; i++) {
        const struct id_pod_entry *e = &ix.v[i];
        if (strlen(e->rid) != PFR_IDENTITY_RUNTIME_ID_LEN || !e->ns || !e->pod || !*e->pod ||
            !e->container)
            __builtin_trap();
        if (i && strcmp(ix.v[i - 1].rid, e->rid) > 0)
            __builtin_trap(); /* sorted */
        const struct id_pod_entry *f = pfr_identity_pods_find(&ix, e->rid);
        if (!f || strcmp(f->rid, e->rid) != 0)
            __builtin_trap();
        char out[PFR_IDENTITY_ID_MAX];
        pfr_identity_k8s_id(e->ns, e->pod, e->container, 1700000000, out, sizeof(out));
    }
    pfr_identity_pods_free(&ix);
    return 0;
}
