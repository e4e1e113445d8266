/* status: `pfr-shipper status` — per sink: cursor, backlog (chunks, bytes, time), last success,
 * last error, retries, set-aside and lost chunks; as text or JSON. */
#ifndef PFR_SHIP_STATUS_H
#define PFR_SHIP_STATUS_H

#include <stdio.h>

#include "config.h"

/* Print the status of every sink known to the config or the state file. 0, or a negative
 * errno with a reason in err. */
int pfr_status_print(const pfr_shipper_conf *c, FILE *out, char *err, size_t errlen);

#endif
