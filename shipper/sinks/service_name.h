/* service_name: the service name a sink ships for a chunk. A sink's service_prefix (e.g. "site1-")
 * goes in front of every chunk's service name as the ring holds it; nothing else is rewritten
 * (chunks recorded under an older identity keep their names). */
#ifndef PFR_SHIP_SERVICE_NAME_H
#define PFR_SHIP_SERVICE_NAME_H

#include "pfr_buf.h"

/* The longest service_prefix accepted. */
#define PFR_SERVICE_NAME_PREFIX_MAX 128

/* The name to ship for service: service itself without a prefix (prefix NULL or ""), else
 * prefix + service in *scratch (reset first; the result lives until its next use). NULL for
 * no service (NULL or "": a chunk without one stays without) or on -ENOMEM. */
const char *pfr_sink_service_name(const char *prefix, const char *service, pfr_buf *scratch);

/* Whether prefix can be a service_prefix: at most PFR_SERVICE_NAME_PREFIX_MAX bytes, no control
 * characters. */
bool pfr_service_name_prefix_ok(const char *prefix);

#endif
