/* pfr: the query tool. `pfr [--store PATH] COMMAND [options]`; see docs/query.md. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pfr_log.h"
#include "pfr_time.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: pfr [--store PATH] COMMAND [options]\n"
            "Read the profile ring on this machine (read-only; safe while the recorder writes).\n\n"
            "Commands:\n"
            "  ls         services, profile types, label values and time coverage\n"
            "  flame      flame graph of a time range: folded, pprof, svg, html, json, top\n"
            "  timeline   value per interval of a range, to find the spike to zoom into\n"
            "  diff       a range against a baseline range: red more, green less\n"
            "  export     pprof of a range (for go tool pprof, Go PGO default.pgo)\n"
            "  serve      the profiling page in a browser (chart, zoom, compare, flame graph)\n"
            "  help CMD   help of a command (same as pfr CMD --help)\n\n"
            "Options:\n"
            "  --store PATH   the ring (default: $PFR_STORE, else " PFR_STORE_DEFAULT_PATH ")\n"
            "  --version      print the version\n"
            "  -h, --help     this help\n\n"
            "Exit codes: 0 ok, 1 error (ring unreadable, write failed), 2 usage (bad option or\n"
            "time), 3 no data (empty range, unknown service, type or label).\n");
}

typedef int (*cmd_fn)(pfr_cli *, int, char **);

static cmd_fn find_cmd(const char *name)
{
    static const struct {
        const char *name;
        cmd_fn fn;
    } cmds[] = {{"ls", pfr_cmd_ls},     {"flame", pfr_cmd_flame},   {"timeline", pfr_cmd_timeline},
                {"diff", pfr_cmd_diff}, {"export", pfr_cmd_export}, {"serve", pfr_cmd_serve}};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (strcmp(cmds[i].name, name) == 0)
            return cmds[i].fn;
    return NULL;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"store", required_argument, NULL, 's'},
                                         {"version", no_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    pfr_cli cli = {.store_path = getenv("PFR_STORE"), .now_ns = pfr_time_now_ns()};
    if (!cli.store_path || !cli.store_path[0])
        cli.store_path = PFR_STORE_DEFAULT_PATH;
    opterr = 0;
    int c;
    /* "+": stop at the command; its options are parsed by the command. */
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            cli.store_path = optarg;
            break;
        case 'V':
            printf("pfr %s\n", PFR_VERSION);
            return PFR_EXIT_OK;
        case 'h':
            usage(stdout);
            return PFR_EXIT_OK;
        default:
            pfr_err("unknown option %s (see pfr --help)", argv[optind - 1]);
            return PFR_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return PFR_EXIT_USAGE;
    }
    const char *name = argv[optind];
    if (strcmp(name, "help") == 0) {
        if (optind + 1 >= argc) {
            usage(stdout);
            return PFR_EXIT_OK;
        }
        cmd_fn fn = find_cmd(argv[optind + 1]);
        if (!fn) {
            pfr_err("unknown command \"%s\" (see pfr --help)", argv[optind + 1]);
            return PFR_EXIT_USAGE;
        }
        char *hargv[] = {argv[optind + 1], "--help", NULL};
        return fn(&cli, 2, hargv);
    }
    cmd_fn fn = find_cmd(name);
    if (!fn) {
        pfr_err("unknown command \"%s\" (see pfr --help)", name);
        return PFR_EXIT_USAGE;
    }
    return fn(&cli, argc - optind, argv + optind);
}
