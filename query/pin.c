/* `pfr pin`, `pfr pins`, `pfr unpin`: keep a range of the ring from eviction, list the pins,
 * release one (the store does the work: pfr_store_pin_add and friends, docs/store.md "Pins").
 * Pins are written through a short write transaction of their own beside a running recorder. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "pfr_log.h"
#include "pfr_query.h"
#include "pfr_time.h"

static int exit_for(int rc)
{
    return rc == -ENOENT ? PFR_EXIT_NO_DATA : rc == -EINVAL ? PFR_EXIT_USAGE : PFR_EXIT_ERROR;
}

/* "manual:alice (uid 1000)", and who ran sudo when it did. */
static void origin_of_user(char *buf, size_t len)
{
    uid_t uid = getuid();
    struct passwd *pw = getpwuid(uid);
    const char *sudo = getenv("SUDO_USER");
    if (sudo && sudo[0] && uid == 0)
        snprintf(buf, len, "manual:%s (uid %u, sudo by %.64s)", pw ? pw->pw_name : "?",
                 (unsigned)uid, sudo);
    else
        snprintf(buf, len, "manual:%s (uid %u)", pw ? pw->pw_name : "?", (unsigned)uid);
}

static int open_ring(pfr_cli *cli, pfr_store **s)
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

static void print_size(FILE *f, uint64_t b)
{
    if (b >= 1048576)
        fprintf(f, "%.1f MiB", (double)b / 1048576.0);
    else
        fprintf(f, "%.1f KiB", (double)b / 1024.0);
}

int pfr_cli_pin(pfr_cli *cli, const cmd_opts *o)
{
    if (o->type) {
        pfr_err("a pin keeps every profile type of its range: drop --type");
        return PFR_EXIT_USAGE;
    }
    if (!o->reason) {
        pfr_err("a pin needs a reason: --reason TEXT (what happened, a ticket)");
        return PFR_EXIT_USAGE;
    }
    char err[1024];
    int64_t from, to;
    if (pfr_time_parse(o->from ? o->from : "-1h", cli->now_ns, &from, err, sizeof(err)) < 0) {
        pfr_err("--from: %s", err);
        return PFR_EXIT_USAGE;
    }
    if (pfr_time_parse(o->to ? o->to : "now", cli->now_ns, &to, err, sizeof(err)) < 0) {
        pfr_err("--to: %s", err);
        return PFR_EXIT_USAGE;
    }
    /* the names as printed (pfr_names.h) back to the ring's bytes, as every query does */
    pfr_query q = {.service = o->service, .labels = o->labels.kv, .nlabels = o->labels.n};
    pfr_query_names names;
    if (pfr_query_read_names(&q, &names) < 0) {
        pfr_err("out of memory");
        return PFR_EXIT_ERROR;
    }
    char origin[256];
    origin_of_user(origin, sizeof(origin));
    pfr_pin_in in = {.from_ns = from,
                     .to_ns = to,
                     .service = names.q.service,
                     .labels = names.q.labels,
                     .nlabels = names.q.nlabels,
                     .reason = o->reason,
                     .origin = origin};
    pfr_store *s = NULL;
    pfr_pin_result r = {0};
    int rc = open_ring(cli, &s);
    if (!rc) {
        int e = pfr_store_pin_add(s, &in, &r, err, sizeof(err));
        if (e < 0) {
            pfr_err("cannot pin: %s", err[0] ? err : strerror(-e));
            rc = exit_for(e);
        }
        pfr_store_close(s);
    }
    pfr_query_names_free(&names);
    if (rc)
        return rc;
    char a[48], b[48];
    printf("pin %" PRId64 ": %s to %s%s%s, keeps ", r.id,
           pfr_time_format(from, false, a, sizeof(a)), pfr_time_format(to, false, b, sizeof(b)),
           o->service ? " of " : "", o->service ? o->service : "");
    print_size(stdout, r.bytes);
    printf(" now (pins: ");
    print_size(stdout, r.pinned_bytes);
    printf(" of ");
    print_size(stdout, r.budget);
    printf("; write lock held %.1f ms", (double)r.lock_ns / 1e6);
    if (r.lock_preempted)
        printf(", preempted %u times meanwhile", r.lock_preempted);
    printf(")\n");
    for (size_t i = 0; i < r.nreleased && i < PFR_PIN_RELEASED_MAX; i++)
        printf("released automatic pin %" PRId64 " for the pin budget\n", r.released[i]);
    return fflush(stdout) == 0 ? PFR_EXIT_OK : PFR_EXIT_ERROR;
}

/* ---- pfr pins ---- */
static json_t *pin_json(const pfr_pin_info *p)
{
    char a[48], b[48], c[48];
    json_t *labels = json_object();
    for (size_t i = 0; i < p->nlabels; i++)
        json_object_set_new(labels, p->labels[i].key, json_string(p->labels[i].value));
    return json_pack("{s:I, s:s, s:s, s:I, s:I, s:o, s:o, s:s, s:s, s:b, s:s, s:I}", "id",
                     (json_int_t)p->id, "from", pfr_time_format_rfc3339(p->from_ns, a, sizeof(a)),
                     "to", pfr_time_format_rfc3339(p->to_ns, b, sizeof(b)), "from_ns",
                     (json_int_t)p->from_ns, "to_ns", (json_int_t)p->to_ns, "service",
                     p->service ? json_string(p->service) : json_null(), "labels", labels, "reason",
                     p->reason, "origin", p->origin, "automatic", p->automatic, "created",
                     pfr_time_format_rfc3339(p->created_ns, c, sizeof(c)), "bytes",
                     (json_int_t)p->bytes);
}

static int text_cb(const pfr_pin_info *p, void *ctx)
{
    size_t *n = ctx;
    char a[48], b[48];
    printf("%-5" PRId64 " %s .. %s  %s", p->id, pfr_time_format(p->from_ns, false, a, sizeof(a)),
           pfr_time_format(p->to_ns, false, b, sizeof(b)), p->service ? p->service : "(all)");
    for (size_t i = 0; i < p->nlabels; i++)
        printf(" %s=%s", p->labels[i].key, p->labels[i].value);
    printf("  ");
    print_size(stdout, p->bytes);
    printf("  %s\n      %s\n", p->origin, p->reason);
    ++*n;
    return 0;
}

static int json_cb(const pfr_pin_info *p, void *ctx)
{
    json_t *j = pin_json(p);
    return j && json_array_append_new(ctx, j) == 0 ? 0 : -ENOMEM;
}

int pfr_cli_pins(pfr_cli *cli, const cmd_opts *o)
{
    bool json = o->format && strcmp(o->format, "json") == 0;
    if (o->format && !json && strcmp(o->format, "text") != 0) {
        pfr_err("--format %s: pfr pins writes text or json", o->format);
        return PFR_EXIT_USAGE;
    }
    pfr_store *s = NULL;
    int rc = open_ring(cli, &s);
    if (rc)
        return rc;
    size_t n = 0;
    json_t *arr = json ? json_array() : NULL;
    int e =
        json ? (arr ? pfr_store_pins(s, json_cb, arr) : -ENOMEM) : pfr_store_pins(s, text_cb, &n);
    pfr_store_stats st;
    if (e == 0 && !json && pfr_store_stats_quick(s, &st) == 0 && n == 0)
        printf("no pins (pfr pin --from T --to T --reason TEXT makes one)\n");
    pfr_store_close(s);
    if (e < 0) {
        json_decref(arr);
        pfr_err("cannot list the pins: %s", strerror(-e));
        return PFR_EXIT_ERROR;
    }
    if (json) {
        json_dumpf(arr, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(arr);
    }
    return fflush(stdout) == 0 ? PFR_EXIT_OK : PFR_EXIT_ERROR;
}

/* ---- pfr unpin ID ---- */
int pfr_cli_unpin(pfr_cli *cli, const cmd_opts *o)
{
    char *end = NULL;
    long long id = o->operand ? strtoll(o->operand, &end, 10) : 0;
    if (!o->operand || !*o->operand || *end || id <= 0) {
        pfr_err("pfr unpin ID: the pin's number as pfr pins shows it");
        return PFR_EXIT_USAGE;
    }
    pfr_store *s = NULL;
    int rc = open_ring(cli, &s);
    if (rc)
        return rc;
    char err[512] = "";
    int e = pfr_store_pin_remove(s, id, err, sizeof(err));
    pfr_store_close(s);
    if (e < 0) {
        pfr_err("cannot unpin: %s", err[0] ? err : strerror(-e));
        return exit_for(e);
    }
    printf("released pin %lld\n", id);
    return fflush(stdout) == 0 ? PFR_EXIT_OK : PFR_EXIT_ERROR;
}

/* ---- export --pin ID / --pins: the filter that carries a pin's range ---- */
struct find_pin {
    int64_t id; /* 0: every pin (the span of all) */
    pfr_store_filter *f;
    pfr_cli_labels *labels; /* copies of the pin's labels */
    char **service;
    size_t found;
};

static int find_cb(const pfr_pin_info *p, void *ctx)
{
    struct find_pin *x = ctx;
    if (x->id && p->id != x->id)
        return 0;
    if (x->id) {
        x->f->from_ns = p->from_ns;
        x->f->to_ns = p->to_ns;
        if (p->service && !(*x->service = strdup(p->service)))
            return -ENOMEM;
        for (size_t i = 0; i < p->nlabels && i < PFR_CLI_MAX_LABELS; i++) {
            size_t kl = strlen(p->labels[i].key), vl = strlen(p->labels[i].value);
            char *t = malloc(kl + vl + 2);
            if (!t)
                return -ENOMEM;
            memcpy(t, p->labels[i].key, kl + 1);
            memcpy(t + kl + 1, p->labels[i].value, vl + 1);
            x->labels->text[x->labels->n] = t;
            x->labels->kv[x->labels->n++] = (pfr_kv){t, t + kl + 1};
        }
    } else {
        if (!x->found || p->from_ns < x->f->from_ns)
            x->f->from_ns = p->from_ns;
        if (!x->found || p->to_ns > x->f->to_ns)
            x->f->to_ns = p->to_ns;
    }
    x->found++;
    return 0;
}

int pfr_cli_export_pins(pfr_cli *cli, const cmd_opts *o)
{
    bool all = o->all_pins;
    char *end = NULL;
    long long id = o->pin ? strtoll(o->pin, &end, 10) : 0;
    if (o->pin && (!*o->pin || *end || id <= 0)) {
        pfr_err("--pin %s: the pin's number as pfr pins shows it", o->pin);
        return PFR_EXIT_USAGE;
    }
    /* --from/--to have defaults: the pin's range replaces them */
    if ((o->pin && all) || !o->ring || o->service || o->labels.n || o->type) {
        pfr_err("--pin ID and --pins go with --ring FILE, without --service, --label or --type: "
                "the pin gives the range and the selection");
        return PFR_EXIT_USAGE;
    }
    pfr_store *s = NULL;
    int rc = open_ring(cli, &s);
    if (rc)
        return rc;
    pfr_store_filter f = {0};
    pfr_cli_labels labels = {0};
    char *service = NULL;
    struct find_pin x = {.id = all ? 0 : id, .f = &f, .labels = &labels, .service = &service};
    int e = pfr_store_pins(s, find_cb, &x);
    if (e < 0) {
        pfr_err("cannot read the pins: %s", strerror(-e));
        rc = PFR_EXIT_ERROR;
    } else if (!x.found) {
        if (all)
            pfr_err("no pins in the ring (pfr pins)");
        else
            pfr_err("no pin %lld (pfr pins lists them)", id);
        rc = PFR_EXIT_NO_DATA;
    } else {
        f.service = service;
        f.labels = labels.kv;
        f.nlabels = labels.n;
        /* the ring's own names already: no pfr_names mapping */
        rc = pfr_export_ring_filter(s, o->ring, o->force, &f);
    }
    pfr_store_close(s);
    free(service);
    for (size_t i = 0; i < labels.n; i++)
        free(labels.text[i]);
    return rc;
}
