/*
 * scrape_source: pprof pull mode (recorder/scrape) as a recorder source. The scraper runs its
 * rounds in a thread of its own (a CPU profile takes seconds); every recorder interval this
 * source writes what the rounds queued. Targets: the configured static list, the Kubernetes pods
 * of this node when a kubelet or API server is configured, else local discovery of Go processes
 * serving net/http/pprof, named by the recorder's service rules.
 */
#ifndef PFR_RECORDER_SCRAPE_SOURCE_H
#define PFR_RECORDER_SCRAPE_SOURCE_H

#include "config.h"
#include "daemon_metrics.h"
#include "exe_scan.h"
#include "source.h"

typedef struct pfr_scraper_source pfr_scraper_source;

/* exes (the shared /proc scan; NULL: its own), metrics and identity (may be NULL) must outlive
 * the source. Starts the scrape thread. */
int pfr_scraper_source_new(const pfr_config *cfg, pfr_exe_scan *exes, pfr_daemon_metrics *metrics,
                           struct pfr_identity *identity, pfr_scraper_source **out, char *err,
                           size_t errlen);
pfr_source pfr_scraper_source_as_source(pfr_scraper_source *s);

#endif
