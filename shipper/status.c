#include "status.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "http.h"
#include "fmt.h"
#include "pfr_clock.h"
#include "pfr_time.h"
#include "pfr_store.h"
#include "sinks/sinks.h"
#include "state.h"

struct backlog {
    uint64_t chunks, bytes;
    int64_t oldest_start, newest_end;
};

static int backlog_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p;
    struct backlog *b = ctx;
    if (!b->chunks)
        b->oldest_start = m->start_ns;
    b->chunks++;
    b->bytes += m->stored_bytes;
    b->newest_end = m->end_ns;
    return 0;
}

struct sinkrow {
    pfr_sink_state st;
    bool in_state;
    const pfr_sink_conf *conf;
    uint64_t rejected;
    char rejected_why[512];
    struct backlog bl;
    bool bl_known;
};

struct collect {
    struct sinkrow *rows;
    size_t n;
};

static int collect_cb(const pfr_sink_state *s, void *ctx)
{
    struct collect *c = ctx;
    for (size_t i = 0; i < c->n; i++) {
        if (!strcmp(c->rows[i].st.name, s->name)) {
            c->rows[i].st = *s;
            c->rows[i].in_state = true;
            return 0;
        }
    }
    struct sinkrow *r = realloc(c->rows, (c->n + 1) * sizeof(*r));
    if (!r)
        return -ENOMEM;
    c->rows = r;
    memset(&r[c->n], 0, sizeof(r[c->n]));
    r[c->n].st = *s;
    r[c->n].in_state = true;
    c->n++;
    return 0;
}

static const char *ago(int64_t ns, int64_t now, char *out, size_t cap)
{
    char t[40], d[32];
    if (!ns) {
        snprintf(out, cap, "never");
        return out;
    }
    snprintf(out, cap, "%s (%s ago)", pfr_time_format(ns, true, t, sizeof(t)),
             pfr_fmt_duration((now - ns) / 1000000, d, sizeof(d)));
    return out;
}

/* The kind's line about a configured sink (ClickHouse: its database), if it has one. */
static bool detail(const struct sinkrow *r, const char **label, const char **value)
{
    *label = *value = NULL;
    if (r->conf && r->conf->kind->status_detail)
        r->conf->kind->status_detail(r->conf, label, value);
    return *label && *value;
}

static void print_text(FILE *o, const struct sinkrow *r, const pfr_store_stats *rs, int64_t now)
{
    char a[96], b[32], url[256] = "";
    if (r->conf)
        pfr_url_redact(r->conf->url, url, sizeof(url));
    fprintf(o, "sink %s (%s)%s%s%s\n", r->st.name, r->conf ? r->conf->kind->name : r->st.kind,
            url[0] ? " " : "", url, r->conf ? "" : "  [not in the configuration]");
    const char *label, *value;
    if (detail(r, &label, &value))
        fprintf(o, "  %-13s %s\n", label, value); /* ClickHouse's database: coroot_<project> */
    if (r->conf && r->conf->service_prefix && r->conf->service_prefix[0])
        fprintf(o, "  services as   %s<service>\n", r->conf->service_prefix);
    fprintf(o, "  cursor        chunk %" PRId64 "\n", r->st.cursor);
    if (r->bl_known) {
        char span[32] = "-";
        if (r->bl.chunks)
            pfr_fmt_duration((now - r->bl.oldest_start) / 1000000, span, sizeof(span));
        fprintf(o, "  backlog       %" PRIu64 " chunks, %s, %s\n", r->bl.chunks,
                pfr_fmt_bytes(r->bl.bytes, b, sizeof(b)), span);
    } else {
        fprintf(o, "  backlog       unknown (ring not readable)\n");
    }
    fprintf(o, "  last success  %s\n", ago(r->st.last_success_ns, now, a, sizeof(a)));
    if (r->st.last_error_ns) {
        fprintf(o, "  last error    %s: %s\n", ago(r->st.last_error_ns, now, a, sizeof(a)),
                r->st.last_error);
        if (r->st.attempts) {
            char d[32] = "now";
            if (r->st.next_attempt_ns > now)
                pfr_fmt_duration((r->st.next_attempt_ns - now) / 1000000, d, sizeof(d));
            fprintf(o, "  retrying      %u failed attempts, next in %s\n", r->st.attempts, d);
        }
    } else {
        fprintf(o, "  last error    none\n");
    }
    fprintf(o,
            "  delivered     %" PRIu64 " chunks, %s (%" PRIu64 " retries, %" PRIu64
            " of them answers about the sink: nothing set aside)\n",
            r->st.delivered_chunks, pfr_fmt_bytes(r->st.delivered_bytes, b, sizeof(b)),
            r->st.retries, r->st.sink_failures);
    fprintf(o, "  set aside     %" PRIu64 " chunks%s%s\n", r->rejected,
            r->rejected ? " (pfr-shipper --retry-rejected); last: " : "",
            r->rejected ? r->rejected_why : "");
    fprintf(o,
            "  lost          %" PRIu64 " chunks evicted before this sink took them (never sent, or "
            "set aside)",
            r->st.lost_chunks);
    if (rs)
        fprintf(o, " (ring: %" PRIu64 " lost-unshipped)", rs->lost_unshipped);
    fprintf(o, "\n");
    if (r->st.corrupt_chunks)
        fprintf(o, "  corrupt       %" PRIu64 " chunks skipped\n", r->st.corrupt_chunks);
    if (r->st.skipped_chunks || (r->conf && r->conf->ship == PFR_SHIP_AGENT))
        fprintf(o,
                "  passed over   %" PRIu64 " chunks the node agent would not send (ship = agent)\n",
                r->st.skipped_chunks);
}

static json_t *row_json(const struct sinkrow *r, const pfr_store_stats *rs)
{
    json_t *j = json_object();
    if (!j)
        return NULL;
    char url[256] = "";
    if (r->conf)
        pfr_url_redact(r->conf->url, url, sizeof(url));
    json_object_set_new(j, "name", json_string(r->st.name));
    json_object_set_new(j, "kind", json_string(r->conf ? r->conf->kind->name : r->st.kind));
    json_object_set_new(j, "url", r->conf ? json_string(url) : json_null());
    const char *label, *value;
    if (detail(r, &label, &value))
        json_object_set_new(j, label, json_string(value));
    if (r->conf && r->conf->service_prefix)
        json_object_set_new(j, "service_prefix", json_string(r->conf->service_prefix));
    json_object_set_new(j, "cursor", json_integer(r->st.cursor));
    if (r->bl_known) {
        json_object_set_new(j, "backlog_chunks", json_integer((json_int_t)r->bl.chunks));
        json_object_set_new(j, "backlog_bytes", json_integer((json_int_t)r->bl.bytes));
        json_object_set_new(j, "backlog_oldest_ns", json_integer(r->bl.oldest_start));
    }
    json_object_set_new(j, "last_success_ns", json_integer(r->st.last_success_ns));
    json_object_set_new(j, "last_error_ns", json_integer(r->st.last_error_ns));
    json_object_set_new(j, "last_error", json_string(r->st.last_error));
    json_object_set_new(j, "attempts", json_integer(r->st.attempts));
    json_object_set_new(j, "next_attempt_ns", json_integer(r->st.next_attempt_ns));
    json_object_set_new(j, "delivered_chunks", json_integer((json_int_t)r->st.delivered_chunks));
    json_object_set_new(j, "delivered_bytes", json_integer((json_int_t)r->st.delivered_bytes));
    json_object_set_new(j, "retries", json_integer((json_int_t)r->st.retries));
    json_object_set_new(j, "sink_failures", json_integer((json_int_t)r->st.sink_failures));
    json_object_set_new(j, "set_aside_chunks", json_integer((json_int_t)r->rejected));
    json_object_set_new(j, "rejected_total", json_integer((json_int_t)r->st.rejected_chunks));
    json_object_set_new(j, "lost_chunks", json_integer((json_int_t)r->st.lost_chunks));
    json_object_set_new(j, "corrupt_chunks", json_integer((json_int_t)r->st.corrupt_chunks));
    json_object_set_new(j, "skipped_chunks", json_integer((json_int_t)r->st.skipped_chunks));
    if (r->conf)
        json_object_set_new(j, "ship",
                            json_string(r->conf->ship == PFR_SHIP_AGENT ? "agent" : "all"));
    if (rs)
        json_object_set_new(j, "ring_lost_unshipped", json_integer((json_int_t)rs->lost_unshipped));
    return j;
}

int pfr_status_print(const pfr_shipper_conf *c, FILE *out, char *err, size_t errlen)
{
    struct collect col = {0};
    int rc = 0;
    for (size_t i = 0; i < c->nsinks; i++) {
        struct sinkrow *r = realloc(col.rows, (col.n + 1) * sizeof(*r));
        if (!r) {
            free(col.rows);
            return -ENOMEM;
        }
        col.rows = r;
        memset(&r[col.n], 0, sizeof(r[col.n]));
        snprintf(r[col.n].st.name, sizeof(r[col.n].st.name), "%s", c->sinks[i].name);
        r[col.n].conf = &c->sinks[i];
        col.n++;
    }
    pfr_state *st = NULL;
    if (access(c->state_path, F_OK) == 0) {
        if ((rc = pfr_state_open(c->state_path, true, &st, err, errlen)))
            goto out;
        if ((rc = pfr_state_sinks(st, collect_cb, &col)))
            goto out;
        for (size_t i = 0; i < col.n; i++) {
            int64_t at;
            if ((rc = pfr_state_rejected_count(st, col.rows[i].st.name, &col.rows[i].rejected)) ||
                (rc = pfr_state_rejected_last(st, col.rows[i].st.name, col.rows[i].rejected_why,
                                              sizeof(col.rows[i].rejected_why), &at)))
                goto out;
        }
    }
    pfr_store *s = NULL;
    pfr_store_stats rs, *rsp = NULL;
    pfr_store_opts so = {.read_only = true};
    char serr[256];
    if (pfr_store_open(c->store_path, &so, &s, serr, sizeof(serr)) == 0) {
        if (pfr_store_stats_get(s, &rs) == 0)
            rsp = &rs;
        for (size_t i = 0; i < col.n; i++) {
            pfr_store_filter f = {.after_id = col.rows[i].st.cursor};
            col.rows[i].bl_known =
                pfr_store_scan(s, &f, PFR_SCAN_META_ONLY, backlog_cb, &col.rows[i].bl, NULL) >= 0;
        }
        pfr_store_close(s);
    }
    int64_t now = pfr_clock_real_ns();
    if (c->json) {
        json_t *root = json_object(), *arr = json_array();
        json_object_set_new(root, "store", json_string(c->store_path));
        json_object_set_new(root, "state", json_string(c->state_path));
        if (rsp) {
            json_object_set_new(root, "ring_chunks", json_integer((json_int_t)rs.chunks));
            json_object_set_new(root, "ring_lost_unshipped",
                                json_integer((json_int_t)rs.lost_unshipped));
        }
        for (size_t i = 0; i < col.n; i++)
            json_array_append_new(arr, row_json(&col.rows[i], rsp));
        json_object_set_new(root, "sinks", arr);
        json_dumpf(root, out, JSON_INDENT(2));
        fputc('\n', out);
        json_decref(root);
    } else {
        if (rsp) {
            char b[32];
            fprintf(out, "ring %s: %" PRIu64 " chunks, %s, %" PRIu64 " lost-unshipped\n",
                    c->store_path, rs.chunks, pfr_fmt_bytes(rs.file_bytes, b, sizeof(b)),
                    rs.lost_unshipped);
        } else {
            fprintf(out, "ring %s: not readable (%s)\n", c->store_path, serr);
        }
        if (!col.n)
            fprintf(out, "no sinks (none configured, none in %s)\n", c->state_path);
        for (size_t i = 0; i < col.n; i++)
            print_text(out, &col.rows[i], rsp, now);
    }
out:
    pfr_state_close(st);
    free(col.rows);
    return rc;
}
