/* libFuzzer: the Kubernetes pod list parser (any bytes from a kubelet or API server). */
#include <stddef.h>
#include <stdint.h>

#include "scrape_k8s.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sc_wantlist l = {0};
    struct sc_k8s_counts c;
    char err[256];
    pfr_scrape_k8s_parse_pods((const char *)data, size, size % 2 ? "node-1" : NULL, &l, &c, err,
                              sizeof(err));
    /* every target made is well-formed */
    for (size_t i = 0; i < l.n; i++)
        if (!l.v[i].base || !l.v[i].service || !l.v[i].key || l.v[i].nlabels < 3)
            __builtin_trap();
    pfr_scrape_wantlist_free(&l);
    return 0;
}
