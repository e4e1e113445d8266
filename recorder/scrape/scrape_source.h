/*
 * scrape_source: pprof pull mode (recorder/scrape) as a recorder source. The scraper runs its
 * rounds in a thread of its own (a CPU profile takes seconds); every recorder interval this
 * source writes what the rounds queued. Targets: the configured static list, the Kubernetes pods
 * of this node when a kubelet or API server is configured, else local discovery of Go processes
 * serving net/http/pprof, named by the recorder's service rules.
 */
#ifndef PFR_RECORDER_SCRAPE_SOURCE_H
#define PFR_RECORDER_SCRAPE_SOURCE_H

#include "source.h"

/* Its settings ([recorder] keys and [scrape] target lines; rows in scrape_source.c). The
 * Kubernetes settings are the identities' (pfr_config). */
typedef struct pfr_scrape_config {
    int64_t interval_ns;
    int local;            /* enum pfr_scrape_local_mode */
    int other_netns;      /* enum pfr_scrape_netns_mode */
    unsigned endpoints;   /* bit per enum pfr_scrape_endpoint */
    unsigned cpu_seconds; /* 0 = no CPU profile */
    char *ca_file;        /* NULL = system CAs */
    bool insecure;
    struct pfr_scrape_lines {
        char **v; /* "URL service=NAME [key=value ...]", flags first */
        size_t n;
    } targets;
} pfr_scrape_config;

/* Its row of the source table: wanted when there are static targets, a kubelet or API server,
 * or local discovery is not off. Its config struct is a pfr_scrape_config. */
extern const pfr_source_desc pfr_scrape_source_desc;

#endif
