/* Leveled logging to stderr (journald picks it up with the level prefix).
 * Libraries return errors; only programs' top levels and daemons' loops log. */
#ifndef PFR_LOG_H
#define PFR_LOG_H

#include <stdarg.h>

enum pfr_log_level { PFR_LOG_ERROR = 0, PFR_LOG_WARN, PFR_LOG_INFO, PFR_LOG_DEBUG };

/* Set the threshold (default INFO). Parses "error|warn|info|debug"; returns -1 if unknown. */
void pfr_log_set_level(enum pfr_log_level lvl);
int pfr_log_parse_level(const char *s, enum pfr_log_level *out);
enum pfr_log_level pfr_log_get_level(void);

void pfr_log(enum pfr_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pfr_err(...)   pfr_log(PFR_LOG_ERROR, __VA_ARGS__)
#define pfr_warn(...)  pfr_log(PFR_LOG_WARN, __VA_ARGS__)
#define pfr_info(...)  pfr_log(PFR_LOG_INFO, __VA_ARGS__)
#define pfr_debug(...) pfr_log(PFR_LOG_DEBUG, __VA_ARGS__)

#endif
