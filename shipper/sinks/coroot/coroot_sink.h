/* coroot_sink: the sink kind "coroot" (pprof to Coroot's /v1/profiles): its row of the kinds'
 * table (sinks.h). It has no settings beyond the common ones. */
#ifndef PFR_SHIP_COROOT_SINK_H
#define PFR_SHIP_COROOT_SINK_H

#include "sinks/sinks.h"

extern const pfr_sink_kind pfr_sink_coroot;

#endif
