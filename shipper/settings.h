/* settings: the tables of pfr-shipper's settings (pfr_settings.h): the program's group
 * ([shipper], its flags and PFR_SHIPPER_* variables) and the group every sink kind has
 * ([sink NAME], or [shipper] as every sink's default). A kind's own group is in its folder
 * (sinks/sinks.h). config.c loads them and keeps the checks across fields. */
#ifndef PFR_SHIP_SETTINGS_H
#define PFR_SHIP_SETTINGS_H

#include "pfr_settings.h"

#define PFR_SHIPPER_ENV_PREFIX "PFR_SHIPPER_"

/* The program's keys, with offsets into pfr_shipper_conf. */
extern const pfr_settings_group pfr_shipper_settings;
/* The keys of every sink, with offsets into pfr_sink_conf. */
extern const pfr_settings_group pfr_sink_settings;

#endif
