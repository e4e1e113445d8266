/*
 * pfr_time: the time expressions pfr's programs accept (the query tool, `pfr serve`, the
 * shipper's backfill range), and how they print times.
 *
 * Accepted forms (surrounding spaces ignored):
 *   now                          the current time
 *   -15m, now-2h, now - 1h30m    relative to now (a duration of pfr_units.h, with its units)
 *   2024-05-01T13:45:00Z         RFC 3339 (fraction and +hh:mm / -hh:mm offsets allowed; the T
 *                                may be a space)
 *   2024-05-01 13:45[:07]        local wall-clock time (no zone given: the TZ of the process)
 *   2024-05-01                   local midnight of that day
 *   13:45[:07]                   today, local time
 *   1714571100[.5], @1714571100  unix seconds
 *
 * All functions are pure (now is passed in) except pfr_time_now_ns().
 */
#ifndef PFR_TIME_H
#define PFR_TIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One line per accepted form, for --help texts and error messages. */
extern const char pfr_time_forms[];

/* Parse a time expression into unix nanoseconds. Returns 0, or -EINVAL with a reason in err that
 * lists the accepted forms. */
int pfr_time_parse(const char *s, int64_t now_ns, int64_t *out_ns, char *err, size_t errlen);

/* Parse a duration such as "90s", "1h30m", "0.5d" (pfr_units.h's syntax, units ns us ms s m h d
 * w) into nanoseconds > 0. A unit is required: a bare number is refused. */
int pfr_duration_parse(const char *s, int64_t *out_ns, char *err, size_t errlen);

/* Current time (CLOCK_REALTIME) in unix nanoseconds. */
int64_t pfr_time_now_ns(void);

/* "2024-05-01 13:45:07 +0200" (local) or "2024-05-01T11:45:07Z" (utc). Returns buf. */
char *pfr_time_format(int64_t ns, bool utc, char *buf, size_t len);

/* RFC 3339 with the local offset, "2024-05-01T13:45:07+02:00", for machine-readable output. */
char *pfr_time_format_rfc3339(int64_t ns, char *buf, size_t len);

/* Short human duration: "1h30m", "10s", "250ms", "2d". Returns buf. */
char *pfr_duration_format(int64_t ns, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
