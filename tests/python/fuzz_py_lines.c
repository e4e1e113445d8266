/* libFuzzer target: the line-table decoders (py_lines.h: 3.11+, 3.10, 3.8/3.9's lnotab) over
 * fuzzed tables, each asked for every code unit the table could cover and one past. The first 4
 * bytes are the first line. */
#include <stdint.h>
#include <string.h>

#include "py_lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    int32_t first;
    memcpy(&first, data, sizeof(first));
    const uint8_t *tab = data + 4;
    size_t len = size - 4;
    /* each 3.11 entry covers 8 code units at most and takes a byte at least */
    for (uint32_t unit = 0; unit <= 8 * len + 1; unit++) {
        int64_t line = pfr_py_line_311(tab, len, first, unit);
        if (line < -2)
            __builtin_trap();
    }
    /* a pair of the older tables covers 255 bytes (127 code units) at most: every unit up to
     * one past, in 1024 steps at most (each asks the whole table) */
    const uint32_t past = 128 * (uint32_t)(len / 2) + 1, step = 1 + past / 1024;
    for (uint32_t unit = 0; unit <= past; unit += step) {
        if (pfr_py_line_310(tab, len, first, unit) < -2)
            __builtin_trap();
        int64_t line = pfr_py_line_lnotab(tab, len, first, unit);
        if (line < -1 || (len < 2 && line != (first < 0 ? -1 : first)))
            __builtin_trap();
    }
    return 0;
}
