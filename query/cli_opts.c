/* The option tables of `pfr` and its commands (cli_opts.h). */
#include "cli_opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_serve.h"

#define F(field) PFR_SETTING_FIELD(cmd_opts, field)
#define ROWS(r)  .rows = r, .nrows = sizeof(r) / sizeof(r[0])

/* --label KEY=VALUE appends (a LIST row). */
static int parse_label(const char *value, void *field, char *err, size_t errlen)
{
    pfr_cli_labels *l = field;
    const char *eq = strchr(value, '=');
    if (!eq || eq == value) {
        snprintf(err, errlen, "\"%s\" is not KEY=VALUE, e.g. --label pid=1234", value);
        return -EINVAL;
    }
    if (l->n == PFR_CLI_MAX_LABELS) {
        snprintf(err, errlen, "at most %d labels", PFR_CLI_MAX_LABELS);
        return -EINVAL;
    }
    char *text = strdup(value);
    if (!text)
        return -ENOMEM;
    text[eq - value] = '\0';
    l->text[l->n] = text;
    l->kv[l->n] = (pfr_kv){.key = text, .value = text + (eq - value) + 1};
    l->n++;
    return 0;
}

static void free_labels(void *field)
{
    pfr_cli_labels *l = field;
    for (size_t i = 0; i < l->n; i++)
        free(l->text[i]);
    l->n = 0;
}

/* --min-width PCT: a percentage of the total, kept as a share; 0 keeps every frame (< 0). */
static int parse_percent(const char *value, void *field, char *err, size_t errlen)
{
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || !(v >= 0 && v < 100)) {
        snprintf(err, errlen, "\"%s\" is not a percentage below 100, such as 0.01", value);
        return -EINVAL;
    }
    *(double *)field = v == 0 ? -1 : v / 100;
    return 0;
}

static const pfr_setting range_rows[] = {
    {.key = "from",
     .type = PFR_SET_STRING,
     F(from),
     .def = "-1h",
     .metavar = "TIME",
     .help = "start of the range"},
    {.key = "to",
     .type = PFR_SET_STRING,
     F(to),
     .def = "now",
     .metavar = "TIME",
     .help = "end of the range"},
    {.key = "service",
     .type = PFR_SET_STRING,
     F(service),
     .metavar = "NAME",
     .def_doc = "every service that has the type",
     .help = "one service, its exact name as pfr ls shows it, e.g. nginx, "
             "/system.slice/nginx.service or /k8s/prod/api"},
    {.key = "type",
     .type = PFR_SET_STRING,
     F(type),
     .metavar = "TYPE",
     .def_doc = "the only one, or ebpf:cpu:nanoseconds when there are several",
     .help = "profile type, e.g. ebpf:cpu:nanoseconds"},
    {.key = "label",
     .type = PFR_SET_LIST,
     F(labels),
     .parse = parse_label,
     .free = free_labels,
     .metavar = "KEY=VALUE",
     .help = "keep profiles or samples with this label (repeatable): profile labels such as "
             "host.name or container.id (one instance: "
             "container.id=/k8s/prod/api-7d4f9c-x2b5k/app), sample labels such as pid or comm"},
};

static const pfr_setting output_rows[] = {
    {.key = "output",
     .type = PFR_SET_STRING,
     F(output),
     .short_opt = 'o',
     .metavar = "FILE",
     .def_doc = "stdout",
     .help = "write to FILE instead of stdout"},
};

static const pfr_setting format_rows[] = {
    {.key = "format",
     .type = PFR_SET_STRING,
     F(format),
     .metavar = "FORMAT",
     .help = "the output format: one of FORMAT below"},
};

static const pfr_setting picture_rows[] = {
    {.key = "limit",
     .type = PFR_SET_COUNT,
     F(limit),
     .def = "30",
     .min = 1,
     .max = 1000000,
     .metavar = "N",
     .help = "top: rows"},
    {.key = "width",
     .type = PFR_SET_COUNT,
     F(width),
     .def = "1200",
     .min = 10,
     .max = 100000,
     .metavar = "PX",
     .help = "svg: width"},
    {.key = "min_width",
     .type = PFR_SET_CUSTOM,
     F(min_width),
     .parse = parse_percent,
     .metavar = "PCT",
     .def_doc = "0.05 for svg, 0.01 for html and json",
     .help = "svg/html/json: leave out frames under PCT% of the total (0 keeps all)"},
    {.key = "title",
     .type = PFR_SET_STRING,
     F(title),
     .metavar = "TEXT",
     .def_doc = "type and service",
     .flags = PFR_SETF_EMPTY_OK,
     .help = "title printed on the picture"},
    {.key = "search",
     .type = PFR_SET_STRING,
     F(search),
     .metavar = "REGEX",
     .help = "svg/html: highlight matching frames when opened"},
};

static const pfr_setting flame_rows[] = {
    {.key = "no_labels",
     .type = PFR_SET_BOOL,
     F(no_labels),
     .flags = PFR_SETF_NO_ARG,
     .help = "pprof: drop sample labels (pid, comm) so stacks merge"},
};

static const pfr_setting diff_rows[] = {
    {.key = "base_from",
     .type = PFR_SET_STRING,
     F(base_from),
     .metavar = "TIME",
     .def_doc = "the range of equal length just before --from",
     .help = "baseline start"},
    {.key = "base_to",
     .type = PFR_SET_STRING,
     F(base_to),
     .metavar = "TIME",
     .def_doc = "--base-from + the comparison length",
     .help = "baseline end"},
};

static const pfr_setting timeline_rows[] = {
    {.key = "step",
     .type = PFR_SET_DURATION,
     F(step_ns),
     .min = 0.001,
     .metavar = "DURATION",
     .def_doc = "about 60 intervals",
     .help = "interval length, e.g. 10s, 1m"},
    {.key = "width",
     .type = PFR_SET_COUNT,
     F(width),
     .def = "50",
     .min = 10,
     .max = 100000,
     .metavar = "N",
     .help = "bar width in columns"},
};

static const pfr_setting ls_rows[] = {
    {.key = "values",
     .type = PFR_SET_COUNT,
     F(values),
     .def = "10",
     .min = 1,
     .max = 1000000,
     .metavar = "N",
     .help = "label values and gaps shown per service"},
};

static const pfr_setting export_rows[] = {
    {.key = "no_labels",
     .type = PFR_SET_BOOL,
     F(no_labels),
     .flags = PFR_SETF_NO_ARG,
     .help = "drop sample labels (pid, comm) so stacks merge"},
    {.key = "ring",
     .type = PFR_SET_STRING,
     F(ring),
     .metavar = "FILE",
     .help = "write a ring slice to FILE (not pprof)"},
    {.key = "pin",
     .type = PFR_SET_STRING,
     F(pin),
     .metavar = "ID",
     .help = "--ring: the range and selection of pin ID (pfr pins), instead of --from/--to/"
             "--service/--label"},
    {.key = "pins",
     .type = PFR_SET_BOOL,
     F(all_pins),
     .flags = PFR_SETF_NO_ARG,
     .help = "--ring: every pin: the span from the earliest pin's start to the latest's end, "
             "every service"},
    {.key = "force",
     .type = PFR_SET_BOOL,
     F(force),
     .flags = PFR_SETF_NO_ARG,
     .help = "--ring: replace FILE if it exists and is a regular file (a symlink: its target)"},
};

static const pfr_setting serve_rows[] = {
    {.key = "listen",
     .type = PFR_SET_STRING,
     F(listen),
     .def = PFR_SERVE_DEFAULT_LISTEN,
     .metavar = "ADDR",
     .help = "HOST:PORT, [IPV6]:PORT or PORT. Port 0 picks a free port. A non-loopback address "
             "exposes every profile without authentication (a warning is printed)"},
    {.key = "timeout",
     .type = PFR_SET_DURATION,
     F(timeout_ns),
     .def = "20s",
     .min = 0.001,
     .metavar = "DURATION",
     .help = "answer 503 to a query still running after this"},
    {.key = "max_range",
     .type = PFR_SET_DURATION,
     F(max_range_ns),
     .def = "31d",
     .min = 0.001,
     .metavar = "DURATION",
     .help = "refuse (400) ranges longer than this"},
    {.key = "max_queries",
     .type = PFR_SET_COUNT,
     F(max_queries),
     .def = "2",
     .min = 1,
     .max = 64,
     .metavar = "N",
     .help = "queries running at once; more wait for a slot, within --timeout"},
};

static const pfr_setting pin_rows[] = {
    {.key = "reason",
     .type = PFR_SET_STRING,
     F(reason),
     .metavar = "TEXT",
     .help = "why the range is kept (required; at most 1024 bytes): what happened, a ticket"},
};

static const pfr_setting pins_rows[] = {
    {.key = "format",
     .type = PFR_SET_STRING,
     F(format),
     .def = "text",
     .metavar = "FORMAT",
     .help = "text or json"},
};

/* Every row is a flag only: no environment variable but the global PFR_STORE. */
#define GROUP(n, title)                                                                            \
    {                                                                                              \
        .name = title, .section = NULL, ROWS(n##_rows)                                             \
    }

const pfr_settings_group pfr_cli_range = GROUP(range, "Range and filters");
const pfr_settings_group pfr_cli_output = GROUP(output, "Output");
const pfr_settings_group pfr_cli_format = GROUP(format, "Format");
const pfr_settings_group pfr_cli_picture = GROUP(picture, "Pictures");
const pfr_settings_group pfr_cli_flame = GROUP(flame, "pprof output");
const pfr_settings_group pfr_cli_diff = GROUP(diff, "Baseline");
const pfr_settings_group pfr_cli_timeline = GROUP(timeline, "Timeline");
const pfr_settings_group pfr_cli_ls = GROUP(ls, "Listing");
const pfr_settings_group pfr_cli_export = GROUP(export, "Export");
const pfr_settings_group pfr_cli_serve = GROUP(serve, "Server");
const pfr_settings_group pfr_cli_pin_group = GROUP(pin, "Pin");
const pfr_settings_group pfr_cli_pins_format = GROUP(pins, "Output");

static const pfr_setting global_rows[] = {
    {.key = "store",
     .type = PFR_SET_STRING,
     PFR_SETTING_FIELD(pfr_cli_global, store),
     .def = PFR_STORE_DEFAULT_PATH,
     .env = "PFR_STORE",
     .metavar = "PATH",
     .help = "the ring"},
};
const pfr_settings_group pfr_cli_global_group = {.name = "Options", ROWS(global_rows)};
