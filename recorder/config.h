/*
 * config: pfr-recorder settings, layered defaults < config file ([recorder] and [service]
 * sections, libinih) < environment (PFR_*) < command line flags.
 */
#ifndef PFR_RECORDER_CONFIG_H
#define PFR_RECORDER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pfr_log.h"
#include "service.h"

#define PFR_RECORDER_DEFAULT_CONFIG "/etc/pfr/recorder.ini"

typedef struct pfr_config {
    char *store_path;
    int64_t interval_ns;      /* drain and write period */
    unsigned cpu_hz;          /* samples per second per CPU */
    uint64_t max_store_bytes; /* 0 = the store's default */
    /* Free space the ring leaves on its file system (pfr_store_reserve's fields; the store's
     * header is not this one's to include) */
    int disk_reserve_mode;       /* enum pfr_store_reserve_mode: 0 = auto */
    uint64_t disk_reserve_bytes; /* PFR_STORE_RESERVE_BYTES */
    double disk_reserve_percent; /* PFR_STORE_RESERVE_PERCENT */
    enum pfr_log_level log_level;
    char *config_path;          /* NULL = none */
    unsigned stack_map_entries; /* per buffer */
    unsigned count_map_entries; /* per buffer */
    uint64_t sym_cache_bytes;
    int64_t symbolize_budget_ns; /* per interval; 0 = half the interval, at most 5 s */
    bool dwarf;                  /* file:line from DWARF */
    bool perf_maps;              /* JIT code named from /tmp/perf-PID.map */
    int unwind;                  /* enum pfr_unwind_mode (cpu_profiler.h) */
    uint64_t unwind_table_bytes; /* cap of the sampler's unwind tables */
    pfr_service_rules rules;     /* [service] rule = KIND PATTERN SERVICE */

    /* Go heap profiler (recorder/goheap) */
    int go_heap_mode;            /* enum pfr_goheap_mode */
    int64_t go_heap_interval_ns; /* between collections */

    /* Prometheus metrics; "" = not served */
    char *metrics_listen;

    /* pprof pull mode (recorder/scrape) */
    int64_t scrape_interval_ns;
    int scrape_local;          /* enum pfr_scrape_local_mode */
    int scrape_other_netns;    /* enum pfr_scrape_netns_mode */
    unsigned scrape_endpoints; /* bit per enum pfr_scrape_endpoint */
    int scrape_cpu_seconds;    /* 0 = no CPU profile */
    char *scrape_ca_file;      /* NULL = system CAs */
    bool scrape_insecure;
    char **scrape_targets; /* "URL service=NAME [key=value ...]" lines, flags first */
    size_t nscrape_targets;
    char *k8s_kubelet_url, *k8s_apiserver_url, *k8s_node_name, *k8s_token_file, *k8s_ca_file;
    bool k8s_insecure;

    /* Identities (recorder/identity): Docker's API socket (NULL = its default, "" = none) and
     * data root (NULL = its default) */
    char *docker_socket, *docker_root;
} pfr_config;

enum pfr_config_result {
    PFR_CONFIG_OK = 0,
    PFR_CONFIG_EXIT = 1, /* --help or --version printed: exit 0 */
};

/* Fill c from defaults, the config file (--config, PFR_CONFIG, or PFR_RECORDER_DEFAULT_CONFIG if
 * it exists), the environment and argv. Returns PFR_CONFIG_OK, PFR_CONFIG_EXIT, or a negative
 * errno with a reason in err. --help / --version text goes to out. c is owned by the caller and
 * released with pfr_config_free() whatever the result. */
int pfr_config_load(pfr_config *c, int argc, char **argv, FILE *out, char *err, size_t errlen);

/* Re-read the configuration as at start-up (same argv and environment) into fresh. */
int pfr_config_reload(pfr_config *fresh, int argc, char **argv, char *err, size_t errlen);

void pfr_config_free(pfr_config *c);

/* BPF map sizes: the configured ones, or (when 0) sized for one interval at the sampling rate
 * on ncpus CPUs: CPUs x rate x interval / 2 stacks rounded up to a power of two in
 * [8192, 65536], twice as many counts. */
void pfr_config_map_sizes(const pfr_config *c, unsigned ncpus, unsigned *stacks, unsigned *counts);

/* Add a static scrape target line ("URL service=NAME [key=value ...]") after checking it. */
int pfr_config_add_scrape_target(pfr_config *c, const char *line, char *err, size_t errlen);

/* Apply one setting by its config-file key (e.g. "cpu_hz", "interval"). Used by every layer. */
int pfr_config_set(pfr_config *c, const char *key, const char *value, char *err, size_t errlen);

#endif
