/* The options of `pfr`'s commands as settings tables (common/pfr_settings.h): one group per
 * concern (range and filters, output, picture, ...), bound by each command to its cmd_opts.
 * Flags only: the query tool reads no config file, and no environment but PFR_STORE. */
#ifndef PFR_CLI_OPTS_H
#define PFR_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pfr_settings.h"
#include "pfr_store.h"

#define PFR_CLI_MAX_LABELS 32

/* --label KEY=VALUE, in the order given. */
typedef struct pfr_cli_labels {
    pfr_kv kv[PFR_CLI_MAX_LABELS];  /* point into text[] */
    char *text[PFR_CLI_MAX_LABELS]; /* owned: "KEY\0VALUE" */
    size_t n;
} pfr_cli_labels;

/* Every command's options; a command binds the groups it takes (strings owned, NULL unset). */
struct cmd_opts {
    char *from, *to, *service, *type; /* range and filters */
    pfr_cli_labels labels;
    char *output, *format;     /* -o FILE, --format */
    char *base_from, *base_to; /* diff */
    uint32_t limit, width;     /* top rows; svg width or timeline bar columns */
    double min_width;          /* a share; 0 = the format's, < 0 = keep all */
    char *title, *search;
    bool no_labels, force; /* flame/export; export --ring */
    int64_t step_ns;       /* timeline; 0 = about 60 intervals */
    uint32_t values;       /* ls */
    char *ring;            /* export --ring FILE */
    char *listen;          /* serve */
    int64_t timeout_ns, max_range_ns;
    uint32_t max_queries;
    char *reason;        /* pin */
    char *pin;           /* export --pin ID */
    bool all_pins;       /* export --pins */
    const char *operand; /* unpin ID (argv's, not owned) */
};
typedef struct cmd_opts cmd_opts;

/* The groups (cli_opts.c). */
extern const pfr_settings_group pfr_cli_range, pfr_cli_output, pfr_cli_format, pfr_cli_picture,
    pfr_cli_flame, pfr_cli_diff, pfr_cli_timeline, pfr_cli_ls, pfr_cli_export, pfr_cli_serve,
    pfr_cli_pin_group, pfr_cli_pins_format;

/* The global options: `pfr [--store PATH]`. */
typedef struct pfr_cli_global {
    char *store;
} pfr_cli_global;
extern const pfr_settings_group pfr_cli_global_group;

#endif
