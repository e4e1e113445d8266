/*
 * sinks: the table of sink kinds. A kind is a folder under shipper/sinks/ (its sink, its own
 * settings, its helpers) and one row here: config.c, sink.c and status.c find kinds through
 * this table only, so adding a kind touches no other generic file.
 *
 * A sink's settings are the common group (pfr_sink_settings: every kind has them, in
 * pfr_sink_conf) and the kind's own group (row.settings, with offsets into a struct of
 * row.conf_size bytes that pfr_sink_conf.kind_conf points to).
 */
#ifndef PFR_SHIP_SINKS_H
#define PFR_SHIP_SINKS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "pfr_settings.h"
#include "redact.h"
#include "sink.h"

typedef struct pfr_sink_kind {
    const char *name; /* "coroot": the value of type = and of --sink */
    /* The kind's own keys, or NULL: offsets into its struct of conf_size bytes. */
    const pfr_settings_group *settings;
    size_t conf_size;
    /* The common keys whose defaults differ for this kind (batch sizes); NULL: none. Run
     * after the common group's defaults, before any file, environment or flag. */
    void (*defaults)(pfr_sink_conf *c);
    /* Checks across fields once every layer is in: 0, or -EINVAL with the reason. NULL: none. */
    int (*check)(pfr_sink_conf *c, char *err, size_t errlen);
    /* Checks of the secret once it is loaded (status loads none): 0, or -EINVAL with the
     * reason. NULL: none. */
    int (*check_key)(const pfr_sink_conf *c, char *err, size_t errlen);
    /* Add the forms the kind's credentials travel in beyond the key itself and the URL's
     * user:password (pfr_sink_new adds those); NULL: none. 0 or -ENOMEM. */
    int (*secrets)(const pfr_sink_conf *c, pfr_secrets *k);
    /* Bytes of the ring's cache of decoded dictionaries (pfr_store_opts.cache_bytes) a sink
     * of this kind wants while it sends; NULL: none. */
    uint64_t (*ring_cache)(const pfr_sink_conf *c);
    /* A line for `status` ("database", "coroot_x"); NULL: none. */
    void (*status_detail)(const pfr_sink_conf *c, const char **label, const char **value);
    /* The example section of the sample config file: "[sink NAME]" and its key lines, shown
     * commented out after the tables' keys. */
    const char *sample;
    /* Create the sink for c (c outlives it). 0 or a negative errno. */
    int (*create)(const pfr_sink_conf *c, pfr_sink **out);
} pfr_sink_kind;

/* The kinds, in the order --help and the reference show them. */
extern const pfr_sink_kind *const pfr_sink_kinds[];
extern const size_t pfr_sink_nkinds;

/* The kind named name, or NULL. */
const pfr_sink_kind *pfr_sink_kind_find(const char *name);

/* "coroot or clickhouse": the kinds' names for messages, in buf. Returns buf. */
const char *pfr_sink_kind_names(const char *sep, const char *last_sep, char *buf, size_t len);

#endif
