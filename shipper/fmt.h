/* fmt: durations and byte counts as the shipper's logs and `status` show them (settings are
 * read with common/pfr_units.h). */
#ifndef PFR_SHIP_FMT_H
#define PFR_SHIP_FMT_H

#include <stddef.h>
#include <stdint.h>

/* Format d as "1h02m", "4m31s", "12.3s" or "250ms" into out. @return out. */
const char *pfr_fmt_duration(int64_t ms, char *out, size_t cap);
/* Format bytes as "812 B", "3.2 KiB", "41.0 MiB". @return out. */
const char *pfr_fmt_bytes(uint64_t n, char *out, size_t cap);

#endif
