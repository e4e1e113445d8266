/* libFuzzer target: 3.13's _Py_DebugOffsets as read from a process (py_layout.h), fuzzed. A
 * layout it accepts must keep every offset within what its readers copy. */
#include <stdint.h>
#include <string.h>

#include "py_layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t buf[PFR_PY_DEBUG_OFFSETS_SIZE];
    memset(buf, 0, sizeof(buf));
    memcpy(buf, "xdebugpy", 8); /* past the cookie, most inputs reach the checks */
    size_t n = size < sizeof(buf) - 8 ? size : sizeof(buf) - 8;
    memcpy(buf + 8, data, n);
    pfr_py_layout l;
    if (pfr_py_layout_from_debug(buf, sizeof(buf), &l) != 0)
        return 0;
    if (l.f_owner >= 80 || l.f_instr > 72 || l.f_previous > 72 || l.f_code > 72 ||
        l.co_code > 256 || l.co_qualname + 8 > l.co_code || l.co_filename + 8 > l.co_code ||
        l.co_linetable + 8 > l.co_code || l.str_compact_data > 128 || l.bytes_data > 64 ||
        l.ob_type + 8 > l.bytes_data || l.str_state + 4 > l.str_ascii_data)
        __builtin_trap();
    return 0;
}
