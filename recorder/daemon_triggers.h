/*
 * daemon_triggers: the daemon's side of the triggers (recorder/triggers): what becomes of a pin
 * request (today: logged and counted; pins will be made here, see on_pin_request), POST /pin on
 * the metrics listener, early heap collections routed to the sources, and the triggers'
 * metrics.
 *
 * Threads: started and stopped by the main thread; its callbacks run on the triggers' thread
 * and on the metrics server's (POST /pin).
 */
#ifndef PFR_RECORDER_DAEMON_TRIGGERS_H
#define PFR_RECORDER_DAEMON_TRIGGERS_H

#include "source.h"

typedef struct pfr_daemon_triggers pfr_daemon_triggers;

/* Start the triggers the configuration asks for (none: *out = NULL, 0). The sources, identity
 * and metrics outlive it. Returns 0 or a negative errno (logged). */
int pfr_daemon_triggers_start(const pfr_config *cfg, struct pfr_identity *identity,
                              pfr_daemon_metrics *metrics, const pfr_source *sources, size_t nsrc,
                              pfr_daemon_triggers **out);

/* SIGHUP: the service rules. */
void pfr_daemon_triggers_reload(pfr_daemon_triggers *d, const pfr_config *cfg);

/* POST /pin stops answering, pending requests are handed over, the thread ends. NULL is fine. */
void pfr_daemon_triggers_stop(pfr_daemon_triggers *d);

#endif
