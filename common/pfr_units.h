/*
 * pfr_units: the one syntax of durations, sizes, counts and booleans in every pfr program's
 * settings (flags, environment, config files) and in the query tool's arguments.
 *
 * Durations: a sequence of <number><unit>, units ns us ms s m h d w, a number may have a
 *            fraction: "250ms", "10s", "1m30s", "1h", "0.5d". A bare number is seconds ("1.5"),
 *            as every program took it before units were accepted everywhere.
 * Sizes:     "4096", "512k", "8M", "1G", "2T" (powers of 1024; "KiB", "KB" and "B" forms too).
 * Counts:    a non-negative decimal integer.
 * Booleans:  true/false, yes/no, on/off, 1/0 (any case).
 *
 * Every parser is pure: 0, or -EINVAL / -ERANGE with the reason in err (NULL err: no reason).
 */
#ifndef PFR_UNITS_H
#define PFR_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* s as a duration in nanoseconds (>= 0). */
int pfr_parse_duration(const char *s, int64_t *out_ns, char *err, size_t errlen);

/* s as a size in bytes. */
int pfr_parse_size(const char *s, uint64_t *out, char *err, size_t errlen);

/* s as an integer in [0, max]. */
int pfr_parse_count(const char *s, uint64_t max, uint64_t *out, char *err, size_t errlen);

/* s as a boolean. */
int pfr_parse_bool(const char *s, bool *out, char *err, size_t errlen);

/* The shortest exact text of a duration in the syntax above: "10s", "1m30s", "250ms", "0".
 * Returns buf. */
char *pfr_format_duration(int64_t ns, char *buf, size_t len);

/* The shortest exact text of a size: "512M", "4096", "1G". Returns buf. */
char *pfr_format_size(uint64_t bytes, char *buf, size_t len);

#endif
