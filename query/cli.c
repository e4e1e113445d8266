/* The commands of `pfr`: parse options, call the query library, write the output. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "out_file.h"
#include "cli_opts.h"
#include "pfr_diff.h"
#include "pfr_formats.h"
#include "pfr_log.h"
#include "pfr_query.h"
#include "pfr_render.h"
#include "pfr_serve.h"
#include "pfr_time.h"

/* ---- output formats: which a command renders (pfr_formats.h) ---- */
/* How a command picks its format when --format is not given. */
typedef struct cmd_format {
    const char *cmd;     /* for messages */
    unsigned inputs;     /* enum pfr_output_input: what the command renders */
    bool infer;          /* from the -o extension */
    const char *on_tty;  /* the default on a terminal or with -o */
    const char *in_pipe; /* the default in a pipe */
} cmd_format;

static const cmd_format ls_formats = {"ls", PFR_OUTPUT_LS, false, "text", "text"};
static const cmd_format flame_formats = {"flame", PFR_OUTPUT_TREE | PFR_OUTPUT_PROFILE, true, "top",
                                         "folded"};
static const cmd_format export_formats = {"export", PFR_OUTPUT_PROFILE, false, "pprof", "pprof"};
static const cmd_format timeline_formats = {"timeline", PFR_OUTPUT_TIMELINE, false, "text", "text"};
static const cmd_format diff_formats = {"diff", PFR_OUTPUT_DIFF, true, "top", "top"};

/* --help's list of formats for c, and how its default is chosen. */
static void help_format(FILE *f, const cmd_format *c)
{
    fputs("\nFORMAT is one of:\n", f);
    pfr_output_format_help(f, c->inputs, "  ", c->infer);
    fprintf(f, "Default: %s%s", c->infer ? "from the -o extension, else " : "", c->on_tty);
    if (strcmp(c->on_tty, c->in_pipe) != 0)
        fprintf(f, " on a terminal, %s in a pipe", c->in_pipe);
    fputc('\n', f);
}

/* ---- the commands' options (cli_opts.c) and --help ---- */
/* A command: its option groups and what its --help says around them. */
typedef struct cmd_spec {
    const char *name;
    const char *usage;                   /* --help's head: usage lines and what the command does */
    const pfr_settings_group *groups[6]; /* NULL-terminated */
    const cmd_format *formats;           /* what it renders (and --format's list in --help) */
    bool times;                          /* --help explains TIME */
    const char *tail;                    /* --help's end, or NULL */
    bool operand;                        /* takes one operand (o->operand) */
} cmd_spec;

static const cmd_spec flame_cmd = {
    "flame",
    "Usage: pfr [--store PATH] flame [options]\n"
    "Merge the profiles of a time range into one flame graph.\n"
    "Zoom into a spike found with `pfr timeline` by giving its sub-range.\n",
    {&pfr_cli_range, &pfr_cli_format, &pfr_cli_picture, &pfr_cli_flame, &pfr_cli_output},
    &flame_formats,
    true,
    NULL,
    false};

static const cmd_spec export_cmd = {
    "export",
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
    "every profile type goes in; --label takes profile labels only.\n",
    {&pfr_cli_range, &pfr_cli_export, &pfr_cli_output},
    &export_formats,
    true,
    NULL,
    false};

static const cmd_spec timeline_cmd = {
    "timeline",
    "Usage: pfr [--store PATH] timeline [options]\n"
    "The value of a profile type per interval of a range (CPU time for eBPF profiles),\n"
    "as a bar chart in the terminal or as json, to find the spike to zoom into.\n",
    {&pfr_cli_range, &pfr_cli_timeline, &pfr_cli_format, &pfr_cli_output},
    &timeline_formats,
    true,
    NULL,
    false};

static const cmd_spec diff_cmd = {
    "diff",
    "Usage: pfr [--store PATH] diff [options]\n"
    "Compare a range (--from/--to) with a baseline range. Values are normalised per\n"
    "second of each range, so ranges of different lengths compare fairly. In the\n"
    "pictures a frame is red when it takes more in the comparison than in the\n"
    "baseline and green when it takes less; the shade grows with the change.\n",
    {&pfr_cli_range, &pfr_cli_diff, &pfr_cli_format, &pfr_cli_picture, &pfr_cli_output},
    &diff_formats,
    true,
    NULL,
    false};

static const cmd_spec ls_cmd = {
    "ls",
    "Usage: pfr [--store PATH] ls [options]\n"
    "What the ring holds: services, profile types, profile label values and time\n"
    "coverage (first and last chunk, gaps).\n",
    {&pfr_cli_format, &pfr_cli_ls, &pfr_cli_output},
    &ls_formats,
    false,
    NULL,
    false};

static const cmd_spec serve_cmd = {
    "serve",
    "Usage: pfr [--store PATH] serve [options]\n"
    "Serve the profiling page of the ring to a browser: pick service, type and labels,\n"
    "a chart of the profile over time (drag to select a range, then Zoom for its flame\n"
    "graph or Compare for what changed against the range before it), a flame graph and\n"
    "a top-functions table. Everything is served by pfr itself (no external URL), so it\n"
    "works offline; from a laptop use an SSH tunnel:\n"
    "  ssh -L 8123:127.0.0.1:8123 HOST   then open http://localhost:8123/\n"
    "The ring is read-only and re-read on every request. Stop with Ctrl-C.\n",
    {&pfr_cli_serve},
    NULL,
    false,
    "The ring is the global --store PATH (default: $PFR_STORE, else " PFR_STORE_DEFAULT_PATH ").\n"
    "It prints the URL to open on stdout once listening. The JSON API (/api/ls,\n"
    "/api/timeline, /api/flame, /api/diff, /api/labels) is described in docs/serve.md.\n",
    false};

static const cmd_spec pin_cmd = {
    "pin",
    "Usage: pfr [--store PATH] pin --from TIME --to TIME [--service S] [--label K=V]\n"
    "                              --reason TEXT\n"
    "Keep a range of the ring from eviction (an incident, before the ring overwrites it):\n"
    "its profiles stay at full resolution until `pfr unpin ID`, while all pins keep at\n"
    "most the recorder's pin_max_bytes (a quarter of the ring by default; past it the\n"
    "oldest automatic pins are released first, manual ones never for a new pin). Works\n"
    "while the recorder runs (a short write beside it) and while it is stopped; needs\n"
    "write access to the ring. Carry a pin off the host with\n"
    "`pfr export --ring FILE --pin ID`.\n",
    {&pfr_cli_range, &pfr_cli_pin_group},
    NULL,
    true,
    NULL,
    false};

static const cmd_spec pins_cmd = {
    "pins",
    "Usage: pfr [--store PATH] pins [--format text|json]\n"
    "The pins of the ring: id, range, selection, the bytes they keep, who or what made\n"
    "them (manual:USER, or trigger:KIND for the recorder's own) and why.\n",
    {&pfr_cli_pins_format},
    NULL,
    false,
    NULL,
    false};

static const cmd_spec unpin_cmd = {
    "unpin",
    "Usage: pfr [--store PATH] unpin ID\n"
    "Release pin ID (pfr pins): its range is evicted again in turn, oldest first.\n",
    {NULL},
    NULL,
    false,
    NULL,
    true};

static bool has_group(const cmd_spec *c, const pfr_settings_group *g)
{
    for (size_t i = 0; c->groups[i]; i++)
        if (c->groups[i] == g)
            return true;
    return false;
}

static void help_cmd(const cmd_spec *c, const pfr_settings *s, FILE *f)
{
    pfr_settings_write_help(s, f);
    if (has_group(c, &pfr_cli_format))
        help_format(f, c->formats);
    if (c->times)
        fprintf(f, "\nTIME is one of:\n%s", pfr_time_forms);
    if (c->tail)
        fprintf(f, "\n%s", c->tail);
}

/* Parse a command's options into o (bound to its groups; release with cmd_done).
 * Returns true to run the command, else false with the exit code in *rc (after --help or an
 * error). */
static bool cmd_parse(const cmd_spec *c, int argc, char **argv, cmd_opts *o, pfr_settings **sp,
                      int *rc)
{
    memset(o, 0, sizeof(*o));
    char err[1024] = "";
    pfr_settings *s = *sp = pfr_settings_new(c->name, NULL, c->usage);
    int e = s ? 0 : -ENOMEM;
    if (s)
        pfr_settings_set_no_config(s, true);
    for (size_t i = 0; e == 0 && c->groups[i]; i++)
        e = pfr_settings_bind(s, c->groups[i], o, err, sizeof(err));
    pfr_settings_args a;
    *rc = PFR_EXIT_USAGE;
    if (e < 0) {
        pfr_err("pfr %s: %s", c->name, err[0] ? err : strerror(-e));
        *rc = PFR_EXIT_ERROR;
    } else if (pfr_settings_load_args(s, argc, argv, &a, err, sizeof(err)) < 0) {
        pfr_err("pfr %s: %s", c->name, err);
    } else if (a.help || a.print_settings || a.version) {
        if (a.help)
            help_cmd(c, s, stdout);
        else if (a.print_settings)
            pfr_settings_write(s, a.print_settings, stdout);
        else
            printf("pfr %s\n", PFR_VERSION);
        *rc = fflush(stdout) == 0 ? PFR_EXIT_OK : PFR_EXIT_ERROR;
    } else if (a.config) {
        pfr_err("pfr reads no config file: give its options as flags (see pfr %s --help)", c->name);
    } else if (c->operand && a.first_operand == argc - 1) {
        o->operand = argv[a.first_operand];
        return true;
    } else if (a.first_operand < argc) {
        pfr_err("unexpected argument \"%s\" (see pfr %s --help)", argv[a.first_operand], c->name);
    } else {
        return true;
    }
    return false;
}

static void cmd_done(const cmd_spec *c, cmd_opts *o, pfr_settings *s)
{
    for (size_t i = 0; c->groups[i]; i++)
        pfr_settings_release(c->groups[i], o);
    pfr_settings_free(s);
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
        .service = o->service, .type = o->type, .labels = o->labels.kv, .nlabels = o->labels.n};
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

static void report_corrupt(const pfr_query_stats *st)
{
    if (st->corrupt)
        pfr_warn("%llu corrupt chunks skipped", (unsigned long long)st->corrupt);
}

/* ---- output formats (pfr_formats.h) ---- */
static const pfr_output_format *pick_format(const cmd_format *c, const cmd_opts *o)
{
    const pfr_output_format *f;
    if (o->format) {
        if (!(f = pfr_output_format_find(o->format, c->inputs))) {
            char names[256];
            pfr_err("bad --format \"%s\" for pfr %s: expected %s", o->format, c->cmd,
                    pfr_output_format_names(c->inputs, names, sizeof(names)));
        }
    } else if (!c->infer || !(f = pfr_output_format_for_path(o->output, c->inputs))) {
        f = pfr_output_format_find(isatty(STDOUT_FILENO) || o->output ? c->on_tty : c->in_pipe,
                                   c->inputs);
    }
    if (f && (f->flags & PFR_OUTPUT_BINARY) && !o->output && isatty(STDOUT_FILENO)) {
        pfr_err("%s is binary: give -o FILE (or redirect stdout)", f->name);
        return NULL;
    }
    return f;
}

/* Render d in fmt to -o FILE or stdout. */
static int emit(const cmd_opts *o, const pfr_output_format *fmt, const pfr_output_data *d)
{
    output out;
    int rc = open_output(o, &out);
    if (rc == 0)
        rc = close_output(&out, fmt->render(out.f, d));
    return rc;
}

/* Prune and finish a queried tree as fmt draws it. */
static int finish_tree(const cmd_opts *o, const pfr_output_format *fmt, pfr_tree *t)
{
    pfr_tree_set_min_share(t, pfr_output_format_share(fmt, o->min_width));
    pfr_tree_set_stacks_only(t, (fmt->flags & PFR_OUTPUT_STACKS) != 0);
    int e = pfr_tree_finish(t);
    if (e < 0) {
        pfr_err("building the flame graph: %s", strerror(-e));
        return PFR_EXIT_ERROR;
    }
    return 0;
}

/* What the renderers take from the options (title and subtitle made by the command). */
static pfr_render_opts render_opts(const cmd_opts *o, const pfr_query_plan *plan, const char *title,
                                   const char *sub)
{
    return (pfr_render_opts){.title = title,
                             .subtitle = sub,
                             .unit = pfr_type_unit(plan->type),
                             .min_width = o->min_width,
                             .limit = o->limit,
                             .width = (int)o->width,
                             .search = o->search};
}

/* Render a finished tree; r: comparison from, to, baseline from, to (0 unless a diff). */
static int emit_tree(const cmd_opts *o, const pfr_output_format *fmt, const pfr_tree *t,
                     const pfr_render_opts *ro, const pfr_query_plan *plan, const int64_t r[4])
{
    pfr_output_data d = {
        .input = ro->diff ? PFR_OUTPUT_DIFF : PFR_OUTPUT_TREE, .tree = t, .opts = ro};
    char *meta = NULL;
    if ((fmt->flags & PFR_OUTPUT_META) &&
        pfr_query_meta_json(plan, r[0], r[1], r[2], r[3], &meta) < 0)
        return PFR_EXIT_ERROR;
    d.meta = meta;
    int rc = emit(o, fmt, &d);
    free(meta);
    return rc;
}

/* ---- pfr ls ---- */

static int run_ls(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    const pfr_output_format *fmt = pick_format(c->formats, o);
    if (!fmt)
        return PFR_EXIT_USAGE;
    pfr_store *s;
    int rc;
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
    pfr_output_data d = {.input = PFR_OUTPUT_LS, .ls = ls, .values = o->values};
    rc = emit(o, fmt, &d);
    pfr_ls_free(ls);
    return rc;
}

/* ---- pfr flame / export ---- */

/* A format of a pprof profile: the profile is queried before the output is created, so "no
 * data" leaves no empty file behind. */
static int flame_profile(pfr_store *s, const pfr_query_plan *p, const cmd_opts *o,
                         const pfr_output_format *fmt, int64_t from, int64_t to)
{
    char err[1024] = "";
    pfr_profile *prof = NULL;
    pfr_query_stats st = {0};
    int rc = pfr_query_profile(s, p, from, to, o->no_labels, &prof, &st, err, sizeof(err));
    report_corrupt(&st);
    if (rc < 0) {
        pfr_err("%s", err[0] ? err : strerror(-rc));
        return exit_for(rc);
    }
    pfr_output_data d = {.input = PFR_OUTPUT_PROFILE, .profile = prof};
    rc = emit(o, fmt, &d);
    pfr_profile_free(prof);
    return rc;
}

static int flame_tree(pfr_store *s, const pfr_query_plan *plan, const cmd_opts *o,
                      const pfr_output_format *fmt, int64_t from, int64_t to)
{
    char err[1024] = "";
    pfr_query_stats st = {0};
    pfr_tree *t = pfr_tree_new();
    int r = t ? pfr_query_tree(s, plan, from, to, t, 0, &st, err, sizeof(err)) : -ENOMEM;
    report_corrupt(&st);
    int rc;
    if (r < 0) {
        pfr_err("%s", err[0] ? err : strerror(-r));
        rc = exit_for(r);
    } else if (!(rc = finish_tree(o, fmt, t))) {
        char title[512], sub[1024];
        describe(plan, from, to, t, &st, o->title, title, sizeof(title), sub, sizeof(sub));
        pfr_render_opts ro = render_opts(o, plan, title, sub);
        rc = emit_tree(o, fmt, t, &ro, plan, (const int64_t[4]){from, to, 0, 0});
    }
    pfr_tree_free(t);
    return rc;
}

static int run_flame(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    const pfr_output_format *fmt = pick_format(c->formats, o);
    if (!fmt)
        return PFR_EXIT_USAGE;
    int64_t from, to;
    int rc = parse_range(cli, o, &from, &to);
    pfr_store *s = NULL;
    pfr_query_plan *plan = NULL;
    if (!rc && !(rc = open_store(cli, &s)) && !(rc = make_plan(s, o, &plan)))
        rc = (fmt->inputs & PFR_OUTPUT_TREE) ? flame_tree(s, plan, o, fmt, from, to)
                                             : flame_profile(s, plan, o, fmt, from, to);
    pfr_query_plan_free(plan);
    if (s)
        pfr_store_close(s);
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
        .service = o->service, .type = o->type, .labels = o->labels.kv, .nlabels = o->labels.n};
    pfr_store *s = NULL;
    int rc = parse_range(cli, o, &f.from_ns, &f.to_ns);
    if (!rc && !(rc = open_store(cli, &s)))
        rc = pfr_export_ring(s, o->ring, o->force, &f);
    if (s)
        pfr_store_close(s);
    return rc;
}

static int run_export(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    if (o->pin || o->all_pins)
        return pfr_cli_export_pins(cli, o);
    if (o->ring)
        return run_export_ring(cli, o);
    if (o->force) {
        pfr_err("--force goes with --ring FILE (see pfr export --help)");
        return PFR_EXIT_USAGE;
    }
    return run_flame(cli, o, c);
}

/* ---- pfr timeline ---- */

static int run_timeline(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    const pfr_output_format *fmt = pick_format(c->formats, o);
    int64_t from, to;
    char err[1024] = "";
    int rc = fmt ? 0 : PFR_EXIT_USAGE;
    pfr_store *s = NULL;
    pfr_query_plan *plan = NULL;
    pfr_timeline *tl = NULL;
    if (rc || (rc = parse_range(cli, o, &from, &to)) || (rc = open_store(cli, &s)) ||
        (rc = make_plan(s, o, &plan)))
        goto out;
    pfr_query_stats st = {0};
    int r = pfr_query_timeline(s, plan, from, to, o->step_ns, &tl, &st, err, sizeof(err));
    report_corrupt(&st);
    if (r < 0) {
        pfr_err("%s", err);
        rc = exit_for(r);
        goto out;
    }
    pfr_output_data d = {
        .input = PFR_OUTPUT_TIMELINE, .timeline = tl, .plan = plan, .width = (int)o->width};
    rc = emit(o, fmt, &d);
out:
    pfr_timeline_free(tl);
    pfr_query_plan_free(plan);
    if (s)
        pfr_store_close(s);
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

/* Title and subtitle of a diff: the two ranges and the filters. */
static void describe_diff(const pfr_query_plan *plan, const int64_t r[4], const char *user_title,
                          char *title, size_t tlen, char *sub, size_t slen)
{
    char what[512], a[48], b[48], c[48], d[48];
    pfr_query_plan_describe(plan, what, sizeof(what));
    if (user_title)
        snprintf(title, tlen, "%s", user_title);
    else
        snprintf(title, tlen, "Diff %s: %s", plan->type,
                 plan->service          ? plan->service
                 : plan->nservices == 1 ? plan->services[0]
                                        : "all services");
    snprintf(sub, slen, "comparison %s to %s vs baseline %s to %s · %s · per second",
             pfr_time_format(r[2], false, a, sizeof(a)), pfr_time_format(r[3], false, b, sizeof(b)),
             pfr_time_format(r[0], false, c, sizeof(c)), pfr_time_format(r[1], false, d, sizeof(d)),
             what);
}

/* Both sides into one tree: baseline (side 0) and comparison (side 1). */
static int diff_tree(pfr_store *s, const pfr_query_plan *plan, const int64_t r[4], pfr_tree *t)
{
    char err[1024] = "";
    pfr_query_stats st[2] = {{0}};
    int e = 0;
    for (int side = 0; side < 2 && e == 0; side++) {
        e = pfr_query_tree(s, plan, r[2 * side], r[2 * side + 1], t, side, &st[side], err,
                           sizeof(err));
        report_corrupt(&st[side]);
        if (e < 0)
            pfr_err("%s: %s", side ? "comparison" : "baseline", err[0] ? err : strerror(-e));
    }
    return e < 0 ? exit_for(e) : 0;
}

static int run_diff(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    const pfr_output_format *fmt = pick_format(c->formats, o);
    if (!fmt)
        return PFR_EXIT_USAGE;
    int64_t r[4]; /* base from, base to, comparison from, comparison to */
    int rc = diff_ranges(cli, o, r);
    pfr_store *s = NULL;
    pfr_query_plan *plan = NULL;
    pfr_tree *t = NULL;
    if (rc || (rc = open_store(cli, &s)) || (rc = make_plan(s, o, &plan)))
        goto out;
    if (!(t = pfr_tree_new())) {
        rc = PFR_EXIT_ERROR;
        goto out;
    }
    if ((rc = diff_tree(s, plan, r, t)) || (rc = finish_tree(o, fmt, t)))
        goto out;
    char title[512], sub[1024];
    describe_diff(plan, r, o->title, title, sizeof(title), sub, sizeof(sub));
    pfr_render_opts ro = render_opts(o, plan, title, sub);
    ro.diff = true;
    ro.norm[0] = pfr_diff_norm(r[0], r[1]);
    ro.norm[1] = pfr_diff_norm(r[2], r[3]);
    rc = emit_tree(o, fmt, t, &ro, plan, (const int64_t[4]){r[2], r[3], r[0], r[1]});
out:
    pfr_tree_free(t);
    pfr_query_plan_free(plan);
    if (s)
        pfr_store_close(s);
    return rc;
}

/* ---- pfr serve ---- */
static int run_serve(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    (void)c;
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
                            .listen = o->listen,
                            .limits = {.timeout_ns = o->timeout_ns,
                                       .max_range_ns = o->max_range_ns,
                                       .max_queries = o->max_queries}};
    pfr_serve *srv = NULL;
    char err[512] = "";
    int r = pfr_serve_start(&cfg, &srv, err, sizeof(err));
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
    uint64_t cut, evicted, refused;
    pfr_serve_conn_stats(srv, &cut, &evicted, &refused);
    pfr_info("pfr serve: %s, stopping; connections shut down: %" PRIu64 " past their deadline, "
             "%" PRIu64 " idle ones for room, %" PRIu64 " refused (no room, none idle)",
             strsignal(sig), cut, evicted, refused);
    pfr_serve_stop(srv);
    return PFR_EXIT_OK;
}

/* ---- the commands ---- */
typedef int (*run_fn)(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c);

static int run_pin(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    (void)c;
    return pfr_cli_pin(cli, o);
}

static int run_pins(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    (void)c;
    return pfr_cli_pins(cli, o);
}

static int run_unpin(pfr_cli *cli, const cmd_opts *o, const cmd_spec *c)
{
    (void)c;
    return pfr_cli_unpin(cli, o);
}

static int run_cmd(const cmd_spec *c, run_fn run, pfr_cli *cli, int argc, char **argv)
{
    cmd_opts o;
    pfr_settings *s = NULL;
    int rc;
    if (cmd_parse(c, argc, argv, &o, &s, &rc))
        rc = run(cli, &o, c);
    cmd_done(c, &o, s);
    return rc;
}

/* The commands, in the order of `pfr --help`. */
static const struct {
    const cmd_spec *spec;
    run_fn run;
} commands[] = {
    {&ls_cmd, run_ls},     {&flame_cmd, run_flame},   {&timeline_cmd, run_timeline},
    {&diff_cmd, run_diff}, {&export_cmd, run_export}, {&serve_cmd, run_serve},
    {&pin_cmd, run_pin},   {&pins_cmd, run_pins},     {&unpin_cmd, run_unpin},
};

int pfr_cli_run(pfr_cli *cli, int argc, char **argv)
{
    for (size_t i = 0; argc > 0 && i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].spec->name, argv[0]) == 0)
            return run_cmd(commands[i].spec, commands[i].run, cli, argc, argv);
    pfr_err("unknown command \"%s\" (see pfr --help)", argc > 0 ? argv[0] : "");
    return PFR_EXIT_USAGE;
}
