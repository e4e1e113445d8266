/* libFuzzer target: the /proc/PID/maps and /proc/kallsyms parsers over arbitrary text. */
#include <stdint.h>
#include <stdlib.h>

#include "sym_kallsyms.h"
#include "sym_maps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[128];
    struct pfr_sym_maps m = {0};
    if (pfr_sym_maps_parse_mem((const char *)data, size, &m, err, sizeof(err)) == 0) {
        for (size_t i = 0; i < m.n; i++) {
            if (pfr_sym_maps_find(&m, m.v[i].start) != &m.v[i] || m.v[i].start >= m.v[i].end)
                abort();
            (void)pfr_sym_map_path(&m, &m.v[i]);
        }
    }
    pfr_sym_maps_free(&m);
    struct pfr_sym_kallsyms k = {0};
    if (pfr_sym_kallsyms_parse_mem((const char *)data, size, &k, err, sizeof(err)) == 0) {
        for (size_t i = 0; i < k.n; i++)
            if (!pfr_sym_kallsyms_find(&k, k.v[i].addr))
                abort();
    }
    pfr_sym_kallsyms_free(&k);
    return 0;
}
