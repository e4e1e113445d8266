/* libFuzzer: a scraped body through the decoder and the conversion (types, aggregation, deltas).
 * The first byte picks the endpoint; the body is converted twice so that the delta and restart
 * paths run on whatever decodes. */
#include <stdint.h>
#include <stdlib.h>

#include "pfr_profile.h"
#include "pfr_scrape.h"
#include "scrape_convert.h"

static void check(const pfr_profile *p)
{
    if (!p)
        return;
    size_t nt = pfr_profile_num_sample_types(p);
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++)
        for (size_t t = 0; t < nt; t++)
            if (pfr_profile_sample_values(p, i)[t] < 0)
                __builtin_trap(); /* deltas are never negative */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int ep = data[0] % PFR_SCRAPE_NUM_ENDPOINTS;
    pfr_profile *src = NULL;
    char err[256];
    if (pfr_profile_decode(data + 1, size - 1, 16u << 20, &src, err, sizeof(err)) != 0)
        return 0;
    struct sc_series st = {0};
    for (int round = 0; round < 2; round++) {
        struct sc_convert_result res;
        if (pfr_scrape_convert(ep, src, &st, 1000 * round, 1000 * round + 1000, &res, err,
                               sizeof(err)) == 0) {
            check(res.profile);
            pfr_profile_free(res.profile);
        }
    }
    pfr_scrape_series_free(&st);
    pfr_profile_free(src);
    return 0;
}
