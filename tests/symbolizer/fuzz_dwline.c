/* libFuzzer target: counting the rows of a DWARF line program (sym_dwline) over arbitrary
 * bytes: the first byte picks the byte order and a row cap, the rest is .debug_line. */
#include <stdint.h>
#include <stdlib.h>

#include "sym_dwline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool swap = data[0] & 1;
    uint64_t max = data[0] & 2 ? UINT64_MAX : data[0] >> 2;
    uint64_t rows = pfr_sym_dwline_rows(data + 1, size - 1, 0, swap, max);
    /* a row is at least a byte of program, and counting stops past the cap */
    if (rows != PFR_DWLINE_BAD && (rows > size || (max != UINT64_MAX && rows > max + 1)))
        abort();
    return 0;
}
