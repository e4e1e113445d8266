/*
 * config: pfr-shipper settings, layered defaults < config file ([shipper] and [sink NAME]
 * sections) < environment (PFR_SHIPPER_*) < command line flags. The keys are the tables of
 * settings.h and of each sink kind's folder (pfr_settings.h does the layering); this module
 * builds the sinks from them and checks what spans fields.
 *
 * Secrets (the Coroot API key, the ClickHouse password) are read from a file (api_key_file) or
 * an environment variable (api_key_env, or PFR_SHIPPER_API_KEY for the sink given by flags),
 * never from argv, and are never printed.
 */
#ifndef PFR_SHIP_CONFIG_H
#define PFR_SHIP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "batch.h"
#include "pfr_log.h"
#include "retry.h"

#define PFR_SHIPPER_DEFAULT_CONFIG "/etc/pfr/shipper.ini"
#define PFR_SHIPPER_DEFAULT_STATE  "/var/lib/pfr/shipper.db"

struct pfr_sink_kind; /* sinks/sinks.h */

/* Which chunks a sink sends (ops.ships): what Coroot's node agent would, or every one. */
enum pfr_ship_policy {
    PFR_SHIP_AGENT = 0,
    PFR_SHIP_ALL,
};

/* A sink's settings: those of every kind here, the kind's own in kind_conf. */
typedef struct pfr_sink_conf {
    char *name;                       /* [A-Za-z0-9_.-]+; the ring consumer is "shipper.<name>" */
    const struct pfr_sink_kind *kind; /* its row of the kinds' table */
    void *kind_conf;                  /* owned: the kind's struct (kind->conf_size bytes) */
    char *url;
    char *api_key; /* secret: Coroot's X-API-Key or ClickHouse's password (may be NULL) */
    char *api_key_file, *api_key_env; /* where it comes from */
    unsigned key_file_mode;           /* api_key_file's permission bits once read (0: none) */
    int compress_level;               /* gzip level of request bodies, 1..9 */
    char *service_prefix; /* put before every chunk's service name as shipped (service_name.h) */
    enum pfr_ship_policy ship;
    bool skip_system_services;     /* ship = agent: leave systemd's own services out too */
    char *system_service_prefixes; /* their unit name prefixes (pfr_system_service.h) */
    char *systemd_root;            /* where systemd's unit files are read (pfr_systemd_unit.h) */
    pfr_batch_limits batch;
    pfr_backoff backoff;
    int64_t connect_timeout_ms, timeout_ms;
    uint64_t bandwidth; /* bytes/s across the sink's requests, 0 = unlimited */
    char *ca_file, *client_cert, *client_key;
    bool tls_insecure;
} pfr_sink_conf;

enum pfr_shipper_cmd {
    PFR_CMD_RUN = 0,
    PFR_CMD_STATUS,
    PFR_CMD_BACKFILL,
};

typedef struct pfr_shipper_conf {
    enum pfr_shipper_cmd cmd;
    char *config_path; /* NULL = none */
    char *store_path;
    char *state_path;
    bool state_given; /* state_path from --state or PFR_SHIPPER_STATE (a ring slice takes no
                         other: the config file's and the default are the daemon's) */
    enum pfr_log_level log_level;
    int64_t poll_ms;     /* how often an idle shipper looks at the ring (default 5 s) */
    int64_t deadline_ms; /* --once / backfill: give up after this long (0 = never) */
    bool once;
    bool retry_rejected;
    bool json;                 /* status as JSON */
    int64_t progress_ms;       /* backfill progress line period (default 2 s) */
    char *sink_flag;           /* --sink: the kind of the sink from flags, or backfill's sink */
    char *from_text, *to_text; /* --from, --to as given */
    /* backfill */
    char *backfill_sink;
    int64_t from_ns, to_ns;
    pfr_sink_conf *sinks;
    size_t nsinks;
} pfr_shipper_conf;

enum pfr_conf_result {
    PFR_CONF_OK = 0,
    PFR_CONF_EXIT = 1, /* --help / --version printed: exit 0 */
};

/* Fill c from defaults, the config file (--config, PFR_SHIPPER_CONFIG, or
 * PFR_SHIPPER_DEFAULT_CONFIG if it exists), the environment and argv (subcommand first:
 * "status", "backfill" or none). Loads the secrets. Returns PFR_CONF_OK, PFR_CONF_EXIT, or a
 * negative errno with a reason in err. Help goes to out. c is released with
 * pfr_shipper_conf_free() whatever the result. now_ns anchors relative times ("-2h"). */
int pfr_shipper_conf_load(pfr_shipper_conf *c, int argc, char **argv, int64_t now_ns, FILE *out,
                          char *err, size_t errlen);
void pfr_shipper_conf_free(pfr_shipper_conf *c);

/* Parse an INI text (a config file's content) into c, as pfr_shipper_conf_load does with the
 * file; secrets are not loaded. For tests and the fuzzer. */
int pfr_shipper_conf_parse_ini(pfr_shipper_conf *c, const char *text, char *err, size_t errlen);

/* Make s a sink of kind k at its defaults (the common group's, then the kind's). s is released
 * with pfr_sink_conf_release whatever the result. 0 or a negative errno with the reason. */
int pfr_sink_conf_init(pfr_sink_conf *s, const struct pfr_sink_kind *k, char *err, size_t errlen);
/* Set one key of s (the common group's or its kind's) from text. 0, -ENOENT (no such key for
 * its kind) or another negative errno, with the reason. */
int pfr_sink_conf_set(pfr_sink_conf *s, const char *key, const char *value, char *err,
                      size_t errlen);
void pfr_sink_conf_release(pfr_sink_conf *s);

pfr_sink_conf *pfr_shipper_conf_sink(const pfr_shipper_conf *c, const char *name);

/* The ring's cache of decoded dictionaries (pfr_store_opts.cache_bytes): the most any sink's
 * kind wants (clickhouse: an eighth of its batch_memory). */
uint64_t pfr_shipper_ring_cache(const pfr_shipper_conf *c);

#endif
