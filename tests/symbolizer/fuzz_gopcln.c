/* libFuzzer target: the Go .gopclntab reader over arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sym_gopcln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pfr_sym_gopcln *g;
    char err[128];
    if (pfr_sym_gopcln_open_mem(data, size, 0x1000, &g, err, sizeof(err)) != 0)
        return 0;
    struct pfr_sym_gopcln_frame f;
    for (uint64_t a = 0xff0; a < 0x1080; a++) {
        if (pfr_sym_gopcln_lookup(g, a, &f) && (!f.name || (f.file && strlen(f.file) == SIZE_MAX)))
            abort();
    }
    pfr_sym_gopcln_free(g);
    return 0;
}
