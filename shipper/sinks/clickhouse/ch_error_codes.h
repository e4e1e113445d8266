/* ch_error_codes: what a ClickHouse error answer says about the request that got it — the rows it
 * carried, or the sink as a whole — from its exception code (X-ClickHouse-Exception-Code, or
 * "Code: NNN." in the body) and its HTTP status. A table, so adding a code is one line. */
#ifndef PFR_SHIP_CH_ERROR_CODES_H
#define PFR_SHIP_CH_ERROR_CODES_H

#include <stddef.h>

enum pfr_ch_verdict {
    PFR_CH_DATA = 0, /* the rows: narrow the batch down, set the guilty chunks aside */
    PFR_CH_SINK,     /* who we are or what we may do (auth, rights, quota, read-only), or a
                      * statement this server does not take: every batch fails alike; wait */
    PFR_CH_SCHEMA,   /* the database or tables are missing or different: check them again, wait */
    PFR_CH_RETRY,    /* transient: the server is busy or failing */
};

/* The verdict on an error answer (status not 2xx; code 0 when there is none). Known codes
 * decide (but a 5xx never blames the rows); otherwise the status does (retry.c's table: 4xx
 * other than 401/403/404/405/407/408/425/429 = the rows). */
enum pfr_ch_verdict pfr_ch_verdict_of(long status, long code);

/* The exception code of an answer: the header's value if set (header may be NULL or ""), else
 * the first "Code: NNN." of body (NUL-terminated, may be NULL). 0 if none. */
long pfr_ch_exception_code(const char *header, const char *body);

/* ClickHouse's name of a code in the table, or NULL. */
const char *pfr_ch_code_name(long code);

#endif
