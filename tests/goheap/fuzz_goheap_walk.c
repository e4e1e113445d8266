/* libFuzzer target: the bucket walker (and the deltas computed from it) over fuzzed process
 * memory. The input is the memory itself, mapped at 0x10000 with runtime.mbuckets at its start;
 * last three bytes also pick the limits and the rate. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "goheap_delta.h"
#include "goheap_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint8_t *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    pfr_goheap_bufmem bm = {buf, size, 0x10000, 0};
    pfr_goheap_mem mem = pfr_goheap_bufmem_reader(&bm);
    pfr_goheap_walk_limits lim = {.max_buckets = 1 + (data[size - 1] & 0x3f) * 16,
                                  .max_nstk = 1 + (data[size - 2] & 0x7f) * 8,
                                  .max_pcs = 4096};
    static pfr_goheap_walk w; /* reused from run to run, as the collector reuses its own */
    pfr_goheap_delta d = {0};
    /* twice, as the collector does from one interval to the next */
    for (int round = 0; round < 2; round++) {
        int rc = pfr_goheap_walk_run(&w, &mem, 0x10000, &lim);
        if (rc == 0 && w.nbuckets) {
            pfr_goheap_values *v = malloc(w.nbuckets * sizeof(*v));
            pfr_goheap_totals t;
            if (v)
                pfr_goheap_delta_update(&d, &w, (int64_t)data[size - 3] << 12, round == 1, v, &t);
            free(v);
        }
    }
    pfr_goheap_delta_free(&d);
    free(buf);
    return 0;
}
