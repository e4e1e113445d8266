/* The `pfr` command line: option parsing shared by the commands, and the commands themselves.
 * Everything that reads the ring or renders lives in the pfr_query library; this is the thin
 * layer that turns argv into library calls and errors into messages and exit codes. */
#ifndef PFR_CLI_H
#define PFR_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pfr_store.h"

/* Exit codes (documented in docs/query.md). */
enum {
    PFR_EXIT_OK = 0,
    PFR_EXIT_ERROR = 1,   /* the ring cannot be read, output cannot be written */
    PFR_EXIT_USAGE = 2,   /* bad option, bad time expression, ambiguous type */
    PFR_EXIT_NO_DATA = 3, /* nothing in the range, unknown service, type or label */
};

typedef struct pfr_cli {
    const char *store_path;
    int64_t now_ns; /* one "now" for every relative time of a command */
} pfr_cli;

/* Run the command argv[0] with its options argv[1..]: parse them (its option groups, cli_opts.c),
 * call the query library, write the output. Returns an exit code, after printing why. */
int pfr_cli_run(pfr_cli *cli, int argc, char **argv);

/* `pfr export --ring FILE` (export_ring.c): the chunks of s matching f (range, service, type,
 * profile labels), as they are in the ring, written to a standalone ring file at path (replacing
 * it if force). Returns an exit code, after printing why. */
int pfr_export_ring(pfr_store *s, const char *path, bool force, const pfr_store_filter *f);
/* The same with f in the ring's own names (a pin's selection). */
int pfr_export_ring_filter(pfr_store *s, const char *path, bool force, const pfr_store_filter *f);

/* pin.c: `pfr pin`, `pfr pins`, `pfr unpin ID`, and `pfr export --ring FILE --pin ID|--pins`. */
struct cmd_opts;
int pfr_cli_pin(pfr_cli *cli, const struct cmd_opts *o);
int pfr_cli_pins(pfr_cli *cli, const struct cmd_opts *o);
int pfr_cli_unpin(pfr_cli *cli, const struct cmd_opts *o);
int pfr_cli_export_pins(pfr_cli *cli, const struct cmd_opts *o);

#endif
