/* libFuzzer target: the 3.11 line-table decoder (py_lines.h) over fuzzed tables, asked for
 * every code unit the table could cover and one past. The first 4 bytes are the first line. */
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
    /* each entry covers 8 code units at most and takes a byte at least */
    for (uint32_t unit = 0; unit <= 8 * len + 1; unit++) {
        int64_t line = pfr_py_line_311(tab, len, first, unit);
        if (line < -2)
            __builtin_trap();
    }
    return 0;
}
