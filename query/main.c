/* pfr: the query tool. `pfr [--store PATH] COMMAND [options]`; see docs/query.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "pfr_log.h"
#include "pfr_time.h"

extern char **environ;

static const char usage[] =
    "Usage: pfr [--store PATH] COMMAND [options]\n"
    "Read the profile ring on this machine (read-only but for pin and unpin; safe while\n"
    "the recorder writes).\n\n"
    "Commands:\n"
    "  ls         services, profile types, label values and time coverage\n"
    "  flame      flame graph of a time range: folded, pprof, svg, html, json, top\n"
    "  timeline   value per interval of a range, to find the spike to zoom into\n"
    "  diff       a range against a baseline range: red more, green less\n"
    "  export     pprof of a range (for go tool pprof, Go PGO default.pgo)\n"
    "  serve      the profiling page in a browser (chart, zoom, compare, flame graph)\n"
    "  pin        keep a range from eviction (an incident), with a reason\n"
    "  pins       the pins: range, selection, bytes, who made them and why\n"
    "  unpin ID   release a pin\n"
    "  help CMD   help of a command (same as pfr CMD --help)\n";

static const char exit_codes[] =
    "\nExit codes: 0 ok, 1 error (ring unreadable, write failed), 2 usage (bad option or\n"
    "time), 3 no data (empty range, unknown service, type or label).\n";

static void help(const pfr_settings *s, FILE *f)
{
    pfr_settings_write_help(s, f);
    fputs(exit_codes, f);
}

/* The command at argv[0], or `help [CMD]`. */
static int run(pfr_cli *cli, const pfr_settings *s, int argc, char **argv)
{
    if (argc == 0) {
        help(s, stderr);
        return PFR_EXIT_USAGE;
    }
    bool helping = strcmp(argv[0], "help") == 0;
    if (helping && argc == 1) {
        help(s, stdout);
        return PFR_EXIT_OK;
    }
    if (!helping)
        return pfr_cli_run(cli, argc, argv);
    char *hargv[] = {argv[1], "--help", NULL};
    return pfr_cli_run(cli, 2, hargv);
}

int main(int argc, char **argv)
{
    pfr_cli_global g = {0};
    pfr_settings_args a;
    char err[1024] = "";
    pfr_settings *s = pfr_settings_new("pfr", NULL, usage);
    if (!s) {
        pfr_err("out of memory");
        return PFR_EXIT_ERROR;
    }
    pfr_settings_set_no_config(s, true);
    pfr_settings_set_stop_at_operand(s, true); /* the command's options are its own */
    int rc = pfr_settings_bind(s, &pfr_cli_global_group, &g, err, sizeof(err));
    if (rc == 0)
        rc = pfr_settings_load(s, argc, argv, environ, NULL, NULL, NULL, &a, err, sizeof(err));
    if (rc < 0) {
        pfr_err("%s (see pfr --help)", err);
        rc = PFR_EXIT_USAGE;
    } else if (a.help || a.print_settings) {
        if (a.help)
            help(s, stdout);
        else
            pfr_settings_write(s, a.print_settings, stdout);
        rc = PFR_EXIT_OK;
    } else if (a.version) {
        printf("pfr %s\n", PFR_VERSION);
        rc = PFR_EXIT_OK;
    } else {
        /* PFR_STORE="" reads as unset: the default */
        pfr_cli cli = {.store_path = g.store && g.store[0] ? g.store : PFR_STORE_DEFAULT_PATH,
                       .now_ns = pfr_time_now_ns()};
        rc = run(&cli, s, argc - a.first_operand, argv + a.first_operand);
    }
    pfr_settings_release(&pfr_cli_global_group, &g);
    pfr_settings_free(s);
    return rc;
}
