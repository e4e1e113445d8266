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
/* Format d as "1h02m", "4m31s", "12.3s" or "250ms" into out. */
const char *pfr_fmt_duration(int64_t ms, char *out, size_t cap);
/* Format bytes as "812 B", "3.2 KiB", "41.0 MiB". */
const char *pfr_fmt_bytes(uint64_t n, char *out, size_t cap);

#endif
