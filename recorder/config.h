/*
 * config: pfr-recorder's settings. The rows are tables (pfr_settings): the core ones here
 * ([recorder] keys of the daemon itself and of the identities' resolver, and the [service]
 * rules), each source's in its own folder with its own struct, reached through the source table
 * (source.h). Layering: defaults < config file < environment (PFR_*) < command line flags. This
 * module keeps what no row can say: checks across fields.
 */
#ifndef PFR_RECORDER_CONFIG_H
#define PFR_RECORDER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pfr_log.h"
#include "pfr_settings.h"
#include "pfr_triggers.h"
#include "service.h"

#define PFR_RECORDER_DEFAULT_CONFIG "/etc/pfr/recorder.ini"
#define PFR_CONFIG_MAX_SOURCES      8

struct pfr_source_desc;

/* Free space the ring leaves on its file system (pfr_store_reserve's fields; the store's header
 * is not this one's to include). */
typedef struct pfr_disk_reserve {
    int mode;       /* enum pfr_store_reserve_mode: 0 = auto */
    uint64_t bytes; /* PFR_STORE_RESERVE_BYTES */
    double percent; /* PFR_STORE_RESERVE_PERCENT */
} pfr_disk_reserve;

/* What pins may keep of the ring: a share of max_store_bytes (percent > 0) or bytes. */
typedef struct pfr_pin_budget {
    uint64_t bytes;
    double percent;
} pfr_pin_budget;

/* A loaded configuration is bound to its settings (they point into it): never copy one. */
typedef struct pfr_config {
    char *store_path;
    int64_t interval_ns;      /* drain and write period */
    uint64_t max_store_bytes; /* 0 = the store's default */
    pfr_disk_reserve disk_reserve;
    pfr_pin_budget pin_max; /* pin_max_bytes (docs/store.md, "Pins") */
    char *retention_tiers;  /* the ring's roll-up steps, as pfr_store_tiers_parse reads them */
    uint32_t retention_fold_stacks; /* the coarsest tier's fold bound; 0 = never fold */
    int log_level;                  /* enum pfr_log_level */
    char *metrics_listen;           /* Prometheus metrics; "" = not served */
    char *config_path;              /* the file read; NULL = none */
    /* Identities (recorder/identity): Docker's API socket (NULL = its default, "" = none) and
     * data root (NULL = its default); Kubernetes, also where the scraper finds pods */
    char *docker_socket, *docker_root;
    char *k8s_kubelet_url, *k8s_apiserver_url, *k8s_node_name, *k8s_token_file, *k8s_ca_file;
    bool k8s_insecure;
    pfr_service_rules rules; /* [service] rule = KIND PATTERN SERVICE; --service-rule first */
    uint64_t memory_budget;  /* the recorder's resident set budget (pfr_membudget.h); 0 = off */
    bool huge_pages;         /* the heap on transparent huge pages (heap_pages.h) */
    /* The shared symbolizer (recorder/shared_sym): its cache bound, file:line from DWARF, JIT
     * code named from perf maps */
    uint64_t sym_cache_bytes;
    bool dwarf, perf_maps;
    /* Files of other processes on remote file systems (FUSE, NFS, ...; recorder/fsguard) */
    int remote_files;               /* enum pfr_fsguard_remote */
    int64_t remote_file_timeout_ns; /* a copy worker's deadline */
    uint64_t remote_file_max_bytes; /* larger remote files are not copied */
    pfr_triggers_config triggers;   /* [triggers] (recorder/triggers) */

    void *source_conf[PFR_CONFIG_MAX_SOURCES]; /* each source's struct, in table order */
    pfr_settings *settings;                    /* the rows bound to the structs above */
} pfr_config;

enum pfr_config_result {
    PFR_CONFIG_OK = 0,
    PFR_CONFIG_EXIT = 1, /* --help, --version or --print-settings printed: exit 0 */
};

/* Fill c from defaults, the config file (--config, PFR_CONFIG, or PFR_RECORDER_DEFAULT_CONFIG if
 * it exists), the environment and argv. Returns PFR_CONFIG_OK, PFR_CONFIG_EXIT, or a negative
 * errno with a reason in err. --help / --version text goes to out. c is owned by the caller and
 * released with pfr_config_free() whatever the result. */
int pfr_config_load(pfr_config *c, int argc, char **argv, FILE *out, char *err, size_t errlen);

/* Re-read the configuration as at start-up (same argv and environment) into fresh. */
int pfr_config_reload(pfr_config *fresh, int argc, char **argv, char *err, size_t errlen);

void pfr_config_free(pfr_config *c);

/* The config struct of source d (its descriptor's conf_size bytes), or NULL when c is not
 * loaded. */
const void *pfr_config_source(const pfr_config *c, const struct pfr_source_desc *d);

/* Apply one [recorder] setting by its config-file key (e.g. "cpu_hz", "interval") to a loaded
 * configuration, as a file would. */
int pfr_config_set(pfr_config *c, const char *key, const char *value, char *err, size_t errlen);

#endif
