/* The commands of `pfr`: parse options, call the query library, write the output. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "out_file.h"
#include "pfr_diff.h"
#include "pfr_log.h"
#include "pfr_query.h"
#include "pfr_render.h"
#include "pfr_serve.h"
#include "pfr_time.h"

#define MAX_LABELS 32

enum opt_id {
    O_FROM = 1,
    O_TO,
    O_BASE_FROM,
    O_BASE_TO,
    O_SERVICE,
    O_TYPE,
    O_LABEL,
    O_FORMAT,
    O_OUTPUT,
    O_LIMIT,
    O_WIDTH,
    O_MIN_WIDTH,
    O_TITLE,
    O_SEARCH,
    O_STEP,
    O_NO_LABELS,
    O_VALUES,
    O_HELP,
    O_LISTEN,
    O_TIMEOUT,
    O_MAX_RANGE,
    O_MAX_QUERIES,
    O_RING,
    O_FORCE,
};
#define BIT(o)      (1u << (o))
#define RANGE_OPTS  (BIT(O_FROM) | BIT(O_TO) | BIT(O_SERVICE) | BIT(O_TYPE) | BIT(O_LABEL))
#define COMMON_OPTS (BIT(O_OUTPUT) | BIT(O_HELP) | BIT(O_FORMAT))

static const struct option long_opts[] = {
    {"from", required_argument, NULL, O_FROM},
    {"to", required_argument, NULL, O_TO},
    {"base-from", required_argument, NULL, O_BASE_FROM},
    {"base-to", required_argument, NULL, O_BASE_TO},
    {"service", required_argument, NULL, O_SERVICE},
    {"type", required_argument, NULL, O_TYPE},
    {"label", required_argument, NULL, O_LABEL},
    {"format", required_argument, NULL, O_FORMAT},
    {"output", required_argument, NULL, O_OUTPUT},
    {"limit", required_argument, NULL, O_LIMIT},
    {"width", required_argument, NULL, O_WIDTH},
    {"min-width", required_argument, NULL, O_MIN_WIDTH},
    {"title", required_argument, NULL, O_TITLE},
    {"search", required_argument, NULL, O_SEARCH},
    {"step", required_argument, NULL, O_STEP},
    {"no-labels", no_argument, NULL, O_NO_LABELS},
    {"values", required_argument, NULL, O_VALUES},
    {"help", no_argument, NULL, O_HELP},
    {"listen", required_argument, NULL, O_LISTEN},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"max-range", required_argument, NULL, O_MAX_RANGE},
    {"max-queries", required_argument, NULL, O_MAX_QUERIES},
    {"ring", required_argument, NULL, O_RING},
    {"force", no_argument, NULL, O_FORCE},
    {NULL, 0, NULL, 0},
};

typedef struct cmd_opts {
    const char *from, *to, *base_from, *base_to;
    const char *service, *type, *format, *output, *title, *search, *step;
    const char *listen;
    const char *ring; /* export --ring FILE */
    int64_t timeout_ns, max_range_ns;
    long max_queries;
    pfr_kv labels[MAX_LABELS];
    size_t nlabels;
    char *label_keys[MAX_LABELS];
    long limit, width, values;
    double min_width;
    bool no_labels, help, force;
} cmd_opts;

static void opts_free(cmd_opts *o)
{
    for (size_t i = 0; i < o->nlabels; i++)
        free(o->label_keys[i]);
}

static bool parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static int add_label(cmd_opts *o, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        pfr_err("bad --label \"%s\": expected key=value, e.g. --label pid=1234", arg);
        return -EINVAL;
    }
    if (o->nlabels == MAX_LABELS) {
        pfr_err("too many --label options (at most %d)", MAX_LABELS);
        return -EINVAL;
    }
    char *key = strndup(arg, (size_t)(eq - arg));
    if (!key)
        return -ENOMEM;
    o->label_keys[o->nlabels] = key;
    o->labels[o->nlabels].key = key;
    o->labels[o->nlabels].value = eq + 1;
    o->nlabels++;
    return 0;
}

static int set_opt(cmd_opts *o, int id, const char *arg)
{
    switch (id) {
    case O_FROM:
        o->from = arg;
        return 0;
    case O_TO:
        o->to = arg;
        return 0;
    case O_BASE_FROM:
        o->base_from = arg;
        return 0;
    case O_BASE_TO:
        o->base_to = arg;
        return 0;
    case O_SERVICE:
        o->service = arg;
        return 0;
    case O_TYPE:
        o->type = arg;
        return 0;
    case O_LABEL:
        return add_label(o, arg);
    case O_FORMAT:
        o->format = arg;
        return 0;
    case O_OUTPUT:
        o->output = arg;
        return 0;
    case O_TITLE:
        o->title = arg;
        return 0;
    case O_SEARCH:
        o->search = arg;
        return 0;
    case O_STEP:
        o->step = arg;
        return 0;
    case O_NO_LABELS:
        o->no_labels = true;
        return 0;
    case O_HELP:
        o->help = true;
        return 0;
    case O_LIMIT:
        if (parse_long(arg, 1, 1000000, &o->limit))
            return 0;
        pfr_err("bad --limit \"%s\": expected a count from 1", arg);
        return -EINVAL;
    case O_VALUES:
        if (parse_long(arg, 1, 1000000, &o->values))
            return 0;
        pfr_err("bad --values \"%s\": expected a count from 1", arg);
        return -EINVAL;
    case O_WIDTH:
        if (parse_long(arg, 10, 100000, &o->width))
            return 0;
        pfr_err("bad --width \"%s\": expected a number from 10", arg);
        return -EINVAL;
    case O_LISTEN:
        o->listen = arg;
        return 0;
    case O_RING:
        o->ring = arg;
        return 0;
    case O_FORCE:
        o->force = true;
        return 0;
    case O_TIMEOUT:
    case O_MAX_RANGE: {
        char err[256];
        if (pfr_duration_parse(arg, id == O_TIMEOUT ? &o->timeout_ns : &o->max_range_ns, err,
                               sizeof(err)) == 0)
            return 0;
        pfr_err("bad --%s \"%s\": %s", id == O_TIMEOUT ? "timeout" : "max-range", arg, err);
        return -EINVAL;
    }
    case O_MAX_QUERIES:
        if (parse_long(arg, 1, 64, &o->max_queries))
            return 0;
        pfr_err("bad --max-queries \"%s\": expected a count from 1 to 64", arg);
        return -EINVAL;
    case O_MIN_WIDTH: {
        char *end;
        o->min_width = strtod(arg, &end);
        if (end != arg && !*end && o->min_width >= 0 && o->min_width < 100) {
            o->min_width /= 100; /* given in percent */
            if (o->min_width == 0)
                o->min_width = -1; /* keep everything */
            return 0;
        }
        pfr_err("bad --min-width \"%s\": expected a percentage such as 0.01", arg);
        return -EINVAL;
    }
    }
    return -EINVAL;
}

/* Returns 0, or PFR_EXIT_USAGE after printing why. */
static int parse_opts(const char *cmd, unsigned allowed, int argc, char **argv, cmd_opts *o)
{
    memset(o, 0, sizeof(*o));
    optind = 0; /* GNU getopt: restart scanning, argv[0] is the command */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", long_opts, NULL)) != -1) {
        if (c == 'o')
            c = O_OUTPUT;
        else if (c == 'h')
            c = O_HELP;
        if (c == '?' || c == ':') {
            if (c == ':')
                pfr_err("option %s needs a value (see pfr %s --help)", argv[optind - 1], cmd);
            else
                pfr_err("unknown option %s (see pfr %s --help)", argv[optind - 1], cmd);
            return PFR_EXIT_USAGE;
        }
        if (!(allowed & BIT(c))) {
            pfr_err("option %s does not apply to pfr %s (see pfr %s --help)", argv[optind - 1], cmd,
                    cmd);
            return PFR_EXIT_USAGE;
        }
        if (set_opt(o, c, optarg) < 0)
            return PFR_EXIT_USAGE;
    }
    if (optind < argc) {
        pfr_err("unexpected argument \"%s\" (see pfr %s --help)", argv[optind], cmd);
        return PFR_EXIT_USAGE;
    }
    return 0;
}

/* ---- help texts ---- */
static const char range_help[] =
    "  --from TIME          start of the range (default: -1h)\n"
    "  --to TIME            end of the range (default: now)\n"
    "  --service NAME       one service, its exact name as pfr ls shows it, e.g. nginx,\n"
    "                       /system.slice/nginx.service or /k8s/prod/api (default: every\n"
    "                       service that has the type)\n"
    "  --type TYPE          profile type, e.g. ebpf:cpu:nanoseconds (default: the only one,\n"
    "                       or ebpf:cpu:nanoseconds when there are several)\n"
    "  --label KEY=VALUE    keep profiles or samples with this label (repeatable): profile\n"
    "                       labels such as host.name or container.id (one instance:\n"
    "                       container.id=/k8s/prod/api-7d4f9c-x2b5k/app), sample labels\n"
    "                       such as pid or comm\n";
static const char out_help[] = "  -o, --output FILE    write to FILE instead of stdout\n"
                               "  -h, --help           this help\n";

static void print_times_help(FILE *f)
{
    fprintf(f, "\nTIME is one of:\n%s", pfr_time_forms);
}

static void help_flame(FILE *f)
{
    fprintf(
        f,
        "Usage: pfr [--store PATH] flame [options]\n"
        "Merge the profiles of a time range into one flame graph.\n"
        "Zoom into a spike found with `pfr timeline` by giving its sub-range.\n\n%s"
        "  --format FORMAT      folded (collapsed stacks: flamegraph.pl, speedscope, inferno),\n"
        "                       pprof (gzip'd, for go tool pprof), svg, html (one file,\n"
        "                       works offline), json, top (heaviest functions).\n"
        "                       Default: from the -o extension (.svg .html .json .pb.gz\n"
        "                       .pprof .folded .txt), else top on a terminal, folded in a pipe\n"
        "  --limit N            top: rows (default 30)\n"
        "  --width PX           svg: width (default 1200)\n"
        "  --min-width PCT      svg/html/json: leave out frames under PCT%% of the total\n"
        "                       (default 0.05 for svg, 0.01 for html and json; 0 keeps all)\n"
        "  --title TEXT         title printed on the picture\n"
        "  --search REGEX       svg/html: highlight matching frames when opened\n"
        "  --no-labels          pprof: drop sample labels (pid, comm) so stacks merge\n%s",
        range_help, out_help);
    print_times_help(f);
}

static void help_export(FILE *f)
{
    fprintf(f,
            "Usage: pfr [--store PATH] export [options] -o FILE\n"
            "       pfr [--store PATH] export --ring FILE [--force] [options]\n"
            "Write the profiles of a range as one gzip'd pprof profile (= flame --format pprof).\n"
            "Read it with `go tool pprof FILE`, hand it over, or use a CPU profile for Go\n"
            "profile-guided optimisation: save it as default.pgo in the main package's folder\n"
            "(select the Go service with --service; Go 1.21+ builds pick it up).\n\n"
            "With --ring, write the chunks of the range instead as a ring file of their own (a\n"
            "slice: the chunks as stored, with only the dictionaries they need), safe while the\n"
            "recorder writes. pfr reads it with --store FILE and pfr-shipper ships it with\n"
            "`pfr-shipper backfill --store FILE --sink NAME`, on any machine. Without --type\n"
            "every profile type goes in; --label takes profile labels only.\n\n%s"
            "  --no-labels          drop sample labels (pid, comm) so stacks merge\n"
            "  --ring FILE          write a ring slice to FILE (not pprof)\n"
            "  --force              --ring: replace FILE if it exists\n%s",
            range_help, out_help);
    print_times_help(f);
}

static void help_timeline(FILE *f)
{
    fprintf(f,
            "Usage: pfr [--store PATH] timeline [options]\n"
            "The value of a profile type per interval of a range (CPU time for eBPF profiles),\n"
            "as a bar chart in the terminal or as json, to find the spike to zoom into.\n\n%s"
            "  --step DURATION      interval length, e.g. 10s, 1m (default: about 60 intervals)\n"
            "  --width N            bar width in columns (default 50)\n"
            "  --format FORMAT      text (default) or json\n%s",
            range_help, out_help);
    print_times_help(f);
}

static void help_diff(FILE *f)
{
    fprintf(f,
            "Usage: pfr [--store PATH] diff [options]\n"
            "Compare a range (--from/--to) with a baseline range. Values are normalised per\n"
            "second of each range, so ranges of different lengths compare fairly. In the\n"
            "pictures a frame is red when it takes more in the comparison than in the\n"
            "baseline and green when it takes less; the shade grows with the change.\n\n%s"
            "  --base-from TIME     baseline start (default: the range of equal length just\n"
            "                       before --from)\n"
            "  --base-to TIME       baseline end (default: --base-from + the comparison length)\n"
            "  --format FORMAT      svg, html, json or top (largest changes). Default: from the\n"
            "                       -o extension, else top\n"
            "  --limit N            top: rows (default 30)\n"
            "  --width PX, --min-width PCT, --title TEXT, --search REGEX   as for flame\n%s",
            range_help, out_help);
    print_times_help(f);
}

static void help_ls(FILE *f)
{
    fprintf(f,
            "Usage: pfr [--store PATH] ls [options]\n"
            "What the ring holds: services, profile types, profile label values and time\n"
            "coverage (first and last chunk, gaps).\n\n"
            "  --format FORMAT      text (default) or json\n"
            "  --values N           label values and gaps shown per service (default 10)\n%s",
            out_help);
}

static void help_serve(FILE *f)
{
    fprintf(
        f,
        "Usage: pfr [--store PATH] serve [options]\n"
        "Serve the profiling page of the ring to a browser: pick service, type and labels,\n"
        "a chart of the profile over time (drag to select a range, then Zoom for its flame\n"
        "graph or Compare for what changed against the range before it), a flame graph and\n"
        "a top-functions table. Everything is served by pfr itself (no external URL), so it\n"
        "works offline; from a laptop use an SSH tunnel:\n"
        "  ssh -L 8123:127.0.0.1:8123 HOST   then open http://localhost:8123/\n"
        "The ring is read-only and re-read on every request. Stop with Ctrl-C.\n\n"
        "  --listen ADDR        HOST:PORT, [IPV6]:PORT or PORT (default " PFR_SERVE_DEFAULT_LISTEN
        ").\n"
        "                       Port 0 picks a free port. A non-loopback address exposes\n"
        "                       every profile without authentication (a warning is printed)\n"
        "  --timeout DURATION   answer 503 to a query still running after this (default 20s)\n"
        "  --max-range DURATION refuse (400) ranges longer than this (default 31d)\n"
        "  --max-queries N      queries running at once (default 2); more wait for a slot,\n"
        "                       within --timeout\n"
        "  -h, --help           this help\n"
        "  (global) --store PATH   the ring (default: $PFR_STORE, else " PFR_STORE_DEFAULT_PATH
        ")\n\n"
        "It prints the URL to open on stdout once listening. The JSON API (/api/ls,\n"
        "/api/timeline, /api/flame, /api/diff, /api/labels) is described in docs/serve.md.\n");
}

/* ---- shared steps ---- */
static int open_store(pfr_cli *cli, pfr_store **s)
{
    char err[512] = "";
    pfr_store_opts so = {.read_only = true};
    if (access(cli->store_path, F_OK) != 0) {
        pfr_err("no ring at %s (give --store PATH or set PFR_STORE)", cli->store_path);
        return PFR_EXIT_ERROR;
    }
    int rc = pfr_store_open(cli->store_path, &so, s, err, sizeof(err));
    if (rc < 0) {
        pfr_err("cannot open the ring %s: %s", cli->store_path, err[0] ? err : strerror(-rc));
        return PFR_EXIT_ERROR;
    }
    return 0;
}

static int parse_time(pfr_cli *cli, const char *what, const char *s, const char *def, int64_t *ns)
{
    char err[1024];
    if (pfr_time_parse(s ? s : def, cli->now_ns, ns, err, sizeof(err)) < 0) {
        pfr_err("%s: %s", what, err);
        return PFR_EXIT_USAGE;
    }
    return 0;
}

static int parse_range(pfr_cli *cli, const cmd_opts *o, int64_t *from, int64_t *to)
{
    int rc = parse_time(cli, "--from", o->from, "-1h", from);
    if (!rc)
        rc = parse_time(cli, "--to", o->to, "now", to);
    if (!rc && *to <= *from) {
        pfr_err("empty range: --to (%s) is not after --from (%s)", o->to ? o->to : "now",
                o->from ? o->from : "-1h");
        rc = PFR_EXIT_USAGE;
    }
    return rc;
}

static int exit_for(int rc)
{
    return rc == -ENOENT ? PFR_EXIT_NO_DATA : rc == -EINVAL ? PFR_EXIT_USAGE : PFR_EXIT_ERROR;
}

static int make_plan(pfr_store *s, const cmd_opts *o, pfr_query_plan **plan)
{
    char err[1024] = "";
    pfr_query q = {
        .service = o->service, .type = o->type, .labels = o->labels, .nlabels = o->nlabels};
    int rc = pfr_query_plan_new(s, &q, plan, err, sizeof(err));
    if (rc < 0) {
        pfr_err("%s", err[0] ? err : strerror(-rc));
        return exit_for(rc);
    }
    return 0;
}

typedef struct output {
    FILE *f;
    const char *path; /* NULL: stdout */
    pfr_out_file file;
} output;

/* -o PATH: written beside the target and renamed, or in place for a device or pipe
 * (out_file.h), so a failed write never destroys what PATH named. */
static int open_output(const cmd_opts *o, output *out)
{
    memset(out, 0, sizeof(*out));
    out->path = o->output && strcmp(o->output, "-") != 0 ? o->output : NULL;
    if (!out->path) {
        out->f = stdout;
        return 0;
    }
    char err[PATH_MAX + 128];
    if (pfr_out_file_open(out->path, &out->file, err, sizeof(err)) < 0) {
        pfr_err("%s", err);
        return PFR_EXIT_ERROR;
    }
    out->f = out->file.f;
    return 0;
}

/* Close; a failed render or write leaves the target as it was. */
static int close_output(output *out, int rc)
{
    char err[PATH_MAX + 128] = "";
    bool bad = false;
    int e = errno; /* a renderer's failed write leaves the stream's errno here */
    if (out->path) {
        bad = pfr_out_file_close(&out->file, rc >= 0, err, sizeof(err)) < 0;
    } else if (ferror(out->f) || fflush(out->f) != 0) {
        bad = true;
        snprintf(err, sizeof(err), "cannot write stdout: %s", strerror(e ? e : EIO));
    }
    if (bad) /* a write that failed explains a render that failed */
        pfr_err("%s", err);
    else if (rc < 0)
        pfr_err("rendering failed: %s", strerror(-rc));
    return rc < 0 || bad ? PFR_EXIT_ERROR : PFR_EXIT_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static const char *format_from_output(const char *path)
{
    static const struct {
        const char *ext, *format;
    } map[] = {{".svg", "svg"},       {".html", "html"},   {".htm", "html"},  {".json", "json"},
               {".pb.gz", "pprof"},   {".pprof", "pprof"}, {".pgo", "pprof"}, {".pb", "pprof"},
               {".folded", "folded"}, {".txt", "top"}};
    for (size_t i = 0; path && i < sizeof(map) / sizeof(map[0]); i++)
        if (ends_with(path, map[i].ext))
            return map[i].format;
    return NULL;
}

static bool one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

/* Title and subtitle: what is shown, the range and the filters (printed on the pictures). */
static void describe(const pfr_query_plan *p, int64_t from, int64_t to, const pfr_tree *t,
                     const pfr_query_stats *st, const char *user_title, char *title, size_t tlen,
                     char *sub, size_t slen)
{
    char what[512], a[48], b[48], d[32], v[40];
    pfr_query_plan_describe(p, what, sizeof(what));
    if (user_title)
        snprintf(title, tlen, "%s", user_title);
    else
        snprintf(title, tlen, "%s: %s", p->type,
                 p->service          ? p->service
                 : p->nservices == 1 ? p->services[0]
                                     : "all services");
    double total = pfr_tree_node_at(t, 0)->total[0];
    snprintf(sub, slen, "%s to %s (%s) · %s · total %s%s · %llu chunks",
             pfr_time_format(from, false, a, sizeof(a)), pfr_time_format(to, false, b, sizeof(b)),
             pfr_duration_format(to - from, d, sizeof(d)), what,
             pfr_format_value(total, pfr_type_unit(p->type), false, v, sizeof(v)),
             p->gauge ? " (mean)" : "", (unsigned long long)st->chunks);
}

/* Pictures (and json, their data) leave out frames narrower than --min-width, as the renderers
 * do; building the tree without them keeps a day of profiles fast. */
static double picture_share(const char *fmt, double min_width)
{
    if (strcmp(fmt, "svg") != 0 && strcmp(fmt, "html") != 0 && strcmp(fmt, "json") != 0)
        return 0;
    if (min_width < 0)
        return 0;
    return min_width > 0 ? min_width : strcmp(fmt, "svg") == 0 ? 0.0005 : 0.0001;
}

static void report_corrupt(const pfr_query_stats *st)
{
    if (st->corrupt)
        pfr_warn("%llu corrupt chunks skipped", (unsigned long long)st->corrupt);
}

/* ---- pfr ls ---- */
int pfr_cmd_ls(pfr_cli *cli, int argc, char **argv)
{
    cmd_opts o;
    int rc = parse_opts("ls", COMMON_OPTS | BIT(O_VALUES), argc, argv, &o);
    if (rc || o.help) {
        if (o.help)
            help_ls(stdout);
        return rc;
    }
    const char *fmt = o.format ? o.format : "text";
    if (strcmp(fmt, "text") != 0 && strcmp(fmt, "json") != 0) {
        pfr_err("bad --format \"%s\" for ls: expected text or json", fmt);
        return PFR_EXIT_USAGE;
    }
    pfr_store *s;
    if ((rc = open_store(cli, &s)))
        return rc;
    pfr_ls *ls = NULL;
    char err[512] = "";
    int r = pfr_query_ls(s, &ls, err, sizeof(err));
    pfr_store_close(s);
    if (r < 0) {
        pfr_err("%s", err);
        return PFR_EXIT_ERROR;
    }
    output out;
    if ((rc = open_output(&o, &out)) == 0) {
        r = strcmp(fmt, "json") == 0 ? pfr_ls_render_json(out.f, ls)
                                     : pfr_ls_render_text(out.f, ls, (size_t)o.values);
        rc = close_output(&out, r);
    }
    pfr_ls_free(ls);
    return rc;
}

/* ---- pfr flame / export ---- */
static int write_pprof(FILE *f, pfr_store *s, const pfr_query_plan *p, int64_t from, int64_t to,
                       bool drop_labels)
{
    char err[1024] = "";
    pfr_profile *prof = NULL;
    pfr_query_stats st = {0};
    int rc = pfr_query_profile(s, p, from, to, drop_labels, &prof, &st, err, sizeof(err));
    report_corrupt(&st);
    if (rc < 0) {
        pfr_err("%s", err);
        return exit_for(rc);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    rc = pfr_profile_encode(prof, true, &buf, &len);
    pfr_profile_free(prof);
    if (rc < 0) {
        pfr_err("encoding pprof: %s", strerror(-rc));
        return PFR_EXIT_ERROR;
    }
    rc = fwrite(buf, 1, len, f) == len ? 0 : PFR_EXIT_ERROR;
    free(buf);
    return rc;
}

static int run_flame(pfr_cli *cli, cmd_opts *o, const char *fmt)
{
    static const char *const formats[] = {"folded", "pprof", "svg", "html", "json", "top", NULL};
    if (!one_of(fmt, formats)) {
        pfr_err("bad --format \"%s\": expected folded, pprof, svg, html, json or top", fmt);
        return PFR_EXIT_USAGE;
    }
    if (strcmp(fmt, "pprof") == 0 && !o->output && isatty(STDOUT_FILENO)) {
        pfr_err("pprof is binary: give -o FILE (or redirect stdout)");
        return PFR_EXIT_USAGE;
    }
    int64_t from, to;
    int rc = parse_range(cli, o, &from, &to);
    pfr_store *s = NULL;
    pfr_query_plan *plan = NULL;
    pfr_tree *t = NULL;
    if (rc || (rc = open_store(cli, &s)) || (rc = make_plan(s, o, &plan)))
        goto out;
    output out;
    if (strcmp(fmt, "pprof") == 0) {
        /* Query before creating the file so "no data" leaves no empty file behind. */
        char *tmp = NULL;
        size_t tmplen = 0;
        FILE *mem = open_memstream(&tmp, &tmplen);
        if (!mem) {
            rc = PFR_EXIT_ERROR;
            goto out;
        }
        rc = write_pprof(mem, s, plan, from, to, o->no_labels);
        fclose(mem);
        if (rc == 0 && (rc = open_output(o, &out)) == 0) {
            int w = fwrite(tmp, 1, tmplen, out.f) == tmplen ? 0 : -EIO;
            rc = close_output(&out, w);
        }
        free(tmp);
        goto out;
    }
    char err[1024] = "";
    pfr_query_stats st = {0};
    t = pfr_tree_new();
    int r = t ? pfr_query_tree(s, plan, from, to, t, 0, &st, err, sizeof(err)) : -ENOMEM;
    report_corrupt(&st);
    if (r < 0) {
        pfr_err("%s", err[0] ? err : strerror(-r));
        rc = exit_for(r);
        goto out;
    }
    pfr_tree_set_min_share(t, picture_share(fmt, o->min_width));
    /* folded and top read the stacks, not the nodes */
    pfr_tree_set_stacks_only(t, strcmp(fmt, "folded") == 0 || strcmp(fmt, "top") == 0);
    if ((r = pfr_tree_finish(t)) < 0) {
        pfr_err("building the flame graph: %s", strerror(-r));
        rc = PFR_EXIT_ERROR;
        goto out;
    }
    char title[512], sub[1024];
    describe(plan, from, to, t, &st, o->title, title, sizeof(title), sub, sizeof(sub));
    pfr_render_opts ro = {.title = title,
                          .subtitle = sub,
                          .unit = pfr_type_unit(plan->type),
                          .min_width = o->min_width,
                          .limit = (size_t)o->limit,
                          .width = (int)o->width,
                          .search = o->search};
    char *meta = NULL;
    if ((strcmp(fmt, "json") == 0 || strcmp(fmt, "html") == 0) &&
        pfr_query_meta_json(plan, from, to, 0, 0, &meta) < 0) {
        rc = PFR_EXIT_ERROR;
        goto out;
    }
    if ((rc = open_output(o, &out)) == 0) {
        if (strcmp(fmt, "folded") == 0)
            r = pfr_render_folded(out.f, t, &ro);
        else if (strcmp(fmt, "top") == 0)
            r = pfr_render_top(out.f, t, &ro);
        else if (strcmp(fmt, "json") == 0)
            r = pfr_render_json(out.f, t, &ro, meta);
        else if (strcmp(fmt, "svg") == 0)
            r = pfr_render_svg(out.f, t, &ro);
        else
            r = pfr_render_html(out.f, t, &ro, meta);
        rc = close_output(&out, r);
    }
    free(meta);
out:
    pfr_tree_free(t);
    pfr_query_plan_free(plan);
    if (s)
        pfr_store_close(s);
    return rc;
}

static const char *default_format(const cmd_opts *o, const char *fallback_pipe)
{
    if (o->format)
        return o->format;
    const char *f = format_from_output(o->output);
    if (f)
        return f;
    return isatty(STDOUT_FILENO) || o->output ? "top" : fallback_pipe;
}

int pfr_cmd_flame(pfr_cli *cli, int argc, char **argv)
{
    cmd_opts o;
    unsigned allowed = COMMON_OPTS | RANGE_OPTS | BIT(O_LIMIT) | BIT(O_WIDTH) | BIT(O_MIN_WIDTH) |
                       BIT(O_TITLE) | BIT(O_SEARCH) | BIT(O_NO_LABELS);
    int rc = parse_opts("flame", allowed, argc, argv, &o);
    if (!rc && o.help)
        help_flame(stdout);
    else if (!rc)
        rc = run_flame(cli, &o, default_format(&o, "folded"));
    opts_free(&o);
    return rc;
}

/* export --ring: a slice of the ring (export_ring.c). */
static int run_export_ring(pfr_cli *cli, const cmd_opts *o)
{
    if (o->output || o->no_labels) {
        pfr_err("%s is for pprof output: --ring writes a ring file",
                o->output ? "-o/--output" : "--no-labels");
        return PFR_EXIT_USAGE;
    }
    pfr_store_filter f = {
        .service = o->service, .type = o->type, .labels = o->labels, .nlabels = o->nlabels};
    pfr_store *s = NULL;
    int rc = parse_range(cli, o, &f.from_ns, &f.to_ns);
    if (!rc && !(rc = open_store(cli, &s)))
        rc = pfr_export_ring(s, o->ring, o->force, &f);
    if (s)
        pfr_store_close(s);
    return rc;
}

int pfr_cmd_export(pfr_cli *cli, int argc, char **argv)
{
    cmd_opts o;
    int rc = parse_opts("export",
                        BIT(O_OUTPUT) | BIT(O_HELP) | RANGE_OPTS | BIT(O_NO_LABELS) | BIT(O_RING) |
                            BIT(O_FORCE),
                        argc, argv, &o);
    if (!rc && o.help) {
        help_export(stdout);
    } else if (!rc && o.ring) {
        rc = run_export_ring(cli, &o);
    } else if (!rc && o.force) {
        pfr_err("--force goes with --ring FILE (see pfr export --help)");
        rc = PFR_EXIT_USAGE;
    } else if (!rc) {
        rc = run_flame(cli, &o, "pprof");
    }
    opts_free(&o);
    return rc;
}

/* ---- pfr timeline ---- */
int pfr_cmd_timeline(pfr_cli *cli, int argc, char **argv)
{
    cmd_opts o;
    int rc = parse_opts("timeline", COMMON_OPTS | RANGE_OPTS | BIT(O_STEP) | BIT(O_WIDTH), argc,
                        argv, &o);
    if (rc || o.help) {
        if (o.help)
            help_timeline(stdout);
        opts_free(&o);
        return rc;
    }
    const char *fmt = o.format ? o.format : "text";
    int64_t from, to, step = 0;
    char err[1024] = "";
    pfr_store *s = NULL;
    pfr_query_plan *plan = NULL;
    pfr_timeline *tl = NULL;
    if (strcmp(fmt, "text") != 0 && strcmp(fmt, "json") != 0) {
        pfr_err("bad --format \"%s\" for timeline: expected text or json", fmt);
        rc = PFR_EXIT_USAGE;
    } else if (o.step && pfr_duration_parse(o.step, &step, err, sizeof(err)) < 0) {
        pfr_err("--step: %s", err);
        rc = PFR_EXIT_USAGE;
    }
    if (rc || (rc = parse_range(cli, &o, &from, &to)) || (rc = open_store(cli, &s)) ||
        (rc = make_plan(s, &o, &plan)))
        goto out;
    pfr_query_stats st = {0};
    int r = pfr_query_timeline(s, plan, from, to, step, &tl, &st, err, sizeof(err));
    report_corrupt(&st);
    if (r < 0) {
        pfr_err("%s", err);
        rc = exit_for(r);
        goto out;
    }
    output out;
    if ((rc = open_output(&o, &out)) == 0) {
        r = strcmp(fmt, "json") == 0 ? pfr_timeline_render_json(out.f, tl, plan)
                                     : pfr_timeline_render_text(out.f, tl, plan, (int)o.width);
        rc = close_output(&out, r);
    }
out:
    pfr_timeline_free(tl);
    pfr_query_plan_free(plan);
    if (s)
        pfr_store_close(s);
    opts_free(&o);
    return rc;
}

/* ---- pfr diff ---- */
static int diff_ranges(pfr_cli *cli, const cmd_opts *o, int64_t r[4])
{
    int rc = parse_range(cli, o, &r[2], &r[3]);
    if (rc)
        return rc;
    if (!o->base_from && !o->base_to) {
        pfr_diff_default_base(r[2], r[3], &r[0], &r[1]);
        return 0;
    }
    if (!o->base_from) {
        pfr_err("--base-to needs --base-from");
        return PFR_EXIT_USAGE;
    }
    if ((rc = parse_time(cli, "--base-from", o->base_from, NULL, &r[0])))
        return rc;
    if (!o->base_to)
        r[1] = r[0] + (r[3] - r[2]);
    else if ((rc = parse_time(cli, "--base-to", o->base_to, NULL, &r[1])))
        return rc;
    if (r[1] <= r[0]) {
        pfr_err("empty baseline: --base-to is not after --base-from");
        return PFR_EXIT_USAGE;
    }
    return 0;
}

static int run_diff(pfr_cli *cli, cmd_opts *o, const char *fmt)
{
    static const char *const formats[] = {"svg", "html", "json", "top", NULL};
    if (!one_of(fmt, formats)) {
        pfr_err("bad --format \"%s\" for diff: expected svg, html, json or top", fmt);
        return PFR_EXIT_USAGE;
    }
    int64_t r[4]; /* base from, base to, comparison from, comparison to */
    int rc = diff_ranges(cli, o, r);
    pfr_store *s = NULL;
    pfr_query_plan *plan = NULL;
    pfr_tree *t = NULL;
    char *meta = NULL;
    if (rc || (rc = open_store(cli, &s)) || (rc = make_plan(s, o, &plan)))
        goto out;
    char err[1024] = "";
    pfr_query_stats st[2] = {{0}};
    t = pfr_tree_new();
    int e = t ? 0 : -ENOMEM;
    for (int side = 0; side < 2 && e == 0; side++) {
        e = pfr_query_tree(s, plan, r[2 * side], r[2 * side + 1], t, side, &st[side], err,
                           sizeof(err));
        report_corrupt(&st[side]);
        if (e < 0)
            pfr_err("%s: %s", side ? "comparison" : "baseline", err[0] ? err : strerror(-e));
    }
    if (e < 0) {
        rc = exit_for(e);
        goto out;
    }
    pfr_tree_set_min_share(t, picture_share(fmt, o->min_width));
    pfr_tree_set_stacks_only(t, strcmp(fmt, "top") == 0);
    if ((e = pfr_tree_finish(t)) < 0) {
        pfr_err("building the flame graph: %s", strerror(-e));
        rc = PFR_EXIT_ERROR;
        goto out;
    }
    char title[512], sub[1024], what[512], a[48], b[48], c[48], d[48];
    pfr_query_plan_describe(plan, what, sizeof(what));
    snprintf(title, sizeof(title), "%s", o->title ? o->title : "");
    if (!o->title)
        snprintf(title, sizeof(title), "Diff %s: %s", plan->type,
                 plan->service          ? plan->service
                 : plan->nservices == 1 ? plan->services[0]
                                        : "all services");
    snprintf(sub, sizeof(sub), "comparison %s to %s vs baseline %s to %s · %s · per second",
             pfr_time_format(r[2], false, a, sizeof(a)), pfr_time_format(r[3], false, b, sizeof(b)),
             pfr_time_format(r[0], false, c, sizeof(c)), pfr_time_format(r[1], false, d, sizeof(d)),
             what);
    pfr_render_opts ro = {.title = title,
                          .subtitle = sub,
                          .unit = pfr_type_unit(plan->type),
                          .diff = true,
                          .norm = {pfr_diff_norm(r[0], r[1]), pfr_diff_norm(r[2], r[3])},
                          .min_width = o->min_width,
                          .limit = (size_t)o->limit,
                          .width = (int)o->width,
                          .search = o->search};
    if (strcmp(fmt, "top") != 0 && strcmp(fmt, "svg") != 0 &&
        pfr_query_meta_json(plan, r[2], r[3], r[0], r[1], &meta) < 0) {
        rc = PFR_EXIT_ERROR;
        goto out;
    }
    output out;
    if ((rc = open_output(o, &out)) == 0) {
        if (strcmp(fmt, "top") == 0)
            e = pfr_render_top(out.f, t, &ro);
        else if (strcmp(fmt, "json") == 0)
            e = pfr_render_json(out.f, t, &ro, meta);
        else if (strcmp(fmt, "svg") == 0)
            e = pfr_render_svg(out.f, t, &ro);
        else
            e = pfr_render_html(out.f, t, &ro, meta);
        rc = close_output(&out, e);
    }
out:
    free(meta);
    pfr_tree_free(t);
    pfr_query_plan_free(plan);
    if (s)
        pfr_store_close(s);
    return rc;
}

int pfr_cmd_diff(pfr_cli *cli, int argc, char **argv)
{
    cmd_opts o;
    unsigned allowed = COMMON_OPTS | RANGE_OPTS | BIT(O_BASE_FROM) | BIT(O_BASE_TO) | BIT(O_LIMIT) |
                       BIT(O_WIDTH) | BIT(O_MIN_WIDTH) | BIT(O_TITLE) | BIT(O_SEARCH);
    int rc = parse_opts("diff", allowed, argc, argv, &o);
    if (!rc && o.help)
        help_diff(stdout);
    else if (!rc)
        rc = run_diff(cli, &o, default_format(&o, "top"));
    opts_free(&o);
    return rc;
}

/* ---- pfr serve ---- */
int pfr_cmd_serve(pfr_cli *cli, int argc, char **argv)
{
    cmd_opts o;
    unsigned allowed =
        BIT(O_HELP) | BIT(O_LISTEN) | BIT(O_TIMEOUT) | BIT(O_MAX_RANGE) | BIT(O_MAX_QUERIES);
    int rc = parse_opts("serve", allowed, argc, argv, &o);
    if (rc || o.help) {
        if (o.help)
            help_serve(stdout);
        opts_free(&o);
        return rc;
    }
    if (access(cli->store_path, F_OK) != 0)
        pfr_warn("no ring at %s yet: the page will say so until pfr-recorder creates it",
                 cli->store_path);
    /* Block the stop signals before the server's threads start, so they inherit the mask and
     * only sigwait() below sees them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    pfr_serve_config cfg = {.store_path = cli->store_path,
                            .listen = o.listen,
                            .limits = {.timeout_ns = o.timeout_ns,
                                       .max_range_ns = o.max_range_ns,
                                       .max_queries = (unsigned)o.max_queries}};
    pfr_serve *srv = NULL;
    char err[512] = "";
    int r = pfr_serve_start(&cfg, &srv, err, sizeof(err));
    opts_free(&o);
    if (r < 0) {
        pfr_err("pfr serve: %s", err);
        return r == -EINVAL ? PFR_EXIT_USAGE : PFR_EXIT_ERROR;
    }
    if (!pfr_serve_loopback(srv))
        pfr_warn("listening on %s, which is not a loopback address: anyone who can reach it can "
                 "read every profile in the ring (there is no authentication). The default "
                 "(" PFR_SERVE_DEFAULT_LISTEN ") and an SSH tunnel are safer.",
                 pfr_serve_url(srv));
    printf("pfr serve: %s (ring %s; Ctrl-C stops)\n", pfr_serve_url(srv), cli->store_path);
    fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    pfr_info("pfr serve: %s, stopping", strsignal(sig));
    pfr_serve_stop(srv);
    return PFR_EXIT_OK;
}
