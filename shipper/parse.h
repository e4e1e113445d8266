/* parse: the value syntaxes of the shipper's settings (flags, environment, config file). */
#ifndef PFR_SHIP_PARSE_H
#define PFR_SHIP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "250ms", "10s", "5m", "2h", "1d", or a bare number of seconds ("1.5"). *out in ms.
 * 0 or -EINVAL. */
int pfr_parse_duration_ms(const char *s, int64_t *out);
/* "4096", "512k", "8M", "1GiB", "2KB" (k = 1024). -EINVAL or -ERANGE. */
int pfr_parse_size(const char *s, uint64_t *out);
/* A non-negative integer that fits max. */
int pfr_parse_uint(const char *s, uint64_t max, uint64_t *out);
/* true/false, yes/no, on/off, 1/0. */
int pfr_parse_bool(const char *s, bool *out);
/* A point in time as unix ns: "now", "-2h" (before now), "@1714557600" (unix seconds),
 * "2024-05-01T10:00:00Z", "2024-05-01 10:00:00" (UTC), "2024-05-01T12:00:00+02:00",
 * "2024-05-01" (midnight UTC). now_ns is what "now" means. */
int pfr_parse_time_ns(const char *s, int64_t now_ns, int64_t *out);
/* Format d as "1h02m", "4m31s", "12.3s" or "250ms" into out. */
const char *pfr_fmt_duration(int64_t ms, char *out, size_t cap);
/* Format bytes as "812 B", "3.2 KiB", "41.0 MiB". */
const char *pfr_fmt_bytes(uint64_t n, char *out, size_t cap);
/* Format unix ns as "2024-05-01T10:00:00Z" (UTC, seconds). */
const char *pfr_fmt_time(int64_t ns, char *out, size_t cap);

#endif
