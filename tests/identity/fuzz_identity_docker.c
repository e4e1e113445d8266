/* libFuzzer: Docker's container JSON (inspect answer, config.v2.json) and the CRI runtimes' OCI
 * config, then the id made from what they gave (any bytes from a daemon or a disk). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "id_internal.h"

static void check_id(const struct id_meta *m)
{
    char out[PFR_IDENTITY_ID_MAX];
    int rc = pfr_identity_calc(m, 1700000000, out, sizeof(out));
    if (memchr(out, '\0', sizeof(out)) == NULL || (rc != 0 && out[0] != '\0'))
        __builtin_trap();
    char svc[PFR_IDENTITY_ID_MAX];
    if (rc == 0 && pfr_identity_service_name(out, svc, sizeof(svc)) != 0)
        __builtin_trap(); /* a service name is never longer than its id */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct id_meta m;
    char err[256];
    if (pfr_identity_docker_parse((const char *)data, size, &m, err, sizeof(err)) == 0)
        check_id(&m);
    else if (m.name[0] || m.pod[0])
        __builtin_trap(); /* nothing half-filled on error */
    if (pfr_identity_oci_parse((const char *)data, size, &m, err, sizeof(err)) >= 0)
        check_id(&m);
    return 0;
}
